/* test_warnings.c — a check that fails is a top-level "warnings" entry of the result
 * (engine/run/warnings.h, issue 15 item 7), and every result carries its provenance.
 *
 * The failing runs are forced with loose tolerances and a crude method (rk2), so they do
 * not depend on any defect of the symbolic core; the shared cases, in both formulations,
 * must have no warning at all.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "support.h"
#include "warnings.h"

static void setup(void) { engine_init(); }

/* The warning with code `code` in result r, or NULL. */
static const json_t *warning(const json_t *r, const char *code)
{
    const json_t *w = json_object_get(r, "warnings");
    cr_assert(json_is_array(w), "the result has a warnings array");
    size_t i;
    const json_t *e;
    json_array_foreach(w, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "code")), code) == 0)
            return e;
    }
    return NULL;
}

static json_t *run(const char *model, const char *request)
{
    engine_model *m = support_compile_text(model);
    json_t *r = support_run(m, request);
    engine_model_release(m);
    return r;
}

static const char oscillator[] =
    "{\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2/2\", \"potential_energy\": \"x^2/2\"}";

Test(warnings, the_thresholds_follow_rtol_within_bounds)
{
    cr_assert_float_eq(warn_tolerance(1e-10), 1e-6, 1e-20, "never stricter than 1e-6");
    cr_assert_float_eq(warn_tolerance(1e-6), 1e-3, 1e-15, "1e3 times rtol");
    cr_assert_float_eq(warn_tolerance(0.5), 1e-2, 1e-15, "never looser than 1 %%");
}

Test(warnings, an_energy_that_drifts_is_a_warning, .init = setup)
{
    /* rk2 with rtol 0.5 over 100 periods: the energy of an oscillator drifts by tens of % */
    json_t *r = run(oscillator, "{\"initial\": {\"q\": {\"x\": 1}, \"qdot\": {\"x\": 0}}, \"t_end\": 200,"
                                " \"integrator\": {\"method\": \"rk2\", \"rtol\": 0.5, \"atol\": 0.5}}");
    const json_t *w = warning(r, "energy-drift");
    cr_assert_not_null(w, "energy-drift is among the warnings");
    cr_assert_str_eq(json_string_value(json_object_get(w, "check")), "checks.energy.max_rel_drift");
    cr_assert_gt(json_number_value(json_object_get(w, "value")), 1e-2);
    cr_assert_not_null(strstr(json_string_value(json_object_get(w, "message")), "conserved"));
    json_decref(r);

    /* the same oscillator integrated properly: nothing to say */
    r = run(oscillator, "{\"initial\": {\"q\": {\"x\": 1}, \"qdot\": {\"x\": 0}}, \"t_end\": 200}");
    cr_assert_eq(json_array_size(json_object_get(r, "warnings")), 0, "a sound run has no warnings");
    json_decref(r);
}

/* V = log(-1 - x^2) is nowhere defined (NaN) while its gradient is finite: the run goes
 * on, and the warning says the energy is not defined instead of "moved from nan by nan". */
Test(warnings, an_energy_not_defined_at_the_start_says_so, .init = setup)
{
    json_t *r = run("{\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2/2\","
                    " \"potential_energy\": \"log(-1 - x^2)\"}",
                    "{\"initial\": {\"q\": {\"x\": 1}, \"qdot\": {\"x\": 0}}, \"t_end\": 1}");
    const json_t *w = warning(r, "energy-drift");
    cr_assert_not_null(w, "energy-drift is among the warnings");
    cr_assert_str_eq(json_string_value(json_object_get(w, "check")), "checks.energy.initial");
    const char *msg = json_string_value(json_object_get(w, "message"));
    cr_assert(msg && strstr(msg, "not defined there") && !strstr(msg, "moved from"), "%s", msg);
    json_decref(r);
}

Test(warnings, an_energy_of_the_size_of_rounding_is_not_a_warning, .init = setup)
{
    /* x(0) = 1e-8: E0 = 5e-17, kept by rk2 only to atol (1e-10) in x, so its relative
     * drift is large while the absolute one is far below anything physical */
    json_t *r = run(oscillator, "{\"initial\": {\"q\": {\"x\": 1e-8}, \"qdot\": {\"x\": 0}}, \"t_end\": 50,"
                                " \"integrator\": {\"method\": \"rk2\", \"atol\": 1e-10}}");
    const json_t *e = json_object_get(json_object_get(r, "checks"), "energy");
    cr_assert_gt(json_number_value(json_object_get(e, "max_rel_drift")), 1e-2,
                 "the relative drift is past the threshold (else this test shows nothing)");
    cr_assert_null(warning(r, "energy-drift"), "an absolute drift of %.3g is rounding",
                   json_number_value(json_object_get(e, "max_abs_drift")));
    json_decref(r);
}

