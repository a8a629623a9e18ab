/* batch.c — batch records and their lifecycle: creation (every run merged and checked),
 * the completion of runs, eviction under the byte budget, queries, cancellation, long-poll
 * and stream waiters, and the module's timer thread. Feeding the pool is batch_feed.c, a
 * run's line batch_line.c; what they share, and the lock order, is batch_internal.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch_internal.h"
#include "ids.h"
#include "isolate.h"
#include "jsonout.h"
#include "merge.h"
#include "metrics.h"

#define BATCH_MAX_REPORTED 20 /* invalid runs described in one 422 */
#define BATCH_PATH_MAX 256    /* a problem path with its runs[i] prefix */
#define BATCH_TIMER_IDLE_SECONDS 3600.0
#define BATCH_CANCEL_WAIT 15.0 /* DELETE waits for running blocks to stop at most this */

static const char *const batch__field_names[] = {"run",        "final", "checks", "stats",
                                                 "trajectory", "hamel", "events"};
#define BATCH_NFIELDS (sizeof batch__field_names / sizeof batch__field_names[0])

/* ---- records ------------------------------------------------------------------------ */

/* Frees what a finished batch no longer needs (outside the lock: a model can be heavy). */
static void batch__drop_inputs(engine_model *m, json_t *base, json_t *partials)
{
    engine_model_release(m);
    json_decref(base);
    json_decref(partials);
}

static void batch__destroy(batch *b)
{
    for (size_t i = 0; i < b->count && b->runs; i++)
        blob_release(b->runs[i].line);
    free(b->runs);
    free(b->order);
    batch__drop_inputs(b->model, b->base, b->partials);
    free(b);
}

/* Drops a reference under bs->lock; returns b if it must be destroyed after unlocking. */
static batch *batch__unref_locked(batch *b) { return --b->refs == 0 ? b : NULL; }

void batch_release(batches *bs, batch *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&bs->lock);
    batch *dead = batch__unref_locked(b);
    pthread_mutex_unlock(&bs->lock);
    if (dead)
        batch__destroy(dead);
}

/* Removes b from the kept list. Caller holds bs->lock. */
static void batch__unlink_locked(batches *bs, batch *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        bs->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        bs->tail = b->prev;
    b->prev = b->next = NULL;
    b->kept = 0;
    bs->kept--;
    bs->bytes -= b->bytes;
}

/* Evicts the oldest finished batches (but `keep`) while the records or their lines are
 * over budget. Caller holds bs->lock; batches whose last reference went are chained on
 * *dead through next. */
static void batch__evict_locked(batches *bs, batch *keep, batch **dead)
{
    batch *b = bs->tail;
    while (b && (bs->kept > bs->cfg.max_kept || bs->bytes > bs->cfg.max_bytes)) {
        batch *prev = b->prev;
        if (b->done && b != keep) {
            batch__unlink_locked(bs, b);
            if (batch__unref_locked(b)) {
                b->next = *dead;
                *dead = b;
            }
        }
        b = prev;
    }
}

static void batch__destroy_chain(batch *dead)
{
    while (dead) {
        batch *n = dead->next;
        batch__destroy(dead);
        dead = n;
    }
}

/* ---- waiters ------------------------------------------------------------------------ */

/* The list w is on: its batch's stream readers, or the module's long-polls. */
static batch_waiter **batch__list(batches *bs, batch_waiter *w)
{
    return w->stream ? &((batch *)w->on)->streams : &bs->waiters;
}

/* ---- completion --------------------------------------------------------------------- */

/* Marks b finished. Caller holds bs->lock; long-poll waiters go on *fired. */
static void batch__complete_locked(batches *bs, batch *b, batch_waiter **fired)
{
    b->done = 1;
    b->t1 = jobs_now();
    bs->active--;
    waiters_detach_on(&bs->waiters, b, fired);
    metrics_batch(b->cancel ? METRICS_BATCH_CANCELLED : METRICS_BATCH_DONE);
}

/* Records the end of runs rs[0..n) with their lines (taken; NULL when out of memory),
 * under one lock and with one wake of the batch's readers. `claimed` says whether the
 * runs counted as in flight. */
