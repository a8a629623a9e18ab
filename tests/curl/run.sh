#!/bin/sh
# tests/curl/run.sh — runs every recipe in clients/curl/ as a user would paste it, against
# real hamel-servers (build/hamel-server, or $HAMEL_SERVER_BIN) on ephemeral loopback
# ports with temporary HAMEL_DATA, and checks what the recipes print against the shared
# rolling-disk case (greenwood-5.3: pass if |got - expected| <= 1e-6 + 1e-6*|expected|).
# Three servers: a default one, a one-worker one with a one-slot queue (so the batch
# sweep meets 503 + Retry-After), and one that wants a bearer token.
# Prints one line per check and "N passed, N failed"; exits 1 if any failed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${HAMEL_SERVER_BIN:-$top/build/hamel-server}
recipes=$top/clients/curl
case_file=$top/../shared/cases/greenwood-5.3-rolling-disk.json
unset HAMEL_TOKEN HAMEL_URL
for tool in curl jq awk; do
  command -v "$tool" >/dev/null 2>&1 || { echo "tests/curl: $tool is missing (scripts/install-deps.sh)" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "tests/curl: no server binary at $bin" >&2; exit 1; }
[ -r "$case_file" ] || { echo "tests/curl: no case file at $case_file" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/hamel-curl-test.XXXXXX")
: >"$work/pids"
cleanup() {
  while read -r pid; do kill "$pid" 2>/dev/null; done <"$work/pids"
  while read -r pid; do wait "$pid" 2>/dev/null; done <"$work/pids"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server NAME [VAR=value ...]: starts a server and sets $port.
start_server() {
  name=$1
  shift
  dir=$work/server-$name
  mkdir -p "$dir/data"
  env HAMEL_PORT=0 HAMEL_ADDR=127.0.0.1 HAMEL_DATA="$dir/data" "$@" "$bin" >"$dir/log" 2>&1 &
  echo $! >>"$work/pids"
  port=
  tries=0
  while [ $tries -lt 200 ]; do
    port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$dir/log" | head -n 1)
    [ -n "$port" ] && return 0
    sleep 0.1
    tries=$((tries + 1))
  done
  echo "tests/curl: the $name server did not start; its log:" >&2
  cat "$dir/log" >&2
  return 1
}

pass=0 fail=0
# check NAME COMMAND...: one assertion; the command's output is shown when it fails.
check() {
  name=$1
  shift
  if "$@" >"$work/check.out" 2>&1; then
    pass=$((pass + 1))
    echo "ok   $name"
  else
    fail=$((fail + 1))
    echo "FAIL $name"
    sed 's/^/     /' "$work/check.out" | head -n 20
  fi
}

# jq -e over a file, with tolerance helpers and the case as $case.
JQDEFS='def absv: if . < 0 then -. else . end;
def close($a; $e): ($a | type) == "number" and (($a - $e) | absv) <= 1e-6 + 1e-6 * ($e | absv);'
jqe() { # FILE FILTER
  jq -e --slurpfile case "$case_file" "$JQDEFS $2" "$1" >/dev/null || { echo "jq: $2"; head -c 600 "$1"; echo; return 1; }
}
# run_to FILE COMMAND...: runs a recipe, its stdout into FILE; the exit status is kept.
run_to() {
  out=$1
  shift
  "$@" >"$out" 2>"$out.err"
}

start_server main || exit 1
export HAMEL_URL=http://127.0.0.1:$port
C=$case_file
W=$work

# health.sh
run_to "$W/health" "$recipes/health.sh"
check "health.sh says ok" jqe "$W/health" '.status == "ok"'

# models.sh, model-get.sh
run_to "$W/model" "$recipes/models.sh" "$C"
check "models.sh exits 0 on a valid case" test $? -eq 0
check "models.sh: sha256 id, n=5 m=2 dof=3" jqe "$W/model" \
  '(.model_id | test("^sha256:[0-9a-f]{64}$")) and .n == 5 and .m == 2 and .dof == 3'
id=$(jq -r .model_id "$W/model")
jq .model "$C" >"$W/model-only.json"
run_to "$W/model2" "$recipes/models.sh" "$W/model-only.json"
check "models.sh: a bare model gets the same id" jqe "$W/model2" ".model_id == \"$id\""
run_to "$W/model-get" "$recipes/model-get.sh" "$id"
check "model-get.sh returns the summary" jqe "$W/model-get" ".model_id == \"$id\" and (.constraints | length) == 2"
run_to "$W/model-404" "$recipes/model-get.sh" "sha256:0000000000000000000000000000000000000000000000000000000000000000"
check "model-get.sh of an unknown id fails" test $? -ne 0
check "model-get.sh of an unknown id prints a 404 problem" jqe "$W/model-404" '.status == 404 and (.type | type) == "string"'

# A malformed model: the problem names the path and the column.
jq '.model.kinetic_energy = "1/2*m*x'"'"'^2 + bogus*y'"'"'^2"' "$C" >"$W/bad-case.json"
run_to "$W/bad" "$recipes/models.sh" "$W/bad-case.json"
check "models.sh of a bad model fails" test $? -ne 0
check "models.sh of a bad model: 422 at kinetic_energy, column 14" jqe "$W/bad" \
  '.status == 422 and (.errors[0].path | test("kinetic_energy")) and .errors[0].column == 14'

# equations.sh
run_to "$W/eq" "$recipes/equations.sh" "$id"
check "equations.sh: 3x3 mass matrix, 5 kinematic equations, 3 forcing terms" jqe "$W/eq" \
  "(.mass_matrix | length) == 3 and (.mass_matrix[0] | length) == 3 and (.kinematics | length) == 5 and (.forcing | length) == 3 and .model_id == \"$id\""

# hamel.sh at the case's initial state, and at another theta.
run_to "$W/gamma" "$recipes/hamel.sh" "$C"
check "hamel.sh: the case's gamma at the initial state" jqe "$W/gamma" \
  '.points[0].gamma as $g | ($case[0].expected.hamel_at_initial | all(.[]; . as $e |
     any($g[]; .j == $e.j and .r == $e.r and .l == $e.l and close(.value; $e.value)))) and
   ($g | length) == ($case[0].expected.hamel_at_initial | length)'
