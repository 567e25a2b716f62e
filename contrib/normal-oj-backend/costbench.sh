#!/usr/bin/env bash
# costbench.sh BACKEND_DIR OUT.json [STUDENTS PROBLEMS EARLIER LANDINGS SEED]:
# what the Back-End's own finish_judging (unpatched, Back-End mode) costs
# MongoDB per landing, counted over mongomock (costbench.py), written as
# JSON for `onlinebench --backend OUT.json` (make bench-online
# NOJ_BACKEND_DIR=...). Like check.sh it never modifies BACKEND_DIR (it runs
# a copy) and needs no PyPI: pydeps.sh takes the modules from Debian 13
# packages under NOJ_CHECK_CACHE. About a minute for the default workload
# (80 students, 5 problems, 100 earlier submissions each, 200 landings).
set -euo pipefail
if [ $# -lt 2 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BACKEND_DIR OUT.json [STUDENTS PROBLEMS EARLIER LANDINGS SEED]   (a Normal-OJ/Back-End checkout at dfbd76a)" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
backend=$(cd "$1" && pwd)
out=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
shift 2
PYTHON=${PYTHON:-python3}
cache=${NOJ_CHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/noj-materializer-check}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$backend" && tar --exclude=.git -cf - .) | tar -C "$work" -xf -
site=$("$here/pydeps.sh" "$cache" "$PYTHON")
# MinIO, MOSS and testcontainers are never used here: the stand-ins suffice.
cd "$work"
env -u DERIVED_DATA_OWNER PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$here/shims:$here:$site${PYTHONPATH:+:$PYTHONPATH}" \
  "$PYTHON" -W ignore "$here/costbench.py" "$out" "$@" >/dev/null
echo "Back-End figures: $out" >&2
