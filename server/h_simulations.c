/* h_simulations.c — simulations and their jobs: POST /v1/simulations, GET and DELETE
 * /v1/jobs/{id}.
 *
 * Owns the simulation answers: a cached result at once (200, {"cached":true}, ETag = the
 * simulation key; a repeat of the exact body is answered from the body memo without
 * parsing), else a job on the pool (202 + Location, or a long-poll with ?wait parked on
 * the job), and a job's state, result or problem; a job only in the store (evicted or
 * from before a restart) is answered from its stored record. The store is asked on the
 * offload pool (a result not in memory, a job not in memory), never on a poll thread;
 * so is a new job submitted (its "queued" record, with HAMEL_REDIS its XADD), in the same
 * task as the store lookup, or as the model's compilation (http__simulation_work).
 */
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob.h"
#include "http_conn.h"
#include "ids.h"
#include "jsonout.h"

/* The memo key of a body: "s:" and the hex SHA-256 of its bytes. */
static void http__memo_key(const http_conn *c, char out[CACHE_MAX_KEY + 1])
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)c->body.s, c->body.len, d);
    memcpy(out, "s:", 2);
    ids_hex(d, sizeof d, out + 2);
}

/* Answers a POST /v1/simulations whose exact body was seen before and whose result is
 * still cached; returns 1 if it answered. */
int http__simulation_memo(http_conn *c, enum MHD_Result *ret)
{
    http_server *s = c->srv;
    char mkey[CACHE_MAX_KEY + 1];
    http__memo_key(c, mkey);
    blob *key = cache_peek(s->memo, mkey);
    if (!key)
        return 0;
    /* peek first so that a miss here is not counted twice (the full path counts it) */
    blob *seen = cache_peek(s->d.results, key->data);
    blob *hit = seen ? cache_get(s->d.results, key->data) : NULL;
    blob_release(seen);
    if (hit) {
        char etag[CACHE_MAX_KEY + 3];
        snprintf(etag, sizeof etag, "\"%s\"", key->data);
        metrics_job(METRICS_JOB_CACHED);
        *ret = http__result(c, hit, 1, etag, key->data);
        blob_release(hit);
    }
    blob_release(key);
    return hit != NULL;
}

/* Remembers the simulation key of the current body. */
static void http__memo_put(http_conn *c, const char *key)
{
    char mkey[CACHE_MAX_KEY + 1];
    http__memo_key(c, mkey);
    blob *b = blob_new(key, strlen(key));
    if (b)
        cache_put(c->srv->memo, mkey, b, sizeof *b + b->len + 1 + strlen(mkey));
    blob_release(b);
}

/* The body of a job that is still queued or running. */
static json_t *http__pending_doc(const job_view *v)
{
    return json_pack("{s:s, s:s, s:s, s:f}", "job_id", v->id, "status", job_state_name(v->state), "model_id",
                     v->model_id, "progress", v->progress);
}

/* The state of j: the copy read off the poll thread for c (taken), or jobs_view_get's. */
static void http__view(http_conn *c, job *j, job_view *v)
{
    if (c->sim.view_set && j == c->sim.job) {
        *v = c->sim.view;
        c->sim.view_set = 0;
        return;
    }
    jobs_view_get(c->srv->d.jobs, j, v);
}

/* Forgets the copy of c->sim.job's state (a later answer reads it again). */
static void http__view_drop(http_conn *c)
{
    if (c->sim.view_set)
        blob_release(c->sim.view.body);
    c->sim.view_set = 0;
}

/* Answers with the current state of job j. `sync` is set for POST /v1/simulations: a
 * still-running job is 202 with Location; a failed one is its problem document. */
static enum MHD_Result http__job_answer(http_conn *c, job *j, int sync)
{
    job_view v;
    http__view(c, j, &v);
    enum MHD_Result ret;
    char etag[JOB_ID_LEN + 3];
    snprintf(etag, sizeof etag, "\"%s\"", v.id);
    if (v.state == JOB_DONE && v.body) {
        ret = http__result(c, v.body, 0, etag, v.key);
    } else if ((v.state == JOB_FAILED || v.state == JOB_CANCELLED) && v.body) {
        json_t *doc = json_loadb(v.body->data, v.body->len, 0, NULL);
        json_t *problem = json_object_get(doc, "problem");
        if (sync && json_is_object(problem)) {
            json_object_set_new(problem, "job_id", json_string(v.id));
            json_object_set_new(problem, "job_status", json_string(job_state_name(v.state)));
            ret = http__problem(c, json_incref(problem));
            json_decref(doc);
        } else {
            ret = http__json(c, 200, doc);
        }
    } else {
        char location[JOB_ID_LEN + 16];
        snprintf(location, sizeof location, "/v1/jobs/%s", v.id);
        ret = sync ? http__json_h(c, 202, http__pending_doc(&v), "application/json", MHD_HTTP_HEADER_LOCATION,
                                  location, NULL, NULL)
                   : http__json(c, 200, http__pending_doc(&v));
    }
    blob_release(v.body);
    return ret;
}

