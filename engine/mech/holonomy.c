/* holonomy.c — integrability of the linear constraints (holonomy.h): the Frobenius
 * test of each constraint's form, and the involutive closure of the constraint
 * distribution by iterated Lie brackets (evaluated numerically with hyper-dual numbers)
 * with the integrable combinations it leaves. */
#include "holonomy.h"
#include "trust.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exprjson.h"

#define HOL_POINTS 3
#define HOL_MAX_TERMS 2000 /* expansion cap of one bracket component */
/* The work of the brackets (hyper-dual operations; the bicycle takes 9.3e6, a car with
 * three trailers 1.0e7, with four 1.1e8): past it they stop ("complete": false), the same
 * on every machine, and the compilation stays short (a car with eight: 6e7 is about 6 ms). */
#define HOL_MAX_UNITS 6e7
#define HOL_MAX_N 24 /* larger models: only the per-constraint flags */
#define HOL_V_MAX 64 /* a field's vectors: N = n (+1 for t) <= HOL_MAX_N + 1 (holonomy_analyse) */
_Static_assert(HOL_MAX_N + 1 <= HOL_V_MAX, "a field's vectors hold every coordinate and t");
#define HOL_RANK_TOL 1e-8  /* a field adds to the span past this relative residual */
#define HOL_CONST_TOL 1e-8 /* coefficients equal at every point: constant */
/* A constraint is integrable by itself (omega ^ d omega = 0) when |s| <= this times the
 * sum of its terms' magnitudes at every test point: the terms are the exact derivatives
 * evaluated (a few eps of rounding), so z' - (1 + 1e-9)*y*x' - x*y' (s 1e-9 of its terms)
 * is not integrable, where the resolution was 1e-9 */
#define HOL_FROBENIUS_TOL 1e-12

/* ---- per constraint: omega ^ d omega = 0 ---- */

int holonomy_flags(struct engine_model *m)
{
    int n = m->n, N = n + 1;
    size_t n3 = (size_t)n * n * n, n2 = (size_t)n * n;
    double *in = calloc(m->n_in, sizeof *in), *work = calloc(m->work_len + 1, sizeof *work);
    double *psi = calloc(n2 + n, sizeof *psi), *dpsi = calloc(n3 + 2 * n2, sizeof *dpsi);
    double *dpsi_c = calloc(model_dpsi_count(m) + 1, sizeof *dpsi_c);
    double *a = calloc(N, sizeof *a), *da = calloc((size_t)N * N, sizeof *da);
    int *sup = calloc(N, sizeof *sup);
    if (!in || !work || !psi || !dpsi || !dpsi_c || !a || !da || !sup) {
        free(in), free(work), free(psi), free(dpsi), free(dpsi_c), free(a), free(da), free(sup);
        return -1;
    }
    for (int j = 0; j < m->nc; j++)
        m->cons[j].holonomic = m->cons[j].linear;
    for (int p = 0; p < HOL_POINTS; p++) {
        model_test_point(m, 21 + p, in);
        tape_run(m->tape_psi, in, work, psi);
        model_run_dpsi(m, in, work, dpsi_c, dpsi);
        for (int c = 0; c < m->nc; c++) {
            model_constraint *mc = &m->cons[c];
            if (!mc->holonomic)
                continue;
            int j = mc->row;
            /* a point where the row underflows or leaves its domain proves nothing:
             * claim nothing (issue 15) */
            expr *row[2] = {mc->f, m->psi_t ? m->psi_t[j] : NULL};
            if (!model_trusted_at(m, row, 2, in) ||
                (m->psi && !model_trusted_at(m, m->psi + (size_t)j * n, n, in))) {
                mc->holonomic = 0;
                continue;
            }
            /* a over z = (q, t); da[i*N + k] = d a_i / d z_k (d a_t / dt is never needed) */
            for (int i = 0; i < n; i++) {
                a[i] = psi[(size_t)j * n + i];
                for (int k = 0; k < n; k++)
                    da[i * N + k] = dpsi[((size_t)j * n + i) * n + k];
                da[i * N + n] = dpsi[n3 + (size_t)j * n + i];
                da[n * N + i] = dpsi[n3 + n2 + (size_t)j * n + i];
            }
            a[n] = psi[n2 + j];
            da[n * N + n] = 0.0;
            /* Only the triples within the support (the z_i with a_i or a row or column
             * of da nonzero) can fail: with every entry finite, a triple with an index
             * outside it has s = 0 and scale = 0 (a chain of 40 disks, n = 200: the
             * full N^3/6 per constraint was a fifth of the compile). Any non-finite
             * entry: every triple, as it can make 0 * inf elsewhere. */
            int ns = 0, finite = 1;
            for (int i = 0; i < N; i++) {
                int on = a[i] != 0.0;
                finite &= isfinite(a[i]) != 0;
                for (int k = 0; k < N; k++) {
                    on |= da[i * N + k] != 0.0 || da[k * N + i] != 0.0;
                    finite &= isfinite(da[i * N + k]) != 0;
                }
                if (on)
                    sup[ns++] = i;
            }
            if (!finite)
                for (ns = 0; ns < N; ns++)
                    sup[ns] = ns;
            for (int xi = 0; xi < ns && mc->holonomic; xi++)
                for (int yi = xi + 1; yi < ns && mc->holonomic; yi++)
                    for (int zi = yi + 1; zi < ns && mc->holonomic; zi++) {
                        int x = sup[xi], y = sup[yi], z = sup[zi];
                        double t1 = a[x] * (da[z * N + y] - da[y * N + z]);
                        double t2 = a[y] * (da[x * N + z] - da[z * N + x]);
                        double t3 = a[z] * (da[y * N + x] - da[x * N + y]);
                        double scale = fabs(a[x]) * (fabs(da[z * N + y]) + fabs(da[y * N + z])) +
                                       fabs(a[y]) * (fabs(da[x * N + z]) + fabs(da[z * N + x])) +
                                       fabs(a[z]) * (fabs(da[y * N + x]) + fabs(da[x * N + y]));
                        double s = t1 + t2 + t3;
                        if (!isfinite(s) || fabs(s) > HOL_FROBENIUS_TOL * scale + 1e-300)
                            mc->holonomic = 0;
                    }
        }
    }
    free(in), free(work), free(psi), free(dpsi), free(dpsi_c), free(a), free(da), free(sup);
    return 0;
}

