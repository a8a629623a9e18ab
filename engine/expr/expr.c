/* expr.c — the expression context: node arena, hash-consing, the simplifying
 * constructors, the canonical order, evaluation and the numeric zero test.
 * Parsing is in parse.c, printing in print.c, derivatives in deriv.c. */
#include "expr.h"
#include "expr_internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES (64 * 1024)

struct chunk {
    struct chunk *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
};

static void *arena_alloc(expr_ctx *c, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct chunk *k = c->chunks;
    if (!k || k->used + n > k->size) {
        size_t size = n > CHUNK_BYTES ? n : CHUNK_BYTES;
        k = malloc(sizeof *k + size);
        if (!k)
            return NULL;
        k->next = c->chunks;
        k->used = 0;
        k->size = size;
        c->chunks = k;
        c->bytes += sizeof *k + size;
    }
    void *p = k->data + k->used;
    k->used += n;
    return p;
}

expr_ctx *expr_ctx_new(size_t max_nodes)
{
    expr_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->max_nodes = max_nodes;
    c->cap = 1024;
    c->table = calloc(c->cap, sizeof *c->table);
    if (!c->table) {
        free(c);
        return NULL;
    }
    c->nan = expr_num(c, NAN);
    c->zero = expr_num(c, 0.0);
    c->one = expr_num(c, 1.0);
    c->minus_one = expr_num(c, -1.0);
    return c;
}

void expr_ctx_free(expr_ctx *c)
{
    if (!c)
        return;
    for (struct chunk *k = c->chunks, *next; k; k = next) {
        next = k->next;
        free(k);
    }
    for (int i = 0; i < c->nsyms; i++)
        free(c->syms[i].name);
    free(c->syms);
    free(c->sym_table);
    free(c->table);
    free(c->nodes);
    free(c->memo);
    free(c->zero_vals);
    free(c->zero_done);
    free(c->zero_lvals);
    free(c->zero_ldone);
    free(c->expand_memo);
    free(c->tree_size);
    free(c->subst_memo);
    free(c->subst_gen);
    free(c);
}

int expr_ctx_overflow(const expr_ctx *c) { return c->overflow; }

size_t expr_ctx_nodes(const expr_ctx *c) { return c->nnodes; }

size_t expr_ctx_bytes(const expr_ctx *c)
{
    return c->bytes + c->cap * sizeof *c->table + c->nodes_cap * sizeof *c->nodes +
           c->memo_cap * sizeof *c->memo + c->expand_cap * sizeof *c->expand_memo +
           c->tree_cap * sizeof *c->tree_size + c->subst_cap * (sizeof *c->subst_memo + sizeof *c->subst_gen);
}

size_t expr__held_bytes(const expr_ctx *c)
{
    return expr_ctx_bytes(c) + c->zero_cap * (ZERO_POINTS * 2 * sizeof(double) + 1) +
           c->zero_lcap * (ZERO_POINTS * sizeof(long double) + 1) + (size_t)c->syms_cap * sizeof *c->syms +
           c->sym_table_cap * sizeof *c->sym_table;
}

void expr_ctx_set_budget(expr_ctx *c, struct budget *b)
{
    c->budget = b;
    if (b)
        b->ctx = c;
}

struct budget *expr_ctx_budget(const expr_ctx *c) { return c->budget; }

/* ---- symbols ---- */

/* Symbols are found by name through an open-addressing table (FNV-1a), so that a model
 * with 100,000 parameters is read in linear time. */
static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int sym_table_grow(expr_ctx *c)
{
    size_t cap = c->sym_table_cap ? 2 * c->sym_table_cap : 256;
    int32_t *t = malloc(cap * sizeof *t);
    if (!t)
        return -1;
    for (size_t i = 0; i < cap; i++)
        t[i] = -1;
    for (int s = 0; s < c->nsyms; s++) {
        size_t j = name_hash(c->syms[s].name) & (cap - 1);
        while (t[j] >= 0)
            j = (j + 1) & (cap - 1);
        t[j] = s;
    }
    free(c->sym_table);
    c->sym_table = t;
    c->sym_table_cap = cap;
    return 0;
}

int expr_sym_find(const expr_ctx *c, const char *name)
{
    if (!c->sym_table)
        return -1;
    size_t mask = c->sym_table_cap - 1;
    for (size_t j = name_hash(name) & mask; c->sym_table[j] >= 0; j = (j + 1) & mask)
        if (strcmp(c->syms[c->sym_table[j]].name, name) == 0)
            return c->sym_table[j];
    return -1;
}

