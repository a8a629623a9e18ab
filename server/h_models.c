/* h_models.c — the models resource: POST /v1/models, GET /v1/models/{id} and
 * GET /v1/models/{id}/equations.
 *
 * Owns the model answers: the summary (201 + Location for a model new to the service,
 * with ?source=1 the model itself under "source",
 * ETag = the model id, 304 on If-None-Match; a GET by its content address, sha256:...,
 * is Cache-Control: immutable) and the derived equations (?form= chooses a printed form;
 * ETag = the model id + "-equations-" + the form, 304 before anything is derived). Resolution and compilation
 * are resolve.c's; a model known only to the store is compiled on the offload pool before the answer. The
 * equations document is printed on its first request (engine_equations: milliseconds for a bicycle) and a
 * ?form= derived on its first request under the compile budget, cancelled like a
 * compilation when its client hangs up, on the derivations' lane (http_server.derive).
 * One derivation runs per (model, form, limits); requests that ask meanwhile wait for its
 * outcome without a thread, and a 422 compile-limit is remembered (once.h), so clients
 * asking again and again for a form past the limit cost one derivation, not one each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_conn.h"
#include "negotiate.h"

/* A model's id is the SHA-256 of its canonical form: what GET /v1/models/sha256:... answers
 * never changes, so caches may keep it for a year without asking again. */
#define HTTP_IMMUTABLE "max-age=31536000, immutable"

/* The Cache-Control of a GET of model id: immutable when the id is a content address. */
static const char *http__model_cache_control(const char *id)
{
    return !strncmp(id, "sha256:", 7) ? HTTP_IMMUTABLE : NULL;
}

/* ?source, ?source=1, =true or =yes: the summary carries the model under "source". */
static int http__source_wanted(http_conn *c)
{
    const char *v = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "source");
    return v && (!*v || !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"));
}

/* The summary of m answered with status. `spec` is the model object a POST sent (NULL for
 * a GET): the summary's `warnings` are about its unknown members, which belong to that
 * request, not to the model id (whose summary may come from another request's compile,
 * or from the store). */
static enum MHD_Result http__model_summary(http_conn *c, engine_model *m, int status, const json_t *spec)
{
    json_t *summary = engine_model_summary(m);
    json_t *warnings = spec ? engine_model_unknown_members(spec) : NULL;
    if (summary) {
        json_object_del(summary, "warnings");
        if (json_array_size(warnings))
            json_object_set(summary, "warnings", warnings);
    }
    json_decref(warnings);
    char etag[CACHE_MAX_KEY + 3], location[CACHE_MAX_KEY + 16];
    snprintf(etag, sizeof etag, "\"%s\"", engine_model_id(m));
    snprintf(location, sizeof location, "/v1/models/%s", engine_model_id(m));
    const char *cc = c->method != HTTP_POST ? http__model_cache_control(engine_model_id(m)) : NULL;
    if (status == 200 && c->method != HTTP_POST && http__not_modified_since(c, etag)) {
        json_decref(summary);
        return http__not_modified(c, etag, cc ? MHD_HTTP_HEADER_CACHE_CONTROL : NULL, cc);
    }
    if (!summary)
        return http__error(c, HAMEL_E_INTERNAL, "no summary");
    if (status == 200 && c->method != HTTP_POST && http__source_wanted(c)) {
        /* the model itself, as first posted (read from the store by http__run_source:
         * its definitions and its own expressions), else its canonical form, from which
         * it was compiled: a page or client that has only the id can show, edit and run
         * it again */
        json_t *source = json_is_object(c->work.out) ? json_incref(c->work.out)
                                                     : json_loads(engine_model_canonical(m), 0, NULL);
        if (!source) {
            json_decref(summary);
            return http__error(c, HAMEL_E_INTERNAL, "the model's canonical form does not parse");
        }
        json_object_set_new(summary, "source", source);
    }
    if (status == 201)
        return http__json_h(c, status, summary, "application/json", MHD_HTTP_HEADER_ETAG, etag,
                            MHD_HTTP_HEADER_LOCATION, location);
    return http__json_h(c, status, summary, "application/json", MHD_HTTP_HEADER_ETAG, etag,
                        cc ? MHD_HTTP_HEADER_CACHE_CONTROL : NULL, cc);
}

