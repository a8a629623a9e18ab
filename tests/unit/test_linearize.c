/* test_linearize.c — /v1/evaluate and /v1/linearize in the engine (lin_api.c,
 * linearize.c, tangent.c).
 *
 * evaluate: at every reference sample of every shared case, the accelerations make the
 * case's published equations of motion (expected.equation_checks, in q'' and u') vanish
 * to rounding, and q'' and the multipliers agree with the independent multipliers
 * formulation (mult.h). linearize: A agrees with central finite differences of the
 * integrated right-hand side, the reduced and numeric paths agree, and closed forms
 * hold: a pendulum's eigenvalues are +-i sqrt(g/l), the upright rolling disk's
 * nonzero ones are +-sqrt((4 g/r - 12 Omega^2)/5). The tangent interpreter is checked
 * against central differences on every function of the language.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <ctype.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "engine.h"
#include "hamel.h"
#include "linearize.h"
#include "model.h"
#include "mult.h"
#include "tangent.h"
#include "support.h"

static struct support_case lcases[SUPPORT_MAX_CASES];

static void setup(void) { engine_init(); }

static double getd(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(json_object_get(o, a), b);
    cr_assert(json_is_number(v), "missing number %s.%s", a, b);
    return json_number_value(v);
}

/* ---- evaluating a printed equation at a state ---- */

/* Replaces, in an equation of the cases (q, q', q'' of coordinates, u and u' of
 * speeds), every state symbol by its value from an evaluated state; parameters stay. */
static void substitute(const engine_model *m, const char *text, const json_t *st, char *out, size_t size)
{
    size_t o = 0;
    for (const char *p = text; *p && o + 40 < size;) {
        if (isalpha((unsigned char)*p) || *p == '_') {
            const char *s = p;
            while (isalnum((unsigned char)*p) || *p == '_')
                p++;
            char name[80];
            snprintf(name, sizeof name, "%.*s", (int)(p - s), s);
            int primes = 0;
            while (p[primes] == '\'')
                primes++;
            const char *group = NULL;
            if (model_coord_index(m, name) >= 0)
                group = primes == 0 ? "q" : primes == 1 ? "qdot" : "qddot";
            else if (model_speed_index(m, name) >= 0 && primes <= 1)
                group = primes == 0 ? "speeds" : "speeds_dot";
            if (group) {
                p += primes;
                o += snprintf(out + o, size - o, "(%.17g)", getd(st, group, name));
            } else {
                o += snprintf(out + o, size - o, "%s", name);
            }
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
}

static double eval_text(const engine_model *m, const char *text)
{
    expr_ctx *c = model_fresh_ctx(m);
    expr_parse_opts o = {1, 1, 0, "test"};
    expr_error err;
    expr *e = expr_parse(c, text, &o, &err);
    cr_assert_not_null(e, "cannot parse %s: %s", text, err.message);
    tape *t = model_tape(m, c, &e, 1);
    double *in = calloc(m->n_in, sizeof *in), *work = calloc(t->n_ins + 1, sizeof *work), v;
    memcpy(in, m->param_values, m->np * sizeof *in);
    tape_eval(t, in, work, &v);
    free(in);
    free(work);
    tape_free(t);
    expr_ctx_free(c);
    return v;
}

ParameterizedTestParameters(evaluate, case_equations)
{
    int n = support_list_cases(lcases, SUPPORT_MAX_CASES);
    return cr_make_param_array(struct support_case, lcases, n);
}

/* The states of a case's reference samples as an evaluate request. */
static json_t *sample_states(const engine_model *m, const json_t *c)
{
    json_t *states = json_array();
    json_t *samples = json_object_get(json_object_get(c, "expected"), "samples");
    size_t i;
    json_t *s;
    json_array_foreach(samples, i, s)
    {
        json_t *st = json_pack("{s:O, s:O}", "t", json_object_get(s, "t"), "q", json_object_get(s, "q"));
        if (m->nlin == m->nc && json_object_get(s, "speeds"))
            json_object_set(st, "speeds", json_object_get(s, "speeds"));
        else
            json_object_set(st, "qdot", json_object_get(s, "qdot"));
        json_array_append_new(states, st);
    }
    return states;
}

ParameterizedTest(struct support_case *p, evaluate, case_equations, .init = setup)
{
    json_error_t err;
    json_t *c = json_load_file(p->file, 0, &err);
    cr_assert_not_null(c, "%s: %s", p->file, err.text);
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    json_t *req = json_pack("{s:o}", "states", sample_states(m, c));
    json_t *res = NULL, *problem = NULL;
    int rc = engine_evaluate(m, req, NULL, &res, &problem);
    cr_assert_eq(rc, 0, "%s: evaluate failed: %s", p->file, problem ? json_dumps(problem, 0) : "");
    json_t *states = json_object_get(res, "states");
    cr_assert_eq(json_array_size(states), json_array_size(json_object_get(req, "states")));
    json_t *checks = json_object_get(json_object_get(c, "expected"), "equation_checks");
    int checked = 0;
    size_t i, j;
    json_t *st, *chk;
    json_array_foreach(states, i, st)
    {
        json_array_foreach(checks, j, chk)
        {
            const char *text = NULL;
            if (json_is_true(json_object_get(chk, "printed_holds")))
                text = json_string_value(json_object_get(chk, "printed"));
            else if (json_is_true(json_object_get(chk, "corrected_holds")))
                text = json_string_value(json_object_get(chk, "corrected"));
            if (!text)
                continue;
            char sub[8192];
            substitute(m, text, st, sub, sizeof sub);
            double r = eval_text(m, sub);
            cr_assert(fabs(r) <= 1e-9,
                      "%s: sample %zu, equation %s: residual %g with the evaluated accelerations", p->file, i,
                      json_string_value(json_object_get(chk, "label")), r);
            checked++;
        }
    }
    cr_assert_gt(checked, 0, "%s: no equation was checked", p->file);

    /* q'' and the multipliers agree with the multipliers formulation's KKT solve */
    mult_ws *mw = mult_ws_new(m, m->param_values);
    int n = m->n;
    double y[64], dy[64], lam[64];
    json_array_foreach(states, i, st)
    {
        for (int k = 0; k < n; k++) {
            y[k] = getd(st, "q", m->coords[k]);
            y[n + k] = getd(st, "qdot", m->coords[k]);
        }
        double t = json_number_value(json_object_get(st, "t"));
        cr_assert_eq(mult_rhs(t, y, dy, mw), 0);
        cr_assert_eq(mult_lambda(mw, t, y, lam), 0);
        for (int k = 0; k < n; k++) {
            double a = getd(st, "qddot", m->coords[k]);
            cr_assert(fabs(a - dy[n + k]) <= 1e-9 * (1 + fabs(a)), "%s: sample %zu q''_%s %.17g vs KKT %.17g",
                      p->file, i, m->coords[k], a, dy[n + k]);
        }
        for (int k = 0; k < m->nc; k++) {
            double l = getd(st, "multipliers", m->cons[k].name);
            cr_assert(fabs(l - lam[k]) <= 1e-8 * (1 + fabs(l)),
                      "%s: sample %zu multiplier %s %.17g vs KKT %.17g", p->file, i, m->cons[k].name, l,
                      lam[k]);
        }
    }
    mult_ws_free(mw);
    json_decref(res);
    json_decref(req);
    json_decref(c);
    engine_model_release(m);
}

/* ---- A against central differences, and the two paths against each other ---- */

ParameterizedTestParameters(linearize, case_jacobians)
{
    int n = support_list_cases(lcases, SUPPORT_MAX_CASES);
    return cr_make_param_array(struct support_case, lcases, n);
}

ParameterizedTest(struct support_case *p, linearize, case_jacobians, .init = setup)
{
    json_error_t err;
    json_t *c = json_load_file(p->file, 0, &err);
    cr_assert_not_null(c, "%s: %s", p->file, err.text);
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    int n = m->n, k = m->k, N = n + k;
    hamel_ws *hw = hamel_ws_new(m, m->param_values);
    double *A = calloc((size_t)N * N, sizeof *A), *An = calloc((size_t)N * N, sizeof *An);
    double f[128], fn[128], y[128], yp[128], fp[128], fm[128];
    json_t *samples = json_object_get(json_object_get(c, "expected"), "samples");
    for (size_t s = 0; s < json_array_size(samples); s += 3) {
        json_t *smp = json_array_get(samples, s);
        double t = json_number_value(json_object_get(smp, "t"));
        for (int i = 0; i < n; i++)
            y[i] = getd(smp, "q", m->coords[i]);
        for (int r = 0; r < k; r++)
            y[n + r] = getd(smp, "speeds", m->speeds[r]);
        cr_assert_eq(lin_jacobian(m, m->param_values, t, y, y + n, NULL, 0, 0, f, A, NULL, NULL), 0);
        cr_assert_eq(lin_jacobian(m, m->param_values, t, y, y + n, NULL, 0, 1, fn, An, NULL, NULL), 0);
        hamel_rhs(t, y, fp, hw);
        for (int i = 0; i < N; i++) {
            cr_assert(fabs(f[i] - fp[i]) <= 1e-12 * (1 + fabs(fp[i])), "%s: f[%d] %.17g vs hamel_rhs %.17g",
                      p->file, i, f[i], fp[i]);
            cr_assert(fabs(fn[i] - fp[i]) <= 1e-11 * (1 + fabs(fp[i])), "%s: numeric f[%d]", p->file, i);
        }
        for (int j = 0; j < N; j++) {
            double h = 1e-5 * (1 + fabs(y[j]));
            memcpy(yp, y, N * sizeof *y);
            yp[j] = y[j] + h;
            hamel_rhs(t, yp, fp, hw);
            yp[j] = y[j] - h;
            hamel_rhs(t, yp, fm, hw);
            for (int i = 0; i < N; i++) {
                double fd = (fp[i] - fm[i]) / (2 * h), a = A[(size_t)i * N + j];
                cr_assert(fabs(a - fd) <= 1e-6 * (1 + fabs(fd)),
                          "%s: sample %zu A[%d][%d] = %.17g, central difference %.17g", p->file, s, i, j, a,
                          fd);
                cr_assert(fabs(a - An[(size_t)i * N + j]) <= 1e-10 * (1 + fabs(a)),
                          "%s: A[%d][%d] reduced %.17g vs numeric %.17g", p->file, i, j, a,
                          An[(size_t)i * N + j]);
            }
        }
    }
    free(A);
    free(An);
    hamel_ws_free(hw);
    json_decref(c);
    engine_model_release(m);
}

/* Directions in passes of 1, 2, 3 (what a large tape gets) give the same A, B and
 * df/dt as one pass: bit for bit, each direction is computed the same way. */
Test(linearize, chunked_directions, .init = setup)
{
    json_t *mj = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(mj, "model"));
    json_decref(mj);
    int n = m->n, N = n + m->k, inputs[2] = {model_param_index(m, "g"), model_param_index(m, "r")};
    double y[8] = {0.3, 1.1, 0.2, 0.1, -0.4, 0.7, -0.5, 3.0};
    double f0[8], A0[64], B0[16], ft0[8], f1[8], A1[64], B1[16], ft1[8];
    for (int numeric = 0; numeric < 2; numeric++) {
        cr_assert_eq(
            lin__jacobian(m, m->param_values, 0.0, y, y + n, inputs, 2, numeric, f0, A0, B0, ft0, 100), 0);
        for (int chunk = 1; chunk <= 3; chunk++) {
            cr_assert_eq(
                lin__jacobian(m, m->param_values, 0.0, y, y + n, inputs, 2, numeric, f1, A1, B1, ft1, chunk),
                0);
            cr_assert(!memcmp(A0, A1, sizeof(double) * N * N) && !memcmp(B0, B1, sizeof(double) * N * 2) &&
                          !memcmp(ft0, ft1, sizeof(double) * N),
                      "numeric %d, chunk %d: A, B or df/dt differ from one pass", numeric, chunk);
        }
    }
    engine_model_release(m);
}

/* ---- closed forms ---- */

static const char pendulum[] = "{\"name\": \"pendulum\", \"coordinates\": [\"th\"],"
                               " \"parameters\": {\"m\": 1.5, \"l\": 2.0, \"g\": 9.81, \"tau\": 0},"
                               " \"kinetic_energy\": \"1/2*m*l^2*th'^2\","
                               " \"potential_energy\": \"-m*g*l*cos(th)\","
                               " \"generalized_forces\": {\"th\": \"tau\"}}";

static json_t *linearize_ok(engine_model *m, const char *req_text)
{
    json_t *req = support_loads(req_text), *res = NULL, *problem = NULL;
    int rc = engine_linearize(m, req, NULL, NULL, &res, &problem);
    cr_assert_eq(rc, 0, "linearize failed: %s", problem ? json_dumps(problem, 0) : "");
    json_decref(req);
    return res;
}

static double eig(const json_t *res, int p, int i, const char *part)
{
    const json_t *pt = json_array_get(json_object_get(res, "points"), p);
    return json_number_value(json_object_get(json_array_get(json_object_get(pt, "eigenvalues"), i), part));
}

Test(linearize, pendulum, .init = setup)
{
    engine_model *m = support_compile_text(pendulum);
    json_t *res = linearize_ok(m, "{\"q\": {\"th\": 0}, \"speeds\": {\"th'\": 0}, \"inputs\": [\"tau\"]}");
    double w = sqrt(9.81 / 2.0);
    cr_assert(fabs(eig(res, 0, 0, "re")) < 1e-14 && fabs(eig(res, 0, 0, "im") - w) < 1e-13,
              "first eigenvalue %g%+gi, want +%gi", eig(res, 0, 0, "re"), eig(res, 0, 0, "im"), w);
    cr_assert(fabs(eig(res, 0, 1, "re")) < 1e-14 && fabs(eig(res, 0, 1, "im") + w) < 1e-13,
              "second eigenvalue");
    const json_t *pt = json_array_get(json_object_get(res, "points"), 0);
    const json_t *A = json_object_get(pt, "A"), *B = json_object_get(pt, "B");
    cr_assert(fabs(json_number_value(json_array_get(json_array_get(A, 1), 0)) + 9.81 / 2.0) < 1e-14,
              "A[1][0]");
    cr_assert(fabs(json_number_value(json_array_get(json_array_get(A, 0), 1)) - 1.0) < 1e-15, "A[0][1]");
    cr_assert(fabs(json_number_value(json_array_get(json_array_get(B, 1), 0)) - 1.0 / (1.5 * 4.0)) < 1e-15,
              "B = 1/(m l^2)");
    cr_assert(fabs(json_number_value(json_array_get(json_array_get(B, 0), 0))) == 0.0, "B[0] = 0");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(res, "states"), 1)), "th'");
    json_decref(res);

    /* inverted: +-sqrt(g/l), the unstable one first */
    res = linearize_ok(m, "{\"q\": {\"th\": 3.141592653589793}, \"speeds\": {\"th'\": 0}}");
    cr_assert(fabs(eig(res, 0, 0, "re") - w) < 1e-12 && eig(res, 0, 0, "im") == 0.0, "inverted: %g",
              eig(res, 0, 0, "re"));
    cr_assert(fabs(eig(res, 0, 1, "re") + w) < 1e-12, "inverted: second");
    json_decref(res);
    engine_model_release(m);
}

