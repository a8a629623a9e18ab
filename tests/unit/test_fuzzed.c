/* test_fuzzed.c — what the case fuzzer (tests/fuzz/fuzz_case.c: a whole case, model and
 * requests, mutated as a JSON tree) found, each kept as the smallest input that showed it.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The start of a model of n coordinates q0..q(n-1) with T = sum q_i'^2 / 2, written into
 * text: `{"coordinates": [...], "kinetic_energy": "(...)/2"` (the caller goes on at the
 * returned offset). */
static int unit_masses(char *text, size_t cap, int n)
{
    int at = snprintf(text, cap, "{\"coordinates\": [");
    for (int i = 0; i < n; i++)
        at += snprintf(text + at, cap - at, "%s\"q%d\"", i ? ", " : "", i);
    at += snprintf(text + at, cap - at, "], \"kinetic_energy\": \"(");
    for (int i = 0; i < n; i++)
        at += snprintf(text + at, cap - at, "%sq%d'^2", i ? " + " : "", i);
    at += snprintf(text + at, cap - at, ")/2\"");
    return at;
}

/* n = 8 coordinates, T = sum q_i'^2 / 2, speeds u_j = q_j' + 0.1 sin(q_j) q_{j+1}' (cyclic):
 * 112 Hamel coefficients are not identically zero. */
static engine_model *cyclic_model(void)
{
    char text[4096];
    int at = unit_masses(text, sizeof text, 8);
    at += snprintf(text + at, sizeof text - at, ", \"speeds\": [");
    for (int j = 0; j < 8; j++)
        at += snprintf(text + at, sizeof text - at, "%s\"q%d' + 0.1*sin(q%d)*q%d'\"", j ? ", " : "", j, j,
                       (j + 1) % 8);
    snprintf(text + at, sizeof text - at, "]}");
    return support_compile_text(text);
}

/* {"points": [np x {"q": {q_i: 0.1}}]} */
static json_t *cyclic_points(int np)
{
    json_t *pts = json_array();
    for (int p = 0; p < np; p++) {
        json_t *q = json_object();
        for (int i = 0; i < 8; i++) {
            char name[8];
            snprintf(name, sizeof name, "q%d", i);
            json_object_set_new(q, name, json_real(0.1));
        }
        json_array_append_new(pts, json_pack("{s:o}", "q", q));
    }
    return json_pack("{s:o}", "points", pts);
}

/* The answer's size bounds the Hamel coefficients' points, as it bounds a simulation's
 * samples: a point is t, q and the four members of each coefficient listed. POST
 * /v1/hamel with 10,000 points of a 12-coordinate model with 1,452 coefficients (within
 * max_points and points x n^4) built 58 million numbers: its engine worker passed the
 * deadline after 38 s and was killed, and the model was quarantined. */
Test(fuzzed, hamel_points_are_bounded_by_the_answers_size)
{
    engine_model *m = cyclic_model();
    engine_limits lim = engine_default_limits;
    lim.max_output_values = 100000; /* 1 + 8 + 4 x 112 = 457 values a point: 218 points */
    json_t *result = NULL, *problem = NULL, *req = cyclic_points(200);
    cr_assert_eq(engine_hamel(m, req, &lim, &result, &problem), 0, "200 points are within the limit");
    cr_assert_eq(
        json_array_size(json_object_get(json_array_get(json_object_get(result, "points"), 0), "gamma")), 112);
    json_decref(result);
    json_decref(req);
    result = NULL;
    req = cyclic_points(300);
    cr_assert_eq(engine_hamel(m, req, &lim, &result, &problem), HAMEL_E_LIMIT, "300 points are not");
    assert_names(problem, "points", "engine_hamel");
    const char *why =
        json_string_value(json_object_get(json_array_get(json_object_get(problem, "errors"), 0), "reason"));
    cr_assert(why && strstr(why, "300 points x 457 values"), "%s", why ? why : "(null)");
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
}

