# make test: format check, vet, and every test with the race detector.
GO ?= go

.PHONY: test fmt-check vet unit bench

test: fmt-check vet unit

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
