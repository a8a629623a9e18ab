/* test_forms.c — the classical forms of the equations of motion (issue 10, part 4;
 * forms.h): each form's residual (lhs - rhs, in q, u, u', t) must vanish at random
 * states (q, u) with u' from the integrated right-hand side (hamel_rhs), on the
 * shared cases and on Appell's nonlinear example, for every form that applies; forms
 * that do not apply are a 422 naming "form". Also GET-style access through
 * engine_equations_form (cached per model).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "forms.h"
#include "hamel.h"
#include "model.h"
#include "support.h"

static void setup(void) { engine_init(); }

static engine_model *compile_case(const char *file)
{
    json_t *c = support_load_case(file);
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    json_decref(c);
    return m;
}

static double urand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (double)((*s >> 8) & 0xFFFFFF) / 16777216.0;
}

/* The residuals of a form at 5 random states; returns the largest |residual| relative
 * to 1 + the largest |u'|. */
static double check_form(engine_model *m, const char *form)
{
    json_t *doc = NULL, *problem = NULL;
    expr **res = NULL;
    int *acc = NULL;
    pthread_mutex_lock(&m->forms_lock);
    int rc = forms_build(m, form, &doc, &res, &acc, &problem);
    pthread_mutex_unlock(&m->forms_lock);
    if (rc)
        cr_assert_fail("%s: form %s failed: %s", m->name, form, json_dumps(problem, 0));
    cr_assert_eq(json_array_size(json_object_get(doc, "equations")), (size_t)m->k,
                 "%s: one equation per speed", form);
    int n = m->n, k = m->k, ns = expr_sym_count(m->ctx);
    double *vals = calloc(ns + 1, sizeof *vals), y[64], dy[64], qd[32];
    hamel_ws *w = hamel_ws_new(m, m->param_values);
    cr_assert(vals && w);
    unsigned seed = 12345;
    double worst = 0.0;
    for (int trial = 0; trial < 5; trial++) {
        double t = urand(&seed);
        for (int i = 0; i < n; i++)
            y[i] = 0.3 + urand(&seed);
        for (int r = 0; r < k; r++)
            y[n + r] = 2 * urand(&seed) - 1;
        if (m->nl_reduced) { /* Appell: keep v away from 0 */
            for (int r = 0; r < k; r++)
                y[n + r] = 1 + urand(&seed);
            hamel_ws_set_guess(w, (double[]){1, 1, 1, 1, 1, 1});
        }
        cr_assert_eq(hamel_rhs(t, y, dy, w), 0, "%s: the right-hand side at a random state", form);
        cr_assert_eq(hamel_qdot(w, t, y, y + n, qd), 0);
        for (int s = 0; s < ns; s++) {
            const expr_symbol *sym = expr_sym_get(m->ctx, s);
            if (sym->cls == SYM_PARAM)
                vals[s] = m->param_values[sym->index];
            else if (sym->cls == SYM_TIME)
                vals[s] = t;
            else if (sym->cls == SYM_COORD)
                vals[s] = y[sym->index];
            else if (sym->cls == SYM_VELOCITY)
                vals[s] = qd[sym->index];
        }
        double umax = 1.0;
        for (int r = 0; r < k; r++) {
            if (expr_sym_get(m->ctx, m->sym_u[r])->cls == SYM_SPEED)
                vals[m->sym_u[r]] = y[n + r];
            vals[acc[r]] = dy[n + r];
            umax = fmax(umax, fabs(dy[n + r]));
        }
        for (int r = 0; r < k; r++) {
            double v = expr_eval(m->ctx, res[r], vals);
            cr_assert(isfinite(v), "%s %s: residual %d not finite", m->name, form, r);
            worst = fmax(worst, fabs(v) / umax);
        }
    }
    hamel_ws_free(w);
    free(vals);
    free(res);
    free(acc);
    json_decref(doc);
    return worst;
}

static void check_all(engine_model *m, int voronec)
{
    static const char *const forms[] = {"hamel", "appell", "kane", "maggi", "voronec"};
    for (int f = 0; f < 5; f++) {
        if (f == 4 && !voronec)
            continue;
        if (f == 0 && m->nl_reduced)
            continue;
        double r = check_form(m, forms[f]);
        if (getenv("FORMS_VERBOSE"))
            fprintf(stderr, "%s %s %.3g\n", m->name, forms[f], r);
        cr_expect_lt(r, 1e-9, "%s: the %s form against the integrated right-hand side: %.3g", m->name,
                     forms[f], r);
    }
}

Test(forms, rolling_disk, .init = setup)
{
    engine_model *m = compile_case("greenwood-5.3-rolling-disk.json");
    check_all(m, 0);
    json_t *doc = NULL, *problem = NULL;
    cr_expect_eq(engine_equations_form(m, "voronec", &doc, &problem), HAMEL_E_BAD_REQUEST,
                 "Voronec needs Chaplygin-type speeds");
    cr_expect_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(problem, "errors"), 0), "path")),
        "form");
    json_decref(problem);
    engine_model_release(m);
}

/* Every form of a shared case (Voronec's too when `voronec`). */
static void check_case(const char *file, int voronec)
{
    engine_model *m = compile_case(file);
    check_all(m, voronec);
    engine_model_release(m);
}

