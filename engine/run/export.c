/* export.c — generated code: one standalone C or Python file per model (export.h).
 *
 * The file is made of three kinds of text: the model's tapes printed statement by
 * statement (tape_function, tangent_function), fixed code written here once (the
 * linear algebra of the right-hand side and its Jacobian, the main), and constants
 * (sizes, names, values). The fixed C code is in export_c.inc, the Python in
 * export_py.inc, each one string. */
#include "export.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtoa.h"
#include "engine_types.h"
#include "error.h"
#include "integ.h"

/* ---- the output buffer ---------------------------------------------------------- */

typedef struct gen {
    char *p;
    size_t len, cap;
    int err; /* out of memory or past EXPORT_MAX_BYTES */
    int py;  /* writing Python */
} gen;

static void put(gen *g, const char *s, size_t n)
{
    if (g->err)
        return;
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 65536;
        while (cap < g->len + n + 1)
            cap *= 2;
        char *p = cap > EXPORT_MAX_BYTES * 2 ? NULL : realloc(g->p, cap);
        if (!p) {
            g->err = 1;
            return;
        }
        g->p = p;
        g->cap = cap;
    }
    memcpy(g->p + g->len, s, n);
    g->len += n;
    g->p[g->len] = 0;
    if (g->len > EXPORT_MAX_BYTES)
        g->err = 1;
}

static void puts_(gen *g, const char *s) { put(g, s, strlen(s)); }

static void outf(gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(gen *g, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) {
        g->err = 1; /* every format here is short */
        return;
    }
    put(g, buf, (size_t)n);
}

/* ---- the user's text, made harmless --------------------------------------------- */

/* A number as a literal both languages read back to the same double. */
static void num(gen *g, double v)
{
    char buf[DTOA_MAX];
    if (isnan(v)) {
        puts_(g, g->py ? "math.nan" : "NAN");
    } else if (isinf(v)) {
        puts_(g, v > 0 ? (g->py ? "math.inf" : "HUGE_VAL") : (g->py ? "(-math.inf)" : "(-HUGE_VAL)"));
    } else {
        int n = dtoa_shortest(v, buf);
        if (buf[0] == '-') /* "x - -1.0" must not read as "x --1.0" */
            put(g, "(", 1);
        put(g, buf, (size_t)n);
        if (buf[0] == '-')
            put(g, ")", 1);
    }
}

/* Comment text: printable ASCII only (a newline or any other control character
 * becomes a space, other bytes '?'), at most 200 bytes, and in C no '*' next to a '/'
 * (a comment can neither be closed nor seem to nest). */
static void comment_text(gen *g, const char *s)
{
    char buf[256];
    size_t n = 0;
    const unsigned char *c = (const unsigned char *)(s ? s : "");
    for (; *c && n < 200; c++) {
        char o = *c < 0x20 || *c == 0x7f ? ' ' : *c >= 0x80 ? '?' : (char)*c;
        if (!g->py && n > 0 && ((o == '/' && buf[n - 1] == '*') || (o == '*' && buf[n - 1] == '/')))
            buf[n++] = ' ';
        buf[n++] = o;
    }
    if (*c)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "...");
    put(g, buf, n);
}

/* A string literal: letters, digits, '_' and space as they are, every other byte as
 * an escape (C: three octal digits; Python: \xNN). */
static void string_lit(gen *g, const char *s)
{
    put(g, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char buf[8];
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
            *c == ' ') {
            put(g, (const char *)c, 1);
        } else {
            int n = snprintf(buf, sizeof buf, g->py ? "\\x%02x" : "\\%03o", *c);
            put(g, buf, (size_t)n);
        }
    }
    put(g, "\"", 1);
}

/* An identifier: prefix, index, '_', the name's letters, digits and '_' (others
 * dropped), at most 40 bytes: unique by the index, never a keyword by the prefix. */
static void ident(gen *g, const char *prefix, int idx, const char *name)
{
    char buf[64];
    int n = snprintf(buf, sizeof buf, "%s%d_", prefix, idx);
    for (const char *c = name; *c && n < 40; c++)
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_')
            buf[n++] = *c;
    put(g, buf, (size_t)n);
}

/* ---- tapes as straight-line code ------------------------------------------------- */

typedef struct tape_view {
    const struct engine_model *m;
    const tape *t;
    const char *fname; /* C hamel_<fname>, Python _<fname> */
    const char *what;  /* its comment */
    int qdot_slots;    /* the velocity slots hold q' (the events' tape), never a speed */
} tape_view;

