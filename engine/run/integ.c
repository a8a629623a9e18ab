/* integ.c — the integration driver over gsl_odeiv2 (see integ.h).
 *
 * A run is: validate, reset the stepper, then for each output time integ__advance
 * steps (one gsl_odeiv2_evolve_apply per step, clamped to the output time) with the
 * budget/cancel checks in between, and the sample callback is called there. Events
 * (integ.h) are looked for after each accepted step (integ__events): their times are
 * found by Brent's method on a re-integration from the step's start (integ__reach).
 */
#include "integ.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_odeiv2.h>
#include <gsl/gsl_roots.h>

#include "error.h"

const integ_options integ_default_options = {
    .method = INTEG_DEFAULT_METHOD,
    .rtol = INTEG_DEFAULT_RTOL,
    .atol = INTEG_DEFAULT_ATOL,
    .max_steps = INTEG_DEFAULT_MAX_STEPS,
    .max_wall_seconds = INTEG_DEFAULT_MAX_WALL_SECONDS,
};

struct integ_method {
    const char *name;
    const gsl_odeiv2_step_type *const *type;
    int implicit; /* calls the Jacobian */
};

static const struct integ_method integ__methods[] = {
    {"rk2", &gsl_odeiv2_step_rk2, 0},       {"rk4", &gsl_odeiv2_step_rk4, 0},
    {"rkf45", &gsl_odeiv2_step_rkf45, 0},   {"rkck", &gsl_odeiv2_step_rkck, 0},
    {"rk8pd", &gsl_odeiv2_step_rk8pd, 0},   {"rk1imp", &gsl_odeiv2_step_rk1imp, 1},
    {"rk2imp", &gsl_odeiv2_step_rk2imp, 1}, {"rk4imp", &gsl_odeiv2_step_rk4imp, 1},
    {"bsimp", &gsl_odeiv2_step_bsimp, 1},   {"msadams", &gsl_odeiv2_step_msadams, 0},
    {"msbdf", &gsl_odeiv2_step_msbdf, 1},
};
#define INTEG_N_METHODS (sizeof integ__methods / sizeof integ__methods[0])
#define INTEG_METHOD_NAMES "rk2 rk4 rkf45 rkck rk8pd rk1imp rk2imp rk4imp bsimp msadams msbdf"
#define INTEG_EVENT_MAX_SUBSTEPS 100000 /* steps of one re-integration within a step */
#define INTEG_EVENT_MAX_ITER 200        /* Brent iterations for one crossing */
#define INTEG_EVENT_PROBES 3            /* interior points of a step where g is also looked at */
#define INTEG__STOPPED 101              /* private: an event ended the run */

struct integ_driver {
    integ_system sys;
    integ_options opt;
    const struct integ_method *method;
    gsl_odeiv2_system gsys; /* our wrappers, params = this driver */
    gsl_odeiv2_step *step;
    gsl_odeiv2_control *control;
    gsl_odeiv2_evolve *evolve;
    gsl_odeiv2_driver wiring; /* never applied: msadams/msbdf read the control through it */
    double *y;                /* the state, dim */
    double *work;             /* dim: f(t0, y0) for the first step size */
    double *jac;              /* 3 dim: f0, f1, perturbed y; NULL for explicit steppers */
    /* Counters and failure record of the current run. */
    long rhs_evals, jac_evals, jac_rhs_evals;
    int rhs_failed; /* the right-hand side failed since the current step began */
    char rhs_reason[INTEG_REASON_MAX];
    /* Events (opt.n_events > 0; else all NULL): a private stepper for the
     * re-integrations, Brent's solver and the values of g. */
    gsl_odeiv2_step *ev_step;
    gsl_odeiv2_control *ev_control;
    gsl_odeiv2_evolve *ev_evolve;
    gsl_odeiv2_driver ev_wiring;
    gsl_root_fsolver *ev_root;
    double *ev_ga, *ev_gb, *ev_g;  /* [ne] g at the step's start, at its end, at a trial time */
    double *ev_ya, *ev_y;          /* [dim] the state at the step's start, a re-integrated state */
    double ev_ta;                  /* the step's start */
    double *ev_t;                  /* [ne * (PROBES + 1)] crossing times of one step, increasing */
    int *ev_i;                     /* [ne * (PROBES + 1)] their events */
    double *ev_fa, *ev_fb, *ev_yh; /* [dim] f at the step's ends, a cubic Hermite state inside */
    double *ev_yc, ev_fa_t;        /* [dim] the state and time of ev_fa (NAN: not known) */
    double *ev_gp;                 /* [ne * PROBES] g at the probes (NAN: not known) */
    int ev_index;                  /* the event Brent's method works on */
    long ev_rhs_evals;
};

/* Where a run stands. */
typedef struct integ__run {
    double t0, t_end, t, h;
    double deadline; /* CLOCK_MONOTONIC seconds */
    long steps;
    int stopped_by; /* 1 + the event that ended the run, else 0 */
    char *reason;   /* INTEG_REASON_MAX bytes */
} integ__run;

