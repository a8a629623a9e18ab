/* jobs.h — simulation jobs: a fixed worker pool, a bounded queue and job records.
 *
 * Simulations never run on libmicrohttpd's threads: a request becomes a job, the job
 * waits in a bounded FIFO queue (full: HAMEL_E_QUEUE_FULL) and one of the pool's
 * workers runs engine_simulate on it with a per-job engine_control (progress, cancel)
 * and the configured step and wall-time limits. Finished jobs are written to the store
 * (before they are reported done, so a client never sees a result the disk lacks) and
 * their results put in the result cache. Records of finished jobs are kept in memory up
 * to a bounded count, oldest finished evicted first; the store answers for older ones.
 *
 * Long-polls: a caller parks a job_waiter on a job with a deadline; the pool calls its
 * wake function exactly once, from a worker when the job finishes or from the pool's
 * timer thread at the deadline, never while holding a lock. The HTTP layer's wake
 * function resumes a suspended connection, so waiting ties up no thread.
 *
 * Lock order: the pool mutex, then (inside store and cache calls made by workers
 * without the pool mutex) their own leaf mutexes. Wake functions run with no lock held.
 */
#ifndef HAMEL_SERVER_JOBS_H
#define HAMEL_SERVER_JOBS_H

#include <jansson.h>
#include <stddef.h>

#include "blob.h"
#include "cache.h"
#include "engine.h"
#include "isolate.h"
#include "problems.h"
#include "redis.h"
#include "store.h"
#include "waiters.h"

#define JOB_ID_LEN 32

typedef enum job_state {
    JOB_QUEUED,
    JOB_RUNNING,
    JOB_DONE,
    JOB_FAILED,
    JOB_CANCELLED,
} job_state;

typedef struct jobs jobs;
typedef struct job job;

/* A parked long-poll (waiters.h); owned by the caller, which must keep it alive until
 * woken. Its deadline (monotonic seconds, jobs_now) must be set. */
typedef waiter job_waiter;

/* A consistent copy of a job's state. `body` (a new reference, or NULL) is the full
 * JSON body of a done job (without "cached") or of a failed/cancelled one. */
typedef struct job_view {
    char id[JOB_ID_LEN + 1];
    char model_id[80];
    char key[80];
    job_state state;
    double progress;
    int problem_status; /* failed/cancelled: the problem's HTTP status */
    blob *body;
} job_view;

typedef struct jobs_config {
    int workers;
    int queue;
    size_t max_jobs;
    engine_limits limits;
    /* When set (HAMEL_REDIS), the queue is the shared one of redis.h: jobs_submit appends
     * to it, the workers take any instance's jobs from it, and a job submitted here but
     * run elsewhere is kept here as a record that learns its outcome from the store
     * (woken by the "done" event, or read again when looked at). The store must then be
     * the Redis one. Borrowed for the lifetime of jobs_new. */
    const redis_config *redis;
} jobs_config;

/* Seconds on the monotonic clock. */
double jobs_now(void);

/* The JSON name of a state ("queued", ...). */
const char *job_state_name(job_state s);

/* Starts the workers and the timer thread. Borrows cfg; `st` and `results` (either may
 * be NULL) are borrowed and must outlive the pool. Returns NULL on failure. */
jobs *jobs_new(const jobs_config *cfg, store *st, cache *results);

/* Stops taking jobs, cancels queued ones, lets running ones finish for up to `grace`
 * seconds, then cancels them, joins every thread and wakes every waiter. The pool stays
 * readable (find, view, release) until jobs_free. Calling it again does nothing. */
void jobs_shutdown(jobs *p, double grace);

/* Shuts the pool down (with no grace) if that was not done, and frees it and every
 * record it keeps. Accepts NULL. */
void jobs_free(jobs *p);

/* Queues a simulation of `request` (borrowed; the job keeps its own copy) on model
 * `m` (the job retains it) whose result cache key is `key`. On success *out is a new
 * reference to the job. Returns 0, HAMEL_E_QUEUE_FULL, or HAMEL_E_UNAVAILABLE while
 * shutting down. */
int jobs_submit(jobs *p, engine_model *m, json_t *request, const char *key, job **out);

/* jobs_submit with flags: JOBS_SUBMIT_LAZY_RECORD writes the job's "queued" record
 * with the store's next group instead of waiting for it to commit, and writes no
 * "running" record — for a job whose id nobody learns before it ends (a batch run: its
 * line appears once its result is stored; a simulation that waits, unless its wait ends
 * first: see jobs_record_pending), so one commit and one row write per run are saved.
 * The done (or failed) record is written as for any job. Ignored with the shared queue. */
#define JOBS_SUBMIT_LAZY_RECORD 1u
int jobs_submit_flags(jobs *p, engine_model *m, json_t *request, const char *key, unsigned flags, job **out);

/* jobs_submit_flags of a job whose run is already in flight in an engine worker
 * (isolate_model_compile_check's prerun, its result's head naming job id `id`, which the
 * caller made with ids_random): its worker thread takes that run's outcome instead of
 * running it. The job takes `prerun` over in every case: it is dropped when the job is
 * not accepted, or is cancelled before a worker thread takes it. */
