/* test_integ.c — the integration driver against analytic solutions, and its budgets,
 * cancellation and failure codes. Real GSL throughout. */
#include <criterion/criterion.h>

#include <float.h>
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "integ.h"

#define REC_MAX 512

/* Records every sample; sets *cancel when the cancel_at-th sample arrives. */
typedef struct rec {
    size_t n, dim;
    double t[REC_MAX];
    double y[REC_MAX][4];
    atomic_int *cancel;
    size_t cancel_at; /* 0: never */
} rec;

static int rec_sample(double t, const double *y, void *ctx)
{
    rec *r = ctx;
    cr_assert_lt(r->n, REC_MAX, "too many samples");
    r->t[r->n] = t;
    memcpy(r->y[r->n], y, r->dim * sizeof *y);
    r->n++;
    if (r->cancel && r->n == r->cancel_at)
        atomic_store(r->cancel, 1);
    return 0;
}

static void setup(void) { gsl_set_error_handler_off(); }

TestSuite(integ, .init = setup, .timeout = 60);

static void expect_close(const char *what, const char *method, double t, double got, double want, double tol)
{
    cr_expect(fabs(got - want) <= tol, "%s: %s at t = %g is %.17g, expected %.17g (tol %g)", method, what, t,
              got, want, tol);
}

/* x'' = -x as y = (x, v). Counts calls and the largest t it was asked about. */
typedef struct osc {
    long calls;
    double t_max;
} osc;

static int osc_rhs(double t, const double *y, double *dydt, void *params)
{
    osc *o = params;
    if (o) {
        o->calls++;
        o->t_max = fmax(o->t_max, t);
    }
    dydt[0] = y[1];
    dydt[1] = -y[0];
    return GSL_SUCCESS;
}

static integ_options opts(const char *method, double rtol, double atol)
{
    integ_options o = integ_default_options;
    o.method = method;
    o.rtol = rtol;
    o.atol = atol;
    return o;
}

/* 41 samples over [0, 20] (about three periods), first at t0, against cos/sin. The
 * tolerances passed below are 5-20 times the errors measured with GSL 2.7. */
static void check_oscillator(const char *method, double rtol, double tol)
{
    integ_system sys = {2, osc_rhs, NULL};
    integ_options o = opts(method, rtol, rtol * 1e-2);
    double times[41], y0[2] = {1, 0};
    for (int k = 0; k < 41; k++)
        times[k] = 0.5 * k;
    rec r = {.dim = 2};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 41, rec_sample, &r, &st);
    cr_assert_eq(rc, HAMEL_OK, "%s: code %d: %s", method, rc, st.reason);
    cr_assert_eq(r.n, 41, "%s: %zu samples", method, r.n);
    cr_expect_eq(st.samples, 41);
    cr_expect_str_empty(st.reason);
    for (size_t k = 0; k < r.n; k++) {
        cr_expect_eq(r.t[k], times[k], "%s: sample %zu at %.17g", method, k, r.t[k]);
        expect_close("x", method, r.t[k], r.y[k][0], cos(r.t[k]), tol);
        expect_close("v", method, r.t[k], r.y[k][1], -sin(r.t[k]), tol);
    }
    cr_expect_gt(st.steps, 0);
    cr_expect_geq(st.rhs_evals, st.steps, "%s: %ld rhs calls for %ld steps", method, st.rhs_evals, st.steps);
}

Test(integ, oscillator_rk8pd) { check_oscillator("rk8pd", 1e-10, 2e-10); }
Test(integ, oscillator_rkf45) { check_oscillator("rkf45", 1e-10, 5e-9); }
Test(integ, oscillator_msbdf) { check_oscillator("msbdf", 1e-10, 1e-6); }
Test(integ, oscillator_rk4imp) { check_oscillator("rk4imp", 1e-10, 5e-8); }
Test(integ, oscillator_default_method) { check_oscillator(NULL, 1e-10, 2e-10); }

/* Every stepper, looser tolerance: each reaches the end close to the solution, and the
 * implicit ones (only) form finite-difference Jacobians. */