/* ---- the closure of the distribution ---- */

/* The brackets are evaluated numerically, never formed as expressions: a field is a
 * tree (a generator, or the bracket of a generator with an earlier field), and its
 * value at a point is computed with hyper-dual numbers on the generators' tape. An
 * argument z + eps*a (eps^2 = 0) gives a field Y's value and its derivative along a in
 * one evaluation, so [X, Y](z) = DY(z) X(z) - DX(z) Y(z) is exact to rounding; a
 * bracket nested d deep needs d infinitesimals (2^d components per number) and
 * evaluates the generators O(2^d) times. Symbolic brackets of the Whipple bicycle's
 * Phi took seconds and hundreds of megabytes; these take milliseconds. */
#define HOL_MAX_DEPTH 6 /* infinitesimals: brackets up to order HOL_MAX_DEPTH + 1 */
#define HOL_W (1 << HOL_MAX_DEPTH)

struct field {
    int gen;         /* generator index, or -1 for a bracket */
    int left, right; /* the bracket [left, right] of earlier fields */
    int depth;       /* nesting: 0 for a generator */
    int level;       /* bracket order (1 for a generator) */
    double v[HOL_POINTS][HOL_V_MAX];
};

/* The generators' tape evaluated at one hyper-dual point (hd_tape), kept: a bracket
 * evaluates both of its sides at the same point, and nested brackets evaluate the
 * same generators at the same points again. */
#define HOL_TAPE_CACHE 4
struct hol_tape_entry {
    int p, L, used; /* L < 0: empty */
    double *z;      /* [N << L] the point */
    double *all;    /* [ngen * n << L] hd_tape's output there */
    size_t cap;     /* doubles allocated in z and all, per 2^L */
};

struct hol {
    struct engine_model *m;
    expr_ctx *c;
    int n, N, ext;
    int ngen;                  /* generator candidates on the tape (k + ext) */
    tape *gens;                /* outputs: generator r's n components at r*n */
    double *in[HOL_POINTS];    /* tape inputs of each point */
    double *basis[HOL_POINTS]; /* orthonormal rows [N*N] */
    int rank[HOL_POINTS];
    struct field *f;
    int nf;
    double *work; /* the tape's slots, hyper-dual: work_w numbers of 2^work_l */
    double units; /* work done by hd_tape: instructions x (2^used)^2, the bound of its cost */
    size_t work_w;
    int work_l;
    struct hol_tape_entry cache[HOL_TAPE_CACHE];
    int cache_next; /* the entry replaced next (round robin) */
};

/* Hyper-dual numbers: W = 2^L doubles, coefficient [mask] of the product of the
 * infinitesimals in mask. */
static void hd_mul(int W, const double *a, const double *b, double *out)
{
    for (int m = 0; m < W; m++) {
        double s = 0.0;
        for (int x = m;; x = (x - 1) & m) {
            s += a[x] * b[m ^ x];
            if (!x)
                break;
        }
        out[m] = s;
    }
}

/* f(a) = sum_k c[k] (a - a0)^k, c[k] = f^(k)(a0)/k! for k <= L. */
static void hd_series(int W, int L, const double *a, const double *c, double *out)
{
    double d[HOL_W], pw[HOL_W], t[HOL_W];
    memcpy(d, a, W * sizeof *d);
    d[0] = 0.0;
    memcpy(pw, d, W * sizeof *pw);
    for (int m = 0; m < W; m++)
        out[m] = 0.0;
    out[0] = c[0];
    for (int k = 1; k <= L; k++) {
        for (int m = 0; m < W; m++)
            out[m] += c[k] * pw[m];
        if (k < L) {
            hd_mul(W, pw, d, t);
            memcpy(pw, t, W * sizeof *pw);
        }
    }
}

/* Taylor coefficients of p(h)^alpha, p(h) = p0 + p1 h + p2 h^2, to order L. */
static void series_pow(double p0, double p1, double p2, double alpha, int L, double *q)
{
    const double p[3] = {p0, p1, p2};
    q[0] = pow(p0, alpha);
    for (int j = 1; j <= L; j++) {
        double s = 0.0;
        for (int i = 1; i <= j && i <= 2; i++)
            s += ((alpha + 1.0) * i - j) * p[i] * q[j - i];
        q[j] = s / (j * p0);
    }
}

