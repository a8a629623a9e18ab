#!/usr/bin/env bash
# Server benchmarks of issue 3, item 8 (called by scripts/bench.sh, or run alone).
#
# Starts build/hamel-server with its defaults (worker pool = number of cores, access log
# on, written to a file) on an ephemeral loopback port and a fresh data directory, then
# measures with wrk:
#   1. cache hits: the README's rolling-disk request (greenwood-5.3, model inline) POSTed
#      again and again after one computed run — throughput, p50/p99 latency, errors —
#      at 64 connections for BENCH_HIT_SECONDS (20 s by default; the issue's check is
#      60 s: BENCH_HIT_SECONDS=60);
#   1b. the same cache hits for BENCH_CANON_SECONDS (10) with bodies that differ in
#      trailing whitespace, so the server's exact-bytes memo never matches and every
#      request is parsed and canonicalised before the result cache answers;
#   2. memory: VmHWM (peak RSS) and VmRSS from /proc/PID/status once the server has
#      answered at least BENCH_RSS_REQUESTS (100,000) requests (cache hits are added
#      until it has), and again after step 3 has filled the result cache;
#   3. cold simulations: distinct rolling-disk requests (initial Omega differs in every
#      one, so each is computed) with ?wait, BENCH_COLD_CONNECTIONS at a time for
#      BENCH_COLD_SECONDS — simulations per second, checked against the server's own
#      jobs_total{outcome="done"} and cache-hit counters.
# Targets printed beside the figures: >= 5,000 cache hits/s, p99 < 10 ms, 0 errors.
# BENCH_STRICT=1 makes a missed target exit 1.
#
# Environment: HAMEL_CASES_DIR (../shared/cases), BENCH_HIT_SECONDS (20),
# BENCH_CANON_SECONDS (10), BENCH_COLD_SECONDS (15), BENCH_CONNECTIONS (64), BENCH_COLD_CONNECTIONS (16),
# BENCH_THREADS (wrk threads: number of cores), BENCH_RSS_REQUESTS (100000),
# BENCH_STRICT (0), HAMEL_SERVER_BIN (build/hamel-server, built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

cases=${HAMEL_CASES_DIR:-../shared/cases}
case_file=$cases/greenwood-5.3-rolling-disk.json
hit_s=${BENCH_HIT_SECONDS:-20}
cold_s=${BENCH_COLD_SECONDS:-15}
canon_s=${BENCH_CANON_SECONDS:-10}
conns=${BENCH_CONNECTIONS:-64}
cold_conns=${BENCH_COLD_CONNECTIONS:-16}
cores=$(nproc)
threads=${BENCH_THREADS:-$cores}
rss_requests=${BENCH_RSS_REQUESTS:-100000}
strict=${BENCH_STRICT:-0}
target_rps=5000
target_p99_ms=10

# `make bench` installs the test packages; wrk is in install-deps.sh's bench list.
if ! command -v wrk >/dev/null || ! command -v jq >/dev/null; then
  scripts/install-deps.sh bench
fi
for tool in wrk jq curl; do
  if ! command -v "$tool" >/dev/null; then
    echo "bench-server: $tool is not installed (scripts/install-deps.sh)" >&2
    exit 2
  fi
done
if [ ! -f "$case_file" ]; then
  echo "bench-server: missing $case_file (set HAMEL_CASES_DIR)" >&2
  exit 2
fi
bin=${HAMEL_SERVER_BIN:-build/hamel-server}
if [ -z "${HAMEL_SERVER_BIN:-}" ]; then
  make --no-print-directory "$bin" >/dev/null
fi

# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
bench_server_start bench-server "$bin" || exit 1
url=http://127.0.0.1:$port
workers=$(sed -n 's/.*: \([0-9]*\) workers,.*/\1/p' "$work/server.log" | head -1)

# A counter from /metrics (0 when absent).
metric() {
  curl -s "$url/metrics" | awk -v s="$1" '$1 == s { print $2; found = 1 } END { if (!found) print 0 }'
}
requests_served() {
  curl -s "$url/metrics" | awk '/^hamel_http_requests_total\{/ { n += $2 } END { printf "%d\n", n }'
}

