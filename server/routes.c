/* routes.c — the route table: which handler answers a method on a path.
 *
 * Owns the one table of (method, path pattern) -> handler and everything derived from it:
 * the route a path counts under in the metrics, the {id} segment (copied into c->id:
 * libmicrohttpd has percent-decoded the path), the Allow header of a 405 and of a CORS
 * preflight (the methods of every row whose pattern matches, HEAD wherever GET, and
 * OPTIONS), and the dispatch of a request to its row's handler. A path under /v1 that no row matches is a
 * 404; any other path is the static front end's (the last row).
 */
#include <stdio.h>
#include <string.h>

#include "http_conn.h"

#define HTTP_CORS_MAX_AGE "600"

/* One row: a method on a path pattern. A pattern is literal text with at most one {id}
 * (a non-empty segment without '/'), or "*" (any other path outside /v1: the last rows,
 * tried only when no row before matched the path). The first row matching the path and
 * the method answers. A GET row also answers HEAD. `answer` serves a request without a
 * body (answered from the headers), `post` a POST with its parsed body. The hooks are the
 * core's way into the route's own state (http_conn's per-route member, declared by the
 * endpoint's file): the core calls them and never reads that state itself. */
struct http_route {
    http_method method;
    const char *pattern;
    metrics_route route; /* its label in the metrics, and only that: nothing branches on it */
    enum MHD_Result (*answer)(http_conn *c);
    enum MHD_Result (*post)(http_conn *c, json_t *body);
    unsigned flags; /* HTTP_ROUTE_* (http_conn.h): what the core does differently for it */
    /* run in the offloaded task that compiled the request's model, with that model: the
     * work of a new simulation or batch goes on there (one resume, not one per store
     * round trip); returns 1 when it committed a job whose record carries the model
     * (HTTP_ROUTE_MODEL_WITH_JOB). NULL for none */
    int (*after_compile)(http_conn *c, engine_model *m);
    /* the answer of a request parked on a job or batch (http__suspend_on) once woken */
    enum MHD_Result (*on_wake)(http_conn *c);
    /* frees the route's state when the request ends (NULL: it holds nothing to free) */
    void (*release)(http_conn *c);
};

static const http_route http__routes[] = {
    {HTTP_GET, "/v1/health", METRICS_ROUTE_HEALTH, .answer = http__health},
    {HTTP_POST, "/v1/models", METRICS_ROUTE_MODELS, .post = http__post_model,
     .flags = HTTP_ROUTE_BODY_IS_MODEL},
    {HTTP_GET, "/v1/models/{id}", METRICS_ROUTE_MODEL, .answer = http__model},
    /* state: form (a ?form=) */
    {HTTP_GET, "/v1/models/{id}/equations", METRICS_ROUTE_EQUATIONS, .answer = http__model,
     .flags = HTTP_ROUTE_EQUATIONS},
    {HTTP_GET, "/v1/models/{id}/code", METRICS_ROUTE_MODEL_CODE, .answer = http__model_code},
    {HTTP_POST, "/v1/code", METRICS_ROUTE_CODE, .post = http__post_code},
    {HTTP_POST, "/v1/steady", METRICS_ROUTE_STEADY, .post = http__post_steady},
    {HTTP_POST, "/v1/hamel", METRICS_ROUTE_HAMEL, .post = http__post_hamel},
    {HTTP_POST, "/v1/evaluate", METRICS_ROUTE_EVALUATE, .post = http__post_evaluate},
    {HTTP_POST, "/v1/linearize", METRICS_ROUTE_LINEARIZE, .post = http__post_linearize},
    /* state: sim */
    {HTTP_POST, "/v1/simulations", METRICS_ROUTE_SIMULATIONS, .post = http__post_simulation,
     .flags = HTTP_ROUTE_SUBMITS | HTTP_ROUTE_RESULT_MEMO | HTTP_ROUTE_MODEL_WITH_JOB | HTTP_ROUTE_CHECKS_RUN,
     .after_compile = http__simulation_work, .on_wake = http__job_wake, .release = http__sim_release},
    {HTTP_GET, "/v1/jobs/{id}", METRICS_ROUTE_JOB, .answer = http__job, .on_wake = http__job_wake,
     .release = http__sim_release},
    {HTTP_DELETE, "/v1/jobs/{id}", METRICS_ROUTE_JOB, .answer = http__job, .release = http__sim_release},
    /* state: batch */
    {HTTP_POST, "/v1/batches", METRICS_ROUTE_BATCHES, .post = http__post_batch, .flags = HTTP_ROUTE_SUBMITS,
     .after_compile = http__batch_work, .on_wake = http__batch_wake, .release = http__batch_release},
    {HTTP_GET, "/v1/batches/{id}", METRICS_ROUTE_BATCH, .answer = http__batch, .on_wake = http__batch_wake,
     .release = http__batch_release},
    {HTTP_DELETE, "/v1/batches/{id}", METRICS_ROUTE_BATCH, .answer = http__batch,
     .release = http__batch_release},
    {HTTP_GET, "/v1/quarantine", METRICS_ROUTE_QUARANTINE, .answer = http__quarantine_list},
    {HTTP_GET, "/v1/quarantine/{id}", METRICS_ROUTE_QUARANTINE, .answer = http__quarantine},
    {HTTP_DELETE, "/v1/quarantine/{id}", METRICS_ROUTE_QUARANTINE, .answer = http__quarantine},
    {HTTP_GET, "/problems", METRICS_ROUTE_PROBLEMS, .answer = http__problems},
    {HTTP_GET, "/problems/", METRICS_ROUTE_PROBLEMS, .answer = http__problems},
    {HTTP_GET, "/problems/{id}", METRICS_ROUTE_PROBLEMS, .answer = http__problems},
    {HTTP_GET, "/metrics", METRICS_ROUTE_METRICS, .answer = http__metrics, .flags = HTTP_ROUTE_METRICS_TOKEN},
    {HTTP_GET, "/livez", METRICS_ROUTE_LIVEZ, .answer = http__livez},
    {HTTP_GET, "/readyz", METRICS_ROUTE_READYZ, .answer = http__readyz},
    {HTTP_GET, "*", METRICS_ROUTE_STATIC, .answer = http__static},
};