/* Offloaded: c->sim.job's state (a store read, jobs_view_stale), once its record is
 * committed when the answer will show the id of a job recorded lazily. */
static void http__run_view(void *arg)
{
    http_conn *c = arg;
    c->work.rc = 0;
    if (jobs_record_pending(c->srv->d.jobs, c->sim.job) &&
        jobs_record_barrier(c->srv->d.jobs, c->sim.job) != 0) {
        c->work.rc = HAMEL_E_UNAVAILABLE; /* its record is not in the store: not shown, cancelled */
        jobs_cancel(c->srv->d.jobs, c->sim.job);
        return;
    }
    http__view_drop(c);
    jobs_view_get(c->srv->d.jobs, c->sim.job, &c->sim.view);
    c->sim.view_set = 1;
}

/* Why the store could not record a job (the detail of a 503 unavailable). */
static const char *http__unrecorded(const http_server *s)
{
    return s->d.cfg->redis[0] ? "the shared store and queue (HAMEL_REDIS) cannot be reached; try again"
           : store_full(s->d.st)
               ? "the disk is full: the store (HAMEL_DATA) cannot record the job; try again "
                 "once space is freed"
               : "the store (HAMEL_DATA) cannot write the job's record (see the server's log); "
                 "try again";
}

static enum MHD_Result http__resume_view(http_conn *c)
{
    if (c->work.rc == HAMEL_E_UNAVAILABLE)
        return http__problem_h(c, hamel_problem_new(HAMEL_E_UNAVAILABLE, http__unrecorded(c->srv)),
                               MHD_HTTP_HEADER_RETRY_AFTER, HTTP_RETRY_AFTER_FULL);
    return http__job_answer(c, c->sim.job, http__route_has(c, HTTP_ROUTE_SUBMITS));
}

/* http__job_answer for c->sim.job, once jobs_view_get has read it on the offload pool when
 * it asks the store (jobs_view_stale: a job of the shared queue run elsewhere). */
static enum MHD_Result http__job_reply(http_conn *c, int sync)
{
    if (jobs_view_stale(c->srv->d.jobs, c->sim.job) || jobs_record_pending(c->srv->d.jobs, c->sim.job))
        return http__offload_read(c, http__run_view, http__resume_view);
    return http__job_answer(c, c->sim.job, sync);
}

/* The answer to a POST /v1/simulations without ?wait: always 202 with Location, as the
 * contract says, even when a quick job has already finished by now (the body then shows
 * the state it was accepted in: queued, progress 0); the result is at Location. */
static enum MHD_Result http__job_accepted(http_conn *c, job *j)
{
    job_view v;
    http__view(c, j, &v);
    blob_release(v.body);
    v.body = NULL;
    if (v.state != JOB_QUEUED && v.state != JOB_RUNNING) {
        v.state = JOB_QUEUED;
        v.progress = 0;
    }
    char location[JOB_ID_LEN + 16];
    snprintf(location, sizeof location, "/v1/jobs/%s", v.id);
    return http__json_h(c, 202, http__pending_doc(&v), "application/json", MHD_HTTP_HEADER_LOCATION, location,
                        NULL, NULL);
}

/* Parks the connection on c->sim.job until it finishes or `wait` seconds pass. */
static enum MHD_Result http__park(http_conn *c, double wait)
{
    http__suspend_on(c, &c->sim.waiter, wait);
    if (jobs_wait(c->srv->d.jobs, c->sim.job, &c->sim.waiter) != 0)
        http__wake(c); /* already finished: resume at once */
    return MHD_YES;
}

/* The part of http__simulation_work after the result cache missed: the store's result,
 * else engine_simulation_check and jobs_submit. Fills c->sim.submit (hit, problem, rc)
 * or c->sim.job; borrows m and body. */