Test(integ, every_method_runs)
{
    static const struct {
        const char *name;
        int implicit;
        double tol;
    } m[] = {{"rk2", 0, 1e-4},   {"rk4", 0, 1e-5},     {"rkf45", 0, 1e-5},  {"rkck", 0, 1e-5},
             {"rk8pd", 0, 1e-5}, {"rk1imp", 1, 1e-2},  {"rk2imp", 1, 1e-4}, {"rk4imp", 1, 1e-5},
             {"bsimp", 1, 1e-5}, {"msadams", 0, 1e-4}, {"msbdf", 1, 1e-4}};
    integ_system sys = {2, osc_rhs, NULL};
    double times[2] = {M_PI, 2 * M_PI}, y0[2] = {1, 0};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        cr_expect(integ_method_known(m[i].name), "%s not known", m[i].name);
        integ_options o = opts(m[i].name, 1e-7, 1e-9);
        rec r = {.dim = 2};
        integ_stats st;
        int rc = integ_run(&sys, &o, 0, y0, times, 2, rec_sample, &r, &st);
        cr_expect_eq(rc, HAMEL_OK, "%s: code %d: %s", m[i].name, rc, st.reason);
        if (rc != HAMEL_OK)
            continue;
        expect_close("x", m[i].name, M_PI, r.y[0][0], -1, m[i].tol);
        expect_close("x", m[i].name, 2 * M_PI, r.y[1][0], 1, m[i].tol);
        expect_close("v", m[i].name, 2 * M_PI, r.y[1][1], 0, m[i].tol);
        if (m[i].implicit) {
            cr_expect_gt(st.jac_evals, 0, "%s formed no Jacobian", m[i].name);
            cr_expect_eq(st.jac_rhs_evals, st.jac_evals * 4, "%s: %ld rhs calls for %ld Jacobians", m[i].name,
                         st.jac_rhs_evals, st.jac_evals);
            cr_expect_lt(st.jac_rhs_evals, st.rhs_evals);
        } else {
            cr_expect_eq(st.jac_evals, 0, "%s formed a Jacobian", m[i].name);
        }
    }
}

/* Relative motion of two bodies, mu = 1, a = 1, e = 0.5, from periapsis: the solution
 * through Kepler's equation. y = (x, y, vx, vy). */
static int kepler_rhs(double t, const double *y, double *dydt, void *params)
{
    (void)t, (void)params;
    const double r = hypot(y[0], y[1]), r3 = r * r * r;
    dydt[0] = y[2];
    dydt[1] = y[3];
    dydt[2] = -y[0] / r3;
    dydt[3] = -y[1] / r3;
    return GSL_SUCCESS;
}

static void kepler_exact(double t, double e, double out[4])
{
    double E = t; /* mean motion 1: M = t */
    for (int i = 0; i < 50; i++)
        E -= (E - e * sin(E) - t) / (1 - e * cos(E));
    const double b = sqrt(1 - e * e), edot = 1 / (1 - e * cos(E));
    out[0] = cos(E) - e;
    out[1] = b * sin(E);
    out[2] = -sin(E) * edot;
    out[3] = b * cos(E) * edot;
}

static void check_kepler(const char *method, double tol)
{
    const double e = 0.5;
    integ_system sys = {4, kepler_rhs, NULL};
    integ_options o = opts(method, 1e-10, 1e-12);
    double times[50], y0[4];
    for (int k = 0; k < 50; k++)
        times[k] = 4 * M_PI * (k + 1) / 50; /* two orbits */
    kepler_exact(0, e, y0);
    rec r = {.dim = 4};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 50, rec_sample, &r, &st);
    cr_assert_eq(rc, HAMEL_OK, "%s: code %d: %s", method, rc, st.reason);
    cr_assert_eq(r.n, 50);
    for (size_t k = 0; k < r.n; k++) {
        double want[4];
        kepler_exact(r.t[k], e, want);
        cr_expect_eq(r.t[k], times[k]);
        for (int i = 0; i < 4; i++)
            expect_close("kepler state", method, r.t[k], r.y[k][i], want[i], tol);
    }
}

