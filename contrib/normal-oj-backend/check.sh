#!/usr/bin/env bash
# check.sh [--baseline REV] BACKEND_DIR: check the patch series for a
# Normal-OJ Back-End checkout (patches/<base>/, picked by series.sh: dfbd76a's
# for the FastAPI line, 0a6e25c's for the Flask line the superproject pins)
# without touching the checkout.
#
#  1. copies the checkout's HEAD twice into a temporary directory and applies
#     the series to one copy, in order (`git am -3`: a site's Back-End need
#     not be at the series' base; `git apply` for a directory without git,
#     with the first series that applies). A checkout that holds the series
#     already (ported by hand) is the patched copy, and --baseline REV (the
#     commit it was applied on, which picks the series) the other;
#  2. makes the Back-End's Python dependencies importable: what PYTHON lacks
#     comes from Debian 13 packages, downloaded with a private apt
#     configuration into the cache (pydeps.sh; no PyPI, the machine's apt
#     sources are not changed);
#  3. runs the Back-End's pytest suite on both copies. Without a Docker
#     engine (or without the minio / mosspy / testcontainers packages, which
#     Debian does not ship; pytest-minio-mock on the Flask line) stand-ins
#     replace them (shims/: objects put into
#     MinIO are kept in memory; presigned URLs, multipart uploads and MOSS
#     raise), and a test that fails after touching what needs a server is
#     reported as skipped with that reason (check_plugin.py). The patched
#     copy must give every existing test the outcome it has without the
#     patch, and every test the patch adds must pass;
#  4. runs e2e.py: drives the patched Back-End in materializer mode over
#     mongomock with repeated and half-failed landings, exports a mongodump
#     directory, runs `materializer rebuild --dump` (built with `make build`)
#     and compares field by field with a single landing of each judged
#     submission's final result.
#
# Environment: PYTHON (default python3; 3.11 or later, for the FastAPI line
# with pydantic 2, or Debian 13's python3.13, whose pydantic comes from Debian),
# NOJ_CHECK_CACHE (default ~/.cache/noj-materializer-check), E2E_SEED (1).
# Exit status 0 only when every step passed.
set -euo pipefail