static json_t *rolling_disk_model(void);

/* eigenvectors: A v = lambda v, scaled so that the largest component is exactly 1 */
Test(linearize, eigenvectors, .init = setup)
{
    engine_model *m = support_compile_text(pendulum);
    json_t *res = linearize_ok(m, "{\"q\": {\"th\": 0}, \"speeds\": {\"th'\": 0}, \"eigenvectors\": true}");
    const json_t *e0 =
        json_array_get(json_object_get(json_array_get(json_object_get(res, "points"), 0), "eigenvalues"), 0);
    const json_t *v = json_object_get(e0, "vector");
    double w = sqrt(9.81 / 2.0);
    /* for +i w: v = (1, i w) / (i w) = (-i/w, 1) */
    cr_assert(getd(v, "th'", "re") == 1.0 && getd(v, "th'", "im") == 0.0,
              "the largest component is exactly 1");
    cr_assert(fabs(getd(v, "th", "re")) < 1e-15 && fabs(getd(v, "th", "im") + 1 / w) < 1e-14,
              "th component %g%+gi", getd(v, "th", "re"), getd(v, "th", "im"));
    json_decref(res);
    engine_model_release(m);

    /* on the upright rolling disk (8 states): A v = lambda v for every eigenvalue */
    json_t *mj = rolling_disk_model();
    m = support_compile_json(mj);
    json_decref(mj);
    res = linearize_ok(
        m, "{\"q\": {\"phi\": 0.3, \"theta\": 1.5707963267948966, \"psi\": 0, \"x\": 0, \"y\": 0},"
           " \"speeds\": {\"wd\": 0, \"thd\": 0, \"Omega\": 4}, \"eigenvectors\": true}");
    const json_t *pt = json_array_get(json_object_get(res, "points"), 0);
    const json_t *A = json_object_get(pt, "A"), *states = json_object_get(res, "states");
    const json_t *ev = json_object_get(pt, "eigenvalues");
    for (size_t k = 0; k < json_array_size(ev); k++) {
        const json_t *e = json_array_get(ev, k), *vec = json_object_get(e, "vector");
        double lr = json_number_value(json_object_get(e, "re")),
               li = json_number_value(json_object_get(e, "im"));
        if (hypot(lr, li) < 1e-6)
            continue; /* the zero eigenvalues are defective: their vectors are not unique */
        for (size_t i = 0; i < 8; i++) {
            double sr = 0, si = 0;
            for (size_t j = 0; j < 8; j++) {
                double a = json_number_value(json_array_get(json_array_get(A, i), j));
                const char *nj = json_string_value(json_array_get(states, j));
                sr += a * getd(vec, nj, "re");
                si += a * getd(vec, nj, "im");
            }
            const char *ni = json_string_value(json_array_get(states, i));
            double vr = getd(vec, ni, "re"), vi = getd(vec, ni, "im");
            cr_assert(fabs(sr - (lr * vr - li * vi)) < 1e-12 && fabs(si - (lr * vi + li * vr)) < 1e-12,
                      "eigenvector %zu, row %zu: A v != lambda v", k, i);
        }
    }
    json_decref(res);
    engine_model_release(m);
}

