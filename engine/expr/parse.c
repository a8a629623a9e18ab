/* parse.c — the recursive-descent parser of the expression language (API.md §1).
 * Every error carries the 1-based column (byte offset + 1) and a reason. Identifiers
 * resolve through the context's symbol table; definitions parse as their value. */
#include "expr.h"
#include "expr_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARSE_MAX_DEPTH 200

struct parser {
    expr_ctx *c;
    const char *s;
    size_t pos;
    int depth;
    const expr_parse_opts *opts;
    expr_error *err;
    int failed;
};

static expr *fail_at(struct parser *p, size_t pos, const char *fmt, ...)
{
    if (!p->failed) {
        p->failed = 1;
        p->err->column = (int)pos + 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err->message, sizeof p->err->message, fmt, ap);
        va_end(ap);
    }
    return NULL;
}

static void skip_space(struct parser *p)
{
    while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r')
        p->pos++;
}

static char peek(struct parser *p)
{
    skip_space(p);
    return p->s[p->pos];
}

static const char *describe(char ch, char buf[16])
{
    if (ch == '\0')
        return "the end of the expression";
    if ((unsigned char)ch < 0x20 || (unsigned char)ch >= 0x7f)
        snprintf(buf, 16, "byte 0x%02x", (unsigned char)ch);
    else
        snprintf(buf, 16, "'%c'", ch);
    return buf;
}

static expr *parse_sum(struct parser *p);
static expr *check_finite(struct parser *p, expr *e, size_t pos);

static int is_ident_start(char ch) { return isalpha((unsigned char)ch) || ch == '_'; }
static int is_ident_char(char ch) { return isalnum((unsigned char)ch) || ch == '_'; }

/* number := digits ['.' digits] [('e'|'E') ['+'|'-'] digits] | '.' digits ... */
static expr *parse_number(struct parser *p)
{
    size_t start = p->pos;
    const char *s = p->s;
    size_t i = p->pos;
    int digits = 0;
    while (isdigit((unsigned char)s[i])) {
        i++;
        digits++;
    }
    if (s[i] == '.') {
        i++;
        while (isdigit((unsigned char)s[i])) {
            i++;
            digits++;
        }
    }
    if (!digits)
        return fail_at(p, start, "malformed number");
    if (s[i] == 'e' || s[i] == 'E') {
        size_t e = i + 1;
        if (s[e] == '+' || s[e] == '-')
            e++;
        if (!isdigit((unsigned char)s[e]))
            return fail_at(p, i, "malformed exponent in number");
        while (isdigit((unsigned char)s[e]))
            e++;
        i = e;
    }
    if (s[i] == '.' || is_ident_start(s[i]))
        return fail_at(p, i, "unexpected %c after a number", s[i]);
    char buf[64];
    size_t len = i - start;
    if (len >= sizeof buf)
        return fail_at(p, start, "number too long");
    memcpy(buf, s + start, len);
    buf[len] = '\0';
    double v = strtod(buf, NULL);
    if (!isfinite(v))
        return fail_at(p, start, "number out of range");
    p->pos = i;
    return expr_num(p->c, v);
}

static int fn_lookup(const char *name, int *nargs, int *fn, int *alias)
{
    static const struct {
        const char *name;
        int fn, nargs, alias;
    } table[] = {
        {"sin", FN_SIN, 1, 0},   {"cos", FN_COS, 1, 0},     {"tan", FN_TAN, 1, 0},   {"sec", FN_COS, 1, 1},
        {"csc", FN_SIN, 1, 1},   {"cot", FN_TAN, 1, 2},     {"asin", FN_ASIN, 1, 0}, {"acos", FN_ACOS, 1, 0},
        {"atan", FN_ATAN, 1, 0}, {"atan2", FN_ATAN2, 2, 0}, {"sinh", FN_SINH, 1, 0}, {"cosh", FN_COSH, 1, 0},
        {"tanh", FN_TANH, 1, 0}, {"exp", FN_EXP, 1, 0},     {"log", FN_LOG, 1, 0},   {"sqrt", FN_SQRT, 1, 0},
        {"sign", FN_SIGN, 1, 0}, {"abs", FN_ABS, 1, 0},     {"pow", -1, 2, 3},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0) {
            *fn = table[i].fn;
            *nargs = table[i].nargs;
            *alias = table[i].alias;
            return 1;
        }
    return 0;
}

/* A function added to the language after models named things so ("sign", for the
 * derivative of abs): a name a model may still give a parameter, coordinate or definition,
 * which it then is wherever it is not followed by '(' (sign*x; sign(x) is the function). */
static int fn_soft(const char *name) { return strcmp(name, "sign") == 0; }

/* Nonzero if name is a function of the language or otherwise reserved. */
int expr_name_reserved(const char *name)
{
    int a, b, c;
    return (fn_lookup(name, &a, &b, &c) && !fn_soft(name)) || strcmp(name, "t") == 0 ||
           strcmp(name, "pi") == 0;
}

/* Whether name, not followed by '(', is a function used without its arguments (not a
 * soft function's name the model gave a symbol). */
