#!/usr/bin/env bash
# Each etcd release line's client against the other line's server:
# backend/etcd/etcdsuite's test binary is built twice, on v3.7 (the
# workspace) and on v3.6 (go.v36.mod), and each runs the single-member
# tests named by CROSS_RUN against a member served by the other binary in a
# child process (see etcdsuite/server_test.go). The member's version is
# checked, so a run that got the wrong server fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
run=${CROSS_RUN:-Conformance|Operator|Session}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root/backend/etcd/etcdsuite"
go test -race -c -o "$tmp/v37.test" .
GOWORK=off GOFLAGS="-modfile=$PWD/go.v36.mod" go test -race -c -o "$tmp/v36.test" .
fail=0
for pair in "v37 v36 3.6." "v36 v37 3.7."; do
	set -- $pair
	echo "== etcd client $1, server $2 (-run '$run')"
	if ! ELECTION_ETCDSUITE_SERVER_BIN="$tmp/$2.test" ELECTION_ETCDSUITE_SERVER_LINE="$3" \
		"$tmp/$1.test" -test.run "$run" -test.count=1 -test.timeout=10m; then
		fail=1
	fi
done
exit $fail
