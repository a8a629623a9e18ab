/* linearize.c — the right-hand side with forward-mode tangents (linearize.h).
 *
 * Two paths, as in hamel.c: the symbolically reduced tape (q', M*, F on (q, u, t)),
 * or the numeric path (Psi's LU, the dynamics tape on (q, q'), the projection on
 * Phi_S). Each tangent rule below is the derivative of the corresponding line of
 * hamel_rhs; the linear solves reuse their factorizations:
 *   x = K^-1 f  =>  dx = K^-1 (df - dK x).
 Nonlinear constraints solved by Newton (no reduced tape) take the numeric path with
 * q' from hamel_qdot and dq' from the implicit function theorem (rhs_numeric).
 * The request handling of /v1/evaluate and /v1/linearize is in lin_api.c.
 */
#include "linearize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hamel.h"
#include "linalg.h"
#include "tangent.h"

struct lin_ws {
    const struct engine_model *m;
    int n, k, np, nd_max, numeric;
    double *in, *din; /* tape inputs and their tangents [n_in * nd_max] */
    double *s, *ds;   /* tape slots and their tangents */
    double *o, *dout; /* tape outputs and their tangents */
    double *psi, *lu; /* Psi [n*n] + Psi_t [n]; LU of Psi */
    int *piv, *kpiv;
    double *qd, *dqd;  /* q' [n], dq' [n * nd] */
    double *M, *a, *h; /* M [n*n], Phi b, g + M a */
    double *X, *MX;    /* Phi_S and M Phi_S, column r at + r*n */
    double *Ms, *Mf;   /* M* [k*k] and its factorization */
    int mf_chol;       /* Mf holds a Cholesky factor (else LU with kpiv) */
    double *F, *ud;    /* F [k], u' [k] */
    /* per-direction scratch */
    double *dPsi, *dM, *da, *dh, *dX, *dMX, *tmp, *dF, *dMs;
    double *dpsis; /* tangents of Psi, Psi_t [(n*n + n) * nd_max] */
    double *dmup;  /* tangents of tape_mass's M* (upper) [k(k+1)/2 * nd_max] */
    hamel_ws *hw;  /* nonlinear constraints by Newton: q' from (q, u) (hamel_qdot) */
};

void lin_ws_free(lin_ws *w)
{
    if (!w)
        return;
    double *bufs[] = {w->in, w->din, w->s,  w->ds, w->o,   w->dout, w->psi, w->lu,  w->qd,    w->dqd,
                      w->M,  w->a,   w->h,  w->X,  w->MX,  w->Ms,   w->Mf,  w->F,   w->ud,    w->dPsi,
                      w->dM, w->da,  w->dh, w->dX, w->dMX, w->tmp,  w->dF,  w->dMs, w->dpsis, w->dmup};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(w->piv);
    free(w->kpiv);
    hamel_ws_free(w->hw);
    free(w);
}

static int tape_size(const tape *t, int outputs) { return t ? (outputs ? t->n_outputs : t->n_ins) : 0; }

/* The most slots and outputs of the tapes a lin_ws runs (the observation tape only in
 * the reduced form of nonlinear constraints). */
static void lin_tape_sizes(const struct engine_model *m, int *slots, int *outs)
{
    const tape *tapes[4] = {m->tape_psi, m->tape_dyn, m->tape_fast, m->tape_mass};
    *slots = *outs = 0;
    for (int i = 0; i < 5; i++) {
        const tape *t = i < 4 ? tapes[i] : m->nl_reduced ? m->tape_obs : NULL;
        if (tape_size(t, 0) > *slots)
            *slots = tape_size(t, 0);
        if (tape_size(t, 1) > *outs)
            *outs = tape_size(t, 1);
    }
}

/* The values of a lin_ws: tape inputs, slots and outputs, Psi, M, Phi_S and M*; -1 when
 * one is missing. */