void batch__finish_runs(batches *bs, batch *b, batch_run *const *rs, blob **lines, const int *status,
                        int cached, int claimed, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!lines[i])
            lines[i] = batch__line_problem(b, rs[i], RUN_FAILED,
                                           hamel_problem_new(HAMEL_E_INTERNAL, "out of memory"));
    batch_waiter *fired = NULL;
    batch *dead = NULL;
    engine_model *m = NULL;
    json_t *base = NULL, *partials = NULL;
    pthread_mutex_lock(&bs->lock);
    for (size_t i = 0; i < n; i++) {
        batch_run *r = rs[i];
        blob *line = lines[i];
        r->state = RUN_FINISHED;
        r->status = (unsigned char)status[i];
        r->cached = (unsigned char)cached;
        if (claimed)
            b->inflight--;
        b->order[b->finished++] = r->index;
        if (status[i] == RUN_DONE)
            b->succeeded++;
        else if (status[i] == RUN_FAILED)
            b->failed++;
        else
            b->cancelled++;
        if (cached)
            b->cached++;
        if (line && b->kept && bs->bytes + line->len > bs->cfg.max_bytes)
            batch__evict_locked(bs, b, &dead);
        if (line && status[i] == RUN_DONE && bs->bytes + line->len > bs->cfg.max_bytes) {
            blob *stub = batch__line_stub(r);
            if (stub) {
                blob_release(line);
                line = stub;
            }
        }
        r->line = line;
        if (line) {
            b->bytes += line->len;
            if (b->kept)
                bs->bytes += line->len;
        }
    }
    waiters_detach_all(&b->streams, &fired);
    if (b->finished == b->count && !b->done) {
        batch__complete_locked(bs, b, &fired);
        m = b->model;
        base = b->base;
        partials = b->partials;
        b->model = NULL;
        b->base = b->partials = NULL;
    }
    pthread_mutex_unlock(&bs->lock);
    for (size_t i = 0; i < n; i++)
        metrics_batch_run(cached                    ? METRICS_RUN_CACHED
                          : status[i] == RUN_DONE   ? METRICS_RUN_DONE
                          : status[i] == RUN_FAILED ? METRICS_RUN_FAILED
                                                    : METRICS_RUN_CANCELLED);
    waiters_fire(fired);
    batch__drop_inputs(m, base, partials);
    batch__destroy_chain(dead);
}

/* batch__finish_runs of one run. */
void batch__finish_run(batches *bs, batch *b, batch_run *r, blob *line, int status, int cached, int claimed)
{
    batch__finish_runs(bs, b, &r, &line, &status, cached, claimed, 1);
}

/* ---- creation ----------------------------------------------------------------------- */

/* The path of an engine error inside the batch body: runs[i].<path> when the run gives
 * the member the path starts with, else base.<path> (the value came from the base). */
static void batch__problem_path(const json_t *run, size_t i, const char *path, char out[BATCH_PATH_MAX])
{
    size_t head = strcspn(path, ".[");
    char member[BATCH_PATH_MAX];
    snprintf(member, sizeof member, "%.*s", (int)(head < sizeof member ? head : sizeof member - 1), path);
    if (!path[0])
        snprintf(out, BATCH_PATH_MAX, "runs[%zu]", i);
    else if (json_object_get(run, member))
        snprintf(out, BATCH_PATH_MAX, "runs[%zu].%s", i, path);
    else
        snprintf(out, BATCH_PATH_MAX, "base.%s", path);
}

/* Appends {path, column?, reason} unless the same path and reason are there already (an
 * invalid base makes every run fail alike). */
static void batch__add_error(json_t *into, const char *path, int column, const char *reason)
{
    size_t k;
    json_t *e;
    json_array_foreach(json_object_get(into, "errors"), k, e)
    {
        if (!strcmp(json_string_value(json_object_get(e, "path")), path) &&
            !strcmp(json_string_value(json_object_get(e, "reason")), reason))
            return;
    }
    hamel_problem_add(into, path, column, reason);
}

/* Adds the errors of run i's problem (borrowed) to the batch's problem. */
static void batch__add_errors(json_t *into, const json_t *run, size_t i, const json_t *problem)
{
    const json_t *errs = json_object_get(problem, "errors");
    size_t k;
    json_t *e;
    char path[BATCH_PATH_MAX];
    if (json_array_size(errs) == 0) {
        const char *detail = json_string_value(json_object_get(problem, "detail"));
        batch__problem_path(run, i, "", path);
        batch__add_error(into, path, -1, detail ? detail : "invalid");
        return;
    }
    json_array_foreach(errs, k, e)
    {
        const char *p = json_string_value(json_object_get(e, "path"));
        const char *reason = json_string_value(json_object_get(e, "reason"));
        json_t *col = json_object_get(e, "column");
        batch__problem_path(run, i, p ? p : "", path);
        batch__add_error(into, path, json_is_integer(col) ? (int)json_integer_value(col) : -1,
                         reason ? reason : "invalid");
    }
}