run_to "$W/gamma2" "$recipes/hamel.sh" "$C" '{"theta": 1.0}'
check "hamel.sh with q override: gamma^slip_y_wd,Omega = -r cos(phi)/sin(theta)" jqe "$W/gamma2" \
  '.points[0].gamma | any(.[]; .j == "slip_y" and .r == "wd" and .l == "Omega" and close(.value; -0.5 / (1.0 | sin)))'

# evaluate.sh at the case's reference samples: Greenwood (5.194) solved for thd'.
run_to "$W/eval" "$recipes/evaluate.sh" "$C"
check "evaluate.sh: thd' = 4/5 (wd^2 cot/4 - 3/2 wd Omega - g/r cos theta) at every sample" jqe "$W/eval" \
  '(.states | length) == ($case[0].expected.samples | length) and (.states | all(.[]; .q.theta as $th |
     .speeds.wd as $w | .speeds.Omega as $W | close(.speeds_dot.thd;
     0.8 * (0.25 * $w * $w * ($th | cos) / ($th | sin) - 1.5 * $w * $W - 9.81 / 0.5 * ($th | cos)))))'
# linearize.sh: the upright disk at spin 4: +-i sqrt((12 Omega^2 - 4 g/r)/5)
run_to "$W/lin" "$recipes/linearize.sh" "$C" '{"q": {"phi": 0, "theta": 1.5707963267948966, "psi": 0, "x": 0, "y": 0}, "speeds": {"wd": 0, "thd": 0, "Omega": 4}}'
check "linearize.sh: the upright rolling disk's eigenvalues +-4.76487i" jqe "$W/lin" \
  '(.points[0].eigenvalues | map(.im) | max) as $w | close($w; ((12 * 16 - 4 * 9.81 / 0.5) / 5 | sqrt)) and (.states | length) == 8'
run_to "$W/lin-bad" "$recipes/linearize.sh" "$C" '{"q": {"phi": 0, "theta": 1.2, "psi": 0, "x": 0, "y": 0}, "speeds": {"wd": 0, "thd": 0, "Omega": 0}}'
check "linearize.sh of a falling disk fails with 422 at speeds.thd" jqe "$W/lin-bad" \
  '.status == 422 and any(.errors[]; .path == "speeds.thd")'