/* x^alpha for a constant real alpha: c_k = binom(alpha, k) x^(alpha - k). */
static void coef_pow(double x, double alpha, int L, double *c)
{
    double binom = 1.0;
    for (int k = 0; k <= L; k++) {
        c[k] = binom == 0.0 ? 0.0 : binom * pow(x, alpha - k);
        binom *= (alpha - k) / (k + 1);
    }
}

static void hd_fn(int W, int L, int op, const double *a, const double *b, double *out)
{
    double c[HOL_MAX_DEPTH + 2], x = a[0];
    double t1[HOL_W], t2[HOL_W];
    switch (op) {
    case TAPE_SIN:
    case TAPE_COS: {
        double s = sin(x), co = cos(x), cyc[4] = {s, co, -s, -co}, f = 1.0;
        for (int k = 0; k <= L; k++) {
            f = k ? f * k : 1.0;
            c[k] = cyc[(k + (op == TAPE_COS)) % 4] / f;
        }
        break;
    }
    case TAPE_SINH:
    case TAPE_COSH: {
        double f = 1.0;
        for (int k = 0; k <= L; k++) {
            f = k ? f * k : 1.0;
            c[k] = ((k + (op == TAPE_COSH)) % 2 ? cosh(x) : sinh(x)) / f;
        }
        break;
    }
    case TAPE_EXP: {
        double f = 1.0;
        for (int k = 0; k <= L; k++) {
            f = k ? f * k : 1.0;
            c[k] = exp(x) / f;
        }
        break;
    }
    case TAPE_LOG:
        c[0] = log(x);
        for (int k = 1; k <= L; k++)
            c[k] = (k % 2 ? 1.0 : -1.0) / (k * pow(x, k));
        break;
    case TAPE_SQRT: coef_pow(x, 0.5, L, c); break;
    case TAPE_ATAN:
    case TAPE_ASIN:
    case TAPE_ACOS: {
        double g[HOL_MAX_DEPTH + 2];
        if (op == TAPE_ATAN)
            series_pow(1.0 + x * x, 2.0 * x, 1.0, -1.0, L, g);
        else
            series_pow(1.0 - x * x, -2.0 * x, -1.0, -0.5, L, g);
        c[0] = op == TAPE_ATAN ? atan(x) : op == TAPE_ASIN ? asin(x) : acos(x);
        for (int k = 1; k <= L; k++)
            c[k] = (op == TAPE_ACOS ? -g[k - 1] : g[k - 1]) / k;
        break;
    }
    case TAPE_TAN:
    case TAPE_TANH: /* sin/cos, sinh/cosh */
        hd_fn(W, L, op == TAPE_TAN ? TAPE_SIN : TAPE_SINH, a, NULL, t1);
        hd_fn(W, L, op == TAPE_TAN ? TAPE_COS : TAPE_COSH, a, NULL, t2);
        hd_fn(W, L, TAPE_DIV, t1, t2, out);
        return;
    case TAPE_DIV:
        coef_pow(b[0], -1.0, L, c);
        hd_series(W, L, b, c, t1);
        hd_mul(W, a, t1, out);
        return;
    case TAPE_ABS:
        for (int m = 0; m < W; m++)
            out[m] = x < 0 ? -a[m] : a[m];
        return;
    case TAPE_SIGN: /* constant where it is defined: the series is its value alone */
        for (int m = 0; m < W; m++)
            out[m] = 0.0;
        out[0] = x > 0 ? 1.0 : x < 0 ? -1.0 : x;
        return;
    case TAPE_POW: /* exp(b log a) */
        hd_fn(W, L, TAPE_LOG, a, NULL, t1);
        hd_mul(W, b, t1, t2);
        hd_fn(W, L, TAPE_EXP, t2, NULL, out);
        return;
    case TAPE_ATAN2: { /* atan2(a, b) + the change of atan(a/b), or of -atan(b/a) */
        int direct = fabs(b[0]) >= fabs(a[0]);
        hd_fn(W, L, TAPE_DIV, direct ? a : b, direct ? b : a, t1);
        hd_fn(W, L, TAPE_ATAN, t1, NULL, t2);
        double base = atan2(a[0], b[0]);
        for (int m = 0; m < W; m++)
            out[m] = direct ? t2[m] : -t2[m];
        out[0] = base;
        return;
    }
    default:
        for (int m = 0; m < W; m++)
            out[m] = NAN;
        return;
    }
    hd_series(W, L, a, c, out);
}

/* The generators' tape in hyper-dual arithmetic at z (N hyper-duals: q, then t when
 * ext), the other inputs those of point p; out[r*n*W ...] for generator r. Numbers
 * are stored 2^L apart; only the first `used` infinitesimals are active in z, so
 * only 2^used components are computed (the rest are zero). */
