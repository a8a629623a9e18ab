/* h_linearize.c — POST /v1/linearize: the linearized equations about an operating point.
 *
 * Owns the request's work: engine_linearize on the resolved model, run on the offload
 * pool under the hang-up watch (as a compilation and ?form=: a client that hangs up, or a
 * shutdown, sets the cancel flag) and the synchronous budget max_compile_seconds
 * (HAMEL_MAX_COMPILE_SECONDS); the answer is resolve.c's http__offload_on_model's (as
 * /v1/hamel), a stopped request answering as a stopped compilation does: 422
 * compile-limit past the budget, 503 (retry) when cancelled.
 */
#include "http_conn.h"

/* A cancelled request's answer: 503 unavailable (retry), as a cancelled compilation's. */
void http__lin_cancelled(http_conn *c, const char *what)
{
    if (c->work.rc != HAMEL_E_CANCELLED)
        return;
    json_decref(c->work.problem);
    char detail[200];
    snprintf(detail, sizeof detail,
             "the %s was cancelled (the service is stopping, or the client went away); retry", what);
    c->work.problem = hamel_problem_new(HAMEL_E_UNAVAILABLE, detail);
    c->work.rc = HAMEL_E_UNAVAILABLE;
}

/* Offloaded: engine_linearize of c->work.model about c->work.body. */
static void http__run_linearize(void *arg)
{
    http_conn *c = arg;
    http__watch_begin(c);
    c->work.rc = isolate_linearize(c->work.model, c->work.body, c->srv->d.limits, &c->work.ctl, &c->work.out,
                                   &c->work.problem);
    http__watch_end(c, c->work.rc);
    http__lin_cancelled(c, "linearization");
}

enum MHD_Result http__post_linearize(http_conn *c, json_t *body)
{
    return http__offload_on_model(c, body, http__run_linearize);
}
