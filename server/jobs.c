/* jobs.c — the worker pool, its queue, the job table and the long-poll timer.
 *
 * With a shared queue (HAMEL_REDIS, jobs_config.redis) the in-memory FIFO is not used:
 * jobs_submit appends to the Redis stream and keeps the job in the table as a "remote"
 * record; a worker takes the next entry of the stream, runs this instance's own record
 * when the entry is one of ours, or else builds a job from the entry (model compiled
 * from its canonical JSON, cached here by id); a finished job is written to the store,
 * acknowledged and announced ("done"). A remote record learns its outcome from the
 * store: on the "done" event, when it is looked at, and from the timer thread while a
 * long-poll waits on it (events are lost while Redis restarts).
 *
 * Lock order: p->lock is the only lock here. Store, cache and Redis calls (with their
 * own leaf locks) and wake callbacks are made without holding it. */
#include "jobs.h"

#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ids.h"
#include "isolate.h"
#include "jsonout.h"
#include "metrics.h"

/* Results at least this large are followed by malloc_trim (memory back to the system). */
#define JOBS_TRIM_BYTES ((size_t)4 << 20)

#define JOBS_TABLE_MIN 1024
#define JOBS_CANCEL_POLL_NS 10000000L       /* drain polling: 10 ms */
#define JOBS_TAKE_SECONDS 0.5               /* a worker's wait on the shared queue */
#define JOBS_RETRY_NS 200000000L            /* ... and its pause when Redis is unreachable */
#define JOBS_STORE_RETRY_SECONDS 10.0       /* a result write tried again while the store is out of reach */
#define JOBS_REFRESH_SECONDS 0.5            /* remote records with waiters read again */
#define JOBS_REFRESH_MAX 64                 /* ... at most this many per round */
#define JOBS_MODEL_CACHE ((size_t)64 << 20) /* models of other instances' jobs */
/* A remote record the store has not known for this many leases after it was submitted
 * was lost. */
#define JOBS_LOST_LEASES 4

struct job {
    char id[JOB_ID_LEN + 1];
    char model_id[80];
    char key[80];
    job_state state;
    int refs; /* under p->lock; the table holds one while the record is kept */
    int problem_status;
    engine_model *model;
    json_t *request;
    isolate_prerun *prerun; /* its run, already in flight (jobs_submit_prerun), until a worker takes it */
    engine_control ctl;
    blob *body;               /* done: the result; failed/cancelled: the job document */
    int remote;               /* shared queue: submitted here, in the stream */
    int lazy;                 /* JOBS_SUBMIT_LAZY_RECORD: no "running" record either */
    atomic_int recorded;      /* lazy: its "queued" record is known committed (jobs_record_barrier) */
    int local_run;            /* shared queue: a worker here runs it */
    char entry[REDIS_ID_MAX]; /* shared queue: the stream entry a worker here runs */
    jobs_task_fn task;        /* a task (jobs_submit_task), not a job: never in the table */
    void *task_arg;
    engine_control *task_ctl;
    job *task_next;           /* running tasks */
    double created;           /* wall clock, for the store */
    job *hash_next;           /* table chain */
    job *queue_next;          /* FIFO of queued jobs */
    job *fin_prev, *fin_next; /* finished jobs, oldest first */
};

struct jobs {
    pthread_mutex_t lock;
    pthread_cond_t work;  /* a job was queued, or stopping */
    pthread_cond_t timer; /* the waiter list changed, or stopping */
    pthread_t *threads;
    pthread_t timer_thread;
    int nthreads;
    int timer_started;
    int stopping; /* no new jobs */
    int exiting;  /* workers and timer leave */
    jobs_config cfg;
    store *st;
    cache *results;
    job *queue_head, *queue_tail;
    size_t queued, running, kept;
    job **table;
    size_t nbuckets;
    job *fin_head, *fin_tail;
    job_waiter *waiters;
    double next_refresh; /* shared queue: when the timer next reads waited-on remote records */
    redis_queue *shared; /* NULL: the in-memory queue */
    cache *models;       /* shared queue: compiled models of other instances' jobs */
    job *tasks_running;  /* tasks on a worker now (their controls: cancelled at shutdown) */
};

double jobs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Whether a store write that failed should be tried again, after a nap: while the store
 * is out of reach for a moment (Redis restarting, SQLite busy), for up to
 * JOBS_STORE_RETRY_SECONDS from `since`, backing off from 20 ms to 0.5 s, but not for a
 * full disk or once the pool stops. A job that ran is not failed for a store that is
 * back a second later. */
static int jobs__store_again(jobs *p, int attempt, double since)
{
    if (store_full(p->st) || jobs_now() - since > JOBS_STORE_RETRY_SECONDS)
        return 0;
    pthread_mutex_lock(&p->lock);
    int stop = p->stopping || p->exiting;
    pthread_mutex_unlock(&p->lock);
    if (stop)
        return 0;
    double nap = 0.02 * (double)(1 << (attempt < 5 ? attempt : 5));
    nap = nap < 0.5 ? nap : 0.5;
    struct timespec ts = {0, (long)(nap * 1e9)};
    nanosleep(&ts, NULL);
    return 1;
}

static double jobs__wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

