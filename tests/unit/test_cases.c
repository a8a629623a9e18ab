/* test_cases.c — validation against every worked example in ../shared/cases.
 *
 * For each case: the Boltzmann–Hamel run reproduces the expected samples (q, speeds,
 * q') and energies within the case's tolerance, conserves what should be conserved,
 * keeps the constraints to rounding, lists exactly the expected non-vanishing Hamel
 * coefficients with their values, and flags holonomy as expected; the multipliers
 * formulation agrees with it; and the Boltzmann–Hamel equations written out with the
 * gammas (Greenwood 5.94) vanish on the integrated right-hand side.
 *
 * The cases directory is ../shared/cases relative to the repository root, or
 * $HAMEL_CASES. The suite fails loudly when it is missing.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "hamel.h"
#include "model.h"
#include "support.h"

static struct support_case params[SUPPORT_MAX_CASES];

ParameterizedTestParameters(cases, hamel)
{
    int n = support_list_cases(params, SUPPORT_MAX_CASES);
    return cr_make_param_array(struct support_case, params, n > 0 ? n : 0);
}

ParameterizedTestParameters(cases, formulations_agree)
{
    int n = support_list_cases(params, SUPPORT_MAX_CASES);
    return cr_make_param_array(struct support_case, params, n > 0 ? n : 0);
}

ParameterizedTestParameters(cases, boltzmann_hamel_residual)
{
    int n = support_list_cases(params, SUPPORT_MAX_CASES);
    return cr_make_param_array(struct support_case, params, n > 0 ? n : 0);
}

Test(cases, present)
{
    struct support_case p[SUPPORT_MAX_CASES];
    int n = support_list_cases(p, SUPPORT_MAX_CASES);
    cr_assert_geq(n, 7, "expected the shared cases in %s (found %d): the validation suite cannot run",
                  support_cases_dir(), n);
}

static void setup(void) { engine_init(); }

static engine_model *compile_case(const json_t *c, const char *file)
{
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem);
    if (rc) {
        char *s = json_dumps(problem, 0);
        cr_assert_fail("%s: model did not compile: %s", file, s);
    }
    return m;
}

static int within(double got, double want, double abs_tol, double rel_tol)
{
    return fabs(got - want) <= abs_tol + rel_tol * fabs(want);
}

static void check_hamel(const struct support_case *p)
{
    json_t *c = support_load_file(p->file);
    json_t *exp = json_object_get(c, "expected");
    engine_model *m = compile_case(c, p->file);
    json_t *r = support_simulate(m, json_object_get(c, "simulation"), p->file);
    json_t *tol = json_object_get(exp, "tolerance");
    double ta = json_number_value(json_object_get(tol, "abs")),
           tr = json_number_value(json_object_get(tol, "rel"));
    json_t *traj = json_object_get(r, "trajectory");

    /* samples */
    json_t *samples = json_object_get(exp, "samples");
    cr_assert_eq(json_array_size(json_object_get(traj, "t")), json_array_size(samples), "%s: sample count",
                 p->file);
    static const char *const groups[][2] = {{"q", "q"}, {"speeds", "speeds"}, {"qdot", "qdot"}};
    for (size_t i = 0; i < json_array_size(samples); i++) {
        json_t *s = json_array_get(samples, i);
        double t = json_number_value(json_object_get(s, "t"));
        cr_assert(within(json_number_value(json_array_get(json_object_get(traj, "t"), i)), t, 1e-12, 1e-12),
                  "%s: sample %zu time", p->file, i);
        for (int g = 0; g < 3; g++) {
            const char *key;
            json_t *val;
            json_object_foreach(json_object_get(s, groups[g][0]), key, val)
            {
                json_t *series = json_object_get(json_object_get(traj, groups[g][1]), key);
                cr_assert_not_null(series, "%s: result has no %s.%s", p->file, groups[g][1], key);
                double got = json_number_value(json_array_get(series, i));
                double want = json_number_value(val);
                cr_assert(within(got, want, ta, tr), "%s: t=%g %s.%s = %.15g, expected %.15g", p->file, t,
                          groups[g][0], key, got, want);
            }
        }
    }

    /* energy */
    json_t *energy = json_object_get(json_object_get(r, "checks"), "energy");
    json_t *ee = json_object_get(exp, "energy");
    cr_assert_eq(json_is_true(json_object_get(energy, "conserved_expected")),
                 json_is_true(json_object_get(ee, "conserved")), "%s: energy conservation expected", p->file);
    json_t *evals = json_object_get(ee, "values_at_samples"), *gvals = json_object_get(energy, "values");
    for (size_t i = 0; i < json_array_size(evals); i++)
        cr_assert(within(json_number_value(json_array_get(gvals, i)),
                         json_number_value(json_array_get(evals, i)), ta, tr),
                  "%s: energy at sample %zu", p->file, i);
    if (json_is_true(json_object_get(ee, "conserved")))
        cr_assert_leq(json_number_value(json_object_get(energy, "max_rel_drift")), 1e-9,
                      "%s: relative energy drift %g", p->file,
                      json_number_value(json_object_get(energy, "max_rel_drift")));

    /* constraints */
    double resid = support_max_residual(r);
    cr_assert_leq(resid, 1e-12, "%s: constraint residual %g", p->file, resid);

    /* invariants */
    json_t *einv = json_object_get(exp, "invariants");
    const char *key;
    json_t *val;
    json_object_foreach(einv, key, val)
    {
        json_t *gi = json_object_get(json_object_get(json_object_get(r, "checks"), "invariants"), key);
        cr_assert_not_null(gi, "%s: invariant %s missing", p->file, key);
        cr_assert(within(json_number_value(json_object_get(gi, "initial")),
                         json_number_value(json_object_get(val, "value")), ta, tr),
                  "%s: invariant %s initial value", p->file, key);
        cr_assert_leq(json_number_value(json_object_get(gi, "max_abs_drift")), 1e-9,
                      "%s: invariant %s drifts", p->file, key);
    }

    /* Hamel coefficients at the initial state: exactly the expected entries. */
    json_t *pts = json_object_get(json_object_get(r, "hamel"), "points");
    json_t *gam = json_object_get(json_array_get(pts, 0), "gamma");
    json_t *eg = json_object_get(exp, "hamel_at_initial");
    cr_assert_eq(json_array_size(gam), json_array_size(eg), "%s: %zu gamma entries, expected %zu", p->file,
                 json_array_size(gam), json_array_size(eg));
    for (size_t i = 0; i < json_array_size(eg); i++) {
        json_t *e = json_array_get(eg, i);
        int found = 0;
        for (size_t k = 0; k < json_array_size(gam) && !found; k++) {
            json_t *g = json_array_get(gam, k);
            if (json_equal(json_object_get(g, "j"), json_object_get(e, "j")) &&
                json_equal(json_object_get(g, "r"), json_object_get(e, "r")) &&
                json_equal(json_object_get(g, "l"), json_object_get(e, "l"))) {
                found = 1;
                cr_assert(within(json_number_value(json_object_get(g, "value")),
                                 json_number_value(json_object_get(e, "value")), 1e-12, 1e-12),
                          "%s: gamma^%s_%s,%s", p->file, json_string_value(json_object_get(e, "j")),
                          json_string_value(json_object_get(e, "r")),
                          json_string_value(json_object_get(e, "l")));
            }
        }
        cr_assert(found, "%s: gamma^%s_%s,%s missing", p->file, json_string_value(json_object_get(e, "j")),
                  json_string_value(json_object_get(e, "r")), json_string_value(json_object_get(e, "l")));
    }

    /* holonomy and scleronomy from the summary */
    json_t *sum = engine_model_summary(m);
    json_t *hol = json_object_get(exp, "holonomic");
    json_t *cons = json_object_get(sum, "constraints");
    for (size_t i = 0; i < json_array_size(cons); i++) {
        json_t *ci = json_array_get(cons, i);
        json_t *want = json_object_get(hol, json_string_value(json_object_get(ci, "name")));
        cr_assert_not_null(want, "%s: no expectation for constraint %s", p->file,
                           json_string_value(json_object_get(ci, "name")));
        cr_assert_eq(json_is_true(json_object_get(ci, "holonomic")), json_is_true(want), "%s: holonomic(%s)",
                     p->file, json_string_value(json_object_get(ci, "name")));
    }
    cr_assert_eq(json_is_true(json_object_get(sum, "scleronomic")),
                 json_is_true(json_object_get(exp, "scleronomic")), "%s: scleronomic", p->file);
    json_decref(sum);
    json_decref(r);
    engine_model_release(m);
    json_decref(c);
}

