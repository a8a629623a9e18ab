/* resolve.c — the model a request names, and its compilation off the poll threads.
 *
 * Owns model resolution: an inline "model" (looked up by the SHA-256 of its canonical
 * text, "b:<hash>" in the memo, then by id "m:<id>" in the model cache) or a "model_id"
 * (the cache, else the store's JSON compiled again); a new model is remembered in the
 * store. The store is asked on the offload pool, with the compilation. A model that is not cached is compiled
 * on the offload pool while the connection is suspended (http__compile_first), one compilation per spec in
 * flight: requests for the same spec wait for it (http_flight) instead of compiling again; a client that
 * hangs up cancels its compilation (hangup.h). The compiling task of a POST /v1/simulations goes on with
 * the simulation (http__simulation_work), so a cold request is one offload round trip.
 */
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_conn.h"
#include "ids.h"
#include "quarantine.h"

/* Caches m under "m:<id>" and, given the key of the spec text it came from, points that
 * key at the id in the memo (the model's bytes are charged to the model cache once). */
static void http__model_remember(http_server *s, engine_model *m, const char *bkey)
{
    char key[CACHE_MAX_KEY + 1];
    snprintf(key, sizeof key, "m:%s", engine_model_id(m));
    cache_put(s->d.models, key, m, engine_model_bytes(m));
    blob *id = bkey ? blob_new(engine_model_id(m), strlen(engine_model_id(m))) : NULL;
    if (id)
        cache_put(s->memo, bkey, id, sizeof *id + id->len + 1 + strlen(bkey));
    blob_release(id);
}

/* The cached model of a spec text key ("b:<sha256>"), a new reference, or NULL. A miss
 * is counted in the model cache's metrics only when `count` is set. */
static engine_model *http__model_by_text(http_server *s, const char *bkey, int count)
{
    blob *id = cache_peek(s->memo, bkey);
    char key[CACHE_MAX_KEY + 1];
    if (id)
        snprintf(key, sizeof key, "m:%s", id->data);
    blob_release(id);
    engine_model *m = NULL;
    if (id)
        m = count ? cache_get(s->d.models, key) : cache_peek(s->d.models, key);
    else if (count)
        cache_get(s->d.models, bkey); /* counts the miss */
    return m;
}

/* Compiles spec (borrowed); on success *out is a new model reference. */
static int http__compile(http_server *s, const json_t *spec, engine_model **out, json_t **problem)
{
    double t0 = jobs_now();
    int rc = isolate_model_compile_ctl(spec, s->d.limits, NULL, out, problem);
    metrics_derive(jobs_now() - t0);
    if (rc == HAMEL_E_COMPILE_LIMIT)
        metrics_compile_stopped(METRICS_COMPILE_LIMIT);
    return rc;
}

/* Takes the outcome of the request's offloaded compilation, if there is one (returns 1). */
static int http__take_compiled(http_conn *c, int *rc, engine_model **out, json_t **problem)
{
    if (!c->resolve.pre.set)
        return 0;
    *rc = c->resolve.pre.rc;
    *out = c->resolve.pre.model;
    *problem = c->resolve.pre.problem;
    c->resolve.pre.set = 0;
    c->resolve.pre.model = NULL;
    c->resolve.pre.problem = NULL;
    if (*rc == HAMEL_E_CANCELLED) { /* a compilation cancelled by shutdown or its first client leaving */
        json_decref(*problem);
        *rc = HAMEL_E_UNAVAILABLE;
        *problem =
            hamel_problem_new(*rc, "the model's compilation was cancelled (the service is stopping, or "
                                   "the client that started it went away); retry");
    }
    return 1;
}

/* *out (a new reference), unless its model is quarantined (quarantine.h): then it is
 * released and the recorded problem is the answer. Returns 0 or HAMEL_E_ENGINE_FAULT. */
static int http__unless_quarantined(engine_model **out, json_t **problem)
{
    if (!quarantine_check(engine_model_id(*out), problem))
        return 0;
    engine_model_release(*out);
    *out = NULL;
    return HAMEL_E_ENGINE_FAULT;
}