static int lin_ws_alloc_values(lin_ws *w, const struct engine_model *m, int slots, int outs)
{
    int n = m->n, k = m->k;
    size_t nn = (size_t)n * n, nd = (size_t)w->nd_max;
    w->in = calloc(m->n_in, sizeof *w->in);
    w->din = calloc((size_t)m->n_in * nd, sizeof *w->din);
    w->s = calloc(slots + 1, sizeof *w->s);
    w->ds = calloc(((size_t)slots + 1) * nd, sizeof *w->ds);
    w->o = calloc(outs + 1, sizeof *w->o);
    w->dout = calloc(((size_t)outs + 1) * nd, sizeof *w->dout);
    w->psi = calloc(nn + n, sizeof *w->psi);
    w->lu = calloc(nn, sizeof *w->lu);
    w->piv = calloc(n, sizeof *w->piv);
    w->kpiv = calloc(k + 1, sizeof *w->kpiv);
    w->qd = calloc(n, sizeof *w->qd);
    w->dqd = calloc((size_t)n * nd, sizeof *w->dqd);
    w->M = calloc(nn, sizeof *w->M);
    w->a = calloc(n, sizeof *w->a);
    w->h = calloc(n, sizeof *w->h);
    w->X = calloc((size_t)n * k + 1, sizeof *w->X);
    w->MX = calloc((size_t)n * k + 1, sizeof *w->MX);
    w->Ms = calloc((size_t)k * k + 1, sizeof *w->Ms);
    w->Mf = calloc((size_t)k * k + 1, sizeof *w->Mf);
    return (!w->in || !w->din || !w->s || !w->ds || !w->o || !w->dout || !w->psi || !w->lu || !w->piv ||
            !w->kpiv || !w->qd || !w->dqd || !w->M || !w->a || !w->h || !w->X || !w->MX || !w->Ms || !w->Mf)
               ? -1
               : 0;
}

/* The tangents of a lin_ws (and F, u'); -1 when one is missing. */
static int lin_ws_alloc_tangents(lin_ws *w, const struct engine_model *m)
{
    int n = m->n, k = m->k;
    size_t nn = (size_t)n * n, nd = (size_t)w->nd_max;
    w->F = calloc(k + 1, sizeof *w->F);
    w->ud = calloc(k + 1, sizeof *w->ud);
    w->dPsi = calloc(nn + n, sizeof *w->dPsi);
    w->dM = calloc(nn, sizeof *w->dM);
    w->da = calloc(n, sizeof *w->da);
    w->dh = calloc(n, sizeof *w->dh);
    w->dX = calloc((size_t)n * k + 1, sizeof *w->dX);
    w->dMX = calloc((size_t)n * k + 1, sizeof *w->dMX);
    w->tmp = calloc(n + k + 1, sizeof *w->tmp);
    w->dF = calloc(k + 1, sizeof *w->dF);
    w->dMs = calloc((size_t)k * k + 1, sizeof *w->dMs);
    w->dmup = calloc((size_t)k * (k + 1) / 2 * nd + 1, sizeof *w->dmup);
    w->dpsis = calloc((nn + n) * nd, sizeof *w->dpsis);
    return (!w->F || !w->ud || !w->dPsi || !w->dM || !w->da || !w->dh || !w->dX || !w->dMX || !w->tmp ||
            !w->dF || !w->dMs || !w->dmup || !w->dpsis)
               ? -1
               : 0;
}

lin_ws *lin_ws_new(const struct engine_model *m, const double *params, int nd_max, int numeric)
{
    /* nonlinear constraints: only in the reduced form (n - m speeds; nonlin.h), with
     * explicit kinematics (the reduced tape) or q' by Newton (the numeric path, with the
     * implicit function theorem for dq') */
    if ((m->nlin != m->nc && !m->nl_reduced) || nd_max < 1)
        return NULL;
    lin_ws *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->m = m;
    w->n = m->n;
    w->k = m->k;
    w->np = m->np;
    w->nd_max = nd_max;
    w->numeric = numeric || !m->tape_fast;
    int slots, outs;
    lin_tape_sizes(m, &slots, &outs);
    if (lin_ws_alloc_values(w, m, slots, outs) < 0 || lin_ws_alloc_tangents(w, m) < 0 ||
        (m->nl_reduced && !(w->hw = hamel_ws_new(m, params)))) {
        lin_ws_free(w);
        return NULL;
    }
    if (m->np)
        memcpy(w->in, params, m->np * sizeof *params);
    return w;
}

void lin_ws_set_guess(lin_ws *w, const double *qd)
{
    if (w->hw && qd)
        hamel_ws_set_guess(w->hw, qd);
}

/* Seeds the tape inputs: parameters, t and q (from seed), velocities zero. */
static void seed_inputs(lin_ws *w, double t, const double *q, const double *seed, int nd)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    size_t row = (size_t)nd * sizeof *w->din;
    for (int p = 0; p < m->np; p++)
        memcpy(w->din + (size_t)p * nd, seed + (size_t)(1 + n + k + p) * nd, row);
    w->in[model_input_t(m)] = t;
    memcpy(w->din + (size_t)model_input_t(m) * nd, seed, row);
    for (int i = 0; i < n; i++) {
        w->in[model_input_q(m) + i] = q[i];
        memcpy(w->din + (size_t)(model_input_q(m) + i) * nd, seed + (size_t)(1 + i) * nd, row);
        w->in[model_input_qd(m) + i] = 0.0;
        memset(w->din + (size_t)(model_input_qd(m) + i) * nd, 0, row);
    }
}

