#!/usr/bin/env bash
# The benchmarks behind `make bench`.
#
# 1. Engine vs the hand-written baseline (issue 2, item 8): builds bench/bench_engine.c
#    with OPT=-O2 into build/bench/ (its own engine library, so the flags are known) and
#    runs it. If the engine library does not build or has no engine_simulate yet, the
#    baseline is measured alone and the engine is reported as not available.
# 2. The scaling families against SymPy-generated C (issue 8): scripts/bench-scale.sh.
# 3. Server benchmarks (issue 3): scripts/bench-server.sh, when it exists.
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
  if [ -f engine/integ.c ]; then extra=(engine/integ.c engine/error.c); fi
  # shellcheck disable=SC2046
  cc -std=c11 -O2 -D_GNU_SOURCE -I. -Iengine -Ibench -DBENCH_BASELINE_ONLY \
    bench/bench_engine.c "${extra[@]}" -o "$build/bench-baseline-only" \
    $(pkg-config --cflags --libs gsl jansson) -lm
  "$build/bench-baseline-only" || status=$?
fi

# ---- scaling families (issue 8, item 6) ----------------------------------------------
echo
scripts/bench-scale.sh || status=$?

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