/* The "m:<id>" key of a model id into key; returns 0 if the id is too long to be one. */
static int http__id_key(const char *id, char key[CACHE_MAX_KEY + 1])
{
    if (strlen(id) + 2 > CACHE_MAX_KEY)
        return 0;
    snprintf(key, CACHE_MAX_KEY + 1, "m:%s", id);
    return 1;
}

/* The stored JSON of the model with this id (a new reference), or NULL. */
static json_t *http__stored_spec(http_server *s, const char *id)
{
    char *text = NULL;
    if (!s->d.st || store_get_model(s->d.st, id, &text) != 0)
        return NULL;
    json_t *spec = json_loads(text, 0, NULL);
    free(text);
    return spec;
}

/* The model with this id from the cache or the store (compiled again from its stored
 * JSON: on the offload pool when http__compile_stored_first ran before, else here).
 * Returns 0 and a new reference, HAMEL_E_NOT_FOUND, or another error + problem. */
int http__model_by_id(http_conn *c, const char *id, engine_model **out, json_t **problem)
{
    http_server *s = c->srv;
    char key[CACHE_MAX_KEY + 1];
    *out = NULL;
    if (!http__id_key(id, key))
        return HAMEL_E_NOT_FOUND;
    *out = cache_get(s->d.models, key);
    if (*out)
        return http__unless_quarantined(out, problem);
    int rc;
    if (!http__take_compiled(c, &rc, out, problem)) {
        json_t *spec = http__stored_spec(s, id);
        if (!spec)
            return HAMEL_E_NOT_FOUND;
        rc = http__compile(s, spec, out, problem);
        json_decref(spec);
    }
    if (rc != 0)
        return rc;
    if (strcmp(engine_model_id(*out), id) != 0) { /* the canonical form changed since */
        engine_model_release(*out);
        *out = NULL;
        return HAMEL_E_NOT_FOUND;
    }
    http__model_remember(s, *out, NULL);
    return 0;
}

/* Sets c->resolve.spec_text and c->resolve.spec_key for spec (once per request). Returns 0 or -1. */
static int http__spec_key(http_conn *c, const json_t *spec)
{
    if (c->resolve.spec_text)
        return 0;
    c->resolve.spec_text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    if (!c->resolve.spec_text)
        return -1;
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)c->resolve.spec_text, strlen(c->resolve.spec_text), d);
    snprintf(c->resolve.spec_key, sizeof c->resolve.spec_key, "b:");
    ids_hex(d, sizeof d, c->resolve.spec_key + 2);
    return 0;
}

/* The model of a spec object: a hit on the hash of its JSON text skips the engine;
 * otherwise it is the outcome of the request's compilation (run on the compile pool
 * before the handler, see http__compile_first) or, failing that, compiled here; if its
 * id is new it is remembered in the store. *created says whether the service had never
 * seen this model id. */
int http__model_by_spec(http_conn *c, const json_t *spec, engine_model **out, int *created, json_t **problem)
{
    http_server *s = c->srv;
    *out = NULL;
    *created = 0;
    if (http__spec_key(c, spec) != 0)
        return HAMEL_E_INTERNAL;
    *out = http__model_by_text(s, c->resolve.spec_key, 1);
    if (*out)
        return http__unless_quarantined(out, problem);
    int rc;
    if (!http__take_compiled(c, &rc, out, problem))
        rc = http__compile(s, spec, out, problem);
    if (rc != 0)
        return rc;
    char mkey[CACHE_MAX_KEY + 1];
    snprintf(mkey, sizeof mkey, "m:%s", engine_model_id(*out));
    engine_model *known = cache_peek(s->d.models, mkey);
    if (known) { /* same model, other formatting: share the compiled one */
        engine_model_release(*out);
        *out = known;
    } else if (s->d.st) {
        int is_new = c->resolve.pre.is_new; /* when pre_recorded: looked up (and put) off the poll thread */
        if (!c->resolve.pre.recorded) {
            char *stored = NULL;
            is_new = store_get_model(s->d.st, engine_model_id(*out), &stored) == 1;
            free(stored);
        }
        if (is_new) {
            *created = 1;
            if (!c->resolve.pre.recorded)
                store_put_model(s->d.st, engine_model_id(*out), c->resolve.spec_text);
        }
    } else {
        *created = 1;
    }
    http__model_remember(s, *out, c->resolve.spec_key);
    return 0;
}

