/* test_jit.c — the tape JIT (engine/jit.h) against the interpreter (tape_eval).
 *
 * The compiled code calls the very same libm functions and does the same IEEE
 * operations in the same order as the interpreter, so we demand bit-identical
 * results (stricter than a 1e-15 relative tolerance); the one allowance is that two
 * NaNs match whatever their sign or payload. Constants copied straight through must
 * keep even their NaN bits.
 */
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jit.h"
#include "tape.h"

/* ---- building tapes -------------------------------------------------------- */

static tape *tt_new(int n_inputs, int cap)
{
    tape *t = calloc(1, sizeof *t);
    cr_assert_not_null(t);
    t->ins = calloc((size_t)(cap > 0 ? cap : 1), sizeof *t->ins);
    cr_assert_not_null(t->ins);
    t->n_inputs = n_inputs;
    for (int i = 0; i < n_inputs; i++)
        t->ins[t->n_ins++] = (tape_ins){TAPE_INPUT, i, 0, 0.0};
    return t;
}

static int tt_push(tape *t, tape_op op, int a, int b, double c)
{
    t->ins[t->n_ins] = (tape_ins){op, a, b, c};
    return t->n_ins++;
}

/* Makes every slot an output, so every intermediate value is compared. */
static void tt_all_outputs(tape *t)
{
    t->n_outputs = t->n_ins;
    t->outputs = malloc((size_t)(t->n_ins > 0 ? t->n_ins : 1) * sizeof *t->outputs);
    cr_assert_not_null(t->outputs);
    for (int i = 0; i < t->n_ins; i++)
        t->outputs[i] = i;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

static int rng_below(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

static int is_binary(tape_op op)
{
    return op == TAPE_ADD || op == TAPE_SUB || op == TAPE_MUL || op == TAPE_DIV || op == TAPE_POW ||
           op == TAPE_ATAN2;
}

/* A random tape of n instructions over every op. Operands prefer recent slots, so
 * chains get deep; constants are mostly small, sometimes special. */
static tape *tt_random(uint64_t seed, int n_inputs, int n)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    tape *t = tt_new(n_inputs, n);
    while (t->n_ins < n) {
        int i = t->n_ins;
        tape_op op = (tape_op)(TAPE_CONST + rng_below(&s, TAPE_OP_COUNT - TAPE_CONST));
        int span = i < 16 ? i : 16;
        int a = rng_below(&s, 4) ? i - 1 - rng_below(&s, span) : rng_below(&s, i);
        int b = rng_below(&s, 4) ? i - 1 - rng_below(&s, span) : rng_below(&s, i);
        double c = 0.0;
        if (op == TAPE_CONST) {
            static const double special[] = {0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e-300, 1e300};
            c = rng_below(&s, 4) ? (rng_unit(&s) - 0.5) * 8.0 : special[rng_below(&s, 8)];
        }
        if (op == TAPE_POWI)
            b = rng_below(&s, 13) - 6;
        else if (!is_binary(op))
            b = 0;
        tt_push(t, op, a, b, c);
    }
    tt_all_outputs(t);
    return t;
}

/* ---- comparing --------------------------------------------------------------- */

static uint64_t bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static int same(double got, double want) { return (isnan(got) && isnan(want)) || bits(got) == bits(want); }

/* Runs t compiled and interpreted at `in` and asserts every output matches. */
static void expect_match(const tape *t, const double *in, const char *what)
{
    cr_assert_not_null(t->fn, "%s: tape was not compiled", what);
    size_t n = (size_t)(t->n_outputs > 0 ? t->n_outputs : 1);
    double *got = calloc(n, sizeof *got), *want = calloc(n, sizeof *want);
    double *work = calloc((size_t)(t->n_ins > 0 ? t->n_ins : 1), sizeof *work);
    cr_assert(got && want && work);
    t->fn(in, got);
    tape_eval(t, in, work, want);
    for (int k = 0; k < t->n_outputs; k++) {
        const tape_ins *p = &t->ins[t->outputs[k]];
        cr_assert(same(got[k], want[k]),
                  "%s: output %d (slot %d, op %d, a %d, b %d): jit %.17g [%016llx] != "
                  "interpreter %.17g [%016llx]",
                  what, k, t->outputs[k], p->op, p->a, p->b, got[k], (unsigned long long)bits(got[k]),
                  want[k], (unsigned long long)bits(want[k]));
    }
    free(got);
    free(want);
    free(work);
}

static int compile_ok(tape *t)
{
    char err[256];
    int rc = jit_compile_msg(t, err, sizeof err);
    cr_assert_eq(rc, 0, "jit_compile failed: %d (%s)", rc, err);
    cr_assert_not_null(t->fn, "jit_compile returned 0 but left fn NULL");
    cr_assert_not_null(t->jit, "jit_compile returned 0 but left jit NULL");
    return rc;
}

static const double specials[] = {0.0,    -0.0,    1.0,     -1.0,   0.5,   -0.5,     2.0,
                                  1e-310, -1e-310, 1e308,   -1e308, M_PI,  INFINITY, -INFINITY,
                                  NAN,    DBL_MAX, DBL_MIN, 710.0,  -745.0};
#define N_SPECIALS ((int)(sizeof specials / sizeof specials[0]))

/* ---- tests --------------------------------------------------------------------- */

/* Every op on its own, at random points and at every pair of special values. */
Test(jit, each_op_matches_interpreter)
{
    for (int op = TAPE_ADD; op < TAPE_OP_COUNT; op++) {
        tape *t = tt_new(2, 3);
        tt_push(t, (tape_op)op, 0, op == TAPE_POWI ? 3 : (is_binary((tape_op)op) ? 1 : 0), 0.0);
        tt_all_outputs(t);
        compile_ok(t);
        char what[64];
        snprintf(what, sizeof what, "op %d", op);
        uint64_t s = 42 + (uint64_t)op;
        for (int r = 0; r < 2000; r++) {
            double scale = r % 3 == 0 ? 1.0 : r % 3 == 1 ? 4.0 : 1000.0;
            double in[2] = {(rng_unit(&s) - 0.5) * 2 * scale, (rng_unit(&s) - 0.5) * 2 * scale};
            expect_match(t, in, what);
        }
        for (int i = 0; i < N_SPECIALS; i++)
            for (int j = 0; j < N_SPECIALS; j++) {
                double in[2] = {specials[i], specials[j]};
                expect_match(t, in, what);
            }
        tape_free(t);
    }
}

/* Random tapes mixing every op, every slot compared. */
Test(jit, random_tapes_match_interpreter)
{
    for (uint64_t seed = 1; seed <= 40; seed++) {
        tape *t = tt_random(seed, 4, 300);
        compile_ok(t);
        uint64_t s = seed;
        char what[64];
        snprintf(what, sizeof what, "random tape seed %llu", (unsigned long long)seed);
        for (int r = 0; r < 50; r++) {
            double in[4];
            for (int k = 0; k < 4; k++)
                in[k] = (rng_unit(&s) - 0.5) * 4.0;
            expect_match(t, in, what);
        }
        tape_free(t);
    }
}

/* The first tier writes a slot used once inside the expression that uses it (and
 * constants as literals, inputs read where used): random tapes whose outputs are only
 * a few late slots, so most slots are used once and nested, through both entries (f
 * reading in[], fy reading t and y[] for the inputs yin names), bit for bit. */
Test(jit, nested_expressions_and_the_state_entry_match_interpreter)
{
    int nested = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        int n_in = 6, n = 200 + (int)(seed % 7) * 40;
        tape *t = tt_random(seed + 1000, n_in, n);
        free(t->outputs); /* a few outputs: the last slots and one early one */
        t->n_outputs = 4;
        t->outputs = malloc(4 * sizeof *t->outputs);
        cr_assert_not_null(t->outputs);
        t->outputs[0] = n - 1;
        t->outputs[1] = n - 2;
        t->outputs[2] = n_in + (int)(seed % 50);
        t->outputs[3] = n - 1; /* twice: the slot must be a local */
        /* inputs 0..2 from y (in another order), 3 is t, 4..5 from in[] */
        t->yin = malloc(n_in * sizeof *t->yin);
        cr_assert_not_null(t->yin);
        const int32_t yin[6] = {2, 0, 1, TAPE_YIN_T, TAPE_YIN_IN, TAPE_YIN_IN};
        memcpy(t->yin, yin, sizeof yin);
        char *src = jit__tcc_source(t);
        cr_assert_not_null(src);
        int defs = 0;
        for (const char *q = src; (q = strstr(q, "double s")) != NULL; q++)
            defs++;
        int *uses = calloc((size_t)n, sizeof *uses), computed = 0;
        cr_assert_not_null(uses);
        for (int i = n_in; i < n; i++) {
            uses[t->ins[i].a]++;
            if (is_binary((tape_op)t->ins[i].op))
                uses[t->ins[i].b]++;
        }
        for (int k = 0; k < 4; k++)
            uses[t->outputs[k]]++;
        for (int i = 0; i < n; i++)
            computed += uses[i] > 0;
        free(uses);
        if (defs < 2 * computed * 3 / 4) /* a quarter of the locals gone, in both functions */
            nested++;
        free(src);
        compile_ok(t);
        tape_yfn yf = atomic_load(&t->yfn);
        cr_assert_not_null(yf, "seed %llu: no state entry", (unsigned long long)seed);
        uint64_t s = seed;
        char what[64];
        snprintf(what, sizeof what, "nested tape seed %llu", (unsigned long long)seed);
        double *work = calloc((size_t)n, sizeof *work);
        cr_assert_not_null(work);
        for (int r = 0; r < 50; r++) {
            double in[6], y[3], got[4], want[4];
            for (int k = 0; k < n_in; k++)
                in[k] = r < 45 ? (rng_unit(&s) - 0.5) * 4.0 : specials[rng_below(&s, N_SPECIALS)];
            expect_match(t, in, what);
            y[2] = in[0];
            y[0] = in[1];
            y[1] = in[2];
            double other[6] = {NAN, NAN, NAN, NAN, in[4], in[5]}; /* fy must not read 0..3 from in[] */
            yf(in[3], y, other, got);
            tape_eval(t, in, work, want);
            for (int k = 0; k < 4; k++)
                cr_assert(same(got[k], want[k]), "%s, state entry: output %d: %.17g != %.17g", what, k,
                          got[k], want[k]);
        }
        free(work);
        tape_free(t);
    }
    cr_assert_eq(nested, 40, "the first tier kept most slots in locals (%d of 40 tapes nested)", nested);
}

