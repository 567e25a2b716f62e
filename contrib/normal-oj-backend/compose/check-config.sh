#!/usr/bin/env bash
# check-config.sh: validate docker-compose.materializer.yml merged over
# fixtures shaped like Normal-OJ's docker-compose.yml + docker-compose.prod.yml
# (testdata/), with `docker-compose config` (or `docker compose config`); no
# Docker engine needed. Then check what the merge must give: mongo a replica
# set on the site's own image (stock, and a site upgraded to mongo:7.0 by
# editing its docker-compose.yml), the Back-End on the replica set in
# Back-End mode unless NOJ_DERIVED_DATA_OWNER says otherwise, and the
# materializer service after a healthy mongo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if command -v docker-compose >/dev/null 2>&1; then compose=(docker-compose)
elif docker compose version >/dev/null 2>&1; then compose=(docker compose)
else echo "needs docker-compose (apt-get install --no-install-recommends docker-compose) or the docker compose plugin" >&2; exit 2; fi
PYTHON=${PYTHON:-python3}
command -v /usr/bin/python3 >/dev/null && /usr/bin/python3 -c 'import yaml' 2>/dev/null && PYTHON=/usr/bin/python3

check() { # label, the site's directory, then env assignments; the merged config must satisfy the assertions
  local label=$1 site=$2; shift 2
  env -u NOJ_DERIVED_DATA_OWNER -u NOJ_MATERIALIZER_IMAGE "$@" \
    "${compose[@]}" -f "$site/docker-compose.yml" -f "$site/docker-compose.prod.yml" -f docker-compose.materializer.yml \
    config > "$tmp/config.yml"
  env -u NOJ_DERIVED_DATA_OWNER -u NOJ_MATERIALIZER_IMAGE "$@" "$PYTHON" - "$tmp/config.yml" "$site/docker-compose.yml" <<'PY'
import os, sys, yaml
c = yaml.safe_load(open(sys.argv[1]))['services']
want_image = yaml.safe_load(open(sys.argv[2]))['services']['mongo']['image']
def env(svc):
    e = c[svc].get('environment') or {}
    return dict(x.split('=', 1) for x in e) if isinstance(e, list) else e
want_owner = os.environ.get('NOJ_DERIVED_DATA_OWNER', 'backend')
checks = [
    (f"mongo image the site's {want_image} (got {c['mongo'].get('image')})", c['mongo'].get('image') == want_image),
    ("mongo keeps ./MongoDB", any(str(v).endswith(':/data/db:rw') or str(v).endswith(':/data/db') for v in c['mongo']['volumes'])),
    ("mongo --replSet rs0", c['mongo']['command'][:2] == ['--replSet', 'rs0']),
    ("mongo healthcheck initiates rs0", "rs.initiate" in ' '.join(c['mongo']['healthcheck']['test'])),
    ("web MONGO_HOST names the replica set", env('web')['MONGO_HOST'] == 'mongodb://mongo:27017/?replicaSet=rs0'),
    ("web keeps REDIS_HOST", env('web')['REDIS_HOST'] == 'redis'),
    (f"web DERIVED_DATA_OWNER={want_owner}", env('web')['DERIVED_DATA_OWNER'] == want_owner),
    ("materializer runs", c['materializer']['command'] == ['run']),
    ("materializer after a healthy mongo", c['materializer']['depends_on']['mongo']['condition'] == 'service_healthy'),
    ("materializer URI from its env file", 'replicaSet=rs0' in env('materializer')['MATERIALIZER_MONGODB_URI']),
    ("materializer restarts", c['materializer']['restart'] == 'unless-stopped'),
    ("every Normal-OJ service kept", {'caddy', 'mongo', 'mongo-express', 'web', 'sandbox', 'redis'} <= set(c)),
]
bad = [name for name, ok in checks if not ok]
for name in bad:
    print(f"  FAILED: {name}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  echo "  ok: $label"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "docker-compose.materializer.yml over Normal-OJ's docker-compose.yml + docker-compose.prod.yml (fixtures):"
check "the stock site (mongo:4.2), Back-End mode" testdata
# A site upgraded the documented way: image: mongo:7.0 in its docker-compose.yml.
mkdir "$tmp/site70"
cp -a testdata/. "$tmp/site70/"
sed -i 's|image: mongo:4.2|image: mongo:7.0|' "$tmp/site70/docker-compose.yml"
grep -q 'image: mongo:7.0' "$tmp/site70/docker-compose.yml"
check "a site on mongo:7.0, switched over" "$tmp/site70" NOJ_DERIVED_DATA_OWNER=materializer
# NOJ_MONGO_IMAGE, read by earlier releases of the overlay, changes nothing.
check "a site on mongo:7.0 with a leftover NOJ_MONGO_IMAGE=mongo:4.4" "$tmp/site70" NOJ_MONGO_IMAGE=mongo:4.4
