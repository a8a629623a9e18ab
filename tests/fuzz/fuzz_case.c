/* fuzz_case.c — libFuzzer target for a whole case: a model and what is asked of it.
 *
 * The input is JSON text: a case file {"model", "simulation"?, "hamel"?, "linearize"?,
 * "evaluate"?, "steady"?} (as `hamel run|gamma|linearize|...` read them), a simulation
 * request with its "model", or a bare model. The model is compiled with the default
 * limits (a shorter compile budget); when it compiles, everything the CLI and the
 * service do with one is asked of it: the summary, the equations in every form, the
 * Hamel coefficients at the initial configuration, the simulation check and the run,
 * linearization, evaluation, a steady motion and the exported code. Each must answer a
 * result or a problem document whose errors name a path — never crash, leak, hang or
 * go past its budget (a call taking more than FUZZ_CALL_SECONDS aborts, so libFuzzer
 * keeps the input).
 *
 * LLVMFuzzerCustomMutator mutates the JSON tree rather than its bytes: expression
 * strings at the character level (operators doubled, huge, negative and fractional
 * exponents, deep parentheses, unicode, extreme numbers, names of functions), numbers
 * replaced by extremes or other types, members dropped, array elements duplicated
 * (dependent constraints) or dropped (speeds that do not span), and members spliced in
 * from the other inputs (LLVMFuzzerCustomCrossOver).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"

#define FUZZ_MAX_INPUT (96 * 1024)
/* Every call is under a budget of about a second here (the compile's 1 s of CPU time
 * with its wall-clock backstop of 4 s, a run's 2 s of wall time): one taking longer than
 * this does work outside its budget. FUZZ_CALL_SECONDS in the environment sets another
 * bound (the test command's fuzz section gives a loaded machine more). */
static double call_seconds = 8.0;

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static engine_limits lim;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail(const char *who, const char *what, const json_t *doc)
{
    char *dump = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    fprintf(stderr, "fuzz_case: %s: %s\n  %.4000s\n", who, what, dump ? dump : "");
    abort();
}

/* rc and the two out-parameters agree: 0 with a result, else a problem of the engine's
 * types whose errors (for an input's error) each name a path and a reason. */
static void check_problem(const char *who, json_t *problem)
{
    const char *type = json_string_value(json_object_get(problem, "type"));
    if (!type || strncmp(type, HAMEL_PROBLEM_TYPE_PREFIX, strlen(HAMEL_PROBLEM_TYPE_PREFIX)) != 0)
        fail(who, "a problem without the engine's type", problem);
    int code = hamel_problem_code(problem);
    if (code == HAMEL_E_INTERNAL)
        return;
    json_t *errs = json_object_get(problem, "errors");
    if (!json_is_array(errs))
        fail(who, "a problem without an errors array", problem);
    /* An error of the input names where it is; a run's failure (a limit reached, the
     * integrator or the formulation unable) may say it in the detail alone. */
    int of_input = code == HAMEL_E_BAD_JSON || code == HAMEL_E_BAD_REQUEST || code == HAMEL_E_INVALID_MODEL ||
                   code == HAMEL_E_PARSE || code == HAMEL_E_NONLINEAR_SPEED || code == HAMEL_E_SINGULAR ||
                   code == HAMEL_E_BAD_INITIAL || code == HAMEL_E_LIMIT;
    const char *detail = json_string_value(json_object_get(problem, "detail"));
    if (!strcmp(who, "simulate")) /* its request passed the check: what fails is the run */
        of_input = 0;
    if (json_array_size(errs) == 0 && (of_input || !detail || !*detail))
        fail(who, "a problem of the input without errors (or a failure without a detail)", problem);
    for (size_t i = 0; i < json_array_size(errs); i++) {
        json_t *e = json_array_get(errs, i);
        const char *path = json_string_value(json_object_get(e, "path"));
        const char *reason = json_string_value(json_object_get(e, "reason"));
        if (!path || !reason || !*reason)
            fail(who, "an error without path or reason", problem);
    }
}