static void hd_tape(struct hol *h, int p, int L, int used, const double *z, double *out)
{
    const tape *t = h->gens;
    int S = 1 << L, W = 1 << used, n = h->n;
    double *s = h->work;
    int q0 = model_input_q(h->m), t0 = model_input_t(h->m);
    h->units += (double)t->n_ins * W * W;
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *p_ = &t->ins[i];
        double *o = s + (size_t)i * S;
        const double *a = p_->a >= 0 && p_->op != TAPE_INPUT ? s + (size_t)p_->a * S : NULL;
        const double *b = p_->b >= 0 && (p_->op == TAPE_ADD || p_->op == TAPE_SUB || p_->op == TAPE_MUL ||
                                         p_->op == TAPE_DIV || p_->op == TAPE_POW || p_->op == TAPE_ATAN2)
                              ? s + (size_t)p_->b * S
                              : NULL;
        switch ((tape_op)p_->op) {
        case TAPE_INPUT: {
            const double *zi = p_->a >= q0 && p_->a < q0 + n ? z + (size_t)(p_->a - q0) * S
                               : h->ext && p_->a == t0       ? z + (size_t)n * S
                                                             : NULL;
            for (int m = 0; m < W; m++)
                o[m] = zi ? zi[m] : m ? 0.0 : h->in[p][p_->a];
            break;
        }
        case TAPE_CONST:
            for (int m = 0; m < W; m++)
                o[m] = m ? 0.0 : p_->c;
            break;
        case TAPE_ADD:
            for (int m = 0; m < W; m++)
                o[m] = a[m] + b[m];
            break;
        case TAPE_SUB:
            for (int m = 0; m < W; m++)
                o[m] = a[m] - b[m];
            break;
        case TAPE_NEG:
            for (int m = 0; m < W; m++)
                o[m] = -a[m];
            break;
        case TAPE_MUL: hd_mul(W, a, b, o); break;
        case TAPE_POWI: {
            double c[HOL_MAX_DEPTH + 2];
            coef_pow(a[0], (double)p_->b, used, c);
            hd_series(W, used, a, c, o);
            break;
        }
        default: hd_fn(W, used, p_->op, a, b, o); break;
        }
    }
    memset(out, 0, (size_t)h->ngen * n * S * sizeof *out);
    for (int r = 0; r < h->ngen; r++)
        for (int i = 0; i < n; i++)
            memcpy(out + ((size_t)r * n + i) * S, s + (size_t)t->outputs[r * n + i] * S, W * sizeof *out);
}

/* hd_tape's output at (p, L, used, z), from the cache when the same point was
 * evaluated recently (the work is counted in h->units either way, so the budget and
 * "complete" do not depend on the cache). NULL on allocation failure. */
static const double *hd_tape_cached(struct hol *h, int p, int L, int used, const double *z)
{
    size_t S = (size_t)1 << L, nz = (size_t)h->N * S, nall = (size_t)h->ngen * h->n * S;
    for (int i = 0; i < HOL_TAPE_CACHE; i++) {
        struct hol_tape_entry *e = &h->cache[i];
        if (e->L == L && e->p == p && e->used == used && memcmp(e->z, z, nz * sizeof *z) == 0) {
            h->units += (double)h->gens->n_ins * ((size_t)1 << used) * ((size_t)1 << used);
            return e->all;
        }
    }
    struct hol_tape_entry *e = &h->cache[h->cache_next];
    h->cache_next = (h->cache_next + 1) % HOL_TAPE_CACHE;
    e->L = -1;
    if (e->cap < S) {
        double *zz = realloc(e->z, nz * sizeof *zz);
        if (!zz)
            return NULL;
        e->z = zz;
        double *aa = realloc(e->all, nall * sizeof *aa);
        if (!aa)
            return NULL;
        e->all = aa;
        e->cap = S;
    }
    memcpy(e->z, z, nz * sizeof *z);
    hd_tape(h, p, L, used, z, e->all);
    e->p = p, e->L = L, e->used = used;
    return e->all;
}

/* Field f at the hyper-dual point z (N numbers of W = 2^L, using the first `used`
 * infinitesimals) into out (N numbers). scale, when not NULL, gets the size of the
 * two terms of the outermost bracket (its rounding scale). Returns -1 on allocation
 * failure. */
static int eval_field(struct hol *h, int f, int p, int L, int used, const double *z, double *out,
                      double *scale)
{
    int N = h->N, n = h->n, W = 1 << L;
    const struct field *fl = &h->f[f];
    if (fl->gen >= 0) {
        const double *all = hd_tape_cached(h, p, L, used, z);
        if (!all)
            return -1;
        memcpy(out, all + (size_t)fl->gen * n * W, (size_t)n * W * sizeof *out);
        if (h->ext)
            for (int m = 0; m < W; m++)
                out[(size_t)n * W + m] = m ? 0.0 : fl->gen == h->ngen - 1 ? 1.0 : 0.0;
        if (scale)
            *scale = 0.0;
        return 0;
    }
    size_t sz = (size_t)N * W;
    h->units += (double)sz * W * N; /* the directional derivatives below */
    double *buf = malloc(5 * sz * sizeof *buf);
    if (!buf)
        return -1;
    double *a = buf, *b = buf + sz, *z2 = buf + 2 * sz, *db = buf + 3 * sz, *da = buf + 4 * sz;
    int bit = 1 << used, rc = -1;
    if (eval_field(h, fl->left, p, L, used, z, a, NULL) < 0 ||
        eval_field(h, fl->right, p, L, used, z, b, NULL) < 0)
        goto done;
    /* DB a: B at z + eps a, its eps part */
    memcpy(z2, z, sz * sizeof *z2);
    for (int i = 0; i < N; i++)
        for (int m = 0; m < bit; m++)
            z2[(size_t)i * W + (m | bit)] = a[(size_t)i * W + m];
    if (eval_field(h, fl->right, p, L, used + 1, z2, db, NULL) < 0)
        goto done;
    memcpy(z2, z, sz * sizeof *z2);
    for (int i = 0; i < N; i++)
        for (int m = 0; m < bit; m++)
            z2[(size_t)i * W + (m | bit)] = b[(size_t)i * W + m];
    if (eval_field(h, fl->left, p, L, used + 1, z2, da, NULL) < 0)
        goto done;
    double s = 0.0;
    for (int i = 0; i < N; i++) {
        for (int m = 0; m < W; m++)
            out[(size_t)i * W + m] =
                m & ~(bit - 1) ? 0.0 : db[(size_t)i * W + (m | bit)] - da[(size_t)i * W + (m | bit)];
        s += db[(size_t)i * W + bit] * db[(size_t)i * W + bit] +
             da[(size_t)i * W + bit] * da[(size_t)i * W + bit];
    }
    if (scale)
        *scale = sqrt(s);
    rc = 0;
done:
    free(buf);
    return rc;
}

