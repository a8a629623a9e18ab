/* mult.c — the multipliers formulation (mult.h). */
#include "mult.h"

#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "linalg.h"

struct mult_ws {
    const struct engine_model *m;
    int n, nc;
    double *in, *work;
    double *dyn; /* M upper, g, b */
    double *jf;  /* J [nc*n], Df [nc] */
    double *obs; /* energy, f [nc], p [n] */
    double *kkt; /* [(n+nc)^2] */
    double *rhs; /* [n+nc] */
    double *row; /* [nc]: each constraint's row scale (a power of two), see row_scales */
    double *col; /* [n]: each coordinate's scale (a power of two), see col_scales */
    int *piv;
};

void mult_ws_free(mult_ws *w)
{
    if (!w)
        return;
    free(w->in);
    free(w->work);
    free(w->dyn);
    free(w->jf);
    free(w->obs);
    free(w->kkt);
    free(w->rhs);
    free(w->row);
    free(w->col);
    free(w->piv);
    free(w);
}

mult_ws *mult_ws_new(const struct engine_model *m, const double *params)
{
    mult_ws *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    int n = m->n, nc = m->nc, s = n + nc;
    w->m = m;
    w->n = n;
    w->nc = nc;
    w->in = calloc(m->n_in, sizeof *w->in);
    w->work = calloc(m->work_len + 1, sizeof *w->work);
    w->dyn = calloc(n * (n + 1) / 2 + 2 * n, sizeof *w->dyn);
    w->jf = calloc((size_t)nc * n + nc + 1, sizeof *w->jf);
    w->obs = calloc(1 + nc + n, sizeof *w->obs);
    w->kkt = calloc((size_t)s * s, sizeof *w->kkt);
    w->rhs = calloc(s, sizeof *w->rhs);
    w->row = calloc(nc + 1, sizeof *w->row);
    w->col = calloc(n + 1, sizeof *w->col);
    w->piv = calloc(s, sizeof *w->piv);
    if (!w->in || !w->work || !w->dyn || !w->jf || !w->obs || !w->kkt || !w->rhs || !w->row || !w->col ||
        !w->piv) {
        mult_ws_free(w);
        return NULL;
    }
    if (m->np)
        memcpy(w->in, params, m->np * sizeof *params);
    return w;
}

static void load(mult_ws *w, double t, const double *y)
{
    const struct engine_model *m = w->m;
    w->in[model_input_t(m)] = t;
    memcpy(w->in + model_input_q(m), y, w->n * sizeof *y);
    memcpy(w->in + model_input_qd(m), y + w->n, w->n * sizeof *y);
}

/* The scale of each constraint's row of J = df/dq': a power of two that brings the row's
 * largest |entry| into [1, 2) (1 for a row already there, so most models' numbers are
 * untouched; exact, so nothing is rounded). A constraint is the same constraint times any
 * nonzero factor, but the KKT matrix's pivots and the projection's residual test are
 * not: a knife edge written 1e-12*(y' - sin(th)*x') made the KKT matrix look singular
 * (pivot 1e-24 against M's 1) and every multipliers run failed at t = 0; scaled by 1e12 it
 * was never projected within 1e-15. Row j of J, Df and f are multiplied by row[j] and the
 * multiplier solved for is lam_j / row[j]. A row that is zero or not finite keeps 1. */
static void row_scales(mult_ws *w, const double *J, const double *col)
{
    int n = w->n;
    for (int j = 0; j < w->nc; j++) {
        double mx = 0.0;
        for (int i = 0; i < n; i++)
            if (fabs(J[j * n + i] * (col ? col[i] : 1.0)) > mx)
                mx = fabs(J[j * n + i] * (col ? col[i] : 1.0));
        int e = 0;
        w->row[j] = 1.0;
        if (mx > 0.0 && isfinite(mx)) {
            (void)frexp(mx, &e); /* mx = f 2^e, f in [0.5, 1): 2^(1-e) mx in [1, 2) */
            w->row[j] = ldexp(1.0, 1 - e);
            if (!(w->row[j] > 0.0) || !isfinite(w->row[j]))
                w->row[j] = 1.0;
        }
    }
}

/* Each coordinate's scale: a power of two d_i with d_i^2 M_ii in [0.25, 2) (1 where M_ii
 * is in [0.25, 2) already, or is not positive and finite). The KKT matrix is solved as
 * [D M D, -D J^T R; R J D, 0] [y; lam'] = [D g; R c], q'' = D y: masses of 1e8 beside
 * inertias of 1e-8 (or 1 beside 1e-14) made its pivots look singular against its
 * largest entry, and every multipliers run failed at t = 0. Exact, as row_scales. */