static void http__simulation_rest(http_conn *c, engine_model *m, json_t *body)
{
    http_server *s = c->srv;
    http_submit *sub = &c->sim.submit;
    sub->done = 1;
    if (s->d.st) {
        if (store_get_result(s->d.st, sub->key, &sub->hit) != 0)
            sub->hit = NULL;
        else
            cache_put(s->d.results, sub->key, sub->hit, sub->hit->len);
    }
    if (sub->hit)
        return;
    /* A cache hit was valid when it was computed; anything else is checked here, so a
     * bad initial state or an unusable formulation is a 4xx now, not a failed job. A new
     * model's request was checked with its compilation (HTTP_ROUTE_CHECKS_RUN). */
    isolate_check *pre = &c->resolve.pre.check;
    isolate_prerun *run = NULL;
    int rc;
    if (pre->ran && m == c->resolve.pre.model && body == c->work.body) {
        rc = pre->rc;
        sub->problem = pre->problem;
        *pre = (isolate_check){0, 0, NULL};
        run = c->resolve.pre.prerun; /* its run, in flight since the check passed */
        c->resolve.pre.prerun = NULL;
    } else {
        rc = isolate_simulation_check(m, body, s->d.limits, &sub->problem);
    }
    if (rc != 0) {
        isolate_prerun_drop(run);
        if (!sub->problem)
            sub->problem = hamel_problem_new(rc, NULL);
        return;
    }
    /* A request that waits is answered with the result, or else, when its wait ends first,
     * with the id once the record is committed (http__job_reply): the record need not
     * hold the submission up. */
    sub->rc =
        jobs_submit_prerun(s->d.jobs, m, body, sub->key, http__wait(c) > 0 ? JOBS_SUBMIT_LAZY_RECORD : 0,
                           run ? c->resolve.pre.prerun_id : NULL, run, &c->sim.job);
    if (sub->rc == 0 && http__wait(c) <= 0) { /* for the 202 (with HAMEL_REDIS, a store read) */
        jobs_view_get(s->d.jobs, c->sim.job, &c->sim.view);
        c->sim.view_set = 1;
    }
}

int http__simulation_work(http_conn *c, engine_model *m)
{
    if (http__wait(c) < 0)
        return 0; /* answered 400 on the resumed call, before anything is done */
    http_submit *sub = &c->sim.submit;
    sub->done = 1;
    int rc = engine_simulation_key(m, c->work.body, sub->key, &sub->problem);
    if (rc != 0) {
        if (!sub->problem)
            sub->problem = hamel_problem_new(rc, NULL);
        return 0;
    }
    http__memo_put(c, sub->key);
    sub->hit = cache_get(c->srv->d.results, sub->key);
    if (!sub->hit)
        http__simulation_rest(c, m, c->work.body);
    return c->sim.job != NULL;
}

/* The answer to a POST /v1/simulations from what its work found (http__simulation_work,
 * http__simulation_rest): the result, the problem, the refusal, or the new job. */
static enum MHD_Result http__simulation_answer(http_conn *c)
{
    http_server *s = c->srv;
    http_submit *sub = &c->sim.submit;
    sub->done = 0;
    if (sub->problem) {
        json_t *problem = sub->problem;
        sub->problem = NULL;
        return http__problem(c, problem);
    }
    if (sub->hit) {
        char etag[CACHE_MAX_KEY + 3];
        snprintf(etag, sizeof etag, "\"%s\"", sub->key);
        metrics_job(METRICS_JOB_CACHED);
        enum MHD_Result ret = http__result(c, sub->hit, 1, etag, sub->key);
        blob_release(sub->hit);
        sub->hit = NULL;
        return ret;
    }
    int rc = c->sim.job ? 0 : sub->rc ? sub->rc : HAMEL_E_INTERNAL;
    if (rc != 0) {
        if (rc == HAMEL_E_QUEUE_FULL)
            metrics_job(METRICS_JOB_REJECTED);
        /* Not shutting down: the store could not record the job (the shared queue of
         * HAMEL_REDIS out of reach, or SQLite's disk full or failing). */
        const char *lost =
            rc == HAMEL_E_UNAVAILABLE && jobs_accepting(s->d.jobs) ? http__unrecorded(s) : NULL;
        return http__problem_h(c, hamel_problem_new(rc, lost), MHD_HTTP_HEADER_RETRY_AFTER,
                               rc == HAMEL_E_QUEUE_FULL || lost ? HTTP_RETRY_AFTER_FULL
                                                                : HTTP_RETRY_AFTER_DOWN);
    }
    double wait = http__wait(c);
    if (wait > 0) {
        http__view_drop(c); /* the answer after the wait reads the job again */
        return http__park(c, wait);
    }
    return http__job_accepted(c, c->sim.job);
}

