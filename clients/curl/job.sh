#!/bin/sh
# GET /v1/jobs/{id}: a job's status and progress (0..1), and its result once done.
# WAIT (seconds, optional) asks the service to hold the answer until the job ends.
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] job.sh JOB_ID [WAIT]
set -eu
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 JOB_ID [WAIT]" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
  "$url/v1/jobs/$1${2:+?wait=$2}"
