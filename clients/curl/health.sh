#!/bin/sh
# GET /v1/health: is the service up? Prints {"status":"ok","version":...}.
# Usage: [HAMEL_URL=http://host:8080] [HAMEL_TOKEN=...] health.sh
set -eu
url=${HAMEL_URL:-http://127.0.0.1:8080}
curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
  "$url/v1/health"
