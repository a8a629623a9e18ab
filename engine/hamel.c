/* hamel.c — Hamel coefficients and the Boltzmann–Hamel right-hand side (hamel.h). */
#include "hamel.h"

#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "linalg.h"
#include "native.h"

struct hamel_ws {
    const struct engine_model *m;
    int n, k;
    double *in;   /* tape inputs [params, t, q, q'] */
    double *work; /* tape scratch */
    double *psi;  /* Psi [n*n] then Psi_t [n] */
    double *lu;   /* LU of Psi */
    int *piv;
    double *dyn; /* M upper, g, b */
    double *M;   /* full M [n*n] */
    double *X;   /* Phi_S, column r at X + r*n */
    double *a, *h, *vec;
    double *MX;    /* M Phi_S, column r at MX + r*n */
    double *Ms;    /* [k*k] */
    double *F;     /* [k] */
    double *Phi;   /* full inverse, column l at Phi + l*n */
    double *phit;  /* Phi_t [n] */
    double *dpsi;  /* dPsi/dq [n^3], dPsi/dt [n^2], dPsi_t/dq [n^2] */
    double *A, *W; /* [n*n] scratch */
    double *obs;   /* tape_obs outputs */
    double *mult;
    double *fast; /* tape_fast outputs */
    double *minv; /* [k*k] M*^-1 when M* is constant (fast_mass_const) */
    int minv_ready;
    int numeric;         /* ignore tape_fast (for cross-checks) */
    native_code *native; /* the optimizing tier (a reference), or NULL */
    double *guess;       /* [n] last q' solved from (q, u) (nonlinear constraints: Newton's start) */
    int *sel;            /* [k] q' components used as speeds instead of the model's rows */
    int sel_on;          /* sel is in force (hamel_ws_select) */
};

void hamel_ws_free(hamel_ws *w)
{
    if (!w)
        return;
    free(w->in);
    free(w->work);
    free(w->psi);
    free(w->lu);
    free(w->piv);
    free(w->dyn);
    free(w->M);
    free(w->X);
    free(w->a);
    free(w->h);
    free(w->vec);
    free(w->MX);
    free(w->Ms);
    free(w->F);
    free(w->Phi);
    free(w->phit);
    free(w->dpsi);
    free(w->A);
    free(w->W);
    free(w->obs);
    free(w->mult);
    free(w->fast);
    free(w->minv);
    native_release(w->native);
    free(w->sel);
    free(w->guess);
    free(w);
}

void hamel_ws_set_numeric(hamel_ws *w, int numeric) { w->numeric = numeric; }

hamel_ws *hamel_ws_new(const struct engine_model *m, const double *params)
{
    hamel_ws *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    int n = m->n, k = m->k;
    size_t nn = (size_t)n * n;
    w->m = m;
    w->n = n;
    w->k = k;
    w->in = calloc(m->n_in, sizeof *w->in);
    w->work = calloc(m->work_len + 1, sizeof *w->work);
    w->psi = calloc(nn + n, sizeof *w->psi);
    w->lu = calloc(nn, sizeof *w->lu);
    w->piv = calloc(n, sizeof *w->piv);
    w->dyn = calloc(n * (n + 1) / 2 + 2 * n, sizeof *w->dyn);
    w->M = calloc(nn, sizeof *w->M);
    w->X = calloc((size_t)n * k, sizeof *w->X);
    w->a = calloc(n, sizeof *w->a);
    w->h = calloc(n, sizeof *w->h);
    w->vec = calloc(n, sizeof *w->vec);
    w->MX = calloc((size_t)n * k, sizeof *w->MX);
    w->Ms = calloc((size_t)k * k, sizeof *w->Ms);
    w->F = calloc(k, sizeof *w->F);
    w->Phi = calloc(nn, sizeof *w->Phi);
    w->phit = calloc(n, sizeof *w->phit);
    w->dpsi = calloc(nn * n + 2 * nn, sizeof *w->dpsi);
    w->A = calloc(nn, sizeof *w->A);
    w->W = calloc(nn, sizeof *w->W);
    w->obs = calloc(1 + m->nc + n, sizeof *w->obs);
    w->mult = calloc((size_t)(m->nc + 1) * (n + 1), sizeof *w->mult);
    w->fast = calloc((size_t)n + k * (k + 1) / 2 + k, sizeof *w->fast);
    w->minv = calloc((size_t)k * k, sizeof *w->minv);
    w->sel = calloc(k + 1, sizeof *w->sel);
    w->guess = calloc(n, sizeof *w->guess);
    if (!w->sel || !w->guess || !w->fast || !w->minv || !w->in || !w->work || !w->psi || !w->lu || !w->piv ||
        !w->dyn || !w->M || !w->X || !w->a || !w->h || !w->vec || !w->MX || !w->Ms || !w->F || !w->Phi ||
        !w->phit || !w->dpsi || !w->A || !w->W || !w->obs || !w->mult) {
        hamel_ws_free(w);
        return NULL;
    }
    if (m->np)
        memcpy(w->in, params, m->np * sizeof *params);
    if (m->tape_fast)
        w->native = native_acquire(m, params);
    return w;
}

