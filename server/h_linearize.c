/* h_linearize.c — POST /v1/linearize: the linearized equations about an operating point.
 *
 * Owns the request's work: engine_linearize on the resolved model, run on the offload
 * pool; the answer is resolve.c's http__offload_on_model's (as /v1/hamel).
 */
#include "http_conn.h"

/* Offloaded: engine_linearize of c->work_model about c->pending. */
static void http__run_linearize(void *arg)
{
    http_conn *c = arg;
    c->work_rc =
        engine_linearize(c->work_model, c->pending, c->srv->d.limits, NULL, &c->out, &c->out_problem);
}

enum MHD_Result http__post_linearize(http_conn *c, json_t *body)
{
    return http__offload_on_model(c, body, http__run_linearize);
}
