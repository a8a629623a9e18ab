#!/bin/sh
# POST /v1/batches: sweeps the rolling disk's initial spin Omega over N values in ONE
# request and streams the results back as NDJSON (one line per run, in completion order),
# writing one CSV row per run as each line arrives, sorted by Omega at the end:
#   Omega,theta_final,energy_drift,constraint_residual,cached
# The server runs the batch on its worker pool, feeding it gradually so other users keep
# their share of the queue; runs it has computed before come from its result cache.
#
# Usage: [HAMEL_URL=...] [HAMEL_TOKEN=...] batch.sh [-n N] [-o OUT.csv] [CASE]
#   N      number of Omega values (default 50): OMEGA_FROM + k*OMEGA_STEP, k = 0..N-1
#          (defaults 0.5 and 0.5, so 0.5 .. 25)
#   CASE   a case file with model + simulation (default: the shared rolling-disk case)
# Environment: OMEGA_FROM, OMEGA_STEP.
# Exits 1 if any run failed (its line is reported on stderr), 22 on an HTTP error (the
# problem document is printed), 0 otherwise.
set -eu
url=${HAMEL_URL:-http://127.0.0.1:8080}
n=50 outfile=
while getopts n:o: opt; do
  case $opt in
    n) n=$OPTARG ;;
    o) outfile=$OPTARG ;;
    *) sed -n '2,16s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
here=$(cd "$(dirname "$0")" && pwd)
case_file=${1:-$here/../../../shared/cases/greenwood-5.3-rolling-disk.json}
[ -r "$case_file" ] || { echo "$0: cannot read the case file $case_file" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/hamel-batch.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
start=$(date +%s)

# The batch: the case's model and simulation as the base, one run per Omega. "run" in
# fields echoes each run's own object in its line, so a line stands on its own.
jq -c --argjson n "$n" --argjson from "${OMEGA_FROM:-0.5}" --argjson step "${OMEGA_STEP:-0.5}" '
  {model: .model, base: .simulation, fields: ["run", "final", "checks"],
   runs: [range(0; $n) as $k | {initial: {speeds: {Omega: ($from + $k * $step)}}}]}' \
  "$case_file" >"$work/batch.json"

# Stream: curl -N hands each line on as it arrives and jq --unbuffered turns it into a
# CSV row at once (tail -f the rows file to watch a long batch). Lines come in completion
# order; the rows are sorted by Omega at the end.
{ curl -sS -N --fail-with-body ${HAMEL_TOKEN:+-H "Authorization: Bearer $HAMEL_TOKEN"} \
    -H 'Content-Type: application/json' -H 'Accept: application/x-ndjson' \
    --data-binary @"$work/batch.json" "$url/v1/batches" || echo $? >"$work/rc"; } |
  tee "$work/lines.ndjson" |
  jq --unbuffered -r 'select(.status == "done") |
    [.run.initial.speeds.Omega, .final.q.theta, .checks.energy.max_abs_drift,
     .checks.constraints.max_abs_residual, .cached] | @csv' >"$work/rows.csv"
if [ -s "$work/rc" ]; then # an HTTP error: the body is a problem document
  cat "$work/lines.ndjson" >&2
  echo >&2
  exit "$(cat "$work/rc")"
fi
jq -r 'select(.status != "done") | "run \(.index): \(.status): \(.problem.detail // .problem.title)"' \
  "$work/lines.ndjson" >&2
sort -t, -k1,1g "$work/rows.csv" >"$work/sorted.csv"
{
  echo "Omega,theta_final,energy_drift,constraint_residual,cached"
  cat "$work/sorted.csv"
} >"$work/sweep.csv"
if [ -n "$outfile" ]; then cp "$work/sweep.csv" "$outfile"; else cat "$work/sweep.csv"; fi

lines=$(wc -l <"$work/lines.ndjson" | tr -d ' ')
ok=$(wc -l <"$work/rows.csv" | tr -d ' ')
echo "batch: $n runs, $lines lines, $ok ok, $((lines - ok)) failed, $(($(date +%s) - start)) s" >&2
[ "$ok" -eq "$n" ]