enum MHD_Result http__post_model(http_conn *c, json_t *body)
{
    const json_t *spec = body;
    json_t *inner = json_object_get(body, "model");
    if (json_is_object(inner) && !json_object_get(body, "coordinates"))
        spec = inner; /* {"model": {...}} is accepted as well as the bare model */
    engine_model *m = NULL;
    json_t *problem = NULL;
    int created = 0;
    int rc = http__model_by_spec(c, spec, &m, &created, &problem);
    if (rc != 0)
        return http__problem(c, problem ? problem : hamel_problem_new(rc, NULL));
    enum MHD_Result ret = http__model_summary(c, m, created ? 201 : 200, spec);
    engine_model_release(m);
    return ret;
}

/* Offloaded: the ?form= of c->work.model's equations, under the compile budget; a client
 * that hangs up (or a shutdown) cancels it as it cancels a compilation. */
static void http__run_form(void *arg)
{
    http_conn *c = arg;
    const char *form = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "form");
    http__watch_begin(c);
    c->work.rc = isolate_equations_form_ctl(c->work.model, form, c->srv->d.limits, &c->work.ctl, &c->work.out,
                                            &c->work.problem);
    http__watch_end(c, c->work.rc);
}

/* ---- one derivation of a form at a time; its compile-limit answer remembered ---------- */

static void http__form_start(http_conn *c);

/* Whether a compile-limit problem is the model's own and not the machine's load: any
 * limit but the wall-clock backstop of max_compile_seconds (whose limit_value is not the
 * CPU budget itself: budget.h). */
static int http__form_limit_is_the_models(const http_conn *c, const json_t *problem)
{
    const char *limit = json_string_value(json_object_get(problem, "limit"));
    if (!limit || strcmp(limit, "max_compile_seconds") != 0)
        return 1;
    return json_number_value(json_object_get(problem, "limit_value")) ==
           c->srv->d.limits->max_compile_seconds;
}

/* The derivation of c's form ended (ran) or was never run (!ran: refused, or the lane
 * stopped): the askers that waited for it get its outcome. When it was cancelled (its
 * client hung up) they try again, one of them deriving. A compile-limit answer is
 * remembered for the key (once.h), unless the wall-clock backstop gave it (a loaded
 * machine: the next asker derives again). */
static void http__form_done(void *arg, int ran)
{
    http_conn *c = arg;
    int limit = ran && c->work.rc == HAMEL_E_COMPILE_LIMIT && c->work.problem &&
                http__form_limit_is_the_models(c, c->work.problem);
    void **waiters = NULL;
    size_t n = 0;
    once_end(c->srv->forms, c->form.key, limit ? c->work.problem : NULL, &waiters, &n);
    for (size_t i = 0; i < n; i++) {
        http_conn *w = waiters[i];
        if (ran && c->work.rc == HAMEL_E_CANCELLED) {
            http__form_start(w);
            continue;
        }
        w->work.rc = c->work.rc;
        w->work.out = c->work.out ? json_deep_copy(c->work.out) : NULL;
        w->work.problem = c->work.problem ? json_deep_copy(c->work.problem) : NULL;
        w->off.rc = c->off.rc;
        http__offloaded(w, ran);
    }
    free(waiters);
    http__offloaded(c, ran);
}

/* Asks for c's form (c is suspended, its answer is http__resume_form's): derives it on
 * the derivations' lane, or waits for the derivation another asker runs, or takes the
 * remembered compile-limit answer. */
static void http__form_start(http_conn *c)
{
    json_t *known = NULL;
    int how = once_begin(c->srv->forms, c->form.key, c, &known);
    if (how == ONCE_WAIT)
        return;
    if (how == ONCE_REMEMBERED) {
        c->work.rc = HAMEL_E_COMPILE_LIMIT;
        c->work.problem = known;
        http__offloaded(c, 1);
        return;
    }
    if (http__submit(c, c->srv->derive, http__run_form, http__form_done) != 0)
        http__form_done(c, 0);
}

/* Offloaded: c->work.model's equations document. */
static void http__run_equations(void *arg)
{
    http_conn *c = arg;
    c->work.rc = isolate_equations_form_ctl(c->work.model, NULL, NULL, NULL, &c->work.out, &c->work.problem);
}

/* The entity tag of c's equations document (the model's id, "equations" and the form:
 * the document is a function of them) into etag[cap]. */
static void http__equations_etag(http_conn *c, const char *id, char *etag, size_t cap)
{
    const char *form = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "form");
    char f[33];
    size_t n = 0;
    for (const char *p = form ? form : "default"; *p && n < sizeof f - 1; p++) /* tag characters only */
        f[n++] = (*p > 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ? *p : '_';
    f[n] = '\0';
    snprintf(etag, cap, "\"%s-equations-%s\"", id, f);
}