Test(linearize, not_steady, .init = setup)
{
    engine_model *m = support_compile_text(pendulum);
    json_t *req = support_loads("{\"points\": [{\"q\": {\"th\": 0}, \"speeds\": {\"th'\": 0}},"
                                " {\"q\": {\"th\": 0.3}, \"speeds\": {\"th'\": 0}}]}");
    json_t *res = NULL, *problem = NULL;
    int rc = engine_linearize(m, req, NULL, NULL, &res, &problem);
    cr_assert_eq(rc, HAMEL_E_BAD_REQUEST);
    const json_t *e = json_array_get(json_object_get(problem, "errors"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(e, "path")), "points[1].speeds.th'");
    cr_assert_not_null(strstr(json_string_value(json_object_get(e, "reason")), "steady"));
    json_decref(problem);
    /* with "steady": false it is just the Jacobian there */
    json_object_set_new(req, "steady", json_false());
    rc = engine_linearize(m, req, NULL, NULL, &res, &problem);
    cr_assert_eq(rc, 0);
    const json_t *pt = json_array_get(json_object_get(res, "points"), 1);
    double a10 = json_number_value(json_array_get(json_array_get(json_object_get(pt, "A"), 1), 0));
    cr_assert(fabs(a10 + 9.81 / 2.0 * cos(0.3)) < 1e-14, "A[1][0] = -g/l cos(0.3), got %.17g", a10);
    json_decref(res);
    json_decref(req);

    /* bad fields */
    static const char *const bad[][2] = {
        {"{\"q\": {\"th\": 0}, \"speeds\": {\"th'\": 0}, \"inputs\": [\"nope\"]}", "inputs[0]"},
        {"{\"q\": {\"th\": 0}, \"speeds\": {\"x\": 0}}", "speeds.th'"},
        {"{\"q\": {}, \"speeds\": {\"th'\": 0}}", "q.th"},
        {"{\"speeds\": {\"th'\": 0}}", "q"},
        {"{\"q\": {\"th\": 0}, \"speeds\": {\"th'\": 0}, \"steady_tolerance\": -1}", "steady_tolerance"},
        {"{\"points\": [], \"q\": {\"th\": 0}}", "points"},
        {"{\"q\": {\"th\": 0}, \"speeds\": {\"th'\": 0}, \"wat\": 1}", "wat"},
        {"{\"q\": {\"th\": 0}, \"speeds\": {\"th'\": 0}, \"select\": [\"th\", \"nope\"]}", "select[1]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        req = support_loads(bad[i][0]);
        problem = NULL;
        rc = engine_linearize(m, req, NULL, NULL, &res, &problem);
        cr_assert_eq(rc, HAMEL_E_BAD_REQUEST, "%s: rc %d", bad[i][0], rc);
        const json_t *errs = json_object_get(problem, "errors");
        int found = 0;
        for (size_t j = 0; j < json_array_size(errs); j++)
            found |=
                strcmp(json_string_value(json_object_get(json_array_get(errs, j), "path")), bad[i][1]) == 0;
        cr_assert(found, "%s: expected an error at %s, got %s", bad[i][0], bad[i][1], json_dumps(problem, 0));
        json_decref(problem);
        json_decref(req);
    }
    engine_model_release(m);
}

static json_t *rolling_disk_model(void)
{
    json_t *c = support_load_case("greenwood-5.3-rolling-disk.json");
    json_t *m = json_incref(json_object_get(c, "model"));
    json_decref(c);
    return m;
}

/* The upright disk rolling straight at spin Omega (theta = pi/2, wd = thd = 0): with
 * theta = pi/2 + e, e' = thd, wd' = 2 Omega thd, thd' = 4/5 (g/r e - 3/2 Omega wd),
 * so det(lambda - A) = lambda^6 * lambda (lambda^2 + (12 Omega^2 - 4 g/r)/5) and the
 * disk is stable for Omega^2 > g/(3 r). */
Test(linearize, rolling_disk_upright, .init = setup)
{
    json_t *mj = rolling_disk_model();
    engine_model *m = support_compile_json(mj);
    json_decref(mj);
    const double g = 9.81, r = 0.5;
    const double omegas[] = {4.0, 1.0, 2.5};
    for (int i = 0; i < 3; i++) {
        double W = omegas[i];
        char req[400];
        snprintf(req, sizeof req,
                 "{\"q\": {\"phi\": 0.3, \"theta\": 1.5707963267948966, \"psi\": 0, \"x\": 0, \"y\": 0},"
                 " \"speeds\": {\"wd\": 0, \"thd\": 0, \"Omega\": %.17g}}",
                 W);
        json_t *res = linearize_ok(m, req);
        double l2 = (4 * g / r - 12 * W * W) / 5;
        double w = sqrt(fabs(l2));
        const json_t *ev = json_object_get(json_array_get(json_object_get(res, "points"), 0), "eigenvalues");
        cr_assert_eq(json_array_size(ev), 8);
        if (l2 > 0) { /* sorted by real part: +w first, -w last, zeros between */
            cr_assert(fabs(eig(res, 0, 0, "re") - w) < 1e-12 && eig(res, 0, 0, "im") == 0.0,
                      "Omega = %g: first eigenvalue %.17g, want %.17g", W, eig(res, 0, 0, "re"), w);
            cr_assert(fabs(eig(res, 0, 7, "re") + w) < 1e-12, "Omega = %g: last eigenvalue %.17g, want %.17g",
                      W, eig(res, 0, 7, "re"), -w);
        }
        int plus = 0, minus = 0, zeros = 0;
        for (int e = 0; e < 8; e++) {
            double re = eig(res, 0, e, "re"), im = eig(res, 0, e, "im");
            double lr = l2 > 0 ? w : 0.0, li = l2 > 0 ? 0.0 : w;
            if (fabs(re - lr) < 1e-12 && fabs(im - li) < 1e-12)
                plus++;
            else if (fabs(re + lr) < 1e-12 && fabs(im + li) < 1e-12)
                minus++;
            else if (hypot(re, im) < 1e-6)
                zeros++;
        }
        cr_assert(plus == 1 && minus == 1 && zeros == 6,
                  "Omega = %g: want +-%s%.17g and six zeros; got %d, %d, %d", W, l2 > 0 ? "" : "i", w, plus,
                  minus, zeros);
        json_decref(res);
    }
    engine_model_release(m);
}

/* ---- evaluate: bad states name the field ---- */

Test(evaluate, bad_states, .init = setup)
{
    json_t *mj = rolling_disk_model();
    engine_model *m = support_compile_json(mj);
    json_decref(mj);
    static const char *const bad[][2] = {
        {"{}", "states"},
        {"{\"states\": [{\"q\": {\"phi\": 0, \"theta\": 1, \"psi\": 0, \"x\": 0}, \"speeds\": {\"wd\": 0, "
         "\"thd\": 0, \"Omega\": 1}}]}",
         "states[0].q.y"},
        {"{\"states\": [{\"q\": {\"phi\": 0, \"theta\": 1, \"psi\": 0, \"x\": 0, \"y\": 0}, \"qdot\": "
         "{\"phi\": 0, "
         "\"theta\": 0, \"psi\": 1, \"x\": 0, \"y\": 0}}]}",
         "states[0].qdot"},
        {"{\"states\": [{\"q\": {\"phi\": 0, \"theta\": 1, \"psi\": 0, \"x\": 0, \"y\": 0}, \"speeds\": "
         "{\"wd\": "
         "\"a\", \"thd\": 0, \"Omega\": 1}}]}",
         "states[0].speeds.wd"},
        {"{\"states\": [{\"q\": {\"phi\": 0, \"theta\": 1, \"psi\": 0, \"x\": 0, \"y\": 0}}]}", "states[0]"},
        {"{\"states\": [7]}", "states[0]"},
        {"{\"states\": [{\"t\": 0, \"q\": {\"phi\": 0, \"theta\": 1, \"psi\": 0, \"x\": 0, \"y\": 0}, "
         "\"speeds\": "
         "{\"wd\": 0, \"thd\": 0, \"Omega\": 1}, \"u\": 1}]}",
         "states[0].u"},
        {"{\"states\": [{\"q\": {\"phi\": 0, \"theta\": 1, \"psi\": 0, \"x\": 0, \"y\": 0}, \"speeds\": "
         "{\"wd\": "
         "0, \"thd\": 0, \"Omega\": 1}}], \"parameters\": {\"zz\": 1}}",
         "parameters.zz"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *req = support_loads(bad[i][0]), *res = NULL, *problem = NULL;
        int rc = engine_evaluate(m, req, NULL, &res, &problem);
        cr_assert_eq(rc, HAMEL_E_BAD_REQUEST, "%s: rc %d", bad[i][0], rc);
        const json_t *errs = json_object_get(problem, "errors");
        int found = 0;
        for (size_t j = 0; j < json_array_size(errs); j++)
            found |=
                strcmp(json_string_value(json_object_get(json_array_get(errs, j), "path")), bad[i][1]) == 0;
        cr_assert(found, "%s: expected an error at %s, got %s", bad[i][0], bad[i][1], json_dumps(problem, 0));
        json_decref(problem);
        json_decref(req);
    }
    engine_model_release(m);
}

/* ---- the tangent interpreter on every function ---- */

Test(tangent, every_function, .init = setup)
{
    engine_model *m = support_compile_text("{\"coordinates\": [\"a\", \"b\"], \"parameters\": {\"c\": 0.7},"
                                           " \"kinetic_energy\": \"a'^2 + b'^2\"}");
    const char *texts[] = {
        "sin(a)*cos(b) + tan(a*b)",
        "asin(a/3) + acos(b/3) + atan(a - b)",
        "atan2(a, b) + atan2(-b, a)",
        "sinh(a) + cosh(b) + tanh(a*b)",
        "exp(a) * log(b)",
        "sqrt(a*b) + abs(a - 2*b)",
        "a^3 * b^-2 + (a + b)^5",
        "pow(a, b) + a^c + c^b",
        "a / (b + c) - (a*b)/(a - 7)",
        "a'*b + a*b'",
    };
    double in[16] = {0}, din[16 * 2] = {0};
    in[0] = 0.7;
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        expr_ctx *c = model_fresh_ctx(m);
        expr_parse_opts o = {1, 1, 0, "test"};
        expr_error err;
        expr *e = expr_parse(c, texts[i], &o, &err);
        cr_assert_not_null(e, "%s: %s", texts[i], err.message);
        tape *t = model_tape(m, c, &e, 1);
        double q[2] = {1.1, 1.7}, qd[2] = {0.4, -0.9};
        for (int j = 0; j < 2; j++) {
            in[model_input_q(m) + j] = q[j];
            in[model_input_qd(m) + j] = qd[j];
        }
        /* directions: d/da, d/db */
        memset(din, 0, sizeof din);
        din[(size_t)model_input_q(m) * 2 + 0] = 1.0;
        din[(size_t)(model_input_q(m) + 1) * 2 + 1] = 1.0;
        double *s = calloc(t->n_ins, sizeof *s), *ds = calloc((size_t)t->n_ins * 2, sizeof *ds);
        double v, dv[2], v0;
        cr_assert_eq(tape_eval_tangent(t, in, din, 2, s, ds, &v, dv), 0);
        tape_eval(t, in, s, &v0);
        cr_assert_eq(v, v0, "%s: value differs from tape_eval", texts[i]);
        for (int j = 0; j < 2; j++) {
            double h = 1e-5, fp, fm, save = in[model_input_q(m) + j];
            in[model_input_q(m) + j] = save + h;
            tape_eval(t, in, s, &fp);
            in[model_input_q(m) + j] = save - h;
            tape_eval(t, in, s, &fm);
            in[model_input_q(m) + j] = save;
            double fd = (fp - fm) / (2 * h);
            cr_assert(fabs(dv[j] - fd) <= 1e-7 * (1 + fabs(fd)), "%s: d/d%c %.17g, central difference %.17g",
                      texts[i], "ab"[j], dv[j], fd);
        }
        free(s);
        free(ds);
        tape_free(t);
        expr_ctx_free(c);
    }
    engine_model_release(m);
}

/* ---- the benchmark bicycle (Meijaard, Papadopoulos, Ruina, Schwab 2007) ---- */

#include <gsl/gsl_errno.h>
#include <gsl/gsl_roots.h>

#define BIKE_FILE "api/examples/whipple-bicycle.json"
#define BIKE_RR 0.3 /* rear wheel radius: forward speed v = -rR thetaR' */

/* The paper's roll/steer matrices (Table 2 coefficients, 14 digits). */
static const double bike_M[2][2] = {{80.81722, 2.31941332208709}, {2.31941332208709, 0.29784188199686}};
static const double bike_C1[2][2] = {{0, 33.86641391492494}, {-0.85035641456978, 1.68540397397560}};
static const double bike_K0[2][2] = {{-80.95, -2.59951685249872}, {-2.59951685249872, -0.80329488458618}};
static const double bike_K2[2][2] = {{0, 76.59734589573222}, {0, 2.65431523794604}};

struct bike {
    engine_model *m;
    int N, roll, steer, rolld, steerd; /* state indices */
    double *A, *f, *y;
};

static void bike_jacobian(struct bike *b, double v)
{
    memset(b->y, 0, b->N * sizeof *b->y);
    b->y[b->N - 1] = -v / BIKE_RR; /* thetaRd, the last speed */
    cr_assert_eq(
        lin_jacobian(b->m, b->m->param_values, 0.0, b->y, b->y + b->m->n, NULL, 0, 0, b->f, b->A, NULL, NULL),
        0, "A at v = %g", v);
}

/* The largest real part among the eigenvalues of the roll/steer block of A (the other
 * states only add zeros, and the capsize eigenvalue itself passes through zero): of the
 * oscillating ones (the weave pair) or of the real ones (capsize; castor is far below). */
static double bike_max_re(struct bike *b, double v, int complex_ones)
{
    bike_jacobian(b, v);
    const int idx[4] = {b->roll, b->steer, b->rolld, b->steerd};
    double blk[16], re[4], im[4], best = -INFINITY;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            blk[i * 4 + j] = b->A[(size_t)idx[i] * b->N + idx[j]];
    cr_assert_eq(lin_eigenvalues(4, blk, re, im), 0);
    for (int i = 0; i < 4; i++)
        if ((fabs(im[i]) > 1e-6) == complex_ones && re[i] > best)
            best = re[i];
    return best;
}

static struct bike *root_bike;
static double weave_fn(double v, void *p) { return bike_max_re(root_bike, v, *(int *)p); }

static double bike_root(struct bike *b, int complex_ones, double lo, double hi)
{
    root_bike = b;
    gsl_function F = {weave_fn, &complex_ones};
    gsl_root_fsolver *s = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
    cr_assert_eq(gsl_root_fsolver_set(s, &F, lo, hi), GSL_SUCCESS, "no sign change on [%g, %g]", lo, hi);
    double r = NAN;
    for (int it = 0; it < 100; it++) {
        gsl_root_fsolver_iterate(s);
        r = gsl_root_fsolver_root(s);
        if (gsl_root_test_interval(gsl_root_fsolver_x_lower(s), gsl_root_fsolver_x_upper(s), 1e-13, 0) ==
            GSL_SUCCESS)
            break;
    }
    gsl_root_fsolver_free(s);
    return r;
}

/* One test: the bicycle takes seconds to compile, so everything is checked on one model. */
Test(bicycle, benchmark, .init = setup, .timeout = 300)
{
    json_error_t err;
    json_t *doc = json_load_file(BIKE_FILE, 0, &err);
    cr_assert_not_null(doc, "%s: %s", BIKE_FILE, err.text);
    struct bike b = {0};
    b.m = support_compile_json(json_object_get(doc, "model"));
    b.N = b.m->n + b.m->k;
    b.roll = model_coord_index(b.m, "phi");
    b.steer = model_coord_index(b.m, "delta");
    b.rolld = b.m->n + model_speed_index(b.m, "phid");
    b.steerd = b.m->n + model_speed_index(b.m, "deltad");
    cr_assert(b.roll >= 0 && b.steer >= 0 && b.rolld >= b.m->n && b.steerd >= b.m->n,
              "roll, steer and their rates");
    cr_assert_eq(model_speed_index(b.m, "thetaRd"), b.m->k - 1, "thetaRd is the last speed");
    b.A = calloc((size_t)b.N * b.N, sizeof *b.A);
    b.f = calloc(b.N, sizeof *b.f);
    b.y = calloc(b.N, sizeof *b.y);

    /* the file's request: upright straight running at v = 5 m/s; the nonzero eigenvalues
     * are the paper's (Table 2): weave, capsize, castor */
    json_t *res = NULL, *problem = NULL;
    int rc = engine_linearize(b.m, json_object_get(doc, "linearize"), NULL, NULL, &res, &problem);
    cr_assert_eq(rc, 0, "linearize: %s", problem ? json_dumps(problem, 0) : "");
    const double want[4][2] = {{-0.32286642900409, 0},
                               {-0.77534188219585, 4.46486771378823},
                               {-0.77534188219585, -4.46486771378823},
                               {-14.07838969279822, 0}};
    const json_t *ev = json_object_get(json_array_get(json_object_get(res, "points"), 0), "eigenvalues");
    int found[4] = {0}, nonzero = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        double re = json_number_value(json_object_get(json_array_get(ev, i), "re"));
        double im = json_number_value(json_object_get(json_array_get(ev, i), "im"));
        if (hypot(re, im) < 1e-4)
            continue;
        nonzero++;
        for (int k = 0; k < 4; k++)
            if (fabs(re - want[k][0]) < 1e-9 && fabs(im - want[k][1]) < 1e-9)
                found[k]++;
    }
    cr_assert(nonzero == 4 && found[0] == 1 && found[1] == 1 && found[2] == 1 && found[3] == 1,
              "v = 5: nonzero eigenvalues %s, want capsize, weave pair and castor of the paper to 1e-9",
              json_dumps(ev, 0));
    json_decref(res);
    /* "select": the roll/steer block alone has exactly these four, in the documented order */
    json_t *sreq = json_deep_copy(json_object_get(doc, "linearize"));
    json_object_set_new(sreq, "select", json_pack("[s, s, s, s]", "phi", "delta", "phid", "deltad"));
    rc = engine_linearize(b.m, sreq, NULL, NULL, &res, &problem);
    cr_assert_eq(rc, 0, "linearize with select: %s", problem ? json_dumps(problem, 0) : "");
    const json_t *sel = json_object_get(json_array_get(json_object_get(res, "points"), 0), "selected");
    const json_t *sev = json_object_get(sel, "eigenvalues");
    const int order[4] = {0, 1, 2, 3}; /* capsize, weave +im, weave -im, castor: real part descending */
    cr_assert_eq(json_array_size(sev), 4);
    for (int k = 0; k < 4; k++) {
        double re = json_number_value(json_object_get(json_array_get(sev, k), "re"));
        double im = json_number_value(json_object_get(json_array_get(sev, k), "im"));
        cr_assert(fabs(re - want[order[k]][0]) < 1e-9 && fabs(im - want[order[k]][1]) < 1e-9,
                  "selected block eigenvalue %d: %.17g%+.17gi", k, re, im);
    }
    cr_assert_eq(json_array_size(json_object_get(sel, "A")), 4);
    json_decref(res);
    json_decref(sreq);

    /* the roll/steer block of A = [[0, I], [-M^-1 (g K0 + v^2 K2), -M^-1 v C1]] */
    double det = bike_M[0][0] * bike_M[1][1] - bike_M[0][1] * bike_M[1][0];
    double Mi[2][2] = {{bike_M[1][1] / det, -bike_M[0][1] / det}, {-bike_M[1][0] / det, bike_M[0][0] / det}};
    const int idx[4] = {b.roll, b.steer, b.rolld, b.steerd};
    const double speeds[] = {0.0, 2.0, 5.0, 10.0};
    for (int s = 0; s < 4; s++) {
        double v = speeds[s], blk[4][4] = {{0, 0, 1, 0}, {0, 0, 0, 1}};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                double kk = 0.0, cc = 0.0;
                for (int l = 0; l < 2; l++) {
                    kk += Mi[i][l] * (9.81 * bike_K0[l][j] + v * v * bike_K2[l][j]);
                    cc += Mi[i][l] * v * bike_C1[l][j];
                }
                blk[2 + i][j] = -kk;
                blk[2 + i][2 + j] = -cc;
            }
        bike_jacobian(&b, v);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                double a = b.A[(size_t)idx[i] * b.N + idx[j]];
                cr_assert(fabs(a - blk[i][j]) <= 1e-10 * fmax(1.0, fabs(blk[i][j])),
                          "v = %g: A[%d][%d] of the roll/steer block %.17g, paper %.17g", v, i, j, a,
                          blk[i][j]);
            }
        /* and roll/steer does not see the other states (upright straight running) */
        for (int i = 2; i < 4; i++)
            for (int j = 0; j < b.N; j++) {
                if (j == idx[0] || j == idx[1] || j == idx[2] || j == idx[3])
                    continue;
                cr_assert(fabs(b.A[(size_t)idx[i] * b.N + j]) < 1e-10,
                          "v = %g: roll/steer row %d depends on state %d (%g)", v, i, j,
                          b.A[(size_t)idx[i] * b.N + j]);
            }
    }

    /* v = 0: +-5.53094371765393, +-3.13164324790656 */
    {
        bike_jacobian(&b, 0.0);
        double re[32], im[32];
        cr_assert_eq(lin_eigenvalues(b.N, b.A, re, im), 0);
        const double w0[4] = {5.53094371765393, 3.13164324790656, -3.13164324790656, -5.53094371765393};
        int k = 0;
        for (int i = 0; i < b.N; i++)
            if (hypot(re[i], im[i]) > 1e-4) {
                cr_assert(k < 4 && fabs(re[i] - w0[k]) < 1e-9 && fabs(im[i]) < 1e-9,
                          "v = 0: eigenvalue %d = %.17g%+.3gi", k, re[i], im[i]);
                k++;
            }
        cr_assert_eq(k, 4, "v = 0: four nonzero eigenvalues");
    }

    /* the weave and capsize speeds: where the weave pair's and the capsize mode's real
     * parts cross zero (GSL Brent on the eigenvalues of A) */
    double weave = bike_root(&b, 1, 4.0, 4.6), capsize = bike_root(&b, 0, 5.7, 6.3);
    cr_log_info("bicycle: weave speed %.15g, capsize speed %.15g", weave, capsize);
    cr_assert(fabs(weave - 4.29238253634111) < 1e-9, "weave speed %.15g, paper 4.29238253634111", weave);
    cr_assert(fabs(capsize - 6.02426201538837) < 1e-9, "capsize speed %.15g, paper 6.02426201538837",
              capsize);

    free(b.A);
    free(b.f);
    free(b.y);
    engine_model_release(b.m);
    json_decref(doc);
}