Test(warnings, a_kinetic_energy_that_is_not_positive_is_a_warning, .init = setup)
{
    static const char massive[] =
        "{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"m\": 1},"
        " \"kinetic_energy\": \"m/2*x'^2 + y'^2/2\", \"potential_energy\": \"x^2/2\"}";
    static const char req[] = "{\"initial\": {\"q\": {\"x\": 1, \"y\": 0}, \"qdot\": {\"x\": 0, \"y\": 1}},"
                              " \"t_end\": 1%s}";
    char text[300];
    snprintf(text, sizeof text, req, "");
    json_t *r = run(massive, text);
    cr_assert_null(warning(r, "mass-indefinite"), "m = 1 is a mass");
    json_decref(r);
    snprintf(text, sizeof text, req, ", \"parameters\": {\"m\": -1}");
    r = run(massive, text);
    const json_t *w = warning(r, "mass-indefinite");
    cr_assert_not_null(w, "a negative mass in T is a warning");
    cr_assert_str_eq(json_string_value(json_object_get(w, "check")), "model.kinetic_energy");
    json_decref(r);
    /* no inertia in a coordinate (semi-definite) is not one */
    r = run(
        "{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2/2\", \"constraints\": [\"y' - x'\"]}",
        "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0}, \"qdot\": {\"x\": 1, \"y\": 1}}, \"t_end\": 1}");
    cr_assert_null(warning(r, "mass-indefinite"), "a coordinate without inertia is no negative mass");
    json_decref(r);
}

Test(warnings, an_energy_not_expected_conserved_is_not_a_warning, .init = setup)
{
    json_t *r = run("{\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2/2\", \"potential_energy\": "
                    "\"x^2/2\", \"generalized_forces\": {\"x\": \"-0.3*x'\"}}",
                    "{\"initial\": {\"q\": {\"x\": 1}, \"qdot\": {\"x\": 0}}, \"t_end\": 20}");
    cr_assert(json_is_false(
        json_object_get(json_object_get(json_object_get(r, "checks"), "energy"), "conserved_expected")));
    cr_assert_null(warning(r, "energy-drift"), "a damped oscillator loses energy as it should");
    json_decref(r);
}

Test(warnings, a_constraint_residual_past_tolerance_is_a_warning, .init = setup)
{
    /* the multipliers formulation keeps a velocity constraint only to the integrator's error */
    json_t *r = run("{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2/2 + y'^2/2\","
                    " \"potential_energy\": \"9.81*y\", \"constraints\": [{\"name\": \"rod\", \"expr\": "
                    "\"x*x' + y*y'\"}]}",
                    "{\"initial\": {\"q\": {\"x\": 0.6, \"y\": -0.8}, \"qdot\": {\"x\": 0, \"y\": 0}},"
                    " \"t_end\": 20, \"formulation\": \"multipliers\","
                    " \"integrator\": {\"method\": \"rk2\", \"rtol\": 0.5, \"atol\": 0.5}}");
    const json_t *w = warning(r, "constraint-residual");
    cr_assert_not_null(w, "constraint-residual is among the warnings");
    cr_assert_str_eq(json_string_value(json_object_get(w, "check")), "checks.constraints.per_constraint.rod");
    json_decref(r);
}

Test(warnings, a_position_constraint_drifting_without_projection_is_a_warning, .init = setup)
{
    static const char pendulum[] =
        "{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2/2 + y'^2/2\", \"potential_energy\": "
        "\"9.81*y\", \"position_constraints\": [{\"name\": \"rod\", \"expr\": \"x^2 + y^2 - 1\"}]}";
    json_t *r =
        run(pendulum, "{\"initial\": {\"q\": {\"x\": 0.6, \"y\": -0.8}, \"qdot\": {\"x\": 0, \"y\": 0}},"
                      " \"t_end\": 20, \"projection\": false,"
                      " \"integrator\": {\"method\": \"rk2\", \"rtol\": 0.1, \"atol\": 0.1}}");
    const json_t *w = warning(r, "position-drift");
    cr_assert_not_null(w, "position-drift is among the warnings");
    cr_assert_str_eq(json_string_value(json_object_get(w, "check")),
                     "checks.constraints.position.per_constraint.rod");
    json_decref(r);
    /* with projection (the default) the same run keeps the rod */
    r = run(pendulum, "{\"initial\": {\"q\": {\"x\": 0.6, \"y\": -0.8}, \"qdot\": {\"x\": 0, \"y\": 0}},"
                      " \"t_end\": 20}");
    cr_assert_eq(json_array_size(json_object_get(r, "warnings")), 0, "projected: no warnings");
    json_decref(r);
}

static struct support_case params[SUPPORT_MAX_CASES];

ParameterizedTestParameters(warnings, none_in_the_shared_cases)
{
    int n = support_list_cases(params, SUPPORT_MAX_CASES);
    return cr_make_param_array(struct support_case, params, n > 0 ? n : 0);
}

ParameterizedTest(struct support_case *p, warnings, none_in_the_shared_cases, .init = setup)
{
    json_t *c = support_load_file(p->file);
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    static const char *const forms[] = {"hamel", "multipliers"};
    for (int f = 0; f < 2; f++) {
        json_t *req = json_deep_copy(json_object_get(c, "simulation"));
        json_object_set_new(req, "formulation", json_string(forms[f]));
        json_t *r = support_simulate(m, req, p->file);
        const json_t *w = json_object_get(r, "warnings");
        char *text = json_dumps(w, 0);
        cr_assert(json_is_array(w) && json_array_size(w) == 0, "%s (%s): no warnings, got %s", p->file,
                  forms[f], text ? text : "?");
        free(text);
        const json_t *pv = json_object_get(r, "provenance");
        cr_assert_str_eq(json_string_value(json_object_get(pv, "engine_version")), ENGINE_VERSION);
        cr_assert_str_eq(json_string_value(json_object_get(pv, "formulation")), forms[f]);
        cr_assert_not_null(json_string_value(json_object_get(pv, "code_tier")));
        json_decref(r);
        json_decref(req);
    }
    engine_model_release(m);
    json_decref(c);
}
