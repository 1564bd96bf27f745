#!/usr/bin/env bash
# The module graph a program pulls in when it imports one backend (go list
# -m all, outside the workspace), beside one that imports etcd's own
# client/v3/concurrency. Fails when backend/etcd's graph is more than 5
# modules larger than concurrency's, or when backend/zk's or
# backend/inmem's carries an etcd module or gRPC.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GOWORK=off GOFLAGS=-mod=mod GOSUMDB=off
zero=v0.0.0-00010101000000-000000000000
etcdv=$(cd "$root/backend/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/client/v3)

# consumer NAME IMPORT [REQUIRE...]: a main package importing IMPORT.
consumer() {
	local name=$1 imp=$2 d=$tmp/$1
	shift 2
	mkdir -p "$d"
	{
		printf 'module example.com/%s\n\ngo 1.26.0\n' "$name"
		for r in "$@"; do printf '\nrequire %s\n' "$r"; done
		printf '\nreplace github.com/electkit/election %s => %s\n' "$zero" "$root"
		printf 'replace github.com/electkit/election/backend/etcd %s => %s/backend/etcd\n' "$zero" "$root"
	} >"$d/go.mod"
	printf 'package main\n\nimport _ "%s"\n\nfunc main() {}\n' "$imp" >"$d/main.go"
	cp "$root/go.sum" "$d/go.sum"
	cat "$root/backend/etcd/go.sum" >>"$d/go.sum"
	(cd "$d" && go mod tidy >/dev/null && go build -o /dev/null . && go list -m all) >"$d/modules"
	(cd "$d" && go list -deps -f '{{with .Module}}{{.Path}}{{end}}' . | sort -u | grep -v "^example.com/") >"$d/built"
	wc -l <"$d/modules"
}

concurrency=$(consumer concurrency go.etcd.io/etcd/client/v3/concurrency "go.etcd.io/etcd/client/v3 $etcdv")
etcd=$(consumer etcd github.com/electkit/election/backend/etcd "github.com/electkit/election $zero" "github.com/electkit/election/backend/etcd $zero")
zk=$(consumer zk github.com/electkit/election/backend/zk "github.com/electkit/election $zero")
inmem=$(consumer inmem github.com/electkit/election/backend/inmem "github.com/electkit/election $zero")

echo "modules in the graph (go list -m all) of a program that imports:"
printf '  %-48s %4d\n' go.etcd.io/etcd/client/v3/concurrency "$concurrency"
printf '  %-48s %4d  (%+d; at most +5)\n' github.com/electkit/election/backend/etcd "$etcd" $((etcd - concurrency))
printf '  %-48s %4d\n' github.com/electkit/election/backend/zk "$zk"
printf '  %-48s %4d\n' github.com/electkit/election/backend/inmem "$inmem"
echo "  backend/etcd's beyond concurrency's: $(comm -13 <(cut -d' ' -f1 "$tmp/concurrency/modules" | tail -n +2 | sort) <(cut -d' ' -f1 "$tmp/etcd/modules" | tail -n +2 | sort) | tr '\n' ' ')"
echo "  backend/inmem's: $(cut -d' ' -f1 "$tmp/inmem/modules" | tail -n +2 | tr '\n' ' ')"
echo "modules whose packages are compiled into the program:"
for b in concurrency etcd zk inmem; do
	printf '  %-12s %3d: %s\n' "$b" "$(wc -l <"$tmp/$b/built")" "$(grep -v '^go\.\|^google\.\|^golang\.org' "$tmp/$b/built" | tr '\n' ' ')"
done
fail=0
if ((etcd > concurrency + 5)); then
	echo "FAIL: backend/etcd's graph is $((etcd - concurrency)) modules larger than concurrency's (at most 5)"
	fail=1
fi
for b in zk inmem; do
	if grep -qE '^(go\.etcd\.io/|google\.golang\.org/grpc )' "$tmp/$b/modules"; then
		echo "FAIL: backend/$b's graph carries etcd or gRPC: $(grep -E '^(go\.etcd\.io/|google\.golang\.org/grpc )' "$tmp/$b/modules" | tr '\n' ' ')"
		fail=1
	fi
done
exit $fail