/* ---- evaluate with a nonlinear (Chetaev) constraint: the multipliers formulation ---- */

Test(evaluate, nonlinear_constraint, .init = setup)
{
    /* a particle held at speed v under gravity: lambda = m g sin(heading)/(2 v) at the
     * start (heading with sin = 0.6), q'' = (0, -g) + 2 lambda q'/m, perpendicular to q' */
    engine_model *m = support_compile_text(
        "{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"m\": 2.0, \"g\": 9.81, \"v\": 3.0},"
        " \"kinetic_energy\": \"m/2*(x'^2 + y'^2)\", \"potential_energy\": \"m*g*y\","
        " \"constraints\": [{\"name\": \"speed\", \"expr\": \"x'^2 + y'^2 - v^2\"}]}");
    json_t *req =
        support_loads("{\"states\": [{\"q\": {\"x\": 0.5, \"y\": 1}, \"qdot\": {\"x\": 2.4, \"y\": 1.8}}]}");
    json_t *res = NULL, *problem = NULL;
    int rc = engine_evaluate(m, req, NULL, &res, &problem);
    cr_assert_eq(rc, 0, "evaluate: %s", problem ? json_dumps(problem, 0) : "");
    cr_assert_str_eq(json_string_value(json_object_get(res, "formulation")), "multipliers");
    const json_t *st = json_array_get(json_object_get(res, "states"), 0);
    double lam = getd(st, "multipliers", "speed"), want = 2.0 * 9.81 * 0.6 / 6.0;
    cr_assert(fabs(lam - want) < 1e-12, "lambda %.17g, closed form %.17g", lam, want);
    double ax = getd(st, "qddot", "x"), ay = getd(st, "qddot", "y");
    cr_assert(fabs(ax - want * 2.4) < 1e-12 && fabs(ay - (-9.81 + want * 1.8)) < 1e-12, "q'' = (%g, %g)", ax,
              ay);
    cr_assert_null(json_object_get(st, "speeds_dot"), "no speeds in the multipliers formulation");
    json_decref(res);
    json_decref(req);
    /* linearize needs linear constraints */
    req = support_loads("{\"q\": {\"x\": 0.5, \"y\": 1}, \"qdot\": {\"x\": 2.4, \"y\": 1.8}}");
    rc = engine_linearize(m, req, NULL, NULL, &res, &problem);
    cr_assert_eq(rc, HAMEL_E_FORMULATION);
    cr_assert_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(problem, "errors"), 0), "path")),
        "model.constraints[0]");
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
}

