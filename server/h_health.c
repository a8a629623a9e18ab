/* h_health.c — the probes and the metrics: GET /v1/health, /livez, /readyz, /metrics.
 *
 * Owns what a load balancer or Prometheus asks: liveness, readiness (503 while draining
 * or not accepting work) and the text exposition of metrics.h with the gauges read from
 * the job pool, caches, batches, offload pool, store and the daemon's connection count.
 * /v1/health and /livez read memory only. With a shared queue (HAMEL_REDIS) /readyz
 * pings Redis and /metrics asks it for the stream's length: both are then answered from
 * the offload pool, so a slow or held Redis stalls no poll thread.
 */
#include <stdlib.h>

#include "http_conn.h"

enum MHD_Result http__health(http_conn *c)
{
    return http__json(c, 200,
                      json_pack("{s:s, s:s, s:s}", "status", "ok", "version", engine_version(), "build",
                                engine_identity()));
}

/* Whether the probes ask Redis (HAMEL_REDIS): then they run on the offload pool. */
static int http__probes_remote(const http_conn *c) { return c->srv->d.cfg->redis[0] != '\0'; }

/* Offloaded: whether the shared queue answers. */
static void http__run_reachable(void *arg)
{
    http_conn *c = arg;
    c->work.rc = jobs_reachable(c->srv->d.jobs);
}

static enum MHD_Result http__readyz_answer(http_conn *c)
{
    http_server *s = c->srv;
    if (!c->work.rc)
        return http__error(c, HAMEL_E_UNAVAILABLE,
                           "the shared store and queue (HAMEL_REDIS) cannot be reached");
    if (atomic_load(&s->ready) && jobs_accepting(s->d.jobs))
        return http__json(c, 200, json_pack("{s:s}", "status", "ready"));
    return http__error(c, HAMEL_E_UNAVAILABLE, "not accepting work");
}

enum MHD_Result http__readyz(http_conn *c)
{
    if (http__probes_remote(c)) /* past the offload queue: 503, not ready */
        return http__offload(c, http__run_reachable, http__readyz_answer);
    c->work.rc = 1;
    return http__readyz_answer(c);
}

/* The exposition text into c->work.text (NULL when out of memory). */
static void http__run_metrics(void *arg)
{
    http_conn *c = arg;
    http_server *s = c->srv;
    metrics_gauges g = {0};
    jobs_counts(s->d.jobs, &g.queue_depth, &g.queue_capacity, &g.jobs_running, &g.jobs_kept);
    g.workers = (size_t)s->d.cfg->workers;
    cache_stats_get(s->d.models, &g.models);
    cache_stats_get(s->d.results, &g.results);
    /* The daemon from the connection: h->daemon is assigned after MHD_start_daemon returns,
     * when its threads may already be serving (ThreadSanitizer saw that race). */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_DAEMON);
    const union MHD_DaemonInfo *info =
        ci ? MHD_get_daemon_info(ci->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS) : NULL;
    g.connections = info ? (long)info->num_connections : -1;
    batches_counts(s->d.batches, &g.batches_active, &g.batches_kept, &g.batch_bytes);
    offload_counts(s->offload, &g.offload_queued, &g.offload_running);
    size_t derive_queued = 0, derive_running = 0; /* the derivations' lane counts as offload too */
    offload_counts(s->derive, &derive_queued, &derive_running);
    g.offload_queued += derive_queued;
    g.offload_running += derive_running;
    isolate_counts(&g.engine_workers_started, &g.engine_faults);
    if (s->d.st)
        store_counts(s->d.st, &g.store_result_bytes, &g.store_results, &g.store_jobs);
    free(c->work.text);
    c->work.text = metrics_render(&g, &c->work.text_len);
}

static enum MHD_Result http__metrics_answer(http_conn *c)
{
    char *text = c->work.text;
    size_t len = c->work.text_len;
    c->work.text = NULL;
    if (!text)
        return http__error(c, HAMEL_E_INTERNAL, "out of memory");
    return http__send(c, 200, http__text_response(text, len), "text/plain; version=0.0.4; charset=utf-8",
                      len);
}

enum MHD_Result http__metrics(http_conn *c)
{
    if (http__probes_remote(c)) /* past the offload queue: read here, as before */
        return http__offload_read(c, http__run_metrics, http__metrics_answer);
    http__run_metrics(c);
    return http__metrics_answer(c);
}

enum MHD_Result http__livez(http_conn *c)
{
    return http__json(c, 200, json_pack("{s:s}", "status", "alive"));
}
