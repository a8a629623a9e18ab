/* test_budget.c — the compile budget (engine/budget.h, engine_model_compile_ctl): the
 * hostile models of issue 8 are answered with a 422 compile-limit that names the stage,
 * the expression, the limit and the figure reached (or compile, where the work has
 * become cheap); a set cancel flag stops a compilation with HAMEL_E_CANCELLED; the
 * parameter and definition counts have caps and are processed in linear time.
 *
 * The budget counts the CPU time of the thread doing the work: a busy sibling thread or a
 * sleep does not spend it, work does; a wall-clock backstop (4 x the budget) still ends
 * a stalled compilation.
 *
 * No test asserts a wall time: the outcomes asserted are those the budget decides.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget.h"
#include "engine.h"

/* ---- hostile models ------------------------------------------------------------ */

/* T = 1/2 x'^2 prod_{i=1..n} (sin(x) + i). Caller frees. */
static json_t *product_model(int n)
{
    size_t cap = 64 + (size_t)n * 24, len = 0;
    char *t = malloc(cap);
    len += (size_t)snprintf(t + len, cap - len, "0.5*x'^2");
    for (int i = 1; i <= n; i++)
        len += (size_t)snprintf(t + len, cap - len, "*(sin(x)+%d)", i);
    json_t *m = json_pack("{s:s, s:[s], s:s}", "name", "product", "coordinates", "x", "kinetic_energy", t);
    free(t);
    return m;
}

/* d_0 = x, d_i = d_{i-1} + x*d_{i-1} (i = 1..n), T = 1/2 d_n x'^2: each definition
 * doubles the tree that the shared DAG hides. Caller frees. */
static json_t *chain_model(int n)
{
    json_t *defs = json_array();
    json_array_append_new(defs, json_pack("{s:s, s:s}", "name", "d0", "expr", "x"));
    for (int i = 1; i <= n; i++) {
        char name[16], e[64];
        snprintf(name, sizeof name, "d%d", i);
        snprintf(e, sizeof e, "d%d + x*d%d", i - 1, i - 1);
        json_array_append_new(defs, json_pack("{s:s, s:s}", "name", name, "expr", e));
    }
    char t[64];
    snprintf(t, sizeof t, "0.5*d%d*x'^2", n);
    return json_pack("{s:s, s:[s], s:o, s:s}", "name", "chain", "coordinates", "x", "definitions", defs,
                     "kinetic_energy", t);
}

/* n parameters p0..p(n-1) (one used). Caller frees. */
static json_t *params_model(int n)
{
    json_t *p = json_object();
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        json_object_set_new(p, name, json_real(1.0 + i % 7));
    }
    return json_pack("{s:s, s:[s], s:o, s:s}", "name", "params", "coordinates", "x", "parameters", p,
                     "kinetic_energy", "0.5*p3*x'^2");
}

/* ---- helpers ---------------------------------------------------------------- */

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The first error's path of a problem. */
static const char *first_path(const json_t *problem)
{
    return str(json_array_get(json_object_get(problem, "errors"), 0), "path");
}

/* Asserts a 422 compile-limit problem for limit `limit` whose first error path starts
 * with `path_prefix`, with stage, limit_value and reached (> limit_value for counts and
 * bytes, >= for seconds). */
