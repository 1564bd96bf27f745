# make test: installs the real servers the tests need, then format check,
# vet, every test with the race detector, and the benchmark harness's check
# (vet and its tests, including a -short smoke of every scenario).
# make bench: the whole benchmark set on real servers (under 10 minutes on
# 2 cores); writes bench-results/ and prints the report.
# make gobench: the packages' own go test benchmarks.
GO ?= go
ZOOKEEPER_JAR ?= /usr/share/java/zookeeper.jar
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test deps fmt-check vet unit bench bench-check gobench

test: deps fmt-check vet unit bench-check

# ZooKeeper: the Java server of Debian's zookeeper package (Java is on the
# machine). etcd needs nothing: the tests embed it.
deps:
	@if [ ! -f $(ZOOKEEPER_JAR) ]; then \
		echo "installing Debian's zookeeper package"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends zookeeper >/dev/null || \
		{ echo "make: cannot install the zookeeper package; the ZooKeeper tests need it"; exit 1; }; \
	fi
	@command -v java >/dev/null || { echo "make: java is missing; the ZooKeeper tests need it"; exit 1; }

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

# The bench module (its own go.mod: the peers' dependencies stay out of the
# library's graph). Its go commands download what it needs on a fresh clone.
bench-check: deps
	cd bench && $(GO) vet ./... && $(GO) test -race -short -count=1 ./...

bench: deps
	cd bench && $(GO) run ./cmd/bench -out ../bench-results

gobench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
