/* simplify.c — expansion into a sum of monomials with trigonometric normalisation;
 * the tree size of an expression; factoring of sums before tapes are built.
 *
 * expr_expand distributes products over sums and multiplies out positive integer
 * powers of sums (up to the 12th), rewrites cos(x)^k (2 <= k <= 12) as
 * cos(x)^(k mod 2) (1 - sin(x)^2)^(k div 2), and
 * lets the sum and product constructors collect like terms. Polynomials in sin and cos
 * of the same argument then have one form, so identities such as
 * sin^2 + cos^2 = 1 cancel, and mechanical expressions (mass matrices, forcing terms)
 * shrink to what a person would write. A sub-expression whose expansion would exceed
 * max_terms terms is left as it is (still correct, only larger). Expansions are kept
 * in the context per node (for one max_terms), so overlapping expressions cost once.
 *
 * expr_tree_size counts what a tree walk of an expression would visit (memoised per
 * node, so linear in the DAG): callers expand or print only what is small as a tree.
 * expr_factor_sums pulls the factor most terms of a sum share out of it, recursively
 * (a greedy multivariate Horner scheme), so that tapes need fewer multiplications.
 */
#include "expr.h"
#include "expr_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct expander {
    expr_ctx *c;
    int max_terms;
};

static expr *expand(struct expander *x, expr *e);

/* What a term of a sum varies with: 2 the state (coordinates, velocities, speeds,
 * accelerations), 1 only time, 0 nothing (numbers and parameters). */
static int variation(const expr_ctx *c, const expr *e)
{
    static const sym_class state[] = {SYM_COORD, SYM_VELOCITY, SYM_SPEED, SYM_ACCEL, SYM_OTHER};
    for (size_t i = 0; i < sizeof state / sizeof *state; i++)
        if (expr_depends_class(c, e, state[i]))
            return 2;
    return expr_depends_class(c, e, SYM_TIME) ? 1 : 0;
}

/* A symbol, or a number times one (x, t, 2*x'; not x0*x, not x^2): its variation
 * (variation below) from its class alone, -1 for anything else. */
static int bare_variation(const expr_ctx *c, const expr *e)
{
    if (e->kind == EXPR_MUL && e->nargs == 1)
        e = e->args[0];
    if (e->kind != EXPR_SYM)
        return -1;
    switch (expr_sym_get(c, e->sym)->cls) {
    case SYM_PARAM: return 0;
    case SYM_TIME: return 1;
    case SYM_DEF: return -1; /* parses as its value: never a symbol node */
    default: return 2;
    }
}

/* A sum of varying terms shifted by terms that vary less: x - x0, x - v*t, R - e*cos(th)
 * (state and a parameter or time), t - t0 (time and a parameter). Multiplied out its power
 * loses the digits of the difference near the feature: (x - x0)^4 as x^4 - 4*x0*x^3 + ...
 * keeps none at x0 = 1e4, x - x0 = 1e-5 (terms ~1e16 cancel to 1e-20), and
 * exp(-(x - x0)^2/s^2) with s = 1e-4 came out 7 times too large, a force pulse
 * exp(-(t - t0)^2/w^2) at t0 = 1e5 anything at all; it stays a power, as a sum with a
 * number in it does. */
static int shifted_sum(const expr_ctx *c, const expr *e)
{
    if (e->kind != EXPR_ADD)
        return 0;
    int has[3] = {0, 0, 0}, konst = e->num != 0.0;
    for (int i = 0; i < e->nargs; i++)
        has[variation(c, e->args[i])] = 1;
    konst = konst || has[0];
    return (has[2] && (has[1] || konst)) || (has[1] && konst);
}

