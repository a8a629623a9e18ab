#!/bin/sh
# Sweeps the rolling disk's initial spin Omega over N values against the hamel service,
# JOBS runs at a time, and writes one CSV row per run:
#   Omega,theta_final,energy_drift,constraint_residual
# (theta at t_end, checks.energy.max_abs_drift, checks.constraints.max_abs_residual),
# in Omega order. The model is submitted once; each run sends only its model_id.
# A 503 (queue full) is retried after the Retry-After it carries; a run that still
# fails is reported on stderr and left out, and the script then exits 1.
#
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] batch-sweep.sh [-n N] [-j JOBS] [-o OUT.csv] [CASE]
#   N      number of Omega values (default 50): OMEGA_FROM + k*OMEGA_STEP, k = 0..N-1
#          (defaults 0.5 and 0.5, so 0.5 .. 25)
#   JOBS   runs in flight at once (default 8)
#   CASE   a case file with model + simulation (default: the shared rolling-disk case)
# Environment: OMEGA_FROM, OMEGA_STEP, WAIT (server-side wait per request, default 30),
#   MAX_TRIES (attempts per run on 503 or a dropped connection, default 20).
set -eu
url=${HAMEL_URL:-http://127.0.0.1:8080}
wait_s=${WAIT:-30}
max_tries=${MAX_TRIES:-20}

# One run (internal: the script calls itself through xargs): WORKDIR INDEX OMEGA.
if [ "${1:-}" = "--one" ]; then
  work=$2 i=$3 omega=$4
  req=$work/req.$i.json out=$work/out.$i.json hdr=$work/hdr.$i
  jq --argjson w "$omega" '.initial.speeds.Omega = $w' "$work/base.json" >"$req"
  tries=0
  while :; do
    tries=$((tries + 1))
    code=$(curl -sS -o "$out" -D "$hdr" -w '%{http_code}' \
      ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
      -H 'Content-Type: application/json' --data-binary @"$req" \
      "$url/v1/simulations?wait=$wait_s") || code=000
    case $code in
      200) break ;;
      202)
        # Still running: follow the job until it ends.
        job=$(jq -r .job_id "$out")
        while :; do
          code=$(curl -sS -o "$out" -w '%{http_code}' \
            ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
            "$url/v1/jobs/$job?wait=$wait_s") || code=000
          [ "$code" = 200 ] || { echo "run $i (Omega=$omega): job $job: HTTP $code" >&2; exit 1; }
          case $(jq -r .status "$out") in
            queued | running) sleep 0.2 ;;
            *) break ;;
          esac
        done
        break ;;
      503 | 000)
        if [ "$tries" -ge "$max_tries" ]; then
          echo "run $i (Omega=$omega): HTTP $code after $tries tries" >&2
          exit 1
        fi
        ra=$(tr -d '\r' <"$hdr" 2>/dev/null | sed -n 's/^[Rr]etry-[Aa]fter: *\([0-9][0-9]*\).*/\1/p' | tail -n 1)
        echo "$code" >>"$work/retries"
        sleep "${ra:-1}" ;;
      *)
        echo "run $i (Omega=$omega): HTTP $code: $(head -c 300 "$out")" >&2
        exit 1 ;;
    esac
  done
  if [ "$(jq -r .status "$out")" != done ]; then
    echo "run $i (Omega=$omega): $(jq -c '{status, problem: (.problem // .error)}' "$out")" >&2
    exit 1
  fi
  jq -r --arg i "$i" --argjson w "$omega" \
    '[($i | tonumber), $w, .trajectory.q.theta[-1], .checks.energy.max_abs_drift,
      .checks.constraints.max_abs_residual] | @csv' "$out" >"$work/row.$i"
  rm -f "$req" "$out" "$hdr"
  exit 0
fi

n=50 jobs=8 outfile=
while getopts n:j:o: opt; do
  case $opt in
    n) n=$OPTARG ;;
    j) jobs=$OPTARG ;;
    o) outfile=$OPTARG ;;
    *) sed -n '2,20s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
here=$(cd "$(dirname "$0")" && pwd)
case_file=${1:-$here/../../../shared/cases/greenwood-5.3-rolling-disk.json}
[ -r "$case_file" ] || { echo "$0: cannot read the case file $case_file" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/hamel-sweep.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
start=$(date +%s)

# Submit the model once; every run then refers to it by id.
jq .model "$case_file" >"$work/model.json"
model_id=$(curl -sS --fail-with-body ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
  -H 'Content-Type: application/json' --data-binary @"$work/model.json" "$url/v1/models" |
  jq -r .model_id)
jq --arg id "$model_id" '.simulation + {model_id: $id}' "$case_file" >"$work/base.json"

awk -v n="$n" -v from="${OMEGA_FROM:-0.5}" -v step="${OMEGA_STEP:-0.5}" \
  'BEGIN { for (k = 0; k < n; k++) printf "%d %.12g\n", k, from + k * step }' |
  xargs -P "$jobs" -n 2 sh "$0" --one "$work" || true

ok=$(find "$work" -name 'row.*' | wc -l | tr -d ' ')
retries=$(cat "$work/retries" 2>/dev/null | wc -l | tr -d ' ')
{
  echo "Omega,theta_final,energy_drift,constraint_residual"
  find "$work" -name 'row.*' -exec cat {} + | sort -t, -k1,1n | cut -d, -f2-
} >"$work/sweep.csv"
if [ -n "$outfile" ]; then cp "$work/sweep.csv" "$outfile"; else cat "$work/sweep.csv"; fi
echo "batch-sweep: $n runs, $ok ok, $((n - ok)) failed, $retries retried after 503 or a dropped connection, $(($(date +%s) - start)) s" >&2
[ "$ok" -eq "$n" ]
