/* reduce.c — symbolic reduction of the equations to the speeds (reduce.h). */
#include "reduce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Expansion into monomials is what makes trigonometric identities cancel and small
 * results read like a textbook's, but its cost grows with the product of the sizes of
 * the factors: it is applied only to expressions of at most REDUCE_EXPAND_TREE nodes
 * written out as a tree, and stops at REDUCE_MAX_TERMS terms per product. Larger
 * expressions stay DAGs of shared sub-expressions (the tapes evaluate each once);
 * zeros are decided numerically whatever the form (expr_is_zero). */
#define REDUCE_MAX_TERMS 64
#define REDUCE_EXPAND_TREE 400
#define REDUCE_MAX_SECONDS 0.3 /* CPU seconds; past them the reduction gives up: numeric Phi */
#define REDUCE_MAX_ADJUGATE 4  /* largest expression block inverted through its adjugate */

static expr *cofactor(expr_ctx *c, expr **S, int s, int i, int j);

static expr *simp(expr_ctx *c, expr *e)
{
    if (expr_tree_size(c, e) <= REDUCE_EXPAND_TREE)
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

/* The thread's CPU time: whether a model reduces symbolically should not depend on
 * how loaded the machine is (the wall-clock deadline of the compile budget, budget.h,
 * bounds the elapsed time). */
static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Past the node budget or the time budget (both keep compilation of a hostile model
 * bounded; the numeric path needs neither). */
struct reduce_budget {
    size_t nodes;    /* the context may grow to this many nodes */
    double deadline; /* monotonic seconds */
};

static int over_budget(expr_ctx *c, const struct reduce_budget *b)
{
    return expr_ctx_overflow(c) || expr_ctx_nodes(c) > b->nodes || seconds() > b->deadline;
}

/* ---- the block-triangular structure of Psi ---- */

/* Kuhn's augmenting path from row i; match_col[j] = row matched to column j. */
static int augment(int n, const unsigned char *nz, int i, int *match_col, unsigned char *seen)
{
    for (int j = 0; j < n; j++) {
        if (!nz[i * n + j] || seen[j])
            continue;
        seen[j] = 1;
        if (match_col[j] < 0 || augment(n, nz, match_col[j], match_col, seen)) {
            match_col[j] = i;
            return 1;
        }
    }
    return 0;
}

struct tarjan {
    int n;
    const unsigned char *nz;
    const int *col_of; /* the column matched to each row */
    const int *row_of; /* the row matched to each column */
    int *index, *low, *stack, *on_stack, *block;
    int next, sp, nblocks;
};

/* Rows are nodes; row i -> row r when row i has a nonzero in the column matched to r.
 * Components come out sinks first: a component's rows have nonzeros only in its own
 * columns and those of components already out. */
static void strong(struct tarjan *t, int v)
{
    t->index[v] = t->low[v] = t->next++;
    t->stack[t->sp++] = v;
    t->on_stack[v] = 1;
    for (int j = 0; j < t->n; j++) {
        if (!t->nz[v * t->n + j])
            continue;
        int w = t->row_of[j];
        if (t->index[w] < 0) {
            strong(t, w);
            if (t->low[w] < t->low[v])
                t->low[v] = t->low[w];
        } else if (t->on_stack[w] && t->index[w] < t->low[v]) {
            t->low[v] = t->index[w];
        }
    }
    if (t->low[v] == t->index[v]) {
        int w;
        do {
            w = t->stack[--t->sp];
            t->on_stack[w] = 0;
            t->block[w] = t->nblocks;
        } while (w != v);
        t->nblocks++;
    }
}

int reduce_block_triangular(int n, const unsigned char *nz, int *block, int *col_of)
{
    int *row_of = malloc(n * sizeof *row_of), *ws = malloc(5 * (size_t)n * sizeof *ws);
    unsigned char *seen = malloc(n);
    int rc = -1;
    if (!row_of || !ws || !seen)
        goto done;
    for (int j = 0; j < n; j++)
        row_of[j] = -1;
    /* rows with a single nonzero first is what Kuhn's algorithm does anyway; a perfect
     * matching exists iff every row augments */
    rc = 0;
    for (int i = 0; i < n; i++) {
        memset(seen, 0, n);
        if (!augment(n, nz, i, row_of, seen))
            goto done;
    }
    for (int j = 0; j < n; j++)
        col_of[row_of[j]] = j;
    struct tarjan t = {n, nz, col_of, row_of, ws, ws + n, ws + 2 * n, ws + 3 * n, block, 0, 0, 0};
    for (int i = 0; i < n; i++) {
        t.index[i] = -1;
        t.on_stack[i] = 0;
    }
    for (int i = 0; i < n; i++)
        if (t.index[i] < 0)
            strong(&t, i);
    rc = t.nblocks;
done:
    free(row_of);
    free(ws);
    free(seen);
    return rc;
}

/* Row i of [a | b] -= f * row p, skipping the zeros of row p. */
static void row_update(expr_ctx *c, int n, expr **a, expr **b, int i, int p, expr *f)
{
    for (int j = 0; j < n; j++) {
        if (!expr_is_num(a[p * n + j], 0.0))
            a[i * n + j] = simp(c, expr_sub(c, a[i * n + j], expr_mul(c, f, a[p * n + j])));
        if (!expr_is_num(b[p * n + j], 0.0))
            b[i * n + j] = simp(c, expr_sub(c, b[i * n + j], expr_mul(c, f, b[p * n + j])));
    }
}

/* Inverts the s x s sub-block (rows[], cols[]) of a through its adjugate, so that the
 * only division is by its determinant, and eliminates its columns from every other
 * row. Returns 0, -1 (determinant identically zero) or -2 (allocation). */
static int adjugate_step(expr_ctx *c, int n, expr **a, expr **b, int s, const int *rows, const int *cols,
                         int *det_numeric)
{
    expr *S[REDUCE_MAX_ADJUGATE * REDUCE_MAX_ADJUGATE];
    for (int x = 0; x < s; x++)
        for (int y = 0; y < s; y++)
            S[x * s + y] = a[rows[x] * n + cols[y]];
    expr *det = simp(c, determinant(c, S, s));
    if (expr_is_num(det, 0.0))
        return -1;
    *det_numeric = det->kind == EXPR_NUM;
    expr *inv_det = expr_powi(c, det, -1);
    expr *Sinv[REDUCE_MAX_ADJUGATE * REDUCE_MAX_ADJUGATE];
    for (int x = 0; x < s; x++)
        for (int y = 0; y < s; y++)
            Sinv[x * s + y] = simp(c, expr_mul(c, cofactor(c, S, s, y, x), inv_det));
    expr **na = malloc((size_t)s * n * sizeof *na), **nb = malloc((size_t)s * n * sizeof *nb);
    expr *terms[REDUCE_MAX_ADJUGATE];
    if (!na || !nb) {
        free(na);
        free(nb);
        return -2;
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
    for (int i = 0; i < n; i++) {
        int inblock = 0;
        for (int x = 0; x < s; x++)
            inblock |= rows[x] == i;
        if (inblock)
            continue;
        for (int x = 0; x < s; x++) {
            expr *f = a[i * n + cols[x]];
            if (!expr_is_num(f, 0.0))
                row_update(c, n, a, b, i, rows[x], f);
        }
    }
    return 0;
}

/* The state of the Gauss–Jordan elimination of invert: A and B (starting from Psi and
 * I), the rows and columns used, and the rows and columns of the current block. */
struct gauss {
    expr_ctx *c;
    int n;
    expr **a, **b;
    int *row_used, *col_used, *col_of_row;
    int *brows, *bcols, size;
};

/* The largest nonzero numeric pivot of the block's unused rows and columns; *pr < 0 when
 * there is none. */
static void numeric_pivot(const struct gauss *G, int *pr, int *pc)
{
    double big = 0.0;
    *pr = *pc = -1;
    for (int x = 0; x < G->size; x++) {
        int i = G->brows[x];
        if (G->row_used[i])
            continue;
        for (int y = 0; y < G->size; y++) {
            int j = G->bcols[y];
            expr *e = G->a[i * G->n + j];
            if (G->col_used[j] || e->kind != EXPR_NUM || e->num == 0.0)
                continue;
            double v = e->num < 0 ? -e->num : e->num;
            if (v > big) {
                big = v;
                *pr = i;
                *pc = j;
            }
        }
    }
}

/* The simplest (by weight) expression pivot that is not zero; *pr < 0 when there is none. */
static void expr_pivot(const struct gauss *G, int *pr, int *pc)
{
    size_t best = (size_t)-1;
    for (int x = 0; x < G->size; x++) {
        int i = G->brows[x];
        if (G->row_used[i])
            continue;
        for (int y = 0; y < G->size; y++) {
            int j = G->bcols[y];
            expr *e = G->a[i * G->n + j];
            if (G->col_used[j] || expr_is_num(e, 0.0) || expr_is_zero(G->c, e))
                continue;
            size_t w = weight(e);
            if (w < best) {
                best = w;
                *pr = i;
                *pc = j;
            }
        }
    }
}

/* The last `left` rows of the block by the adjugate of what remains. Returns 0, or the
 * adjugate step's error; *det_numeric says whether its determinant is a number. */
static int adjugate_rest(struct gauss *G, int left, int *det_numeric)
{
    int rows[REDUCE_MAX_ADJUGATE], cols[REDUCE_MAX_ADJUGATE], t = 0, u = 0;
    for (int x = 0; x < G->size; x++) {
        if (!G->row_used[G->brows[x]])
            rows[t++] = G->brows[x];
        if (!G->col_used[G->bcols[x]])
            cols[u++] = G->bcols[x];
    }
    int ar = adjugate_step(G->c, G->n, G->a, G->b, left, rows, cols, det_numeric);
    if (ar < 0)
        return ar;
    for (int x = 0; x < left; x++) {
        G->row_used[rows[x]] = 1;
        G->col_used[cols[x]] = 1;
        G->col_of_row[rows[x]] = cols[x];
    }
    return 0;
}

/* Pivot (pr, pc): its row divided by it, its column eliminated from the other rows. */
static void pivot_on(struct gauss *G, int pr, int pc)
{
    expr_ctx *c = G->c;
    int n = G->n;
    expr **a = G->a, **b = G->b;
    G->row_used[pr] = 1;
    G->col_used[pc] = 1;
    G->col_of_row[pr] = pc;
    expr *inv = expr_powi(c, a[pr * n + pc], -1);
    for (int j = 0; j < n; j++) {
        if (!expr_is_num(a[pr * n + j], 0.0))
            a[pr * n + j] = simp(c, expr_mul(c, a[pr * n + j], inv));
        if (!expr_is_num(b[pr * n + j], 0.0))
            b[pr * n + j] = simp(c, expr_mul(c, b[pr * n + j], inv));
    }
    for (int i = 0; i < n; i++) {
        expr *f = a[i * n + pc];
        if (i != pr && !expr_is_num(f, 0.0))
            row_update(c, n, a, b, i, pr, f);
    }
}

/* The elimination of one block (G->brows, G->bcols): numeric pivots first, then the
 * adjugate of a small rest, else the simplest expression pivot. Returns 0, -1
 * (singular), -2 (budget). */
static int invert_block(struct gauss *G, const struct reduce_budget *budget, reduce_result *r)
{
    int expr_pivots = 0;
    for (int left = G->size; left > 0;) {
        int pr, pc;
        numeric_pivot(G, &pr, &pc);
        if (pr < 0 && left > 1 && left <= REDUCE_MAX_ADJUGATE) {
            int det_numeric = 0;
            int ar = adjugate_rest(G, left, &det_numeric);
            if (ar < 0)
                return ar;
            if (!det_numeric) {
                expr_pivots++;
                r->pivots_expr++;
            }
            break;
        }
        if (pr < 0) {
            expr_pivot(G, &pr, &pc);
            if (pr < 0)
                return -1;
            expr_pivots++;
            r->pivots_expr++;
            r->pivot_expr = G->a[pr * G->n + pc];
        }
        pivot_on(G, pr, pc);
        left--;
        if (over_budget(G->c, budget))
            return -2;
    }
    if (expr_pivots > r->worst_block_pivots)
        r->worst_block_pivots = expr_pivots;
    return 0;
}

/* Gauss–Jordan block by block in the block-triangular order of Psi's pattern: within
 * a block, nonzero numeric pivots first, then (at most REDUCE_MAX_ADJUGATE rows left)
 * the adjugate of what remains, else the simplest expression pivot. A block's rows
 * have, after the blocks before it, nonzeros only in its own columns, so its pivots
 * multiply to its own determinant: with at most one expression pivot (or one
 * adjugate) per block, every division is by a factor of det Psi. Returns 0, -1
 * (singular), -2 (budget). */
static int invert(struct engine_model *m, const struct reduce_budget *budget, reduce_result *r)
{
    expr_ctx *c = m->ctx;
    int n = m->n;
    size_t nn = (size_t)n * n;
    expr **a = malloc(nn * sizeof *a), **b = malloc(nn * sizeof *b);
    int *row_used = calloc(n, sizeof *row_used), *col_of_row = calloc(n, sizeof *col_of_row);
    int *col_used = calloc(n, sizeof *col_used), *block = calloc(n, sizeof *block);
    int *matched = calloc(n, sizeof *matched), *brows = calloc(n, sizeof *brows),
        *bcols = calloc(n, sizeof *bcols);
    unsigned char *nz = calloc(nn, 1);
    int rc = -1;
    if (!a || !b || !row_used || !col_of_row || !col_used || !block || !matched || !nz || !brows || !bcols)
        goto done;
    for (size_t i = 0; i < nn; i++) {
        a[i] = simp(c, m->psi[i]);
        b[i] = expr_num(c, i / n == i % n ? 1.0 : 0.0);
        nz[i] = !expr_is_num(a[i], 0.0);
    }
    int nblocks = reduce_block_triangular(n, nz, block, matched);
    if (nblocks <= 0) {
        rc = nblocks < 0 ? -2 : -1;
        goto done;
    }
    r->blocks = nblocks;
    struct gauss G = {c, n, a, b, row_used, col_used, col_of_row, brows, bcols, 0};
    for (int blk = 0; blk < nblocks; blk++) {
        G.size = 0; /* the block's rows and their matched columns */
        for (int i = 0; i < n; i++)
            if (block[i] == blk) {
                brows[G.size] = i;
                bcols[G.size++] = matched[i];
            }
        if (G.size > r->largest_block)
            r->largest_block = G.size;
        int br = invert_block(&G, budget, r);
        if (br < 0) {
            rc = br;
            goto done;
        }
    }
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
    free(col_used);
    free(block);
    free(matched);
    free(brows);
    free(bcols);
    free(nz);
    return rc;
}

/* What reduce_derive builds the reduced equations from. */
struct reduce_work {
    struct engine_model *m;
    expr_ctx *c;
    reduce_result *r;
    const struct reduce_budget *budget;
    int n, k, ns;
    expr **sub;   /* q'_i -> K_i */
    expr **terms; /* [2n + 2] scratch */
    expr **p;     /* [n] dT/dq' */
    expr **a;     /* [n] Phi D(Psi q' + Psi_t) */
    expr **h;     /* [n] g + M a */
    expr **Mq;    /* [n*n] M on the kinematics */
};

/* The kinematics q' = K(q, u, t) = Phi_S u - Phi Psi_t, and T* = T(q, K, t). 1 when over
 * the budget. */
static int reduce_kinematics(struct reduce_work *W)
{
    struct engine_model *m = W->m;
    expr_ctx *c = W->c;
    reduce_result *r = W->r;
    int n = W->n, k = W->k;
    for (int i = 0; i < n; i++) {
        int t = 0;
        for (int s = 0; s < k; s++)
            W->terms[t++] = expr_mul(c, r->phi[i * n + s], expr_sym(c, m->sym_u[s]));
        for (int j = 0; j < n; j++)
            W->terms[t++] = expr_neg(c, expr_mul(c, r->phi[i * n + j], m->psi_t[j]));
        r->kin[i] = simp(c, expr_sum(c, W->terms, t));
    }
    for (int i = 0; i < n; i++)
        W->sub[m->sym_qd[i]] = r->kin[i];
    if (over_budget(c, W->budget))
        return 1;
    r->tstar = simp(c, expr_subst(c, m->T, W->sub, W->ns));
    return 0;
}

/* M and a = Phi b, b = D(Psi q' + Psi_t), of the unreduced system on the kinematics.
 * -1 when out of memory. */
static int reduce_mass_and_a(struct reduce_work *W)
{
    struct engine_model *m = W->m;
    expr_ctx *c = W->c;
    int n = W->n, k = W->k, ns = W->ns;
    for (int i = 0; i < n; i++)
        W->p[i] = expr_diff(c, m->T, m->sym_qd[i]);
    for (int i = 0; i < n; i++)
        for (int l = 0; l < n; l++)
            W->Mq[i * n + l] = simp(c, expr_subst(c, expr_diff(c, W->p[i], m->sym_qd[l]), W->sub, ns));
    expr **b = calloc(n, sizeof *b);
    if (!b)
        return -1;
    for (int s = 0; s < k; s++)
        b[s] = expr_subst(c, expr_dt(c, m->speed_f[s]), W->sub, ns);
    for (int j = 0; j < m->nc; j++)
        b[m->cons[j].row] = expr_subst(c, expr_dt(c, m->cons[j].f), W->sub, ns);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++)
            W->terms[j] = expr_mul(c, W->r->phi[i * n + j], b[j]);
        W->a[i] = simp(c, expr_sum(c, W->terms, n));
    }
    free(b);
    return 0;
}

