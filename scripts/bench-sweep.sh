#!/usr/bin/env bash
# Sweeps through the service against the hand-written C loop (issue 19, item 1; run by
# scripts/bench.sh, or alone).
#
# The server side: POST /v1/batches of the shared rolling-disk case with BENCH_SWEEP_RUNS
# (10000) runs, run i with initial Omega = 4 + i * 1e-5, read as NDJSON
# (Accept: application/x-ndjson) by curl to the last line, against a fresh
# build/hamel-server with HAMEL_WORKERS=2 (engine worker processes on, results stored
# in SQLite as always) — time from the request to the last byte, the model's
# compilation included. The hand side: bench/hand_sweep.c, the same runs of the
# hand-written right-hand side (bench/baseline.c) through the engine's GSL driver in 2
# forked processes. The two alternate BENCH_SWEEP_ROUNDS (3) times, each server round
# on a fresh server and data directory (nothing cached); each round also runs the engine
# alone (bench/sweep_engine.c: the same runs in one process, no service, native tier).
# Two ratios per round, hand / server: wall time, and CPU time (user + system of the 2 hand processes against the
# server's and its engine workers' during the request). The median CPU ratio is judged
# (goal >= 0.8): on a machine shared with other work the wall ratio favours the server,
# whose many threads take a larger share of the cores than 2 processes do; on idle
# cores the two agree. The load average is printed beside the absolute times.
#
# Environment: HAMEL_CASES_DIR (../shared/cases), BENCH_SWEEP_RUNS, BENCH_SWEEP_ROUNDS,
# BENCH_STRICT, HAMEL_SERVER_BIN (build/hamel-server, built if missing); any HAMEL_*
# setting is passed to the server (HAMEL_ISOLATE=0 to compare without worker processes).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

runs=${BENCH_SWEEP_RUNS:-10000}
rounds=${BENCH_SWEEP_ROUNDS:-3}
procs=2
omega0=4
step=0.00001
goal=0.8
build=build/bench
bin=${HAMEL_SERVER_BIN:-build/hamel-server}
case_file=${HAMEL_CASES_DIR:-../shared/cases}/greenwood-5.3-rolling-disk.json
echo "== sweeps: a $runs-run NDJSON batch vs the hand-written C loop (issue 19) =="
mkdir -p "$build"
if [ -z "${HAMEL_SERVER_BIN:-}" ] && ! make --no-print-directory "$bin" >>"$build/build-sweep.log" 2>&1; then
  echo "bench-sweep: $bin does not build (make output in $build/build-sweep.log)"
  exit 1
fi
integ=$(find engine -name integ.c | head -n 1)
errc=$(find engine -name error.c | head -n 1)
# shellcheck disable=SC2046
if ! cc -std=c11 -O2 -D_GNU_SOURCE -I. -Iengine -I"$(dirname "$integ")" -I"$(dirname "$errc")" -Ibench \
  bench/hand_sweep.c bench/baseline.c "$integ" "$errc" -o "$build/hand_sweep" \
  $(pkg-config --cflags --libs gsl jansson) -lm; then
  echo "bench-sweep: bench/hand_sweep.c does not build"
  exit 1
fi

# The engine alone (bench/sweep_engine.c): the same runs through engine_simulate_text in
# one process on the native tier, no service around it.
if ! make --no-print-directory build/bench-sweep_engine >>"$build/build-sweep.log" 2>&1; then
  echo "bench-sweep: bench/sweep_engine.c does not build (make output in $build/build-sweep.log)"
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/hamel-sweep.XXXXXX")
pid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
jq -c --argjson n "$runs" --argjson o "$omega0" --argjson s "$step" \
  '{model: .model, base: .simulation,
    runs: [range($n) | {initial: {speeds: {Omega: ($o + . * $s)}}}]}' "$case_file" >"$work/batch.json"

tck=$(getconf CLK_TCK)
# CPU seconds of process $1 alone (all its threads).
cpu_self() { awk -v t="$tck" '{ printf "%.6f", ($14 + $15) / t }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# CPU seconds (user + system) of process $1, its reaped children and its live children.
cpu_tree() {
  local p=$1 total=0 c
  total=$(awk -v t="$tck" '{ printf "%.6f", ($14 + $15 + $16 + $17) / t }' "/proc/$p/stat" 2>/dev/null || echo 0)
  # shellcheck disable=SC2013 # pids, one word each
  for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
    total=$(awk -v a="$total" -v b="$(cpu_tree "$c")" 'BEGIN { printf "%.6f", a + b }')
  done
  echo "$total"
}

# One server round: a fresh server and data directory; prints "seconds cpu-seconds lines
# done-lines" (cpu: the server and its engine workers during the request).
server_round() {
  rm -rf "$work/data" "$work/stdout" "$work/lines.ndjson" # nothing of the round before
  HAMEL_WORKERS=${HAMEL_WORKERS:-2} HAMEL_PORT=0 HAMEL_DATA="$work/data" "$bin" >"$work/stdout" 2>"$work/server.log" &
  pid=$!
  local port=
  for _ in $(seq 400); do
    port=$(sed -n 's/^listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/stdout")
    [ -n "$port" ] && break
    sleep 0.05
  done
  if [ -z "$port" ]; then
    echo "bench-sweep: the server did not start:" >&2
    cat "$work/server.log" >&2
    return 1
  fi
  local t c0 c1 s0 s1
  c0=$(cpu_tree "$pid")
  s0=$(cpu_self "$pid")
  t=$(curl -s -o "$work/lines.ndjson" -w '%{time_total}' -H 'Content-Type: application/json' \
    -H 'Accept: application/x-ndjson' --data-binary @"$work/batch.json" "http://127.0.0.1:$port/v1/batches")
  c1=$(cpu_tree "$pid")
  s1=$(cpu_self "$pid")
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null
  pid=
  local lines ok
  lines=$(wc -l <"$work/lines.ndjson")
  ok=$(grep -c '"status":"done"' "$work/lines.ndjson")
  # the engine's own integration time, as each run's stats report it
  local integ
  integ=$(grep -o '"integrate_ms":[0-9.e+-]*' "$work/lines.ndjson" | awk -F: '{ s += $2 } END { printf "%.3f", s / 1000 }')
  # the code tier each run ran on (stats.code_tier; provenance names it too: halved)
  grep -o '"code_tier":"[a-z]*"' "$work/lines.ndjson" | sort | uniq -c |
    awk '{ sub(/"code_tier":/, "", $2); gsub(/"/, "", $2); printf "%s%s %d", sep, $2, $1 / 2; sep = ", " } END { print "" }' >"$work/tiers"
  echo "$t $(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.3f", b - a }') $lines $ok" \
    "$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.3f", b - a }') $integ"
}

