/* hamel.c — Hamel coefficients and the Boltzmann–Hamel right-hand side (hamel.h). */
#include "hamel.h"
#include "trust.h"

#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "linalg.h"
#include "native.h"
#include "reduce.h"
#include "sparsity.h"

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
    double *MX;     /* M Phi_S, column r at MX + r*n */
    double *Ms;     /* [k*k] */
    double *Mfull;  /* [k*k] M* (sparse path: entries that can be nonzero) */
    double *F;      /* [k] */
    double *Phi;    /* full inverse, column l at Phi + l*n */
    double *phit;   /* Phi_t [n] */
    double *dpsi;   /* dPsi/dq [n^3], dPsi/dt [n^2], dPsi_t/dq [n^2] */
    double *dpsi_c; /* [dpsi_n] tape_dpsi's outputs (model_run_dpsi places them) */
    int dpsi_n;
    /* hamel_structure only: the running error bounds of dPsi (laid out as dpsi) and of
     * Psi, Psi_t (as psi), in units of u (tape_eval_err); NULL elsewhere */
    const double *dpsi_err, *psi_err;
    double *A, *W;             /* [n*n] scratch */
    double *ent_mag, *inner;   /* [n*n], [n]: gamma_all's entries and rows */
    int *ent_i, *ent_k, *rows; /* [n*n], [n*n], [n] */
    unsigned char *in_rows;    /* [n] */
    double *obs;               /* tape_obs outputs */
    double *mult;
    double *fast;             /* tape_fast outputs */
    double *minv;             /* [k*k] M*^-1 when M* is constant (fast_mass_const) */
    int *minv_row, *minv_col; /* its nonzeros by row: [k+1], [k*k] */
    double *minv_val;         /* [k*k] */
    int minv_ready;
    int minv_diag;       /* M*^-1 has its nonzeros on the diagonal only (each row one) */
    int numeric;         /* ignore tape_fast (for cross-checks) */
    native_code *native; /* the optimizing tier (a reference), or NULL */
    double *guess;       /* [n] last q' solved from (q, u) (nonlinear constraints: Newton's start) */
    int *sel;            /* [k] q' components used as speeds instead of the model's rows */
    int sel_on;          /* sel is in force (hamel_ws_select) */
    double *blu;         /* Psi's diagonal blocks, LU-factored (sparse) */
    int *bpiv;           /* [n] their pivots */
    double *tmp;         /* [n] */
    double *save;        /* [k*k] solve_spd, solve_mass: the matrix kept for the LU fallback */
    int *spiv;           /* [k] its pivots */
    double *mconst;      /* [k*k] invert_constant_mass: M* */
    int fmc_n;           /* connected components of tape_fast's M* pattern (2 or more), or 0 */
    int *fmc_start;      /* [fmc_n+1] where each component's speeds are in fmc_idx */
    int *fmc_idx;        /* [k] the speeds of each component, increasing */
    void *block;         /* the buffers above but dpsi_c and fmc_*: one allocation (ws_take) */
    int dense;           /* ignore the sparsity too (for cross-checks) */
};

const double *hamel_ws_params(const hamel_ws *w) { return w->in; }

int hamel_constraint_scales(hamel_ws *w, double t, const double *q, const double *qd, double *scale)
{
    const struct engine_model *m = w->m;
    int n = m->n, nc = m->nc;
    double *in = malloc(((size_t)m->n_in + 1) * sizeof *in),
           *jf = malloc(((size_t)nc * (n + 1) + 1) * sizeof *jf);
    if (!in || !jf || !m->tape_mult) {
        for (int j = 0; j < nc; j++)
            scale[j] = 1.0;
        free(in);
        free(jf);
        return -1;
    }
    memcpy(in, w->in, (size_t)m->n_in * sizeof *in); /* the parameters */
    in[model_input_t(m)] = t;
    memcpy(in + model_input_q(m), q, n * sizeof *q);
    memcpy(in + model_input_qd(m), qd, n * sizeof *qd);
    tape_run(m->tape_mult, in, w->work, jf); /* J = df/dq' [nc*n], then Df */
    for (int j = 0; j < nc; j++) {
        double mx = 0.0;
        for (int i = 0; i < n; i++)
            if (fabs(jf[(size_t)j * n + i]) > mx)
                mx = fabs(jf[(size_t)j * n + i]);
        scale[j] = mx > 0.0 && isfinite(mx) ? mx : 1.0;
    }
    free(in);
    free(jf);
    return 0;
}

int hamel_residual_limits(hamel_ws *w, double t, const double *q, const double *qd, double tol, double *limit)
{
    const struct engine_model *m = w->m;
    double v = 0.0; /* no floor of 1: at 1e-9 m/s a qdot off its constraint by 16 times itself passed */
    for (int i = 0; i < m->n; i++)
        if (fabs(qd[i]) > v)
            v = fabs(qd[i]);
    int rc = hamel_constraint_scales(w, t, q, qd, limit);
    for (int j = 0; j < m->nc; j++)
        limit[j] *= tol * v;
    return rc;
}

void hamel_ws_free(hamel_ws *w)
{
    if (!w)
        return;
    free(w->block);
    free(w->dpsi_c);
    native_release(w->native);
    free(w->fmc_start);
    free(w->fmc_idx);
    free(w);
}

void hamel_ws_set_numeric(hamel_ws *w, int numeric)
{
    w->numeric = numeric != 0;
    w->dense = numeric > 1;
}

/* The buffers of a workspace are pieces of one zeroed block (a run makes two
 * workspaces: one calloc each, not 41). ws_take with A->base NULL only counts (and
 * returns A itself, not NULL); with the block, it hands out the piece at the same
 * offset. Pieces are max-aligned; under AddressSanitizer a poisoned gap follows each
 * one, so an overrun is still caught. */
typedef struct ws_arena {
    char *base;
    size_t used;
} ws_arena;

#define WS_ARENA_FAILED ((size_t)1 << 40)
#if defined(__SANITIZE_ADDRESS__)
#define WS_ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WS_ARENA_ASAN 1
#endif
#endif
#ifdef WS_ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define WS_ARENA_GAP 32
#else
#define WS_ARENA_GAP 0
#endif

static void *ws_take(ws_arena *A, size_t count, size_t size)
{
    const size_t al = _Alignof(max_align_t);
    size_t at = (A->used + al - 1) / al * al;
    if (A->used >= WS_ARENA_FAILED || (size && count > (WS_ARENA_FAILED - at) / size)) {
        A->used = WS_ARENA_FAILED;
        return A->base ? NULL : (void *)A;
    }
    A->used = at + count * size + WS_ARENA_GAP;
    if (!A->base)
        return A;
#ifdef WS_ARENA_ASAN
    ASAN_POISON_MEMORY_REGION(A->base + at + count * size, WS_ARENA_GAP);
#endif
    return A->base + at;
}

/* The tape and linear-algebra buffers of w; -1 when one is missing. */
static int hamel_ws_alloc_core(hamel_ws *w, const struct engine_model *m, ws_arena *A)
{
    int n = m->n, k = m->k;
    size_t nn = (size_t)n * n;
    w->in = ws_take(A, m->n_in, sizeof *w->in);
    w->work = ws_take(A, m->work_len + 1, sizeof *w->work);
    w->psi = ws_take(A, nn + n, sizeof *w->psi);
    w->lu = ws_take(A, nn, sizeof *w->lu);
    w->piv = ws_take(A, n, sizeof *w->piv);
    w->dyn = ws_take(A, n * (n + 1) / 2 + 2 * n, sizeof *w->dyn);
    w->M = ws_take(A, nn, sizeof *w->M);
    w->X = ws_take(A, (size_t)n * k, sizeof *w->X);
    w->a = ws_take(A, n, sizeof *w->a);
    w->h = ws_take(A, n, sizeof *w->h);
    w->vec = ws_take(A, n, sizeof *w->vec);
    w->MX = ws_take(A, (size_t)n * k, sizeof *w->MX);
    w->Ms = ws_take(A, (size_t)k * k, sizeof *w->Ms);
    w->Mfull = ws_take(A, (size_t)k * k, sizeof *w->Mfull);
    w->F = ws_take(A, k, sizeof *w->F);
    w->Phi = ws_take(A, nn, sizeof *w->Phi);
    w->phit = ws_take(A, n, sizeof *w->phit);
    w->dpsi = ws_take(A, nn * n + 2 * nn, sizeof *w->dpsi); /* its zeros are never written */
    w->dpsi_n = model_dpsi_count(m);
    w->A = ws_take(A, nn, sizeof *w->A);
    w->W = ws_take(A, nn, sizeof *w->W);
    return (!w->in || !w->work || !w->psi || !w->lu || !w->piv || !w->dyn || !w->M || !w->X || !w->a ||
            !w->h || !w->vec || !w->MX || !w->Ms || !w->Mfull || !w->F || !w->Phi || !w->phit || !w->dpsi ||
            !w->A || !w->W)
               ? -1
               : 0;
}