static int rhs_fast(hamel_ws *w, double t, const double *y, double *dydt);

const char *hamel_ws_tier(const hamel_ws *w)
{
    const struct engine_model *m = w->m;
    if (m->tape_fast && !w->numeric)
        return w->native ? "native" : m->tape_fast->fn ? "tcc" : "interp";
    return m->tape_dyn->fn ? "tcc" : "interp";
}

int hamel_const_mass_inverse(const struct engine_model *m, const double *params, double *minv)
{
    if (!m->tape_fast || !m->fast_mass_const || m->k > 64)
        return -1;
    hamel_ws *w = hamel_ws_new(m, params);
    double *in = calloc(m->n_in + 1, sizeof *in), *y = calloc(m->n + m->k + 1, sizeof *y),
           *dy = calloc(m->n + m->k + 1, sizeof *dy);
    int rc = -1;
    if (w && in && y && dy) {
        native_release(w->native); /* the tape's M*, not a folded one */
        w->native = NULL;
        model_test_point(m, 0, in);
        memcpy(y, in + model_input_q(m), m->n * sizeof *y);
        if (rhs_fast(w, in[model_input_t(m)], y, dy) == GSL_SUCCESS && w->minv_ready) {
            memcpy(minv, w->minv, (size_t)m->k * m->k * sizeof *minv);
            rc = 0;
        }
    }
    free(in);
    free(y);
    free(dy);
    hamel_ws_free(w);
    return rc;
}

/* Evaluates Psi, Psi_t at (t, q) and LU-factors Psi. */
static int factor_psi(hamel_ws *w, double t, const double *q)
{
    const struct engine_model *m = w->m;
    int n = w->n;
    w->in[model_input_t(m)] = t;
    memcpy(w->in + model_input_q(m), q, n * sizeof *q);
    tape_run(m->tape_psi, w->in, w->work, w->psi);
    if (w->sel_on)
        for (int r = 0; r < w->k; r++) {
            memset(w->psi + (size_t)r * n, 0, n * sizeof *w->psi);
            w->psi[(size_t)r * n + w->sel[r]] = 1.0;
            w->psi[(size_t)n * n + r] = 0.0;
        }
    memcpy(w->lu, w->psi, (size_t)n * n * sizeof *w->lu);
    return linalg_lu(n, w->lu, w->piv);
}

/* q' = Psi^-1 ([u; 0] - Psi_t), with Psi already factored. */
static void solve_qdot(hamel_ws *w, const double *u, double *qd)
{
    int n = w->n, k = w->k;
    const double *psit = w->psi + (size_t)n * n;
    for (int i = 0; i < n; i++)
        qd[i] = (i < k ? u[i] : 0.0) - psit[i];
    linalg_lu_solve(n, w->lu, w->piv, qd);
}

#define HAMEL_NEWTON_MAX 40

/* Nonlinear constraints (m->nl_reduced): q' from u_r = Psi_r q' + Psi_rt, the linear
 * constraints and f_j(q, q', t) = 0 by Newton's method, whose Jacobian is Psi itself
 * (its last rows are df_j/dq'), from the last solution. On success Psi is factored at
 * the solution and w->in holds it. */
