#!/usr/bin/env bash
# The style checks of STYLE.md as a test suite: clang-format (the .clang-format at the
# root) and cppcheck. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0
failed=0
if clang-format --dry-run --Werror $(git ls-files '*.c' '*.h' ':!:api/examples/*') >/tmp/hamel-format.$$ 2>&1; then
  passed=$((passed + 1)); echo "format: ok"
else
  failed=$((failed + 1)); echo "format: FAIL (run make fmt)"; head -n 20 /tmp/hamel-format.$$
fi
rm -f /tmp/hamel-format.$$
# ctuuninitvar: cppcheck cannot see that expr_parse initialises its error out-parameter
if cppcheck --quiet --error-exitcode=1 --enable=warning,portability --suppress=missingIncludeSystem \
     --suppress=ctuuninitvar -Iengine $(printf -- '-Iengine/%s ' base expr code mech run) -Iserver engine server cli; then
  passed=$((passed + 1)); echo "cppcheck: ok"
else
  failed=$((failed + 1)); echo "cppcheck: FAIL"
fi
# Function size (issue 16): no function of engine/ or server/ over 150 lines or with a
# modified McCabe complexity over 40, as Debian's pmccabe counts them (its columns 5
# and 1). A long function is split into the steps it already has. The allow-list names
# the functions not split yet (file:function, each with its reason); it only shrinks.
fn_limit_complexity=40
fn_limit_lines=150
fn_allow=(
)
if ! command -v pmccabe >/dev/null 2>&1; then
  failed=$((failed + 1)); echo "function size: FAIL (pmccabe is not installed: scripts/install-deps.sh)"
else
  over=$(pmccabe $(git ls-files 'engine/*.c' 'server/*.c') |
    awk -v c="$fn_limit_complexity" -v l="$fn_limit_lines" '$1 > c || $5 > l {
      f = $6; sub(/\([0-9]+\):$/, "", f); print f ":" $7 " (complexity " $1 ", " $5 " lines)" }')
  for a in "${fn_allow[@]}"; do over=$(printf '%s\n' "$over" | grep -v -F "$a (" ); done
  if [ -z "$over" ]; then
    passed=$((passed + 1)); echo "function size: ok"
  else
    failed=$((failed + 1))
    echo "function size: FAIL (over $fn_limit_lines lines or complexity $fn_limit_complexity: split it into its steps)"
    printf '%s\n' "$over"
  fi
fi
if scripts/layers.sh; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "layers: FAIL (an include runs upward: engine/DESIGN.md, The layers)"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