/* A rheonomic system: a bead on a hoop spinning at a rate given as a parameter is steady
 * at its relative equilibria, but a hoop driven by an explicit t is not. */
Test(linearize, time_dependence_in_the_steady_check, .init = setup)
{
    engine_model *m = support_compile_text(
        "{\"coordinates\": [\"th\"], \"parameters\": {\"R\": 1, \"g\": 9.81, \"w\": 2, \"a\": 0.5},"
        " \"kinetic_energy\": \"1/2*R^2*(th'^2 + (w + a*t)^2*sin(th)^2)\","
        " \"potential_energy\": \"-g*R*cos(th)\"}");
    /* at t = 0 the bead at the bottom (th = 0) is in equilibrium, and stays: u' = 0 and
     * d(u')/dt = 0 even though the hoop accelerates */
    json_t *req = support_loads("{\"q\": {\"th\": 0}, \"speeds\": {\"th'\": 0}}"), *res = NULL,
           *problem = NULL;
    int rc = engine_linearize(m, req, NULL, NULL, &res, &problem);
    cr_assert_eq(rc, 0, "%s", problem ? json_dumps(problem, 0) : "");
    /* A[1][0] = (w^2 - g/R) at t = 0 (d/dth of sin cos w^2 - g/R sin) */
    const json_t *A = json_object_get(json_array_get(json_object_get(res, "points"), 0), "A");
    double a10 = json_number_value(json_array_get(json_array_get(A, 1), 0));
    cr_assert(fabs(a10 - (4.0 - 9.81)) < 1e-13, "A[1][0] %.17g", a10);
    json_decref(res);
    json_decref(req);
    /* the off-axis relative equilibrium cos(th) = g/(R w^2) at t = 0 has u' = 0 there, but
     * the hoop speeds up (a = 0.5), so u' does not stay 0: d(u')/dt = du'/dt != 0 */
    char text[200];
    snprintf(text, sizeof text, "{\"q\": {\"th\": %.17g}, \"speeds\": {\"th'\": 0}}", acos(9.81 / 16.0));
    engine_model_release(m);
    m = support_compile_text(
        "{\"coordinates\": [\"th\"], \"parameters\": {\"R\": 1, \"g\": 9.81, \"w\": 4, \"a\": 0.5},"
        " \"kinetic_energy\": \"1/2*R^2*(th'^2 + (w + a*t)^2*sin(th)^2)\","
        " \"potential_energy\": \"-g*R*cos(th)\"}");
    req = support_loads(text);
    rc = engine_linearize(m, req, NULL, NULL, &res, &problem);
    cr_assert_eq(rc, HAMEL_E_BAD_REQUEST, "an accelerating hoop's off-axis point is not steady");
    const char *why =
        json_string_value(json_object_get(json_array_get(json_object_get(problem, "errors"), 0), "reason"));
    cr_assert_not_null(strstr(why, "changes along the motion"), "%s", why);
    json_decref(problem);
    /* with a = 0 it is a relative equilibrium: eigenvalues +-i w sin(th0) */
    json_decref(req);
    engine_model_release(m);
    m = support_compile_text(
        "{\"coordinates\": [\"th\"], \"parameters\": {\"R\": 1, \"g\": 9.81, \"w\": 4, \"a\": 0},"
        " \"kinetic_energy\": \"1/2*R^2*(th'^2 + (w + a*t)^2*sin(th)^2)\","
        " \"potential_energy\": \"-g*R*cos(th)\"}");
    req = support_loads(text);
    rc = engine_linearize(m, req, NULL, NULL, &res, &problem);
    cr_assert_eq(rc, 0, "%s", problem ? json_dumps(problem, 0) : "");
    double w = 4.0 * sin(acos(9.81 / 16.0));
    cr_assert(fabs(eig(res, 0, 0, "im") - w) < 1e-12, "frequency %.17g, want w sin(th0) = %.17g",
              eig(res, 0, 0, "im"), w);
    json_decref(res);
    json_decref(req);
    engine_model_release(m);
}

/* ---- position-level constraints (engine/holo.h): the Cartesian pendulum ---- */

