/* deriv.c — symbolic differentiation, total time derivatives and substitution on
 * the expression DAG. Derivatives are memoised per (node, symbol) in the context, so
 * differentiating a shared sub-expression twice costs nothing the second time. */
#include "expr.h"
#include "expr_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static expr *memo_get(expr_ctx *c, const expr *e, int s)
{
    if (!c->memo)
        return NULL;
    size_t mask = c->memo_cap - 1;
    size_t j = expr__memo_slot(e->id, s, mask);
    for (; c->memo[j].id; j = (j + 1) & mask)
        if (c->memo[j].id == e->id + 1 && c->memo[j].sym == s)
            return c->memo[j].value;
    return NULL;
}

static void memo_put(expr_ctx *c, const expr *e, int s, expr *value)
{
    if (2 * (c->memo_used + 1) > c->memo_cap) {
        size_t cap = c->memo_cap ? 2 * c->memo_cap : 256;
        struct memo_entry *m = calloc(cap, sizeof *m);
        if (!m)
            return;
        for (size_t i = 0; i < c->memo_cap; i++) {
            struct memo_entry *o = &c->memo[i];
            if (!o->id)
                continue;
            size_t j = expr__memo_slot(o->id - 1, o->sym, cap - 1);
            while (m[j].id)
                j = (j + 1) & (cap - 1);
            m[j] = *o;
        }
        free(c->memo);
        c->memo = m;
        c->memo_cap = cap;
    }
    size_t mask = c->memo_cap - 1;
    size_t j = expr__memo_slot(e->id, s, mask);
    while (c->memo[j].id)
        j = (j + 1) & mask;
    c->memo[j].id = e->id + 1;
    c->memo[j].sym = s;
    c->memo[j].value = value;
    c->memo_used++;
}

/* Whether a is >= 0 wherever it is defined by its form: an even power, exp, cosh, sqrt,
 * abs (then abs(a) = a, and d abs(a) = da, also at a = 0 where sign(a) is 0). */
static int nonnegative(const expr *a)
{
    if (a->kind == EXPR_POW)
        return a->args[1]->kind == EXPR_NUM && fmod(a->args[1]->num, 2.0) == 0.0;
    return a->kind == EXPR_FUN &&
           (a->fn == FN_EXP || a->fn == FN_COSH || a->fn == FN_SQRT || a->fn == FN_ABS);
}

/* Whether b = c0 + k exp(u) with numbers c0 != 0 and k != 0 (a logistic profile's
 * denominator, softplus's argument); then *ratio = c0 / k and *u = u. */
static int exp_sum(const expr *b, double *ratio, expr **u)
{
    if (b->kind != EXPR_ADD || b->nargs != 1 || b->num == 0.0 || !isfinite(b->num))
        return 0;
    const expr *t = b->args[0];
    double k = 1.0;
    if (t->kind == EXPR_MUL && t->nargs == 1) {
        k = t->num;
        t = t->args[0];
    }
    if (t->kind != EXPR_FUN || t->fn != FN_EXP || k == 0.0 || !isfinite(k))
        return 0;
    *ratio = b->num / k;
    *u = t->args[0];
    return isfinite(*ratio);
}

/* k exp(u) / (c0 + k exp(u)) as (1 + (c0/k) exp(-u))^-1: finite on both sides, where the
 * quotient is inf/inf once exp(u) overflows (u > 709): the force of a logistic wall
 * 10/(1 + exp(1000*(x - 3))) was NaN behind it, past x = 3.71, and a particle started
 * there failed at t = 0. */
static expr *exp_share(expr_ctx *c, double ratio, expr *u)
{
    return expr_powi(
        c, expr_add(c, c->one, expr_mul(c, expr_num(c, ratio), expr_fun(c, FN_EXP, expr_neg(c, u)))), -1);
}

