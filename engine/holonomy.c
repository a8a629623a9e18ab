/* holonomy.c — integrability of the linear constraints (holonomy.h): the Frobenius
 * test of each constraint's form, and the involutive closure of the constraint
 * distribution by iterated Lie brackets with the integrable combinations it leaves. */
#include "holonomy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOL_POINTS 3
#define HOL_MAX_TERMS 2000   /* expansion cap of one bracket component */
#define HOL_MAX_SECONDS 0.25 /* the brackets stop here ("complete": false) */
#define HOL_MAX_N 24         /* larger models: only the per-constraint flags */
#define HOL_RANK_TOL 1e-8    /* a field adds to the span past this relative residual */
#define HOL_CONST_TOL 1e-8   /* coefficients equal at every point: constant */

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- per constraint: omega ^ d omega = 0 ---- */

int holonomy_flags(struct engine_model *m)
{
    int n = m->n, N = n + 1;
    size_t n3 = (size_t)n * n * n, n2 = (size_t)n * n;
    double *in = calloc(m->n_in, sizeof *in), *work = calloc(m->work_len + 1, sizeof *work);
    double *psi = calloc(n2 + n, sizeof *psi), *dpsi = calloc(n3 + 2 * n2, sizeof *dpsi);
    double *a = calloc(N, sizeof *a), *da = calloc((size_t)N * N, sizeof *da);
    if (!in || !work || !psi || !dpsi || !a || !da) {
        free(in), free(work), free(psi), free(dpsi), free(a), free(da);
        return -1;
    }
    for (int j = 0; j < m->nc; j++)
        m->cons[j].holonomic = m->cons[j].linear;
    for (int p = 0; p < HOL_POINTS; p++) {
        model_test_point(m, 21 + p, in);
        tape_run(m->tape_psi, in, work, psi);
        tape_run(m->tape_dpsi, in, work, dpsi);
        for (int c = 0; c < m->nc; c++) {
            model_constraint *mc = &m->cons[c];
            if (!mc->holonomic)
                continue;
            int j = mc->row;
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
            for (int x = 0; x < N && mc->holonomic; x++)
                for (int y = x + 1; y < N && mc->holonomic; y++)
                    for (int z = y + 1; z < N && mc->holonomic; z++) {
                        double t1 = a[x] * (da[z * N + y] - da[y * N + z]);
                        double t2 = a[y] * (da[x * N + z] - da[z * N + x]);
                        double t3 = a[z] * (da[y * N + x] - da[x * N + y]);
                        double scale = fabs(a[x]) * (fabs(da[z * N + y]) + fabs(da[y * N + z])) +
                                       fabs(a[y]) * (fabs(da[x * N + z]) + fabs(da[z * N + x])) +
                                       fabs(a[z]) * (fabs(da[y * N + x]) + fabs(da[x * N + y]));
                        double s = t1 + t2 + t3;
                        if (!isfinite(s) || fabs(s) > 1e-9 * scale + 1e-300)
                            mc->holonomic = 0;
                    }
        }
    }
    free(in), free(work), free(psi), free(dpsi), free(a), free(da);
    return 0;
}

/* ---- the closure of the distribution ---- */

struct hol {
    struct engine_model *m;
    expr_ctx *c;
    int n, N, ext;
    int nsym;
    double *vals[HOL_POINTS];  /* symbol values of each point */
    double *basis[HOL_POINTS]; /* orthonormal rows [N*N] */
    int rank[HOL_POINTS];
    int *zsym; /* [N] symbol of z_k: q_k, then t */
};

static void point_values(struct hol *h, int p)
{
    struct engine_model *m = h->m;
    double *in = calloc(m->n_in, sizeof *in);
    if (!in)
        return;
    model_test_point(m, 31 + p, in);
    for (int s = 0; s < h->nsym; s++) {
        const expr_symbol *sym = expr_sym_get(h->c, s);
        double v = 0.0;
        switch (sym->cls) {
        case SYM_PARAM: v = in[sym->index]; break;
        case SYM_TIME: v = in[model_input_t(m)]; break;
        case SYM_COORD: v = in[model_input_q(m) + sym->index]; break;
        case SYM_VELOCITY: v = in[model_input_qd(m) + sym->index]; break;
        default: v = 0.0; break;
        }
        h->vals[p][s] = v;
    }
    free(in);
}