/* The model a request body names with "model" or "model_id". */
int http__model_of(http_conn *c, const json_t *body, engine_model **out, json_t **problem)
{
    const json_t *spec = json_object_get(body, "model");
    const json_t *id = json_object_get(body, "model_id");
    int created = 0;
    if (json_is_object(spec) && id) {
        /* both: the id must be the model's, or the request says two things at once */
        int rc =
            json_is_string(id) ? http__model_by_spec(c, spec, out, &created, problem) : HAMEL_E_BAD_REQUEST;
        if (rc == 0 && strcmp(engine_model_id(*out), json_string_value(id)) == 0)
            return 0;
        if (rc == 0) {
            *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
            hamel_problem_addf(
                problem, HAMEL_E_BAD_REQUEST, "model_id",
                "is not the id of the model sent (%s): give model or model_id, or the model's own id",
                engine_model_id(*out));
            engine_model_release(*out);
            *out = NULL;
            return HAMEL_E_BAD_REQUEST;
        }
        if (!json_is_string(id))
            hamel_problem_addf(problem, HAMEL_E_BAD_REQUEST, "model_id", "must be a string");
        return rc;
    }
    if (json_is_object(spec))
        return http__model_by_spec(c, spec, out, &created, problem);
    if (json_is_string(id)) {
        int rc = http__model_by_id(c, json_string_value(id), out, problem);
        if (rc == HAMEL_E_NOT_FOUND) {
            *problem = hamel_problem_new(rc, "no model has this id; POST it to /v1/models");
            hamel_problem_add(*problem, "model_id", -1, "unknown model id");
        }
        return rc;
    }
    *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
    hamel_problem_add(*problem, spec || id ? (spec ? "model" : "model_id") : "model", -1,
                      spec ? "must be an object"
                      : id ? "must be a string"
                           : "either model or model_id is required");
    return HAMEL_E_BAD_REQUEST;
}

/* The model spec object a POST body carries, or NULL (a model_id, or nothing). */
static const json_t *http__spec_of(const http_conn *c, const json_t *body)
{
    const json_t *inner = json_object_get(body, "model");
    if (http__route_has(c, HTTP_ROUTE_BODY_IS_MODEL))
        return json_is_object(inner) && !json_object_get(body, "coordinates") ? inner : body;
    return json_is_object(inner) ? inner : NULL;
}

void http__watch_begin(http_conn *c)
{
    /* The connection is suspended: MHD does not see a hang-up, the watcher does. */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    atomic_store(&c->work.ctl.cancel, 0);
    hangup_watch(c->srv->hangups, &c->work.hup, ci ? (int)ci->connect_fd : -1, &c->work.ctl.cancel);
}

void http__watch_end(http_conn *c, int rc)
{
    hangup_forget(c->srv->hangups, &c->work.hup);
    if (rc == HAMEL_E_COMPILE_LIMIT)
        metrics_compile_stopped(METRICS_COMPILE_LIMIT);
    else if (rc == HAMEL_E_CANCELLED)
        metrics_compile_stopped(atomic_load(&c->work.hup.why) == HANGUP_SHUTDOWN
                                    ? METRICS_COMPILE_SHUTDOWN
                                    : METRICS_COMPILE_CLIENT_GONE);
}

/* Whether a body that sends a model and a "model_id" too names that model's id (a body
 * without "model_id", or POST /v1/models, always does): otherwise http__model_of
 * refuses the request, so nothing may go on with it here. */
static int http__id_agrees(const http_conn *c, const engine_model *m)
{
    const json_t *id = json_object_get(c->work.body, "model_id");
    if (!id || http__route_has(c, HTTP_ROUTE_BODY_IS_MODEL))
        return 1;
    return json_is_string(id) && strcmp(json_string_value(id), engine_model_id(m)) == 0;
}

