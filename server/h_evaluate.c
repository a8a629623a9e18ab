/* h_evaluate.c — POST /v1/evaluate: the equations of motion evaluated at given states.
 *
 * Owns the request's work: engine_evaluate_ctl on the resolved model, run on the offload
 * pool under the hang-up watch and the synchronous budget, as /v1/linearize
 * (h_linearize.c); the answer is resolve.c's http__offload_on_model's (as /v1/hamel).
 */
#include "http_conn.h"

/* Offloaded: engine_evaluate_ctl of c->work.model at c->work.body. */
static void http__run_evaluate(void *arg)
{
    http_conn *c = arg;
    http__watch_begin(c);
    c->work.rc = isolate_evaluate_ctl(c->work.model, c->work.body, c->srv->d.limits, &c->work.ctl,
                                      &c->work.out, &c->work.problem);
    http__watch_end(c, c->work.rc);
    http__lin_cancelled(c, "evaluation");
}

enum MHD_Result http__post_evaluate(http_conn *c, json_t *body)
{
    return http__offload_on_model(c, body, http__run_evaluate);
}