/* A simulation's "hamel": "samples" counts each sample's coefficients in its size: 70,000
 * samples of the model above were within max_output_values (27 series) and wrote 900 MB
 * of JSON (7.4 GB of memory in `hamel run`). */
Test(fuzzed, hamel_samples_count_in_a_simulations_size)
{
    engine_model *m = cyclic_model();
    engine_limits lim = engine_default_limits;
    lim.max_output_values = 100000;
    json_t *req =
        support_loads("{\"initial\": {\"q\": {\"q0\": 0.1, \"q1\": 0.1, \"q2\": 0.1, \"q3\": 0.1, \"q4\": "
                      "0.1, \"q5\": 0.1, \"q6\": 0.1, \"q7\": 0.1}, \"qdot\": {\"q0\": 0.1, \"q1\": 0.1, "
                      "\"q2\": 0.1, \"q3\": 0.1,"
                      " \"q4\": 0.1, \"q5\": 0.1, \"q6\": 0.1, \"q7\": 0.1}},"
                      " \"t_end\": 1, \"output\": {\"samples\": 300}, \"hamel\": \"samples\"}");
    json_t *problem = NULL;
    cr_assert_eq(engine_simulation_check(m, req, &lim, &problem), HAMEL_E_LIMIT);
    assert_names(problem, "output", "engine_simulation_check");
    json_decref(problem);
    problem = NULL;
    json_object_set_new(req, "hamel", json_string("initial"));
    cr_assert_eq(engine_simulation_check(m, req, &lim, &problem), 0,
                 "without the samples' coefficients it fits");
    json_decref(req);
    engine_model_release(m);
}

/* A chain of 20 pendulum-like coordinates, V = -sum cos(q_i - q_{i+1}), and a request of
 * np copies of the state q = 0 (an equilibrium), q' = 0, under `member`. */
static engine_model *chain_model(void)
{
    char text[4096];
    int at = unit_masses(text, sizeof text, 20);
    at += snprintf(text + at, sizeof text - at, ", \"potential_energy\": \"0");
    for (int i = 0; i < 19; i++)
        at += snprintf(text + at, sizeof text - at, " - cos(q%d - q%d)", i, i + 1);
    snprintf(text + at, sizeof text - at, "\"}");
    return support_compile_text(text);
}

static json_t *chain_states(const char *member, int np)
{
    json_t *arr = json_array();
    for (int p = 0; p < np; p++) {
        json_t *q = json_object(), *qd = json_object();
        for (int i = 0; i < 20; i++) {
            char name[8];
            snprintf(name, sizeof name, "q%d", i);
            json_object_set_new(q, name, json_real(0));
            json_object_set_new(qd, name, json_real(0));
        }
        json_array_append_new(arr, json_pack("{s:o, s:o}", "q", q, "qdot", qd));
    }
    return json_pack("{s:o}", member, arr);
}

/* Linearize and evaluate answer within max_output_values too: 10,000 points of a
 * 60-coordinate chain (A 120 x 120 each) were within max_states and the work bound, and
 * `hamel linearize` ran 293 s to print 1.6 GB of JSON, holding 8 GB. */
Test(fuzzed, linearize_and_evaluate_are_bounded_by_the_answers_size)
{
    engine_model *m = chain_model();
    engine_limits lim = engine_default_limits;
    lim.max_output_values = 10000; /* a point: 4 + 2 x 20 + 2 x 20 + 40^2 + 2 x 40 = 1764; a state: 104 */
    json_t *result = NULL, *problem = NULL, *req = chain_states("points", 5);
    cr_assert_eq(engine_linearize(m, req, &lim, NULL, &result, &problem), 0, "5 points are within the limit");
    json_decref(result);
    json_decref(req);
    result = NULL;
    req = chain_states("points", 6);
    cr_assert_eq(engine_linearize(m, req, &lim, NULL, &result, &problem), HAMEL_E_LIMIT, "6 points are not");
    assert_names(problem, "points", "engine_linearize");
    json_decref(problem);
    json_decref(req);
    problem = NULL;
    req = chain_states("states", 90);
    cr_assert_eq(engine_evaluate(m, req, &lim, &result, &problem), 0, "90 states are within the limit");
    json_decref(result);
    json_decref(req);
    result = NULL;
    req = chain_states("states", 100);
    cr_assert_eq(engine_evaluate(m, req, &lim, &result, &problem), HAMEL_E_LIMIT, "100 states are not");
    assert_names(problem, "states", "engine_evaluate");
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
}