const char *job_state_name(job_state s)
{
    static const char *const names[] = {"queued", "running", "done", "failed", "cancelled"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

static int jobs__terminal(job_state s) { return s >= JOB_DONE; }

/* Caller holds p->lock. */
static void jobs__table_add(jobs *p, job *j)
{
    size_t b = ids_hash(j->id) & (p->nbuckets - 1);
    j->hash_next = p->table[b];
    p->table[b] = j;
    j->refs++;
    p->kept++;
}

/* Takes a record that is not finished out of the table again (its submission failed
 * after it was added). Caller holds p->lock and another reference. */
static void jobs__table_remove_locked(jobs *p, job *j)
{
    job **pp = &p->table[ids_hash(j->id) & (p->nbuckets - 1)];
    while (*pp && *pp != j)
        pp = &(*pp)->hash_next;
    if (*pp)
        *pp = j->hash_next;
    j->hash_next = NULL;
    p->kept--;
    j->refs--;
}

/* Caller holds p->lock. */
static job *jobs__table_find(jobs *p, const char *id)
{
    job *j = p->table[ids_hash(id) & (p->nbuckets - 1)];
    while (j && strcmp(j->id, id) != 0)
        j = j->hash_next;
    return j;
}

static void jobs__destroy(job *j)
{
    isolate_prerun_drop(j->prerun); /* never taken: cancelled while queued, or refused */
    engine_model_release(j->model);
    json_decref(j->request);
    blob_release(j->body);
    free(j);
}

/* Drops a reference under p->lock; returns the job if it must be destroyed (after
 * unlocking, so freeing a model never happens under the lock). */
static job *jobs__unref_locked(job *j) { return --j->refs == 0 ? j : NULL; }

void job_release(jobs *p, job *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&p->lock);
    job *dead = jobs__unref_locked(j);
    pthread_mutex_unlock(&p->lock);
    if (dead)
        jobs__destroy(dead);
}

/* Evicts the oldest finished records beyond the bound. Caller holds p->lock; the
 * evicted jobs whose last reference went are chained on *dead through hash_next. */
static void jobs__evict_locked(jobs *p, job **dead)
{
    while (p->kept > p->cfg.max_jobs && p->fin_head) {
        job *j = p->fin_head;
        p->fin_head = j->fin_next;
        if (p->fin_head)
            p->fin_head->fin_prev = NULL;
        else
            p->fin_tail = NULL;
        job **pp = &p->table[ids_hash(j->id) & (p->nbuckets - 1)];
        while (*pp != j)
            pp = &(*pp)->hash_next;
        *pp = j->hash_next;
        p->kept--;
        if (jobs__unref_locked(j)) {
            j->hash_next = *dead;
            *dead = j;
        }
    }
}

/* Moves j to a terminal state, appends it to the finished list and detaches its
 * waiters onto *fired (chained through next). Caller holds p->lock. */
static void jobs__finish_locked(jobs *p, job *j, job_state s, blob *body, int problem_status,
                                job_waiter **fired)
{
    j->state = s;
    blob_release(j->body);
    j->body = body;
    j->problem_status = problem_status;
    j->fin_prev = p->fin_tail;
    j->fin_next = NULL;
    if (p->fin_tail)
        p->fin_tail->fin_next = j;
    else
        p->fin_head = j;
    p->fin_tail = j;
    waiters_detach_on(&p->waiters, j, fired);
}

/* The JSON document of a failed or cancelled job; takes ownership of problem. */
static blob *jobs__failure_doc(const job *j, job_state s, json_t *problem)
{
    json_t *doc = json_pack("{s:s, s:s, s:s, s:f, s:o}", "job_id", j->id, "status", job_state_name(s),
                            "model_id", j->model_id, "progress", atomic_load(&((job *)j)->ctl.progress),
                            "problem", problem ? problem : hamel_problem_new(HAMEL_E_INTERNAL, NULL));
    blob *b = doc ? blob_take(json_dumps(doc, JSON_COMPACT)) : NULL;
    json_decref(doc);
    return b;
}

static void jobs__store_failure(jobs *p, const job *j, job_state s, const blob *doc)
{
    if (p->st)
        store_put_job(p->st, j->id, job_state_name(s), j->model_id, j->key, doc ? doc->data : NULL,
                      j->created);
}

static int jobs__problem_status(const json_t *problem, int code)
{
    json_t *s = json_object_get(problem, "status");
    return json_is_integer(s) ? (int)json_integer_value(s) : hamel_error_status(code);
}

/* Runs one job to its end. No lock held on entry or exit. */
static void jobs__run(jobs *p, job *j)
{
    json_t *problem = NULL;
    double t0 = jobs_now();
    /* the result is written straight to text after these members (engine_simulate_text) */
    json_t *head = json_pack("{s:s, s:s, s:s, s:f}", "job_id", j->id, "status", "done", "model_id",
                             j->model_id, "progress", 1.0);
    char *text = NULL;
    size_t text_len = 0;
    isolate_prerun *pre = j->prerun; /* its run began with its model's compilation */
    j->prerun = NULL;
    int rc = !head ? HAMEL_E_INTERNAL
             : pre ? isolate_prerun_finish(pre, j->request, &p->cfg.limits, &j->ctl, head, &text, &text_len,
                                           &problem)
                   : isolate_simulate_text(j->model, j->request, &p->cfg.limits, &j->ctl, head, &text,
                                           &text_len, &problem);
    json_decref(head);
    metrics_integrate(jobs_now() - t0);
    /* A finished record keeps only its body: the parsed request (with an inline model,
     * several times the result's size) and the model reference go now, so the memory of
     * HAMEL_MAX_JOBS kept records is bounded by their bodies. Only this worker uses them. */
    json_decref(j->request);
    j->request = NULL;
    engine_model_release(j->model);
    j->model = NULL;

    blob *body = NULL;
    job_state s = JOB_DONE;
    int status = 200;
    /* Shared queue: a job stopped by a shutdown (not by a request) is left to another
     * instance, which takes its entry over when the lease runs out. */
    int handover = 0;
    if (p->shared && rc != 0) {
        pthread_mutex_lock(&p->lock);
        handover = p->stopping && j->state == JOB_RUNNING && atomic_load(&j->ctl.cancel);
        pthread_mutex_unlock(&p->lock);
    }
    size_t body_bytes = text_len;
    if (rc == 0) {
        body = blob_take_len(text, text_len); /* adopted, not copied */
        if (!body) {
            rc = HAMEL_E_INTERNAL;
            problem = hamel_problem_new(rc, "out of memory serialising the result");
        }
    }
    int put = rc == 0 && p->st ? store_put_done(p->st, j->id, j->model_id, j->key, body, j->created) : 0;
    double since = jobs_now();
    for (int a = 0; put != 0 && jobs__store_again(p, a, since); a++)
        put = store_put_done(p->st, j->id, j->model_id, j->key, body, j->created);
    if (put != 0) {
        /* A job is done only once its result is stored: one reported done and then lost
         * to a restart (a full disk, the store out of reach) would be a lost result. */
        fprintf(stderr, "hamel-server: job %s: the result could not be stored; the job fails\n", j->id);
        metrics_store_failed();
        blob_release(body);
        body = NULL;
        rc = HAMEL_E_UNAVAILABLE;
        problem = hamel_problem_new(rc, store_full(p->st)
                                            ? "the result could not be stored: the disk is full; retry "
                                              "once space is freed"
                                            : "the result could not be stored (see the server's log); retry");
    }
    if (rc == 0) {
        if (p->results)
            cache_put(p->results, j->key, body, body->len);
    } else {
        s = atomic_load(&j->ctl.cancel) || rc == HAMEL_E_CANCELLED ? JOB_CANCELLED : JOB_FAILED;
        status = jobs__problem_status(problem, rc);
        body = jobs__failure_doc(j, s, problem);
        if (!handover)
            jobs__store_failure(p, j, s, body);
    }

    job_waiter *fired = NULL;
    job *dead = NULL;
    int was_cancelled;
    pthread_mutex_lock(&p->lock);
    p->running--;
    was_cancelled = j->state == JOB_CANCELLED; /* DELETE got there first: it stays so */
    if (!was_cancelled)
        jobs__finish_locked(p, j, s, body, status, &fired);
    jobs__evict_locked(p, &dead);
    pthread_mutex_unlock(&p->lock);

    if (was_cancelled) {
        blob_release(body);
        if (rc == 0 && p->st) { /* the row says done; the record says cancelled */
            pthread_mutex_lock(&p->lock);
            blob *doc = j->body ? blob_retain(j->body) : NULL;
            pthread_mutex_unlock(&p->lock);
            jobs__store_failure(p, j, JOB_CANCELLED, doc);
            blob_release(doc);
        }
        metrics_job(METRICS_JOB_CANCELLED);
    } else {
        metrics_job(s == JOB_DONE        ? METRICS_JOB_DONE
                    : s == JOB_CANCELLED ? METRICS_JOB_CANCELLED
                                         : METRICS_JOB_FAILED);
    }
    if (j->entry[0] && handover) {
        redis_queue_forget(p->shared, j->entry);
    } else if (j->entry[0]) { /* the outcome is in the store: the entry is done with */
        redis_queue_ack(p->shared, j->entry);
        redis_queue_publish(p->shared, "done", j->id);
    }
    waiters_fire(fired);
    while (dead) {
        job *n = dead->hash_next;
        jobs__destroy(dead);
        dead = n;
    }
    /* A big run leaves its work arrays (several times the result) free in this
     * thread's malloc arena; glibc keeps them mapped. Give them back to the system. */
    if (body_bytes >= JOBS_TRIM_BYTES)
        malloc_trim(0);
}

static void *jobs__worker(void *arg)
{
    jobs *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->exiting && !p->queue_head)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->exiting)
            break;
        job *j = p->queue_head;
        p->queue_head = j->queue_next;
        if (!p->queue_head)
            p->queue_tail = NULL;
        j->queue_next = NULL;
        p->queued--;
        p->running++;
        j->state = JOB_RUNNING;
        j->refs++;
        pthread_mutex_unlock(&p->lock);
        if (j->task) {
            pthread_mutex_lock(&p->lock);
            j->task_next = p->tasks_running;
            p->tasks_running = j;
            pthread_mutex_unlock(&p->lock);
            j->task(j->task_arg, 0);
            pthread_mutex_lock(&p->lock);
            p->running--;
            job **pp = &p->tasks_running;
            while (*pp != j)
                pp = &(*pp)->task_next;
            *pp = j->task_next;
            pthread_mutex_unlock(&p->lock);
            free(j);
            pthread_mutex_lock(&p->lock);
            continue;
        }
        if (p->st && !j->lazy)
            store_put_job_async(p->st, j->id, "running", j->model_id, j->key, NULL, j->created);
        jobs__run(p, j);
        job_release(p, j);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* ---- the shared queue --------------------------------------------------------------- */

