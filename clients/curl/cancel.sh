#!/bin/sh
# DELETE /v1/jobs/{id}: cancel a queued or running job; prints the service's answer.
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] cancel.sh JOB_ID
set -eu
[ $# -eq 1 ] || { echo "usage: $0 JOB_ID" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
  -X DELETE "$url/v1/jobs/$1"