Test(forms, rolling_sphere_voronec, .init = setup) { check_case("lemos-rolling-sphere.json", 1); }

Test(forms, suslov_dumbbell, .init = setup) { check_case("greenwood-5.4-dumbbell-suslov.json", 1); }

Test(forms, knife_edge_body, .init = setup) { check_case("greenwood-5.1-knife-edge-body.json", 0); }

Test(forms, axle_incline, .init = setup) { check_case("wang-pao-axle-incline.json", 1); }

Test(forms, appell_nonlinear, .init = setup)
{
    json_t *js = json_loads(
        "{\"name\": \"appell\", \"coordinates\": [\"x\", \"y\", \"z\"], \"parameters\": {\"m\": 1, \"g\": "
        "9.81, "
        "\"a\": 0.5}, \"kinetic_energy\": \"1/2*m*(x'^2 + y'^2 + z'^2)\", \"potential_energy\": \"m*g*z\", "
        "\"constraints\": [{\"name\": \"wheel\", \"expr\": \"z' - a*sqrt(x'^2 + y'^2)\"}], \"speeds\": "
        "[{\"name\": \"eta1\", \"expr\": \"x'\"}, {\"name\": \"eta2\", \"expr\": \"y'\"}]}",
        0, NULL);
    engine_model *m = support_compile_json(js);
    json_decref(js);
    check_all(m, 0);
    json_t *doc = NULL, *problem = NULL;
    cr_expect_eq(engine_equations_form(m, "hamel", &doc, &problem), HAMEL_E_BAD_REQUEST);
    json_decref(problem);
    problem = NULL;
    cr_assert_eq(engine_equations_form(m, "appell", &doc, &problem), 0);
    cr_expect_not_null(json_string_value(json_object_get(doc, "acceleration_energy")));
    json_decref(doc);
    engine_model_release(m);
}

Test(forms, unknown_form, .init = setup)
{
    engine_model *m = compile_case("greenwood-5.2-dumbbell-hamel.json");
    json_t *doc = NULL, *problem = NULL;
    cr_expect_eq(engine_equations_form(m, "lagrange", &doc, &problem), HAMEL_E_BAD_REQUEST);
    json_decref(problem);
    /* twice: the second answer comes from the cache and is the same document */
    json_t *a = NULL, *b = NULL;
    cr_assert_eq(engine_equations_form(m, "kane", &a, &problem), 0);
    cr_assert_eq(engine_equations_form(m, "kane", &b, &problem), 0);
    cr_expect(json_equal(a, b));
    json_decref(a);
    json_decref(b);
    engine_model_release(m);
}

/* The equations document is printed on first request (equations_ensure), under the
 * lock the forms take: asking for a form first, or from two threads at once, gives
 * the very same documents as asking for the equations first. */
static char *dump_equations(engine_model *m, const char *form)
{
    json_t *doc = NULL, *problem = NULL;
    int rc = form ? engine_equations_form(m, form, &doc, &problem) : engine_equations(m, &doc, &problem);
    cr_assert_eq(rc, 0, "equations (form %s) failed", form ? form : "default");
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(doc);
    return text;
}

Test(forms, equations_same_in_any_order, .init = setup)
{
    engine_model *a = compile_case("greenwood-5.3-rolling-disk.json");
    engine_model *b = compile_case("greenwood-5.3-rolling-disk.json");
    char *a_eq = dump_equations(a, NULL), *a_kane = dump_equations(a, "kane");
    char *b_kane = dump_equations(b, "kane"), *b_eq = dump_equations(b, NULL);
    cr_expect_str_eq(a_eq, b_eq, "the equations after a form differ from the equations first");
    cr_expect_str_eq(a_kane, b_kane, "the Kane form after the equations differs from it first");
    cr_expect(strstr(a_eq, "\"gamma\"") != NULL, "the document has its gamma list: %.200s", a_eq);
    free(a_eq);
    free(a_kane);
    free(b_eq);
    free(b_kane);
    engine_model_release(a);
    engine_model_release(b);
}

static void *equations_thread(void *arg) { return dump_equations(arg, NULL); }

Test(forms, equations_concurrent_first_request, .init = setup)
{
    engine_model *m = compile_case("greenwood-5.1-knife-edge-body.json");
    pthread_t t[4];
    char *text[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, equations_thread, m), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], (void **)&text[i]);
    for (int i = 1; i < 4; i++)
        cr_expect_str_eq(text[0], text[i], "thread %d got another document", i);
    for (int i = 0; i < 4; i++)
        free(text[i]);
    engine_model_release(m);
}

/* A compiled model's symbol table does not grow when its equations or a form are
 * printed (simulations read it without a lock): the acceleration symbols are made at
 * compile time, where the equations used to be printed. */
Test(forms, symbols_fixed_after_compile, .init = setup)
{
    engine_model *m = compile_case("greenwood-5.3-rolling-disk.json");
    int ns = expr_sym_count(m->ctx);
    free(dump_equations(m, NULL));
    cr_expect_eq(expr_sym_count(m->ctx), ns, "the equations added symbols");
    free(dump_equations(m, "kane"));
    cr_expect_eq(expr_sym_count(m->ctx), ns, "the Kane form added symbols");
    engine_model_release(m);
}
