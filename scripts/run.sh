#!/usr/bin/env bash
# The README's run command: installs what is missing, builds, and starts the server
# on http://127.0.0.1:8080 (HAMEL_PORT, HAMEL_ADDR and the other HAMEL_* variables of
# the README change that). Ctrl-C or SIGTERM stops it gracefully.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh run
make -j"$(nproc 2>/dev/null || echo 2)" build/hamel-server build/hamel >/dev/null
exec build/hamel-server "$@"