/* The body of a stored result as job `id`'s: a result written by an identical job
 * carries that job's id. Takes ownership of b. */
static blob *jobs__as_job(blob *b, const char *id)
{
    char needle[JOB_ID_LEN + 16];
    snprintf(needle, sizeof needle, "\"job_id\":\"%s\"", id);
    if (!b || strstr(b->data, needle))
        return b;
    json_t *doc = json_loadb(b->data, b->len, 0, NULL);
    blob_release(b);
    if (!doc)
        return NULL;
    json_object_set_new(doc, "job_id", json_string(id));
    b = blob_take(json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(17)));
    json_decref(doc);
    return b;
}

static void jobs__destroy_all(job *dead)
{
    while (dead) {
        job *n = dead->hash_next;
        jobs__destroy(dead);
        dead = n;
    }
}

/* A remote record (submitted here, run elsewhere) takes the outcome the store has for
 * it, if any. No lock held. */
static void jobs__refresh(jobs *p, job *j)
{
    if (!p->shared || !p->st)
        return;
    char id[JOB_ID_LEN + 1];
    pthread_mutex_lock(&p->lock);
    int look = j->remote && !j->local_run && !jobs__terminal(j->state);
    memcpy(id, j->id, sizeof id);
    pthread_mutex_unlock(&p->lock);
    if (!look)
        return;
    store_job sj;
    int got = store_get_job(p->st, id, &sj);
    if (got < 0)
        return;
    if (got == 1) {
        /* Its record was written before it was queued: a record long missing was lost
         * (Redis restarted without its data, or the TTL passed). */
        if (jobs__wall() - j->created < JOBS_LOST_LEASES * p->cfg.redis->lease)
            return;
        blob *doc = jobs__failure_doc(
            j, JOB_FAILED,
            hamel_problem_new(HAMEL_E_INTERNAL, "the shared store (HAMEL_REDIS) no longer knows this job"));
        job_waiter *fired = NULL;
        job *dead = NULL;
        pthread_mutex_lock(&p->lock);
        if (doc && !jobs__terminal(j->state) && !j->local_run) {
            jobs__finish_locked(p, j, JOB_FAILED, doc, hamel_error_status(HAMEL_E_INTERNAL), &fired);
            doc = NULL;
            jobs__evict_locked(p, &dead);
        }
        pthread_mutex_unlock(&p->lock);
        blob_release(doc);
        waiters_fire(fired);
        jobs__destroy_all(dead);
        return;
    }
    blob *body = NULL;
    job_state s = JOB_DONE;
    int status = 200, running = 0;
    if (!strcmp(sj.status, "done") && sj.key) {
        if (store_get_result(p->st, sj.key, &body) == 0)
            body = jobs__as_job(body, id);
    } else if ((!strcmp(sj.status, "failed") || !strcmp(sj.status, "cancelled")) && sj.doc) {
        s = !strcmp(sj.status, "failed") ? JOB_FAILED : JOB_CANCELLED;
        json_t *doc = json_loads(sj.doc, 0, NULL);
        status = jobs__problem_status(json_object_get(doc, "problem"), HAMEL_E_INTERNAL);
        json_decref(doc);
        body = blob_new(sj.doc, strlen(sj.doc));
    } else if (!strcmp(sj.status, "running")) {
        running = 1;
    }
    store_job_clear(&sj);
    job_waiter *fired = NULL;
    job *dead = NULL;
    pthread_mutex_lock(&p->lock);
    if (running && j->state == JOB_QUEUED)
        j->state = JOB_RUNNING;
    if (body && !jobs__terminal(j->state) && !j->local_run) {
        jobs__finish_locked(p, j, s, body, status, &fired);
        body = NULL;
        jobs__evict_locked(p, &dead);
    }
    pthread_mutex_unlock(&p->lock);
    blob_release(body);
    waiters_fire(fired);
    jobs__destroy_all(dead);
}

