/* batch_feed.c — feeding a batch's runs to the pool, a few places of its queue at a time:
 * in blocks (one task of the pool, one worker call and one store commit for up to
 * BATCH_BLOCK_MAX runs), or, with a shared queue (HAMEL_REDIS), one job per run parked on
 * until it ends. Runs whose result is cached are answered without a job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_internal.h"
#include "ids.h"
#include "isolate.h"
#include "merge.h"
#include "metrics.h"

#define BATCH_CLAIM_MAX 64         /* runs claimed per pass of the feeder */
#define BATCH_RETRY_SECONDS 0.05   /* queue full with nothing of ours in flight: retry */
#define BATCH_RUN_PARK_SECONDS 1e9 /* a run's job waiter: woken by the job, not a clock */
#define BATCH_BLOCK_MAX 1024       /* runs in one block: one worker call, one store commit */
#define BATCH_BLOCK_SECONDS 0.1    /* a block's aim on a worker: its lines come this often */
#define BATCH_NATIVE_SHARE 0.5     /* a block waits for the native tier up to this share of */
#define BATCH_NATIVE_MAX 10.0      /* ... the work left per worker, at most this, seconds */

/* A claimed run is over: drops the reference it held on its batch. */
static void batch__run_end(batches *bs, batch *b) { batch_release(bs, b); }

/* Records the end of a run's job. `feed`: queue more of the batch (from the pool's wake;
 * the feeder itself calls this with 0 for a job that finished before it could park, and
 * carries on feeding, so finishing runs never recurse). */
static void batch__run_complete(batch_run *r, int feed)
{
    batch *b = r->b;
    batches *bs = b->bs;
    job_view v;
    jobs_view_get(bs->pool, r->job, &v);
    blob *line = NULL;
    int status;
    if (v.state == JOB_DONE && v.body) {
        status = RUN_DONE;
        line = batch__line_done(b, r, v.body, 0);
    } else if ((v.state == JOB_FAILED || v.state == JOB_CANCELLED) && v.body) {
        status = v.state == JOB_FAILED ? RUN_FAILED : RUN_CANCELLED;
        json_t *doc = json_loadb(v.body->data, v.body->len, 0, NULL);
        json_t *problem = json_incref(json_object_get(doc, "problem"));
        json_decref(doc);
        line = batch__line_problem(b, r, status, problem);
    } else { /* still queued or running: the pool is shutting down */
        status = RUN_CANCELLED;
        line =
            batch__line_problem(b, r, status, hamel_problem_new(HAMEL_E_UNAVAILABLE, "the server shut down"));
    }
    blob_release(v.body);
    pthread_mutex_lock(&bs->lock);
    job *j = r->job;
    r->job = NULL;
    pthread_mutex_unlock(&bs->lock);
    job_release(bs->pool, j);
    batch__finish_run(bs, b, r, line, status, 0, 1);
    if (feed)
        batch__feed(bs, b);
    batch__run_end(bs, b);
}

static void batch__run_wake(void *arg) { batch__run_complete(arg, 1); }

/* ---- feeding ------------------------------------------------------------------------ */

enum { SUBMIT_INFLIGHT, SUBMIT_ANSWERED, SUBMIT_REQUEUED };

/* Queues one claimed run, or answers it from the result cache. Returns SUBMIT_INFLIGHT
 * (its job's completion ends the claim), SUBMIT_ANSWERED (finished here) or
 * SUBMIT_REQUEUED (the queue was full: the run is pending again). */