/* Constants must come through bit for bit, NaN payloads included. */
Test(jit, constants_keep_their_bits)
{
    uint64_t nan_payload = 0x7ff4000000000123ull; /* signalling NaN with payload */
    uint64_t neg_nan = 0xfff8000000000abcull;
    double nan1, nan2;
    memcpy(&nan1, &nan_payload, sizeof nan1);
    memcpy(&nan2, &neg_nan, sizeof nan2);
    const double cs[] = {INFINITY,
                         -INFINITY,
                         NAN,
                         -NAN,
                         nan2,
                         -0.0,
                         0.0,
                         1e308,
                         -1e308,
                         DBL_MAX,
                         -DBL_MAX,
                         DBL_MIN,
                         4.9406564584124654e-324,
                         -4.9406564584124654e-324,
                         0.1,
                         1.0 / 3.0,
                         100.0,
                         -5.0,
                         1e22,
                         123456789012345678.0,
                         0x1.fffffffffffffp-1};
    int n = (int)(sizeof cs / sizeof cs[0]);
    tape *t = tt_new(0, n + 1);
    for (int k = 0; k < n; k++)
        tt_push(t, TAPE_CONST, 0, 0, cs[k]);
    /* A signalling NaN may be quieted by any move through the FPU; keep it last and
     * compare it as a NaN only. */
    tt_push(t, TAPE_CONST, 0, 0, nan1);
    tt_all_outputs(t);
    compile_ok(t);
    double out[64];
    t->fn(NULL, out);
    for (int k = 0; k < n; k++)
        cr_assert_eq(bits(out[k]), bits(cs[k]), "constant %d: jit gave %016llx, expected %016llx", k,
                     (unsigned long long)bits(out[k]), (unsigned long long)bits(cs[k]));
    cr_assert(isnan(out[n]), "signalling NaN constant came out as %g", out[n]);
    tape_free(t);
}

