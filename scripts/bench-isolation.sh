#!/usr/bin/env bash
# What the engine's worker processes cost per request (issue 15, item 4; issue 19's
# target: a new model over HTTP within 1.5x of compile + run in process). Run by
# scripts/bench.sh, or alone.
#
# Starts two build/hamel-server with fresh data directories on ephemeral loopback ports:
# A as configured (the engine in worker processes, server/isolate.h) and B with
# HAMEL_ISOLATE=0 (the engine inside the server), then runs bench/http_cold.c with
# BENCH_PORT_B, the requests alternating between A and B so that both see the same load:
# BENCH_ISOLATION_REQUESTS (200) cold rolling-disk requests (a new model each: compile +
# 1001-sample run + store), then as many warm ones (one model, new initial states). Prints
# both medians, their ratio and the load average. Then bench/cold_inprocess.c compiles
# and runs the same cold requests in one process (engine_model_compile +
# engine_simulate_text, no HTTP, no store), and the goal line judges issue 19's ratio,
# the cold request over HTTP with workers / the same compile and run in process, against
# 1.5.
#
# Exit status 1 when the goal is missed and BENCH_STRICT=1, or when a server or a request
# fails. Environment: HAMEL_CASES_DIR (../shared/cases), BENCH_ISOLATION_REQUESTS,
# BENCH_STRICT, HAMEL_SERVER_BIN (build/hamel-server, built if missing).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

n=${BENCH_ISOLATION_REQUESTS:-200}
build=build/bench
prog=$build/bench-http_cold
bin=${HAMEL_SERVER_BIN:-build/hamel-server}
export HAMEL_CASES_DIR=${HAMEL_CASES_DIR:-../shared/cases}

echo "== what isolating the engine costs (issue 15; two real servers on loopback) =="
mkdir -p "$build"
if ! make --no-print-directory BUILD="$build" OPT=-O2 "$prog" "$build/bench-cold_inprocess" >"$build/build-isolation.log" 2>&1; then
  echo "bench-isolation: $prog does not build (make output in $build/build-isolation.log)"
  exit 1
fi
if [ -z "${HAMEL_SERVER_BIN:-}" ] && ! make --no-print-directory "$bin" >>"$build/build-isolation.log" 2>&1; then
  echo "bench-isolation: $bin does not build (make output in $build/build-isolation.log)"
  exit 1
fi

# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
bench_server_start bench-isolation "$bin" || exit 1
port_a=$port
dir_b="$work/b"
mkdir -p "$dir_b"
HAMEL_ISOLATE=0 HAMEL_PORT=0 HAMEL_DATA="$dir_b/data" "$bin" >"$dir_b/stdout" 2>"$dir_b/server.log" &
pid_b=$!
trap 'kill -TERM $pid_b 2>/dev/null; wait $pid_b 2>/dev/null; bench_cleanup' EXIT
port_b=
for _ in $(seq 200); do
  port_b=$(sed -n 's/^listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir_b/stdout")
  [ -n "$port_b" ] && break
  sleep 0.05
done
if [ -z "$port_b" ]; then
  echo "bench-isolation: the in-process server did not start:"
  cat "$dir_b/server.log"
  exit 1
fi
echo "A: engine in worker processes, port $port_a; B: HAMEL_ISOLATE=0, port $port_b; $n requests each, alternating"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

status=0
median() { sed -n "$1" | sed -E 's/.*median ([0-9.]+) ms.*/\1/' | head -n 1; }
cold=$(BENCH_PORT_B=$port_b "$prog" "$port_a" "$n") || status=1
echo "$cold"
warm=$(BENCH_SAME_MODEL=1 BENCH_PORT_B=$port_b "$prog" "$port_a" "$n") || status=1
echo "$warm"
inproc=$("$build/bench-cold_inprocess" "$n") || status=1
echo "$inproc"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
ca=$(median '1p' <<<"$cold")
cb=$(median '2p' <<<"$cold")
wa=$(median '1p' <<<"$warm")
wb=$(median '2p' <<<"$warm")
ci=$(median '1p' <<<"$inproc")
if [ -n "$ca" ] && [ -n "$cb" ] && [ -n "$wa" ] && [ -n "$wb" ] && [ -n "$ci" ]; then
  awk -v ca="$ca" -v cb="$cb" -v wa="$wa" -v wb="$wb" -v ci="$ci" 'BEGIN {
    printf "cold: %.2f ms in workers / %.2f ms in the server process = %.2fx (what isolation costs)\n", ca, cb, ca / cb;
    printf "warm: %.2f ms in workers / %.2f ms in the server process = %.2fx\n", wa, wb, wa / wb;
    printf "cold over HTTP in workers / compile + run in process (no HTTP, no store): %.2f / %.2f ms = %.2fx (goal <= 1.5x: %s)\n", ca, ci, ca / ci, ca / ci <= 1.5 ? "met" : "MISSED";
    exit !(ca / ci <= 1.5) }' || { [ "${BENCH_STRICT:-0}" = 1 ] && status=1; }
else
  echo "bench-isolation: no medians to compare"
  status=1
fi
exit $status