/* What input slot a of the model's layout holds, as a comment (qdot_slots: the
 * velocity slots hold q', as in the events' tape). */
static void input_comment(gen *g, const struct engine_model *m, int a, int qdot_slots)
{
    int iq = model_input_q(m), iqd = model_input_qd(m);
    puts_(g, g->py ? "  # " : " /* ");
    if (a >= m->n_in) {
        outf(g, "constraint force %d (not read)", a - m->n_in);
    } else if (a < m->np) {
        puts_(g, "parameter ");
        comment_text(g, m->params[a]);
    } else if (a == model_input_t(m)) {
        puts_(g, "t");
    } else if (a < iqd) {
        puts_(g, "coordinate ");
        comment_text(g, m->coords[a - iq]);
    } else {
        int sp = -1;
        for (int r = 0; m->tape_fast && !qdot_slots && r < m->k; r++)
            if (m->u_slot[r] == a)
                sp = r;
        puts_(g, sp >= 0 ? "speed " : "velocity of ");
        comment_text(g, sp >= 0 ? m->speeds[sp] : m->coords[a - iqd]);
    }
    puts_(g, g->py ? "\n" : " */\n");
}

/* The value statements of every slot: C `double s<i> = ...;`, Python `s<i> = ...`. */
static void tape_values(gen *g, const tape_view *v)
{
    const tape *t = v->t;
    const char *pre = g->py ? "    " : "    double ";
    const char *powi = g->py ? "_powi" : "hamel_powi", *math = g->py ? "math." : "";
    for (int i = 0; i < t->n_ins && !g->err; i++) {
        const tape_ins *p = &t->ins[i];
        tape_op op = (tape_op)p->op;
        outf(g, "%ss%d = ", pre, i);
        switch (op) {
        case TAPE_INPUT:
            outf(g, g->py ? "inp[%d]" : "in[%d];", p->a);
            input_comment(g, v->m, p->a, v->qdot_slots);
            continue;
        case TAPE_CONST: num(g, p->c); break;
        case TAPE_ADD: outf(g, "s%d + s%d", p->a, p->b); break;
        case TAPE_SUB: outf(g, "s%d - s%d", p->a, p->b); break;
        case TAPE_MUL: outf(g, "s%d * s%d", p->a, p->b); break;
        case TAPE_DIV: outf(g, "s%d / s%d", p->a, p->b); break;
        case TAPE_NEG: outf(g, "-s%d", p->a); break;
        case TAPE_POWI: outf(g, "%s(s%d, %d)", powi, p->a, p->b); break;
        case TAPE_POW: outf(g, "%spow(s%d, s%d)", math, p->a, p->b); break;
        case TAPE_ATAN2: outf(g, "%satan2(s%d, s%d)", math, p->a, p->b); break;
        case TAPE_ABS: outf(g, "%s(s%d)", g->py ? "abs" : "fabs", p->a); break;
        case TAPE_SIGN: outf(g, "%s(s%d)", g->py ? "_sign" : "hamel_sign", p->a); break;
        default: {
            const char *f = tape_op_libm_name(op);
            if (!f) {
                g->err = 1;
                return;
            }
            outf(g, "%s%s(s%d)", math, f, p->a);
        }
        }
        puts_(g, g->py ? "\n" : ";\n");
    }
}

/* Which slots carry tangents: those that depend on an input with has_tan[a]. */
static char *tangent_mask(const tape *t, const char *has_tan)
{
    char *nz = calloc((size_t)t->n_ins + 1, 1);
    if (!nz)
        return NULL;
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *p = &t->ins[i];
        switch ((tape_op)p->op) {
        case TAPE_INPUT: nz[i] = has_tan[p->a]; break;
        case TAPE_CONST: nz[i] = 0; break;
        case TAPE_ADD:
        case TAPE_SUB:
        case TAPE_MUL:
        case TAPE_DIV:
        case TAPE_POW:
        case TAPE_ATAN2: nz[i] = nz[p->a] || nz[p->b]; break;
        default: nz[i] = nz[p->a]; break;
        }
    }
    return nz;
}

/* The tangent statement of slot i (which carries tangents), by tangent.c's rule. C:
 * `L T(i)[d] = ...;` (L loops d over the directions); Python: `d<i> = ...` on numpy
 * vectors. An operand without tangents drops out. */