/* Offloaded: compile the model of c->work.body. */
static void http__run_compile(void *arg)
{
    http_conn *c = arg;
    double t0 = jobs_now();
    const json_t *spec = c->resolve.stored_spec ? c->resolve.stored_spec : http__spec_of(c, c->work.body);
    http__watch_begin(c);
    /* a simulation's check goes with the compilation: one call to an engine worker; and
     * when its job would start at once, its run too (the job takes it over) */
    int check = http__route_has(c, HTTP_ROUTE_CHECKS_RUN) && json_is_object(c->work.body);
    json_t *head = NULL;
    if (check && http__wait(c) > 0 && jobs_prerun_ok(c->srv->d.jobs)) {
        ids_random(c->resolve.pre.prerun_id, JOB_ID_LEN);
        head = json_pack("{s:s, s:s, s:s, s:f}", "job_id", c->resolve.pre.prerun_id, "status", "done",
                         "model_id", "", "progress", 1.0);
    }
    c->resolve.pre.rc = isolate_model_compile_check(
        spec, c->resolve.stored_spec ? NULL : c->resolve.spec_text, check ? c->work.body : NULL,
        c->srv->d.limits, &c->work.ctl, &c->resolve.pre.model, &c->resolve.pre.problem,
        check ? &c->resolve.pre.check : NULL, head, &c->resolve.pre.prerun);
    json_decref(head);
    http__watch_end(c, c->resolve.pre.rc);
    store *st = c->srv->d.st;
    int queued = 0; /* the model was queued for the store, to be committed with a job */
    if (c->resolve.pre.rc == 0 && st && !c->resolve.stored_spec && c->resolve.spec_text &&
        http__route_has(c, HTTP_ROUTE_MODEL_WITH_JOB)) {
        /* A simulation's model needs no answer about being new (201 is POST /v1/models'):
         * it is queued without a lookup (INSERT OR IGNORE) and committed with the job's
         * record, which is written after it, so no record names a model the store lacks
         * (and if no job follows, it is written below before anyone is answered). */
        queued = store_put_model_async(st, engine_model_id(c->resolve.pre.model), c->resolve.spec_text) == 0;
        c->resolve.pre.is_new = 0;
        c->resolve.pre.recorded = 1;
    } else if (c->resolve.pre.rc == 0 && st && !c->resolve.stored_spec && c->resolve.spec_text) {
        /* A new model is remembered here, not on the poll thread (a store round trip). */
        char *stored = NULL;
        c->resolve.pre.is_new = store_get_model(st, engine_model_id(c->resolve.pre.model), &stored) == 1;
        free(stored);
        if (c->resolve.pre.is_new)
            store_put_model(st, engine_model_id(c->resolve.pre.model), c->resolve.spec_text);
        c->resolve.pre.recorded = 1;
    }
    c->resolve.pre.set = 1;
    metrics_derive(jobs_now() - t0);
    /* A new simulation goes on in this same task (key, result, store, check, submission),
     * and so does a new batch (batch_create), so the request is resumed once, not once
     * per store round trip. A stored model whose canonical form changed since is not the
     * one asked for: http__model_by_id answers 404 on the resumed call. */
    int same =
        c->resolve.pre.rc == 0 &&
        (!c->resolve.stored_spec || !strcmp(engine_model_id(c->resolve.pre.model), c->resolve.stored_id)) &&
        http__id_agrees(c, c->resolve.pre.model);
    /* the row's hook (http__simulation_work, http__batch_work): whether a job's record
     * was committed after the queued model, carrying it */
    int carried = same && http__after_compile(c, c->resolve.pre.model);
    isolate_prerun_drop(c->resolve.pre.prerun); /* not taken by a job: nobody wants its result */
    c->resolve.pre.prerun = NULL;
    if (queued && !carried) /* a cached result or a refused request: no job record carried it */
        store_put_model(st, engine_model_id(c->resolve.pre.model), c->resolve.spec_text);
}

/* Offloaded: read the model c->resolve.stored_id from the store and compile it; an id the store
 * does not know ends as HAMEL_E_NOT_FOUND (taken by http__model_by_id). */
static void http__run_compile_stored(void *arg)
{
    http_conn *c = arg;
    c->resolve.stored_spec = http__stored_spec(c->srv, c->resolve.stored_id);
    if (c->resolve.stored_spec) {
        http__run_compile(c);
        return;
    }
    c->resolve.pre.set = 1;
    c->resolve.pre.rc = HAMEL_E_NOT_FOUND;
}

