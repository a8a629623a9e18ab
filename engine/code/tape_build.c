/* tape_build.c — lowers expression DAG roots to a tape (tape.h). Each DAG node is
 * emitted once; sums become chains of ADD/SUB (negative terms subtracted, not
 * negated), products chains of MUL with their negative powers as one DIV, integer
 * powers POWI and half powers SQRT. */
#include "expr_internal.h"
#include "tape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct builder {
    const expr_ctx *c;
    const int *sym_input;
    tape_ins *ins;
    int n, cap;
    int32_t *vn; /* value numbering: open-addressing table of slots */
    size_t vn_cap;
    int32_t *slot_pos; /* per node id: slot of the node, -1 if not emitted */
    int32_t *slot_neg; /* per node id: slot of minus the node (products only) */
    int failed;
};

static uint64_t ins_hash(int op, int a, int bb, double c)
{
    uint64_t bits;
    memcpy(&bits, &c, sizeof bits);
    uint64_t h = (uint64_t)op * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)a * 0xC2B2AE3D27D4EB4Full;
    h ^= (uint64_t)(uint32_t)bb * 0x165667B19E3779F9ull ^ bits * 0xFF51AFD7ED558CCDull;
    return h ^ (h >> 29);
}

static int vn_grow(struct builder *b)
{
    size_t cap = b->vn_cap ? 2 * b->vn_cap : 1024;
    int32_t *t = malloc(cap * sizeof *t);
    if (!t)
        return -1;
    for (size_t i = 0; i < cap; i++)
        t[i] = -1;
    for (size_t i = 0; i < b->vn_cap; i++) {
        int32_t s = b->vn[i];
        if (s < 0)
            continue;
        const tape_ins *p = &b->ins[s];
        size_t j = ins_hash(p->op, p->a, p->b, p->c) & (cap - 1);
        while (t[j] >= 0)
            j = (j + 1) & (cap - 1);
        t[j] = s;
    }
    free(b->vn);
    b->vn = t;
    b->vn_cap = cap;
    return 0;
}

/* Appends an instruction, or returns the slot of an identical earlier one (local
 * value numbering: a*b computed once however many products start with it). Commutative
 * operands are ordered so that a*b and b*a are one instruction. */
static int emit(struct builder *b, int op, int a, int bb, double c)
{
    if (b->failed)
        return 0;
    if (budget_tick(b->c->budget)) { /* budget: give up on this tape */
        b->failed = 1;
        return 0;
    }
    if ((op == TAPE_ADD || op == TAPE_MUL) && a > bb) {
        int t = a;
        a = bb;
        bb = t;
    }
    if (op != TAPE_INPUT) {
        if (2 * (size_t)(b->n + 1) > b->vn_cap && vn_grow(b) < 0) {
            b->failed = 1;
            return 0;
        }
        size_t j = ins_hash(op, a, bb, c) & (b->vn_cap - 1);
        for (; b->vn[j] >= 0; j = (j + 1) & (b->vn_cap - 1)) {
            const tape_ins *p = &b->ins[b->vn[j]];
            if (p->op == op && p->a == a && p->b == bb && memcmp(&p->c, &c, sizeof c) == 0)
                return b->vn[j];
        }
    }
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 256;
        tape_ins *ins = cap <= TAPE_MAX_INS ? realloc(b->ins, cap * sizeof *ins) : NULL;
        if (!ins) {
            b->failed = 1;
            return 0;
        }
        b->ins = ins;
        b->cap = cap;
    }
    b->ins[b->n] = (tape_ins){op, a, bb, c};
    if (op != TAPE_INPUT) {
        size_t j = ins_hash(op, a, bb, c) & (b->vn_cap - 1);
        while (b->vn[j] >= 0)
            j = (j + 1) & (b->vn_cap - 1);
        b->vn[j] = b->n;
    }
    return b->n++;
}

static int lower(struct builder *b, const expr *e);

