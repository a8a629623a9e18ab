#!/bin/sh
# tests/cli/run.sh — the `hamel` program as a user runs it: build/hamel (and
# build/hamel-remote, which `hamel remote` execs) against the shared rolling-disk case,
# locally and against a real hamel-server on an ephemeral loopback port with a temporary
# HAMEL_DATA. Prints one line per check and "N passed, N failed"; exits 1 if any failed.
# Env: HAMEL_SERVER_BIN (build/hamel-server), HAMEL_CLI_BIN (build/hamel).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
srv=${HAMEL_SERVER_BIN:-$top/build/hamel-server}
hamel=${HAMEL_CLI_BIN:-$top/build/hamel}
case_file=$top/../shared/cases/greenwood-5.3-rolling-disk.json
unset HAMEL_TOKEN HAMEL_URL
for f in "$srv" "$hamel" "$(dirname "$hamel")/hamel-remote"; do
  [ -x "$f" ] || { echo "tests/cli: no program at $f (make all)" >&2; exit 1; }
done
command -v jq >/dev/null 2>&1 || { echo "tests/cli: jq is missing (scripts/install-deps.sh)" >&2; exit 1; }
[ -r "$case_file" ] || { echo "tests/cli: no case file at $case_file" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/hamel-cli-test.XXXXXX")
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/data"
: >"$work/server.log"
HAMEL_PORT=0 HAMEL_ADDR=127.0.0.1 HAMEL_DATA="$work/data" "$srv" >"$work/server.log" 2>&1 &
pid=$!
port=
tries=0
while [ -z "$port" ] && [ $tries -lt 200 ]; do
  port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$work/server.log" | head -n 1)
  [ -n "$port" ] || sleep 0.1
  tries=$((tries + 1))
done
[ -n "$port" ] || { echo "tests/cli: the server did not start" >&2; cat "$work/server.log" >&2; exit 1; }
url=http://127.0.0.1:$port

pass=0 fail=0
# check NAME COMMAND...: one assertion; its output is shown when it fails.
check() {
  name=$1
  shift
  if "$@" >"$work/check.out" 2>&1; then
    pass=$((pass + 1))
    echo "ok   $name"
  else
    fail=$((fail + 1))
    echo "FAIL $name"
    sed 's/^/     /' "$work/check.out" | head -n 20
  fi
}
# expect_exit CODE COMMAND...: the command exits with CODE; its stdout in $work/out,
# its stderr in $work/err.
expect_exit() {
  want=$1
  shift
  "$@" >"$work/out" 2>"$work/err"
  got=$?
  [ "$got" = "$want" ] || { echo "exit $got, want $want: $*"; head -c 800 "$work/err"; return 1; }
}
# has FILE PATTERN: FILE contains the extended regular expression PATTERN.
has() { grep -Eq -- "$2" "$1" || { echo "no /$2/ in $1:"; head -c 800 "$1"; return 1; }; }

# ---- loading: a local run does not load libcurl (issue 19) -------------------------
no_curl() { ! LD_TRACE_LOADED_OBJECTS=1 "$hamel" | grep -q libcurl; }
check "hamel does not load libcurl (remote is hamel-remote)" no_curl

# ---- remote through the helper program ---------------------------------------------
remote_run() {
  expect_exit 0 "$hamel" remote --url "$url" run "$case_file" || return 1
  "$hamel" run "$case_file" >"$work/local.json" || return 1
  jq -e --slurpfile l "$work/local.json" '.trajectory.q.theta == $l[0].trajectory.q.theta' "$work/out" >/dev/null
}
check "hamel remote run (exec of hamel-remote) equals the local run" remote_run

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