/* The state at t_end of a request run with a formulation, at rtol 1e-10. */
static void final_state(engine_model *m, json_t *req, const char *form, const char *file, double *q,
                        double *qd)
{
    json_t *rq = json_deep_copy(req);
    json_object_set_new(rq, "formulation", json_string(form));
    json_t *integ = json_object_get(rq, "integrator");
    json_object_set_new(integ, "rtol", json_real(1e-10));
    json_object_set_new(integ, "atol", json_real(1e-12));
    json_t *r = support_simulate(m, rq, file);
    json_t *traj = json_object_get(r, "trajectory");
    const struct engine_model *mm = m;
    for (int i = 0; i < mm->n; i++) {
        json_t *sq = json_object_get(json_object_get(traj, "q"), mm->coords[i]);
        json_t *sd = json_object_get(json_object_get(traj, "qdot"), mm->coords[i]);
        q[i] = json_number_value(json_array_get(sq, json_array_size(sq) - 1));
        qd[i] = json_number_value(json_array_get(sd, json_array_size(sd) - 1));
    }
    if (strcmp(form, "multipliers") == 0) {
        double res = support_max_residual(r);
        cr_assert_leq(res, 1e-8, "%s: multipliers constraint residual %g", file, res);
        cr_assert_not_null(json_object_get(traj, "multipliers"), "%s: multipliers missing", file);
    }
    json_decref(rq);
    json_decref(r);
}

