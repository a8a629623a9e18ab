/* holo.c — position-level constraints at run time (holo.h): residuals, the choice of
 * dependent coordinates, and Newton's method on them. */
#include "holo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "linalg.h"

struct holo_ws {
    const struct engine_model *m;
    int n, h;
    double *in;   /* [n_in] tape input */
    double *work; /* tape scratch */
    double *out;  /* [h + h*n]: f, then df/dq row-major */
    double *jac;  /* [h*h] */
    int *piv;     /* [h] */
    double *step; /* [h] */
    double *q1;   /* [n] trial point */
};

holo_ws *holo_ws_new(const struct engine_model *m, const double *params)
{
    if (!m->tape_pos || m->npos <= 0)
        return NULL;
    holo_ws *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->m = m;
    w->n = m->n;
    w->h = m->npos;
    w->in = calloc(m->n_in, sizeof *w->in);
    w->work = calloc(m->tape_pos->n_ins + 1, sizeof *w->work);
    w->out = calloc((size_t)w->h * (w->n + 1), sizeof *w->out);
    w->jac = calloc((size_t)w->h * w->h, sizeof *w->jac);
    w->piv = calloc(w->h, sizeof *w->piv);
    w->step = calloc(w->h, sizeof *w->step);
    w->q1 = calloc(w->n, sizeof *w->q1);
    if (!w->in || !w->work || !w->out || !w->jac || !w->piv || !w->step || !w->q1) {
        holo_ws_free(w);
        return NULL;
    }
    memcpy(w->in, params, m->np * sizeof *params);
    return w;
}

void holo_ws_free(holo_ws *w)
{
    if (!w)
        return;
    free(w->in);
    free(w->work);
    free(w->out);
    free(w->jac);
    free(w->piv);
    free(w->step);
    free(w->q1);
    free(w);
}

static void eval(holo_ws *w, double t, const double *q)
{
    const struct engine_model *m = w->m;
    w->in[model_input_t(m)] = t;
    memcpy(w->in + model_input_q(m), q, w->n * sizeof *q);
    tape_eval(m->tape_pos, w->in, w->work, w->out);
}

static double max_abs(const double *v, int n)
{
    double mx = 0.0;
    for (int i = 0; i < n; i++)
        if (!(fabs(v[i]) <= mx))
            mx = fabs(v[i]); /* NaN wins */
    return mx;
}

void holo_residual(holo_ws *w, double t, const double *q, double *f)
{
    eval(w, t, q);
    memcpy(f, w->out, w->h * sizeof *f);
}

int holo_choose(holo_ws *w, double t, const double *q, int *dep)
{
    const struct engine_model *m = w->m;
    int n = w->n, h = w->h;
    eval(w, t, q);
    const double *J = w->out + h;
    /* Gram–Schmidt on the columns (each of length h), the named ones first. */
    double *basis = calloc((size_t)h * h + 1, sizeof *basis), *v = calloc(h + 1, sizeof *v);
    unsigned char *taken = calloc(n + 1, 1);
    int nb = 0, rc = -1;
    if (!basis || !v || !taken)
        goto done;
    for (int pass = 0; pass < 2; pass++)
        for (int c = n - 1; c >= 0 && nb < h; c--) {
            int named = 0;
            for (int j = 0; j < h; j++)
                named |= m->cons[m->pos_con[j]].pos_dep == c;
            if (taken[c] || (pass == 0 && !named))
                continue;
            double norm0 = 0.0, norm = 0.0;
            for (int i = 0; i < h; i++) {
                v[i] = J[i * n + c];
                norm0 += v[i] * v[i];
            }
            for (int b = 0; b < nb; b++) {
                double d = 0.0;
                for (int i = 0; i < h; i++)
                    d += basis[b * h + i] * v[i];
                for (int i = 0; i < h; i++)
                    v[i] -= d * basis[b * h + i];
            }
            for (int i = 0; i < h; i++)
                norm += v[i] * v[i];
            if (norm > 0 && norm > 1e-16 * norm0) {
                norm = sqrt(norm);
                for (int i = 0; i < h; i++)
                    basis[nb * h + i] = v[i] / norm;
                taken[c] = 1;
                dep[nb++] = c;
            }
        }
    rc = nb == h ? 0 : -1;
done:
    free(basis);
    free(v);
    free(taken);
    return rc;
}

int holo_solve(holo_ws *w, double t, double *q, const int *dep, double tol, double *resid, int *iters)
{
    int n = w->n, h = w->h, it = 0;
    eval(w, t, q);
    double r = max_abs(w->out, h);
    while (it < HOLO_MAX_ITER && r > 1e-15 && isfinite(r)) {
        for (int i = 0; i < h; i++) {
            w->step[i] = w->out[i];
            for (int j = 0; j < h; j++)
                w->jac[i * h + j] = w->out[h + i * n + dep[j]];
        }
        if (linalg_lu(h, w->jac, w->piv) < 0)
            break;
        linalg_lu_solve(h, w->jac, w->piv, w->step);
        it++;
        double lambda = 1.0, r1 = INFINITY;
        int small = 1;
        for (int halve = 0; halve < 20; halve++, lambda *= 0.5) {
            memcpy(w->q1, q, n * sizeof *q);
            for (int j = 0; j < h; j++)
                w->q1[dep[j]] -= lambda * w->step[j];
            eval(w, t, w->q1);
            r1 = max_abs(w->out, h);
            if (r1 <= r) /* decreased, or equal (rounding level) */
                break;
        }
        for (int j = 0; j < h; j++)
            if (fabs(lambda * w->step[j]) > 4e-16 * (1.0 + fabs(q[dep[j]])))
                small = 0;
        if (!(r1 < r)) /* no step reduced max |f|: at rounding level, or stalled */
            break;
        memcpy(q, w->q1, n * sizeof *q);
        r = r1;
        if (small)
            break;
    }
    eval(w, t, q);
    r = max_abs(w->out, h);
    *resid = r;
    *iters = it;
    return r <= tol ? 0 : -1;
}