/* Fails a taken entry whose model cannot be compiled here: the failure is stored,
 * the entry acknowledged and the outcome announced. Takes ownership of problem. */
static void jobs__task_failed(jobs *p, job *j, json_t *problem)
{
    blob *doc = jobs__failure_doc(j, JOB_FAILED, problem);
    jobs__store_failure(p, j, JOB_FAILED, doc);
    blob_release(doc);
    redis_queue_ack(p->shared, j->entry);
    redis_queue_publish(p->shared, "done", j->id);
    metrics_job(METRICS_JOB_FAILED);
}

/* The job to run for a taken entry, with a reference for the worker, counted running;
 * or NULL when there is nothing to run (the entry is then acknowledged, or left to its
 * lease). No lock held on entry. */
static job *jobs__task_job(jobs *p, const redis_task *t)
{
    pthread_mutex_lock(&p->lock);
    job *j = jobs__table_find(p, t->id);
    if (j) {
        /* One of ours, queued (or shown running because another instance had begun it
         * before it died): run it here. */
        if (j->remote && !j->local_run && !jobs__terminal(j->state) && j->model && j->request) {
            j->local_run = 1;
            j->state = JOB_RUNNING;
            snprintf(j->entry, sizeof j->entry, "%s", t->entry);
            p->running++;
            j->refs++;
            pthread_mutex_unlock(&p->lock);
            return j;
        }
        int over = jobs__terminal(j->state);
        pthread_mutex_unlock(&p->lock);
        if (over) /* cancelled here before it ran */
            redis_queue_ack(p->shared, t->entry);
        else /* running here already */
            redis_queue_forget(p->shared, t->entry);
        return NULL;
    }
    pthread_mutex_unlock(&p->lock);

    /* Another instance's job, or one whose instance died: is it still to be run? */
    store_job sj;
    int got = store_get_job(p->st, t->id, &sj);
    if (got < 0) {
        redis_queue_forget(p->shared, t->entry);
        return NULL;
    }
    int over = got == 0 && (!strcmp(sj.status, "done") || !strcmp(sj.status, "failed") ||
                            !strcmp(sj.status, "cancelled"));
    if (got == 0)
        store_job_clear(&sj);
    if (over) {
        redis_queue_ack(p->shared, t->entry);
        return NULL;
    }
    j = calloc(1, sizeof *j);
    if (!j) {
        redis_queue_forget(p->shared, t->entry);
        return NULL;
    }
    snprintf(j->id, sizeof j->id, "%.*s", JOB_ID_LEN, t->id);
    snprintf(j->model_id, sizeof j->model_id, "%s", t->model_id);
    snprintf(j->key, sizeof j->key, "%s", t->key);
    snprintf(j->entry, sizeof j->entry, "%s", t->entry);
    j->created = t->created;
    j->state = JOB_RUNNING;
    j->local_run = 1;
    atomic_init(&j->ctl.cancel, 0);
    atomic_init(&j->ctl.progress, 0.0);
    json_t *problem = NULL;
    if (t->deliveries >= REDIS_MAX_DELIVERIES) {
        char why[160];
        snprintf(why, sizeof why, "%d instances stopped while running this job; it is not run again",
                 t->deliveries - 1);
        problem = hamel_problem_new(HAMEL_E_INTERNAL, why);
    }
    j->model = problem ? NULL : cache_get(p->models, t->model_id);
    if (!j->model && !problem) {
        json_error_t err;
        json_t *spec = json_loads(t->model, 0, &err);
        int rc = spec ? isolate_model_compile_ctl(spec, &p->cfg.limits, NULL, &j->model, &problem)
                      : HAMEL_E_BAD_JSON;
        json_decref(spec);
        if (rc != 0 && !problem)
            problem = hamel_problem_new(rc, "the queued model could not be read");
        if (rc == 0)
            cache_put(p->models, t->model_id, j->model, engine_model_bytes(j->model));
    }
    j->request = problem ? NULL : json_loads(t->request, 0, NULL);
    if (!problem && !j->request)
        problem = hamel_problem_new(HAMEL_E_INTERNAL, "the queued request could not be read");
    if (problem) {
        jobs__task_failed(p, j, problem);
        jobs__destroy(j);
        return NULL;
    }
    job *dead = NULL;
    pthread_mutex_lock(&p->lock);
    jobs__table_add(p, j);
    j->refs++; /* the worker's */
    p->running++;
    jobs__evict_locked(p, &dead);
    pthread_mutex_unlock(&p->lock);
    jobs__destroy_all(dead);
    return j;
}

/* A worker on the shared queue: takes entries until the pool stops taking jobs. */
static void *jobs__shared_worker(void *arg)
{
    jobs *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int stop = p->stopping || p->exiting;
        pthread_mutex_unlock(&p->lock);
        if (stop)
            break;
        redis_task t;
        int rc = redis_queue_take(p->shared, JOBS_TAKE_SECONDS, &t);
        if (rc < 0)
            nanosleep(&(struct timespec){0, JOBS_RETRY_NS}, NULL);
        if (rc != 0)
            continue;
        job *j = jobs__task_job(p, &t);
        redis_task_clear(&t);
        if (!j)
            continue;
        store_put_job(p->st, j->id, "running", j->model_id, j->key, NULL, j->created);
        jobs__run(p, j);
        job_release(p, j);
    }
    return NULL;
}

static void jobs__cancel_one(jobs *p, job *j, int announce);
static int jobs__cancel(jobs *p, job *j, int announce);

/* An event from another instance (the subscriber thread; no lock held). */
static void jobs__on_event(void *arg, const char *event, const char *id)
{
    jobs *p = arg;
    job *j = jobs_find(p, id);
    if (!j)
        return;
    if (!strcmp(event, "done"))
        jobs__refresh(p, j);
    else if (!strcmp(event, "cancel"))
        jobs__cancel_one(p, j, 0);
    job_release(p, j);
}