static enum MHD_Result http__resume_form(http_conn *c)
{
    json_t *out = c->work.out, *problem = c->work.problem;
    c->work.out = c->work.problem = NULL;
    if (c->work.rc == 0) {
        char etag[NEGOTIATE_ETAG_MAX + CACHE_MAX_KEY];
        const char *id = c->work.model ? engine_model_id(c->work.model) : c->id;
        http__equations_etag(c, id, etag, sizeof etag);
        const char *cc = http__model_cache_control(id);
        return http__json_h(c, 200, out, "application/json", MHD_HTTP_HEADER_ETAG, etag,
                            cc ? MHD_HTTP_HEADER_CACHE_CONTROL : NULL, cc);
    }
    if (c->work.rc == HAMEL_E_CANCELLED) {
        json_decref(problem);
        problem =
            hamel_problem_new(HAMEL_E_UNAVAILABLE, "the form's derivation was cancelled (the service is "
                                                   "stopping, or the client went away); retry");
    }
    return http__problem(c, problem ? problem : hamel_problem_new(c->work.rc, NULL));
}

/* Offloaded (a store read): the model of ?source=1 as it was first posted, into c->work.out
 * (left NULL when the store has none: the canonical form is answered). A model posted a
 * moment ago may still be on its way to the store: one barrier, then a second look. */
static void http__run_source(void *arg)
{
    http_conn *c = arg;
    store *st = c->srv->d.st;
    char *text = NULL;
    int rc = st ? store_get_model(st, engine_model_id(c->work.model), &text) : 1;
    if (rc == 1 && st && store_barrier(st) == 0)
        rc = store_get_model(st, engine_model_id(c->work.model), &text);
    if (rc == 0 && text) {
        json_t *doc = json_loads(text, 0, NULL);
        json_t *spec = json_object_get(doc, "model"); /* {"model": {...}} as POST takes it */
        c->work.out = json_incref(json_is_object(spec) && !json_object_get(doc, "coordinates") ? spec : doc);
        json_decref(doc);
    }
    free(text);
}

static enum MHD_Result http__resume_source(http_conn *c)
{
    return http__model_summary(c, c->work.model, 200, NULL);
}

enum MHD_Result http__model(http_conn *c)
{
    return http__get_model(c, http__route_has(c, HTTP_ROUTE_EQUATIONS));
}

enum MHD_Result http__get_model(http_conn *c, int equations)
{
    enum MHD_Result ret;
    if (!c->resolve.pre.set && http__compile_stored_first(c, c->id, http__model, &ret))
        return ret;
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = http__model_by_id(c, c->id, &m, &problem);
    if (rc == HAMEL_E_NOT_FOUND) {
        json_decref(problem);
        return http__error(c, rc, "no model has this id");
    }
    if (rc != 0)
        return http__problem(c, problem);
    const char *form = equations ? MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "form") : NULL;
    if (equations) { /* a copy the client holds is still good: nothing to derive */
        char etag[NEGOTIATE_ETAG_MAX + CACHE_MAX_KEY];
        http__equations_etag(c, engine_model_id(m), etag, sizeof etag);
        if (http__not_modified_since(c, etag)) {
            const char *cc = http__model_cache_control(engine_model_id(m));
            engine_model_release(m);
            return http__not_modified(c, etag, cc ? MHD_HTTP_HEADER_CACHE_CONTROL : NULL, cc);
        }
    }
    if (equations && form) { /* derived on first request: once per (model, form, limits) */
        c->work.model = m;
        const engine_limits *lim = c->srv->d.limits;
        snprintf(c->form.key, sizeof c->form.key, "%s|%.64s|%.17g|%zu", engine_model_id(m), form,
                 lim->max_compile_seconds, lim->max_compile_bytes);
        c->off.resume = http__resume_form;
        c->off.ran = 0;
        MHD_suspend_connection(c->conn); /* first: the outcome may come before form_start returns */
        c->state = HTTP_CONN_OFFLOADED;
        http__form_start(c);
        return MHD_YES;
    }
    if (equations) { /* printed on first request: on the offload pool */
        c->work.model = m;
        return http__offload(c, http__run_equations, http__resume_form);
    }
    if (http__source_wanted(c) && c->srv->d.st) { /* the posted source: a store read, off the poll thread */
        c->work.model = m;
        return http__offload(c, http__run_source, http__resume_source);
    }
    ret = http__model_summary(c, m, 200, NULL);
    engine_model_release(m);
    return ret;
}