int expr_sym_add(expr_ctx *c, const char *name, sym_class cls, int index)
{
    if (expr_sym_find(c, name) >= 0)
        return -1;
    if (2 * ((size_t)c->nsyms + 1) > c->sym_table_cap && sym_table_grow(c) < 0)
        return -1;
    if (c->nsyms == c->syms_cap) {
        int cap = c->syms_cap ? 2 * c->syms_cap : 32;
        expr_symbol *s = realloc(c->syms, cap * sizeof *s);
        if (!s)
            return -1;
        c->syms = s;
        c->syms_cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return -1;
    int s = c->nsyms++;
    c->syms[s].name = copy;
    c->syms[s].cls = cls;
    c->syms[s].index = index;
    c->syms[s].node = NULL;
    if (cls != SYM_DEF)
        c->syms[s].node = expr_sym(c, s);
    size_t j = name_hash(copy) & (c->sym_table_cap - 1);
    while (c->sym_table[j] >= 0)
        j = (j + 1) & (c->sym_table_cap - 1);
    c->sym_table[j] = s;
    if ((unsigned)cls <= SYM_OTHER)
        c->class_deps[cls] |= (uint64_t)1 << (s % 64);
    return s;
}

int expr_def_add(expr_ctx *c, const char *name, expr *value)
{
    int s = expr_sym_add(c, name, SYM_DEF, -1);
    if (s >= 0)
        c->syms[s].node = value;
    return s;
}

const expr_symbol *expr_sym_get(const expr_ctx *c, int s)
{
    return s >= 0 && s < c->nsyms ? &c->syms[s] : NULL;
}

int expr_sym_count(const expr_ctx *c) { return c->nsyms; }

/* ---- hash-consing ---- */

static uint64_t num_bits(double v)
{
    if (v == 0.0)
        v = 0.0; /* -0 and +0 are one number */
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

/* Multiply-xor hashing of the node's words (a node is looked up ~6 times for every
 * one created, so this is on the hot path of every symbolic stage); the table is
 * indexed by the low bits, so it finishes by folding the well-mixed high bits down,
 * or nodes with nearby argument ids would cluster and linear probing degrade. The
 * hash only places nodes in the table: nothing else depends on it. */
#define HASH_K1 0x9E3779B97F4A7C15ull
#define HASH_K2 0xC2B2AE3D27D4EB4Full

static uint32_t node_hash(int kind, int fn, int sym, double num, expr **args, int nargs)
{
    uint64_t h = ((uint64_t)kind << 40 | (uint64_t)fn << 32 | (uint32_t)sym) * HASH_K1;
    h = (h ^ num_bits(num)) * HASH_K2;
    for (int i = 0; i < nargs; i++)
        h = (h ^ (h >> 31) ^ args[i]->id) * HASH_K1;
    h ^= h >> 29;
    h *= HASH_K2;
    h ^= h >> 32;
    return (uint32_t)h;
}

static int node_equal(const expr *e, int kind, int fn, int sym, double num, expr **args, int nargs)
{
    if (e->kind != kind || e->fn != fn || e->sym != sym || e->nargs != nargs)
        return 0;
    if (num_bits(e->num) != num_bits(num) && !(isnan(e->num) && isnan(num)))
        return 0;
    for (int i = 0; i < nargs; i++)
        if (e->args[i] != args[i])
            return 0;
    return 1;
}

static int table_grow(expr_ctx *c)
{
    size_t cap = c->cap * 2;
    expr **t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    for (size_t i = 0; i < c->cap; i++) {
        expr *e = c->table[i];
        if (!e)
            continue;
        size_t j = e->hash & (cap - 1);
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = e;
    }
    free(c->table);
    c->table = t;
    c->cap = cap;
    return 0;
}

/* Finds or creates the node with these fields; args are copied. */
static expr *intern(expr_ctx *c, int kind, int fn, int sym, double num, expr **args, int nargs)
{
    if (budget_tick(c->budget) && c->nan) { /* budget: out of time or memory, or cancelled */
        c->overflow = 1;
        return c->nan;
    }
    if (kind == EXPR_NUM && num == 0.0)
        num = 0.0;
    uint32_t h = node_hash(kind, fn, sym, num, args, nargs);
    size_t j = h & (c->cap - 1);
    for (expr *e; (e = c->table[j]) != NULL; j = (j + 1) & (c->cap - 1))
        if (e->hash == h && node_equal(e, kind, fn, sym, num, args, nargs))
            return e;
    if (c->max_nodes && c->nnodes >= c->max_nodes && c->nan) {
        c->overflow = 1;
        return c->nan;
    }
    if (c->nnodes + 1 > c->cap / 2) {
        if (table_grow(c) < 0) {
            c->overflow = 1;
            return c->nan;
        }
        j = h & (c->cap - 1);
        while (c->table[j])
            j = (j + 1) & (c->cap - 1);
    }
    if (c->nnodes == c->nodes_cap) {
        size_t cap = c->nodes_cap ? 2 * c->nodes_cap : 1024;
        expr **nodes = realloc(c->nodes, cap * sizeof *nodes);
        if (!nodes) {
            c->overflow = 1;
            return c->nan;
        }
        c->nodes = nodes;
        c->nodes_cap = cap;
    }
    expr *e = arena_alloc(c, sizeof *e + (size_t)nargs * sizeof(expr *));
    if (!e) {
        c->overflow = 1;
        return c->nan;
    }
    e->id = (uint32_t)c->nnodes;
    e->kind = (uint8_t)kind;
    e->fn = (uint8_t)fn;
    e->nargs = (uint16_t)nargs;
    e->sym = sym;
    e->hash = h;
    e->num = num;
    e->args = (expr **)(e + 1);
    e->deps = kind == EXPR_SYM ? (uint64_t)1 << (sym % 64) : 0;
    e->nonfinite = (kind == EXPR_NUM || kind == EXPR_ADD || kind == EXPR_MUL) && !isfinite(num);
    if (kind == EXPR_POW && args[0]->kind == EXPR_NUM && args[1]->kind == EXPR_NUM)
        e->nonfinite = isinf(pow(args[0]->num, args[1]->num)); /* 0^-1, (1e-316)^-1 */
    for (int i = 0; i < nargs; i++) {
        e->args[i] = args[i];
        e->deps |= args[i]->deps;
        e->nonfinite |= args[i]->nonfinite;
    }
    c->nodes[c->nnodes++] = e;
    c->table[j] = e;
    return e;
}

/* ---- mark and rollback ---- */

void expr_ctx_mark(const expr_ctx *c, expr_mark *mk)
{
    memset(mk, 0, sizeof *mk);
    mk->nnodes = c->nnodes;
    mk->nodes_cap = c->nodes_cap;
    mk->cap = c->cap;
    mk->bytes = c->bytes;
    mk->chunk = c->chunks;
    mk->chunk_used = c->chunks ? c->chunks->used : 0;
    mk->nsyms = c->nsyms;
    mk->syms_cap = c->syms_cap;
    mk->overflow = c->overflow;
    mk->sym_table_cap = c->sym_table_cap;
    memcpy(mk->class_deps, c->class_deps, sizeof mk->class_deps);
    mk->memo_cap = c->memo_cap;
    mk->zero_cap = c->zero_cap;
    mk->zero_lcap = c->zero_lcap;
    mk->expand_cap = c->expand_cap;
    mk->tree_cap = c->tree_cap;
    mk->subst_cap = c->subst_cap;
}

/* Gives an array grown since the mark back its size at the mark (cap elements of
 * size elem; 0: freed). A shrinking realloc that fails leaves the larger block, which
 * still holds the first cap elements. */
static void *shrink_to(void *p, size_t elem, size_t cap, size_t now)
{
    if (cap >= now)
        return p;
    if (cap == 0) {
        free(p);
        return NULL;
    }
    void *q = realloc(p, cap * elem);
    if (q)
        p = q;
    return p;
}

/* Refills the hash-consing table with the nodes below id n, at cap slots if a table
 * of that size can be had, else in the table it has. */
static void table_rebuild(expr_ctx *c, size_t n, size_t cap)
{
    expr **t = cap != c->cap ? calloc(cap, sizeof *t) : NULL;
    if (t) {
        free(c->table);
        c->table = t;
        c->cap = cap;
    } else {
        memset(c->table, 0, c->cap * sizeof *c->table);
    }
    for (size_t i = 0; i < n; i++) {
        expr *e = c->nodes[i];
        size_t j = e->hash & (c->cap - 1);
        while (c->table[j])
            j = (j + 1) & (c->cap - 1);
        c->table[j] = e;
    }
}

/* The same for the symbol-name table with the first n symbols. */
static void sym_table_rebuild(expr_ctx *c, int n, size_t cap)
{
    int32_t *t = cap != c->sym_table_cap && cap ? malloc(cap * sizeof *t) : NULL;
    if (t) {
        free(c->sym_table);
        c->sym_table = t;
        c->sym_table_cap = cap;
    } else if (cap == 0 && n == 0) {
        free(c->sym_table);
        c->sym_table = NULL;
        c->sym_table_cap = 0;
        return;
    }
    for (size_t i = 0; i < c->sym_table_cap; i++)
        c->sym_table[i] = -1;
    for (int s = 0; s < n; s++) {
        size_t j = name_hash(c->syms[s].name) & (c->sym_table_cap - 1);
        while (c->sym_table[j] >= 0)
            j = (j + 1) & (c->sym_table_cap - 1);
        c->sym_table[j] = s;
    }
}

/* Keeps the derivative memo's entries that are about nodes and symbols of the mark and
 * whose derivative is one too, in a table of the mark's size (as many as fit its load
 * factor; the memo is a cache, so an entry dropped is only recomputed). */
static void memo_rollback(expr_ctx *c, size_t n, int nsyms, size_t cap)
{
    struct memo_entry *old = c->memo;
    size_t old_cap = c->memo_cap;
    if (!old)
        return;
    struct memo_entry *m = cap ? calloc(cap, sizeof *m) : NULL;
    if (cap && !m) { /* no room for a new table: forget every entry, keep the table */
        memset(old, 0, old_cap * sizeof *old);
        c->memo_used = 0;
        return;
    }
    c->memo = m;
    c->memo_cap = cap;
    c->memo_used = 0;
    for (size_t i = 0; m && i < old_cap; i++) {
        const struct memo_entry *o = &old[i];
        if (!o->id || o->id - 1 >= n || o->sym >= nsyms || o->value->id >= n)
            continue;
        if (2 * (c->memo_used + 1) > cap)
            break;
        size_t j = expr__memo_slot(o->id - 1, o->sym, cap - 1);
        while (m[j].id)
            j = (j + 1) & (cap - 1);
        m[j] = *o;
        c->memo_used++;
    }
    free(old);
}

void expr_ctx_rollback(expr_ctx *c, const expr_mark *mk)
{
    size_t n = mk->nnodes;
    /* with no node or symbol made since, every cached entry is about the mark's nodes:
     * the memos need no scan (a failure before any work costs no walk of them) */
    int made = c->nnodes > n || c->nsyms > mk->nsyms;
    /* the nodes by id and the hash-consing table */
    if (c->nnodes > n || c->cap != mk->cap) {
        c->nnodes = n;
        table_rebuild(c, n, mk->cap);
    }
    c->nodes = shrink_to(c->nodes, sizeof *c->nodes, mk->nodes_cap, c->nodes_cap);
    c->nodes_cap = mk->nodes_cap;
    for (size_t i = 0; i < sizeof c->num_cache / sizeof *c->num_cache; i++)
        if (c->num_cache[i].node && c->num_cache[i].node->id >= n)
            c->num_cache[i].node = NULL;
    /* the symbols */
    if (c->nsyms > mk->nsyms || c->sym_table_cap != mk->sym_table_cap) {
        for (int s = mk->nsyms; s < c->nsyms; s++)
            free(c->syms[s].name);
        c->nsyms = mk->nsyms;
        sym_table_rebuild(c, c->nsyms, mk->sym_table_cap);
    }
    c->syms = shrink_to(c->syms, sizeof *c->syms, (size_t)mk->syms_cap, (size_t)c->syms_cap);
    c->syms_cap = mk->syms_cap;
    memcpy(c->class_deps, mk->class_deps, sizeof c->class_deps);
    /* the memos and caches by node id: nothing about a node past the mark, nothing
     * pointing to one */
    if (made || c->memo_cap != mk->memo_cap)
        memo_rollback(c, n, mk->nsyms, mk->memo_cap);
    c->zero_vals = shrink_to(c->zero_vals, ZERO_POINTS * 2 * sizeof *c->zero_vals, mk->zero_cap, c->zero_cap);
    c->zero_done = shrink_to(c->zero_done, 1, mk->zero_cap, c->zero_cap);
    c->zero_cap = mk->zero_cap;
    if (made && c->zero_cap > n)
        memset(c->zero_done + n, 0, c->zero_cap - n);
    c->zero_lvals =
        shrink_to(c->zero_lvals, ZERO_POINTS * sizeof *c->zero_lvals, mk->zero_lcap, c->zero_lcap);
    c->zero_ldone = shrink_to(c->zero_ldone, 1, mk->zero_lcap, c->zero_lcap);
    c->zero_lcap = mk->zero_lcap;
    if (made && c->zero_lcap > n)
        memset(c->zero_ldone + n, 0, c->zero_lcap - n);
    c->expand_memo = shrink_to(c->expand_memo, sizeof *c->expand_memo, mk->expand_cap, c->expand_cap);
    c->expand_cap = mk->expand_cap;
    for (size_t i = 0; made && i < c->expand_cap; i++)
        if (c->expand_memo[i] && (i >= n || c->expand_memo[i]->id >= n))
            c->expand_memo[i] = NULL;
    c->tree_size = shrink_to(c->tree_size, sizeof *c->tree_size, mk->tree_cap, c->tree_cap);
    c->tree_cap = mk->tree_cap;
    if (made && c->tree_cap > n)
        memset(c->tree_size + n, 0, (c->tree_cap - n) * sizeof *c->tree_size);
    /* expr_subst's memo is read only where stamped by the running call, and every call
     * takes a new stamp: its entries need no clearing */
    c->subst_memo = shrink_to(c->subst_memo, sizeof *c->subst_memo, mk->subst_cap, c->subst_cap);
    c->subst_gen = shrink_to(c->subst_gen, sizeof *c->subst_gen, mk->subst_cap, c->subst_cap);
    c->subst_cap = mk->subst_cap;
    c->overflow = mk->overflow;
    /* last, the arena (the caches above were read through the nodes it frees): the
     * chunks made since, then the part of the mark's chunk used since */
    while (c->chunks && c->chunks != mk->chunk) {
        struct chunk *k = c->chunks;
        c->chunks = k->next;
        free(k);
    }
    if (c->chunks)
        c->chunks->used = mk->chunk_used;
    c->bytes = mk->bytes;
}

/* Numbers are looked up through a small direct-mapped cache by their bits first (the
 * same few constants are made thousands of times per compile); the cache only holds
 * nodes intern returned, so it gives what intern would. */
expr *expr_num(expr_ctx *c, double v)
{
    uint64_t b = num_bits(v);
    struct num_entry *slot = &c->num_cache[(b * 0x9E3779B97F4A7C15ull) >> (64 - EXPR_NUM_CACHE_BITS)];
    if (slot->node && slot->bits == b)
        return slot->node;
    expr *e = intern(c, EXPR_NUM, 0, -1, v, NULL, 0);
    if (!c->overflow && e->kind == EXPR_NUM && num_bits(e->num) == b) {
        slot->bits = b;
        slot->node = e;
    }
    return e;
}

expr *expr_sym(expr_ctx *c, int s) { return intern(c, EXPR_SYM, 0, s, 0.0, NULL, 0); }

int expr_is_num(const expr *e, double v) { return e->kind == EXPR_NUM && e->num == v; }

/* ---- canonical order ---- */

static const expr *pow_base(const expr *e) { return e->kind == EXPR_POW ? e->args[0] : e; }

/* Total order used to sort the terms of sums and the factors of products. It compares
 * canonical tuples: numbers first; a product as its list of factors (a non-product
 * is a list of one) then its coefficient; a power as (base, exponent) (a non-power
 * has exponent 1); then symbols < functions < sums. */
/* -1, 0 or 1 as x is below, equal to or above y. */
static int cmp_num(double x, double y) { return x < y ? -1 : x > y ? 1 : 0; }

/* The order of two expressions one of which is a product (a single factor otherwise):
 * factor by factor, then by count, then by coefficient. */
static int cmp_products(const expr *a, const expr *b)
{
    expr *const *fa = a->kind == EXPR_MUL ? a->args : (expr *const *)&a;
    expr *const *fb = b->kind == EXPR_MUL ? b->args : (expr *const *)&b;
    int na = a->kind == EXPR_MUL ? a->nargs : 1;
    int nb = b->kind == EXPR_MUL ? b->nargs : 1;
    for (int i = 0; i < na && i < nb; i++) {
        int r = expr__cmp(fa[i], fb[i]);
        if (r)
            return r;
    }
    if (na != nb)
        return na < nb ? -1 : 1;
    double ca = a->kind == EXPR_MUL ? a->num : 1.0;
    double cb = b->kind == EXPR_MUL ? b->num : 1.0;
    return cmp_num(ca, cb);
}

int expr__cmp(const expr *a, const expr *b)
{
    if (a == b)
        return 0;
    if (a->kind == EXPR_NUM || b->kind == EXPR_NUM) {
        if (a->kind != EXPR_NUM)
            return 1;
        if (b->kind != EXPR_NUM)
            return -1;
        return cmp_num(a->num, b->num);
    }
    if (a->kind == EXPR_MUL || b->kind == EXPR_MUL)
        return cmp_products(a, b);
    if (a->kind == EXPR_POW || b->kind == EXPR_POW) {
        int r = expr__cmp(pow_base(a), pow_base(b));
        if (r)
            return r;
        if (a->kind != EXPR_POW)
            return -1;
        if (b->kind != EXPR_POW)
            return 1;
        return expr__cmp(a->args[1], b->args[1]);
    }
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    switch (a->kind) {
    case EXPR_SYM: return a->sym < b->sym ? -1 : 1;
    case EXPR_FUN:
        if (a->fn != b->fn)
            return a->fn < b->fn ? -1 : 1;
        /* fall through */
    default:
        for (int i = 0; i < a->nargs && i < b->nargs; i++) {
            int r = expr__cmp(a->args[i], b->args[i]);
            if (r)
                return r;
        }
        if (a->nargs != b->nargs)
            return a->nargs < b->nargs ? -1 : 1;
        return cmp_num(a->num, b->num);
    }
}

/* ---- sums ---- */

double expr_split_coeff(expr_ctx *c, expr *e, expr **rest)
{
    if (e->kind == EXPR_NUM) {
        *rest = c->one;
        return e->num;
    }
    if (e->kind == EXPR_MUL && e->num != 1.0) {
        *rest = e->nargs == 1 ? e->args[0] : intern(c, EXPR_MUL, 0, -1, 1.0, e->args, e->nargs);
        return e->num;
    }
    *rest = e;
    return 1.0;
}

/* coef * rest, where rest has coefficient 1 and is not a number. */
static expr *with_coeff(expr_ctx *c, double coef, expr *rest)
{
    if (coef == 0.0)
        return c->zero;
    if (coef == 1.0)
        return rest;
    if (rest->kind == EXPR_MUL)
        return intern(c, EXPR_MUL, 0, -1, coef, rest->args, rest->nargs);
    return intern(c, EXPR_MUL, 0, -1, coef, &rest, 1);
}

/* A term coef*rest of a sum being built; orig is the operand it came from while no
 * like term has been added to it (with_coeff(coef, rest) would give orig back). */
struct term {
    expr *rest;
    double coef;
    expr *orig;
};

static int term_cmp(const void *x, const void *y)
{
    const struct term *a = x, *b = y;
    return expr__cmp(a->rest, b->rest);
}

/* Sorting the terms of a sum and the factors of a product: a stable insertion sort
 * for the short lists almost all of them are (they often come already sorted, the
 * merged lists of sorted operands), glibc's qsort (a stable merge sort) for long ones.
 * Both are stable, so the order is the same either way. */
#define EXPR_SORT_SHORT 24

static void term_sort(struct term *v, int n)
{
    if (n > EXPR_SORT_SHORT) {
        qsort(v, n, sizeof *v, term_cmp);
        return;
    }
    for (int i = 1; i < n; i++) {
        struct term x = v[i];
        int j = i;
        while (j > 0 && expr__cmp(v[j - 1].rest, x.rest) > 0) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* Growable scratch arrays for sums and products (never on a hot path). */
struct tvec {
    struct term *v;
    int n, cap;
    struct term local[16];
};

static void tvec_init(struct tvec *t)
{
    t->v = t->local;
    t->n = 0;
    t->cap = 16;
}

static int tvec_push(struct tvec *t, expr *rest, double coef, expr *orig)
{
    if (t->n == t->cap) {
        int cap = 2 * t->cap;
        struct term *v = malloc(cap * sizeof *v);
        if (!v)
            return -1;
        memcpy(v, t->v, t->n * sizeof *v);
        if (t->v != t->local)
            free(t->v);
        t->v = v;
        t->cap = cap;
    }
    t->v[t->n].rest = rest;
    t->v[t->n].coef = coef;
    t->v[t->n].orig = orig;
    t->n++;
    return 0;
}

static void tvec_free(struct tvec *t)
{
    if (t->v != t->local)
        free(t->v);
}

static int sum_collect(expr_ctx *c, struct tvec *tv, double *constant, expr *e, double scale)
{
    if (e->kind == EXPR_NUM) {
        *constant += scale * e->num;
        return 0;
    }
    if (e->kind == EXPR_ADD) {
        *constant += scale * e->num;
        for (int i = 0; i < e->nargs; i++)
            if (sum_collect(c, tv, constant, e->args[i], scale) < 0)
                return -1;
        return 0;
    }
    expr *rest;
    double coef = expr_split_coeff(c, e, &rest);
    return tvec_push(tv, rest, scale * coef, scale == 1.0 ? e : NULL);
}

expr *expr_sum(expr_ctx *c, expr **terms, int n)
{
    if (budget_stopped(c->budget)) { /* budget: unwind without sorting */
        c->overflow = 1;
        return c->nan;
    }
    struct tvec tv;
    tvec_init(&tv);
    double constant = 0.0;
    for (int i = 0; i < n; i++)
        if (sum_collect(c, &tv, &constant, terms[i], 1.0) < 0) {
            tvec_free(&tv);
            c->overflow = 1;
            return c->nan;
        }
    term_sort(tv.v, tv.n);
    /* a sort is work the node count does not see: sin(sin(...(x))) 3000 deep built
     * products of thousands of deep factors, 53 s of CPU time between two checks */
    budget_tick_n(c->budget, (unsigned)tv.n);
    int k = 0;
    for (int i = 0; i < tv.n; i++) {
        if (k > 0 && tv.v[k - 1].rest == tv.v[i].rest) {
            tv.v[k - 1].coef += tv.v[i].coef;
            tv.v[k - 1].orig = NULL;
        } else
            tv.v[k++] = tv.v[i];
    }
    expr *local[17], **args = k + 1 <= 17 ? local : malloc((k + 1) * sizeof *args);
    if (!args) {
        tvec_free(&tv);
        c->overflow = 1;
        return c->nan;
    }
    int m = 0, nested = 0;
    for (int i = 0; i < k; i++)
        if (tv.v[i].coef != 0.0) {
            args[m] = tv.v[i].orig ? tv.v[i].orig : with_coeff(c, tv.v[i].coef, tv.v[i].rest);
            /* c*(a + b) and (1 - c)*(a + b) collected give the sum itself: flatten it */
            nested |= args[m]->kind == EXPR_ADD;
            m++;
        }
    expr *r;
    if (nested) {
        args[m] = expr_num(c, constant);
        r = expr_sum(c, args, m + 1);
        if (args != local)
            free(args);
        tvec_free(&tv);
        return r;
    }
    if (m == 0)
        r = expr_num(c, constant);
    else if (m == 1 && constant == 0.0)
        r = args[0];
    else
        r = intern(c, EXPR_ADD, 0, -1, constant, args, m);
    if (args != local)
        free(args);
    tvec_free(&tv);
    return r;
}

expr *expr_add(expr_ctx *c, expr *a, expr *b)
{
    if (expr_is_num(a, 0.0))
        return b;
    if (expr_is_num(b, 0.0))
        return a;
    expr *t[2] = {a, b};
    return expr_sum(c, t, 2);
}

expr *expr_neg(expr_ctx *c, expr *a) { return expr_mul(c, c->minus_one, a); }

expr *expr_sub(expr_ctx *c, expr *a, expr *b) { return expr_add(c, a, expr_neg(c, b)); }

/* ---- products ---- */

/* A factor base^exp of a product being built; node is base^exp itself when it is
 * known to be what expr_pow(base, exp) returns (an operand's own factor: every power
 * node is made by expr_pow, which gives it back unchanged), else NULL. */
struct factor {
    expr *base;
    expr *exp;
    expr *node;
};

static int factor_cmp(const void *x, const void *y)
{
    const struct factor *a = x, *b = y;
    return expr__cmp(a->base, b->base);
}

static void factor_sort(struct factor *v, int n)
{
    if (n > EXPR_SORT_SHORT) {
        qsort(v, n, sizeof *v, factor_cmp);
        return;
    }
    for (int i = 1; i < n; i++) {
        struct factor x = v[i];
        int j = i;
        while (j > 0 && expr__cmp(v[j - 1].base, x.base) > 0) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

struct fvec {
    struct factor *v;
    int n, cap;
    struct factor local[16];
};

/* Doubles f's storage (moving it off the stack the first time). */
static int fvec_grow(struct fvec *f)
{
    int cap = 2 * f->cap;
    struct factor *v = malloc(cap * sizeof *v);
    if (!v)
        return -1;
    memcpy(v, f->v, f->n * sizeof *v);
    if (f->v != f->local)
        free(f->v);
    f->v = v;
    f->cap = cap;
    return 0;
}

static inline int fvec_push(struct fvec *f, expr *base, expr *exp, expr *node)
{
    if (f->n == f->cap && fvec_grow(f) < 0)
        return -1;
    f->v[f->n].base = base;
    f->v[f->n].exp = exp;
    f->v[f->n].node = node;
    f->n++;
    return 0;
}

static int prod_collect(expr_ctx *c, struct fvec *fv, double *coef, expr *e)
{
    if (e->kind == EXPR_NUM) {
        *coef *= e->num;
        return 0;
    }
    if (e->kind == EXPR_MUL) {
        *coef *= e->num;
        for (int i = 0; i < e->nargs; i++)
            if (prod_collect(c, fv, coef, e->args[i]) < 0)
                return -1;
        return 0;
    }
    if (e->kind == EXPR_POW)
        return fvec_push(fv, e->args[0], e->args[1], e);
    return fvec_push(fv, e, c->one, e);
}

expr *expr_product(expr_ctx *c, expr **factors, int n)
{
    if (budget_stopped(c->budget)) { /* budget: unwind without sorting */
        c->overflow = 1;
        return c->nan;
    }
    struct fvec fv; /* not zero-initialised: its local array is only written */
    fv.n = 0;
    fv.cap = 16;
    fv.v = fv.local;
    double coef = 1.0;
    expr *r = NULL;
    for (int i = 0; i < n; i++)
        if (prod_collect(c, &fv, &coef, factors[i]) < 0)
            goto fail;
    for (int round = 0; round < 4; round++) {
        factor_sort(fv.v, fv.n);
        budget_tick_n(c->budget, (unsigned)fv.n); /* as a sum's sort */
        int k = 0;
        for (int i = 0; i < fv.n; i++) {
            if (k > 0 && fv.v[k - 1].base == fv.v[i].base) {
                fv.v[k - 1].exp = expr_add(c, fv.v[k - 1].exp, fv.v[i].exp);
                fv.v[k - 1].node = NULL;
            } else
                fv.v[k++] = fv.v[i];
        }
        fv.n = k;
        /* Raise each base to its exponent; a result that is a number or a product
         * (x^0, numbers, (a*b)^2) is folded back in and the list sorted again. */
        int again = 0, m = 0;
        struct factor extra[16];
        int nextra = 0;
        for (int i = 0; i < fv.n; i++) {
            expr *p = fv.v[i].node ? fv.v[i].node : expr_pow(c, fv.v[i].base, fv.v[i].exp);
            if (p->kind == EXPR_NUM) {
                coef *= p->num;
                continue;
            }
            if (p->kind == EXPR_MUL) {
                coef *= p->num;
                for (int j = 0; j < p->nargs; j++) {
                    expr *f = p->args[j];
                    struct factor x = {f->kind == EXPR_POW ? f->args[0] : f,
                                       f->kind == EXPR_POW ? f->args[1] : c->one, f};
                    if (nextra < 16)
                        extra[nextra++] = x;
                    else if (fvec_push(&fv, x.base, x.exp, x.node) < 0)
                        goto fail;
                }
                again = 1;
                continue;
            }
            if (p->kind == EXPR_POW)
                fv.v[m++] = (struct factor){p->args[0], p->args[1], p};
            else
                fv.v[m++] = (struct factor){p, c->one, p};
        }
        fv.n = m;
        for (int j = 0; j < nextra; j++)
            if (fvec_push(&fv, extra[j].base, extra[j].exp, extra[j].node) < 0)
                goto fail;
        if (!again)
            break;
    }
    if (coef == 0.0 || fv.n == 0) {
        r = expr_num(c, coef);
    } else {
        expr *local[16], **args = fv.n <= 16 ? local : malloc(fv.n * sizeof *args);
        if (!args)
            goto fail;
        factor_sort(fv.v, fv.n);
        for (int i = 0; i < fv.n; i++)
            args[i] = expr_is_num(fv.v[i].exp, 1.0) ? fv.v[i].base
                      : fv.v[i].node
                          ? fv.v[i].node
                          : intern(c, EXPR_POW, 0, -1, 0.0, (expr *[]){fv.v[i].base, fv.v[i].exp}, 2);
        if (fv.n == 1 && coef == 1.0)
            r = args[0];
        else
            r = intern(c, EXPR_MUL, 0, -1, coef, args, fv.n);
        if (args != local)
            free(args);
    }
    if (fv.v != fv.local)
        free(fv.v);
    return r;
fail:
    if (fv.v != fv.local)
        free(fv.v);
    c->overflow = 1;
    return c->nan;
}

expr *expr__mul_prefix(expr_ctx *c, expr *e, int n) { return intern(c, EXPR_MUL, 0, -1, e->num, e->args, n); }

/* A number computed from numbers may replace the expression only if nothing was lost:
 * finite, and not an underflow (0 or subnormal) unless exact_zero says 0 is exact.
 * (x/1.61)^4099 is not x^4099 * 0, exp(-1000) stays exp(-1000): issue 15.) */
static int folds(double v, int exact_zero)
{
    if (v == 0.0)
        return exact_zero;
    return isnormal(v);
}

expr *expr_mul(expr_ctx *c, expr *a, expr *b)
{
    if (expr_is_num(a, 1.0))
        return b;
    if (expr_is_num(b, 1.0))
        return a;
    if (a->kind == EXPR_NUM && b->kind == EXPR_NUM && folds(a->num * b->num, a->num == 0.0 || b->num == 0.0))
        return expr_num(c, a->num * b->num);
    if ((expr_is_num(a, 0.0) && isfinite(b->num)) || (expr_is_num(b, 0.0) && isfinite(a->num)))
        return c->zero;
    expr *t[2] = {a, b};
    return expr_product(c, t, 2);
}

expr *expr_div(expr_ctx *c, expr *a, expr *b)
{
    /* folded as expr_pow folds b^-1 (folds): 1/(1e+308) stays what 1e308^-1 is, so a
     * printed expression parses back to the same node (the fuzzer's round trip) */
    if (b->kind == EXPR_NUM && a->kind == EXPR_NUM && folds(a->num / b->num, a->num == 0.0 && b->num != 0.0))
        return expr_num(c, a->num / b->num);
    return expr_mul(c, a, expr_pow(c, b, c->minus_one));
}

static int is_integer(double v) { return isfinite(v) && v == floor(v) && fabs(v) < 1e9; }

expr *expr_pow(expr_ctx *c, expr *b, expr *e)
{
    if (e->kind == EXPR_NUM) {
        double k = e->num;
        if (k == 0.0)
            return c->one;
        if (k == 1.0)
            return b;
        if (b->kind == EXPR_NUM) {
            double v = pow(b->num, k);
            if (folds(v, b->num == 0.0) && (b->num >= 0.0 || is_integer(k)) && !(b->num == 0.0 && k < 0))
                return expr_num(c, v);
            return intern(c, EXPR_POW, 0, -1, 0.0, (expr *[]){b, e}, 2);
        }
        if (is_integer(k)) {
            if (b->kind == EXPR_POW) {
                expr *be = b->args[1];
                if (be->kind == EXPR_NUM)
                    return expr_pow(c, b->args[0], expr_num(c, be->num * k));
                return expr_pow(c, b->args[0], expr_mul(c, be, e));
            }
            /* (c*x)^k = c^k x^k only while c^k stays moderate: (1.557*y)^1999 as
             * 1e384*y^1999 overflows where the power itself is ~1, and the Horner
             * factoring's partial products multiplied such coefficients to inf */
            double ck = fabs(pow(b->num, k));
            if (b->kind == EXPR_MUL && ck >= 1e-30 && ck <= 1e30) {
                expr *local[16], **f = b->nargs < 16 ? local : malloc((b->nargs + 1) * sizeof *f);
                if (!f) {
                    c->overflow = 1;
                    return c->nan;
                }
                for (int i = 0; i < b->nargs; i++)
                    f[i] = expr_pow(c, b->args[i], e);
                f[b->nargs] = expr_num(c, pow(b->num, k));
                expr *r = expr_product(c, f, b->nargs + 1);
                if (f != local)
                    free(f);
                return r;
            }
            if (b->kind == EXPR_FUN && b->fn == FN_SQRT && fmod(k, 2.0) == 0.0)
                return expr_pow(c, b->args[0], expr_num(c, k / 2));
        }
    }
    if (expr_is_num(b, 1.0))
        return c->one;
    return intern(c, EXPR_POW, 0, -1, 0.0, (expr *[]){b, e}, 2);
}

expr *expr_powi(expr_ctx *c, expr *b, int k) { return expr_pow(c, b, expr_num(c, k)); }

/* ---- functions ---- */

static const char *const fn_names[FN_COUNT] = {
    [FN_SIN] = "sin",   [FN_COS] = "cos",     [FN_TAN] = "tan",   [FN_ASIN] = "asin", [FN_ACOS] = "acos",
    [FN_ATAN] = "atan", [FN_ATAN2] = "atan2", [FN_SINH] = "sinh", [FN_COSH] = "cosh", [FN_TANH] = "tanh",
    [FN_EXP] = "exp",   [FN_LOG] = "log",     [FN_SQRT] = "sqrt", [FN_ABS] = "abs",   [FN_SIGN] = "sign",
};

const char *expr_fn_name(expr_fn fn) { return fn < FN_COUNT ? fn_names[fn] : "?"; }

double expr__apply(expr_fn fn, double a, double b)
{
    switch (fn) {
    case FN_SIN: return sin(a);
    case FN_COS: return cos(a);
    case FN_TAN: return tan(a);
    case FN_ASIN: return asin(a);
    case FN_ACOS: return acos(a);
    case FN_ATAN: return atan(a);
    case FN_ATAN2: return atan2(a, b);
    case FN_SINH: return sinh(a);
    case FN_COSH: return cosh(a);
    case FN_TANH: return tanh(a);
    case FN_EXP: return exp(a);
    case FN_LOG: return log(a);
    case FN_SQRT: return sqrt(a);
    case FN_ABS: return fabs(a);
    case FN_SIGN: return a > 0.0 ? 1.0 : a < 0.0 ? -1.0 : a; /* 0 at 0, NaN at NaN */
    default: return NAN;
    }
}

expr *expr_fun(expr_ctx *c, expr_fn fn, expr *a)
{
    if (a->kind == EXPR_NUM) {
        double v = expr__apply(fn, a->num, 0.0);
        if (folds(v, a->num == 0.0 || fn == FN_LOG || fn == FN_ACOS))
            return expr_num(c, v);
    }
    /* Pull the sign out of odd functions and drop it in even ones, so f(-x) and
     * -f(x) are one node. */
    if (a->kind == EXPR_MUL && a->num < 0) {
        expr *pos = expr_neg(c, a);
        switch (fn) {
        case FN_SIN:
        case FN_TAN:
        case FN_ASIN:
        case FN_ATAN:
        case FN_SINH:
        case FN_TANH:
        case FN_SIGN: return expr_neg(c, expr_fun(c, fn, pos));
        case FN_COS:
        case FN_COSH:
        case FN_ABS: return expr_fun(c, fn, pos);
        default: break;
        }
    }
    return intern(c, EXPR_FUN, fn, -1, 0.0, &a, 1);
}

expr *expr_fun2(expr_ctx *c, expr_fn fn, expr *a, expr *b)
{
    if (a->kind == EXPR_NUM && b->kind == EXPR_NUM) {
        double v = expr__apply(fn, a->num, b->num);
        if (folds(v, a->num == 0.0))
            return expr_num(c, v);
    }
    return intern(c, EXPR_FUN, fn, -1, 0.0, (expr *[]){a, b}, 2);
}

/* ---- dependence ---- */

/* The walk of expr_depends: a tree walk pruned by the deps masks, which is fast on
 * ordinary expressions but exponential on a DAG whose shared nodes carry the symbol's
 * bit without the symbol (d_i = d_{i-1} + x*d_{i-1} over 64+ symbols). Past
 * DEPENDS_TREE_STEPS nodes the walk is redone visiting each node once. */
#define DEPENDS_TREE_STEPS 4096

static int depends_tree(const expr *e, int s, uint64_t bit, long *steps)
{
    if (!(e->deps & bit))
        return 0;
    if (e->kind == EXPR_SYM)
        return e->sym == s;
    if (--*steps < 0)
        return -1;
    for (int i = 0; i < e->nargs; i++) {
        int r = depends_tree(e->args[i], s, bit, steps);
        if (r)
            return r;
    }
    return 0;
}

struct visited {
    const expr **v; /* open-addressing set of nodes */
    size_t cap, n;
};

/* Adds e; returns 1 if it was new, 0 if seen, -1 out of memory. */
static int visited_add(struct visited *vs, const expr *e)
{
    if (2 * (vs->n + 1) > vs->cap) {
        size_t cap = vs->cap ? 2 * vs->cap : 1024;
        const expr **v = calloc(cap, sizeof *v);
        if (!v)
            return -1;
        for (size_t i = 0; i < vs->cap; i++)
            if (vs->v[i]) {
                size_t j = vs->v[i]->id & (cap - 1);
                while (v[j])
                    j = (j + 1) & (cap - 1);
                v[j] = vs->v[i];
            }
        free(vs->v);
        vs->v = v;
        vs->cap = cap;
    }
    size_t j = e->id & (vs->cap - 1);
    for (; vs->v[j]; j = (j + 1) & (vs->cap - 1))
        if (vs->v[j] == e)
            return 0;
    vs->v[j] = e;
    vs->n++;
    return 1;
}

static int depends_dag(const expr *e, int s, uint64_t bit, struct visited *vs)
{
    if (!(e->deps & bit))
        return 0;
    if (e->kind == EXPR_SYM)
        return e->sym == s;
    int fresh = visited_add(vs, e);
    if (fresh <= 0)
        return fresh < 0; /* seen: already answered no; out of memory: "may depend" */
    for (int i = 0; i < e->nargs; i++)
        if (depends_dag(e->args[i], s, bit, vs))
            return 1;
    return 0;
}

int expr_depends(const expr *e, int s)
{
    uint64_t bit = (uint64_t)1 << (s % 64);
    long steps = DEPENDS_TREE_STEPS;
    int r = depends_tree(e, s, bit, &steps);
    if (r >= 0)
        return r;
    struct visited vs = {NULL, 0, 0};
    r = depends_dag(e, s, bit, &vs);
    free(vs.v);
    return r;
}

int expr_depends_class(const expr_ctx *c, const expr *e, sym_class cls)
{
    if ((unsigned)cls <= SYM_OTHER && !(e->deps & c->class_deps[cls]))
        return 0; /* no symbol of the class shares a deps bit with e */
    for (int s = 0; s < c->nsyms; s++)
        if (c->syms[s].cls == cls && expr_depends(e, s))
            return 1;
    return 0;
}

/* ---- evaluation ---- */

static double eval_rec(const expr *e, const double *vals, double *memo, unsigned char *done)
{
    if (done[e->id])
        return memo[e->id];
    double v;
    switch (e->kind) {
    case EXPR_NUM: v = e->num; break;
    case EXPR_SYM: v = vals[e->sym]; break;
    case EXPR_FUN:
        v = expr__apply(e->fn, eval_rec(e->args[0], vals, memo, done),
                        e->nargs > 1 ? eval_rec(e->args[1], vals, memo, done) : 0.0);
        break;
    case EXPR_POW: {
        double b = eval_rec(e->args[0], vals, memo, done);
        const expr *x = e->args[1];
        v = x->kind == EXPR_NUM && x->num == -1.0 ? 1.0 / b : pow(b, eval_rec(x, vals, memo, done));
        break;
    }
    case EXPR_MUL:
        v = e->num;
        for (int i = 0; i < e->nargs; i++)
            v *= eval_rec(e->args[i], vals, memo, done);
        break;
    default:
        v = e->num;
        for (int i = 0; i < e->nargs; i++)
            v += eval_rec(e->args[i], vals, memo, done);
        break;
    }
    memo[e->id] = v;
    done[e->id] = 1;
    return v;
}

double expr_eval(const expr_ctx *c, const expr *e, const double *vals)
{
    double *memo = malloc(c->nnodes * sizeof *memo);
    unsigned char *done = calloc(c->nnodes, 1);
    double v = NAN;
    if (memo && done)
        v = eval_rec(e, vals, memo, done);
    free(memo);
    free(done);
    return v;
}

/* ---- the numeric zero test ---- */

/* Values at the zero-test points are memoised per node for the life of the context,
 * since nodes never change. A second pass gives each node a magnitude: the value it
 * would have if no cancellation happened in its sums, the scale against which a
 * computed zero is judged. */
static int zero_prepare(expr_ctx *c)
{
    size_t need = c->nnodes;
    if (need <= c->zero_cap)
        return 0;
    size_t cap = need * 2 + 256;
    double *vals = realloc(c->zero_vals, cap * ZERO_POINTS * 2 * sizeof *vals);
    if (!vals)
        return -1;
    c->zero_vals = vals;
    unsigned char *done = realloc(c->zero_done, cap);
    if (!done)
        return -1;
    memset(done + c->zero_cap, 0, cap - c->zero_cap);
    c->zero_done = done;
    c->zero_cap = cap;
    return 0;
}

/* Deterministic pseudo-random symbol values for point k (seeded by symbol and point,
 * so every run and every instance decides the same). The first points lie in
 * [0.35, 1.35) (positive, then of either sign: abs(x) - x and sqrt(x^2) - x are not
 * taken for zero); the rest spread over wide scales, |x| = 10^u with u in [-3, 4),
 * three in four positive, so that log(x - 300) or sqrt(x - 5000) meet points inside
 * their domain and a Gaussian far from the origin meets points near it. A point
 * where any subexpression leaves the safe range proves nothing (zero_step). */
static double zero_point_value(int sym, int k)
{
    uint64_t x = (uint64_t)(sym + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(k + 1) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    double r = (double)(x >> 11) / 9007199254740992.0;
    if (k < ZERO_CLASSIC) {
        double v = 0.35 + r;
        return k >= ZERO_CLASSIC / 2 && (x & 1) ? -v : v;
    }
    double v = pow(10.0, -3.0 + 7.0 * r);
    return (x & 3) == 0 ? -v : v;
}

/* The safe range of a sample point: a subexpression whose magnitude leaves it (or
 * that underflows to 0, overflows, or leaves its function's domain) makes the point
 * prove nothing. */
#define ZERO_TINY 1e-150
#define ZERO_HUGE 1e150
/* An argument of a function or a power whose value is below this fraction of its
 * magnitude has lost its digits to cancellation: the function's value is noise. */
#define ZERO_DIGITS 1e-8

static int zero_out_of_range(double a)
{
    a = fabs(a);
    return !(a <= ZERO_HUGE) || (a != 0.0 && a < ZERO_TINY);
}

static int zero_digits_lost(double v, double m) { return m != 0.0 && !(fabs(v) > ZERO_DIGITS * m); }

/* One node at one point: its value and its magnitude (the value with no cancellation
 * in its sums, the scale its rounding error is judged against), the magnitude NaN
 * where the point proves nothing about the node: an argument proved nothing, the
 * value is not finite (overflow, log of a negative), a product or power of nonzero
 * numbers or an exp underflowed, a magnitude left [ZERO_TINY, ZERO_HUGE], or a
 * function's argument lost its digits. Arguments are read from tab: argument a's
 * value at tab[a->id * stride + k], its magnitude at moff further. */
static double zero_step(const expr *e, double symval, const double *tab, size_t stride, size_t k, size_t moff,
                        double *mag)
{
#define ZV(a) tab[(size_t)(a)->id * stride + k]
#define ZM(a) tab[(size_t)(a)->id * stride + moff + k]
    double v, m;
    int bad = 0;
    switch (e->kind) {
    case EXPR_NUM:
        v = e->num;
        m = fabs(v);
        break;
    case EXPR_SYM:
        v = symval;
        m = fabs(v);
        break;
    case EXPR_FUN: {
        double a = ZV(e->args[0]), am = ZM(e->args[0]);
        double b = e->nargs > 1 ? ZV(e->args[1]) : 0.0, bm = e->nargs > 1 ? ZM(e->args[1]) : 0.0;
        v = expr__apply(e->fn, a, b);
        m = fabs(v);
        bad = isnan(am) || isnan(bm) || zero_digits_lost(a, am) || zero_digits_lost(b, bm) ||
              (v == 0.0 && a != 0.0 && e->fn != FN_LOG && e->fn != FN_ACOS);
        break;
    }
    case EXPR_POW: {
        double b = ZV(e->args[0]), bm = ZM(e->args[0]);
        double x = ZV(e->args[1]), xm = ZM(e->args[1]);
        v = pow(b, x);
        m = x > 0 ? pow(bm, x) : fabs(v);
        bad = isnan(bm) || isnan(xm) || zero_digits_lost(x, xm) || (x < 0 && zero_digits_lost(b, bm)) ||
              (v == 0.0 && b != 0.0);
        break;
    }
    case EXPR_MUL: {
        v = e->num;
        m = fabs(e->num);
        int zero_factor = e->num == 0.0;
        for (int i = 0; i < e->nargs; i++) {
            double a = ZV(e->args[i]), am = ZM(e->args[i]);
            v *= a;
            m *= am;
            bad |= isnan(am);
            zero_factor |= a == 0.0;
        }
        bad |= v == 0.0 && !zero_factor;
        break;
    }
    default:
        v = e->num;
        m = fabs(e->num);
        for (int i = 0; i < e->nargs; i++) {
            v += ZV(e->args[i]);
            m += ZM(e->args[i]);
        }
        break;
    }
#undef ZV
#undef ZM
    if (bad || !isfinite(v) || zero_out_of_range(m))
        m = NAN;
    *mag = m;
    return v;
}

static void zero_eval(expr_ctx *c, const expr *e)
{
    if (c->zero_done[e->id])
        return;
    for (int i = 0; i < e->nargs; i++)
        zero_eval(c, e->args[i]);
    double *out = &c->zero_vals[(size_t)e->id * ZERO_POINTS * 2];
    for (int k = 0; k < ZERO_POINTS; k++) {
        double sv = e->kind == EXPR_SYM ? zero_point_value(e->sym, k) : 0.0;
        out[k] =
            zero_step(e, sv, c->zero_vals, ZERO_POINTS * 2, (size_t)k, ZERO_POINTS, &out[ZERO_POINTS + k]);
    }
    c->zero_done[e->id] = 1;
}

static void trusted_rec(const expr *e, const double *vals, double *tab, unsigned char *done)
{
    if (done[e->id])
        return;
    for (int i = 0; i < e->nargs; i++)
        trusted_rec(e->args[i], vals, tab, done);
    double *out = &tab[(size_t)e->id * 2];
    out[0] = zero_step(e, e->kind == EXPR_SYM ? vals[e->sym] : 0.0, tab, 2, 0, 1, &out[1]);
    done[e->id] = 1;
}

int expr_trusted_at(const expr_ctx *c, expr *const *roots, int n, const double *vals)
{
    double *tab = malloc(c->nnodes * 2 * sizeof *tab);
    unsigned char *done = calloc(c->nnodes, 1);
    int ok = tab && done;
    for (int i = 0; ok && i < n; i++) {
        if (!roots[i])
            continue;
        trusted_rec(roots[i], vals, tab, done);
        ok = !isnan(tab[(size_t)roots[i]->id * 2 + 1]);
    }
    free(tab);
    free(done);
    return ok;
}

int expr__zero_values(expr_ctx *c, const expr *e, double *vals, double *mags)
{
    if (zero_prepare(c) < 0)
        return -1;
    zero_eval(c, e);
    const double *p = &c->zero_vals[(size_t)e->id * ZERO_POINTS * 2];
    for (int k = 0; k < ZERO_POINTS; k++) {
        vals[k] = p[k];
        mags[k] = p[ZERO_POINTS + k];
    }
    return 0;
}

/* The same values in long double (11 more bits on x86-64), for the expressions whose
 * double values all lie within 1e-9 of their magnitude. */
static int zero_lprepare(expr_ctx *c)
{
    size_t need = c->nnodes;
    if (need <= c->zero_lcap)
        return 0;
    size_t cap = need * 2 + 256;
    long double *vals = realloc(c->zero_lvals, cap * ZERO_POINTS * sizeof *vals);
    if (!vals)
        return -1;
    c->zero_lvals = vals;
    unsigned char *done = realloc(c->zero_ldone, cap);
    if (!done)
        return -1;
    memset(done + c->zero_lcap, 0, cap - c->zero_lcap);
    c->zero_ldone = done;
    c->zero_lcap = cap;
    return 0;
}

static long double zero_lapply(expr_fn fn, long double a, long double b)
{
    switch (fn) {
    case FN_SIN: return sinl(a);
    case FN_COS: return cosl(a);
    case FN_TAN: return tanl(a);
    case FN_ASIN: return asinl(a);
    case FN_ACOS: return acosl(a);
    case FN_ATAN: return atanl(a);
    case FN_ATAN2: return atan2l(a, b);
    case FN_SINH: return sinhl(a);
    case FN_COSH: return coshl(a);
    case FN_TANH: return tanhl(a);
    case FN_EXP: return expl(a);
    case FN_LOG: return logl(a);
    case FN_SQRT: return sqrtl(a);
    case FN_ABS: return fabsl(a);
    case FN_SIGN: return a > 0.0L ? 1.0L : a < 0.0L ? -1.0L : a;
    default: return NAN;
    }
}

static void zero_leval(expr_ctx *c, const expr *e)
{
    if (c->zero_ldone[e->id])
        return;
    for (int i = 0; i < e->nargs; i++)
        zero_leval(c, e->args[i]);
    long double *out = &c->zero_lvals[(size_t)e->id * ZERO_POINTS];
    for (int k = 0; k < ZERO_POINTS; k++) {
        long double v;
        switch (e->kind) {
        case EXPR_NUM: v = e->num; break;
        case EXPR_SYM: v = zero_point_value(e->sym, k); break;
        case EXPR_FUN:
            v = zero_lapply(e->fn, c->zero_lvals[(size_t)e->args[0]->id * ZERO_POINTS + k],
                            e->nargs > 1 ? c->zero_lvals[(size_t)e->args[1]->id * ZERO_POINTS + k] : 0);
            break;
        case EXPR_POW:
            v = powl(c->zero_lvals[(size_t)e->args[0]->id * ZERO_POINTS + k],
                     c->zero_lvals[(size_t)e->args[1]->id * ZERO_POINTS + k]);
            break;
        case EXPR_MUL:
            v = e->num;
            for (int i = 0; i < e->nargs; i++)
                v *= c->zero_lvals[(size_t)e->args[i]->id * ZERO_POINTS + k];
            break;
        default:
            v = e->num;
            for (int i = 0; i < e->nargs; i++)
                v += c->zero_lvals[(size_t)e->args[i]->id * ZERO_POINTS + k];
            break;
        }
        out[k] = v;
    }
    c->zero_ldone[e->id] = 1;
}

/* The scale of e's own terms at point k in extended precision: for a sum, the sum of
 * its terms' absolute values; for a product, the product of its factors' scales (a
 * product of sums stands for their expansion); otherwise its absolute value. */
static long double zero_lscale(const expr_ctx *c, const expr *e, int k, int depth)
{
    long double s;
    switch (e->kind) {
    case EXPR_ADD:
        s = fabsl((long double)e->num);
        for (int i = 0; i < e->nargs; i++)
            s += fabsl(c->zero_lvals[(size_t)e->args[i]->id * ZERO_POINTS + k]);
        return s;
    case EXPR_MUL:
        if (depth > 0)
            break;
        s = fabsl((long double)e->num);
        for (int i = 0; i < e->nargs; i++)
            s *= zero_lscale(c, e->args[i], k, depth + 1);
        return s;
    default: break;
    }
    return fabsl(c->zero_lvals[(size_t)e->id * ZERO_POINTS + k]);
}

/* The magnitude of an expression (its value with no cancellation anywhere in it)
 * bounds the rounding error of its double value, but it grows with every level of
 * sums of products of sums: for the reduced forcing of a bicycle (a DAG of ~10^6 tree
 * nodes) it is 10^9..10^21 times the value, and a comparison with the magnitude alone
 * takes such expressions for zero. So below that threshold the expression is
 * evaluated again in long double: a genuine value is the same in both precisions,
 * rounding noise is not (the extended evaluation's is ~2^-11 of the double one). A
 * point confirms "nonzero" when the two values agree to 1e-3 (noise of the double
 * evaluation does not reproduce in the extended one) and the value is above the
 * resolution ZERO_OWN_TERMS (1e-13) against the scale of the expression's own terms
 * (zero_lscale): a residue of decimal constants such as 0.1*3 - 0.3 (1e-17) stays zero,
 * and so does sin(x)^2 + cos(x)^2 - 1 + 1e-13, whose double values are noise to 1e-3.
 * It was 1e-9, and a genuine term 1e-12 of an identity the simplifier does not see was
 * called zero: V = exp(2*x) - (1 - 1e-12)*exp(x)^2 got forcing 0. */
#define ZERO_OWN_TERMS 1e-13L
static int zero_confirmed_nonzero(expr_ctx *c, const expr *e, const double *v, const double *m)
{
    if (LDBL_MANT_DIG <= DBL_MANT_DIG || zero_lprepare(c) < 0)
        return 0; /* no extra precision here: the double test decides */
    zero_leval(c, e);
    const long double *w = &c->zero_lvals[(size_t)e->id * ZERO_POINTS];
    for (int k = 0; k < ZERO_POINTS; k++) {
        if (!isfinite(v[k]) || !isfinite(m[k]) || !isfinite(w[k]) || w[k] == 0)
            continue;
        long double aw = fabsl(w[k]);
        if (fabsl(w[k] - v[k]) <= 1e-3L * aw && aw > ZERO_OWN_TERMS * zero_lscale(c, e, k, 0))
            return 1;
    }
    return 0;
}

int expr_is_zero(expr_ctx *c, expr *e)
{
    if (e->kind == EXPR_NUM)
        return e->num == 0.0;
    if (e->kind == EXPR_SYM)
        return 0;
    double v[ZERO_POINTS], m[ZERO_POINTS];
    if (expr__zero_values(c, e, v, m) < 0)
        return 0;
    int valid = 0;
    for (int k = 0; k < ZERO_POINTS; k++) {
        if (!isfinite(v[k]) || !isfinite(m[k]))
            continue; /* this point proves nothing */
        valid++;
        if (fabs(v[k]) > 1e-9 * m[k])
            return 0;
    }
    return valid >= ZERO_MIN_TRUSTED && !zero_confirmed_nonzero(c, e, v, m);
}