/* Adds v (length N) to the basis of point p if it is independent of it and clear of
 * the rounding of its terms (scale); returns 1 if so. */
static int span_add(struct hol *h, int p, const double *v0, double scale)
{
    int N = h->N;
    double v[HOL_V_MAX], norm0 = 0.0;
    for (int i = 0; i < N; i++) {
        v[i] = v0[i];
        norm0 += v[i] * v[i];
    }
    if (!(norm0 > 0.0) || !isfinite(norm0) || !(sqrt(norm0) > 1e-9 * scale))
        return 0;
    for (int pass = 0; pass < 2; pass++)
        for (int b = 0; b < h->rank[p]; b++) {
            const double *e = h->basis[p] + (size_t)b * N;
            double d = 0.0;
            for (int i = 0; i < N; i++)
                d += e[i] * v[i];
            for (int i = 0; i < N; i++)
                v[i] -= d * e[i];
        }
    double norm = 0.0;
    for (int i = 0; i < N; i++)
        norm += v[i] * v[i];
    if (!(norm > HOL_RANK_TOL * HOL_RANK_TOL * norm0) || !(sqrt(norm) > 1e-9 * scale))
        return 0;
    norm = sqrt(norm);
    double *e = h->basis[p] + (size_t)h->rank[p] * N;
    for (int i = 0; i < N; i++)
        e[i] = v[i] / norm;
    h->rank[p]++;
    return 1;
}

/* Offers field h->f[h->nf] to the span at every point; kept (h->nf grows) when it
 * adds at two points or more (a generic bracket adds everywhere but on a thin set).
 * Returns 1 if kept, 0 if not, -1 on allocation failure. */
static int offer(struct hol *h)
{
    struct field *fl = &h->f[h->nf];
    int N = h->N, L = fl->depth, W = 1 << L;
    if (L > h->work_l) { /* wider numbers: more scratch */
        double *w = realloc(h->work, h->work_w * W * sizeof *w);
        if (!w)
            return -1;
        h->work = w;
        h->work_l = L;
    }
    double *z = calloc((size_t)N * W, sizeof *z), *out = calloc((size_t)N * W, sizeof *out);
    int saved[HOL_POINTS], adds = 0;
    if (!z || !out) {
        free(z), free(out);
        return -1;
    }
    for (int p = 0; p < HOL_POINTS; p++) {
        for (int i = 0; i < h->n; i++)
            z[(size_t)i * W] = h->in[p][model_input_q(h->m) + i];
        if (h->ext)
            z[(size_t)h->n * W] = h->in[p][model_input_t(h->m)];
        double scale = 0.0;
        if (eval_field(h, h->nf, p, L, 0, z, out, &scale) < 0) {
            free(z), free(out);
            return -1;
        }
        for (int i = 0; i < N; i++)
            fl->v[p][i] = out[(size_t)i * W];
        saved[p] = h->rank[p];
        adds += span_add(h, p, fl->v[p], scale);
    }
    free(z), free(out);
    if (adds >= 2) {
        h->nf++;
        return 1;
    }
    for (int p = 0; p < HOL_POINTS; p++)
        h->rank[p] = saved[p];
    return 0;
}

static double snap(double v)
{
    for (int d = 1; d <= 64; d++) {
        double r = round(v * d) / d;
        if (fabs(v - r) <= 1e-9 * fmax(1.0, fabs(v)))
            return r;
    }
    return v;
}

/* The coefficients c (nl of them) of the combinations of the linear constraints that
 * annihilate the brackets Y (nb fields) at point p: the null space of (A Y)^T in the
 * canonical basis of its reduced row echelon form (identity on the free columns, the
 * first nonzero coefficient positive). Returns the number of combinations written
 * to out[h * nl]. */
