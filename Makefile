# make test: installs the real servers the tests need, then format check
# (gofmt, and import groups: standard library, others, this module), vet,
# staticcheck, the module check (a fresh module outside the clone installs
# each module at v0.1.0 from a module proxy built from the tree; what a
# program that imports one backend pulls in), every test with the race
# detector (the etcd suites against etcd v3.7), the etcd suites again
# against etcd v3.6, and the benchmark harness's check (vet and its tests,
# including a -short smoke of every scenario), and the quickstart (the
# README's program: two copies on an embedded etcd, and the README's block
# checked against it).
# make bench: the whole benchmark set on real servers (about 27 minutes on
# 2 cores, with the burst starts of 10,000 elections × 3 and the 6 minutes
# of the kube scenario); writes
# bench-results/ and prints the report.
# make gobench: the packages' own go test benchmarks.
# make tidy: go.mod and go.sum of every module (see scripts/tidy.sh).
GO ?= go
ZOOKEEPER_JAR ?= /usr/share/java/zookeeper.jar
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test deps deps-postgres postgres fmt-check lint imports vet unit etcd-v36 modules-check bench bench-check metrics-check quickstart-check gobench nemesis tidy kube kube-apiserver

test: deps fmt-check vet lint modules-check unit etcd-v36 bench-check metrics-check quickstart-check postgres kube

# ZooKeeper: the Java server of Debian's zookeeper package. Curator: its
# recipes (LeaderLatch) and their jars, for the bench module's Curator peer,
# which compiles its JVM host with javac. etcd needs nothing: the tests embed
# it. Installs only what is missing; fails if anything is still missing after.
deps:
	@pkgs=""; \
	[ -f $(ZOOKEEPER_JAR) ] || pkgs="$$pkgs zookeeper"; \
	[ -f /usr/share/java/curator-recipes.jar ] || pkgs="$$pkgs libcurator-recipes-java"; \
	command -v javac >/dev/null || pkgs="$$pkgs default-jdk-headless"; \
	if [ -n "$$pkgs" ]; then \
		echo "installing Debian packages:$$pkgs"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$pkgs >/dev/null || \
		{ echo "make: cannot install$$pkgs; the ZooKeeper and Curator tests need them"; exit 1; }; \
	fi
	@command -v java >/dev/null || { echo "make: java is missing; the ZooKeeper tests need it"; exit 1; }
	@command -v javac >/dev/null || { echo "make: javac is missing (apt-get install default-jdk-headless); the Curator peer compiles its JVM host with it"; exit 1; }
	@for j in $(ZOOKEEPER_JAR) /usr/share/java/zookeeper-jute.jar /usr/share/java/curator-recipes.jar \
		/usr/share/java/curator-framework.jar /usr/share/java/curator-client.jar /usr/share/java/guava.jar \
		/usr/share/java/slf4j-api.jar; do \
		[ -f $$j ] || { echo "make: $$j is missing (apt-get install zookeeper libcurator-recipes-java); the ZooKeeper and Curator tests need it"; exit 1; }; \
	done

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The workspace's modules (go.work) that `make test` vets, lints and tests
# from here (a pattern matches the packages of one module only); bench and
# metrics have targets of their own below. In the workspace every module
# builds against the newest etcd any of them asks for: v3.7, which
# backend/etcd/etcdsuite pins (etcd-v36 runs the previous line).
PKGS := ./... ./backend/etcd/... ./backend/etcd/etcdsuite/... ./backend/zk/... ./backend/zk/zksuite/... \
	./backend/inmem/inmemsuite/... ./classic/sim/simtest/... ./electiontest/... ./cmd/... \
	./internal/rig/embedetcd/... ./internal/rig/etcdtest/... ./internal/rig/kubetest/... ./internal/rig/zktest/... ./scripts/modproxy/...

vet:
	$(GO) vet $(PKGS)

# Pinned linters, run through go run: nothing of theirs enters go.mod.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
GCI ?= github.com/daixiang0/gci@v0.14.0
IMPORT_GROUPS := -s standard -s default -s "prefix(github.com/electkit/election)"

lint:
	$(GO) run $(STATICCHECK) $(PKGS)
	cd bench && $(GO) run $(STATICCHECK) ./...
	@out=$$($(GO) run $(GCI) list $(IMPORT_GROUPS) .); \
	if [ -n "$$out" ]; then echo "import groups (make imports fixes them):"; echo "$$out"; exit 1; fi

imports:
	$(GO) run $(GCI) write $(IMPORT_GROUPS) .

# The nemesis's kube run (cmd) starts the kube-apiserver make kube-apiserver
# builds.
unit: kube-apiserver
	KUBE_APISERVER=$(KUBE_APISERVER) $(GO) test -race -count=1 $(PKGS)

# The etcd v3.6 line: backend/etcd's real-server suite, its own tests
# (the request builders are checked against the client's) and the
# nemesis's etcd runs built outside the workspace against etcd v3.6 (go.v36.mod
# beside each module's go.mod; unit ran them against v3.7); then each
# line's client against the other line's server (scripts/etcd-cross.sh).
etcd-v36:
	cd backend/etcd/etcdsuite && GOWORK=off GOFLAGS=-modfile=$(CURDIR)/backend/etcd/etcdsuite/go.v36.mod \
		$(GO) test -race -count=1 ./... github.com/electkit/election/backend/etcd
	cd cmd && GOWORK=off GOFLAGS=-modfile=$(CURDIR)/cmd/go.v36.mod \
		$(GO) test -race -count=1 -run '^(TestNemesisEtcd|TestOperator)$$' ./internal/nemesis/harness
	bash scripts/etcd-cross.sh