/* Factors M* (w->Ms, full) into w->Mf: Cholesky, LU when that fails (as hamel.c). */
static int factor_mass(lin_ws *w)
{
    int k = w->k;
    memcpy(w->Mf, w->Ms, (size_t)k * k * sizeof *w->Mf);
    w->mf_chol = linalg_chol(k, w->Mf) == 0;
    if (w->mf_chol)
        return 0;
    memcpy(w->Mf, w->Ms, (size_t)k * k * sizeof *w->Mf);
    return linalg_lu(k, w->Mf, w->kpiv);
}

static void solve_mass(lin_ws *w, double *x)
{
    if (w->mf_chol)
        linalg_chol_solve(w->k, w->Mf, x);
    else
        linalg_lu_solve(w->k, w->Mf, w->kpiv, x);
}

/* The reduced tape: q', M*, F and tangents; u' = M*^-1 F and, per direction,
 * du' = M*^-1 (dF - dM* u'). */
static int rhs_fast(lin_ws *w, double t, const double *q, const double *u, const double *seed, int nd,
                    double *f, double *df)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    seed_inputs(w, t, q, seed, nd);
    for (int r = 0; r < k; r++) {
        w->in[m->u_slot[r]] = u[r];
        memcpy(w->din + (size_t)m->u_slot[r] * nd, seed + (size_t)(1 + n + r) * nd, nd * sizeof *w->din);
    }
    size_t nm = (size_t)k * (k + 1) / 2;
    if (m->fast_mass_const) {
        /* M* (parameters only) has a tape of its own, and tape_fast gives q', F: M*'s
         * tangents (non-zero only along parameter directions, for B) are kept apart */
        if (tape_eval_tangent(m->tape_mass, w->in, w->din, nd, w->s, w->ds, w->o, w->dout) < 0)
            return -1;
        for (int r = 0, idx = 0; r < k; r++)
            for (int s = r; s < k; s++, idx++)
                w->Ms[r * k + s] = w->Ms[s * k + r] = w->o[idx];
        memcpy(w->dmup, w->dout, nm * nd * sizeof *w->dmup);
    }
    if (tape_eval_tangent(m->tape_fast, w->in, w->din, nd, w->s, w->ds, w->o, w->dout) < 0)
        return -1;
    const double *up = w->o + n, *F = m->fast_mass_const ? up : up + nm;
    const double *dup = m->fast_mass_const ? w->dmup : w->dout + (size_t)n * nd;
    const double *dFo = w->dout + (size_t)n * nd + (m->fast_mass_const ? 0 : nm * nd);
    for (int i = 0; i < n; i++) {
        f[i] = w->o[i];
        memcpy(df + (size_t)i * nd, w->dout + (size_t)i * nd, nd * sizeof *df);
    }
    if (!m->fast_mass_const)
        for (int r = 0, idx = 0; r < k; r++)
            for (int s = r; s < k; s++, idx++)
                w->Ms[r * k + s] = w->Ms[s * k + r] = up[idx];
    if (factor_mass(w) < 0)
        return -1;
    memcpy(w->ud, F, k * sizeof *F);
    solve_mass(w, w->ud);
    for (int r = 0; r < k; r++)
        f[n + r] = w->ud[r];
    for (int d = 0; d < nd; d++) {
        /* dF - dM* u' */
        for (int r = 0; r < k; r++)
            w->tmp[r] = dFo[(size_t)r * nd + d];
        for (int r = 0, idx = 0; r < k; r++)
            for (int s = r; s < k; s++, idx++) {
                double dm = dup[(size_t)idx * nd + d];
                w->tmp[r] -= dm * w->ud[s];
                if (s != r)
                    w->tmp[s] -= dm * w->ud[r];
            }
        solve_mass(w, w->tmp);
        for (int r = 0; r < k; r++)
            df[(size_t)(n + r) * nd + d] = w->tmp[r];
    }
    return 0;
}

/* Direction d of dq' = Psi^-1 ([du; 0] - dPsi_t - dPsi q') (a nonlinear constraint's
 * row: -df_j, from tape_obs's tangents in w->dout) into w->dqd. */
