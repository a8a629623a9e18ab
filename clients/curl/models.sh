#!/bin/sh
# POST /v1/models: validate and compile a model; prints the model summary (201 new,
# 200 known) or the 422 problem document naming the bad path and column (exit 22).
# FILE is a model, or a case file whose "model" is sent; "-" reads standard input.
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] models.sh FILE
set -eu
[ $# -eq 1 ] || { echo "usage: $0 MODEL_OR_CASE_FILE" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
jq '.model // .' "$1" |
  curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
    -H 'Content-Type: application/json' --data-binary @- "$url/v1/models"
