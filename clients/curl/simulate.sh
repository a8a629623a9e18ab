#!/bin/sh
# POST /v1/simulations?wait=WAIT: start a simulation and wait up to WAIT seconds
# (default 30; 0 returns at once). Prints the result if it finished in time (200),
# else the job stub {"job_id","status"} (202) to follow with job.sh.
# FILE is a case file (its "simulation" with its "model") or a simulation request.
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] simulate.sh FILE [WAIT]
set -eu
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 CASE_OR_REQUEST_FILE [WAIT]" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
jq 'if .simulation then .simulation + {model: .model} else . end' "$1" |
  curl -sS --fail-with-body -w '\n' ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
    -H 'Content-Type: application/json' --data-binary @- "$url/v1/simulations?wait=${2:-30}"