static void outcome(const char *who, double t0, int rc, json_t *result, json_t *problem)
{
    double dt = now_s() - t0;
    if (dt > call_seconds) {
        char what[80];
        snprintf(what, sizeof what, "took %.1f s", dt);
        fail(who, what, NULL);
    }
    if (rc == 0) {
        if (!result || problem)
            fail(who, "0 without a result, or with a problem", problem);
    } else {
        if (result || !problem)
            fail(who, "an error without a problem, or with a result", result);
        check_problem(who, problem);
    }
    json_decref(result);
    json_decref(problem);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    engine_init();
    const char *cs = getenv("FUZZ_CALL_SECONDS");
    if (cs && atof(cs) > 0)
        call_seconds = atof(cs);
    lim = engine_default_limits;
    lim.max_compile_seconds = 1.0;
    lim.max_wall_seconds = 2.0; /* the rest as the service's: a size past them is a finding */
    return 0;
}

/* {"t"?, "q", "speeds"|"qdot", "parameters"?} from the simulation's initial state. */
static json_t *state_request(const json_t *sim, int with_speeds)
{
    json_t *r = json_object();
    const json_t *init = json_object_get(sim, "initial");
    const char *keys[] = {"t", "q", with_speeds ? "speeds" : NULL, with_speeds ? "qdot" : NULL};
    for (int i = 0; i < 4; i++)
        if (keys[i] && json_object_get(init, keys[i]))
            json_object_set(r, keys[i], json_object_get(init, keys[i]));
    if (json_object_get(sim, "parameters"))
        json_object_set(r, "parameters", json_object_get(sim, "parameters"));
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        return 0;
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)data, size, 0, &jerr);
    if (!doc)
        return 0;
    json_t *model = json_object_get(doc, "model");
    json_t *sim = json_object_get(doc, "simulation");
    if (!model) {
        model = doc;
        sim = NULL;
    } else if (!sim) {
        sim = doc;
    }
    engine_model *m = NULL;
    json_t *problem = NULL, *result = NULL;
    double t0 = now_s();
    json_t *unknown = engine_model_unknown_members(model); /* the service's, in its own process */
    if (!json_is_array(unknown))
        fail("unknown members", "not an array", model);
    json_decref(unknown);
    int rc = engine_model_compile(model, &lim, &m, &problem);
    if (rc == 0) {
        if (!m || problem)
            fail("compile", "0 without a model, or with a problem", problem);
        outcome("summary", t0, 0, engine_model_summary(m), NULL);
    } else {
        if (m)
            fail("compile", "an error with a model", NULL);
        outcome("compile", t0, rc, NULL, problem);
        json_decref(doc);
        return 0;
    }

    static const char *const forms[] = {"hamel", "appell", "kane", "maggi", "voronec"};
    t0 = now_s();
    rc = engine_equations(m, &result, &problem);
    outcome("equations", t0, rc, result, problem);
    for (int i = 0; i < 5; i++) {
        result = problem = NULL;
        t0 = now_s();
        rc = engine_equations_form_ctl(m, forms[i], &lim, NULL, &result, &problem);
        outcome(forms[i], t0, rc, result, problem);
    }

    json_t *empty = json_object();
    const json_t *s = sim ? sim : empty;
    json_t *h = json_object_get(doc, "hamel");
    json_t *hreq = json_is_object(h) ? json_incref(h) : state_request(s, 1);
    result = problem = NULL;
    t0 = now_s();
    rc = engine_hamel(m, hreq, &lim, &result, &problem);
    outcome("hamel", t0, rc, result, problem);
    json_decref(hreq);

    if (sim) {
        char key[80];
        problem = NULL;
        rc = engine_simulation_key(m, sim, key, &problem);
        outcome("key", now_s(), rc, rc == 0 ? json_string(key) : NULL, problem);
        problem = NULL;
        t0 = now_s();
        rc = engine_simulation_check(m, sim, &lim, &problem);
        outcome("check", t0, rc, rc == 0 ? json_true() : NULL, problem);
        engine_control ctl;
        memset(&ctl, 0, sizeof ctl);
        atomic_init(&ctl.cancel, 0);
        atomic_init(&ctl.progress, 0.0);
        result = problem = NULL;
        t0 = now_s();
        rc = engine_simulate(m, sim, &lim, &ctl, &result, &problem);
        outcome("simulate", t0, rc, result, problem);
        char *text = NULL;
        size_t len = 0;
        problem = NULL;
        t0 = now_s();
        rc = engine_code(m, sim, (size & 1) ? "python" : "c", &lim, &text, &len, &problem);
        if (rc == 0 && (!text || strlen(text) != len))
            fail("code", "text and length disagree", NULL);
        free(text);
        outcome("code", t0, rc, rc == 0 ? json_true() : NULL, problem);
    }

    static const char *const asks[] = {"linearize", "evaluate", "steady"};
    for (int i = 0; i < 3; i++) {
        json_t *r = json_object_get(doc, asks[i]);
        if (json_is_object(r))
            json_incref(r);
        else if (i == 0)
            r = state_request(s, 1);
        else if (i == 1)
            r = json_pack("{s:[o]}", "states", state_request(s, 1));
        else
            continue;
        result = problem = NULL;
        t0 = now_s();
        rc = i == 0   ? engine_linearize(m, r, &lim, NULL, &result, &problem)
             : i == 1 ? engine_evaluate(m, r, &lim, &result, &problem)
                      : engine_steady(m, r, &lim, NULL, &result, &problem);
        outcome(asks[i], t0, rc, result, problem);
        json_decref(r);
    }
    json_decref(empty);
    engine_model_release(m);
    json_decref(doc);
    return 0;
}