printf '%-6s %9s %9s %7s   %9s %9s %7s   %s\n' round "hand s" "server s" ratio "hand cpu" "srv cpu" ratio \
  "load average"
ratios=()
cratios=()
status=0
for r in $(seq "$rounds"); do
  read -r hand_s hand_cpu _ < <("$build/hand_sweep" "$case_file" "$runs" "$procs" "$omega0" "$step") || status=1
  read -r eng_cpu _ < <(build/bench-sweep_engine "$case_file" "$runs" "$omega0" "$step") || status=1
  eng_sum=$(awk -v a="${eng_sum:-0}" -v b="${eng_cpu:-0}" 'BEGIN { print a + b }')
  read -r srv_s srv_cpu lines ok srv_self integ_s < <(server_round) || status=1
  self_sum=$(awk -v a="${self_sum:-0}" -v b="$srv_self" 'BEGIN { print a + b }')
  cpu_sum=$(awk -v a="${cpu_sum:-0}" -v b="$srv_cpu" 'BEGIN { print a + b }')
  integ_sum=$(awk -v a="${integ_sum:-0}" -v b="$integ_s" 'BEGIN { print a + b }')
  hand_sum=$(awk -v a="${hand_sum:-0}" -v b="$hand_cpu" 'BEGIN { print a + b }')
  if [ "${ok:-0}" != "$runs" ]; then
    echo "bench-sweep: round $r: $ok of $runs runs done ($lines lines)" >&2
    status=1
  fi
  ratio=$(awk -v h="$hand_s" -v s="$srv_s" 'BEGIN { printf "%.3f", h / s }')
  cratio=$(awk -v h="$hand_cpu" -v s="$srv_cpu" 'BEGIN { printf "%.3f", h / s }')
  ratios+=("$ratio")
  cratios+=("$cratio")
  printf '%-6s %9.3f %9.3f %7s   %9.3f %9.3f %7s   %s\n' "$r" "$hand_s" "$srv_s" "$ratio" "$hand_cpu" "$srv_cpu" \
    "$cratio" "$(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "runs by code tier in the last round: $(cat "$work/tiers" 2>/dev/null)"
median_of() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
median=$(median_of "${ratios[@]}")
cmedian=$(median_of "${cratios[@]}")
met=$(awk -v m="$cmedian" -v g="$goal" 'BEGIN { print (m >= g) ? "met" : "MISSED" }')
echo "sweep: hand C loop / batch path, median of $rounds rounds: CPU $cmedian (goal >= $goal: $met); wall $median"
echo "(CPU: user + system seconds of the 2 hand processes against the server's and its engine workers'"
echo " during the request; on a loaded machine the wall ratio favours the side with more threads)"
echo "($runs runs of greenwood-5.3 with 11 samples, rk8pd 1e-12; $procs hand processes, HAMEL_WORKERS=${HAMEL_WORKERS:-2})"
# Where the server side's CPU goes, per run (all rounds): the engine worker processes
# (the runs themselves: reading the call, the integration, checks, the result's text; and
# the native tier's compiler, their child), the server process (HTTP, batch creation and
# lines, the store's writer and checkpoint, the calls to the workers); the hand loop's
# beside them. stats.integrate_ms is the engine's wall time of the integration alone (on a
# loaded machine it includes time the worker waited for a core).
awk -v n="$((runs * rounds))" -v h="$hand_sum" -v c="$cpu_sum" -v s="$self_sum" -v i="$integ_sum" -v e="$eng_sum" 'BEGIN {
  printf "per run (ms of CPU): hand loop %.3f; server side %.3f = engine workers %.3f + server process %.3f (stats.integrate_ms, wall: %.3f)\n",
    1e3 * h / n, 1e3 * c / n, 1e3 * (c - s) / n, 1e3 * s / n, 1e3 * i / n
  printf "the engine alone in one process (bench/sweep_engine.c, native tier): %.3f ms per run; hand loop / engine alone %.3f\n",
    1e3 * e / n, h / e }'
if [ "$met" = MISSED ] && [ "${BENCH_STRICT:-0}" = 1 ]; then status=1; fi
exit $status
