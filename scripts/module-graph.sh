#!/usr/bin/env bash
# What a program outside the workspace gets from the published modules.
# scripts/modproxy writes the workspace's modules as a module proxy on disk,
# at the release version; fresh consumer modules, with no replace lines,
# fetch them from it (and everything else from proxy.golang.org), as they
# will from the public proxy once the version is tagged:
#   - a program per backend (etcd, zk, inmem) that builds an elector and
#     campaigns: go get, go mod tidy, go vet and go build (the inmem one
#     also runs);
#   - the module graph (go list -m all) of each, beside that of a program
#     importing etcd's own client/v3/concurrency: fails when backend/etcd's
#     is more than 5 modules larger than concurrency's, when backend/zk's
#     or backend/inmem's carries an etcd module, gRPC, or a module that only
#     the tests use (goleak, testify, go-difflib, datadriven), or when
#     backend/etcd's or backend/inmem's carries go-zookeeper;
#   - a program that imports backend/postgres: no etcd, gRPC, ZooKeeper or
#     Kubernetes module in its graph, nothing of the tests compiled in;
#   - go install github.com/electkit/election/cmd/elect@VERSION, and the
#     binary reports that version.
# Usage: scripts/module-graph.sh [VERSION] (default v0.1.0).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:-v0.1.0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS

# The proxy, built in workspace mode from the clone.
GOWORK=$root/go.work go -C "$root" run ./scripts/modproxy -version "$version" -out "$tmp/proxy" >"$tmp/proxy.log"

# The go command caches what it downloads from the file proxy under the
# module cache, at the version, like any other module, and would reuse a
# zip from an earlier run, made from an older state of the clone. So the
# cached copies of github.com/electkit modules are deleted first (the
# shared cache keeps everything else, such as etcd's client, so the run
# stays fast). Extracted modules are read-only unless -modcacherw made
# them, hence the chmod. Two runs at once would delete each other's
# downloads: run one at a time. The go command also keeps, in its build
# cache, an index of each module in the module cache (the imports of every
# package), keyed by the module's directory there, which it takes to be
# immutable: GODEBUG=goindex=0 below turns that index off, else a package
# would be compiled with the import list of an earlier run.
modcache=$(go env GOMODCACHE)
for d in "$modcache/cache/download/github.com/electkit" "$modcache/github.com/electkit"; do
	if [ -e "$d" ]; then
		chmod -R u+w "$d"
		rm -rf "$d"
	fi
done

# Outside the workspace; the electkit modules from the file proxy, their
# checksums from nowhere (the checksum database has not seen them), every
# other module from proxy.golang.org, checked against the database.
export GOWORK=off GOFLAGS="-mod=mod -modcacherw" GOPROXY="file://$tmp/proxy,https://proxy.golang.org" GONOSUMDB=github.com/electkit
export GODEBUG=${GODEBUG:+$GODEBUG,}goindex=0
unset GOPRIVATE GONOPROXY

# step DIR WHAT CMD...: runs CMD in DIR; when it fails, prints WHAT, the
# command and its output, and exits 1.
step() {
	local dir=$1 what=$2
	shift 2
	if ! (cd "$dir" && "$@") >"$tmp/step.log" 2>&1; then
		echo "FAIL: $what: $*" >&2
		cat "$tmp/step.log" >&2
		exit 1
	fi
}

# consumer NAME MAIN GET...: module example.com/NAME, its main.go MAIN, its
# requirements added with go get GET...; leaves its go list -m all in
# $tmp/NAME/modules and the modules of its compiled packages in
# $tmp/NAME/built.
consumer() {
	local name=$1 main=$2 d=$tmp/$1
	shift 2
	mkdir -p "$d"
	printf '%s\n' "$main" >"$d/main.go"
	step "$d" "consumer $name" go mod init "example.com/$name"
	step "$d" "consumer $name" go get "$@"
	step "$d" "consumer $name" go mod tidy
	step "$d" "consumer $name" go vet .
	step "$d" "consumer $name" go build -o "$d/prog" .
	(cd "$d" && go list -m all) >"$d/modules"
	(cd "$d" && go list -deps -f '{{with .Module}}{{.Path}}{{end}}' . | sort -u | grep -v "^example.com/") >"$d/built"
}