static void tangent_stmt(gen *g, const tape *t, const char *nz, int i)
{
    const tape_ins *p = &t->ins[i];
    int a = p->a, b = p->b;
    char da[48], db[48];
    const char *math = g->py ? "math." : "", *powi = g->py ? "_powi" : "hamel_powi";
    if (g->py) {
        snprintf(da, sizeof da, "d%d", a);
        snprintf(db, sizeof db, "d%d", b);
        outf(g, "    d%d = ", i);
    } else {
        snprintf(da, sizeof da, "T(%d)[d]", a);
        snprintf(db, sizeof db, "T(%d)[d]", b);
        outf(g, "    L T(%d)[d] = ", i);
    }
    int binary = p->op == TAPE_ADD || p->op == TAPE_SUB || p->op == TAPE_MUL || p->op == TAPE_DIV ||
                 p->op == TAPE_POW || p->op == TAPE_ATAN2;
    int za = p->op == TAPE_INPUT || !nz[a], zb = !binary || !nz[b];
    switch ((tape_op)p->op) {
    case TAPE_INPUT:
        if (g->py)
            outf(g, "din[%d]", a);
        else
            outf(g, "din[%d * HAMEL_ND + d]", a);
        break;
    case TAPE_ADD:
        if (za)
            outf(g, "%s", db);
        else if (zb)
            outf(g, "%s", da);
        else
            outf(g, "%s + %s", da, db);
        break;
    case TAPE_SUB:
        if (za)
            outf(g, "-%s", db);
        else if (zb)
            outf(g, "%s", da);
        else
            outf(g, "%s - %s", da, db);
        break;
    case TAPE_MUL:
        if (za)
            outf(g, "s%d * %s", a, db);
        else if (zb)
            outf(g, "s%d * %s", b, da);
        else
            outf(g, "s%d * %s + s%d * %s", b, da, a, db);
        break;
    case TAPE_DIV:
        if (zb)
            outf(g, "%s / s%d", da, b);
        else if (za)
            outf(g, "-s%d * %s / s%d", i, db, b);
        else
            outf(g, "(%s - s%d * %s) / s%d", da, i, db, b);
        break;
    case TAPE_NEG: outf(g, "-%s", da); break;
    case TAPE_POWI:
        if (b == 0)
            outf(g, "0.0 * %s", da);
        else
            outf(g, "%d.0 * %s(s%d, %d) * %s", b, powi, a, b - 1, da);
        break;
    case TAPE_POW: /* d a^b = b a^(b-1) da + a^b log(a) db */
        if (za)
            outf(g, "s%d * %slog(s%d) * %s", i, math, a, db);
        else if (zb)
            outf(g, "%s(s%d, s%d) * %s", g->py ? "_dpow" : "hamel_dpow", a, b, da);
        else
            outf(g, "%s(s%d, s%d) * %s + s%d * %slog(s%d) * %s", g->py ? "_dpow" : "hamel_dpow", a, b, da, i,
                 math, a, db);
        break;
    case TAPE_SQRT: outf(g, "0.5 / s%d * %s", i, da); break;
    case TAPE_EXP: outf(g, "s%d * %s", i, da); break;
    case TAPE_LOG: outf(g, "%s / s%d", da, a); break;
    case TAPE_SIN: outf(g, "%scos(s%d) * %s", math, a, da); break;
    case TAPE_COS: outf(g, "-%ssin(s%d) * %s", math, a, da); break;
    case TAPE_TAN: outf(g, "(1.0 + s%d * s%d) * %s", i, i, da); break;
    case TAPE_ASIN: outf(g, "1.0 / %ssqrt(1.0 - s%d * s%d) * %s", math, a, a, da); break;
    case TAPE_ACOS: outf(g, "-1.0 / %ssqrt(1.0 - s%d * s%d) * %s", math, a, a, da); break;
    case TAPE_ATAN: outf(g, "1.0 / (1.0 + s%d * s%d) * %s", a, a, da); break;
    case TAPE_ATAN2: /* atan2(y = a, x = b): (x dy - y dx) / (x^2 + y^2) */
        if (za)
            outf(g, "-s%d / (s%d * s%d + s%d * s%d) * %s", a, a, a, b, b, db);
        else if (zb)
            outf(g, "s%d / (s%d * s%d + s%d * s%d) * %s", b, a, a, b, b, da);
        else
            outf(g, "(s%d * %s - s%d * %s) / (s%d * s%d + s%d * s%d)", b, da, a, db, a, a, b, b);
        break;
    case TAPE_SINH: outf(g, "%scosh(s%d) * %s", math, a, da); break;
    case TAPE_COSH: outf(g, "%ssinh(s%d) * %s", math, a, da); break;
    case TAPE_TANH: outf(g, "(1.0 - s%d * s%d) * %s", i, i, da); break;
    case TAPE_ABS: outf(g, "%s(s%d) * %s", g->py ? "_sign" : "hamel_sign", a, da); break;
    case TAPE_SIGN: outf(g, "0.0 * %s", da); break;
    default: g->err = 1; return;
    }
    puts_(g, g->py ? "\n" : ";\n");
}

