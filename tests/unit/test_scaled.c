/* test_scaled.c — a constraint is the same constraint times any nonzero factor (review
 * of round 3, from outside): the motion, the constraint force and the checks must not
 * depend on whether a user writes it in metres or micrometres.
 *
 * The model: a particle (x, y) with a knife edge along the heading th,
 * y' - sin(th) x' = 0, in the potential 0.5 x^2 + 0.3 y; th' is constant. Reference
 * (independent of the engine): SymPy's Lagrange equations with a multiplier, integrated
 * by mpmath's Taylor method at 25 digits (tol 1e-20) to t = 5, and the multiplier at t = 0.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "support.h"

static void setup(void) { engine_init(); }

TestSuite(scaled, .init = setup, .timeout = 120);

#define KNIFE_X5 (-0.97094330230112735)
#define KNIFE_Y5 (-0.78883746459565085)
#define KNIFE_LAM0 0.45982486505869247 /* for the constraint written with factor 1 */

static engine_model *knife(const char *factor)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{\"name\": \"knife-scaled\", \"coordinates\": [\"x\", \"y\", \"th\"],"
             " \"parameters\": {\"m\": 1.3, \"J\": 0.4},"
             " \"kinetic_energy\": \"1/2*m*(x'^2+y'^2) + 1/2*J*th'^2\","
             " \"potential_energy\": \"0.5*x^2 + 0.3*y\","
             " \"constraints\": [{\"name\": \"knife\", \"expr\": \"%s*(y' - sin(th)*x')\"}]}",
             factor);
    return support_compile_text(text);
}

static json_t *knife_run(engine_model *m, const char *formulation)
{
    char req[1024];
    snprintf(req, sizeof req,
             "{\"initial\": {\"t\": 0, \"q\": {\"x\": 0.5, \"y\": 0.1, \"th\": 0.3},"
             " \"qdot\": {\"x\": 0.4, \"y\": 0.11820808266453584, \"th\": 0.7}}, \"t_end\": 5,"
             " \"output\": {\"samples\": 11}, \"integrator\": {\"method\": \"rk8pd\", \"rtol\": 1e-12,"
             " \"atol\": 1e-14}, \"formulation\": \"%s\"}",
             formulation);
    return support_run(m, req);
}

/* The multipliers formulation with the knife edge written times 1e-12, 1 and 1e12: the
 * KKT matrix [M -J^T; J 0] had a pivot of 1e-24 against M's 1 at 1e-12 and every run
 * failed at t = 0 ("the right-hand side could not be evaluated"). The motion is the
 * same and the multiplier is the reference's divided by the factor. */
Test(scaled, multipliers_of_a_constraint_written_with_any_factor)
{
    static const char *const factors[] = {"1e-12", "1", "1e12"};
    for (size_t k = 0; k < sizeof factors / sizeof factors[0]; k++) {
        double f = strtod(factors[k], NULL);
        engine_model *m = knife(factors[k]);
        json_t *r = knife_run(m, "multipliers");
        double x5 = support_at(r, "q", "x", 10), y5 = support_at(r, "q", "y", 10);
        double lam0 = support_at(r, "multipliers", "knife", 0);
        cr_expect(fabs(x5 - KNIFE_X5) < 1e-9 && fabs(y5 - KNIFE_Y5) < 1e-9,
                  "factor %s: (x, y)(5) = (%.17g, %.17g), reference (%.17g, %.17g)", factors[k], x5, y5,
                  KNIFE_X5, KNIFE_Y5);
        cr_expect(fabs(lam0 * f - KNIFE_LAM0) < 1e-10 * KNIFE_LAM0,
                  "factor %s: lambda(0) * factor = %.17g, reference %.17g", factors[k], lam0 * f, KNIFE_LAM0);
        json_decref(r);
        engine_model_release(m);
    }
}

static int has_warning(const json_t *r, const char *code)
{
    const json_t *w = json_object_get(r, "warnings");
    for (size_t i = 0; i < json_array_size(w); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(w, i), "code")), code))
            return 1;
    return 0;
}

/* The checks of a state against the constraints are relative to the constraint's
 * coefficients (max_i |df/dq'_i|): times 1e12, a run that keeps the knife edge to
 * rounding (|f| ~ 1e12 * 1e-17) was warned "constraint-residual" and an initial qdot off
 * by rounding was refused; times 1e-12, an initial qdot off by 0.08 passed the check
 * (|f| = 8e-14 < 1e-8) and was silently replaced. */