static void col_scales(mult_ws *w, const double *up)
{
    int n = w->n;
    for (int i = 0, idx = 0; i < n; idx += n - i, i++) {
        double mii = up[idx];
        int e = 0;
        w->col[i] = 1.0;
        if (mii > 0.0 && isfinite(mii)) {
            (void)frexp(mii, &e);
            w->col[i] = ldexp(1.0, -(e / 2));
            if (!(w->col[i] > 0.0) || !isfinite(w->col[i]))
                w->col[i] = 1.0;
        }
    }
}

/* Assembles and solves the KKT system at y; rhs then holds [D^-1 q''; lam'] (col_scales,
 * row_scales: solve's callers undo them). */
static int solve(mult_ws *w, double t, const double *y)
{
    const struct engine_model *m = w->m;
    int n = w->n, nc = w->nc, s = n + nc;
    load(w, t, y);
    tape_run(m->tape_dyn, w->in, w->work, w->dyn);
    tape_run(m->tape_mult, w->in, w->work, w->jf);
    tape_run(m->tape_obs, w->in, w->work, w->obs);
    const double *up = w->dyn, *g = w->dyn + n * (n + 1) / 2;
    const double *J = w->jf, *Df = w->jf + (size_t)nc * n, *f = w->obs + 1;
    double *K = w->kkt, *d = w->col;
    col_scales(w, up);
    row_scales(w, J, d);
    memset(K, 0, (size_t)s * s * sizeof *K);
    for (int i = 0, idx = 0; i < n; i++)
        for (int l = i; l < n; l++, idx++)
            K[i * s + l] = K[l * s + i] = d[i] * up[idx] * d[l];
    for (int j = 0; j < nc; j++)
        for (int i = 0; i < n; i++) {
            K[(n + j) * s + i] = w->row[j] * J[j * n + i] * d[i];
            K[i * s + n + j] = -w->row[j] * J[j * n + i] * d[i];
        }
    for (int i = 0; i < n; i++)
        w->rhs[i] = d[i] * g[i];
    for (int j = 0; j < nc; j++)
        w->rhs[n + j] = w->row[j] * (-Df[j] - MULT_BAUMGARTE_ALPHA * f[j]);
    if (linalg_lu(s, K, w->piv) < 0)
        return -1;
    linalg_lu_solve(s, K, w->piv, w->rhs);
    return 0;
}

int mult_rhs(double t, const double *y, double *dydt, void *params)
{
    mult_ws *w = params;
    if (solve(w, t, y) < 0)
        return GSL_EBADFUNC;
    memcpy(dydt, y + w->n, w->n * sizeof *y);
    for (int i = 0; i < w->n; i++)
        dydt[w->n + i] = w->col[i] * w->rhs[i];
    return GSL_SUCCESS;
}

int mult_lambda(mult_ws *w, double t, const double *y, double *lam)
{
    if (solve(w, t, y) < 0) {
        for (int j = 0; j < w->nc; j++)
            lam[j] = NAN;
        return -1;
    }
    for (int j = 0; j < w->nc; j++)
        lam[j] = w->rhs[w->n + j] * w->row[j]; /* M q'' - (row J)^T lam' = g: lam = row lam' */
    return 0;
}

int mult_project(mult_ws *w, double t, double *y)
{
    const struct engine_model *m = w->m;
    int n = w->n, nc = w->nc;
    if (!nc)
        return 0;
    double *A = w->kkt; /* J J^T, nc x nc */
    for (int it = 0; it < 8; it++) {
        load(w, t, y);
        tape_run(m->tape_mult, w->in, w->work, w->jf);
        tape_run(m->tape_obs, w->in, w->work, w->obs);
        double *J = w->jf;
        const double *f = w->obs + 1;
        /* rows scaled as in solve: the residual test is then in velocity units whatever
         * factor the constraint was written with (the correction J^T (J J^T)^-1 f is the
         * same for any row scaling) */
        row_scales(w, J, NULL);
        double fmax = 0.0;
        for (int j = 0; j < nc; j++) {
            w->rhs[j] = w->row[j] * f[j];
            if (fabs(w->rhs[j]) > fmax)
                fmax = fabs(w->rhs[j]);
            for (int i = 0; i < n; i++)
                J[j * n + i] *= w->row[j];
        }
        if (fmax < 1e-15)
            return 0;
        for (int a = 0; a < nc; a++)
            for (int b = 0; b < nc; b++) {
                double s = 0.0;
                for (int i = 0; i < n; i++)
                    s += J[a * n + i] * J[b * n + i];
                A[a * nc + b] = s;
            }
        if (linalg_lu(nc, A, w->piv) < 0)
            return -1;
        linalg_lu_solve(nc, A, w->piv, w->rhs);
        for (int i = 0; i < n; i++) {
            double s = 0.0;
            for (int j = 0; j < nc; j++)
                s += J[j * n + i] * w->rhs[j];
            y[n + i] -= s;
        }
    }
    return 0;
}