/* A copy of a finished flight's outcome for request w. Called with flights_mu held. */
static void http__flight_copy(const http_flight *f, http_conn *w)
{
    w->resolve.pre.set = 1;
    w->resolve.pre.rc = f->rc;
    w->resolve.pre.model = engine_model_retain(f->model);
    w->resolve.pre.problem = f->problem ? json_deep_copy(f->problem) : NULL;
    w->resolve.pre.recorded = f->recorded; /* the owner put it in the store: known there */
    w->resolve.pre.is_new = 0;
}

/* Unlists and frees c's flight (once the model is cached, or c is gone). */
void http__flight_end(http_conn *c)
{
    http_server *s = c->srv;
    http_flight *f = c->resolve.flight;
    if (!f)
        return;
    c->resolve.flight = NULL;
    pthread_mutex_lock(&s->flights_mu);
    http_flight **pp = &s->flights;
    while (*pp && *pp != f)
        pp = &(*pp)->next;
    if (*pp)
        *pp = f->next;
    http_conn *w = f->waiters; /* none unless it never ran */
    f->waiters = NULL;
    pthread_mutex_unlock(&s->flights_mu);
    while (w) {
        http_conn *next = w->resolve.next_waiter;
        w->resolve.next_waiter = NULL;
        w->off.rc = c->off.rc ? c->off.rc : HAMEL_E_UNAVAILABLE; /* the owner's refusal */
        http__offloaded(w, 0);
        w = next;
    }
    if (f->model)
        engine_model_release(f->model);
    json_decref(f->problem);
    free(f);
}

void http__resolve_clear(http_conn *c)
{
    http__flight_end(c);
    json_decref(c->resolve.stored_spec);
    json_decref(c->resolve.pre.problem);
    json_decref(c->resolve.pre.check.problem);
    isolate_prerun_drop(c->resolve.pre.prerun);
    if (c->resolve.pre.model)
        engine_model_release(c->resolve.pre.model);
    free(c->resolve.spec_text);
}

/* The end of the owner's compilation: the flight keeps the outcome, every request that
 * waited on it gets a copy and is resumed, then the owner. A task that never ran (queue
 * full, shutting down) ends its flight at once, refusing the waiters too, so that no
 * connection stays suspended on it. A compilation cancelled because its owner's client
 * hung up is nobody else's answer: the first waiter inherits the flight and compiles
 * again (with a budget of its own), the others go on waiting. */
static void http__compile_done(void *arg, int ran)
{
    http_conn *c = arg;
    http_server *s = c->srv;
    http_flight *f = c->resolve.flight;
    http_conn *w = NULL;
    if (f && ran && c->resolve.pre.rc == HAMEL_E_CANCELLED &&
        atomic_load(&c->work.hup.why) == HANGUP_CLIENT_GONE) {
        pthread_mutex_lock(&s->flights_mu);
        http_conn *heir = f->waiters;
        if (heir) {
            f->waiters = heir->resolve.next_waiter;
            heir->resolve.next_waiter = NULL;
            heir->resolve.flight = f;
            c->resolve.flight = NULL;
        }
        pthread_mutex_unlock(&s->flights_mu);
        if (heir) { /* still suspended on the flight; its resume stays http__resume_compiled */
            heir->off.ran = 0;
            if (http__submit(heir, s->offload, http__run_compile, http__compile_done) != 0)
                http__compile_done(heir, 0);
            http__offloaded(c, ran);
            return;
        }
    }
    if (f && !ran)
        http__flight_end(c);
    if (f && ran) {
        pthread_mutex_lock(&s->flights_mu);
        f->finished = 1;
        f->rc = c->resolve.pre.rc;
        f->model = engine_model_retain(c->resolve.pre.model);
        f->problem = c->resolve.pre.problem ? json_deep_copy(c->resolve.pre.problem) : NULL;
        f->recorded = c->resolve.pre.recorded;
        for (http_conn *x = f->waiters; x; x = x->resolve.next_waiter)
            http__flight_copy(f, x);
        w = f->waiters;
        f->waiters = NULL;
        pthread_mutex_unlock(&s->flights_mu);
    }
    while (w) {
        http_conn *next = w->resolve.next_waiter; /* w may be gone once resumed */
        w->resolve.next_waiter = NULL;
        http__offloaded(w, 1);
        w = next;
    }
    http__offloaded(c, ran);
}