static int negative_power(const expr *f)
{
    return f->kind == EXPR_POW && f->args[1]->kind == EXPR_NUM && f->args[1]->num < 0;
}

/* base ^ k for a numeric exponent k, without building new nodes. */
static int lower_power(struct builder *b, const expr *base, double k)
{
    if (k == 1.0)
        return lower(b, base);
    int s = lower(b, base);
    if (k == floor(k) && fabs(k) < 1 << 30)
        return emit(b, TAPE_POWI, s, (int)k, 0);
    if (k == 0.5)
        return emit(b, TAPE_SQRT, s, 0, 0);
    if (k == -0.5)
        return emit(b, TAPE_DIV, emit(b, TAPE_CONST, 0, 0, 1.0), emit(b, TAPE_SQRT, s, 0, 0), 0);
    return emit(b, TAPE_POW, s, emit(b, TAPE_CONST, 0, 0, k), 0);
}

/* sign * (a product or a power), memoised per sign. */
static int lower_product(struct builder *b, const expr *e, double sign)
{
    int32_t *memo = sign > 0 ? b->slot_pos : b->slot_neg;
    if (memo[e->id] >= 0)
        return memo[e->id];
    const expr *const *f = e->kind == EXPR_MUL ? (const expr *const *)e->args : &e;
    int n = e->kind == EXPR_MUL ? e->nargs : 1;
    double coef = sign * (e->kind == EXPR_MUL ? e->num : 1.0);
    int num = -1, den = -1;
    for (int i = 0; i < n; i++) {
        int s;
        if (negative_power(f[i])) {
            /* the reciprocal power, shared by every product that divides by it */
            s = lower_power(b, f[i]->args[0], f[i]->args[1]->num);
            den = den < 0 ? s : emit(b, TAPE_MUL, den, s, 0);
        } else {
            s = f[i]->kind == EXPR_POW && f[i]->args[1]->kind == EXPR_NUM
                    ? lower_power(b, f[i]->args[0], f[i]->args[1]->num)
                    : lower(b, f[i]);
            num = num < 0 ? s : emit(b, TAPE_MUL, num, s, 0);
        }
    }
    /* den holds the product of the reciprocals: multiply it in. */
    int r;
    if (num < 0) {
        r = coef == 1.0 ? den : emit(b, TAPE_MUL, emit(b, TAPE_CONST, 0, 0, coef), den, 0);
    } else {
        if (den >= 0)
            num = emit(b, TAPE_MUL, num, den, 0);
        if (coef != 1.0 && coef != -1.0)
            num = emit(b, TAPE_MUL, emit(b, TAPE_CONST, 0, 0, coef), num, 0);
        r = coef == -1.0 ? emit(b, TAPE_NEG, num, 0, 0) : num;
    }
    memo[e->id] = r;
    return r;
}

static int term_negative(const expr *t) { return t->kind == EXPR_MUL && t->num < 0; }