static void check_formulations(const struct support_case *p)
{
    json_t *c = support_load_file(p->file);
    engine_model *m = compile_case(c, p->file);
    int n = m->n;
    double q1[64], qd1[64], q2[64], qd2[64];
    final_state(m, json_object_get(c, "simulation"), "hamel", p->file, q1, qd1);
    final_state(m, json_object_get(c, "simulation"), "multipliers", p->file, q2, qd2);
    for (int i = 0; i < n; i++) {
        cr_assert_leq(fabs(q1[i] - q2[i]), 1e-7, "%s: %s differs by %g at t_end", p->file, m->coords[i],
                      fabs(q1[i] - q2[i]));
        cr_assert_leq(fabs(qd1[i] - qd2[i]), 1e-7, "%s: %s' differs by %g at t_end", p->file, m->coords[i],
                      fabs(qd1[i] - qd2[i]));
    }
    engine_model_release(m);
    json_decref(c);
}

/* Greenwood (5.94) with the gammas, at the initial state and at random states,
 * evaluated with u' from the integrated right-hand side: must vanish. */
static void check_bh_residual(const struct support_case *p)
{
    json_t *c = support_load_file(p->file);
    engine_model *m = compile_case(c, p->file);
    int n = m->n, k = m->k;
    hamel_ws *w = hamel_ws_new(m, m->param_values);
    cr_assert_not_null(w);
    double y[128], dy[128], res[64], in[256];
    for (int trial = 0; trial < 5; trial++) {
        model_test_point(m, 100 + trial, in);
        memcpy(y, in + model_input_q(m), n * sizeof *y);
        for (int r = 0; r < k; r++)
            y[n + r] = in[model_input_qd(m) + r] * 2.0 - 1.3;
        double t = in[model_input_t(m)];
        cr_assert_eq(hamel_rhs(t, y, dy, w), 0, "%s: rhs failed", p->file);
        cr_assert_eq(hamel_bh_residual(w, t, y, dy + n, res), 0, "%s: residual failed", p->file);
        double scale = 1.0;
        for (int r = 0; r < k; r++)
            scale = fmax(scale, fabs(dy[n + r]));
        for (int r = 0; r < k; r++)
            cr_assert_leq(fabs(res[r]), 1e-10 * scale, "%s: (5.94) residual %g for speed %s", p->file, res[r],
                          m->speeds[r]);
    }
    hamel_ws_free(w);
    engine_model_release(m);
    json_decref(c);
}