static int batch__bad(json_t **problem, const char *path, const char *reason)
{
    *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
    hamel_problem_add(*problem, path, -1, reason);
    return HAMEL_E_BAD_REQUEST;
}

/* The top-level members, base, runs and fields of a batch body. */
static int batch__check_shape(const batches *bs, const json_t *body, unsigned *fields, json_t **problem)
{
    static const char *const members[] = {"model", "model_id", "base", "runs", "fields"};
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        int known = 0;
        for (size_t i = 0; i < sizeof members / sizeof members[0]; i++)
            known |= !strcmp(k, members[i]);
        if (!known)
            return batch__bad(problem, k,
                              "unknown field (expected one of model, model_id, base, runs, fields)");
    }
    const json_t *base = json_object_get(body, "base");
    if (base && !json_is_object(base))
        return batch__bad(problem, "base", "must be an object (a simulation request without the model)");
    if (json_object_get(base, "model") || json_object_get(base, "model_id"))
        return batch__bad(problem, json_object_get(base, "model") ? "base.model" : "base.model_id",
                          "give the model once, at the top level");
    const json_t *runs = json_object_get(body, "runs");
    if (!json_is_array(runs) || json_array_size(runs) == 0)
        return batch__bad(problem, "runs", "must be a non-empty array of objects");
    if (json_array_size(runs) > bs->cfg.max_runs) {
        char reason[96];
        snprintf(reason, sizeof reason, "%zu runs; at most %zu per batch", json_array_size(runs),
                 bs->cfg.max_runs);
        *problem = hamel_problem_new(HAMEL_E_LIMIT, reason);
        hamel_problem_add(*problem, "runs", -1, reason);
        return HAMEL_E_LIMIT;
    }
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        char path[BATCH_PATH_MAX];
        if (!json_is_object(run)) {
            snprintf(path, sizeof path, "runs[%zu]", i);
            return batch__bad(problem, path, "must be an object (a partial simulation request)");
        }
        if (json_object_get(run, "model") || json_object_get(run, "model_id")) {
            snprintf(path, sizeof path, "runs[%zu].%s", i,
                     json_object_get(run, "model") ? "model" : "model_id");
            return batch__bad(problem, path, "give the model once, at the top level");
        }
    }
    *fields = FIELD_DEFAULT;
    const json_t *f = json_object_get(body, "fields");
    if (f) {
        if (!json_is_array(f))
            return batch__bad(problem, "fields", "must be an array of field names");
        *fields = 0;
        json_array_foreach(f, i, v)
        {
            size_t j = 0;
            const char *name = json_string_value(v);
            while (name && j < BATCH_NFIELDS && strcmp(name, batch__field_names[j]) != 0)
                j++;
            if (!name || j == BATCH_NFIELDS) {
                char path[64];
                snprintf(path, sizeof path, "fields[%zu]", i);
                return batch__bad(problem, path,
                                  "unknown field (expected run, final, checks, stats, trajectory, hamel or "
                                  "events)");
            }
            *fields |= 1u << j;
        }
    }
    return 0;
}

