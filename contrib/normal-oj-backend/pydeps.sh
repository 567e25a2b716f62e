#!/usr/bin/env bash
# pydeps.sh CACHE_DIR PYTHON: make the Back-End's pure-Python dependencies
# importable without PyPI. Prints the PYTHONPATH entry to use.
#
# Every module PYTHON cannot import already is taken from Debian 13 (trixie)
# packages, downloaded with a PRIVATE apt configuration under CACHE_DIR
# (its own sources.list, lists, cache and an empty status file: the
# machine's apt sources are never read or changed) and unpacked with
# dpkg-deb -x into CACHE_DIR/root. Needs apt-get, dpkg-deb and network
# access to the Debian archive the first time only.
set -euo pipefail
cache=$1 python=$2
root=$cache/root
site=$root/usr/lib/python3/dist-packages

# module -> Debian 13 package (versions: what trixie ships; the ones the
# Back-End pins are mongoengine 0.29.1, mongomock 4.3.0, pymongo 4.10.1)
modules=(
  mongoengine:python3-mongoengine mongomock:python3-mongomock
  pymongo:python3-pymongo bson:python3-bson gridfs:python3-gridfs
  dns:python3-dnspython sentinels:python3-sentinels pytz:python3-pytz
  packaging:python3-packaging
  fastapi:python3-fastapi starlette:python3-starlette anyio:python3-anyio
  sniffio:python3-sniffio typing_extensions:python3-typing-extensions
  httpx:python3-httpx httpcore:python3-httpcore h11:python3-h11
  idna:python3-idna certifi:python3-certifi
  redis:python3-redis fakeredis:python3-fakeredis
  sortedcontainers:python3-sortedcontainers
  pytest:python3-pytest iniconfig:python3-iniconfig pluggy:python3-pluggy
  python_multipart:python3-python-multipart jwt:python3-jwt ulid:python3-ulid
  blinker:python3-blinker
  # the Flask line (the superproject's pin, 0a6e25c)
  flask:python3-flask werkzeug:python3-werkzeug jinja2:python3-jinja2
  markupsafe:python3-markupsafe itsdangerous:python3-itsdangerous
  click:python3-click requests:python3-requests urllib3:python3-urllib3
  charset_normalizer:python3-charset-normalizer
)
# pydantic_core is compiled: Debian 13's build loads only in its python3.13
if "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))'; then
  modules+=(pydantic:python3-pydantic pydantic_core:python3-pydantic-core
            pydantic_settings:python3-pydantic-settings
            annotated_types:python3-annotated-types dotenv:python3-dotenv)
fi
missing=()
for m in "${modules[@]}"; do
  mod=${m%%:*} pkg=${m#*:}
  PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" "$python" -c "import $mod" 2>/dev/null || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  mkdir -p "$cache/apt/lists/partial" "$cache/apt/cache/archives/partial" \
           "$cache/apt/etc/sources.list.d" "$cache/apt/etc/preferences.d" "$cache/debs" "$root"
  : > "$cache/apt/status"
  echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main' \
    > "$cache/apt/etc/sources.list"
  apt=(-o "Dir::Etc::sourcelist=$cache/apt/etc/sources.list"
       -o "Dir::Etc::sourceparts=$cache/apt/etc/sources.list.d"
       -o "Dir::Etc::preferencesparts=$cache/apt/etc/preferences.d"
       -o "Dir::State::Lists=$cache/apt/lists"
       -o "Dir::State::status=$cache/apt/status"
       -o "Dir::Cache=$cache/apt/cache"
       -o "APT::Architecture=$(dpkg --print-architecture)")
  [ "$(id -u)" -ne 0 ] || apt+=(-o APT::Sandbox::User=root)
  echo "pydeps: fetching from Debian 13: ${missing[*]}" >&2
  [ -n "$(ls "$cache/apt/lists" 2>/dev/null | grep -v partial)" ] || apt-get "${apt[@]}" -qq update >&2
  (cd "$cache/debs" && apt-get "${apt[@]}" -qq download "${missing[@]}" >&2)
  for deb in "$cache"/debs/*.deb; do dpkg-deb -x "$deb" "$root"; done
fi
echo "$site"
