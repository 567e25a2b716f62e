#!/usr/bin/env bash
# port-check.sh [--base REV] [--patches DIR] BACKEND_DIR: whether the patch
# series for a Back-End checkout applies to its HEAD, which functions the
# series changes differ there from the series' base commit, and which other
# functions write the derived data, so a porter knows where to look.
#
# The series is patches/<base>/ (one per Back-End line: dfbd76a, FastAPI;
# 0a6e25c, Flask, the superproject's pin), picked by series.sh: the nearest
# series base in HEAD's history, else the series that applies to (or is
# applied in) HEAD's tree. --patches DIR names one; --base REV (a commit,
# HEAD, a branch or tag of the checkout) the commit it was made against
# (default: its patches' base-commit line).
#
# Works on a temporary clone: the checkout (its work tree, index and
# branches) is not touched; uncommitted changes are not seen. Needs git and
# python3 (standard library only: port_check.py). Exit status:
#   0  the series applies cleanly (git am)
#   1  it applies only with a 3-way merge (git am -3)
#   3  it does not apply (the patch that fails and the files are named)
#   4  it is applied already (every patch reverse-applies at HEAD); the
#      functions are compared with the series' own
#   5  it applies (cleanly or with -3), but a function outside the series
#      that writes derived data is new or changed since the base: review it
#   2  usage error, or not a git checkout
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
base="" patches=""
while [ $# -gt 1 ]; do
  case $1 in
    --base) base=$2; shift 2 ;;
    --patches) patches=$(cd "$2" && pwd); shift 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ] || ! git -C "$1" rev-parse --verify -q HEAD >/dev/null; then
  echo "usage: $0 [--base REV] [--patches DIR] BACKEND_DIR   (a git checkout of Normal-OJ/Back-End)" >&2
  exit 2
fi
backend=$(cd "$1" && pwd)
if [ -z "$patches" ]; then
  picked=$("$here/series.sh" "$backend") || exit 2
  patches=${picked%%$'\t'*}
  why=${picked#*$'\t'}
fi
series=("$patches"/*.patch)
[ -f "${series[0]}" ] || { echo "no *.patch in $patches" >&2; exit 2; }
if [ -n "$base" ]; then
  # resolved in the checkout: HEAD and its branch names mean nothing in the clone
  base=$(git -C "$backend" rev-parse --verify -q "$base^{commit}") ||
    { echo "--base: no commit $base in $backend" >&2; exit 2; }
else
  base=$(sed -n 's/^base-commit: //p' "${series[0]}" | head -n1)
  [ -n "$base" ] || { echo "${series[0]}: no base-commit line: name the base with --base REV" >&2; exit 2; }
fi
short=$(printf %.7s "$base")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g() { git -C "$work/repo" -c user.name=port-check -c user.email=port-check@localhost -c advice.detachedHead=false "$@"; }

head=$(git -C "$backend" rev-parse HEAD)
git clone -q --shared --no-checkout "$backend" "$work/repo"
g checkout -q --detach "$head"
echo "$backend at $(git -C "$backend" log -1 --format='%h %cs %s' HEAD)"
echo "series: ${patches#"$here"/} (${#series[@]} patches, base $short)${why:+; $why}"
[ -z "$(git -C "$backend" status --porcelain --untracked-files=no)" ] ||
  echo "note: uncommitted changes in $backend are not checked (HEAD is)"
has_base=1
g cat-file -e "$base^{commit}" 2>/dev/null || has_base=0
if [ "$has_base" = 1 ]; then
  echo "$(g rev-list --count "$base..$head") commits since $short, $(g rev-list --count "$head..$base") of $short not in HEAD"
else
  echo "note: $short is not in this repository: 3-way merges and the function comparison need it" \
       "(git -C $backend fetch https://github.com/Normal-OJ/Back-End $base)"
fi

# --- does the series apply? ----------------------------------------------------
status=0
applied=1
for ((i = ${#series[@]} - 1; i >= 0; i--)); do
  g apply --cached -R "${series[i]}" 2>/dev/null || { applied=0; break; }
done
g read-tree HEAD
if [ "$applied" = 1 ]; then
  echo "applies: already applied at HEAD (every patch reverse-applies); check it with check.sh --baseline REV"
  status=4
elif g am -q "${series[@]}" >"$work/am.log" 2>&1; then
  echo "applies: cleanly (${#series[@]} patches, git am)"
else
  g am --abort
  if g am -q -3 "${series[@]}" >"$work/am3.log" 2>&1; then
    echo "applies: only with a 3-way merge (git am -3); review the merged hunks"
    status=1
  else
    failed=$(grep -o 'Patch failed at [0-9]* .*' "$work/am3.log" | head -n1 || true)
    conflicts=$(g diff --name-only --diff-filter=U | paste -sd " " -)
    echo "applies: NO, not even with a 3-way merge: ${failed:-see below}${conflicts:+; conflicts in: $conflicts}"
    grep -E '^(error|CONFLICT)' "$work/am3.log" | sed 's/^/  /' | head -n 20 || true
    g am --abort
    status=3
  fi
fi

# --- the functions the series changes, at the base and at HEAD -----------------
if [ "$has_base" = 1 ]; then
  g checkout -q --detach "$base"
  g am -q "${series[@]}" || { echo "the series does not apply to $short itself" >&2; exit 2; }
  tip=$(g rev-parse HEAD)
  if [ "$status" = 4 ]; then
    echo "functions the series changes: at HEAD the same as the series' own, or not  [patches]"
    against=$tip
  else
    echo "functions the series changes: at HEAD the same as at $short, or not  [patches]"
    against=$base
  fi
  set +e
  python3 "$here/port_check.py" "$work/repo" "$base" "$head" "$tip" "$against" >"$work/report"
  writers=$?
  set -e
  sed 's/^/  /' "$work/report"
  [ "$writers" = 0 ] || [ "$writers" = 5 ] || { echo "port_check.py failed ($writers)" >&2; exit 2; }
  if [ "$writers" = 5 ] && { [ "$status" = 0 ] || [ "$status" = 1 ]; }; then status=5; fi
fi
exit "$status"
