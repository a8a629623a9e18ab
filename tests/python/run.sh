#!/bin/sh
# tests/python/run.sh — the Python client as a user installs it: a fresh virtual
# environment made by Debian's /usr/bin/python3 -m venv --system-site-packages in
# build/pyvenv, `pip install --no-build-isolation clients/python`, then
# tests/python/test_client.py (pytest) against a real build/hamel-server on an
# ephemeral loopback port with a temporary HAMEL_DATA. Ends with "N passed, N failed".
# Env: HAMEL_SERVER_BIN (build/hamel-server), PYTHON (/usr/bin/python3).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
srv=${HAMEL_SERVER_BIN:-$top/build/hamel-server}
py=${PYTHON:-/usr/bin/python3}
venv=$top/build/pyvenv
cases=$top/../shared/cases
unset HAMEL_TOKEN HAMEL_URL
[ -x "$srv" ] || { echo "tests/python: no server at $srv (make all)"; echo "0 passed, 1 failed"; exit 1; }
[ -x "$top/build/hamel" ] || { echo "tests/python: no build/hamel (make all)"; echo "0 passed, 1 failed"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/hamel-python-test.XXXXXX")
pids=
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null; done
  for p in $pids; do wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$venv"
if ! "$py" -m venv --system-site-packages "$venv" >"$work/venv.log" 2>&1 ||
  ! (cd "$top" && "$venv/bin/pip" install -q --no-build-isolation clients/python) >>"$work/venv.log" 2>&1; then
  cat "$work/venv.log"
  echo "tests/python: the virtual environment or pip install failed (scripts/install-deps.sh installs python3-venv, python3-wheel, python3-numpy)"
  echo "0 passed, 1 failed"
  exit 1
fi
echo "ok   pip install --no-build-isolation clients/python into a --system-site-packages venv"

# start_server NAME [VAR=value ...]: a server on an ephemeral port; sets $port
start_server() {
  name=$1
  shift
  mkdir -p "$work/$name/data"
  : >"$work/$name/log"
  env HAMEL_PORT=0 HAMEL_ADDR=127.0.0.1 HAMEL_DATA="$work/$name/data" "$@" "$srv" >"$work/$name/log" 2>&1 &
  pids="$pids $!"
  port=
  tries=0
  while [ -z "$port" ] && [ $tries -lt 200 ]; do
    port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$work/$name/log" | head -n 1)
    [ -n "$port" ] || sleep 0.1
    tries=$((tries + 1))
  done
  [ -n "$port" ] || { cat "$work/$name/log"; echo "tests/python: the $name server did not start"; echo "1 passed, 1 failed"; exit 1; }
}
# HAMEL_TEST_FAULTS: a model named __fault_segv__ crashes the engine (the quarantine's test);
# HAMEL_MAX_STEPS: the long runs of the interrupt tests (max_steps 1e8) take their steps and
# are still running when interrupted (at the engine's 1e7 an idle machine ended one in 1.4 s
# with step-limit, before the test's Ctrl-C at 1.5 s)
start_server main HAMEL_TEST_FAULTS=1 HAMEL_MAX_STEPS=1000000000
main_port=$port
start_server token HAMEL_TOKEN=python-test-token
token_port=$port

# run from outside the source tree, so `import hamel` is the installed package
cd "$work" && HAMEL_TEST_URL=http://127.0.0.1:$main_port HAMEL_TEST_TOKEN_URL=http://127.0.0.1:$token_port \
  HAMEL_TEST_TOKEN=python-test-token HAMEL_TEST_CLI=$top/build/hamel HAMEL_TEST_CASES=$cases \
  "$venv/bin/python" -m pytest -p no:cacheprovider -q -rfE "$top/tests/python/test_client.py" >"$work/pytest.log" 2>&1
rc=$?
cat "$work/pytest.log"
last=$(tail -n 1 "$work/pytest.log")
p=$(echo "$last" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
f=$(echo "$last" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0)
e=$(echo "$last" | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+' || echo 0)
f=$((f + e))
[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
p=$((p + 1)) # the install above
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