static int fn_needs_call(const struct parser *p, const char *name)
{
    int a, b, alias;
    return fn_lookup(name, &a, &b, &alias) && !(fn_soft(name) && expr_sym_find(p->c, name) >= 0);
}

/* call := ident '(' sum (',' sum)* ')' */
static expr *parse_call(struct parser *p, const char *name, size_t start)
{
    int nargs, fn, alias;
    if (!fn_lookup(name, &nargs, &fn, &alias))
        return fail_at(p, start, "unknown function '%s'", name);
    p->pos++; /* '(' */
    expr *args[2] = {NULL, NULL};
    int got = 0;
    if (peek(p) == ')')
        return fail_at(p, p->pos, "'%s' takes %d argument%s, got 0", name, nargs, nargs == 1 ? "" : "s");
    for (;;) {
        expr *a = parse_sum(p);
        if (!a)
            return NULL;
        if (got < 2)
            args[got] = a;
        got++;
        char ch = peek(p);
        if (ch == ',') {
            p->pos++;
            continue;
        }
        if (ch == ')') {
            p->pos++;
            break;
        }
        char buf[16];
        return fail_at(p, p->pos, "expected ',' or ')' in the arguments of '%s', found %s", name,
                       describe(ch, buf));
    }
    if (got != nargs)
        return fail_at(p, start, "'%s' takes %d argument%s, got %d", name, nargs, nargs == 1 ? "" : "s", got);
    expr_ctx *c = p->c;
    expr *r;
    switch (alias) {
    case 1: r = expr_powi(c, expr_fun(c, fn, args[0]), -1); break; /* sec, csc */
    case 2:                                                        /* cot = cos / sin */
        r = expr_mul(c, expr_fun(c, FN_COS, args[0]), expr_powi(c, expr_fun(c, FN_SIN, args[0]), -1));
        break;
    case 3: r = expr_pow(c, args[0], args[1]); break;
    default: r = nargs == 2 ? expr_fun2(c, fn, args[0], args[1]) : expr_fun(c, fn, args[0]); break;
    }
    return check_finite(p, r, start);
}

/* primary := number | ident ["'"] | ident '(' args ')' | '(' sum ')' */
static expr *parse_primary(struct parser *p)
{
    char ch = peek(p);
    size_t start = p->pos;
    if (isdigit((unsigned char)ch) || ch == '.')
        return parse_number(p);
    if (ch == '(') {
        p->pos++;
        expr *e = parse_sum(p);
        if (!e)
            return NULL;
        if (peek(p) != ')') {
            char buf[16];
            return fail_at(p, p->pos, "expected ')' to close the '(' at column %zu, found %s", start + 1,
                           describe(p->s[p->pos], buf));
        }
        p->pos++;
        return e;
    }
    if (!is_ident_start(ch)) {
        char buf[16];
        if (ch == '\0')
            return fail_at(p, p->pos, p->pos == 0 ? "empty expression" : "unexpected end of the expression");
        return fail_at(p, p->pos, "unexpected %s", describe(ch, buf));
    }
    size_t i = p->pos;
    while (is_ident_char(p->s[i]))
        i++;
    char name[128];
    if (i - start >= sizeof name)
        return fail_at(p, start, "identifier too long");
    memcpy(name, p->s + start, i - start);
    name[i - start] = '\0';
    p->pos = i;
    int prime = p->s[p->pos] == '\'';
    if (peek(p) == '(' && !prime)
        return parse_call(p, name, start);
    if (fn_needs_call(p, name))
        return fail_at(p, start, "function '%s' needs its arguments in parentheses", name);
    if (!prime && strcmp(name, "pi") == 0 && expr_sym_find(p->c, "pi") < 0)
        return expr_num(p->c, M_PI);
    int s = expr_sym_find(p->c, name);
    if (s < 0)
        return fail_at(p, start, "unknown identifier '%s'", name);
    const expr_symbol *sym = expr_sym_get(p->c, s);
    if (prime) {
        p->pos++;
        if (p->s[p->pos] == '\'')
            return fail_at(p, p->pos, "second derivatives (%s'') are not allowed", name);
        if (sym->cls != SYM_COORD)
            return fail_at(p, start, "only coordinates have time derivatives; '%s' is not a coordinate",
                           name);
        char vname[132];
        snprintf(vname, sizeof vname, "%s'", name);
        s = expr_sym_find(p->c, vname);
        if (s < 0)
            return fail_at(p, start, "unknown identifier '%s'", vname);
        sym = expr_sym_get(p->c, s);
    }
    if (sym->cls == SYM_VELOCITY && !p->opts->allow_velocity)
        return fail_at(p, start, "velocity %s is not allowed in %s", sym->name,
                       p->opts->what ? p->opts->what : "this expression");
    if (sym->cls == SYM_TIME && !p->opts->allow_time)
        return fail_at(p, start, "time t is not allowed in %s",
                       p->opts->what ? p->opts->what : "this expression");
    if (sym->cls == SYM_DEF && !p->opts->allow_velocity && expr_depends_class(p->c, sym->node, SYM_VELOCITY))
        return fail_at(p, start, "definition '%s' uses velocities, which are not allowed in %s", name,
                       p->opts->what ? p->opts->what : "this expression");
    if (sym->cls == SYM_DEF && !p->opts->allow_time && expr_depends_class(p->c, sym->node, SYM_TIME))
        return fail_at(p, start, "definition '%s' uses t, which is not allowed in %s", name,
                       p->opts->what ? p->opts->what : "this expression");
    if (sym->cls == SYM_SPEED || sym->cls == SYM_ACCEL || sym->cls == SYM_OTHER)
        return fail_at(p, start, "'%s' cannot be used in an expression", name);
    return sym->node;
}

