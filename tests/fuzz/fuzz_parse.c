/* fuzz_parse.c — libFuzzer target for the expression language (engine/expr.h).
 *
 * The input is one expression (bytes up to the first NUL, at most FUZZ_MAX_CHARS).
 * If it parses, the target checks the printer's round trip — parse(print(e)) is
 * the same node and printing is idempotent — and then runs everything else that
 * takes a parsed expression: the LaTeX printer, derivatives in a coordinate and a
 * velocity (and their print), the time derivative, the zero test and a tape
 * evaluated by the interpreter. A broken invariant aborts, so libFuzzer keeps the
 * input.
 *
 * The first runs found inf/nan constants from folding (1/0, 0^-2) and power
 * chains deeper than the parser's nesting limit; both fixed in d6513b5, and
 * tests/unit/test_expr.c keeps them.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"
#include "tape.h"

#define FUZZ_MAX_CHARS 4096
#define FUZZ_MAX_NODES 200000

static expr_ctx *fuzz_ctx(void)
{
    expr_ctx *c = expr_ctx_new(FUZZ_MAX_NODES);
    if (!c)
        abort();
    expr_sym_add(c, "m", SYM_PARAM, 0);
    expr_sym_add(c, "r", SYM_PARAM, 1);
    expr_sym_add(c, "t", SYM_TIME, 0);
    static const char *const coords[] = {"x", "y", "theta"};
    for (int i = 0; i < 3; i++) {
        char v[16];
        expr_sym_add(c, coords[i], SYM_COORD, i);
        snprintf(v, sizeof v, "%s'", coords[i]);
        expr_sym_add(c, v, SYM_VELOCITY, i);
    }
    /* a definition, so definitions are exercised too */
    expr_parse_opts o = {1, 1, 0, NULL};
    expr_error err;
    expr *d = expr_parse(c, "x'*cos(theta) + y'*sin(theta)", &o, &err);
    if (!d || expr_def_add(c, "vt", d) < 0)
        abort();
    return c;
}

static void fail(const char *what, const char *in, const char *p1, const char *p2)
{
    fprintf(stderr, "fuzz_parse: %s\n  input: %s\n  print: %s\n  again: %s\n", what, in, p1 ? p1 : "(null)",
            p2 ? p2 : "(null)");
    abort();
}

/* 1 when a number in e (a value, a constant term, a coefficient) is outside the
 * normal range [1e-300, 1e300], or a power of numbers stands unfolded: there a product or quotient of numbers
 * may not fold (issue 15: nothing lost to underflow), so the same value can stand as different nodes and the
 * printer's round trip to the same node is not promised. Walks the DAG once per node (seen, by id). */
static int extreme_numbers(const expr *e, unsigned char *seen)
{
    if (seen[e->id])
        return 0;
    seen[e->id] = 1;
    double a = fabs(e->num);
    if (a != 0.0 && (a < 1e-300 || a > 1e300))
        return 1;
    /* a power of a number left whole: its value is not a normal number (1e154^-2) */
    if (e->kind == EXPR_POW && e->args[0]->kind == EXPR_NUM && e->args[1]->kind == EXPR_NUM)
        return 1;
    for (int i = 0; i < e->nargs; i++)
        if (extreme_numbers(e->args[i], seen))
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_CHARS)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    expr_ctx *c = fuzz_ctx();
    expr_parse_opts o = {1, 1, FUZZ_MAX_CHARS, "fuzz"};
    expr_error err;
    expr *e = expr_parse(c, text, &o, &err);
    if (!e) {
        /* an error must carry a column inside the text (or just past it) and a reason */
        if (err.column < 1 || (size_t)err.column > strlen(text) + 1 || !err.message[0])
            fail("parse error without a sane column or reason", text, err.message, NULL);
        goto done;
    }
    char *p1 = expr_print(c, e);
    if (!p1)
        goto done;
    expr_parse_opts o2 = {1, 1, 0, "fuzz"};
    expr *e2 = expr_parse(c, p1, &o2, &err);
    if (!e2 && !expr_ctx_overflow(c))
        fail("the print does not parse", text, p1, err.message);
    unsigned char *seen = calloc(expr_ctx_nodes(c) + 1, 1);
    int extreme = seen && extreme_numbers(e, seen);
    free(seen);
    if (e2 && !extreme) {
        char *p2 = expr_print(c, e2);
        if (e2 != e)
            fail("the print parses to another node", text, p1, p2);
        if (!p2 || strcmp(p1, p2) != 0)
            fail("printing is not idempotent", text, p1, p2);
        free(p2);
    }
    free(p1);

    char *latex = expr_print_latex(c, e);
    free(latex);
    int sx = expr_sym_find(c, "x"), sv = expr_sym_find(c, "theta'");
    expr *dx = expr_diff(c, e, sx);
    expr *dv = expr_diff(c, e, sv);
    expr *dt = expr_dt(c, e);
    if (!expr_ctx_overflow(c)) {
        char *pd = expr_print(c, dx);
        free(pd);
        (void)expr_is_zero(c, dx);
        (void)expr_is_zero(c, expr_sub(c, e, e));
        int ns = expr_sym_count(c);
        int *slot = malloc(ns * sizeof *slot);
        double *in = malloc(ns * sizeof *in);
        if (slot && in) {
            for (int s = 0; s < ns; s++) {
                slot[s] = s;
                in[s] = 0.3 + 0.1 * s;
            }
            expr *roots[4] = {e, dx, dv, dt};
            tape *tp = tape_build(c, roots, 4, slot, ns);
            if (tp) {
                double *work = malloc(tp->n_ins * sizeof *work), out[4];
                if (work) {
                    tape_eval(tp, in, work, out);
                    double want = expr_eval(c, e, in);
                    if (isfinite(want) && !isfinite(out[0]) && fabs(want) < 1e300)
                        fail("the tape is not finite where the tree is", text, NULL, NULL);
                }
                free(work);
                tape_free(tp);
            }
        }
        free(slot);
        free(in);
    }
done:
    expr_ctx_free(c);
    free(text);
    return 0;
}