/* The buffers of gamma_all, the observations, the fast tier and the sparse path; -1 when
 * one is missing. */
static int hamel_ws_alloc_extra(hamel_ws *w, const struct engine_model *m, ws_arena *A)
{
    int n = m->n, k = m->k;
    size_t nn = (size_t)n * n;
    w->ent_mag = ws_take(A, nn, sizeof *w->ent_mag);
    w->inner = ws_take(A, n, sizeof *w->inner);
    w->ent_i = ws_take(A, nn, sizeof *w->ent_i);
    w->ent_k = ws_take(A, nn, sizeof *w->ent_k);
    w->rows = ws_take(A, n, sizeof *w->rows);
    w->in_rows = ws_take(A, n, 1);
    w->obs = ws_take(A, 1 + m->nc + n, sizeof *w->obs);
    w->mult = ws_take(A, (size_t)(m->nc + 1) * (n + 1), sizeof *w->mult);
    w->fast = ws_take(A, (size_t)n + k * (k + 1) / 2 + k, sizeof *w->fast);
    w->minv = ws_take(A, (size_t)k * k, sizeof *w->minv);
    w->sel = ws_take(A, k + 1, sizeof *w->sel);
    w->guess = ws_take(A, n, sizeof *w->guess);
    w->minv_row = ws_take(A, k + 1, sizeof *w->minv_row);
    w->minv_col = ws_take(A, (size_t)k * k, sizeof *w->minv_col);
    w->minv_val = ws_take(A, (size_t)k * k, sizeof *w->minv_val);
    w->blu = ws_take(A, m->sparse ? m->sparse->lu_len + 1 : 1, sizeof *w->blu);
    w->bpiv = ws_take(A, n, sizeof *w->bpiv);
    w->tmp = ws_take(A, n, sizeof *w->tmp);
    /* scratch of the mass solves, sized by the model (+1: k may be 0) */
    w->save = ws_take(A, (size_t)k * k + 1, sizeof *w->save);
    w->spiv = ws_take(A, k + 1, sizeof *w->spiv);
    w->mconst = ws_take(A, (size_t)k * k + 1, sizeof *w->mconst);
    return (!w->ent_mag || !w->inner || !w->ent_i || !w->ent_k || !w->rows || !w->in_rows || !w->obs ||
            !w->mult || !w->fast || !w->minv || !w->sel || !w->guess || !w->minv_row || !w->minv_col ||
            !w->minv_val || !w->blu || !w->bpiv || !w->tmp || !w->save || !w->spiv || !w->mconst)
               ? -1
               : 0;
}

static void fast_mass_components(hamel_ws *w);

hamel_ws *hamel_ws_new(const struct engine_model *m, const double *params)
{
    hamel_ws *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->m = m;
    w->n = m->n;
    w->k = m->k;
    ws_arena A = {0};
    hamel_ws_alloc_core(w, m, &A); /* counts */
    hamel_ws_alloc_extra(w, m, &A);
    A.base = A.used < WS_ARENA_FAILED ? calloc(1, A.used + 1) : NULL;
    w->block = A.base;
    A.used = 0;
    w->dpsi_c = calloc(w->dpsi_n + 1, sizeof *w->dpsi_c);
    if (!A.base || !w->dpsi_c || hamel_ws_alloc_core(w, m, &A) < 0 || hamel_ws_alloc_extra(w, m, &A) < 0) {
        hamel_ws_free(w);
        return NULL;
    }
    if (m->np)
        memcpy(w->in, params, m->np * sizeof *params);
    if (m->tape_fast)
        w->native = native_acquire(m, params);
    fast_mass_components(w);
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
    if (!m->tape_fast || !m->fast_mass_const)
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

static int sparse_factor(hamel_ws *w);
static void sparse_solve(hamel_ws *w, const double *r, double *x);

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

#define HAMEL_ROOT_PATTERNS 16 /* sign patterns of the starting points */
#define HAMEL_ROOTS_MAX 8      /* distinct roots remembered */

int hamel_qdot_roots(hamel_ws *w, double t, const double *q, const double *u, double *roots, int max)
{
    int n = w->n, k = w->k, found = 0;
    if (n > 256)
        return 0;
    double scale = 1.0, g[256], qd[256], keep[HAMEL_ROOTS_MAX][256];
    for (int r = 0; r < k; r++)
        scale = fmax(scale, fabs(u[r]));
    int patterns = n < 4 ? 1 << n : HAMEL_ROOT_PATTERNS;
    /* starting points: a fixed direction at three scales and every sign pattern of its
     * first components, then each root found with one component's sign flipped */
    int fixed = 3 * patterns;
    for (int a = 0; a < fixed + HAMEL_ROOTS_MAX * (n + 1); a++) {
        if (a < fixed) {
            int p = a % patterns, s = a / patterns;
            for (int i = 0; i < n; i++) {
                double mag = scale * (s ? 0.3 * s : 1.0) * (0.5 + 0.37 * ((i * 7 + s * 3) % 5));
                g[i] = (i < 4 && ((p >> i) & 1)) ? -mag : mag;
            }
        } else {
            int b = (a - fixed) / (n + 1), i = (a - fixed) % (n + 1);
            if (b >= found || b >= HAMEL_ROOTS_MAX)
                break;
            memcpy(g, keep[b], n * sizeof *g);
            if (i < n)
                g[i] = -g[i];
            else
                for (int c = 0; c < n; c++)
                    g[c] = -g[c];
        }
        memcpy(w->guess, g, n * sizeof *g);
        if (newton_qdot(w, t, q, u, qd) < 0)
            continue;
        int known = 0;
        for (int b = 0; b < found && b < HAMEL_ROOTS_MAX && !known; b++) {
            double d = 0.0, mag = 1.0;
            for (int i = 0; i < n; i++) {
                d = fmax(d, fabs(qd[i] - keep[b][i]));
                mag = fmax(mag, fabs(qd[i]));
            }
            known = d <= 1e-7 * mag;
        }
        if (known)
            continue;
        if (found < HAMEL_ROOTS_MAX)
            memcpy(keep[found], qd, n * sizeof *qd);
        if (found < max)
            memcpy(roots + (size_t)found * n, qd, n * sizeof *qd);
        found++;
    }
    if (found)
        memcpy(w->guess, keep[0], n * sizeof *w->guess);
    return found;
}

/* Called for every output sample: on Psi's block structure when there is one (a
 * dense LU of Psi cost more than the integration between two samples at n = 40). */
int hamel_qdot(hamel_ws *w, double t, const double *q, const double *u, double *qd)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    if (m->nl_reduced)
        return newton_qdot(w, t, q, u, qd);
    if (m->sparse && !w->dense && !w->sel_on) {
        w->in[model_input_t(m)] = t;
        memcpy(w->in + model_input_q(m), q, n * sizeof *q);
        tape_run(m->tape_psi, w->in, w->work, w->psi);
        if (sparse_factor(w) < 0)
            return -1;
        const double *psit = w->psi + (size_t)n * n;
        for (int i = 0; i < n; i++)
            w->vec[i] = (i < k ? u[i] : 0.0) - psit[i];
        sparse_solve(w, w->vec, qd);
        return 0;
    }
    if (factor_psi(w, t, q) < 0)
        return -1;
    solve_qdot(w, u, qd);
    return 0;
}

