/* test_form_budget.c — the classical forms under a compile budget
 * (engine_equations_form_ctl): a set cancel flag stops a form with HAMEL_E_CANCELLED, a
 * form past max_compile_bytes (counted above what the model holds) is a compile-limit
 * naming the limit, and a stopped derivation leaves the model able to derive the same
 * form afterwards, identical to the one derived without a budget. A stopped form is
 * rolled back (expr_ctx_mark / expr_ctx_rollback): the model's context holds the same
 * nodes, symbols and bytes as before it, however many times it is stopped, and another
 * form then derives as on a fresh model.
 *
 * No test asserts a wall time: the outcomes asserted are those the budget decides.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "engine.h"
#include "expr_internal.h"
#include "model.h"
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

/* What a context holds: nodes, symbols and every byte (expr__held_bytes). */
struct held {
    size_t nodes, bytes;
    int syms;
};

static struct held held_now(const expr_ctx *c)
{
    return (struct held){expr_ctx_nodes(c), expr__held_bytes(c), expr_sym_count(c)};
}

static void assert_held(const expr_ctx *c, struct held want, const char *when)
{
    struct held h = held_now(c);
    cr_assert_eq(h.nodes, want.nodes, "%s: %zu nodes, %zu before", when, h.nodes, want.nodes);
    cr_assert_eq(h.bytes, want.bytes, "%s: %zu bytes held, %zu before", when, h.bytes, want.bytes);
    cr_assert_eq(h.syms, want.syms, "%s: %d symbols, %d before", when, h.syms, want.syms);
}

/* Work that grows every table and memo of the context: a new symbol, an expansion of
 * (x + y + z + sin x)^8, derivatives, substitutions, tree sizes and zero tests. */
static expr *grow(expr_ctx *c, int x, int y)
{
    int z = expr_sym_find(c, "z");
    if (z < 0)
        z = expr_sym_add(c, "z", SYM_COORD, 2);
    expr *X = expr_sym(c, x), *Y = expr_sym(c, y), *Z = expr_sym(c, z);
    expr *s = expr_sum(c, (expr *[]){X, Y, Z, expr_fun(c, FN_SIN, X)}, 4);
    expr *big = expr_expand(c, expr_powi(c, s, 8), 100000);
    expr *d = expr_diff(c, expr_diff(c, big, x), z);
    expr *sub[8] = {0};
    sub[y] = expr_fun(c, FN_COS, Z);
    expr *e = expr_subst(c, d, sub, z + 1);
    expr_tree_size(c, e);
    expr_is_zero(c, expr_sub(c, e, d));
    return e;
}

Test(form_budget, a_rollback_returns_the_context_to_its_mark)
{
    expr_ctx *c = expr_ctx_new(0);
    int x = expr_sym_add(c, "x", SYM_COORD, 0), y = expr_sym_add(c, "y", SYM_COORD, 1);
    expr *X = expr_sym(c, x), *Y = expr_sym(c, y);
    expr *e = expr_powi(c, expr_add(c, expr_fun(c, FN_SIN, X), expr_mul(c, X, Y)), 3);
    expr *de = expr_expand(c, expr_diff(c, e, x), 1000);
    cr_assert(!expr_is_zero(c, de));
    size_t tree = expr_tree_size(c, de);
    struct held before = held_now(c);

    for (int round = 0; round < 5; round++) {
        expr_mark mk;
        expr_ctx_mark(c, &mk);
        grow(c, x, y);
        cr_assert_gt(expr_ctx_nodes(c), before.nodes + 1000, "the work made nodes");
        cr_assert_gt(expr__held_bytes(c), before.bytes, "the work grew the context");
        expr_ctx_rollback(c, &mk);
        assert_held(c, before, "after a rollback");
        cr_assert_eq(expr_sym_find(c, "z"), -1, "the symbol added since the mark is gone");
    }
    /* the nodes of the mark are intact and still hash-consed */
    cr_assert_eq(expr_powi(c, expr_add(c, expr_fun(c, FN_SIN, X), expr_mul(c, X, Y)), 3), e);
    cr_assert_eq(expr_expand(c, expr_diff(c, e, x), 1000), de);
    cr_assert_eq(expr_tree_size(c, de), tree);
    assert_held(c, before, "rebuilding what the mark held");

    /* the context works on afterwards: the same work gives the same values */
    expr *g = grow(c, x, y);
    double vals[3] = {0.3, -0.7, 1.1};
    double v = expr_eval(c, g, vals);
    expr_mark mk;
    expr_ctx_mark(c, &mk);
    struct held mid = held_now(c);
    expr_ctx_rollback(c, &mk);
    assert_held(c, mid, "a rollback with nothing to undo");
    expr_ctx *fresh = expr_ctx_new(0);
    expr_sym_add(fresh, "x", SYM_COORD, 0);
    expr_sym_add(fresh, "y", SYM_COORD, 1);
    double want = expr_eval(fresh, grow(fresh, x, y), vals);
    cr_assert(isfinite(v) && v == want, "after rollbacks %.17g, on a fresh context %.17g", v, want);
    cr_assert(expr_is_zero(c, expr_sub(c,
                                       expr_add(c, expr_powi(c, expr_fun(c, FN_SIN, X), 2),
                                                expr_powi(c, expr_fun(c, FN_COS, X), 2)),
                                       expr_num(c, 1.0))));
    expr_ctx_free(fresh);
    expr_ctx_free(c);
}

