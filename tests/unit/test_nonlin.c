/* test_nonlin.c — nonlinear (Chetaev) constraints in the reduced form (issue 10,
 * part 1): n - m speeds with m counting every constraint, q' solved from (q, u) by
 * Newton's method, the Boltzmann–Hamel (Poincare–Chetaev) equations on (q, u).
 *
 * - Appell's example (Hussain, §4.2): a particle under gravity with
 *   z' = a sqrt(x'^2 + y'^2) and speeds eta1 = x', eta2 = y'. Closed form (4.2.13),
 *   (4.2.14): eta_i' = -g a eta_i / ((1 + a^2) v), v = v0 - g a t / (1 + a^2), the
 *   direction fixed; positions s(t) = t (v0 - g a t / (2 (1 + a^2))) along it.
 * - The same model integrated with multipliers agrees to 1e-9.
 * - A particle at constant speed c under gravity (x'^2 + y'^2 = c^2) with one speed
 *   u = y': agrees with multipliers to 1e-9.
 * - A speed count that fits neither n - m nor n - (linear constraints) is refused
 *   naming both.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "support.h"

static void setup(void) { engine_init(); }

static double max_diff(const json_t *a, const json_t *b, const char *const *coords, int n)
{
    size_t ns = json_array_size(json_object_get(json_object_get(a, "trajectory"), "t"));
    cr_assert_eq(ns, json_array_size(json_object_get(json_object_get(b, "trajectory"), "t")));
    double d = 0.0;
    for (int c = 0; c < n; c++)
        for (size_t i = 0; i < ns; i++) {
            d = fmax(d, fabs(support_at(a, "q", coords[c], i) - support_at(b, "q", coords[c], i)));
            d = fmax(d, fabs(support_at(a, "qdot", coords[c], i) - support_at(b, "qdot", coords[c], i)));
        }
    return d;
}

#define APPELL                                                                                               \
    "{\"name\": \"appell\", \"coordinates\": [\"x\", \"y\", \"z\"], \"parameters\": {\"m\": 1, \"g\": "      \
    "9.81, "                                                                                                 \
    "\"a\": 0.5}, \"kinetic_energy\": \"1/2*m*(x'^2 + y'^2 + z'^2)\", \"potential_energy\": \"m*g*z\", "     \
    "\"constraints\": [{\"name\": \"wheel\", \"expr\": \"z' - a*sqrt(x'^2 + y'^2)\"}], \"speeds\": "         \
    "[{\"name\": \"eta1\", \"expr\": \"x'\"}, {\"name\": \"eta2\", \"expr\": \"y'\"}]}"

#define APPELL_REQ(FORM)                                                                                     \
    "{\"initial\": {\"q\": {\"x\": 0.1, \"y\": -0.2, \"z\": 0.3}, \"speeds\": {\"eta1\": 3, \"eta2\": 4}}, " \
    "\"t_end\": 1.2, \"output\": {\"samples\": 31}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}, "    \
    "\"formulation\": \"" FORM "\"}"

Test(nonlin, appell_closed_form, .init = setup)
{
    engine_model *m = support_compile_text(APPELL);
    json_t *s = engine_model_summary(m);
    cr_expect_eq(json_integer_value(json_object_get(s, "dof")), 2);
    cr_expect_str_eq(json_string_value(json_object_get(s, "default_formulation")), "hamel");
    json_decref(s);
    json_t *r = support_run(m, APPELL_REQ("hamel"));
    const double a = 0.5, g = 9.81, v0 = 5.0, c1 = 0.6, c2 = 0.8, k = g * a / (1 + a * a);
    size_t ns = json_array_size(json_object_get(json_object_get(r, "trajectory"), "t"));
    cr_assert_eq(ns, 31);
    double err = 0.0, errd = 0.0;
    for (size_t i = 0; i < ns; i++) {
        double t =
            json_number_value(json_array_get(json_object_get(json_object_get(r, "trajectory"), "t"), i));
        double v = v0 - k * t, sd = t * (v0 - k * t / 2);
        err = fmax(err, fabs(support_at(r, "q", "x", i) - (0.1 + c1 * sd)));
        err = fmax(err, fabs(support_at(r, "q", "y", i) - (-0.2 + c2 * sd)));
        err = fmax(err, fabs(support_at(r, "q", "z", i) - (0.3 + a * sd)));
        err = fmax(err, fabs(support_at(r, "speeds", "eta1", i) - c1 * v));
        err = fmax(err, fabs(support_at(r, "speeds", "eta2", i) - c2 * v));
        err = fmax(err, fabs(support_at(r, "qdot", "z", i) - a * v));
        /* eta_i' = -g a eta_i / ((1 + a^2) v): the speeds fall linearly at rate k c_i */
        if (i > 0) {
            double t0 = json_number_value(
                json_array_get(json_object_get(json_object_get(r, "trajectory"), "t"), i - 1));
            double d1 =
                (support_at(r, "speeds", "eta1", i) - support_at(r, "speeds", "eta1", i - 1)) / (t - t0);
            errd = fmax(errd, fabs(d1 - (-g * a * c1 * v / ((1 + a * a) * v))));
        }
    }
    cr_expect_lt(err, 1e-9, "Appell's example against (4.2.13)-(4.2.14): %.3g", err);
    cr_expect_lt(errd, 1e-8, "eta1' = -g a eta1 / ((1 + a^2) v): %.3g", errd);
    cr_expect_str_eq(json_string_value(json_object_get(r, "formulation")), "hamel");
    json_decref(r);
    engine_model_release(m);
}