static expr *parse_unary(struct parser *p);

/* power := primary ['^' unary]      ('**' is accepted as '^'; right-associative) */
static expr *parse_power(struct parser *p)
{
    expr *b = parse_primary(p);
    if (!b)
        return NULL;
    char ch = peek(p);
    if (ch == '^' || (ch == '*' && p->s[p->pos + 1] == '*')) {
        size_t op = p->pos;
        p->pos += ch == '^' ? 1 : 2;
        expr *e = parse_unary(p);
        if (!e)
            return NULL;
        return check_finite(p, expr_pow(p->c, b, e), op);
    }
    return b;
}

/* Fails when a constructor folded numbers into inf or nan (1/0, 10^400). */
static expr *check_finite(struct parser *p, expr *e, size_t pos)
{
    if (e && e->nonfinite && !expr_ctx_overflow(p->c))
        return fail_at(p, pos, "this operation on numbers gives inf or nan (division by zero or overflow)");
    if (e && e->kind == EXPR_POW && expr_is_num(e->args[0], 0.0) && e->args[1]->kind == EXPR_NUM &&
        e->args[1]->num < 0)
        return fail_at(p, pos, "division by zero");
    return e;
}

/* unary := ('-' | '+') unary | power
 * Every level of nesting (signs, powers, parentheses) counts against PARSE_MAX_DEPTH,
 * so no input can exhaust the stack. */
static expr *parse_unary(struct parser *p)
{
    if (++p->depth > PARSE_MAX_DEPTH)
        return fail_at(p, p->pos, "expression nested too deeply");
    char ch = peek(p);
    expr *r;
    if (ch == '-' || ch == '+') {
        p->pos++;
        expr *a = parse_unary(p);
        r = !a ? NULL : ch == '-' ? expr_neg(p->c, a) : a;
    } else {
        r = parse_power(p);
    }
    p->depth--;
    return r;
}

/* product := unary (('*' | '/') unary)* */
static expr *parse_product(struct parser *p)
{
    expr *a = parse_unary(p);
    while (a) {
        char ch = peek(p);
        size_t op = p->pos;
        if (ch == '*' && p->s[p->pos + 1] != '*') {
            p->pos++;
            expr *b = parse_unary(p);
            a = b ? check_finite(p, expr_mul(p->c, a, b), op) : NULL;
        } else if (ch == '/') {
            p->pos++;
            expr *b = parse_unary(p);
            if (b && expr_is_num(b, 0.0))
                return fail_at(p, op, "division by zero");
            a = b ? check_finite(p, expr_div(p->c, a, b), op) : NULL;
        } else {
            break;
        }
    }
    return a;
}

/* sum := product (('+' | '-') product)* */
static expr *parse_sum(struct parser *p)
{
    expr *a = parse_product(p);
    while (a) {
        char ch = peek(p);
        if (ch != '+' && ch != '-')
            break;
        size_t op = p->pos;
        p->pos++;
        expr *b = parse_product(p);
        a = b ? check_finite(p, ch == '+' ? expr_add(p->c, a, b) : expr_sub(p->c, a, b), op) : NULL;
    }
    return a;
}

expr *expr_parse(expr_ctx *c, const char *text, const expr_parse_opts *opts, expr_error *err)
{
    static const expr_parse_opts defaults = {1, 1, 0, NULL};
    struct parser p = {c, text, 0, 0, opts ? opts : &defaults, err, 0};
    err->column = 0;
    err->message[0] = '\0';
    size_t len = strlen(text);
    if (p.opts->max_chars && len > p.opts->max_chars) {
        fail_at(&p, p.opts->max_chars, "expression longer than %zu characters", p.opts->max_chars);
        return NULL;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] >= 0x80) {
            fail_at(&p, i, "non-ASCII byte 0x%02x", (unsigned char)text[i]);
            return NULL;
        }
    expr *e = parse_sum(&p);
    if (!e)
        return NULL;
    char ch = peek(&p);
    if (ch != '\0') {
        char buf[16];
        if (ch == ')')
            fail_at(&p, p.pos, "unmatched ')'");
        else
            fail_at(&p, p.pos, "unexpected %s after a complete expression", describe(ch, buf));
        return NULL;
    }
    if (expr_ctx_overflow(c)) {
        fail_at(&p, 0, "expression too large (node limit)");
        return NULL;
    }
    return e;
}
