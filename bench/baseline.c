/* baseline.c — the hand-written right-hand sides of baseline.h and their GSL driver. */
#include "baseline.h"

#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/run/integ.h"

/* Rolling disk (Greenwood 5.3). y = (phi, theta, psi, x, y, wd, thd, Omega); p = (m, r, g).
 * The equations (5.193)-(5.195) divided by their leading m r^2 coefficients:
 *   wd'    = -wd thd cot(theta) + 2 thd Omega
 *   thd'   = (wd^2 cot(theta) - 6 wd Omega)/5 - (4/5)(g/r) cos(theta)
 *   Omega' = (2/3) wd thd
 * and the kinematics q' = Φ u of the speeds wd = phi' sin(theta), thd = theta',
 * Omega = phi' cos(theta) + psi' with the slip constraints:
 *   phi' = wd/sin(theta), theta' = thd, psi' = Omega - wd cot(theta),
 *   x' = -r psi' cos(phi), y' = -r psi' sin(phi). */
static int baseline__disk_rhs(double t, const double y[], double dydt[], void *params)
{
    baseline_params *par = params;
    const double r = par->p[1], g = par->p[2];
    const double phi = y[0], theta = y[1];
    const double wd = y[5], thd = y[6], om = y[7];
    const double st = sin(theta), ct = cos(theta);
    const double inv_st = 1.0 / st;
    const double cot = ct * inv_st;
    const double psid = om - wd * cot;
    (void)t;
    dydt[0] = wd * inv_st;
    dydt[1] = thd;
    dydt[2] = psid;
    dydt[3] = -r * psid * cos(phi);
    dydt[4] = -r * psid * sin(phi);
    dydt[5] = thd * (2.0 * om - wd * cot);
    dydt[6] = 0.2 * wd * (wd * cot - 6.0 * om) - 0.8 * (g / r) * ct;
    dydt[7] = (2.0 / 3.0) * wd * thd;
    return GSL_SUCCESS;
}

/* Knife-edge dumbbell (Greenwood 5.2). y = (x, y, phi, v, phid); p = (m, l).
 * (5.121) 2 m v' - m l phid^2 = 0 and (5.122) m l^2 phid' + m l v phid = 0, with the
 * kinematics x' = v cos(phi), y' = v sin(phi), phi' = phid. */
static int baseline__dumbbell_rhs(double t, const double y[], double dydt[], void *params)
{
    baseline_params *par = params;
    const double l = par->p[1];
    const double phi = y[2], v = y[3], phid = y[4];
    (void)t;
    dydt[0] = v * cos(phi);
    dydt[1] = v * sin(phi);
    dydt[2] = phid;
    dydt[3] = 0.5 * l * phid * phid;
    dydt[4] = -v * phid / l;
    return GSL_SUCCESS;
}

static const char *const baseline__disk_q[] = {"phi", "theta", "psi", "x", "y"};
static const char *const baseline__disk_u[] = {"wd", "thd", "Omega"};
static const char *const baseline__disk_p[] = {"m", "r", "g"};
static const double baseline__disk_pv[] = {1.0, 0.5, 9.81};

const baseline_system baseline_rolling_disk = {
    .name = "greenwood-5.3-rolling-disk",
    .file = "greenwood-5.3-rolling-disk.json",
    .nq = 5,
    .nu = 3,
    .nparams = 3,
    .q_names = baseline__disk_q,
    .u_names = baseline__disk_u,
    .param_names = baseline__disk_p,
    .param_defaults = baseline__disk_pv,
    .rhs = baseline__disk_rhs,
};

static const char *const baseline__dumbbell_q[] = {"x", "y", "phi"};
static const char *const baseline__dumbbell_u[] = {"v", "phid"};
static const char *const baseline__dumbbell_p[] = {"m", "l"};
static const double baseline__dumbbell_pv[] = {1.0, 1.0};

const baseline_system baseline_dumbbell = {
    .name = "greenwood-5.2-dumbbell-hamel",
    .file = "greenwood-5.2-dumbbell-hamel.json",
    .nq = 3,
    .nu = 2,
    .nparams = 2,
    .q_names = baseline__dumbbell_q,
    .u_names = baseline__dumbbell_u,
    .param_names = baseline__dumbbell_p,
    .param_defaults = baseline__dumbbell_pv,
    .rhs = baseline__dumbbell_rhs,
};

void baseline_params_default(const baseline_system *sys, baseline_params *par)
{
    memset(par, 0, sizeof *par);
    for (int i = 0; i < sys->nparams; i++)
        par->p[i] = sys->param_defaults[i];
}

void baseline_times(double t0, double t_end, int n, double times[])
{
    for (int i = 0; i < n; i++)
        times[i] = n > 1 ? t0 + (t_end - t0) * i / (n - 1) : t0;
    if (n > 1)
        times[n - 1] = t_end;
}

/* Copies each output state into its row of the caller's array. */
typedef struct baseline__sink {
    double *out;
    size_t dim, row;
} baseline__sink;

static int baseline__sample(double t, const double *y, void *ctx)
{
    baseline__sink *sk = ctx;
    (void)t;
    memcpy(sk->out + sk->row * sk->dim, y, sk->dim * sizeof y[0]);
    sk->row++;
    return 0;
}

int baseline_run(const baseline_system *sys, baseline_params *par, double t0, const double y0[],
                 const double times[], int n, double rtol, double atol, double out[], baseline_stats *st)
{
    const size_t dim = (size_t)(sys->nq + sys->nu);
    integ_system isys = {dim, sys->rhs, par};
    integ_options opt = integ_default_options;
    baseline__sink sink = {out, dim, 0};
    integ_driver *drv = NULL;
    integ_stats ist;
    int rc;

    memset(&ist, 0, sizeof ist);
    opt.method = "rk8pd";
    opt.rtol = rtol;
    opt.atol = atol;
    rc = integ_driver_new(&isys, &opt, &drv, ist.reason, sizeof ist.reason);
    if (rc == 0)
        rc = integ_driver_apply(drv, t0, y0, times, (size_t)n, baseline__sample, &sink, &ist);
    integ_driver_free(drv);
    if (st != NULL) {
        st->steps = ist.steps;
        st->failed_steps = ist.failed_steps;
        st->rhs_evals = ist.rhs_evals;
        st->integrate_ms = ist.wall_ms;
        snprintf(st->reason, sizeof st->reason, "%s", ist.reason);
    }
    return rc;
}
