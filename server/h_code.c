/* h_code.c — generated code: POST /v1/code (a simulation request with "lang": the
 * file bakes its state and has a main) and GET /v1/models/{id}/code?lang= (no state, no
 * main).
 *
 * Owns the two answers: engine_code in an engine worker (isolate.h), waited for on the
 * offload pool (a bicycle's file is megabytes of text), then the file itself as the body, text/x-c or
 * text/x-python. Resolution and compilation of the model are resolve.c's, as for /v1/linearize.
 */
#include <stdlib.h>
#include <string.h>

#include "http_conn.h"

/* engine_code of c->work.model in `lang` with `request` (may be NULL) into c->work.out as
 * {"lang", "text"}, or c->work.problem. */
static void http__code_into(http_conn *c, const char *lang, const json_t *request)
{
    char *text = NULL;
    size_t len = 0;
    c->work.rc = isolate_code(c->work.model, request, lang, c->srv->d.limits, &text, &len, &c->work.problem);
    if (c->work.rc != 0)
        return;
    c->work.out =
        json_pack("{s:s, s:s%}", "lang", lang && !strcmp(lang, "python") ? "python" : "c", "text", text, len);
    free(text);
    if (!c->work.out) {
        c->work.rc = HAMEL_E_INTERNAL;
        c->work.problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
    }
}

/* Offloaded: POST /v1/code, the body's "lang" (default "c"). */
static void http__run_code_post(void *arg)
{
    http_conn *c = arg;
    const json_t *lang = json_object_get(c->work.body, "lang");
    if (lang && !json_is_string(lang)) {
        c->work.rc = HAMEL_E_BAD_REQUEST;
        c->work.problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, "the request is not valid");
        hamel_problem_add(c->work.problem, "lang", -1, "must be \"c\" or \"python\"");
        return;
    }
    http__code_into(c, lang ? json_string_value(lang) : "c", c->work.body);
}

/* Offloaded: GET /v1/models/{id}/code, ?lang= (default "c"). */
static void http__run_code_get(void *arg)
{
    http_conn *c = arg;
    const char *lang = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "lang");
    http__code_into(c, lang ? lang : "c", NULL);
}

/* The file as the body, or the problem. */
static enum MHD_Result http__resume_code(http_conn *c)
{
    json_t *out = c->work.out, *problem = c->work.problem;
    c->work.out = c->work.problem = NULL;
    if (c->work.rc != 0)
        return http__problem(c, problem ? problem : hamel_problem_new(c->work.rc, NULL));
    const json_t *tx = json_object_get(out, "text");
    size_t len = json_string_length(tx);
    char *text = malloc(len + 1);
    int py = !strcmp(json_string_value(json_object_get(out, "lang")), "python");
    if (text)
        memcpy(text, json_string_value(tx), len + 1);
    json_decref(out);
    if (!text)
        return http__error(c, HAMEL_E_INTERNAL, "out of memory");
    return http__send(c, 200, http__text_response(text, len), py ? "text/x-python" : "text/x-c", len);
}

enum MHD_Result http__post_code(http_conn *c, json_t *body)
{
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = http__model_of(c, body, &m, &problem);
    if (rc != 0)
        return http__problem(c, problem);
    http__hold_work(c, m, body);
    return http__offload(c, http__run_code_post, http__resume_code);
}

enum MHD_Result http__model_code(http_conn *c)
{
    enum MHD_Result ret;
    if (!c->resolve.pre.set && http__compile_stored_first(c, c->id, http__model_code, &ret))
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
    c->work.model = m;
    return http__offload(c, http__run_code_get, http__resume_code);
}
