/* metrics.c — lock-free counters and their Prometheus rendering. */
#include "metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynbuf.h"

#define METRICS_STATUS_MIN 100
#define METRICS_STATUS_SLOTS 500      /* 100..599 */
#define METRICS_RENDER_MAX (1u << 20) /* the metrics text, bytes */

static const double metrics__bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                         0.1,    0.25,  0.5,    1.0,   2.5,  5.0,   10.0};
#define METRICS_BUCKETS (sizeof metrics__bounds / sizeof metrics__bounds[0])

static const char *const metrics__route_labels[] = {
#define METRICS_ROUTE_LABEL(name, label) label,
    METRICS_ROUTES(METRICS_ROUTE_LABEL)
#undef METRICS_ROUTE_LABEL
};

static const char *const metrics__outcome_labels[] = {"done", "failed", "cancelled", "rejected", "cached"};

static atomic_uint_fast64_t metrics__requests[METRICS_ROUTE_COUNT_][METRICS_STATUS_SLOTS];
static atomic_uint_fast64_t metrics__latency[METRICS_ROUTE_COUNT_][METRICS_BUCKETS + 1];
static atomic_uint_fast64_t metrics__latency_ns[METRICS_ROUTE_COUNT_];
static const char *const metrics__batch_labels[] = {"created", "invalid", "done", "cancelled"};
static const char *const metrics__run_labels[] = {"done", "failed", "cancelled", "cached"};

static atomic_uint_fast64_t metrics__jobs[METRICS_OUTCOME_COUNT_];
static atomic_uint_fast64_t metrics__batches[METRICS_BATCH_OUTCOME_COUNT_];
static atomic_uint_fast64_t metrics__runs[METRICS_RUN_OUTCOME_COUNT_];
static atomic_uint_fast64_t metrics__derive_ns, metrics__derive_n;
static atomic_uint_fast64_t metrics__compile_stops[METRICS_COMPILE_STOP_COUNT_];
static atomic_uint_fast64_t metrics__store_failures;
static const char *const metrics__compile_stop_labels[] = {"limit", "client_gone", "shutdown"};
static atomic_uint_fast64_t metrics__integrate_ns, metrics__integrate_n;

static uint64_t metrics__ns(double s) { return s > 0 ? (uint64_t)(s * 1e9) : 0; }

