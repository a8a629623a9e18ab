/* h_models.c — the models resource: POST /v1/models, GET /v1/models/{id} and
 * GET /v1/models/{id}/equations.
 *
 * Owns the model answers: the summary (201 + Location for a model new to the service,
 * with ?source=1 the model itself under "source",
 * ETag = the model id, 304 on If-None-Match) and the derived equations (?form= chooses a
 * printed form). Resolution and compilation are resolve.c's; a model known only to the
 * store is compiled on the offload pool before the answer. The equations document is
 * printed on its first request (engine_equations: milliseconds for a bicycle) and a
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

/* ?source, ?source=1, =true or =yes: the summary carries the model under "source". */
static int http__source_wanted(http_conn *c)
{
    const char *v = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "source");
    return v && (!*v || !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"));
}

static enum MHD_Result http__model_summary(http_conn *c, engine_model *m, int status)
{
    json_t *summary = engine_model_summary(m);
    char etag[CACHE_MAX_KEY + 3], location[CACHE_MAX_KEY + 16];
    snprintf(etag, sizeof etag, "\"%s\"", engine_model_id(m));
    snprintf(location, sizeof location, "/v1/models/%s", engine_model_id(m));
    const char *inm = http__header(c, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (status == 200 && inm && !strcmp(inm, etag) && c->method != HTTP_POST) {
        json_decref(summary);
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        if (r)
            MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
        return http__send(c, MHD_HTTP_NOT_MODIFIED, r, NULL, 0);
    }
    if (!summary)
        return http__error(c, HAMEL_E_INTERNAL, "no summary");
    if (status == 200 && c->method != HTTP_POST && http__source_wanted(c)) {
        /* the model itself (its canonical form, from which it was compiled): a page or
         * client that has only the id can show, edit and run it again */
        json_t *source = json_loads(engine_model_canonical(m), 0, NULL);
        if (!source) {
            json_decref(summary);
            return http__error(c, HAMEL_E_INTERNAL, "the model's canonical form does not parse");
        }
        json_object_set_new(summary, "source", source);
    }
    return http__json_h(c, status, summary, "application/json", MHD_HTTP_HEADER_ETAG, etag,
                        status == 201 ? MHD_HTTP_HEADER_LOCATION : NULL, location);
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
    enum MHD_Result ret = http__model_summary(c, m, created ? 201 : 200);
    engine_model_release(m);
    return ret;
}

/* Offloaded: the ?form= of c->work_model's equations, under the compile budget; a client
 * that hangs up (or a shutdown) cancels it as it cancels a compilation. */
static void http__run_form(void *arg)
{
    http_conn *c = arg;
    const char *form = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "form");
    http__watch_begin(c);
    c->work_rc = isolate_equations_form_ctl(c->work_model, form, c->srv->d.limits, &c->compile_ctl, &c->out,
                                            &c->out_problem);
    http__watch_end(c, c->work_rc);
}

/* ---- one derivation of a form at a time; its compile-limit answer remembered ---------- */

static void http__form_start(http_conn *c);

/* The derivation of c's form ended (ran) or was never run (!ran: refused, or the lane
 * stopped): the askers that waited for it get its outcome. When it was cancelled (its
 * client hung up) they try again, one of them deriving. A compile-limit answer is
 * remembered for the key (once.h). */
static void http__form_done(void *arg, int ran)
{
    http_conn *c = arg;
    int limit = ran && c->work_rc == HAMEL_E_COMPILE_LIMIT && c->out_problem;
    void **waiters = NULL;
    size_t n = 0;
    once_end(c->srv->forms, c->form_key, limit ? c->out_problem : NULL, &waiters, &n);
    for (size_t i = 0; i < n; i++) {
        http_conn *w = waiters[i];
        if (ran && c->work_rc == HAMEL_E_CANCELLED) {
            http__form_start(w);
            continue;
        }
        w->work_rc = c->work_rc;
        w->out = c->out ? json_deep_copy(c->out) : NULL;
        w->out_problem = c->out_problem ? json_deep_copy(c->out_problem) : NULL;
        w->off_rc = c->off_rc;
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
    int how = once_begin(c->srv->forms, c->form_key, c, &known);
    if (how == ONCE_WAIT)
        return;
    if (how == ONCE_REMEMBERED) {
        c->work_rc = HAMEL_E_COMPILE_LIMIT;
        c->out_problem = known;
        http__offloaded(c, 1);
        return;
    }
    c->off_rc = offload_submit(c->srv->derive, http__run_form, http__form_done, c);
    if (c->off_rc != 0)
        http__form_done(c, 0);
}

/* Offloaded: c->work_model's equations document. */
static void http__run_equations(void *arg)
{
    http_conn *c = arg;
    c->work_rc = isolate_equations_form_ctl(c->work_model, NULL, NULL, NULL, &c->out, &c->out_problem);
}

static enum MHD_Result http__resume_form(http_conn *c)
{
    json_t *out = c->out, *problem = c->out_problem;
    c->out = c->out_problem = NULL;
    if (c->work_rc == 0)
        return http__json(c, 200, out);
    if (c->work_rc == HAMEL_E_CANCELLED) {
        json_decref(problem);
        problem =
            hamel_problem_new(HAMEL_E_UNAVAILABLE, "the form's derivation was cancelled (the service is "
                                                   "stopping, or the client went away); retry");
    }
    return http__problem(c, problem ? problem : hamel_problem_new(c->work_rc, NULL));
}

enum MHD_Result http__model(http_conn *c) { return http__get_model(c, c->route == METRICS_ROUTE_EQUATIONS); }

enum MHD_Result http__get_model(http_conn *c, int equations)
{
    enum MHD_Result ret;
    if (!c->pre_set && http__compile_stored_first(c, c->id, http__model, &ret))
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
    if (equations && form) { /* derived on first request: once per (model, form, limits) */
        c->work_model = m;
        const engine_limits *lim = c->srv->d.limits;
        snprintf(c->form_key, sizeof c->form_key, "%s|%.64s|%.17g|%zu", engine_model_id(m), form,
                 lim->max_compile_seconds, lim->max_compile_bytes);
        c->on_resume = http__resume_form;
        c->ran = 0;
        MHD_suspend_connection(c->conn); /* first: the outcome may come before form_start returns */
        c->suspended = 1;
        http__form_start(c);
        return MHD_YES;
    }
    if (equations) { /* printed on first request: on the offload pool */
        c->work_model = m;
        return http__offload(c, http__run_equations, http__resume_form);
    }
    ret = http__model_summary(c, m, 200);
    engine_model_release(m);
    return ret;
}
