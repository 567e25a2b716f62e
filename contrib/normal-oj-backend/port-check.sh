#!/usr/bin/env bash
# port-check.sh [--base REV] [--patches DIR] BACKEND_DIR: whether the patch
# series (patches/*.patch, made against Back-End commit dfbd76a) applies to
# the HEAD of a Back-End checkout, and which functions the series changes
# differ there from dfbd76a, so a porter knows where to look.
#
# Works on a temporary clone: the checkout (its work tree, index and
# branches) is not touched; uncommitted changes are not seen. Needs git and
# python3 (standard library only: port_check.py). Exit status:
#   0  the series applies cleanly (git am)
#   1  it applies only with a 3-way merge (git am -3)
#   3  it does not apply (the patch that fails and the files are named)
#   2  usage error, or not a git checkout
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
base=dfbd76a patches=$here/patches
while [ $# -gt 1 ]; do
  case $1 in
    --base) base=$2; shift 2 ;;
    --patches) patches=$2; shift 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ] || ! git -C "$1" rev-parse --verify -q HEAD >/dev/null; then
  echo "usage: $0 [--base REV] [--patches DIR] BACKEND_DIR   (a git checkout of Normal-OJ/Back-End)" >&2
  exit 2
fi
backend=$(cd "$1" && pwd)
series=("$patches"/*.patch)
[ -f "${series[0]}" ] || { echo "no *.patch in $patches" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g() { git -C "$work/repo" -c user.name=port-check -c user.email=port-check@localhost -c advice.detachedHead=false "$@"; }

head=$(git -C "$backend" rev-parse HEAD)
git clone -q --shared --no-checkout "$backend" "$work/repo"
g checkout -q --detach "$head"
echo "$backend at $(git -C "$backend" log -1 --format='%h %cs %s' HEAD)"
[ -z "$(git -C "$backend" status --porcelain --untracked-files=no)" ] ||
  echo "note: uncommitted changes in $backend are not checked (HEAD is)"
has_base=1
g cat-file -e "$base^{commit}" 2>/dev/null || has_base=0
if [ "$has_base" = 1 ]; then
  echo "$(g rev-list --count "$base..$head") commits since $base, $(g rev-list --count "$head..$base") of $base not in HEAD"
else
  echo "note: $base is not in this repository: 3-way merges and the function comparison need it" \
       "(git -C $backend fetch https://github.com/Normal-OJ/Back-End $base)"
fi

# --- does the series apply? ----------------------------------------------------
status=0
if g am -q "${series[@]}" >"$work/am.log" 2>&1; then
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

# --- the functions the series changes, at dfbd76a and at HEAD -------------------
if [ "$has_base" = 1 ]; then
  g checkout -q --detach "$base"
  g am -q "${series[@]}" || { echo "the series does not apply to $base itself" >&2; exit 2; }
  echo "functions the series changes: at HEAD the same as at $base, or not  [patches]"
  python3 "$here/port_check.py" "$work/repo" "$base" "$head" HEAD | sed 's/^/  /'
fi
exit "$status"