/* The detail of a failed run of `request` on the model `model` (JSON texts). */
static char *failed_run_detail(const char *model, const char *request)
{
    engine_model *m = support_compile_text(model);
    json_t *req = support_loads(request), *result = NULL, *problem = NULL;
    cr_assert_neq(engine_simulate(m, req, NULL, NULL, &result, &problem), 0, "the run should fail");
    char *detail = strdup(json_string_value(json_object_get(problem, "detail")));
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
    return detail;
}

/* A run that meets a value that is not finite names the state or the event: it said
 * "component 2 is -inf" and "event 0 is not finite", numbers of the integrator's own
 * layout (q then the speeds, or q then q'). */
Test(fuzzed, a_value_that_is_not_finite_is_named)
{
    const char *model = "{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2/2 + y'^2/2\","
                        " \"potential_energy\": \"-1e308*exp(1e308*y)\"}";
    const char *const forms[] = {"hamel", "multipliers"};
    for (int f = 0; f < 2; f++) {
        char request[400];
        snprintf(request, sizeof request,
                 "{\"initial\": {\"q\": {\"x\": 0, \"y\": 1}, \"qdot\": {\"x\": 0, \"y\": 0}}, \"t_end\": 1,"
                 " \"formulation\": \"%s\"}",
                 forms[f]);
        char *detail = failed_run_detail(model, request);
        cr_assert(strstr(detail, "the rate of ") && !strstr(detail, "component"), "%s: %s", forms[f], detail);
        free(detail);
    }
    char *detail = failed_run_detail("{\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2/2\"}",
                                     "{\"initial\": {\"q\": {\"x\": 1}, \"qdot\": {\"x\": -1}}, \"t_end\": 2,"
                                     " \"events\": [{\"name\": \"wall\", \"expr\": \"log(x)\"}]}");
    cr_assert(strstr(detail, "event \"wall\" is not finite"), "%s", detail);
    free(detail);
}

/* A stopped run's partial result shows the run was restarted after position projections. */
static void assert_projected(const json_t *problem)
{
    const json_t *pos = json_object_get(
        json_object_get(json_object_get(json_object_get(problem, "partial"), "checks"), "constraints"),
        "position");
    cr_assert_gt(json_integer_value(json_object_get(pos, "projections")), 0,
                 "the run was restarted after projections");
}

/* The wall-time budget is the whole simulation's: a run restarted after each projection
 * onto its position constraints (or after a new chart of speeds) gave every restart a
 * budget of its own, so a pendulum whose drift is projected at every sample ran far past
 * max_wall_seconds — past the service's hard deadline, where its engine worker was
 * killed and the model quarantined (HAMEL_MAX_WALL=2: killed after 32 s). */