/* The methods named in Allow, in this order (http_method's first five). */
static const char *const http__method_names[] = {"GET", "HEAD", "POST", "DELETE", "OPTIONS"};

/* Whether url matches pattern; an {id} segment is copied into id[cap] (a segment that
 * does not fit matches nothing). The url is libmicrohttpd's, already percent-decoded (its
 * default unescape callback; a raw %00 is refused before, http.c): it is not decoded
 * again, or "a%2541" would reach a handler as "aA" and "a%252Fb" not at all. */
static int http__pattern_match(const char *pattern, const char *url, char *id, size_t cap)
{
    if (!strcmp(pattern, "*"))
        return strcmp(url, "/v1") != 0 && strncmp(url, "/v1/", 4) != 0;
    const char *brace = strchr(pattern, '{');
    size_t lit = brace ? (size_t)(brace - pattern) : strlen(pattern);
    if (strncmp(pattern, url, lit) != 0)
        return 0;
    if (!brace)
        return url[lit] == '\0';
    url += lit;
    size_t n = strcspn(url, "/");
    if (n == 0 || n >= cap)
        return 0;
    memcpy(id, url, n);
    id[n] = '\0';
    return !strcmp(url + n, strchr(brace, '}') + 1);
}

int http__route(http_conn *c, const char *url, http_route_match *m)
{
    unsigned allowed = 0;
    int found = 0;
    m->row = NULL;
    for (size_t i = 0; i < sizeof http__routes / sizeof http__routes[0]; i++) {
        const http_route *r = &http__routes[i];
        if ((found && !strcmp(r->pattern, "*")) || !http__pattern_match(r->pattern, url, c->id, sizeof c->id))
            continue;
        if (!found)
            m->route = r->route;
        found = 1;
        allowed |= 1u << r->method;
        if (r->method == HTTP_GET)
            allowed |= 1u << HTTP_HEAD;
        if (!m->row && (r->method == c->method || (r->method == HTTP_GET && c->method == HTTP_HEAD)))
            m->row = r;
    }
    if (!found)
        return -1;
    allowed |= 1u << HTTP_OPTIONS;
    size_t o = 0;
    m->allow[0] = '\0';
    for (int k = HTTP_GET; k <= HTTP_OPTIONS; k++)
        if (allowed & (1u << k))
            o += (size_t)snprintf(m->allow + o, sizeof m->allow - o, "%s%s", o ? ", " : "",
                                  http__method_names[k]);
    return 0;
}

enum MHD_Result http__answer(http_conn *c, const http_route *row) { return row->answer(c); }

enum MHD_Result http__dispatch(http_conn *c, json_t *body) { return c->row->post(c, body); }

int http__route_has(const http_conn *c, unsigned flag) { return c->row && (c->row->flags & flag); }

int http__after_compile(http_conn *c, engine_model *m)
{
    return c->row && c->row->after_compile ? c->row->after_compile(c, m) : 0;
}

enum MHD_Result http__on_wake(http_conn *c)
{
    if (c->row && c->row->on_wake)
        return c->row->on_wake(c);
    return http__error(c, HAMEL_E_INTERNAL, "woken without a route to answer");
}

void http__route_release(http_conn *c)
{
    if (c->row && c->row->release)
        c->row->release(c);
}

enum MHD_Result http__preflight(http_conn *c, const char *allow)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", allow);
    const char *req = http__header(c, "Access-Control-Request-Headers");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            req && strlen(req) < 512 ? req : "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", HTTP_CORS_MAX_AGE);
    return http__send(c, MHD_HTTP_NO_CONTENT, r, NULL, 0);
}