consumer etcd "$(
	cat <<'EOF'
package main

import (
	"context"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
)

func main() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	e, err := etcd.New(cli, "/consumer", election.WithID("c1"), election.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	t, err := e.Campaign(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	log.Print("leader: ", t.Leader().ID)
}
EOF
)" "github.com/electkit/election@$version" "github.com/electkit/election/backend/etcd@$version"

consumer zk "$(
	cat <<'EOF'
package main

import (
	"context"
	"log"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
)

func main() {
	ctx := context.Background()
	e, err := zk.Dial(ctx, zk.DialConfig{Servers: []string{"127.0.0.1:2181"}}, "/consumer",
		election.WithID("c1"), election.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	t, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	log.Print("leader: ", t.Leader().ID)
}
EOF
)" "github.com/electkit/election@$version" "github.com/electkit/election/backend/zk@$version"

consumer inmem "$(
	cat <<'EOF'
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
)

func main() {
	c, err := inmem.NewCluster(inmem.Bully)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	e, err := c.Join(election.WithID("c1"))
	if err != nil {
		log.Fatal(err)
	}
	t, err := e.Campaign(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", t.Leader().ID)
}
EOF
)" "github.com/electkit/election@$version"
inmemOut=$(timeout 30 "$tmp/inmem/prog" 2>&1) || {
	echo "FAIL: the inmem consumer's program failed: $inmemOut" >&2
	exit 1
}
[ "$inmemOut" = "leader: c1" ] || {
	echo "FAIL: the inmem consumer's program printed $inmemOut, want leader: c1" >&2
	exit 1
}

# backend/postgres: a program carries pgx's graph, nothing of etcd,
# ZooKeeper or Kubernetes, and no module only the tests use.
consumer postgres "$(
	cat <<'EOF'
package main

import (
	"context"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	e, err := postgres.New(pool, "/consumer", election.WithID("c1"), election.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	t, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	log.Print("leader: ", t.Leader().ID)
}
EOF
)" "github.com/electkit/election@$version" "github.com/electkit/election/backend/postgres@$version"

