#!/bin/sh
# GET /v1/models/{id}: the summary of a model the service knows (404 otherwise).
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] model-get.sh MODEL_ID
set -eu
[ $# -eq 1 ] || { echo "usage: $0 MODEL_ID" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
  "$url/v1/models/$1"
