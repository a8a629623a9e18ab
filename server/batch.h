/* batch.h — batches: many simulation runs of one model, submitted as one request.
 *
 * POST /v1/batches carries a model (or model_id), a "base" simulation request and an
 * array of "runs", each a partial simulation request merged over the base. Every run is
 * merged and checked with engine_simulation_check before anything is queued, so a bad run
 * is a 422 naming runs[i].<path>. A valid batch becomes a record with an id; its runs are
 * fed to the job pool gradually, in blocks: a block is one task of the pool (one place in
 * the queue), one call to an engine worker for all its runs and one store commit for
 * their results, each run still becoming a job record of its own. A block aims at
 * BATCH_BLOCK_SECONDS of work, by the time the batch's runs took so far; at most two
 * blocks per pool worker and at most `max_inflight` places of the queue are the batch's,
 * so a large batch neither fails with 503 nor starves other users of the queue. (With a
 * shared queue, HAMEL_REDIS, each run is a job of its own, at most `max_inflight` of them
 * in flight.) A run whose canonical request is in the result cache (or the store: one
 * read for a block) is answered from it without a job. Each finished run becomes one
 * JSON line (its index, status, job id and the fields the batch asked for), kept in
 * completion order; readers follow that order (NDJSON streaming) or take all lines in
 * index order once the batch is done.
 *
 * Waiting never ties up a thread: a long-poll or a stream parks a batch_waiter whose wake
 * function the module calls exactly once — when the batch finishes (long-polls), when a
 * new line is ready (streams), at the deadline (the module's timer thread) or at
 * shutdown — never while holding a lock.
 *
 * Memory: the lines kept by all batches share one byte budget (max_bytes); finished
 * batches are evicted oldest first past it or past max_kept records, and a line that
 * would still not fit is kept as a stub pointing at /v1/jobs/{id}, where the full result
 * stays. Batch records live in memory only; each run's result is persisted as a job.
 *
 * Lock order: the module has one mutex, taken with no other lock held; pool, cache and
 * store calls are all made after unlocking it, so it is never held together with theirs.
 * The pool wakes the job waiters of in-flight runs with no lock held.
 */
#ifndef HAMEL_SERVER_BATCH_H
#define HAMEL_SERVER_BATCH_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "cache.h"
#include "engine.h"
#include "jobs.h"
#include "store.h"

#define BATCH_ID_LEN 32

typedef struct batches batches;
typedef struct batch batch;

typedef struct batches_config {
    size_t max_runs;     /* runs of one batch (HAMEL_MAX_BATCH) */
    size_t max_inflight; /* places of the queue one batch may hold (blocks, or runs) (>= 1) */
    size_t max_bytes;    /* lines kept by all batches together (HAMEL_BATCH_BYTES) */
    size_t max_kept;     /* batch records kept in memory */
    engine_limits limits;
    int workers; /* the pool's threads: blocks of one batch in flight at most twice this */
} batches_config;

/* A parked long-poll or stream (waiters.h); owned by the caller, which keeps it alive
 * until woken (or until batch_unpark). `deadline` (monotonic seconds, jobs_now) of 0
 * means none. */
typedef waiter batch_waiter;

/* A reader's position in a batch's completion order. Start zeroed. */
typedef struct batch_cursor {
    size_t line;   /* lines read completely */
    size_t offset; /* bytes of the next line already read */
    int summary;   /* set: a {"done":true,...} line follows the last run's */
    int summary_sent;
    char tail[256]; /* the summary line, once rendered */
} batch_cursor;

/* Starts the module's timer thread. Borrows cfg; pool, results and st (st may be NULL)
 * are borrowed and must outlive the module. Returns NULL on failure. */
batches *batches_new(const batches_config *cfg, jobs *pool, cache *results, store *st);

/* Finishes every unfinished run as cancelled (the pool must already be shut down or
 * shutting down), wakes every waiter and stops the timer. Records stay readable until
 * batches_free. Calling it again does nothing. */
void batches_shutdown(batches *bs);

/* Shuts down if needed and frees every record. Accepts NULL. */
void batches_free(batches *bs);

/* Validates a POST /v1/batches body (borrowed) for model m (borrowed; the batch retains
 * it while runs remain) and, when every run is valid, creates the batch and starts
 * feeding it to the pool. Returns 0 and *out (a new reference), or an error code and
 * *problem. */
int batch_create(batches *bs, engine_model *m, const json_t *body, batch **out, json_t **problem);

/* A new reference to the batch with this id, or NULL. */
batch *batches_find(batches *bs, const char *id);

/* Drops a reference from batch_create or batches_find. Accepts NULL. */
void batch_release(batches *bs, batch *b);

/* The batch id (immutable; lives as long as the reference). */
const char *batch_id(const batch *b);

/* Whether every run has finished. */
int batch_finished(batches *bs, batch *b);

/* The status document as JSON text (malloc'd, caller frees, length in *len): batch_id,
 * status, model_id, count, finished, succeeded, failed, cancelled, cached, progress,
 * fields; with `results` and a finished batch, also "results": every line in index
 * order. Returns NULL when out of memory. */
char *batch_render(batches *bs, batch *b, int results, size_t *len);

/* Cancels every unfinished run (queued jobs at once, running ones at their next step,
 * runs not yet queued without starting). Returns 0, or HAMEL_E_CONFLICT when the batch
 * had already finished before this call. */
int batch_cancel(batches *bs, batch *b);

/* Parks w (wake, arg and deadline filled by the caller) until the batch finishes or the
 * deadline. Returns 0 when parked (wake will be called once), 1 when the batch has
 * already finished or the module is shutting down (wake will not be called). */
int batch_wait(batches *bs, batch *b, batch_waiter *w);

/* Copies up to `max` bytes of NDJSON from the cursor into buf. Returns the byte count,
 * 0 when nothing is ready yet, or -1 at the end (every line, and the summary if asked
 * for, has been read). */
ssize_t batch_read(batches *bs, batch *b, batch_cursor *cur, char *buf, size_t max);

/* Parks a stream reader (w->wake, w->arg filled; no deadline) until there is something
 * to read at cur. Returns 0 when parked (wake will be called once), 1 when there is
 * already something to read or the end has been reached (wake will not be called). */
int batch_stream_park(batches *bs, batch *b, const batch_cursor *cur, batch_waiter *w);

/* Unlinks w if it is still parked (its wake will then not be called). */
void batch_unpark(batches *bs, batch_waiter *w);

/* Unfinished batches, batch records kept, bytes of lines kept (for /metrics). */
void batches_counts(batches *bs, size_t *active, size_t *kept, size_t *bytes);

#endif