Test(scaled, constraint_checks_are_relative_to_the_constraints_coefficients)
{
    for (int k = 0; k < 2; k++) {
        engine_model *m = knife(k ? "1e12" : "1");
        json_t *r = knife_run(m, "hamel");
        cr_expect(!has_warning(r, "constraint-residual"),
                  "factor %s: the run keeps the constraint to rounding", k ? "1e12" : "1");
        cr_expect(fabs(support_at(r, "q", "x", 10) - KNIFE_X5) < 1e-9, "x(5) = %.17g",
                  support_at(r, "q", "x", 10));
        json_decref(r);
        engine_model_release(m);
    }
    engine_model *m = knife("1e-12");
    json_t *req = support_loads("{\"initial\": {\"t\": 0, \"q\": {\"x\": 0.5, \"y\": 0.1, \"th\": 0.3},"
                                " \"qdot\": {\"x\": 0.4, \"y\": 0.2, \"th\": 0.7}}, \"t_end\": 1}");
    json_t *result = NULL, *problem = NULL;
    int rc = engine_simulate(m, req, NULL, NULL, &result, &problem);
    cr_expect(rc != 0 && problem, "a qdot off the knife edge by 0.08 is refused whatever the factor");
    const char *text = problem ? json_dumps(problem, 0) : NULL;
    cr_expect(text && strstr(text, "initial.qdot") && strstr(text, "knife"),
              "the problem names initial.qdot: %s", text ? text : "(none)");
    free((void *)text);
    json_decref(problem);
    json_decref(result);
    json_decref(req);
    engine_model_release(m);
}

/* The default speeds (no "speeds" given) are chosen from the constraints' gradients at a
 * test configuration: with the knife edge written times 1e200 the squares of the
 * Gram–Schmidt overflowed and times 1e-200 they underflowed, and the model was refused,
 * "the linear constraints are dependent". A Chetaev constraint times 1e-200 was refused
 * as dependent the same way. Each compiles, and runs as the plain one. */
Test(scaled, default_speeds_and_nonlinear_constraints_at_extreme_factors)
{
    static const char *const factors[] = {"1e200", "1e-200"};
    for (size_t k = 0; k < 2; k++) {
        engine_model *m = knife(factors[k]);
        json_t *r = knife_run(m, "hamel");
        cr_expect(fabs(support_at(r, "q", "x", 10) - KNIFE_X5) < 1e-9 &&
                      fabs(support_at(r, "q", "y", 10) - KNIFE_Y5) < 1e-9,
                  "factor %s: (x, y)(5) = (%.17g, %.17g)", factors[k], support_at(r, "q", "x", 10),
                  support_at(r, "q", "y", 10));
        json_decref(r);
        engine_model_release(m);
    }
    /* a particle held to speed 1 (x'^2 + y'^2 = 1) by a Chetaev constraint: it moves on
     * a straight line at unit speed, x(t) = 0.6 t, y(t) = 0.8 t */
    engine_model *m = support_compile_text(
        "{\"name\": \"governed\", \"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"1/2*(x'^2 + y'^2)\","
        " \"constraints\": [{\"name\": \"speed\", \"expr\": \"1e-200*(x'^2 + y'^2 - 1)\"}]}");
    json_t *r =
        support_run(m, "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0}, \"qdot\": {\"x\": 0.6, \"y\": 0.8}},"
                       " \"t_end\": 2, \"output\": {\"samples\": 3}}");
    cr_expect(fabs(support_at(r, "q", "x", 2) - 1.2) < 1e-10 &&
                  fabs(support_at(r, "q", "y", 2) - 1.6) < 1e-10,
              "(x, y)(2) = (%.17g, %.17g), exact (1.2, 1.6)", support_at(r, "q", "x", 2),
              support_at(r, "q", "y", 2));
    json_decref(r);
    engine_model_release(m);
}