/* A name for this process in the consumer group: host, pid and random bits. */
static void jobs__consumer(char *out, size_t cap)
{
    char host[64] = "host", rnd[JOB_ID_LEN + 1];
    gethostname(host, sizeof host - 1);
    ids_random(rnd, JOB_ID_LEN);
    snprintf(out, cap, "%s-%ld-%.8s", host, (long)getpid(), rnd);
}

static void *jobs__timer(void *arg)
{
    jobs *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->exiting) {
        double now = jobs_now();
        job_waiter *fired = NULL;
        double next = waiters_expire(&p->waiters, now, &fired);
        if (fired) {
            pthread_mutex_unlock(&p->lock);
            waiters_fire(fired);
            pthread_mutex_lock(&p->lock);
            continue;
        }
        if (p->shared && p->waiters && now >= p->next_refresh) {
            /* Remote records with waiters: their "done" event may have been lost. */
            job *look[JOBS_REFRESH_MAX];
            int n = 0;
            for (job_waiter *w = p->waiters; w && n < JOBS_REFRESH_MAX; w = w->next) {
                job *wj = w->on;
                if (wj->remote && !wj->local_run && !jobs__terminal(wj->state)) {
                    wj->refs++;
                    look[n++] = wj;
                }
            }
            p->next_refresh = now + JOBS_REFRESH_SECONDS;
            pthread_mutex_unlock(&p->lock);
            for (int i = 0; i < n; i++) {
                jobs__refresh(p, look[i]);
                job_release(p, look[i]);
            }
            pthread_mutex_lock(&p->lock);
            continue;
        }
        if (p->shared && p->waiters && (next == 0 || p->next_refresh < next))
            next = p->next_refresh;
        if (next == 0) {
            pthread_cond_wait(&p->timer, &p->lock);
        } else {
            struct timespec ts;
            ts.tv_sec = (time_t)next;
            ts.tv_nsec = (long)((next - (double)ts.tv_sec) * 1e9);
            pthread_cond_timedwait(&p->timer, &p->lock, &ts);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void *jobs__model_retain(void *v) { return engine_model_retain(v); }
static void jobs__model_release(void *v) { engine_model_release(v); }

jobs *jobs_new(const jobs_config *cfg, store *st, cache *results)
{
    jobs *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->cfg = *cfg;
    p->st = st;
    p->results = results;
    p->nbuckets = JOBS_TABLE_MIN;
    while (p->nbuckets < cfg->max_jobs)
        p->nbuckets *= 2;
    p->table = calloc(p->nbuckets, sizeof *p->table);
    p->threads = calloc((size_t)cfg->workers, sizeof *p->threads);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->timer, &ca);
    pthread_condattr_destroy(&ca);
    if (!p->table || !p->threads) {
        jobs_free(p);
        return NULL;
    }
    if (cfg->redis) {
        static const cache_ops model_ops = {jobs__model_retain, jobs__model_release};
        char consumer[128];
        jobs__consumer(consumer, sizeof consumer);
        p->models = cache_new(JOBS_MODEL_CACHE, &model_ops);
        if (!p->models || !st || redis_queue_open(cfg->redis, consumer, jobs__on_event, p, &p->shared) != 0) {
            jobs_free(p);
            return NULL;
        }
    }
    for (int i = 0; i < cfg->workers; i++) {
        if (pthread_create(&p->threads[i], NULL, p->shared ? jobs__shared_worker : jobs__worker, p) != 0) {
            jobs_free(p);
            return NULL;
        }
        p->nthreads++;
    }
    if (pthread_create(&p->timer_thread, NULL, jobs__timer, p) != 0) {
        jobs_free(p);
        return NULL;
    }
    p->timer_started = 1;
    return p;
}

/* Cancels a queued job. Caller holds p->lock; j is in the queue. */
static void jobs__cancel_queued_locked(jobs *p, job *j, const char *why, job_waiter **fired)
{
    job **pp = &p->queue_head;
    job *prev = NULL;
    while (*pp != j) {
        prev = *pp;
        pp = &(*pp)->queue_next;
    }
    *pp = j->queue_next;
    if (p->queue_tail == j)
        p->queue_tail = prev;
    j->queue_next = NULL;
    p->queued--;
    atomic_store(&j->ctl.cancel, 1);
    blob *doc = jobs__failure_doc(j, JOB_CANCELLED, hamel_problem_new(HAMEL_E_CANCELLED, why));
    jobs__finish_locked(p, j, JOB_CANCELLED, doc, hamel_error_status(HAMEL_E_CANCELLED), fired);
}

void jobs_shutdown(jobs *p, double grace)
{
    job_waiter *fired = NULL;
    pthread_mutex_lock(&p->lock);
    int again = p->exiting;
    pthread_mutex_unlock(&p->lock);
    if (again)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    while (p->queue_head) {
        job *j = p->queue_head;
        if (j->task) { /* told so, outside the lock */
            p->queue_head = j->queue_next;
            if (!p->queue_head)
                p->queue_tail = NULL;
            p->queued--;
            pthread_mutex_unlock(&p->lock);
            j->task(j->task_arg, 1);
            free(j);
            pthread_mutex_lock(&p->lock);
            continue;
        }
        jobs__cancel_queued_locked(p, j, "the server shut down before the job started", &fired);
        isolate_prerun *pre = j->prerun;
        j->prerun = NULL;
        pthread_mutex_unlock(&p->lock);
        isolate_prerun_drop(pre);
        if (p->st)
            jobs__store_failure(p, j, JOB_CANCELLED, j->body);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    waiters_fire(fired);

    /* Let running jobs finish within the grace period, then cancel them. */
    double until = jobs_now() + grace;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        size_t running = p->running;
        pthread_mutex_unlock(&p->lock);
        if (running == 0 || jobs_now() >= until)
            break;
        nanosleep(&(struct timespec){0, JOBS_CANCEL_POLL_NS}, NULL);
    }
    pthread_mutex_lock(&p->lock);
    for (size_t b = 0; b < p->nbuckets && p->table; b++)
        for (job *j = p->table[b]; j; j = j->hash_next)
            if (j->state == JOB_RUNNING)
                atomic_store(&j->ctl.cancel, 1);
    for (job *t = p->tasks_running; t; t = t->task_next)
        if (t->task_ctl)
            atomic_store(&t->task_ctl->cancel, 1);
    p->exiting = 1;
    pthread_cond_broadcast(&p->work);
    pthread_cond_broadcast(&p->timer);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    if (p->timer_started)
        pthread_join(p->timer_thread, NULL);

    /* Whoever still waits is answered with the job as it is. */
    pthread_mutex_lock(&p->lock);
    fired = NULL;
    waiters_detach_all(&p->waiters, &fired);
    pthread_mutex_unlock(&p->lock);
    waiters_fire(fired);
}

void jobs_free(jobs *p)
{
    if (!p)
        return;
    jobs_shutdown(p, 0);
    redis_queue_free(p->shared); /* joins the subscriber: no event comes after this */
    p->shared = NULL;
    cache_free(p->models);
    for (size_t b = 0; b < p->nbuckets && p->table; b++) {
        job *j = p->table[b];
        while (j) {
            job *n = j->hash_next;
            if (--j->refs == 0)
                jobs__destroy(j);
            j = n;
        }
    }
    free(p->table);
    free(p->threads);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->timer);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* A copy of request that shares nothing with the caller's JSON (jansson's reference
 * counts are not a synchronisation ThreadSanitizer can see, and a caller may go on using
 * its objects), without "model": the job has the compiled one. NULL when out of memory. */
