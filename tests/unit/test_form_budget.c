/* test_form_budget.c — the classical forms under a compile budget
 * (engine_equations_form_ctl): a set cancel flag stops a form with HAMEL_E_CANCELLED, a
 * form past max_compile_bytes (counted above what the model holds) is a compile-limit
 * naming the limit, and a stopped derivation leaves the model able to derive the same
 * form afterwards, identical to the one derived without a budget.
 *
 * No test asserts a wall time: the outcomes asserted are those the budget decides.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "engine.h"
#include "support.h"

static void setup(void) { engine_init(); }

TestSuite(form_budget, .init = setup);

static engine_model *rolling_disk(void)
{
    json_t *c = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    json_decref(c);
    return m;
}

Test(form_budget, cancel_and_byte_cap_stop_a_form_that_then_derives)
{
    engine_model *m = rolling_disk();
    engine_model *ref = rolling_disk();
    engine_limits lim = engine_default_limits;
    engine_control ctl = {0};
    json_t *doc = NULL, *problem = NULL;

    atomic_store(&ctl.cancel, 1);
    cr_assert_eq(engine_equations_form_ctl(m, "kane", &lim, &ctl, &doc, &problem), HAMEL_E_CANCELLED);
    cr_assert_null(doc);
    cr_assert(json_is_object(problem), "a cancelled form has a problem document");
    json_decref(problem);

    atomic_store(&ctl.cancel, 0);
    lim.max_compile_bytes = 1; /* any node the form adds is past it */
    cr_assert_eq(engine_equations_form_ctl(m, "kane", &lim, &ctl, &doc, &problem), HAMEL_E_COMPILE_LIMIT);
    cr_assert_null(doc);
    cr_assert_str_eq(json_string_value(json_object_get(problem, "limit")), "max_compile_bytes",
                     "the problem names the limit");
    const char *detail = json_string_value(json_object_get(problem, "detail"));
    cr_assert(detail && strstr(detail, "kane form"), "the detail names the form: %s", detail ? detail : "");
    json_decref(problem);

    lim = engine_default_limits;
    cr_assert_eq(engine_equations_form_ctl(m, "kane", &lim, &ctl, &doc, &problem), 0,
                 "the form derives after the stopped attempts");
    json_t *want = NULL;
    cr_assert_eq(engine_equations_form(ref, "kane", &want, &problem), 0);
    cr_assert(json_equal(doc, want), "the same document as without a budget");
    json_decref(doc);
    json_decref(want);
    engine_model_release(m);
    engine_model_release(ref);
}