static int batch__submit(batches *bs, batch *b, batch_run *r)
{
    pthread_mutex_lock(&bs->lock);
    int cancel = b->cancel;
    pthread_mutex_unlock(&bs->lock);
    if (cancel) {
        blob *line = batch__line_problem(b, r, RUN_CANCELLED,
                                         hamel_problem_new(HAMEL_E_CANCELLED, "the batch was cancelled"));
        batch__finish_run(bs, b, r, line, RUN_CANCELLED, 0, 1);
        return SUBMIT_ANSWERED;
    }
    blob *hit = cache_get(bs->results, r->key);
    if (!hit && bs->st && store_get_result(bs->st, r->key, &hit) == 0)
        cache_put(bs->results, r->key, hit, hit->len);
    if (hit) {
        metrics_job(METRICS_JOB_CACHED);
        blob *line = batch__line_done(b, r, hit, 1);
        blob_release(hit);
        batch__finish_run(bs, b, r, line, RUN_DONE, 1, 1);
        return SUBMIT_ANSWERED;
    }
    json_t *req = merge_run(b->base, json_array_get(b->partials, r->index));
    job *j = NULL;
    int rc = req ? jobs_submit_flags(bs->pool, b->model, req, r->key, JOBS_SUBMIT_LAZY_RECORD, &j)
                 : HAMEL_E_INTERNAL;
    json_decref(req);
    if (rc == HAMEL_E_QUEUE_FULL) { /* others fill the queue: this run waits its turn */
        pthread_mutex_lock(&bs->lock);
        r->state = RUN_PENDING;
        b->inflight--;
        if (r->index < b->cursor)
            b->cursor = r->index;
        b->retry_at = jobs_now() + BATCH_RETRY_SECONDS;
        pthread_cond_signal(&bs->timer);
        pthread_mutex_unlock(&bs->lock);
        return SUBMIT_REQUEUED;
    }
    if (rc != 0) {
        int status = rc == HAMEL_E_UNAVAILABLE ? RUN_CANCELLED : RUN_FAILED;
        blob *line = batch__line_problem(b, r, status, hamel_problem_new(rc, NULL));
        batch__finish_run(bs, b, r, line, status, 0, 1);
        return SUBMIT_ANSWERED;
    }
    job_view v;
    jobs_view_get(bs->pool, j, &v);
    blob_release(v.body);
    pthread_mutex_lock(&bs->lock);
    snprintf(r->job_id, sizeof r->job_id, "%s", v.id);
    r->job = j;
    r->state = RUN_INFLIGHT;
    cancel = b->cancel; /* a DELETE before this point did not see the job: cancel it here */
    pthread_mutex_unlock(&bs->lock);
    if (cancel)
        jobs_cancel(bs->pool, j);
    r->w.wake = batch__run_wake;
    r->w.arg = r;
    r->w.deadline = jobs_now() + BATCH_RUN_PARK_SECONDS;
    if (jobs_wait(bs->pool, j, &r->w) != 0) /* finished already: no wake will come */
        batch__run_complete(r, 0);
    return SUBMIT_INFLIGHT;
}

/* The next pending run of b from its cursor on, now claimed (counted in flight), or NULL
 * when none is left. Under bs->lock. */
static batch_run *batch__claim_next_locked(batch *b)
{
    while (b->cursor < b->count && b->runs[b->cursor].state != RUN_PENDING)
        b->cursor++;
    if (b->cursor >= b->count)
        return NULL;
    batch_run *r = &b->runs[b->cursor++];
    r->state = RUN_CLAIMED;
    b->inflight++;
    return r;
}

/* Claims runs while b has room in flight and submits them as jobs, until nothing more
 * can be claimed (with a shared queue). The caller holds a reference on b. */
static void batch__feed_jobs(batches *bs, batch *b)
{
    for (;;) {
        batch_run *claim[BATCH_CLAIM_MAX];
        size_t n = 0;
        pthread_mutex_lock(&bs->lock);
        while (n < BATCH_CLAIM_MAX && !b->cancel && b->inflight < bs->cfg.max_inflight) {
            batch_run *r = batch__claim_next_locked(b);
            if (!r)
                break;
            b->refs++; /* the run's, until its claim ends */
            claim[n++] = r;
        }
        pthread_mutex_unlock(&bs->lock);
        if (n == 0)
            return;
        for (size_t i = 0; i < n; i++) {
            int how = batch__submit(bs, b, claim[i]);
            if (how == SUBMIT_ANSWERED) {
                batch__run_end(bs, b);
            } else if (how == SUBMIT_REQUEUED) { /* the queue is full: the rest go back too */
                pthread_mutex_lock(&bs->lock);
                for (size_t k = i + 1; k < n; k++) {
                    claim[k]->state = RUN_PENDING;
                    b->inflight--;
                    if (claim[k]->index < b->cursor)
                        b->cursor = claim[k]->index;
                }
                pthread_mutex_unlock(&bs->lock);
                for (size_t k = i; k < n; k++)
                    batch__run_end(bs, b);
                return;
            }
        }
    }
}

/* ---- blocks ------------------------------------------------------------------------- */

/* How many runs the next block takes: about BATCH_BLOCK_SECONDS of work (one run while
 * nothing is measured yet), and no more than a share of what is left, so the last runs
 * are spread over the workers. Caller holds bs->lock. */
static size_t batch__block_size_locked(const batches *bs, const batch *b)
{
    size_t workers = bs->cfg.workers > 0 ? (size_t)bs->cfg.workers : 1;
    size_t left = b->count - b->finished - b->inflight;
    size_t k = 1;
    if (b->run_seconds > 0) {
        double want = BATCH_BLOCK_SECONDS / b->run_seconds;
        k = want >= BATCH_BLOCK_MAX ? BATCH_BLOCK_MAX : want < 1 ? 1 : (size_t)want;
    }
    size_t share = (left + 2 * workers - 1) / (2 * workers);
    if (k > share)
        k = share;
    return k ? k : 1;
}