__attribute__((format(printf, 4, 5))) static int integ__fail(char *reason, size_t size, int code,
                                                             const char *fmt, ...)
{
    if (reason && size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(reason, size, fmt, ap);
        va_end(ap);
    }
    return code;
}

static double integ__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double integ_now(void) { return integ__now(); }

/* The clock of the deadline check between two steps: the coarse one (a read of the
 * kernel's last tick, 4.5 ns here against 35 for CLOCK_MONOTONIC; it lags by up to a
 * tick, a few ms, against budgets of seconds). */
static double integ__now_coarse(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const struct integ_method *integ__method_find(const char *name)
{
    if (!name || !*name)
        name = INTEG_DEFAULT_METHOD;
    for (size_t i = 0; i < INTEG_N_METHODS; i++)
        if (strcmp(integ__methods[i].name, name) == 0)
            return &integ__methods[i];
    return NULL;
}

int integ_method_known(const char *name) { return integ__method_find(name) != NULL; }

/* The state's component i as a message names it: its name, else "component i". */
static void integ__component(const integ_driver *d, size_t i, char *out, size_t size)
{
    if (d->opt.state_names && d->opt.state_names[i])
        snprintf(out, size, "%.80s", d->opt.state_names[i]);
    else
        snprintf(out, size, "component %zu", i);
}

/* The gsl_odeiv2 right-hand side: counts, calls the caller's, and turns a failure or a
 * non-finite derivative into GSL_EBADFUNC (which makes evolve return at once). */
static int integ__rhs(double t, const double y[], double dydt[], void *params)
{
    integ_driver *d = params;
    d->rhs_evals++;
    int status = d->sys.rhs(t, y, dydt, d->sys.params);
    if (status != GSL_SUCCESS) {
        if (!d->rhs_failed)
            integ__fail(d->rhs_reason, sizeof d->rhs_reason, 0,
                        "the right-hand side could not be evaluated at t = %.17g", t);
        d->rhs_failed = 1;
        return GSL_EBADFUNC;
    }
    for (size_t i = 0; i < d->sys.dim; i++) {
        if (!isfinite(dydt[i])) {
            char what[96];
            integ__component(d, i, what, sizeof what);
            if (!d->rhs_failed)
                integ__fail(d->rhs_reason, sizeof d->rhs_reason, 0,
                            "the right-hand side is not finite at t = %.17g (the rate of %s is %g)", t, what,
                            dydt[i]);
            d->rhs_failed = 1;
            return GSL_EBADFUNC;
        }
    }
    return GSL_SUCCESS;
}

/* Forward-difference step for a variable of magnitude |x|. */
static double integ__fd_step(double x) { return sqrt(DBL_EPSILON) * fmax(fabs(x), 1.0); }

/* The Jacobian for implicit steppers, by forward differences on the right-hand side:
 * dfdy[i*dim + j] = df_i/dy_j (row-major, as gsl_odeiv2 wants) and dfdt = df/dt.
 * Costs dim + 2 right-hand side calls, all counted in jac_rhs_evals. */
static int integ__jacobian(double t, const double y[], double *dfdy, double dfdt[], void *params)
{
    integ_driver *d = params;
    const size_t n = d->sys.dim;
    double *f0 = d->jac, *f1 = d->jac + n, *yp = d->jac + 2 * n;
    const long before = d->rhs_evals;

    int status = integ__rhs(t, y, f0, d);
    memcpy(yp, y, n * sizeof *yp);
    for (size_t j = 0; j < n && status == GSL_SUCCESS; j++) {
        yp[j] = y[j] + integ__fd_step(y[j]);
        const double dy = yp[j] - y[j]; /* the step actually represented */
        status = integ__rhs(t, yp, f1, d);
        for (size_t i = 0; i < n && status == GSL_SUCCESS; i++)
            dfdy[i * n + j] = (f1[i] - f0[i]) / dy;
        yp[j] = y[j];
    }
    if (status == GSL_SUCCESS) {
        const double tp = t + integ__fd_step(t);
        status = integ__rhs(tp, y, f1, d);
        for (size_t i = 0; i < n && status == GSL_SUCCESS; i++)
            dfdt[i] = (f1[i] - f0[i]) / (tp - t);
    }
    d->jac_evals++;
    d->jac_rhs_evals += d->rhs_evals - before;
    return status;
}

/* The event workspaces of a driver whose options have events: 0, or -1 when out of
 * memory (the driver's free releases what was made). */
static int integ__events_new(integ_driver *d)
{
    const size_t n = d->sys.dim, ne = d->opt.n_events > 0 ? (size_t)d->opt.n_events : 0;
    if (ne == 0 || !d->opt.event)
        return 0;
    d->ev_step = gsl_odeiv2_step_alloc(*d->method->type, n);
    d->ev_control = gsl_odeiv2_control_y_new(d->opt.atol, d->opt.rtol);
    d->ev_evolve = gsl_odeiv2_evolve_alloc(n);
    d->ev_root = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
    d->ev_ga = malloc(ne * sizeof *d->ev_ga);
    d->ev_gb = malloc(ne * sizeof *d->ev_gb);
    d->ev_g = malloc(ne * sizeof *d->ev_g);
    d->ev_t = malloc(ne * (INTEG_EVENT_PROBES + 1) * sizeof *d->ev_t);
    d->ev_i = malloc(ne * (INTEG_EVENT_PROBES + 1) * sizeof *d->ev_i);
    d->ev_ya = malloc(n * sizeof *d->ev_ya);
    d->ev_y = malloc(n * sizeof *d->ev_y);
    d->ev_fa = malloc(n * sizeof *d->ev_fa);
    d->ev_fb = malloc(n * sizeof *d->ev_fb);
    d->ev_yh = malloc(n * sizeof *d->ev_yh);
    d->ev_yc = malloc(n * sizeof *d->ev_yc);
    d->ev_gp = malloc(ne * INTEG_EVENT_PROBES * sizeof *d->ev_gp);
    d->ev_fa_t = NAN;
    return d->ev_step && d->ev_control && d->ev_evolve && d->ev_root && d->ev_ga && d->ev_gb && d->ev_g &&
                   d->ev_t && d->ev_i && d->ev_ya && d->ev_y && d->ev_fa && d->ev_fb && d->ev_yh &&
                   d->ev_yc && d->ev_gp
               ? 0
               : -1;
}

int integ_driver_new(const integ_system *sys, const integ_options *opt, integ_driver **out, char *reason,
                     size_t reason_size)
{
    *out = NULL;
    if (!sys || sys->dim == 0 || !sys->rhs)
        return integ__fail(reason, reason_size, HAMEL_E_INTERNAL, "integ: no system to integrate");
    if (!opt)
        opt = &integ_default_options;
    const struct integ_method *m = integ__method_find(opt->method);
    if (!m)
        return integ__fail(reason, reason_size, HAMEL_E_BAD_REQUEST,
                           "unknown integrator method \"%s\" (known: " INTEG_METHOD_NAMES ")", opt->method);
    if (!(opt->rtol >= 0 && opt->atol >= 0 && isfinite(opt->rtol) && isfinite(opt->atol)) ||
        (opt->rtol == 0 && opt->atol == 0))
        return integ__fail(reason, reason_size, HAMEL_E_BAD_REQUEST,
                           "rtol and atol must be finite, >= 0 and not both 0 (got %g, %g)", opt->rtol,
                           opt->atol);
    if (!(opt->h0 >= 0 && isfinite(opt->h0)))
        return integ__fail(reason, reason_size, HAMEL_E_BAD_REQUEST,
                           "the initial step must be finite and >= 0 (got %g)", opt->h0);
    if (opt->n_events < 0 || (opt->n_events > 0 && (!opt->event || !opt->event_hit)))
        return integ__fail(reason, reason_size, HAMEL_E_INTERNAL, "integ: events without their functions");

    integ_driver *d = calloc(1, sizeof *d);
    if (!d)
        return integ__fail(reason, reason_size, HAMEL_E_INTERNAL, "out of memory");
    d->sys = *sys;
    d->opt = *opt;
    d->method = m;
    d->opt.method = m->name;
    if (d->opt.max_steps <= 0)
        d->opt.max_steps = INTEG_DEFAULT_MAX_STEPS;
    if (!(d->opt.max_wall_seconds > 0))
        d->opt.max_wall_seconds = INTEG_DEFAULT_MAX_WALL_SECONDS;
    d->gsys = (gsl_odeiv2_system){integ__rhs, integ__jacobian, sys->dim, d};
    d->step = gsl_odeiv2_step_alloc(*m->type, sys->dim);
    d->control = gsl_odeiv2_control_y_new(opt->atol, opt->rtol);
    d->evolve = gsl_odeiv2_evolve_alloc(sys->dim);
    d->y = malloc(sys->dim * sizeof *d->y);
    d->work = malloc(sys->dim * sizeof *d->work);
    if (m->implicit)
        d->jac = malloc(3 * sys->dim * sizeof *d->jac);
    if (!d->step || !d->control || !d->evolve || !d->y || !d->work || (m->implicit && !d->jac) ||
        integ__events_new(d) != 0) {
        integ_driver_free(d);
        return integ__fail(reason, reason_size, HAMEL_E_INTERNAL, "out of memory");
    }
    d->wiring =
        (gsl_odeiv2_driver){.sys = &d->gsys, .s = d->step, .c = d->control, .e = d->evolve, .hmax = HUGE_VAL};
    gsl_odeiv2_step_set_driver(d->step, &d->wiring);
    gsl_odeiv2_control_set_driver(d->control, &d->wiring);
    gsl_odeiv2_evolve_set_driver(d->evolve, &d->wiring);
    if (d->ev_step) {
        d->ev_wiring = (gsl_odeiv2_driver){
            .sys = &d->gsys, .s = d->ev_step, .c = d->ev_control, .e = d->ev_evolve, .hmax = HUGE_VAL};
        gsl_odeiv2_step_set_driver(d->ev_step, &d->ev_wiring);
        gsl_odeiv2_control_set_driver(d->ev_control, &d->ev_wiring);
        gsl_odeiv2_evolve_set_driver(d->ev_evolve, &d->ev_wiring);
    }
    *out = d;
    return HAMEL_OK;
}

void integ_driver_free(integ_driver *d)
{
    if (!d)
        return;
    if (d->step)
        gsl_odeiv2_step_free(d->step);
    if (d->control)
        gsl_odeiv2_control_free(d->control);
    if (d->evolve)
        gsl_odeiv2_evolve_free(d->evolve);
    free(d->y);
    free(d->work);
    free(d->jac);
    if (d->ev_step)
        gsl_odeiv2_step_free(d->ev_step);
    if (d->ev_control)
        gsl_odeiv2_control_free(d->ev_control);
    if (d->ev_evolve)
        gsl_odeiv2_evolve_free(d->ev_evolve);
    if (d->ev_root)
        gsl_root_fsolver_free(d->ev_root);
    free(d->ev_ga);
    free(d->ev_gb);
    free(d->ev_g);
    free(d->ev_t);
    free(d->ev_i);
    free(d->ev_ya);
    free(d->ev_y);
    free(d->ev_fa);
    free(d->ev_fb);
    free(d->ev_yh);
    free(d->ev_yc);
    free(d->ev_gp);
    free(d);
}

/* A first step size from the scaled sizes of y0 and f(t0, y0) (Hairer–Nørsett–Wanner's
 * first guess, without the trial Euler step): 1% of the time y takes to change by
 * itself, at most the first output interval. */
static int integ__first_step(integ_driver *d, integ__run *r, double span)
{
    int status = integ__rhs(r->t, d->y, d->work, d);
    if (status != GSL_SUCCESS)
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_NUMERIC, "%s", d->rhs_reason);
    double d0 = 0, d1 = 0;
    for (size_t i = 0; i < d->sys.dim; i++) {
        const double sc = d->opt.atol + d->opt.rtol * fabs(d->y[i]);
        if (sc > 0) {
            d0 = fmax(d0, fabs(d->y[i]) / sc);
            d1 = fmax(d1, fabs(d->work[i]) / sc);
        }
    }
    r->h = (d0 < 1e-5 || d1 < 1e-5) ? 1e-6 * span : fmin(0.01 * d0 / d1, span);
    return HAMEL_OK;
}