/* Adds v (length N) to the basis of point p if it is independent; returns 1 if so. */
static int span_add(struct hol *h, int p, const double *v0)
{
    int N = h->N;
    double v[64], norm0 = 0.0;
    for (int i = 0; i < N; i++) {
        v[i] = v0[i];
        norm0 += v[i] * v[i];
    }
    if (!(norm0 > 0.0) || !isfinite(norm0))
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
    if (!(norm > HOL_RANK_TOL * HOL_RANK_TOL * norm0))
        return 0;
    norm = sqrt(norm);
    double *e = h->basis[p] + (size_t)h->rank[p] * N;
    for (int i = 0; i < N; i++)
        e[i] = v[i] / norm;
    h->rank[p]++;
    return 1;
}

/* Offers a field to the span at every point; kept when it adds at two points or more
 * (a generic bracket adds everywhere but on a thin set). */
static int offer(struct hol *h, expr **field)
{
    double v[HOL_POINTS][64];
    for (int p = 0; p < HOL_POINTS; p++)
        for (int i = 0; i < h->N; i++)
            v[p][i] = expr_eval(h->c, field[i], h->vals[p]);
    int saved[HOL_POINTS], adds = 0;
    for (int p = 0; p < HOL_POINTS; p++) {
        saved[p] = h->rank[p];
        adds += span_add(h, p, v[p]);
    }
    if (adds >= 2)
        return 1;
    for (int p = 0; p < HOL_POINTS; p++)
        h->rank[p] = saved[p];
    return 0;
}

