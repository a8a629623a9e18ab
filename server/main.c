/* main.c — hamel-server: configuration, start-up, and a graceful stop on SIGTERM/SIGINT.
 *
 * Start-up order: config, engine_init (which turns the GSL error handler off), the store
 * under HAMEL_DATA, the code cache (HAMEL_CACHE_DIR or HAMEL_DATA/native), the model and result caches, the
 * job pool, the batches, the HTTP daemon. Stop order on a signal: stop accepting connections, let running
 * jobs finish for up to HAMEL_DRAIN_SECONDS (then cancel them), cancel what batches have left, answer every
 * long-poll and end every batch stream, close connections,
 * free everything, exit 0.
 */
#include <gsl/gsl_errno.h>
#include <pthread.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "blob.h"
#include "cache.h"
#include "config.h"
#include "engine.h"
#include "http.h"
#include "isolate.h"
#include "jobs.h"
#include "problems.h"
#include "quarantine.h"
#include "redis.h"
#include "store.h"

#define MAIN_MODEL_CACHE_SHARE 4 /* models get 1/4 of HAMEL_CACHE_BYTES, results the rest */
#define MAIN_BATCHES_KEPT 256    /* batch records kept in memory (finished ones evicted first) */
#define MAIN_EXIT_SLACK 0.9      /* the watchdog fires this long after the drain: within its + 1 s */

static void *main__model_retain(void *v) { return engine_model_retain(v); }
static void main__model_release(void *v) { engine_model_release(v); }
static void *main__blob_retain(void *v) { return blob_retain(v); }
static void main__blob_release(void *v) { blob_release(v); }

/* The stop bound: SIGTERM exits within HAMEL_DRAIN_SECONDS + 1 s. Jobs are cancelled
 * after the drain and compilations at once (hangup.h), but a request that cannot be
 * interrupted (a long /v1/hamel) or a stalled client could hold the orderly stop up;
 * this thread ends the process when the bound is near, whatever is still running. */
static void *main__watchdog(void *arg)
{
    double s = *(const double *)arg;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
    static const char msg[] = "hamel-server: the drain bound has passed; exiting with work still running\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(0);
    return NULL;
}

static const cache_ops main__model_ops = {main__model_retain, main__model_release};
static const cache_ops main__blob_ops = {main__blob_retain, main__blob_release};