/* d f(a) / da for a one-argument function. */
static expr *fun_deriv(expr_ctx *c, const expr *e)
{
    expr *a = e->args[0];
    switch ((expr_fn)e->fn) {
    case FN_SIN: return expr_fun(c, FN_COS, a);
    case FN_COS: return expr_neg(c, expr_fun(c, FN_SIN, a));
    case FN_TAN: return expr_powi(c, expr_fun(c, FN_COS, a), -2);
    case FN_ASIN: return expr_pow(c, expr_sub(c, c->one, expr_powi(c, a, 2)), expr_num(c, -0.5));
    case FN_ACOS: return expr_neg(c, expr_pow(c, expr_sub(c, c->one, expr_powi(c, a, 2)), expr_num(c, -0.5)));
    case FN_ATAN: return expr_powi(c, expr_add(c, c->one, expr_powi(c, a, 2)), -1);
    case FN_SINH: return expr_fun(c, FN_COSH, a);
    case FN_COSH: return expr_fun(c, FN_SINH, a);
    /* sech^2, not 1 - tanh^2: that is 0 once tanh rounds to 1 (|a| > 19), dropping
     * the force of a steep tanh profile where it is 1e-80 rather than 0 */
    case FN_TANH: return expr_powi(c, expr_fun(c, FN_COSH, a), -2);
    case FN_EXP: return (expr *)e;
    case FN_LOG: return expr_powi(c, a, -1);
    case FN_SQRT: return expr_mul(c, expr_num(c, 0.5), expr_powi(c, (expr *)e, -1));
    /* sign(a), not a/abs(a): that is 0/0 at a = 0, where the force of x*abs(x) or of
     * abs(x)^1.5 is 0 (a particle started at the bottom of such a well failed at t = 0) */
    case FN_ABS: return nonnegative(a) ? c->one : expr_fun(c, FN_SIGN, a);
    case FN_SIGN: return c->zero; /* where it is differentiable */
    default: return c->nan;
    }
}

