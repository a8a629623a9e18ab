/* test_expr.c — the expression language (engine/expr.h, tape.h, jit.h): parse errors
 * from tests/golden/parse_errors.txt, derivatives from tests/golden/derivatives.txt,
 * the canonical printer's round trip on random expressions, derivatives against
 * finite differences, the numeric zero test, and tapes (interpreted and JIT-compiled)
 * against the tree evaluator.
 *
 * Every random test is seeded with a fixed value so that a failure reproduces; the
 * failing expression is printed in the assertion message.
 */
#include <criterion/criterion.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "expr.h"
#include "expr_internal.h"
#include "jit.h"
#include "tape.h"

/* ---- the test context ----------------------------------------------------- */

#define TE_MAX_CHARS 4096

/* Coordinates x, y, theta with velocities, parameters m, r, g, and time t. */
static expr_ctx *te_ctx(void)
{
    expr_ctx *c = expr_ctx_new(0);
    cr_assert_not_null(c);
    static const char *const params[] = {"m", "r", "g"};
    for (int i = 0; i < 3; i++)
        cr_assert_geq(expr_sym_add(c, params[i], SYM_PARAM, i), 0);
    cr_assert_geq(expr_sym_add(c, "t", SYM_TIME, 0), 0);
    static const char *const coords[] = {"x", "y", "theta"};
    for (int i = 0; i < 3; i++) {
        char v[16];
        cr_assert_geq(expr_sym_add(c, coords[i], SYM_COORD, i), 0);
        snprintf(v, sizeof v, "%s'", coords[i]);
        cr_assert_geq(expr_sym_add(c, v, SYM_VELOCITY, i), 0);
    }
    return c;
}

static expr *te_parse(expr_ctx *c, const char *text)
{
    expr_parse_opts o = {1, 1, TE_MAX_CHARS, "test"};
    expr_error err;
    expr *e = expr_parse(c, text, &o, &err);
    cr_assert_not_null(e, "parse of \"%s\" failed at column %d: %s", text, err.column, err.message);
    return e;
}

/* Parses a generated expression: NULL when its numbers overflow (exp(3e2) as an
 * exponent, say), which the parser rightly rejects; any other failure fails the test. */
static expr *te_parse_gen(expr_ctx *c, const char *text)
{
    expr_parse_opts o = {1, 1, TE_MAX_CHARS, "test"};
    expr_error err;
    expr *e = expr_parse(c, text, &o, &err);
    if (!e && strstr(err.message, "gives inf or nan"))
        return NULL;
    cr_assert_not_null(e, "parse of \"%s\" failed at column %d: %s", text, err.column, err.message);
    return e;
}

/* ---- pseudo-random numbers (xorshift64*, fixed seeds) ----------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

static int rng_below(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

/* Symbol values in [-lim, -0.05] U [0.05, lim], so nothing sits on a singular zero. */
static void rng_point(uint64_t *s, double *vals, int n, double lim)
{
    for (int i = 0; i < n; i++) {
        double v = 0.05 + (lim - 0.05) * rng_unit(s);
        vals[i] = rng_below(s, 2) ? v : -v;
    }
}

/* ---- golden files ---------------------------------------------------------- */

/* Opens tests/golden/<name> from the working directory (the repository root, as
 * `make test` runs) or relative to the test binary (build/test-unit). */
static FILE *golden_open(const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "tests/golden/%s", name);
    FILE *f = fopen(path, "r");
    if (f)
        return f;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(path, sizeof path, "%s/../tests/golden/%s", exe, name);
            f = fopen(path, "r");
        }
    }
    cr_assert_not_null(f, "golden file tests/golden/%s not found (run from the repository root)", name);
    return f;
}

/* Splits a line at tabs into at most max fields (the line is modified). */
static int split_tabs(char *line, char **fields, int max)
{
    int n = 0;
    line[strcspn(line, "\r\n")] = '\0';
    fields[n++] = line;
    for (char *p = line; *p && n < max; p++)
        if (*p == '\t') {
            *p = '\0';
            fields[n++] = p + 1;
        }
    return n;
}

/* Expands the escapes of parse_errors.txt: \\ \t \n \xHH and \[N]{text}. Returns a
 * new string. */
static char *unescape(const char *s)
{
    size_t cap = 256, len = 0;
    char *out = malloc(cap);
    cr_assert_not_null(out);
#define PUT(ch)                                                                                              \
    do {                                                                                                     \
        if (len + 2 > cap) {                                                                                 \
            cap *= 2;                                                                                        \
            out = realloc(out, cap);                                                                         \
            cr_assert_not_null(out);                                                                         \
        }                                                                                                    \
        out[len++] = (ch);                                                                                   \
    } while (0)
    for (const char *p = s; *p; p++) {
        if (*p != '\\') {
            PUT(*p);
            continue;
        }
        p++;
        if (*p == '\\') {
            PUT('\\');
        } else if (*p == 't') {
            PUT('\t');
        } else if (*p == 'n') {
            PUT('\n');
        } else if (*p == 'x') {
            char hex[3] = {p[1], p[2], 0};
            PUT((char)strtol(hex, NULL, 16));
            p += 2;
        } else if (*p == '[') {
            char *end;
            long count = strtol(p + 1, &end, 10);
            cr_assert(end[0] == ']' && end[1] == '{', "bad repeat escape in \"%s\"", s);
            const char *text = end + 2;
            const char *close = strchr(text, '}');
            cr_assert_not_null(close, "unterminated repeat escape in \"%s\"", s);
            for (long k = 0; k < count; k++)
                for (const char *q = text; q < close; q++)
                    PUT(*q);
            p = close;
        } else {
            cr_assert_fail("unknown escape \\%c in \"%s\"", *p, s);
        }
    }
#undef PUT
    out[len] = '\0';
    return out;
}

Test(expr, parse_errors_golden)
{
    expr_ctx *c = te_ctx();
    FILE *f = golden_open("parse_errors.txt");
    char line[4096];
    int cases = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *fld[4];
        int nf = split_tabs(line, fld, 4);
        cr_assert_geq(nf, 3, "parse_errors.txt:%d: expected 3 or 4 tab-separated fields", lineno);
        char *text = unescape(fld[0]);
        int want_col = atoi(fld[1]);
        const char *want_msg = fld[2];
        expr_parse_opts o = {1, 1, TE_MAX_CHARS, "test"};
        if (nf > 3 && strstr(fld[3], "novel")) {
            o.allow_velocity = 0;
            o.what = "potential_energy";
        }
        if (nf > 3 && strstr(fld[3], "notime"))
            o.allow_time = 0;
        expr_error err = {-1, "untouched"};
        expr *e = expr_parse(c, text, &o, &err);
        cr_expect_null(e, "parse_errors.txt:%d: \"%.80s\" parsed, but should fail with \"%s\"", lineno,
                       fld[0], want_msg);
        if (!e) {
            cr_expect_eq(err.column, want_col,
                         "parse_errors.txt:%d: \"%.80s\": column %d, expected %d (message: %s)", lineno,
                         fld[0], err.column, want_col, err.message);
            cr_expect_not_null(strstr(err.message, want_msg),
                               "parse_errors.txt:%d: \"%.80s\": message \"%s\" lacks \"%s\"", lineno, fld[0],
                               err.message, want_msg);
        }
        free(text);
        cases++;
    }
    fclose(f);
    cr_assert_geq(cases, 35, "only %d malformed expressions in parse_errors.txt", cases);
    expr_ctx_free(c);
}