Test(linearize, cartesian_pendulum, .init = setup)
{
    json_error_t err;
    json_t *doc = json_load_file("tests/golden/bodies/pendulum-xy.json", 0, &err);
    cr_assert_not_null(doc, "%s", err.text);
    engine_model *m = support_compile_json(json_object_get(doc, "model"));
    json_decref(doc);
    /* evaluate at x = 0.6 with the guess y = -0.5: y is solved to -0.8 (the rod, L = 1);
     * at rest theta'' = -g sin(theta), so x'' = cos(theta) theta'', y'' = sin(theta) theta'', and
     * the rod's multiplier (J = (2x, 2y)) is -m g cos(theta)/2 */
    json_t *req =
        support_loads("{\"states\": [{\"q\": {\"x\": 0.6, \"y\": -0.5}, \"speeds\": {\"x'\": 0}}]}");
    json_t *res = NULL, *problem = NULL;
    int rc = engine_evaluate(m, req, NULL, &res, &problem);
    cr_assert_eq(rc, 0, "%s", problem ? json_dumps(problem, 0) : "");
    const json_t *st = json_array_get(json_object_get(res, "states"), 0);
    double thdd = -9.81 * 0.6;
    cr_assert(fabs(getd(st, "q", "y") + 0.8) < 1e-15, "y solved to %.17g", getd(st, "q", "y"));
    cr_assert(fabs(getd(st, "qddot", "x") - 0.8 * thdd) < 1e-12, "x'' %.17g", getd(st, "qddot", "x"));
    cr_assert(fabs(getd(st, "qddot", "y") - 0.6 * thdd) < 1e-12, "y'' %.17g", getd(st, "qddot", "y"));
    cr_assert(fabs(getd(st, "multipliers", "rod") + 1.5 * 9.81 * 0.8 / 2) < 1e-12, "rod multiplier %.17g",
              getd(st, "multipliers", "rod"));
    json_decref(res);
    json_decref(req);
    /* linearize at the bottom (guess y = -0.9): +-i sqrt(g/L), and a zero for the
     * dependent coordinate y, which stays in the state */
    res = linearize_ok(m, "{\"q\": {\"x\": 0, \"y\": -0.9}, \"speeds\": {\"x'\": 0}}");
    double w = sqrt(9.81);
    cr_assert_eq(
        json_array_size(json_object_get(json_array_get(json_object_get(res, "points"), 0), "eigenvalues")),
        3);
    int plus = 0, minus = 0, zero = 0;
    for (int i = 0; i < 3; i++) {
        double re = eig(res, 0, i, "re"), im = eig(res, 0, i, "im");
        plus += fabs(re) < 1e-12 && fabs(im - w) < 1e-12;
        minus += fabs(re) < 1e-12 && fabs(im + w) < 1e-12;
        zero += hypot(re, im) < 1e-12;
    }
    cr_assert(plus == 1 && minus == 1 && zero == 1, "eigenvalues +-i sqrt(g/L) and 0");
    /* on the independent coordinate x and the speed x': the pendulum's [[0, 1], [-g/L, 0]] */
    const json_t *ind = json_object_get(json_array_get(json_object_get(res, "points"), 0), "independent");
    cr_assert_not_null(ind, "the independent-coordinate linearization");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(ind, "states"), 0)), "x");
    const json_t *Ai = json_object_get(ind, "A");
    const double wantA[2][2] = {{0, 1}, {-9.81, 0}};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double a = json_number_value(json_array_get(json_array_get(Ai, i), j));
            cr_assert(fabs(a - wantA[i][j]) < 1e-13, "independent A[%d][%d] = %.17g", i, j, a);
        }
    double im0 =
        json_number_value(json_object_get(json_array_get(json_object_get(ind, "eigenvalues"), 0), "im"));
    cr_assert(fabs(im0 - w) < 1e-12 && json_array_size(json_object_get(ind, "eigenvalues")) == 2,
              "independent eigenvalues");
    json_decref(res);
    /* Newton from a guess it cannot leave (x beyond the rod) names the coordinate */
    req = support_loads("{\"q\": {\"x\": 1.5, \"y\": -0.5}, \"speeds\": {\"x'\": 0}, \"steady\": false}");
    rc = engine_linearize(m, req, NULL, NULL, &res, &problem);
    cr_assert_eq(rc, HAMEL_E_BAD_REQUEST);
    const char *path =
        json_string_value(json_object_get(json_array_get(json_object_get(problem, "errors"), 0), "path"));
    cr_assert(path && !strncmp(path, "q", 1), "path %s", path);
    char *text = json_dumps(problem, 0);
    int names_guess = text && strstr(text, "guess") != NULL;
    free(text);
    cr_assert(names_guess, "the problem names the guess");
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
}

/* Appell's example (api/examples/model-nonlinear.json) with the speeds eta1 = x',
 * eta2 = y', compiled. */