/* The checks between two steps: cancellation, step budget, deadline. */
static int integ__check_budgets(integ_driver *d, integ__run *r)
{
    if (d->opt.cancel && atomic_load_explicit(d->opt.cancel, memory_order_relaxed))
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_CANCELLED, "cancelled at t = %.17g", r->t);
    if (r->steps + d->opt.steps_done >= d->opt.max_steps)
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_STEP_LIMIT,
                           "the budget of %ld steps ran out at t = %.17g (t_end = %.17g)", d->opt.max_steps,
                           r->t, r->t_end);
    if (integ__now_coarse() > r->deadline)
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_TIME_LIMIT,
                           "the wall-time budget of %g s ran out at t = %.17g (t_end = %.17g)",
                           d->opt.max_wall_seconds, r->t, r->t_end);
    return HAMEL_OK;
}

/* ---- events ---- */

/* g at (t, y) into g: 0, or HAMEL_E_NUMERIC when it cannot be evaluated or is not finite. */
static int integ__event_values(integ_driver *d, integ__run *r, double t, const double *y, double *g)
{
    if (d->opt.event(t, y, g, d->opt.event_ctx) != 0)
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_NUMERIC,
                           "the event functions could not be evaluated at t = %.17g", t);
    for (int i = 0; i < d->opt.n_events; i++)
        if (!isfinite(g[i])) {
            if (d->opt.event_names && d->opt.event_names[i])
                return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_NUMERIC,
                                   "event \"%.80s\" is not finite at t = %.17g (%g)", d->opt.event_names[i],
                                   t, g[i]);
            return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_NUMERIC,
                               "event %d is not finite at t = %.17g (%g)", i, t, g[i]);
        }
    return HAMEL_OK;
}