/* A failed parse leaves the context usable and the error fields are reset on the
 * next success-or-failure. */
Test(expr, parse_error_then_success)
{
    expr_ctx *c = te_ctx();
    expr_parse_opts o = {1, 1, 0, NULL};
    expr_error err;
    cr_assert_null(expr_parse(c, "x +", &o, &err));
    cr_assert_not_null(expr_parse(c, "x + 1", &o, &err));
    cr_assert_null(expr_parse(c, "x'", &(expr_parse_opts){0, 1, 0, NULL}, &err));
    cr_assert_not_null(strstr(err.message, "this expression"), "default field name: %s", err.message);
    expr_ctx_free(c);
}

/* Evaluates e at vals; the caller provides an array of every symbol's value. */
static double ev(const expr_ctx *c, const expr *e, const double *vals) { return expr_eval(c, e, vals); }

Test(expr, derivatives_golden)
{
    expr_ctx *c = te_ctx();
    int ns = expr_sym_count(c);
    FILE *f = golden_open("derivatives.txt");
    char line[4096];
    int cases = 0, lineno = 0;
    uint64_t seed = 0x5EEDD1FFull;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *fld[3];
        int nf = split_tabs(line, fld, 3);
        cr_assert_eq(nf, 3, "derivatives.txt:%d: expected 3 tab-separated fields", lineno);
        expr *e = te_parse(c, fld[0]);
        int s = expr_sym_find(c, fld[1]);
        cr_assert_geq(s, 0, "derivatives.txt:%d: unknown variable %s", lineno, fld[1]);
        expr *want = te_parse(c, fld[2]);
        expr *got = expr_diff(c, e, s);
        double vals[32];
        int finite = 0, failed = 0;
        for (int k = 0; k < 40 && !failed; k++) {
            rng_point(&seed, vals, ns, 0.95);
            double a = ev(c, got, vals), b = ev(c, want, vals);
            if (!isfinite(a) || !isfinite(b))
                continue;
            finite++;
            double scale = fmax(1.0, fmax(fabs(a), fabs(b)));
            char *gp = expr_print(c, got);
            cr_expect_leq(fabs(a - b), 1e-9 * scale,
                          "derivatives.txt:%d: d/d%s %s: engine %s = %.17g, expected %s = %.17g", lineno,
                          fld[1], fld[0], gp, a, fld[2], b);
            free(gp);
            failed = fabs(a - b) > 1e-9 * scale;
        }
        if (!failed)
            cr_expect_geq(finite, 3, "derivatives.txt:%d: only %d of 40 points finite for %s", lineno, finite,
                          fld[0]);
        cases++;
    }
    fclose(f);
    cr_assert_geq(cases, 40);
    expr_ctx_free(c);
}

/* ---- random expressions ----------------------------------------------------- */

struct gen {
    uint64_t seed;
    char *buf;
    size_t len, cap;
    int symbolic_pow; /* allow symbolic exponents */
};

static void gen_puts(struct gen *g, const char *s)
{
    size_t n = strlen(s);
    if (g->len + n + 1 > g->cap) {
        g->cap = (g->len + n + 1) * 2;
        g->buf = realloc(g->buf, g->cap);
        cr_assert_not_null(g->buf);
    }
    memcpy(g->buf + g->len, s, n + 1);
    g->len += n;
}

static const char *const gen_syms[] = {"x", "y", "theta", "x'", "y'", "theta'", "m", "r", "g", "t", "pi"};
static const char *const gen_nums[] = {"1", "2", "3", "0.5", "2.25", "1/3", "1e-3", "3e2", "0.1", "7"};
static const char *const gen_fns1[] = {"sin",  "cos",  "tan",  "sec",  "csc", "cot", "asin", "acos",
                                       "atan", "sinh", "cosh", "tanh", "exp", "log", "sqrt", "abs"};

/* expr := leaf | expr op expr | -expr | +expr | f(expr) | atan2(expr, expr) |
 *         pow(expr, expr) | (expr) | expr ^ exponent | expr ** exponent */
static void gen_expr(struct gen *g, int depth)
{
    uint64_t *s = &g->seed;
    if (depth <= 0 || rng_below(s, 10) < 2) {
        if (rng_below(s, 4) == 0)
            gen_puts(g, gen_nums[rng_below(s, (int)(sizeof gen_nums / sizeof *gen_nums))]);
        else
            gen_puts(g, gen_syms[rng_below(s, (int)(sizeof gen_syms / sizeof *gen_syms))]);
        return;
    }
    int kind = rng_below(s, 12);
    switch (kind) {
    case 0:
    case 1:
    case 2:
    case 3: {
        static const char *const ops[] = {" + ", " - ", "*", "/"};
        gen_puts(g, "(");
        gen_expr(g, depth - 1);
        gen_puts(g, ops[kind]);
        gen_expr(g, depth - 1);
        gen_puts(g, ")");
        return;
    }
    case 4:
        gen_puts(g, rng_below(s, 4) ? "-" : "+");
        gen_expr(g, depth - 1);
        return;
    case 5:
    case 6:
    case 7:
        gen_puts(g, gen_fns1[rng_below(s, (int)(sizeof gen_fns1 / sizeof *gen_fns1))]);
        gen_puts(g, "(");
        gen_expr(g, depth - 1);
        gen_puts(g, ")");
        return;
    case 8: {
        int atan2 = rng_below(s, 2);
        gen_puts(g, atan2 ? "atan2(" : "pow(");
        gen_expr(g, depth - 1);
        gen_puts(g, ", ");
        if (atan2 || g->symbolic_pow)
            gen_expr(g, depth - 1);
        else
            gen_puts(g, gen_nums[rng_below(s, 4)]);
        gen_puts(g, ")");
        return;
    }
    case 9:
    case 10: {
        gen_puts(g, "(");
        gen_expr(g, depth - 1);
        gen_puts(g, rng_below(s, 3) ? ")^" : ")**");
        int e = rng_below(s, 6);
        if (e == 0 && g->symbolic_pow) {
            gen_puts(g, "(");
            gen_expr(g, depth - 2);
            gen_puts(g, ")");
        } else {
            static const char *const exps[] = {"2", "3", "(-1)", "0.5", "(1/3)", "(-2)", "1.5", "-2"};
            gen_puts(g, exps[rng_below(s, 8)]);
        }
        return;
    }
    default:
        gen_puts(g, "(");
        gen_expr(g, depth - 1);
        gen_puts(g, ")");
        return;
    }
}

static char *gen_text(struct gen *g, int depth)
{
    g->len = 0;
    gen_puts(g, "");
    gen_expr(g, depth);
    return g->buf;
}

/* Nonzero if e contains a number, coefficient or constant term that is not finite
 * (see nonfinite_constants_round_trip below). */
