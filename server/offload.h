/* offload.h — work that must not run on libmicrohttpd's poll threads.
 *
 * Deriving a model (parse, differentiate, reduce, JIT) or computing Hamel coefficients
 * at many points takes from a millisecond to a few seconds. Done on a poll thread it
 * would stall every other connection of that thread, so the HTTP layer suspends the
 * connection, hands the work to this pool and is resumed by the task's done function.
 * (Simulations have their own pool with job records: jobs.h.)
 *
 * A thin layer over the engine's thread pool (engine/base/pool.h), which the optimizing
 * tier's builds use too: up to a fixed number of threads (started as work arrives) take
 * tasks from a bounded FIFO queue (full: HAMEL_E_QUEUE_FULL). For every accepted task,
 * run(arg) is called on a pool thread and then done(arg, 1) — or, for a task still queued
 * when the pool stops, only done(arg, 0), on the thread calling offload_stop. done is
 * called exactly once, with no lock held; after it the pool forgets the task.
 */
#ifndef HAMEL_SERVER_OFFLOAD_H
#define HAMEL_SERVER_OFFLOAD_H

#include <stddef.h>

typedef struct offload offload;

/* A pool of up to `threads` threads with a queue of `queue` tasks; no thread starts before
 * the first task. Returns NULL when out of memory. */
offload *offload_new(int threads, int queue);

/* Queues run(arg) then done(arg, ran). Returns 0; or HAMEL_E_QUEUE_FULL, or
 * HAMEL_E_UNAVAILABLE after offload_stop or when no thread could be started, in which
 * cases nothing is queued and neither function is ever called. */
int offload_submit(offload *p, void (*run)(void *arg), void (*done)(void *arg, int ran), void *arg);

/* How many tasks wait in the queue and how many are running now. */
void offload_counts(offload *p, size_t *queued, size_t *running);

/* Stops taking tasks; queued ones get done(arg, 0), running ones finish. Returns when
 * every accepted task's done has been called. */
void offload_stop(offload *p);

/* Stops (if not yet) and frees the pool. Accepts NULL. */
void offload_free(offload *p);

#endif
