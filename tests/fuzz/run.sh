#!/usr/bin/env bash
# tests/fuzz/run.sh — every libFuzzer harness (tests/fuzz/fuzz_*.c) as a test: built
# with clang (make fuzz-build), each runs FUZZ_TEST_SECONDS (default 10) mutating from
# its committed corpus (tests/fuzz/corpus/<name>, copied: the run never writes the
# repository) with its dictionary. A harness passes when it ends with no crash, leak,
# sanitizer report or time-out; a failure keeps the reproducing input under
# build/fuzz/test-artifacts and names it. Ends with "N passed, N failed".
# The long campaign is `make fuzz FUZZ_TIME=…`.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${FUZZ_TEST_SECONDS:-10}
passed=0
failed=0
if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz: clang is not installed (scripts/install-deps.sh test installs it)"
  echo "0 passed, 1 failed"
  exit 1
fi
if ! make -s fuzz-build >build/fuzz-build.log 2>&1; then
  tail -n 30 build/fuzz-build.log
  echo "fuzz: the harnesses do not build (build/fuzz-build.log)"
  echo "0 passed, 1 failed"
  exit 1
fi
art=build/fuzz/test-artifacts
mkdir -p "$art"
for src in tests/fuzz/fuzz_*.c; do
  name=$(basename "$src" .c)
  short=${name#fuzz_}
  dict=tests/fuzz/$short.dict
  [ "$short" = parse ] && dict=tests/fuzz/expr.dict
  work=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$short/." "$work/" 2>/dev/null || true
  log=$art/$name.log
  if build/fuzz/$name -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="$dict" -artifact_prefix="$art/$name-" "$work" >"$log" 2>&1; then
    runs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{print $2}')
    echo "$name: ok (${runs:-?} executions in ${secs} s)"
    passed=$((passed + 1))
  else
    echo "$name: FAILED — reproducing input: $(ls "$art/$name-"* 2>/dev/null | head -n 1) (log $log)"
    grep -aE 'ERROR|SUMMARY|runtime error' "$log" | head -n 10
    failed=$((failed + 1))
  fi
  rm -rf "$work"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
