#!/usr/bin/env bash
# Regenerates the example responses in api/examples/ from the real hamel-server.
#
# The inputs are committed and edited by hand: model.json (Greenwood's rolling disk, ex.
# 5.3), model-default-speeds.json (a knife edge without speeds, with an unknown member),
# model-nonlinear.json (Appell's nonlinear constraint), model-invalid.json (three
# mistakes), simulation-request.json. Everything else here is written by this script:
# each response body as <name>.json (pretty-printed; metrics as metrics.txt), and the
# request line, status line and headers of every exchange, in order, in transcript.txt.
#
# Three servers are started on ephemeral loopback ports with fresh data directories: one
# with the defaults, one with HAMEL_TOKEN set, one worker and a queue of one (for 401
# and 503), and one with the engine's fault hooks (for the quarantine). Needs curl and jq.
#
#   api/examples/regenerate.sh            # uses build/hamel-server (built if missing)
#   HAMEL_SERVER_BIN=path/to/hamel-server api/examples/regenerate.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
server=${HAMEL_SERVER_BIN:-$repo/build/hamel-server}
if [ ! -x "$server" ] && [ -z "${HAMEL_SERVER_BIN:-}" ]; then
  make -C "$repo" --no-print-directory build/hamel-server >&2
fi
[ -x "$server" ] || { echo "regenerate: no server binary at $server" >&2; exit 1; }
for tool in curl jq; do
  command -v "$tool" >/dev/null || { echo "regenerate: $tool is missing" >&2; exit 1; }
done

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# start NAME [VAR=value...]: starts a server, sets $base to its URL.
start() {
  local name=$1 out err url=""
  shift
  out=$work/$name.out
  err=$work/$name.err
  mkdir -p "$work/$name.data"
  env "$@" HAMEL_PORT=0 HAMEL_ADDR=127.0.0.1 HAMEL_DATA="$work/$name.data" HAMEL_STATIC= \
    HAMEL_ACCESS_LOG=0 "$server" >"$out" 2>"$err" &
  pids+=($!)
  for _ in $(seq 1 100); do
    url=$(head -n 1 "$out" 2>/dev/null | sed -n 's/^listening on //p')
    [ -n "$url" ] && break
    sleep 0.05
  done
  [ -n "$url" ] || { echo "regenerate: $name did not start:" >&2; cat "$err" >&2; exit 1; }
  base=$url
}

transcript=$here/transcript.txt
: >"$transcript"
status=""
body=$work/body