# steady.sh: the upright disk's branch becomes stable at Omega = sqrt(g / 3r)
run_to "$W/steady" "$recipes/steady.sh" "$C" '{"state": {"q": {"phi": 0, "theta": 1.5707963267948966, "psi": 0, "x": 0, "y": 0}, "speeds": {"wd": 0, "thd": 0, "Omega": 1}}, "unknowns": ["thd"], "continuation": {"vary": "Omega", "to": 4, "steps": 6}}'
check "steady.sh: the upright disk is stable from sqrt(g/3r) on" jqe "$W/steady" \
  '(.stability_changes | length) == 1 and close(.stability_changes[0].value; (9.81 / 1.5 | sqrt)) and .stability_changes[0].kind == "real"'
# code.sh: the C file of the case compiles and prints the case's last sample
run_to "$W/code.c" "$recipes/code.sh" "$C" c
if cc -O2 -DHAMEL_MAIN -x c "$W/code.c" -o "$W/code" -lgsl -lgslcblas -lm 2>"$W/cc.err" && "$W/code" >"$W/code.csv"; then
  tail -n 1 "$W/code.csv" | awk -F, '{printf "{\"t\": %s, \"Omega\": %s}\n", $1, $9}' >"$W/code-last"
  check "code.sh: the C program's last row is the case's last sample" jqe "$W/code-last" \
    '($case[0].expected.samples[-1]) as $e | close(.t; $e.t) and close(.Omega; $e.speeds.Omega)'
else
  check "code.sh: the C file compiles and runs" false
fi

# simulate.sh: the case within its tolerance, then the same request from the cache.
SAMPLES='. as $r | $case[0].expected.samples | to_entries | all(.[]; .key as $k | .value as $s |
  (["q", "speeds", "qdot"] | all(.[]; . as $grp | $s[$grp] | to_entries |
     all(.[]; close($r.trajectory[$grp][.key][$k]; .value)))))'
run_to "$W/sim" "$recipes/simulate.sh" "$C" 60
check "simulate.sh finishes within ?wait=60" jqe "$W/sim" '.status == "done"'
check "simulate.sh: every sample of q, speeds, qdot within the case tolerance" jqe "$W/sim" "$SAMPLES"
check "simulate.sh: energy drift below 1e-8, constraints below 1e-9" jqe "$W/sim" \
  '.checks.energy.max_abs_drift < 1e-8 and .checks.constraints.max_abs_residual < 1e-9'
run_to "$W/sim-cached" "$recipes/simulate.sh" "$C" 0
check "simulate.sh again is answered from the cache" jqe "$W/sim-cached" \
  '.cached == true and .status == "done"'

# simulate.sh with WAIT=0 on a new request, then job.sh WAIT until done.
jq '.simulation.parameters = {"r": 0.3}' "$C" >"$W/case-r03.json"
run_to "$W/stub" "$recipes/simulate.sh" "$W/case-r03.json" 0
check "simulate.sh WAIT=0 returns a job (or the result)" jqe "$W/stub" \
  '(.job_id | type) == "string" and (.status | IN("queued", "running", "done"))'
job=$(jq -r .job_id "$W/stub")
run_to "$W/job" "$recipes/job.sh" "$job" 30
check "job.sh JOB 30 waits for the result" jqe "$W/job" \
  ".status == \"done\" and .job_id == \"$job\" and (.trajectory.t | length) == 11"

# cancel.sh on a long job.
jq '.simulation.t_end = 1e6 | .simulation.integrator.max_steps = 1000000000 | .simulation.output.samples = 101' \
  "$C" >"$W/long.json"
run_to "$W/long" "$recipes/simulate.sh" "$W/long.json" 0
check "simulate.sh of a long job answers at once with a job" jqe "$W/long" \
  '.status | IN("queued", "running")'
long=$(jq -r .job_id "$W/long")
run_to "$W/job-running" "$recipes/job.sh" "$long"
check "job.sh shows the long job queued or running with progress" jqe "$W/job-running" \
  '(.status | IN("queued", "running")) and (.progress // 0) >= 0 and (.progress // 0) < 1'
run_to "$W/cancel" "$recipes/cancel.sh" "$long"
check "cancel.sh exits 0" test $? -eq 0
run_to "$W/job-cancelled" "$recipes/job.sh" "$long" 10
check "job.sh after cancel.sh: cancelled" jqe "$W/job-cancelled" '.status == "cancelled"'
run_to "$W/cancel-404" "$recipes/cancel.sh" "0123456789abcdef0123456789abcdef"
check "cancel.sh of an unknown job fails with 404" sh -c \
  "[ $? -ne 0 ] && jq -e '.status == 404' '$W/cancel-404' >/dev/null"