/* Offloaded: http__simulation_rest for c->work.model and c->work.body. */
static void http__run_simulation(void *arg)
{
    http_conn *c = arg;
    http__simulation_rest(c, c->work.model, c->work.body);
}

static enum MHD_Result http__resume_simulation(http_conn *c)
{
    engine_model_release(c->work.model);
    c->work.model = NULL;
    json_decref(c->work.body);
    c->work.body = NULL;
    return http__simulation_answer(c);
}

enum MHD_Result http__post_simulation(http_conn *c, json_t *body)
{
    http_server *s = c->srv;
    http_submit *sub = &c->sim.submit;
    double wait = http__wait(c);
    if (wait < 0)
        return http__bad_wait(c);
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = http__model_of(c, body, &m, &problem);
    if (rc != 0)
        return http__problem(c, problem);
    if (sub->done) { /* done with the model's compilation, on the offload pool */
        engine_model_release(m);
        return http__simulation_answer(c);
    }
    char *key = sub->key;
    rc = engine_simulation_key(m, body, key, &problem);
    if (rc != 0) {
        engine_model_release(m);
        return http__problem(c, problem);
    }
    http__memo_put(c, key);
    sub->hit = cache_get(s->d.results, key);
    if (sub->hit || !s->d.st) { /* memory only: answered here */
        sub->done = 1;
        if (!sub->hit)
            http__simulation_rest(c, m, body);
        engine_model_release(m);
        return http__simulation_answer(c);
    }
    /* Not in memory: the store, the check and the submission (a store commit, with
     * HAMEL_REDIS an XADD) are one task on the offload pool, not on this poll thread. */
    http__hold_work(c, m, body);
    return http__offload_read(c, http__run_simulation, http__resume_simulation);
}

/* What the store holds of a job that is not in memory, read on the offload pool. */
struct http_stored_job {
    int rc; /* store_get_job's: 0, 1 unknown, -1 out of reach */
    store_job sj;
    int crc;         /* DELETE: jobs_cancel_stored's (HAMEL_E_CONFLICT when not tried) */
    char *cancelled; /* ... and the cancelled job's document */
    int got;         /* GET of a done job: store_get_result's */
    blob *b;         /* ... its result, as this job's */
};

/* Frees what http__run_stored_job read. Accepts NULL. */
static void http__stored_job_free(http_stored_job *x)
{
    if (!x)
        return;
    store_job_clear(&x->sj);
    free(x->cancelled);
    blob_release(x->b);
    free(x);
}

/* Offloaded: the store's record of job c->id, its result or its cancellation. */
static void http__run_stored_job(void *arg)
{
    http_conn *c = arg;
    http_stored_job *x = c->sim.stored;
    store *st = c->srv->d.st;
    x->crc = HAMEL_E_CONFLICT;
    x->rc = store_get_job(st, c->id, &x->sj);
    if (x->rc != 0)
        return;
    if (c->method == HTTP_DELETE && strcmp(x->sj.status, "cancelled") != 0)
        x->crc = jobs_cancel_stored(c->srv->d.jobs, c->id, &x->sj, &x->cancelled);
    if (c->method == HTTP_DELETE || strcmp(x->sj.status, "done") != 0 || !x->sj.key)
        return;
    x->got = store_get_result(st, x->sj.key, &x->b);
    if (x->got != 0)
        return;
    json_t *doc = json_loadb(x->b->data, x->b->len, 0, NULL);
    json_t *jid = json_object_get(doc, "job_id");
    if (doc && (!json_is_string(jid) || strcmp(json_string_value(jid), c->id) != 0)) {
        /* the result row was written by an identical job: answer as this one */
        json_object_set_new(doc, "job_id", json_string(c->id));
        blob_release(x->b);
        x->b = blob_take(jsonout_dumps(doc, NULL));
    }
    json_decref(doc);
}

/* The answer about a job that is only in the store (evicted from memory, or from before
 * a restart), once http__run_stored_job has read it. */