/* The state at tau in [ev_ta, the step's end] into ev_y, by integrating again from the
 * step's start (ev_ta, ev_ya) with the private stepper: for a one-step method one step
 * of size tau - ev_ta, unless its error is too large. Returns 0 or an engine error. */
static int integ__reach(integ_driver *d, double tau)
{
    const size_t n = d->sys.dim;
    memcpy(d->ev_y, d->ev_ya, n * sizeof *d->ev_y);
    if (!(tau > d->ev_ta))
        return HAMEL_OK;
    gsl_odeiv2_step_reset(d->ev_step);
    gsl_odeiv2_evolve_reset(d->ev_evolve);
    const long before = d->rhs_evals;
    double t = d->ev_ta, h = tau - d->ev_ta;
    int rc = HAMEL_OK;
    for (long i = 0; t < tau && rc == HAMEL_OK; i++) {
        d->rhs_failed = 0;
        const double t_before = t;
        int status =
            gsl_odeiv2_evolve_apply(d->ev_evolve, d->ev_control, d->ev_step, &d->gsys, &t, tau, &h, d->ev_y);
        if (status != GSL_SUCCESS || i >= INTEG_EVENT_MAX_SUBSTEPS || !(t > t_before))
            rc = d->rhs_failed || status == GSL_EBADFUNC ? HAMEL_E_NUMERIC : HAMEL_E_INTEGRATOR;
    }
    d->ev_rhs_evals += d->rhs_evals - before;
    return rc;
}