# batch.sh: the same 50 values in one POST /v1/batches, streamed back as NDJSON.
"$recipes/batch.sh" -o "$W/batch.csv" >"$W/batch.out" 2>"$W/batch.err"
check "batch.sh exits 0" test $? -eq 0
check "batch.sh: a header and 50 rows" sh -c "[ \$(wc -l <'$W/batch.csv') -eq 51 ]"
check "batch.sh: Omega 0.5..25 in order, each once" awk -F, \
  'NR > 1 { k = NR - 1; if ($1 + 0 != k * 0.5) { print "row " k ": Omega " $1; bad = 1 } } END { exit bad || NR != 51 }' "$W/batch.csv"

# batch-sweep.sh: 50 Omega values, 8 at a time.
"$recipes/batch-sweep.sh" -o "$W/sweep.csv" >"$W/sweep.out" 2>"$W/sweep.err"
check "batch-sweep.sh exits 0" test $? -eq 0
check "batch-sweep.sh: header and 50 rows" sh -c \
  "head -n 1 '$W/sweep.csv' | grep -qx 'Omega,theta_final,energy_drift,constraint_residual' && [ \$(wc -l <'$W/sweep.csv') -eq 51 ]"
check "batch-sweep.sh: Omega 0.5..25 in order, each once" awk -F, \
  'NR > 1 { k = NR - 1; if ($1 + 0 != k * 0.5) { print "row " k ": Omega " $1; bad = 1 } } END { exit bad || NR != 51 }' "$W/sweep.csv"
check "batch-sweep.sh: every run conserves energy (< 1e-6) and keeps the constraints (< 1e-8)" awk -F, \
  'NR > 1 && !($3 + 0 < 1e-6 && $3 != "" && $4 + 0 < 1e-8 && $4 != "") { print; bad = 1 } END { exit bad }' "$W/sweep.csv"
expected_theta=$(jq '.expected.samples[-1].q.theta' "$C")
check "batch-sweep.sh: the Omega=4 row is the case's final theta" awk -F, -v e="$expected_theta" \
  'NR > 1 && $1 + 0 == 4 { d = $2 - e; if (d < 0) d = -d; found = 1; if (d > 1e-6 + 1e-6 * e) { print "theta " $2 " vs " e; exit 1 } } END { exit !found }' "$W/sweep.csv"
check "batch-sweep.sh: theta_final differs across Omega" sh -c \
  "[ \$(tail -n +2 '$W/sweep.csv' | cut -d, -f2 | sort -u | wc -l) -gt 40 ]"

# batch-sweep.sh against a one-worker, one-slot server: 503s, retried after Retry-After.
start_server tight HAMEL_WORKERS=1 HAMEL_QUEUE=1 || exit 1
jq '.simulation.t_end = 50 | .simulation.output.samples = 51' "$C" >"$W/case-50s.json"
HAMEL_URL=http://127.0.0.1:$port "$recipes/batch-sweep.sh" -n 12 -j 6 -o "$W/tight.csv" "$W/case-50s.json" \
  >"$W/tight.out" 2>"$W/tight.err"
check "batch-sweep.sh on a full queue still completes all 12 runs" sh -c \
  "[ $? -eq 0 ] && [ \$(wc -l <'$W/tight.csv') -eq 13 ]"
check "batch-sweep.sh on a full queue met 503s and retried them" sh -c \
  "cat '$W/tight.err'; grep -Eq ', [1-9][0-9]* retried' '$W/tight.err'"
check "the tight server's 503 carries Retry-After" sh -c \
  "for i in 1 2 3 4; do curl -sS -D '$W/503.hdr' -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' \
     --data-binary \"\$(jq -c '.simulation + {model: .model}' '$W/long.json')\" 'http://127.0.0.1:$port/v1/simulations'; \
   done | grep -q 503 && grep -qi '^retry-after: *[0-9]' '$W/503.hdr'"

# A server with a bearer token: the recipes send $HAMEL_TOKEN.
start_server auth HAMEL_TOKEN=s3cret || exit 1
run_to "$W/noauth" env HAMEL_URL=http://127.0.0.1:$port "$recipes/models.sh" "$C"
check "without HAMEL_TOKEN the token server answers 401" jqe "$W/noauth" '.status == 401'
run_to "$W/auth" env HAMEL_URL=http://127.0.0.1:$port HAMEL_TOKEN=s3cret "$recipes/models.sh" "$C"
check "with HAMEL_TOKEN the recipe is let in" jqe "$W/auth" ".model_id == \"$id\""

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
