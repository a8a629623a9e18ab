/* test_kinks.c — potentials with abs and sqrt whose force is finite (and zero) at the
 * bottom of their well (review of round 3, from outside). d abs(a) was a/abs(a) and
 * d sqrt(a)^3 was 3 a da / (2 sqrt(a)): 0/0 at a = 0, so a particle started at the
 * bottom of k*abs(x)^1.5 or of k*r^3 failed at t = 0 ("the forcing is not finite").
 * References: scipy solve_ivp DOP853 (rtol 1e-13) on the forces written by hand,
 * -1.5 k |x|^0.5 sign(x) and -3 k r (x, y).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>

#include "engine.h"
#include "expr.h"
#include "support.h"

static void setup(void) { engine_init(); }

TestSuite(kinks, .init = setup, .timeout = 60);

static void expect_finite_zero_at_origin(const char *text, const char *sym)
{
    expr_ctx *c = expr_ctx_new(0);
    cr_assert_not_null(c);
    int sx = expr_sym_add(c, "x", SYM_COORD, 0), sy = expr_sym_add(c, "y", SYM_COORD, 1);
    cr_assert(sx >= 0 && sy >= 0);
    expr_parse_opts o = {0, 0, 4096, "test"};
    expr_error err;
    expr *e = expr_parse(c, text, &o, &err);
    cr_assert_not_null(e, "%s: %s", text, err.message);
    expr *d = expr_diff(c, e, sym[0] == 'x' ? sx : sy);
    double vals[2] = {0.0, 0.0};
    double v = expr_eval(c, d, vals);
    cr_expect(v == 0.0, "d(%s)/d%s at the origin = %g, not 0", text, sym, v);
    expr_ctx_free(c);
}

/* The derivatives themselves: finite, and 0, where the function has its kink or its
 * bottom. */
Test(kinks, derivatives_at_the_bottom_of_the_well)
{
    expect_finite_zero_at_origin("abs(x)^1.5", "x");
    expect_finite_zero_at_origin("x*abs(x)", "x");
    expect_finite_zero_at_origin("sqrt(x^2 + y^2)^3", "x");
    expect_finite_zero_at_origin("sqrt(x^2 + y^2)^3", "y");
    expect_finite_zero_at_origin("abs(x)^2.5 + y*abs(y)", "y");
}

static const char *const run_opts =
    "\"t_end\": 3, \"output\": {\"times\": [1, 2, 3]},"
    " \"integrator\": {\"method\": \"rk8pd\", \"rtol\": 1e-12, \"atol\": 1e-14}}";

Test(kinks, particles_started_at_the_bottom_of_the_well)
{
    engine_model *m =
        support_compile_text("{\"name\": \"well-1.5\", \"coordinates\": [\"x\"], \"parameters\": {\"k\": 2},"
                             " \"kinetic_energy\": \"1/2*x'^2\", \"potential_energy\": \"k*abs(x)^1.5\"}");
    char req[512];
    snprintf(req, sizeof req, "{\"initial\": {\"q\": {\"x\": 0}, \"qdot\": {\"x\": 1}}, %s", run_opts);
    json_t *r = support_run(m, req);
    static const double x_ref[3] = {0.304658741543896, -0.394158218962746, 0.23447286349361};
    for (int i = 0; i < 3; i++)
        cr_expect(fabs(support_at(r, "q", "x", i) - x_ref[i]) < 1e-9, "x(%d) = %.15g, reference %.15g", i + 1,
                  support_at(r, "q", "x", i), x_ref[i]);
    json_decref(r);
    engine_model_release(m);

    m = support_compile_text(
        "{\"name\": \"well-r3\", \"coordinates\": [\"x\", \"y\"], \"parameters\": {\"k\": 2},"
        " \"kinetic_energy\": \"1/2*(x'^2 + y'^2)\", \"potential_energy\": "
        "\"k*sqrt(x^2 + y^2)^3\"}");
    snprintf(req, sizeof req,
             "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0}, \"qdot\": {\"x\": 1, \"y\": 0.5}}, %s", run_opts);
    r = support_run(m, req);
    static const double xr[3] = {0.579962028886082, -0.293493684735933, -0.389661653656078};
    static const double yr[3] = {0.289981014443041, -0.146746842367966, -0.194830826828039};
    for (int i = 0; i < 3; i++)
        cr_expect(fabs(support_at(r, "q", "x", i) - xr[i]) < 1e-9 &&
                      fabs(support_at(r, "q", "y", i) - yr[i]) < 1e-9,
                  "(x, y)(%d) = (%.15g, %.15g), reference (%.15g, %.15g)", i + 1, support_at(r, "q", "x", i),
                  support_at(r, "q", "y", i), xr[i], yr[i]);
    json_decref(r);
    engine_model_release(m);
}

/* abs in the kinetic energy, started from rest: T = 1/2*abs(x')^2 and 1/2*abs(x'^2) are
 * 1/2*x'^2 (with d abs = sign the mass was sign(x')^2, 0 at rest, and the run failed at
 * t = 0). In V = x^2: x = 0.5 cos(sqrt(2) t). */