Test(nonlin, appell_agrees_with_multipliers, .init = setup)
{
    engine_model *m = support_compile_text(APPELL);
    json_t *a = support_run(m, APPELL_REQ("hamel")), *b = support_run(m, APPELL_REQ("multipliers"));
    static const char *const xyz[] = {"x", "y", "z"};
    double d = max_diff(a, b, xyz, 3);
    cr_expect_lt(d, 1e-9, "reduced form against multipliers: %.3g", d);
    json_decref(a);
    json_decref(b);
    engine_model_release(m);
}

Test(nonlin, constant_speed_particle_one_speed, .init = setup)
{
    engine_model *m = support_compile_text(
        "{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"m\": 1, \"g\": 9.81, \"c\": 2}, "
        "\"kinetic_energy\": "
        "\"1/2*m*(x'^2 + y'^2)\", \"potential_energy\": \"m*g*y\", \"constraints\": [{\"name\": \"speed\", "
        "\"expr\": \"x'^2 + y'^2 - c^2\"}], \"speeds\": [{\"name\": \"u\", \"expr\": \"y'\"}]}");
    static const char *const xy[] = {"x", "y"};
    const char *req =
        "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0}, \"qdot\": {\"x\": 1.6, \"y\": 1.2}}, \"t_end\": "
        "0.15, \"output\": {\"samples\": 16}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}, "
        "\"formulation\": \"%s\"}";
    char r1[512], r2[512];
    snprintf(r1, sizeof r1, req, "hamel");
    snprintf(r2, sizeof r2, req, "multipliers");
    json_t *a = support_run(m, r1), *b = support_run(m, r2);
    double d = max_diff(a, b, xy, 2);
    cr_expect_lt(d, 1e-9, "one speed, x' solved by Newton, against multipliers: %.3g", d);
    double res = support_max_residual(a);
    cr_expect_lt(res, 1e-10, "the constraint holds along the reduced run: %.3g", res);
    json_decref(a);
    json_decref(b);
    engine_model_release(m);
}

Test(nonlin, wrong_speed_count_names_both, .init = setup)
{
    json_t *js = json_loads("{\"coordinates\": [\"x\", \"y\", \"z\"], \"kinetic_energy\": \"x'^2 + y'^2 + "
                            "z'^2\", \"constraints\": "
                            "[\"z' - sqrt(x'^2 + y'^2)\"], \"speeds\": [\"x'\"]}",
                            0, NULL);
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(js, NULL, &m, &problem);
    cr_assert_neq(rc, 0);
    char *text = json_dumps(problem, 0);
    cr_expect_not_null(strstr(text, "3 - 1 = 2 speeds"), "%s", text);
    cr_expect_not_null(strstr(text, "3 - 0 = 3"), "%s", text);
    free(text);
    json_decref(problem);
    json_decref(js);
}

