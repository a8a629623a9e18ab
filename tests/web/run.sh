#!/usr/bin/env bash
# Browser tests of the web front end (clients/web) against the real hamel-server.
# Starts build/hamel-server on an ephemeral port serving clients/web at /, installs
# playwright-core from the lock file if needed, drives /usr/bin/chromium headless,
# and prints "N passed, N failed". Screenshots land in tests/web/artifacts/.
# Env: HAMEL_SERVER_BIN (default build/hamel-server), CHROMIUM (default /usr/bin/chromium).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
server=${HAMEL_SERVER_BIN:-$repo/build/hamel-server}
export CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
artifacts=$here/artifacts
mkdir -p "$artifacts"

if [ ! -x "$server" ] && [ -z "${HAMEL_SERVER_BIN:-}" ]; then
  make -C "$repo" --no-print-directory build/hamel-server >&2
fi
# the CLI beside the server: the CSV check compares the page's columns with `hamel run --csv`
if [ ! -x "$(dirname "$server")/hamel" ] && [ -z "${HAMEL_SERVER_BIN:-}" ]; then
  make -C "$repo" --no-print-directory build/hamel >&2
fi
[ -x "$server" ] || { echo "web tests: no server binary at $server"; echo "0 passed, 1 failed"; exit 1; }
[ -x "$CHROMIUM" ] || { echo "web tests: no chromium at $CHROMIUM (scripts/install-deps.sh test installs it)"; echo "0 passed, 1 failed"; exit 1; }
command -v node >/dev/null || { echo "web tests: node is missing (scripts/install-deps.sh test installs it)"; echo "0 passed, 1 failed"; exit 1; }
if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi

log=$artifacts/server.log
data=$(mktemp -d)
# emptied here, before the server starts: the loop below could read the previous run's
# "listening on" line before the server's own redirection truncated the file, and then
# every check met "connection refused" at that old port
: >"$log"
HAMEL_PORT=0 HAMEL_STATIC="$repo/clients/web" HAMEL_DATA="$data" "$server" >"$log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"; }
trap cleanup EXIT

url=""
for _ in $(seq 1 100); do
  url=$(grep -o 'listening on http://[^ ]*' "$log" 2>/dev/null | head -n1 | sed 's/^listening on //') || true
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "web tests: the server did not report its address; its log:"; sed 's/^/  /' "$log"
  echo "0 passed, 1 failed"; exit 1
fi
# the server answers before the browser starts: one that printed its address and then
# stopped is reported with its log, not as every check's "connection refused"
answered=""
for _ in $(seq 1 100); do
  if curl -sf -o /dev/null "$url/v1/health"; then answered=1; break; fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$answered" ]; then
  st=running
  if ! kill -0 "$pid" 2>/dev/null; then code=0; wait "$pid" 2>/dev/null || code=$?; st="exited with status $code"; fi
  echo "web tests: the server at $url does not answer (it $st); its log:"; sed 's/^/  /' "$log"
  echo "0 passed, 1 failed"; exit 1
fi
echo "web tests: server at $url (pid $pid), chromium $("$CHROMIUM" --version 2>/dev/null | head -n1)"
rc=0
HAMEL_BASE=$url ARTIFACTS=$artifacts HAMEL_SERVER_BIN=$server node "$here/test.mjs" || rc=$?
if ! kill -0 "$pid" 2>/dev/null; then
  st=0; wait "$pid" 2>/dev/null || st=$?
  echo "web tests: the server stopped during the checks (status $st); the end of its log:"; tail -n 30 "$log" | sed 's/^/  /'
  rc=1
fi
exit "$rc"
