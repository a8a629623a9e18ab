/* test_fuzzed.c — what the case fuzzer (tests/fuzz/fuzz_case.c: a whole case, model and
 * requests, mutated as a JSON tree) found, each kept as the smallest input that showed it.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "support.h"

static void setup(void) { engine_init(); }

TestSuite(fuzzed, .init = setup, .timeout = 120);

static const char particle[] = "{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"m\": 1},"
                               " \"kinetic_energy\": \"m/2*(x'^2 + y'^2)\", \"potential_energy\": \"x^2/2\"}";

/* The first error of a problem names `path`. */
static void assert_names(const json_t *problem, const char *path, const char *who)
{
    json_t *errs = json_object_get(problem, "errors");
    cr_assert(json_array_size(errs) >= 1, "%s: a problem without errors", who);
    const char *p = json_string_value(json_object_get(json_array_get(errs, 0), "path"));
    cr_assert(p && !strcmp(p, path), "%s: the error names '%s', not '%s'", who, p ? p : "(null)", path);
}

/* A request that is not an object: every entry point names the whole body ("") in its
 * errors, as engine_simulate and engine_steady did (the key, the coefficients, evaluate
 * and linearize gave an empty errors list). */
Test(fuzzed, a_request_that_is_not_an_object_names_the_body)
{
    engine_model *m = support_compile_text(particle);
    json_t *req = json_string("x"), *problem = NULL, *result = NULL;
    char key[80];
    cr_assert_neq(engine_simulation_key(m, req, key, &problem), 0);
    assert_names(problem, "", "engine_simulation_key");
    json_decref(problem);
    problem = NULL;
    cr_assert_neq(engine_hamel(m, req, NULL, &result, &problem), 0);
    assert_names(problem, "", "engine_hamel");
    json_decref(problem);
    problem = NULL;
    cr_assert_neq(engine_evaluate(m, req, NULL, &result, &problem), 0);
    assert_names(problem, "", "engine_evaluate");
    json_decref(problem);
    problem = NULL;
    cr_assert_neq(engine_linearize(m, req, NULL, NULL, &result, &problem), 0);
    assert_names(problem, "", "engine_linearize");
    json_decref(problem);
    problem = NULL;
    cr_assert_neq(engine_simulate(m, req, NULL, NULL, &result, &problem), 0);
    assert_names(problem, "", "engine_simulate");
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
}
