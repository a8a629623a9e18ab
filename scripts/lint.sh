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
if scripts/layers.sh; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "layers: FAIL (an include runs upward: engine/DESIGN.md, The layers)"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