Test(integ, kepler_rk8pd) { check_kepler("rk8pd", 3e-9); }
Test(integ, kepler_rkf45) { check_kepler("rkf45", 5e-7); }
Test(integ, kepler_msbdf) { check_kepler("msbdf", 1e-5); }
Test(integ, kepler_rk4imp) { check_kepler("rk4imp", 5e-7); }

/* y' = A y, eigenvalues -1 and -1000: y = e^-t (1,1) + e^-1000t (1,-1). An explicit
 * stepper needs thousands of steps for stability alone; the implicit ones do not. */
static int stiff_rhs(double t, const double *y, double *dydt, void *params)
{
    (void)t, (void)params;
    dydt[0] = -500.5 * y[0] + 499.5 * y[1];
    dydt[1] = 499.5 * y[0] - 500.5 * y[1];
    return GSL_SUCCESS;
}

static void check_stiff(const char *method, double tol, long max_steps)
{
    integ_system sys = {2, stiff_rhs, NULL};
    integ_options o = opts(method, 1e-10, 1e-12);
    double times[] = {1e-3, 1e-2, 0.1, 1, 5, 10}, y0[2] = {2, 0};
    rec r = {.dim = 2};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 6, rec_sample, &r, &st);
    cr_assert_eq(rc, HAMEL_OK, "%s: code %d: %s", method, rc, st.reason);
    cr_assert_eq(r.n, 6);
    for (size_t k = 0; k < r.n; k++) {
        const double t = r.t[k], slow = exp(-t), fast = exp(-1000 * t);
        expect_close("y1", method, t, r.y[k][0], slow + fast, tol * (slow + fast));
        expect_close("y2", method, t, r.y[k][1], slow - fast, tol * slow + 1e-12);
    }
    cr_expect_leq(st.steps, max_steps, "%s took %ld steps on the stiff problem", method, st.steps);
}

Test(integ, stiff_msbdf) { check_stiff("msbdf", 5e-6, 1000); }
Test(integ, stiff_rk4imp) { check_stiff("rk4imp", 5e-7, 600); }
Test(integ, stiff_bsimp) { check_stiff("bsimp", 1e-9, 100); }

/* The same problem costs an explicit stepper far more (the comparison the stiff tests
 * rely on). */
Test(integ, stiff_is_stiff_for_explicit)
{
    integ_system sys = {2, stiff_rhs, NULL};
    integ_options o = opts("rkf45", 1e-10, 1e-12);
    double times[] = {10}, y0[2] = {2, 0};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 1, NULL, NULL, &st);
    cr_assert_eq(rc, HAMEL_OK, "%s", st.reason);
    cr_expect_gt(st.steps, 1500, "rkf45 took only %ld steps", st.steps);
}

/* Output times are hit exactly, including awkward ones, and never overshot. */
Test(integ, output_times_exact)
{
    const char *methods[] = {"rk8pd", "rkf45", "rk2", "msadams"};
    double times[] = {0.1, 1.0 / 3, 0.5, 2.0 / 3, 1 + 1e-9, 1.7, M_PI};
    for (size_t m = 0; m < 4; m++) {
        osc o = {0, -HUGE_VAL};
        integ_system sys = {2, osc_rhs, &o};
        integ_options op = opts(methods[m], 1e-8, 1e-10);
        double y0[2] = {1, 0};
        rec r = {.dim = 2};
        integ_stats st;
        int rc = integ_run(&sys, &op, 0, y0, times, 7, rec_sample, &r, &st);
        cr_assert_eq(rc, HAMEL_OK, "%s: %s", methods[m], st.reason);
        cr_assert_eq(r.n, 7);
        for (size_t k = 0; k < 7; k++)
            cr_expect_eq(r.t[k], times[k], "%s: sample %zu at %.17g, wanted %.17g", methods[m], k, r.t[k],
                         times[k]);
        cr_expect_eq(st.t, M_PI);
        cr_expect_leq(o.t_max, M_PI, "%s evaluated the rhs at t = %.17g > t_end", methods[m], o.t_max);
        cr_expect_eq(o.calls, st.rhs_evals, "%s: the rhs saw %ld calls, stats say %ld", methods[m], o.calls,
                     st.rhs_evals);
    }
}