int batch_create(batches *bs, engine_model *m, const json_t *body, batch **out, json_t **problem)
{
    *out = NULL;
    *problem = NULL;
    unsigned fields = 0;
    int rc = batch__check_shape(bs, body, &fields, problem);
    if (rc != 0) {
        metrics_batch(METRICS_BATCH_INVALID);
        return rc;
    }
    const json_t *runs = json_object_get(body, "runs");
    size_t count = json_array_size(runs);
    batch *b = calloc(1, sizeof *b);
    if (b) {
        b->runs = calloc(count, sizeof *b->runs);
        b->order = calloc(count, sizeof *b->order);
        b->base =
            json_object_get(body, "base") ? json_deep_copy(json_object_get(body, "base")) : json_object();
        b->partials = json_deep_copy(runs);
    }
    if (!b || !b->runs || !b->order || !b->base || !b->partials) {
        if (b)
            batch__destroy(b);
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
        return HAMEL_E_INTERNAL;
    }
    b->bs = bs;
    b->count = count;
    b->fields = fields;
    b->blocks_on = jobs_takes_tasks(bs->pool);

    /* Every run is checked before anything is queued (in one call to the engine's worker,
     * which merges each over the base), then merged here for its key. */
    json_t *bad = NULL;
    size_t nbad = 0;
    json_t **checks = calloc(count ? count : 1, sizeof *checks);
    const json_t **parts = calloc(count ? count : 1, sizeof *parts);
    int all = checks && parts ? 0 : HAMEL_E_INTERNAL;
    for (size_t i = 0; all == 0 && i < count; i++)
        parts[i] = json_array_get(b->partials, i);
    json_t *all_problem = NULL;
    if (all == 0)
        all = isolate_simulation_check_all(m, b->base, parts, count, &bs->cfg.limits, checks, &all_problem);
    free(parts);
    if (all != 0) {
        free(checks);
        batch__destroy(b);
        *problem = all_problem ? all_problem : hamel_problem_new(all, "out of memory");
        return all;
    }
    for (size_t i = 0; i < count; i++) {
        batch_run *r = &b->runs[i];
        r->b = b;
        r->index = i;
        const json_t *run = json_array_get(b->partials, i);
        json_t *p = checks[i];
        int c = p ? hamel_problem_code(p) : 0;
        if (c == 0) {
            json_t *req = merge_run(b->base, run);
            c = req ? engine_simulation_key(m, req, r->key, &p) : HAMEL_E_INTERNAL;
            json_decref(req);
        }
        if (c != 0) {
            if (!bad) {
                bad = hamel_problem_new(c, NULL);
                json_object_set_new(bad, "run_index", json_integer((json_int_t)i));
            }
            if (nbad < BATCH_MAX_REPORTED)
                batch__add_errors(bad, run, i, p);
            nbad++;
        }
        json_decref(p);
    }
    free(checks);
    if (bad) {
        char detail[160];
        snprintf(detail, sizeof detail,
                 "%zu of %zu runs are invalid (the first at index %lld); nothing was run", nbad, count,
                 (long long)json_integer_value(json_object_get(bad, "run_index")));
        json_object_set_new(bad, "detail", json_string(detail));
        json_object_set_new(bad, "invalid_runs", json_integer((json_int_t)nbad));
        batch__destroy(b);
        metrics_batch(METRICS_BATCH_INVALID);
        *problem = bad;
        return HAMEL_E_BAD_REQUEST;
    }

    ids_random(b->id, BATCH_ID_LEN);
    snprintf(b->model_id, sizeof b->model_id, "%s", engine_model_id(m));
    b->model = engine_model_retain(m);
    b->t0 = jobs_now();
    batch *dead = NULL;
    pthread_mutex_lock(&bs->lock);
    if (bs->exiting) {
        pthread_mutex_unlock(&bs->lock);
        batch__destroy(b);
        *problem = hamel_problem_new(HAMEL_E_UNAVAILABLE, NULL);
        return HAMEL_E_UNAVAILABLE;
    }
    b->refs = 2; /* the kept list's and the caller's */
    b->kept = 1;
    b->next = bs->head;
    if (bs->head)
        bs->head->prev = b;
    else
        bs->tail = b;
    bs->head = b;
    bs->kept++;
    bs->active++;
    batch__evict_locked(bs, b, &dead);
    pthread_mutex_unlock(&bs->lock);
    batch__destroy_chain(dead);
    metrics_batch(METRICS_BATCH_CREATED);
    batch__feed(bs, b);
    *out = b;
    return 0;
}

/* ---- queries ------------------------------------------------------------------------ */

batch *batches_find(batches *bs, const char *id)
{
    pthread_mutex_lock(&bs->lock);
    batch *b = bs->head;
    while (b && strcmp(b->id, id) != 0)
        b = b->next;
    if (b)
        b->refs++;
    pthread_mutex_unlock(&bs->lock);
    return b;
}

const char *batch_id(const batch *b) { return b->id; }

int batch_finished(batches *bs, batch *b)
{
    pthread_mutex_lock(&bs->lock);
    int done = b->done;
    pthread_mutex_unlock(&bs->lock);
    return done;
}