static int has_nonfinite(const expr *e)
{
    if ((e->kind == EXPR_NUM || e->kind == EXPR_MUL || e->kind == EXPR_ADD) && !isfinite(e->num))
        return 1;
    if (e->kind == EXPR_POW && expr_is_num(e->args[0], 0.0) && e->args[1]->kind == EXPR_NUM &&
        e->args[1]->num < 0)
        return 1; /* 0^-k prints as 1/0^k, which folds to inf */
    for (int i = 0; i < e->nargs; i++)
        if (has_nonfinite(e->args[i]))
            return 1;
    return 0;
}

/* parse -> print -> parse is the identity on nodes, and printing is idempotent. */
Test(expr, print_round_trip_random)
{
    expr_ctx *c = te_ctx();
    struct gen g = {0xC0FFEEull, NULL, 0, 0, 1};
    int checked = 0, skipped = 0;
    for (int i = 0; i < 2000; i++) {
        char *text = gen_text(&g, 2 + i % 6);
        expr *e = te_parse_gen(c, text);
        if (!e || has_nonfinite(e)) {
            /* Folding made inf/nan (e.g. 1/(x - x)): a known bug, covered by
             * expr/nonfinite_constants_round_trip; counted, not hidden. */
            skipped++;
            continue;
        }
        char *p = expr_print(c, e);
        cr_assert_not_null(p);
        expr_parse_opts o = {1, 1, 0, "test"};
        expr_error err;
        expr *e2 = expr_parse(c, p, &o, &err);
        cr_assert_not_null(e2, "#%d: print of \"%s\" is \"%s\", which does not parse: column %d: %s", i, text,
                           p, err.column, err.message);
        char *p2 = expr_print(c, e2);
        cr_expect_eq(e2, e, "#%d: \"%s\" printed as \"%s\" parses to a different node, printed \"%s\"", i,
                     text, p, p2);
        cr_expect_str_eq(p2, p, "#%d: printing is not idempotent for \"%s\"", i, text);
        free(p);
        free(p2);
        checked++;
    }
    cr_log_info("round trip: %d checked, %d skipped for non-finite constants", checked, skipped);
    cr_assert_geq(checked, 1900, "only %d of 2000 random expressions checked (%d with non-finite constants)",
                  checked, skipped);
    free(g.buf);
    expr_ctx_free(c);
}

/* The LaTeX printer prints something non-empty for every random expression, with
 * balanced braces. */
Test(expr, latex_balanced_random)
{
    expr_ctx *c = te_ctx();
    struct gen g = {0x1A7E8ull, NULL, 0, 0, 1};
    for (int i = 0; i < 300; i++) {
        char *text = gen_text(&g, 2 + i % 5);
        expr *e = te_parse_gen(c, text);
        if (!e)
            continue;
        char *l = expr_print_latex(c, e);
        cr_assert_not_null(l);
        cr_expect_gt(strlen(l), 0);
        int depth = 0, min = 0;
        for (const char *p = l; *p; p++) {
            if (*p == '{')
                depth++;
            else if (*p == '}')
                depth--;
            if (depth < min)
                min = depth;
        }
        cr_expect(depth == 0 && min == 0, "unbalanced braces in the LaTeX of \"%s\": %s", text, l);
        free(l);
    }
    free(g.buf);
    expr_ctx_free(c);
}

/* Known examples of the canonical form: equal expressions written differently are
 * one node. */