static int annihilator(struct hol *h, int p, int *rows, int nl, int first, int nb, double *out)
{
    struct engine_model *m = h->m;
    int n = h->n, N = h->N;
    double *A = calloc((size_t)nl * N + 1, sizeof *A), *B = calloc((size_t)(nb + 1) * nl, sizeof *B);
    double *psi = calloc((size_t)n * n + n, sizeof *psi);
    int *pivcol = calloc(nl + 1, sizeof *pivcol), *isp = calloc(nl + 1, sizeof *isp);
    int cnt = 0;
    if (!A || !B || !psi || !pivcol || !isp)
        goto done;
    tape_run(m->tape_psi, h->in[p], h->work, psi);
    for (int j = 0; j < nl; j++) {
        for (int i = 0; i < n; i++)
            A[j * N + i] = psi[(size_t)rows[j] * n + i];
        if (h->ext)
            A[j * N + n] = psi[(size_t)n * n + rows[j]];
    }
    double bmax = 0.0;
    for (int b = 0; b < nb; b++)
        for (int j = 0; j < nl; j++) {
            double s = 0.0;
            for (int i = 0; i < N; i++)
                s += A[j * N + i] * h->f[first + b].v[p][i];
            B[b * nl + j] = s;
            bmax = fmax(bmax, fabs(s));
        }
    /* reduced row echelon form of B (nb x nl), leftmost pivots */
    int r = 0;
    for (int col = 0; col < nl && r < nb; col++) {
        int best = -1;
        double bv = 1e-9 * bmax;
        for (int i = r; i < nb; i++)
            if (fabs(B[i * nl + col]) > bv) {
                bv = fabs(B[i * nl + col]);
                best = i;
            }
        if (best < 0)
            continue;
        for (int j = 0; j < nl; j++) {
            double t = B[r * nl + j];
            B[r * nl + j] = B[best * nl + j];
            B[best * nl + j] = t;
        }
        double inv = 1.0 / B[r * nl + col];
        for (int j = 0; j < nl; j++)
            B[r * nl + j] *= inv;
        for (int i = 0; i < nb; i++)
            if (i != r) {
                double f = B[i * nl + col];
                for (int j = 0; j < nl; j++)
                    B[i * nl + j] -= f * B[r * nl + j];
            }
        pivcol[r++] = col;
        isp[col] = 1;
    }
    for (int f = 0; f < nl; f++) {
        if (isp[f])
            continue;
        double *cv = out + (size_t)cnt * nl;
        memset(cv, 0, nl * sizeof *cv);
        cv[f] = 1.0;
        for (int i = 0; i < r; i++)
            cv[pivcol[i]] = -B[i * nl + f];
        double first = 0.0;
        for (int j = 0; j < nl && first == 0.0; j++)
            if (fabs(cv[j]) > 1e-12)
                first = cv[j];
        for (int j = 0; j < nl; j++)
            cv[j] = first < 0 ? -cv[j] : cv[j];
        cnt++;
    }
done:
    free(A), free(B), free(psi), free(pivcol), free(isp);
    return cnt;
}

/* One combination with coefficients cv on the linear constraints rows[]: its
 * coefficients, constraint expression and (constant form) integral. */
static json_t *combination(struct hol *h, const int *rows, const int *cons_of_row, int nl, const double *cv,
                           int constant)
{
    struct engine_model *m = h->m;
    expr_ctx *c = h->c;
    int n = h->n;
    json_t *o = json_object();
    if (!constant) {
        json_object_set_new(o, "coefficients", json_null());
        json_object_set_new(o, "expr", json_null());
        json_object_set_new(o, "integral", json_null());
        json_object_set_new(o, "note",
                            json_string("the combination's coefficients depend on the configuration"));
        return o;
    }
    json_t *co = json_object();
    /* terms holds a combination of the nl constraints, then the integral's n + 1 terms
     * (all of them when the budget stops the analysis and every form reads as NaN) */
    expr **terms = calloc((nl > n + 1 ? nl : n + 1) + 1, sizeof *terms), **form = calloc(n + 2, sizeof *form);
    if (!terms || !form) {
        free(terms), free(form);
        return o;
    }
    int nt = 0;
    for (int j = 0; j < nl; j++) {
        double v = snap(cv[j]);
        if (v == 0.0)
            continue;
        json_object_set_new(co, m->cons[cons_of_row[j]].name, json_real(v));
        terms[nt++] = expr_mul(c, expr_num(c, v), m->cons[cons_of_row[j]].f);
    }
    json_object_set_new(o, "coefficients", co);
    expr *f = expr_expand(c, expr_sum(c, terms, nt), HOL_MAX_TERMS);
    json_object_set_new(o, "expr", exprjson_text(c, f));
    /* the form sum_j c_j (Psi_j, Psi_tj): constant coefficients integrate at once */
    int cst = 1;
    for (int i = 0; i <= n; i++) {
        nt = 0;
        for (int j = 0; j < nl; j++) {
            double v = snap(cv[j]);
            if (v != 0.0)
                terms[nt++] =
                    expr_mul(c, expr_num(c, v), i < n ? m->psi[(size_t)rows[j] * n + i] : m->psi_t[rows[j]]);
        }
        form[i] = expr_expand(c, expr_sum(c, terms, nt), HOL_MAX_TERMS);
        for (int k = 0; k <= n && cst; k++) {
            int s = k < n ? m->sym_q[k] : m->sym_t;
            if (expr_depends(form[i], s) && !expr_is_zero(c, expr_diff(c, form[i], s)))
                cst = 0;
        }
    }
    if (cst) {
        nt = 0;
        for (int i = 0; i <= n; i++)
            if (!expr_is_zero(c, form[i]))
                terms[nt++] = expr_mul(c, form[i], expr_sym(c, i < n ? m->sym_q[i] : m->sym_t));
        json_t *integral = exprjson_text(c, expr_expand(c, expr_sum(c, terms, nt), HOL_MAX_TERMS));
        json_object_set_new(o, "integral", integral);
    } else {
        json_object_set_new(o, "integral", json_null());
    }
    free(terms), free(form);
    return o;
}

/* The head of the analysis: method, space (q, and t when a linear constraint is
 * rheonomic) and the nonlinear constraints left out. Returns ext (1 when t is in). */