static int newton_qdot(hamel_ws *w, double t, const double *q, const double *u, double *qd)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    double *res = w->vec;
    memcpy(qd, w->guess, n * sizeof *qd);
    if (m->tape_fast) {
        /* explicit kinematics (nonlin.h): q' = K(q, u, t) is the first output */
        w->in[model_input_t(m)] = t;
        memcpy(w->in + model_input_q(m), q, n * sizeof *q);
        for (int r = 0; r < k; r++)
            w->in[m->u_slot[r]] = u[r];
        tape_run(m->tape_fast, w->in, w->work, w->fast);
        memcpy(qd, w->fast, n * sizeof *qd);
    }
    for (int it = 0; it < HAMEL_NEWTON_MAX; it++) {
        memcpy(w->in + model_input_qd(m), qd, n * sizeof *qd);
        if (factor_psi(w, t, q) < 0)
            return -1;
        tape_run(m->tape_obs, w->in, w->work, w->obs);
        for (int r = 0; r < n; r++) {
            double s = w->psi[(size_t)n * n + r] - (r < k ? u[r] : 0.0);
            for (int i = 0; i < n; i++)
                s += w->psi[(size_t)r * n + i] * qd[i];
            res[r] = s;
        }
        for (int j = 0; j < m->nc; j++)
            if (!m->cons[j].linear)
                res[m->cons[j].row] = w->obs[1 + j];
        linalg_lu_solve(n, w->lu, w->piv, res);
        double dn = 0.0, qn = 0.0;
        for (int i = 0; i < n; i++) {
            qd[i] -= res[i];
            dn = fmax(dn, fabs(res[i]));
            qn = fmax(qn, fabs(qd[i]));
        }
        if (!isfinite(dn))
            return -1;
        if (dn <= 4e-16 * (1.0 + qn) || (it > 0 && dn <= 1e-13 * (1.0 + qn))) {
            memcpy(w->in + model_input_qd(m), qd, n * sizeof *qd);
            if (factor_psi(w, t, q) < 0)
                return -1;
            memcpy(w->guess, qd, n * sizeof *qd);
            return 0;
        }
    }
    return -1;
}

void hamel_ws_set_guess(hamel_ws *w, const double *qd) { memcpy(w->guess, qd, w->n * sizeof *qd); }

int hamel_qdot(hamel_ws *w, double t, const double *q, const double *u, double *qd)
{
    if (w->m->nl_reduced)
        return newton_qdot(w, t, q, u, qd);
    if (factor_psi(w, t, q) < 0)
        return -1;
    solve_qdot(w, u, qd);
    return 0;
}

int hamel_speeds(hamel_ws *w, double t, const double *q, const double *qd, double *u)
{
    int n = w->n;
    factor_psi(w, t, q);
    for (int r = 0; r < w->k; r++) {
        double s = w->psi[(size_t)n * n + r];
        for (int i = 0; i < n; i++)
            s += w->psi[r * n + i] * qd[i];
        u[r] = s;
    }
    return 0;
}

/* Solves Ms u' = F in place in F: Cholesky (Ms is symmetric positive definite for a
 * positive definite T), LU if rounding or an indefinite T defeats it. Ms is full. */
static int solve_mass(hamel_ws *w, int k)
{
    double save[64 * 64];
    int piv[64];
    if (k <= 64)
        memcpy(save, w->Ms, (size_t)k * k * sizeof *save);
    if (linalg_chol(k, w->Ms) == 0) {
        linalg_chol_solve(k, w->Ms, w->F);
        return 0;
    }
    if (k > 64 || linalg_lu(k, save, piv) < 0)
        return -1;
    linalg_lu_solve(k, save, piv, w->F);
    return 0;
}

/* M*^-1 for a mass matrix that depends on the parameters only, from the first
 * evaluation's M* (w->Ms): column by column through solve_mass. */
static int invert_constant_mass(hamel_ws *w, int k)
{
    double ms[64 * 64];
    if (k > 64)
        return -1;
    memcpy(ms, w->Ms, (size_t)k * k * sizeof *ms);
    double f[64];
    memcpy(f, w->F, k * sizeof *f);
    for (int c = 0; c < k; c++) {
        memcpy(w->Ms, ms, (size_t)k * k * sizeof *ms);
        for (int r = 0; r < k; r++)
            w->F[r] = r == c;
        if (solve_mass(w, k) < 0)
            return -1;
        for (int r = 0; r < k; r++)
            w->minv[r * k + c] = w->F[r];
    }
    memcpy(w->F, f, k * sizeof *f);
    w->minv_ready = 1;
    return 0;
}

