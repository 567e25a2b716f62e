#!/usr/bin/env bash
# make explore-planted: applies each planted protocol bug (one patch at a
# time) to a copy of the working tree, runs the explorer over its bounds
# (MATERIALIZER_EXPLORE_SHORTEST=1: the shortest counterexample in each)
# and today's random simulations at their default sizes, and prints a
# table. The working tree itself is never changed.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
# The default: TestExplore's own bounds (defaultExploreBounds).
bound=${EXPLORE_BOUND:-}
sims='^(TestSimulation|TestSimulationForeignWritesBeforeReads|TestSimulationRejudgeWholeProblem|TestTwoInstances)$'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-34s | %-22s | %-17s | %s\n' "planted bug" "explorer (choices)" "random sims find" "property violated (explorer)"
for p in $(ls "$root"/watch/testdata/planted/*.patch | sort -V); do
	name=$(basename "$p" .patch)
	rm -rf "$tmp/src"
	mkdir "$tmp/src"
	(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$tmp/src")
	(cd "$tmp/src" && git apply "$p")
	(cd "$tmp/src" && MATERIALIZER_EXPLORE_SHORTEST=1 MATERIALIZER_EXPLORE_BOUND="$bound" MATERIALIZER_EXPLORE_DIFF=0 \
		go test ./watch/ -run '^TestExplore$' -count=1 -v -timeout 30m) >"$tmp/explore.txt" 2>&1 || true
	shortest=$(grep -oE '^ *choices \([0-9]+\)' "$tmp/explore.txt" | grep -oE '[0-9]+' | sort -n | head -1 || true)
	violation=$(grep -m1 -E '^ *violation: ' "$tmp/explore.txt" | sed -E 's/^ *violation: //' | cut -c1-90 || true)
	if [ -n "$shortest" ]; then found="yes ($shortest)"; else found="NO"; fi
	if (cd "$tmp/src" && go test ./watch/ -run "$sims" -count=1 -timeout 30m) >"$tmp/sims.txt" 2>&1; then
		random="no"
	else
		random="yes: $(grep -m1 -oE -- '--- FAIL: [A-Za-z]+' "$tmp/sims.txt" | cut -c11- || true)"
	fi
	printf '%-34s | %-22s | %-17s | %s\n' "$name" "$found" "$random" "$violation"
	if [ -n "${EXPLORE_PLANTED_KEEP:-}" ]; then cp "$tmp/explore.txt" "$EXPLORE_PLANTED_KEEP/$name.explore.txt"; fi
done
