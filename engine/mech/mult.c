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
    w->piv = calloc(s, sizeof *w->piv);
    if (!w->in || !w->work || !w->dyn || !w->jf || !w->obs || !w->kkt || !w->rhs || !w->piv) {
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

/* Assembles and solves the KKT system at y; rhs then holds [q''; lam]. */
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
    double *K = w->kkt;
    memset(K, 0, (size_t)s * s * sizeof *K);
    for (int i = 0, idx = 0; i < n; i++)
        for (int l = i; l < n; l++, idx++)
            K[i * s + l] = K[l * s + i] = up[idx];
    for (int j = 0; j < nc; j++)
        for (int i = 0; i < n; i++) {
            K[(n + j) * s + i] = J[j * n + i];
            K[i * s + n + j] = -J[j * n + i];
        }
    for (int i = 0; i < n; i++)
        w->rhs[i] = g[i];
    for (int j = 0; j < nc; j++)
        w->rhs[n + j] = -Df[j] - MULT_BAUMGARTE_ALPHA * f[j];
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
    memcpy(dydt + w->n, w->rhs, w->n * sizeof *y);
    return GSL_SUCCESS;
}

int mult_lambda(mult_ws *w, double t, const double *y, double *lam)
{
    if (solve(w, t, y) < 0) {
        for (int j = 0; j < w->nc; j++)
            lam[j] = NAN;
        return -1;
    }
    memcpy(lam, w->rhs + w->n, w->nc * sizeof *lam);
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
        const double *J = w->jf, *f = w->obs + 1;
        double fmax = 0.0;
        for (int j = 0; j < nc; j++)
            if (fabs(f[j]) > fmax)
                fmax = fabs(f[j]);
        if (fmax < 1e-15)
            return 0;
        for (int a = 0; a < nc; a++)
            for (int b = 0; b < nc; b++) {
                double s = 0.0;
                for (int i = 0; i < n; i++)
                    s += J[a * n + i] * J[b * n + i];
                A[a * nc + b] = s;
            }
        memcpy(w->rhs, f, nc * sizeof *f);
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
