/* fuzz_model.c — libFuzzer target for engine_model_compile (engine/engine.h).
 *
 * The input is JSON text. Whatever it holds, compilation must return either 0 with
 * a model whose summary and canonical form exist, or a negative code with a problem
 * document that has a type, a status and a non-empty errors array of {path, reason}
 * — never crash, leak or hang. Limits are tighter than the defaults so that each run
 * stays short; hitting one is an ordinary error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static void fail(const char *what, const char *dump)
{
    fprintf(stderr, "fuzz_model: %s\n  %s\n", what, dump ? dump : "");
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    engine_init();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    json_error_t jerr;
    json_t *js = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
    if (!js)
        return 0;
    engine_limits lim = engine_default_limits;
    lim.max_expr_chars = 2000;
    lim.max_nodes = 200000;
    lim.max_coordinates = 12;
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(js, &lim, &m, &problem);
    if (rc == 0) {
        if (!m || problem)
            fail("success without a model, or with a problem", NULL);
        json_t *s = engine_model_summary(m);
        if (!s || !json_is_string(json_object_get(s, "model_id")))
            fail("summary without model_id", engine_model_canonical(m));
        if (!engine_model_canonical(m) || strncmp(engine_model_id(m), "sha256:", 7) != 0)
            fail("no canonical form or id", NULL);
        json_t *eq = NULL, *prob2 = NULL;
        if (engine_equations(m, &eq, &prob2) == 0)
            json_decref(eq);
        else
            json_decref(prob2);
        json_decref(s);
        engine_model_release(m);
    } else {
        if (m || !problem)
            fail("failure without a problem document", NULL);
        char *dump = json_dumps(problem, JSON_COMPACT);
        json_t *errs = json_object_get(problem, "errors");
        /* The engine writes no HTTP status (the service maps codes to statuses): a problem
         * has a type among the engine's; an error of the input (not internal) names where. */
        const char *type = json_string_value(json_object_get(problem, "type"));
        if (!type || strncmp(type, HAMEL_PROBLEM_TYPE_PREFIX, strlen(HAMEL_PROBLEM_TYPE_PREFIX)) != 0)
            fail("problem without a type", dump);
        if (hamel_problem_code(problem) != HAMEL_E_INTERNAL) {
            if (json_array_size(errs) == 0)
                fail("a 4xx problem without errors", dump);
            for (size_t i = 0; i < json_array_size(errs); i++) {
                json_t *e = json_array_get(errs, i);
                if (!json_is_string(json_object_get(e, "path")) ||
                    !json_is_string(json_object_get(e, "reason")))
                    fail("an error without path or reason", dump);
            }
        }
        free(dump);
        json_decref(problem);
    }
    json_decref(js);
    return 0;
}