int hamel_explain(hamel_ws *w, double t, const double *q, const double *u, char *why, size_t size)
{
    static const char *const psi_why =
        "Psi (the speeds and the linear constraints) is singular: the speeds do "
        "not determine q'";
    static const char *const nl_why = "no q' solves the speeds and the constraints (Newton's method)";
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k, rc = 0;
    size_t nm = (size_t)n * (n + 1) / 2, ndyn = nm + 2 * (size_t)n;
    double *qd = malloc(n * sizeof *qd);
    if (!qd)
        return 0;
    int got = m->nl_reduced ? newton_qdot(w, t, q, u, qd) : factor_psi(w, t, q);
    if (got < 0) {
        snprintf(why, size, "%s", m->nl_reduced ? nl_why : psi_why);
        rc = 1;
        goto done;
    }
    if (!m->nl_reduced)
        solve_qdot(w, u, qd);
    memcpy(w->in + model_input_qd(m), qd, n * sizeof *qd);
    tape_run(m->tape_dyn, w->in, w->work, w->dyn);
    for (size_t i = 0; i < ndyn && !rc; i++)
        rc = !isfinite(w->dyn[i]) ? (i < nm ? 1 : 2) : 0;
    if (rc) {
        snprintf(why, size,
                 "%s is not finite (a division by zero, an overflow or a function outside its domain in the "
                 "model's expressions)",
                 rc == 1 ? "the mass matrix of T" : "the forcing");
        rc = 1;
        goto done;
    }
    hamel_project(n, k, w->lu, w->piv, w->dyn, w->M, w->a, w->X, w->h, w->MX, w->F, w->Ms);
    for (int x = 0; x < k * k && !rc; x++)
        rc = !isfinite(w->Ms[x]) || (x < k && !isfinite(w->F[x]));
    if (rc) {
        snprintf(why, size, "M* (the mass matrix of the speeds) or its forcing is not finite (an overflow)");
        goto done;
    }
    /* Judged per speed against the size of the terms its M*_rr sums (Phi_S's column r
     * through M), so that masses of 1e6 and 1e-9 in one model are not "no inertia": a
     * speed whose M*_rr is only their rounding has none; otherwise M* scaled to a unit
     * diagonal must factor (a combination of the speeds without inertia). A negative
     * M*_rr (a negative mass: a warning of the run, warnings.c) is inertia here. */
    double *scale = k > 0 ? malloc((size_t)k * sizeof *scale) : NULL;
    int r0 = -1;
    for (int r = 0; r < k && r0 < 0; r++) {
        const double *x = w->X + (size_t)r * n;
        double mag = 0.0;
        for (int i = 0; i < n; i++)
            for (int l = 0; l < n; l++)
                mag += fabs(x[i]) * fabs(w->M[(size_t)i * n + l]) * fabs(x[l]);
        double d = fabs(w->Ms[r * k + r]);
        if (!(d > 1e-12 * mag) || !(d > 0.0))
            r0 = r;
        else if (scale)
            scale[r] = 1.0 / sqrt(d);
    }
    int combination = 0;
    if (r0 < 0 && k > 0) {
        for (int r = 0; r < k; r++)
            for (int s2 = 0; s2 < k; s2++)
                w->save[r * k + s2] = scale ? w->Ms[r * k + s2] * scale[r] * scale[s2] : w->Ms[r * k + s2];
        combination = linalg_lu(k, w->save, w->spiv) < 0;
    }
    free(scale);
    if (r0 >= 0) {
        snprintf(why, size,
                 "M* (the mass matrix of the speeds) is singular: the kinetic energy gives speed %s no "
                 "inertia",
                 m->speeds[r0]);
        rc = 2;
    } else if (combination) {
        snprintf(why, size,
                 "M* (the mass matrix of the speeds) is singular: the kinetic energy gives a "
                 "combination of the speeds no inertia");
        rc = 2;
    }
done:
    free(qd);
    return rc;
}

int hamel_speeds(hamel_ws *w, double t, const double *q, const double *qd, double *u)
{
    const struct engine_model *m = w->m;
    int n = w->n;
    w->in[model_input_t(m)] = t; /* Psi's values only: no factorization needed */
    memcpy(w->in + model_input_q(m), q, n * sizeof *q);
    tape_run(m->tape_psi, w->in, w->work, w->psi);
    for (int r = 0; r < w->k; r++) {
        double s = w->psi[(size_t)n * n + r];
        for (int i = 0; i < n; i++)
            s += w->psi[r * n + i] * qd[i];
        u[r] = s;
    }
    return 0;
}

/* Solves the symmetric c x c system A x = b in place in b (A overwritten), c <= k:
 * Cholesky (A is positive definite for a positive definite T), or LU on the copy kept
 * in w->save when rounding or an indefinite T defeats it. Allocates nothing. */
static int solve_spd(hamel_ws *w, int c, double *A, double *b)
{
    memcpy(w->save, A, (size_t)c * c * sizeof *w->save);
    if (linalg_chol(c, A) == 0) {
        linalg_chol_solve(c, A, b);
        return 0;
    }
    if (linalg_lu(c, w->save, w->spiv) < 0)
        return -1;
    linalg_lu_solve(c, w->save, w->spiv, b);
    return 0;
}

/* Solves Ms u' = F in place in F (Ms, full k x k, overwritten): solve_spd. */
static int solve_mass(hamel_ws *w, int k) { return solve_spd(w, k, w->Ms, w->F); }

/* M*^-1 (w->minv) kept as its nonzero entries row by row, and whether they are on its
 * diagonal only. Returns 0. */
static int minv_pattern(hamel_ws *w, int k)
{
    int nz = 0;
    for (int r = 0; r < k; r++) {
        w->minv_row[r] = nz;
        for (int c = 0; c < k; c++)
            if (w->minv[r * k + c] != 0.0) {
                w->minv_col[nz] = c;
                w->minv_val[nz++] = w->minv[r * k + c];
            }
    }
    w->minv_row[k] = nz;
    w->minv_diag = 1;
    for (int r = 0; r < k; r++)
        if (w->minv_row[r + 1] != w->minv_row[r] + 1 || w->minv_col[w->minv_row[r]] != r)
            w->minv_diag = 0;
    w->minv_ready = 1;
    return 0;
}

/* invert_constant_mass on M*'s components (fast_mass_components): each factored alone
 * and its columns solved within it, the entries between components 0. Bit for bit the
 * dense inverse: the dense Cholesky factor is +0 between components (solve_mass_components)
 * and so is every value of a substitution outside the component of its unit column, so
 * the sums within it only subtract +0 for the other terms. -1 when a component is not
 * positive definite (the dense path then decides, with its LU fallback). */
static int invert_mass_components(hamel_ws *w, int k, const double *ms)
{
    double *a = w->save, *b = w->tmp; /* [c*c] the component's factor, [c] a column (c <= k <= n) */
    memset(w->minv, 0, (size_t)k * k * sizeof *w->minv);
    for (int x = 0; x < w->fmc_n; x++) {
        const int *idx = w->fmc_idx + w->fmc_start[x];
        int c = w->fmc_start[x + 1] - w->fmc_start[x];
        for (int i = 0; i < c; i++)
            for (int j = 0; j < c; j++)
                a[i * c + j] = ms[idx[i] * k + idx[j]];
        if (linalg_chol(c, a) < 0)
            return -1;
        for (int col = 0; col < c; col++) {
            for (int i = 0; i < c; i++)
                b[i] = i == col;
            linalg_chol_solve(c, a, b);
            for (int i = 0; i < c; i++)
                w->minv[idx[i] * k + idx[col]] = b[i];
        }
    }
    return 0;
}

/* M*^-1 for a mass matrix that depends on the parameters only (tape_mass), at the
 * first evaluation: column by column as solve_mass solves, kept as its nonzero entries
 * row by row (a chain of bodies has a block-diagonal M*: its inverse is as sparse).
 * solve_mass's factorization (Cholesky, or its LU fallback) is the same for every
 * column, so it is made once: the same numbers (a chain of 40 disks, k = 120, spent 8 ms
 * of each run factoring M* 120 times); on M*'s components when it has several
 * (invert_mass_components). */
static int invert_constant_mass(hamel_ws *w, int k)
{
    double *ms = w->mconst;
    double *up = w->dyn; /* k(k+1)/2 <= n(n+1)/2 doubles of scratch */
    tape_run(w->m->tape_mass, w->in, w->work, up);
    for (int r = 0, idx = 0; r < k; r++)
        for (int s = r; s < k; s++, idx++)
            ms[r * k + s] = ms[s * k + r] = up[idx];
    if (w->fmc_n && invert_mass_components(w, k, ms) == 0)
        return minv_pattern(w, k);
    memcpy(w->Ms, ms, (size_t)k * k * sizeof *ms);
    memcpy(w->save, ms, (size_t)k * k * sizeof *ms);
    int chol = linalg_chol(k, w->Ms) == 0;
    if (!chol && linalg_lu(k, w->save, w->spiv) < 0)
        return -1;
    for (int c = 0; c < k; c++) {
        for (int r = 0; r < k; r++)
            w->F[r] = r == c;
        if (chol)
            linalg_chol_solve(k, w->Ms, w->F);
        else
            linalg_lu_solve(k, w->save, w->spiv, w->F);
        for (int r = 0; r < k; r++)
            w->minv[r * k + c] = w->F[r];
    }
    return minv_pattern(w, k);
}

/* Whether output o of tape t is the number +0 (not -0: the factorization below relies on
 * the zeros' sign). */
static int output_plus_zero(const tape *t, int o)
{
    const tape_ins *ins = &t->ins[t->outputs[o]];
    return ins->op == TAPE_CONST && ins->c == 0.0 && !signbit(ins->c);
}

/* The connected components of the pattern of M* (entries that are not the number +0)
 * in tape_fast, or in tape_mass when M* depends on the parameters only, into w->fmc_*: a
 * chain of bodies has one per body. Left at fmc_n = 0 when there is one component (or
 * no memory): the dense path. */