Test(kinks, abs_of_a_velocity_in_the_kinetic_energy_from_rest)
{
    static const char *const T[] = {"1/2*abs(x')^2", "1/2*abs(x'^2)", "1/2*abs(x')^3 + 1/2*x'^2"};
    for (int k = 0; k < 3; k++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"name\": \"abs-T\", \"coordinates\": [\"x\"], \"kinetic_energy\": \"%s\","
                 " \"potential_energy\": \"x^2\"}",
                 T[k]);
        engine_model *m = support_compile_text(text);
        json_t *r = support_run(
            m, "{\"initial\": {\"q\": {\"x\": 0.5}, \"qdot\": {\"x\": 0}}, \"t_end\": 2,"
               " \"output\": {\"times\": [1, 2]}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}}");
        if (k < 2)
            for (int i = 0; i < 2; i++) {
                double x = support_at(r, "q", "x", i), ref = 0.5 * cos(sqrt(2.0) * (i + 1));
                cr_expect(fabs(x - ref) < 1e-9, "T = %s: x(%d) = %.15g, exact %.15g", T[k], i + 1, x, ref);
            }
        json_decref(r);
        engine_model_release(m);
    }
}

/* A logistic wall seen from behind: V = 10 - 10/(1 + exp(1000*(x - 3))) is 10 at x = 4,
 * where exp(1000) overflows, and its force was exp(u)/(1 + exp(u))^2 = inf/inf: NaN, and a
 * particle started there failed at t = 0. Moving left at 1 it crosses the step down to
 * V = 0 and leaves at sqrt(1 + 2*10) (energy). Softplus log(1 + exp(10 x)) likewise: its
 * force is -10 wherever exp(10 x) overflows. */
Test(kinks, logistic_and_softplus_profiles_behind_their_step)
{
    engine_model *m =
        support_compile_text("{\"name\": \"wall\", \"coordinates\": [\"x\"], \"kinetic_energy\": "
                             "\"1/2*x'^2\", \"potential_energy\": \"10 - 10/(1 + exp(1000*(x - 3)))\"}");
    json_t *r =
        support_run(m, "{\"initial\": {\"q\": {\"x\": 4}, \"qdot\": {\"x\": -1}}, \"t_end\": 2,"
                       " \"output\": {\"samples\": 3}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}}");
    double v = support_at(r, "qdot", "x", 2);
    cr_expect(fabs(v + sqrt(21.0)) < 1e-8, "x'(2) = %.15g, exact %.15g", v, -sqrt(21.0));
    json_decref(r);
    engine_model_release(m);

    m = support_compile_text(
        "{\"name\": \"softplus\", \"coordinates\": [\"x\"], \"kinetic_energy\": \"1/2*x'^2\","
        " \"potential_energy\": \"log(1 + exp(10*x))\"}");
    r = support_run(m, "{\"initial\": {\"q\": {\"x\": 100}, \"qdot\": {\"x\": 0}}, \"t_end\": 1,"
                       " \"output\": {\"samples\": 2}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}}");
    cr_expect(fabs(support_at(r, "q", "x", 1) - 95.0) < 1e-9, "x(1) = %.15g, exact 100 - 10/2",
              support_at(r, "q", "x", 1));
    json_decref(r);
    engine_model_release(m);
}

/* sign joined the expression language (the derivative of abs); a model that names a
 * parameter sign, as models could before, still compiles: sign*x is the parameter,
 * sign(x) the function. V = -sign*abs(x)^1.5 with sign = -1 is the well of
 * particles_started_at_the_bottom_of_the_well at k = 1. */
Test(kinks, a_parameter_named_sign_is_still_a_parameter)
{
    engine_model *m =
        support_compile_text("{\"name\": \"named-sign\", \"coordinates\": [\"x\"], \"parameters\": "
                             "{\"sign\": -1}, \"kinetic_energy\": \"1/2*x'^2\", \"potential_energy\": "
                             "\"-sign*abs(x)^1.5 + 0*sign(x)\"}");
    json_t *r =
        support_run(m, "{\"initial\": {\"q\": {\"x\": 0.3}, \"qdot\": {\"x\": 0}}, \"t_end\": 1,"
                       " \"output\": {\"samples\": 2}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}}");
    /* energy: 1/2 x'^2 + |x|^1.5 = 0.3^1.5 */
    double x = support_at(r, "q", "x", 1), v = support_at(r, "qdot", "x", 1);
    cr_expect(fabs(0.5 * v * v + pow(fabs(x), 1.5) - pow(0.3, 1.5)) < 1e-10,
              "energy at t = 1: %.15g, initial %.15g", 0.5 * v * v + pow(fabs(x), 1.5), pow(0.3, 1.5));
    cr_expect(x < 0.3, "the particle moved towards the bottom: x(1) = %g", x);
    json_decref(r);
    engine_model_release(m);
}