Test(expr, canonical_examples)
{
    expr_ctx *c = te_ctx();
    static const char *const same[][2] = {
        {"x*y", "y*x"},
        {"x + y + 1", "1 + (y + x)"},
        {"x**2", "x^2"},
        {"pow(x, 2)", "x*x"},
        {"x/y", "x*y^(-1)"},
        {"2*x + 3*x", "5*x"},
        {"sin(-x)", "-sin(x)"},
        {"cos(-x)", "cos(x)"},
        {"x - x", "0"},
        {"x^2*x^3", "x^5"},
        {"sec(x)", "1/cos(x)"},
        {"csc(x)", "1/sin(x)"},
        {"cot(x)", "cos(x)/sin(x)"},
        {"(2*x)^2", "4*x^2"},
        {"sqrt(x)^2", "x"},
        {"pi", "3.141592653589793"},
        {"  x  +\ty ", "x+y"},
        {"--x", "x"},
        {"+x", "x"},
        {"1/2*m*x'^2", "m*x'^2/2"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        expr *a = te_parse(c, same[i][0]), *b = te_parse(c, same[i][1]);
        char *pa = expr_print(c, a), *pb = expr_print(c, b);
        cr_expect_eq(a, b, "\"%s\" (%s) and \"%s\" (%s) should be one node", same[i][0], pa, same[i][1], pb);
        free(pa);
        free(pb);
    }
    expr_ctx_free(c);
}

/* ---- known bugs (failing until engine/ is fixed; see the helper's report) ----- */

/* Constant folding produces inf and NaN nodes (1/0, 0/0, 1e308 + 1e308,
 * 1e300*1e300), which print as "inf"/"nan" — text that does not parse. The parser
 * should reject a non-finite constant with a column, as it already does for 1e999.
 * Also 0^(-1) and 0^-2 stay powers that print as "1/0" and "1/0^2", which re-parse
 * to the folded inf. (Found by tests/fuzz/fuzz_parse.) */
Test(expr, nonfinite_constants_round_trip)
{
    expr_ctx *c = te_ctx();
    static const char *const texts[] = {"1/0",           "x + 1/0", "0/0",  "1e308 + 1e308",
                                        "1e300*1e300*x", "0^(-1)",  "0^-2", "(x - x)^(-1)"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        expr_parse_opts o = {1, 1, 0, "test"};
        expr_error err;
        expr *e = expr_parse(c, texts[i], &o, &err);
        if (!e)
            continue; /* rejecting it is a fine answer */
        char *p = expr_print(c, e);
        expr *e2 = expr_parse(c, p, &o, &err);
        cr_expect(e2 == e, "\"%s\" parses, prints as \"%s\", which %s", texts[i], p,
                  e2 ? "parses to a different node" : "does not parse");
        free(p);
    }
    expr_ctx_free(c);
}

/* A right-associative power chain has no depth limit in the parser, but its print
 * wraps each level in parentheses, which does: x^x^...^x (250 levels) parses, its
 * print does not ("expression nested too deeply"). */
Test(expr, deep_power_chain_round_trip)
{
    expr_ctx *c = te_ctx();
    struct gen g = {0, NULL, 0, 0, 0};
    gen_puts(&g, "x");
    for (int i = 0; i < 250; i++)
        gen_puts(&g, "^x");
    expr_parse_opts o = {1, 1, 0, "test"};
    expr_error err;
    expr *e = expr_parse(c, g.buf, &o, &err);
    if (e) {
        char *p = expr_print(c, e);
        expr *e2 = expr_parse(c, p, &o, &err);
        cr_expect(e2 == e, "x^x^...^x (250 levels) parses, but its print %s (%s)",
                  e2 ? "parses to another node" : "does not parse:", e2 ? "" : err.message);
        free(p);
    }
    /* Found by fuzz_parse after d6513b5 bounded the chain: with unary minus in each
     * exponent, x^-x^-...^-x (70 levels) parses but prints as x^(-x^(-...)), two
     * nesting levels a level, which the parser then rejects. */
    g.len = 0;
    gen_puts(&g, "x");
    for (int i = 0; i < 70; i++)
        gen_puts(&g, "^-x");
    e = expr_parse(c, g.buf, &o, &err);
    if (e) {
        char *p = expr_print(c, e);
        expr *e2 = expr_parse(c, p, &o, &err);
        cr_expect(e2 == e, "x^-x^-...^-x (70 levels) parses, but its print %s %s",
                  e2 ? "parses to another node" : "does not parse:", e2 ? "" : err.message);
        free(p);
    }
    free(g.buf);
    expr_ctx_free(c);
}

/* ---- derivatives against finite differences --------------------------------- */

/* Central difference of e in symbol s at vals, with Richardson extrapolation. Returns
 * 0 and *d, or -1 if the point is not finite or badly conditioned (the two step
 * sizes disagree): kinks of abs, poles and branch cuts are skipped, not failed. */
static int fd_deriv(const expr_ctx *c, const expr *e, int s, double *vals, double *d)
{
    double x0 = vals[s];
    double h = 1e-3 * fmax(1.0, fabs(x0));
    double f[4];
    const double off[4] = {-h, h, -h / 2, h / 2};
    for (int i = 0; i < 4; i++) {
        vals[s] = x0 + off[i];
        f[i] = expr_eval(c, e, vals);
    }
    vals[s] = x0;
    for (int i = 0; i < 4; i++)
        if (!isfinite(f[i]))
            return -1;
    double d1 = (f[1] - f[0]) / (2 * h), d2 = (f[3] - f[2]) / h;
    double r = (4 * d2 - d1) / 3;
    /* The Richardson error estimate must be small against the result. */
    if (fabs(d2 - d1) > 1e-3 * fmax(1.0, fabs(r)))
        return -1;
    double fmag = fmax(fmax(fabs(f[0]), fabs(f[1])), fmax(fabs(f[2]), fabs(f[3])));
    /* Rounding error of the difference quotient ~ eps*|f|/h must be far below the
     * tolerance. */
    if (2.2e-16 * fmag / h > 1e-8 * fmax(1.0, fabs(r)))
        return -1;
    *d = r;
    return 0;
}

Test(expr, derivatives_vs_finite_differences)
{
    expr_ctx *c = te_ctx();
    int ns = expr_sym_count(c);
    struct gen g = {0xD1FFull, NULL, 0, 0, 1};
    uint64_t pts = 0xBEEFull;
    int exprs_checked = 0, points_checked = 0;
    static const char *const vars[] = {"x", "y", "theta", "x'", "theta'", "t", "m", "r"};
    for (int i = 0; i < 500; i++) {
        char *text = gen_text(&g, 2 + i % 4);
        expr *e = te_parse_gen(c, text);
        if (!e)
            continue;
        int s = expr_sym_find(c, vars[rng_below(&pts, 8)]);
        expr *d = expr_diff(c, e, s);
        int ok = 0;
        for (int k = 0; k < 8 && ok < 2; k++) {
            double vals[32];
            rng_point(&pts, vals, ns, 1.4);
            double fd, an = expr_eval(c, d, vals);
            if (!isfinite(an) || !isfinite(expr_eval(c, e, vals)) || fd_deriv(c, e, s, vals, &fd) < 0)
                continue;
            double tol = 1e-6 * fmax(1.0, fabs(fd));
            if (fabs(an - fd) > tol) {
                char *dp = expr_print(c, d);
                cr_expect_leq(fabs(an - fd), tol,
                              "#%d: d/d%s of %s = %s is %.17g, finite differences give %.17g", i,
                              expr_sym_get(c, s)->name, text, dp, an, fd);
                free(dp);
                break;
            }
            ok++;
            points_checked++;
        }
        if (ok)
            exprs_checked++;
    }
    /* Most random expressions must have been checked somewhere. */
    cr_assert_geq(exprs_checked, 350, "only %d of 500 expressions had a well-conditioned point",
                  exprs_checked);
    cr_log_info("derivatives vs FD: %d expressions, %d points", exprs_checked, points_checked);
    free(g.buf);
    expr_ctx_free(c);
}

/* expr_dt is the chain rule over coordinates and t. */
Test(expr, dt_chain_rule)
{
    expr_ctx *c = te_ctx();
    expr *e = te_parse(c, "m*sin(x*theta) + t^2*y + x'");
    expr *want = te_parse(c, "m*cos(x*theta)*(x'*theta + x*theta') + 2*t*y + t^2*y'");
    cr_assert(expr_is_zero(c, expr_sub(c, expr_dt(c, e), want)), "d/dt wrong");
    expr_ctx_free(c);
}

/* expr_subst replaces symbols and re-simplifies. */
Test(expr, subst)
{
    expr_ctx *c = te_ctx();
    expr *e = te_parse(c, "x^2 + y*x'");
    int n = expr_sym_count(c);
    expr **sub = calloc(n, sizeof *sub);
    sub[expr_sym_find(c, "x")] = te_parse(c, "y + 1");
    sub[expr_sym_find(c, "x'")] = te_parse(c, "0");
    expr *r = expr_subst(c, e, sub, n);
    cr_expect_eq(r, te_parse(c, "(y + 1)^2"));
    free(sub);
    expr_ctx_free(c);
}

/* ---- the numeric zero test --------------------------------------------------- */

Test(expr, is_zero_identities)
{
    expr_ctx *c = te_ctx();
    static const char *const zeros[] = {
        "sin(x)^2 + cos(x)^2 - 1",
        "(x + y)^2 - x^2 - 2*x*y - y^2",
        "(x - y)*(x + y) - (x^2 - y^2)",
        "cosh(x)^2 - sinh(x)^2 - 1",
        "exp(log(x^2 + 1)) - x^2 - 1",
        "tan(theta) - sin(theta)/cos(theta)",
        "sec(x)^2 - tan(x)^2 - 1",
        "csc(x)^2 - cot(x)^2 - 1",
        "sin(2*x) - 2*sin(x)*cos(x)",
        "cos(x + y) - cos(x)*cos(y) + sin(x)*sin(y)",
        "exp(x + y) - exp(x)*exp(y)",
        "log(x^2 + 1) + log(y^2 + 1) - log((x^2 + 1)*(y^2 + 1))",
        "sqrt(x^2 + 1)^2 - x^2 - 1",
        "tanh(x) - sinh(x)/cosh(x)",
        "pow(m, 3) - m*m*m",
        "x' - (x' - y') - y'",
        "0",
        "0*x",
    };
    for (size_t i = 0; i < sizeof zeros / sizeof zeros[0]; i++)
        cr_expect(expr_is_zero(c, te_parse(c, zeros[i])), "%s must be identically zero", zeros[i]);
    /* The derivative of an expression free of x, in x. */
    expr *e = te_parse(c, "m*g*r*sin(theta)*y'^2 + t");
    cr_expect(expr_is_zero(c, expr_diff(c, e, expr_sym_find(c, "x"))));
    /* Mixed partials commute. */
    expr *f = te_parse(c, "sin(x*y)*exp(theta*x) + x^3*y^2");
    int sx = expr_sym_find(c, "x"), sy = expr_sym_find(c, "y");
    cr_expect(expr_is_zero(c, expr_sub(c, expr_diff(c, expr_diff(c, f, sx), sy),
                                       expr_diff(c, expr_diff(c, f, sy), sx))),
              "mixed partials of %s differ", "sin(x*y)*exp(theta*x) + x^3*y^2");
    expr_ctx_free(c);
}

/* Near misses must not be called zero. The test's resolution: expr_is_zero compares
 * |value| with 1e-9 times the magnitude of its terms at a few points, so a
 * difference well above 1e-9 relative must be nonzero, and one far below it (1e-13)
 * is, by design, indistinguishable from rounding and reported as zero. The second
 * half pins that documented resolution so a change to it is deliberate.
 * x - x*(1+1e-12) is exactly representable as a nonzero coefficient after folding
 * (the sum collects like terms: about -1e-12*x), so it is not zero however small:
 * the test works on the terms the simplifier leaves, not on absolute values. */
Test(expr, is_zero_near_misses)
{
    expr_ctx *c = te_ctx();
    static const char *const nonzero[] = {
        "1e-8*x",
        "sin(x)^2 + cos(x)^2",
        "sin(x)^2 + cos(x)^2 - 1 + 1e-6",
        "(x + y)^2 - x^2 - y^2",
        "x - x*(1 + 1e-12)",
        "x",
        "1e-300",
        "sin(x) - x",
        "exp(x) - 1 - x - x^2/2 - x^3/6 - x^4/24",
        "log(x^2 + 1) - x^2",
        "cosh(x)^2 - sinh(x)^2",
        "tan(theta) - theta",
        "x*y - y*x + 1e-7*x*y",
    };
    for (size_t i = 0; i < sizeof nonzero / sizeof nonzero[0]; i++)
        cr_expect(!expr_is_zero(c, te_parse(c, nonzero[i])), "%s must not be called zero", nonzero[i]);
    /* Below the resolution: rounding-sized residues count as zero. */
    cr_expect(expr_is_zero(c, te_parse(c, "sin(x)^2 + cos(x)^2 - 1 + 1e-13")),
              "a 1e-13 residue against terms of size 1 is below the zero test's resolution");
    expr_ctx_free(c);
}

/* The minimal form of the Whipple bicycle's wrong reduction: nested sums of products
 * of sums whose intermediate values stay small while their no-cancellation magnitude
 * (the zero test's rounding scale) squares at every level. a_(k+1) = (a_k + 1)^2 -
 * a_k^2 - 1 = 2 a_k, so a_5 = 32 x, with a magnitude of ~10^17 at x ~ 1: the double
 * test alone called it zero (value/magnitude ~ 1e-16 at every point). */
Test(expr, is_zero_inflated_magnitude)
{
    expr_ctx *c = te_ctx();
    expr *x = te_parse(c, "x"), *one = expr_num(c, 1.0), *a = x;
    for (int k = 0; k < 5; k++)
        a = expr_sum(c,
                     (expr *[]){expr_powi(c, expr_add(c, a, one), 2), expr_neg(c, expr_powi(c, a, 2)),
                                expr_num(c, -1.0)},
                     3);
    double vals[ZERO_POINTS], mags[ZERO_POINTS];
    cr_assert_eq(expr__zero_values(c, a, vals, mags), 0);
    for (int k = 0; k < ZERO_CLASSIC; k++) /* the points in [0.35, 1.35) */
        cr_expect_lt(fabs(vals[k]), 1e-9 * mags[k], "point %d: value %g, magnitude %g (the premise)", k,
                     vals[k], mags[k]);
    cr_expect(!expr_is_zero(c, a), "a_5 = 32 x is not zero");
    expr *x32 = expr_mul(c, expr_num(c, 32.0), x);
    cr_expect(expr_is_zero(c, expr_sub(c, a, x32)), "a_5 - 32 x is zero");
    cr_expect(!expr_is_zero(c, expr_sub(c, a, expr_mul(c, expr_num(c, 32.0 + 1e-6), x))),
              "a_5 - (32 + 1e-6) x is not zero");
    cr_expect(!expr_is_zero(c, expr_sub(c, a, expr_num(c, 1e-3))), "a_5 - 1e-3 is not zero");
    expr_ctx_free(c);
}

/* A genuine small term beside an identity the simplifier does not see (exp(x) exp(y)
 * and exp(x + y), tan cos and sin, (e^x - e^-x)/2 and sinh) is 1e-11..1e-12 of the
 * terms it sits among; both precisions agree on it, and it was still called zero (the
 * resolution against the expression's own terms was 1e-9): V = exp(x)*exp(y) - (1 -
 * 1e-11)*exp(x + y) got forcing 0. The resolution is 1e-13 of the own terms (a decimal
 * constant's residue, 0.1*3 - 0.3, is 1e-17): these are nonzero, the identities
 * themselves still zero, and sin^2 + cos^2 - 1 + 1e-13 (the double values' noise is
 * 1e-3 of it) still below it. */
Test(expr, is_zero_small_terms_beside_unseen_identities)
{
    expr_ctx *c = te_ctx();
    static const char *const nonzero[] = {
        "exp(x)*exp(y) - (1 - 1e-11)*exp(x + y)",
        "tan(x)*cos(x) - (1 - 1e-12)*sin(x)",
        "(exp(x) - exp(-x))/2 - (1 - 1e-12)*sinh(x)",
        "exp(2*x) - (1 - 1e-12)*exp(x)^2",
    };
    for (size_t i = 0; i < sizeof nonzero / sizeof nonzero[0]; i++)
        cr_expect(!expr_is_zero(c, te_parse(c, nonzero[i])), "%s must not be called zero", nonzero[i]);
    static const char *const zero[] = {
        "exp(x)*exp(y) - exp(x + y)", "tan(x)*cos(x) - sin(x)",          "(exp(x) - exp(-x))/2 - sinh(x)",
        "exp(2*x) - exp(x)^2",        "sin(x)^2 + cos(x)^2 - 1 + 1e-13",
    };
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        cr_expect(expr_is_zero(c, te_parse(c, zero[i])), "%s is zero (within the resolution)", zero[i]);
    expr_ctx_free(c);
}

/* Known bug: the zero test draws every symbol from [0.35, 1.35], so expressions
 * that vanish only for positive arguments are declared identically zero. abs(x) - x
 * is 2|x| at x < 0, sqrt(x^2) - x likewise; coordinates and velocities do take
 * negative values, so this can prune a Hamel coefficient or decide holonomy wrongly. */
Test(expr, is_zero_negative_arguments)
{
    expr_ctx *c = te_ctx();
    static const char *const nonzero[] = {"abs(x) - x", "sqrt(x^2) - x", "abs(x') - x'",
                                          "sqrt(theta^2)*y - theta*y"};
    for (size_t i = 0; i < sizeof nonzero / sizeof nonzero[0]; i++)
        cr_expect(!expr_is_zero(c, te_parse(c, nonzero[i])),
                  "%s is not identically zero (it is nonzero for negative arguments)", nonzero[i]);
    expr_ctx_free(c);
}

/* Issue 15: a term that underflows, overflows or leaves its domain at the sample
 * points was taken for zero however large it is elsewhere (a Gaussian barrier of
 * height 100 at x = 5 had forcing 0: at x in [0.35, 1.35) exp(-1600) is 0). Such
 * points prove nothing now, and "nothing proven" keeps the term. */
Test(expr, is_zero_never_from_underflow_or_overflow)
{
    expr_ctx *c = te_ctx();
    static const char *const nonzero[] = {
        "100*exp(-100*(x - 5)^2)",
        "-20000*(x - 5)*exp(-100*(x - 5)^2)",
        "exp(-100*(x - 5)^2) - exp(-100*(x - 5.001)^2)",
        "10000*exp(1000*(x - 3))/(1 + exp(1000*(x - 3)))^2",
        "10 - 10/(1 + exp(1000*(x - 3)))",
        "x^83905",
        "83905*x^83904",
        "(x/1.61)^4099",
        "exp(-1e4*(x - 300)^2)*y'",
        "exp(-1e6*(theta + 2000)^2)",
        "1e-200*x",
        "exp(x*1e3)",
        "exp(-1000)*x",
        /* the principal angle: theta - 2 pi k, not theta, past pi (the points in
         * [0.35, 1.35) alone took it for zero) */
        "atan2(sin(theta), cos(theta)) - theta",
        "sin(x)^2 + cos(x)^2 - 1 + 1e-6*exp(-100*(x - 5)^2)",
        "log(x - 300)",
        "sqrt(x - 5000)*y",
        "(x + 1e8 - 1e8 - x + 1)*exp(-50*(y - 20)^2)",
    };
    for (size_t i = 0; i < sizeof nonzero / sizeof nonzero[0]; i++)
        cr_expect(!expr_is_zero(c, te_parse(c, nonzero[i])), "%s must not be called zero", nonzero[i]);
    /* still proven where it holds: identities over all reals at wide scales, and
     * exact structural zeros */
    static const char *const zeros[] = {
        "exp(-100*(x - 5)^2) - exp(-100*(x - 5)^2)", "((x + 1e8) - x - 1e8)*exp(-100*(x - 5)^2)",
        "sin(x - 1e3)^2 + cos(x - 1e3)^2 - 1",       "cosh(y/1e3)^2 - sinh(y/1e3)^2 - 1",
        "(x - 1e4)^2 - x^2 + 2e4*x - 1e8",
    };
    for (size_t i = 0; i < sizeof zeros / sizeof zeros[0]; i++)
        cr_expect(expr_is_zero(c, te_parse(c, zeros[i])), "%s must be identically zero", zeros[i]);
    expr_ctx_free(c);
}

/* The decision is a function of the expression alone: the same in a new context, in
 * any order of questions (seeded points, no state but memoised values). */
Test(expr, is_zero_is_deterministic)
{
    static const char *const exprs[] = {"100*exp(-100*(x - 5)^2)", "sin(x)^2 + cos(x)^2 - 1",
                                        "x^83905 - x^83905*(1 + 1e-3)", "abs(x) - x"};
    int first[4];
    for (int round = 0; round < 3; round++) {
        expr_ctx *c = te_ctx();
        for (int j = 0; j < 4; j++) {
            int i = round == 1 ? 3 - j : j;
            int z = expr_is_zero(c, te_parse(c, exprs[i]));
            if (round == 0)
                first[i] = z;
            else
                cr_expect_eq(z, first[i], "%s decided differently in round %d", exprs[i], round);
        }
        expr_ctx_free(c);
    }
    cr_expect(first[1] && !first[0] && !first[2] && !first[3]);
}

/* expr_trusted_at: the point test of the structural checks (holonomy, Hamel
 * coefficients, the contact geometry). */
Test(expr, trusted_at_points)
{
    expr_ctx *c = te_ctx();
    expr *g = te_parse(c, "exp(-100*(x - 5)^2)*y'");
    double vals[16] = {0};
    for (int i = 0; i < expr_sym_count(c); i++)
        vals[i] = 1.0;
    int sx = expr_sym_find(c, "x");
    cr_expect(!expr_trusted_at(c, &g, 1, vals), "exp(-1600) underflows at x = 1");
    vals[sx] = 5.1;
    cr_expect(expr_trusted_at(c, &g, 1, vals), "exp(-1) at x = 5.1");
    expr *l = te_parse(c, "log(x - 300)");
    cr_expect(!expr_trusted_at(c, &l, 1, vals), "log of a negative");
    vals[sx] = 1.5;
    expr *p = te_parse(c, "x^83905");
    cr_expect(!expr_trusted_at(c, &p, 1, vals), "1.5^83905 overflows");
    vals[sx] = 1.00001;
    cr_expect(expr_trusted_at(c, &p, 1, vals), "1.00001^83905 = 2.3");
    expr *cancel = te_parse(c, "sin((x + y)^2 - x^2 - 2*x*y - y^2 + 1e-30*x)");
    vals[sx] = 1e3;
    cr_expect(!expr_trusted_at(c, &cancel, 1, vals), "a function of a cancelled argument");
    expr_ctx_free(c);
}

/* Folding numbers never underflows to a structural zero, and (x - c)^2 is not
 * multiplied out (its digits near x = c would be lost). */
Test(expr, folding_keeps_underflows_and_shifts)
{
    expr_ctx *c = te_ctx();
    expr *p = te_parse(c, "(x/1.61)^4099");
    cr_expect(!expr_is_num(p, 0.0));
    cr_expect(!expr_is_num(te_parse(c, "exp(-1000)"), 0.0));
    cr_expect(expr_is_num(te_parse(c, "log(1)"), 0.0));
    cr_expect(expr_is_num(te_parse(c, "sin(0)"), 0.0));
    expr *e = te_parse(c, "exp(-850.5*(x + 6720)^2)");
    expr *x = expr_expand(c, e, 64);
    double vals[16] = {0};
    vals[expr_sym_find(c, "x")] = -6720.04677258;
    double d = vals[expr_sym_find(c, "x")] + 6720;
    double want = exp(-850.5 * d * d);
    cr_expect_leq(fabs(expr_eval(c, x, vals) - want), 1e-12 * want, "expanded: %.17g, want %.17g",
                  expr_eval(c, x, vals), want);
    /* and at the polynomial level: (x - 4023)^6 near x = 4024.69 (difftest seed 1030) */
    expr *p6 = expr_expand(c, te_parse(c, "0.00124708*(x - 4023)^6"), 64);
    vals[expr_sym_find(c, "x")] = 4024.69282971;
    double d6 = 4024.69282971 - 4023, want6 = 0.00124708 * pow(d6, 6);
    cr_expect_leq(fabs(expr_eval(c, p6, vals) - want6), 1e-12 * want6, "expanded: %.17g, want %.17g",
                  expr_eval(c, p6, vals), want6);
    cr_expect(expr_is_zero(c, expr_sub(c, expr_expand(c, te_parse(c, "(x + y)^2"), 64),
                                       te_parse(c, "x^2 + 2*x*y + y^2"))),
              "powers of sums without numbers are still multiplied out");
    /* a power kept whole is not taken apart by the factoring before tapes: pulling its
     * base (a product) out 1999 times made the coefficient inf (difftest seed 3416) */
    expr *big[1] = {te_parse(c, "(1.557*y)^1999*x^2 - 5*(1.557*y)^1999")};
    expr_factor_sums(c, big, 1);
    double v2[16] = {0};
    v2[expr_sym_find(c, "y")] = 0.642;
    v2[expr_sym_find(c, "x")] = 2.0;
    double want2 = -pow(1.557 * 0.642, 1999);
    cr_expect_leq(fabs(expr_eval(c, big[0], v2) - want2), 1e-9 * fabs(want2), "factored: %.17g, want %.17g",
                  expr_eval(c, big[0], v2), want2);
    expr_ctx_free(c);
}

/* A sum shifted by a parameter is kept whole like one shifted by a number (review of
 * round 3): with r = 1e4 and x - r = 1e-5, exp(-(x - r)^2/g^2) at g = 1e-4 came out
 * 7.5 times too large (its exponent's terms ~1e16 cancelled; in t - r, a force pulse, too), m/2*(x - r)^4's
 * force was 0 instead of -2*m*(x - r)^3, and m*(x - r) kept 7 digits; and d tanh^2 (x/g) at x/g = 100 was 0
 * (1 - tanh^2 rounds to 0) instead of -1.1e-80. */
Test(expr, parameter_shifts_and_steep_tanh_keep_their_digits)
{
    expr_ctx *c = te_ctx();
    double vals[16] = {0};
    int sx = expr_sym_find(c, "x"), sm = expr_sym_find(c, "m"), sr = expr_sym_find(c, "r"),
        sg = expr_sym_find(c, "g");
    vals[sm] = 3;
    vals[sr] = 1e4;
    vals[sg] = 1e-4;
    vals[sx] = 10000.00001;
    double d = vals[sx] - vals[sr];
    struct {
        const char *text;
        double want;
    } cases[] = {
        {"exp(-(x - r)^2/g^2)", exp(-d * d / 1e-8)},
        {"diff", 2 * d / 1e-8 * exp(-d * d / 1e-8)}, /* -d/dx of the line before */
        {"m/2*(x - r)^4", 1.5 * pow(d, 4)},
        {"m*(x - r)*y", 3 * d * 2},
        {"m*(x - r)^2 + m*(x - r)*y'", 3 * d * d + 3 * d * 0.5},
        {"exp(-(t - r)^2/g^2)", exp(-d * d / 1e-8)}, /* a force pulse at t = r */
        {"m*(t - r)*exp(-(t - r)^2/g^2)", 3 * d * exp(-d * d / 1e-8)},
    };
    vals[expr_sym_find(c, "t")] = vals[sx];
    vals[expr_sym_find(c, "y")] = 2;
    vals[expr_sym_find(c, "y'")] = 0.5;
    expr *prev = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        expr *e =
            strcmp(cases[i].text, "diff") ? te_parse(c, cases[i].text) : expr_neg(c, expr_diff(c, prev, sx));
        prev = e;
        double got = expr_eval(c, expr_expand(c, e, 64), vals);
        cr_expect_leq(fabs(got - cases[i].want), 1e-12 * fabs(cases[i].want),
                      "%s expanded: %.17g, want %.17g", cases[i].text, got, cases[i].want);
    }
    expr *f = te_parse(c, "m/2*(x - r)^4");
    double got = expr_eval(c, expr_expand(c, expr_diff(c, f, sx), 64), vals);
    cr_expect_leq(fabs(got - 6 * d * d * d), 1e-12 * 6 * d * d * d, "d/dx m/2*(x - r)^4: %.17g", got);
    vals[sg] = 1e-6;
    vals[sx] = 1e-4;
    double th = tanh(100.0), want = 2 * th / (cosh(100.0) * cosh(100.0)) / 1e-6;
    got = expr_eval(c, expr_expand(c, expr_diff(c, te_parse(c, "tanh(x/g)^2"), sx), 64), vals);
    cr_expect_leq(fabs(got - want), 1e-12 * want, "d/dx tanh(x/g)^2 at x/g = 100: %.17g, want %.17g", got,
                  want);
    expr_ctx_free(c);
}

