#!/usr/bin/env bash
# Tidies the go.mod and go.sum of every module of the workspace (or of the
# module directories given). The published go.mod files require each other
# at their release version, which no proxy serves before the release: each
# module is tidied outside the workspace with temporary replace lines to
# the neighbouring directories, dropped again afterwards.
# With -modfile F (e.g. go.v36.mod), F is tidied instead of go.mod and
# keeps its replace lines: such a file serves only tests in a clone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
modfile=go.mod
if [ "${1:-}" = -modfile ]; then modfile=$2; shift 2; fi
mapfile -t all < <(cd "$root" && go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p')
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=("${all[@]}")
export GOWORK=off GOFLAGS=-mod=mod
for d in "${dirs[@]}"; do
	(
		cd "$root/$d"
		self=$(go mod edit -modfile="$modfile" -json | sed -n 's/.*"Path": "\(github.com\/electkit\/[^"]*\)".*/\1/p' | head -1)
		reps=()
		for o in "${all[@]}"; do
			p=$(cd "$root/$o" && go mod edit -json | sed -n 's/.*"Path": "\(github.com\/electkit\/[^"]*\)".*/\1/p' | head -1)
			[ "$p" = "$self" ] && continue
			rel=$(realpath --relative-to="$root/$d" "$root/$o")
			case $rel in .*) ;; *) rel=./$rel ;; esac
			reps+=("$p")
			go mod edit -modfile="$modfile" -replace "$p=$rel"
		done
		# go.mod drops them again; another modfile (a test line's) keeps them.
		[ "$modfile" != go.mod ] || trap 'for p in "${reps[@]}"; do go mod edit -modfile="$modfile" -dropreplace "$p"; done' EXIT
		go mod tidy -modfile="$modfile"
		echo "tidied $d/$modfile"
	)
done
