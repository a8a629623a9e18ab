/* test_baseline.c — the benchmark's hand-written baseline is itself right.
 *
 * Each baseline system is integrated over its shared case's own simulation block
 * (initial state, parameters, t_end, samples, rk8pd rtol/atol) and every sampled
 * coordinate, speed and coordinate rate is compared with the case's expected samples
 * within the case's tolerance. The cases come from $HAMEL_CASES_DIR, default
 * ../shared/cases; the test fails loudly when they are missing.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/baseline.c" /* see baseline.h: compiled into each program that uses it */

#define TEST_MAX_SAMPLES 1001

static json_t *load_case(const char *file)
{
    const char *dir = getenv("HAMEL_CASES_DIR");
    char path[4096];
    json_error_t err;
    json_t *c;

    if (dir == NULL || dir[0] == '\0')
        dir = "../shared/cases";
    snprintf(path, sizeof path, "%s/%s", dir, file);
    c = json_load_file(path, 0, &err);
    cr_assert_not_null(c, "cannot load case %s: %s (line %d) — set HAMEL_CASES_DIR", path, err.text,
                       err.line);
    return c;
}

static double number_at(const json_t *obj, const char *key, const char *what)
{
    const json_t *v = json_object_get(obj, key);
    cr_assert(json_is_number(v), "%s: \"%s\" is missing or not a number", what, key);
    return json_number_value(v);
}

static void check_close(double got, double want, double abs_tol, double rel_tol, const char *what,
                        const char *name, double t)
{
    double err = fabs(got - want);
    double lim = abs_tol + rel_tol * fabs(want);
    cr_expect(err <= lim, "%s %s at t=%g: baseline %.17g, expected %.17g, |diff| %.3g > %.3g", what, name, t,
              got, want, err, lim);
}

/* Runs sys over its case's simulation block and compares with the expected samples. */
static void check_against_case(const baseline_system *sys)
{
    json_t *c = load_case(sys->file);
    const json_t *model = json_object_get(c, "model");
    const json_t *sim = json_object_get(c, "simulation");
    const json_t *init = json_object_get(sim, "initial");
    const json_t *integ = json_object_get(sim, "integrator");
    const json_t *expected = json_object_get(c, "expected");
    const json_t *samples = json_object_get(expected, "samples");
    const json_t *tol = json_object_get(expected, "tolerance");
    const int dim = sys->nq + sys->nu;
    static double times[TEST_MAX_SAMPLES], out[TEST_MAX_SAMPLES * BASELINE_MAX_DIM];
    double y0[BASELINE_MAX_DIM], dydt[BASELINE_MAX_DIM];
    baseline_params par;
    baseline_stats st;
    int n;

    cr_assert_str_eq(json_string_value(json_object_get(model, "name")), sys->name,
                     "case file %s holds another model", sys->file);
    cr_assert_str_eq(json_string_value(json_object_get(integ, "method")), "rk8pd",
                     "the case integrates with another method");
    baseline_params_default(sys, &par);
    for (int k = 0; k < sys->nparams; k++)
        par.p[k] = number_at(json_object_get(model, "parameters"), sys->param_names[k], "model.parameters");
    for (int k = 0; k < sys->nq; k++)
        y0[k] = number_at(json_object_get(init, "q"), sys->q_names[k], "initial.q");
    for (int k = 0; k < sys->nu; k++)
        y0[sys->nq + k] = number_at(json_object_get(init, "speeds"), sys->u_names[k], "initial.speeds");

    n = (int)number_at(json_object_get(sim, "output"), "samples", "simulation.output");
    cr_assert(n >= 2 && n <= TEST_MAX_SAMPLES, "sample count %d out of range", n);
    cr_assert_eq((size_t)n, json_array_size(samples), "expected.samples has %zu entries, not %d",
                 json_array_size(samples), n);
    const double t0 = number_at(init, "t", "initial");
    baseline_times(t0, number_at(sim, "t_end", "simulation"), n, times);
    int status = baseline_run(sys, &par, t0, y0, times, n, number_at(integ, "rtol", "integrator"),
                              number_at(integ, "atol", "integrator"), out, &st);
    cr_assert_eq(status, 0, "baseline_run failed (%d): %s", status, st.reason);
    cr_expect_gt(st.steps, 0, "no steps counted");
    cr_expect_geq(st.rhs_evals, 12 * st.steps, "rk8pd needs at least 12 evaluations a step");

    const double abs_tol = number_at(tol, "abs", "expected.tolerance");
    const double rel_tol = number_at(tol, "rel", "expected.tolerance");
    for (int i = 0; i < n; i++) {
        const json_t *s = json_array_get(samples, (size_t)i);
        const double *y = out + (size_t)i * dim;
        check_close(times[i], number_at(s, "t", "sample"), 1e-15, 0.0, "time", "t", times[i]);
        sys->rhs(times[i], y, dydt, &par);
        for (int k = 0; k < sys->nq; k++) {
            const char *q = sys->q_names[k];
            check_close(y[k], number_at(json_object_get(s, "q"), q, "sample.q"), abs_tol, rel_tol, "q", q,
                        times[i]);
            check_close(dydt[k], number_at(json_object_get(s, "qdot"), q, "sample.qdot"), abs_tol, rel_tol,
                        "qdot", q, times[i]);
        }
        for (int k = 0; k < sys->nu; k++) {
            const char *u = sys->u_names[k];
            check_close(y[sys->nq + k], number_at(json_object_get(s, "speeds"), u, "sample.speeds"), abs_tol,
                        rel_tol, "speed", u, times[i]);
        }
    }
    json_decref(c);
}

Test(baseline, rolling_disk_matches_greenwood_5_3) { check_against_case(&baseline_rolling_disk); }

Test(baseline, dumbbell_matches_greenwood_5_2) { check_against_case(&baseline_dumbbell); }

/* The step statistics the benchmark reports are plausible, and a tighter tolerance
 * takes more steps (so the driver really adapts). */
Test(baseline, stats_are_consistent)
{
    const baseline_system *sys = &baseline_rolling_disk;
    double y0[] = {0.0, 1.2, 0.0, 0.0, 0.0, 0.3, 0.0, 4.0};
    double times[11], out[11 * 8];
    baseline_params par;
    baseline_stats loose, tight;

    baseline_params_default(sys, &par);
    baseline_times(0.0, 10.0, 11, times);
    cr_assert_eq(baseline_run(sys, &par, 0.0, y0, times, 11, 1e-6, 1e-8, out, &loose), 0);
    cr_assert_eq(baseline_run(sys, &par, 0.0, y0, times, 11, 1e-10, 1e-12, out, &tight), 0);
    cr_expect_gt(tight.steps, loose.steps, "rtol 1e-10 took %ld steps, rtol 1e-6 took %ld", tight.steps,
                 loose.steps);
    cr_expect_geq(tight.rhs_evals, 12 * tight.steps, "rk8pd needs at least 12 evaluations a step");
    cr_expect_gt(tight.integrate_ms, 0.0, "no integrate time measured");
    cr_expect_geq(tight.steps, 10, "at least one step per output interval");
    cr_expect_eq(out[10 * 8 + 1] == out[10 * 8 + 1], 1, "theta at t=10 is NaN");
}
