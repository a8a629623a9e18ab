#!/usr/bin/env bash
# Cache hits of a large result with and without gzip (issue 19, item 7), side by side in
# one run (called by scripts/bench.sh, or run alone).
#
# Starts build/hamel-server (defaults, access log to a file) on a loopback port, computes
# the rolling disk (greenwood-5.3, model inline) with 1001 samples once (about 277 KB of
# JSON), then POSTs the same request again and again with wrk at BENCH_CONNECTIONS (64)
# for BENCH_GZIP_SECONDS (10) each, alternating identity and Accept-Encoding: gzip for
# BENCH_GZIP_ROUNDS (2) rounds: cache hits per second, p50/p99, bytes per answer and the
# ratio gzip / identity, with the load average (1 min) before each round. The gzip form is
# deflated once, on the first answer that asks for it, and kept with the cached result.
#
# Environment: HAMEL_CASES_DIR (../shared/cases), BENCH_GZIP_SECONDS (10),
# BENCH_GZIP_ROUNDS (2), BENCH_CONNECTIONS (64), BENCH_THREADS (number of cores),
# HAMEL_SERVER_BIN (build/hamel-server, built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

cases=${HAMEL_CASES_DIR:-../shared/cases}
case_file=$cases/greenwood-5.3-rolling-disk.json
secs=${BENCH_GZIP_SECONDS:-10}
rounds=${BENCH_GZIP_ROUNDS:-2}
conns=${BENCH_CONNECTIONS:-64}
threads=${BENCH_THREADS:-$(nproc)}
samples=1001

for tool in wrk jq curl; do
  if ! command -v "$tool" >/dev/null; then
    echo "bench-gzip: $tool is not installed (scripts/install-deps.sh bench)" >&2
    exit 2
  fi
done
bin=${HAMEL_SERVER_BIN:-build/hamel-server}
[ -n "${HAMEL_SERVER_BIN:-}" ] || make --no-print-directory "$bin" >/dev/null

# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
bench_server_start bench-gzip "$bin" || exit 1
url=http://127.0.0.1:$port

jq -c --argjson n "$samples" '.simulation + {model: .model} | .output.samples = $n' "$case_file" >"$work/request.json"
code=$(curl -s -o "$work/first.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$work/request.json" "$url/v1/simulations?wait=60")
if [ "$code" != 200 ]; then
  echo "bench-gzip: the priming simulation answered $code" >&2
  exit 1
fi
size() { # bytes of one cache-hit answer, with extra curl arguments
  curl -s -o /dev/null -w '%{size_download}' -H 'Content-Type: application/json' "$@" \
    --data-binary @"$work/request.json" "$url/v1/simulations"
}
plain_bytes=$(size)
gzip_bytes=$(size -H 'Accept-Encoding: gzip')
# the gzip answer must decode to the identity one
curl -s -H 'Content-Type: application/json' --data-binary @"$work/request.json" "$url/v1/simulations" >"$work/plain.json"
curl -s -H 'Accept-Encoding: gzip' -H 'Content-Type: application/json' --data-binary @"$work/request.json" \
  "$url/v1/simulations" | gzip -dc >"$work/gzip.json"
cmp -s "$work/plain.json" "$work/gzip.json" || { echo "bench-gzip: the gzip answer does not decode to the identity one" >&2; exit 1; }

script() { # NAME [header line]
  {
    printf 'wrk.method = "POST"\n'
    printf 'wrk.headers["Content-Type"] = "application/json"\n'
    [ -n "${2:-}" ] && printf '%s\n' "$2"
    printf 'wrk.body = [==[%s]==]\n' "$(cat "$work/request.json")"
    cat <<'LUA'
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %.6f %.1f %.1f %d\n", summary.requests, summary.duration / 1e6,
    latency:percentile(50), latency:percentile(99), e.connect + e.read + e.write + e.status + e.timeout))
end
LUA
  } >"$work/$1.lua"
}
script plain
script gzip 'wrk.headers["Accept-Encoding"] = "gzip"'

run() { # NAME: prints "rps p50_ms p99_ms errors"
  local out
  out=$(wrk -t"$threads" -c"$conns" -d"${secs}s" --timeout 5s -s "$work/$1.lua" "$url/v1/simulations")
  echo "$out" | awk '/^RESULT/ { printf "%.0f %.2f %.2f %d\n", $2 / $3, $4 / 1000, $5 / 1000, $6 }'
}

echo "== cache hits of a $samples-sample rolling-disk result, identity vs gzip (issue 19, item 7) =="
echo "machine: $(nproc) cores; wrk $threads threads, $conns connections, ${secs} s per run, on the same machine"
echo "answer: $plain_bytes bytes identity, $gzip_bytes bytes gzip ($(awk -v a="$gzip_bytes" -v b="$plain_bytes" 'BEGIN { printf "%.2f", a / b }') of it)"
printf '%-6s %-9s %10s %9s %9s %7s %12s\n' round coding "hits/s" "p50 ms" "p99 ms" errors "load (1 min)"
ratios=()
for r in $(seq "$rounds"); do
  for coding in plain gzip; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    read -r rps p50 p99 errs < <(run "$coding")
    printf '%-6s %-9s %10s %9s %9s %7s %12s\n' "$r" "$([ "$coding" = plain ] && echo identity || echo gzip)" \
      "$rps" "$p50" "$p99" "$errs" "$load"
    [ "$coding" = plain ] && plain_rps=$rps || ratios+=("$(awk -v g="$rps" -v p="$plain_rps" 'BEGIN { printf "%.2f", g / p }')")
  done
done
echo "gzip / identity cache hits per second, by round: ${ratios[*]} (same server, same minutes)"
