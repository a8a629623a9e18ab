/* batch_internal.h — what the pieces of the batch module share (internal to server/batch.c,
 * batch_feed.c and batch_line.c; nothing else includes it).
 *
 * Owns the types of a batch record, its runs and its blocks in flight, and of the module
 * (batches), and declares the functions the pieces call across files. Names are batch__*.
 *   batch.c       the record and its lifecycle: creation (checks of every run), completion
 *                 of runs, eviction, queries, cancellation, readers and waiters, the timer
 *   batch_feed.c  feeding the pool: runs in blocks (one task, one worker call and one
 *                 store commit each), or one job per run with a shared queue
 *   batch_line.c  the NDJSON line of a finished run, built from its result's text
 *
 * Lock order: bs->lock is the only lock here and is never held across a call into the
 * pool, the caches, the store or a wake function. A run in flight holds a reference on
 * its batch from the moment it is claimed until its completion has been recorded. */
#ifndef HAMEL_SERVER_BATCH_INTERNAL_H
#define HAMEL_SERVER_BATCH_INTERNAL_H

#include <pthread.h>

#include "batch.h"

enum { RUN_PENDING, RUN_CLAIMED, RUN_INFLIGHT, RUN_FINISHED };
enum { RUN_DONE, RUN_FAILED, RUN_CANCELLED };

/* What each line carries besides index, status, job_id and cached. */
enum {
    FIELD_RUN = 1 << 0,
    FIELD_FINAL = 1 << 1,
    FIELD_CHECKS = 1 << 2,
    FIELD_STATS = 1 << 3,
    FIELD_TRAJECTORY = 1 << 4,
    FIELD_HAMEL = 1 << 5,
    FIELD_EVENTS = 1 << 6, /* events, stopped_by, events_dropped: only runs with events have them */
};
#define FIELD_DEFAULT (FIELD_FINAL | FIELD_CHECKS | FIELD_STATS | FIELD_EVENTS)

typedef struct batch_block batch_block;

typedef struct batch_run {
    batch *b;
    size_t index;
    job *job;     /* in flight: the pool's job (a reference) */
    job_waiter w; /* in flight: parked on job */
    blob *line;   /* finished: one NDJSON line, '\n'-terminated */
    char key[80];
    char job_id[JOB_ID_LEN + 1];
    unsigned char state, status, cached;
} batch_run;

struct batch {
    batches *bs;
    char id[BATCH_ID_LEN + 1];
    char model_id[80];
    int refs; /* under bs->lock; the kept list holds one */
    engine_model *model;
    json_t *base; /* deep copies; dropped when the batch finishes */
    json_t *partials;
    unsigned fields;
    size_t count, cursor, inflight, finished, succeeded, failed, cancelled, cached;
    size_t *order; /* run indices in completion order; `finished` of them */
    batch_run *runs;
    size_t bytes; /* of its lines */
    int cancel, done, kept;
    double retry_at; /* monotonic; 0: none */
    double t0, t1;   /* monotonic: created, finished */
    batch_waiter *streams;
    batch *prev, *next; /* kept list, newest first */
    /* blocks (without a shared queue): the runs are fed as tasks of up to
     * BATCH_BLOCK_MAX runs, each one worker call and one store commit */
    int blocks_on;
    batch_block *blocks; /* in flight (queued or running) */
    size_t nblocks;
    double run_seconds; /* one run's time on a worker, as measured (0: not yet) */
};

/* A block of runs in flight: a task of the pool. */
struct batch_block {
    batch *b;
    engine_control ctl;
    int started, dropped; /* under bs->lock: on a worker; cancelled before it started */
    batch_block *prev, *next;
    size_t n;
    batch_run *runs[];
};

struct batches {
    pthread_mutex_t lock;
    pthread_cond_t timer;
    pthread_t timer_thread;
    int timer_started, exiting;
    batches_config cfg;
    jobs *pool;
    cache *results;
    store *st;
    batch *head, *tail;
    size_t kept, active, bytes;
    batch_waiter *waiters; /* long-polls */
    pthread_cond_t ended;  /* a block ended (batch__cancel waits for running ones) */
};

/* batch_line.c */
blob *batch__line_done(const batch *b, batch_run *r, const blob *result, int cached);
blob *batch__line_problem(const batch *b, batch_run *r, int status, json_t *problem);
blob *batch__line_stub(const batch_run *r);

/* batch.c */
void batch__finish_runs(batches *bs, batch *b, batch_run *const *rs, blob **lines, const int *status,
                        int cached, int claimed, size_t n);
void batch__finish_run(batches *bs, batch *b, batch_run *r, blob *line, int status, int cached, int claimed);

/* batch_feed.c */
void batch__feed(batches *bs, batch *b);

#endif
