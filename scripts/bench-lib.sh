# shellcheck shell=bash
# bench-lib.sh — sourced by the benchmark scripts that run a real hamel-server: a fresh
# work directory, the server started on an ephemeral loopback port with its data there,
# and everything stopped and removed on exit.
#
# bench_server_start NAME BIN: sets work, pid and port (environment for the server is
# the caller's, exported or given as VAR=value before the call). On failure prints
# "NAME: the server did not start:" and the server's log on stderr and returns 1.

work=
pid=
port=

# shellcheck disable=SC2317 # called by the trap
bench_cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  [ -n "$work" ] && rm -rf "$work"
}

bench_server_start() {
  local name=$1 bin=$2
  work=$(mktemp -d "${TMPDIR:-/tmp}/hamel-$name.XXXXXX")
  trap bench_cleanup EXIT
  HAMEL_PORT=0 HAMEL_DATA="$work/data" "$bin" >"$work/stdout" 2>"$work/server.log" &
  pid=$!
  port=
  for _ in $(seq 200); do
    port=$(sed -n 's/^listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/stdout")
    [ -n "$port" ] && return 0
    sleep 0.05
  done
  echo "$name: the server did not start:" >&2
  cat "$work/server.log" >&2
  return 1
}
