#!/bin/sh
# POST /v1/steady: a steady motion by Newton's method from a guessed state over named
# unknowns, and with "continuation" the branch, its eigenvalues and its stability
# changes. FILE has "model" (and may have a "steady" request); REQUEST is a JSON object
# laid over it, e.g. '{"state": {...}, "unknowns": ["thd"],
# "continuation": {"vary": "Omega", "to": 4, "steps": 6}}'.
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] steady.sh FILE [REQUEST]
set -eu
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 FILE [REQUEST_JSON]" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
jq --argjson p "${2:-{\}}" \
  '{model: (.model // .)} + (.steady // {}) + $p' "$1" |
  curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
    -H 'Content-Type: application/json' --data-binary @- "$url/v1/steady"