/* Random finite constants (all magnitudes, subnormals included) survive %.17g and
 * tcc's parser exactly. */
Test(jit, random_constants_round_trip)
{
    enum { N = 2000 };
    tape *t = tt_new(0, N);
    uint64_t s = 7;
    double cs[N];
    for (int k = 0; k < N; k++) {
        double c;
        do {
            uint64_t u = rng_next(&s);
            memcpy(&c, &u, sizeof c);
        } while (!isfinite(c));
        cs[k] = c;
        tt_push(t, TAPE_CONST, 0, 0, c);
    }
    tt_all_outputs(t);
    compile_ok(t);
    static double out[N];
    t->fn(NULL, out);
    for (int k = 0; k < N; k++)
        cr_assert_eq(bits(out[k]), bits(cs[k]), "constant %.17g: jit gave %.17g", cs[k], out[k]);
    tape_free(t);
}

/* Constants feeding arithmetic: inf - inf, 0 * inf, -0.0 signs, 1e308 overflow. */
Test(jit, special_constants_in_arithmetic)
{
    tape *t = tt_new(1, 32);
    int inf = tt_push(t, TAPE_CONST, 0, 0, INFINITY);
    int ninf = tt_push(t, TAPE_CONST, 0, 0, -INFINITY);
    int nan = tt_push(t, TAPE_CONST, 0, 0, NAN);
    int mz = tt_push(t, TAPE_CONST, 0, 0, -0.0);
    int big = tt_push(t, TAPE_CONST, 0, 0, 1e308);
    tt_push(t, TAPE_SUB, inf, inf, 0);
    tt_push(t, TAPE_ADD, inf, ninf, 0);
    tt_push(t, TAPE_MUL, mz, inf, 0);
    tt_push(t, TAPE_DIV, 0, mz, 0);
    tt_push(t, TAPE_ADD, big, big, 0);
    tt_push(t, TAPE_NEG, mz, 0, 0);
    tt_push(t, TAPE_ADD, mz, mz, 0);
    tt_push(t, TAPE_SUB, mz, 0, 0);
    tt_push(t, TAPE_MUL, nan, 0, 0);
    tt_push(t, TAPE_DIV, 0, inf, 0);
    tt_push(t, TAPE_POWI, mz, -3, 0);
    tt_push(t, TAPE_POWI, big, 2, 0);
    tt_push(t, TAPE_ATAN2, mz, ninf, 0);
    tt_all_outputs(t);
    compile_ok(t);
    for (int i = 0; i < N_SPECIALS; i++)
        expect_match(t, &specials[i], "special constants");
    tape_free(t);
}