/* A shifted sum (shifted_sum, or one shifted by a number) whose most varying terms are
 * bare symbols: x - x0, x - 4023, x' - v*sin(w*t), t - t0. As a factor it stays whole:
 * k*(x - x0) as k*x - k*x0 keeps 7 of the digits of x - x0 = 1e-5 at x0 = 1e4 (x and x0
 * are exact, and so is their difference by Sterbenz, but k*x and k*x0 are rounded). Sums
 * of functions of the state (1 - sin^2, 1 + 5*cos^2) are multiplied out: their terms
 * carry their rounding already, and the trigonometric normalisation needs them. */
static int shifted_linear(const expr_ctx *c, const expr *e)
{
    if (e->kind != EXPR_ADD)
        return 0;
    /* the bare symbols first (their class alone): most sums have none, and are done */
    int top = -1, konst = e->num != 0.0;
    for (int i = 0; i < e->nargs; i++) {
        int b = bare_variation(c, e->args[i]);
        top = b > top ? b : top;
    }
    if (top < 1)
        return 0;
    int lower = 0;
    for (int i = 0; i < e->nargs; i++) {
        int b = bare_variation(c, e->args[i]);
        int v = b >= 0 ? b : variation(c, e->args[i]);
        if (v > top || (v == top && b < 0))
            return 0; /* a term that is not a bare symbol varies as much */
        lower = lower || v < top;
        konst = konst || v == 0;
    }
    return lower || konst;
}

static int n_terms(const expr_ctx *c, const expr *e)
{
    if (e->kind == EXPR_ADD && !shifted_linear(c, e))
        return e->nargs + (e->num != 0.0);
    return 1;
}

static expr *term_at(expr_ctx *c, const expr *e, int i)
{
    if (e->kind != EXPR_ADD || shifted_linear(c, e))
        return (expr *)e;
    return i < e->nargs ? e->args[i] : expr_num(c, e->num);
}

/* a * b with both expanded; distributes when the result stays within the cap. */
static expr *distribute(struct expander *x, expr *a, expr *b, int *ok)
{
    expr_ctx *c = x->c;
    int na = n_terms(c, a), nb = n_terms(c, b);
    if (na == 1 && nb == 1)
        return expr_mul(c, a, b);
    if ((long)na * nb > x->max_terms) {
        *ok = 0;
        return expr_mul(c, a, b);
    }
    expr **t = malloc((size_t)na * nb * sizeof *t);
    if (!t) {
        *ok = 0;
        return expr_mul(c, a, b);
    }
    int k = 0;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++) {
            if (budget_tick(c->budget)) { /* budget: stop multiplying out */
                free(t);
                *ok = 0;
                return c->nan;
            }
            expr *p = expr_mul(c, term_at(c, a, i), term_at(c, b, j));
            /* a product may itself need expanding (cos^2 appearing, say) */
            if (p->kind == EXPR_MUL || p->kind == EXPR_POW)
                p = expand(x, p);
            t[k++] = p;
        }
    expr *r = expr_sum(c, t, k);
    free(t);
    return r;
}

static const expr *pow_base_of(const expr *e) { return e->kind == EXPR_POW ? e->args[0] : e; }

/* Does e (within budget nodes of its tree) hold an integer power of a sum with a
 * number in it, (x - 6720)^2 say? In a function's argument such a power is not
 * multiplied out: exp(-850*(x - 6720)^2) as exp(-850*x^2 - 11424000*x - 3.8e10)
 * loses the digits of x - 6720 near the feature (the exponent's terms are 4e10 and
 * cancel to ~1: issue 15). Outside functions expansion stays (it cancels
 * (x + 1e6)^2 - x^2 - 2e6*x - 1e12 exactly). */
static int shifted_power(const expr *e, int budget)
{
    if (e->kind == EXPR_POW && e->args[0]->kind == EXPR_ADD && e->args[0]->num != 0.0 &&
        e->args[1]->kind == EXPR_NUM && e->args[1]->num >= 2)
        return 1;
    if (e->kind == EXPR_FUN)
        return 0; /* judged when that function is expanded */
    for (int i = 0; i < e->nargs && budget > 0; i++, budget -= 8)
        if (shifted_power(e->args[i], budget - 8))
            return 1;
    return 0;
}