static expr *diff_rec(expr_ctx *c, expr *e, int s)
{
    if (budget_tick(c->budget)) /* budget: unwind */
        return c->nan;
    if (!expr_depends(e, s))
        return c->zero;
    if (e->kind == EXPR_SYM)
        return c->one;
    expr *memo = memo_get(c, e, s);
    if (memo)
        return memo;
    expr *r;
    switch (e->kind) {
    case EXPR_ADD: {
        expr *local[16], **t = e->nargs <= 16 ? local : malloc(e->nargs * sizeof *t);
        if (!t)
            return c->nan;
        for (int i = 0; i < e->nargs; i++)
            t[i] = diff_rec(c, e->args[i], s);
        r = expr_sum(c, t, e->nargs);
        if (t != local)
            free(t);
        break;
    }
    case EXPR_MUL: {
        /* Product rule: sum over factors of (d f_i) * (the others), times the
         * coefficient. */
        int n = e->nargs;
        expr *local[16], **terms = 2 * n + 1 <= 16 ? local : malloc((2 * n + 1) * sizeof *terms);
        if (!terms)
            return c->nan;
        expr **others = terms + n;
        int m = 0;
        for (int i = 0; i < n; i++) {
            expr *d = diff_rec(c, e->args[i], s);
            if (expr_is_num(d, 0.0))
                continue;
            int k = 0;
            for (int j = 0; j < n; j++)
                if (j != i)
                    others[k++] = e->args[j];
            others[k++] = d;
            others[k++] = expr_num(c, e->num);
            terms[m++] = expr_product(c, others, k);
        }
        r = expr_sum(c, terms, m);
        if (terms != local)
            free(terms);
        break;
    }
    case EXPR_POW: {
        expr *b = e->args[0], *x = e->args[1], *u = NULL;
        double ratio = 0.0;
        expr *db = diff_rec(c, b, s);
        if (!expr_depends(x, s) && b->kind == EXPR_FUN && b->fn == FN_SQRT) {
            /* sqrt(a)^x: x/2 sqrt(a)^(x-2) da, not x sqrt(a)^(x-1) da / (2 sqrt(a)), whose
             * sqrt(a)^(x-1) is rewritten (sqrt(a)^2 = a) before the quotient could cancel:
             * the force of r^3 = sqrt(x^2 + y^2)^3 was 0/0 at the origin */
            expr *da = diff_rec(c, b->args[0], s);
            r = expr_mul(c,
                         expr_mul(c, expr_mul(c, expr_num(c, 0.5), x),
                                  expr_pow(c, b, expr_sub(c, x, expr_num(c, 2.0)))),
                         da);
        } else if (!expr_depends(x, s) && b->kind == EXPR_FUN && b->fn == FN_ABS && x->kind == EXPR_NUM &&
                   x->num >= 2.0 && !nonnegative(b->args[0])) {
            /* abs(a)^x, x >= 2: x a abs(a)^(x-2) da (abs(a) sign(a) = a, also at 0): with
             * x abs(a)^(x-1) sign(a) da, T = 1/2*abs(x')^2 had the mass sign(x')^2, 0 at rest */
            r = expr_mul(
                c, expr_mul(c, expr_mul(c, x, b->args[0]), expr_pow(c, b, expr_sub(c, x, expr_num(c, 2.0)))),
                diff_rec(c, b->args[0], s));
        } else if (!expr_depends(x, s) && exp_sum(b, &ratio, &u)) {
            /* (c0 + k exp(u))^x: x b^x (k exp(u) / b) du, the share as exp_share */
            r = expr_mul(c, expr_mul(c, expr_mul(c, x, e), exp_share(c, ratio, u)), diff_rec(c, u, s));
        } else if (!expr_depends(x, s)) {
            /* x * b^(x-1) * db */
            r = expr_mul(c, expr_mul(c, x, expr_pow(c, b, expr_sub(c, x, c->one))), db);
        } else {
            /* b^x * (dx * log b + x * db / b) */
            expr *dx = diff_rec(c, x, s);
            expr *inner = expr_add(c, expr_mul(c, dx, expr_fun(c, FN_LOG, b)),
                                   expr_mul(c, expr_mul(c, x, db), expr_powi(c, b, -1)));
            r = expr_mul(c, e, inner);
        }
        break;
    }
    case EXPR_FUN:
        if (e->fn == FN_ATAN2) {
            /* d atan2(y, x) = (x dy - y dx) / (x^2 + y^2) */
            expr *y = e->args[0], *x = e->args[1];
            expr *num = expr_sub(c, expr_mul(c, x, diff_rec(c, y, s)), expr_mul(c, y, diff_rec(c, x, s)));
            expr *den = expr_add(c, expr_powi(c, x, 2), expr_powi(c, y, 2));
            r = expr_mul(c, num, expr_powi(c, den, -1));
        } else {
            expr *u = NULL;
            double ratio = 0.0;
            if (e->fn == FN_LOG && exp_sum(e->args[0], &ratio, &u)) /* softplus: the share of exp */
                r = expr_mul(c, exp_share(c, ratio, u), diff_rec(c, u, s));
            else
                r = expr_mul(c, fun_deriv(c, e), diff_rec(c, e->args[0], s));
        }
        break;
    default: r = c->zero; break;
    }
    memo_put(c, e, s, r);
    return r;
}

expr *expr_diff(expr_ctx *c, expr *e, int s) { return diff_rec(c, e, s); }