ParameterizedTest(struct support_case *p, cases, hamel, .init = setup) { check_hamel(p); }
ParameterizedTest(struct support_case *p, cases, formulations_agree, .init = setup) { check_formulations(p); }
ParameterizedTest(struct support_case *p, cases, boltzmann_hamel_residual, .init = setup)
{
    check_bh_residual(p);
}

/* The adversarial cases (tests/adversarial/cases, written by tests/adversarial/derive.py
 * from an independent SymPy derivation): the same checks. A model with a nonlinear
 * (Chetaev) constraint runs in both formulations (its speeds given: the reduced form),
 * but (5.94) with the gammas is written for linear constraints only. */
#define ADVERSARIAL_DIR "tests/adversarial/cases"

static int has_nonlinear(const char *file)
{
    json_t *c = support_load_file(file);
    engine_model *m = compile_case(c, file);
    int nl = m->nlin < m->nc;
    engine_model_release(m);
    json_decref(c);
    return nl;
}

ParameterizedTestParameters(adversarial, hamel)
{
    int n = support_list_dir(ADVERSARIAL_DIR, params, SUPPORT_MAX_CASES);
    return cr_make_param_array(struct support_case, params, n > 0 ? n : 0);
}

ParameterizedTestParameters(adversarial, formulations_agree)
{
    int n = support_list_dir(ADVERSARIAL_DIR, params, SUPPORT_MAX_CASES);
    return cr_make_param_array(struct support_case, params, n > 0 ? n : 0);
}

ParameterizedTestParameters(adversarial, boltzmann_hamel_residual)
{
    int n = support_list_dir(ADVERSARIAL_DIR, params, SUPPORT_MAX_CASES);
    return cr_make_param_array(struct support_case, params, n > 0 ? n : 0);
}

Test(adversarial, present)
{
    struct support_case p[SUPPORT_MAX_CASES];
    int n = support_list_dir(ADVERSARIAL_DIR, p, SUPPORT_MAX_CASES);
    cr_assert_geq(n, 8, "expected the adversarial cases in %s (found %d)", ADVERSARIAL_DIR, n);
}

ParameterizedTest(struct support_case *p, adversarial, hamel, .init = setup) { check_hamel(p); }

ParameterizedTest(struct support_case *p, adversarial, formulations_agree, .init = setup)
{
    check_formulations(p);
}

ParameterizedTest(struct support_case *p, adversarial, boltzmann_hamel_residual, .init = setup)
{
    if (!has_nonlinear(p->file))
        check_bh_residual(p);
}

/* The acceptance figure: rolling disk, 10 s at rtol 1e-10. */
Test(cases, rolling_disk_ten_seconds, .init = setup)
{
    char file[600];
    snprintf(file, sizeof file, "%s/greenwood-5.3-rolling-disk.json", support_cases_dir());
    json_t *c = support_load_file(file);
    engine_model *m = compile_case(c, file);
    json_t *req = json_deep_copy(json_object_get(c, "simulation"));
    json_object_set_new(req, "t_end", json_real(10.0));
    json_object_set_new(req, "output", json_pack("{s:i}", "samples", 1001));
    json_t *integ = json_object_get(req, "integrator");
    json_object_set_new(integ, "rtol", json_real(1e-10));
    json_object_set_new(integ, "atol", json_real(1e-12));
    json_t *r = support_simulate(m, req, file);
    json_t *checks = json_object_get(r, "checks");
    double drift = json_number_value(json_object_get(json_object_get(checks, "energy"), "max_rel_drift"));
    double resid =
        json_number_value(json_object_get(json_object_get(checks, "constraints"), "max_abs_residual"));
    cr_assert_leq(drift, 1e-9, "relative energy drift %g over 10 s", drift);
    cr_assert_leq(resid, 1e-12, "constraint residual %g over 10 s", resid);
    json_decref(r);
    json_decref(req);
    engine_model_release(m);
    json_decref(c);
}