char *batch_render(batches *bs, batch *b, int results, size_t *len)
{
    pthread_mutex_lock(&bs->lock);
    int done = b->done;
    const char *status = !done ? "running" : b->cancel ? "cancelled" : "done";
    json_t *fields = json_array();
    for (size_t i = 0; i < BATCH_NFIELDS; i++)
        if (b->fields & (1u << i))
            json_array_append_new(fields, json_string(batch__field_names[i]));
    json_t *doc = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o, s:f}", "batch_id",
                            b->id, "status", status, "model_id", b->model_id, "count", (json_int_t)b->count,
                            "finished", (json_int_t)b->finished, "succeeded", (json_int_t)b->succeeded,
                            "failed", (json_int_t)b->failed, "cancelled", (json_int_t)b->cancelled, "cached",
                            (json_int_t)b->cached, "queued_or_running", (json_int_t)b->inflight, "progress",
                            b->count ? (double)b->finished / (double)b->count : 1.0, "fields", fields,
                            "elapsed_ms", ((done ? b->t1 : jobs_now()) - b->t0) * 1e3);
    pthread_mutex_unlock(&bs->lock);
    size_t hlen = 0;
    char *head = doc ? jsonout_dumps(doc, &hlen) : NULL;
    json_decref(doc);
    if (!head)
        return NULL;
    if (!results || !done) {
        *len = hlen;
        return head;
    }
    /* Done: the lines no longer change, and the caller's reference keeps them. */
    size_t total = hlen + sizeof ",\"results\":[]}";
    for (size_t i = 0; i < b->count; i++)
        total += b->runs[i].line ? b->runs[i].line->len : 2;
    char *text = malloc(total);
    if (!text) {
        free(head);
        return NULL;
    }
    size_t n = hlen - 1; /* without the closing brace */
    memcpy(text, head, n);
    free(head);
    memcpy(text + n, ",\"results\":[", 12);
    n += 12;
    for (size_t i = 0; i < b->count; i++) {
        const blob *l = b->runs[i].line;
        if (i)
            text[n++] = ',';
        if (l) {
            memcpy(text + n, l->data, l->len - 1); /* without the newline */
            n += l->len - 1;
        } else {
            memcpy(text + n, "{}", 2);
            n += 2;
        }
    }
    memcpy(text + n, "]}", 3);
    *len = n + 2;
    return text;
}

void batches_counts(batches *bs, size_t *active, size_t *kept, size_t *bytes)
{
    pthread_mutex_lock(&bs->lock);
    *active = bs->active;
    *kept = bs->kept;
    *bytes = bs->bytes;
    pthread_mutex_unlock(&bs->lock);
}

/* ---- cancellation ------------------------------------------------------------------- */

