#!/usr/bin/env bash
# tests/fuzz/run.sh — every libFuzzer harness (tests/fuzz/fuzz_*.c) as a test: built
# with clang (make fuzz-build), each replays its committed corpus (tests/fuzz/corpus/<name>,
# copied: the run never writes the repository) and mutates from it with its dictionary
# for a fixed number of executions from a fixed seed (FUZZ_TEST_SEED, default 1), so
# every run of the test command explores the same inputs (a prefix of them when the
# FUZZ_TEST_SECONDS cap, default 60, ends it first on a slow machine): a new finding
# comes from a campaign (`make fuzz`), not by chance in CI. A harness passes when it ends with no crash, leak,
# sanitizer report or time-out; a failure keeps the reproducing input under
# build/fuzz/test-artifacts and names it. Ends with "N passed, N failed".
# The long campaign is `make fuzz FUZZ_TIME=…`.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${FUZZ_TEST_SECONDS:-60}
seed=${FUZZ_TEST_SEED:-1}
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
  tmo=10 # seconds an input may take
  case $short in # about 10 s each on an idle 2-core machine
  parse) runs=20000 ;;
  model) runs=1500 ;;
  case) runs=300 tmo=60 ;; # a whole case: compile, every form, run, linearize, export
  *) runs=800 ;;
  esac
  work=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$short/." "$work/" 2>/dev/null || true
  log=$art/$name.log
  # fuzz_case's bound on one call (8 s in a campaign) leaves room for a loaded machine here
  if FUZZ_CALL_SECONDS=30 build/fuzz/$name -seed="$seed" -runs="$runs" -max_total_time="$secs" -timeout="$tmo" -rss_limit_mb=2048 -print_final_stats=1 \
    -dict="$dict" -artifact_prefix="$art/$name-" "$work" >"$log" 2>&1; then
    done_runs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{print $2}')
    echo "$name: ok (${done_runs:-?} executions from seed $seed)"
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