/* The expansion of a power e: cos^n through sin, whole powers of sums multiplied out. */
static expr *expand_pow(struct expander *x, expr *e)
{
    expr_ctx *c = x->c;
    expr *b = expand(x, e->args[0]);
    expr *k = e->args[1];
    if (k->kind == EXPR_NUM && k->num == floor(k->num)) {
        double n = k->num;
        if (b->kind == EXPR_FUN && b->fn == FN_COS && n >= 2 && n <= 12) {
            /* cos^n = cos^(n mod 2) (1 - sin^2)^(n div 2), multiplied out */
            expr *s2 = expr_powi(c, expr_fun(c, FN_SIN, b->args[0]), 2);
            expr *one_minus = expr_sub(c, expr_num(c, 1.0), s2);
            int ok = 1;
            expr *acc = (int)n % 2 ? b : expr_num(c, 1.0);
            for (int i = 0; i < (int)n / 2 && ok; i++)
                acc = distribute(x, acc, one_minus, &ok);
            return ok ? acc : expr_pow(c, b, k);
        }
        /* (x - 4023)^6 is not multiplied out: its expansion's terms are ~1e21 and
         * cancel to (x - 4023)^6 ~ 1 near x = 4023, losing every digit (issue 15;
         * difftest). A power of a sum with a number in it stays a power. */
        /* and nor is (x - x0)^4 with x0 a parameter, for the same reason (shifted_sum) */
        if (b->kind == EXPR_ADD && b->num == 0.0 && n >= 2 && n <= 12 && !shifted_sum(c, b)) {
            int ok = 1;
            expr *acc = b;
            for (int i = 1; i < (int)n && ok; i++)
                acc = distribute(x, acc, b, &ok);
            return ok ? acc : expr_pow(c, b, k);
        }
    }
    return expr_pow(c, b, expand(x, k));
}

/* The expansion of a product e: its factors expanded and multiplied out. */
static expr *expand_mul(struct expander *x, expr *e)
{
    expr_ctx *c = x->c;
    int ok = 1, i = 0;
    expr *acc = expr_num(c, e->num);
    /* While the factors are their own expansions, single terms and in the product
     * constructor's order (ascending, distinct bases), multiplying them in one at
     * a time (distribute, below) gives the product of e's first factors, which is
     * taken directly instead (expr__mul_prefix: the node expr_product would find
     * or make, in the same order, so the context gains the same nodes); from the
     * first factor that changes on, they are multiplied in as before. */
    int fixed = isfinite(e->num) && e->num != 0.0;
    for (; i < e->nargs && fixed; i++) {
        expr *f = expand(x, e->args[i]);
        if (f == e->args[i] && f->kind != EXPR_NUM && f->kind != EXPR_MUL && n_terms(c, f) == 1 &&
            (i == 0 || expr__cmp(pow_base_of(e->args[i - 1]), pow_base_of(f)) < 0)) {
            acc = i == 0 && e->num == 1.0 ? f : expr__mul_prefix(c, e, i + 1);
            continue;
        }
        fixed = 0;
        acc = distribute(x, acc, f, &ok);
    }
    if (fixed)
        return acc; /* e itself */
    for (; i < e->nargs && ok; i++)
        acc = distribute(x, acc, expand(x, e->args[i]), &ok);
    if (ok)
        return acc;
    /* Too many terms: keep the product of the expanded factors. */
    expr **f = malloc(e->nargs * sizeof *f);
    if (!f)
        return e;
    for (int i = 0; i < e->nargs; i++)
        f[i] = expand(x, e->args[i]);
    expr *r = expr_mul(c, expr_product(c, f, e->nargs), expr_num(c, e->num));
    free(f);
    return r;
}