/* h = g + M a. 1 when over the budget. */
static int reduce_h(struct reduce_work *W)
{
    struct engine_model *m = W->m;
    expr_ctx *c = W->c;
    int n = W->n;
    for (int i = 0; i < n; i++) {
        expr *g = expr_sub(c, m->Q[i], expr_diff(c, m->V, m->sym_q[i]));
        g = expr_add(c, g, expr_diff(c, m->T, m->sym_q[i]));
        g = expr_sub(c, g, expr_dt(c, W->p[i]));
        g = expr_subst(c, g, W->sub, W->ns);
        for (int l = 0; l < n; l++)
            W->terms[l] = expr_mul(c, W->Mq[i * n + l], W->a[l]);
        W->terms[n] = g;
        W->h[i] = simp(c, expr_sum(c, W->terms, n + 1));
        if (over_budget(c, W->budget))
            return 1;
    }
    return 0;
}

/* M* = Phi_S^T M Phi_S and the forcing Phi_S^T h: MP = M Phi_S first (n x k), then M* =
 * Phi_S^T MP: O(n^2 k + n k^2) products instead of O(n^2 k^2), each over the nonzeros
 * only. -1 when out of memory, 1 when over the budget. */
static int reduce_reduced(struct reduce_work *W)
{
    expr_ctx *c = W->c;
    reduce_result *r = W->r;
    int n = W->n, k = W->k;
    expr **terms = W->terms;
    expr **MP = calloc((size_t)n * k + 1, sizeof *MP);
    if (!MP)
        return -1;
    for (int i = 0; i < n; i++)
        for (int s = 0; s < k; s++) {
            int t = 0;
            for (int l = 0; l < n; l++)
                if (!expr_is_num(W->Mq[i * n + l], 0.0) && !expr_is_num(r->phi[l * n + s], 0.0))
                    terms[t++] = expr_mul(c, W->Mq[i * n + l], r->phi[l * n + s]);
            MP[i * k + s] = simp(c, expr_sum(c, terms, t));
        }
    for (int s = 0; s < k; s++) {
        int t = 0;
        for (int i = 0; i < n; i++)
            if (!expr_is_num(r->phi[i * n + s], 0.0))
                terms[t++] = expr_mul(c, r->phi[i * n + s], W->h[i]);
        r->forcing[s] = simp(c, expr_sum(c, terms, t));
        for (int s2 = 0; s2 <= s; s2++) {
            t = 0;
            for (int i = 0; i < n; i++)
                if (!expr_is_num(r->phi[i * n + s], 0.0) && !expr_is_num(MP[i * k + s2], 0.0))
                    terms[t++] = expr_mul(c, r->phi[i * n + s], MP[i * k + s2]);
            r->mass[s * k + s2] = r->mass[s2 * k + s] = simp(c, expr_sum(c, terms, t));
        }
        if (over_budget(c, W->budget)) {
            free(MP);
            return 1;
        }
    }
    free(MP);
    return 0;
}