static void numeric_dqd(lin_ws *w, const double *seed, const double *dpsi_all, int nd, int d)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    size_t nn = (size_t)n * n;
    for (int i = 0; i < n; i++) {
        double v = (i < k ? seed[(size_t)(1 + n + i) * nd + d] : 0.0) - dpsi_all[(nn + i) * nd + d];
        for (int l = 0; l < n; l++)
            v -= dpsi_all[((size_t)i * n + l) * nd + d] * w->qd[l];
        w->tmp[i] = v;
    }
    for (int j = 0; m->nl_reduced && j < m->nc; j++)
        if (!m->cons[j].linear)
            w->tmp[m->cons[j].row] = -w->dout[(size_t)(1 + j) * nd + d];
    linalg_lu_solve(n, w->lu, w->piv, w->tmp);
    for (int i = 0; i < n; i++)
        w->dqd[(size_t)i * nd + d] = w->tmp[i];
}

/* Direction d of u' = M*^-1 F: the tangents of the assembly (da, dX, dh, dMX, dF, dM*)
 * line by line, then du' = M*^-1 (dF - dM* u') into df. dup, dg, db: the tangents of
 * tape_dyn's M (upper), g and b. */
static void numeric_dud(lin_ws *w, const double *dpsi_all, const double *dup, const double *dg,
                        const double *db, int nd, int d, double *df)
{
    int n = w->n, k = w->k;
    size_t nn = (size_t)n * n;
    for (size_t i = 0; i < nn; i++)
        w->dPsi[i] = dpsi_all[i * nd + d];
    for (int i = 0, idx = 0; i < n; i++)
        for (int l = i; l < n; l++, idx++)
            w->dM[i * n + l] = w->dM[l * n + i] = dup[(size_t)idx * nd + d];
    /* da = Psi^-1 (db - dPsi a) */
    for (int i = 0; i < n; i++) {
        double v = db[(size_t)i * nd + d];
        for (int l = 0; l < n; l++)
            v -= w->dPsi[i * n + l] * w->a[l];
        w->da[i] = v;
    }
    linalg_lu_solve(n, w->lu, w->piv, w->da);
    /* dX_r = -Psi^-1 dPsi X_r */
    for (int r = 0; r < k; r++) {
        const double *x = w->X + (size_t)r * n;
        double *dx = w->dX + (size_t)r * n;
        for (int i = 0; i < n; i++) {
            double v = 0.0;
            for (int l = 0; l < n; l++)
                v -= w->dPsi[i * n + l] * x[l];
            dx[i] = v;
        }
        linalg_lu_solve(n, w->lu, w->piv, dx);
    }
    /* dh = dg + dM a + M da; dMX_r = dM X_r + M dX_r */
    for (int i = 0; i < n; i++) {
        const double *Mi = w->M + (size_t)i * n, *dMi = w->dM + (size_t)i * n;
        double v = dg[(size_t)i * nd + d];
        for (int l = 0; l < n; l++)
            v += dMi[l] * w->a[l] + Mi[l] * w->da[l];
        w->dh[i] = v;
        for (int r = 0; r < k; r++) {
            const double *x = w->X + (size_t)r * n, *dx = w->dX + (size_t)r * n;
            double s2 = 0.0;
            for (int l = 0; l < n; l++)
                s2 += dMi[l] * x[l] + Mi[l] * dx[l];
            w->dMX[(size_t)r * n + i] = s2;
        }
    }
    /* dF_r = dX_r . h + X_r . dh; dMs_rs = dX_r . MX_s + X_r . dMX_s */
    for (int r = 0; r < k; r++) {
        const double *x = w->X + (size_t)r * n, *dx = w->dX + (size_t)r * n;
        double v = 0.0;
        for (int i = 0; i < n; i++)
            v += dx[i] * w->h[i] + x[i] * w->dh[i];
        w->dF[r] = v;
        for (int s = 0; s < k; s++) {
            const double *mx = w->MX + (size_t)s * n, *dmx = w->dMX + (size_t)s * n;
            double e = 0.0;
            for (int i = 0; i < n; i++)
                e += dx[i] * mx[i] + x[i] * dmx[i];
            w->dMs[r * k + s] = e;
        }
    }
    /* du' = M*^-1 (dF - dM* u') */
    for (int r = 0; r < k; r++) {
        double v = w->dF[r];
        for (int s = 0; s < k; s++)
            v -= w->dMs[r * k + s] * w->ud[s];
        w->tmp[r] = v;
    }
    solve_mass(w, w->tmp);
    for (int r = 0; r < k; r++)
        df[(size_t)(n + r) * nd + d] = w->tmp[r];
}