/* phi(tau) = g_i(tau, Y(tau)) for Brent's method (i = ev_index); NaN when it fails. */
static double integ__phi(double tau, void *params)
{
    integ_driver *d = params;
    if (integ__reach(d, tau) != HAMEL_OK || d->opt.event(tau, d->ev_y, d->ev_g, d->opt.event_ctx) != 0)
        return NAN;
    return d->ev_g[d->ev_index];
}

/* The time in (ev_ta, tb] where event i crosses zero, g having changed sign over the step:
 * Brent's method on phi until the bracket is a few ulps of t wide. When the
 * re-integration does not bracket the root (it differs from the trajectory by rounding,
 * or by the tolerance for multistep methods, and g is that small at tb), the crossing
 * is at tb. */
static int integ__locate(integ_driver *d, integ__run *r, int i, double ta, double fa, double tb, double *tau)
{
    d->ev_index = i;
    double fb = integ__phi(tb, d);
    if (isnan(fb))
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_NUMERIC,
                           "event %d could not be evaluated while locating it in [%.17g, %.17g]", i, ta, tb);
    *tau = tb;
    if (fb == 0.0 || (fa > 0) == (fb > 0))
        return HAMEL_OK;
    gsl_function F = {integ__phi, d};
    int status = gsl_root_fsolver_set(d->ev_root, &F, ta, tb);
    const double eps = 4 * DBL_EPSILON * fmax(fabs(ta), fabs(tb));
    for (int it = 0; it < INTEG_EVENT_MAX_ITER && status == GSL_SUCCESS; it++) {
        status = gsl_root_fsolver_iterate(d->ev_root);
        if (status != GSL_SUCCESS)
            break;
        *tau = gsl_root_fsolver_root(d->ev_root);
        if (gsl_root_test_interval(gsl_root_fsolver_x_lower(d->ev_root), gsl_root_fsolver_x_upper(d->ev_root),
                                   eps, 0.0) == GSL_SUCCESS)
            break;
    }
    if (status != GSL_SUCCESS)
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_NUMERIC,
                           "event %d could not be located in [%.17g, %.17g]: %s", i, ta, tb,
                           gsl_strerror(status));
    return HAMEL_OK;
}

/* g at INTEG_EVENT_PROBES interior points of the step (ev_ta, ev_ya) -> (r->t, d->y), on
 * the cubic Hermite interpolant of the state from its values and derivatives at the
 * ends, into ev_gp; NAN where unknown (f or g not computable there). Only to see a g
 * that crosses zero and comes back within the step: crossings are located on the
 * re-integration, never on the interpolant. */
static void integ__probe(integ_driver *d, integ__run *r)
{
    const int ne = d->opt.n_events;
    const size_t n = d->sys.dim;
    for (int j = 0; j < ne * INTEG_EVENT_PROBES; j++)
        d->ev_gp[j] = NAN;
    if (d->opt.n_probe_events <= 0)
        return;
    const double ta = d->ev_ta, h = r->t - ta;
    const long before = d->rhs_evals;
    int ok = (d->ev_fa_t == ta && !memcmp(d->ev_yc, d->ev_ya, n * sizeof *d->ev_ya)) ||
             integ__rhs(ta, d->ev_ya, d->ev_fa, d) == GSL_SUCCESS;
    ok = ok && integ__rhs(r->t, d->y, d->ev_fb, d) == GSL_SUCCESS;
    d->rhs_failed = 0;
    d->ev_rhs_evals += d->rhs_evals - before;
    if (!ok) {
        d->ev_fa_t = NAN;
        return;
    }
    for (int p = 0; p < INTEG_EVENT_PROBES; p++) {
        const double th = (double)(p + 1) / (INTEG_EVENT_PROBES + 1), th2 = th * th, th3 = th2 * th;
        const double h00 = 2 * th3 - 3 * th2 + 1, h10 = th3 - 2 * th2 + th, h01 = -2 * th3 + 3 * th2,
                     h11 = th3 - th2;
        for (size_t k = 0; k < n; k++)
            d->ev_yh[k] = h00 * d->ev_ya[k] + h10 * h * d->ev_fa[k] + h01 * d->y[k] + h11 * h * d->ev_fb[k];
        if (d->opt.event(ta + th * h, d->ev_yh, d->ev_g, d->opt.event_ctx) != 0)
            continue;
        for (int i = 0; i < ne && i < d->opt.n_probe_events; i++)
            d->ev_gp[p * ne + i] = d->ev_g[i];
    }
    memcpy(d->ev_fa, d->ev_fb, n * sizeof *d->ev_fa); /* the next step starts here */
    memcpy(d->ev_yc, d->y, n * sizeof *d->ev_yc);
    d->ev_fa_t = r->t;
}