static void fast_mass_components(hamel_ws *w)
{
    const struct engine_model *m = w->m;
    int k = w->k, nc = 0;
    if (!m->tape_fast || (m->fast_mass_const && !m->tape_mass) || k < 2)
        return;
    const tape *t = m->fast_mass_const ? m->tape_mass : m->tape_fast;
    int first = m->fast_mass_const ? 0 : w->n; /* M*'s packed upper triangle in t's outputs */
    /* parent: union-find over the speeds; comp: each speed's component; fill: the next
     * place in each component's list */
    int *parent = calloc(k, sizeof *parent), *comp = calloc(k, sizeof *comp), *fill = calloc(k, sizeof *fill);
    int *start = calloc(k + 1, sizeof *start), *idx = calloc(k, sizeof *idx);
    if (!parent || !comp || !fill || !start || !idx)
        goto done;
    for (int r = 0; r < k; r++)
        parent[r] = r;
    for (int r = 0, o = first; r < k; r++)
        for (int c = r; c < k; c++, o++)
            if (c != r && !output_plus_zero(t, o))
                parent[sparse_find_root(parent, c)] = sparse_find_root(parent, r);
    /* components numbered by their first speed, each listing its speeds increasing */
    for (int r = 0; r < k; r++)
        fill[r] = -1; /* by root: its component's number */
    for (int r = 0; r < k; r++) {
        int root = sparse_find_root(parent, r);
        if (fill[root] < 0)
            fill[root] = nc++;
        comp[r] = fill[root];
        start[comp[r] + 1]++;
    }
    if (nc < 2)
        goto done;
    for (int c = 0; c < nc; c++) {
        start[c + 1] += start[c];
        fill[c] = start[c];
    }
    for (int r = 0; r < k; r++)
        idx[fill[comp[r]]++] = r;
    w->fmc_n = nc;
    w->fmc_start = start;
    w->fmc_idx = idx;
    start = idx = NULL;
done:
    free(parent);
    free(comp);
    free(fill);
    free(start);
    free(idx);
}

/* solve_mass for tape_fast's M* (in w->Ms, full, with F in w->F) on its components: each
 * factored alone (Cholesky; the speeds of one component in their order), its factor
 * written into the lower triangle of Ms, then the dense substitutions. Bit for bit what
 * solve_mass computes: the dense Cholesky's entries between two components are +0 (their
 * entries of M* are +0 and so is every product that reaches them), so the sums within a
 * component only subtract +0 for the other terms, which changes no value, and a
 * component's pivots are the same numbers. At n = 200, a chain of 40 disks (k = 120,
 * 40 components of 3), the dense factorization was most of a first-tier evaluation.
 * When a component is not positive definite, M* is filled in again from the tape's
 * outputs up (packed upper triangle) and solve_mass does it all (its LU fallback). */
static int solve_mass_components(hamel_ws *w, int k, const double *up)
{
    double *a = w->save; /* [c*c] the component's factor (k*k doubles) */
    for (int x = 0; x < w->fmc_n; x++) {
        const int *idx = w->fmc_idx + w->fmc_start[x];
        int c = w->fmc_start[x + 1] - w->fmc_start[x];
        for (int i = 0; i < c; i++)
            for (int j = 0; j < c; j++)
                a[i * c + j] = w->Ms[idx[i] * k + idx[j]];
        if (linalg_chol(c, a) < 0) {
            for (int r = 0, o = 0; r < k; r++)
                for (int s = r; s < k; s++, o++)
                    w->Ms[r * k + s] = w->Ms[s * k + r] = up[o];
            return solve_mass(w, k);
        }
        for (int i = 0; i < c; i++)
            for (int j = 0; j <= i; j++)
                w->Ms[idx[i] * k + idx[j]] = a[i * c + j];
    }
    linalg_chol_solve(k, w->Ms, w->F);
    return 0;
}

/* tape_fast's inputs t, q and u from the state. */
static void fast_inputs(hamel_ws *w, double t, const double *y)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    double *in = w->in;
    in[model_input_t(m)] = t;
    for (int i = 0; i < n; i++)
        in[model_input_q(m) + i] = y[i];
    for (int r = 0; r < k; r++)
        in[m->u_slot[r]] = y[n + r];
}

/* The symbolically reduced equations: one tape gives q', F and (unless it is
 * constant) M*. */
static int rhs_fast(hamel_ws *w, double t, const double *y, double *dydt)
{
    const struct engine_model *m = w->m;
    int n = w->n, k = w->k;
    if (w->native && w->native->rhs) {
        w->native->rhs(t, y, dydt);
        return GSL_SUCCESS;
    }
    if (w->native && w->native->solve) {
        int fail = 0; /* a pivot Cholesky refuses: the path below, with its LU */
        w->native->solve(t, y, dydt, &fail);
        if (!fail)
            return GSL_SUCCESS;
    }
    double *in = w->in;
    /* the first tier's entry that reads t and y itself (tape.h), when published */
    tape_yfn yf = atomic_load_explicit(&((tape *)m->tape_fast)->yfn, memory_order_acquire);
    if (!yf)
        fast_inputs(w, t, y);
    if (m->fast_mass_const) {
        if (!w->minv_ready && invert_constant_mass(w, k) < 0)
            return GSL_EBADFUNC;
        if (yf)
            yf(t, y, in, dydt); /* q' straight into dydt */
        else
            tape_run(m->tape_fast, in, w->work, dydt);
        if (w->minv_diag) { /* the sum below with its one term: 0.0 + v F, in place */
            for (int r = 0; r < k; r++)
                dydt[n + r] = 0.0 + w->minv_val[r] * dydt[n + r];
            return GSL_SUCCESS;
        }
        const double *F = dydt + n;
        double *ud = w->F;
        for (int r = 0; r < k; r++) {
            double s = 0.0;
            for (int j = w->minv_row[r]; j < w->minv_row[r + 1]; j++)
                s += w->minv_val[j] * F[w->minv_col[j]];
            ud[r] = s;
        }
        memcpy(dydt + n, ud, k * sizeof *ud);
        return GSL_SUCCESS;
    }
    if (w->native) {
        if (yf) /* native's f reads in[] */
            fast_inputs(w, t, y);
        w->native->fast(in, w->fast);
    } else if (yf) {
        yf(t, y, in, w->fast);
    } else {
        tape_run(m->tape_fast, in, w->work, w->fast);
    }
    for (int i = 0; i < n; i++)
        dydt[i] = w->fast[i];
    const double *up = w->fast + n, *F = up + k * (k + 1) / 2;
    for (int r = 0, idx = 0; r < k; r++)
        for (int s = r; s < k; s++, idx++)
            w->Ms[r * k + s] = w->Ms[s * k + r] = up[idx];
    for (int r = 0; r < k; r++)
        w->F[r] = F[r];
    if ((w->fmc_n ? solve_mass_components(w, k, up) : solve_mass(w, k)) < 0)
        return GSL_EBADFUNC;
    for (int r = 0; r < k; r++)
        dydt[n + r] = w->F[r];
    return GSL_SUCCESS;
}