/* The most blocks of one batch in flight: two per worker (one running, one queued
 * behind it, so no worker waits for the feeder), within the batch's places. */
static size_t batch__blocks_max(const batches *bs)
{
    size_t two = 2 * (size_t)(bs->cfg.workers > 0 ? bs->cfg.workers : 1);
    return two < bs->cfg.max_inflight ? two : bs->cfg.max_inflight;
}

static void batch__block_unlink_locked(batch *b, batch_block *k)
{
    if (k->prev)
        k->prev->next = k->next;
    else
        b->blocks = k->next;
    if (k->next)
        k->next->prev = k->prev;
    k->prev = k->next = NULL;
    b->nblocks--;
}

/* The problem document of a failed or cancelled job body, a new reference. */
static json_t *batch__body_problem(const blob *body, int rc)
{
    json_t *doc = body ? json_loadb(body->data, body->len, 0, NULL) : NULL;
    json_t *problem = json_incref(json_object_get(doc, "problem"));
    json_decref(doc);
    return problem ? problem : hamel_problem_new(rc ? rc : HAMEL_E_INTERNAL, NULL);
}

/* The work arrays of one block's run on a worker. */
typedef struct block_work {
    isolate_result *res;
    jobs_outcome *out;
    blob **lines;
    int *status;
    batch_run **fin; /* the runs that ended, with lines[i] and status[i] */
    const char **ids;
    size_t nfin;
} block_work;

static void block_work_free(block_work *w, size_t n)
{
    for (size_t i = 0; w->res && i < n; i++) {
        free(w->res[i].text);
        json_decref(w->res[i].problem);
    }
    free(w->res);
    free(w->out);
    free(w->lines);
    free(w->status);
    free(w->fin);
    free(w->ids);
}

static int block_work_new(block_work *w, size_t n)
{
    memset(w, 0, sizeof *w);
    w->res = calloc(n, sizeof *w->res);
    w->out = calloc(n, sizeof *w->out);
    w->lines = calloc(n, sizeof *w->lines);
    w->status = calloc(n, sizeof *w->status);
    w->fin = calloc(n, sizeof *w->fin);
    w->ids = calloc(n, sizeof *w->ids);
    if (w->res && w->out && w->lines && w->status && w->fin && w->ids)
        return 0;
    block_work_free(w, 0);
    return -1;
}

/* Every run of k ends with status st and a copy of problem (taken), without a job. */
static void batch__block_end_all(batches *bs, batch_block *k, int st, json_t *problem)
{
    for (size_t i = 0; i < k->n; i++) {
        blob *line = batch__line_problem(k->b, k->runs[i], st, json_deep_copy(problem));
        batch__finish_run(bs, k->b, k->runs[i], line, st, 0, 1);
    }
    json_decref(problem);
}

/* The worker call of block k: one message with the base, every run's own members and
 * its job id. Returns isolate_simulate_many's status (*problem when not 0). */
static int batch__block_call(batches *bs, batch_block *k, block_work *w, json_t **problem)
{
    batch *b = k->b;
    const json_t **runs = calloc(k->n, sizeof *runs);
    for (size_t i = 0; runs && i < k->n; i++) {
        batch_run *r = k->runs[i];
        ids_random(r->job_id, JOB_ID_LEN);
        w->ids[i] = r->job_id;
        runs[i] = json_array_get(b->partials, r->index);
    }
    json_t *head = json_pack("{s:s, s:s, s:s, s:f}", "job_id", "", "status", "done", "model_id", b->model_id,
                             "progress", 1.0);
    /* A long sweep waits for the optimizing tier rather than run the first one meanwhile
     * (once its runs are measured: the first blocks have made the model hot anyway). */
    pthread_mutex_lock(&bs->lock);
    double left = (double)(b->count - b->finished) * b->run_seconds /
                  (double)(bs->cfg.workers > 0 ? bs->cfg.workers : 1);
    pthread_mutex_unlock(&bs->lock);
    double wait = BATCH_NATIVE_SHARE * left < BATCH_NATIVE_MAX ? BATCH_NATIVE_SHARE * left : BATCH_NATIVE_MAX;
    *problem = NULL;
    int rc = runs && head ? isolate_simulate_many(b->model, b->base, runs, k->n, head, w->ids, wait,
                                                  &bs->cfg.limits, &k->ctl, w->res, problem)
                          : HAMEL_E_INTERNAL;
    if (rc != 0 && !*problem)
        *problem = hamel_problem_new(rc, NULL);
    free(runs);
    json_decref(head);
    return rc;
}