# ex NAME METHOD PATH [curl arguments...]: one exchange. The body goes to NAME.json
# (NAME.txt if it is not JSON; nothing if empty; a NAME starting with "-" keeps no
# file; NDJSON goes to NAME.ndjson), the exchange to transcript.txt; $status and $body (a file) hold the answer.
ex() {
  local name=$1 method=$2 path=$3 hdr=$work/headers ctype
  shift 3
  curl -sS -X "$method" -D "$hdr" -o "$body" "$@" "$base$path"
  status=$(head -n 1 "$hdr" | awk '{print $2}')
  {
    printf '### %s\n> %s %s\n' "${name#-}" "$method" "$path"
    local prev=""
    for a in "$@"; do
      case $prev in
        -H) [[ $a == Authorization:* ]] && a="Authorization: Bearer <token>"; printf '> %s\n' "$a" ;;
        --data-binary) printf '> (body: %s)\n' "$(basename "${a#@}")" ;;
      esac
      prev=$a
    done
    tr -d '\r' <"$hdr" | grep -v -i '^date:' | grep -v '^$' | sed 's/^/< /'
    printf '\n'
  } >>"$transcript"
  [[ $name == -* ]] && return 0
  ctype=$(tr -d '\r' <"$hdr" | sed -n 's/^[Cc]ontent-[Tt]ype: *//p' | head -n 1)
  rm -f "$here/$name.json" "$here/$name.txt" "$here/$name.ndjson"
  if [ ! -s "$body" ]; then
    return 0
  elif [[ $ctype == application/x-ndjson* ]]; then
    cp "$body" "$here/$name.ndjson"
  elif [[ $ctype == application/*json* ]]; then
    jq . "$body" >"$here/$name.json"
  else
    cp "$body" "$here/$name.txt"
  fi
}
json=(-H 'Content-Type: application/json')

# ---- the default server --------------------------------------------------------------
start main
ex health GET /v1/health
ex livez GET /livez
ex readyz GET /readyz

ex model-summary.201 POST /v1/models "${json[@]}" --data-binary @"$here/model.json"
[ "$status" = 201 ] || { echo "regenerate: POST /v1/models answered $status" >&2; exit 1; }
id=$(jq -r .model_id "$body")
ex model-summary.200 POST /v1/models "${json[@]}" --data-binary @"$here/model.json"
ex model-get.200 GET "/v1/models/$id"
ex -model-not-modified.304 GET "/v1/models/$id" -H "If-None-Match: \"$id\""
ex model-not-found.404 GET /v1/models/sha256:0000000000000000000000000000000000000000000000000000000000000000
ex equations.200 GET "/v1/models/$id/equations"

ex model-default-speeds.201 POST /v1/models "${json[@]}" --data-binary @"$here/model-default-speeds.json"
ex model-nonlinear.201 POST /v1/models "${json[@]}" --data-binary @"$here/model-nonlinear.json"
nid=$(jq -r .model_id "$body")
ex equations-nonlinear.200 GET "/v1/models/$nid/equations"
ex model-invalid.422 POST /v1/models "${json[@]}" --data-binary @"$here/model-invalid.json"
jq -n '{coordinates: ["x", "y"], kinetic_energy: "1/2*(x'"'"'^2 + y'"'"'^2)",
  speeds: [{name: "u", expr: "x'"'"'*y'"'"'"}, {name: "v", expr: "y'"'"'"}]}' >"$work/nl-speed.json"
ex model-nonlinear-speed.422 POST /v1/models "${json[@]}" --data-binary @"$work/nl-speed.json"
jq -n '{coordinates: ["x", "y"], kinetic_energy: "1/2*(x'"'"'^2 + y'"'"'^2)",
  speeds: [{name: "u", expr: "x'"'"' + y'"'"'"}, {name: "v", expr: "2*x'"'"' + 2*y'"'"'"}]}' >"$work/singular.json"
ex model-singular.422 POST /v1/models "${json[@]}" --data-binary @"$work/singular.json"
# 30 chained definitions d_i = d_{i-1} + x*d_{i-1}: past the 2 s compile budget
jq -n '{coordinates: ["x"], kinetic_energy: "1/2*d30*x'"'"'^2",
  definitions: ([{name: "d0", expr: "x"}] + [range(1; 31) | {name: "d\(.)", expr: "d\(. - 1) + x*d\(. - 1)"}])}' \
  >"$work/chain.json"
ex model-compile-limit.422 POST /v1/models "${json[@]}" --data-binary @"$work/chain.json"
printf '{"coordinates": ["x", "y"],\n "kinetic_energy": }' >"$work/bad.json"
ex bad-json.400 POST /v1/models "${json[@]}" --data-binary @"$work/bad.json"
ex unsupported-media-type.415 POST /v1/models -H 'Content-Type: text/plain' --data-binary @"$here/model.json"
ex method-not-allowed.405 PUT /v1/models "${json[@]}" --data-binary @"$here/model.json"
head -c 5000000 /dev/zero | tr '\0' ' ' >"$work/big.json"
ex too-large.413 POST /v1/models "${json[@]}" --data-binary @"$work/big.json"
ex -preflight.204 OPTIONS /v1/simulations -H 'Origin: https://lab.example' \
  -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: authorization, content-type'

# Hamel coefficients at two configurations; the request is written here (it names the id).
jq -n --arg id "$id" '{model_id: $id, points: [
  {t: 0, q: {phi: 0, theta: 1.2, psi: 0, x: 0, y: 0}},
  {t: 0, q: {phi: 0.5, theta: 0.8, psi: 1, x: 0.1, y: -0.2}}]}' >"$here/hamel-request.json"
ex hamel.200 POST /v1/hamel "${json[@]}" --data-binary @"$here/hamel-request.json"
jq -n --arg id "$nid" '{model_id: $id, q: {x: 0, y: 0, z: 1}}' >"$work/hamel-nl.json"
ex hamel-nonlinear.422 POST /v1/hamel "${json[@]}" --data-binary @"$work/hamel-nl.json"

# State derivatives at the rolling disk's initial state and one more; linearization of the
# upright disk rolling straight at two spins (stable above Omega^2 = g/(3r)), and a point
# that is not steady (the tilted disk at rest falls).
jq -n --arg id "$id" '{model_id: $id, states: [
  {t: 0, q: {phi: 0, theta: 1.2, psi: 0, x: 0, y: 0}, speeds: {wd: 0.3, thd: 0, Omega: 4}},
  {t: 0, q: {phi: 0.5, theta: 0.8, psi: 1, x: 0.1, y: -0.2}, speeds: {wd: -1, thd: 0.5, Omega: 2}}]}' \
  >"$here/evaluate-request.json"
ex evaluate.200 POST /v1/evaluate "${json[@]}" --data-binary @"$here/evaluate-request.json"
jq -n --arg id "$id" '{model_id: $id, states: [{q: {phi: 0, theta: 1.2, psi: 0, x: 0},
  qdot: {phi: 0, theta: 0, psi: 1, x: 0, y: 0}}]}' >"$work/evaluate-bad.json"
ex evaluate-invalid.422 POST /v1/evaluate "${json[@]}" --data-binary @"$work/evaluate-bad.json"
jq -n --arg id "$id" '{model_id: $id, points: [
  {q: {phi: 0, theta: 1.5707963267948966, psi: 0, x: 0, y: 0}, speeds: {wd: 0, thd: 0, Omega: 4}},
  {q: {phi: 0, theta: 1.5707963267948966, psi: 0, x: 0, y: 0}, speeds: {wd: 0, thd: 0, Omega: 1}}]}' \
  >"$here/linearize-request.json"
ex linearize.200 POST /v1/linearize "${json[@]}" --data-binary @"$here/linearize-request.json"
jq -n --arg id "$id" '{model_id: $id, q: {phi: 0, theta: 1.2, psi: 0, x: 0, y: 0},
  speeds: {wd: 0, thd: 0, Omega: 0}}' >"$work/linearize-falling.json"
ex linearize-not-steady.422 POST /v1/linearize "${json[@]}" --data-binary @"$work/linearize-falling.json"

# A simulation: started without waiting, then followed; the same again is a cache hit.
ex simulation.202 POST /v1/simulations "${json[@]}" --data-binary @"$here/simulation-request.json"
job=$(jq -r .job_id "$body")
ex job-done.200 GET "/v1/jobs/$job?wait=60"
ex simulation-cached.200 POST '/v1/simulations?wait=60' "${json[@]}" --data-binary @"$here/simulation-request.json"
jq --arg id "$id" 'del(.model) | {model_id: $id} + . | .formulation = "multipliers" | .hamel = "none"' \
  "$here/simulation-request.json" >"$work/mult.json"
ex simulation-multipliers.200 POST '/v1/simulations?wait=60' "${json[@]}" --data-binary @"$work/mult.json"
jq -n --arg id "$nid" '{model_id: $id, initial: {q: {x: 0, y: 0, z: 1}, qdot: {x: 1.8, y: 2.4, z: 0.9}},
  t_end: 0.9, output: {samples: 4}}' >"$work/appell.json"
ex simulation-nonlinear.200 POST '/v1/simulations?wait=60' "${json[@]}" --data-binary @"$work/appell.json"

# Refused before anything is queued.
jq --arg id "$id" 'del(.model) | {model_id: $id} + . | del(.initial.speeds)
  | .initial.qdot = {phi: 0, theta: 0, psi: 1, x: 0, y: 0}' "$here/simulation-request.json" >"$work/init.json"
ex simulation-invalid-initial.422 POST /v1/simulations "${json[@]}" --data-binary @"$work/init.json"
jq --arg id "$id" 'del(.model) | {model_id: $id} + . | .tend = 5 | .output = {samples: 1}
  | .integrator.method = "euler" | .initial.speeds.spin = 1' "$here/simulation-request.json" >"$work/bad-sim.json"
ex simulation-invalid.422 POST /v1/simulations "${json[@]}" --data-binary @"$work/bad-sim.json"
ex -simulation-bad-wait.422 POST '/v1/simulations?wait=soon' "${json[@]}" --data-binary @"$here/simulation-request.json"

# A long job: seen running, cancelled; a finished one cannot be cancelled.
jq --arg id "$id" 'del(.model) | {model_id: $id} + . | .t_end = 1e6 | .output = {samples: 3}
  | .integrator.max_steps = 1000000000' "$here/simulation-request.json" >"$work/long.json"
ex -simulation-long.202 POST /v1/simulations "${json[@]}" --data-binary @"$work/long.json"
long=$(jq -r .job_id "$body")
sleep 0.3
ex job-running.200 GET "/v1/jobs/$long?wait=0.2"
ex job-cancelled.200 DELETE "/v1/jobs/$long"
ex job-conflict.409 DELETE "/v1/jobs/$job"
ex job-not-found.404 GET /v1/jobs/00000000000000000000000000000000

# A run past its step budget: the synchronous answer is the problem, the job says failed.
jq --arg id "$id" 'del(.model) | {model_id: $id} + . | .t_end = 100 | .output = {samples: 3}
  | .integrator.max_steps = 50' "$here/simulation-request.json" >"$work/steps.json"
ex simulation-step-limit.422 POST '/v1/simulations?wait=60' "${json[@]}" --data-binary @"$work/steps.json"
failed=$(jq -r .job_id "$body")
ex job-failed.200 GET "/v1/jobs/$failed"

# Batches: a sweep of the initial spin, whole and streamed; one run fails its step budget.
jq -n --arg id "$id" '{model_id: $id,
  base: {initial: {q: {phi: 0, theta: 1.2, psi: 0, x: 0, y: 0}, speeds: {wd: 0.3, thd: 0, Omega: 4}},
         t_end: 2, output: {samples: 5}},
  runs: [{initial: {speeds: {Omega: 3}}}, {initial: {speeds: {Omega: 5}}},
         {parameters: {r: 0.3}, initial: {q: {theta: 1.0}}},
         {initial: {speeds: {Omega: 6}}, integrator: {max_steps: 5}}]}' >"$here/batch-request.json"
ex batch-done.200 POST '/v1/batches?wait=60' "${json[@]}" --data-binary @"$here/batch-request.json"
done_batch=$(jq -r .batch_id "$body")
jq '.fields = ["run", "final"] | .runs += [{initial: {speeds: {Omega: 7}}}]' "$here/batch-request.json" >"$work/batch-stream.json"
ex batch-stream.200 POST '/v1/batches?summary=1' "${json[@]}" -H 'Accept: application/x-ndjson' \
  --data-binary @"$work/batch-stream.json"
ex batch-get.200 GET "/v1/batches/$done_batch"
ex batch-conflict.409 DELETE "/v1/batches/$done_batch"
jq '.base.t_end = 1e6 | .base.integrator.max_steps = 1000000000 | .fields = ["final"]' \
  "$here/batch-request.json" >"$work/batch-long.json"
ex batch.202 POST /v1/batches "${json[@]}" --data-binary @"$work/batch-long.json"
long_batch=$(jq -r .batch_id "$body")
ex batch-cancelled.200 DELETE "/v1/batches/$long_batch"
ex batch-cancelled-get.200 GET "/v1/batches/$long_batch?wait=5"
jq '.runs[1].initial.speeds.spin = 1 | .runs[2].t_end = -1 | .runs[3].output = {samples: 1}' \
  "$here/batch-request.json" >"$work/batch-bad.json"
ex batch-invalid.422 POST /v1/batches "${json[@]}" --data-binary @"$work/batch-bad.json"
ex batch-not-found.404 GET /v1/batches/00000000000000000000000000000000

ex metrics GET /metrics

# ---- a server with a token, one worker and a queue of one ----------------------------
start guarded HAMEL_TOKEN=example-token HAMEL_WORKERS=1 HAMEL_QUEUE=1
auth=(-H 'Authorization: Bearer example-token')
ex unauthorized.401 GET /v1/health
ex -health-with-token.200 GET /v1/health "${auth[@]}"
ex -model-with-token.201 POST /v1/models "${auth[@]}" "${json[@]}" --data-binary @"$here/model.json"
ex -simulation-running.202 POST /v1/simulations "${auth[@]}" "${json[@]}" --data-binary @"$work/long.json"
j1=$(jq -r .job_id "$body")
sleep 0.2
jq '.t_end = 2e6' "$work/long.json" >"$work/long2.json"
jq '.t_end = 3e6' "$work/long.json" >"$work/long3.json"
ex -simulation-queued.202 POST /v1/simulations "${auth[@]}" "${json[@]}" --data-binary @"$work/long2.json"
j2=$(jq -r .job_id "$body")
ex queue-full.503 POST /v1/simulations "${auth[@]}" "${json[@]}" --data-binary @"$work/long3.json"
ex -job-cancel-queued.200 DELETE "/v1/jobs/$j2" "${auth[@]}"
ex -job-cancel-running.200 DELETE "/v1/jobs/$j1" "${auth[@]}"

# ---- a server with the engine's fault hooks (HAMEL_TEST_FAULTS=1) ---------------------
start faults HAMEL_TEST_FAULTS=1
jq '.name = "__fault_segv__"' "$here/model.json" >"$work/fault-model.json"
ex -engine-fault.500 POST /v1/models "${json[@]}" --data-binary @"$work/fault-model.json"
fault=$(jq -r .model_id "$body")
ex quarantine-list.200 GET /v1/quarantine
ex -quarantine-clear.204 DELETE "/v1/quarantine/$fault"

echo "regenerated $(ls "$here"/*.json "$here"/*.txt | wc -l) files in $here"
