#!/usr/bin/env bash
# series.sh BACKEND_DIR [REV]: which patch series (patches/<base>/, one per
# Back-End line) fits the Back-End checkout's REV (default HEAD). Prints the
# series' directory, a tab, and why it was chosen. Used by port-check.sh and
# check.sh. Exit 2 when none can be told. NOJ_PATCHES (default: patches/
# beside this script) holds the series.
#
#  1. ancestry: among the series whose base commit (the patches'
#     `base-commit:` line) is an ancestor of REV, the nearest one (fewest
#     commits base..REV): a checkout past dfbd76a takes dfbd76a's series,
#     one between 0a6e25c and dfbd76a the pin's;
#  2. content, when no base is in REV's history (a fork with rewritten
#     history, a squashed import): the series that applies cleanly to REV's
#     tree, or is applied in it already (it reverse-applies);
#  3. else the series all of whose modified files exist at REV.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BACKEND_DIR [REV]" >&2; exit 2; }
repo=$1 rev=${2:-HEAD}
rev=$(git -C "$repo" rev-parse --verify -q "$rev^{commit}") || { echo "$0: $2: no such commit in $repo" >&2; exit 2; }

series_base() { sed -n 's/^base-commit: //p' "$1"/0001-*.patch | head -n1; }
dirs=()
for d in "${NOJ_PATCHES:-$here/patches}"/*/; do [ -n "$(series_base "${d%/}")" ] && dirs+=("${d%/}"); done
[ "${#dirs[@]}" -gt 0 ] || { echo "$0: no patches/*/ with a base-commit line" >&2; exit 2; }

best="" best_n=""
for d in "${dirs[@]}"; do
  b=$(series_base "$d")
  git -C "$repo" merge-base --is-ancestor "$b" "$rev" 2>/dev/null || continue
  n=$(git -C "$repo" rev-list --count "$b..$rev")
  if [ -z "$best_n" ] || [ "$n" -lt "$best_n" ]; then best=$d best_n=$n; fi
done
if [ -n "$best" ]; then
  printf '%s\tancestry: %s commits past %s, the nearest series base in its history\n' \
    "$best" "$best_n" "$(series_base "$best" | cut -c1-7)"
  exit 0
fi

# content: try each series on a scratch index holding REV's tree
idx=$(mktemp)
trap 'rm -f "$idx"' EXIT
applies() { # dir [-R]: every patch applies in order (reversed with -R)
  local d=$1 p; shift
  GIT_INDEX_FILE=$idx git -C "$repo" read-tree "$rev"
  local ps=("$d"/*.patch)
  if [ "${1:-}" = -R ]; then
    for ((i = ${#ps[@]} - 1; i >= 0; i--)); do
      GIT_INDEX_FILE=$idx git -C "$repo" apply --cached -R "${ps[i]}" 2>/dev/null || return 1
    done
  else
    for p in "${ps[@]}"; do GIT_INDEX_FILE=$idx git -C "$repo" apply --cached "$p" 2>/dev/null || return 1; done
  fi
}
for d in "${dirs[@]}"; do
  if applies "$d"; then printf '%s\tcontent: no series base in the history; this series applies cleanly\n' "$d"; exit 0; fi
  if applies "$d" -R; then printf '%s\tcontent: no series base in the history; this series is applied already\n' "$d"; exit 0; fi
done
for d in "${dirs[@]}"; do
  ok=1
  for f in $(sed -n 's|^--- a/||p' "$d"/*.patch | sort -u); do
    git -C "$repo" cat-file -e "$rev:$f" 2>/dev/null || { ok=0; break; }
  done
  if [ "$ok" = 1 ]; then printf '%s\tcontent: no series base in the history; HEAD has every file this series modifies\n' "$d"; exit 0; fi
done
echo "$0: no series fits $repo at $rev (no base in its history, none applies, files missing)" >&2
exit 2
