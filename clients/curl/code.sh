#!/bin/sh
# POST /v1/code: one standalone source file (C or Python) with the right-hand side, its
# Jacobian, the kinematics and the parameters of FILE's model, and FILE's simulation
# request baked in (a case file's "simulation", or a request with "model"). The C file
# builds with `cc -O2 -DHAMEL_MAIN file.c -lgsl -lgslcblas -lm` into a program that prints
# the trajectory as CSV; the Python module runs with scipy.
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] code.sh FILE [c|python] > file.c
set -eu
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 FILE [c|python]" >&2; exit 2; }
url=${HAMEL_URL:-http://127.0.0.1:8080}
jq --arg lang "${2:-c}" '(.simulation // .) + {model: .model, lang: $lang}' "$1" |
  curl -sS --fail-with-body ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
    -H 'Content-Type: application/json' --data-binary @- "$url/v1/code"