/* One value function: C `static void hamel_<f>(const double *in, double *out)`,
 * Python `def _<f>(inp)` returning the list of outputs. */
static void tape_function(gen *g, const tape_view *v)
{
    const tape *t = v->t;
    if (g->py) {
        outf(g, "\n\ndef _%s(inp):\n    \"\"\"%s (%d slots).\"\"\"\n", v->fname, v->what, t->n_ins);
        tape_values(g, v);
        puts_(g, "    return [");
        for (int o = 0; o < t->n_outputs; o++)
            outf(g, "%ss%d", o ? ", " : "", t->outputs[o]);
        puts_(g, "]\n");
        return;
    }
    outf(g, "\n/* %s (%d slots). */\nstatic void hamel_%s(const double *in, double *out)\n{\n", v->what,
         t->n_ins, v->fname);
    tape_values(g, v);
    for (int o = 0; o < t->n_outputs; o++)
        outf(g, "    out[%d] = s%d;\n", o, t->outputs[o]);
    puts_(g, "}\n");
}

/* One tangent function: the values and their derivatives along HAMEL_ND directions,
 * din[a * HAMEL_ND + d] (C) / din[a] a numpy vector (Python) for every input a with
 * has_tan[a] (the others carry none). C `static int hamel_<f>_d(in, din, out, dout)`,
 * 0 or -1 (out of memory); Python `def _<f>_d(inp, din)` returning (out, dout). */
static void tangent_function(gen *g, const tape_view *v, const char *has_tan)
{
    const tape *t = v->t;
    char *nz = tangent_mask(t, has_tan);
    if (!nz) {
        g->err = 1;
        return;
    }
    if (g->py) {
        outf(g, "\n\ndef _%s_d(inp, din):\n    \"\"\"%s, and its tangents along din.\"\"\"\n", v->fname,
             v->what);
        tape_values(g, v);
        for (int i = 0; i < t->n_ins && !g->err; i++)
            if (nz[i])
                tangent_stmt(g, t, nz, i);
        puts_(g, "    return [");
        for (int o = 0; o < t->n_outputs; o++)
            outf(g, "%ss%d", o ? ", " : "", t->outputs[o]);
        puts_(g, "], [");
        for (int o = 0; o < t->n_outputs; o++) {
            if (nz[t->outputs[o]])
                outf(g, "%sd%d", o ? ", " : "", t->outputs[o]);
            else
                outf(g, "%s_ZERO", o ? ", " : "");
        }
        puts_(g, "]\n");
        free(nz);
        return;
    }
    outf(g,
         "\n/* %s, with tangents along HAMEL_ND directions: din[a * HAMEL_ND + d] for input a,\n"
         " * dout[o * HAMEL_ND + d] for output o. Returns 0, or -1 when out of memory. */\n"
         "static int hamel_%s_d(const double *in, const double *din, double *out, double *dout)\n{\n"
         "    double *ds = malloc(sizeof(double) * %d * HAMEL_ND);\n    int d;\n"
         "    if (!ds)\n        return -1;\n",
         v->what, v->fname, t->n_ins);
    tape_values(g, v);
    for (int i = 0; i < t->n_ins && !g->err; i++)
        if (nz[i])
            tangent_stmt(g, t, nz, i);
    for (int o = 0; o < t->n_outputs; o++) {
        outf(g, "    out[%d] = s%d;\n", o, t->outputs[o]);
        if (nz[t->outputs[o]])
            outf(g, "    L dout[%d * HAMEL_ND + d] = T(%d)[d];\n", o, t->outputs[o]);
        else
            outf(g, "    L dout[%d * HAMEL_ND + d] = 0.0;\n", o);
    }
    puts_(g, "    free(ds);\n    return 0;\n}\n");
    free(nz);
}

/* ---- the fixed parts ------------------------------------------------------------- */

#include "export_c.inc"
#include "export_py.inc"

/* Writes `tmpl`, with every "%FILL%" replaced by c_fill_in. */
static void put_template(gen *g, const char *tmpl)
{
    const char *s = tmpl, *at;
    while ((at = strstr(s, "%FILL%"))) {
        put(g, s, (size_t)(at - s));
        puts_(g, c_fill_in);
        s = at + 6;
    }
    puts_(g, s);
}