/* A driver applied twice gives the same answer (each run starts afresh). */
Test(integ, driver_reuse)
{
    integ_system sys = {2, osc_rhs, NULL};
    integ_options o = opts("msbdf", 1e-8, 1e-10);
    integ_driver *d = NULL;
    char reason[INTEG_REASON_MAX];
    cr_assert_eq(integ_driver_new(&sys, &o, &d, reason, sizeof reason), HAMEL_OK, "%s", reason);
    double times[] = {1, 2, 3}, y0[2] = {1, 0};
    rec a = {.dim = 2}, b = {.dim = 2};
    integ_stats sa, sb;
    cr_assert_eq(integ_driver_apply(d, 0, y0, times, 3, rec_sample, &a, &sa), HAMEL_OK);
    cr_assert_eq(integ_driver_apply(d, 0, y0, times, 3, rec_sample, &b, &sb), HAMEL_OK);
    cr_expect_eq(sa.steps, sb.steps);
    cr_expect_eq(sa.rhs_evals, sb.rhs_evals);
    for (int k = 0; k < 3; k++)
        cr_expect_eq(a.y[k][0], b.y[k][0], "run 1 %.17g, run 2 %.17g", a.y[k][0], b.y[k][0]);
    integ_driver_free(d);
    integ_driver_free(NULL);
}

/* Step budget: a total over all intervals; the samples before it stay good. */
Test(integ, step_budget)
{
    integ_system sys = {2, osc_rhs, NULL};
    integ_options o = opts("rk8pd", 1e-10, 1e-12);
    _Atomic double progress = -1;
    o.max_steps = 30;
    o.progress = &progress;
    double times[101], y0[2] = {1, 0};
    for (int k = 0; k < 101; k++)
        times[k] = k; /* each interval is a few steps: the budget runs out part-way */
    rec r = {.dim = 2};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 101, rec_sample, &r, &st);
    cr_assert_eq(rc, HAMEL_E_STEP_LIMIT, "code %d: %s", rc, st.reason);
    cr_expect_eq(st.steps, 30);
    cr_expect_gt(r.n, 1, "%zu samples before the budget ran out", r.n);
    cr_expect_lt(r.n, 101);
    cr_expect_eq(st.samples, (long)r.n);
    cr_expect_gt(st.t, r.t[r.n - 1]);
    cr_expect_lt(st.t, r.t[r.n - 1] + 1);
    cr_expect(strstr(st.reason, "30 steps") != NULL, "reason: %s", st.reason);
    double p = atomic_load(&progress);
    cr_expect(p > 0 && p < 1 && fabs(p - st.t / 100) < 1e-12, "progress %g at t = %g", p, st.t);
    for (size_t k = 0; k < r.n; k++)
        expect_close("x", "rk8pd", r.t[k], r.y[k][0], cos(r.t[k]), 1e-8);
}

/* A right-hand side that takes about 0.1 ms per call. */
static int slow_rhs(double t, const double *y, double *dydt, void *params)
{
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
    return osc_rhs(t, y, dydt, params);
}

Test(integ, wall_budget)
{
    integ_system sys = {2, slow_rhs, NULL};
    integ_options o = opts("rk8pd", 1e-12, 1e-14);
    o.max_wall_seconds = 0.05;
    double times[] = {0, 1000}, y0[2] = {1, 0};
    rec r = {.dim = 2};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 2, rec_sample, &r, &st);
    cr_assert_eq(rc, HAMEL_E_TIME_LIMIT, "code %d: %s", rc, st.reason);
    cr_expect_eq(r.n, 1, "the sample at t0 is delivered");
    cr_expect_geq(st.wall_ms, 50, "stopped after %g ms", st.wall_ms);
    cr_expect_lt(st.wall_ms, 1000, "stopped only after %g ms", st.wall_ms);
    cr_expect(strstr(st.reason, "wall") != NULL, "reason: %s", st.reason);
}