static int integ__sign(double g) { return (g > 0) - (g < 0); }

/* Whether event i wants a crossing from sign sa to sign sb. */
static int integ__wanted(const integ_driver *d, int i, int sa, int sb)
{
    const int want = d->opt.event_dir ? d->opt.event_dir[i] : INTEG_EVENT_BOTH;
    const int dir = sa < 0 ? INTEG_EVENT_RISING : INTEG_EVENT_FALLING;
    return sa != 0 && sb != sa && (want == INTEG_EVENT_BOTH || want == dir);
}

/* Inserts a crossing (tau, event i) into the step's list, kept in time order (stable
 * for equal times). */
static void integ__insert(integ_driver *d, int *nc, double tau, int i)
{
    int c = (*nc)++;
    for (; c > 0 && d->ev_t[c - 1] > tau; c--) {
        d->ev_t[c] = d->ev_t[c - 1];
        d->ev_i[c] = d->ev_i[c - 1];
    }
    d->ev_t[c] = tau;
    d->ev_i[c] = i;
}

/* Event i in a step whose probes show more sign changes than its ends (a g that crosses
 * zero and comes back within the step): each piece between probes whose signs on the
 * re-integration differ is located on its own. */
static int integ__pieces(integ_driver *d, integ__run *r, int i, int *nc)
{
    const int P = INTEG_EVENT_PROBES;
    const double ta = d->ev_ta, h = r->t - ta;
    double t0 = ta, g0 = d->ev_ga[i];
    int rc = HAMEL_OK;
    for (int p = 0; p <= P && rc == HAMEL_OK; p++) {
        double t1 = p < P ? ta + h * (double)(p + 1) / (P + 1) : r->t;
        double g1 = d->ev_gb[i];
        if (p < P) {
            if (isnan(d->ev_gp[p * d->opt.n_events + i]))
                continue;
            d->ev_index = i;
            g1 = integ__phi(t1, d); /* the value on the re-integration, not the interpolant */
            if (isnan(g1))
                return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_NUMERIC,
                                   "event %d could not be evaluated at t = %.17g", i, t1);
        }
        if (integ__sign(g1) == 0 && p < P)
            continue;
        if (integ__wanted(d, i, integ__sign(g0), integ__sign(g1))) {
            double tau = t1;
            rc = integ__locate(d, r, i, t0, g0, t1, &tau);
            integ__insert(d, nc, tau, i);
        }
        t0 = t1;
        g0 = g1;
    }
    return rc;
}

/* Sign changes of event i over the probes of the step (its ends included). */
static int integ__changes(const integ_driver *d, int i)
{
    int changes = 0, s = integ__sign(d->ev_ga[i]);
    for (int p = 0; p <= INTEG_EVENT_PROBES; p++) {
        double g = p < INTEG_EVENT_PROBES ? d->ev_gp[p * d->opt.n_events + i] : d->ev_gb[i];
        int sp = isnan(g) ? 0 : integ__sign(g);
        if (sp == 0)
            continue;
        changes += s != 0 && sp != s;
        s = sp;
    }
    return changes;
}

/* After an accepted step from (ev_ta, ev_ya) to (r->t, d->y): finds the crossings in
 * the requested directions, locates them, and reports them in time order. Returns 0,
 * INTEG__STOPPED (the run ends at an event: r->t and d->y are there) or an error. A
 * crossing is seen where g's signs differ at the step's ends (located over the whole
 * step), or where probes inside the step show it crossing zero and coming back (each
 * piece located on its own). */