/* ---- the structure-aware mutator ------------------------------------------------------- */

static uint64_t rng;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t pick(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

#define MAX_LEAVES 4096

typedef struct leaf {
    json_t *parent; /* object or array holding it (NULL: the root) */
    const char *key;
    size_t index;
    json_t *value;
} leaf;

typedef struct leaves {
    leaf v[MAX_LEAVES];
    size_t n;
} leaves;

static void collect(json_t *parent, const char *key, size_t index, json_t *v, leaves *out)
{
    if (out->n < MAX_LEAVES)
        out->v[out->n++] = (leaf){parent, key, index, v};
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach(v, k, c) collect(v, k, 0, c, out);
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            collect(v, NULL, i, json_array_get(v, i), out);
    }
}

static void put(const leaf *l, json_t *nv)
{
    if (!l->parent) {
        json_decref(nv);
        return;
    }
    if (json_is_object(l->parent))
        json_object_set_new(l->parent, l->key, nv);
    else
        json_array_set_new(l->parent, l->index, nv);
}

static const char *const numbers_txt[] = {"1e308",
                                          "1e-320",
                                          "-0",
                                          "0",
                                          "4.9e-324",
                                          "1e309",
                                          "-1e308",
                                          "1e154",
                                          "2^1024",
                                          "1e-154",
                                          "123456789012345678901234567890",
                                          "0.5",
                                          "-1",
                                          "1e-16",
                                          "(0)",
                                          "(-0)",
                                          "0.0",
                                          "9e15",
                                          "1e-300"};
static const char *const exps_txt[] = {"1e308", "-1", "0.5", "-0.5",    "83905",  "1e6", "-1e308",
                                       "(1/3)", "0",  "-0",  "2097152", "1e-320", "-2",  "x",
                                       "x'",    "t",  "pi",  "(-1)",    "1e15",   "2.5"};
static const char *const idents[] = {"sin",   "cos",       "exp", "log", "sqrt", "abs",   "pow", "atan2",
                                     "t",     "pi",        "e",   "inf", "nan",  "x",     "x'",  "x''",
                                     "q",     "lambda_c1", "t'",  "pi'", "sin'", "m",     "m'",  "g",
                                     "theta", "theta'",    "NaN", "tan", "asin", "acosh", "u",   "E1"};
static const char *const funcs[] = {"sin",  "cos",  "tan",  "sec",   "csc",  "cot", "asin",
                                    "acos", "atan", "sinh", "cosh",  "tanh", "exp", "log",
                                    "sqrt", "abs",  "pow",  "atan2", "foo"};