/* The symbolically reduced equations: one tape gives q', M* and F. */
static int rhs_fast(hamel_ws *w, double t, const double *y, double *dydt)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    if (w->native && w->native->rhs) {
        w->native->rhs(t, y, dydt);
        return GSL_SUCCESS;
    }
    double *in = w->in;
    in[model_input_t(m)] = t;
    for (int i = 0; i < n; i++)
        in[model_input_q(m) + i] = y[i];
    for (int r = 0; r < k; r++)
        in[m->u_slot[r]] = y[n + r];
    if (w->native)
        w->native->fast(in, w->fast);
    else
        tape_run(m->tape_fast, in, w->work, w->fast);
    for (int i = 0; i < n; i++)
        dydt[i] = w->fast[i];
    const double *up = w->fast + n, *F = up + k * (k + 1) / 2;
    if (m->fast_mass_const && w->minv_ready) {
        for (int r = 0; r < k; r++) {
            double s = 0.0;
            const double *row = w->minv + (size_t)r * k;
            for (int c = 0; c < k; c++)
                s += row[c] * F[c];
            dydt[n + r] = s;
        }
        return GSL_SUCCESS;
    }
    for (int r = 0, idx = 0; r < k; r++)
        for (int s = r; s < k; s++, idx++)
            w->Ms[r * k + s] = w->Ms[s * k + r] = up[idx];
    for (int r = 0; r < k; r++)
        w->F[r] = F[r];
    if (m->fast_mass_const)
        return invert_constant_mass(w, k) < 0 ? GSL_EBADFUNC : rhs_fast(w, t, y, dydt);
    if (solve_mass(w, k) < 0)
        return GSL_EBADFUNC;
    for (int r = 0; r < k; r++)
        dydt[n + r] = w->F[r];
    return GSL_SUCCESS;
}

int hamel_rhs(double t, const double *y, double *dydt, void *params)
{
    hamel_ws *w = params;
    if (w->m->tape_fast && !w->numeric && !w->sel_on)
        return rhs_fast(w, t, y, dydt);
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    const double *q = y, *u = y + n;
    double *qd = dydt, *ud = dydt + n;
    if (hamel_qdot(w, t, q, u, qd) < 0)
        return GSL_EBADFUNC;
    memcpy(w->in + model_input_qd(m), qd, n * sizeof *qd);
    tape_run(m->tape_dyn, w->in, w->work, w->dyn);
    if (w->sel_on) /* the rows of selected speeds are constant: D(q_c') = 0 */
        memset(w->dyn + n * (n + 1) / 2 + n, 0, k * sizeof *w->dyn);
    const double *up = w->dyn, *g = w->dyn + n * (n + 1) / 2, *b = g + n;
    double *M = w->M;
    for (int i = 0, idx = 0; i < n; i++)
        for (int l = i; l < n; l++, idx++)
            M[i * n + l] = M[l * n + i] = up[idx];
    /* a = Phi b; columns of Phi_S. */
    memcpy(w->a, b, n * sizeof *b);
    linalg_lu_solve(n, w->lu, w->piv, w->a);
    for (int r = 0; r < k; r++) {
        double *x = w->X + (size_t)r * n;
        memset(x, 0, n * sizeof *x);
        x[r] = 1.0;
        linalg_lu_solve(n, w->lu, w->piv, x);
    }
    /* h = g + M a; MX = M Phi_S. */
    for (int i = 0; i < n; i++) {
        double s = g[i];
        const double *Mi = M + (size_t)i * n;
        for (int l = 0; l < n; l++)
            s += Mi[l] * w->a[l];
        w->h[i] = s;
        for (int r = 0; r < k; r++) {
            const double *x = w->X + (size_t)r * n;
            double v = 0.0;
            for (int l = 0; l < n; l++)
                v += Mi[l] * x[l];
            w->MX[(size_t)r * n + i] = v;
        }
    }
    for (int r = 0; r < k; r++) {
        const double *x = w->X + (size_t)r * n;
        double f = 0.0;
        for (int i = 0; i < n; i++)
            f += x[i] * w->h[i];
        w->F[r] = f;
        for (int s = 0; s <= r; s++) {
            const double *mx = w->MX + (size_t)s * n;
            double v = 0.0;
            for (int i = 0; i < n; i++)
                v += x[i] * mx[i];
            w->Ms[r * k + s] = w->Ms[s * k + r] = v;
        }
    }
    if (solve_mass(w, k) < 0)
        return GSL_EBADFUNC;
    memcpy(ud, w->F, k * sizeof *ud);
    return GSL_SUCCESS;
}

void hamel_observe(hamel_ws *w, double t, const double *q, const double *qd, double *out)
{
    const struct engine_model *m = w->m;
    w->in[model_input_t(m)] = t;
    memcpy(w->in + model_input_q(m), q, w->n * sizeof *q);
    memcpy(w->in + model_input_qd(m), qd, w->n * sizeof *qd);
    tape_run(m->tape_obs, w->in, w->work, w->obs);
    memcpy(out, w->obs, (1 + m->nc) * sizeof *out);
}