/* ---- tapes ------------------------------------------------------------------ */

/* How much e moves at vals when every input moves by 1e-13 relative (largest of a
 * few sign patterns): the conditioning of the point. The tape reorders sums and
 * products and computes integer powers by repeated squaring, so its rounding differs
 * from expr_eval's by a few ulps per operation; an ill-conditioned expression (sin
 * of a huge cosh) turns that into much more than 1e-9 relative. */
static double sensitivity(const expr_ctx *c, const expr *e, const double *vals, int ns, uint64_t *rng)
{
    double v0 = expr_eval(c, e, vals), worst = 0;
    double p[32];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < ns; i++)
            p[i] = vals[i] * (1 + (rng_below(rng, 2) ? 1e-13 : -1e-13));
        double d = fabs(expr_eval(c, e, p) - v0);
        worst = isnan(d) ? INFINITY : fmax(worst, d);
    }
    return worst;
}

/* Close, allowing 1e-9 relative (absolute below 1) plus the point's sensitivity to
 * input perturbations of 1e-13 (about 500 ulps). */
static int close_enough(double a, double b, double sens)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabs(a - b) <= 1e-9 * fmax(1.0, fmax(fabs(a), fabs(b))) + sens;
}

static int same_bits_or_nan(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0;
}

Test(expr, tape_matches_eval_random)
{
    expr_ctx *c = te_ctx();
    int ns = expr_sym_count(c);
    int *slot = malloc(ns * sizeof *slot);
    for (int s = 0; s < ns; s++)
        slot[s] = s;
    struct gen g = {0x7A9Eull, NULL, 0, 0, 1};
    uint64_t pts = 0x9017ull;
    enum { ROOTS = 8 };
    int compared = 0, jitted = 0;
    for (int round = 0; round < 60; round++) {
        expr *roots[ROOTS + 2];
        char *texts[ROOTS + 2];
        for (int i = 0; i < ROOTS; i++) {
            do {
                texts[i] = strdup(gen_text(&g, 2 + (round + i) % 5));
                roots[i] = te_parse_gen(c, texts[i]);
                if (!roots[i])
                    free(texts[i]);
            } while (!roots[i]);
        }
        /* Derivatives share sub-expressions with their roots. */
        roots[ROOTS] = expr_diff(c, roots[0], expr_sym_find(c, "x"));
        roots[ROOTS + 1] = expr_diff(c, roots[1], expr_sym_find(c, "theta'"));
        texts[ROOTS] = strdup("d/dx of root 0");
        texts[ROOTS + 1] = strdup("d/dtheta' of root 1");
        tape *t = tape_build(c, roots, ROOTS + 2, slot, ns);
        cr_assert_not_null(t, "tape_build failed in round %d", round);
        cr_assert_eq(t->n_outputs, ROOTS + 2);
        cr_assert_eq(t->n_inputs, ns);
        double *work = malloc(t->n_ins * sizeof *work);
        double out[ROOTS + 2], out_jit[ROOTS + 2];
        int have_jit = jit_compile(t) == 0 && t->fn;
        jitted += have_jit;
        for (int k = 0; k < 5; k++) {
            double vals[32];
            rng_point(&pts, vals, ns, 1.4);
            tape_eval(t, vals, work, out);
            if (have_jit)
                tape_run(t, vals, work, out_jit);
            for (int i = 0; i < ROOTS + 2; i++) {
                double want = expr_eval(c, roots[i], vals);
                double sens = sensitivity(c, roots[i], vals, ns, &pts);
                cr_expect(close_enough(out[i], want, sens),
                          "round %d point %d: tape %.17g, eval %.17g (sensitivity %.3g) for %s", round, k,
                          out[i], want, sens, texts[i]);
                if (have_jit)
                    cr_expect(same_bits_or_nan(out_jit[i], out[i]),
                              "round %d point %d: JIT %.17g, interpreter %.17g for %s", round, k, out_jit[i],
                              out[i], texts[i]);
                compared++;
            }
        }
        free(work);
        tape_free(t);
        for (int i = 0; i < ROOTS + 2; i++)
            free(texts[i]);
    }
    cr_log_info("tape vs eval: %d comparisons, %d of 60 tapes JIT-compiled", compared, jitted);
    if (!getenv("HAMEL_NO_JIT") || !*getenv("HAMEL_NO_JIT"))
        cr_expect_eq(jitted, 60, "only %d of 60 tapes were JIT-compiled", jitted);
    free(slot);
    free(g.buf);
    expr_ctx_free(c);
}