static expr *expand_uncached(struct expander *x, expr *e)
{
    expr_ctx *c = x->c;
    switch (e->kind) {
    case EXPR_NUM:
    case EXPR_SYM: return e;
    case EXPR_FUN:
        if (shifted_power(e->args[0], 64) || (e->nargs == 2 && shifted_power(e->args[1], 64)))
            return e;
        if (e->nargs == 2)
            return expr_fun2(c, e->fn, expand(x, e->args[0]), expand(x, e->args[1]));
        return expr_fun(c, e->fn, expand(x, e->args[0]));
    case EXPR_ADD: {
        expr **t = malloc((e->nargs + 1) * sizeof *t);
        if (!t)
            return e;
        for (int i = 0; i < e->nargs; i++)
            t[i] = expand(x, e->args[i]);
        t[e->nargs] = expr_num(c, e->num);
        expr *r = expr_sum(c, t, e->nargs + 1);
        free(t);
        return r;
    }
    case EXPR_POW: return expand_pow(x, e);
    case EXPR_MUL: return expand_mul(x, e);
    default: return e;
    }
}

/* The context keeps every expansion (nodes never change), so expanding an expression
 * that shares sub-expressions with one expanded before costs only the new part: a
 * reduction that simplifies thousands of overlapping entries expands each node once. */
static expr **memo_slot(expr_ctx *c, const expr *e)
{
    if (e->id >= c->expand_cap) {
        size_t cap = c->expand_cap ? c->expand_cap : 1024;
        while (cap <= e->id)
            cap *= 2;
        expr **m = realloc(c->expand_memo, cap * sizeof *m);
        if (!m)
            return NULL;
        memset(m + c->expand_cap, 0, (cap - c->expand_cap) * sizeof *m);
        c->expand_memo = m;
        c->expand_cap = cap;
    }
    return &c->expand_memo[e->id];
}

static expr *expand(struct expander *x, expr *e)
{
    if (e->kind == EXPR_NUM || e->kind == EXPR_SYM)
        return e;
    if (budget_tick(x->c->budget)) /* budget: unwind */
        return x->c->nan;
    expr **slot = memo_slot(x->c, e);
    expr *hit = slot ? *slot : NULL;
    if (hit)
        return hit;
    expr *r = expand_uncached(x, e);
    if (budget_stopped(x->c->budget)) /* budget: a stopped expansion is not remembered */
        return r;
    slot = memo_slot(x->c, e); /* the memo may have moved */
    if (slot)
        *slot = r;
    return r;
}

expr *expr_expand(expr_ctx *c, expr *e, int max_terms)
{
    if (budget_stopped(c->budget)) /* budget: nothing more to expand */
        return c->nan;
    if (c->expand_terms != max_terms) {
        if (c->expand_memo)
            memset(c->expand_memo, 0, c->expand_cap * sizeof *c->expand_memo);
        c->expand_terms = max_terms;
    }
    struct expander x = {c, max_terms};
    return expand(&x, e);
}

size_t expr_tree_size(expr_ctx *c, const expr *e)
{
    if (e->nargs == 0)
        return 1;
    if (e->id >= c->tree_cap) {
        size_t cap = c->tree_cap ? c->tree_cap : 1024;
        while (cap <= e->id)
            cap *= 2;
        uint32_t *t = realloc(c->tree_size, cap * sizeof *t);
        if (!t)
            return EXPR_TREE_SIZE_MAX;
        memset(t + c->tree_cap, 0, (cap - c->tree_cap) * sizeof *t);
        c->tree_size = t;
        c->tree_cap = cap;
    }
    if (c->tree_size[e->id])
        return c->tree_size[e->id] - 1;
    size_t n = 1;
    for (int i = 0; i < e->nargs && n < EXPR_TREE_SIZE_MAX; i++)
        n += expr_tree_size(c, e->args[i]);
    if (n > EXPR_TREE_SIZE_MAX)
        n = EXPR_TREE_SIZE_MAX;
    c->tree_size[e->id] = (uint32_t)n + 1;
    return n;
}

/* ---- greedy factoring of sums (Horner's scheme, multivariate) ---- */

#define FACTOR_MAX_PAIRS 4096 /* (term, factor) pairs of a sum that horner() looks at */