/* POWI: the multiplication chain must equal tape.c's binary exponentiation for
 * negative, zero and large exponents, including INT32_MIN. */
Test(jit, powi_matches_interpreter)
{
    static const int32_t ks[] = {
        0,     1,      -1,      2,          -2,        3,         -3,           7,    -7,
        8,     31,     -31,     64,         -64,       100,       -100,         1023, -1024,
        65537, -65537, 1 << 30, -(1 << 30), INT32_MAX, INT32_MIN, INT32_MIN + 1};
    int nk = (int)(sizeof ks / sizeof ks[0]);
    tape *t = tt_new(1, nk + 1);
    for (int k = 0; k < nk; k++)
        tt_push(t, TAPE_POWI, 0, ks[k], 0.0);
    tt_all_outputs(t);
    compile_ok(t);
    static const double xs[] = {0.0, -0.0, 1.0,  -1.0,  1.0000001, -1.0000001, 0.9999999, 1.5, -1.5, 0.5,
                                2.0, 1e-5, -3.7, 1e300, 1e-300,    INFINITY,   -INFINITY, NAN, M_E,  -M_PI};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
        expect_match(t, &xs[i], "powi");
    uint64_t s = 99;
    for (int r = 0; r < 3000; r++) {
        double x = 1.0 + (rng_unit(&s) - 0.5) * 1e-3 * (r % 5 + 1);
        if (r % 2)
            x = -x;
        expect_match(t, &x, "powi near 1");
    }
    tape_free(t);
}

/* HAMEL_NO_JIT disables compilation and the interpreter carries on. (Each Criterion
 * test runs in its own process, so setenv here touches no other test.) */
Test(jit, no_jit_env_falls_back)
{
    tape *t = tt_random(5, 3, 200);
    setenv("HAMEL_NO_JIT", "1", 1);
    char err[128];
    int rc = jit_compile_msg(t, err, sizeof err);
    cr_assert_eq(rc, JIT_E_DISABLED, "HAMEL_NO_JIT=1: expected JIT_E_DISABLED, got %d", rc);
    cr_assert_null(t->fn, "HAMEL_NO_JIT=1 but fn was set");
    cr_assert_null(t->jit, "HAMEL_NO_JIT=1 but jit was set");
    cr_assert(strstr(err, "HAMEL_NO_JIT") != NULL, "message was '%s'", err);

    /* tape_run is the interpreter now. */
    double in[3] = {0.3, -0.7, 1.1};
    double *a = calloc(200, sizeof *a), *b = calloc(200, sizeof *b), *w = calloc(200, sizeof *w);
    tape_run(t, in, w, a);
    tape_eval(t, in, w, b);
    for (int k = 0; k < t->n_outputs; k++)
        cr_assert(same(a[k], b[k]), "fallback output %d: %g vs %g", k, a[k], b[k]);

    setenv("HAMEL_NO_JIT", "0", 1);
    cr_assert_eq(jit_compile(t), 0, "HAMEL_NO_JIT=0 should not disable the JIT");
    tape_run(t, in, w, a);
    expect_match(t, in, "after re-enabling");
    free(a);
    free(b);
    free(w);
    tape_free(t);
}

