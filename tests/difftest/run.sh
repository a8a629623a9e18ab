#!/bin/sh
# tests/difftest/run.sh — the symbolic core against SymPy (issue 15): the adversarial
# corpus (tests/difftest/corpus: models that once fooled the engine) and a fixed set of
# random models (seeds DIFFTEST_SEEDS, default 1:31), compared at random states (see
# difftest.py). Prints a line per model and "N passed, N failed"; exits 1 on any
# disagreement. Uses Debian's /usr/bin/python3 with python3-sympy (the python3 first
# on PATH may be another interpreter). Env: HAMEL_CLI_BIN (build/hamel).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
hamel=${HAMEL_CLI_BIN:-$top/build/hamel}
py=${DIFFTEST_PYTHON:-/usr/bin/python3}
[ -x "$hamel" ] || { echo "tests/difftest: no program at $hamel (make all)"; echo "0 passed, 1 failed"; exit 1; }
if ! "$py" -c 'import sympy, mpmath' 2>/dev/null; then
  echo "tests/difftest: $py has no sympy (scripts/install-deps.sh installs python3-sympy)"
  echo "0 passed, 1 failed"
  exit 1
fi
exec "$py" "$top/tests/difftest/difftest.py" --hamel "$hamel" --corpus "$top/tests/difftest/corpus" \
  --seeds "${DIFFTEST_SEEDS:-1:31}" "$@"