/* Inertias of very different sizes in the multipliers formulation: a sleigh (blade at the
 * mass centre, V = 0.3 m x) of mass m and inertia J; th = 0.4 + 0.7 t and, with a = 3/7,
 * x(3) = [(1 + a sin 0.4)(sin 2.5 - sin 0.4) - a (sin^2 2.5 - sin^2 0.4)/2] / 0.7 whatever m
 * and J; the blade's force at t = 0 is m (0.7 - 0.3 sin 0.4). With m = 1e8 and J = 1e-8,
 * or 1 and 1e-14, the KKT matrix's pivots looked singular against its largest entry and
 * the run failed at t = 0. */
Test(scaled, multipliers_with_inertias_of_very_different_sizes)
{
    static const double mj[][2] = {{1e8, 1e-8}, {1e-8, 1e8}, {1.0, 1e-14}, {1.0, 1.0}};
    const double a = 3.0 / 7.0, x3 = ((1 + a * sin(0.4)) * (sin(2.5) - sin(0.4)) -
                                      a * (sin(2.5) * sin(2.5) - sin(0.4) * sin(0.4)) / 2) /
                                     0.7;
    for (size_t k = 0; k < sizeof mj / sizeof mj[0]; k++) {
        char text[1024];
        snprintf(
            text, sizeof text,
            "{\"name\": \"sleigh\", \"coordinates\": [\"x\", \"y\", \"th\"], \"parameters\": {\"m\": %.17g, "
            "\"J\": %.17g}, \"kinetic_energy\": \"1/2*m*(x'^2 + y'^2) + 1/2*J*th'^2\", \"potential_energy\": "
            "\"0.3*m*x\", \"constraints\": [{\"name\": \"blade\", \"expr\": \"-x'*sin(th) + y'*cos(th)\"}]}",
            mj[k][0], mj[k][1]);
        engine_model *m = support_compile_text(text);
        json_t *r = support_run(
            m, "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"th\": 0.4}, \"qdot\": {\"x\": "
               "0.9210609940028851, \"y\": 0.3894183423086505, \"th\": 0.7}}, \"t_end\": 3,"
               " \"output\": {\"samples\": 4}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14},"
               " \"formulation\": \"multipliers\"}");
        double x = support_at(r, "q", "x", 3), th = support_at(r, "q", "th", 3);
        double lam = support_at(r, "multipliers", "blade", 0), lam_ref = mj[k][0] * (0.7 - 0.3 * sin(0.4));
        cr_expect(fabs(x - x3) < 1e-10 && fabs(th - 2.5) < 1e-10,
                  "m %g, J %g: x(3) = %.17g (exact %.17g), th(3) %.17g", mj[k][0], mj[k][1], x, x3, th);
        cr_expect(fabs(fabs(lam) - lam_ref) < 1e-10 * lam_ref, "m %g, J %g: |blade force| %.17g, exact %.17g",
                  mj[k][0], mj[k][1], fabs(lam), lam_ref);
        json_decref(r);
        engine_model_release(m);
    }
}

/* A small model is checked as a large one: at 1e-9 m/s a knife edge's initial y' off by
 * 4.7e-9 (16 times the consistent 2.96e-10) passed the check (its tolerance was 1e-8
 * times max(1, max |q'|)) and was silently replaced; at 1 m/s the same error relative to
 * the speeds is refused, and so it is now. */
Test(scaled, a_small_models_initial_qdot_is_checked_as_a_large_ones)
{
    engine_model *m = knife("1");
    json_t *req = support_loads(
        "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"th\": 0.3}, \"qdot\": {\"x\": 1e-9, \"y\": "
        "5e-9, \"th\": 0}}, \"t_end\": 1}");
    json_t *result = NULL, *problem = NULL;
    int rc = engine_simulate(m, req, NULL, NULL, &result, &problem);
    char *text = problem ? json_dumps(problem, 0) : NULL;
    cr_expect(rc != 0 && text && strstr(text, "initial.qdot") && strstr(text, "knife"),
              "a qdot off the knife edge by 16 times its speed is refused: %s", text ? text : "(accepted)");
    free(text);
    json_decref(problem);
    json_decref(result);
    json_decref(req);
    /* the consistent one runs */
    json_t *r = support_run(
        m, "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"th\": 0.3}, \"qdot\": {\"x\": 1e-9, \"y\": "
           "2.9552020666133955e-10, \"th\": 0}}, \"t_end\": 1, \"output\": {\"samples\": 2}}");
    json_decref(r);
    engine_model_release(m);
}