static int hol_head(const struct engine_model *m, json_t *out)
{
    json_t *space = json_array();
    int ext = 0;
    for (int j = 0; j < m->nc; j++)
        if (m->cons[j].linear && m->cons[j].rheonomic)
            ext = 1;
    for (int i = 0; i < m->n; i++)
        json_array_append_new(space, json_string(m->coords[i]));
    if (ext)
        json_array_append_new(space, json_string("t"));
    json_object_set_new(
        out, "method",
        json_string("involutive closure of the constraint distribution: iterated Lie brackets, "
                    "evaluated numerically (hyper-dual numbers), ranks at 3 generic configurations"));
    json_object_set_new(out, "space", space);
    json_t *excl = json_array();
    for (int j = 0; j < m->nc; j++)
        if (!m->cons[j].linear)
            json_array_append_new(excl, json_string(m->cons[j].name));
    json_object_set_new(out, "excluded_nonlinear", excl);
    return ext;
}

/* Without linear constraints: the distribution is the whole space of dimension N. */
static void hol_unconstrained(json_t *out, int N)
{
    json_object_set_new(out, "complete", json_true());
    json_object_set_new(out, "distribution_rank", json_integer(N));
    json_object_set_new(out, "closure_rank", json_integer(N));
    json_object_set_new(out, "bracket_order", json_integer(1));
    json_object_set_new(out, "integrable_combinations", json_integer(0));
    json_object_set_new(out, "nonholonomic_constraints", json_integer(0));
    json_object_set_new(out, "combinations", json_array());
}

/* The generators: columns of Phi_S, and (Phi_t, 1) in (q, t), on one tape, offered as
 * the first fields. -1 when out of memory. */
static int hol_generators(struct hol *h, const reduce_result *red, expr **roots, expr **sub, int nsym)
{
    struct engine_model *m = h->m;
    expr_ctx *c = m->ctx;
    int n = h->n, k = m->k;
    h->ngen = k + h->ext;
    for (int r = 0; r < k; r++)
        for (int i = 0; i < n; i++)
            roots[(size_t)r * n + i] = red->phi[(size_t)i * n + r];
    if (h->ext) {
        for (int s = 0; s < k; s++)
            sub[m->sym_u[s]] = expr_num(c, 0.0);
        for (int i = 0; i < n; i++)
            roots[(size_t)k * n + i] = expr_subst(c, red->kin[i], sub, nsym);
    }
    h->gens = model_tape(m, c, roots, h->ngen * n);
    if (!h->gens)
        return -1;
    h->work_w = (size_t)(h->gens->n_ins > m->work_len ? h->gens->n_ins : m->work_len) + 1;
    h->work = malloc(h->work_w * sizeof *h->work);
    if (!h->work)
        return -1;
    for (int r = 0; r < h->ngen; r++) {
        h->f[h->nf] = (struct field){.gen = r, .left = -1, .right = -1, .depth = 0, .level = 1};
        if (offer(h) < 0)
            return -1;
    }
    return 0;
}

/* The brackets of the generators with the fields of the last order, order by order,
 * until the closure spans N, nothing new comes or the work budget stops it (*complete
 * = 0, *why the reason). -1 when out of memory. */
static int hol_close(struct hol *h, int *complete, const char **why)
{
    int N = h->N, ngen = h->nf, order = 1, cur0 = 0, cur1 = h->nf;
    while (h->nf < N && *complete) {
        int added = 0;
        for (int g = 0; g < ngen && h->nf < N && *complete; g++)
            for (int y = cur0; y < cur1 && h->nf < N && *complete; y++) {
                int depth = 1 + (h->f[y].depth > h->f[g].depth ? h->f[y].depth : h->f[g].depth);
                if (depth > HOL_MAX_DEPTH) {
                    *complete = 0;
                    *why = "the closure needs brackets nested deeper than the analysis evaluates: the "
                           "closure rank is a lower bound";
                    break;
                }
                h->f[h->nf] =
                    (struct field){.gen = -1, .left = g, .right = y, .depth = depth, .level = order + 1};
                int kept = offer(h);
                if (kept < 0)
                    return -1;
                added |= kept;
                if (h->units > HOL_MAX_UNITS)
                    *complete = 0;
            }
        if (!added)
            break;
        order++;
        cur0 = cur1;
        cur1 = h->nf;
    }
    return 0;
}

/* The integrable combinations of the nl linear constraints rows[]: the annihilator of
 * the closure at each test point, constant when the points agree. */
static json_t *hol_combinations(struct hol *h, int *rows, const int *cons_of_row, int nl, int drank,
                                double *cvs)
{
    json_t *combos = json_array();
    int nf = h->nf, got[HOL_POINTS];
    for (int p = 0; p < HOL_POINTS; p++)
        got[p] = annihilator(h, p, rows, nl, drank, nf - drank, cvs + (size_t)p * (nl + 1) * nl);
    for (int q = 0; q < got[0]; q++) {
        const double *c0 = cvs + (size_t)q * nl;
        int constant = got[1] == got[0] && got[2] == got[0];
        double scale = 0.0;
        for (int j = 0; j < nl; j++)
            scale = fmax(scale, fabs(c0[j]));
        for (int p = 1; p < HOL_POINTS && constant; p++)
            for (int j = 0; j < nl; j++)
                if (fabs(cvs[(size_t)p * (nl + 1) * nl + (size_t)q * nl + j] - c0[j]) > HOL_CONST_TOL * scale)
                    constant = 0;
        json_array_append_new(combos, combination(h, rows, cons_of_row, nl, c0, constant));
    }
    return combos;
}