/* Records the runs of k that ran as jobs (one store commit) and makes their lines; the
 * runs a fault left unrun go back to pending. `dt`: the call's seconds. */
static void batch__block_record(batches *bs, batch_block *k, block_work *w, double created, double dt)
{
    batch *b = k->b;
    size_t nout = 0, nagain = 0;
    for (size_t i = 0; i < k->n; i++) {
        isolate_result *x = &w->res[i];
        if (x->rc == -1) { /* not run: kept at the front of k->runs for below */
            k->runs[nagain++] = k->runs[i];
            continue;
        }
        jobs_outcome *o = &w->out[nout];
        o->id = k->runs[i]->job_id;
        o->key = k->runs[i]->key;
        o->rc = x->rc;
        o->body = x->rc == 0 ? blob_take_len(x->text, x->len) : NULL;
        o->problem = x->problem;
        x->text = NULL;
        x->problem = NULL;
        w->fin[nout++] = k->runs[i];
    }
    metrics_integrate(dt);
    jobs_finish_many(bs->pool, b->model_id, created, w->out, nout);
    for (size_t i = 0; i < nout; i++) {
        jobs_outcome *o = &w->out[i];
        if (o->state == JOB_DONE) {
            w->status[i] = RUN_DONE;
            w->lines[i] = batch__line_done(b, w->fin[i], o->body, 0);
        } else {
            w->status[i] = o->state == JOB_CANCELLED ? RUN_CANCELLED : RUN_FAILED;
            w->lines[i] =
                batch__line_problem(b, w->fin[i], w->status[i], batch__body_problem(o->body, o->rc));
        }
        blob_release(o->body);
        o->body = NULL;
    }
    w->nfin = nout;
    pthread_mutex_lock(&bs->lock);
    if (nout > 0 && nagain == 0) { /* the measure of a run, for the next blocks */
        double one = dt / (double)nout;
        b->run_seconds = b->run_seconds > 0 ? 0.5 * (b->run_seconds + one) : one;
    }
    for (size_t i = 0; i < nagain; i++) {
        k->runs[i]->state = RUN_PENDING;
        b->inflight--;
        if (k->runs[i]->index < b->cursor)
            b->cursor = k->runs[i]->index;
    }
    pthread_mutex_unlock(&bs->lock);
}

/* Runs a block on a pool thread (cancelled: the pool shut down before it started): one
 * worker call for its runs, their results stored in one commit as job records, their
 * lines added at once. */
static void batch__block_task(void *arg, int cancelled)
{
    batch_block *k = arg;
    batch *b = k->b;
    batches *bs = b->bs;
    pthread_mutex_lock(&bs->lock);
    int dropped = k->dropped, cancel = b->cancel;
    k->started = 1;
    pthread_mutex_unlock(&bs->lock);
    block_work w;
    if (dropped) {                    /* batch__cancel ended its runs */
    } else if (cancelled || cancel) { /* never started: no jobs */
        batch__block_end_all(
            bs, k, RUN_CANCELLED,
            hamel_problem_new(HAMEL_E_CANCELLED, cancelled ? "the server shut down before the run started"
                                                           : "the batch was cancelled"));
    } else if (block_work_new(&w, k->n) != 0) {
        batch__block_end_all(bs, k, RUN_FAILED, hamel_problem_new(HAMEL_E_INTERNAL, "out of memory"));
    } else {
        double t0 = jobs_now(), created = jobs_wall();
        json_t *problem = NULL;
        int rc = batch__block_call(bs, k, &w, &problem);
        if (rc != 0) /* nothing ran: every run ends so (the pool stopping: cancelled) */
            batch__block_end_all(bs, k, rc == HAMEL_E_UNAVAILABLE ? RUN_CANCELLED : RUN_FAILED, problem);
        else
            batch__block_record(bs, k, &w, created, jobs_now() - t0);
        batch__finish_runs(bs, b, w.fin, w.lines, w.status, 0, 1, w.nfin);
        block_work_free(&w, k->n);
    }
    pthread_mutex_lock(&bs->lock);
    batch__block_unlink_locked(b, k);
    pthread_cond_broadcast(&bs->ended);
    pthread_mutex_unlock(&bs->lock);
    free(k);
    if (!cancelled)
        batch__feed(bs, b);
    batch_release(bs, b); /* the block's reference */
}