Test(integ, cancel_from_sample)
{
    integ_system sys = {2, osc_rhs, NULL};
    integ_options o = opts("rk8pd", 1e-10, 1e-12);
    atomic_int cancel = 0;
    o.cancel = &cancel;
    double times[10], y0[2] = {1, 0};
    for (int k = 0; k < 10; k++)
        times[k] = k;
    rec r = {.dim = 2, .cancel = &cancel, .cancel_at = 3};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 10, rec_sample, &r, &st);
    cr_assert_eq(rc, HAMEL_E_CANCELLED, "code %d: %s", rc, st.reason);
    cr_expect_eq(r.n, 3);
    cr_expect_eq(st.t, 2.0, "stopped at t = %g, right after the third sample", st.t);
}

static int stop_sample(double t, const double *y, void *ctx)
{
    (void)y;
    return rec_sample(t, y, ctx) == 0 && t >= 2 ? HAMEL_E_LIMIT : 0;
}

Test(integ, sample_callback_stops)
{
    integ_system sys = {2, osc_rhs, NULL};
    integ_options o = opts("rkf45", 1e-8, 1e-10);
    double times[] = {0, 1, 2, 3, 4}, y0[2] = {1, 0};
    rec r = {.dim = 2};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 5, stop_sample, &r, &st);
    cr_expect_eq(rc, HAMEL_E_LIMIT, "code %d: %s", rc, st.reason);
    cr_expect_eq(r.n, 3);
    cr_expect_str_not_empty(st.reason);
}

/* Fails (like a singular mass matrix) for t > 1.25. (Not at 1 + ulp: bsimp's sub-steps may
 * evaluate f a few ulps past the end of a step.) */
static int badfunc_rhs(double t, const double *y, double *dydt, void *params)
{
    if (t > 1.25)
        return GSL_EBADFUNC;
    return osc_rhs(t, y, dydt, params);
}

Test(integ, rhs_failure_is_numeric)
{
    const char *methods[] = {"rk8pd", "msbdf", "rk4imp", "bsimp"};
    for (size_t m = 0; m < 4; m++) {
        integ_system sys = {2, badfunc_rhs, NULL};
        integ_options o = opts(methods[m], 1e-10, 1e-12);
        double times[] = {0, 0.5, 1, 1.5, 2}, y0[2] = {1, 0};
        rec r = {.dim = 2};
        integ_stats st;
        int rc = integ_run(&sys, &o, 0, y0, times, 5, rec_sample, &r, &st);
        cr_expect_eq(rc, HAMEL_E_NUMERIC, "%s: code %d: %s", methods[m], rc, st.reason);
        cr_expect_eq(r.n, 3, "%s: %zu samples", methods[m], r.n);
        cr_expect(st.t >= 1 && st.t <= 1.25, "%s stopped at t = %g", methods[m], st.t);
        cr_expect(strstr(st.reason, "could not be evaluated") != NULL, "%s: %s", methods[m], st.reason);
    }
}

/* Derivative NaN for t > 1: must fail at once, not shrink the step forever. */
static int nan_rhs(double t, const double *y, double *dydt, void *params)
{
    osc_rhs(t, y, dydt, params);
    if (t > 1)
        dydt[1] = NAN;
    return GSL_SUCCESS;
}

Test(integ, nan_rhs_fails, .timeout = 10)
{
    const char *methods[] = {"rk8pd", "rkf45", "msadams", "msbdf", "rk4imp"};
    for (size_t m = 0; m < 5; m++) {
        integ_system sys = {2, nan_rhs, NULL};
        integ_options o = opts(methods[m], 1e-10, 1e-12);
        double times[] = {0, 1, 2}, y0[2] = {1, 0};
        rec r = {.dim = 2};
        integ_stats st;
        int rc = integ_run(&sys, &o, 0, y0, times, 3, rec_sample, &r, &st);
        cr_expect_eq(rc, HAMEL_E_NUMERIC, "%s: code %d: %s", methods[m], rc, st.reason);
        cr_expect_eq(r.n, 2, "%s: %zu samples", methods[m], r.n);
        cr_expect(strstr(st.reason, "not finite") != NULL, "%s: %s", methods[m], st.reason);
    }
}

/* Finite derivatives whose integral overflows: the state check catches it. */
static int overflow_rhs(double t, const double *y, double *dydt, void *params)
{
    (void)t, (void)y, (void)params;
    dydt[0] = DBL_MAX;
    return GSL_SUCCESS;
}