/* Shared sub-expressions are computed once: n roots that all contain one big
 * sub-expression cost one copy of it plus a few instructions each. (big + k*g
 * flattens into a new three-term sum, so each root re-adds big's two product
 * terms, which are shared: about five instructions a root.) */
Test(expr, tape_shares_subexpressions)
{
    expr_ctx *c = te_ctx();
    int ns = expr_sym_count(c);
    int *slot = malloc(ns * sizeof *slot);
    for (int s = 0; s < ns; s++)
        slot[s] = s;
    expr *big = te_parse(c, "sin(x*y + theta)*exp(cos(x') - y'^3) + sqrt(m^2 + r^2)*atan2(y, x)");
    tape *one = tape_build(c, &big, 1, slot, ns);
    cr_assert_not_null(one);
    enum { N = 20 };
    expr *roots[N];
    for (int i = 0; i < N; i++)
        roots[i] = expr_add(c, big, expr_mul(c, expr_num(c, i + 2), expr_sym(c, expr_sym_find(c, "g"))));
    tape *many = tape_build(c, roots, N, slot, ns);
    cr_assert_not_null(many);
    cr_expect_leq(many->n_ins, one->n_ins + 6 * N,
                  "%d roots sharing a sub-expression of %d instructions took %d", N, one->n_ins, many->n_ins);
    tape_free(one);
    tape_free(many);
    free(slot);
    expr_ctx_free(c);
}

