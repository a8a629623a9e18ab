#!/bin/sh
# tests/cli/run.sh — the `hamel` program as a user runs it: build/hamel (and
# build/hamel-remote, which `hamel remote` execs) against the shared rolling-disk case,
# locally and against a real hamel-server on an ephemeral loopback port with a temporary
# HAMEL_DATA. Prints one line per check and "N passed, N failed"; exits 1 if any failed.
# Env: HAMEL_SERVER_BIN (build/hamel-server), HAMEL_CLI_BIN (build/hamel; hamel-remote
# beside it), HAMEL_CLI_LONG_T (40000: t_end of the rolling disk for a run of a few
# seconds; smaller for a sanitizer build, which integrates several times slower).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
srv=${HAMEL_SERVER_BIN:-$top/build/hamel-server}
hamel=${HAMEL_CLI_BIN:-$top/build/hamel}
case_file=$top/../shared/cases/greenwood-5.3-rolling-disk.json
unset HAMEL_TOKEN HAMEL_URL
for f in "$srv" "$hamel" "$(dirname "$hamel")/hamel-remote"; do
  [ -x "$f" ] || { echo "tests/cli: no program at $f (make all)" >&2; exit 1; }
done
command -v jq >/dev/null 2>&1 || { echo "tests/cli: jq is missing (scripts/install-deps.sh)" >&2; exit 1; }
[ -r "$case_file" ] || { echo "tests/cli: no case file at $case_file" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/hamel-cli-test.XXXXXX")
pid=
tpid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$tpid" ] && kill "$tpid" 2>/dev/null && wait "$tpid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/data"
: >"$work/server.log"
# HAMEL_TEST_FAULTS=1: a model named __fault_segv__ crashes the engine (the quarantine's check)
HAMEL_TEST_FAULTS=1 HAMEL_PORT=0 HAMEL_ADDR=127.0.0.1 HAMEL_DATA="$work/data" "$srv" >"$work/server.log" 2>&1 &
pid=$!
# listening_port LOG: the port a server started in the background prints to LOG, waiting
# up to 20 s for it (empty if it never does)
listening_port() {
  lp= lt=0
  while [ -z "$lp" ] && [ $lt -lt 200 ]; do
    lp=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$1" | head -n 1)
    [ -n "$lp" ] || sleep 0.1
    lt=$((lt + 1))
  done
  echo "$lp"
}
port=$(listening_port "$work/server.log")
[ -n "$port" ] || { echo "tests/cli: the server did not start" >&2; cat "$work/server.log" >&2; exit 1; }
url=http://127.0.0.1:$port

pass=0 fail=0
# check NAME COMMAND...: one assertion; its output is shown when it fails.
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
# expect_exit CODE COMMAND...: the command exits with CODE; its stdout in $work/out,
# its stderr in $work/err.
expect_exit() {
  want=$1
  shift
  "$@" >"$work/out" 2>"$work/err"
  got=$?
  [ "$got" = "$want" ] || { echo "exit $got, want $want: $*"; head -c 800 "$work/err"; return 1; }
}
# has FILE PATTERN: FILE contains the extended regular expression PATTERN.
has() { grep -Eq -- "$2" "$1" || { echo "no /$2/ in $1:"; head -c 800 "$1"; return 1; }; }

# ---- loading: a local run does not load libcurl (issue 19) -------------------------
no_curl() { ! LD_TRACE_LOADED_OBJECTS=1 "$hamel" | grep -q libcurl; }
check "hamel does not load libcurl (remote is hamel-remote)" no_curl

# ---- reading FILE: read whole, parsed from memory; errors as jansson reports them ----
bad_json() {
  printf '{"model": {"a": 1,\n  "b": [1, 2,\n  ' >"$work/trunc.json"
  expect_exit 1 "$hamel" run "$work/trunc.json" || return 1
  jq -e --arg p "$work/trunc.json:3" '.type == "/problems/bad-json" and .errors[0].path == $p
    and .errors[0].column == 2 and .errors[0].reason == "'"']' expected near end of file"'"' "$work/err" >/dev/null || return 1
  expect_exit 1 "$hamel" run - <"$work/trunc.json" || return 1
  jq -e '.errors[0].path == "-:3" and .errors[0].column == 2' "$work/err" >/dev/null || return 1
  expect_exit 1 "$hamel" run "$work/no-such.json" || return 1
  jq -e '.errors[0].reason | startswith("unable to open")' "$work/err" >/dev/null
}
check "hamel run of a truncated or missing file: exit 1, the line and column (file or stdin)" bad_json
by_model_id() {
  # a request naming its model by id runs remotely; locally it was "model.coordinates:
  # required", as if the request were a model
  id=$("$hamel" check "$case_file" --json | jq -r .model_id)
  jq --arg id "$id" '.simulation + {model_id: $id}' "$case_file" >"$work/byid.json"
  expect_exit 1 "$hamel" run "$work/byid.json" || return 1
  jq -e '.errors[0].path == "model_id" and (.errors[0].reason | test("hamel remote"))' "$work/err" >/dev/null || { cat "$work/err"; return 1; }
  "$hamel" remote --url "$url" check "$case_file" >/dev/null || return 1 # the server knows it
  expect_exit 0 "$hamel" remote --url "$url" run "$work/byid.json" --csv
}
check "hamel run of a request by model_id: exit 1 naming model_id (a server's); hamel remote runs it" by_model_id

# ---- the compile budget: --max-compile-seconds S (CPU seconds), on every subcommand ----
budget_option() {
  expect_exit 0 "$hamel" --help && has "$work/out" '--max-compile-seconds S' || return 1
  expect_exit 0 "$hamel" check --help && has "$work/out" '^--max-compile-seconds S: .*CPU time' || return 1
  expect_exit 0 "$hamel" check "$case_file" --max-compile-seconds 60 || return 1
  expect_exit 1 "$hamel" check "$case_file" --json --max-compile-seconds 0.000001 || return 1
  jq -e '.type == "/problems/compile-limit" and .limit == "max_compile_seconds" and (.stage | type) == "string"
    and (.detail | test("CPU time"))' "$work/err" >/dev/null || { cat "$work/err"; return 1; }
  expect_exit 1 "$hamel" equations "$case_file" --max-compile-seconds 0.000001 && has "$work/err" 'compile-limit' || return 1
  expect_exit 0 "$hamel" equations "$case_file" --max-compile-seconds 0 || return 1
  for bad in -1 abc 2s nan 1e7; do
    expect_exit 2 "$hamel" check "$case_file" --max-compile-seconds "$bad" && has "$work/err" "max-compile-seconds" || return 1
  done
  expect_exit 2 "$hamel" run "$case_file" --max-compile-seconds && has "$work/err" 'needs a value'
}
check "hamel --max-compile-seconds S: the compile budget (tiny: 422-style compile-limit, exit 1; bad S: exit 2)" budget_option
# a form, linearize and evaluate are under the budget too (as the server's): the Kane form
# of V = x^(x^(...)) 300 deep took 11 s of CPU time (3000 deep: minutes) with none
deep_form_budget() {
  defs='{"name": "d0", "expr": "x"}'
  for i in $(seq 1 299); do defs="$defs, {\"name\": \"d$i\", \"expr\": \"x^(d$((i - 1)))\"}"; done
  printf '{"coordinates": ["x", "y"], "kinetic_energy": "x'"'"'^2/2 + y'"'"'^2/2", "potential_energy": "d299", "definitions": [%s]}' \
    "$defs" >"$work/deep.json"
  expect_exit 0 "$hamel" check "$work/deep.json" || return 1
  expect_exit 1 timeout 60 "$hamel" equations "$work/deep.json" --form kane --max-compile-seconds 0.3 || return 1
  jq -e '.type == "/problems/compile-limit" and (.detail | test("kane"))' "$work/err" >/dev/null || { cat "$work/err"; return 1; }
}
check "hamel equations --form F: the derivation is under --max-compile-seconds (a deep model stops)" deep_form_budget

# ---- remote through the helper program ---------------------------------------------
remote_run() {
  expect_exit 0 "$hamel" remote --url "$url" run "$case_file" || return 1
  "$hamel" run "$case_file" >"$work/local.json" || return 1
  jq -e --slurpfile l "$work/local.json" '.trajectory.q.theta == $l[0].trajectory.q.theta' "$work/out" >/dev/null
}
check "hamel remote run (exec of hamel-remote) equals the local run" remote_run

# ---- help and exit codes -------------------------------------------------------------
help_run() {
  expect_exit 0 "$hamel" run --help || return 1
  has "$work/out" '^usage: hamel run FILE' && has "$work/out" 'Exit status' && [ ! -s "$work/err" ]
}
check "hamel run --help: usage on stdout, exit 0" help_run
help_each() {
  for c in check gamma equations linearize evaluate; do
    expect_exit 0 "$hamel" "$c" --help || return 1
    has "$work/out" "^usage: hamel $c FILE" || return 1
    expect_exit 0 "$hamel" help "$c" || return 1
    has "$work/out" "^usage: hamel $c FILE" || return 1
  done
  expect_exit 0 "$hamel" remote run --help && has "$work/out" 'batch FILE' && has "$work/out" 'Exit status'
}
check "every subcommand has --help (and hamel help CMD, hamel remote --help)" help_each
help_exit_codes() {
  expect_exit 0 "$hamel" --help && has "$work/out" '^Exit status: 0 ok; 1 the input was refused' &&
    has "$work/out" '2 usage' && has "$work/out" '3 remote'
}
check "hamel --help documents the exit codes" help_exit_codes
usage_errors() {
  expect_exit 2 "$hamel" run "$case_file" --bogus && has "$work/err" 'unknown option --bogus' &&
    expect_exit 2 "$hamel" check && has "$work/err" 'FILE is missing' &&
    expect_exit 2 "$hamel" frobnicate "$case_file" && has "$work/err" "unknown command 'frobnicate'" &&
    expect_exit 2 "$hamel" check "$case_file" --csv && has "$work/err" 'unknown option --csv'
}
check "usage errors exit 2 naming what was wrong" usage_errors

# ---- run --csv, -o, progress ----------------------------------------------------------
run_csv() {
  expect_exit 0 "$hamel" run "$case_file" --csv || return 1
  [ "$(head -n 1 "$work/out")" = "t,phi,theta,psi,x,y,wd,thd,Omega,phi',theta',psi',x',y'" ] ||
    { head -n 1 "$work/out"; return 1; }
  [ "$(wc -l <"$work/out")" = 12 ] || { echo "rows: $(wc -l <"$work/out")"; return 1; }
  # the CSV's numbers are the JSON's
  "$hamel" run "$case_file" >"$work/run.json" || return 1
  want=$(jq -r '.trajectory.q.theta[5]' "$work/run.json")
  got=$(sed -n 7p "$work/out" | cut -d, -f3)
  awk -v a="$got" -v b="$want" 'BEGIN { exit !(a + 0 == b + 0) }' || { echo "theta[5]: csv $got, json $want"; return 1; }
  # the same columns as hamel remote run --csv
  expect_exit 0 "$hamel" remote --url "$url" run "$case_file" --csv || return 1
  [ "$(head -n 1 "$work/out")" = "t,phi,theta,psi,x,y,wd,thd,Omega,phi',theta',psi',x',y'" ]
}
check "hamel run --csv: t, coordinates, speeds, rates; the JSON's numbers; remote's header" run_csv
run_out() {
  rm -f "$work/o.json" "$work/o.csv"
  expect_exit 0 "$hamel" run "$case_file" -o "$work/o.json" && [ ! -s "$work/out" ] || return 1
  jq -e '.status == "done" and (.trajectory.t | length) == 11' "$work/o.json" >/dev/null || return 1
  expect_exit 0 "$hamel" run --csv -o "$work/o.csv" "$case_file" && [ "$(wc -l <"$work/o.csv")" = 12 ] || return 1
  expect_exit 2 "$hamel" run "$case_file" -o "$work/no/such/dir/x.json"
}
check "hamel run -o FILE writes there (JSON or CSV); an unwritable one is exit 2" run_out
csv_multipliers() {
  # a multipliers run (a constraint nonlinear in q'): its constraint forces are columns
  # lambda_<constraint> after the rates, as the web page's CSV has them (they were left out)
  ex=$top/clients/web/examples/constant-speed-particle.json
  expect_exit 0 "$hamel" run "$ex" --csv || return 1
  [ "$(head -n 1 "$work/out")" = "t,x,y,x',y',lambda_speed" ] || { head -n 2 "$work/out"; return 1; }
  "$hamel" run "$ex" >"$work/mult.json" || return 1
  [ "$(sed -n 2p "$work/out" | cut -d, -f6)" = "$(jq -r '.trajectory.multipliers.speed[0]' "$work/mult.json")" ] || return 1
  cp "$work/out" "$work/mult.local"
  expect_exit 0 "$hamel" remote --url "$url" run "$ex" --csv && cmp "$work/out" "$work/mult.local"
}
check "hamel run --csv (local, remote) of a multipliers run has lambda_<constraint> columns" csv_multipliers
# an oscillator integrated by rk2 at rtol 0.5: its energy drifts by tens of per cent
cat >"$work/drift.json" <<'JSON'
{"model": {"coordinates": ["x"], "kinetic_energy": "x'^2/2", "potential_energy": "x^2/2"},
 "initial": {"q": {"x": 1}, "qdot": {"x": 0}}, "t_end": 200,
 "integrator": {"method": "rk2", "rtol": 0.5, "atol": 0.5}}
JSON
run_warnings() {
  expect_exit 0 "$hamel" run "$work/drift.json" || return 1
  has "$work/err" '^hamel: warning: energy-drift: the energy should be conserved' || return 1
  jq -e '.warnings[0].code == "energy-drift" and .provenance.engine_version != null' "$work/out" >/dev/null || return 1
  expect_exit 0 "$hamel" run "$work/drift.json" --csv || return 1
  has "$work/err" '^hamel: warning: energy-drift' || return 1
  expect_exit 0 "$hamel" remote --url "$url" run "$work/drift.json" || return 1
  has "$work/err" '^hamel remote: warning: energy-drift: the energy should be conserved' || return 1
  expect_exit 0 "$hamel" run "$case_file" && [ ! -s "$work/err" ] && jq -e '.warnings == []' "$work/out" >/dev/null
}
check "hamel run (local and remote) prints a failed check as a warning on stderr; none for the case" run_warnings
# events in the file's request: a stop when theta falls through 1 (issue 18)
jq '.simulation.events = [{"name": "low", "expr": "theta - 1", "direction": "falling", "action": "stop"}]' \
  "$case_file" >"$work/events.json"
run_events() {
  expect_exit 0 "$hamel" run "$work/events.json" || return 1
  jq -e '.stopped_by == "low" and (.events | length) == 1 and .events[0].t == .trajectory.t[-1]
         and (.trajectory.q.theta[-1] - 1 | fabs) < 1e-12' "$work/out" >/dev/null || return 1
  cp "$work/out" "$work/events-local.json"
  expect_exit 0 "$hamel" run "$work/events.json" --csv || return 1
  [ "$(tail -n 1 "$work/out" | cut -d, -f1)" = "$(jq -r '.events[0].t' "$work/events-local.json")" ] || return 1
  expect_exit 0 "$hamel" remote --url "$url" run "$work/events.json" || return 1
  jq -e --slurpfile l "$work/events-local.json" '.stopped_by == "low" and .events == $l[0].events' "$work/out" >/dev/null
}
check "hamel run (local, --csv and remote) carries a stop event: events, stopped_by, the last row at it" run_events
long_t=${HAMEL_CLI_LONG_T:-40000}
jq --argjson t "$long_t" '.simulation.t_end = $t | .simulation.integrator.max_steps = 10000000' "$case_file" >"$work/long.json"
progress() {
  # about 2 s of integration unloaded: a line a second with --progress, at least one
  # before the end (when it comes depends on the machine's load, so any second will do)
  expect_exit 0 "$hamel" run "$work/long.json" --progress -o /dev/null || return 1
  has "$work/err" '^hamel run: +([0-9]|[1-9][0-9])(\.[0-9]+)?% after [0-9]+\.[0-9] s$' &&
    has "$work/err" '^hamel run: 100\.0% after'
}
check "hamel run --progress: progress lines on stderr for a run longer than a second" progress
no_progress() {
  # stderr is not a terminal here: nothing is drawn without --progress
  # about 1.5 s of integration unloaded
  jq --argjson t "$long_t" '.simulation.t_end = $t * 0.6 | .simulation.integrator.max_steps = 10000000' "$case_file" >"$work/mid.json"
  expect_exit 0 "$hamel" run "$work/mid.json" -o /dev/null && [ ! -s "$work/err" ]
}
check "no progress on stderr when it is not a terminal" no_progress
remote_progress() {
  # the server is the plain build whatever the CLI's: its own few-second run
  jq '.simulation.t_end = 25000 | .simulation.integrator.max_steps = 10000000' "$case_file" >"$work/rlong.json"
  expect_exit 0 "$hamel" remote --url "$url" run "$work/rlong.json" --progress -o /dev/null || return 1
  has "$work/err" '^hamel remote: [0-9a-f]+ +[0-9.]+% running after 1\.[0-9] s$' &&
    has "$work/err" '^hamel remote: [0-9a-f]+ 100\.0% done after' || return 1
  expect_exit 0 "$hamel" remote --url "$url" run "$work/mid.json" -o /dev/null && [ ! -s "$work/err" ]
}
check "hamel remote run --progress: a line a second on stderr; nothing without it off a terminal" remote_progress

# ---- check: text and --json, local and remote ------------------------------------------
check_text() {
  expect_exit 0 "$hamel" check "$case_file" || return 1
  has "$work/out" ': valid, sha256:[0-9a-f]{64}$' && has "$work/out" '^  n=5 m=2 dof=3, scleronomic, energy conserved$' &&
    has "$work/out" '^  speeds: wd thd Omega$' && has "$work/out" '^  constraint slip_x: linear, scleronomic, not integrable alone$' || return 1
  cp "$work/out" "$work/local.txt"
  expect_exit 0 "$hamel" remote --url "$url" check "$case_file" || return 1
  # the same lines, the remote one saying whether the server knew the model
  sed -e 's/ (new)$//' -e 's/ (known)$//' "$work/out" | diff - "$work/local.txt"
}
check "check prints text, the same locally and remotely" check_text
check_json() {
  expect_exit 0 "$hamel" check "$case_file" --json || return 1
  jq -e '.n == 5 and .dof == 3 and (.model_id | startswith("sha256:"))' "$work/out" >/dev/null || return 1
  jq -S 'del(.source)' "$work/out" >"$work/local.json"
  expect_exit 0 "$hamel" remote --url "$url" check "$case_file" --json || return 1
  jq -S 'del(.source)' "$work/out" | jq -e --slurpfile l "$work/local.json" '.model_id == $l[0].model_id and .n == $l[0].n and .constraints == $l[0].constraints' >/dev/null
}
check "check --json prints the summary, local and remote agree" check_json
jq '.model.potential_energy = "m*g*r*sin(theta) + theta'"'"'"' "$case_file" >"$work/bad.json"
check_bad() {
  expect_exit 1 "$hamel" check "$work/bad.json" || return 1
  has "$work/err" "model\.potential_energy: column 20: velocity theta' is not allowed" && has "$work/err" '^ +\^$' || return 1
  expect_exit 1 "$hamel" remote --url "$url" check "$work/bad.json" || return 1
  has "$work/err" "model\.potential_energy: column 20: velocity theta' is not allowed" || return 1
  expect_exit 1 "$hamel" check "$work/bad.json" --json && jq -e '.status == 422 and .type == "/problems/invalid-model"' "$work/err" >/dev/null || return 1
  # the local problem document is the server's (same type, title, status; the CLI links
  # the server's table of statuses, server/problems.c)
  jq -S 'del(.instance)' "$work/err" >"$work/local-problem.json"
  expect_exit 1 "$hamel" remote --url "$url" check "$work/bad.json" --json || return 1
  jq -S 'del(.instance)' "$work/err" | cmp -s - "$work/local-problem.json"
}
check "an invalid model: check exits 1 naming path and column (text, --json a problem document)" check_bad
remote_json_problem() {
  # with --json a refused run is its problem document on standard error, as locally (the
  # remote run printed a line of text: only check --json gave the document)
  expect_exit 1 "$hamel" run "$work/bad.json" || return 1
  jq -S 'del(.instance)' "$work/err" >"$work/run-problem.local" || return 1
  expect_exit 1 "$hamel" remote --url "$url" run "$work/bad.json" --json || return 1
  jq -S 'del(.instance)' "$work/err" | cmp -s - "$work/run-problem.local" || { cat "$work/err"; return 1; }
  # a failed run too: the job's problem (step-limit)
  jq '.simulation.integrator.max_steps = 3' "$case_file" >"$work/steps.json"
  expect_exit 1 "$hamel" remote --url "$url" run "$work/steps.json" --json || return 1
  jq -e '.type == "/problems/step-limit"' "$work/err" >/dev/null || { cat "$work/err"; return 1; }
  # without --json: the line, as before
  expect_exit 1 "$hamel" remote --url "$url" run "$work/bad.json" && has "$work/err" '^hamel remote: '
}
check "hamel remote run --json: a refused or failed run is its problem document on standard error, as locally" remote_json_problem
check_not_json() {
  # check prints text whatever refused the input: a FILE that is not JSON too (it printed
  # the JSON problem document), the same line as `hamel remote check`; --json the document
  printf '{"model": {"coordinates": ["x"],\n "kinetic_energy": "x^2" ,, }}' >"$work/typo.json"
  expect_exit 1 "$hamel" check "$work/typo.json" || return 1
  has "$work/err" "^$work/typo.json:2:27: string or '}' expected near ','\$" || return 1
  ! grep -q '"type"' "$work/err" || { echo "a JSON document in text mode:"; cat "$work/err"; return 1; }
  cp "$work/err" "$work/typo.local"
  expect_exit 1 "$hamel" remote --url "$url" check "$work/typo.json" || return 1
  diff "$work/err" "$work/typo.local" || return 1
  expect_exit 1 "$hamel" check "$work/typo.json" --json || return 1
  jq -e '.type == "/problems/bad-json" and .errors[0].column == 27' "$work/err" >/dev/null || return 1
  expect_exit 1 "$hamel" check "$work/no-such.json" || return 1
  has "$work/err" "unable to open $work/no-such.json" && ! grep -q '"type"' "$work/err"
}
check "check of a FILE that is not JSON prints text naming line and column, as remote check does (--json: the document)" check_not_json

# ---- unknown names are errors everywhere ------------------------------------------------
gamma_unknown() {
  expect_exit 1 "$hamel" gamma "$case_file" --q thet=0.7 || return 1
  jq -e '.errors[0].path == "q.thet"' "$work/err" >/dev/null || return 1
  expect_exit 1 "$hamel" remote --url "$url" gamma "$case_file" --q thet=0.7 || return 1
  has "$work/err" 'q\.thet' || return 1
  body=$(jq -c '{model: .model, q: (.simulation.initial.q + {thet: 0.7})}' "$case_file")
  code=$(curl -s -o "$work/h.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "$body" "$url/v1/hamel")
  [ "$code" = 422 ] && jq -e '[.errors[].path] | index("q.thet") != null' "$work/h.json" >/dev/null || { echo "HTTP $code"; cat "$work/h.json"; return 1; }
  expect_exit 0 "$hamel" gamma "$case_file" --q theta=0.7 && jq -e '.points[0].q.theta == 0.7' "$work/out" >/dev/null
}
check "hamel gamma --q thet=0.7 and POST /v1/hamel with thet fail naming q.thet" gamma_unknown

# ---- numbers on the command line: finite, each name once (a model not in the cases) ----
cat >"$work/sleigh.json" <<'JSON'
{"model": {"name": "sleigh", "coordinates": ["x", "y", "th"], "parameters": {"m": 1, "I": 0.2, "a": 0.3},
  "kinetic_energy": "1/2*m*((x' - a*th'*sin(th))^2 + (y' + a*th'*cos(th))^2) + 1/2*I*th'^2",
  "constraints": [{"name": "knife", "expr": "-sin(th)*x' + cos(th)*y'"}],
  "speeds": [{"name": "v", "expr": "cos(th)*x' + sin(th)*y'"}, {"name": "w", "expr": "th'"}]},
 "simulation": {"initial": {"q": {"x": 0, "y": 0, "th": 0.25}, "speeds": {"v": 1, "w": 0.5}}, "t_end": 3}}
JSON
gamma_numbers() {
  for where in local remote; do
    r=; [ $where = remote ] && r="remote --url $url"
    for bad in "--q th=nan" "--q th=inf" "--q th=1e999" "--q th=-Infinity" "--qdot x=nan" "--t nan" "--t 1e400"; do
      # shellcheck disable=SC2086 # $r and $bad are words
      expect_exit 2 "$hamel" $r gamma "$work/sleigh.json" $bad || return 1
      has "$work/err" 'finite number' || return 1
      [ ! -s "$work/out" ] || { echo "$where $bad printed a result"; return 1; }
    done
    # shellcheck disable=SC2086
    expect_exit 2 "$hamel" $r gamma "$work/sleigh.json" --q th=1,x=2,th=3 && has "$work/err" '--q gives th twice' || return 1
    # shellcheck disable=SC2086
    expect_exit 0 "$hamel" $r gamma "$work/sleigh.json" --q th=0.75 --json || return 1
    jq -e '.points[0].q == {"x": 0, "y": 0, "th": 0.75}' "$work/out" >/dev/null || return 1
  done
}
check "hamel gamma (local, remote): nan, inf, 1e999 in --q/--qdot/--t and a name given twice are usage errors (exit 2)" gamma_numbers
remote_missing_file() {
  expect_exit 2 "$hamel" remote --url "$url" run "$work/no-such.json" || return 1
  has "$work/err" "^hamel remote: unable to open $work/no-such.json: No such file or directory\$" || return 1
  expect_exit 1 "$hamel" run "$work/no-such.json" && jq -e --arg p "$work/no-such.json" '.errors[0].path == $p' "$work/err" >/dev/null || return 1
  # a file that is read but is not JSON is refused input (1), locally and remotely, as README says
  printf '{"model": ' >"$work/half.json"
  expect_exit 1 "$hamel" remote --url "$url" run "$work/half.json" && has "$work/err" 'half\.json:1:' || return 1
  expect_exit 1 "$hamel" remote --url "$url" check "$work/half.json" || return 1
  expect_exit 1 "$hamel" run "$work/half.json" || return 1
  # a directory is said to be one (it read as "'[' or '{' expected near end of file")
  expect_exit 2 "$hamel" remote --url "$url" run "$work" && has "$work/err" 'is a directory, not a file' || return 1
  expect_exit 1 "$hamel" run "$work" && jq -e '.errors[0].reason == "a directory, not a file"' "$work/err" >/dev/null
}
check "a missing FILE or a directory is named without a line (remote: exit 2); a FILE not JSON is exit 1 (local and remote)" remote_missing_file

# ---- nonlinear constraints: the initial q' at another heading leaves two roots -------
chetaev=$top/tests/adversarial/cases/governed-wheel-chetaev.json
gamma_roots() {
  expect_exit 1 "$hamel" gamma "$chetaev" --q th=3.9 || return 1
  jq -e '.status == 422 and (.roots | length) == 2 and .errors[0].path == "qdot"' "$work/err" >/dev/null || return 1
  root=$(jq -r '.roots | map(select(.ph > 0))[0] | to_entries | map("\(.key)=\(.value)") | join(",")' "$work/err")
  expect_exit 0 "$hamel" gamma "$chetaev" --q th=3.9 --qdot "$root" || return 1
  jq -e '.points[0].qdot.ph > 0 and ([.points[0].gamma[] | select(.j == "lateral" and .r == "w" and .l == "speed") | .value][0] > 0.41)' "$work/out" >/dev/null || return 1
  expect_exit 1 "$hamel" remote --url "$url" gamma "$chetaev" --q th=3.9 || return 1
  has "$work/err" 'leave 2 solutions' || return 1
  expect_exit 0 "$hamel" remote --url "$url" gamma "$chetaev" --q th=3.9 --qdot "$root" --json &&
    jq -e '.points[0].qdot.ph > 0' "$work/out" >/dev/null
}
check "hamel gamma (local, remote) of a Chetaev constraint: two roots named, --qdot chooses one" gamma_roots

# ---- remote linearize, evaluate, batch ------------------------------------------------
jq '{model: .model, linearize: {q: {phi: 0, theta: 1.5707963267948966, psi: 0, x: 0, y: 0}, speeds: {wd: 0, thd: 0, Omega: 4}}}' "$case_file" >"$work/lin.json"
jq '{model: .model, evaluate: {states: [.simulation.initial]}}' "$case_file" >"$work/eval.json"
remote_lin_eval() {
  "$hamel" linearize "$work/lin.json" >"$work/lin.local" || return 1
  expect_exit 0 "$hamel" remote --url "$url" linearize "$work/lin.json" || return 1
  jq -e --slurpfile l "$work/lin.local" '.points[0].A == $l[0].points[0].A and .points[0].eigenvalues == $l[0].points[0].eigenvalues' "$work/out" >/dev/null || return 1
  "$hamel" evaluate "$work/eval.json" >"$work/eval.local" || return 1
  expect_exit 0 "$hamel" remote --url "$url" evaluate "$work/eval.json" -o "$work/eval.remote" || return 1
  jq -e --slurpfile l "$work/eval.local" '.states[0].speeds_dot == $l[0].states[0].speeds_dot' "$work/eval.remote" >/dev/null
}
check "hamel remote linearize and evaluate equal the local commands" remote_lin_eval
stray_members() {
  # a request member beside "linearize" (or "evaluate") instead of inside it was left out
  # without a word: the top-level parameters below changed nothing
  jq '. + {parameters: {g: 0}}' "$work/lin.json" >"$work/lin-stray.json"
  expect_exit 1 "$hamel" linearize "$work/lin-stray.json" || return 1
  has "$work/err" '"path": "parameters"' && has "$work/err" 'inside \\"linearize\\"' || return 1
  expect_exit 1 "$hamel" remote --url "$url" linearize "$work/lin-stray.json" || return 1
  has "$work/err" 'parameters: beside "linearize" it is not read' || return 1
  jq '. + {states: []}' "$work/eval.json" >"$work/eval-stray.json"
  expect_exit 1 "$hamel" evaluate "$work/eval-stray.json" && has "$work/err" '"path": "states"' || return 1
  expect_exit 1 "$hamel" remote --url "$url" evaluate "$work/eval-stray.json" && has "$work/err" 'states: beside "evaluate"' || return 1
  # what is not a request member (a case file's simulation, a title) is let be
  jq '. + {title: "disk", simulation: {t_end: 1}}' "$work/lin.json" >"$work/lin-case.json"
  expect_exit 0 "$hamel" linearize "$work/lin-case.json" || return 1
  # {"model", "steady": {...}}: "steady" is the request here (and a member of linearize's)
  jq '{model, steady: {state: .linearize, unknowns: ["thd"]}}' "$work/lin.json" >"$work/steady.json"
  expect_exit 0 "$hamel" steady "$work/steady.json" && jq -e '.steady.speeds.Omega == 4' "$work/out" >/dev/null || return 1
  jq '. + {unknowns: ["thd"]}' "$work/steady.json" >"$work/steady-stray.json"
  expect_exit 1 "$hamel" steady "$work/steady-stray.json" && has "$work/err" '"path": "unknowns"'
}
check "hamel (local, remote) linearize/evaluate: a request member beside the request is an error naming it" stray_members
jq '. + {runs: [{initial: {speeds: {Omega: 3}}}, {initial: {speeds: {Omega: 5}}}, {integrator: {max_steps: 3}}]}' "$case_file" >"$work/batch.json"
remote_batch() {
  expect_exit 1 "$hamel" remote --url "$url" batch "$work/batch.json" || return 1
  has "$work/err" '1 of 3 runs did not finish' || return 1
  [ "$(wc -l <"$work/out")" = 3 ] || return 1
  jq -s -e '[.[].index] == [0, 1, 2] and .[0].status == "done" and .[2].status == "failed" and (.[1].final.speeds.Omega | type) == "number"' "$work/out" >/dev/null || return 1
  jq 'del(.runs[2])' "$work/batch.json" >"$work/batch-ok.json"
  expect_exit 0 "$hamel" remote --url "$url" batch "$work/batch-ok.json" --json || return 1
  jq -e '.status == "done" and (.results | length) == 2 and .succeeded == 2' "$work/out" >/dev/null
}
check "hamel remote batch: one NDJSON line per run in index order; a failed run exits 1" remote_batch
remote_batch_invalid() {
  jq '. + {runs: [{initial: {q: {thet: 1}}}]}' "$case_file" >"$work/batch-bad.json"
  expect_exit 1 "$hamel" remote --url "$url" batch "$work/batch-bad.json" && has "$work/err" 'runs\[0\]'
}
check "hamel remote batch with an invalid run exits 1 naming runs[0]" remote_batch_invalid

# ---- remote: a wait ended by SIGTERM or SIGHUP cancels what it waited for ---------------
# wait_for FILE PATTERN: up to 20 s for PATTERN to appear in FILE
wait_for() {
  n=0
  until grep -Eq -- "$2" "$1"; do
    n=$((n + 1))
    [ $n -lt 200 ] || { echo "no /$2/ in $1 after 20 s:"; head -c 800 "$1"; return 1; }
    sleep 0.1
  done
}
# job_status ID WANT: up to 10 s for the job (or batch with a third argument) to have status WANT
job_status() {
  n=0
  while :; do
    st=$(curl -s "$url/v1/${3:-jobs}/$1" | jq -r .status)
    [ "$st" = "$2" ] && return 0
    n=$((n + 1))
    [ $n -lt 100 ] || { echo "${3:-jobs}/$1: status $st, want $2"; return 1; }
    sleep 0.1
  done
}
remote_signals() {
  jq '.simulation.t_end = 400000 | .simulation.integrator.max_steps = 100000000' "$case_file" >"$work/forever.json"
  # (SIGHUP alike, 129; not checked here: a runner under nohup would leave it ignored)
  for sig in TERM; do
    # a file of its own, gone before the start: a stale line must not send the signal
    # before hamel-remote runs (a shell's trap in the forked child would swallow it)
    rm -f "$work/err.$sig"
    "$hamel" remote --url "$url" run "$work/forever.json" --progress >"$work/out" 2>"$work/err.$sig" &
    rp=$!
    wait_for "$work/err.$sig" 'running after' || { kill $rp; return 1; }
    mv "$work/err.$sig" "$work/err"
    kill -s $sig $rp
    wait $rp
    got=$?
    want=143
    [ $got = $want ] || { echo "SIG$sig: exit $got, want $want"; cat "$work/err"; return 1; }
    id=$(sed -n 's/^hamel remote: interrupted; cancelling job \([0-9a-f]*\)$/\1/p' "$work/err")
    [ -n "$id" ] || { echo "SIG$sig: no cancelling line"; cat "$work/err"; return 1; }
    job_status "$id" cancelled || return 1
    # its CSV: none to write, said so (it printed "hamel: the result has no trajectory", exit 3)
    expect_exit 1 "$hamel" remote --url "$url" job "$id" --csv && has "$work/err" "job $id is cancelled: no trajectory to write\$" || return 1
  done
  jq '{model: .model, base: .simulation, runs: [range(0; 4) | {initial: {speeds: {Omega: (3 + .)}}}]}' "$work/forever.json" >"$work/forever-batch.json"
  rm -f "$work/err.batch"
  "$hamel" remote --url "$url" batch "$work/forever-batch.json" --progress >"$work/out" 2>"$work/err.batch" &
  rp=$!
  wait_for "$work/err.batch" 'running after' || { kill $rp; return 1; }
  kill -s TERM $rp
  wait $rp
  got=$?
  mv "$work/err.batch" "$work/err"
  [ $got = 143 ] || { echo "batch SIGTERM: exit $got, want 143"; cat "$work/err"; return 1; }
  id=$(sed -n 's/^hamel remote: interrupted; cancelling batch \([0-9a-f]*\)$/\1/p' "$work/err")
  [ -n "$id" ] || { echo "batch: no cancelling line"; cat "$work/err"; return 1; }
  job_status "$id" cancelled batches
}
check "hamel remote run/batch ended by SIGTERM (exit 143) cancel the job or batch on the server" remote_signals

# ---- remote equations --form, help of an unknown command, each error said once ---------
remote_forms() {
  for form in kane maggi; do
    "$hamel" equations "$work/sleigh.json" --form $form >"$work/eq.local" || return 1
    expect_exit 0 "$hamel" remote --url "$url" equations "$work/sleigh.json" --form $form || return 1
    jq -e --slurpfile l "$work/eq.local" '.form == "'$form'" and del(.model_id) == ($l[0] | del(.model_id))' "$work/out" >/dev/null ||
      { echo "form $form differs"; return 1; }
  done
  expect_exit 1 "$hamel" remote --url "$url" equations "$work/sleigh.json" --form voronec && has "$work/err" '422 invalid-request: form:' || return 1
  expect_exit 2 "$hamel" remote --url "$url" equations "$work/sleigh.json" --form 'kane&x=1' && has "$work/err" 'not a form' || return 1
  expect_exit 2 "$hamel" remote --url "$url" run "$work/sleigh.json" --form kane && has "$work/err" '--form belongs to equations' || return 1
  expect_exit 2 "$hamel" remote frobnicate --help && has "$work/err" 'unknown command frobnicate' || return 1
  expect_exit 0 "$hamel" remote batch --help && has "$work/out" 'Exit status' || return 1
  expect_exit 1 "$hamel" remote --url "$url" gamma "$work/sleigh.json" --q thet=1 || return 1
  [ "$(grep -o "'thet' is not a coordinate" "$work/err" | wc -l)" = 1 ] || { echo "said more than once:"; cat "$work/err"; return 1; }
}
check "hamel remote equations --form F equals the local form; unknown CMD --help exits 2; an error is said once" remote_forms

# ---- --name=value as well as --name value, local and remote --------------------------
option_equals() {
  expect_exit 0 "$hamel" gamma "$work/sleigh.json" --q=th=0.75 || return 1
  jq -e '.points[0].q.th == 0.75' "$work/out" >/dev/null || return 1
  expect_exit 0 "$hamel" equations "$work/sleigh.json" --form=kane && jq -e '.form == "kane"' "$work/out" >/dev/null || return 1
  expect_exit 0 "$hamel" export "$work/sleigh.json" --lang=python && has "$work/out" '^def rhs' || return 1
  rm -f "$work/eq.csv"
  expect_exit 0 "$hamel" run "$work/sleigh.json" --csv --output="$work/eq.csv" && [ -s "$work/eq.csv" ] || return 1
  expect_exit 2 "$hamel" run "$work/sleigh.json" --csv=yes && has "$work/err" 'unknown option --csv=yes' || return 1
  rm -f "$work/eq.csv"
  expect_exit 0 "$hamel" remote --url="$url" run "$work/sleigh.json" --csv --output="$work/eq.csv" && [ -s "$work/eq.csv" ] || return 1
  expect_exit 0 "$hamel" remote --url "$url" equations "$work/sleigh.json" --form=kane && jq -e '.form == "kane"' "$work/out" >/dev/null
}
check "options take --name=value as well as --name value (local and remote)" option_equals

# ---- remote: the URL as users write it ---------------------------------------------
remote_urls() {
  for u in "$url/v1" "$url/v1/" "$url/" "127.0.0.1:$port"; do
    expect_exit 0 "$hamel" remote --url "$u" check "$work/sleigh.json" || { echo "--url $u"; return 1; }
  done
  for u in "$url/?x=1" "$url#top" "ftp://127.0.0.1:$port"; do
    expect_exit 2 "$hamel" remote --url "$u" check "$work/sleigh.json" && has "$work/err" 'no \?query' || { echo "--url $u"; return 1; }
  done
  expect_exit 2 "$hamel" remote --url "$url" --token 'two words' check "$work/sleigh.json" && has "$work/err" 'the token printable'
}
check "hamel remote --url: a trailing /v1 is the root; a query, a fragment, another scheme, a token with a space are usage errors" remote_urls

# ---- remote against a server with a token: --token, $HAMEL_TOKEN, neither ---------------
remote_token() {
  mkdir -p "$work/tdata"
  HAMEL_TOKEN=cli-test-token HAMEL_PORT=0 HAMEL_ADDR=127.0.0.1 HAMEL_DATA="$work/tdata" "$srv" >"$work/tserver.log" 2>&1 &
  tpid=$!
  tport=$(listening_port "$work/tserver.log")
  turl=http://127.0.0.1:$tport
  ok=1
  { expect_exit 1 "$hamel" remote --url "$turl" check "$work/sleigh.json" && has "$work/err" 'Authorization: Bearer'; } || ok=0
  [ $ok = 1 ] && { expect_exit 1 "$hamel" remote --url "$turl" --token wrong run "$work/sleigh.json" &&
    has "$work/err" 'does not hold'; } || ok=0
  [ $ok = 1 ] && { expect_exit 0 "$hamel" remote --url "$turl" --token cli-test-token run "$work/sleigh.json"; } || ok=0
  [ $ok = 1 ] && { expect_exit 0 env HAMEL_TOKEN=cli-test-token "$hamel" remote --url "$turl" check "$work/sleigh.json"; } || ok=0
  [ $ok = 1 ] && { expect_exit 0 env HAMEL_TOKEN=wrong "$hamel" remote --url "$turl" --token cli-test-token check "$work/sleigh.json"; } || ok=0
  [ $ok = 1 ] && { expect_exit 0 env HAMEL_URL="$turl" HAMEL_TOKEN=cli-test-token "$hamel" remote quarantine; } || ok=0
  kill $tpid 2>/dev/null
  wait $tpid 2>/dev/null
  tpid=
  [ $ok = 1 ]
}
check "hamel remote with a token: none (401 saying what to send), wrong (saying so), --token, \$HAMEL_TOKEN, --token over it" remote_token

# ---- remote against a server that is not the service ---------------------------------
not_the_service() {
  /usr/bin/python3 -m http.server 0 --bind 127.0.0.1 >"$work/hs.log" 2>&1 &
  tpid=$!
  n=0
  hport=
  while [ -z "$hport" ] && [ $n -lt 100 ]; do
    hport=$(sed -n 's/.*port \([0-9][0-9]*\).*/\1/p' "$work/hs.log" | head -n 1)
    [ -n "$hport" ] || sleep 0.1
    n=$((n + 1))
  done
  ok=1
  for cmd in run check; do
    { expect_exit 3 "$hamel" remote --url "http://127.0.0.1:$hport" $cmd "$work/sleigh.json" &&
      has "$work/err" 'not a problem document: is http://127\.0\.0\.1:[0-9]+ the hamel service\?' &&
      ! grep -q '<html' "$work/err"; } || { ok=0; break; }
  done
  kill $tpid 2>/dev/null
  wait $tpid 2>/dev/null
  tpid=
  [ $ok = 1 ]
}
if [ -x /usr/bin/python3 ]; then
  check "hamel remote against a server that is not the service: exit 3 saying so (no HTML dumped)" not_the_service
fi

# ---- remote quarantine: listed and cleared ---------------------------------------------
jq '.model.name = "__fault_segv__"' "$case_file" >"$work/fault.json"
remote_quarantine() {
  expect_exit 0 "$hamel" remote --url "$url" quarantine && has "$work/out" '^no model is quarantined$' || return 1
  expect_exit 1 "$hamel" remote --url "$url" check "$work/fault.json" --json || return 1
  id=$(jq -r 'select(.type == "/problems/engine-fault") | .model_id' "$work/err")
  [ -n "$id" ] || return 1
  expect_exit 0 "$hamel" remote --url "$url" quarantine || return 1
  has "$work/out" "^$id  __fault_segv__  SIGSEGV  compiling  [0-9-]{10}T[0-9:]{8}Z  [0-9-]{10}T[0-9:]{8}Z$" || return 1
  [ "$(wc -l <"$work/out")" = 1 ] || return 1
  expect_exit 0 "$hamel" remote --url "$url" quarantine --json || return 1
  jq -e --arg id "$id" '.count == 1 and .truncated == false and .quarantined[0].model_id == $id' "$work/out" >/dev/null || return 1
  expect_exit 0 "$hamel" remote --url "$url" quarantine clear "$id" && has "$work/out" "^cleared $id$" || return 1
  expect_exit 1 "$hamel" remote --url "$url" quarantine clear "$id" && has "$work/err" '404 not-found' || return 1
  expect_exit 0 "$hamel" remote --url "$url" quarantine && has "$work/out" '^no model is quarantined$' || return 1
  expect_exit 2 "$hamel" remote --url "$url" quarantine clear && has "$work/err" 'quarantine takes nothing' &&
    expect_exit 2 "$hamel" remote --url "$url" quarantine clear 'a/b' && has "$work/err" 'not a valid model id'
}
check "hamel remote quarantine lists a crashed model; quarantine clear ID clears it (again: exit 1)" remote_quarantine

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