/* Factors Psi's diagonal blocks (w->psi holds Psi). Returns 0 or -1 (singular). */
static int sparse_factor(hamel_ws *w)
{
    const struct hamel_sparse *sp = w->m->sparse;
    int n = w->n;
    for (int b = 0; b < sp->nblocks; b++) {
        int p0 = sp->start[b], size = sp->start[b + 1] - p0;
        double *a = w->blu + sp->lu_off[b];
        for (int x = 0; x < size; x++)
            for (int y = 0; y < size; y++)
                a[x * size + y] = w->psi[(size_t)sp->row[p0 + x] * n + sp->col[p0 + y]];
        if (size == 1) {
            if (a[0] == 0.0 || !isfinite(a[0]))
                return -1;
            a[0] = 1.0 / a[0]; /* kept as its reciprocal */
        } else if (linalg_lu(size, a, w->bpiv + p0) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Solves Psi's block b into x (the rhs of its rows in r). */
static inline void solve_block(hamel_ws *w, const struct hamel_sparse *sp, int b, const double *r, double *x)
{
    int n = w->n, p0 = sp->start[b], size = sp->start[b + 1] - p0;
    const double *a = w->blu + sp->lu_off[b];
    if (size == 1) {
        int i = sp->row[p0];
        double v = r[i];
        const double *pi = w->psi + (size_t)i * n;
        for (int q = sp->off_ptr[p0]; q < sp->off_ptr[p0 + 1]; q++)
            v -= pi[sp->off_col[q]] * x[sp->off_col[q]];
        x[sp->col[p0]] = v * a[0];
        return;
    }
    for (int p = p0; p < p0 + size; p++) {
        int i = sp->row[p];
        double v = r[i];
        const double *pi = w->psi + (size_t)i * n;
        for (int q = sp->off_ptr[p]; q < sp->off_ptr[p + 1]; q++)
            v -= pi[sp->off_col[q]] * x[sp->off_col[q]];
        w->tmp[p - p0] = v;
    }
    linalg_lu_solve(size, a, w->bpiv + p0, w->tmp);
    for (int p = p0; p < p0 + size; p++)
        x[sp->col[p]] = w->tmp[p - p0];
}

/* x = Psi^-1 r (r by row, x by column; they may not alias): block by block, each
 * block's rows minus what the earlier blocks' columns contribute. */
static void sparse_solve(hamel_ws *w, const double *r, double *x)
{
    const struct hamel_sparse *sp = w->m->sparse;
    for (int b = 0; b < sp->nblocks; b++)
        solve_block(w, sp, b, r, x);
}

/* x = Psi^-1 e_r = column r of Phi, visiting only the blocks it can be nonzero in
 * (x is zeroed first). */
static void sparse_column(hamel_ws *w, int r, double *x)
{
    const struct hamel_sparse *sp = w->m->sparse;
    memset(x, 0, w->n * sizeof *x);
    memset(w->vec, 0, w->n * sizeof *w->vec);
    w->vec[r] = 1.0;
    for (int j = sp->reach_ptr[r]; j < sp->reach_ptr[r + 1]; j++)
        solve_block(w, sp, sp->reach[j], w->vec, x);
}

/* The numeric right-hand side on Psi's block structure and M's pattern: one
 * factorization of Psi's diagonal blocks, k + 2 block substitutions, and the
 * projections Phi_S^T M Phi_S and Phi_S^T h through the nonzeros only. */
static int rhs_sparse(hamel_ws *w, double t, const double *y, double *dydt)
{
    const struct engine_model *m = w->m;
    const struct hamel_sparse *sp = m->sparse;
    int n = w->n, k = w->k;
    const double *q = y, *u = y + n;
    double *qd = dydt, *ud = dydt + n;
    w->in[model_input_t(m)] = t;
    memcpy(w->in + model_input_q(m), q, n * sizeof *q);
    tape_run(m->tape_psi, w->in, w->work, w->psi);
    if (sparse_factor(w) < 0)
        return GSL_EBADFUNC;
    const double *psit = w->psi + (size_t)n * n;
    for (int i = 0; i < n; i++)
        w->vec[i] = (i < k ? u[i] : 0.0) - psit[i];
    sparse_solve(w, w->vec, qd);
    memcpy(w->in + model_input_qd(m), qd, n * sizeof *qd);
    tape_run(m->tape_dyn, w->in, w->work, w->dyn);
    const double *up = w->dyn, *g = w->dyn + n * (n + 1) / 2, *b = g + n;
    sparse_solve(w, b, w->a);
    /* h = g + M a */
    for (int i = 0; i < n; i++) {
        double v = g[i];
        for (int j = sp->m_ptr[i]; j < sp->m_ptr[i + 1]; j++)
            v += up[sp->m_at[j]] * w->a[sp->m_col[j]];
        w->h[i] = v;
    }
    /* columns of Phi_S, their nonzeros, M Phi_S; F and M* */
    for (int r = 0; r < k; r++) {
        double *x = w->X + (size_t)r * n, *mx = w->MX + (size_t)r * n;
        sparse_column(w, r, x);
        const int *nzr = sp->xs_idx + sp->xs_ptr[r];
        int cnt = sp->xs_ptr[r + 1] - sp->xs_ptr[r];
        for (int c = sp->mxs_ptr[r]; c < sp->mxs_ptr[r + 1]; c++)
            mx[sp->mxs_idx[c]] = 0.0;
        double f = 0.0;
        for (int c = 0; c < cnt; c++) {
            int l = nzr[c];
            double xl = x[l];
            f += xl * w->h[l];
            for (int j = sp->m_ptr[l]; j < sp->m_ptr[l + 1]; j++)
                mx[sp->m_col[j]] += up[sp->m_at[j]] * xl;
        }
        w->F[r] = f;
    }
    /* M* where it can be nonzero, then one dense solve per connected component */
    for (int e = 0; e < sp->nms; e++) {
        int r = sp->ms_r[e], s2 = sp->ms_s[e];
        const double *x = w->X + (size_t)r * n, *ms = w->MX + (size_t)s2 * n;
        const int *nzr = sp->xs_idx + sp->xs_ptr[r];
        double v = 0.0;
        for (int c = 0; c < sp->xs_ptr[r + 1] - sp->xs_ptr[r]; c++)
            v += x[nzr[c]] * ms[nzr[c]];
        w->Mfull[r * k + s2] = w->Mfull[s2 * k + r] = v;
    }
    for (int cpt = 0; cpt < sp->nmc; cpt++) {
        const int *idx = sp->mc_idx + sp->mc_start[cpt];
        int c = sp->mc_start[cpt + 1] - sp->mc_start[cpt];
        for (int a = 0; a < c; a++) {
            for (int b2 = 0; b2 < c; b2++)
                w->Ms[a * c + b2] = w->Mfull[idx[a] * k + idx[b2]];
            w->tmp[a] = w->F[idx[a]];
        }
        if (solve_spd(w, c, w->Ms, w->tmp) < 0)
            return GSL_EBADFUNC;
        for (int a = 0; a < c; a++)
            ud[idx[a]] = w->tmp[a];
    }
    return GSL_SUCCESS;
}

void hamel_project(int n, int k, const double *lu, const int *piv, const double *dyn, double *M, double *a,
                   double *X, double *h, double *MX, double *F, double *Ms)
{
    const double *up = dyn, *g = dyn + n * (n + 1) / 2, *b = g + n;
    for (int i = 0, idx = 0; i < n; i++)
        for (int l = i; l < n; l++, idx++)
            M[i * n + l] = M[l * n + i] = up[idx];
    /* a = Phi b; columns of Phi_S. */
    memcpy(a, b, n * sizeof *b);
    linalg_lu_solve(n, lu, piv, a);
    for (int r = 0; r < k; r++) {
        double *x = X + (size_t)r * n;
        memset(x, 0, n * sizeof *x);
        x[r] = 1.0;
        linalg_lu_solve(n, lu, piv, x);
    }
    /* h = g + M a; MX = M Phi_S. */
    for (int i = 0; i < n; i++) {
        double s = g[i];
        const double *Mi = M + (size_t)i * n;
        for (int l = 0; l < n; l++)
            s += Mi[l] * a[l];
        h[i] = s;
        for (int r = 0; r < k; r++) {
            const double *x = X + (size_t)r * n;
            double v = 0.0;
            for (int l = 0; l < n; l++)
                v += Mi[l] * x[l];
            MX[(size_t)r * n + i] = v;
        }
    }
    for (int r = 0; r < k; r++) {
        const double *x = X + (size_t)r * n;
        double f = 0.0;
        for (int i = 0; i < n; i++)
            f += x[i] * h[i];
        F[r] = f;
        for (int s = 0; s <= r; s++) {
            const double *mx = MX + (size_t)s * n;
            double v = 0.0;
            for (int i = 0; i < n; i++)
                v += x[i] * mx[i];
            Ms[r * k + s] = Ms[s * k + r] = v;
        }
    }
}

int hamel_rhs(double t, const double *y, double *dydt, void *params)
{
    hamel_ws *w = params;
    if (w->m->tape_fast && !w->numeric && !w->sel_on)
        return rhs_fast(w, t, y, dydt);
    /* the sparse path knows neither re-chosen speeds (the watch) nor the nonlinear
     * constraints' Newton solve: those take the dense one */
    if (w->m->sparse && !w->dense && !w->sel_on && !w->m->nl_reduced)
        return rhs_sparse(w, t, y, dydt);
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
    hamel_project(n, k, w->lu, w->piv, w->dyn, w->M, w->a, w->X, w->h, w->MX, w->F, w->Ms);
    if (solve_mass(w, k) < 0)
        return GSL_EBADFUNC;
    memcpy(ud, w->F, k * sizeof *ud);
    return GSL_SUCCESS;
}

int hamel_mass_semidefinite(hamel_ws *w, double t, const double *q, const double *qd)
{
    const struct engine_model *m = w->m;
    int n = w->n;
    w->in[model_input_t(m)] = t;
    memcpy(w->in + model_input_q(m), q, n * sizeof *q);
    memcpy(w->in + model_input_qd(m), qd, n * sizeof *qd);
    tape_run(m->tape_dyn, w->in, w->work, w->dyn);
    double *M = w->M, big = 0.0;
    for (int i = 0, idx = 0; i < n; i++)
        for (int l = i; l < n; l++, idx++) {
            M[i * n + l] = M[l * n + i] = w->dyn[idx];
            if (!isfinite(w->dyn[idx]))
                return -1;
        }
    for (int i = 0; i < n; i++)
        big = fmax(big, fabs(M[i * n + i]));
    if (!(big > 0))
        return 1; /* no inertia at all: nothing negative */
    /* semi-definite: Cholesky of M + eps I succeeds (a zero eigenvalue passes, a
     * negative one past eps fails) */
    for (int i = 0; i < n; i++)
        M[i * n + i] += 1e-9 * big;
    const struct hamel_sparse *sp = m->sparse;
    if (!sp || sp->nmq < 2)
        return linalg_chol(n, M) == 0 ? 1 : 0;
    /* on M's components (a chain of bodies: one per body), each alone: the same pivots
     * as the dense factorization, whose entries between components are zeros that change
     * no pivot (n = 200: 1.3 million operations a run were a fifth of a 40-disk chain's) */
    for (int x = 0; x < sp->nmq; x++) {
        const int *idx = sp->mq_idx + sp->mq_start[x];
        int c = sp->mq_start[x + 1] - sp->mq_start[x];
        for (int i = 0; i < c; i++)
            for (int j = 0; j < c; j++)
                w->A[i * c + j] = M[idx[i] * n + idx[j]];
        if (linalg_chol(c, w->A) < 0)
            return 0;
    }
    return 1;
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

/* Fills Phi (all columns) and Phi_t after factor_psi; evaluates the dPsi tape. -1 when
 * out of memory. */
static int inverse_and_derivatives(hamel_ws *w)
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
    if (w->dpsi_n < model_dpsi_count(w->m)) { /* a workspace made before the model's dPsi */
        double *c = realloc(w->dpsi_c, ((size_t)model_dpsi_count(w->m) + 1) * sizeof *c);
        if (!c)
            return -1;
        w->dpsi_c = c;
        w->dpsi_n = model_dpsi_count(w->m);
    }
    model_run_dpsi(w->m, w->in, w->work, w->dpsi_c, w->dpsi);
    return 0;
}

#define PHI(i, l) w->Phi[(size_t)(l)*n + (i)]
#define DPSI(j, i, k) w->dpsi[((size_t)(j)*n + (i)) * n + (k)]
#define DPSI_T(j, i) w->dpsi[(size_t)n * n * n + (size_t)(j)*n + (i)]
#define DPSIT_Q(j, i) w->dpsi[(size_t)n * n * n + (size_t)n * n + (size_t)(j)*n + (i)]
#define DPSI_ERR(j, i, k) w->dpsi_err[((size_t)(j)*n + (i)) * n + (k)]
#define DPSI_T_ERR(j, i) w->dpsi_err[(size_t)n * n * n + (size_t)(j)*n + (i)]
#define DPSIT_Q_ERR(j, i) w->dpsi_err[(size_t)n * n * n + (size_t)n * n + (size_t)(j)*n + (i)]
/* The weight of a running error bound (in units of u) beside the values' magnitudes in
 * gamma's rounding scales: the zero test's 1e-9 then puts an entry made of rounding
 * noise about 4,500 times under its own error bound (1e-12 / 2^-53). */
#define ERR_WEIGHT 1e-3

/* The entries of row j of Psi that take part in gamma^j (gamma_row): the pairs (i, k)
 * where dPsi_ji/dq_k or dPsi_jk/dq_i is nonzero, increasing (ent_i, ent_k; the
 * difference in A, the magnitude in ent_mag), counted in *ne, and the rows i they or
 * the time derivatives touch (rows, *nr). Only the pairs the model's dPsi can make
 * nonzero are visited (model.h: dpsi_pair; elsewhere both are the zeros never
 * written): the same entries in the same order as a scan of all n^2, which at n = 200
 * was a tenth of the compile. */
static void gamma_entries(hamel_ws *w, int j, int *ne_out, int *nr_out)
{
    int n = w->n, ne = 0, nr = 0;
    double *val = w->A, *amag = w->ent_mag;
    int *ei = w->ent_i, *ek = w->ent_k, *rows = w->rows;
    unsigned char *in_rows = w->in_rows;
    const struct engine_model *m = w->m;
    int all = !m->dpsi_pair_ptr, x0 = all ? 0 : m->dpsi_pair_ptr[j];
    int x1 = all ? n * n : m->dpsi_pair_ptr[j + 1];
    memset(in_rows, 0, n);
    for (int x = x0; x < x1; x++) {
        int ik = all ? x : m->dpsi_pair[x], i = ik / n, k = ik % n;
        double d1 = DPSI(j, i, k), d2 = DPSI(j, k, i);
        if (d1 == 0.0 && d2 == 0.0)
            continue;
        ei[ne] = i;
        ek[ne] = k;
        val[ne] = d1 - d2;
        amag[ne++] =
            fabs(d1) + fabs(d2) + (w->dpsi_err ? ERR_WEIGHT * (DPSI_ERR(j, i, k) + DPSI_ERR(j, k, i)) : 0.0);
        in_rows[i] = 1;
    }
    for (int i = 0; i < n; i++) {
        if (DPSI_T(j, i) != 0.0 || DPSIT_Q(j, i) != 0.0)
            in_rows[i] = 1;
        if (in_rows[i])
            rows[nr++] = i;
    }
    *ne_out = ne;
    *nr_out = nr;
}

/* gamma_row's rows of W cleared and its inner terms started (pass 0: the values of
 * dPsi_t/dq - dPsi/dt; pass 1: their magnitudes with their error bounds). */
static void gamma_row_start(hamel_ws *w, int j, int nr, int pass)
{
    int n = w->n;
    for (int x = 0; x < nr; x++) {
        int i = w->rows[x];
        memset(w->W + (size_t)i * n, 0, n * sizeof *w->W);
        w->inner[i] = pass ? fabs(DPSI_T(j, i)) + fabs(DPSIT_Q(j, i)) : DPSI_T(j, i) - DPSIT_Q(j, i);
        if (pass && w->dpsi_err)
            w->inner[i] += ERR_WEIGHT * (DPSI_T_ERR(j, i) + DPSIT_Q_ERR(j, i));
    }
}

/* gamma^j_rl and gamma^j_r of one j (all r, l: gamma[r*n + l], gamma_t[r]); mags
 * (optional) receive the rounding scales: the sums of the terms' magnitudes, with |Phi|
 * and |Phi_t| from phi_mag and phit_mag when given (rounding_scales), else the entries'
 * own absolute values. Only the entries of gamma_entries take part
 * (a row of Psi depends on few coordinates): O(n^2) per row of Psi rather than O(n^3). */
static void gamma_row(hamel_ws *w, int j, double *gamma, double *gamma_t, double *mag, double *mag_t,
                      unsigned char *used, const double *phi_mag, const double *phit_mag)
{
    int n = w->n, ne, nr;
    const double *pm = phi_mag ? phi_mag : w->Phi, *ptm = phit_mag ? phit_mag : w->phit;
    double *val = w->A, *amag = w->ent_mag, *inner = w->inner;
    int *ei = w->ent_i, *ek = w->ent_k, *rows = w->rows;
    if (gamma && !used)
        memset(gamma, 0, (size_t)n * n * sizeof *gamma);
    if (mag && !used)
        memset(mag, 0, (size_t)n * n * sizeof *mag);
    gamma_entries(w, j, &ne, &nr);
    for (int pass = 0; pass < (mag ? 2 : 1); pass++) {
        double *out = pass ? mag : gamma, *out_t = pass ? mag_t : gamma_t;
        gamma_row_start(w, j, nr, pass);
        for (int e = 0; e < ne; e++) {
            int i = ei[e], k = ek[e];
            double a = pass ? amag[e] : val[e];
            double *Wi = w->W + (size_t)i * n;
            for (int l = 0; l < n; l++)
                Wi[l] += a * (pass ? fabs(pm[(size_t)l * n + k]) : PHI(k, l));
            inner[i] += a * (pass ? fabs(ptm[k]) : w->phit[k]);
        }
        /* a column r of Phi that is zero on every row taking part gives +0 throughout
         * (0.0 plus products that are +-0 when W and inner are finite): the zeros
         * are written, not summed (Phi of a chain of bodies is block-diagonal: most r) */
        int finite = 1;
        for (int x = 0; x < nr && finite; x++) {
            int i = rows[x];
            finite = isfinite(inner[i]) != 0;
            for (int l = 0; l < n && finite; l++)
                finite = isfinite(w->W[(size_t)i * n + l]) != 0;
        }
        for (int r = 0; r < n; r++) {
            int zero = finite;
            for (int x = 0; x < nr && zero; x++)
                zero = PHI(rows[x], r) == 0.0;
            if (used && !pass)
                used[r] = !zero;
            if (zero) { /* out was cleared above (with used: left, unless gamma's row is) */
                if (out_t)
                    out_t[r] = 0.0;
                if (used && used[r] && out)
                    memset(out + (size_t)r * n, 0, n * sizeof *out);
                continue;
            }
            if (out)
                for (int l = 0; l < n; l++) {
                    double v = 0.0;
                    for (int x = 0; x < nr; x++) {
                        int i = rows[x];
                        v += (pass ? fabs(pm[(size_t)r * n + i]) : PHI(i, r)) * w->W[(size_t)i * n + l];
                    }
                    out[(size_t)r * n + l] = v;
                }
            if (out_t) {
                double v = 0.0;
                for (int x = 0; x < nr; x++) {
                    int i = rows[x];
                    v += (pass ? fabs(pm[(size_t)r * n + i]) : PHI(i, r)) * inner[i];
                }
                out_t[r] = v;
            }
        }
    }
}

/* gamma and gamma_t for all j, r, l (gamma_row, j by j; mags as there). */
static void gamma_all(hamel_ws *w, double *gamma, double *gamma_t, double *mag, double *mag_t)
{
    size_t n = (size_t)w->n;
    for (int j = 0; j < w->n; j++)
        gamma_row(w, j, gamma ? gamma + j * n * n : NULL, gamma_t ? gamma_t + j * n : NULL,
                  mag ? mag + j * n * n : NULL, mag_t ? mag_t + j * n : NULL, NULL, NULL, NULL);
}

int hamel_gamma(hamel_ws *w, double t, const double *q, double *gamma, double *gamma_t)
{
    if (factor_psi(w, t, q) < 0 || inverse_and_derivatives(w) < 0)
        return -1;
    gamma_all(w, gamma, gamma_t, NULL, NULL);
    return 0;
}

/* rounding_scales: |Phi| and |Phi_t| raised by 1e-3 times the first-order bound of their own rounding,
 * into phi_mag [n*n] (column-major as Phi) and phit_mag [n], for gamma_all's rounding
 * scales. The LU solve gives Phi of Psi + dPsi with |dPsi| <= c eps P^T |L| |U|
 * (backward error), so |dPhi| <= c eps |Phi| B |Phi| and |dPhi_t| <= c eps |Phi| (B
 * |Phi_t| + |Psi_t|), B = P^T |L| |U|; with w->psi_err (hamel_structure) Psi's and
 * Psi_t's own evaluation error bounds are added to B and |Psi_t| (a perturbation of the
 * same kind). An entry of Phi that is zero in exact arithmetic
 * comes out as a few eps where the pivoting mixed rows (the roller racer's Phi: 1e-17),
 * and a coefficient made of such entries only is that noise, not a coefficient: its
 * scale with these is about 1e13 times it, so the 1e-9 test puts it about 4,500 eps
 * under its own error bound, where the sum of the terms' magnitudes alone was the noise
 * itself. scratch holds 2 n^2 + n doubles. The products skip zeros (Psi and Phi of a
 * chain of bodies are mostly zero). */
static void rounding_scales(hamel_ws *w, double *scratch, double *phi_mag, double *phit_mag)
{
    int n = w->n;
    size_t n2 = (size_t)n * n;
    double *B = scratch, *tmp = scratch + n2, *tmp_t = tmp + n2;
    const double *lu = w->lu, *psit = w->psi + n2, *phi = w->Phi, *phit = w->phit;
    /* B = |L| |U| (L unit lower, U upper, both in lu), then its rows swapped back */
    memset(B, 0, n2 * sizeof *B);
    for (int i = 0; i < n; i++)
        for (int k = 0; k <= i; k++) {
            double a = k == i ? 1.0 : fabs(lu[(size_t)i * n + k]);
            if (a == 0.0)
                continue;
            for (int j = k; j < n; j++)
                B[(size_t)i * n + j] += a * fabs(lu[(size_t)k * n + j]);
        }
    for (int k = n - 1; k >= 0; k--)
        if (w->piv[k] != k)
            for (int j = 0; j < n; j++) {
                double t = B[(size_t)k * n + j];
                B[(size_t)k * n + j] = B[(size_t)w->piv[k] * n + j];
                B[(size_t)w->piv[k] * n + j] = t;
            }
    /* Psi's own evaluation error is a perturbation of Psi like the LU's */
    if (w->psi_err)
        for (size_t x = 0; x < n2; x++)
            B[x] += w->psi_err[x];
    /* tmp = B |Phi| (row-major i, l), tmp_t = B |Phi_t| + |Psi_t| */
    memset(tmp, 0, n2 * sizeof *tmp);
    for (int i = 0; i < n; i++) {
        tmp_t[i] = fabs(psit[i]) + (w->psi_err ? w->psi_err[n2 + i] : 0.0);
        for (int k = 0; k < n; k++) {
            double b = B[(size_t)i * n + k];
            if (b == 0.0)
                continue;
            tmp_t[i] += b * fabs(phit[k]);
            for (int l = 0; l < n; l++)
                tmp[(size_t)i * n + l] += b * fabs(phi[(size_t)l * n + k]);
        }
    }
    /* phi_mag = |Phi| + 1e-3 |Phi| tmp, phit_mag = |Phi_t| + 1e-3 |Phi| tmp_t */
    for (size_t x = 0; x < n2; x++)
        phi_mag[x] = fabs(phi[x]);
    for (int k = 0; k < n; k++) {
        phit_mag[k] = fabs(phit[k]);
        for (int i = 0; i < n; i++) {
            double a = 1e-3 * fabs(phi[(size_t)i * n + k]);
            if (a == 0.0)
                continue;
            phit_mag[k] += a * tmp_t[i];
            for (int l = 0; l < n; l++)
                phi_mag[(size_t)l * n + k] += a * tmp[(size_t)i * n + l];
        }
    }
}

/* The running error bounds of Psi, Psi_t and dPsi at the point in w->in (tape_eval_err),
 * into e->psi [n^2 + n] and e->dpsi (laid out as w->dpsi: only the entries the model's
 * dPsi writes are written), for rounding_scales and gamma_entries. */
struct psi_errors {
    double *psi, *dpsi, *dpsi_c, *work;
};

static int psi_errors_new(struct psi_errors *e, const struct engine_model *m)
{
    size_t n = (size_t)m->n, len = (size_t)m->tape_psi->n_ins;
    if (m->tape_dpsi && (size_t)m->tape_dpsi->n_ins > len)
        len = (size_t)m->tape_dpsi->n_ins;
    e->psi = calloc(n * n + n, sizeof *e->psi);
    e->dpsi = calloc(n * n * n + 2 * n * n, sizeof *e->dpsi); /* its untouched pages stay unmapped */
    e->dpsi_c = calloc((size_t)model_dpsi_count(m) + 1, sizeof *e->dpsi_c);
    e->work = calloc(2 * len, sizeof *e->work);
    return e->psi && e->dpsi && e->dpsi_c && e->work ? 0 : -1;
}

static void psi_errors_free(struct psi_errors *e)
{
    free(e->psi);
    free(e->dpsi);
    free(e->dpsi_c);
    free(e->work);
}

static void psi_errors_at(struct psi_errors *e, const struct engine_model *m, const double *in)
{
    size_t len = (size_t)m->tape_psi->n_ins;
    if (m->tape_dpsi && (size_t)m->tape_dpsi->n_ins > len)
        len = (size_t)m->tape_dpsi->n_ins;
    tape_eval_err(m->tape_psi, in, e->work, e->work + len, NULL, e->psi);
    if (!m->tape_dpsi)
        return;
    tape_eval_err(m->tape_dpsi, in, e->work, e->work + len, NULL, e->dpsi_c);
    for (int o = 0; o < m->tape_dpsi->n_outputs; o++)
        e->dpsi[m->dpsi_at[o]] = e->dpsi_c[o];
}

/* A parameter's value at the structure's generic test point: in [0.35, 1.35) as the
 * zero test's symbols (expr.h), whatever the model's value (0, or 1e-9, where a
 * coefficient e is below the test's resolution). Deterministic. */
static double hamel_generic_param(int i)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 101);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    return 0.35 + (double)(x >> 11) / 9007199254740992.0;
}

/* A coefficient is zero at a test point when it is within this of its rounding scale
 * (rounding_scales: rounding noise is about 1e-13 of it); it was 1e-9, and a genuine
 * coefficient 1e-9 of its terms (z' - (1 + 1e-9)*y*x' - x*y', not integrable) was left out. */
#define GAMMA_ZERO_TOL 1e-11

/* Whether a coefficient v with rounding scale `scale` is not zero at a test point: at
 * the model's parameter values a value or scale that is not finite proves nothing, so
 * the coefficient is kept; at the generic ones it adds nothing. */
static int structure_nonzero(double v, double scale, int generic)
{
    if (generic)
        return fabs(v) > GAMMA_ZERO_TOL * scale && isfinite(scale) && isfinite(v);
    return !(fabs(v) <= GAMMA_ZERO_TOL * scale) || !isfinite(scale);
}

int hamel_structure(struct engine_model *m)
{
    if (!m->sparse)
        m->sparse = hamel_sparse_new(m); /* NULL: the dense path (no structure found, or no memory) */
    int n = m->n;
    size_t n3 = (size_t)n * n * n, n2 = (size_t)n * n;
    m->gamma_nz = calloc(n3, 1);
    m->gamma_t_nz = calloc(n2, 1);
    double *params = calloc(m->np + 1, sizeof *params), *in = calloc(m->n_in, sizeof *in);
    /* one j at a time (gamma_row): n^2 doubles of gamma^j and its scales, not n^3 (at
     * n = 200 the two n^3 arrays were 128 MB of the compile's 230) */
    double *g = calloc(n2, sizeof *g), *gm = calloc(n2, sizeof *gm);
    double *gt = calloc(n, sizeof *gt), *gtm = calloc(n, sizeof *gtm);
    unsigned char *used = calloc(n, 1);
    double *scratch = calloc(3 * n2 + 2 * (size_t)n, sizeof *scratch), *phi_mag = NULL, *phit_mag = NULL;
    struct psi_errors err = {0};
    hamel_ws *w = NULL;
    int rc = -1;
    if (!m->gamma_nz || !m->gamma_t_nz || !params || !in || !g || !gm || !gt || !gtm || !used || !scratch ||
        psi_errors_new(&err, m) < 0)
        goto done;
    phi_mag = scratch + 2 * n2 + n; /* rounding_scales' outputs after its 2 n^2 + n of work */
    phit_mag = phi_mag + n2;
    if (m->np)
        memcpy(params, m->param_values, m->np * sizeof *params);
    w = hamel_ws_new(m, params);
    if (!w)
        goto done;
    w->psi_err = err.psi;
    w->dpsi_err = err.dpsi;
    /* three test points at the model's parameter values (GAMMA_NZ_MODEL), then, for a
     * model with parameters, one at other values of them (GAMMA_NZ_PARAMS): a
     * coefficient such as -e of z' - (1 + e)*y*x' - x*y' is zero at e = 0 only, and was
     * left out of the derived equations and of the lists of runs at e = 0.5 */
    for (int p = 0; p < 3 + (m->np > 0); p++) {
        int generic = p == 3;
        model_test_point(m, 11 + p, in);
        if (generic)
            for (int i = 0; i < m->np; i++)
                in[i] = w->in[i] = hamel_generic_param(i);
        /* Psi may depend on q' (nonlinear constraints): at the test point's q' */
        memcpy(w->in + model_input_qd(m), in + model_input_qd(m), n * sizeof *in);
        if (factor_psi(w, in[model_input_t(m)], in + model_input_q(m)) < 0)
            continue;
        if (inverse_and_derivatives(w) < 0)
            goto done;
        psi_errors_at(&err, m, w->in);
        rounding_scales(w, scratch, phi_mag, phit_mag);
        /* where Psi underflows or leaves its domain the point proves nothing: every
         * coefficient is kept (issue 15); at the other parameter values such a point
         * adds nothing (the model's own values decided) */
        int trusted = model_constraints_trusted_at(m, in);
        if (generic && !trusted)
            break;
        unsigned char bit = generic ? GAMMA_NZ_PARAMS : GAMMA_NZ_MODEL;
        for (int j = 0; j < n; j++) {
            unsigned char *nz = m->gamma_nz + (size_t)j * n2, *nz_t = m->gamma_t_nz + (size_t)j * n;
            /* only the rows r of gamma^j that gamma_row computed: the others are +0 (no
             * coefficient there), and it leaves them unwritten */
            gamma_row(w, j, g, gt, gm, gtm, used, phi_mag, phit_mag);
            if (!trusted)
                memset(nz, GAMMA_NZ_MODEL, n2);
            /* a coefficient or bound that is not finite proves nothing either (and at the
             * other parameter values, nothing is added by it) */
            for (int r = 0; r < n && trusted; r++)
                for (size_t i = (size_t)r * n; i < (size_t)(r + 1) * n && used[r]; i++)
                    if (structure_nonzero(g[i], gm[i], generic))
                        nz[i] |= bit;
            for (int i = 0; i < n; i++)
                if (!trusted || structure_nonzero(gt[i], gtm[i], generic))
                    nz_t[i] |= bit;
        }
    }
    m->gamma_values = 1 + (size_t)n;
    for (size_t i = 0; i < n3; i++)
        m->gamma_values += 4 * (size_t)(m->gamma_nz[i] != 0);
    for (size_t i = 0; i < n2; i++)
        m->gamma_values += 3 * (size_t)(m->gamma_t_nz[i] != 0);
    for (int c = 0; c < m->nc; c++) {
        model_constraint *mc = &m->cons[c];
        mc->gamma_free = 0;
        if (!mc->linear)
            continue;
        int j = mc->row, any = 0; /* at the model's parameter values, as holonomic */
        for (int r = 0; r < m->k; r++) {
            any |= m->gamma_t_nz[(size_t)j * n + r] & GAMMA_NZ_MODEL;
            for (int l = 0; l < m->k; l++)
                any |= m->gamma_nz[((size_t)j * n + r) * n + l] & GAMMA_NZ_MODEL;
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
    free(used);
    free(scratch);
    psi_errors_free(&err);
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
    if (inverse_and_derivatives(w) < 0)
        goto done;
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
int hamel_fast_agrees(const struct engine_model *m, int *numeric_ok)
{
    *numeric_ok = 0;
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
        ++*numeric_ok;
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

/* det Psi from the factored diagonal blocks (sparse_factor) and the permutations' sign;
 * *big receives the largest magnitude of the blocks' U factors and of Psi's off-block
 * entries, against which a pivot counts as zero as in linalg_lu. */
/* det Psi from the factored diagonal blocks (sparse_factor) and the permutations' sign;
 * *big receives the largest magnitude of the blocks' U factors and of Psi's off-block
 * entries, against which a pivot counts as zero as in linalg_lu. */
static double sparse_det(const hamel_ws *w, const struct hamel_sparse *sp, double *pmin, double *big)
{
    int n = w->n;
    double d = sp->sign, amax = 0.0, lo = INFINITY;
    for (int b = 0; b < sp->nblocks; b++) {
        int p0 = sp->start[b], size = sp->start[b + 1] - p0;
        const double *a = w->blu + sp->lu_off[b];
        if (size == 1) { /* kept as its reciprocal: the entry itself from Psi */
            double v = w->psi[(size_t)sp->row[p0] * n + sp->col[p0]];
            d *= v;
            lo = fmin(lo, fabs(v));
            amax = fmax(amax, fabs(v));
            continue;
        }
        for (int x = 0; x < size; x++) {
            d *= a[x * size + x];
            if (w->bpiv[p0 + x] != x)
                d = -d;
            lo = fmin(lo, fabs(a[x * size + x]));
            for (int y = x; y < size; y++)
                amax = fmax(amax, fabs(a[x * size + y]));
        }
    }
    for (int p = 0; p < n; p++)
        for (int j = sp->off_ptr[p]; j < sp->off_ptr[p + 1]; j++)
            amax = fmax(amax, fabs(w->psi[(size_t)sp->row[p] * n + sp->off_col[j]]));
    *pmin = lo;
    *big = amax;
    return d;
}

/* hamel_psi_condition on Psi's block-triangular structure (model.h: sparse), the same
 * 1-norm condition number in O(n^2) at most: the diagonal blocks factored once, each
 * column of Psi^-1 by substitution through the blocks it reaches only (at n = 200, a
 * chain of 40 rolling disks, 65 us a call where the dense LU and n solves took 4 ms). */
static int psi_condition_sparse(hamel_ws *w, double t, const double *q, double *cond, double *det)
{
    const struct engine_model *m = w->m;
    const struct hamel_sparse *sp = m->sparse;
    int n = w->n;
    w->in[model_input_t(m)] = t;
    memcpy(w->in + model_input_q(m), q, n * sizeof *q);
    tape_run(m->tape_psi, w->in, w->work, w->psi);
    double pmin = 0.0, big = 0.0;
    int rc = sparse_factor(w);
    double d = rc < 0 ? 0.0 : sparse_det(w, sp, &pmin, &big);
    *det = d;
    if (rc < 0 || pmin <= 1e-13 * big || !(d != 0.0) || !isfinite(d)) {
        *cond = INFINITY;
        return -1;
    }
    /* ||Psi||_1 over the entries that can be nonzero (the others are zeros: adding them
     * changes no sum); column l of Psi^-1 as sparse_column makes it, col and vec kept
     * zero between columns by clearing only what a column touched */
    double na = 0.0, ni = 0.0, *col = w->Phi;
    memset(col, 0, n * sizeof *col);
    memset(w->vec, 0, n * sizeof *w->vec);
    for (int l = 0; l < n; l++) {
        double sa = 0.0, si = 0.0;
        for (int x = sp->cnz_ptr[l]; x < sp->cnz_ptr[l + 1]; x++)
            sa += fabs(w->psi[(size_t)sp->cnz_row[x] * n + l]);
        w->vec[l] = 1.0;
        for (int j = sp->reach_ptr[l]; j < sp->reach_ptr[l + 1]; j++)
            solve_block(w, sp, sp->reach[j], w->vec, col);
        w->vec[l] = 0.0;
        for (int j = sp->reach_ptr[l]; j < sp->reach_ptr[l + 1]; j++)
            for (int p = sp->start[sp->reach[j]]; p < sp->start[sp->reach[j] + 1]; p++) {
                si += fabs(col[sp->col[p]]);
                col[sp->col[p]] = 0.0;
            }
        na = fmax(na, sa);
        ni = fmax(ni, si);
    }
    *cond = na * ni;
    return isfinite(*cond) ? 0 : -1;
}

int hamel_psi_condition(hamel_ws *w, double t, const double *q, double *cond, double *det)
{
    int n = w->n;
    if (w->m->sparse && !w->dense && !w->sel_on && !w->m->nl_reduced)
        return psi_condition_sparse(w, t, q, cond, det);
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
