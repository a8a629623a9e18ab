#!/usr/bin/env bash
# Checks that the API document (api/openapi.yaml, api/schemas, api/examples) stays true
# to the service: validates the examples against the schemas and the document, then
# calls every documented operation on two real servers (one with HAMEL_TOKEN set) and
# checks each answer against the document. Prints "N passed, N failed".
# Env: HAMEL_SERVER_BIN (default build/hamel-server, built if missing).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
server=${HAMEL_SERVER_BIN:-$repo/build/hamel-server}

command -v node >/dev/null || { echo "api check: node is missing (scripts/install-deps.sh test installs it)"; echo "0 passed, 1 failed"; exit 1; }
if [ ! -f "$here/node_modules/ajv/package.json" ] || [ ! -f "$here/node_modules/yaml/package.json" ] ||
   [ ! -f "$here/node_modules/ajv-formats/package.json" ] ||
   [ ! -f "$here/node_modules/@seriousme/openapi-schema-validator/package.json" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
if [ ! -x "$server" ] && [ -z "${HAMEL_SERVER_BIN:-}" ]; then
  make -C "$repo" --no-print-directory build/hamel-server >&2
fi
[ -x "$server" ] || { echo "api check: no server binary at $server"; echo "0 passed, 1 failed"; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# start NAME [VAR=value...]: starts a server on an ephemeral port; prints its URL.
start() {
  local name=$1 url=""
  shift
  mkdir -p "$work/$name.data"
  env "$@" HAMEL_PORT=0 HAMEL_ADDR=127.0.0.1 HAMEL_DATA="$work/$name.data" HAMEL_STATIC= \
    HAMEL_ACCESS_LOG=0 "$server" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  for _ in $(seq 1 100); do
    url=$(head -n 1 "$work/$name.out" 2>/dev/null | sed -n 's/^listening on //p')
    [ -n "$url" ] && break
    sleep 0.05
  done
  [ -n "$url" ] || { echo "api check: the $name server did not start:"; sed 's/^/  /' "$work/$name.err"; echo "0 passed, 1 failed"; exit 1; }
  echo "$url"
}
# Not in $(...): the server must be a child of this shell for the cleanup.
start main >"$work/main.url"
start guarded HAMEL_TOKEN=api-check-token >"$work/guarded.url"
HAMEL_BASE=$(cat "$work/main.url") HAMEL_TOKEN_BASE=$(cat "$work/guarded.url") node "$here/check.mjs"