# ---- 1. cache hits --------------------------------------------------------------------
jq -c '.simulation + {model: .model}' "$case_file" >"$work/request.json"
first=$(curl -s -o "$work/first.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$work/request.json" "$url/v1/simulations?wait=60")
if [ "$first" != 200 ] || [ "$(jq -r .status "$work/first.json")" != done ]; then
  echo "bench-server: the priming simulation answered $first:" >&2
  head -c 600 "$work/first.json" >&2
  exit 1
fi
again=$(curl -s -H 'Content-Type: application/json' --data-binary @"$work/request.json" \
  "$url/v1/simulations" | jq -r .cached)
if [ "$again" != true ]; then
  echo "bench-server: the repeated request was not a cache hit (cached: $again)" >&2
  exit 1
fi
bytes=$(curl -s -o /dev/null -w '%{size_download}' -H 'Content-Type: application/json' \
  --data-binary @"$work/request.json" "$url/v1/simulations")

# wrk's done() prints one machine-readable line: requests seconds p50_us p99_us errors.
cat >"$work/report.lua" <<'EOF'
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %.6f %.1f %.1f %d %d %d %d %d\n", summary.requests,
    summary.duration / 1e6, latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.status, e.timeout))
end
EOF
{
  printf 'wrk.method = "POST"\n'
  printf 'wrk.headers["Content-Type"] = "application/json"\n'
  printf 'wrk.body = [==[%s]==]\n' "$(cat "$work/request.json")"
  cat "$work/report.lua"
} >"$work/hit.lua"

# Runs wrk; sets r_requests r_seconds r_p50 r_p99 r_errors (connect+read+write+status+timeout).
run_wrk() {
  local out
  out=$(wrk "$@")
  echo "$out" >>"$work/wrk.txt"
  read -r _ r_requests r_seconds r_p50 r_p99 e1 e2 e3 e4 e5 < <(echo "$out" | grep '^RESULT')
  r_errors=$((e1 + e2 + e3 + e4 + e5))
  r_detail="connect $e1, read $e2, write $e3, non-2xx $e4, timeout $e5"
}

cached0=$(metric 'hamel_jobs_total{outcome="cached"}')
run_wrk -t"$threads" -c"$conns" -d"${hit_s}s" --timeout 5s -s "$work/hit.lua" \
  "$url/v1/simulations"
cached1=$(metric 'hamel_jobs_total{outcome="cached"}')
hit_requests=$r_requests
hit_rps=$(awk -v n="$r_requests" -v s="$r_seconds" 'BEGIN { printf "%.0f", n / s }')
hit_p50=$(awk -v u="$r_p50" 'BEGIN { printf "%.2f", u / 1000 }')
hit_p99=$(awk -v u="$r_p99" 'BEGIN { printf "%.2f", u / 1000 }')
hit_errors=$r_errors
hit_detail=$r_detail
hit_counted=$(awk -v a="$cached0" -v b="$cached1" 'BEGIN { printf "%d", b - a }')

# ---- 1b. cache hits that take the canonical path ---------------------------------------
# The same request with different trailing whitespace in every body: the body memo never
# matches, so each one is parsed, its model hashed and its request canonicalised before
# the result cache answers.
{
  printf 'local body = [==[%s]==]\n' "$(cat "$work/request.json")"
  cat <<'EOF'
local n = 0
local id = 0
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end
function init(args)
  id = tonumber(wrk.thread:get("id")) or 0
end
function request()
  n = n + 1
  -- 24 bits of the counter and 4 of the thread as spaces and tabs: distinct bytes
  local v = n + id * 16777216
  local pad = {}
  for i = 1, 28 do
    pad[i] = (v % 2 == 1) and "\t" or " "
    v = math.floor(v / 2)
  end
  return wrk.format("POST", "/v1/simulations", {["Content-Type"] = "application/json"},
                    body .. table.concat(pad))
end
EOF
  cat "$work/report.lua"
} >"$work/canon.lua"
cachedn0=$(metric 'hamel_jobs_total{outcome="cached"}')
run_wrk -t"$threads" -c"$conns" -d"${canon_s}s" --timeout 5s -s "$work/canon.lua" \
  "$url/v1/simulations"
