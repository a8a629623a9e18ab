/* fuzz_request.c — libFuzzer target for simulation and Hamel-coefficient requests.
 *
 * The input is JSON text, read as a request against one fixed model (the rolling disk
 * of Greenwood 5.3, with a nonholonomic and a holonomic reading of its state). Whatever
 * it holds, engine_simulation_key, engine_simulation_check, engine_simulate (when the
 * check passes) and engine_hamel must each return 0 with a result, or an error code with
 * a problem document of type and status — never crash, leak or hang. Limits are tight so
 * that each run stays short; reaching one is an ordinary failure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static engine_model *model;
static engine_limits lim;

static const char model_json[] =
    "{\"coordinates\": [\"phi\", \"theta\", \"psi\", \"x\", \"y\"],"
    " \"parameters\": {\"m\": 1, \"r\": 0.5, \"g\": 9.81},"
    " \"kinetic_energy\": \"1/8*m*r^2*phi'^2*(1+5*cos(theta)^2) + 5/8*m*r^2*theta'^2"
    " + 3/4*m*r^2*psi'^2 + 3/2*m*r^2*phi'*psi'*sin(theta)\","
    " \"potential_energy\": \"m*g*r*sin(theta)\","
    " \"constraints\": [{\"name\": \"slip_x\", \"expr\": \"r*psi'*cos(phi) + x'\"},"
    "  {\"name\": \"slip_y\", \"expr\": \"r*psi'*sin(phi) + y'\"}],"
    " \"speeds\": [{\"name\": \"wd\", \"expr\": \"phi'*sin(theta)\"}, {\"name\": \"thd\", \"expr\": "
    "\"theta'\"},"
    "  {\"name\": \"Omega\", \"expr\": \"phi'*cos(theta) + psi'\"}]}";

static void fail(const char *what, const json_t *doc)
{
    char *dump = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    fprintf(stderr, "fuzz_request: %s\n  %s\n", what, dump ? dump : "");
    abort();
}

/* rc and the two out-parameters must agree: 0 with a result, else a problem. */
static void check_outcome(const char *who, int rc, json_t *result, json_t *problem)
{
    if (rc == 0) {
        if (!result || problem)
            fail(who, problem);
    } else {
        const char *type = json_string_value(json_object_get(problem, "type"));
        if (result || !type ||
            strncmp(type, HAMEL_PROBLEM_TYPE_PREFIX, strlen(HAMEL_PROBLEM_TYPE_PREFIX)) != 0)
            fail(who, problem);
    }
    json_decref(result);
    json_decref(problem);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    engine_init();
    lim = engine_default_limits;
    lim.max_samples = 200;
    lim.max_steps = 5000;
    lim.max_wall_seconds = 0.5;
    lim.max_points = 50;
    json_t *js = json_loads(model_json, 0, NULL);
    json_t *problem = NULL;
    if (!js || engine_model_compile(js, &lim, &model, &problem) != 0)
        fail("the fixed model does not compile", problem);
    json_decref(js);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16 * 1024)
        return 0;
    json_error_t jerr;
    json_t *req = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
    if (!req)
        return 0;
    char key[80];
    json_t *problem = NULL, *result = NULL;
    int rc = engine_simulation_key(model, req, key, &problem);
    check_outcome("engine_simulation_key", rc, rc == 0 ? json_string(key) : NULL, problem);
    problem = NULL;
    rc = engine_simulation_check(model, req, &lim, &problem);
    if (rc != 0 && !problem)
        fail("engine_simulation_check failed without a problem", req);
    json_decref(problem);
    if (rc == 0) {
        problem = NULL;
        rc = engine_simulate(model, req, &lim, NULL, &result, &problem);
        check_outcome("engine_simulate", rc, result, problem);
    }
    result = problem = NULL;
    rc = engine_hamel(model, req, &lim, &result, &problem);
    check_outcome("engine_hamel", rc, result, problem);
    json_decref(req);
    return 0;
}