/* The ranks and counts of the closure into out (null counts when it is incomplete). */
static void hol_ranks(const struct hol *h, json_t *out, int nl, int drank, int complete, const char *why)
{
    int nf = h->nf, hcount = h->N - nf;
    json_object_set_new(out, "complete", json_boolean(complete));
    if (!complete)
        json_object_set_new(out, "reason", json_string(why));
    json_object_set_new(out, "distribution_rank", json_integer(drank));
    json_object_set_new(out, "closure_rank", json_integer(nf));
    json_object_set_new(out, "bracket_order", json_integer(nf ? h->f[nf - 1].level : 0));
    if (complete) {
        json_object_set_new(out, "integrable_combinations", json_integer(hcount));
        json_object_set_new(out, "nonholonomic_constraints", json_integer(nl - hcount));
    } else {
        /* the closure rank is only a lower bound: claim no integrability */
        json_object_set_new(out, "integrable_combinations", json_null());
        json_object_set_new(out, "nonholonomic_constraints", json_null());
        json_object_set_new(out, "integrable_combinations_at_most", json_integer(hcount));
    }
}

/* Frees what h holds. */
static void hol_free(struct hol *h)
{
    free(h->f);
    free(h->work);
    for (int i = 0; i < HOL_TAPE_CACHE; i++) {
        free(h->cache[i].z);
        free(h->cache[i].all);
    }
    tape_free(h->gens);
    for (int p = 0; p < HOL_POINTS; p++) {
        free(h->in[p]);
        free(h->basis[p]);
    }
}

json_t *holonomy_analyse(struct engine_model *m, const reduce_result *red)
{
    int n = m->n, k = m->k, nl = m->nlin;
    json_t *out = json_object();
    int ext = hol_head(m, out);
    int N = n + ext;
    if (nl == 0) {
        hol_unconstrained(out, N);
        return out;
    }
    if (!red->have_phi || m->nl_reduced || n > HOL_MAX_N || N > HOL_V_MAX - 1) {
        json_object_set_new(out, "complete", json_false());
        json_object_set_new(out, "reason",
                            json_string(n > HOL_MAX_N || N > HOL_V_MAX - 1
                                            ? "more coordinates than the analysis takes (24)"
                                        : m->nl_reduced ? "the model has nonlinear constraints: the "
                                                          "distribution of its linear ones has no symbolic "
                                                          "basis here"
                                                        : "Phi was not found symbolically within the "
                                                          "budget"));
        return out;
    }
    struct hol h = {0};
    for (int i = 0; i < HOL_TAPE_CACHE; i++)
        h.cache[i].L = -1;
    h.m = m;
    h.c = m->ctx;
    h.n = n;
    h.N = N;
    h.ext = ext;
    int nsym = expr_sym_count(m->ctx), ok = 1;
    for (int p = 0; p < HOL_POINTS; p++) {
        h.in[p] = calloc(m->n_in + 1, sizeof *h.in[p]);
        h.basis[p] = calloc((size_t)N * N, sizeof *h.basis[p]);
        ok &= h.in[p] && h.basis[p];
    }
    int maxf = N + k + 2;
    h.f = calloc(maxf, sizeof *h.f);
    int *rows = calloc(nl + 1, sizeof *rows), *cons_of_row = calloc(nl + 1, sizeof *cons_of_row);
    expr **sub = calloc(nsym + 1, sizeof *sub), **roots = calloc((size_t)(k + 1) * n + 1, sizeof *roots);
    double *cvs = calloc((size_t)HOL_POINTS * (nl + 1) * (nl + 1), sizeof *cvs);
    if (!ok || !h.f || !rows || !cons_of_row || !sub || !roots || !cvs)
        goto done;
    for (int p = 0; p < HOL_POINTS; p++)
        model_test_point(m, 31 + p, h.in[p]);
    for (int j = 0, r = 0; j < m->nc; j++)
        if (m->cons[j].linear) {
            rows[r] = m->cons[j].row;
            cons_of_row[r++] = j;
        }
    if (hol_generators(&h, red, roots, sub, nsym) < 0)
        goto done;
    int drank = h.nf, complete = 1;
    const char *why = "the brackets exceeded their work budget: the closure rank is a lower bound";
    for (int p = 0; p < HOL_POINTS && complete; p++)
        if (!model_constraints_trusted_at(m, h.in[p]) || !model_trusted_at(m, roots, h.ngen * n, h.in[p])) {
            complete = 0; /* an underflow there looks like a zero bracket (issue 15) */
            why = "at a test configuration a term of the constraints underflows, overflows or leaves its "
                  "domain: the closure rank is a lower bound";
        }
    if (hol_close(&h, &complete, &why) < 0)
        goto done;
    hol_ranks(&h, out, nl, drank, complete, why);
    json_object_set_new(out, "combinations",
                        complete && h.N - h.nf > 0 ? hol_combinations(&h, rows, cons_of_row, nl, drank, cvs)
                                                   : json_array());
done:
    free(rows);
    free(cons_of_row);
    free(sub);
    free(roots);
    free(cvs);
    hol_free(&h);
    return out;
}