int jobs_submit_prerun(jobs *p, engine_model *m, json_t *request, const char *key, unsigned flags,
                       const char *id, isolate_prerun *prerun, job **out);

/* Whether a job submitted now would start at once (a worker thread free, none queued, not
 * the shared queue): only then is a run worth starting before its job exists. */
int jobs_prerun_ok(jobs *p);

/* For a job submitted with JOBS_SUBMIT_LAZY_RECORD (and a store): 1 while it is queued or
 * running and jobs_record_barrier has not seen its "queued" record committed. An answer
 * that shows the id of such a job waits for that first (a restart must find the record);
 * its done or failed record is written synchronously, after it. */
int jobs_record_pending(jobs *p, job *j);

/* Returns once j's "queued" record (and every write before it) is committed: a store
 * barrier, then a read of the record. Blocks: not on a poll thread. 0, or -1 when the
 * record could not be written (a full disk) or the store is closing: the id must not be
 * shown then (cancel the job and answer 503, as jobs_submit's refusal). */
int jobs_record_barrier(jobs *p, job *j);

/* A task: work other than one simulation run on the pool's threads in the queue's order
 * (a batch's block of runs). It takes one place in the queue and counts as one job
 * queued, then running. fn(arg, 0) runs it; fn(arg, 1) is called instead when the pool
 * shuts down before it started. `ctl` (borrowed until fn returns) has its cancel flag
 * set when the pool shuts down while it runs. In-memory queue only. */
typedef void (*jobs_task_fn)(void *arg, int cancelled);

/* Queues a task. Returns 0, HAMEL_E_QUEUE_FULL, HAMEL_E_UNAVAILABLE while shutting down,
 * or HAMEL_E_UNAVAILABLE with a shared queue (HAMEL_REDIS: tasks cannot be shared; see
 * jobs_takes_tasks). */
int jobs_submit_task(jobs *p, jobs_task_fn fn, void *arg, engine_control *ctl);

/* Whether jobs_submit_task can be used (no shared queue). */
int jobs_takes_tasks(const jobs *p);

/* The outcome of a run made outside a job (by a task) that becomes a finished job. */
typedef struct jobs_outcome {
    const char *id;  /* the job id its result's head carries (JOB_ID_LEN hex digits) */
    const char *key; /* its result cache key */
    int rc;          /* 0: done with body; else failed or cancelled with problem */
    blob *body;      /* rc 0: the result (taken); out: the job's body, a new reference */
    json_t *problem; /* rc != 0: taken */
    job_state state; /* out: done, failed or cancelled */
} jobs_outcome;

/* Records runs of model `model_id` made by a task as finished jobs, all at once: results
 * and failures are written to the store together (one commit; a result that cannot be
 * stored fails its job, as for any job), results go into the result cache, and each
 * becomes a job record (GET /v1/jobs/{id}) counted in the job metrics. `created` is the
 * wall-clock time of their submission (jobs_wall). */
void jobs_finish_many(jobs *p, const char *model_id, double created, jobs_outcome *o, size_t n);

/* Seconds on the wall clock (a job's `created`). */
double jobs_wall(void);

/* A new reference to the job with this id, or NULL if none is kept in memory. */
job *jobs_find(jobs *p, const char *id);

/* Drops a reference from jobs_submit or jobs_find. Accepts NULL. */
void job_release(jobs *p, job *j);

/* Fills *v with the job's state (v->body is a new reference the caller releases). */
void jobs_view_get(jobs *p, job *j, job_view *v);

/* Whether jobs_view_get would ask the store about j (with a shared queue, a record of a
 * job run elsewhere and not known here to be finished): a caller on a poll thread then
 * calls jobs_view_get on the offload pool. */
int jobs_view_stale(jobs *p, job *j);

/* Cancels a queued or running job (a running one stops at its next step: the engine
 * polls engine_control.cancel). Returns 0 when cancelled now or already cancelled,
 * HAMEL_E_CONFLICT if it had already finished otherwise. */
int jobs_cancel(jobs *p, job *j);

/* Shared queue: cancels a job this instance holds no record of, known from the store as
 * `sj` (queued or running on another instance): the store records it cancelled and every
 * instance is told (the one running it stops it). *doc is the job document (caller
 * frees). Returns 0, HAMEL_E_CONFLICT if it had finished, or HAMEL_E_UNAVAILABLE. */
int jobs_cancel_stored(jobs *p, const char *id, const store_job *sj, char **doc);

/* Parks w (filled by the caller: wake, arg, deadline) on job j. Returns 0 when parked
 * (wake will be called exactly once), 1 when the job has already finished or the pool
 * is shutting down (wake will not be called). Borrows both. */
int jobs_wait(jobs *p, job *j, job_waiter *w);

/* Queue length, queue capacity, running jobs, job records kept in memory. With a shared
 * queue the length and capacity are the stream's (0 while Redis cannot be reached). */
void jobs_counts(jobs *p, size_t *queued, size_t *capacity, size_t *running, size_t *kept);

/* Whether the pool takes new jobs. */
int jobs_accepting(jobs *p);

/* Whether the shared queue (HAMEL_REDIS) answers now; 1 without one. */
int jobs_reachable(jobs *p);

#endif