static engine_model *appell_reduced(void)
{
    json_t *mj = support_load_file("api/examples/model-nonlinear.json");
    json_object_set_new(
        mj, "speeds",
        json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", "eta1", "expr", "x'", "name", "eta2", "expr", "y'"));
    engine_model *m = support_compile_json(mj);
    json_decref(mj);
    return m;
}

/* Appell's example with its nonlinear constraint in the reduced form (speeds x', y'):
 * evaluate takes speeds, solves q' by Newton, and the speed derivatives of the
 * integrated equations equal the KKT system's x'', y'' (two formulations) and the
 * closed form x'' = -a g x'/(v (1 + a^2)), v = |(x', y')| (Appell, Hussain 4.2.13). */
Test(evaluate, nonlinear_reduced_form, .init = setup)
{
    engine_model *m = appell_reduced();
    if (!m->nl_reduced) {
        engine_model_release(m);
        cr_skip_test("this engine keeps nonlinear constraints in the multipliers formulation");
    }
    json_t *req = support_loads(
        "{\"states\": [{\"q\": {\"x\": 0, \"y\": 0, \"z\": 1}, \"speeds\": {\"eta1\": 3, \"eta2\": 4}}]}");
    json_t *res = NULL, *problem = NULL;
    int rc = engine_evaluate(m, req, NULL, &res, &problem);
    cr_assert_eq(rc, 0, "%s", problem ? json_dumps(problem, 0) : "");
    const json_t *st = json_array_get(json_object_get(res, "states"), 0);
    double a = 0.3, g = 9.81, v = 5.0;
    cr_assert(fabs(getd(st, "qdot", "z") - a * v) < 1e-12, "z' = a v: %.17g", getd(st, "qdot", "z"));
    double xdd = -a * g * 3.0 / (v * (1 + a * a)), ydd = -a * g * 4.0 / (v * (1 + a * a));
    cr_assert(fabs(getd(st, "speeds_dot", "eta1") - xdd) < 1e-12 &&
                  fabs(getd(st, "speeds_dot", "eta2") - ydd) < 1e-12,
              "speeds' (%.17g, %.17g), closed form (%.17g, %.17g)", getd(st, "speeds_dot", "eta1"),
              getd(st, "speeds_dot", "eta2"), xdd, ydd);
    cr_assert(fabs(getd(st, "qddot", "x") - xdd) < 1e-12 && fabs(getd(st, "qddot", "y") - ydd) < 1e-12,
              "KKT q'' (%.17g, %.17g)", getd(st, "qddot", "x"), getd(st, "qddot", "y"));
    json_decref(res);
    json_decref(req);
    engine_model_release(m);
}

/* Linearizing Appell's example in the reduced form (explicit kinematics z' = a v): A
 * against central differences of the integrated right-hand side, and its closed form:
 * with g_ = a g/(1 + a^2), eta' = -g_ eta/v has eigenvalues 0 (the direction of motion
 * turns freely) and -g_/v (the speed decays); dz'/deta = a eta/v. */
Test(linearize, nonlinear_reduced_form, .init = setup)
{
    engine_model *m = appell_reduced();
    if (!m->nl_reduced || !m->tape_fast) {
        engine_model_release(m);
        cr_skip_test("no explicit reduced form for Appell's example in this engine");
    }
    json_t *res = linearize_ok(
        m,
        "{\"q\": {\"x\": 0, \"y\": 0, \"z\": 1}, \"speeds\": {\"eta1\": 3, \"eta2\": 4}, \"steady\": false}");
    const json_t *pt = json_array_get(json_object_get(res, "points"), 0), *A = json_object_get(pt, "A");
    double a = 0.3, g = 9.81, v = 5.0, gg = a * g / (1 + a * a);
    double dz1 = json_number_value(json_array_get(json_array_get(A, 2), 3));
    double d11 = json_number_value(json_array_get(json_array_get(A, 3), 3));
    cr_assert(fabs(dz1 - a * 3 / v) < 1e-14, "dz'/deta1 %.17g", dz1);
    cr_assert(fabs(d11 + gg * (1 / v - 9 / (v * v * v))) < 1e-13, "deta1'/deta1 %.17g", d11);
    cr_assert(fabs(eig(res, 0, 4, "re") + gg / v) < 1e-13, "the speed's decay rate %.17g, closed form %.17g",
              eig(res, 0, 4, "re"), -gg / v);
    /* against central differences of hamel_rhs at a generic state */
    hamel_ws *hw = hamel_ws_new(m, m->param_values);
    double y[5] = {0.3, -0.2, 1.1, 1.3, -0.7}, f[5], Al[25], yp[5], fp[5], fm[5];
    cr_assert_eq(lin_jacobian(m, m->param_values, 0.0, y, y + 3, NULL, 0, 0, f, Al, NULL, NULL), 0);
    for (int j = 0; j < 5; j++) {
        double h = 1e-5 * (1 + fabs(y[j]));
        memcpy(yp, y, sizeof y);
        yp[j] = y[j] + h;
        hamel_rhs(0.0, yp, fp, hw);
        yp[j] = y[j] - h;
        hamel_rhs(0.0, yp, fm, hw);
        for (int i = 0; i < 5; i++) {
            double fd = (fp[i] - fm[i]) / (2 * h);
            cr_assert(fabs(Al[i * 5 + j] - fd) <= 1e-7 * (1 + fabs(fd)), "A[%d][%d] %.17g vs %.17g", i, j,
                      Al[i * 5 + j], fd);
        }
    }
    hamel_ws_free(hw);
    json_decref(res);
    engine_model_release(m);
}

/* ---- nonlinear constraints solved by Newton (issue 9's leftover) ---- */

/* Appell's example with its constraint squared, z'^2 = a^2 (x'^2 + y'^2): not linear in
 * any velocity, so q' is found by Newton at each evaluation (no reduced tape). On the
 * branch z' = +a v its gradient is 2 z' times the explicit one's, so the Chetaev
 * equations, and their linearization, are those of appell_reduced. */
static engine_model *appell_squared(void)
{
    json_t *mj = support_load_file("api/examples/model-nonlinear.json");
    json_object_set_new(
        mj, "speeds",
        json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", "eta1", "expr", "x'", "name", "eta2", "expr", "y'"));
    json_object_set_new(mj, "constraints",
                        json_pack("[{s:s, s:s}]", "name", "appell", "expr", "z'^2 - a^2*(x'^2 + y'^2)"));
    engine_model *m = support_compile_json(mj);
    json_decref(mj);
    return m;
}

static double mat(const json_t *pt, const char *key, int i, int j)
{
    const json_t *v = json_array_get(json_array_get(json_object_get(pt, key), i), j);
    cr_assert(json_is_number(v), "%s[%d][%d] is a number", key, i, j);
    return json_number_value(v);
}

/* The two writings of Appell's constraint linearize alike (A, B for g and a, f), to
 * 1e-9, at a generic state; the Newton one's A also against central differences of its
 * integrated right-hand side (the implicit function theorem, not differences, makes A). */
Test(linearize, nonlinear_by_newton, .init = setup)
{
    engine_model *me = appell_reduced(), *mn = appell_squared();
    cr_assert(me->nl_reduced && me->tape_fast, "the explicit writing has a reduced tape");
    cr_assert(mn->nl_reduced && !mn->tape_fast, "the squared writing needs Newton");
    const char *req = "{\"q\": {\"x\": 0.3, \"y\": -0.2, \"z\": 1.1}, \"speeds\": {\"eta1\": 1.3, \"eta2\": "
                      "-0.7}, \"t\": 0.4, \"inputs\": [\"g\", \"a\"], \"steady\": false}";
    double v = hypot(1.3, 0.7);
    /* the squared writing has two roots z' = +-a v for these speeds (a 422 naming them,
     * issue 15): the upper one is given as qdot */
    char reqn[300];
    snprintf(
        reqn, sizeof reqn,
        "{\"q\": {\"x\": 0.3, \"y\": -0.2, \"z\": 1.1}, \"qdot\": {\"x\": 1.3, \"y\": -0.7, \"z\": %.17g}, "
        "\"t\": 0.4, \"inputs\": [\"g\", \"a\"], \"steady\": false}",
        0.3 * v);
    json_t *re = linearize_ok(me, req), *rn = linearize_ok(mn, reqn);
    const json_t *pe = json_array_get(json_object_get(re, "points"), 0);
    const json_t *pn = json_array_get(json_object_get(rn, "points"), 0);
    cr_assert(fabs(getd(pn, "qdot", "z") - 0.3 * v) < 1e-14, "Newton's z' %.17g", getd(pn, "qdot", "z"));
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 5; j++) {
            double a = mat(pe, "A", i, j), b = mat(pn, "A", i, j);
            cr_assert(fabs(a - b) <= 1e-9 * (1 + fabs(a)), "A[%d][%d]: explicit %.17g, Newton %.17g", i, j, a,
                      b);
        }
        for (int j = 0; j < 2; j++) {
            double a = mat(pe, "B", i, j), b = mat(pn, "B", i, j);
            cr_assert(fabs(a - b) <= 1e-9 * (1 + fabs(a)), "B[%d][%d]: explicit %.17g, Newton %.17g", i, j, a,
                      b);
        }
    }
    for (int i = 0; i < 5; i++) {
        double a = eig(re, 0, i, "re"), b = eig(rn, 0, i, "re");
        cr_assert(fabs(a - b) <= 1e-9 * (1 + fabs(a)), "eigenvalue %d: %.17g vs %.17g", i, a, b);
    }
    /* the explicit model's numeric path (Newton too, from the reduced tape's q') agrees */
    double y[5] = {0.3, -0.2, 1.1, 1.3, -0.7}, f[5], Ae[25], An[25], Aw[25];
    double qd[3] = {1.3, -0.7, 0.3 * v};
    cr_assert_eq(lin_jacobian(me, me->param_values, 0.4, y, y + 3, NULL, 0, 0, f, Ae, NULL, NULL), 0);
    cr_assert_eq(
        lin_jacobian_at(me, me->param_values, 0.4, y, y + 3, qd, NULL, 0, 1, f, An, NULL, NULL, 0, NULL), 0);
    cr_assert_eq(
        lin_jacobian_at(mn, mn->param_values, 0.4, y, y + 3, qd, NULL, 0, 0, f, Aw, NULL, NULL, 2, NULL), 0,
        "in passes of two directions, each solving q' again");
    for (int i = 0; i < 25; i++) {
        cr_assert(fabs(Ae[i] - An[i]) <= 1e-12 * (1 + fabs(Ae[i])), "numeric path A[%d] %.17g vs %.17g", i,
                  An[i], Ae[i]);
        cr_assert(fabs(Ae[i] - Aw[i]) <= 1e-9 * (1 + fabs(Ae[i])), "chunked A[%d] %.17g vs %.17g", i, Aw[i],
                  Ae[i]);
    }
    /* central differences of the Newton model's integrated right-hand side (test only) */
    hamel_ws *hw = hamel_ws_new(mn, mn->param_values);
    double yp[5], fp[5], fm[5];
    for (int j = 0; j < 5; j++) {
        double h = 1e-5 * (1 + fabs(y[j]));
        memcpy(yp, y, sizeof y);
        yp[j] = y[j] + h;
        hamel_ws_set_guess(hw, qd);
        cr_assert_eq(hamel_rhs(0.4, yp, fp, hw), 0);
        yp[j] = y[j] - h;
        hamel_ws_set_guess(hw, qd);
        cr_assert_eq(hamel_rhs(0.4, yp, fm, hw), 0);
        for (int i = 0; i < 5; i++) {
            double fd = (fp[i] - fm[i]) / (2 * h);
            cr_assert(fabs(Aw[i * 5 + j] - fd) <= 1e-7 * (1 + fabs(fd)),
                      "A[%d][%d] %.17g vs differences %.17g", i, j, Aw[i * 5 + j], fd);
        }
    }
    hamel_ws_free(hw);
    json_decref(re);
    json_decref(rn);
    /* given as qdot on the other branch (z' = -a v), Newton stays there: dz'/deta1 = -a
     * eta1/v */
    char text[300];
    snprintf(
        text, sizeof text,
        "{\"q\": {\"x\": 0.3, \"y\": -0.2, \"z\": 1.1}, \"qdot\": {\"x\": 1.3, \"y\": -0.7, \"z\": %.17g}, "
        "\"steady\": false}",
        -0.3 * v);
    rn = linearize_ok(mn, text);
    pn = json_array_get(json_object_get(rn, "points"), 0);
    cr_assert(fabs(mat(pn, "A", 2, 3) + 0.3 * 1.3 / v) < 1e-12, "dz'/deta1 on the lower branch %.17g",
              mat(pn, "A", 2, 3));
    json_decref(rn);
    engine_model_release(me);
    engine_model_release(mn);
}

/* evaluate of the Newton model: the speeds' derivatives are the explicit model's. */
Test(evaluate, nonlinear_by_newton, .init = setup)
{
    engine_model *me = appell_reduced(), *mn = appell_squared();
    json_t *req =
        support_loads("{\"states\": [{\"q\": {\"x\": 0, \"y\": 0, \"z\": 1}, \"speeds\": {\"eta1\": 3, "
                      "\"eta2\": 4}}]}");
    /* the squared writing: two roots for these speeds, the upper one given as qdot */
    json_t *reqn = support_loads("{\"states\": [{\"q\": {\"x\": 0, \"y\": 0, \"z\": 1}, \"qdot\": {\"x\": 3, "
                                 "\"y\": 4, \"z\": 1.5}}]}");
    json_t *re = NULL, *rn = NULL, *problem = NULL;
    cr_assert_eq(engine_evaluate(me, req, NULL, &re, &problem), 0, "%s",
                 problem ? json_dumps(problem, 0) : "");
    cr_assert_eq(engine_evaluate(mn, reqn, NULL, &rn, &problem), 0, "%s",
                 problem ? json_dumps(problem, 0) : "");
    json_decref(reqn);
    const json_t *se = json_array_get(json_object_get(re, "states"), 0);
    const json_t *sn = json_array_get(json_object_get(rn, "states"), 0);
    const char *keys[][2] = {{"speeds_dot", "eta1"}, {"speeds_dot", "eta2"}, {"qdot", "z"}, {"qddot", "z"}};
    for (int i = 0; i < 4; i++) {
        double a = getd(se, keys[i][0], keys[i][1]), b = getd(sn, keys[i][0], keys[i][1]);
        cr_assert(fabs(a - b) <= 1e-12 * (1 + fabs(a)), "%s.%s: %.17g vs %.17g", keys[i][0], keys[i][1], a,
                  b);
    }
    json_decref(re);
    json_decref(rn);
    json_decref(req);
    engine_model_release(me);
    engine_model_release(mn);
}