/* ---- the file --------------------------------------------------------------------- */

static int stepper_known(const char *m)
{
    static const char *const names[] = {"rk2",    "rk4",    "rkf45", "rkck",    "rk8pd", "rk1imp",
                                        "rk2imp", "rk4imp", "bsimp", "msadams", "msbdf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(m, names[i]) == 0)
            return 1;
    return 0;
}

/* Whether the file carries the request's events: the user's, when they read no
 * constraint force (those need the multipliers, which the file does not compute). */
static int events_carried(const sim_request *req)
{
    return req && req->n_ev_user > 0 && req->ev_tape && !req->ev_lam;
}

/* The events' names, directions and actions, and the function that evaluates them at
 * (t, y): q' from the kinematics into the velocity slots, then the events' tape. */
static void events_code(gen *g, const struct engine_model *m, const sim_request *req)
{
    int ne = req->n_ev_user;
    tape_view ve = {m, req->ev_tape, "events", "the request's event functions g [events] from (p, t, q, q')",
                    1};
    tape_function(g, &ve);
    if (g->py) {
        puts_(
            g,
            "\n\n# The request's events: (name, direction: 1 rising, -1 falling, 0 both, stop).\nEVENTS = [");
        for (int i = 0; i < ne; i++) {
            puts_(g, i ? ",\n          (" : "(");
            string_lit(g, req->ev_names[i]);
            outf(g, ", %d, %s)", req->ev_dir[i], req->ev_stop[i] ? "True" : "False");
        }
        puts_(g, "]\n\n\ndef event_values(t, y, p=None):\n"
                 "    \"\"\"The request's event functions at (t, y), in EVENTS' order.\"\"\"\n"
                 "    inp = _inputs(t, y, p)\n"
                 "    inp[_NP + 1 + _NQ:] = [float(v) for v in kinematics(t, y[:_NQ], y[_NQ:], p)]\n");
        outf(g, "    return _events(inp + [0.0] * %d)  # constraint forces: not read\n",
             req->ev_tape->n_inputs - m->n_in);
        return;
    }
    outf(g,
         "\n#define HAMEL_NEV %d /* the request's events */\n"
         "#define HAMEL_NEV_IN %d /* their tape's inputs: p, t, q, q', then constraint forces (not read) */\n"
         "const char *const hamel_event_names[HAMEL_NEV] = {",
         ne, req->ev_tape->n_inputs);
    for (int i = 0; i < ne; i++) {
        puts_(g, i ? ", " : "");
        string_lit(g, req->ev_names[i]);
    }
    puts_(g, "};\n/* 1 rising, -1 falling, 0 both */\nstatic const int hamel_event_dir[HAMEL_NEV] = {");
    for (int i = 0; i < ne; i++)
        outf(g, "%s%d", i ? ", " : "", req->ev_dir[i]);
    puts_(
        g,
        "};\n/* 1: the run ends at its first crossing */\nstatic const int hamel_event_stop[HAMEL_NEV] = {");
    for (int i = 0; i < ne; i++)
        outf(g, "%s%d", i ? ", " : "", req->ev_stop[i] ? 1 : 0);
    puts_(g, "};\n\n/* The request's event functions g[HAMEL_NEV] at (t, y) with parameters p. Returns 0,\n"
             " * or -1 where the kinematics cannot be solved. */\n"
             "int hamel_event_values(double t, const double *y, const double *p, double *g)\n{\n"
             "    double in[HAMEL_NEV_IN];\n"
             "    memset(in, 0, sizeof in);\n"
             "    memcpy(in, p, sizeof(double) * HAMEL_NP);\n"
             "    in[HAMEL_NP] = t;\n"
             "    memcpy(in + HAMEL_NP + 1, y, sizeof(double) * HAMEL_NQ);\n"
             "    if (hamel_kinematics(t, y, y + HAMEL_NQ, p, in + HAMEL_NP + 1 + HAMEL_NQ) != 0)\n"
             "        return -1;\n"
             "    hamel_events(in, g);\n"
             "    return 0;\n}\n");
}

/* The header comment: what the file is, its model and request, its state layout. */
static void header(gen *g, const struct engine_model *m, const sim_request *req, const char *name,
                   const char *description, int reduced)
{
    const char *c0 = g->py ? "#" : " *";
    if (!g->py)
        puts_(g, "/*\n");
    outf(g, "%s Generated by hamel %s (engine/run/export.c) from model ", c0, ENGINE_VERSION);
    comment_text(g, m->id);
    outf(g, "\n%s model name: ", c0);
    comment_text(g, m->name);
    if (name) {
        outf(g, "\n%s request name: ", c0);
        comment_text(g, name);
    }
    if (description) {
        outf(g, "\n%s description: ", c0);
        comment_text(g, description);
    }
    outf(g, "\n%s\n%s The equations `hamel run` integrates (the Boltzmann-Hamel formulation) on the state\n",
         c0, c0);
    outf(g, "%s y = [q (%d coordinates), u (%d speeds)]: %s\n", c0, m->n, m->k,
         reduced ? "the symbolically reduced equations," : "the numeric path,");
    outf(g, "%s q' = %s and M* u' = F, one linear solve per evaluation%s.\n", c0,
         reduced ? "K(t, q, u)" : "Psi^-1 ([u; 0] - Psi_t)",
         reduced && m->fast_mass_const ? " (M* depends on the parameters only)" : "");
    if (m->npos)
        outf(g,
             "%s Position-level constraints are not projected here (hamel run projects drift past\n"
             "%s position_tolerance); the initial state is the one hamel solved for.\n",
             c0, c0);
    outf(g, "%s State:", c0);
    for (int i = 0; i < m->n + m->k; i++) {
        if (i % 4 == 0)
            outf(g, "\n%s  ", c0);
        outf(g, " y[%d] = %s ", i, i < m->n ? "coordinate" : "speed");
        comment_text(g, i < m->n ? m->coords[i] : m->speeds[i - m->n]);
        puts_(g, ";");
    }
    outf(g,
         "\n%s Tapes are straight-line code, one slot s<i> per instruction, on the inputs\n"
         "%s in = [p (parameters), t, q, q'] (each speed in the slot of a velocity).\n",
         c0, c0);
    if (req)
        outf(g, "%s The request's initial state, parameters, sample times and tolerances are baked in.\n",
             c0);
    if (req && events_carried(req))
        outf(g,
             "%s The request's events are carried: the main stops at the first crossing of a stop\n"
             "%s event, with a last row at its time, located as hamel run locates it (Brent's method\n"
             "%s on a re-integration from the step's start%s); signs are compared at the\n"
             "%s ends of each step only (hamel run also looks inside each step). Each crossing is\n"
             "%s printed on standard error.%s\n",
             c0, c0, c0, g->py ? "; here scipy's dense output" : "", c0, c0,
             req->n_con ? " Contact checks are not carried." : "");
    else if (req && req->n_ev > 0)
        outf(g, "%s The request's %s not carried: the main integrates to t_end.\n", c0,
             req->n_ev_user == 0 ? "contact checks are"
             : req->n_con        ? "events (they read constraint forces) and contact checks are"
                                 : "events are (they read constraint forces)");
    outf(g, "%s The speeds are fixed here%s.\n", c0,
         m->default_speeds ? " (the engine's default choice of velocities)" : "");
    outf(g,
         "%s Where they stop determining q' (Psi singular: a knife edge turning through 90\n"
         "%s degrees with x' as its speed) hamel run %s;\n"
         "%s this file integrates on through the singularity and loses accuracy there.\n",
         c0, c0,
         m->default_speeds ? "chooses other velocities (stats.speed_switches > 0)"
                           : "stops with a 422 that says so",
         c0);
    puts_(g, g->py ? "\n" : " */\n");
}

/* Sizes, names and parameter values (C #defines and arrays / Python globals). */
static void constants(gen *g, const struct engine_model *m, const sim_request *req, int reduced)
{
    int n = m->n, k = m->k, np = m->np;
    const double *pv = req ? req->params : m->param_values;
    int f0 = m->fast_mass_const ? n : n + k * (k + 1) / 2;
    if (g->py) {
        outf(g,
             "\n_NQ, _NU, _NP = %d, %d, %d\n_NY = _NQ + _NU\n_ND = _NY + 1  # tangent directions: q, u, t\n",
             n, k, np);
        puts_(g, "\n# The state's names: every coordinate, then every speed.\nSTATE = [");
        for (int i = 0; i < n + k; i++) {
            puts_(g, i ? ", " : "");
            string_lit(g, i < n ? m->coords[i] : m->speeds[i - n]);
        }
        puts_(g,
              "]\n\n# The parameters and their values (the request's where it sets them).\nPARAMETERS = {");
        for (int a = 0; a < np; a++) {
            puts_(g, a ? ",\n              " : "");
            string_lit(g, m->params[a]);
            puts_(g, ": ");
            num(g, pv[a]);
        }
        puts_(g, "}\n");
        if (reduced) {
            outf(g, "_MASS_CONST = %s\n_F0 = %d  # F's first output\n_U_SLOT = [",
                 m->fast_mass_const ? "True" : "False", f0);
            for (int r = 0; r < k; r++)
                outf(g, "%s%d", r ? ", " : "", m->u_slot[r]);
            puts_(g, "]  # the input slot of each speed\n");
        }
        return;
    }
    outf(g, "\n#define HAMEL_NQ %d /* coordinates */\n#define HAMEL_NU %d /* speeds */\n", n, k);
    outf(g, "#define HAMEL_NY %d /* state: q, then u */\n#define HAMEL_NP %d /* parameters */\n", n + k, np);
    outf(g, "#define HAMEL_NIN %d /* tape inputs: p, t, q, q' */\n", m->n_in);
    puts_(g, "#define HAMEL_ND (HAMEL_NY + 1) /* tangent directions: q, u, t */\n");
    if (reduced) {
        outf(g, "#define HAMEL_NFAST %d /* hamel_fast's outputs */\n#define HAMEL_F0 %d /* F's first */\n",
             m->tape_fast->n_outputs, f0);
        outf(g, "#define HAMEL_MASS_CONST %d\n", m->fast_mass_const);
        puts_(g, "/* the input slot of each speed */\nstatic const int hamel_u_slot[HAMEL_NU + 1] = {");
        for (int r = 0; r < k; r++)
            outf(g, "%d, ", m->u_slot[r]);
        puts_(g, "0};\n");
    } else {
        outf(g, "#define HAMEL_NDYN %d /* hamel_dyn's outputs: M upper, g, b */\n", m->tape_dyn->n_outputs);
    }
    puts_(g, "\n/* The state's names: every coordinate, then every speed. */\n"
             "const char *const hamel_state_names[HAMEL_NY] = {");
    for (int i = 0; i < n + k; i++) {
        puts_(g, i ? ", " : "");
        string_lit(g, i < n ? m->coords[i] : m->speeds[i - n]);
    }
    puts_(g, "};\n/* The parameters by name and their values (the request's where it sets them);\n"
             " * the macros name each one. */\nconst char *const hamel_parameter_names[HAMEL_NP + 1] = {");
    for (int a = 0; a < np; a++) {
        string_lit(g, m->params[a]);
        puts_(g, ", ");
    }
    puts_(g, "0};\nconst double hamel_p[HAMEL_NP + 1] = {");
    for (int a = 0; a < np; a++) {
        num(g, pv[a]);
        puts_(g, ", ");
    }
    puts_(g, "0.0};\n");
    for (int a = 0; a < np; a++) {
        puts_(g, "#define HAMEL_");
        ident(g, "P", a, m->params[a]);
        outf(g, " %d\n", a);
    }
}

/* The baked request: initial state, times, tolerances, stepper. */
static void baked(gen *g, const struct engine_model *m, const sim_request *req)
{
    int n = m->n, k = m->k;
    if (g->py) {
        puts_(g, "\n# The request's initial time, state, sample times and tolerances.\nT0 = ");
        num(g, req->t0);
        puts_(g, "\n_Y0 = [");
        for (int i = 0; i < n + k; i++) {
            puts_(g, i ? ", " : "");
            num(g, i < n ? req->q0[i] : req->u0[i - n]);
        }
        puts_(g, "]\nTIMES = [");
        for (int s = 0; s < req->n_times; s++) {
            puts_(g, s ? ", " : "");
            num(g, req->times[s]);
        }
        puts_(g, "]\nRTOL = ");
        num(g, req->rtol);
        puts_(g, "\nATOL = ");
        num(g, req->atol);
        puts_(g, "\n\n\ndef initial_state():\n    \"\"\"The request's initial y (coordinates, then "
                 "speeds).\"\"\"\n"
                 "    return np.array(_Y0)\n");
        return;
    }
    puts_(g, "\n/* The request: initial time and state, sample times, tolerances, stepper. */\n"
             "static const double hamel_t0 = ");
    num(g, req->t0);
    puts_(g, ";\nstatic const double hamel_y0[HAMEL_NY] = {");
    for (int i = 0; i < n + k; i++) {
        puts_(g, i ? ", " : "");
        num(g, i < n ? req->q0[i] : req->u0[i - n]);
    }
    outf(g, "};\n#define HAMEL_NTIMES %d\nstatic const double hamel_times[HAMEL_NTIMES] = {", req->n_times);
    for (int s = 0; s < req->n_times; s++) {
        puts_(g, s ? ", " : "");
        if (s % 8 == 7)
            puts_(g, "\n    ");
        num(g, req->times[s]);
    }
    puts_(g, "};\nstatic const double hamel_rtol = ");
    num(g, req->rtol);
    puts_(g, ", hamel_atol = ");
    num(g, req->atol);
    puts_(g, ", hamel_h0 = ");
    num(g, req->h0);
    outf(g, ";\nstatic const long hamel_max_steps = %ld;\n#define HAMEL_STEPPER gsl_odeiv2_step_%s\n",
         req->max_steps > 0 ? req->max_steps : INTEG_DEFAULT_MAX_STEPS,
         stepper_known(req->method) ? req->method : "rk8pd");
}

int export_source(const struct engine_model *m, const sim_request *req, int lang, const char *name,
                  const char *description, char **text, size_t *len, json_t **problem)
{
    *text = NULL;
    *problem = NULL;
    if (m->nl_reduced || m->nlin != m->nc) {
        hamel_problem_addf(problem, HAMEL_E_FORMULATION, "model.constraints",
                           "generated code carries the Boltzmann-Hamel equations of linear constraints; "
                           "this model has nonlinear ones");
        return HAMEL_E_FORMULATION;
    }
    if (req && req->formulation != SIM_HAMEL) {
        hamel_problem_addf(problem, HAMEL_E_FORMULATION, "formulation",
                           "generated code carries the \"hamel\" formulation only");
        return HAMEL_E_FORMULATION;
    }
    if (m->k == 0) {
        hamel_problem_addf(problem, HAMEL_E_FORMULATION, "model.speeds",
                           "the model has no independent speed");
        return HAMEL_E_FORMULATION;
    }
    int reduced = m->tape_fast != NULL;
    gen g = {NULL, 0, 0, 0, lang == EXPORT_PYTHON};
    char *has_tan = calloc((size_t)m->n_in + 1, 1);
    if (!has_tan)
        g.err = 1;
    /* every input but the parameters carries tangents (t, q, q' or the speeds) */
    for (int a = m->np; a < m->n_in && has_tan; a++)
        has_tan[a] = 1;
    header(&g, m, req, name, description, reduced);
    if (g.py) {
        puts_(&g, py_prelude);
        constants(&g, m, req, reduced);
        puts_(&g, py_common);
    } else {
        constants(&g, m, req, reduced);
        puts_(&g, c_prelude);
    }
    if (reduced && has_tan) {
        tape_view vf = {m, m->tape_fast, "fast",
                        m->fast_mass_const ? "q' [n], F [k] from (p, t, q, u)"
                                           : "q' [n], M* upper triangle [k(k+1)/2], F [k] from (p, t, q, u)",
                        0};
        tape_function(&g, &vf);
        tangent_function(&g, &vf, has_tan);
        if (m->fast_mass_const) {
            tape_view vm = {m, m->tape_mass, "mass", "M* upper triangle [k(k+1)/2] from p", 0};
            tape_function(&g, &vm);
        }
    } else if (has_tan) {
        tape_view vp = {m, m->tape_psi, "psi",
                        "Psi [n*n] (rows: speeds, then constraints), Psi_t [n] from (p, t, q)", 0};
        tape_view vd = {m, m->tape_dyn, "dyn", "M upper triangle [n(n+1)/2], g [n], b [n] from (p, t, q, q')",
                        0};
        tape_function(&g, &vp);
        tangent_function(&g, &vp, has_tan);
        tape_function(&g, &vd);
        tangent_function(&g, &vd, has_tan);
    }
    if (g.py) {
        puts_(&g, reduced ? py_reduced : py_numeric);
        if (req) {
            baked(&g, m, req);
            if (events_carried(req))
                events_code(&g, m, req);
            puts_(&g, events_carried(req) ? py_main_events : py_main);
        } else {
            puts_(&g, py_initial_state);
        }
    } else {
        put_template(&g, reduced ? c_reduced : c_numeric);
        puts_(&g, "\n#undef T\n#undef L\n");
        if (req) {
            baked(&g, m, req);
            if (events_carried(req))
                events_code(&g, m, req);
            puts_(&g, events_carried(req) ? c_main_events : c_main);
        }
    }
    free(has_tan);
    if (g.err) {
        free(g.p);
        hamel_problem_addf(problem, HAMEL_E_LIMIT, "model",
                           "the generated file would exceed %zu bytes (or memory ran out)",
                           (size_t)EXPORT_MAX_BYTES);
        return HAMEL_E_LIMIT;
    }
    *text = g.p;
    *len = g.len;
    return 0;
}
