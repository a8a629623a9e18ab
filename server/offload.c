/* offload.c — the HTTP layer's name for the engine's thread pool (engine/base/pool.h):
 * the pool's refusals become the service's error codes, nothing else is added.
 *
 * Lock order: none of its own; the pool's mutex is a leaf (pool.h).
 */
#include "offload.h"

#include <stdlib.h>

#include "pool.h"
#include "problems.h"

struct offload {
    pool *p;
};

offload *offload_new(int threads, int queue)
{
    offload *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->p = pool_new(threads, queue, 0);
    if (!o->p) {
        free(o);
        return NULL;
    }
    return o;
}

int offload_submit(offload *o, void (*run)(void *arg), void (*done)(void *arg, int ran), void *arg)
{
    switch (pool_submit(o->p, run, done, arg)) {
    case POOL_OK: return 0;
    case POOL_FULL: return HAMEL_E_QUEUE_FULL;
    default: /* stopping, or no thread could be started: a retry can succeed elsewhere or later */
        return HAMEL_E_UNAVAILABLE;
    }
}

void offload_counts(offload *o, size_t *queued, size_t *running) { pool_counts(o->p, queued, running); }

void offload_stop(offload *o) { pool_shutdown(o->p); }

void offload_free(offload *o)
{
    if (!o)
        return;
    pool_free(o->p);
    free(o);
}