static const char *const inserts[] = {"+",
                                      "-",
                                      "*",
                                      "/",
                                      "^",
                                      "**",
                                      "'",
                                      "(",
                                      ")",
                                      ",",
                                      "^^",
                                      "--",
                                      "//",
                                      "''",
                                      "e",
                                      ".",
                                      "..",
                                      " ",
                                      "\t",
                                      "\n",
                                      "\xc3\xa9",
                                      "\xc2\xa0",
                                      "\xce\xb8",
                                      "\xe2\x80\x8b",
                                      "\xef\xbb\xbf",
                                      "\xe2\x88\x92",
                                      "\xf0\x9f\x98\x80",
                                      "1e",
                                      "0x10",
                                      "1_000",
                                      "#",
                                      ";",
                                      "==",
                                      "=",
                                      "<",
                                      "!",
                                      "[",
                                      "]",
                                      "{",
                                      "}",
                                      "\"",
                                      "\\",
                                      "%",
                                      "&",
                                      "|",
                                      "$",
                                      "@"};

/* Appends to a bounded buffer. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *p, size_t n)
{
    if (b->n + n + 1 > b->cap)
        n = b->cap > b->n + 1 ? b->cap - b->n - 1 : 0;
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void sb_str(sbuf *b, const char *p) { sb_add(b, p, strlen(p)); }

static json_t *mutate_string(const char *s, const leaves *all)
{
    size_t len = strlen(s), cap = len * 3 + 8192;
    sbuf b = {malloc(cap), 0, cap};
    if (!b.s)
        return NULL;
    b.s[0] = 0;
    size_t at = pick(len + 1);
    switch (pick(15)) {
    case 0: /* insert an operator or an odd character */
        sb_add(&b, s, at);
        sb_str(&b, inserts[pick(sizeof inserts / sizeof *inserts)]);
        sb_str(&b, s + at);
        break;
    case 1: /* double a character (an operator doubled) */
        sb_add(&b, s, at < len ? at + 1 : at);
        sb_str(&b, s + at);
        break;
    case 2: { /* a number replaced by an extreme */
        size_t i = at;
        while (i < len && !(s[i] >= '0' && s[i] <= '9'))
            i++;
        size_t j = i;
        while (j < len && ((s[j] >= '0' && s[j] <= '9') || s[j] == '.' || s[j] == 'e'))
            j++;
        sb_add(&b, s, i);
        sb_str(&b, numbers_txt[pick(sizeof numbers_txt / sizeof *numbers_txt)]);
        sb_str(&b, s + j);
        break;
    }
    case 3: /* a power: huge, negative, fractional */
        if (pick(2)) {
            sb_str(&b, "(");
            sb_str(&b, s);
            sb_str(&b, ")^");
        } else {
            sb_add(&b, s, at);
            sb_str(&b, "^");
        }
        sb_str(&b, exps_txt[pick(sizeof exps_txt / sizeof *exps_txt)]);
        if (!pick(2) || at == len)
            break;
        sb_str(&b, s + at);
        break;
    case 4: { /* deep parentheses */
        size_t k = pick(3) ? 1 + pick(40) : 1 + pick(3000);
        for (size_t i = 0; i < k; i++)
            sb_str(&b, "(");
        sb_str(&b, s);
        for (size_t i = 0; i < k && !(pick(50) == 0 && i == k - 1); i++)
            sb_str(&b, ")");
        break;
    }
    case 5: /* an identifier where one stood, or alone */
        if (pick(3) == 0) {
            sb_str(&b, idents[pick(sizeof idents / sizeof *idents)]);
        } else {
            size_t i = at;
            while (i < len && !((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
                i++;
            size_t j = i;
            while (j < len && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                               (s[j] >= '0' && s[j] <= '9') || s[j] == '_'))
                j++;
            sb_add(&b, s, i);
            sb_str(&b, idents[pick(sizeof idents / sizeof *idents)]);
            sb_str(&b, s + j);
        }
        break;
    case 6: { /* a function around it, of the wrong arity now and then */
        const char *f = funcs[pick(sizeof funcs / sizeof *funcs)];
        sb_str(&b, f);
        sb_str(&b, "(");
        sb_str(&b, s);
        int arity = (int)pick(4);
        for (int i = 1; i < arity; i++) {
            sb_str(&b, ",");
            sb_str(&b, pick(2) ? s : idents[pick(sizeof idents / sizeof *idents)]);
        }
        sb_str(&b, ")");
        break;
    }
    case 7: /* truncated */ sb_add(&b, s, at); break;
    case 8: { /* a span deleted */
        size_t to = at + pick(len - at + 1);
        sb_add(&b, s, at);
        sb_str(&b, s + to);
        break;
    }
    case 9: { /* another string of the input, alone or beside */
        const char *o = NULL;
        for (int tries = 0; tries < 8 && !o; tries++) {
            json_t *v = all->v[pick(all->n)].value;
            o = json_string_value(v);
        }
        if (!o)
            o = "x'";
        if (pick(2)) {
            sb_str(&b, o);
        } else {
            sb_str(&b, s);
            sb_str(&b, pick(2) ? " + " : "*");
            sb_str(&b, o);
        }
        break;
    }
    case 10: { /* grown: products, powers and nested functions of itself */
        int k = 1 + (int)pick(6);
        for (int i = 0; i < k; i++) {
            sb_str(&b, i ? (pick(2) ? ")*(" : ")^(") : "(");
            sb_str(&b, s);
        }
        sb_str(&b, ")");
        for (int i = 0; pick(2) && i < k; i++) { /* nested functions of it */
            const char *f = funcs[pick(12)];
            size_t fl = strlen(f);
            if (b.n + fl + 3 >= b.cap)
                break;
            memmove(b.s + fl + 1, b.s, b.n + 1);
            memcpy(b.s, f, fl);
            b.s[fl] = '(';
            b.n += fl + 1;
            sb_str(&b, ")");
        }
        break;
    }
    case 11: /* empty or blank */ sb_str(&b, pick(2) ? "" : "   "); break;
    case 12: /* a velocity made nonlinear, a term added */
        sb_str(&b, s);
        sb_str(&b, (const char *[]){" + x'^2", " + x'*y'", " - (", " + sqrt(x'^2+y'^2)", " + 1e308*x'",
                                    " + 0*x'", " + t", " + lambda_c1", " + abs(x')", " + x'/x'"}[pick(10)]);
        break;
    case 13: { /* a name of another function or keyword */
        sb_str(&b, idents[pick(sizeof idents / sizeof *idents)]);
        break;
    }
    default: { /* a random byte */
        char c = (char)(1 + pick(255));
        sb_add(&b, s, at);
        sb_add(&b, &c, 1);
        sb_str(&b, s + at);
        break;
    }
    }
    json_t *r = json_stringn(b.s, b.n); /* NULL when not UTF-8 */
    free(b.s);
    return r;
}