expr *expr_dt(expr_ctx *c, expr *e)
{
    int n = expr_sym_count(c);
    expr *local[32], **terms = n + 1 <= 32 ? local : malloc((n + 1) * sizeof *terms);
    if (!terms)
        return c->nan;
    int m = 0;
    for (int s = 0; s < n; s++) {
        const expr_symbol *sym = expr_sym_get(c, s);
        if (sym->cls == SYM_TIME) {
            terms[m++] = expr_diff(c, e, s);
        } else if (sym->cls == SYM_COORD && expr_depends(e, s)) {
            /* the velocity symbol of coordinate `index` (only looked for when e depends
             * on the coordinate: a scan per coordinate is quadratic with many symbols) */
            for (int v = 0; v < n; v++) {
                const expr_symbol *vs = expr_sym_get(c, v);
                if (vs->cls == SYM_VELOCITY && vs->index == sym->index) {
                    terms[m++] = expr_mul(c, expr_diff(c, e, s), vs->node);
                    break;
                }
            }
        }
    }
    expr *r = expr_sum(c, terms, m);
    if (terms != local)
        free(terms);
    return r;
}

/* The memo of one substitution lives in the context (subst_memo), valid for the
 * entries stamped with this call's subst_stamp: a call costs what it visits, not a
 * cleared array of every node (a compile makes dozens of substitutions). */
static expr *subst_rec(expr_ctx *c, expr *e, expr **sub, int n_sub, uint64_t mask)
{
    if (budget_tick(c->budget)) /* budget: unwind */
        return c->nan;
    if (!(e->deps & mask))
        return e;
    if (c->subst_gen[e->id] == c->subst_stamp)
        return c->subst_memo[e->id];
    expr *r;
    if (e->kind == EXPR_SYM) {
        r = e->sym < n_sub && sub[e->sym] ? sub[e->sym] : e;
    } else {
        expr *local[16], **a = e->nargs <= 16 ? local : malloc(e->nargs * sizeof *a);
        if (!a)
            return c->nan;
        for (int i = 0; i < e->nargs; i++)
            a[i] = subst_rec(c, e->args[i], sub, n_sub, mask);
        switch (e->kind) {
        case EXPR_ADD: r = expr_add(c, expr_sum(c, a, e->nargs), expr_num(c, e->num)); break;
        case EXPR_MUL: r = expr_mul(c, expr_product(c, a, e->nargs), expr_num(c, e->num)); break;
        case EXPR_POW: r = expr_pow(c, a[0], a[1]); break;
        case EXPR_FUN: r = e->nargs == 2 ? expr_fun2(c, e->fn, a[0], a[1]) : expr_fun(c, e->fn, a[0]); break;
        default: r = e; break;
        }
        if (a != local)
            free(a);
    }
    c->subst_memo[e->id] = r;
    c->subst_gen[e->id] = c->subst_stamp;
    return r;
}

/* Makes the substitution memo cover every node (the ones a substitution visits exist
 * before it starts) and gives this call a fresh stamp. */
static int subst_prepare(expr_ctx *c)
{
    size_t n = expr_ctx_nodes(c);
    if (n > c->subst_cap) {
        size_t cap = 2 * n + 256;
        expr **memo = realloc(c->subst_memo, cap * sizeof *memo);
        if (!memo)
            return -1;
        c->subst_memo = memo;
        uint32_t *gen = realloc(c->subst_gen, cap * sizeof *gen);
        if (!gen)
            return -1;
        memset(gen + c->subst_cap, 0, (cap - c->subst_cap) * sizeof *gen);
        c->subst_gen = gen;
        c->subst_cap = cap;
    }
    if (++c->subst_stamp == 0) { /* wrapped: forget every old stamp */
        memset(c->subst_gen, 0, c->subst_cap * sizeof *c->subst_gen);
        c->subst_stamp = 1;
    }
    return 0;
}

expr *expr_subst(expr_ctx *c, expr *e, expr **sub, int n_sub)
{
    uint64_t mask = 0;
    for (int s = 0; s < n_sub; s++)
        if (sub[s])
            mask |= (uint64_t)1 << (s % 64);
    if (!mask)
        return e;
    if (budget_stopped(c->budget)) /* budget: nothing more to substitute */
        return c->nan;
    if (subst_prepare(c) < 0)
        return c->nan;
    return subst_rec(c, e, sub, n_sub, mask);
}