/* The velocity-dependent Hamel coefficients (POST /v1/hamel, `hamel gamma`): with
 * f = z' - a cos(x) sqrt(x'^2 + y'^2) and speeds x', y', Psi's last row is
 * J = (-a cos x x'/v, -a cos x y'/v, 1), Phi = [[1,0,0],[0,1,0],[-J1,-J2,1]] and by
 * Greenwood (5.57) gamma^f_{eta1,eta2} = -(dJ2/dx - dJ1/dy) = -a sin(x) y'/v. For
 * Appell's own constraint every coefficient vanishes (Hussain 4.2: the K's are 0). */
Test(nonlin, velocity_dependent_gamma, .init = setup)
{
    engine_model *m = support_compile_text(
        "{\"coordinates\": [\"x\", \"y\", \"z\"], \"parameters\": {\"a\": 0.5}, \"kinetic_energy\": "
        "\"x'^2 + y'^2 + z'^2\", \"constraints\": [{\"name\": \"f\", \"expr\": \"z' - a*cos(x)*sqrt(x'^2 + "
        "y'^2)\"}], \"speeds\": [{\"name\": \"eta1\", \"expr\": \"x'\"}, {\"name\": \"eta2\", \"expr\": "
        "\"y'\"}]}");
    json_t *req = json_loads("{\"t\": 0, \"q\": {\"x\": 0.7, \"y\": 0, \"z\": 0}, \"speeds\": {\"eta1\": 3, "
                             "\"eta2\": 4}}",
                             0, NULL);
    json_t *res = NULL, *problem = NULL;
    int rc = engine_hamel(m, req, NULL, &res, &problem);
    if (rc)
        cr_assert_fail("hamel failed: %s", json_dumps(problem, 0));
    cr_expect(json_is_true(json_object_get(res, "velocity_dependent")));
    const json_t *pt = json_array_get(json_object_get(res, "points"), 0);
    cr_expect_float_eq(json_number_value(json_object_get(json_object_get(pt, "qdot"), "z")),
                       0.5 * cos(0.7) * 5, 1e-12, "q' solved on the constraint");
    double want = -0.5 * sin(0.7) * 4 / 5, got = NAN;
    const json_t *g = json_object_get(pt, "gamma");
    for (size_t i = 0; i < json_array_size(g); i++) {
        const json_t *e = json_array_get(g, i);
        if (!strcmp(json_string_value(json_object_get(e, "j")), "f") &&
            !strcmp(json_string_value(json_object_get(e, "r")), "eta1") &&
            !strcmp(json_string_value(json_object_get(e, "l")), "eta2"))
            got = json_number_value(json_object_get(e, "value"));
    }
    cr_expect_float_eq(got, want, 1e-12, "gamma^f_{eta1,eta2} = -a sin(x) y'/v: got %.15g, want %.15g", got,
                       want);
    json_decref(res);
    json_decref(req);
    /* without velocities: a clear 422 naming the field */
    req = json_loads("{\"q\": {\"x\": 0.7, \"y\": 0, \"z\": 0}}", 0, NULL);
    rc = engine_hamel(m, req, NULL, &res, &problem);
    cr_expect_eq(rc, HAMEL_E_BAD_REQUEST);
    char *text = json_dumps(problem, 0);
    cr_expect_not_null(strstr(text, "\"speeds\""), "%s", text);
    free(text);
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
}

/* The explicit kinematics (nonlin.c) and Newton's method (HAMEL_NO_REDUCTION=1 keeps
 * the compiled reduced equations out, so q' is solved at each evaluation) agree. */
Test(nonlin, explicit_and_newton_agree, .init = setup)
{
    engine_model *m = support_compile_text(APPELL);
    json_t *eq = NULL, *problem = NULL;
    cr_assert_eq(engine_equations(m, &eq, &problem), 0);
    cr_expect_str_eq(json_string_value(json_object_get(eq, "kinematics_solved")), "explicit");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(eq, "kinematics"), "z")),
                     "a*sqrt(eta1^2 + eta2^2)");
    json_decref(eq);
    json_t *a = support_run(m, APPELL_REQ("hamel"));
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(a, "stats"), "reduction")),
                     "symbolic");
    setenv("HAMEL_NO_REDUCTION", "1", 1);
    engine_model *mn = support_compile_text(APPELL);
    unsetenv("HAMEL_NO_REDUCTION");
    json_t *b = support_run(mn, APPELL_REQ("hamel"));
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(b, "stats"), "reduction")), "numeric");
    static const char *const xyz[] = {"x", "y", "z"};
    double d = max_diff(a, b, xyz, 3);
    cr_expect_lt(d, 1e-9, "explicit kinematics against Newton: %.3g", d);
    json_decref(a);
    json_decref(b);
    engine_model_release(m);
    engine_model_release(mn);
}

