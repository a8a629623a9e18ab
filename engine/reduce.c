/* reduce.c — symbolic reduction of the equations to the speeds (reduce.h). */
#include "reduce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REDUCE_MAX_TERMS 4000
#define REDUCE_MAX_SECONDS 0.3 /* past this the reduction gives up: numeric Phi instead */
#define REDUCE_MAX_ADJUGATE 4  /* largest expression block inverted through its adjugate */

static expr *cofactor(expr_ctx *c, expr **S, int s, int i, int j);

static expr *simp(expr_ctx *c, expr *e)
{
    e = expr_expand(c, e, REDUCE_MAX_TERMS);
    return expr_is_zero(c, e) ? expr_num(c, 0.0) : e;
}

void reduce_result_free(reduce_result *r)
{
    free(r->phi);
    free(r->kin);
    free(r->mass);
    free(r->forcing);
    memset(r, 0, sizeof *r);
}

static size_t weight(const expr *e)
{
    if (e->kind == EXPR_NUM)
        return 0;
    if (e->kind == EXPR_SYM)
        return 1;
    size_t w = 1;
    for (int i = 0; i < e->nargs && w < 100000; i++)
        w += weight(e->args[i]);
    return w;
}

/* The determinant of an s x s expression matrix by Laplace expansion (s is small). */
static expr *determinant(expr_ctx *c, expr **S, int s)
{
    if (s == 1)
        return S[0];
    expr *terms[REDUCE_MAX_ADJUGATE];
    for (int j = 0; j < s; j++) {
        expr *cof = cofactor(c, S, s, 0, j);
        terms[j] = expr_mul(c, S[j], cof);
    }
    return expr_sum(c, terms, s);
}