/* Cancels b's runs; `why` goes into the lines of runs that never started. */
static int batch__cancel(batches *bs, batch *b, const char *why)
{
    pthread_mutex_lock(&bs->lock);
    if (b->done) {
        int rc = b->cancel ? 0 : HAMEL_E_CONFLICT;
        pthread_mutex_unlock(&bs->lock);
        return rc;
    }
    b->cancel = 1;
    size_t npending = 0, ninflight = 0;
    for (size_t i = 0; i < b->count; i++) {
        npending += b->runs[i].state == RUN_PENDING;
        ninflight += b->runs[i].state == RUN_INFLIGHT;
    }
    size_t *pending = malloc((npending + 1) * sizeof *pending);
    char(*ids)[JOB_ID_LEN + 1] = malloc((ninflight + 1) * sizeof *ids);
    size_t np = 0, ni = 0;
    for (size_t i = 0; i < b->count && pending && ids; i++) {
        batch_run *r = &b->runs[i];
        if (r->state == RUN_PENDING) {
            r->state = RUN_CLAIMED; /* the feeder will not take it */
            pending[np++] = i;
        } else if (r->state == RUN_INFLIGHT) {
            memcpy(ids[ni++], r->job_id, sizeof ids[0]);
        }
    }
    /* blocks: the queued ones are dropped (their runs end here), the running ones told */
    size_t ndropped = 0;
    for (batch_block *k = b->blocks; k; k = k->next) {
        if (k->started)
            atomic_store(&k->ctl.cancel, 1);
        else if (!k->dropped)
            ndropped += k->n;
    }
    batch_run **dropped = malloc((ndropped + 1) * sizeof *dropped);
    size_t nd = 0;
    for (batch_block *k = b->blocks; k && dropped; k = k->next)
        if (!k->started && !k->dropped) {
            k->dropped = 1;
            for (size_t i = 0; i < k->n; i++)
                dropped[nd++] = k->runs[i];
        }
    b->refs++; /* held across the unlocked part */
    pthread_mutex_unlock(&bs->lock);
    for (size_t k = 0; k < nd; k++) {
        batch_run *r = dropped[k];
        blob *line = batch__line_problem(b, r, RUN_CANCELLED, hamel_problem_new(HAMEL_E_CANCELLED, why));
        batch__finish_run(bs, b, r, line, RUN_CANCELLED, 0, 1);
    }
    free(dropped);
    /* Running blocks stop at their runs' next step: the answer waits for them, so that it
     * counts every run cancelled (as a job's cancellation does at once). */
    pthread_mutex_lock(&bs->lock);
    double until = jobs_now() + BATCH_CANCEL_WAIT;
    for (;;) {
        int running = 0;
        for (batch_block *k = b->blocks; k; k = k->next)
            running |= k->started;
        if (!running || jobs_now() >= until)
            break;
        struct timespec ts;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&bs->ended, &bs->lock, &ts);
    }
    pthread_mutex_unlock(&bs->lock);
    for (size_t k = 0; k < ni; k++) {
        job *j = jobs_find(bs->pool, ids[k]);
        if (j) /* its completion (the pool's wake) records the run as cancelled */
            jobs_cancel(bs->pool, j);
        job_release(bs->pool, j);
    }
    for (size_t k = 0; k < np; k++) {
        batch_run *r = &b->runs[pending[k]];
        blob *line = batch__line_problem(b, r, RUN_CANCELLED, hamel_problem_new(HAMEL_E_CANCELLED, why));
        batch__finish_run(bs, b, r, line, RUN_CANCELLED, 0, 0);
    }
    free(pending);
    free(ids);
    batch_release(bs, b);
    return 0;
}

int batch_cancel(batches *bs, batch *b) { return batch__cancel(bs, b, "the batch was cancelled"); }

/* ---- waiting and reading ------------------------------------------------------------ */

int batch_wait(batches *bs, batch *b, batch_waiter *w)
{
    pthread_mutex_lock(&bs->lock);
    if (b->done || bs->exiting) {
        pthread_mutex_unlock(&bs->lock);
        return 1;
    }
    w->on = b;
    w->stream = 0;
    waiters_add(&bs->waiters, w);
    pthread_cond_signal(&bs->timer);
    pthread_mutex_unlock(&bs->lock);
    return 0;
}

/* The number of lines a reader at cur will get in all. Caller holds bs->lock. */
static size_t batch__lines_total(const batch *b, const batch_cursor *cur)
{
    return b->count + (cur->summary ? 1 : 0);
}

ssize_t batch_read(batches *bs, batch *b, batch_cursor *cur, char *buf, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&bs->lock);
    while (n < max) {
        const char *src;
        size_t len;
        if (cur->line < b->finished) {
            const blob *l = b->runs[b->order[cur->line]].line;
            src = l ? l->data : "{}\n";
            len = l ? l->len : 3;
        } else if (b->done && cur->summary && cur->line == b->count) {
            if (!cur->summary_sent) {
                snprintf(cur->tail, sizeof cur->tail,
                         "{\"done\":true,\"batch_id\":\"%s\",\"status\":\"%s\",\"count\":%zu,"
                         "\"succeeded\":%zu,\"failed\":%zu,\"cancelled\":%zu,\"cached\":%zu}\n",
                         b->id, b->cancel ? "cancelled" : "done", b->count, b->succeeded, b->failed,
                         b->cancelled, b->cached);
                cur->summary_sent = 1;
            }
            src = cur->tail;
            len = strlen(cur->tail);
        } else {
            break;
        }
        size_t k = len - cur->offset;
        if (k > max - n)
            k = max - n;
        memcpy(buf + n, src + cur->offset, k);
        n += k;
        cur->offset += k;
        if (cur->offset == len) {
            cur->line++;
            cur->offset = 0;
        }
    }
    int end = b->done && cur->line >= batch__lines_total(b, cur);
    pthread_mutex_unlock(&bs->lock);
    if (n == 0 && end)
        return -1;
    return (ssize_t)n;
}