struct factorer {
    expr_ctx *c;
    expr **memo; /* by node id, for this batch */
    size_t cap;
};

static expr *factor_rec(struct factorer *f, expr *e);

/* The base a factor contributes to counting: x for x and x^k (k a positive integer). */
#define HORNER_MAX_POWER 64 /* powers above it are left whole by the Horner factoring */

static expr *factor_base(expr *x)
{
    if (x->kind == EXPR_NUM)
        return NULL;
    if (x->kind == EXPR_POW) {
        const expr *k = x->args[1];
        /* (c*y)^1999, kept whole because c^1999 overflows: pulling its base out 1999
         * times multiplied c into the coefficient each time (inf) */
        /* and at most HORNER_MAX_POWER: the factoring takes the base out one power a
         * level, so r^2e54 (where k - 1 == k) recursed without end (fuzz_model) */
        if (k->kind == EXPR_NUM && k->num >= 1 && k->num <= HORNER_MAX_POWER && k->num == floor(k->num) &&
            x->args[0]->kind != EXPR_MUL)
            return x->args[0];
        return NULL;
    }
    return x;
}

static int cmp_id(const void *a, const void *b)
{
    const expr *x = *(expr *const *)a, *y = *(expr *const *)b;
    return (x->id > y->id) - (x->id < y->id);
}

/* t / base, where t is base, base^k or a product with such a factor: the factor is
 * removed or its exponent lowered, without re-collecting the product. */
static expr *drop_factor(expr_ctx *c, expr *t, expr *base)
{
    if (t == base)
        return expr_num(c, 1.0);
    if (t->kind == EXPR_POW)
        return expr_pow(c, base, expr_num(c, t->args[1]->num - 1));
    expr *local[17], **a = t->nargs < 16 ? local : malloc((t->nargs + 1) * sizeof *a);
    if (!a)
        return expr_div(c, t, base);
    int m = 0;
    for (int j = 0; j < t->nargs; j++) {
        expr *x = t->args[j];
        if (x == base)
            continue;
        if (x->kind == EXPR_POW && x->args[0] == base)
            x = expr_pow(c, base, expr_num(c, x->args[1]->num - 1));
        a[m++] = x;
    }
    a[m++] = expr_num(c, t->num);
    expr *r = expr_product(c, a, m);
    if (a != local)
        free(a);
    return r;
}

/* sum of terms[0..n) (already factored inside), with the factor that most terms share
 * pulled out, recursively: a*b + a*c + d -> a*(b + c) + d. */
