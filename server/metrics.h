/* metrics.h — the counters behind GET /metrics, in Prometheus text format.
 *
 * Owns process-wide atomic counters: requests by route and status, a request latency
 * histogram by route, jobs by outcome, seconds spent deriving models and integrating.
 * Gauges that belong to other modules (queue depth, cache sizes) are passed in when
 * the page is rendered. Recording is lock-free and allocation-free.
 */
#ifndef HAMEL_SERVER_METRICS_H
#define HAMEL_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"

#define METRICS_ROUTES(X)                                                                                    \
    X(HEALTH, "/v1/health")                                                                                  \
    X(MODELS, "/v1/models")                                                                                  \
    X(MODEL, "/v1/models/{id}")                                                                              \
    X(EQUATIONS, "/v1/models/{id}/equations")                                                                \
    X(MODEL_CODE, "/v1/models/{id}/code")                                                                    \
    X(CODE, "/v1/code")                                                                                      \
    X(STEADY, "/v1/steady")                                                                                  \
    X(HAMEL, "/v1/hamel")                                                                                    \
    X(EVALUATE, "/v1/evaluate")                                                                              \
    X(LINEARIZE, "/v1/linearize")                                                                            \
    X(SIMULATIONS, "/v1/simulations")                                                                        \
    X(JOB, "/v1/jobs/{id}")                                                                                  \
    X(BATCHES, "/v1/batches")                                                                                \
    X(BATCH, "/v1/batches/{id}")                                                                             \
    X(QUARANTINE, "/v1/quarantine/{id}")                                                                     \
    X(PROBLEMS, "/problems/{id}")                                                                            \
    X(METRICS, "/metrics")                                                                                   \
    X(LIVEZ, "/livez")                                                                                       \
    X(READYZ, "/readyz")                                                                                     \
    X(STATIC, "static")                                                                                      \
    X(OTHER, "other")

typedef enum metrics_route {
#define METRICS_ROUTE_ENUM(name, label) METRICS_ROUTE_##name,
    METRICS_ROUTES(METRICS_ROUTE_ENUM)
#undef METRICS_ROUTE_ENUM
        METRICS_ROUTE_COUNT_
} metrics_route;

typedef enum metrics_outcome {
    METRICS_JOB_DONE,
    METRICS_JOB_FAILED,
    METRICS_JOB_CANCELLED,
    METRICS_JOB_REJECTED, /* queue full */
    METRICS_JOB_CACHED,   /* answered from the result cache without a job */
    METRICS_OUTCOME_COUNT_
} metrics_outcome;

/* How a batch ended, and how each of its runs did. */
typedef enum metrics_batch_outcome {
    METRICS_BATCH_CREATED,   /* accepted (every run valid) */
    METRICS_BATCH_INVALID,   /* refused with a 4xx before anything ran */
    METRICS_BATCH_DONE,      /* every run finished */
    METRICS_BATCH_CANCELLED, /* DELETE, or shutdown */
    METRICS_BATCH_OUTCOME_COUNT_
} metrics_batch_outcome;

typedef enum metrics_run_outcome {
    METRICS_RUN_DONE,
    METRICS_RUN_FAILED,
    METRICS_RUN_CANCELLED,
    METRICS_RUN_CACHED, /* done from the result cache, without a job */
    METRICS_RUN_OUTCOME_COUNT_
} metrics_run_outcome;

/* What other modules report at render time. */
typedef struct metrics_gauges {
    size_t queue_depth, queue_capacity, jobs_running, jobs_kept, workers;
    cache_stats models, results;
    long connections;
    size_t batches_active, batches_kept, batch_bytes;
    size_t offload_queued, offload_running;               /* requests waiting for / on an offload thread */
    size_t store_result_bytes, store_results, store_jobs; /* kept on disk */
    long engine_workers_started, engine_faults;           /* isolate.h */
} metrics_gauges;

/* Counts one finished request. */
void metrics_request(metrics_route route, int status, double seconds);

/* Counts one job reaching an outcome. */
void metrics_job(metrics_outcome outcome);

/* Counts one batch reaching an outcome. */
void metrics_batch(metrics_batch_outcome outcome);

/* Counts one batch run reaching an outcome. */
void metrics_batch_run(metrics_run_outcome outcome);

/* Why a model compilation stopped before its end. */
typedef enum metrics_compile_stop {
    METRICS_COMPILE_LIMIT,       /* 422 compile-limit: past the compile budget */
    METRICS_COMPILE_CLIENT_GONE, /* cancelled: the client hung up */
    METRICS_COMPILE_SHUTDOWN,    /* cancelled: the server is stopping */
    METRICS_COMPILE_STOP_COUNT_
} metrics_compile_stop;

/* Counts one compilation stopped before its end. */
void metrics_compile_stopped(metrics_compile_stop why);

/* Counts one job record or result the store could not write (the job was refused or
 * failed instead of being reported done and then lost). */
void metrics_store_failed(void);

/* Adds the wall time of one engine_model_compile. */
void metrics_derive(double seconds);

/* Adds the wall time of one engine_simulate. */
void metrics_integrate(double seconds);

/* Renders the exposition text into a new malloc'd string (caller frees) and sets *len.
 * Borrows g. Returns NULL when out of memory. */
char *metrics_render(const metrics_gauges *g, size_t *len);

#endif