static json_t *jobs__private_request(const json_t *request)
{
    json_t *copy = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)request, k, v)
    {
        if (strcmp(k, "model") != 0 && json_object_set_new(copy, k, json_deep_copy(v)) != 0) {
            json_decref(copy);
            return NULL;
        }
    }
    return copy;
}

/* Appends j (a job or a task) to the FIFO of queued work and wakes a worker. Under p->lock. */
static void jobs__enqueue_locked(jobs *p, job *j)
{
    if (p->queue_tail)
        p->queue_tail->queue_next = j;
    else
        p->queue_head = j;
    p->queue_tail = j;
    p->queued++;
    pthread_cond_signal(&p->work);
}

int jobs_submit(jobs *p, engine_model *m, json_t *request, const char *key, job **out)
{
    return jobs_submit_flags(p, m, request, key, 0, out);
}

int jobs_submit_flags(jobs *p, engine_model *m, json_t *request, const char *key, unsigned flags, job **out)
{
    return jobs_submit_prerun(p, m, request, key, flags, NULL, NULL, out);
}

int jobs_prerun_ok(jobs *p)
{
    pthread_mutex_lock(&p->lock);
    int ok = !p->shared && !p->stopping && p->queued == 0 && p->running < (size_t)p->nthreads;
    pthread_mutex_unlock(&p->lock);
    return ok;
}

