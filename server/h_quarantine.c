/* h_quarantine.c — the quarantine of models whose engine work faulted (quarantine.h):
 * GET /v1/quarantine lists the quarantined models, GET /v1/quarantine/{model_id} shows a
 * model's record, DELETE clears it (an operator's calls: they need the bearer token when
 * one is set, as every /v1 path does).
 *
 * The store is asked on the offload pool (with HAMEL_REDIS it is a round trip), as a
 * store read: done on the poll thread only when the pool's queue is full.
 */
#include "http_conn.h"
#include "quarantine.h"

/* Offloaded: look the record up, or clear it. */
static void http__run_quarantine(void *arg)
{
    http_conn *c = arg;
    if (c->method == HTTP_DELETE)
        c->work.rc = quarantine_clear(c->id);
    else
        c->work.rc = quarantine_check(c->id, &c->work.out) ? 0 : 1;
}

static enum MHD_Result http__quarantine_answer(http_conn *c)
{
    json_t *out = c->work.out;
    c->work.out = NULL;
    if (c->work.rc < 0)
        return http__error(c, HAMEL_E_UNAVAILABLE, "the store cannot be reached; retry");
    if (c->work.rc > 0) {
        json_decref(out);
        return http__error(c, HAMEL_E_NOT_FOUND, "this model is not quarantined");
    }
    if (c->method == HTTP_DELETE) {
        json_decref(out);
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        return http__send(c, MHD_HTTP_NO_CONTENT, r, NULL, 0);
    }
    return http__json(c, 200, json_pack("{s:s, s:o}", "model_id", c->id, "problem", out));
}

enum MHD_Result http__quarantine(http_conn *c)
{
    return http__offload_read(c, http__run_quarantine, http__quarantine_answer);
}

/* Offloaded: the listing. */
static void http__run_quarantine_list(void *arg)
{
    http_conn *c = arg;
    c->work.rc = quarantine_list(&c->work.out);
}

static enum MHD_Result http__quarantine_list_answer(http_conn *c)
{
    json_t *out = c->work.out;
    c->work.out = NULL;
    if (c->work.rc < 0 || !out) {
        json_decref(out);
        return http__error(c, HAMEL_E_UNAVAILABLE, "the store cannot be reached; retry");
    }
    return http__json(c, 200, out);
}

enum MHD_Result http__quarantine_list(http_conn *c)
{
    return http__offload_read(c, http__run_quarantine_list, http__quarantine_list_answer);
}
