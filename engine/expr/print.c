/* print.c — prints expressions in the input language (canonically, so that parsing
 * the text gives back the same node) and as LaTeX. Numbers that are short decimals
 * print as such, simple fractions as p/q, anything else with 17 significant digits. */
#include "expr.h"
#include "expr_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_SUM = 1, P_PROD = 2, P_POW = 4, P_ATOM = 5 };

struct sb {
    char *s;
    size_t len, cap;
    int failed;
    budget *bg; /* the context's compile budget: the text's bytes count, its time too */
};

static void sb_put(struct sb *b, const char *t, size_t n)
{
    if (b->failed)
        return;
    if (budget_tick(b->bg)) { /* budget: a text too long to print in time */
        b->failed = 1;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        budget_hold(b->bg, (long)(cap - b->cap)); /* budget: the text's bytes */
        b->s = s;
        b->cap = cap;
        if (b->bg && cap >= 65536 && budget_check(b->bg)) {
            b->failed = 1;
            return;
        }
    }
    memcpy(b->s + b->len, t, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(struct sb *b, const char *t) { sb_put(b, t, strlen(t)); }

static void sb_printf(struct sb *b, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        sb_put(b, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Formats |v| (v >= 0 expected). Returns 1 if it printed as a fraction p/q. */
static int fmt_num(double v, char out[48], int latex)
{
    if (isnan(v)) {
        strcpy(out, "nan");
        return 0;
    }
    if (isinf(v)) {
        strcpy(out, latex ? "\\infty" : "inf");
        return 0;
    }
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(out, 48, "%.0f", v);
        return 0;
    }
    static const int small_q[] = {2, 3, 4, 5, 6, 8, 12, 16};
    for (size_t i = 0; i < sizeof small_q / sizeof small_q[0]; i++) {
        int q = small_q[i];
        double n = round(v * q);
        if (n > 0 && n < 1e6 && n / q == v) {
            if (latex)
                snprintf(out, 48, "\\frac{%.0f}{%d}", n, q);
            else
                snprintf(out, 48, "%.0f/%d", n, q);
            return 1;
        }
    }
    for (int p = 1; p <= 8; p++) {
        snprintf(out, 48, "%.*g", p, v);
        if (strtod(out, NULL) == v)
            return 0;
    }
    for (int q = 2; q <= 10000; q++) {
        double n = round(v * q);
        if (n > 0 && n < 1e9 && n / q == v) {
            if (latex)
                snprintf(out, 48, "\\frac{%.0f}{%d}", n, q);
            else
                snprintf(out, 48, "%.0f/%d", n, q);
            return 1;
        }
    }
    for (int p = 9; p <= 17; p++) {
        snprintf(out, 48, "%.*g", p, v);
        if (strtod(out, NULL) == v)
            break;
    }
    return 0;
}

struct printer {
    const expr_ctx *c;
    struct sb b;
    int latex;
};

static void print_rec(struct printer *p, const expr *e, int prec);

static void print_name(struct printer *p, const char *name)
{
    if (!p->latex) {
        sb_puts(&p->b, name);
        return;
    }
    static const char *const greek[] = {"alpha", "beta",  "gamma",   "delta",  "epsilon", "zeta",   "eta",
                                        "theta", "iota",  "kappa",   "lambda", "mu",      "nu",     "xi",
                                        "pi",    "rho",   "sigma",   "tau",    "upsilon", "phi",    "chi",
                                        "psi",   "omega", "Gamma",   "Delta",  "Theta",   "Lambda", "Xi",
                                        "Pi",    "Sigma", "Upsilon", "Phi",    "Psi",     "Omega"};
    size_t len = strlen(name);
    int prime = len > 0 && name[len - 1] == '\'';
    char base[128];
    snprintf(base, sizeof base, "%.*s", (int)(prime ? len - 1 : len), name);
    char *sub = strchr(base, '_');
    if (sub)
        *sub++ = '\0';
    if (prime)
        sb_puts(&p->b, "\\dot{");
    int done = 0;
    for (size_t i = 0; i < sizeof greek / sizeof greek[0]; i++)
        if (strcmp(base, greek[i]) == 0) {
            sb_printf(&p->b, "\\%s", base);
            done = 1;
            break;
        }
    if (!done) {
        if (strlen(base) > 1)
            sb_printf(&p->b, "\\mathit{%s}", base);
        else
            sb_puts(&p->b, base);
    }
    if (sub && *sub)
        sb_printf(&p->b, "_{%s}", sub);
    if (prime)
        sb_puts(&p->b, "}");
}

static void open_paren(struct printer *p) { sb_puts(&p->b, p->latex ? "\\left(" : "("); }
static void close_paren(struct printer *p) { sb_puts(&p->b, p->latex ? "\\right)" : ")"); }

static void print_number(struct printer *p, double v, int prec)
{
    char buf[48];
    int frac = fmt_num(fabs(v), buf, p->latex);
    int wrap = (v < 0 && prec > P_SUM) || (frac && !p->latex && prec > P_PROD) ||
               (prec >= P_ATOM && !p->latex && strchr(buf, 'e'));
    if (wrap)
        open_paren(p);
    if (v < 0)
        sb_puts(&p->b, "-");
    sb_puts(&p->b, buf);
    if (wrap)
        close_paren(p);
}

static int negative_exponent(const expr *f);

/* Prints base^k for a positive exponent node k (k == 1: just the base). */
static void print_power(struct printer *p, const expr *base, const expr *k)
{
    if (expr_is_num(k, 1.0)) {
        print_rec(p, base, P_POW + 1);
        return;
    }
    if (p->latex && base->kind == EXPR_FUN && base->fn != FN_SQRT && base->fn != FN_ABS &&
        base->fn != FN_ATAN2 && k->kind == EXPR_NUM && k->num == floor(k->num)) {
        /* \sin^{2}\left(x\right) */
        sb_printf(&p->b, "\\%s^{", expr_fn_name(base->fn));
        print_rec(p, k, 0);
        sb_puts(&p->b, "}");
        open_paren(p);
        print_rec(p, base->args[0], 0);
        close_paren(p);
        return;
    }
    if (p->latex) {
        sb_puts(&p->b, "{");
        print_rec(p, base, P_POW + 1);
        sb_puts(&p->b, "}^{");
        print_rec(p, k, 0);
        sb_puts(&p->b, "}");
        return;
    }
    print_rec(p, base, P_POW + 1);
    sb_puts(&p->b, "^");
    /* ^ is right-associative and takes a signed operand: a power exponent needs no
     * parentheses (x^y^z), nor minus a power or an atom (x^-y, x^-y^z). */
    if (k->kind == EXPR_MUL && k->num == -1.0 && k->nargs == 1 &&
        (k->args[0]->kind == EXPR_SYM || k->args[0]->kind == EXPR_FUN ||
         (k->args[0]->kind == EXPR_POW && !negative_exponent(k->args[0])))) {
        sb_puts(&p->b, "-");
        print_rec(p, k->args[0], k->args[0]->kind == EXPR_POW ? P_POW : P_POW + 1);
        return;
    }
    print_rec(p, k, k->kind == EXPR_POW && !negative_exponent(k) ? P_POW : P_POW + 1);
}

/* A power printed as a denominator (x^-2 as 1/x^2), unless it is a number whose
 * positive power overflows: 2^-2097152 printed as 1/2^2097152 would not parse back
 * (the parser refuses an overflowing constant), so it stays 2^(-2097152). */
static int negative_exponent(const expr *f)
{
    if (f->kind != EXPR_POW || f->args[1]->kind != EXPR_NUM || f->args[1]->num >= 0)
        return 0;
    return f->args[0]->kind != EXPR_NUM || isfinite(pow(f->args[0]->num, -f->args[1]->num));
}

/* Prints a product (or a power with a negative exponent, as a product of one),
 * multiplying its coefficient by `sign`. */
static void print_product(struct printer *p, const expr *e, double sign, int prec)
{
    const expr *const *f = e->kind == EXPR_MUL ? (const expr *const *)e->args : &e;
    int n = e->kind == EXPR_MUL ? e->nargs : 1;
    double coef = sign * (e->kind == EXPR_MUL ? e->num : 1.0);
    int nnum = 0, nden = 0;
    for (int i = 0; i < n; i++)
        negative_exponent(f[i]) ? nden++ : nnum++;
    int neg = coef < 0;
    double a = fabs(coef);
    int wrap = prec > P_PROD || (neg && prec > P_SUM);
    if (wrap)
        open_paren(p);
    if (neg)
        sb_puts(&p->b, "-");
    if (p->latex && nden) {
        sb_puts(&p->b, "\\frac{");
    }
    int first = 1;
    if (a != 1.0 || nnum == 0) {
        char buf[48];
        fmt_num(a, buf, p->latex);
        sb_puts(&p->b, buf);
        first = 0;
    }
    for (int i = 0; i < n; i++) {
        if (negative_exponent(f[i]))
            continue;
        if (!first)
            sb_puts(&p->b, p->latex ? " " : "*");
        first = 0;
        if (f[i]->kind == EXPR_POW)
            print_power(p, f[i]->args[0], f[i]->args[1]);
        else
            print_rec(p, f[i], P_PROD + 1);
    }
    if (nden) {
        sb_puts(&p->b, p->latex ? "}{" : "/");
        int multi = nden > 1 && !p->latex;
        if (multi)
            open_paren(p);
        first = 1;
        for (int i = 0; i < n; i++) {
            if (!negative_exponent(f[i]))
                continue;
            if (!first)
                sb_puts(&p->b, p->latex ? " " : "*");
            first = 0;
            const expr *k = f[i]->args[1];
            if (k->num == -1.0) {
                print_rec(p, f[i]->args[0], P_POW + 1);
            } else {
                char buf[48];
                int frac = fmt_num(-k->num, buf, p->latex);
                print_rec(p, f[i]->args[0], P_POW + 1);
                if (p->latex)
                    sb_printf(&p->b, "^{%s}", buf);
                else if (frac || strchr(buf, 'e'))
                    sb_printf(&p->b, "^(%s)", buf);
                else
                    sb_printf(&p->b, "^%s", buf);
            }
        }
        if (multi)
            close_paren(p);
        if (p->latex)
            sb_puts(&p->b, "}");
    }
    if (wrap)
        close_paren(p);
}

static int term_negative(const expr *t)
{
    return (t->kind == EXPR_MUL && t->num < 0) || (t->kind == EXPR_NUM && t->num < 0);
}

static void print_rec(struct printer *p, const expr *e, int prec)
{
    if (p->b.failed) /* budget: a stopped print does not walk the rest of the tree */
        return;
    switch (e->kind) {
    case EXPR_NUM: print_number(p, e->num, prec); return;
    case EXPR_SYM: print_name(p, expr_sym_get(p->c, e->sym)->name); return;
    case EXPR_FUN:
        if (p->latex) {
            if (e->fn == FN_SQRT) {
                sb_puts(&p->b, "\\sqrt{");
                print_rec(p, e->args[0], 0);
                sb_puts(&p->b, "}");
                return;
            }
            if (e->fn == FN_ABS) {
                sb_puts(&p->b, "\\left|");
                print_rec(p, e->args[0], 0);
                sb_puts(&p->b, "\\right|");
                return;
            }
            static const char *const lx[FN_COUNT] = {[FN_SIN] = "\\sin",
                                                     [FN_COS] = "\\cos",
                                                     [FN_TAN] = "\\tan",
                                                     [FN_ASIN] = "\\arcsin",
                                                     [FN_ACOS] = "\\arccos",
                                                     [FN_ATAN] = "\\arctan",
                                                     [FN_ATAN2] = "\\operatorname{atan2}",
                                                     [FN_SINH] = "\\sinh",
                                                     [FN_COSH] = "\\cosh",
                                                     [FN_TANH] = "\\tanh",
                                                     [FN_EXP] = "\\exp",
                                                     [FN_LOG] = "\\log",
                                                     [FN_SIGN] = "\\operatorname{sign}"};
            sb_puts(&p->b, lx[e->fn] ? lx[e->fn] : expr_fn_name(e->fn));
        } else {
            sb_puts(&p->b, expr_fn_name(e->fn));
        }
        open_paren(p);
        for (int i = 0; i < e->nargs; i++) {
            if (i)
                sb_puts(&p->b, ", ");
            print_rec(p, e->args[i], 0);
        }
        close_paren(p);
        return;
    case EXPR_POW:
        if (negative_exponent(e)) {
            print_product(p, e, 1.0, prec);
            return;
        }
        if (prec > P_POW)
            open_paren(p);
        print_power(p, e->args[0], e->args[1]);
        if (prec > P_POW)
            close_paren(p);
        return;
    case EXPR_MUL: print_product(p, e, 1.0, prec); return;
    case EXPR_ADD: {
        int wrap = prec > P_SUM;
        if (wrap)
            open_paren(p);
        for (int i = 0; i < e->nargs; i++) {
            const expr *t = e->args[i];
            if (i == 0) {
                print_rec(p, t, P_SUM);
            } else if (term_negative(t)) {
                sb_puts(&p->b, " - ");
                print_product(p, t, -1.0, P_SUM);
            } else {
                sb_puts(&p->b, " + ");
                print_rec(p, t, P_SUM);
            }
        }
        if (e->num != 0.0) {
            sb_puts(&p->b, e->num < 0 ? " - " : " + ");
            print_number(p, fabs(e->num), P_SUM);
        }
        if (wrap)
            close_paren(p);
        return;
    }
    default: return;
    }
}

static char *print_any(const expr_ctx *c, const expr *e, int latex)
{
    struct printer p = {c, {NULL, 0, 0, 0, c->budget}, latex};
    print_rec(&p, e, 0);
    budget_hold(c->budget, -(long)p.b.cap);
    if (p.b.failed) {
        free(p.b.s);
        return NULL;
    }
    if (!p.b.s)
        return strdup("");
    return p.b.s;
}

char *expr_print(const expr_ctx *c, const expr *e) { return print_any(c, e, 0); }

char *expr_print_latex(const expr_ctx *c, const expr *e) { return print_any(c, e, 1); }