int jobs_submit_prerun(jobs *p, engine_model *m, json_t *request, const char *key, unsigned flags,
                       const char *id, isolate_prerun *prerun, job **out)
{
    *out = NULL;
    job *j = calloc(1, sizeof *j);
    if (!j) {
        isolate_prerun_drop(prerun);
        return HAMEL_E_INTERNAL;
    }
    if (prerun && (!id || strlen(id) != JOB_ID_LEN || p->shared)) { /* not ours to run: drop it */
        isolate_prerun_drop(prerun);
        prerun = NULL;
    }
    if (prerun)
        memcpy(j->id, id, JOB_ID_LEN + 1);
    else
        ids_random(j->id, JOB_ID_LEN);
    j->prerun = prerun;
    snprintf(j->model_id, sizeof j->model_id, "%s", engine_model_id(m));
    snprintf(j->key, sizeof j->key, "%s", key);
    j->state = JOB_QUEUED;
    j->created = jobs__wall();
    atomic_init(&j->ctl.cancel, 0);
    atomic_init(&j->ctl.progress, 0.0);

    pthread_mutex_lock(&p->lock);
    int rc = p->stopping ? HAMEL_E_UNAVAILABLE : p->queued >= (size_t)p->cfg.queue ? HAMEL_E_QUEUE_FULL : 0;
    pthread_mutex_unlock(&p->lock);
    if (rc != 0) {
        jobs__destroy(j);
        return rc;
    }
    j->model = engine_model_retain(m);
    j->request = jobs__private_request(request);
    if (!j->request) {
        jobs__destroy(j);
        return HAMEL_E_INTERNAL;
    }
    /* The record reaches the disk before anyone can learn the id; if it cannot, nobody
     * learns it (503: a job the store does not know would be lost to a restart). */
    /* a store that reported a full disk gets the record at once, so the refusal is at once too */
    int lazy = (flags & JOBS_SUBMIT_LAZY_RECORD) && !p->shared && !store_full(p->st);
    j->lazy = lazy;
    if (p->st && (lazy ? store_put_job_async : store_put_job)(p->st, j->id, "queued", j->model_id, j->key,
                                                              NULL, j->created) != 0) {
        fprintf(stderr, "hamel-server: job %s: its record could not be stored; not accepted\n", j->id);
        metrics_store_failed();
        jobs__destroy(j);
        return HAMEL_E_UNAVAILABLE;
    }

    job *dead = NULL;
    if (p->shared) {
        /* Into the stream; the record stays here, marked remote. It is in the table
         * before the entry is in the stream, so a worker here that takes the entry at
         * once finds it (and runs it) instead of building a second record. */
        char *text = json_dumps(j->request, JSON_COMPACT | JSON_REAL_PRECISION(17));
        pthread_mutex_lock(&p->lock);
        j->remote = 1;
        jobs__table_add(p, j);
        pthread_mutex_unlock(&p->lock);
        rc = text ? redis_queue_push(p->shared, j->id, j->model_id, j->key, engine_model_canonical(m), text,
                                     j->created)
                  : HAMEL_E_INTERNAL;
        free(text);
        pthread_mutex_lock(&p->lock);
        if (rc == 0) {
            j->refs++; /* the caller's */
            jobs__evict_locked(p, &dead);
        } else {
            jobs__table_remove_locked(p, j);
        }
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_lock(&p->lock);
    if (p->shared) {
        /* done above */
    } else if (p->stopping || p->queued >= (size_t)p->cfg.queue) {
        rc = p->stopping ? HAMEL_E_UNAVAILABLE : HAMEL_E_QUEUE_FULL;
    } else {
        jobs__table_add(p, j);
        j->refs++; /* the caller's */
        jobs__enqueue_locked(p, j);
        jobs__evict_locked(p, &dead);
    }
    pthread_mutex_unlock(&p->lock);
    while (dead) {
        job *n = dead->hash_next;
        jobs__destroy(dead);
        dead = n;
    }
    if (rc != 0) {
        if (p->st) {
            blob *doc = jobs__failure_doc(j, JOB_FAILED, hamel_problem_new(rc, NULL));
            jobs__store_failure(p, j, JOB_FAILED, doc);
            blob_release(doc);
        }
        jobs__destroy(j);
        return rc;
    }
    *out = j;
    return 0;
}

int jobs_takes_tasks(const jobs *p) { return p->shared == NULL; }

double jobs_wall(void) { return jobs__wall(); }

int jobs_record_pending(jobs *p, job *j)
{
    if (!p->st || !j->lazy || atomic_load(&j->recorded))
        return 0;
    pthread_mutex_lock(&p->lock);
    int pending = j->state == JOB_QUEUED || j->state == JOB_RUNNING;
    pthread_mutex_unlock(&p->lock);
    return pending;
}

int jobs_record_barrier(jobs *p, job *j)
{
    if (!p->st || atomic_load(&j->recorded))
        return 0;
    /* the barrier says every write before it was tried; the read says this one held */
    store_job sj;
    memset(&sj, 0, sizeof sj);
    int rc = store_barrier(p->st) == 0 && store_get_job(p->st, j->id, &sj) == 0 ? 0 : -1;
    store_job_clear(&sj);
    if (rc == 0)
        atomic_store(&j->recorded, 1);
    return rc;
}

int jobs_submit_task(jobs *p, jobs_task_fn fn, void *arg, engine_control *ctl)
{
    if (p->shared)
        return HAMEL_E_UNAVAILABLE;
    job *j = calloc(1, sizeof *j);
    if (!j)
        return HAMEL_E_INTERNAL;
    j->task = fn;
    j->task_arg = arg;
    j->task_ctl = ctl;
    j->state = JOB_QUEUED;
    pthread_mutex_lock(&p->lock);
    int rc = p->stopping ? HAMEL_E_UNAVAILABLE : p->queued >= (size_t)p->cfg.queue ? HAMEL_E_QUEUE_FULL : 0;
    if (rc == 0) {
        jobs__enqueue_locked(p, j);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc != 0)
        free(j);
    return rc;
}

void jobs_finish_many(jobs *p, const char *model_id, double created, jobs_outcome *o, size_t n)
{
    store_item *items = calloc(n ? n : 1, sizeof *items);
    blob **docs = calloc(n ? n : 1, sizeof *docs);
    int *status = calloc(n ? n : 1, sizeof *status);
    job **recs = calloc(n ? n : 1, sizeof *recs);
    if (!items || !docs || !status || !recs) { /* nothing recorded: every run fails */
        for (size_t i = 0; i < n; i++) {
            blob_release(o[i].body);
            json_decref(o[i].problem);
            o[i].body = NULL;
            o[i].problem = NULL;
            o[i].rc = HAMEL_E_INTERNAL;
            o[i].state = JOB_FAILED;
        }
        free(items);
        free(docs);
        free(status);
        free(recs);
        return;
    }
    job tmp; /* for the failure documents */
    memset(&tmp, 0, sizeof tmp);
    snprintf(tmp.model_id, sizeof tmp.model_id, "%s", model_id);
    atomic_init(&tmp.ctl.progress, 0.0);
    for (size_t i = 0; i < n; i++) {
        jobs_outcome *x = &o[i];
        if (x->rc == 0 && !x->body) {
            x->rc = HAMEL_E_INTERNAL;
            x->problem = hamel_problem_new(x->rc, "out of memory serialising the result");
        }
        x->state = x->rc == 0 ? JOB_DONE : x->rc == HAMEL_E_CANCELLED ? JOB_CANCELLED : JOB_FAILED;
        status[i] = x->rc == 0 ? 200 : jobs__problem_status(x->problem, x->rc);
        if (x->rc != 0) {
            snprintf(tmp.id, sizeof tmp.id, "%s", x->id);
            docs[i] = jobs__failure_doc(&tmp, x->state, x->problem);
            x->problem = NULL;
        }
        items[i] = (store_item){x->id,
                                job_state_name(x->state),
                                model_id,
                                x->key,
                                docs[i] ? docs[i]->data : NULL,
                                x->rc == 0 ? x->body : NULL,
                                created,
                                0};
    }
    /* the store first, in one commit: a job is done only once its result is stored */
    int put = p->st ? store_put_many(p->st, items, n) : 0;
    double since = jobs_now();
    for (int a = 0; put != 0 && jobs__store_again(p, a, since); a++)
        put = store_put_many(p->st, items, n);
    if (put != 0) {
        for (size_t i = 0; i < n; i++) {
            jobs_outcome *x = &o[i];
            if (x->rc != 0 || items[i].rc == 0)
                continue;
            fprintf(stderr, "hamel-server: job %s: the result could not be stored; the job fails\n", x->id);
            metrics_store_failed();
            blob_release(x->body);
            x->body = NULL;
            x->rc = HAMEL_E_UNAVAILABLE;
            x->state = JOB_FAILED;
            snprintf(tmp.id, sizeof tmp.id, "%s", x->id);
            json_t *problem = hamel_problem_new(
                x->rc, store_full(p->st) ? "the result could not be stored: the disk is full; retry once "
                                           "space is freed"
                                         : "the result could not be stored (see the server's log); retry");
            status[i] = jobs__problem_status(problem, x->rc);
            docs[i] = jobs__failure_doc(&tmp, JOB_FAILED, problem);
            if (docs[i])
                store_put_job(p->st, x->id, "failed", model_id, x->key, docs[i]->data, created);
        }
    }
    for (size_t i = 0; i < n; i++) {
        jobs_outcome *x = &o[i];
        if (x->rc == 0 && p->results)
            cache_put(p->results, x->key, x->body, x->body->len);
        if (x->rc != 0) { /* the body handed back is the job's document */
            blob_release(x->body);
            x->body = docs[i] ? blob_retain(docs[i]) : NULL;
        }
        job *j = calloc(1, sizeof *j);
        if (j) {
            snprintf(j->id, sizeof j->id, "%s", x->id);
            snprintf(j->model_id, sizeof j->model_id, "%s", model_id);
            snprintf(j->key, sizeof j->key, "%s", x->key);
            j->created = created;
            atomic_init(&j->ctl.cancel, x->state == JOB_CANCELLED);
            atomic_init(&j->ctl.progress, 1.0);
        }
        recs[i] = j;
        metrics_job(x->state == JOB_DONE        ? METRICS_JOB_DONE
                    : x->state == JOB_CANCELLED ? METRICS_JOB_CANCELLED
                                                : METRICS_JOB_FAILED);
    }
    job_waiter *fired = NULL;
    job *dead = NULL;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < n; i++) {
        if (!recs[i])
            continue;
        jobs__table_add(p, recs[i]);
        jobs__finish_locked(p, recs[i], o[i].state, o[i].body ? blob_retain(o[i].body) : NULL, status[i],
                            &fired);
    }
    jobs__evict_locked(p, &dead);
    pthread_mutex_unlock(&p->lock);
    waiters_fire(fired);
    jobs__destroy_all(dead);
    for (size_t i = 0; i < n; i++)
        blob_release(docs[i]);
    free(items);
    free(docs);
    free(status);
    free(recs);
}