# go.mod and go.sum of every module, and the v3.6 lines' go.v36.mod files.
tidy:
	bash scripts/tidy.sh
	bash scripts/tidy.sh -modfile go.v36.mod backend/etcd/etcdsuite cmd

# The module graph of a program that imports one backend, beside one that
# imports etcd's client/v3/concurrency (see scripts/module-graph.sh).
modules-check:
	bash scripts/module-graph.sh

# The bench module (its own go.mod: the peers' dependencies stay out of the
# library's graph). Its go commands download what it needs on a fresh clone.
# Its kube scenario runs the kube-apiserver make kube-apiserver builds.
bench-check: deps kube-apiserver
	cd bench && $(GO) vet ./... && KUBE_APISERVER=$(KUBE_APISERVER) $(GO) test -race -short -count=1 ./...

# The metrics module (its own go.mod: client_golang stays out of the
# library's graph): vet, staticcheck and its tests with the race detector.
metrics-check:
	cd metrics && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) test -race -count=1 ./...

# The README's quickstart (examples/quickstart, a module of its own: a
# program's go.mod as a user writes it): vet, staticcheck, and its tests
# with the race detector: two copies on an embedded etcd, one leads, each
# steps down to the other, both exit on SIGTERM; and the README's Go block
# is main.go byte for byte.
quickstart-check:
	cd examples/quickstart && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) test -race -count=1 ./...

# The Kubernetes backend (backend/kube, a module of the workspace): vet,
# staticcheck and its tests with the race detector; then its real-server
# suite (backend/kube/kubesuite, a module outside the workspace, run with
# GOWORK=off) with the race detector, against a kube-apiserver built from
# k8s.io/kubernetes by the module in kubesuite/kubeapiserver (outside the
# workspace too: kube's tree asks for its own versions of much of the
# ecosystem). The API server is built without -race, and the Go build
# cache keeps it: about 10 minutes on a fresh machine with 2 cores, 15 s
# after. Nothing to install: the tests embed etcd.
KUBE_APISERVER ?= $(shell $(GO) env GOCACHE)/electkit-kube/kube-apiserver

kube-apiserver:
	cd backend/kube/kubesuite/kubeapiserver && GOWORK=off $(GO) build -o $(KUBE_APISERVER) k8s.io/kubernetes/cmd/kube-apiserver

kube: kube-apiserver
	cd backend/kube && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) test -race -count=1 ./...
	cd backend/kube/kubesuite && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) run $(STATICCHECK) ./... && \
		GOWORK=off KUBE_APISERVER=$(KUBE_APISERVER) $(GO) test -race -count=1 -timeout 20m ./...

bench: deps kube-apiserver
	cd bench && KUBE_APISERVER=$(KUBE_APISERVER) $(GO) run ./cmd/bench -out ../bench-results

gobench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# make nemesis: a long seeded fault mix per backend (see docs/nemesis.md).
# Each run prints its summary; a failing one exits 1 and leaves its history
# in $(NEMESIS_OUT)/<backend>.
NEMESIS_DURATION ?= 30m
NEMESIS_BACKENDS ?= etcd,zk,postgres,kube,inmem
NEMESIS_SEED ?= 42
NEMESIS_OUT ?= nemesis-out

nemesis: deps kube-apiserver
	@fail=0; for b in $$(echo $(NEMESIS_BACKENDS) | tr , ' '); do \
		echo "== nemesis: $$b, seed $(NEMESIS_SEED), $(NEMESIS_DURATION)"; \
		KUBE_APISERVER=$(KUBE_APISERVER) $(GO) run ./cmd/elect nemesis --backend $$b --seed $(NEMESIS_SEED) \
			--duration $(NEMESIS_DURATION) --out $(NEMESIS_OUT)/$$b || fail=1; \
	done; exit $$fail

# PostgreSQL: Debian's postgresql-15 server (and psql) for backend/postgres's
# real-server tests, which start clusters of their own (internal/rig/pgtest).
deps: deps-postgres
deps-postgres:
	@if [ ! -x /usr/lib/postgresql/15/bin/postgres ] || ! command -v psql >/dev/null; then \
		echo "installing Debian packages: postgresql-15 postgresql-client-15"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends postgresql-15 postgresql-client-15 >/dev/null || \
		{ echo "make: cannot install postgresql-15; the PostgreSQL tests need it"; exit 1; }; \
	fi
	@[ -x /usr/lib/postgresql/15/bin/initdb ] || { echo "make: /usr/lib/postgresql/15/bin/initdb is missing (apt-get install postgresql-15)"; exit 1; }

# backend/postgres (a module of its own: pgx stays out of the library's
# graph) and its real-server tests (backend/postgres/pgsuite, a test-only
# module): vet, staticcheck and the tests with the race detector, against
# a PostgreSQL 15 cluster each test starts; CI=true makes a server that
# cannot start a failure, never a skip.
POSTGRES_PKGS := ./backend/postgres/... ./backend/postgres/pgsuite/...
postgres: deps-postgres
	$(GO) vet $(POSTGRES_PKGS)
	$(GO) run $(STATICCHECK) $(POSTGRES_PKGS)
	CI=true $(GO) test -race -count=1 $(POSTGRES_PKGS)
