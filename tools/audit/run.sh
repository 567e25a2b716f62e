#!/usr/bin/env bash
# Planted-bug audit: applies each patch of tools/audit/patches to a
# temporary worktree of HEAD, runs the tests of the patched package and
# of the packages that test it (in that order, -failfast, stopping at the
# first failure) and prints, per patch, caught (with the failing test) or
# missed, then the total. A patch whose package does not build is
# "unbuilt" and counted apart. Each patch's first line says what it
# plants and why behaviour changes (no equivalent mutants).
#
#   tools/audit/run.sh                 every patch
#   tools/audit/run.sh 09 44-writer    the patches whose names start so
#   AUDIT_JOBS=2 tools/audit/run.sh    two patches at a time
#   AUDIT_REV=main tools/audit/run.sh  against another commit's tests
set -u
root=$(git rev-parse --show-toplevel)
patches=$root/tools/audit/patches
jobs=${AUDIT_JOBS:-1}
rev=${AUDIT_REV:-HEAD}
# Tests that check source text, not behaviour, catch nothing here
# (AUDIT_SKIP= counts them).
skip=${AUDIT_SKIP-^TestLeaderModelInStep$}

# The packages whose tests guard a package (docs/testing.md, "Which suite
# guards which package"), the package itself first.
guards() {
	case $1 in
	watch) echo ./watch ./mongodb ./cmd/materializer ;;
	mongodb) echo ./mongodb ./cmd/materializer ;;
	materialize) echo ./materialize ./watch ./internal/offline ./cmd/materializer ;;
	materialize/penalty) echo ./materialize/penalty ./materialize ./watch ./internal/offline ;;
	resume) echo ./resume ./internal/memstore ./watch ./mongodb ;;
	internal/offline) echo ./internal/offline ./cmd/materializer ;;
	dump) echo ./dump ./internal/offline ./cmd/materializer ;;
	explain) echo ./explain ./cmd/materializer ;;
	internal/cache) echo ./internal/cache ./cmd/materializer ;;
	progress) echo ./progress ./internal/offline ./cmd/materializer ;;
	*) echo "./$1" ;;
	esac
}

# one PATCH WORKTREE: prints "name result package test".
one() {
	local p=$1 wt=$2 name pkg out result=missed by=- at=-
	name=$(basename "$p" .patch)
	pkg=$(sed -n 's|^+++ b/\(.*\)/[^/]*$|\1|p' "$p" | head -1)
	if ! git -C "$wt" apply "$p"; then
		printf '%-42s %-8s %s\n' "$name" error "does not apply"
		return
	fi
	for g in $(guards "$pkg"); do
		out=$(cd "$wt" && GOGC=400 nice go test -count=1 -failfast -timeout 8m -skip "$skip" "$g" 2>&1)
		if [ $? -ne 0 ]; then
			at=$g
			if grep -q '\[build failed\]\|\[setup failed\]' <<<"$out"; then
				result=unbuilt
			else
				result=caught
				by=$(grep -m1 -o -- '--- FAIL: [^ ]*' <<<"$out" | sed 's/--- FAIL: //')
				[ -n "$by" ] || by=$(grep -m1 -o 'panic: test timed out\|panic: .*' <<<"$out" | cut -c1-60)
			fi
			break
		fi
	done
	git -C "$wt" checkout -q -- .
	printf '%-42s %-8s %-20s %s\n' "$name" "$result" "$at" "$by"
}

sel=()
for p in "$patches"/*.patch; do
	n=$(basename "$p")
	if [ $# -eq 0 ]; then sel+=("$p"); continue; fi
	for a in "$@"; do [[ $n == "$a"* ]] && sel+=("$p") && break; done
done

tmp=$(mktemp -d)
trap 'for w in "$tmp"/wt*; do git -C "$root" worktree remove --force "$w" 2>/dev/null; done; rm -rf "$tmp"' EXIT
for ((j = 0; j < jobs; j++)); do
	git -C "$root" worktree add -q --detach "$tmp/wt$j" "$rev"
	(for ((i = j; i < ${#sel[@]}; i += jobs)); do one "${sel[i]}" "$tmp/wt$j"; done) | tee "$tmp/out$j" &
done
wait
sort "$tmp"/out* | tee "$tmp/all"
caught=$(grep -c ' caught ' "$tmp/all")
missed=$(grep -c ' missed ' "$tmp/all")
other=$(grep -vc ' caught \| missed ' "$tmp/all")
echo "caught $caught of $((caught + missed)) ($((100 * caught / (caught + missed))) %); not counted (unbuilt, not applying): $other"