# The same client version as backend/etcd's consumer resolved.
etcdv=$(cd "$tmp/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/client/v3)
consumer concurrency "$(printf 'package main\n\nimport _ "go.etcd.io/etcd/client/v3/concurrency"\n\nfunc main() {}')" "go.etcd.io/etcd/client/v3@$etcdv"
# The Kubernetes backend, beside a program that imports client-go's own
# leaderelection (the same client-go version).
consumer kube "$(
	cat <<'EOF'
package main

import (
	"context"
	"log"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/kube"
)

func main() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		log.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	e, err := kube.New(cs.CoordinationV1(), "default", "consumer", election.WithID("c1"), election.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	t, err := e.Campaign(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	log.Print("leader: ", t.Leader().ID)
}
EOF
)" "github.com/electkit/election@$version" "github.com/electkit/election/backend/kube@$version"
kubev=$(cd "$tmp/kube" && go list -m -f '{{.Version}}' k8s.io/client-go)
consumer clientgo "$(printf 'package main\n\nimport (\n\t_ "k8s.io/client-go/kubernetes"\n\t_ "k8s.io/client-go/tools/clientcmd"\n\t_ "k8s.io/client-go/tools/leaderelection"\n)\n\nfunc main() {}')" "k8s.io/client-go@$kubev"
graphs=$((SECONDS - start))

# The command, as a user installs it.
mkdir "$tmp/bin"
step "$tmp" "go install" env GOBIN="$tmp/bin" GOFLAGS=-modcacherw go install "github.com/electkit/election/cmd/elect@$version"
elect=$("$tmp/bin/elect" --version 2>&1) || {
	echo "FAIL: elect --version: $elect" >&2
	exit 1
}
[ "$elect" = "elect $version" ] || {
	echo "FAIL: elect --version printed $elect, want elect $version" >&2
	exit 1
}
# Read whole before it is searched: grep -q stops at the first match, and
# the rest of the usage written to a closed pipe kills elect with SIGPIPE,
# which pipefail would take for a failure.
help=$("$tmp/bin/elect" --help 2>&1) || true
grep -q '^Usage:' <<<"$help" || {
	echo "FAIL: elect --help printed no usage: $help" >&2
	exit 1
}

count() { wc -l <"$tmp/$1/modules"; }
concurrency=$(count concurrency) etcd=$(count etcd) zk=$(count zk) inmem=$(count inmem)
clientgo=$(count clientgo) kube=$(count kube)
echo "proxy of the workspace's modules at $version:"
sed 's/^/  /' "$tmp/proxy.log"
echo "modules in the graph (go list -m all) of a program that imports:"
printf '  %-48s %4d\n' go.etcd.io/etcd/client/v3/concurrency "$concurrency"
printf '  %-48s %4d  (%+d; at most +5)\n' github.com/electkit/election/backend/etcd "$etcd" $((etcd - concurrency))
printf '  %-48s %4d\n' github.com/electkit/election/backend/zk "$zk"
printf '  %-48s %4d\n' github.com/electkit/election/backend/inmem "$inmem"
printf '  %-48s %4d\n' k8s.io/client-go/tools/leaderelection "$clientgo"
printf '  %-48s %4d  (%+d; at most +5)\n' github.com/electkit/election/backend/kube "$kube" $((kube - clientgo))
echo "  backend/kube's beyond leaderelection's: $(comm -13 <(cut -d' ' -f1 "$tmp/clientgo/modules" | tail -n +2 | sort) <(cut -d' ' -f1 "$tmp/kube/modules" | tail -n +2 | sort) | tr '\n' ' ')"
echo "  backend/etcd's beyond concurrency's: $(comm -13 <(cut -d' ' -f1 "$tmp/concurrency/modules" | tail -n +2 | sort) <(cut -d' ' -f1 "$tmp/etcd/modules" | tail -n +2 | sort) | tr '\n' ' ')"
echo "  backend/zk's: $(cut -d' ' -f1 "$tmp/zk/modules" | tail -n +2 | tr '\n' ' ')"
echo "  backend/inmem's: $(cut -d' ' -f1 "$tmp/inmem/modules" | tail -n +2 | tr '\n' ' ')"
echo "modules whose packages are compiled into the program:"
for b in concurrency etcd zk inmem clientgo kube; do
	printf '  %-12s %3d: %s\n' "$b" "$(wc -l <"$tmp/$b/built")" "$(grep -v '^go\.\|^google\.\|^golang\.org' "$tmp/$b/built" | tr '\n' ' ')"
done
echo "the inmem program printed: $inmemOut"
echo "go install github.com/electkit/election/cmd/elect@$version: $elect"
echo "graphs and builds ${graphs}s, go install $((SECONDS - start - graphs))s"

fail=0
if ((etcd > concurrency + 5)); then
	echo "FAIL: backend/etcd's graph is $((etcd - concurrency)) modules larger than concurrency's (at most 5)"
	fail=1
fi
if ((kube > clientgo + 5)); then
	echo "FAIL: backend/kube's graph is $((kube - clientgo)) modules larger than client-go's leaderelection's (at most 5)"
	fail=1
fi
# backend/kube: nothing of etcd or of Kubernetes' own tree in its graph;
# ZooKeeper's client is in it (the root module requires it for backend/zk)
# but none of its packages is compiled; and of what it adds to client-go's
# graph, nothing only tests use.
while read -r mod ver; do
	case $mod in
	go.etcd.io/* | k8s.io/kubernetes) why="etcd or Kubernetes' own tree" ;;
	*) continue ;;
	esac
	echo "FAIL: backend/kube's graph carries $mod $ver ($why), required by: $(cd "$tmp/kube" && go mod graph | awk -v m="$mod@$ver" '$2 == m {print $1}' | tr '\n' ' ')"
	fail=1
done <"$tmp/kube/modules"
if grep -E '^(go\.etcd\.io/|github\.com/go-zookeeper/|k8s\.io/kubernetes$)' "$tmp/kube/built"; then
	echo "FAIL: the backend/kube program compiles packages of the modules above"
	fail=1
fi
for mod in $(comm -13 <(cut -d' ' -f1 "$tmp/clientgo/modules" | sort) <(cut -d' ' -f1 "$tmp/kube/modules" | sort)); do
	case $mod in
	go.uber.org/goleak | github.com/stretchr/testify | github.com/pmezard/go-difflib | github.com/cockroachdb/datadriven)
		echo "FAIL: backend/kube's graph adds $mod to client-go's, a module only the tests use"
		fail=1
		;;
	esac
done
for b in zk inmem; do
	while read -r mod ver; do
		case $mod in
		go.etcd.io/* | google.golang.org/grpc) why="etcd or gRPC" ;;
		go.uber.org/goleak | github.com/stretchr/testify | github.com/pmezard/go-difflib | github.com/cockroachdb/datadriven) why="a module only the tests use" ;;
		*) continue ;;
		esac
		echo "FAIL: backend/$b's graph carries $mod $ver ($why), required by: $(cd "$tmp/$b" && go mod graph | awk -v m="$mod@$ver" '$2 == m {print $1}' | tr '\n' ' ')"
		fail=1
	done <"$tmp/$b/modules"
done
# go-zookeeper comes with backend/zk, a module of its own: a program that
# imports the library and another backend has none of it in its graph.
for b in etcd inmem postgres; do
	while read -r mod ver; do
		case $mod in
		github.com/go-zookeeper/*) ;;
		*) continue ;;
		esac
		echo "FAIL: backend/$b's graph carries $mod $ver (ZooKeeper), required by: $(cd "$tmp/$b" && go mod graph | awk -v m="$mod@$ver" '$2 == m {print $1}' | tr '\n' ' ')"
		fail=1
	done <"$tmp/$b/modules"
done
# backend/postgres's graph: pgx's and the library's. pgx's own test
# requirements (testify) are in the graph but compiled into nothing: the
# compiled modules are checked for those.
echo "  backend/postgres's ($(wc -l <"$tmp/postgres/modules")): $(cut -d' ' -f1 "$tmp/postgres/modules" | tail -n +2 | tr '\n' ' ')"
echo "  backend/postgres's compiled ($(wc -l <"$tmp/postgres/built")): $(tr '\n' ' ' <"$tmp/postgres/built")"
while read -r mod ver; do
	case $mod in
	go.etcd.io/* | google.golang.org/grpc | k8s.io/* | sigs.k8s.io/*) why="etcd, gRPC or Kubernetes" ;;
	go.uber.org/goleak | github.com/cockroachdb/datadriven) why="a module only the tests use" ;;
	*) continue ;;
	esac
	echo "FAIL: backend/postgres's graph carries $mod $ver ($why), required by: $(cd "$tmp/postgres" && go mod graph | awk -v m="$mod@$ver" '$2 == m {print $1}' | tr '\n' ' ')"
	fail=1
done <"$tmp/postgres/modules"
while read -r mod; do
	case $mod in
	github.com/go-zookeeper/* | github.com/stretchr/testify | github.com/pmezard/go-difflib | go.uber.org/goleak)
		echo "FAIL: backend/postgres's program compiles $mod"
		fail=1
		;;
	esac
done <"$tmp/postgres/built"
grep -q '^github.com/jackc/pgx/v5$' "$tmp/postgres/built" || {
	echo "FAIL: backend/postgres's program does not compile github.com/jackc/pgx/v5"
	fail=1
}
exit $fail
