#!/usr/bin/env bash
# The benchmarks behind `make bench`.
#
# 1. Engine vs the hand-written baseline (issue 2, item 8): builds bench/bench_engine.c
#    with OPT=-O2 into build/bench/ (its own engine library, so the flags are known) and
#    runs it. If the engine library does not build or has no engine_simulate yet, the
#    baseline is measured alone and the engine is reported as not available.
# 2. The code tiers on the rolling disk (issue 8): bench/bench_tiers.c — interp, tcc and
#    native against the hand-written GSL baseline; goals: native <= 1.2x the baseline,
#    compile-to-first-run <= 1 ms on the first tier.
# 3. The scaling families against SymPy-generated C (issue 8): scripts/bench-scale.sh
#    (tcc and native tiers; disk-chain-8 native <= SymPy C, compile targets, hostile
#    models answered in time), and past 64 coordinates (issue 19): compile time, peak
#    memory and run time per step of chains of 13..40 disks (n = 65..200) with their
#    growth, by bench/bench_size.c.
# 4. A cold simulation over HTTP against a real server (issue 8): scripts/bench-http-cold.sh
#    (median of 200 requests; goal <= 5 ms).
# 5. What the engine's worker processes cost (issue 15): scripts/bench-isolation.sh
#    (cold and warm requests alternating with a HAMEL_ISOLATE=0 server; goal <= 1.5x).
# 6. Server benchmarks (issue 3): scripts/bench-server.sh, when it exists.
# 7. The one-shot CLI (issue 19): scripts/bench-cli.sh — `hamel run` of the rolling disk
#    as a process against a hand-written C process (bench/hand_disk.c); goal <= 2x.
# 8. Sweeps (issue 19): scripts/bench-sweep.sh — a 10,000-run NDJSON batch of the rolling
#    disk through a 2-worker server against bench/hand_sweep.c (the hand-written
#    right-hand side in 2 processes), alternating; goal: ratio >= 0.8.
# Each section prints its figures with the goal and met/MISSED beside them.
#
# Environment: HAMEL_CASES_DIR (default ../shared/cases), BENCH_RUNS, BENCH_SAMPLES,
# BENCH_STRICT=1 (exit 1 when a budget is missed) — see bench/bench_engine.c.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/bench
prog=$build/bench-bench_engine
log=$build/build.log
mkdir -p "$build"
export HAMEL_CASES_DIR=${HAMEL_CASES_DIR:-../shared/cases}
if [ ! -d "$HAMEL_CASES_DIR" ]; then
  echo "bench: the shared cases are missing at $HAMEL_CASES_DIR (set HAMEL_CASES_DIR)" >&2
  exit 2
fi

echo "== engine vs hand-written baseline (OPT=-O2) =="
status=0
# (grep without -q: under pipefail an early exit of grep would fail nm with SIGPIPE)
if make --no-print-directory BUILD="$build" OPT=-O2 "$prog" >"$log" 2>&1 &&
  nm "$build/libhamel.a" 2>/dev/null | grep ' T engine_simulate$' >/dev/null; then
  "$prog" || status=$?
else
  echo "bench: engine not available: the engine library does not build or lacks" \
    "engine_simulate (make output in $log); measuring the baseline alone"
  # The baseline needs only GSL, jansson and, once it drives through engine/integ.c,
  # that driver and the error list.
  extra=()
  if [ -f engine/run/integ.c ]; then extra=(engine/run/integ.c engine/base/error.c); fi
  # shellcheck disable=SC2046
  cc -std=c11 -O2 -D_GNU_SOURCE -I. -Iengine -Iengine/base -Iengine/run -Ibench -DBENCH_BASELINE_ONLY \
    bench/bench_engine.c "${extra[@]}" -o "$build/bench-baseline-only" \
    $(pkg-config --cflags --libs gsl jansson) -lm
  "$build/bench-baseline-only" || status=$?
fi

# ---- code tiers on the rolling disk (issue 8, item 4) --------------------------------
echo
echo "== code tiers vs hand-written baseline (issue 8) =="
if make --no-print-directory BUILD="$build" OPT=-O2 "$build/bench-bench_tiers" >>"$log" 2>&1; then
  rc=0
  "$build/bench-bench_tiers" || rc=$?
  if [ $rc = 1 ]; then
    echo "(goals of issue 8 missed above; BENCH_STRICT=1 makes that an error)"
    [ "${BENCH_STRICT:-0}" = 1 ] && status=1
  elif [ $rc != 0 ]; then
    status=$rc
  fi
else
  echo "bench: bench/bench_tiers.c does not build (make output in $log)"
  status=1
fi

# ---- scaling families (issue 8, item 6) ----------------------------------------------
echo
scripts/bench-scale.sh || status=$?

# ---- the one-shot CLI as a process (issue 19, item 3) --------------------------------
echo
scripts/bench-cli.sh || status=$?

# ---- sweeps through the batch path (issue 19, item 1) ---------------------------------
echo
scripts/bench-sweep.sh || status=$?

# ---- a cold simulation over HTTP (issue 8, item 5) -----------------------------------
echo
scripts/bench-http-cold.sh || status=$?

# ---- what isolating the engine costs (issue 15, item 4) ------------------------------
echo
scripts/bench-isolation.sh || status=$?

# ---- cache hits of a large result, identity vs gzip (issue 19, item 7) -------------
echo
scripts/bench-gzip.sh || status=$?

# ---- server benchmarks (issue 3: wrk against the running server) -------------------
# scripts/bench-server.sh is owned by the server work; its output is appended here.
if [ -x scripts/bench-server.sh ]; then
  echo
  echo "== server =="
  scripts/bench-server.sh || status=$?
else
  echo
  echo "== server == (scripts/bench-server.sh not present yet)"
fi
exit "$status"