static enum MHD_Result http__resume_stored_job(http_conn *c)
{
    http_stored_job *x = c->sim.stored;
    if (x->rc < 0) /* the shared store (HAMEL_REDIS) is out of reach */
        return http__problem_h(
            c, hamel_problem_new(HAMEL_E_UNAVAILABLE, "the store cannot be reached; try again"),
            MHD_HTTP_HEADER_RETRY_AFTER, HTTP_RETRY_AFTER_FULL);
    if (x->rc != 0)
        return http__error(c, HAMEL_E_NOT_FOUND, "no job has this id");
    store_job *sj = &x->sj;
    enum MHD_Result ret;
    if (c->method == HTTP_DELETE && x->crc == 0) { /* queued or running on another instance */
        ret = http__json(c, 200, json_loads(x->cancelled, 0, NULL));
    } else if (c->method == HTTP_DELETE && x->crc == HAMEL_E_UNAVAILABLE) {
        ret = http__error(c, x->crc, "the store cannot be reached; try again");
    } else if (c->method == HTTP_DELETE) {
        ret = !strcmp(sj->status, "cancelled")
                  ? http__json(c, 200, sj->doc ? json_loads(sj->doc, 0, NULL) : NULL)
                  : http__error(c, HAMEL_E_CONFLICT, "the job has already finished");
    } else if (!strcmp(sj->status, "done") && sj->key) {
        if (x->got == 1) {
            ret = http__error(c, HAMEL_E_GONE,
                              "the job finished, but its result was dropped to keep the store within "
                              "HAMEL_STORE_BYTES; POST the same request again to compute it");
        } else if (x->got != 0) {
            ret = http__error(c, HAMEL_E_INTERNAL, "the job's result could not be read from the store");
        } else {
            char etag[HTTP_ID_MAX + 3];
            snprintf(etag, sizeof etag, "\"%s\"", c->id);
            ret = x->b ? http__result(c, x->b, 0, etag, NULL) : http__error(c, HAMEL_E_INTERNAL, NULL);
        }
    } else if (sj->doc) {
        ret = http__json(c, 200, json_loads(sj->doc, 0, NULL));
    } else {
        ret = http__json(
            c, 200,
            json_pack("{s:s, s:s, s:s?}", "job_id", c->id, "status", sj->status, "model_id", sj->model_id));
    }
    return ret;
}

/* A job that is not in memory: asked of the store on the offload pool. */
static enum MHD_Result http__stored_job(http_conn *c)
{
    if (!c->srv->d.st)
        return http__error(c, HAMEL_E_NOT_FOUND, "no job has this id");
    c->sim.stored = calloc(1, sizeof *c->sim.stored);
    if (!c->sim.stored)
        return http__error(c, HAMEL_E_INTERNAL, "out of memory");
    return http__offload_read(c, http__run_stored_job, http__resume_stored_job);
}

/* Offloaded: cancels c->sim.job (the store records it; with HAMEL_REDIS every instance is
 * told; a batch's run that ends so may submit the batch's next run). */
static void http__run_cancel(void *arg)
{
    http_conn *c = arg;
    c->work.rc = jobs_cancel(c->srv->d.jobs, c->sim.job);
}

static enum MHD_Result http__cancel_answer(http_conn *c)
{
    return c->work.rc == 0 ? http__job_answer(c, c->sim.job, 0)
                           : http__error(c, c->work.rc, "the job has already finished");
}

enum MHD_Result http__job(http_conn *c)
{
    if (c->method != HTTP_DELETE && http__wait(c) < 0) /* a stored job's answer too */
        return http__bad_wait(c);
    jobs *p = c->srv->d.jobs;
    job *j = jobs_find(p, c->id);
    if (!j)
        return http__stored_job(c);
    if (c->method == HTTP_DELETE) {
        c->sim.job = j;
        if (c->srv->d.st) /* a store write: on the offload pool (past its queue: here) */
            return http__offload_read(c, http__run_cancel, http__cancel_answer);
        http__run_cancel(c);
        return http__cancel_answer(c);
    }
    double wait = http__wait(c);
    if (wait < 0) {
        job_release(p, j);
        return http__bad_wait(c);
    }
    c->sim.job = j;
    if (wait > 0)
        return http__park(c, wait);
    return http__job_reply(c, 0);
}

enum MHD_Result http__job_wake(http_conn *c)
{
    return http__job_reply(c, http__route_has(c, HTTP_ROUTE_SUBMITS));
}

void http__sim_release(http_conn *c)
{
    http_sim_state *x = &c->sim;
    if (x->job)
        job_release(c->srv->d.jobs, x->job);
    if (x->view_set)
        blob_release(x->view.body);
    http__stored_job_free(x->stored);
    blob_release(x->submit.hit);
    json_decref(x->submit.problem);
}
