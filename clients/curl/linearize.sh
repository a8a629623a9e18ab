#!/bin/sh
# POST /v1/linearize: A = d(q', u')/d(q, u), B for "inputs", and the eigenvalues of A at
# an operating point (an equilibrium or a steady motion). FILE has "model" and a
# "linearize" request (as api/examples/whipple-bicycle.json) or is a case file or model;
# POINT is a JSON object laid over the request, e.g. '{"speeds": {...}}' or
# '{"points": [...]}' or '{"select": ["phi", "delta", "phid", "deltad"]}'.
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] linearize.sh FILE [POINT]
set -eu
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 FILE [POINT_JSON]" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
jq --argjson p "${2:-{\}}" \
  '{model: (.model // .)} + (.linearize // {}) + $p' "$1" |
  curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
    -H 'Content-Type: application/json' --data-binary @- "$url/v1/linearize"