/* Fills Phi (all columns) and Phi_t after factor_psi; evaluates the dPsi tape. */
static void inverse_and_derivatives(hamel_ws *w)
{
    int n = w->n;
    for (int l = 0; l < n; l++) {
        double *col = w->Phi + (size_t)l * n;
        memset(col, 0, n * sizeof *col);
        col[l] = 1.0;
        linalg_lu_solve(n, w->lu, w->piv, col);
    }
    for (int i = 0; i < n; i++)
        w->phit[i] = -w->psi[(size_t)n * n + i];
    linalg_lu_solve(n, w->lu, w->piv, w->phit);
    tape_run(w->m->tape_dpsi, w->in, w->work, w->dpsi);
}

#define PHI(i, l) w->Phi[(size_t)(l)*n + (i)]
#define DPSI(j, i, k) w->dpsi[((size_t)(j)*n + (i)) * n + (k)]
#define DPSI_T(j, i) w->dpsi[(size_t)n * n * n + (size_t)(j)*n + (i)]
#define DPSIT_Q(j, i) w->dpsi[(size_t)n * n * n + (size_t)n * n + (size_t)(j)*n + (i)]

/* gamma and gamma_t for all j, r, l; mags (optional) receive the rounding scales. */
static void gamma_all(hamel_ws *w, double *gamma, double *gamma_t, double *mag, double *mag_t)
{
    int n = w->n;
    for (int j = 0; j < n; j++) {
        /* A_ik = dPsi_ji/dq_k - dPsi_jk/dq_i; W = A Phi. */
        for (int i = 0; i < n; i++)
            for (int k = 0; k < n; k++)
                w->A[i * n + k] = DPSI(j, i, k) - DPSI(j, k, i);
        for (int pass = 0; pass < (mag ? 2 : 1); pass++) {
            double *out = pass ? mag : gamma, *out_t = pass ? mag_t : gamma_t;
            for (int i = 0; i < n; i++)
                for (int l = 0; l < n; l++) {
                    double s = 0.0;
                    for (int k = 0; k < n; k++) {
                        double a = pass ? fabs(DPSI(j, i, k)) + fabs(DPSI(j, k, i)) : w->A[i * n + k];
                        s += a * (pass ? fabs(PHI(k, l)) : PHI(k, l));
                    }
                    w->W[i * n + l] = s;
                }
            for (int r = 0; r < n; r++) {
                for (int l = 0; l < n && out; l++) {
                    double s = 0.0;
                    for (int i = 0; i < n; i++)
                        s += (pass ? fabs(PHI(i, r)) : PHI(i, r)) * w->W[i * n + l];
                    out[((size_t)j * n + r) * n + l] = s;
                }
                if (out_t) {
                    double s = 0.0;
                    for (int i = 0; i < n; i++) {
                        double inner = 0.0;
                        for (int k = 0; k < n; k++) {
                            double a = pass ? fabs(DPSI(j, i, k)) + fabs(DPSI(j, k, i)) : w->A[i * n + k];
                            inner += a * (pass ? fabs(w->phit[k]) : w->phit[k]);
                        }
                        inner +=
                            pass ? fabs(DPSI_T(j, i)) + fabs(DPSIT_Q(j, i)) : DPSI_T(j, i) - DPSIT_Q(j, i);
                        s += (pass ? fabs(PHI(i, r)) : PHI(i, r)) * inner;
                    }
                    out_t[(size_t)j * n + r] = s;
                }
            }
        }
    }
}

int hamel_gamma(hamel_ws *w, double t, const double *q, double *gamma, double *gamma_t)
{
    if (factor_psi(w, t, q) < 0)
        return -1;
    inverse_and_derivatives(w);
    gamma_all(w, gamma, gamma_t, NULL, NULL);
    return 0;
}