/* A 20,000-instruction tape compiles and matches. */
Test(jit, large_tape_compiles)
{
    tape *t = tt_random(2024, 8, 20000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    compile_ok(t);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cr_log_info("20000-slot tape compiled in %.1f ms",
                (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    uint64_t s = 3;
    for (int r = 0; r < 20; r++) {
        double in[8];
        for (int k = 0; k < 8; k++)
            in[k] = (rng_unit(&s) - 0.5) * 3.0;
        expect_match(t, in, "20000-slot tape");
    }
    tape_free(t);
}

/* Source beyond JIT_MAX_SOURCE and tapes beyond JIT_MAX_SLOTS are refused cleanly
 * and evaluate with the interpreter. */
Test(jit, too_large_falls_back)
{
    /* Each POWI by INT32_MAX is ~60 statements (~700 bytes of source). */
    int n = (int)(JIT_MAX_SOURCE / 600) + 1;
    cr_assert_lt(n, JIT_MAX_SLOTS, "test tape must hit the source cap, not the slot cap");
    tape *t = tt_new(1, n + 1);
    for (int i = 0; i < n; i++)
        tt_push(t, TAPE_POWI, i, INT32_MAX, 0.0);
    t->n_outputs = 1;
    t->outputs = malloc(sizeof *t->outputs);
    t->outputs[0] = t->n_ins - 1;
    char err[128];
    int rc = jit_compile_msg(t, err, sizeof err);
    cr_assert_eq(rc, JIT_E_TOO_LARGE, "expected JIT_E_TOO_LARGE, got %d (%s)", rc, err);
    cr_assert_null(t->fn);
    cr_assert_null(t->jit);
    double in = 1.0, out = 0.0;
    double *w = calloc((size_t)t->n_ins, sizeof *w);
    tape_run(t, &in, w, &out);
    cr_assert_eq(out, 1.0, "interpreter fallback gave %g", out);
    free(w);
    tape_free(t);

    tape *u = tt_new(1, JIT_MAX_SLOTS + 1);
    while (u->n_ins < JIT_MAX_SLOTS + 1)
        tt_push(u, TAPE_NEG, u->n_ins - 1, 0, 0.0);
    rc = jit_compile(u);
    cr_assert_eq(rc, JIT_E_TOO_LARGE, "slot cap: expected JIT_E_TOO_LARGE, got %d", rc);
    cr_assert_null(u->fn);
    tape_free(u);
}

/* The documented stack bound holds: a tape of JIT_MAX_SLOTS slots (POWI blocks
 * included) runs on a thread whose stack is only 8 bytes a slot plus 128 KiB. */
typedef struct stack_job {
    const tape *t;
    const double *in;
    double out;
} stack_job;

static void *stack_job_main(void *arg)
{
    stack_job *j = arg;
    j->t->fn(j->in, &j->out);
    return NULL;
}

Test(jit, max_tape_runs_on_small_stack)
{
    tape *t = tt_new(1, JIT_MAX_SLOTS);
    while (t->n_ins < JIT_MAX_SLOTS) {
        int i = t->n_ins;
        if (i % 3 == 0)
            tt_push(t, TAPE_POWI, i - 1, -3, 0.0);
        else
            tt_push(t, i % 3 == 1 ? TAPE_SIN : TAPE_COS, i - 1, 0, 0.0);
    }
    t->n_outputs = 1;
    t->outputs = malloc(sizeof *t->outputs);
    t->outputs[0] = t->n_ins - 1;
    compile_ok(t);

    double in = 0.7, want;
    double *w = calloc((size_t)t->n_ins, sizeof *w);
    tape_eval(t, &in, w, &want);
    free(w);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    size_t stack = (size_t)JIT_MAX_SLOTS * 8 + ((size_t)128 << 10);
    cr_assert_eq(pthread_attr_setstacksize(&attr, stack), 0);
    stack_job job = {t, &in, NAN};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, &attr, stack_job_main, &job), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&attr);
    cr_assert(same(job.out, want), "small-stack run gave %.17g, interpreter %.17g", job.out, want);
    tape_free(t);
}

/* Malformed tapes are refused before any code is generated. */
Test(jit, bad_tapes_are_refused)
{
    tape *t = tt_new(1, 4);
    tt_push(t, TAPE_ADD, 0, 2, 0.0); /* operand is a later slot */
    tt_all_outputs(t);
    cr_assert_eq(jit_compile(t), JIT_E_BAD_TAPE, "forward operand accepted");
    cr_assert_null(t->fn);
    t->ins[1] = (tape_ins){TAPE_OP_COUNT + 3, 0, 0, 0.0};
    cr_assert_eq(jit_compile(t), JIT_E_BAD_TAPE, "bad opcode accepted");
    t->ins[1] = (tape_ins){TAPE_INPUT, 5, 0, 0.0};
    cr_assert_eq(jit_compile(t), JIT_E_BAD_TAPE, "input index out of range accepted");
    t->ins[1] = (tape_ins){TAPE_SIN, 0, 0, 0.0};
    t->outputs[1] = 7;
    cr_assert_eq(jit_compile(t), JIT_E_BAD_TAPE, "output slot out of range accepted");
    t->outputs[1] = 1;
    cr_assert_eq(jit_compile(t), 0, "the repaired tape should compile");
    tape_free(t);
}

/* A tape with nothing in it still compiles; releasing nothing is fine. */
Test(jit, empty_tape_and_null_release)
{
    jit_release(NULL);
    tape *t = tt_new(0, 0);
    compile_ok(t);
    t->fn(NULL, NULL);
    cr_assert_eq(jit_compile(t), 0, "compiling twice should be a no-op");
    tape_free(t);
    tape *never = tt_new(2, 2);
    tape_free(never); /* never compiled: jit is NULL */
}

/* tcc's errors reach the caller's buffer and nothing is printed to stderr. */
Test(jit, tcc_errors_are_captured)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *cap = tmpfile();
    cr_assert(saved >= 0 && cap);
    dup2(fileno(cap), 2);

    char err[256];
    tape_fn fn;
    void *jit;
    int rc1 = jit__compile_source("void f(const double *in, double *out) { out[0] = ; }", &fn, &jit, err,
                                  sizeof err);
    char err1[256];
    snprintf(err1, sizeof err1, "%s", err);
    void *fn1 = (void *)(uintptr_t)fn, *jit1 = jit;
    int rc2 = jit__compile_source("double lgamma(double);\n"
                                  "void f(const double *in, double *out) { out[0] = lgamma(in[0]); }",
                                  &fn, &jit, err, sizeof err);

    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fseek(cap, 0, SEEK_END);
    long printed = ftell(cap);
    fclose(cap);

    cr_assert_eq(rc1, JIT_E_COMPILE, "syntax error: expected JIT_E_COMPILE, got %d", rc1);
    cr_assert_null(fn1);
    cr_assert_null(jit1);
    cr_assert(strncmp(err1, "tcc: ", 5) == 0 && strstr(err1, "error"), "message was '%s'", err1);
    cr_assert_eq(rc2, JIT_E_COMPILE, "unbound symbol: expected JIT_E_COMPILE, got %d", rc2);
    cr_assert(strstr(err, "lgamma") != NULL, "message was '%s'", err);
    cr_assert_eq(printed, 0, "tcc printed %ld bytes to stderr", printed);
}