static void assert_compile_limit(int rc, const json_t *problem, const char *limit, const char *path_prefix)
{
    char *dump = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
    cr_assert_eq(rc, HAMEL_E_COMPILE_LIMIT, "expected compile-limit, got %d: %s", rc, dump ? dump : "-");
    cr_assert_str_eq(str(problem, "type"), "/problems/compile-limit", "%s", dump);
    cr_assert_neq(hamel_problem_code(problem), HAMEL_E_INTERNAL, "%s", dump);
    cr_assert_str_eq(str(problem, "limit"), limit, "%s", dump);
    cr_assert_not_null(str(problem, "stage"), "the stage is named: %s", dump);
    cr_assert_not_null(str(problem, "detail"), "%s", dump);
    const char *path = first_path(problem);
    cr_assert_not_null(path, "the culprit is named: %s", dump);
    cr_assert_eq(strncmp(path, path_prefix, strlen(path_prefix)), 0, "culprit %s, expected %s...: %s", path,
                 path_prefix, dump);
    double lv = json_number_value(json_object_get(problem, "limit_value"));
    double reached = json_number_value(json_object_get(problem, "reached"));
    cr_assert_gt(lv, 0, "%s", dump);
    if (strcmp(limit, "max_compile_seconds") == 0)
        cr_assert_geq(reached, lv, "%s", dump);
    else
        cr_assert_gt(reached, lv, "%s", dump);
    free(dump);
}

static int compile_with(const json_t *js, const engine_limits *lim, engine_control *ctl, json_t **problem)
{
    engine_model *m = (engine_model *)0x1;
    *problem = NULL;
    int rc = engine_model_compile_ctl(js, lim, ctl, &m, problem);
    if (rc == 0) {
        cr_assert_not_null(m);
        engine_model_release(m);
    } else {
        cr_assert_null(m, "*out must be NULL on failure");
        cr_assert_not_null(*problem);
    }
    return rc;
}

/* ---- the hostile models ---------------------------------------------------------- */

/* 30 chained definitions: their printed form alone is 2^30 terms long, so the budget
 * stops it, naming a definition. */
Test(budget, chained_definitions_are_a_compile_limit_naming_a_definition)
{
    json_t *js = chain_model(30), *problem;
    int rc = compile_with(js, NULL, NULL, &problem);
    assert_compile_limit(rc, problem, "max_compile_seconds", "model.definitions[");
    json_decref(problem);
    json_decref(js);
}

/* The same under a 4 MB memory cap and a long deadline: the memory cap stops it. */
Test(budget, chained_definitions_hit_the_memory_cap)
{
    engine_limits lim = engine_default_limits;
    lim.max_compile_seconds = 120;
    lim.max_compile_bytes = (size_t)4 << 20;
    json_t *js = chain_model(30), *problem;
    int rc = compile_with(js, &lim, NULL, &problem);
    assert_compile_limit(rc, problem, "max_compile_bytes", "model.definitions[");
    json_decref(problem);
    json_decref(js);
}

/* A deadline given by the control (smaller than the limits') applies. */
Test(budget, the_controls_wall_time_applies_when_smaller)
{
    engine_limits lim = engine_default_limits;
    lim.max_compile_seconds = 120;
    engine_control ctl = {.max_wall_seconds = 0.2};
    json_t *js = chain_model(30), *problem;
    int rc = compile_with(js, &lim, &ctl, &problem);
    assert_compile_limit(rc, problem, "max_compile_seconds", "model.definitions[");
    cr_assert_float_eq(json_number_value(json_object_get(problem, "limit_value")), 0.2, 1e-12);
    json_decref(problem);
    json_decref(js);
}

/* 400 factors (sin(x) + i) in T: the expansion is interrupted inside the symbolic
 * reduction, which is optional, so the model compiles on the numeric path — or, on a
 * machine too slow for even that within the budget, is a compile-limit naming model or
 * one of its fields. */
Test(budget, a_product_of_400_factors_compiles_or_is_a_compile_limit)
{
    json_t *js = product_model(400), *problem;
    int rc = compile_with(js, NULL, NULL, &problem);
    if (rc != 0)
        assert_compile_limit(rc, problem, "max_compile_seconds", "model");
    json_decref(problem);
    json_decref(js);
}

/* 100,000 parameters: past max_parameters (10,000), a compile-limit naming
 * model.parameters before any work. */
Test(budget, too_many_parameters_are_a_compile_limit)
{
    json_t *js = params_model(100000), *problem;
    int rc = compile_with(js, NULL, NULL, &problem);
    assert_compile_limit(rc, problem, "max_parameters", "model.parameters");
    cr_assert_eq(json_integer_value(json_object_get(problem, "reached")), 100000);
    cr_assert_eq(json_integer_value(json_object_get(problem, "limit_value")), 10000);
    json_decref(problem);
    json_decref(js);
}