job *jobs_find(jobs *p, const char *id)
{
    pthread_mutex_lock(&p->lock);
    job *j = jobs__table_find(p, id);
    if (j)
        j->refs++;
    pthread_mutex_unlock(&p->lock);
    return j;
}

void jobs_view_get(jobs *p, job *j, job_view *v)
{
    jobs__refresh(p, j); /* a remote record: what the store knows by now */
    pthread_mutex_lock(&p->lock);
    memcpy(v->id, j->id, sizeof v->id);
    memcpy(v->model_id, j->model_id, sizeof v->model_id);
    memcpy(v->key, j->key, sizeof v->key);
    v->state = j->state;
    v->progress = j->state == JOB_DONE ? 1.0 : atomic_load(&j->ctl.progress);
    v->problem_status = j->problem_status;
    v->body = j->body ? blob_retain(j->body) : NULL;
    pthread_mutex_unlock(&p->lock);
}

int jobs_view_stale(jobs *p, job *j)
{
    if (!p->shared || !p->st)
        return 0;
    pthread_mutex_lock(&p->lock);
    int look = j->remote && !j->local_run && !jobs__terminal(j->state);
    pthread_mutex_unlock(&p->lock);
    return look;
}

int jobs_cancel(jobs *p, job *j) { return jobs__cancel(p, j, 1); }

/* For jobs__on_event. */
static void jobs__cancel_one(jobs *p, job *j, int announce) { jobs__cancel(p, j, announce); }

/* Cancels j; with a shared queue and `announce`, tells every instance (the one running
 * it stops it). */
static int jobs__cancel(jobs *p, job *j, int announce)
{
    job_waiter *fired = NULL;
    int rc = 0, store_it = 0, queued = 0;
    isolate_prerun *pre = NULL;
    pthread_mutex_lock(&p->lock);
    queued = j->state == JOB_QUEUED && !j->remote;
    if (queued) {
        jobs__cancel_queued_locked(p, j, "cancelled by request", &fired);
        pre = j->prerun; /* its worker is freed now, not when the record goes */
        j->prerun = NULL;
        store_it = 1;
    } else if (j->state == JOB_RUNNING || j->state == JOB_QUEUED) { /* running, or in the stream */
        atomic_store(&j->ctl.cancel, 1);
        blob *doc =
            jobs__failure_doc(j, JOB_CANCELLED, hamel_problem_new(HAMEL_E_CANCELLED, "cancelled by request"));
        jobs__finish_locked(p, j, JOB_CANCELLED, doc, hamel_error_status(HAMEL_E_CANCELLED), &fired);
        store_it = 1;
    } else if (j->state != JOB_CANCELLED) {
        rc = HAMEL_E_CONFLICT;
    }
    blob *doc = store_it && j->body ? blob_retain(j->body) : NULL;
    pthread_mutex_unlock(&p->lock);
    isolate_prerun_drop(pre);
    if (store_it) {
        jobs__store_failure(p, j, JOB_CANCELLED, doc);
        if (queued)
            metrics_job(METRICS_JOB_CANCELLED);
    }
    blob_release(doc);
    if (store_it && announce && p->shared)
        redis_queue_publish(p->shared, "cancel", j->id);
    waiters_fire(fired);
    return rc;
}

int jobs_cancel_stored(jobs *p, const char *id, const store_job *sj, char **doc)
{
    *doc = NULL;
    if (!p->shared || !p->st)
        return HAMEL_E_CONFLICT;
    if (strcmp(sj->status, "queued") != 0 && strcmp(sj->status, "running") != 0)
        return HAMEL_E_CONFLICT;
    job tmp;
    memset(&tmp, 0, sizeof tmp);
    snprintf(tmp.id, sizeof tmp.id, "%.*s", JOB_ID_LEN, id);
    snprintf(tmp.model_id, sizeof tmp.model_id, "%s", sj->model_id ? sj->model_id : "");
    snprintf(tmp.key, sizeof tmp.key, "%s", sj->key ? sj->key : "");
    tmp.created = sj->created;
    atomic_init(&tmp.ctl.progress, 0.0);
    blob *b =
        jobs__failure_doc(&tmp, JOB_CANCELLED, hamel_problem_new(HAMEL_E_CANCELLED, "cancelled by request"));
    if (!b)
        return HAMEL_E_INTERNAL;
    int rc = store_put_job(p->st, tmp.id, "cancelled", tmp.model_id, tmp.key, b->data, tmp.created);
    if (rc == 0)
        rc = redis_queue_publish(p->shared, "cancel", tmp.id);
    if (rc == 0)
        *doc = strdup(b->data);
    blob_release(b);
    return rc == 0 ? 0 : HAMEL_E_UNAVAILABLE;
}

int jobs_wait(jobs *p, job *j, job_waiter *w)
{
    pthread_mutex_lock(&p->lock);
    if (jobs__terminal(j->state) || p->exiting) {
        pthread_mutex_unlock(&p->lock);
        return 1;
    }
    w->on = j;
    waiters_add(&p->waiters, w);
    pthread_cond_signal(&p->timer);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

void jobs_counts(jobs *p, size_t *queued, size_t *capacity, size_t *running, size_t *kept)
{
    pthread_mutex_lock(&p->lock);
    *queued = p->queued;
    *capacity = (size_t)p->cfg.queue;
    *running = p->running;
    *kept = p->kept;
    pthread_mutex_unlock(&p->lock);
    if (p->shared) {
        long n = redis_queue_length(p->shared);
        *queued = n > 0 ? (size_t)n : 0;
    }
}

int jobs_reachable(jobs *p) { return !p->shared || redis_queue_length(p->shared) >= 0; }

int jobs_accepting(jobs *p)
{
    pthread_mutex_lock(&p->lock);
    int r = !p->stopping;
    pthread_mutex_unlock(&p->lock);
    return r;
}
