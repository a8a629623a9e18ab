/* h_steady.c — POST /v1/steady: steady motions, their branches and where their
 * stability changes (engine_steady).
 *
 * Owns the request's work: engine_steady in an engine worker, waited for on the offload
 * pool under the hang-up watch, as /v1/linearize (h_linearize.c), whose answers it shares:
 * 200 and the document, or the problem; a cancelled search is a 503 (retry).
 */
#include "http_conn.h"

/* Offloaded: engine_steady of c->work.model for c->work.body. */
static void http__run_steady(void *arg)
{
    http_conn *c = arg;
    http__watch_begin(c);
    c->work.rc = isolate_steady(c->work.model, c->work.body, c->srv->d.limits, &c->work.ctl, &c->work.out,
                                &c->work.problem);
    http__watch_end(c, c->work.rc);
    http__lin_cancelled(c, "steady-motion search");
}

enum MHD_Result http__post_steady(http_conn *c, json_t *body)
{
    return http__offload_on_model(c, body, http__run_steady);
}