/* [X, Y]_i = sum_k X_k dY_i/dz_k - Y_k dX_i/dz_k. */
static void bracket(struct hol *h, expr **X, expr **Y, expr **out)
{
    expr_ctx *c = h->c;
    int N = h->N;
    expr *terms[130];
    for (int i = 0; i < N; i++) {
        int nt = 0;
        for (int k = 0; k < N; k++) {
            if (!expr_is_num(X[k], 0.0) && expr_depends(Y[i], h->zsym[k]))
                terms[nt++] = expr_mul(c, X[k], expr_diff(c, Y[i], h->zsym[k]));
            if (!expr_is_num(Y[k], 0.0) && expr_depends(X[i], h->zsym[k]))
                terms[nt++] = expr_neg(c, expr_mul(c, Y[k], expr_diff(c, X[i], h->zsym[k])));
        }
        out[i] = expr_expand(c, expr_sum(c, terms, nt), HOL_MAX_TERMS);
    }
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
static int annihilator(struct hol *h, int p, int *rows, int nl, expr ***Y, int nb, double *out)
{
    struct engine_model *m = h->m;
    int n = h->n, N = h->N;
    double *A = calloc((size_t)nl * N + 1, sizeof *A), *B = calloc((size_t)(nb + 1) * nl, sizeof *B);
    int *pivcol = calloc(nl + 1, sizeof *pivcol), *isp = calloc(nl + 1, sizeof *isp);
    int cnt = 0;
    if (!A || !B || !pivcol || !isp)
        goto done;
    for (int j = 0; j < nl; j++) {
        for (int i = 0; i < n; i++)
            A[j * N + i] = expr_eval(h->c, m->psi[(size_t)rows[j] * n + i], h->vals[p]);
        if (h->ext)
            A[j * N + n] = expr_eval(h->c, m->psi_t[rows[j]], h->vals[p]);
    }
    double bmax = 0.0;
    for (int b = 0; b < nb; b++)
        for (int j = 0; j < nl; j++) {
            double s = 0.0;
            for (int i = 0; i < N; i++)
                s += A[j * N + i] * expr_eval(h->c, Y[b][i], h->vals[p]);
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
    free(A), free(B), free(pivcol), free(isp);
    return cnt;
}

static json_t *printed(const expr_ctx *c, const expr *e)
{
    char *s = expr_print(c, e);
    json_t *j = json_string(s ? s : "");
    free(s);
    return j;
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
    expr **terms = calloc(nl + 1, sizeof *terms), **form = calloc(n + 2, sizeof *form);
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
    json_object_set_new(o, "expr", printed(c, f));
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
        json_t *integral = printed(c, expr_expand(c, expr_sum(c, terms, nt), HOL_MAX_TERMS));
        json_object_set_new(o, "integral", integral);
    } else {
        json_object_set_new(o, "integral", json_null());
    }
    free(terms), free(form);
    return o;
}

json_t *holonomy_analyse(struct engine_model *m, const reduce_result *red)
{
    int n = m->n, k = m->k, nl = m->nlin;
    json_t *out = json_object();
    json_t *space = json_array();
    int ext = 0;
    for (int j = 0; j < m->nc; j++)
        if (m->cons[j].linear && m->cons[j].rheonomic)
            ext = 1;
    for (int i = 0; i < n; i++)
        json_array_append_new(space, json_string(m->coords[i]));
    if (ext)
        json_array_append_new(space, json_string("t"));
    json_object_set_new(
        out, "method",
        json_string("involutive closure of the constraint distribution: iterated Lie brackets, "
                    "symbolic, ranks at 3 generic configurations"));
    json_object_set_new(out, "space", space);
    json_t *excl = json_array();
    for (int j = 0; j < m->nc; j++)
        if (!m->cons[j].linear)
            json_array_append_new(excl, json_string(m->cons[j].name));
    json_object_set_new(out, "excluded_nonlinear", excl);
    int N = n + ext;
    if (nl == 0) {
        json_object_set_new(out, "complete", json_true());
        json_object_set_new(out, "distribution_rank", json_integer(N));
        json_object_set_new(out, "closure_rank", json_integer(N));
        json_object_set_new(out, "bracket_order", json_integer(1));
        json_object_set_new(out, "integrable_combinations", json_integer(0));
        json_object_set_new(out, "nonholonomic_constraints", json_integer(0));
        json_object_set_new(out, "combinations", json_array());
        return out;
    }
    if (!red->have_phi || n > HOL_MAX_N || N > 63) {
        json_object_set_new(out, "complete", json_false());
        json_object_set_new(
            out, "reason",
            json_string(n > HOL_MAX_N || N > 63 ? "more coordinates than the analysis takes (24)"
                        : m->nlin != m->nc      ? "the model has nonlinear constraints: the "
                                                  "distribution of its linear ones has no symbolic "
                                                  "basis here"
                                                : "Phi was not found symbolically within the "
                                                  "budget"));
        return out;
    }
    struct hol h = {0};
    h.m = m;
    h.c = m->ctx;
    h.n = n;
    h.N = N;
    h.ext = ext;
    h.nsym = expr_sym_count(m->ctx);
    int ok = 1;
    h.zsym = calloc(N, sizeof *h.zsym);
    for (int p = 0; p < HOL_POINTS; p++) {
        h.vals[p] = calloc(h.nsym + 1, sizeof *h.vals[p]);
        h.basis[p] = calloc((size_t)N * N, sizeof *h.basis[p]);
        ok &= h.vals[p] && h.basis[p];
    }
    int maxf = N + k + 2;
    expr ***fields = calloc(maxf, sizeof *fields);
    int *level = calloc(maxf, sizeof *level);
    int *rows = calloc(nl + 1, sizeof *rows), *cons_of_row = calloc(nl + 1, sizeof *cons_of_row);
    expr **sub = calloc(h.nsym + 1, sizeof *sub);
    double *cvs = calloc((size_t)HOL_POINTS * (nl + 1) * (nl + 1), sizeof *cvs);
    if (!ok || !h.zsym || !fields || !level || !rows || !cons_of_row || !sub || !cvs)
        goto done;
    for (int i = 0; i < n; i++)
        h.zsym[i] = m->sym_q[i];
    if (ext)
        h.zsym[n] = m->sym_t;
    for (int p = 0; p < HOL_POINTS; p++)
        point_values(&h, p);
    for (int j = 0, r = 0; j < m->nc; j++)
        if (m->cons[j].linear) {
            rows[r] = m->cons[j].row;
            cons_of_row[r++] = j;
        }

    /* the generators: columns of Phi_S, and (Phi_t, 1) in (q, t) */
    expr_ctx *c = m->ctx;
    int nf = 0, ngen = 0;
    for (int r = 0; r < k + ext; r++) {
        expr **f = calloc(N, sizeof *f);
        if (!f)
            goto done;
        if (r < k) {
            for (int i = 0; i < n; i++)
                f[i] = red->phi[(size_t)i * n + r];
        } else {
            for (int s = 0; s < k; s++)
                sub[m->sym_u[s]] = expr_num(c, 0.0);
            for (int i = 0; i < n; i++)
                f[i] = expr_expand(c, expr_subst(c, red->kin[i], sub, h.nsym), HOL_MAX_TERMS);
            f[n] = expr_num(c, 1.0);
        }
        if (ext && r < k)
            f[n] = expr_num(c, 0.0);
        if (offer(&h, f)) {
            level[nf] = 1;
            fields[nf++] = f;
        } else {
            free(f);
        }
    }
    ngen = nf;
    int drank = nf, order = 1, complete = 1, cur0 = 0, cur1 = nf;
    double t0 = seconds();
    while (nf < N && complete) {
        int added = 0;
        for (int g = 0; g < ngen && nf < N && complete; g++)
            for (int y = cur0; y < cur1 && nf < N && complete; y++) {
                expr **b = calloc(N, sizeof *b);
                if (!b)
                    goto done;
                bracket(&h, fields[g], fields[y], b);
                if (expr_ctx_overflow(c) || seconds() - t0 > HOL_MAX_SECONDS) {
                    complete = 0;
                    free(b);
                    break;
                }
                if (offer(&h, b)) {
                    level[nf] = order + 1;
                    fields[nf++] = b;
                    added = 1;
                } else {
                    free(b);
                }
            }
        if (!added)
            break;
        order++;
        cur0 = cur1;
        cur1 = nf;
    }
    int hcount = N - nf;
    json_object_set_new(out, "complete", json_boolean(complete));
    if (!complete)
        json_object_set_new(out, "reason",
                            json_string("the brackets exceeded the time or node budget: the closure "
                                        "rank is a lower bound"));
    json_object_set_new(out, "distribution_rank", json_integer(drank));
    json_object_set_new(out, "closure_rank", json_integer(nf));
    json_object_set_new(out, "bracket_order", json_integer(nf ? level[nf - 1] : 0));
    json_object_set_new(out, "integrable_combinations", json_integer(hcount));
    json_object_set_new(out, "nonholonomic_constraints", json_integer(nl - hcount));
    json_t *combos = json_array();
    if (complete && hcount > 0) {
        int got[HOL_POINTS];
        for (int p = 0; p < HOL_POINTS; p++)
            got[p] =
                annihilator(&h, p, rows, nl, fields + drank, nf - drank, cvs + (size_t)p * (nl + 1) * nl);
        for (int q = 0; q < got[0]; q++) {
            const double *c0 = cvs + (size_t)q * nl;
            int constant = got[1] == got[0] && got[2] == got[0];
            double scale = 0.0;
            for (int j = 0; j < nl; j++)
                scale = fmax(scale, fabs(c0[j]));
            for (int p = 1; p < HOL_POINTS && constant; p++)
                for (int j = 0; j < nl; j++)
                    if (fabs(cvs[(size_t)p * (nl + 1) * nl + (size_t)q * nl + j] - c0[j]) >
                        HOL_CONST_TOL * scale)
                        constant = 0;
            json_array_append_new(combos, combination(&h, rows, cons_of_row, nl, c0, constant));
        }
    }
    json_object_set_new(out, "combinations", combos);
done:
    for (int f = 0; fields && f < maxf; f++)
        free(fields[f]);
    free(fields);
    free(level);
    free(rows);
    free(cons_of_row);
    free(sub);
    free(cvs);
    free(h.zsym);
    for (int p = 0; p < HOL_POINTS; p++) {
        free(h.vals[p]);
        free(h.basis[p]);
    }
    return out;
}