/* Four threads compile, run and free tapes at the same time. Tapes are big enough
 * (a few ms of compiling each) and the start is synchronised, so calls into jit.c
 * do overlap. (Debian's libtcc snapshot also serialises its compile step with a
 * semaphore of its own, so this checks that concurrent use works; it cannot show
 * that jit.c's lock is needed.) */
enum { WORKER_SLOTS = 3000, WORKER_TAPES = 6 };

typedef struct worker {
    int id;
    int failures;
    char msg[256];
    pthread_barrier_t *start;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int it = 0; it < WORKER_TAPES; it++) {
        uint64_t seed = 1000 + (uint64_t)w->id * 100 + (uint64_t)it;
        tape *t = tt_random(seed, 4, WORKER_SLOTS);
        int rc = jit_compile(t);
        if (rc != 0 || !t->fn) {
            w->failures++;
            snprintf(w->msg, sizeof w->msg, "thread %d: compile failed %d", w->id, rc);
            tape_free(t);
            continue;
        }
        double *got = calloc(WORKER_SLOTS, sizeof *got), *want = calloc(WORKER_SLOTS, sizeof *want),
               *work = calloc(WORKER_SLOTS, sizeof *work);
        uint64_t s = seed;
        for (int r = 0; r < 50 && got && want && work; r++) {
            double in[4];
            for (int k = 0; k < 4; k++)
                in[k] = (rng_unit(&s) - 0.5) * 4.0;
            tape_run(t, in, work, got);
            tape_eval(t, in, work, want);
            for (int k = 0; k < t->n_outputs; k++)
                if (!same(got[k], want[k])) {
                    w->failures++;
                    snprintf(w->msg, sizeof w->msg, "thread %d seed %llu output %d: %.17g vs %.17g", w->id,
                             (unsigned long long)seed, k, got[k], want[k]);
                }
        }
        free(got);
        free(want);
        free(work);
        tape_free(t);
    }
    return NULL;
}