int hamel_structure(struct engine_model *m)
{
    int n = m->n;
    size_t n3 = (size_t)n * n * n, n2 = (size_t)n * n;
    m->gamma_nz = calloc(n3, 1);
    m->gamma_t_nz = calloc(n2, 1);
    double *params = calloc(m->np + 1, sizeof *params), *in = calloc(m->n_in, sizeof *in);
    double *g = calloc(n3, sizeof *g), *gm = calloc(n3, sizeof *gm);
    double *gt = calloc(n2, sizeof *gt), *gtm = calloc(n2, sizeof *gtm);
    hamel_ws *w = NULL;
    int rc = -1;
    if (!m->gamma_nz || !m->gamma_t_nz || !params || !in || !g || !gm || !gt || !gtm)
        goto done;
    if (m->np)
        memcpy(params, m->param_values, m->np * sizeof *params);
    w = hamel_ws_new(m, params);
    if (!w)
        goto done;
    for (int p = 0; p < 3; p++) {
        model_test_point(m, 11 + p, in);
        /* Psi may depend on q' (nonlinear constraints): at the test point's q' */
        memcpy(w->in + model_input_qd(m), in + model_input_qd(m), n * sizeof *in);
        if (factor_psi(w, in[model_input_t(m)], in + model_input_q(m)) < 0)
            continue;
        inverse_and_derivatives(w);
        gamma_all(w, g, gt, gm, gtm);
        for (size_t i = 0; i < n3; i++)
            if (isfinite(g[i]) && fabs(g[i]) > 1e-9 * gm[i])
                m->gamma_nz[i] = 1;
        for (size_t i = 0; i < n2; i++)
            if (isfinite(gt[i]) && fabs(gt[i]) > 1e-9 * gtm[i])
                m->gamma_t_nz[i] = 1;
    }
    for (int c = 0; c < m->nc; c++) {
        model_constraint *mc = &m->cons[c];
        mc->gamma_free = 0;
        if (!mc->linear)
            continue;
        int j = mc->row, any = 0;
        for (int r = 0; r < m->k; r++) {
            any |= m->gamma_t_nz[(size_t)j * n + r];
            for (int l = 0; l < m->k; l++)
                any |= m->gamma_nz[((size_t)j * n + r) * n + l];
        }
        mc->gamma_free = !any;
    }
    rc = 0;
done:
    hamel_ws_free(w);
    free(params);
    free(in);
    free(g);
    free(gm);
    free(gt);
    free(gtm);
    return rc;
}

int hamel_bh_residual(hamel_ws *w, double t, const double *y, const double *udot, double *res)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    const double *q = y, *u = y + n;
    double *qd = malloc(n * sizeof *qd), *p = malloc(n * sizeof *p), *pi = malloc(n * sizeof *pi);
    double *gamma = malloc((size_t)n * n * n * sizeof *gamma),
           *gamma_t = malloc((size_t)n * n * sizeof *gamma_t);
    double *qdd = malloc(n * sizeof *qdd), *dpsidt = malloc((size_t)n * n * sizeof *dpsidt);
    double *dqd = malloc((size_t)n * n * sizeof *dqd);
    int rc = -1;
    if (!qd || !p || !pi || !gamma || !gamma_t || !qdd || !dpsidt || !dqd)
        goto done;
    if (factor_psi(w, t, q) < 0)
        goto done;
    solve_qdot(w, u, qd);
    inverse_and_derivatives(w);
    gamma_all(w, gamma, gamma_t, NULL, NULL);
    memcpy(w->in + model_input_qd(m), qd, n * sizeof *qd);
    tape_run(m->tape_dyn, w->in, w->work, w->dyn);
    tape_run(m->tape_obs, w->in, w->work, w->obs);
    memcpy(p, w->obs + 1 + m->nc, n * sizeof *p);
    const double *up = w->dyn, *g = w->dyn + n * (n + 1) / 2, *b = g + n;
    for (int i = 0, idx = 0; i < n; i++)
        for (int l = i; l < n; l++, idx++)
            w->M[i * n + l] = w->M[l * n + i] = up[idx];
    /* q'' = Phi ([u'; 0] - b) */
    for (int i = 0; i < n; i++)
        qdd[i] = (i < k ? udot[i] : 0.0) - b[i];
    linalg_lu_solve(n, w->lu, w->piv, qdd);
    /* pi_j = dT/du_j = sum_i p_i Phi_ij */
    for (int j = 0; j < n; j++) {
        double s = 0.0;
        for (int i = 0; i < n; i++)
            s += p[i] * PHI(i, j);
        pi[j] = s;
    }
    /* dPsi/dt along the motion: sum_k dPsi_ji/dq_k q_k' + dPsi_ji/dt */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            double s = DPSI_T(j, i);
            for (int kk = 0; kk < n; kk++)
                s += DPSI(j, i, kk) * qd[kk];
            dpsidt[j * n + i] = s;
        }
    /* d q'/dq_i at fixed u: dqd[i*n + kk] = -(Phi (dPsi/dq_i q' + dPsi_t/dq_i))_kk */
    for (int i = 0; i < n; i++) {
        double *col = dqd + (size_t)i * n;
        for (int j = 0; j < n; j++) {
            double s = DPSIT_Q(j, i);
            for (int l = 0; l < n; l++)
                s += DPSI(j, l, i) * qd[l];
            col[j] = -s;
        }
        linalg_lu_solve(n, w->lu, w->piv, col);
    }
    for (int r = 0; r < k; r++) {
        /* d/dt (dT/du_r) = sum_i (M q'' + Dp)_i Phi_ir + p_i (dPhi/dt)_ir, and
         * dT/dtheta_r = sum_i Phi_ir (T_q_i + sum_kk p_kk dq_kk'/dq_i). With
         * g = Q - V_q + T_q - Dp the two combine as below. */
        double s = 0.0;
        for (int i = 0; i < n; i++) {
            double Mq = 0.0;
            for (int l = 0; l < n; l++)
                Mq += w->M[i * n + l] * qdd[l];
            double pq = 0.0;
            for (int kk = 0; kk < n; kk++)
                pq += p[kk] * dqd[(size_t)i * n + kk];
            s += PHI(i, r) * (Mq - g[i] - pq);
        }
        /* p . dPhi/dt column r, with dPhi/dt = -Phi dPsi/dt Phi */
        double dphi = 0.0;
        for (int j = 0; j < n; j++) {
            double x = 0.0;
            for (int i = 0; i < n; i++)
                x += dpsidt[j * n + i] * PHI(i, r);
            dphi -= pi[j] * x;
        }
        s += dphi;
        for (int j = 0; j < n; j++) {
            double gs = gamma_t[(size_t)j * n + r];
            for (int l = 0; l < k; l++)
                gs += gamma[((size_t)j * n + r) * n + l] * u[l];
            s += pi[j] * gs;
        }
        res[r] = s;
    }
    rc = 0;