static json_t *extreme_number(void)
{
    static const double d[] = {
        0.0, -0.0, 1e308, -1e308, 1e-320, 5e-324, 1e9,     1e15,  1e100,  -1,
        0.5, 2,    1e-9,  1e300,  3.0e7,  1e6,    -1e-300, 1e-12, 1e-300, 1.7976931348623157e308};
    static const json_int_t i[] = {0,
                                   -1,
                                   1,
                                   2,
                                   100000,
                                   100001,
                                   1000000,
                                   10000000,
                                   2147483647,
                                   2147483648LL,
                                   4294967297LL,
                                   (json_int_t)1 << 53,
                                   INT64_MAX,
                                   INT64_MIN,
                                   65,
                                   64,
                                   201,
                                   200};
    if (pick(2))
        return json_real(d[pick(sizeof d / sizeof *d)]);
    return json_integer(i[pick(sizeof i / sizeof *i)]);
}

static json_t *other_type(const leaves *all)
{
    switch (pick(8)) {
    case 0: return json_null();
    case 1: return json_true();
    case 2: return json_array();
    case 3: return json_object();
    case 4: return json_string("x");
    case 5: return extreme_number();
    case 6: return json_deep_copy(all->v[pick(all->n)].value);
    default: return json_string("");
    }
}