static enum MHD_Result http__resume_compiled(http_conn *c)
{
    json_t *body = c->work.body;
    c->work.body = NULL;
    enum MHD_Result ret = http__dispatch(c, body);
    json_decref(body);
    http__flight_end(c); /* the model is in the cache now */
    return ret;
}

/* When the model with this id is not in the cache but in the store (after a restart,
 * or evicted), compiles its stored JSON on the offload pool and answers with resume(c)
 * when that ends (returns 1 with *ret). Returns 0 to go on now. */
int http__compile_stored_first(http_conn *c, const char *id, enum MHD_Result (*resume)(http_conn *),
                               enum MHD_Result *ret)
{
    char key[CACHE_MAX_KEY + 1];
    if (!id || !http__id_key(id, key))
        return 0;
    engine_model *hit = cache_peek(c->srv->d.models, key);
    if (hit) {
        engine_model_release(hit);
        return 0;
    }
    if (!c->srv->d.st)
        return 0;
    snprintf(c->resolve.stored_id, sizeof c->resolve.stored_id, "%s", id);
    *ret = http__offload(c, http__run_compile_stored, resume);
    return 1;
}

/* When the body's model is not in the cache, compiles it (or, for a model_id, its stored
 * JSON) on the offload pool and dispatches the body when that ends (returns 1 with
 * *ret). Returns 0 to dispatch now: a cached model, an unknown id, or no model. */
int http__compile_first(http_conn *c, json_t *body, enum MHD_Result *ret)
{
    const json_t *spec = http__spec_of(c, body);
    if (!spec) {
        c->work.body = json_incref(body);
        if (http__compile_stored_first(c, json_string_value(json_object_get(body, "model_id")),
                                       http__resume_compiled, ret))
            return 1;
        json_decref(c->work.body);
        c->work.body = NULL;
        return 0;
    }
    if (http__spec_key(c, spec) != 0)
        return 0;
    http_server *s = c->srv;
    engine_model *hit = http__model_by_text(s, c->resolve.spec_key, 0);
    if (hit) {
        engine_model_release(hit);
        return 0;
    }
    c->work.body = json_incref(body);
    *ret = MHD_YES;
    pthread_mutex_lock(&s->flights_mu);
    http_flight *f = s->flights;
    while (f && strcmp(f->key, c->resolve.spec_key) != 0)
        f = f->next;
    if (f && f->finished) { /* compiled, not yet cached: take the outcome and go on */
        http__flight_copy(f, c);
        pthread_mutex_unlock(&s->flights_mu);
        json_decref(c->work.body);
        c->work.body = NULL;
        return 0;
    }
    if (f) { /* being compiled: wait for it (suspended under the lock, so not yet resumable) */
        c->off.resume = http__resume_compiled;
        c->off.ran = 0;
        MHD_suspend_connection(c->conn);
        c->state = HTTP_CONN_OFFLOADED;
        c->resolve.next_waiter = f->waiters;
        f->waiters = c;
        pthread_mutex_unlock(&s->flights_mu);
        return 1;
    }
    f = calloc(1, sizeof *f);
    if (f) {
        snprintf(f->key, sizeof f->key, "%s", c->resolve.spec_key);
        f->next = s->flights;
        s->flights = f;
        c->resolve.flight = f;
    }
    pthread_mutex_unlock(&s->flights_mu);
    *ret = http__offload_with(c, http__run_compile, http__compile_done, http__resume_compiled);
    return 1;
}

void http__hold_work(http_conn *c, engine_model *m, json_t *body)
{
    c->work.model = m;
    json_decref(c->work.body);
    c->work.body = json_incref(body);
}

/* The resumed call of work offloaded by http__offload_on_model: 200 and c->work.out, or the
 * problem c->work.problem. */
static enum MHD_Result http__resume_work(http_conn *c)
{
    json_t *out = c->work.out, *problem = c->work.problem;
    c->work.out = c->work.problem = NULL;
    return c->work.rc == 0 ? http__json(c, 200, out) : http__problem(c, problem);
}

enum MHD_Result http__offload_on_model(http_conn *c, json_t *body, void (*run)(void *))
{
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = http__model_of(c, body, &m, &problem);
    if (rc != 0)
        return http__problem(c, problem);
    http__hold_work(c, m, body);
    return http__offload_derive(c, run, http__resume_work);
}