Test(form_budget, a_rollback_clears_the_node_limit)
{
    expr_ctx *c = expr_ctx_new(400);
    int x = expr_sym_add(c, "x", SYM_COORD, 0), y = expr_sym_add(c, "y", SYM_COORD, 1);
    expr *small = expr_add(c, expr_sym(c, x), expr_sym(c, y));
    struct held before = held_now(c);
    expr_mark mk;
    expr_ctx_mark(c, &mk);
    grow(c, x, y);
    cr_assert(expr_ctx_overflow(c), "the work hits the 400-node limit");
    expr_ctx_rollback(c, &mk);
    assert_held(c, before, "after the node limit");
    cr_assert(!expr_ctx_overflow(c), "the overflow flag is as at the mark");
    expr *p = expr_mul(c, small, small);
    cr_assert(!expr_ctx_overflow(c) && p->kind == EXPR_POW, "nodes are made again");
    expr_ctx_free(c);
}

Test(form_budget, a_stopped_form_leaves_the_model_as_it_was)
{
    engine_model *m = rolling_disk();
    engine_model *ref = rolling_disk();
    json_t *doc = NULL, *problem = NULL;
    /* the equations document first: it is part of the model, not of a form */
    cr_assert_eq(engine_equations(m, &doc, &problem), 0);
    json_decref(doc);
    struct held before = held_now(m->ctx);

    engine_limits lim = engine_default_limits;
    lim.max_compile_bytes = 1; /* stopped at the budget's first reading of the bytes */
    for (int round = 0; round < 20; round++) {
        const char *form = round % 2 ? "maggi" : "kane";
        cr_assert_eq(engine_equations_form_ctl(m, form, &lim, NULL, &doc, &problem), HAMEL_E_COMPILE_LIMIT,
                     "%s under a 1-byte allowance", form);
        cr_assert_null(doc);
        cr_assert_eq(json_integer_value(json_object_get(problem, "limit_value")), 1,
                     "limit_value is max_compile_bytes as given, above the model's bytes");
        json_decref(problem);
        assert_held(m->ctx, before, form);
    }
    /* a form that does not apply is rolled back too */
    cr_assert_eq(engine_equations_form_ctl(m, "voronec", &lim, NULL, &doc, &problem), HAMEL_E_BAD_REQUEST);
    json_decref(problem);
    assert_held(m->ctx, before, "voronec");

    lim = engine_default_limits;
    cr_assert_eq(engine_equations_form_ctl(m, "appell", &lim, NULL, &doc, &problem), 0,
                 "appell derives after the stopped forms");
    json_t *want = NULL;
    cr_assert_eq(engine_equations_form(ref, "appell", &want, &problem), 0);
    cr_assert(json_equal(doc, want), "the same document as on a fresh model");
    json_decref(doc);
    json_decref(want);
    cr_assert_gt(expr_ctx_nodes(m->ctx), before.nodes, "a derived form keeps its nodes");
    engine_model_release(m);
    engine_model_release(ref);
}

/* A car with three trailers compiled under a node limit that leaves room for its
 * symbolic reduction (a quarter of the limit) but not for Kane's form (~49,000 nodes
 * more): the form is a 422 naming the limit (not a 500 "out of memory"), rolled back
 * like a budget stop, as often as it is asked for. */
Test(form_budget, a_form_past_the_node_limit_is_a_limit_and_rolled_back)
{
    json_error_t err;
    json_t *js = json_load_file("bench/models/car-trailers-3.json", 0, &err);
    cr_assert(js, "bench/models/car-trailers-3.json: %s", err.text);
    engine_limits lim = engine_default_limits;
    lim.max_nodes = 28000;
    engine_model *m = NULL;
    json_t *doc = NULL, *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(js, "model"), &lim, &m, &problem), 0,
                 "the model compiles within %zu nodes", lim.max_nodes);
    json_decref(js);
    cr_assert_eq(engine_equations(m, &doc, &problem), 0);
    json_decref(doc);
    struct held before = held_now(m->ctx);
    for (int round = 0; round < 4; round++) {
        const char *form = round % 2 ? "appell" : "kane";
        int rc = engine_equations_form_ctl(m, form, &lim, NULL, &doc, &problem);
        const char *detail = json_string_value(json_object_get(problem, "detail"));
        cr_assert_eq(rc, HAMEL_E_LIMIT, "%s past the node limit: %d %s", form, rc, detail ? detail : "");
        cr_assert(detail && strstr(detail, "node limit"), "%s: the detail names the limit: %s", form,
                  detail ? detail : "");
        json_decref(problem);
        assert_held(m->ctx, before, form);
        cr_assert(!expr_ctx_overflow(m->ctx), "%s: the overflow flag is cleared", form);
    }
    engine_model_release(m);
}