baseline_rev=""
if [ "${1:-}" = --baseline ] && [ $# -ge 2 ]; then baseline_rev=$2; shift 2; fi
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 [--baseline REV] BACKEND_DIR   (a Normal-OJ/Back-End checkout)" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
backend=$(cd "$1" && pwd)
PYTHON=${PYTHON:-python3}
cache=${NOJ_CHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/noj-materializer-check}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log() { printf '\n==> %s\n' "$*"; }

# --- 1. copies and the patch series -----------------------------------------------
mkdir -p "$work/base" "$work/patched"
if git -C "$backend" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  # committed files only: what a build of the checkout would take
  at=$(git -C "$backend" log -1 --format='%h %s' HEAD)
  [ -z "$(git -C "$backend" status --porcelain --untracked-files=no)" ] ||
    echo "note: uncommitted changes in $backend are not checked (HEAD is)" >&2
  if git -C "$backend" grep -q DERIVED_DATA_OWNER HEAD -- config.py mongo/config.py; then
    [ -n "$baseline_rev" ] || { echo "$backend ($at) holds the series already:" \
      "name the commit it was applied on: $0 --baseline REV $backend" >&2; exit 2; }
    picked=$("$here/series.sh" "$backend" "$baseline_rev") || exit 2
    series=("${picked%%$'\t'*}"/*.patch)
    log "$backend at $at holds the series; baseline: $baseline_rev (series ${picked%%$'\t'*})"
    git -C "$backend" archive "$baseline_rev" | tar -C "$work/base" -xf -
    git -C "$backend" archive HEAD | tar -C "$work/patched" -xf -
  else
    picked=$("$here/series.sh" "$backend") || exit 2
    series=("${picked%%$'\t'*}"/*.patch)
    sdir=${picked%%$'\t'*}
    log "$backend at $at; git am -3 ${sdir#"$here"/}/*.patch (${#series[@]}) on a copy (${picked#*$'\t'})"
    git -C "$backend" archive HEAD | tar -C "$work/base" -xf -
    git clone -q --shared --no-checkout "$backend" "$work/clone"
    git -C "$work/clone" -c advice.detachedHead=false checkout -q --detach "$(git -C "$backend" rev-parse HEAD)"
    git -C "$work/clone" -c user.name=check -c user.email=check@localhost am -q -3 "${series[@]}" >"$work/am.log" 2>&1 || {
      grep -E '^(error|CONFLICT|Patch failed)' "$work/am.log" >&2
      echo "the series does not apply to $backend, even with a 3-way merge: port it on a branch" \
           "(port-check.sh $backend says where to look), then: $0 --baseline REV $backend" >&2; exit 1; }
    git -C "$work/clone" archive HEAD | tar -C "$work/patched" -xf -
    echo "patch series applies"
  fi
else
  (cd "$backend" && tar -cf - .) | tar -C "$work/base" -xf -
  series=()
  for d in "$here"/patches/*/; do  # the first series that applies, in order
    rm -rf "$work/patched" && mkdir "$work/patched"
    (cd "$work/base" && tar -cf - .) | tar -C "$work/patched" -xf -
    ok=1
    for p in "$d"*.patch; do (cd "$work/patched" && git apply "$p" 2>/dev/null) || { ok=0; break; }; done
    [ "$ok" = 1 ] && { series=("$d"*.patch); break; }
  done
  [ "${#series[@]}" -gt 0 ] || { echo "no series in $here/patches applies to $backend" >&2; exit 1; }
  log "copying $backend (no git); git apply ${series[0]%/*}/*.patch (${#series[@]}), in order"
  echo "patch series applies"
fi

# --- 2. Python dependencies ---------------------------------------------------
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' ||
  { echo "PYTHON=$PYTHON: the Back-End needs Python 3.11 or later" >&2; exit 2; }
site=$("$here/pydeps.sh" "$cache" "$PYTHON")
plugins=()
if [ -f "$work/base/config.py" ]; then  # the FastAPI line: pydantic settings, MinIO in Docker
  framework=fastapi
  "$PYTHON" -c 'import pydantic, pydantic_core, pydantic_settings; assert pydantic.VERSION >= "2"' 2>/dev/null ||
    PYTHONPATH="$site" "$PYTHON" -c 'import pydantic, pydantic_core, pydantic_settings' ||
    { echo "PYTHON=$PYTHON has no pydantic 2 (pydantic_core is compiled: Debian 13's works only with its python3.13; set PYTHON)" >&2; exit 2; }
  docker info >/dev/null 2>&1 && "$PYTHON" -c 'import testcontainers.minio, minio, mosspy' 2>/dev/null && full=1 || full=0
else  # the Flask line: MinIO mocked by pytest-minio-mock, no Docker
  framework=flask
  "$PYTHON" -c 'import minio, mosspy, pytest_minio_mock' 2>/dev/null && full=1 || full=0
  [ "$full" = 1 ] || plugins=(-p pytest_minio_mock)
fi
shims=""
if [ "$full" = 1 ]; then
  echo "the MinIO test service and mosspy are available: the full suite runs"
else
  shims="$here/shims:"
  echo "no Docker engine or no minio/mosspy/testcontainers/pytest-minio-mock package: their stand-ins are used" \
       "(MinIO objects in memory); tests that need a MinIO or MOSS server are reported as skipped"
fi
export PYTHONPATH="$shims$here:$site${PYTHONPATH:+:$PYTHONPATH}"
"$PYTHON" -c 'import sys, importlib.metadata as m, mongoengine, mongomock, pymongo; print("python", sys.version.split()[0], "| mongoengine", mongoengine.__version__, "| mongomock", mongomock.__version__, "| pymongo", pymongo.__version__, "|", sys.argv[1], m.version(sys.argv[1]))' "$framework"

# --- 3. the Back-End's tests, without and with the patch ---------------------
run_suite() { # dir junit
  (cd "$1" && env -u DERIVED_DATA_OWNER "$PYTHON" -m pytest "${plugins[@]}" -p check_plugin -p no:cacheprovider \
     -q -rfEs -W ignore --junitxml="$2" tests/ 2>&1 | tail -n 400) || true
}
log "Back-End tests without the series (baseline)"
run_suite "$work/base" "$work/base.xml" | grep -E '^[0-9]+ (passed|failed)|passed|failed' | tail -n1
log "Back-End tests with the series (DERIVED_DATA_OWNER unset: Back-End mode)"
run_suite "$work/patched" "$work/patched.xml" | tail -n1

log "comparing outcomes"
"$PYTHON" - "$work/base.xml" "$work/patched.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET
from collections import Counter

NEW = 'tests.test_derived_data_owner'


def outcomes(path):
    out = {}
    for case in ET.parse(path).iter('testcase'):
        key = f"{case.get('classname')}::{case.get('name')}"
        kind = 'passed'
        reason = ''
        for child in case:
            if child.tag in ('failure', 'error'):
                kind = 'failed'
            elif child.tag == 'skipped':
                kind, reason = 'skipped', child.get('message', '')
        out[key] = (kind, reason)
    return out


base, patched = outcomes(sys.argv[1]), outcomes(sys.argv[2])
old = {k: v for k, v in patched.items() if not k.startswith(NEW)}
new = {k: v for k, v in patched.items() if k.startswith(NEW)}
changed = sorted(k for k in base if base[k][0] != old.get(k, ('missing', ))[0])
minio = sum(1 for k, r in old.values() if k == 'skipped' and 'needs' in r)
counts = Counter(k for k, _ in old.values())
print(f"existing tests with the patch: {counts['passed']} passed, "
      f"{counts['skipped']} skipped or xfailed ({minio} need MinIO/MOSS, "
      f"{counts['skipped'] - minio} skipped by the suite itself), "
      f"{counts['failed']} failed")
def module(key):
    parts = key.split('::')[0].split('.')
    return '.'.join(p for p in parts if not p.startswith('Test'))


per_file = Counter((module(k), r.split(' (')[0]) for k, (o, r) in old.items()
                   if o == 'skipped')
for (f, r), n in sorted(per_file.items()):
    print(f"  skipped {n:3d} in {f}: {r or 'xfail'}")
both = sorted(k for k, v in old.items() if v[0] == 'failed' and base.get(k, ('', ))[0] == 'failed')
for k in both:
    print(f"  fails without the patch too (same outcome without it here): {k}")
for k in changed:
    print(f"  CHANGED by the patch: {k}: {base[k][0]} -> {old.get(k, ('missing', ))[0]}")
new_counts = Counter(k for k, _ in new.values())
print(f"tests added by the patch: {new_counts['passed']} passed, "
      f"{new_counts['failed']} failed, {new_counts['skipped']} skipped")
for k, (kind, _) in sorted(new.items()):
    print(f"  {kind}: {k.split('.')[-1]}")
ok = not changed and new and new_counts['passed'] == len(new)
print('outcomes: OK' if ok else 'outcomes: FAILED')
sys.exit(0 if ok else 1)
EOF

# --- 4. end to end ----------------------------------------------------------------
log "make build"
make -C "$repo" build >/dev/null
log "end to end: messy landings -> mongodump -> materializer rebuild --dump -> compare with single landings"
mkdir -p "$work/e2e"
(cd "$work/patched" && "$PYTHON" -W ignore "$here/e2e.py" "$repo/bin/materializer" "$work/e2e" "${E2E_SEED:-1}") \
  > "$work/e2e.log" 2>&1 || { cat "$work/e2e.log"; echo "e2e FAILED" >&2; exit 1; }
grep -E '^(\$|users:|entries:|penalty errors:|  [a-z]|e2e)' "$work/e2e.log" | grep -v '^  homework\|^  user\|^    ' || true
log "check.sh: all passed"