/* Members worth adding anywhere they fit: what a model or request may hold. */
static json_t *interesting_member(const char **key)
{
    static const char *const j[][2] = {
        {"events", "[{\"name\":\"E1\",\"expr\":\"x\",\"action\":\"stop\"},{\"expr\":\"sin(t)\"}]"},
        {"events",
         "[{\"name\":\"E1\",\"expr\":\"t-1e-300\",\"direction\":1},{\"name\":\"E1\",\"expr\":\"1/0\"}]"},
        {"events", "[{\"expr\":\"sin(1e6*t)\"}]"},
        {"invariants", "[{\"name\":\"I\",\"expr\":\"x'^2\"},{\"name\":\"J\",\"expr\":\"lambda_c1\"}]"},
        {"invariants", "[{\"name\":\"I\",\"expr\":\"1/(t-t)\"}]"},
        {"output", "{\"samples\":100000000}"},
        {"output", "{\"dt\":1e-300}"},
        {"output", "{\"times\":[0,1e308,-1,0.5,0.5]}"},
        {"output", "{\"samples\":2,\"dt\":0.1}"},
        {"t_end", "1e308"},
        {"t_end", "-1"},
        {"t_end", "1e-320"},
        {"formulation", "\"multipliers\""},
        {"hamel", "\"samples\""},
        {"integrator", "{\"method\":\"rk4\",\"h\":1e-300}"},
        {"integrator", "{\"method\":\"msbdf\",\"rtol\":1e-300,\"atol\":0}"},
        {"integrator", "{\"method\":\"rkf45\",\"rtol\":1e308,\"max_steps\":1e15}"},
        {"integrator", "{\"method\":\"bsimp\"}"},
        {"integrator", "{\"method\":\"msadams\",\"max_steps\":-1}"},
        {"parameters", "{\"m\":0,\"r\":-1,\"g\":1e308}"},
        {"parameters", "{\"sin\":1,\"t\":2,\"pi\":3}"},
        {"continuation", "{\"vary\":\"m\",\"to\":1e308,\"steps\":1000000}"},
        {"unknowns", "[\"x\",\"x\",\"m\"]"},
        {"position_constraints", "[{\"name\":\"p\",\"expr\":\"x^2+y^2-1\"}]"},
        {"position_constraints", "[{\"name\":\"p\",\"expr\":\"x-x\"}]"},
        {"definitions", "[{\"name\":\"d\",\"expr\":\"d+1\"},{\"name\":\"sin\",\"expr\":\"x\"}]"},
        {"definitions", "[{\"name\":\"a\",\"expr\":\"x'^2\"},{\"name\":\"b\",\"expr\":\"a*a*a*a\"},"
                        "{\"name\":\"c\",\"expr\":\"b*b*b*b\"},{\"name\":\"d\",\"expr\":\"c*c*c*c\"}]"},
        {"generalized_forces", "{\"x\":\"-1e308*x'\",\"zz\":\"1\"}"},
        {"gravity", "[0,0,-1e308]"},
        {"constraints", "[\"x'\",\"x'\"]"},
        {"constraints", "[{\"name\":\"c1\",\"expr\":\"x'^2+y'^2-1\"}]"},
        {"speeds", "[]"},
        {"coordinates", "[\"x\",\"x\"]"},
        {"coordinates", "[\"sin\",\"t\"]"},
        {"points", "[{\"t\":0,\"q\":{}},{\"q\":{\"x\":1e308}}]"},
        {"states", "[{\"q\":{\"x\":1e308},\"qdot\":{\"x\":-1e308}}]"},
        {"inputs", "[\"x\",\"m\",\"zz\"]"},
    };
    size_t k = pick(sizeof j / sizeof *j);
    *key = j[k][0];
    return json_loads(j[k][1], 0, NULL);
}

