#!/usr/bin/env bash
# The one-shot CLI against a hand-written C process (issue 19, item 3): `hamel run` of the
# shared rolling-disk case as a whole process (fork, exec, load, compile, integrate,
# print) beside bench/hand_disk.c (the hand-written right-hand side through the same GSL
# driver, reading the same case with jansson, linked with gsl and jansson only),
# interleaved, median of BENCH_CLI_RUNS (50) each; goal: ratio <= 2.
# Env: HAMEL_CASES_DIR (../shared/cases), BENCH_CLI_RUNS, BENCH_STRICT, BENCH_CLI_BEFORE
# (another hamel binary, e.g. built from main, run third in each round and printed beside).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/bench
mkdir -p "$build"
case_file=${HAMEL_CASES_DIR:-../shared/cases}/greenwood-5.3-rolling-disk.json
echo "== one-shot CLI vs hand-written C process (issue 19) =="
if ! make --no-print-directory BUILD="$build" OPT=-O2 "$build/hamel" >>"$build/build.log" 2>&1; then
  echo "bench-cli: build/bench/hamel does not build (make output in $build/build.log)"
  exit 1
fi
# The engine's driver and error list, wherever the engine's layout puts them.
integ=$(find engine -name integ.c | head -n 1)
errc=$(find engine -name error.c | head -n 1)
# shellcheck disable=SC2046
cc -std=c11 -O2 -D_GNU_SOURCE -I. -Iengine -I"$(dirname "$integ")" -I"$(dirname "$errc")" -Ibench \
  bench/hand_disk.c bench/baseline.c "$integ" "$errc" -o "$build/hand_disk" \
  $(pkg-config --cflags --libs gsl jansson) -lm
# shellcheck disable=SC2046
cc -std=c11 -O2 -D_GNU_SOURCE bench/cli_process.c -o "$build/cli_process" $(pkg-config --cflags --libs jansson)
rc=0
"$build/cli_process" "$build/hand_disk" "$build/hamel" "$case_file" "${BENCH_CLI_RUNS:-50}" \
  "${BENCH_CLI_BEFORE:-}" || rc=$?
if [ $rc = 1 ]; then
  echo "(the goal of issue 19 is missed above; BENCH_STRICT=1 makes that an error)"
  [ "${BENCH_STRICT:-0}" = 1 ] && exit 1
  exit 0
fi
exit $rc
