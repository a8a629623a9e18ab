/* jit.c — tape → C source → machine code with libtcc (see jit.h).
 *
 * Locking: libtcc 0.9.27 keeps compiler state in globals and is not thread-safe,
 * so every libtcc call (tcc_new through tcc_get_symbol, and tcc_delete) happens
 * with jit_lock held. (Debian's 2020 snapshot guards its compile step with a
 * semaphore of its own, but the release does not, nor does either guard the other
 * entry points; we do not rely on it.) It is the only lock in this file; nothing else is locked or
 * called back into while holding it, so it cannot take part in a lock-order
 * cycle. Source generation runs before the lock is taken; running compiled code
 * needs no lock at all.
 */
#include "jit.h"

#include <libtcc.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t jit_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- source buffer ------------------------------------------------------- */

/* A growable string with a hard cap (curl's dynbuf): once an append fails, the
 * buffer stays failed and later appends are no-ops. */
typedef struct jit_buf {
    char *p;
    size_t len, cap;
    int err;    /* 0, JIT_E_TOO_LARGE or JIT_E_NOMEM */
    size_t max; /* the cap; 0: JIT_MAX_SOURCE */
} jit_buf;

static void jit__buf_printf(jit_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Makes room for n more bytes and the terminating NUL (doubling, up to b->max, else
 * JIT_MAX_SOURCE). Returns 0, or -1 with b->err set. */
static int jit__buf_reserve(jit_buf *b, size_t n)
{
    if (b->err)
        return -1;
    if (n < b->cap - b->len)
        return 0;
    size_t max = b->max ? b->max : JIT_MAX_SOURCE;
    size_t need = b->len + n + 1;
    if (need > max) {
        b->err = JIT_E_TOO_LARGE;
        return -1;
    }
    size_t cap = b->cap * 2;
    while (cap < need)
        cap *= 2;
    if (cap > max)
        cap = max;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->err = JIT_E_NOMEM;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static void jit__buf_printf(jit_buf *b, const char *fmt, ...)
{
    while (!b->err) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->err = JIT_E_NOMEM;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        jit__buf_reserve(b, (size_t)n);
    }
}

/* Appends n bytes (growing as jit__buf_reserve does). The statements of a
 * tape are written with these rather than printf: formatting was a sixth of the
 * first tier's work. */
static void jit__buf_put(jit_buf *b, const char *s, size_t n)
{
    if (jit__buf_reserve(b, n) != 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void jit__buf_str(jit_buf *b, const char *s) { jit__buf_put(b, s, strlen(s)); }

/* The decimal digits of v, as printf's %d writes them. */
static void jit__buf_int(jit_buf *b, int v)
{
    char d[16];
    int n = sizeof d;
    unsigned u = v < 0 ? -(unsigned)v : (unsigned)v;
    do {
        d[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        d[--n] = '-';
    jit__buf_put(b, d + n, sizeof d - n);
}

/* "s<i>" */
static void jit__buf_slot(jit_buf *b, int i)
{
    jit__buf_put(b, "s", 1);
    jit__buf_int(b, i);
}

/* "double s<i> = " */
static void jit__buf_def(jit_buf *b, int i)
{
    jit__buf_put(b, "double s", 8);
    jit__buf_int(b, i);
    jit__buf_put(b, " = ", 3);
}

/* ---- the functions generated code may call --------------------------------- */

/* The fixed list of libm functions the generated code may call: each is declared
 * in the source and bound to this process's libm with tcc_add_symbol (tcc runs
 * with -nostdlib). */
static const struct {
    const char *name;
    const char *proto;
    const void *addr;
} jit_funcs[] = {
    {"sqrt", "double sqrt(double);", (const void *)sqrt},
    {"exp", "double exp(double);", (const void *)exp},
    {"log", "double log(double);", (const void *)log},
    {"sin", "double sin(double);", (const void *)sin},
    {"cos", "double cos(double);", (const void *)cos},
    {"tan", "double tan(double);", (const void *)tan},
    {"asin", "double asin(double);", (const void *)asin},
    {"acos", "double acos(double);", (const void *)acos},
    {"atan", "double atan(double);", (const void *)atan},
    {"sinh", "double sinh(double);", (const void *)sinh},
    {"cosh", "double cosh(double);", (const void *)cosh},
    {"tanh", "double tanh(double);", (const void *)tanh},
    {"fabs", "double fabs(double);", (const void *)fabs},
    {"pow", "double pow(double, double);", (const void *)pow},
    {"atan2", "double atan2(double, double);", (const void *)atan2},
    {"sincos", "void sincos(double, double *, double *);", (const void *)sincos},
};

/* ---- code generation ------------------------------------------------------- */

/* Checks what the generated code will index: opcodes, operand slots (earlier
 * slots only), input indices and output slots; and that t has at most max_slots slots. */
static int jit__check_max(const tape *t, int max_slots)
{
    if (t->n_ins < 0 || t->n_inputs < 0 || t->n_outputs < 0)
        return JIT_E_BAD_TAPE;
    if ((t->n_ins > 0 && !t->ins) || (t->n_outputs > 0 && !t->outputs))
        return JIT_E_BAD_TAPE;
    if (t->n_ins > max_slots)
        return JIT_E_TOO_LARGE;
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *p = &t->ins[i];
        if (p->op < 0 || p->op >= TAPE_OP_COUNT)
            return JIT_E_BAD_TAPE;
        switch ((tape_op)p->op) {
        case TAPE_INPUT:
            if (p->a < 0 || p->a >= t->n_inputs)
                return JIT_E_BAD_TAPE;
            break;
        case TAPE_CONST: break;
        case TAPE_ADD:
        case TAPE_SUB:
        case TAPE_MUL:
        case TAPE_DIV:
        case TAPE_POW:
        case TAPE_ATAN2:
            if (p->b < 0 || p->b >= i)
                return JIT_E_BAD_TAPE;
            /* fall through */
        default:
            if (p->a < 0 || p->a >= i)
                return JIT_E_BAD_TAPE;
            break;
        }
    }
    for (int k = 0; k < t->n_outputs; k++)
        if (t->outputs[k] < 0 || t->outputs[k] >= t->n_ins)
            return JIT_E_BAD_TAPE;
    return 0;
}

/* The first tier's check: at most JIT_MAX_SLOTS slots (the stack note in jit.h). */
static int jit__check(const tape *t) { return jit__check_max(t, JIT_MAX_SLOTS); }

/* `double s<i> = <c>;`. A finite constant is printed with %.17g (which round-trips
 * exactly) and always as a floating literal, so -0.0 stays -0.0; inf and NaN have no
 * C literal, so they — and anything the locale may have printed oddly — are
 * rebuilt from their bits. */
static void jit__emit_const(jit_buf *b, int i, double c)
{
    if (isfinite(c)) {
        char num[40];
        snprintf(num, sizeof num, "%.17g", c);
        int ok = 1, floating = 0;
        for (const char *q = num; *q; q++) {
            if (*q == '.' || *q == 'e')
                floating = 1;
            else if (!(*q >= '0' && *q <= '9') && *q != '-' && *q != '+')
                ok = 0;
        }
        if (ok) {
            jit__buf_printf(b, "double s%d = %s%s;\n", i, num, floating ? "" : ".0");
            return;
        }
    }
    uint64_t bits;
    memcpy(&bits, &c, sizeof bits);
    jit__buf_printf(b, "static const union jit_k k%d = {0x%016llxULL}; double s%d = k%d.d;\n", i,
                    (unsigned long long)bits, i, i);
}

/* The statements after `x = <operand>;` of jit__emit_powi (|k| >= 1). */
static void jit__emit_powi_chain(jit_buf *b, int i, int32_t k)
{
    unsigned long e = k < 0 ? -(unsigned long)k : (unsigned long)k;
    int started = 0;
    while (e) {
        if (e & 1) {
            jit__buf_printf(b, "%s", started ? " r = r * x;" : " r = x;");
            started = 1;
        }
        e >>= 1;
        if (e)
            jit__buf_printf(b, " x = x * x;");
    }
    jit__buf_printf(b, "\ndouble s%d = %sr;\n", i, k < 0 ? "1.0 / " : "");
}

/* s<i> = s<a>^k with exactly the multiplications of tape.c's powi, in order:
 * r picks up x at each set bit of |k| (the first time as r = x, which equals
 * 1.0 * x), x squares between bits, and a negative k ends with 1.0 / r. x and r
 * are the function's two scratch locals, shared by every POWI (tcc gives each
 * block-scope local its own stack slot, so per-POWI temporaries would triple the
 * frame). */
static void jit__emit_powi(jit_buf *b, int i, int a, int32_t k)
{
    unsigned long e = k < 0 ? -(unsigned long)k : (unsigned long)k;
    if (e == 0) {
        jit__buf_printf(b, "double s%d = 1.0;\n", i);
        return;
    }
    jit__buf_printf(b, "x = s%d;", a);
    jit__emit_powi_chain(b, i, k);
}

static const char *const jit_binop[] = {
    [TAPE_ADD] = "+",
    [TAPE_SUB] = "-",
    [TAPE_MUL] = "*",
    [TAPE_DIV] = "/",
};

/* The prototypes of the functions generated code may call, and the constant union. */
static void jit__prelude(jit_buf *b)
{
    for (size_t j = 0; j < sizeof jit_funcs / sizeof jit_funcs[0]; j++)
        jit__buf_printf(b, "%s\n", jit_funcs[j].proto);
    jit__buf_printf(
        b, "static inline double hamel_sign(double x) { return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x; }\n");
    jit__buf_printf(b, "union jit_k { unsigned long long u; double d; };\n");
}

/* The other half of each slot's sincos pair, or -1: sin and cos of one slot are computed
 * by one sincos call (glibc's sincos gives the same bits as sin and cos), written where
 * the first of the two stands. Returns a malloc'd array of t->n_ins + 1, or NULL. */
static int *jit__pairs(const tape *t)
{
    int *partner = malloc((t->n_ins + 1) * sizeof *partner);
    int *sin_of = malloc((t->n_ins + 1) * sizeof *sin_of), *cos_of = malloc((t->n_ins + 1) * sizeof *cos_of);
    if (!partner || !sin_of || !cos_of) {
        free(partner);
        free(sin_of);
        free(cos_of);
        return NULL;
    }
    for (int i = 0; i < t->n_ins; i++)
        partner[i] = sin_of[i] = cos_of[i] = -1;
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *p = &t->ins[i];
        if (p->op == TAPE_SIN && sin_of[p->a] < 0)
            sin_of[p->a] = i;
        if (p->op == TAPE_COS && cos_of[p->a] < 0)
            cos_of[p->a] = i;
    }
    for (int a = 0; a < t->n_ins; a++)
        if (sin_of[a] >= 0 && cos_of[a] >= 0) {
            partner[sin_of[a]] = cos_of[a];
            partner[cos_of[a]] = sin_of[a];
        }
    free(sin_of);
    free(cos_of);
    return partner;
}

/* The statement declaring s<i> (both halves of a sincos pair at the first of them;
 * nothing at the second), its input read as `map` says (NULL: in[a]). */
static void jit__emit_ins(const tape *t, const jit_inputs *map, const int *partner, int i, jit_buf *b)
{
    const tape_ins *p = &t->ins[i];
    tape_op op = (tape_op)p->op;
    if (partner[i] >= 0) {
        int j = partner[i];
        if (j > i) {
            int si = op == TAPE_SIN ? i : j, ci = op == TAPE_SIN ? j : i;
            jit__buf_put(b, "double ", 7); /* double s<si>, s<ci>; sincos(s<a>, &s<si>, &s<ci>); */
            jit__buf_slot(b, si);
            jit__buf_put(b, ", ", 2);
            jit__buf_slot(b, ci);
            jit__buf_put(b, "; sincos(", 9);
            jit__buf_slot(b, p->a);
            jit__buf_put(b, ", &", 3);
            jit__buf_slot(b, si);
            jit__buf_put(b, ", &", 3);
            jit__buf_slot(b, ci);
            jit__buf_put(b, ");\n", 3);
        }
        return;
    }
    switch (op) {
    case TAPE_INPUT:
        if (!map) {
            jit__buf_def(b, i);
            jit__buf_put(b, "in[", 3);
            jit__buf_int(b, p->a);
            jit__buf_put(b, "];\n", 3);
        } else if (map->expr[p->a])
            jit__buf_printf(b, "double s%d = %s;\n", i, map->expr[p->a]);
        else
            jit__emit_const(b, i, map->value[p->a]);
        break;
    case TAPE_CONST: jit__emit_const(b, i, p->c); break;
    case TAPE_ADD:
    case TAPE_SUB:
    case TAPE_MUL:
    case TAPE_DIV:
        jit__buf_def(b, i);
        jit__buf_slot(b, p->a);
        jit__buf_put(b, " ", 1);
        jit__buf_str(b, jit_binop[op]);
        jit__buf_put(b, " ", 1);
        jit__buf_slot(b, p->b);
        jit__buf_put(b, ";\n", 2);
        break;
    case TAPE_NEG:
        jit__buf_def(b, i);
        jit__buf_put(b, "-", 1);
        jit__buf_slot(b, p->a);
        jit__buf_put(b, ";\n", 2);
        break;
    case TAPE_POWI: jit__emit_powi(b, i, p->a, p->b); break;
    case TAPE_POW: jit__buf_printf(b, "double s%d = pow(s%d, s%d);\n", i, p->a, p->b); break;
    case TAPE_ATAN2: jit__buf_printf(b, "double s%d = atan2(s%d, s%d);\n", i, p->a, p->b); break;
    case TAPE_OP_COUNT: b->err = JIT_E_BAD_TAPE; break; /* jit__check rejects it */
    default:
        jit__buf_def(b, i);
        jit__buf_str(b, tape_op_libm_name(op));
        jit__buf_put(b, "(", 1);
        jit__buf_slot(b, p->a);
        jit__buf_put(b, ");\n", 3);
        break;
    }
}

/* The statements computing every slot of t (declaring s<i>), inputs read as `map`
 * says (NULL: in[a]). */
static void jit__body(const tape *t, const jit_inputs *map, jit_buf *b)
{
    jit__buf_printf(b, "double x, r;\n");
    int *partner = jit__pairs(t);
    if (!partner) {
        b->err = JIT_E_NOMEM;
        return;
    }
    for (int i = 0; i < t->n_ins && !b->err; i++)
        jit__emit_ins(t, map, partner, i, b);
    free(partner);
}

/* ---- the first tier's code: expressions kept whole ------------------------------
 *
 * tcc allocates registers only within one expression: every `double s<i> = ...;`
 * statement stores its value to the stack and every use loads it back. So the first
 * tier's code writes a slot used exactly once inside the expression that uses it
 * (nested up to JIT_INLINE_DEPTH), finite constants as literals where they are used,
 * and inputs used once as reads of their array where they are used. The operations,
 * their operands and their order within each operation are the tape's, so the results
 * are the interpreter's bit for bit (C evaluates each parenthesised operation as one
 * IEEE operation; tcc neither contracts nor reassociates). Slots nobody reads are not
 * computed at all (they have no side effects). */

#define JIT_INLINE_DEPTH 12

typedef struct jit_plan {
    int *uses;          /* operand and output references */
    int *partner;       /* the other half of a sincos pair, or -1 */
    unsigned char *inl; /* written where used */
    int *depth;         /* nesting of an inlined slot's expression */
} jit_plan;

static void jit__plan_free(jit_plan *p)
{
    free(p->uses);
    free(p->partner);
    free(p->inl);
    free(p->depth);
}

/* A finite constant as a C floating literal (%.17g round-trips; a floating form keeps
 * -0.0). Returns 0 when it has none (inf, NaN, an odd locale). */
static int jit__literal(double c, char num[48])
{
    if (!isfinite(c))
        return 0;
    char d[40];
    snprintf(d, sizeof d, "%.17g", c);
    int floating = 0;
    for (const char *q = d; *q; q++) {
        if (*q == '.' || *q == 'e')
            floating = 1;
        else if (!(*q >= '0' && *q <= '9') && *q != '-' && *q != '+')
            return 0;
    }
    snprintf(num, 48, "%s%s", d, floating ? "" : ".0");
    return 1;
}

static int jit__binary(tape_op op)
{
    return op == TAPE_ADD || op == TAPE_SUB || op == TAPE_MUL || op == TAPE_DIV || op == TAPE_POW ||
           op == TAPE_ATAN2;
}

/* |k| of a POWI written as an expression (1.0, x, x * x, x * (x * x) and 1.0 / those);
 * longer chains keep the scratch-variable statements of jit__emit_powi. */
#define JIT_POWI_INLINE 3

static int jit__plan(const tape *t, jit_plan *p)
{
    int n = t->n_ins + 1;
    p->uses = calloc(n, sizeof *p->uses);
    p->partner = malloc(n * sizeof *p->partner);
    p->inl = calloc(n, 1);
    p->depth = calloc(n, sizeof *p->depth);
    int *sin_of = malloc(n * sizeof *sin_of), *cos_of = malloc(n * sizeof *cos_of);
    if (!p->uses || !p->partner || !p->inl || !p->depth || !sin_of || !cos_of) {
        free(sin_of);
        free(cos_of);
        jit__plan_free(p);
        return JIT_E_NOMEM;
    }
    for (int i = 0; i < t->n_ins; i++)
        p->partner[i] = sin_of[i] = cos_of[i] = -1;
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *q = &t->ins[i];
        tape_op op = (tape_op)q->op;
        if (op == TAPE_INPUT || op == TAPE_CONST)
            continue;
        int32_t k = q->b;
        p->uses[q->a] += op == TAPE_POWI && (k > 1 || k < -1) ? 2 : op == TAPE_POWI && k == 0 ? 0 : 1;
        if (jit__binary(op))
            p->uses[q->b]++;
        if (op == TAPE_SIN && sin_of[q->a] < 0)
            sin_of[q->a] = i;
        if (op == TAPE_COS && cos_of[q->a] < 0)
            cos_of[q->a] = i;
    }
    for (int k = 0; k < t->n_outputs; k++)
        p->uses[t->outputs[k]]++;
    for (int a = 0; a < t->n_ins; a++)
        if (sin_of[a] >= 0 && cos_of[a] >= 0 && (p->uses[sin_of[a]] || p->uses[cos_of[a]])) {
            p->partner[sin_of[a]] = cos_of[a];
            p->partner[cos_of[a]] = sin_of[a];
        }
    free(sin_of);
    free(cos_of);
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *q = &t->ins[i];
        tape_op op = (tape_op)q->op;
        char num[48];
        if (op == TAPE_CONST) {
            p->inl[i] = (unsigned char)jit__literal(q->c, num);
            continue;
        }
        if (op == TAPE_INPUT) {
            p->inl[i] = p->uses[i] == 1;
            continue;
        }
        if (p->uses[i] != 1 || p->partner[i] >= 0)
            continue;
        if (op == TAPE_POWI && (q->b > JIT_POWI_INLINE || q->b < -JIT_POWI_INLINE))
            continue;
        int d = p->inl[q->a] ? p->depth[q->a] : 0;
        if (jit__binary(op) && p->inl[q->b] && p->depth[q->b] > d)
            d = p->depth[q->b];
        if (d + 1 > JIT_INLINE_DEPTH)
            continue;
        p->inl[i] = 1;
        p->depth[i] = d + 1;
    }
    return 0;
}

static void jit__expr(jit_buf *b, const tape *t, const jit_plan *p, const char *const *inexpr, int i);

/* An operand: a local's name, or the slot's expression in parentheses. */
static void jit__operand(jit_buf *b, const tape *t, const jit_plan *p, const char *const *inexpr, int a)
{
    if (!p->inl[a]) {
        jit__buf_slot(b, a);
        return;
    }
    jit__buf_put(b, "(", 1);
    jit__expr(b, t, p, inexpr, a);
    jit__buf_put(b, ")", 1);
}

/* The expression computing slot i from its operands (not for sincos pairs or long POWIs). */
static void jit__expr(jit_buf *b, const tape *t, const jit_plan *p, const char *const *inexpr, int i)
{
    const tape_ins *q = &t->ins[i];
    tape_op op = (tape_op)q->op;
    char num[48];
    switch (op) {
    case TAPE_INPUT: jit__buf_str(b, inexpr[q->a]); break;
    case TAPE_CONST:
        if (jit__literal(q->c, num))
            jit__buf_str(b, num);
        else
            jit__buf_slot(b, i); /* its union statement (never inlined) */
        break;
    case TAPE_ADD:
    case TAPE_SUB:
    case TAPE_MUL:
    case TAPE_DIV:
        jit__operand(b, t, p, inexpr, q->a);
        jit__buf_put(b, " ", 1);
        jit__buf_str(b, jit_binop[op]);
        jit__buf_put(b, " ", 1);
        jit__operand(b, t, p, inexpr, q->b);
        break;
    case TAPE_NEG:
        jit__buf_put(b, "-", 1);
        jit__operand(b, t, p, inexpr, q->a);
        break;
    case TAPE_POWI: { /* |k| <= JIT_POWI_INLINE: tape.c's chain, see jit__emit_powi */
        int32_t k = q->b;
        unsigned e = k < 0 ? -(unsigned)k : (unsigned)k;
        if (e == 0) {
            jit__buf_put(b, "1.0", 3);
            break;
        }
        if (k < 0)
            jit__buf_put(b, "1.0 / (", 7);
        if (e == 1) {
            jit__operand(b, t, p, inexpr, q->a);
        } else if (e == 2) {
            jit__operand(b, t, p, inexpr, q->a);
            jit__buf_put(b, " * ", 3);
            jit__operand(b, t, p, inexpr, q->a);
        } else { /* r = x; x = x * x; r = r * x */
            jit__operand(b, t, p, inexpr, q->a);
            jit__buf_put(b, " * (", 4);
            jit__operand(b, t, p, inexpr, q->a);
            jit__buf_put(b, " * ", 3);
            jit__operand(b, t, p, inexpr, q->a);
            jit__buf_put(b, ")", 1);
        }
        if (k < 0)
            jit__buf_put(b, ")", 1);
        break;
    }
    case TAPE_POW:
    case TAPE_ATAN2:
        jit__buf_str(b, op == TAPE_POW ? "pow(" : "atan2(");
        jit__operand(b, t, p, inexpr, q->a);
        jit__buf_put(b, ", ", 2);
        jit__operand(b, t, p, inexpr, q->b);
        jit__buf_put(b, ")", 1);
        break;
    case TAPE_OP_COUNT: b->err = JIT_E_BAD_TAPE; break;
    default:
        jit__buf_str(b, tape_op_libm_name(op));
        jit__buf_put(b, "(", 1);
        jit__operand(b, t, p, inexpr, q->a);
        jit__buf_put(b, ")", 1);
        break;
    }
}

/* The body of a first-tier function: the statements of the slots kept in locals, then
 * `<outv>[k] = <output k>;` for every output. inexpr[a] is how input a is read. */
static void jit__body_inline(const tape *t, const jit_plan *p, const char *const *inexpr, const char *outv,
                             jit_buf *b)
{
    int powi_scratch = 0;
    for (int i = 0; i < t->n_ins; i++)
        if (t->ins[i].op == TAPE_POWI && !p->inl[i] && p->uses[i] &&
            (t->ins[i].b > JIT_POWI_INLINE || t->ins[i].b < -JIT_POWI_INLINE))
            powi_scratch = 1;
    if (powi_scratch)
        jit__buf_put(b, "double x, r;\n", 13);
    for (int i = 0; i < t->n_ins && !b->err; i++) {
        const tape_ins *q = &t->ins[i];
        if (p->partner[i] >= 0) {
            int j = p->partner[i];
            if (j > i) {
                int si = q->op == TAPE_SIN ? i : j, ci = q->op == TAPE_SIN ? j : i;
                jit__buf_put(b, "double ", 7); /* double s<si>, s<ci>; sincos(<a>, &s<si>, &s<ci>); */
                jit__buf_slot(b, si);
                jit__buf_put(b, ", ", 2);
                jit__buf_slot(b, ci);
                jit__buf_put(b, "; sincos(", 9);
                jit__operand(b, t, p, inexpr, q->a);
                jit__buf_put(b, ", &", 3);
                jit__buf_slot(b, si);
                jit__buf_put(b, ", &", 3);
                jit__buf_slot(b, ci);
                jit__buf_put(b, ");\n", 3);
            }
            continue;
        }
        if (p->inl[i] || p->uses[i] == 0)
            continue;
        if (q->op == TAPE_CONST) {
            jit__emit_const(b, i, q->c);
            continue;
        }
        if (q->op == TAPE_POWI && (q->b > JIT_POWI_INLINE || q->b < -JIT_POWI_INLINE)) {
            jit__buf_put(b, "x = ", 4);
            jit__operand(b, t, p, inexpr, q->a);
            jit__buf_put(b, ";\n", 2);
            jit__emit_powi_chain(b, i, q->b);
            continue;
        }
        jit__buf_def(b, i);
        jit__expr(b, t, p, inexpr, i);
        jit__buf_put(b, ";\n", 2);
    }
    for (int k = 0; k < t->n_outputs && !b->err; k++) {
        jit__buf_str(b, outv);
        jit__buf_put(b, "[", 1);
        jit__buf_int(b, k);
        jit__buf_put(b, "] = ", 4);
        jit__operand(b, t, p, inexpr, t->outputs[k]);
        jit__buf_put(b, ";\n", 2);
    }
}

/* The input expressions of a first-tier function: in[a], or (yform, with t->yin) t,
 * y[j] or in[a]. Returns a malloc'd array of n_inputs strings in one block, or NULL. */
static char **jit__inputs(const tape *t, int yform)
{
    size_t per = 24, n = (size_t)t->n_inputs;
    char **v = malloc(n * sizeof *v + n * per + 1);
    if (!v)
        return NULL;
    char *text = (char *)(v + n);
    for (size_t a = 0; a < n; a++) {
        v[a] = text + a * per;
        int32_t w = yform ? t->yin[a] : TAPE_YIN_IN;
        if (w == TAPE_YIN_T)
            snprintf(v[a], per, "t");
        else if (w >= 0)
            snprintf(v[a], per, "y[%d]", (int)w);
        else
            snprintf(v[a], per, "in[%d]", (int)a);
    }
    return v;
}

/* Appends the first tier's function(s) for t: `void <name>(const double *in, double
 * *out)` and, when t->yin is set, `void <name>y(double t, const double *y, const
 * double *in, double *out)` first, with <name> then only gathering y from in[] and
 * calling it (the computation is written once: libtcc's time grows with the source). */
static void jit__functions(const tape *t, const char *name, jit_buf *b)
{
    jit_plan p;
    if (jit__plan(t, &p) < 0) {
        b->err = JIT_E_NOMEM;
        return;
    }
    char **inexpr = jit__inputs(t, t->yin != NULL);
    if (!inexpr) {
        jit__plan_free(&p);
        b->err = JIT_E_NOMEM;
        return;
    }
    if (t->yin)
        jit__buf_printf(b, "void %sy(double t, const double *y, const double *in, double *out)\n{\n", name);
    else
        jit__buf_printf(b, "void %s(const double *in, double *out)\n{\n", name);
    jit__body_inline(t, &p, (const char *const *)inexpr, "out", b);
    jit__buf_put(b, "}\n", 2);
    free(inexpr);
    jit__plan_free(&p);
    if (!t->yin)
        return;
    int ny = 0, at = -1;
    for (int a = 0; a < t->n_inputs; a++) {
        if (t->yin[a] >= ny)
            ny = t->yin[a] + 1;
        if (t->yin[a] == TAPE_YIN_T)
            at = a;
    }
    jit__buf_printf(b, "void %s(const double *in, double *out)\n{\ndouble y[%d];\n", name, ny > 0 ? ny : 1);
    for (int a = 0; a < t->n_inputs; a++)
        if (t->yin[a] >= 0)
            jit__buf_printf(b, "y[%d] = in[%d];\n", (int)t->yin[a], a);
    if (at >= 0)
        jit__buf_printf(b, "%sy(in[%d], y, in, out);\n}\n", name, at);
    else
        jit__buf_printf(b, "%sy(0.0, y, in, out);\n}\n", name);
}

/* Writes the whole translation unit for t into b: f and, with t->yin, fy. */
static void jit__generate(const tape *t, jit_buf *b)
{
    jit__buf_printf(b, "/* generated by hamel jit.c from a tape of %d slots */\n", t->n_ins);
    jit__prelude(b);
    jit__functions(t, "f", b);
}

char *jit__tcc_source(const tape *t)
{
    if (jit__check(t) < 0)
        return NULL;
    jit_buf b = {malloc(4096), 0, 4096, 0, 0};
    if (!b.p)
        return NULL;
    jit__generate(t, &b);
    if (b.err) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* The operands of what jit__emit_ins writes at i (none at the second half of a sincos
 * pair): ops[0..return). */
static int jit__operands(const tape *t, const int *partner, int i, int ops[2])
{
    const tape_ins *p = &t->ins[i];
    if ((partner[i] >= 0 && partner[i] < i) || p->op == TAPE_INPUT || p->op == TAPE_CONST)
        return 0;
    ops[0] = p->a;
    if (p->op == TAPE_ADD || p->op == TAPE_SUB || p->op == TAPE_MUL || p->op == TAPE_DIV ||
        p->op == TAPE_POW || p->op == TAPE_ATAN2) {
        ops[1] = p->b;
        return 2;
    }
    return 1;
}

/* What a split function needs to know of each slot. */
typedef struct jit_split {
    int *partner; /* jit__pairs */
    int *cut;     /* part i writes the slots [cut[i], cut[i + 1]) */
    int *part;    /* the part of the place of slot i */
    int *home;    /* the part that writes slot i (a pair's later half: with the first) */
    int *vix;     /* its index in the shared values, or -1 (used only in its part, or rewritten) */
    int *seen;    /* the last part that declared it (while writing) */
    char *remat;  /* written again in each part that uses it rather than passed: an input
                     (a read of the parameters), a constant or a value of constants only
                     (which the compiler folds, as it would in one function) */
    int *stack;   /* jit__split_load's work */
    int nb;       /* parts */
    int nv;       /* shared values */
} jit_split;

static void jit__split_free(jit_split *sp)
{
    free(sp->partner);
    free(sp->cut);
    free(sp->part);
    free(sp->home);
    free(sp->vix);
    free(sp->seen);
    free(sp->remat);
    free(sp->stack);
}

/* Where the parts end: every part has between block / 2 and block slots (the last may
 * have fewer), each ending where the fewest values computed before are still to be
 * used (live[p]: slots s < p, not rewritten, read at or after p), so that few values go
 * through v. Fills sp->cut and sp->nb. */
static void jit__split_cuts(const tape *t, int block, const int *live, jit_split *sp)
{
    int n = t->n_ins, lo = 0;
    sp->nb = 0;
    sp->cut[0] = 0;
    while (lo < n) {
        int hi = n;
        if (n - lo > block) {
            hi = lo + block;
            for (int p = lo + block; p >= lo + block / 2 && p > lo; p--)
                if (live[p] < live[hi])
                    hi = p;
        }
        sp->cut[++sp->nb] = hi;
        lo = hi;
    }
}

/* sp->remat: 2 for a constant value (a constant, a folded input, an operation on
 * constant values only), 1 for an input read from the parameters, 0 otherwise. */
static void jit__split_remat(const tape *t, const jit_inputs *map, jit_split *sp)
{
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *p = &t->ins[i];
        int ops[2], no = jit__operands(t, sp->partner, i, ops);
        if (sp->partner[i] >= 0 && sp->partner[i] < i) /* the later half of a pair: as the first */
            sp->remat[i] = sp->remat[sp->partner[i]];
        else if (p->op == TAPE_INPUT)
            sp->remat[i] = map && !map->expr[p->a] ? 2 : 1;
        else if (p->op == TAPE_CONST)
            sp->remat[i] = 2;
        else
            sp->remat[i] = sp->remat[ops[0]] == 2 && (no < 2 || sp->remat[ops[1]] == 2) ? 2 : 0;
    }
}

/* live[p] for p in [0, n]: the values written before place p and read at or after it
 * (outputs are read at n), rewritten ones not counted; last[n] is work. */
static void jit__split_live(const tape *t, const jit_split *sp, int *last, int *live)
{
    int n = t->n_ins;
    for (int i = 0; i < n; i++)
        last[i] = -1;
    for (int i = 0; i < n; i++) {
        int ops[2], no = jit__operands(t, sp->partner, i, ops);
        for (int k = 0; k < no; k++)
            last[ops[k]] = i;
    }
    for (int o = 0; o < t->n_outputs; o++)
        last[t->outputs[o]] = n;
    for (int s = 0; s < n; s++) { /* s is live at the places (at, last[s]] */
        int at = sp->partner[s] >= 0 && sp->partner[s] < s ? sp->partner[s] : s;
        if (last[s] > at && !sp->remat[s]) {
            live[at + 1]++;
            live[last[s] + 1]--;
        }
    }
    for (int p = 1; p <= n; p++)
        live[p] += live[p - 1];
}

/* After the cuts: each slot's part and home, and the index in v of each value a later
 * part (or the epilogue, in the last part) reads. */
static void jit__split_shared(const tape *t, jit_split *sp)
{
    int n = t->n_ins;
    for (int b = 0; b < sp->nb; b++)
        for (int i = sp->cut[b]; i < sp->cut[b + 1]; i++)
            sp->part[i] = b;
    for (int i = 0; i < n; i++) {
        sp->home[i] = sp->part[sp->partner[i] >= 0 && sp->partner[i] < i ? sp->partner[i] : i];
        sp->vix[i] = -1;
        sp->seen[i] = -1;
    }
    for (int i = 0; i < n; i++) {
        int ops[2], no = jit__operands(t, sp->partner, i, ops);
        for (int k = 0; k < no; k++)
            if (sp->home[ops[k]] != sp->part[i] && !sp->remat[ops[k]])
                sp->vix[ops[k]] = 0; /* numbered below */
    }
    for (int o = 0; o < t->n_outputs; o++)
        if (sp->home[t->outputs[o]] != sp->nb - 1 && !sp->remat[t->outputs[o]])
            sp->vix[t->outputs[o]] = 0;
    sp->nv = 0;
    for (int i = 0; i < n; i++)
        if (sp->vix[i] >= 0)
            sp->vix[i] = sp->nv++;
}

/* Fills sp for parts of at most `block` slots; 0, or -1 when out of memory. */
static int jit__split_plan(const tape *t, const jit_inputs *map, int block, jit_split *sp)
{
    int n = t->n_ins;
    sp->partner = jit__pairs(t);
    sp->cut = malloc((n + 2) * sizeof *sp->cut);
    sp->part = malloc((n + 1) * sizeof *sp->part);
    sp->home = malloc((n + 1) * sizeof *sp->home);
    sp->vix = malloc((n + 1) * sizeof *sp->vix);
    sp->seen = malloc((n + 2) * sizeof *sp->seen);
    sp->remat = malloc((size_t)n + 1);
    sp->stack = malloc((n + 1) * sizeof *sp->stack);
    int *live = calloc((size_t)n + 2, sizeof *live);
    if (!sp->partner || !sp->cut || !sp->part || !sp->home || !sp->vix || !sp->seen || !sp->remat ||
        !sp->stack || !live) {
        free(live);
        return -1;
    }
    jit__split_remat(t, map, sp);
    jit__split_live(t, sp, sp->seen, live); /* seen holds the last uses meanwhile */
    jit__split_cuts(t, block, live, sp);
    free(live);
    jit__split_shared(t, sp);
    return 0;
}

static int jit__int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* In part bi: declares slot a, written by an earlier part, once: read from v, or written
 * again with what it is made of (in slot order, a sincos pair where its first half
 * stands). */
static void jit__split_load(const tape *t, const jit_inputs *map, jit_split *sp, int bi, int a, jit_buf *b)
{
    if (sp->home[a] == bi || sp->seen[a] == bi)
        return;
    sp->seen[a] = bi;
    if (!sp->remat[a]) {
        jit__buf_printf(b, "double s%d = v[%d];\n", a, sp->vix[a]);
        return;
    }
    /* the slots to write: a and, for a value of constants, its operands' (none is this
     * part's: they come before a, whose part is earlier); stack[0..got) */
    int got = 0, done = 0;
    sp->stack[got++] = a;
    while (done < got) {
        int s = sp->stack[done++], j = sp->partner[s];
        if (j >= 0 && j < s) /* written at the first half */
            s = sp->stack[done - 1] = j;
        if (j >= 0)
            sp->seen[j] = bi;
        int ops[2], no = jit__operands(t, sp->partner, s, ops);
        for (int k = 0; k < no; k++)
            if (sp->seen[ops[k]] != bi) {
                sp->seen[ops[k]] = bi;
                sp->stack[got++] = ops[k];
            }
    }
    qsort(sp->stack, (size_t)got, sizeof *sp->stack, jit__int_cmp);
    for (int k = 0; k < got; k++) /* (both halves of a pair may have been reached) */
        if (k == 0 || sp->stack[k] != sp->stack[k - 1])
            jit__emit_ins(t, map, sp->partner, sp->stack[k], b);
}

/* Part bi of fn: its slots, each value of an earlier part read where first used, then
 * the values later parts or the epilogue need stored; the last part runs the epilogue. */
static void jit__split_part(const tape *t, const jit_inputs *map, const jit_function *fn, jit_split *sp,
                            int bi, jit_buf *b)
{
    int lo = sp->cut[bi], hi = sp->cut[bi + 1];
    if (fn->unit_parts > 0 && sp->nb > fn->unit_parts) { /* parts in several units */
        if (bi > 0 && bi % fn->unit_parts == 0) {
            jit__buf_str(b, JIT_UNIT_MARK);
            jit__prelude(b);
        }
        jit__buf_printf(b, "__attribute__((noinline, visibility(\"hidden\"))) void %s_%d(%s, double *v)\n",
                        fn->name, bi, fn->params);
    } else {
        jit__buf_printf(b, "__attribute__((noinline)) static void %s_%d(%s, double *v)\n", fn->name, bi,
                        fn->params);
    }
    jit__buf_printf(b, "{\ndouble x, r;\n");
    for (int i = lo; i < hi && !b->err; i++) {
        int ops[2], no = jit__operands(t, sp->partner, i, ops);
        for (int k = 0; k < no; k++)
            jit__split_load(t, map, sp, bi, ops[k], b);
        jit__emit_ins(t, map, sp->partner, i, b);
    }
    if (bi == sp->nb - 1)
        for (int o = 0; o < t->n_outputs; o++)
            jit__split_load(t, map, sp, bi, t->outputs[o], b);
    for (int i = lo; i < hi; i++) {
        int j = sp->partner[i]; /* the later half of a pair is written with the first */
        if (sp->home[i] == bi && sp->vix[i] >= 0)
            jit__buf_printf(b, "v[%d] = s%d;\n", sp->vix[i], i);
        if (j >= hi && sp->vix[j] >= 0) /* (one in this part is stored at its place) */
            jit__buf_printf(b, "v[%d] = s%d;\n", sp->vix[j], j);
    }
    jit__buf_printf(b, "%s}\n", bi == sp->nb - 1 && fn->epilogue ? fn->epilogue : "");
}

/* fn as parts of at most fn->block slots each, called in order by fn itself. */
static void jit__split(const tape *t, const jit_inputs *map, const jit_function *fn, jit_buf *b)
{
    jit_split sp = {0};
    if (jit__split_plan(t, map, fn->block, &sp) != 0) {
        jit__split_free(&sp);
        b->err = JIT_E_NOMEM;
        return;
    }
    for (int bi = 0; bi < sp.nb && !b->err; bi++)
        jit__split_part(t, map, fn, &sp, bi, b);
    int nv = sp.nv ? sp.nv : 1,
        on_stack = nv <= (fn->stack_values > 0 ? fn->stack_values : JIT_SPLIT_STACK_VALUES);
    if (fn->unit_parts > 0 && sp.nb > fn->unit_parts) /* the parts, some from other units */
        for (int bi = 0; bi < sp.nb; bi++)
            jit__buf_printf(b, "__attribute__((visibility(\"hidden\"))) void %s_%d(%s, double *v);\n",
                            fn->name, bi, fn->params);
    jit__buf_printf(b, "void %s(%s)\n{\n", fn->name, fn->params);
    if (on_stack)
        jit__buf_printf(b, "double v[%d];\n", nv);
    else
        jit__buf_printf(b,
                        "void *malloc(__SIZE_TYPE__); void free(void *);\n"
                        "double *v = malloc(%d * sizeof(double));\nif (!v) { %s return; }\n",
                        nv, fn->on_nomem ? fn->on_nomem : "");
    for (int bi = 0; bi < sp.nb; bi++)
        jit__buf_printf(b, "%s_%d(%s, v);\n", fn->name, bi, fn->args);
    jit__buf_printf(b, "%s}\n", on_stack ? "" : "free(v);\n");
    jit__split_free(&sp);
}

char *jit_source(const tape *t, const jit_inputs *map, const jit_function *fn, int with_prelude, size_t *len)
{
    if (jit__check_max(t, INT_MAX) < 0)
        return NULL;
    jit_buf b = {malloc(4096), 0, 4096, 0, JIT_MAX_SPLIT_SOURCE};
    if (!b.p)
        return NULL;
    if (with_prelude)
        jit__prelude(&b);
    if (fn->block > 0 && t->n_ins > fn->block) {
        jit__split(t, map, fn, &b);
    } else {
        jit__buf_printf(&b, "void %s(%s)\n{\n", fn->name, fn->params);
        jit__body(t, map, &b);
        jit__buf_printf(&b, "%s}\n", fn->epilogue ? fn->epilogue : "");
    }
    if (b.err) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.len;
    return b.p;
}

/* ---- compiling ------------------------------------------------------------- */

typedef struct jit_errctx {
    char *msg;
    size_t size;
    int seen;
} jit_errctx;

/* libtcc's error (and warning) callback: keeps the first message, prints nothing. */
static void jit__on_error(void *opaque, const char *msg)
{
    jit_errctx *ctx = opaque;
    if (ctx->seen++ || !ctx->msg || ctx->size == 0)
        return;
    snprintf(ctx->msg, ctx->size, "tcc: %s", msg);
}

static void jit__set_msg(char *err, size_t err_size, const char *msg)
{
    if (err && err_size > 0)
        snprintf(err, err_size, "%s", msg);
}

/* What t->jit points to: one libtcc state, shared by the tapes compiled in it. */
typedef struct jit_state {
    TCCState *s;
    atomic_int refs; /* tapes (or callers) using its code */
} jit_state;

/* Compiles src and looks up the n functions names[i] into fns[i]; on success *jit is a
 * state with `refs` references. Same returns and err as jit_compile_msg. */
static int jit__compile_names(const char *src, const char *const *names, void **fns, int n, int refs,
                              void **jit, char *err, size_t err_size)
{
    *jit = NULL;
    jit_errctx ctx = {err, err_size, 0};
    jit__set_msg(err, err_size, "");
    jit_state *st = malloc(sizeof *st);
    if (!st) {
        jit__set_msg(err, err_size, "out of memory");
        return JIT_E_NOMEM;
    }

    pthread_mutex_lock(&jit_lock);
    TCCState *s = tcc_new();
    if (!s) {
        pthread_mutex_unlock(&jit_lock);
        free(st);
        jit__set_msg(err, err_size, "tcc_new failed");
        return JIT_E_NOMEM;
    }
    tcc_set_error_func(s, &ctx, jit__on_error);
    tcc_set_options(s, "-nostdlib");
    int rc = tcc_set_output_type(s, TCC_OUTPUT_MEMORY);
    if (rc == 0)
        rc = tcc_compile_string(s, src);
    for (size_t j = 0; rc == 0 && j < sizeof jit_funcs / sizeof jit_funcs[0]; j++)
        rc = tcc_add_symbol(s, jit_funcs[j].name, jit_funcs[j].addr);
    if (rc == 0)
        rc = tcc_relocate(s, TCC_RELOCATE_AUTO);
    for (int i = 0; i < n; i++) {
        fns[i] = rc == 0 ? tcc_get_symbol(s, names[i]) : NULL;
        if (!fns[i])
            rc = -1;
    }
    if (rc != 0) {
        tcc_delete(s);
        pthread_mutex_unlock(&jit_lock);
        free(st);
        if (!ctx.seen)
            jit__set_msg(err, err_size, "tcc: compilation failed");
        return JIT_E_COMPILE;
    }
    pthread_mutex_unlock(&jit_lock);
    st->s = s;
    atomic_init(&st->refs, refs);
    *jit = st;
    return 0;
}

int jit__compile_source(const char *src, tape_fn *fn, void **jit, char *err, size_t err_size)
{
    *fn = NULL;
    const char *name = "f";
    void *sym = NULL;
    int rc = jit__compile_names(src, &name, &sym, 1, 1, jit, err, err_size);
    if (rc == 0) /* POSIX guarantees object and function pointers convert; ISO C does not. */
        memcpy(fn, &sym, sizeof *fn);
    return rc;
}

static int jit__disabled(void)
{
    const char *v = getenv("HAMEL_NO_JIT");
    return v && *v && strcmp(v, "0") != 0;
}

/* Publishes compiled code on t: jit first, then yfn, then fn (see tape.h). POSIX
 * guarantees object and function pointers convert; ISO C does not. */
static void jit__publish(tape *t, void *jit, void *f, void *fy)
{
    tape_fn fn;
    tape_yfn yfn = NULL;
    memcpy(&fn, &f, sizeof fn);
    if (fy)
        memcpy(&yfn, &fy, sizeof yfn);
    t->jit = jit;
    atomic_store_explicit(&t->yfn, yfn, memory_order_release);
    atomic_store_explicit(&t->fn, fn, memory_order_release);
}

int jit_compile_msg(tape *t, char *err, size_t err_size)
{
    jit__set_msg(err, err_size, "");
    if (t->fn)
        return 0;
    t->jit = NULL;
    if (jit__disabled()) {
        jit__set_msg(err, err_size, "disabled by HAMEL_NO_JIT");
        return JIT_E_DISABLED;
    }
    int rc = jit__check(t);
    if (rc < 0) {
        jit__set_msg(err, err_size, rc == JIT_E_TOO_LARGE ? "tape exceeds JIT_MAX_SLOTS" : "malformed tape");
        return rc;
    }

    jit_buf b = {malloc(4096), 0, 4096, 0, 0};
    if (!b.p) {
        jit__set_msg(err, err_size, "out of memory");
        return JIT_E_NOMEM;
    }
    jit__generate(t, &b);
    if (b.err) {
        free(b.p);
        jit__set_msg(err, err_size,
                     b.err == JIT_E_TOO_LARGE ? "source exceeds JIT_MAX_SOURCE"
                     : b.err == JIT_E_NOMEM   ? "out of memory"
                                              : "malformed tape");
        return b.err;
    }

    const char *names[2] = {"f", "fy"};
    void *syms[2] = {NULL, NULL}, *jit;
    rc = jit__compile_names(b.p, names, syms, t->yin ? 2 : 1, 1, &jit, err, err_size);
    free(b.p);
    if (rc < 0)
        return rc;
    jit__publish(t, jit, syms[0], syms[1]);
    return 0;
}

int jit_compile(tape *t) { return jit_compile_msg(t, NULL, 0); }

int jit_compile_many(tape **ts, int n)
{
    if (jit__disabled())
        return JIT_E_DISABLED;
    tape *todo[16];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (ts[i] && !ts[i]->fn && m < 16 && jit__check(ts[i]) == 0)
            todo[m++] = ts[i];
    if (m == 0)
        return 0;
    jit_buf b = {malloc(4096), 0, 4096, 0, 0};
    if (!b.p)
        return JIT_E_NOMEM;
    jit__prelude(&b);
    char names[32][20];
    const char *np[32];
    int nn = 0, at[16]; /* at[i]: the first of todo[i]'s names */
    for (int i = 0; i < m && !b.err; i++) {
        char fname[12];
        snprintf(fname, sizeof fname, "f%d", i);
        at[i] = nn;
        snprintf(names[nn], sizeof names[nn], "%s", fname);
        np[nn] = names[nn];
        nn++;
        if (todo[i]->yin) {
            snprintf(names[nn], sizeof names[nn], "%sy", fname);
            np[nn] = names[nn];
            nn++;
        }
        jit__functions(todo[i], fname, &b);
    }
    void *syms[32], *jit = NULL;
    int rc = b.err ? b.err : jit__compile_names(b.p, np, syms, nn, m, &jit, NULL, 0);
    free(b.p);
    if (rc < 0) { /* one at a time: a tape that defeats tcc costs only itself */
        int worst = 0;
        for (int i = 0; i < m; i++) {
            int r = jit_compile(todo[i]);
            if (r < 0)
                worst = r;
        }
        return worst;
    }
    for (int i = 0; i < m; i++)
        jit__publish(todo[i], jit, syms[at[i]], todo[i]->yin ? syms[at[i] + 1] : NULL);
    return 0;
}

void jit_release(void *jit)
{
    jit_state *st = jit;
    if (!st || atomic_fetch_sub(&st->refs, 1) != 1)
        return;
    pthread_mutex_lock(&jit_lock);
    tcc_delete(st->s);
    pthread_mutex_unlock(&jit_lock);
    free(st);
}