/* With the cap raised, 100,000 parameters compile within a 30 s budget (linear time:
 * the quadratic symbol lookup of before took 33 s here at -O2, and the budget would
 * stop it with a compile-limit). */
Test(budget, many_parameters_compile_in_linear_time, .timeout = 120)
{
    engine_limits lim = engine_default_limits;
    lim.max_parameters = 100000;
    lim.max_compile_seconds = 30;
    json_t *js = params_model(100000), *problem;
    int rc = compile_with(js, &lim, NULL, &problem);
    char *dump = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
    cr_assert_eq(rc, 0, "100,000 parameters compile: %s", dump ? dump : "-");
    free(dump);
    json_decref(js);
}

Test(budget, too_many_definitions_are_a_compile_limit)
{
    engine_limits lim = engine_default_limits;
    lim.max_definitions = 20;
    json_t *js = chain_model(25), *problem;
    int rc = compile_with(js, &lim, NULL, &problem);
    assert_compile_limit(rc, problem, "max_definitions", "model.definitions");
    cr_assert_eq(json_integer_value(json_object_get(problem, "reached")), 26);
    json_decref(problem);
    json_decref(js);
}

/* ---- cancellation ------------------------------------------------------------------ */

Test(budget, a_set_cancel_flag_stops_the_compilation)
{
    engine_control ctl = {0};
    atomic_store(&ctl.cancel, 1);
    json_t *js = chain_model(30), *problem;
    int rc = compile_with(js, NULL, &ctl, &problem);
    cr_assert_eq(rc, HAMEL_E_CANCELLED);
    cr_assert_str_eq(str(problem, "type"), "/problems/cancelled");
    json_decref(problem);
    json_decref(js);
}

struct canceller {
    engine_control *ctl;
    long ms;
};

static void *cancel_later(void *arg)
{
    struct canceller *c = arg;
    nanosleep(&(struct timespec){c->ms / 1000, (c->ms % 1000) * 1000000L}, NULL);
    atomic_store(&c->ctl->cancel, 1);
    return NULL;
}

/* A cancel flag set by another thread while a single huge expansion runs (no deadline
 * that could stop it first: 10 minutes) reaches it. */
Test(budget, cancellation_reaches_a_running_compilation, .timeout = 60)
{
    engine_limits lim = engine_default_limits;
    lim.max_compile_seconds = 600;
    lim.max_compile_bytes = 0;
    engine_control ctl = {0};
    struct canceller cc = {&ctl, 100};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, cancel_later, &cc), 0);
    json_t *js = chain_model(30), *problem;
    int rc = compile_with(js, &lim, &ctl, &problem);
    pthread_join(th, NULL);
    cr_assert_eq(rc, HAMEL_E_CANCELLED, "rc %d", rc);
    cr_assert_not_null(str(problem, "stage"));
    json_decref(problem);
    json_decref(js);
}

/* A model that fits compiles under the budget, and a second compile of the same JSON
 * gives the same id (the budget leaves nothing behind in the model). */
Test(budget, an_ordinary_model_is_unaffected)
{
    json_t *js = chain_model(6), *problem;
    engine_model *a = NULL, *b = NULL;
    cr_assert_eq(engine_model_compile(js, NULL, &a, &problem), 0);
    cr_assert_eq(engine_model_compile_ctl(js, NULL, &(engine_control){0}, &b, &problem), 0);
    cr_assert_str_eq(engine_model_id(a), engine_model_id(b));
    engine_model_release(a);
    engine_model_release(b);
    json_decref(js);
}

/* ---- the clocks ------------------------------------------------------------------ */

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Spins until this thread has spent *(double *)arg seconds of CPU time. */
static void *spin(void *arg)
{
    double until = thread_cpu() + *(double *)arg;
    volatile unsigned long x = 0;
    while (thread_cpu() < until)
        for (int i = 0; i < 10000; i++)
            x += (unsigned long)i;
    return NULL;
}