/* The (i, j) cofactor: (-1)^(i+j) times the minor without row i and column j. */
static expr *cofactor(expr_ctx *c, expr **S, int s, int i, int j)
{
    if (s == 1)
        return expr_num(c, 1.0);
    expr *minor[REDUCE_MAX_ADJUGATE * REDUCE_MAX_ADJUGATE];
    int t = 0;
    for (int x = 0; x < s; x++)
        for (int y = 0; y < s; y++)
            if (x != i && y != j)
                minor[t++] = S[x * s + y];
    expr *d = determinant(c, minor, s - 1);
    return (i + j) % 2 ? expr_neg(c, d) : d;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Past the node budget or the time budget (both keep compilation of a hostile model
 * bounded; the numeric path needs neither). */
struct budget {
    size_t nodes;    /* the context may grow to this many nodes */
    double deadline; /* monotonic seconds */
};

static int over_budget(expr_ctx *c, const struct budget *b)
{
    return expr_ctx_overflow(c) || expr_ctx_nodes(c) > b->nodes || seconds() > b->deadline;
}

/* Gauss–Jordan with numeric pivots first. Returns 0, -1 (singular), -2 (budget). */
static int invert(struct engine_model *m, const struct budget *budget, reduce_result *r)
{
    expr_ctx *c = m->ctx;
    int n = m->n;
    size_t nn = (size_t)n * n;
    expr **a = malloc(nn * sizeof *a), **b = malloc(nn * sizeof *b);
    int *row_used = calloc(n, sizeof *row_used), *col_of_row = calloc(n, sizeof *col_of_row);
    int rc = -1;
    if (!a || !b || !row_used || !col_of_row)
        goto done;
    for (size_t i = 0; i < nn; i++) {
        a[i] = simp(c, m->psi[i]);
        b[i] = expr_num(c, i / n == i % n ? 1.0 : 0.0);
    }
    int *col_used = calloc(n, sizeof *col_used);
    if (!col_used)
        goto done;
    for (int step = 0; step < n; step++) {
        int pr = -1, pc = -1;
        size_t best = (size_t)-1;
        /* a numeric pivot if there is one (largest magnitude), else the simplest
         * expression that is not identically zero */
        double big = 0.0;
        for (int i = 0; i < n; i++) {
            if (row_used[i])
                continue;
            for (int j = 0; j < n; j++) {
                expr *e = a[i * n + j];
                if (col_used[j] || e->kind != EXPR_NUM || e->num == 0.0)
                    continue;
                double v = e->num < 0 ? -e->num : e->num;
                if (v > big) {
                    big = v;
                    pr = i;
                    pc = j;
                }
            }
        }
        if (pr < 0 && n - step <= REDUCE_MAX_ADJUGATE) {
            /* What is left is an s x s block of expressions: invert it through its
             * adjugate, so that the only division is by its determinant. */
            int s = n - step, rows[REDUCE_MAX_ADJUGATE] = {0}, cols[REDUCE_MAX_ADJUGATE] = {0};
            for (int i = 0, t = 0; i < n; i++)
                if (!row_used[i])
                    rows[t++] = i;
            for (int j = 0, t = 0; j < n; j++)
                if (!col_used[j])
                    cols[t++] = j;
            expr *S[REDUCE_MAX_ADJUGATE * REDUCE_MAX_ADJUGATE];
            for (int x = 0; x < s; x++)
                for (int y = 0; y < s; y++)
                    S[x * s + y] = a[rows[x] * n + cols[y]];
            expr *det = simp(c, determinant(c, S, s));
            if (expr_is_num(det, 0.0)) {
                rc = -1;
                free(col_used);
                goto done;
            }
            if (!(det->kind == EXPR_NUM)) {
                r->pivots_expr++;
                r->pivot_expr = det;
            }
            expr *inv_det = expr_powi(c, det, -1);
            expr *Sinv[REDUCE_MAX_ADJUGATE * REDUCE_MAX_ADJUGATE];
            for (int x = 0; x < s; x++)
                for (int y = 0; y < s; y++)
                    Sinv[x * s + y] = simp(c, expr_mul(c, cofactor(c, S, s, y, x), inv_det));
            /* rows of the block: multiply by Sinv */
            expr **na = malloc((size_t)s * n * sizeof *na), **nb = malloc((size_t)s * n * sizeof *nb);
            expr *terms[REDUCE_MAX_ADJUGATE];
            if (!na || !nb) {
                free(na);
                free(nb);
                free(col_used);
                goto done;
            }
            for (int x = 0; x < s; x++)
                for (int j = 0; j < n; j++) {
                    for (int y = 0; y < s; y++)
                        terms[y] = expr_mul(c, Sinv[x * s + y], a[rows[y] * n + j]);
                    na[x * n + j] = simp(c, expr_sum(c, terms, s));
                    for (int y = 0; y < s; y++)
                        terms[y] = expr_mul(c, Sinv[x * s + y], b[rows[y] * n + j]);
                    nb[x * n + j] = simp(c, expr_sum(c, terms, s));
                }
            for (int x = 0; x < s; x++)
                for (int j = 0; j < n; j++) {
                    a[rows[x] * n + j] = na[x * n + j];
                    b[rows[x] * n + j] = nb[x * n + j];
                }
            free(na);
            free(nb);
            /* eliminate the block's columns from the other rows */
            for (int i = 0; i < n; i++) {
                if (!row_used[i] && i != rows[0]) {
                    int inblock = 0;
                    for (int x = 0; x < s; x++)
                        inblock |= rows[x] == i;
                    if (inblock)
                        continue;
                }
                if (!row_used[i])
                    continue;
                for (int x = 0; x < s; x++) {
                    expr *f = a[i * n + cols[x]];
                    if (expr_is_num(f, 0.0))
                        continue;
                    for (int j = 0; j < n; j++) {
                        a[i * n + j] = simp(c, expr_sub(c, a[i * n + j], expr_mul(c, f, a[rows[x] * n + j])));
                        b[i * n + j] = simp(c, expr_sub(c, b[i * n + j], expr_mul(c, f, b[rows[x] * n + j])));
                    }
                }
            }
            for (int x = 0; x < s; x++) {
                row_used[rows[x]] = 1;
                col_used[cols[x]] = 1;
                col_of_row[rows[x]] = cols[x];
            }
            break;
        }
        if (pr < 0) {
            for (int i = 0; i < n; i++) {
                if (row_used[i])
                    continue;
                for (int j = 0; j < n; j++) {
                    expr *e = a[i * n + j];
                    if (col_used[j] || expr_is_num(e, 0.0) || expr_is_zero(c, e))
                        continue;
                    size_t w = weight(e);
                    if (w < best) {
                        best = w;
                        pr = i;
                        pc = j;
                    }
                }
            }
            if (pr < 0) {
                rc = -1;
                free(col_used);
                goto done;
            }
            r->pivots_expr++;
            r->pivot_expr = a[pr * n + pc];
        }
        row_used[pr] = 1;
        col_used[pc] = 1;
        col_of_row[pr] = pc;
        expr *inv = expr_powi(c, a[pr * n + pc], -1);
        for (int j = 0; j < n; j++) {
            a[pr * n + j] = simp(c, expr_mul(c, a[pr * n + j], inv));
            b[pr * n + j] = simp(c, expr_mul(c, b[pr * n + j], inv));
        }
        for (int i = 0; i < n; i++) {
            expr *f = a[i * n + pc];
            if (i == pr || expr_is_num(f, 0.0))
                continue;
            for (int j = 0; j < n; j++) {
                a[i * n + j] = simp(c, expr_sub(c, a[i * n + j], expr_mul(c, f, a[pr * n + j])));
                b[i * n + j] = simp(c, expr_sub(c, b[i * n + j], expr_mul(c, f, b[pr * n + j])));
            }
        }
        if (over_budget(c, budget)) {
            free(col_used);
            rc = -2;
            goto done;
        }
    }
    free(col_used);
    /* B Psi = P (the pivots' permutation): Phi row col_of_row[i] = B row i. */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            r->phi[col_of_row[i] * n + j] = b[i * n + j];
    rc = 0;
done:
    free(a);
    free(b);
    free(row_used);
    free(col_of_row);
    return rc;
}

int reduce_derive(struct engine_model *m, size_t node_budget, reduce_result *r)
{
    memset(r, 0, sizeof *r);
    expr_ctx *c = m->ctx;
    int n = m->n, k = m->k;
    struct budget bud = {expr_ctx_nodes(c) + node_budget, seconds() + REDUCE_MAX_SECONDS};
    const struct budget *budget = &bud;
    r->phi = calloc((size_t)n * n, sizeof *r->phi);
    r->kin = calloc(n, sizeof *r->kin);
    r->mass = calloc((size_t)k * k, sizeof *r->mass);
    r->forcing = calloc(k, sizeof *r->forcing);
    int ns = expr_sym_count(c);
    expr **sub = calloc(ns + 1, sizeof *sub);
    expr **terms = calloc((size_t)2 * n + 2, sizeof *terms);
    expr **p = calloc(n, sizeof *p), **a = calloc(n, sizeof *a), **h = calloc(n, sizeof *h);
    expr **Mq = calloc((size_t)n * n, sizeof *Mq);
    int rc = -1;
    if (!r->phi || !r->kin || !r->mass || !r->forcing || !sub || !terms || !p || !a || !h || !Mq)
        goto done;
    if (m->nlin != m->nc) {
        snprintf(r->why, sizeof r->why, "the model has constraints nonlinear in the velocities");
        rc = 0;
        goto done;
    }
    int inv = invert(m, budget, r);
    if (inv < 0) {
        snprintf(r->why, sizeof r->why, "%s",
                 inv == -1 ? "Psi has no symbolic inverse (every candidate pivot vanishes identically)"
                           : "Phi = Psi^-1 exceeds the expression node or time budget");
        rc = 0;
        goto done;
    }
    r->have_phi = 1;
    r->exact = r->pivots_expr <= 1;

    /* kinematics */
    for (int i = 0; i < n; i++) {
        int t = 0;
        for (int s = 0; s < k; s++)
            terms[t++] = expr_mul(c, r->phi[i * n + s], expr_sym(c, m->sym_u[s]));
        for (int j = 0; j < n; j++)
            terms[t++] = expr_neg(c, expr_mul(c, r->phi[i * n + j], m->psi_t[j]));
        r->kin[i] = simp(c, expr_sum(c, terms, t));
    }
    for (int i = 0; i < n; i++)
        sub[m->sym_qd[i]] = r->kin[i];
    r->tstar = simp(c, expr_subst(c, m->T, sub, ns));

    /* M, g, b of the unreduced system, then on the kinematics */
    for (int i = 0; i < n; i++)
        p[i] = expr_diff(c, m->T, m->sym_qd[i]);
    for (int i = 0; i < n; i++)
        for (int l = 0; l < n; l++)
            Mq[i * n + l] = simp(c, expr_subst(c, expr_diff(c, p[i], m->sym_qd[l]), sub, ns));
    /* a = Phi b, with b = D(Psi q' + Psi_t) */
    expr **b = calloc(n, sizeof *b);
    if (!b)
        goto done;
    for (int s = 0; s < k; s++)
        b[s] = expr_subst(c, expr_dt(c, m->speed_f[s]), sub, ns);
    for (int j = 0; j < m->nc; j++)
        b[m->cons[j].row] = expr_subst(c, expr_dt(c, m->cons[j].f), sub, ns);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++)
            terms[j] = expr_mul(c, r->phi[i * n + j], b[j]);
        a[i] = simp(c, expr_sum(c, terms, n));
    }
    free(b);
    /* h = g + M a */
    for (int i = 0; i < n; i++) {
        expr *g = expr_sub(c, m->Q[i], expr_diff(c, m->V, m->sym_q[i]));
        g = expr_add(c, g, expr_diff(c, m->T, m->sym_q[i]));
        g = expr_sub(c, g, expr_dt(c, p[i]));
        g = expr_subst(c, g, sub, ns);
        for (int l = 0; l < n; l++)
            terms[l] = expr_mul(c, Mq[i * n + l], a[l]);
        terms[n] = g;
        h[i] = simp(c, expr_sum(c, terms, n + 1));
        if (over_budget(c, budget))
            goto over;
    }
    for (int s = 0; s < k; s++) {
        for (int i = 0; i < n; i++)
            terms[i] = expr_mul(c, r->phi[i * n + s], h[i]);
        r->forcing[s] = simp(c, expr_sum(c, terms, n));
        for (int s2 = 0; s2 <= s; s2++) {
            expr **prod = calloc((size_t)n * n + 1, sizeof *prod);
            if (!prod)
                goto done;
            int t = 0;
            for (int i = 0; i < n; i++)
                for (int l = 0; l < n; l++)
                    if (!expr_is_num(Mq[i * n + l], 0.0))
                        prod[t++] = expr_product(
                            c, (expr *[]){r->phi[i * n + s], Mq[i * n + l], r->phi[l * n + s2]}, 3);
            r->mass[s * k + s2] = r->mass[s2 * k + s] = simp(c, expr_sum(c, prod, t));
            free(prod);
        }
        if (over_budget(c, budget))
            goto over;
    }
    rc = 0;
    goto done;
over:
    /* Some of kin, mass and forcing are missing: report none of them. */
    r->exact = 0;
    r->have_phi = 0;
    snprintf(r->why, sizeof r->why, "the reduced equations exceed the expression node or time budget");
    rc = 0;
done:
    free(sub);
    free(terms);
    free(p);
    free(a);
    free(h);
    free(Mq);
    return rc;
}