int batch_stream_park(batches *bs, batch *b, const batch_cursor *cur, batch_waiter *w)
{
    pthread_mutex_lock(&bs->lock);
    if (cur->line < b->finished || b->done || bs->exiting) {
        pthread_mutex_unlock(&bs->lock);
        return 1;
    }
    w->on = b;
    w->stream = 1;
    waiters_add(&b->streams, w);
    pthread_mutex_unlock(&bs->lock);
    return 0;
}

void batch_unpark(batches *bs, batch_waiter *w)
{
    pthread_mutex_lock(&bs->lock);
    if (w->armed)
        waiters_remove(batch__list(bs, w), w);
    pthread_mutex_unlock(&bs->lock);
}

/* ---- the timer and the module ------------------------------------------------------- */

/* Wakes long-polls past their deadline and feeds batches whose queue-full retry is due. */
static void *batch__timer(void *arg)
{
    batches *bs = arg;
    pthread_mutex_lock(&bs->lock);
    while (!bs->exiting) {
        double now = jobs_now(), next = now + BATCH_TIMER_IDLE_SECONDS;
        batch_waiter *fired = NULL;
        double due = waiters_expire(&bs->waiters, now, &fired);
        if (due > 0 && due < next)
            next = due;
        batch *retry = NULL;
        for (batch *b = bs->head; b && !retry; b = b->next) {
            if (b->done || b->retry_at <= 0)
                continue;
            if (b->retry_at <= now) {
                b->retry_at = 0;
                b->refs++;
                retry = b;
            } else if (b->retry_at < next) {
                next = b->retry_at;
            }
        }
        if (fired || retry) {
            pthread_mutex_unlock(&bs->lock);
            waiters_fire(fired);
            if (retry) {
                batch__feed(bs, retry);
                batch_release(bs, retry);
            }
            pthread_mutex_lock(&bs->lock);
            continue;
        }
        struct timespec ts;
        ts.tv_sec = (time_t)next;
        ts.tv_nsec = (long)((next - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&bs->timer, &bs->lock, &ts);
    }
    pthread_mutex_unlock(&bs->lock);
    return NULL;
}

batches *batches_new(const batches_config *cfg, jobs *pool, cache *results, store *st)
{
    batches *bs = calloc(1, sizeof *bs);
    if (!bs)
        return NULL;
    bs->cfg = *cfg;
    if (bs->cfg.max_inflight < 1)
        bs->cfg.max_inflight = 1;
    bs->pool = pool;
    bs->results = results;
    bs->st = st;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&bs->lock, NULL);
    pthread_cond_init(&bs->timer, &ca);
    pthread_cond_init(&bs->ended, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&bs->timer_thread, NULL, batch__timer, bs) != 0) {
        batches_free(bs);
        return NULL;
    }
    bs->timer_started = 1;
    return bs;
}

void batches_shutdown(batches *bs)
{
    pthread_mutex_lock(&bs->lock);
    int again = bs->exiting;
    pthread_mutex_unlock(&bs->lock);
    if (again)
        return;
    /* The pool no longer takes jobs: whatever is unfinished is cancelled. One batch at a
     * time, each held by a reference while the lock is dropped. */
    for (;;) {
        pthread_mutex_lock(&bs->lock);
        batch *b = bs->head;
        while (b && (b->done || b->cancel))
            b = b->next;
        if (b)
            b->refs++;
        pthread_mutex_unlock(&bs->lock);
        if (!b)
            break;
        batch__cancel(bs, b, "the server shut down before the run started");
        batch_release(bs, b);
    }
    batch_waiter *fired = NULL;
    pthread_mutex_lock(&bs->lock);
    bs->exiting = 1;
    waiters_detach_all(&bs->waiters, &fired);
    for (batch *b = bs->head; b; b = b->next)
        waiters_detach_all(&b->streams, &fired);
    pthread_cond_broadcast(&bs->timer);
    pthread_mutex_unlock(&bs->lock);
    waiters_fire(fired);
    if (bs->timer_started) {
        pthread_join(bs->timer_thread, NULL);
        bs->timer_started = 0;
    }
}

void batches_free(batches *bs)
{
    if (!bs)
        return;
    batches_shutdown(bs);
    batch *b = bs->head;
    while (b) {
        batch *n = b->next;
        if (--b->refs == 0)
            batch__destroy(b);
        b = n;
    }
    pthread_cond_destroy(&bs->timer);
    pthread_cond_destroy(&bs->ended);
    pthread_mutex_destroy(&bs->lock);
    free(bs);
}
