/* h_hamel.c — POST /v1/hamel: the Hamel coefficients of a model at given points.
 *
 * Owns the request's work: engine_hamel on the resolved model, run on the offload pool
 * (it can take seconds); the answer is resolve.c's http__offload_on_model's.
 */
#include "http_conn.h"

/* Offloaded: the Hamel coefficients of c->work.model at the points of c->work.body. */
static void http__run_hamel(void *arg)
{
    http_conn *c = arg;
    c->work.rc = isolate_hamel(c->work.model, c->work.body, c->srv->d.limits, &c->work.out, &c->work.problem);
}

enum MHD_Result http__post_hamel(http_conn *c, json_t *body)
{
    return http__offload_on_model(c, body, http__run_hamel);
}