/* The numeric path, line by line the tangent of hamel_rhs. */
static int rhs_numeric(lin_ws *w, double t, const double *q, const double *u, const double *seed, int nd,
                       double *f, double *df)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    size_t nn = (size_t)n * n;
    seed_inputs(w, t, q, seed, nd);
    /* Nonlinear constraints: q' solves G(q', x) = 0 (the speed rows Psi_r q' + Psi_rt -
     * u_r, the linear constraints, f_j(q, q', t)) by Newton, and Psi = dG/dq' (its rows
     * of the f_j are df_j/dq'). The tapes run at that q' with its tangents zero first:
     * they give the partial derivatives dG/dx dx, and dq' = -Psi^-1 dG/dx dx (implicit
     * functions); then Psi runs again with dq' for its total tangents. */
    if (m->nl_reduced) {
        if (hamel_qdot(w->hw, t, q, u, w->qd) < 0)
            return -1;
        for (int i = 0; i < n; i++)
            w->in[model_input_qd(m) + i] = w->qd[i];
    }
    /* Psi, Psi_t and their tangents dpsi(idx, d) = w->dout[idx * nd + d] */
    if (tape_eval_tangent(m->tape_psi, w->in, w->din, nd, w->s, w->ds, w->psi, w->dout) < 0)
        return -1;
    double *dpsi_all = w->dpsis;
    memcpy(dpsi_all, w->dout, (nn + n) * nd * sizeof *dpsi_all);
    memcpy(w->lu, w->psi, nn * sizeof *w->lu);
    if (linalg_lu(n, w->lu, w->piv) < 0)
        return -1;
    const double *psit = w->psi + nn;
    if (!m->nl_reduced) {
        /* q' = Psi^-1 ([u; 0] - Psi_t) */
        for (int i = 0; i < n; i++)
            w->qd[i] = (i < k ? u[i] : 0.0) - psit[i];
        linalg_lu_solve(n, w->lu, w->piv, w->qd);
    } else if (tape_eval_tangent(m->tape_obs, w->in, w->din, nd, w->s, w->ds, w->o, w->dout) < 0) {
        return -1; /* w->dout[(1 + j) * nd + d]: the partial derivatives of f_j */
    }
    /* dq' = Psi^-1 ([du; 0] - dPsi_t - dPsi q'); a nonlinear constraint's row: -df_j */
    for (int d = 0; d < nd; d++)
        numeric_dqd(w, seed, dpsi_all, nd, d);
    if (m->nl_reduced) {
        /* Psi's total tangents, through q' too */
        for (int i = 0; i < n; i++)
            memcpy(w->din + (size_t)(model_input_qd(m) + i) * nd, w->dqd + (size_t)i * nd,
                   nd * sizeof *w->din);
        if (tape_eval_tangent(m->tape_psi, w->in, w->din, nd, w->s, w->ds, w->psi, w->dout) < 0)
            return -1;
        memcpy(dpsi_all, w->dout, (nn + n) * nd * sizeof *dpsi_all);
    }
    for (int i = 0; i < n; i++) {
        w->in[model_input_qd(m) + i] = w->qd[i];
        memcpy(w->din + (size_t)(model_input_qd(m) + i) * nd, w->dqd + (size_t)i * nd, nd * sizeof *w->din);
        f[i] = w->qd[i];
        memcpy(df + (size_t)i * nd, w->dqd + (size_t)i * nd, nd * sizeof *df);
    }
    /* M (upper), g, b and tangents */
    if (tape_eval_tangent(m->tape_dyn, w->in, w->din, nd, w->s, w->ds, w->o, w->dout) < 0)
        return -1;
    const size_t nu = (size_t)n * (n + 1) / 2;
    const double *dup = w->dout, *dg = w->dout + nu * nd, *db = dg + (size_t)n * nd;
    /* the assembly itself is hamel_rhs's (hamel_project): the tangents below differentiate
     * it line by line */
    hamel_project(n, k, w->lu, w->piv, w->o, w->M, w->a, w->X, w->h, w->MX, w->F, w->Ms);
    if (factor_mass(w) < 0)
        return -1;
    memcpy(w->ud, w->F, k * sizeof *w->ud);
    solve_mass(w, w->ud);
    for (int r = 0; r < k; r++)
        f[n + r] = w->ud[r];

    for (int d = 0; d < nd; d++)
        numeric_dud(w, dpsi_all, dup, dg, db, nd, d, df);
    return 0;
}

int lin_rhs_tangent(lin_ws *w, double t, const double *q, const double *u, const double *seed, int nd,
                    double *f, double *df)
{
    if (nd < 1 || nd > w->nd_max)
        return -1;
    return w->numeric ? rhs_numeric(w, t, q, u, seed, nd, f, df) : rhs_fast(w, t, q, u, seed, nd, f, df);
}