/* Claims runs in blocks while b has room and queues each block as a task of the pool;
 * runs whose result is cached (in memory, or in the store: one read for the block) are
 * answered at once. The caller holds a reference on b. */
static void batch__feed_blocks(batches *bs, batch *b)
{
    for (;;) {
        pthread_mutex_lock(&bs->lock);
        size_t want = batch__block_size_locked(bs, b);
        if (b->cancel || b->nblocks >= batch__blocks_max(bs)) {
            pthread_mutex_unlock(&bs->lock);
            return;
        }
        batch_block *k = malloc(sizeof *k + want * sizeof k->runs[0]);
        size_t n = 0;
        while (k && n < want) {
            batch_run *r = batch__claim_next_locked(b);
            if (!r)
                break;
            k->runs[n++] = r;
        }
        pthread_mutex_unlock(&bs->lock);
        if (n == 0) {
            free(k);
            return;
        }
        /* answers from the cache, then from the store */
        blob **hit = calloc(n, sizeof *hit);
        const char **keys = calloc(n, sizeof *keys);
        size_t *miss = calloc(n, sizeof *miss), nmiss = 0;
        for (size_t i = 0; hit && keys && miss && i < n; i++) {
            hit[i] = cache_get(bs->results, k->runs[i]->key);
            if (!hit[i]) {
                keys[nmiss] = k->runs[i]->key;
                miss[nmiss++] = i;
            }
        }
        if (hit && keys && miss && nmiss > 0 && bs->st) {
            blob **got = calloc(nmiss, sizeof *got);
            if (got && store_get_results(bs->st, keys, nmiss, got) == 0)
                for (size_t j = 0; j < nmiss; j++)
                    if (got[j]) {
                        cache_put(bs->results, keys[j], got[j], got[j]->len);
                        hit[miss[j]] = got[j];
                    }
            free(got);
        }
        size_t m = 0, nhit = 0;
        for (size_t i = 0; i < n; i++) {
            if (hit && hit[i]) {
                batch_run *r = k->runs[i];
                metrics_job(METRICS_JOB_CACHED);
                blob *line = batch__line_done(b, r, hit[i], 1);
                blob_release(hit[i]);
                batch__finish_run(bs, b, r, line, RUN_DONE, 1, 1);
                nhit++;
            } else {
                k->runs[m++] = k->runs[i];
            }
        }
        free(hit);
        free(keys);
        free(miss);
        if (m == 0) {
            free(k);
            continue;
        }
        k->n = m;
        k->b = b;
        k->started = k->dropped = 0;
        atomic_init(&k->ctl.cancel, 0);
        atomic_init(&k->ctl.progress, 0.0);
        k->ctl.max_steps = 0;
        k->ctl.max_wall_seconds = 0;
        pthread_mutex_lock(&bs->lock);
        b->refs++; /* the block's */
        k->prev = NULL;
        k->next = b->blocks;
        if (b->blocks)
            b->blocks->prev = k;
        b->blocks = k;
        b->nblocks++;
        pthread_mutex_unlock(&bs->lock);
        int rc = jobs_submit_task(bs->pool, batch__block_task, k, &k->ctl);
        if (rc == 0)
            continue;
        pthread_mutex_lock(&bs->lock);
        batch__block_unlink_locked(b, k);
        if (rc == HAMEL_E_QUEUE_FULL) { /* others fill the queue: these runs wait their turn */
            for (size_t i = 0; i < m; i++) {
                k->runs[i]->state = RUN_PENDING;
                b->inflight--;
                if (k->runs[i]->index < b->cursor)
                    b->cursor = k->runs[i]->index;
            }
            b->retry_at = jobs_now() + BATCH_RETRY_SECONDS;
            pthread_cond_signal(&bs->timer);
        }
        pthread_mutex_unlock(&bs->lock);
        if (rc != HAMEL_E_QUEUE_FULL) {
            int st = rc == HAMEL_E_UNAVAILABLE ? RUN_CANCELLED : RUN_FAILED;
            for (size_t i = 0; i < m; i++) {
                blob *line = batch__line_problem(b, k->runs[i], st, hamel_problem_new(rc, NULL));
                batch__finish_run(bs, b, k->runs[i], line, st, 0, 1);
            }
        }
        free(k);
        batch_release(bs, b);
        if (rc == HAMEL_E_QUEUE_FULL)
            return;
    }
}

void batch__feed(batches *bs, batch *b)
{
    if (b->blocks_on)
        batch__feed_blocks(bs, b);
    else
        batch__feed_jobs(bs, b);
}