int reduce_derive(struct engine_model *m, size_t node_budget, reduce_result *r)
{
    memset(r, 0, sizeof *r);
    expr_ctx *c = m->ctx;
    int n = m->n, k = m->k;
    struct reduce_budget bud = {expr_ctx_nodes(c) + node_budget, seconds() + REDUCE_MAX_SECONDS};
    r->phi = calloc((size_t)n * n, sizeof *r->phi);
    r->kin = calloc(n, sizeof *r->kin);
    r->mass = calloc((size_t)k * k, sizeof *r->mass);
    r->forcing = calloc(k, sizeof *r->forcing);
    int ns = expr_sym_count(c);
    struct reduce_work W = {.m = m, .c = c, .r = r, .budget = &bud, .n = n, .k = k, .ns = ns};
    W.sub = calloc(ns + 1, sizeof *W.sub);
    W.terms = calloc((size_t)2 * n + 2, sizeof *W.terms);
    W.p = calloc(n, sizeof *W.p), W.a = calloc(n, sizeof *W.a), W.h = calloc(n, sizeof *W.h);
    W.Mq = calloc((size_t)n * n, sizeof *W.Mq);
    int rc = -1;
    if (!r->phi || !r->kin || !r->mass || !r->forcing || !W.sub || !W.terms || !W.p || !W.a || !W.h || !W.Mq)
        goto done;
    if (m->nlin != m->nc) {
        snprintf(r->why, sizeof r->why, "the model has constraints nonlinear in the velocities");
        rc = 0;
        goto done;
    }
    int inv = invert(m, &bud, r);
    if (inv < 0) {
        snprintf(r->why, sizeof r->why, "%s",
                 inv == -1 ? "Psi has no symbolic inverse (every candidate pivot vanishes identically)"
                           : "Phi = Psi^-1 exceeds the expression node or time budget");
        rc = 0;
        goto done;
    }
    r->have_phi = 1;
    r->exact = r->worst_block_pivots <= 1;
    int st = reduce_kinematics(&W);
    if (st == 0)
        st = reduce_mass_and_a(&W) < 0 ? -1 : reduce_h(&W);
    if (st == 0)
        st = reduce_reduced(&W);
    if (st < 0)
        goto done;
    if (st > 0) {
        /* Some of kin, mass and forcing are missing: report none of them. */
        r->exact = 0;
        r->have_phi = 0;
        snprintf(r->why, sizeof r->why, "the reduced equations exceed the expression node or time budget");
    }
    rc = 0;
done:
    free(W.sub);
    free(W.terms);
    free(W.p);
    free(W.a);
    free(W.h);
    free(W.Mq);
    return rc;
}
