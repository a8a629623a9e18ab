#!/bin/sh
# POST /v1/evaluate: q', the speed derivatives u', q'' and the multipliers at states.
# FILE is a case file (its model, at its reference samples, or its initial state if it
# has none) or a file {"model", "evaluate": {"states": [...]}}; STATES is a JSON array of
# states {t, q, speeds | qdot} used instead.
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] evaluate.sh FILE [STATES]
set -eu
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 CASE_OR_FILE [STATES_JSON]" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
jq --argjson s "${2:-null}" \
  '{model: (.model // .), states: ($s // .evaluate.states //
     ((.expected.samples // []) | map({t, q, speeds}) | if length > 0 then . else null end) //
     [.simulation.initial])}' "$1" |
  curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
    -H 'Content-Type: application/json' --data-binary @- "$url/v1/evaluate"