int main(int argc, char **argv)
{
    /* No fastbins (glibc): with them every allocation of 1 KiB or more first consolidates
     * the freed small chunks (malloc_consolidate), which a run's many small JSON and
     * workspace allocations made 3-4% of a batch sweep's CPU, in the engine workers and
     * here; tcache still serves small allocations. Measured with scripts/bench-sweep.sh. */
    mallopt(M_MXFAST, 0);
    problems_init(); /* the service's problem codes and statuses, in this process and its workers */
    if (argc > 1 && !strcmp(argv[1], "--engine-worker"))
        return isolate_worker_main(argc, argv);
    static server_config cfg;
    int rc = config_load(&cfg, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;

    /* Block the stop signals before any thread starts, so only sigwait sees them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A file-size limit (ulimit -f) reached by the store, the results journal or a worker's
     * reply memfd is a write that fails with EFBIG, as a full disk's does, and not a
     * signal that ends the server (SIGXFSZ's default); engine workers and the native tier's
     * compiler inherit the disposition. */
    signal(SIGXFSZ, SIG_IGN);

    /* Fixed malloc thresholds: glibc raises its mmap threshold to the size of the largest
     * block freed (up to 32 MiB) and the trim threshold to twice that, after which the
     * memory of big results stays in thread arenas for good (malloc_trim does not trim
     * their tops). Fixed, blocks of 1 MiB and more are mapped and unmapped on free, and
     * arena tops past 4 MiB are returned. 1 MiB, not less: a result of a few hundred KB
     * (1001 samples: 277 KB) then reuses freed arena memory instead of being mapped
     * fresh and faulted in page by page each job (measured, 1,200 cold rolling-disk
     * requests with a 16 MB result cache: 183 -> 10 minor faults and 5.5 -> 5.0 ms
     * server CPU per request; RSS 51 -> 56 MB; one 100,000-sample job: 43.5 -> 44.9 MB). */
    mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 4 * 1024 * 1024);

    engine_init();
    gsl_set_error_handler_off(); /* engine_init does it too; the default handler aborts */

    engine_limits limits = engine_default_limits;
    if (cfg.max_wall > 0)
        limits.max_wall_seconds = cfg.max_wall;
    if (cfg.max_steps > 0)
        limits.max_steps = cfg.max_steps;
    limits.max_output_values = cfg.max_output_values;
    if (cfg.max_compile_seconds > 0)
        limits.max_compile_seconds = cfg.max_compile_seconds;
    if (cfg.max_compile_bytes > 0)
        limits.max_compile_bytes = cfg.max_compile_bytes;

    store *st = NULL;
    store_limits store_lim = {cfg.store_bytes, cfg.store_jobs, cfg.store_model_bytes};
    /* HAMEL_REDIS: the store and the job queue are shared with the other instances. */
    redis_config rcfg = {cfg.redis,     cfg.redis_timeout, cfg.redis_lease,
                         cfg.redis_ttl, (size_t)cfg.queue, store_lim};
    int shared = cfg.redis[0] != '\0';
    if ((shared ? redis_store_open(&rcfg, &st) : store_open(cfg.data, &store_lim, &st)) != 0)
        return 1;
    /* The optimizing code tier (engine/native.h): shared objects cached in
     * HAMEL_CACHE_DIR, else <data>/native; HAMEL_NO_NATIVE=1 turns the tier off. */
    char code_dir[CONFIG_PATH_MAX + 16];
    const char *cd = cfg.cache_dir;
    snprintf(code_dir, sizeof code_dir, "%s%s", *cd ? cd : cfg.data, *cd ? "" : "/native");
    if (engine_code_cache(code_dir) != 0)
        fprintf(
            stderr,
            "hamel-server: code cache %s cannot be made, is writable by another user or its key "
            "(HAMEL_NATIVE_KEY_FILE, default %s.key) cannot be read or made 0600: the native tier is off\n",
            code_dir, code_dir);
    /* The quarantine of models whose engine work faulted, and the engine workers that
     * contain such faults (isolate.h): HAMEL_ISOLATE=0 runs the engine in this process. */
    quarantine_start(st, cfg.quarantine_seconds, cfg.redis[0] != '\0');
    size_t model_bytes = cfg.cache_bytes / MAIN_MODEL_CACHE_SHARE;
    if (cfg.isolate) {
        char exe[CONFIG_PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = '\0';
        /* one worker for each thread that can call the engine at once: the offload pool
         * (2 per poll thread) and the derivations' lane (1 per poll thread), the job
         * workers, and as many for the shared queue */
        isolate_config ic = {exe, cfg.http_threads * 3 + cfg.workers * (shared ? 2 : 1), cfg.worker_memory_mb,
                             code_dir, model_bytes};
        if (n <= 0 || isolate_start(&ic) != 0)
            return 1;
    }
    cache *models = cache_new(model_bytes, &main__model_ops);
    cache *results = cache_new(cfg.cache_bytes - model_bytes, &main__blob_ops);
    jobs_config jc = {cfg.workers, cfg.queue, cfg.max_jobs, limits, shared ? &rcfg : NULL};
    jobs *pool = models && results ? jobs_new(&jc, st, results) : NULL;
    if (!pool) {
        fprintf(stderr, "hamel-server: cannot start the worker pool\n");
        return 1;
    }
    /* A batch may hold at most half the queue, so single requests always find room. */
    batches_config bc = {cfg.max_batch,   (size_t)(cfg.queue / 2 > 0 ? cfg.queue / 2 : 1),
                         cfg.batch_bytes, MAIN_BATCHES_KEPT,
                         limits,          cfg.workers};
    batches *bat = batches_new(&bc, pool, results, st);
    if (!bat) {
        fprintf(stderr, "hamel-server: cannot start the batch timer\n");
        return 1;
    }
    http_deps deps = {&cfg, &limits, models, results, st, pool, bat};
    http_server *http = NULL;
    int port = 0;
    if (http_start(&deps, &http, &port) != 0)
        return 1;
    char where[CONFIG_PATH_MAX + 16];
    if (shared)
        redis_url_shown(cfg.redis, where, sizeof where);
    else
        snprintf(where, sizeof where, "%s", cfg.data);
    const char *host = strchr(cfg.addr, ':') ? "[" : "";
    printf("listening on http://%s%s%s:%d\n", host, cfg.addr, host[0] ? "]" : "", port);
    fflush(stdout);
    fprintf(stderr,
            "hamel-server %s: %d workers, queue %d, data %s, cache %zu bytes, token %s, "
            "static %s\n",
            ENGINE_VERSION, cfg.workers, cfg.queue, where, cfg.cache_bytes, cfg.token[0] ? "required" : "off",
            cfg.statics[0] ? cfg.statics : "(none)");

    int sig = 0;
    while (sigwait(&stop, &sig) != 0)
        ;
    fprintf(stderr, "hamel-server: %s, draining\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    static double watchdog_after;
    watchdog_after = cfg.drain_seconds + MAIN_EXIT_SLACK;
    pthread_t watchdog;
    if (pthread_create(&watchdog, NULL, main__watchdog, &watchdog_after) == 0)
        pthread_detach(watchdog);
    http_drain(http);
    jobs_shutdown(pool, cfg.drain_seconds);
    batches_shutdown(bat);
    http_stop(http);
    batches_free(bat);
    jobs_free(pool);
    cache_free(results);
    cache_free(models);
    isolate_stop();
    quarantine_stop();
    engine_shutdown(); /* background code builds: their model references */
    store_close(st);
    fprintf(stderr, "hamel-server: stopped\n");
    return 0;
}