Test(jit, concurrent_compile_and_run)
{
    enum { N = 4 };
    pthread_t th[N];
    worker ws[N];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    for (int i = 0; i < N; i++) {
        ws[i] = (worker){.id = i, .start = &start};
        cr_assert_eq(pthread_create(&th[i], NULL, worker_main, &ws[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < N; i++)
        cr_assert_eq(ws[i].failures, 0, "%d failures; last: %s", ws[i].failures, ws[i].msg);
}

/* Several tapes in one libtcc state: each matches the interpreter, and the shared code
 * stays valid until the last of them is freed. */
Test(jit, many_tapes_share_one_state)
{
    tape *ts[3];
    for (int k = 0; k < 3; k++) {
        ts[k] = tt_new(2, 8);
        int a = tt_push(ts[k], TAPE_MUL, 0, 1, 0.0);
        int b = tt_push(ts[k], TAPE_SIN, a, 0, 0.0);
        int c = tt_push(ts[k], TAPE_CONST, 0, 0, 1.5 + k);
        tt_push(ts[k], k == 1 ? TAPE_DIV : TAPE_ADD, b, c, 0.0);
        tt_all_outputs(ts[k]);
    }
    cr_assert_eq(jit_compile_many((tape *[]){ts[0], NULL, ts[1], ts[2]}, 4), 0);
    for (int k = 0; k < 3; k++) {
        cr_assert_not_null(ts[k]->fn, "tape %d compiled", k);
        cr_assert_eq(ts[k]->jit, ts[0]->jit, "tape %d shares the state", k);
    }
    uint64_t s = 7;
    for (int r = 0; r < 200; r++) {
        double in[2] = {rng_unit(&s) * 4 - 2, rng_unit(&s) * 4 - 2};
        for (int k = 0; k < 3; k++)
            expect_match(ts[k], in, "jit_compile_many");
    }
    /* free the first two: the third still runs */
    tape_free(ts[0]);
    tape_free(ts[1]);
    double in[2] = {0.25, -1.5};
    expect_match(ts[2], in, "after the others were freed");
    tape_free(ts[2]);
    /* a compiled tape is left alone */
    tape *t = tt_new(1, 3);
    tt_push(t, TAPE_COS, 0, 0, 0.0);
    tt_all_outputs(t);
    compile_ok(t);
    tape_fn before = t->fn;
    cr_assert_eq(jit_compile_many(&t, 1), 0);
    cr_assert(t->fn == before);
    tape_free(t);
}

/* ---- the native tier's source, split into parts (jit_source) ----------------------- */

/* A random tape of n slots with sin and cos of one slot far apart (one sincos call), every
 * slot an output. */
static tape *tt_split_tape(uint64_t seed, int n_inputs, int n)
{
    tape *r = tt_random(seed, n_inputs, n - 3);
    tape_ins *ins = realloc(r->ins, (size_t)n * sizeof *ins);
    cr_assert_not_null(ins);
    r->ins = ins;
    int far = n_inputs + 2;
    tt_push(r, TAPE_COS, far, 0, 0.0);
    tt_push(r, TAPE_MUL, r->n_ins - 1, n / 2, 0.0);
    tt_push(r, TAPE_SIN, far, 0, 0.0); /* the pair is written at the first half */
    free(r->outputs);
    tt_all_outputs(r);
    return r;
}

/* The epilogue "out[k] = s<slot>;" for every output; malloc'd. */
static char *tt_epilogue(const tape *t)
{
    size_t cap = (size_t)t->n_outputs * 32 + 1, len = 0;
    char *e = malloc(cap);
    cr_assert_not_null(e);
    e[0] = 0;
    for (int k = 0; k < t->n_outputs; k++)
        len += (size_t)snprintf(e + len, cap - len, "out[%d] = s%d;\n", k, t->outputs[k]);
    return e;
}

/* The inputs of the split tests: 0..2 read from in[], the others folded as constants. */
static void tt_split_map(const tape *t, char (*expr)[16], const char **ex, double *val)
{
    for (int a = 0; a < t->n_inputs; a++) {
        snprintf(expr[a], 16, "in[%d]", a);
        ex[a] = a < 3 ? expr[a] : NULL;
        val[a] = 0.25 * a - 0.6;
    }
}

/* Split into parts of 1, 3 and 64 slots (values of earlier parts through v, inputs and
 * values of constants written again), the source compiled by tcc gives the interpreter's
 * bits for every slot; so does the unsplit source. */
Test(jit, split_source_matches_interpreter)
{
    const int blocks[] = {0, 1, 3, 64};
    for (uint64_t seed = 1; seed <= 12; seed++) {
        tape *t = tt_split_tape(seed + 2000, 6, 300);
        char expr[6][16];
        const char *ex[6];
        double val[6];
        tt_split_map(t, expr, ex, val);
        jit_inputs map = {ex, val};
        char *epi = tt_epilogue(t);
        double *got = calloc((size_t)t->n_outputs, sizeof *got),
               *want = calloc((size_t)t->n_outputs, sizeof *want);
        double *work = calloc((size_t)t->n_ins, sizeof *work);
        cr_assert(got && want && work);
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
            jit_function fn = {.name = "f",
                               .params = "const double *in, double *out",
                               .args = "in, out",
                               .epilogue = epi,
                               .block = blocks[bi]};
            char *src = jit_source(t, &map, &fn, 1, NULL);
            cr_assert_not_null(src);
            cr_assert_eq(strstr(src, "f_1(") != NULL, blocks[bi] > 0, "seed %llu, block %d: split as asked",
                         (unsigned long long)seed, blocks[bi]);
            char err[256];
            tape_fn f = NULL;
            void *jit = NULL;
            cr_assert_eq(jit__compile_source(src, &f, &jit, err, sizeof err), 0, "block %d: %s", blocks[bi],
                         err);
            uint64_t s = seed;
            for (int r = 0; r < 20; r++) {
                double in[6];
                for (int a = 0; a < 6; a++)
                    in[a] = a < 3
                                ? (r < 17 ? (rng_unit(&s) - 0.5) * 4.0 : specials[rng_below(&s, N_SPECIALS)])
                                : val[a];
                f(in, got);
                tape_eval(t, in, work, want);
                for (int k = 0; k < t->n_outputs; k++)
                    cr_assert(same(got[k], want[k]), "seed %llu, block %d: slot %d (op %d): %.17g != %.17g",
                              (unsigned long long)seed, blocks[bi], t->outputs[k], t->ins[t->outputs[k]].op,
                              got[k], want[k]);
            }
            jit_release(jit);
            free(src);
        }
        free(got);
        free(want);
        free(work);
        free(epi);
        tape_free(t);
    }
}

/* Compiles src with the system compiler as the native tier does (each translation unit,
 * split at JIT_UNIT_MARK, in a file of its own); the loaded object's f, or NULL when
 * there is no compiler. *dl to dlclose. */
static tape_fn tt_cc(const char *src, const char *tag, void **dl)
{
    char so_path[128], cmd[4096];
    snprintf(so_path, sizeof so_path, "/tmp/hamel-test-jit-%ld-%s.so", (long)getpid(), tag);
    int len =
        snprintf(cmd, sizeof cmd, "cc -O2 -fPIC -shared -ffp-contract=off -fno-math-errno -w -o %s", so_path);
    char paths[16][128];
    int units = 0;
    for (const char *at = src; at && units < 16; units++) {
        const char *end = strstr(at, JIT_UNIT_MARK);
        snprintf(paths[units], sizeof paths[units], "/tmp/hamel-test-jit-%ld-%s-%d.c", (long)getpid(), tag,
                 units);
        FILE *fp = fopen(paths[units], "w");
        cr_assert_not_null(fp);
        size_t n = end ? (size_t)(end - at) : strlen(at);
        cr_assert_eq(fwrite(at, 1, n, fp), n);
        cr_assert_eq(fclose(fp), 0);
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", paths[units]);
        at = end ? end + strlen(JIT_UNIT_MARK) : NULL;
    }
    snprintf(cmd + len, sizeof cmd - (size_t)len, " -lm 2>/dev/null");
    int rc = system(cmd);
    for (int u = 0; u < units; u++)
        unlink(paths[u]);
    if (rc != 0) {
        unlink(so_path);
        return NULL;
    }
    *dl = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    unlink(so_path);
    cr_assert_not_null(*dl, "%s", dlerror());
    void *sym = dlsym(*dl, "f");
    cr_assert_not_null(sym);
    tape_fn f;
    memcpy(&f, &sym, sizeof f);
    return f;
}

/* With cc -O2 (the native tier's compiler and flags), split and unsplit sources give the
 * same bits: the shared values on the stack or on the heap (stack_values 4), the parts in
 * one translation unit or in several (unit_parts 3). */
Test(jit, split_source_by_cc_matches_one_function, .timeout = 120)
{
    if (system("command -v cc >/dev/null 2>&1") != 0)
        cr_skip_test("no system compiler");
    for (uint64_t seed = 1; seed <= 3; seed++) {
        tape *t = tt_split_tape(seed + 3000, 6, 400);
        char expr[6][16];
        const char *ex[6];
        double val[6];
        tt_split_map(t, expr, ex, val);
        jit_inputs map = {ex, val};
        char *epi = tt_epilogue(t);
        jit_function fns[4] = {
            {.name = "f", .params = "const double *in, double *out", .args = "in, out", .epilogue = epi}};
        fns[1] = fns[2] = fns[3] = fns[0];
        fns[1].block = 37;
        fns[2].block = 50;
        fns[2].stack_values = 4;
        fns[3].block = 20;
        fns[3].unit_parts = 3;
        char *src[4];
        for (int k = 0; k < 4; k++) {
            src[k] = jit_source(t, &map, &fns[k], 1, NULL);
            cr_assert_not_null(src[k]);
        }
        cr_assert(strstr(src[1], "f_9(") && !strstr(src[1], "malloc(") && !strstr(src[1], JIT_UNIT_MARK),
                  "parts of 37 slots, the values on the stack, one unit");
        cr_assert(strstr(src[2], "f_1(") && strstr(src[2], "malloc("), "the shared values on the heap");
        int units = 1, parts = 0;
        for (const char *q = src[3]; (q = strstr(q, JIT_UNIT_MARK)) != NULL; q++)
            units++;
        for (const char *q = src[3]; (q = strstr(q, "(noinline, visibility")) != NULL; q++)
            parts++;
        cr_assert(parts >= 20 && units == (parts + 2) / 3, "%d parts, 3 to a unit: %d units", parts, units);
        void *dl[4] = {NULL};
        tape_fn f[4];
        const char *tags[4] = {"one", "parts", "heap", "units"};
        for (int k = 0; k < 4; k++) {
            f[k] = tt_cc(src[k], tags[k], &dl[k]);
            cr_assert_not_null(f[k], "cc compiles the %s source", tags[k]);
        }
        size_t no = (size_t)t->n_outputs;
        double *out[4];
        for (int k = 0; k < 4; k++) {
            out[k] = calloc(no, sizeof *out[k]);
            cr_assert_not_null(out[k]);
        }
        uint64_t s = seed;
        for (int r = 0; r < 20; r++) {
            double in[6];
            for (int k = 0; k < 6; k++)
                in[k] = k < 3 ? (rng_unit(&s) - 0.5) * 4.0 : val[k];
            for (int k = 0; k < 4; k++)
                f[k](in, out[k]);
            for (int k = 1; k < 4; k++)
                for (size_t o = 0; o < no; o++)
                    cr_assert(same(out[k][o], out[0][o]), "seed %llu, %s: output %zu: %.17g != %.17g",
                              (unsigned long long)seed, tags[k], o, out[k][o], out[0][o]);
        }
        for (int k = 0; k < 4; k++) {
            free(out[k]);
            dlclose(dl[k]);
            free(src[k]);
        }
        free(epi);
        tape_free(t);
    }
}