/* Two more reduced nonlinear systems against multipliers, one explicit and one by
 * Newton, both with configuration-dependent constraints (nonzero velocity-dependent
 * Hamel coefficients) and a potential. */
Test(nonlin, configuration_dependent_agree_with_multipliers, .init = setup)
{
    static const char *const models[] = {
        "{\"coordinates\": [\"x\", \"y\", \"z\"], \"parameters\": {\"a\": 0.5, \"g\": 9.81}, "
        "\"kinetic_energy\": "
        "\"1/2*(x'^2 + y'^2 + z'^2)\", \"potential_energy\": \"g*z + 1/2*x^2\", \"constraints\": [{\"name\": "
        "\"f\", "
        "\"expr\": \"z' - a*cos(x)*sqrt(x'^2 + y'^2)\"}], \"speeds\": [{\"name\": \"eta1\", \"expr\": "
        "\"x'\"}, "
        "{\"name\": \"eta2\", \"expr\": \"y'\"}]}",
        "{\"coordinates\": [\"x\", \"y\", \"th\"], \"parameters\": {\"c\": 2}, \"kinetic_energy\": "
        "\"1/2*(x'^2 + "
        "y'^2) + 1/2*th'^2\", \"potential_energy\": \"9.81*y + cos(th)\", \"constraints\": [{\"name\": "
        "\"speed\", "
        "\"expr\": \"x'^2 + y'^2 - c^2*(1 + 0.1*sin(x))^2\"}], \"speeds\": [{\"name\": \"u\", \"expr\": \"y' "
        "+ "
        "0.3*x'\"}, {\"name\": \"w\", \"expr\": \"th'\"}]}",
    };
    static const char *const reqs[] = {
        "{\"initial\": {\"q\": {\"x\": 0.2, \"y\": 0, \"z\": 0}, \"speeds\": {\"eta1\": 2, \"eta2\": 1}}, "
        "\"t_end\": "
        "0.5, \"output\": {\"samples\": 11}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}, "
        "\"formulation\": "
        "\"%s\"}",
        "{\"initial\": {\"q\": {\"x\": 0.2, \"y\": 0, \"th\": 0.1}, \"qdot\": {\"x\": %.17g, \"y\": 1.2, "
        "\"th\": "
        "0.4}}, \"t_end\": 0.1, \"output\": {\"samples\": 11}, \"integrator\": {\"rtol\": 1e-12, \"atol\": "
        "1e-14}, "
        "\"formulation\": \"%s\"}",
    };
    static const char *const c1[] = {"x", "y", "z"}, *const c2[] = {"x", "y", "th"};
    for (int i = 0; i < 2; i++) {
        engine_model *m = support_compile_text(models[i]);
        char r1[600], r2[600];
        double xd = sqrt(4 * pow(1 + 0.1 * sin(0.2), 2) - 1.44);
        if (i == 0) {
            snprintf(r1, sizeof r1, reqs[0], "hamel");
            snprintf(r2, sizeof r2, reqs[0], "multipliers");
        } else {
            snprintf(r1, sizeof r1, reqs[1], xd, "hamel");
            snprintf(r2, sizeof r2, reqs[1], xd, "multipliers");
        }
        json_t *a = support_run(m, r1), *b = support_run(m, r2);
        double d = max_diff(a, b, i ? c2 : c1, 3);
        cr_expect_lt(d, 1e-9, "model %d: reduced form against multipliers: %.3g", i, d);
        cr_expect_str_eq(json_string_value(json_object_get(json_object_get(a, "stats"), "reduction")),
                         i ? "numeric" : "symbolic", "model %d: explicit or Newton", i);
        json_decref(a);
        json_decref(b);
        engine_model_release(m);
    }
}
