#!/bin/sh
# GET /v1/models/{id}/equations: the derived equations (kinematics, mass matrix,
# forcing, gamma, T*) as expression strings.
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] equations.sh MODEL_ID
set -eu
[ $# -eq 1 ] || { echo "usage: $0 MODEL_ID" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
  "$url/v1/models/$1/equations"
