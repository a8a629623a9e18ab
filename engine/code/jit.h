/* jit.h — tapes compiled to machine code in-process with libtcc.
 *
 * jit_compile turns a tape (tape.h) into C source — generated from the tape's
 * instructions only, never from user text — of one function
 *     void f(const double *in, double *out)
 * compiles it with libtcc into memory and stores the entry point in t->fn (and the
 * compiler state in t->jit). tape_run then calls the compiled code instead of the
 * interpreter. Every libm function the code calls is bound to this process's libm, so
 * no runtime library files are needed. tcc keeps values in registers only within one
 * expression, so a slot used once is written inside the expression that uses it (up
 * to JIT_INLINE_DEPTH deep), constants as literals and inputs used once as reads of
 * in[] where they are used; other slots are locals. When the tape's `yin` is set, a
 * second function
 *     void fy(double t, const double *y, const double *in, double *out)
 * reads the inputs yin names from t and y directly (published in t->yfn): the
 * right-hand side calls it without copying the state into in[] first.
 *
 * The compiled code does exactly the interpreter's IEEE operations in the same
 * order (TAPE_POWI as the same binary-exponentiation chain), so results agree with
 * tape_eval bit for bit, except possibly the sign or payload of a NaN.
 *
 * Failure is never fatal: on any error jit_compile returns a negative JIT_E_* code,
 * leaves t->fn NULL and the interpreter is used. Setting the environment variable
 * HAMEL_NO_JIT (to anything but "" or "0") disables compilation.
 *
 * The compiled function keeps at most every slot in its stack frame: it needs 8 * n_ins
 * bytes of stack plus what libm uses (at most JIT_MAX_SLOTS * 8 = 512 KiB + a
 * little), and tcc emits no stack probes, so threads that run compiled tapes need
 * a stack at least that large (glibc's default of 8 MiB is plenty).
 *
 * Threads: jit_compile and jit_release may be called from any thread (libtcc use is
 * serialised inside jit.c). A compiled tape's fn is pure and may run concurrently.
 */
#ifndef HAMEL_JIT_H
#define HAMEL_JIT_H

#include <stddef.h>

#include "tape.h"

/* Largest generated source, in bytes; a bigger tape is left to the interpreter. */
#define JIT_MAX_SOURCE ((size_t)8 << 20)

/* Most slots (instructions) a compiled tape may have; see the stack note above. */
#define JIT_MAX_SLOTS 65536

/* Why jit_compile declined. These never reach a problem document: the caller just
 * keeps the interpreter. */
#define JIT_E_DISABLED -1  /* HAMEL_NO_JIT is set */
#define JIT_E_BAD_TAPE -2  /* an opcode or operand index is out of range */
#define JIT_E_TOO_LARGE -3 /* more than JIT_MAX_SLOTS slots or JIT_MAX_SOURCE bytes */
#define JIT_E_NOMEM -4     /* out of memory */
#define JIT_E_COMPILE -5   /* libtcc failed (compile, link or relocation) */

/* Compiles t to machine code and sets t->fn and t->jit (t keeps ownership of the
 * compiled code; tape_free releases it). Returns 0 on success (also when t is
 * already compiled) or a negative JIT_E_* code, in which case t->fn and t->jit are
 * left NULL. */
int jit_compile(tape *t);

/* As jit_compile; on failure also writes a NUL-terminated reason (libtcc's first
 * error message, for JIT_E_COMPILE) into err[err_size]. err may be NULL. */
int jit_compile_msg(tape *t, char *err, size_t err_size);

/* Compiles the tapes ts[0..n) that are not compiled yet (n <= 16 at a time; NULL entries
 * are skipped) in one libtcc state, which they share (reference counted: the code goes
 * with the last tape freed). libtcc's fixed cost is most of a small tape's compile time
 * (0.45 ms for the rolling disk's three tapes one by one, 0.22 ms together). If the
 * joint compile fails, each tape is compiled alone. Returns 0 or the last JIT_E_* code. */
int jit_compile_many(tape **ts, int n);

/* Drops a tape's reference to compiled code made by jit_compile or jit_compile_many
 * (what t->jit points to); the last one frees it. Accepts NULL. The tape's fn must not
 * be called afterwards; tape_free calls this. */
void jit_release(void *jit);

/* How generated code reads each input of a tape (for the native tier, native.h):
 * expr[a] is a C expression for input a (e.g. "y[2]"), or NULL to fold the constant
 * value[a] into the code. */
typedef struct jit_input_map {
    const char *const *expr; /* [n_inputs] */
    const double *value;     /* [n_inputs] */
} jit_inputs;

/* One function of generated C for the native tier (jit_source): `void name(params)`. */
typedef struct jit_function {
    const char *name;     /* e.g. "g" */
    const char *params;   /* e.g. "double t, const double *y, double *dydt" */
    const char *args;     /* the parameters as arguments, e.g. "t, y, dydt" */
    const char *epilogue; /* statements after the body that may use s<slot>, or NULL */
    const char *on_nomem; /* statements (then return) when a split function cannot allocate
                             its shared values (see below), or NULL */
    int block;            /* most slots per part of a split function; 0: never split */
    int stack_values;     /* most shared values kept on the stack (0: JIT_SPLIT_STACK_VALUES) */
    int unit_parts;       /* most parts in one translation unit (0: all in one) */
} jit_function;

/* Where a split function's source begins a new translation unit (then the libm
 * prototypes again): each unit is compiled on its own (cc a.c b.c ...), so the compiler's
 * memory is bounded by a unit's size however long the tape; the parts are then hidden
 * global functions, declared before fn in the last unit. */
#define JIT_UNIT_MARK "/* hamel: next unit */\n"

/* Values shared by the parts of a split function live in an array on its stack up to
 * this many (128 KiB), else on the heap. */
#define JIT_SPLIT_STACK_VALUES 16384

/* Largest source jit_source writes, in bytes. */
#define JIT_MAX_SPLIT_SOURCE ((size_t)256 << 20)

/* C source of fn whose body computes every slot of t as jit_compile's code does (locals
 * s<slot>), reading inputs through map (NULL: in[a]), then runs the epilogue. With
 * with_prelude, the libm prototypes the body may call come first. A tape of more than
 * fn->block slots (fn->block > 0) is split: part i, a static function `name_<i>` of the
 * same parameters and a `double *v`, computes slots [i * block, (i + 1) * block), reads
 * the values it needs of earlier parts from v (inputs and constants it writes again) and
 * stores those later parts or the epilogue need; the last part runs the epilogue; fn
 * calls the parts in order with v on its stack (on the heap past fn->stack_values:
 * fn runs fn->on_nomem when that fails). The operations and their order are the same
 * either way, so the results are too. Returns malloc'd text (length in *len if not
 * NULL), or NULL if the tape is malformed or the source would pass
 * JIT_MAX_SPLIT_SOURCE. */
char *jit_source(const tape *t, const jit_inputs *map, const jit_function *fn, int with_prelude, size_t *len);

/* Internal, for tests: compiles arbitrary generated source `src` the way
 * jit_compile does and returns its function `f` in *fn and the state to pass to
 * jit_release in *jit. Borrows src. Same return codes and err as jit_compile_msg. */
int jit__compile_source(const char *src, tape_fn *fn, void **jit, char *err, size_t err_size);

/* Internal, for tests and measurements: the source jit_compile gives libtcc for t
 * (malloc'd), or NULL. */
char *jit__tcc_source(const tape *t);

#endif
