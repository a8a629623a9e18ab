#!/usr/bin/env bash
# Installs the Debian packages hamel needs that are not installed yet.
# Usage: scripts/install-deps.sh [run|test|bench]   (default: test, a superset of run)
# Needs root (or sudo) only when something is missing.
set -euo pipefail
what=${1:-test}
run_pkgs=(build-essential make pkg-config libgsl-dev libjansson-dev libmicrohttpd-dev
          libssl-dev libtcc-dev libcurl4-openssl-dev libsqlite3-dev libhiredis-dev zlib1g-dev curl ca-certificates jq)
# redis-server and nginx: the cluster test (tests/cluster: three servers on one Redis behind nginx)
# python3-*: the Python client's tests (tests/python: a venv with the system's numpy);
# python3-scipy: the generated Python modules integrated by solve_ivp (tests/export)
# pmccabe: the function-size check of scripts/lint.sh
test_pkgs=(libcriterion-dev jq clang clang-format cppcheck pmccabe redis-server nginx
           python3-venv python3-wheel python3-setuptools python3-numpy python3-pandas python3-pytest
           python3-scipy python3-sympy)  # scipy: tests/export; sympy: tests/difftest (the symbolic core against SymPy)
web_pkgs=(chromium fonts-dejavu-extra)  # the extra fonts carry DejaVu Math, for MathML in screenshots
bench_pkgs=(wrk valgrind python3 python3-sympy)  # sympy: the SymPy-generated C baselines of bench-scale.sh
pkgs=("${run_pkgs[@]}")
case "$what" in
  run) ;;
  test) pkgs+=("${test_pkgs[@]}" "${web_pkgs[@]}") ;;
  bench) pkgs+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "usage: $0 [run|test|bench]" >&2; exit 2 ;;
esac
# node and npm drive the browser tests; the machine may already have them.
if [ "$what" = test ] && ! command -v npm >/dev/null 2>&1; then pkgs+=(nodejs npm); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