/* A symbol without an input slot makes tape_build fail cleanly. */
Test(expr, tape_missing_input)
{
    expr_ctx *c = te_ctx();
    int ns = expr_sym_count(c);
    int *slot = malloc(ns * sizeof *slot);
    for (int s = 0; s < ns; s++)
        slot[s] = s;
    slot[expr_sym_find(c, "t")] = -1;
    expr *e = te_parse(c, "x + t");
    cr_expect_null(tape_build(c, &e, 1, slot, ns));
    expr *f = te_parse(c, "x + y");
    tape *t = tape_build(c, &f, 1, slot, ns);
    cr_expect_not_null(t);
    tape_free(t);
    free(slot);
    expr_ctx_free(c);
}

/* The node cap: a context that overflows returns its NaN node and says so. */
Test(expr, node_cap)
{
    expr_ctx *c = expr_ctx_new(64);
    int x = expr_sym_add(c, "x", SYM_COORD, 0);
    cr_assert_geq(x, 0);
    expr *e = expr_sym(c, x);
    for (int i = 0; i < 100 && !expr_ctx_overflow(c); i++)
        e = expr_add(c, e, expr_powi(c, expr_sym(c, x), i + 2));
    cr_expect(expr_ctx_overflow(c), "64-node context never overflowed");
    cr_expect_leq(expr_ctx_nodes(c), 64);
    expr_parse_opts o = {1, 1, 0, NULL};
    expr_error err;
    cr_expect_null(expr_parse(c, "x^200 + x^201 + x^202", &o, &err));
    cr_expect_not_null(strstr(err.message, "node limit"), "message: %s", err.message);
    expr_ctx_free(c);
}

