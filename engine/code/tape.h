/* tape.h — expressions compiled to a flat instruction list.
 *
 * A tape evaluates many output expressions at once without walking trees: every
 * distinct sub-expression of the (hash-consed) expression DAG becomes one
 * instruction, computed once per evaluation, so shared sub-expressions are shared.
 * Instruction i writes slot i; its operands are earlier slots. Slots
 * [0, n_inputs) are the inputs, copied from `in` (TAPE_INPUT instructions).
 *
 * A tape can be evaluated by the interpreter here, or compiled to machine code by
 * jit.h, which fills `fn`; tape_run uses the compiled code when there is one.
 */
#ifndef HAMEL_TAPE_H
#define HAMEL_TAPE_H

#include <stdatomic.h>
#include <stdint.h>

typedef enum tape_op {
    TAPE_INPUT, /* slot = in[a] */
    TAPE_CONST, /* slot = c */
    TAPE_ADD,   /* slot = s[a] + s[b] */
    TAPE_SUB,   /* slot = s[a] - s[b] */
    TAPE_MUL,   /* slot = s[a] * s[b] */
    TAPE_DIV,   /* slot = s[a] / s[b] */
    TAPE_NEG,   /* slot = -s[a] */
    TAPE_POWI,  /* slot = s[a] ^ b, b a (possibly negative) integer exponent */
    TAPE_POW,   /* slot = pow(s[a], s[b]) */
    TAPE_SQRT,
    TAPE_EXP,
    TAPE_LOG,
    TAPE_SIN,
    TAPE_COS,
    TAPE_TAN,
    TAPE_ASIN,
    TAPE_ACOS,
    TAPE_ATAN,
    TAPE_ATAN2, /* slot = atan2(s[a], s[b]) */
    TAPE_SINH,
    TAPE_COSH,
    TAPE_TANH,
    TAPE_ABS,
    TAPE_SIGN, /* -1, 0, 1; hamel_sign in generated code */
    TAPE_OP_COUNT
} tape_op;

typedef struct tape_ins {
    int32_t op; /* a tape_op */
    int32_t a, b;
    double c;
} tape_ins;

/* Compiled code for a tape: reads in[n_inputs], writes out[n_outputs]. in and out must
 * not overlap (compiled code reads inputs where it uses them). */
typedef void (*tape_fn)(const double *in, double *out);

/* Compiled code that reads the inputs the tape's `yin` names from t and y[] directly and
 * the others from in[] (the right-hand side's entry: no copy of the state into in[]). */
typedef void (*tape_yfn)(double t, const double *y, const double *in, double *out);

typedef struct tape {
    int n_inputs;
    int n_ins; /* instructions, = slots; the first n_inputs are TAPE_INPUT */
    tape_ins *ins;
    int n_outputs;
    int32_t *outputs; /* slot of each output */
    /* Compiled code, or NULL. Atomic: the code may be published by another thread
     * (jit.c, with release order, after `jit`) while runs read it; a run that finds it
     * switches from the interpreter to it between two evaluations (the two agree to
     * the bit, jit.h). */
    _Atomic(tape_fn) fn;
    void *jit; /* owned by jit.c */
    /* Optional, [n_inputs], set before compiling (owned, freed by tape_free): where yfn
     * reads input a: TAPE_YIN_IN (in[a]), TAPE_YIN_T (t) or an index into y. */
    int32_t *yin;
    _Atomic(tape_yfn) yfn; /* compiled with fn when yin is set, published before fn */
} tape;

#define TAPE_YIN_IN (-1)
#define TAPE_YIN_T (-2)

/* Frees a tape and its compiled code. Accepts NULL. */
void tape_free(tape *t);

/* The C library name of a one-argument op (sqrt, exp, ..., fabs for TAPE_ABS), or NULL
 * for an op that is not one: what the code writers (jit.c, export.c) call. */
const char *tape_op_libm_name(tape_op op);

/* Evaluates with the interpreter: work must hold n_ins doubles. */
void tape_eval(const tape *t, const double *in, double *work, double *out);

/* Evaluates with the interpreter and a first-order running bound on each output's
 * rounding error, in units of the unit roundoff u = 2^-53 (Higham's running error
 * analysis): out_err[k] bounds |computed - exact| / u of out[k] for the tape's inputs
 * taken as exact, each operation's result rounded once (libm's functions likewise)
 * and the errors of its operands carried through its derivatives. Infinite where the
 * computation is not differentiable at the point with an operand in error (sqrt(0),
 * log(0)), NaN where a value is. work and err each hold n_ins doubles; out may be NULL. */
void tape_eval_err(const tape *t, const double *in, double *work, double *err, double *out, double *out_err);

/* Evaluates with compiled code if present, else the interpreter (work as above). */
static inline void tape_run(const tape *t, const double *in, double *work, double *out)
{
    tape_fn f = atomic_load_explicit(&((tape *)t)->fn, memory_order_acquire);
    if (f)
        f(in, out);
    else
        tape_eval(t, in, work, out);
}

/* Built from expressions (tape_build.c). */
#include "expr.h"

/* The most instructions one tape may have. */
#define TAPE_MAX_INS (1 << 22)

/* Compiles the roots into a tape with n_inputs inputs; sym_input[s] is the input
 * slot of symbol s, or -1 if s must not occur (then NULL is returned). Returns a new
 * tape the caller frees with tape_free, or NULL. */
tape *tape_build(const expr_ctx *c, expr *const *roots, int n_roots, const int *sym_input, int n_inputs);
#endif
