/* expr_internal.h — the expression context's layout, shared by expr.c, parse.c,
 * print.c and deriv.c. Not part of the engine's public surface. */
#ifndef HAMEL_EXPR_INTERNAL_H
#define HAMEL_EXPR_INTERNAL_H

#include "budget.h"
#include "expr.h"

/* Sample points of the numeric zero test: ZERO_CLASSIC in [0.35, 1.35), the rest over
 * wide scales; "zero" needs ZERO_MIN_TRUSTED points that prove something. */
#define ZERO_POINTS 12
#define ZERO_CLASSIC 6
#define ZERO_MIN_TRUSTED 3

struct chunk;

struct memo_entry {
    uint32_t id; /* node id + 1; 0 = empty */
    int32_t sym;
    expr *value;
};

/* The first slot of (node id, symbol) in a derivative memo of mask + 1 entries. */
static inline size_t expr__memo_slot(size_t id, int sym, size_t mask)
{
    return (id * 2654435761u ^ (size_t)sym * 40503u) & mask;
}

#define EXPR_NUM_CACHE_BITS 6 /* expr_num's cache: 64 entries */

struct num_entry {
    uint64_t bits; /* the number's bits (+0 for -0) */
    expr *node;
};

struct expr_ctx {
    struct chunk *chunks;
    size_t bytes;
    expr **table; /* open-addressing hash set of all nodes */
    size_t cap;
    expr **nodes; /* by id */
    size_t nnodes, nodes_cap;
    size_t max_nodes;
    int overflow;
    expr_symbol *syms;
    int nsyms, syms_cap;
    int32_t *sym_table; /* open-addressing hash of symbol names -> index; -1 = empty */
    size_t sym_table_cap;
    uint64_t class_deps[SYM_OTHER + 1]; /* per class: the deps bits of its symbols */
    expr *nan, *zero, *one, *minus_one;
    struct memo_entry *memo; /* derivative memo: (node, symbol) -> derivative */
    size_t memo_cap, memo_used;
    double *zero_vals; /* per node: ZERO_POINTS values then ZERO_POINTS magnitudes */
    unsigned char *zero_done;
    size_t zero_cap;
    long double *zero_lvals;   /* per node: ZERO_POINTS values in extended precision, */
    unsigned char *zero_ldone; /* computed only for expressions the double test cannot */
    size_t zero_lcap;          /* decide (expr_is_zero) */
    expr **expand_memo;        /* expr_expand results by node id (for expand_terms), simplify.c */
    size_t expand_cap;
    int expand_terms;
    uint32_t *tree_size; /* expr_tree_size by node id, + 1; 0 = not yet counted */
    size_t tree_cap;
    expr **subst_memo;   /* expr_subst's results by node id, valid where subst_gen[id] is */
    uint32_t *subst_gen; /* subst_stamp: one stamp per call, so the memo is never cleared */
    size_t subst_cap;
    uint32_t subst_stamp;
    struct num_entry num_cache[1 << EXPR_NUM_CACHE_BITS];
    budget *budget; /* the compile budget ticked by the constructors; NULL: none (budget.h) */
};

int expr__cmp(const expr *a, const expr *b);
double expr__apply(expr_fn fn, double a, double b);
/* Every byte the context holds (arena, tables, memo, zero-test values). */
size_t expr__held_bytes(const expr_ctx *c);
int expr__zero_values(expr_ctx *c, const expr *e, double *vals, double *mags);
/* The product of the first n factors of the product e with e's coefficient, as
 * expr_product makes it from them (e's factors being in its order, with distinct
 * bases): the node is found, or made as expr_product would make it. */
expr *expr__mul_prefix(expr_ctx *c, expr *e, int n);

#endif