Test(integ, state_overflow_fails, .timeout = 10)
{
    integ_system sys = {1, overflow_rhs, NULL};
    integ_options o = opts("rk2", 1e-6, 1e-8);
    double times[] = {10}, y0[1] = {0};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 1, NULL, NULL, &st);
    cr_expect_eq(rc, HAMEL_E_NUMERIC, "code %d: %s", rc, st.reason);
    cr_expect(strstr(st.reason, "state is not finite") != NULL, "reason: %s", st.reason);
}

/* A right-hand side that chatters between calls: no step size meets the tolerance, so
 * the step shrinks until it no longer moves t. */
static int chatter_rhs(double t, const double *y, double *dydt, void *params)
{
    (void)t, (void)y;
    long *calls = params;
    dydt[0] = (++*calls % 2) ? 1e10 : -1e10;
    return GSL_SUCCESS;
}

Test(integ, step_size_underflow, .timeout = 10)
{
    long calls = 0;
    integ_system sys = {1, chatter_rhs, &calls};
    integ_options o = opts("rkf45", 1e-10, 1e-12);
    double times[] = {1, 2}, y0[1] = {1};
    integ_stats st;
    int rc = integ_run(&sys, &o, 1, y0, times, 2, NULL, NULL, &st);
    cr_expect_eq(rc, HAMEL_E_INTEGRATOR, "code %d: %s", rc, st.reason);
    cr_expect(strstr(st.reason, "underflow") != NULL, "reason: %s", st.reason);
    cr_expect_gt(st.failed_steps, 0);
}

Test(integ, unknown_method)
{
    cr_expect_not(integ_method_known("rk5"));
    cr_expect(integ_method_known(NULL));
    integ_system sys = {2, osc_rhs, NULL};
    integ_options o = opts("rk5", 1e-10, 1e-12);
    double times[] = {1}, y0[2] = {1, 0};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 1, NULL, NULL, &st);
    cr_expect_eq(rc, HAMEL_E_BAD_REQUEST, "code %d", rc);
    cr_expect(strstr(st.reason, "\"rk5\"") != NULL, "reason: %s", st.reason);
    char sentinel;
    integ_driver *d = (integ_driver *)&sentinel; /* must be reset to NULL */
    rc = integ_driver_new(&sys, &o, &d, NULL, 0);
    cr_expect_eq(rc, HAMEL_E_BAD_REQUEST);
    cr_expect_null(d);
}

Test(integ, bad_arguments)
{
    integ_system sys = {2, osc_rhs, NULL};
    integ_options o = opts("rk8pd", 0, 0);
    double y0[2] = {1, 0}, bad_y0[2] = {NAN, 0};
    integ_stats st;
    double t1[] = {1};
    cr_expect_eq(integ_run(&sys, &o, 0, y0, t1, 1, NULL, NULL, &st), HAMEL_E_BAD_REQUEST,
                 "rtol = atol = 0 accepted");
    o = opts("rk8pd", 1e-8, 1e-10);
    double unsorted[] = {1, 3, 2};
    cr_expect_eq(integ_run(&sys, &o, 0, y0, unsorted, 3, NULL, NULL, &st), HAMEL_E_BAD_REQUEST,
                 "unsorted times accepted");
    double before[] = {-1, 1};
    cr_expect_eq(integ_run(&sys, &o, 0, y0, before, 2, NULL, NULL, &st), HAMEL_E_BAD_REQUEST,
                 "a time before t0 accepted");
    cr_expect_eq(integ_run(&sys, &o, 0, bad_y0, t1, 1, NULL, NULL, &st), HAMEL_E_BAD_INITIAL,
                 "NaN y0 accepted");
    /* Only t0 itself: one sample, no step. */
    double only_t0[] = {0};
    rec r = {.dim = 2};
    cr_expect_eq(integ_run(&sys, &o, 0, y0, only_t0, 1, rec_sample, &r, &st), HAMEL_OK);
    cr_expect_eq(r.n, 1);
    cr_expect_eq(st.steps, 0);
}
