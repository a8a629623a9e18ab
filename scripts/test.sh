#!/usr/bin/env bash
# The README's test command: installs what is missing (Debian packages, npm
# packages of the browser tests), then runs the whole suite (scripts/run-tests.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
exec scripts/run-tests.sh
