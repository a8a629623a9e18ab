#!/bin/sh
# POST /v1/hamel: the Hamel coefficients gamma^j_rl (and gamma^j_r) at one configuration.
# FILE is a case file (its model, at its initial q and t) or a model; Q is a JSON object
# of coordinates laid over that q, e.g. '{"theta": 1.0}' (a bare model needs them all).
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] hamel.sh FILE [Q]
set -eu
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 MODEL_OR_CASE_FILE [Q_JSON]" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
jq --argjson q "${2:-{\}}" \
  '{model: (.model // .), t: (.simulation.initial.t // 0), q: ((.simulation.initial.q // {}) + $q)}' "$1" |
  curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
    -H 'Content-Type: application/json' --data-binary @- "$url/v1/hamel"
