#!/usr/bin/env bash
# engine-outputs.sh — every output of the engine that a change to the symbolic pipeline
# must leave bit-identical, written one file per (model, command) so that two builds
# can be compared with diff -r:
#
#   scripts/engine-outputs.sh OLD_HAMEL /tmp/old
#   scripts/engine-outputs.sh build/hamel /tmp/new
#   diff -r /tmp/old /tmp/new && echo identical
#
# For every file of ../shared/cases, api/examples and bench/models (the largest
# generated ones left out: ENGINE_OUTPUTS_ALL=1 takes them too): hamel check, the
# equations in each of the five forms and hamel gamma; for the cases and bench models
# also hamel run, linearize and evaluate. Fields that are timings (compile_ms, ..._ms,
# seconds, wall) are dropped. Each command runs under timeout(1)
# (ENGINE_OUTPUTS_TIMEOUT, default 60 s). Takes minutes (the whipple models dominate).
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 HAMEL_BINARY OUTDIR" >&2
  exit 2
fi
bin=$(realpath "$1")
out=$2
cd "$(dirname "$0")/.." || exit 2
cases=${HAMEL_CASES_DIR:-../shared/cases}
limit=${ENGINE_OUTPUTS_TIMEOUT:-60}
mkdir -p "$out"
files=$(ls "$cases"/*.json api/examples/*.json bench/models/*.json)
if [ "${ENGINE_OUTPUTS_ALL:-0}" != 1 ]; then
  files=$(printf '%s\n' "$files" | grep -v -e hostile -e car-trailers-10 -e disk-chain-12)
fi
for f in $files; do
  b=$(basename "$(dirname "$f")")_$(basename "$f" .json)
  # the summary document (`check` prints text since issue 17; a CLI older than --json
  # answers it with a usage error, exit 2, and prints the document without it)
  timeout "$limit" "$bin" check "$f" --json >"$out/$b.check" 2>&1
  [ $? = 2 ] && timeout "$limit" "$bin" check "$f" >"$out/$b.check" 2>&1
  for form in hamel appell kane maggi voronec; do
    timeout "$limit" "$bin" equations "$f" --form $form >"$out/$b.eq-$form" 2>&1
  done
  timeout "$limit" "$bin" gamma "$f" >"$out/$b.gamma" 2>&1
  case $f in
  "$cases"/* | bench/models/*)
    timeout "$limit" "$bin" run "$f" >"$out/$b.run" 2>&1
    timeout "$limit" "$bin" linearize "$f" >"$out/$b.lin" 2>&1
    timeout "$limit" "$bin" evaluate "$f" >"$out/$b.eval" 2>&1
    ;;
  esac
done
sed -i -E '/"(compile_ms|[a-z_]*_ms|[a-z_]*seconds|wall[a-z_]*|elapsed[a-z_]*)":/d' "$out"/*
echo "$(find "$out" -type f | wc -l) outputs in $out"