/* ---- cancellation and the deadline (engine_control) ---- */

static json_t *many_points(const char *key, int count)
{
    json_t *arr = json_array();
    for (int i = 0; i < count; i++)
        json_array_append_new(arr,
                              json_pack("{s:{s:f}, s:{s:f}}", "q", "th", 0.001 * i, "speeds", "th'", 0.0));
    json_t *req = json_pack("{s:o}", key, arr);
    if (!strcmp(key, "points"))
        json_object_set_new(req, "steady", json_false());
    return req;
}

Test(linearize, cancelled_and_deadline, .init = setup)
{
    engine_model *m = support_compile_text(pendulum);
    engine_control ctl;
    memset(&ctl, 0, sizeof ctl);
    atomic_init(&ctl.cancel, 1);
    const char *keys[] = {"points", "states"};
    for (int e = 0; e < 2; e++) {
        json_t *req = many_points(keys[e], 200), *res = NULL, *problem = NULL;
        /* a set cancel flag: HAMEL_E_CANCELLED, as a compilation */
        atomic_store(&ctl.cancel, 1);
        ctl.max_wall_seconds = 0;
        int rc = e ? engine_evaluate_ctl(m, req, NULL, &ctl, &res, &problem)
                   : engine_linearize(m, req, NULL, &ctl, &res, &problem);
        cr_assert_eq(rc, HAMEL_E_CANCELLED, "%s: rc %d", keys[e], rc);
        cr_assert_null(res);
        cr_assert_not_null(problem);
        cr_assert_not_null(strstr(json_string_value(json_object_get(problem, "detail")), "cancelled"));
        json_decref(problem);
        problem = NULL;
        /* past the deadline (1 us): 422 compile-limit naming max_compile_seconds */
        atomic_store(&ctl.cancel, 0);
        ctl.max_wall_seconds = 1e-6;
        rc = e ? engine_evaluate_ctl(m, req, NULL, &ctl, &res, &problem)
               : engine_linearize(m, req, NULL, &ctl, &res, &problem);
        cr_assert_eq(rc, HAMEL_E_COMPILE_LIMIT, "%s: rc %d", keys[e], rc);
        cr_assert_str_eq(json_string_value(json_object_get(problem, "limit")), "max_compile_seconds");
        cr_assert_str_eq(json_string_value(json_object_get(problem, "stage")),
                         e ? "evaluation" : "linearization");
        json_decref(problem);
        problem = NULL;
        /* no stop: the whole sweep */
        ctl.max_wall_seconds = 0;
        rc = e ? engine_evaluate_ctl(m, req, NULL, &ctl, &res, &problem)
               : engine_linearize(m, req, NULL, &ctl, &res, &problem);
        cr_assert_eq(rc, 0, "%s", problem ? json_dumps(problem, 0) : "");
        cr_assert_eq(json_array_size(json_object_get(res, keys[e])), 200);
        json_decref(res);
        json_decref(req);
    }
    engine_model_release(m);
}

/* The limits alone (no control) bound a request too; NULL limits and control: none. A
 * stopped budget stops lin_jacobian_at before its next pass of directions (-2). */
Test(linearize, limits_alone_and_the_pass_check, .init = setup)
{
    engine_model *m = support_compile_text(pendulum);
    engine_limits lim = engine_default_limits;
    lim.max_compile_seconds = 1e-6;
    json_t *req = many_points("points", 200), *res = NULL, *problem = NULL;
    cr_assert_eq(engine_linearize(m, req, &lim, NULL, &res, &problem), HAMEL_E_COMPILE_LIMIT);
    json_decref(problem);
    problem = NULL;
    cr_assert_eq(engine_linearize(m, req, NULL, NULL, &res, &problem), 0, "no budget");
    json_decref(res);
    json_decref(req);
    atomic_int cancel;
    atomic_init(&cancel, 1);
    budget b;
    budget_init(&b, 0, 0, &cancel);
    double y[2] = {0.1, 0.0}, f[2], A[4];
    cr_assert_eq(
        lin_jacobian_at(m, m->param_values, 0.0, y, y + 1, NULL, NULL, 0, 0, f, A, NULL, NULL, 1, &b), -2);
    atomic_store(&cancel, 0);
    budget_init(&b, 0, 0, &cancel);
    cr_assert_eq(
        lin_jacobian_at(m, m->param_values, 0.0, y, y + 1, NULL, NULL, 0, 0, f, A, NULL, NULL, 1, &b), 0);
    engine_model_release(m);
}

/* A nonlinear constraint that depends on q, t and a parameter, written explicitly and
 * squared: z' = a (1 + x^2/4) |(x', y')| + c sin t. The Newton path's partial derivatives
 * of the constraint (along q, t, a) enter dq'; A, B (a, c) and df/dt agree to 1e-9. */
Test(linearize, nonlinear_by_newton_depends_on_q_t_p, .init = setup)
{
    const char *fmt =
        "{\"coordinates\": [\"x\", \"y\", \"z\"], \"parameters\": {\"m\": 2.0, \"g\": 9.81, \"a\": 0.3, "
        "\"c\": 0.2}, \"kinetic_energy\": \"m/2*(x'^2 + y'^2 + z'^2) + m/4*x^2*y'^2\", "
        "\"potential_energy\": \"m*g*z + x*y\", \"speeds\": [{\"name\": \"e1\", \"expr\": \"x'\"}, "
        "{\"name\": \"e2\", \"expr\": \"y'\"}], \"constraints\": [{\"name\": \"k\", \"expr\": \"%s\"}]}";
    char text[1200];
    snprintf(text, sizeof text, fmt, "z' - a*(1 + x^2/4)*sqrt(x'^2 + y'^2) - c*sin(t)");
    engine_model *me = support_compile_text(text);
    snprintf(text, sizeof text, fmt, "(z' - c*sin(t))^2 - a^2*(1 + x^2/4)^2*(x'^2 + y'^2)");
    engine_model *mn = support_compile_text(text);
    cr_assert(me->nl_reduced && me->tape_fast, "explicit");
    cr_assert(mn->nl_reduced && !mn->tape_fast, "Newton");
    double t = 0.7, y[5] = {0.4, -0.3, 1.1, 1.3, -0.7}, v = hypot(1.3, 0.7);
    double qd[3] = {1.3, -0.7, 0.3 * (1 + 0.04) * v + 0.2 * sin(t)};
    int inputs[2] = {model_param_index(me, "a"), model_param_index(me, "c")};
    cr_assert(inputs[0] == model_param_index(mn, "a") && inputs[1] == model_param_index(mn, "c"));
    double fe[5], fn[5], Ae[25], An[25], Be[10], Bn[10], te[5], tn[5];
    cr_assert_eq(
        lin_jacobian_at(me, me->param_values, t, y, y + 3, NULL, inputs, 2, 0, fe, Ae, Be, te, 0, NULL), 0);
    cr_assert_eq(
        lin_jacobian_at(mn, mn->param_values, t, y, y + 3, qd, inputs, 2, 0, fn, An, Bn, tn, 0, NULL), 0);
    for (int i = 0; i < 5; i++) {
        cr_assert(fabs(fe[i] - fn[i]) <= 1e-12 * (1 + fabs(fe[i])), "f[%d] %.17g vs %.17g", i, fe[i], fn[i]);
        cr_assert(fabs(te[i] - tn[i]) <= 1e-9 * (1 + fabs(te[i])), "df/dt[%d] %.17g vs %.17g", i, te[i],
                  tn[i]);
        for (int j = 0; j < 5; j++)
            cr_assert(fabs(Ae[i * 5 + j] - An[i * 5 + j]) <= 1e-9 * (1 + fabs(Ae[i * 5 + j])),
                      "A[%d][%d] %.17g vs %.17g", i, j, Ae[i * 5 + j], An[i * 5 + j]);
        for (int j = 0; j < 2; j++)
            cr_assert(fabs(Be[i * 2 + j] - Bn[i * 2 + j]) <= 1e-9 * (1 + fabs(Be[i * 2 + j])),
                      "B[%d][%d] %.17g vs %.17g", i, j, Be[i * 2 + j], Bn[i * 2 + j]);
    }
    /* dz'/dx is not zero here (the constraint depends on x): the partial term is used */
    cr_assert(fabs(An[2 * 5 + 0] - 0.3 * 0.5 * 0.4 * v) < 1e-12, "dz'/dx %.17g", An[2 * 5 + 0]);
    /* central differences of the Newton model in t, q, u and a (test only) */
    hamel_ws *hw = hamel_ws_new(mn, mn->param_values);
    double yp[5], fp[5], fm[5];
    for (int j = -1; j < 5; j++) {
        double h = 1e-5, tp = t, tm = t;
        memcpy(yp, y, sizeof y);
        if (j < 0) {
            tp = t + h;
            tm = t - h;
        } else {
            yp[j] = y[j] + h;
        }
        hamel_ws_set_guess(hw, qd);
        cr_assert_eq(hamel_rhs(tp, yp, fp, hw), 0);
        if (j >= 0)
            yp[j] = y[j] - h;
        hamel_ws_set_guess(hw, qd);
        cr_assert_eq(hamel_rhs(tm, yp, fm, hw), 0);
        for (int i = 0; i < 5; i++) {
            double fd = (fp[i] - fm[i]) / (2 * h), an = j < 0 ? tn[i] : An[i * 5 + j];
            cr_assert(fabs(an - fd) <= 1e-7 * (1 + fabs(fd)), "d f[%d]/d %d: %.17g vs differences %.17g", i,
                      j, an, fd);
        }
    }
    hamel_ws_free(hw);
    engine_model_release(me);
    engine_model_release(mn);
}
