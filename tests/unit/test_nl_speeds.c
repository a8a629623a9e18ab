/* test_nl_speeds.c — nonlinear constraints in the reduced form (issue 15 item 6):
 *
 * - a speed that becomes singular (the constant-speed particle with u = x', where
 *   y' = 0 at the top of its arc): the watch re-chooses a plain velocity as it does
 *   default speeds and the run agrees with the multipliers formulation; a speed it
 *   cannot re-choose (u = 2 x') ends with the 422 singular-transformation naming t, q
 *   and the constraint, not "the right-hand side could not be evaluated";
 * - speeds that leave two roots for q' are a 422 naming them, unless the request gives
 *   qdot (then that root);
 * - summary.dof is the number of speeds listed, for every kind of model.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "support.h"

static void setup(void) { engine_init(); }

#define PARTICLE(SPEED)                                                                                      \
    "{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"m\": 2, \"g\": 9.81, \"v\": 3},"                   \
    " \"kinetic_energy\": \"m/2*(x'^2 + y'^2)\", \"potential_energy\": \"m*g*y\","                           \
    " \"constraints\": [{\"name\": \"speed\", \"expr\": \"x'^2 + y'^2 - v^2\"}],"                            \
    " \"speeds\": [{\"name\": \"u\", \"expr\": \"" SPEED "\"}]}"

/* Upwards at 37 degrees: the top of the arc (y' = 0, x' = v) comes at t ~ 0.22. */
#define OVER_THE_TOP(FORM, INITIAL)                                                                          \
    "{\"initial\": {\"q\": {\"x\": 0.5, \"y\": 1}, " INITIAL "}, \"t_end\": 1.5, \"output\": {\"samples\": " \
    "151}, \"integrator\": {\"rtol\": 1e-11, \"atol\": 1e-13}, \"formulation\": \"" FORM "\"}"

static json_t *fails(engine_model *m, const char *request, int *rc)
{
    json_t *req = support_loads(request), *res = NULL, *problem = NULL;
    *rc = engine_simulate(m, req, NULL, NULL, &res, &problem);
    json_decref(req);
    char *text = res ? json_dumps(res, JSON_COMPACT) : NULL;
    cr_assert_neq(*rc, 0, "the run succeeded: %.300s", text ? text : "");
    free(text);
    json_decref(res);
    return problem;
}

Test(nl_speeds, a_velocity_speed_that_turns_singular_is_re_chosen, .init = setup)
{
    engine_model *m = support_compile_text(PARTICLE("x'"));
    json_t *a = support_run(m, OVER_THE_TOP("hamel", "\"qdot\": {\"x\": 2.4, \"y\": 1.8}"));
    json_t *b = support_run(m, OVER_THE_TOP("multipliers", "\"qdot\": {\"x\": 2.4, \"y\": 1.8}"));
    json_int_t switches = json_integer_value(json_object_get(json_object_get(a, "stats"), "speed_switches"));
    cr_assert_geq(switches, 1, "the watch re-chose the speed near the top");
    size_t ns = json_array_size(json_object_get(json_object_get(a, "trajectory"), "t"));
    cr_assert_eq(ns, 151);
    double d = 0.0, du = 0.0;
    static const char *const xy[] = {"x", "y"};
    for (size_t i = 0; i < ns; i++) {
        for (int c = 0; c < 2; c++) {
            d = fmax(d, fabs(support_at(a, "q", xy[c], i) - support_at(b, "q", xy[c], i)));
            d = fmax(d, fabs(support_at(a, "qdot", xy[c], i) - support_at(b, "qdot", xy[c], i)));
        }
        du = fmax(du, fabs(support_at(a, "speeds", "u", i) - support_at(a, "qdot", "x", i)));
    }
    cr_assert_lt(d, 1e-7, "over the top the reduced run agrees with multipliers: %.3g", d);
    cr_assert_lt(du, 1e-15, "the samples report the model's own speed u = x': %.3g", du);
    cr_assert_lt(support_at(a, "qdot", "y", ns - 1), -1.0, "the particle comes down after the top");
    json_decref(a);
    json_decref(b);
    engine_model_release(m);
}

Test(nl_speeds, a_speed_that_cannot_be_re_chosen_is_the_precise_422, .init = setup)
{
    engine_model *m = support_compile_text(PARTICLE("2*x'"));
    int rc;
    json_t *p = fails(m, OVER_THE_TOP("hamel", "\"qdot\": {\"x\": 2.4, \"y\": 1.8}"), &rc);
    char *text = json_dumps(p, JSON_COMPACT);
    cr_assert_eq(rc, HAMEL_E_SINGULAR, "%s", text);
    const char *detail = json_string_value(json_object_get(p, "detail"));
    cr_assert_not_null(detail);
    cr_assert(strstr(detail, "t = ") && strstr(detail, "q = (x = ") && strstr(detail, "constraint speed"),
              "the problem names t, q and the constraint: %s", detail);
    cr_assert_null(strstr(detail, "could not be evaluated"), "%s", detail);
    double t = json_number_value(json_object_get(p, "t_reached"));
    cr_assert(t > 0.1 && t < 0.3, "stopped near the top of the arc (t %.3g)", t);
    free(text);
    json_decref(p);
    engine_model_release(m);
}