static int integ__events(integ_driver *d, integ__run *r)
{
    const int ne = d->opt.n_events;
    int rc = integ__event_values(d, r, r->t, d->y, d->ev_gb);
    if (rc == HAMEL_OK)
        integ__probe(d, r);
    int nc = 0;
    for (int i = 0; i < ne && rc == HAMEL_OK; i++) {
        const int sa = integ__sign(d->ev_ga[i]), sb = integ__sign(d->ev_gb[i]);
        if (sa != 0 && integ__changes(d, i) > (sb != sa)) {
            rc = integ__pieces(d, r, i, &nc);
            continue;
        }
        if (!integ__wanted(d, i, sa, sb))
            continue;
        double tau = r->t;
        rc = integ__locate(d, r, i, d->ev_ta, d->ev_ga[i], r->t, &tau);
        integ__insert(d, &nc, tau, i);
    }
    for (int c = 0; c < nc && rc == HAMEL_OK; c++) {
        const double tau = d->ev_t[c];
        const double *y = d->y;
        if (tau < r->t) {
            rc = integ__reach(d, tau);
            if (rc != HAMEL_OK)
                return integ__fail(r->reason, INTEG_REASON_MAX, rc,
                                   "the state at event %d (t = %.17g) could not be computed", d->ev_i[c],
                                   tau);
            y = d->ev_y;
        }
        int hit = d->opt.event_hit(d->ev_i[c], tau, y, d->opt.event_ctx);
        if (hit == INTEG_EVENT_STOP) {
            /* crossings located at the same time (to the root's width) happened too: an
             * event on a contact's normal force and the contact's own lift-off */
            const double tie = 8 * DBL_EPSILON * fmax(fabs(d->ev_ta), fabs(r->t));
            for (int e = c + 1; e < nc && d->ev_t[e] - tau <= tie; e++) {
                int also = d->opt.event_hit(d->ev_i[e], tau, y, d->opt.event_ctx);
                if (also != HAMEL_OK && also != INTEG_EVENT_STOP)
                    return integ__fail(r->reason, INTEG_REASON_MAX, also,
                                       "the run was stopped at event %d (t = %.17g)", d->ev_i[e], tau);
            }
            if (y != d->y)
                memcpy(d->y, y, d->sys.dim * sizeof *y);
            r->t = tau;
            r->stopped_by = d->ev_i[c] + 1;
            return INTEG__STOPPED;
        }
        if (hit != HAMEL_OK)
            return integ__fail(r->reason, INTEG_REASON_MAX, hit,
                               "the run was stopped at event %d (t = %.17g)", d->ev_i[c], tau);
    }
    if (rc == HAMEL_OK)
        memcpy(d->ev_ga, d->ev_gb, (size_t)ne * sizeof *d->ev_ga);
    return rc;
}

/* One accepted step towards t1 (never past it), then the state is checked. */
static int integ__step(integ_driver *d, integ__run *r, double t1)
{
    const double t_before = r->t;
    if (d->ev_step) {
        d->ev_ta = r->t;
        memcpy(d->ev_ya, d->y, d->sys.dim * sizeof *d->y);
    }
    d->rhs_failed = 0;
    int status = gsl_odeiv2_evolve_apply(d->evolve, d->control, d->step, &d->gsys, &r->t, t1, &r->h, d->y);
    if (status != GSL_SUCCESS && (d->rhs_failed || status == GSL_EBADFUNC))
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_NUMERIC, "%s", d->rhs_reason);
    if (status == GSL_FAILURE)
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_INTEGRATOR,
                           "step size underflow at t = %.17g (h = %g): %s cannot meet the "
                           "tolerance",
                           r->t, r->h, d->method->name);
    if (status != GSL_SUCCESS)
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_INTEGRATOR,
                           "the %s stepper failed at t = %.17g (h = %g): %s", d->method->name, r->t, r->h,
                           gsl_strerror(status));
    if (!(r->t > t_before))
        return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_INTEGRATOR,
                           "step size underflow at t = %.17g (h = %g does not advance t)", r->t, r->h);
    r->steps++;
    for (size_t i = 0; i < d->sys.dim; i++)
        if (!isfinite(d->y[i])) {
            char what[96];
            integ__component(d, i, what, sizeof what);
            return integ__fail(r->reason, INTEG_REASON_MAX, HAMEL_E_NUMERIC,
                               "the state is not finite at t = %.17g (%s is %g)", r->t, what, d->y[i]);
        }
    if (d->opt.progress)
        atomic_store_explicit(d->opt.progress, (r->t - r->t0) / (r->t_end - r->t0), memory_order_relaxed);
    if (d->opt.step_check) {
        int rc = d->opt.step_check(r->t, d->y, d->opt.step_ctx);
        if (rc != HAMEL_OK)
            return integ__fail(r->reason, INTEG_REASON_MAX, rc,
                               "the run was stopped after the step to t = %.17g", r->t);
    }
    if (d->ev_step)
        return integ__events(d, r);
    return HAMEL_OK;
}

/* Steps until r->t == t1 exactly. The stepper loop; dense output would change this. */
static int integ__advance(integ_driver *d, integ__run *r, double t1)
{
    while (r->t < t1) {
        int rc = integ__check_budgets(d, r);
        if (rc == HAMEL_OK)
            rc = integ__step(d, r, t1);
        if (rc != HAMEL_OK)
            return rc;
    }
    return HAMEL_OK;
}