/* Collecting c*(a + b) terms whose coefficients add up to 1 gives the sum itself, which
 * must be flattened into the outer sum (found by fuzzing: the print did not re-parse to
 * the same node). */
Test(expr, collected_sum_is_flattened)
{
    expr_ctx *c = te_ctx();
    expr *e = te_parse(c, "1/3*(x + y) + 2/3*(x + y) + theta");
    expr *flat = te_parse(c, "x + y + theta");
    cr_expect(e == flat, "1/3*(x + y) + 2/3*(x + y) + theta is the flat sum x + y + theta");
    for (int i = 0; i < e->nargs; i++)
        cr_expect_neq(e->args[i]->kind, EXPR_ADD, "no sum inside a sum");
    char *p = expr_print(c, e);
    cr_expect(te_parse(c, p) == e, "the print %s parses back to the same node", p);
    free(p);
    expr_ctx_free(c);
}

/* A quotient or product of numbers that would underflow is not folded, as a power of a
 * number is not (issue 15): m--x^1e308^-y^0 printed "m + x^(1/(1e+308))", which parsed
 * back as x^(1e-308), another node (found by fuzz_parse in the test command). */
Test(expr, subnormal_quotients_and_products_round_trip)
{
    expr_ctx *c = te_ctx();
    const char *texts[] = {"m--x^1e308^-y^0", "x^(1/(1e+308))", "1e-200*1e-200*x", "x/1e308/10"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        expr *e = te_parse(c, texts[i]);
        char *p1 = expr_print(c, e);
        expr *again = te_parse(c, p1);
        cr_expect_eq(again, e, "%s printed as %s parses to another node", texts[i], p1);
        free(p1);
    }
    cr_expect_neq(te_parse(c, "1/(1e+308)")->kind, EXPR_NUM, "1/(1e+308) underflows: not folded");
    cr_expect_eq(te_parse(c, "1/(1e+300)")->kind, EXPR_NUM, "1/(1e+300) is normal: folded");
    expr_ctx_free(c);
}

/* A number's negative power whose positive power overflows prints as a power, not as
 * 1/2^2097152 (which the parser refuses as an overflowing constant); and a sum of terms
 * sharing r^2e54 is factored without taking r out 2e54 times (where k - 1 == k the
 * Horner factoring recursed until the stack overflowed). Both found by the fuzzers. */
Test(expr, huge_powers_print_and_factor)
{
    expr_ctx *c = te_ctx();
    expr *e = te_parse(c, "x*2^-2097152 + y");
    char *p1 = expr_print(c, e);
    cr_expect_eq(te_parse(c, p1), e, "%s parses back to another node", p1);
    free(p1);
    expr *s = te_parse(c, "m*r^2000000000000000000000000000000000000000000000000000000 + "
                          "g*r^2000000000000000000000000000000000000000000000000000000");
    expr *roots[1] = {s};
    expr_factor_sums(c, roots, 1);
    cr_expect_not_null(roots[0]);
    expr_ctx_free(c);
}
