# make test: installs the real servers the tests need, then format check,
# vet, and every test with the race detector.
GO ?= go
ZOOKEEPER_JAR ?= /usr/share/java/zookeeper.jar
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test deps fmt-check vet unit bench

test: deps fmt-check vet unit

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

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