static int integ__check_run(const integ_driver *d, double t0, const double *y0, const double *times, size_t n,
                            char *reason)
{
    if (!d || !y0 || !times || n == 0)
        return integ__fail(reason, INTEG_REASON_MAX, HAMEL_E_INTERNAL, "integ: nothing to integrate");
    if (!isfinite(t0))
        return integ__fail(reason, INTEG_REASON_MAX, HAMEL_E_BAD_REQUEST, "the initial time is not finite");
    for (size_t k = 0; k < n; k++)
        if (!isfinite(times[k]) || times[k] < t0 || (k > 0 && !(times[k] > times[k - 1])))
            return integ__fail(reason, INTEG_REASON_MAX, HAMEL_E_BAD_REQUEST,
                               "output time %zu (%.17g) is not finite, before t0 or not after "
                               "the one before",
                               k, times[k]);
    for (size_t i = 0; i < d->sys.dim; i++)
        if (!isfinite(y0[i]))
            return integ__fail(reason, INTEG_REASON_MAX, HAMEL_E_BAD_INITIAL,
                               "initial state component %zu is not finite (%g)", i, y0[i]);
    return HAMEL_OK;
}

int integ_driver_apply(integ_driver *d, double t0, const double *y0, const double *times, size_t n_times,
                       integ_sample_fn sample, void *ctx, integ_stats *stats)
{
    integ_stats local;
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    const double start = integ__now();
    int rc = integ__check_run(d, t0, y0, times, n_times, stats->reason);
    if (rc != HAMEL_OK)
        return rc;

    integ__run r = {.t0 = t0,
                    .t_end = times[n_times - 1],
                    .t = t0,
                    .h = d->opt.h0,
                    .deadline = start + d->opt.max_wall_seconds,
                    .reason = stats->reason};
    if (d->opt.deadline > 0 && d->opt.deadline < r.deadline)
        r.deadline = d->opt.deadline; /* what is left of the simulation's budget */
    gsl_odeiv2_step_reset(d->step);
    gsl_odeiv2_evolve_reset(d->evolve);
    memcpy(d->y, y0, d->sys.dim * sizeof *d->y);
    d->rhs_evals = d->jac_evals = d->jac_rhs_evals = d->ev_rhs_evals = 0;
    d->rhs_failed = 0;
    if (d->opt.progress)
        atomic_store(d->opt.progress, 0.0);
    if (d->ev_step) {
        d->ev_fa_t = NAN;
        rc = integ__event_values(d, &r, t0, d->y, d->ev_ga);
    }
    if (rc == HAMEL_OK && r.h == 0 && r.t_end > t0)
        rc = integ__first_step(d, &r, (times[0] > t0 ? times[0] : times[1]) - t0);

    for (size_t k = 0; k < n_times && rc == HAMEL_OK; k++) {
        rc = integ__advance(d, &r, times[k]);
        if (rc == INTEG__STOPPED) { /* a last sample at the event */
            rc = HAMEL_OK;
            stats->stopped_by = r.stopped_by;
            if (sample) {
                stats->samples++;
                rc = sample(r.t, d->y, ctx);
                if (rc != HAMEL_OK)
                    integ__fail(stats->reason, INTEG_REASON_MAX, rc,
                                "the run was stopped by its consumer at t = %.17g", r.t);
            }
            break;
        }
        if (rc == HAMEL_OK && sample) {
            stats->samples++;
            rc = sample(times[k], d->y, ctx);
            if (rc != HAMEL_OK)
                integ__fail(stats->reason, INTEG_REASON_MAX, rc,
                            "the run was stopped by its consumer at t = %.17g", times[k]);
        }
    }
    if (rc == HAMEL_OK && d->opt.progress)
        atomic_store(d->opt.progress, 1.0);

    stats->steps = r.steps;
    stats->failed_steps = (long)d->evolve->failed_steps;
    stats->rhs_evals = d->rhs_evals;
    stats->jac_evals = d->jac_evals;
    stats->jac_rhs_evals = d->jac_rhs_evals;
    stats->event_rhs_evals = d->ev_rhs_evals;
    stats->t = r.t;
    stats->h = r.h;
    stats->wall_ms = 1e3 * (integ__now() - start);
    return rc;
}

int integ_run(const integ_system *sys, const integ_options *opt, double t0, const double *y0,
              const double *times, size_t n_times, integ_sample_fn sample, void *ctx, integ_stats *stats)
{
    integ_driver *d = NULL;
    char reason[INTEG_REASON_MAX];
    int rc = integ_driver_new(sys, opt, &d, reason, sizeof reason);
    if (rc != HAMEL_OK) {
        if (stats) {
            memset(stats, 0, sizeof *stats);
            snprintf(stats->reason, sizeof stats->reason, "%s", reason);
        }
        return rc;
    }
    rc = integ_driver_apply(d, t0, y0, times, n_times, sample, ctx, stats);
    integ_driver_free(d);
    return rc;
}