Test(fuzzed, the_wall_time_budget_spans_the_restarts)
{
    engine_model *m = support_compile_text("{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"g\": 9.81},"
                                           " \"kinetic_energy\": \"(x'^2 + y'^2)/2\","
                                           " \"potential_energy\": \"g*y + 1000*sin(1000*x)\","
                                           " \"position_constraints\": [\"x^2 + y^2 - 1\"]}");
    json_t *req =
        support_loads("{\"initial\": {\"q\": {\"x\": 0.6, \"y\": -0.8}, \"speeds\": {\"x'\": 0}},"
                      " \"t_end\": 10, \"output\": {\"samples\": 1000}, \"position_tolerance\": 1e-14,"
                      " \"integrator\": {\"rtol\": 1e-13, \"atol\": 1e-15, \"max_steps\": 100000000}}");
    engine_limits lim = engine_default_limits;
    lim.max_wall_seconds = 0.3;
    json_t *result = NULL, *problem = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = engine_simulate(m, req, &lim, NULL, &result, &problem);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    cr_assert_eq(rc, HAMEL_E_TIME_LIMIT,
                 "a run of 1000 projected samples stops at 0.3 s (rc %d after %.2f s)", rc, took);
    cr_assert_lt(took, 5.0, "within its budget (and the checks after it): %.2f s", took);
    assert_projected(problem);
    json_decref(result);
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
}

/* Sorting the operands of a sum or a product counts as work of the compile budget: the
 * derivative of sin(sin(...(x))) 3000 deep builds products of thousands of deep factors
 * with hardly a new node, and the budget (ticked per node) was read twice in 53 s of CPU
 * time (2 s allowed). 1500 deep: about 7 s of CPU time before. */
Test(fuzzed, sorting_deep_operands_is_within_the_compile_budget)
{
    size_t cap = 1 << 16, at = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    at += snprintf(text + at, cap - at,
                   "{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2/2 + y'^2/2\","
                   " \"potential_energy\": \"d1499\", \"definitions\": [{\"name\": \"d0\", \"expr\": \"x\"}");
    for (int i = 1; i < 1500; i++)
        at += snprintf(text + at, cap - at, ", {\"name\": \"d%d\", \"expr\": \"sin(d%d)\"}", i, i - 1);
    snprintf(text + at, cap - at, "]}");
    json_t *js = support_loads(text);
    free(text);
    engine_limits lim = engine_default_limits;
    lim.max_compile_seconds = 0.25;
    engine_model *m = NULL;
    json_t *problem = NULL;
    clock_t c0 = clock();
    int rc = engine_model_compile(js, &lim, &m, &problem);
    double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    cr_assert_eq(rc, HAMEL_E_COMPILE_LIMIT, "rc %d after %.2f s of CPU time", rc, cpu);
    cr_assert_lt(cpu, 2.0, "stopped near its budget of 0.25 s: %.2f s of CPU time", cpu);
    json_decref(problem);
    engine_model_release(m);
    json_decref(js);
}

/* The step budget is the whole simulation's too: after each projection the run started
 * with the whole of integrator.max_steps again (2000 allowed, 3531 taken, no failure). */
Test(fuzzed, the_step_budget_spans_the_restarts)
{
    engine_model *m =
        support_compile_text("{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"g\": 9.81},"
                             " \"kinetic_energy\": \"(x'^2 + y'^2)/2\", \"potential_energy\": \"g*y\","
                             " \"position_constraints\": [\"x^2 + y^2 - 1\"]}");
    json_t *req =
        support_loads("{\"initial\": {\"q\": {\"x\": 0.6, \"y\": -0.8}, \"speeds\": {\"x'\": 0}},"
                      " \"t_end\": 100, \"output\": {\"samples\": 1000}, \"position_tolerance\": 1e-14,"
                      " \"integrator\": {\"rtol\": 1e-4, \"atol\": 1e-4, \"max_steps\": 2000}}");
    json_t *result = NULL, *problem = NULL;
    int rc = engine_simulate(m, req, NULL, NULL, &result, &problem);
    long steps =
        result ? (long)json_integer_value(json_object_get(json_object_get(result, "stats"), "steps")) : -1;
    cr_assert_eq(rc, HAMEL_E_STEP_LIMIT, "rc %d, %ld steps", rc, steps);
    const char *detail = json_string_value(json_object_get(problem, "detail"));
    cr_assert(detail && strstr(detail, "the budget of 2000 steps"), "%s", detail ? detail : "(null)");
    assert_projected(problem);
    json_decref(result);
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
}
