/* test_param_gamma.c — Hamel coefficients that vanish at the model's parameter values
 * only (review of round 3, from outside). The constraint z' - (1 + e)*y*x' - x*y' with
 * speeds a = x', b = y': X_a = d/dx + (1 + e) y d/dz, X_b = d/dy + x d/dz, [X_a, X_b] =
 * -e d/dz, so gamma^c_ab = -e (by hand). With e = 0 in the model it is integrable (z =
 * xy); the coefficient was decided zero at e = 0 and left out of the derived equations
 * (an expression in e) and of the lists of /v1/hamel and of runs at e = 0.5.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "support.h"

static void setup(void) { engine_init(); }

TestSuite(param_gamma, .init = setup, .timeout = 60);

static engine_model *heisenberg(double e)
{
    char text[768];
    snprintf(text, sizeof text,
             "{\"name\": \"near-integrable\", \"coordinates\": [\"x\", \"y\", \"z\"], \"parameters\": "
             "{\"e\": %.17g},"
             " \"kinetic_energy\": \"1/2*(x'^2 + y'^2 + z'^2)\","
             " \"constraints\": [{\"name\": \"c\", \"expr\": \"z' - (1 + e)*y*x' - x*y'\"}],"
             " \"speeds\": [{\"name\": \"a\", \"expr\": \"x'\"}, {\"name\": \"b\", \"expr\": \"y'\"}]}",
             e);
    return support_compile_text(text);
}

/* gamma^c_ab of a run's "hamel" at its initial state, or of a /v1/hamel result; NAN when
 * not listed. */
static double listed_gamma(const json_t *r, size_t *count)
{
    const json_t *h =
        json_object_get(r, "hamel") ? json_object_get(r, "hamel") : r; /* a run's, or /v1/hamel's */
    const json_t *g = json_object_get(json_array_get(json_object_get(h, "points"), 0), "gamma");
    *count = json_array_size(g);
    for (size_t i = 0; i < json_array_size(g); i++) {
        const json_t *e = json_array_get(g, i);
        if (!strcmp(json_string_value(json_object_get(e, "j")), "c") &&
            !strcmp(json_string_value(json_object_get(e, "r")), "a") &&
            !strcmp(json_string_value(json_object_get(e, "l")), "b"))
            return json_number_value(json_object_get(e, "value"));
    }
    return NAN;
}

Test(param_gamma, a_coefficient_zero_at_the_models_parameters_only)
{
    const char *req_other =
        "{\"initial\": {\"q\": {\"x\": 0.3, \"y\": 0.2, \"z\": 0}, \"speeds\": {\"a\": 0.4, \"b\": "
        "-0.3}}, \"t_end\": 1, \"output\": {\"samples\": 2}, \"hamel\": \"initial\", "
        "\"parameters\": {\"e\": 0.5}}";
    const char *req_own =
        "{\"initial\": {\"q\": {\"x\": 0.3, \"y\": 0.2, \"z\": 0}, \"speeds\": {\"a\": 0.4, \"b\": "
        "-0.3}}, \"t_end\": 1, \"output\": {\"samples\": 2}, \"hamel\": \"initial\"}";
    static const double defaults[] = {0.0, 1e-9};
    for (int k = 0; k < 2; k++) {
        engine_model *m = heisenberg(defaults[k]);
        size_t count = 0;
        json_t *r = support_run(m, req_other);
        double g = listed_gamma(r, &count);
        cr_expect(g == -0.5 && count == 2,
                  "e = %g in the model, 0.5 in the run: gamma^c_ab %g (of %zu listed), exact -0.5",
                  defaults[k], g, count);
        json_decref(r);
        if (k == 0) {
            r = support_run(m, req_own);
            listed_gamma(r, &count);
            cr_expect(count == 0, "at e = 0 every coefficient vanishes identically: %zu listed", count);
            json_decref(r);
            /* the derived equations are in e: gamma^c_ab = -e */
            json_t *eq = NULL, *problem = NULL;
            cr_assert_eq(engine_equations(m, &eq, &problem), 0);
            char *text = json_dumps(json_object_get(eq, "gamma"), JSON_COMPACT);
            cr_expect(text && strstr(text, "\"expr\":\"-e\""), "the equations list gamma^c_ab = -e: %s",
                      text ? text : "(none)");
            free(text);
            json_decref(eq);
        }
        /* POST /v1/hamel with the other value */
        json_t *hreq =
            support_loads("{\"parameters\": {\"e\": 0.5}, \"q\": {\"x\": 0.3, \"y\": 0.2, \"z\": 0}}");
        json_t *hres = NULL, *problem = NULL;
        cr_assert_eq(engine_hamel(m, hreq, NULL, &hres, &problem), 0);
        g = listed_gamma(hres, &count);
        cr_expect(g == -0.5 && count == 2, "/v1/hamel at e = 0.5 (model e = %g): gamma^c_ab %g of %zu",
                  defaults[k], g, count);
        json_decref(hres);
        json_decref(hreq);
        engine_model_release(m);
    }
}

/* A coefficient 1e-9 of its terms is a coefficient: z' - (1 + 1e-9)*y*x' - x*y' has
 * gamma^c_ab = -(1 + 1e-9 - 1) (the double 1 + 1e-9 minus 1: -1.000000082740371e-09) and is
 * not integrable; it was listed as zero (the structure's resolution was 1e-9 of the
 * rounding scale). */
Test(param_gamma, a_coefficient_1e_9_of_its_terms_is_listed)
{
    engine_model *m = support_compile_text(
        "{\"name\": \"nearly\", \"coordinates\": [\"x\", \"y\", \"z\"], \"kinetic_energy\": \"1/2*(x'^2 + "
        "y'^2 + z'^2)\","
        " \"constraints\": [{\"name\": \"c\", \"expr\": \"z' - (1 + 1e-9)*y*x' - x*y'\"}],"
        " \"speeds\": [{\"name\": \"a\", \"expr\": \"x'\"}, {\"name\": \"b\", \"expr\": \"y'\"}]}");
    json_t *req = support_loads("{\"q\": {\"x\": 0.3, \"y\": 0.2, \"z\": 0}}");
    json_t *res = NULL, *problem = NULL;
    cr_assert_eq(engine_hamel(m, req, NULL, &res, &problem), 0);
    size_t count = 0;
    double g = listed_gamma(res, &count), exact = -((1 + 1e-9) - 1);
    cr_expect(count == 2 && fabs(g - exact) < 1e-15 * 1e-9, "gamma^c_ab %.17g of %zu listed, exact %.17g", g,
              count, exact);
    json_decref(res);
    json_decref(req);
    engine_model_release(m);
}