cachedn1=$(metric 'hamel_jobs_total{outcome="cached"}')
canon_rps=$(awk -v n="$r_requests" -v s="$r_seconds" 'BEGIN { printf "%.0f", n / s }')
canon_p50=$(awk -v u="$r_p50" 'BEGIN { printf "%.2f", u / 1000 }')
canon_p99=$(awk -v u="$r_p99" 'BEGIN { printf "%.2f", u / 1000 }')
canon_requests=$r_requests
canon_errors=$r_errors
canon_counted=$(awk -v a="$cachedn0" -v b="$cachedn1" 'BEGIN { printf "%d", b - a }')

# ---- 2. memory after 100k requests -----------------------------------------------------
served=$(requests_served)
while [ "$served" -lt "$rss_requests" ]; do
  # more cache hits until the server has answered rss_requests requests in all
  run_wrk -t"$threads" -c"$conns" -d5s --timeout 5s -s "$work/hit.lua" "$url/v1/simulations"
  served=$(requests_served)
done
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
cache_bytes=$(metric 'hamel_cache_bytes{cache="results"}')
cache_cap=$(metric 'hamel_cache_max_bytes{cache="results"}')

# ---- 3. cold simulations ---------------------------------------------------------------
{
  printf 'local template = [==[%s]==]\n' "$(jq -c '.initial.speeds.Omega = "@OMEGA@"' "$work/request.json")"
  cat <<'EOF'
local n = 0
local id = 0
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end
function init(args)
  id = tonumber(wrk.thread:get("id")) or 0
end
function request()
  n = n + 1
  -- a distinct initial Omega in every request of every thread: nothing is cached
  local omega = string.format("%.12f", 4 + id * 0.01 + n * 1e-9)
  local body = template:gsub('"@OMEGA@"', omega)
  return wrk.format("POST", "/v1/simulations?wait=60",
                    {["Content-Type"] = "application/json"}, body)
end
EOF
  cat "$work/report.lua"
} >"$work/cold.lua"
done0=$(metric 'hamel_jobs_total{outcome="done"}')
cachedc0=$(metric 'hamel_jobs_total{outcome="cached"}')
run_wrk -t"$threads" -c"$cold_conns" -d"${cold_s}s" --timeout 60s -s "$work/cold.lua" \
  "$url/v1/simulations"