done:
    free(qd);
    free(p);
    free(pi);
    free(gamma);
    free(gamma_t);
    free(qdd);
    free(dpsidt);
    free(dqd);
    return rc;
}

/* The symbolically reduced equations against the numeric path at three pseudo-random
 * states. Each path's rounding scale is estimated by the spread of the two answers'
 * magnitudes; a disagreement beyond 1e-7 relative (or NaN on one side only) means the
 * reduction is wrong for this model (or cancels catastrophically), and it is not used. */
int hamel_fast_agrees(const struct engine_model *m)
{
    if (!m->tape_fast)
        return 1;
    int n = m->n, k = m->k, N = n + k, agree = 1, compared = 0;
    double *params = calloc(m->np + 1, sizeof *params), *in = calloc(m->n_in + 1, sizeof *in);
    double *y = calloc(N + 1, sizeof *y), *fa = calloc(N + 1, sizeof *fa), *fb = calloc(N + 1, sizeof *fb);
    hamel_ws *fast = NULL, *num = NULL;
    if (!params || !in || !y || !fa || !fb)
        goto done;
    if (m->np)
        memcpy(params, m->param_values, m->np * sizeof *params);
    fast = hamel_ws_new(m, params);
    num = hamel_ws_new(m, params);
    if (!fast || !num)
        goto done;
    native_release(fast->native); /* the tape itself, not a folded copy */
    fast->native = NULL;
    hamel_ws_set_numeric(num, 1);
    for (int p = 0; p < 3 && agree; p++) {
        model_test_point(m, 21 + p, in);
        memcpy(y, in + model_input_q(m), n * sizeof *y);
        for (int r = 0; r < k; r++)
            y[n + r] = in[model_input_qd(m) + r % n] - 0.85; /* speeds of both signs */
        double t = in[model_input_t(m)];
        if (hamel_rhs(t, y, fb, num) != GSL_SUCCESS)
            continue; /* singular here for the numeric path: no verdict */
        if (hamel_rhs(t, y, fa, fast) != GSL_SUCCESS) {
            agree = 0;
            break;
        }
        double scale = 0.0;
        for (int i = 0; i < N; i++)
            if (isfinite(fb[i]) && fabs(fb[i]) > scale)
                scale = fabs(fb[i]);
        for (int i = 0; i < N; i++)
            if (isfinite(fa[i]) != isfinite(fb[i]) ||
                (isfinite(fb[i]) && fabs(fa[i] - fb[i]) > 1e-7 * (scale + 1e-300) + 1e-300))
                agree = 0;
        compared++;
    }
done:
    hamel_ws_free(fast);
    hamel_ws_free(num);
    free(params);
    free(in);
    free(y);
    free(fa);
    free(fb);
    return agree;
}