static int mutate_tree(json_t *root)
{
    static leaves all;
    all.n = 0;
    collect(NULL, NULL, 0, root, &all);
    if (all.n < 2)
        return -1;
    leaf *l = &all.v[1 + pick(all.n - 1)];
    json_t *v = l->value;
    switch (pick(10)) {
    case 0:
    case 1:
    case 2:
    case 3: { /* a string (an expression, a name) */
        leaf *sl = NULL;
        for (int tries = 0; tries < 16 && !sl; tries++) {
            leaf *c = &all.v[1 + pick(all.n - 1)];
            if (json_is_string(c->value))
                sl = c;
        }
        if (!sl)
            return -1;
        json_t *nv = mutate_string(json_string_value(sl->value), &all);
        if (!nv)
            return -1;
        put(sl, nv);
        return 0;
    }
    case 4: /* a number */
        for (int tries = 0; tries < 16 && !json_is_number(v); tries++) {
            l = &all.v[1 + pick(all.n - 1)];
            v = l->value;
        }
        put(l, json_is_number(v) || pick(2) ? extreme_number() : other_type(&all));
        return 0;
    case 5: /* another type */ put(l, other_type(&all)); return 0;
    case 6: /* a member or element dropped */
        if (json_is_object(l->parent))
            json_object_del(l->parent, l->key);
        else if (json_is_array(l->parent))
            json_array_remove(l->parent, l->index);
        return 0;
    case 7: /* an element duplicated (a dependent constraint), or two swapped */
        if (json_is_array(l->parent)) {
            if (pick(2) || json_array_size(l->parent) < 2) {
                json_array_append_new(l->parent, json_deep_copy(v));
            } else {
                size_t o = pick(json_array_size(l->parent));
                json_t *a = json_incref(json_array_get(l->parent, l->index));
                json_t *b = json_incref(json_array_get(l->parent, o));
                json_array_set_new(l->parent, l->index, b);
                json_array_set_new(l->parent, o, a);
            }
            return 0;
        }
        return -1;
    case 8: { /* an interesting member, into an object */
        json_t *obj = NULL;
        for (int tries = 0; tries < 16 && !obj; tries++) {
            json_t *c = all.v[pick(all.n)].value;
            if (json_is_object(c))
                obj = c;
        }
        const char *key;
        json_t *nv = interesting_member(&key);
        if (!obj || !nv) {
            json_decref(nv);
            return -1;
        }
        json_object_set_new(obj, key, nv);
        return 0;
    }
    default: { /* a value copied from elsewhere in the input */
        json_t *o = all.v[pick(all.n)].value;
        if (o == v)
            return -1;
        put(l, json_deep_copy(o));
        return 0;
    }
    }
}

static size_t emit(json_t *root, uint8_t *data, size_t max)
{
    char *text = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = text ? strlen(text) : 0;
    if (!text || n > max) {
        free(text);
        return 0;
    }
    memcpy(data, text, n);
    free(text);
    return n;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    rng = (uint64_t)seed * 0x9E3779B97F4A7C15ULL + 1;
    json_t *root = pick(10) ? json_loadb((const char *)data, size, 0, NULL) : NULL;
    if (!root)
        return LLVMFuzzerMutate(data, size, max_size);
    int k = 1 + (int)(pick(4) == 0 ? pick(4) : 0);
    for (int i = 0; i < k; i++)
        mutate_tree(root);
    size_t n = emit(root, data, max_size);
    json_decref(root);
    return n ? n : LLVMFuzzerMutate(data, size, max_size);
}

/* A member of the second input put where the same key stands in the first (a kinetic
 * energy of another model, an initial state of another case), or added to its root. */
size_t LLVMFuzzerCustomCrossOver(const uint8_t *d1, size_t s1, const uint8_t *d2, size_t s2, uint8_t *out,
                                 size_t max_out, unsigned int seed)
{
    rng = (uint64_t)seed * 0x9E3779B97F4A7C15ULL + 7;
    json_t *a = json_loadb((const char *)d1, s1, 0, NULL), *b = json_loadb((const char *)d2, s2, 0, NULL);
    size_t n = 0;
    if (a && b) {
        static leaves la, lb;
        la.n = lb.n = 0;
        collect(NULL, NULL, 0, a, &la);
        collect(NULL, NULL, 0, b, &lb);
        leaf *from = lb.n > 1 ? &lb.v[1 + pick(lb.n - 1)] : NULL;
        if (from && from->key) {
            int done = 0;
            for (size_t i = 1; i < la.n && !done; i++)
                if (la.v[i].key && !strcmp(la.v[i].key, from->key) && pick(2)) {
                    json_object_set_new(la.v[i].parent, la.v[i].key, json_deep_copy(from->value));
                    done = 1;
                }
            if (!done && json_is_object(a))
                json_object_set_new(a, from->key, json_deep_copy(from->value));
            n = emit(a, out, max_out);
        }
    }
    json_decref(a);
    json_decref(b);
    return n;
}