done1=$(metric 'hamel_jobs_total{outcome="done"}')
cachedc1=$(metric 'hamel_jobs_total{outcome="cached"}')
cold_done=$(awk -v a="$done0" -v b="$done1" 'BEGIN { printf "%d", b - a }')
cold_cached=$(awk -v a="$cachedc0" -v b="$cachedc1" 'BEGIN { printf "%d", b - a }')
cold_rate=$(awk -v n="$cold_done" -v s="$r_seconds" 'BEGIN { printf "%.0f", n / s }')
cold_answers=$r_requests
cold_p50=$(awk -v u="$r_p50" 'BEGIN { printf "%.1f", u / 1000 }')
cold_p99=$(awk -v u="$r_p99" 'BEGIN { printf "%.1f", u / 1000 }')
cold_errors=$r_errors
cold_detail=$r_detail
per_job_ms=$(curl -s "$url/metrics" | awk '$1 == "hamel_integrate_seconds_sum" { s = $2 }
  $1 == "hamel_integrate_seconds_count" { c = $2 } END { if (c > 0) printf "%.2f", 1000 * s / c; else print "?" }')

hwm_end=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
rss_end=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
cache_end=$(metric 'hamel_cache_bytes{cache="results"}')
served_end=$(requests_served)

kill -TERM "$pid"
wait "$pid" && stopped=0 || stopped=$?
pid=

# ---- report -----------------------------------------------------------------------------
verdict() { if [ "$1" = 1 ]; then echo "met"; else echo "MISSED"; fi; }
ok_rps=$(awk -v a="$hit_rps" -v t="$target_rps" 'BEGIN { print (a >= t) ? 1 : 0 }')
ok_p99=$(awk -v a="$hit_p99" -v t="$target_p99_ms" 'BEGIN { print (a < t) ? 1 : 0 }')
ok_err=$([ "$hit_errors" -eq 0 ] && [ "$canon_errors" -eq 0 ] && [ "$cold_errors" -eq 0 ] && echo 1 || echo 0)
ok_cold=$([ "$cold_cached" -eq 0 ] && [ "$cold_done" -ge "$cold_answers" ] && echo 1 || echo 0)

echo "machine: $cores cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)); wrk $threads threads on the same machine"
echo "server: $bin, $workers workers (default pool), access log on (to a file), data in a fresh SQLite store"
echo "request: greenwood-5.3 rolling disk, model inline (README example), $bytes-byte answer"
echo
printf '%-44s %12s   %s\n' "figure" "measured" "target"
printf '%-44s %12s   %s\n' "cache hits/s ($conns connections, ${hit_s} s)" "$hit_rps" \
  ">= $target_rps ($(verdict "$ok_rps"))"
printf '%-44s %12s   %s\n' "cache-hit latency p50 (ms)" "$hit_p50" ""
printf '%-44s %12s   %s\n' "cache-hit latency p99 (ms)" "$hit_p99" \
  "< $target_p99_ms ($(verdict "$ok_p99"))"
printf '%-44s %12s   %s\n' "cache-hit requests / errors" "$hit_requests / $hit_errors" \
  "0 errors ($(verdict "$ok_err"))"
printf '%-44s %12s   %s\n' "  of which counted as cache hits by /metrics" "$hit_counted" ""
printf '%-44s %12s   %s\n' "cache hits/s, canonical path (${canon_s} s)" "$canon_rps" \
  "bodies differ in whitespace: parsed and canonicalised"
printf '%-44s %12s   %s\n' "  latency p50 / p99 (ms)" "$canon_p50 / $canon_p99" ""
printf '%-44s %12s   %s\n' "  requests / errors / counted as hits" \
  "$canon_requests / $canon_errors / $canon_counted" ""
printf '%-44s %12s   %s\n' "cold rolling-disk simulations/s (${cold_s} s)" "$cold_rate" \
  "each computed: $cold_done done, $cold_cached cached ($(verdict "$ok_cold"))"
printf '%-44s %12s   %s\n' "  cold latency p50 / p99 (ms, ?wait)" "$cold_p50 / $cold_p99" \
  "$cold_conns connections, engine ${per_job_ms} ms per job"
printf '%-44s %12s   %s\n' "  cold answers / errors" "$cold_answers / $cold_errors" ""
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
printf '%-44s %12s   %s\n' "peak RSS after $served requests (VmHWM, MiB)" "$(mib "$hwm")" \
  "VmRSS $(mib "$rss") MiB; result cache $(mib $((cache_bytes / 1024))) MiB"
printf '%-44s %12s   %s\n' "  after the cold run too ($served_end, MiB)" "$(mib "$hwm_end")" \
  "VmRSS $(mib "$rss_end") MiB; result cache $(mib $((cache_end / 1024))) MiB (cap $(mib $((cache_cap / 1024))))"
echo "errors: cache hits: $hit_detail; cold: $cold_detail"
echo "about 3 min at most with the defaults; the issue's 60 s check: BENCH_HIT_SECONDS=60"
echo "server exit on SIGTERM: $stopped"

if [ "$strict" = 1 ] && { [ "$ok_rps" = 0 ] || [ "$ok_p99" = 0 ] || [ "$ok_err" = 0 ] || [ "$ok_cold" = 0 ]; }; then
  exit 1
fi
exit 0