Test(nl_speeds, speeds_with_two_roots_are_a_422_unless_qdot_is_given, .init = setup)
{
    engine_model *m = support_compile_text(PARTICLE("x'"));
    int rc;
    json_t *p = fails(m, OVER_THE_TOP("hamel", "\"speeds\": {\"u\": 2.4}"), &rc);
    char *text = json_dumps(p, JSON_COMPACT);
    cr_assert_neq(hamel_problem_code(p), HAMEL_E_INTERNAL, "%s", text);
    const json_t *e = json_array_get(json_object_get(p, "errors"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(e, "path")), "initial.speeds", "%s", text);
    const json_t *roots = json_object_get(p, "roots");
    cr_assert_eq(json_array_size(roots), 2, "both roots are named: %s", text);
    double y0 = json_number_value(json_object_get(json_array_get(roots, 0), "y"));
    double y1 = json_number_value(json_object_get(json_array_get(roots, 1), "y"));
    cr_assert(fabs(fabs(y0) - 1.8) < 1e-12 && fabs(y0 + y1) < 1e-12, "y' = +-1.8: %s", text);
    cr_assert_not_null(strstr(json_string_value(json_object_get(e, "reason")), "qdot"), "%s", text);
    free(text);
    json_decref(p);

    /* the lower root given as qdot: that one is taken */
    json_t *r = support_run(m, OVER_THE_TOP("hamel", "\"qdot\": {\"x\": 2.4, \"y\": -1.8}"));
    cr_assert_float_eq(support_at(r, "qdot", "y", 0), -1.8, 1e-12);
    cr_assert_lt(support_at(r, "qdot", "y", 10), -1.8, "and it goes on down");
    json_decref(r);

    /* the same at a single point: /v1/hamel with speeds */
    json_t *req = support_loads("{\"q\": {\"x\": 0.5, \"y\": 1}, \"speeds\": {\"u\": 2.4}}"), *res = NULL;
    p = NULL;
    rc = engine_hamel(m, req, NULL, &res, &p);
    text = p ? json_dumps(p, JSON_COMPACT) : NULL;
    cr_assert_neq(rc, 0, "hamel at speeds with two roots answered");
    cr_assert_eq(json_array_size(json_object_get(p, "roots")), 2, "%s", text ? text : "");
    free(text);
    json_decref(p);
    json_decref(res);
    json_decref(req);
    engine_model_release(m);

    /* Appell's constraint z' = a sqrt(x'^2 + y'^2): the speeds leave one root, which runs */
    m = support_compile_text(
        "{\"coordinates\": [\"x\", \"y\", \"z\"], \"parameters\": {\"a\": 0.5},"
        " \"kinetic_energy\": \"(x'^2 + y'^2 + z'^2)/2\", \"constraints\": [{\"name\": "
        "\"wheel\", \"expr\": \"z' - a*sqrt(x'^2 + y'^2)\"}], \"speeds\": [{\"name\": \"e1\", "
        "\"expr\": \"x'\"}, {\"name\": \"e2\", \"expr\": \"y'\"}]}");
    r = support_run(
        m, "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"z\": 0}, \"speeds\": {\"e1\": 3, \"e2\": 4}},"
           " \"t_end\": 0.5}");
    cr_assert_float_eq(support_at(r, "qdot", "z", 0), 2.5, 1e-12, "the one root z' = a v");
    json_decref(r);
    engine_model_release(m);
}

Test(nl_speeds, dof_is_the_number_of_speeds, .init = setup)
{
    static const char *const models[] = {
        /* linear */
        "{\"coordinates\": [\"x\", \"y\", \"th\"], \"kinetic_energy\": \"x'^2 + y'^2 + th'^2\","
        " \"constraints\": [\"sin(th)*x' - cos(th)*y'\"]}",
        /* nonlinear, reduced */
        PARTICLE("x'"),
        /* nonlinear with multipliers, default speeds */
        "{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2 + y'^2\", \"constraints\": [\"x'^2 + "
        "y'^2 - "
        "9\"]}",
        /* nonlinear and linear with multipliers, default speeds */
        "{\"coordinates\": [\"x\", \"y\", \"z\"], \"kinetic_energy\": \"x'^2 + y'^2 + z'^2\", "
        "\"constraints\": "
        "[\"z' - x'\", \"x'^2 + y'^2 - 9\"]}",
        /* nonlinear with multipliers, n - (linear constraints) speeds given */
        "{\"coordinates\": [\"x\", \"y\", \"z\"], \"kinetic_energy\": \"x'^2 + y'^2 + z'^2\", "
        "\"constraints\": "
        "[\"z' - x'\", \"x'^2 + y'^2 - 9\"], \"speeds\": [{\"name\": \"u\", \"expr\": \"x'\"}, {\"name\": "
        "\"w\", "
        "\"expr\": \"y'\"}]}",
    };
    static const int dof[] = {2, 1, 1, 1, 1};
    for (int i = 0; i < 5; i++) {
        engine_model *m = support_compile_text(models[i]);
        json_t *s = engine_model_summary(m);
        json_int_t d = json_integer_value(json_object_get(s, "dof"));
        cr_assert_eq(d, dof[i], "model %d: dof %lld", i, (long long)d);
        cr_assert_eq((size_t)d, json_array_size(json_object_get(s, "speeds")),
                     "model %d: dof = the speeds listed", i);
        cr_assert_eq((size_t)d, json_array_size(json_object_get(s, "speed_definitions")), "model %d", i);
        json_decref(s);
        engine_model_release(m);
    }
}