static expr *horner(struct factorer *f, expr **terms, int n)
{
    expr_ctx *c = f->c;
    if (n < 2 || budget_tick(c->budget)) /* budget: stop factoring */
        return expr_sum(c, terms, n);
    /* every (term, base) once: bases of each term are distinct (a product's factors
     * have distinct bases) */
    size_t nb = 0, capb = 0;
    for (int i = 0; i < n; i++)
        capb += terms[i]->kind == EXPR_MUL ? terms[i]->nargs : 1;
    /* each level costs the factors of its terms and there are at most as many levels
     * as factors in a term: past a bound the sum is left as it is */
    if (capb > FACTOR_MAX_PAIRS)
        return expr_sum(c, terms, n);
    expr **bases = malloc((capb + 1) * sizeof *bases);
    if (!bases)
        return expr_sum(c, terms, n);
    for (int i = 0; i < n; i++) {
        expr *t = terms[i];
        int m = t->kind == EXPR_MUL ? t->nargs : 1;
        for (int j = 0; j < m; j++) {
            expr *b = factor_base(t->kind == EXPR_MUL ? t->args[j] : t);
            if (b)
                bases[nb++] = b;
        }
    }
    if (nb > 32) {
        qsort(bases, nb, sizeof *bases, cmp_id);
    } else { /* by id; equal ids are the same node, so any sort gives the same list */
        for (size_t i = 1; i < nb; i++) {
            expr *x = bases[i];
            size_t j = i;
            while (j > 0 && bases[j - 1]->id > x->id) {
                bases[j] = bases[j - 1];
                j--;
            }
            bases[j] = x;
        }
    }
    expr *best = NULL;
    size_t best_count = 1;
    for (size_t i = 0; i < nb;) {
        size_t j = i;
        while (j < nb && bases[j] == bases[i])
            j++;
        if (j - i > best_count) {
            best_count = j - i;
            best = bases[i];
        }
        i = j;
    }
    free(bases);
    if (!best)
        return expr_sum(c, terms, n);
    expr **with = malloc(n * sizeof *with), **without = malloc(n * sizeof *without);
    if (!with || !without) {
        free(with);
        free(without);
        return expr_sum(c, terms, n);
    }
    int nw = 0, no = 0;
    for (int i = 0; i < n; i++) {
        expr *t = terms[i];
        int has = 0, m = t->kind == EXPR_MUL ? t->nargs : 1;
        for (int j = 0; j < m && !has; j++)
            has = factor_base(t->kind == EXPR_MUL ? t->args[j] : t) == best;
        if (has)
            with[nw++] = drop_factor(c, t, best);
        else
            without[no++] = t;
    }
    expr *inner = horner(f, with, nw);
    expr *r = expr_add(c, expr_mul(c, best, inner), horner(f, without, no));
    free(with);
    free(without);
    return r;
}

static expr *factor_uncached(struct factorer *f, expr *e)
{
    expr_ctx *c = f->c;
    switch (e->kind) {
    case EXPR_NUM:
    case EXPR_SYM: return e;
    case EXPR_FUN:
        if (e->nargs == 2)
            return expr_fun2(c, e->fn, factor_rec(f, e->args[0]), factor_rec(f, e->args[1]));
        return expr_fun(c, e->fn, factor_rec(f, e->args[0]));
    case EXPR_POW: return expr_pow(c, factor_rec(f, e->args[0]), e->args[1]);
    case EXPR_MUL: {
        expr **a = malloc((e->nargs + 1) * sizeof *a);
        if (!a)
            return e;
        for (int i = 0; i < e->nargs; i++)
            a[i] = factor_rec(f, e->args[i]);
        a[e->nargs] = expr_num(c, e->num);
        expr *r = expr_product(c, a, e->nargs + 1);
        free(a);
        return r;
    }
    case EXPR_ADD: {
        expr **t = malloc((e->nargs + 1) * sizeof *t);
        if (!t)
            return e;
        /* factor the terms' insides first; the sum's own constant stays apart */
        for (int i = 0; i < e->nargs; i++)
            t[i] = factor_rec(f, e->args[i]);
        expr *r = horner(f, t, e->nargs);
        free(t);
        return e->num != 0.0 ? expr_add(c, r, expr_num(c, e->num)) : r;
    }
    default: return e;
    }
}

static expr *factor_rec(struct factorer *f, expr *e)
{
    if (e->nargs == 0)
        return e;
    if (e->id >= f->cap) {
        size_t cap = f->cap ? f->cap : 1024;
        while (cap <= e->id)
            cap *= 2;
        expr **m = realloc(f->memo, cap * sizeof *m);
        if (!m)
            return e;
        memset(m + f->cap, 0, (cap - f->cap) * sizeof *m);
        f->memo = m;
        f->cap = cap;
    }
    if (f->memo[e->id])
        return f->memo[e->id];
    expr *r = factor_uncached(f, e);
    if (e->id >= f->cap) /* cannot happen: ids only grow past cap for new nodes */
        return r;
    f->memo[e->id] = r;
    return r;
}

void expr_factor_sums(expr_ctx *c, expr **roots, int n)
{
    struct factorer f = {c, NULL, 0};
    for (int i = 0; i < n && !budget_stopped(c->budget); i++)
        roots[i] = factor_rec(&f, roots[i]);
    free(f.memo);
}