static int lower(struct builder *b, const expr *e)
{
    if (b->failed)
        return 0;
    if (b->slot_pos[e->id] >= 0)
        return b->slot_pos[e->id];
    int r = 0;
    switch (e->kind) {
    case EXPR_NUM: r = emit(b, TAPE_CONST, 0, 0, e->num); break;
    case EXPR_SYM:
        r = b->sym_input[e->sym];
        if (r < 0)
            b->failed = 1;
        break;
    case EXPR_FUN: {
        static const int ops[FN_COUNT] = {
            [FN_SIN] = TAPE_SIN,   [FN_COS] = TAPE_COS,   [FN_TAN] = TAPE_TAN,     [FN_ASIN] = TAPE_ASIN,
            [FN_ACOS] = TAPE_ACOS, [FN_ATAN] = TAPE_ATAN, [FN_ATAN2] = TAPE_ATAN2, [FN_SINH] = TAPE_SINH,
            [FN_COSH] = TAPE_COSH, [FN_TANH] = TAPE_TANH, [FN_EXP] = TAPE_EXP,     [FN_LOG] = TAPE_LOG,
            [FN_SQRT] = TAPE_SQRT, [FN_ABS] = TAPE_ABS,   [FN_SIGN] = TAPE_SIGN};
        int a = lower(b, e->args[0]);
        int a2 = e->nargs > 1 ? lower(b, e->args[1]) : 0;
        r = emit(b, ops[e->fn], a, a2, 0);
        break;
    }
    case EXPR_POW:
        if (e->args[1]->kind == EXPR_NUM) {
            r = e->args[1]->num < 0 ? lower_product(b, e, 1.0) : lower_power(b, e->args[0], e->args[1]->num);
        } else {
            int x = lower(b, e->args[0]);
            int k = lower(b, e->args[1]);
            r = emit(b, TAPE_POW, x, k, 0);
        }
        break;
    case EXPR_MUL: r = lower_product(b, e, 1.0); break;
    case EXPR_ADD: {
        /* Start from the first positive term so that no negation is needed. */
        int start = -1;
        for (int i = 0; i < e->nargs && start < 0; i++)
            if (!term_negative(e->args[i]))
                start = i;
        int acc;
        if (start < 0) {
            start = 0;
            acc = lower(b, e->args[0]);
        } else {
            acc = lower(b, e->args[start]);
        }
        for (int i = 0; i < e->nargs; i++) {
            if (i == start)
                continue;
            const expr *t = e->args[i];
            if (term_negative(t))
                acc = emit(b, TAPE_SUB, acc, lower_product(b, t, -1.0), 0);
            else
                acc = emit(b, TAPE_ADD, acc, lower(b, t), 0);
        }
        if (e->num != 0.0)
            acc = emit(b, e->num > 0 ? TAPE_ADD : TAPE_SUB, acc, emit(b, TAPE_CONST, 0, 0, fabs(e->num)), 0);
        r = acc;
        break;
    }
    default: b->failed = 1; break;
    }
    b->slot_pos[e->id] = r;
    return r;
}

tape *tape_build(const expr_ctx *c, expr *const *roots, int n_roots, const int *sym_input, int n_inputs)
{
    struct builder b = {c, sym_input, NULL, 0, 0, NULL, 0, NULL, NULL, 0};
    size_t nn = expr_ctx_nodes(c);
    tape *t = calloc(1, sizeof *t);
    b.slot_pos = malloc(nn * sizeof *b.slot_pos);
    b.slot_neg = malloc(nn * sizeof *b.slot_neg);
    if (!t || !b.slot_pos || !b.slot_neg)
        goto fail;
    for (size_t i = 0; i < nn; i++)
        b.slot_pos[i] = b.slot_neg[i] = -1;
    for (int i = 0; i < n_inputs; i++)
        emit(&b, TAPE_INPUT, i, 0, 0);
    t->outputs = malloc((n_roots ? n_roots : 1) * sizeof *t->outputs);
    if (!t->outputs)
        goto fail;
    for (int i = 0; i < n_roots && !b.failed; i++) {
        if (!roots[i]) { /* a caller's missing expression is its bug: a failed tape, not a crash */
            b.failed = 1;
            break;
        }
        t->outputs[i] = lower(&b, roots[i]);
    }
    if (b.failed)
        goto fail;
    budget_hold(c->budget, (long)((size_t)b.n * sizeof *b.ins)); /* budget: the tape's bytes */
    t->n_inputs = n_inputs;
    t->n_ins = b.n;
    t->ins = b.ins;
    t->n_outputs = n_roots;
    free(b.slot_pos);
    free(b.slot_neg);
    free(b.vn);
    return t;
fail:
    free(b.ins);
    free(b.vn);
    free(b.slot_pos);
    free(b.slot_neg);
    if (t)
        free(t->outputs);
    free(t);
    return NULL;
}
