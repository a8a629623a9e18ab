#!/bin/sh
# settings-readme.sh — regenerates README.md's "Server settings" list from the settings
# table (server/config.c) through `build/hamel-server --help-markdown`. Run `make` first.
# tests/server/test_config.c (config/readme_list_is_the_table) fails when they differ.
set -eu
cd "$(dirname "$0")/.."
bin=${HAMEL_SERVER_BIN:-build/hamel-server}
list=$(mktemp)
trap 'rm -f "$list"' EXIT
"$bin" --help-markdown >"$list"
awk -v list="$list" '
  /^<!-- settings:/ { print; while ((getline l < list) > 0) print l; skip = 1; next }
  /^<!-- end of settings -->/ { skip = 0 }
  !skip { print }
' README.md >README.md.new
mv README.md.new README.md