/* A sibling thread spends 0.5 s of CPU time (the process's CPU clock would count it)
 * while the budget's thread waits for it: a 0.2 s budget is untouched. The wall-clock
 * backstop is taken off for this, so that a loaded machine cannot stop it by the wall. */
Test(budget, a_busy_sibling_thread_does_not_spend_the_budget)
{
    budget b;
    budget_init(&b, 0.2, 0, NULL);
    b.wall_deadline = 0; /* the CPU clock only */
    double burn = 0.5;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, spin, &burn), 0);
    pthread_join(th, NULL);
    cr_assert_eq(budget_check(&b), BUDGET_OK, "spent %.3f s of CPU time", b.cpu);
    cr_assert_lt(b.cpu, 0.2, "%.3f s", b.cpu);
    /* its own work does spend it: past 0.2 s of this thread's CPU, a stop by the CPU clock */
    burn = 0.3;
    spin(&burn);
    cr_assert_eq(budget_check(&b), BUDGET_TIME);
    cr_assert_eq(b.by_wall, 0);
    cr_assert_geq(b.reached, 0.2);
    cr_assert_float_eq(b.limit_value, 0.2, 1e-12);
    json_t *p = budget_problem(&b);
    const char *detail = str(p, "detail");
    cr_assert_not_null(strstr(detail, "CPU time"), "%s", detail);
    cr_assert_str_eq(str(p, "limit"), "max_compile_seconds");
    cr_assert_str_eq(str(p, "stage"), "validation");
    json_decref(p);
}

/* A sleeping (stalled) compilation spends no CPU time; the wall-clock backstop, 4 x a
 * 0.05 s budget, stops it, and the problem says so. */
Test(budget, a_stalled_compilation_is_stopped_by_the_wall_clock_backstop)
{
    budget b;
    budget_init(&b, 0.05, 0, NULL);
    budget_stage(&b, "differentiation", "model.kinetic_energy");
    cr_assert_float_eq(b.wall_limit, 0.05 * BUDGET_WALL_FACTOR, 1e-12);
    nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL);
    cr_assert_eq(budget_check(&b), BUDGET_TIME);
    cr_assert_eq(b.by_wall, 1, "stopped by the CPU clock after %.3f s of CPU time", b.cpu);
    cr_assert_lt(b.at_cpu, 0.05);
    cr_assert_geq(b.reached, b.limit_value);
    json_t *p = budget_problem(&b);
    const char *detail = str(p, "detail");
    cr_assert_not_null(strstr(detail, "wall-clock backstop"), "%s", detail);
    cr_assert_str_eq(str(p, "limit"), "max_compile_seconds");
    cr_assert_str_eq(str(p, "stage"), "differentiation");
    cr_assert_str_eq(first_path(p), "model.kinetic_energy");
    json_decref(p);
}

/* A caller's smaller wall-clock limit (engine_control.max_wall_seconds) lowers the
 * backstop; a larger one does not raise it. */
Test(budget, a_callers_wall_limit_only_lowers_the_backstop)
{
    budget b;
    budget_init(&b, 1.0, 0, NULL);
    budget_cap_wall(&b, 10.0);
    cr_assert_float_eq(b.wall_limit, 1.0 * BUDGET_WALL_FACTOR, 1e-12);
    budget_cap_wall(&b, 0.5);
    cr_assert_float_eq(b.wall_limit, 0.5, 1e-12);
    cr_assert_float_eq(b.seconds, 1.0, 1e-12);
    budget_init(&b, 0, 0, NULL); /* no budget: no backstop, unless the caller gives one */
    cr_assert_eq(b.wall_deadline, 0);
    budget_cap_wall(&b, 0.5);
    cr_assert_float_eq(b.wall_limit, 0.5, 1e-12);
}