/* ---- the singularity watch (sim.c) ---- */

void hamel_ws_select(hamel_ws *w, const int *cols)
{
    w->sel_on = cols != NULL;
    if (cols)
        memcpy(w->sel, cols, w->k * sizeof *cols);
}

int hamel_psi_condition(hamel_ws *w, double t, const double *q, double *cond, double *det)
{
    int n = w->n;
    int rc = factor_psi(w, t, q);
    double d = 1.0;
    for (int i = 0; i < n; i++) {
        d *= w->lu[(size_t)i * n + i];
        if (w->piv[i] != i)
            d = -d;
    }
    *det = d;
    if (rc < 0 || !(d != 0.0) || !isfinite(d)) {
        *cond = INFINITY;
        return -1;
    }
    /* 1-norm condition number ||Psi||_1 ||Psi^-1||_1, the inverse column by column. */
    double na = 0.0, ni = 0.0;
    for (int l = 0; l < n; l++) {
        double *col = w->Phi + (size_t)l * n, sa = 0.0, si = 0.0;
        memset(col, 0, n * sizeof *col);
        col[l] = 1.0;
        linalg_lu_solve(n, w->lu, w->piv, col);
        for (int i = 0; i < n; i++) {
            sa += fabs(w->psi[(size_t)i * n + l]);
            si += fabs(col[i]);
        }
        na = fmax(na, sa);
        ni = fmax(ni, si);
    }
    *cond = na * ni;
    return isfinite(*cond) ? 0 : -1;
}

int hamel_choose_speeds(hamel_ws *w, double t, const double *q, int *cols)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k, r = n - k;
    w->in[model_input_t(m)] = t;
    memcpy(w->in + model_input_q(m), q, n * sizeof *q);
    tape_run(m->tape_psi, w->in, w->work, w->psi);
    /* The constraint rows k..n-1, columns scaled to the largest entry of their row so
     * that the choice does not depend on the rows' units; then QR with column pivoting
     * (largest remaining column first) picks the r dependent velocities. */
    double *a = w->A; /* r x n, row-major */
    for (int i = 0; i < r; i++) {
        double mx = 0.0;
        for (int c = 0; c < n; c++)
            mx = fmax(mx, fabs(w->psi[(size_t)(k + i) * n + c]));
        for (int c = 0; c < n; c++)
            a[(size_t)i * n + c] = mx > 0 ? w->psi[(size_t)(k + i) * n + c] / mx : 0.0;
    }
    unsigned char dep[256] = {0};
    if (n > 256)
        return -1;
    for (int step = 0; step < r; step++) {
        int best = -1;
        double bnorm = 0.0;
        for (int c = 0; c < n; c++) {
            if (dep[c])
                continue;
            double s = 0.0;
            for (int i = 0; i < r; i++)
                s += a[(size_t)i * n + c] * a[(size_t)i * n + c];
            if (s > bnorm * (1.0 + 1e-12)) {
                bnorm = s;
                best = c;
            }
        }
        if (best < 0 || !(bnorm > 1e-24))
            return -1;
        dep[best] = 1;
        double nb = sqrt(bnorm), v[256];
        for (int i = 0; i < r; i++)
            v[i] = a[(size_t)i * n + best] / nb;
        for (int c = 0; c < n; c++) {
            if (dep[c])
                continue;
            double d = 0.0;
            for (int i = 0; i < r; i++)
                d += v[i] * a[(size_t)i * n + c];
            for (int i = 0; i < r; i++)
                a[(size_t)i * n + c] -= d * v[i];
        }
        for (int i = 0; i < r; i++)
            a[(size_t)i * n + best] = 0.0;
    }
    for (int c = 0, j = 0; c < n; c++)
        if (!dep[c])
            cols[j++] = c;
    return 0;
}

int hamel_det_pivot(hamel_ws *w, double t, const double *q, double *d)
{
    const struct engine_model *m = w->m;
    if (!m->tape_det || w->sel_on)
        return -1;
    w->in[model_input_t(m)] = t;
    memcpy(w->in + model_input_q(m), q, w->n * sizeof *q);
    tape_run(m->tape_det, w->in, w->work, d);
    return 0;
}