void metrics_request(metrics_route route, int status, double seconds)
{
    if ((unsigned)route >= METRICS_ROUTE_COUNT_)
        route = METRICS_ROUTE_OTHER;
    int slot = status - METRICS_STATUS_MIN;
    if (slot < 0 || slot >= METRICS_STATUS_SLOTS)
        slot = 500 - METRICS_STATUS_MIN;
    atomic_fetch_add_explicit(&metrics__requests[route][slot], 1, memory_order_relaxed);
    size_t b = 0;
    while (b < METRICS_BUCKETS && seconds > metrics__bounds[b])
        b++;
    atomic_fetch_add_explicit(&metrics__latency[route][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&metrics__latency_ns[route], metrics__ns(seconds), memory_order_relaxed);
}

void metrics_job(metrics_outcome outcome)
{
    if ((unsigned)outcome < METRICS_OUTCOME_COUNT_)
        atomic_fetch_add_explicit(&metrics__jobs[outcome], 1, memory_order_relaxed);
}

void metrics_batch(metrics_batch_outcome outcome)
{
    if ((unsigned)outcome < METRICS_BATCH_OUTCOME_COUNT_)
        atomic_fetch_add_explicit(&metrics__batches[outcome], 1, memory_order_relaxed);
}

void metrics_batch_run(metrics_run_outcome outcome)
{
    if ((unsigned)outcome < METRICS_RUN_OUTCOME_COUNT_)
        atomic_fetch_add_explicit(&metrics__runs[outcome], 1, memory_order_relaxed);
}

void metrics_compile_stopped(metrics_compile_stop why)
{
    if ((unsigned)why < METRICS_COMPILE_STOP_COUNT_)
        atomic_fetch_add_explicit(&metrics__compile_stops[why], 1, memory_order_relaxed);
}

void metrics_store_failed(void)
{
    atomic_fetch_add_explicit(&metrics__store_failures, 1, memory_order_relaxed);
}

void metrics_derive(double seconds)
{
    atomic_fetch_add_explicit(&metrics__derive_ns, metrics__ns(seconds), memory_order_relaxed);
    atomic_fetch_add_explicit(&metrics__derive_n, 1, memory_order_relaxed);
}

void metrics_integrate(double seconds)
{
    atomic_fetch_add_explicit(&metrics__integrate_ns, metrics__ns(seconds), memory_order_relaxed);
    atomic_fetch_add_explicit(&metrics__integrate_n, 1, memory_order_relaxed);
}

static uint64_t metrics__load(atomic_uint_fast64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static void metrics__cache(dynbuf *b, const char *name, const cache_stats *c)
{
    dynbuf_printf(b, "hamel_cache_hits_total{cache=\"%s\"} %llu\n", name, (unsigned long long)c->hits);
    dynbuf_printf(b, "hamel_cache_misses_total{cache=\"%s\"} %llu\n", name, (unsigned long long)c->misses);
    dynbuf_printf(b, "hamel_cache_evictions_total{cache=\"%s\"} %llu\n", name,
                  (unsigned long long)c->evictions);
    dynbuf_printf(b, "hamel_cache_entries{cache=\"%s\"} %zu\n", name, c->entries);
    dynbuf_printf(b, "hamel_cache_bytes{cache=\"%s\"} %zu\n", name, c->bytes);
    dynbuf_printf(b, "hamel_cache_max_bytes{cache=\"%s\"} %zu\n", name, c->max_bytes);
}

char *metrics_render(const metrics_gauges *g, size_t *len)
{
    dynbuf b;
    dynbuf_init(&b, 16384, METRICS_RENDER_MAX);
    dynbuf_printf(&b, "# HELP hamel_http_requests_total HTTP requests by route and status.\n"
                      "# TYPE hamel_http_requests_total counter\n");
    for (int r = 0; r < METRICS_ROUTE_COUNT_; r++)
        for (int s = 0; s < METRICS_STATUS_SLOTS; s++) {
            uint64_t n = metrics__load(&metrics__requests[r][s]);
            if (n)
                dynbuf_printf(&b, "hamel_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n",
                              metrics__route_labels[r], s + METRICS_STATUS_MIN, (unsigned long long)n);
        }
    dynbuf_printf(&b, "# HELP hamel_http_request_duration_seconds Request latency.\n"
                      "# TYPE hamel_http_request_duration_seconds histogram\n");
    for (int r = 0; r < METRICS_ROUTE_COUNT_; r++) {
        uint64_t cum = 0;
        for (size_t i = 0; i <= METRICS_BUCKETS; i++)
            cum += metrics__load(&metrics__latency[r][i]);
        if (!cum)
            continue;
        const char *label = metrics__route_labels[r];
        cum = 0;
        for (size_t i = 0; i < METRICS_BUCKETS; i++) {
            cum += metrics__load(&metrics__latency[r][i]);
            dynbuf_printf(&b,
                          "hamel_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} "
                          "%llu\n",
                          label, metrics__bounds[i], (unsigned long long)cum);
        }
        cum += metrics__load(&metrics__latency[r][METRICS_BUCKETS]);
        dynbuf_printf(&b,
                      "hamel_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} "
                      "%llu\n",
                      label, (unsigned long long)cum);
        dynbuf_printf(&b, "hamel_http_request_duration_seconds_sum{route=\"%s\"} %.9f\n", label,
                      metrics__load(&metrics__latency_ns[r]) / 1e9);
        dynbuf_printf(&b, "hamel_http_request_duration_seconds_count{route=\"%s\"} %llu\n", label,
                      (unsigned long long)cum);
    }
    dynbuf_printf(&b, "# HELP hamel_jobs_total Simulation requests by outcome.\n"
                      "# TYPE hamel_jobs_total counter\n");
    for (int o = 0; o < METRICS_OUTCOME_COUNT_; o++)
        dynbuf_printf(&b, "hamel_jobs_total{outcome=\"%s\"} %llu\n", metrics__outcome_labels[o],
                      (unsigned long long)metrics__load(&metrics__jobs[o]));
    dynbuf_printf(&b, "# HELP hamel_batches_total Batches by outcome.\n"
                      "# TYPE hamel_batches_total counter\n");
    for (int o = 0; o < METRICS_BATCH_OUTCOME_COUNT_; o++)
        dynbuf_printf(&b, "hamel_batches_total{outcome=\"%s\"} %llu\n", metrics__batch_labels[o],
                      (unsigned long long)metrics__load(&metrics__batches[o]));
    dynbuf_printf(&b, "# HELP hamel_batch_runs_total Runs of batches by outcome.\n"
                      "# TYPE hamel_batch_runs_total counter\n");
    for (int o = 0; o < METRICS_RUN_OUTCOME_COUNT_; o++)
        dynbuf_printf(&b, "hamel_batch_runs_total{outcome=\"%s\"} %llu\n", metrics__run_labels[o],
                      (unsigned long long)metrics__load(&metrics__runs[o]));
    dynbuf_printf(&b,
                  "# TYPE hamel_batches_active gauge\nhamel_batches_active %zu\n"
                  "# TYPE hamel_batches_kept gauge\nhamel_batches_kept %zu\n"
                  "# TYPE hamel_batch_bytes gauge\nhamel_batch_bytes %zu\n",
                  g->batches_active, g->batches_kept, g->batch_bytes);
    dynbuf_printf(&b,
                  "# HELP hamel_offload_queued Requests waiting for an offload thread (compiling a "
                  "model, Hamel coefficients).\n"
                  "# TYPE hamel_offload_queued gauge\nhamel_offload_queued %zu\n"
                  "# HELP hamel_offload_running Requests running on an offload thread now.\n"
                  "# TYPE hamel_offload_running gauge\nhamel_offload_running %zu\n",
                  g->offload_queued, g->offload_running);
    dynbuf_printf(
        &b,
        "# HELP hamel_engine_workers_started_total Engine worker processes started.\n"
        "# TYPE hamel_engine_workers_started_total counter\nhamel_engine_workers_started_total %ld\n"
        "# HELP hamel_engine_faults_total Engine calls whose worker process died (500 "
        "engine-fault; the model was quarantined).\n"
        "# TYPE hamel_engine_faults_total counter\nhamel_engine_faults_total %ld\n",
        g->engine_workers_started, g->engine_faults);
    dynbuf_printf(&b,
                  "# HELP hamel_store_result_bytes Bytes of results kept on disk (HAMEL_STORE_BYTES).\n"
                  "# TYPE hamel_store_result_bytes gauge\nhamel_store_result_bytes %zu\n"
                  "# HELP hamel_store_results Results kept on disk.\n"
                  "# TYPE hamel_store_results gauge\nhamel_store_results %zu\n"
                  "# HELP hamel_store_jobs Job records kept on disk (HAMEL_STORE_JOBS).\n"
                  "# TYPE hamel_store_jobs gauge\nhamel_store_jobs %zu\n",
                  g->store_result_bytes, g->store_results, g->store_jobs);
    dynbuf_printf(&b,
                  "# TYPE hamel_queue_depth gauge\nhamel_queue_depth %zu\n"
                  "# TYPE hamel_queue_capacity gauge\nhamel_queue_capacity %zu\n"
                  "# TYPE hamel_jobs_running gauge\nhamel_jobs_running %zu\n"
                  "# TYPE hamel_jobs_kept gauge\nhamel_jobs_kept %zu\n"
                  "# TYPE hamel_workers gauge\nhamel_workers %zu\n"
                  "# TYPE hamel_http_connections gauge\nhamel_http_connections %ld\n",
                  g->queue_depth, g->queue_capacity, g->jobs_running, g->jobs_kept, g->workers,
                  g->connections);
    dynbuf_printf(&b,
                  "# HELP hamel_derive_seconds Time spent validating and compiling models.\n"
                  "# TYPE hamel_derive_seconds summary\n"
                  "hamel_derive_seconds_sum %.9f\nhamel_derive_seconds_count %llu\n"
                  "# HELP hamel_integrate_seconds Time spent in engine_simulate.\n"
                  "# TYPE hamel_integrate_seconds summary\n"
                  "hamel_integrate_seconds_sum %.9f\nhamel_integrate_seconds_count %llu\n",
                  metrics__load(&metrics__derive_ns) / 1e9,
                  (unsigned long long)metrics__load(&metrics__derive_n),
                  metrics__load(&metrics__integrate_ns) / 1e9,
                  (unsigned long long)metrics__load(&metrics__integrate_n));
    dynbuf_printf(&b, "# HELP hamel_compiles_stopped_total Model compilations stopped before their end "
                      "(limit: past the compile budget, 422; client_gone, shutdown: cancelled).\n"
                      "# TYPE hamel_compiles_stopped_total counter\n");
    for (int i = 0; i < METRICS_COMPILE_STOP_COUNT_; i++)
        dynbuf_printf(&b, "hamel_compiles_stopped_total{reason=\"%s\"} %llu\n",
                      metrics__compile_stop_labels[i],
                      (unsigned long long)metrics__load(&metrics__compile_stops[i]));
    dynbuf_printf(&b,
                  "# HELP hamel_store_failures_total Job records and results the store could not write "
                  "(the job was refused with 503 or failed instead of being reported done).\n"
                  "# TYPE hamel_store_failures_total counter\nhamel_store_failures_total %llu\n",
                  (unsigned long long)metrics__load(&metrics__store_failures));
    dynbuf_printf(&b, "# HELP hamel_cache_hits_total Cache lookups that found an entry.\n"
                      "# TYPE hamel_cache_hits_total counter\n"
                      "# TYPE hamel_cache_misses_total counter\n"
                      "# TYPE hamel_cache_evictions_total counter\n"
                      "# TYPE hamel_cache_entries gauge\n"
                      "# TYPE hamel_cache_bytes gauge\n"
                      "# TYPE hamel_cache_max_bytes gauge\n");
    metrics__cache(&b, "models", &g->models);
    metrics__cache(&b, "results", &g->results);
    if (b.failed) {
        dynbuf_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.s;
}
