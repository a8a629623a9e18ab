/* test_model.c — engine_model_compile (engine/engine.h): every validation error names
 * its problem type, JSON path and (for expressions) column; the model id ignores
 * formatting; the model summary of API.md §2 for the rolling disk, a rheonomic
 * constraint and default speeds.
 *
 * The rolling disk comes from ../shared/cases (relative to the repository root);
 * the test fails loudly when it is missing.
 */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

/* ---- helpers ---------------------------------------------------------------- */

static json_t *load(const char *text)
{
    json_error_t jerr;
    json_t *js = json_loads(text, JSON_DECODE_ANY, &jerr);
    cr_assert_not_null(js, "test JSON does not parse: line %d: %s", jerr.line, jerr.text);
    return js;
}

/* Compiles text; expects success and returns the model. */
static engine_model *compile_ok(const char *text)
{
    json_t *js = load(text);
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(js, NULL, &m, &problem);
    char *p = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
    cr_assert_eq(rc, 0, "compile failed (%d): %s\nmodel: %s", rc, p ? p : "(no problem)", text);
    cr_assert_not_null(m);
    cr_assert_null(problem);
    free(p);
    json_decref(js);
    return m;
}

/* Compiles text, expects failure with problem type <slug>, status 422 and a first
 * error at <path> (with <column> when column > 0, none when column == 0, anything
 * when column < 0) whose reason contains <reason> (NULL: any). */
static void compile_fails(const char *text, const char *slug, const char *path, int column,
                          const char *reason)
{
    json_t *js = load(text);
    engine_model *m = (engine_model *)0x1;
    json_t *problem = NULL;
    int rc = engine_model_compile(js, NULL, &m, &problem);
    cr_assert_lt(rc, 0, "model compiled but should fail at %s: %s", path, text);
    cr_assert_null(m, "*out must be NULL on failure");
    cr_assert_not_null(problem, "no problem document for %s", path);
    char *dump = json_dumps(problem, JSON_COMPACT);
    char type[160];
    snprintf(type, sizeof type, "/problems/%s", slug);
    cr_expect_str_eq(json_string_value(json_object_get(problem, "type")), type, "problem: %s", dump);
    cr_expect_str_eq(hamel_error_slug(rc), slug, "return code %d is not %s", rc, slug);
    cr_expect_neq(hamel_problem_code(problem), HAMEL_E_INTERNAL, "problem: %s", dump);
    cr_expect_null(json_object_get(problem, "status"), "the engine writes no HTTP status: %s", dump);
    json_t *errors = json_object_get(problem, "errors");
    cr_assert(json_array_size(errors) >= 1, "no errors[] in %s", dump);
    json_t *e0 = json_array_get(errors, 0);
    cr_expect_str_eq(json_string_value(json_object_get(e0, "path")), path, "problem: %s", dump);
    json_t *col = json_object_get(e0, "column");
    if (column > 0)
        cr_expect(json_integer_value(col) == column, "column %lld, expected %d: %s",
                  (long long)json_integer_value(col), column, dump);
    else if (column == 0)
        cr_expect_null(col, "no column expected: %s", dump);
    const char *why = json_string_value(json_object_get(e0, "reason"));
    cr_expect_not_null(why, "errors[0] has no reason: %s", dump);
    if (reason && why)
        cr_expect_not_null(strstr(why, reason), "reason \"%s\" lacks \"%s\"", why, reason);
    free(dump);
    json_decref(problem);
    json_decref(js);
}

static json_t *summary_of(engine_model *m)
{
    json_t *s = engine_model_summary(m);
    cr_assert_not_null(s);
    return s;
}

static int jbool(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    cr_assert(json_is_boolean(v), "%s is not a boolean", key);
    return json_is_true(v);
}

/* Reads ../shared/cases/<name> relative to the repository root (the working
 * directory, or the parent of the test binary's directory). */
static json_t *shared_case(const char *name)
{
    char path[PATH_MAX + 96];
    snprintf(path, sizeof path, "../shared/cases/%s", name);
    json_error_t jerr;
    json_t *js = json_load_file(path, 0, &jerr);
    if (!js) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = '\0';
            char *slash = strrchr(exe, '/');
            if (slash) {
                *slash = '\0';
                snprintf(path, sizeof path, "%s/../../shared/cases/%s", exe, name);
                js = json_load_file(path, 0, &jerr);
            }
        }
    }
    cr_assert_not_null(js,
                       "MISSING SHARED CASE ../shared/cases/%s (run from the repository root; the "
                       "shared cases must sit next to the repository): %s",
                       name, jerr.text);
    return js;
}

/* A small valid model to vary: a particle in a plane with a knife-edge constraint. */
#define KNIFE_COORDS "\"coordinates\": [\"x\", \"y\", \"phi\"]"
#define KNIFE_T "\"kinetic_energy\": \"m*(x'^2 + y'^2)/2 + J*phi'^2/2\""
#define KNIFE_C "\"constraints\": [{\"name\": \"knife\", \"expr\": \"x'*sin(phi) - y'*cos(phi)\"}]"
#define KNIFE_P "\"parameters\": {\"m\": 2, \"J\": 0.5}"

/* ---- validation errors -------------------------------------------------------- */

Test(model, error_missing_coordinates)
{
    compile_fails("{\"kinetic_energy\": \"x'^2\"}", "invalid-model", "model.coordinates", 0, "required");
    compile_fails("{\"coordinates\": [], \"kinetic_energy\": \"1\"}", "invalid-model", "model.coordinates", 0,
                  NULL);
}

Test(model, error_missing_kinetic_energy)
{
    compile_fails("{\"coordinates\": [\"x\"]}", "invalid-model", "model.kinetic_energy", 0, "required");
}

Test(model, error_duplicate_coordinate)
{
    compile_fails("{\"coordinates\": [\"x\", \"y\", \"x\"], \"kinetic_energy\": \"x'^2 + y'^2\"}",
                  "invalid-model", "model.coordinates[2]", 0, "already defined");
}

Test(model, error_reserved_coordinate)
{
    compile_fails("{\"coordinates\": [\"x\", \"sin\"], \"kinetic_energy\": \"x'^2\"}", "invalid-model",
                  "model.coordinates[1]", 0, "reserved");
    compile_fails("{\"coordinates\": [\"t\"], \"kinetic_energy\": \"1\"}", "invalid-model",
                  "model.coordinates[0]", 0, "reserved");
    compile_fails("{\"coordinates\": [\"pi\"], \"kinetic_energy\": \"1\"}", "invalid-model",
                  "model.coordinates[0]", 0, "reserved");
    compile_fails("{\"coordinates\": [\"2x\"], \"kinetic_energy\": \"1\"}", "invalid-model",
                  "model.coordinates[0]", 0, "not an identifier");
    compile_fails("{\"coordinates\": [\"x\", 3], \"kinetic_energy\": \"x'^2\"}", "invalid-model",
                  "model.coordinates[1]", 0, "string");
}

Test(model, error_parameter_clashes_with_coordinate)
{
    compile_fails("{\"coordinates\": [\"x\"], \"parameters\": {\"x\": 1}, \"kinetic_energy\": \"x'^2\"}",
                  "invalid-model", "model.coordinates[0]", 0, "already defined (a parameter)");
}

Test(model, error_definition_uses_a_later_one_or_itself)
{
    /* "unknown identifier 'b'" alone, with b defined in the model, read as a bug */
    compile_fails(
        "{\"coordinates\": [\"x\"], \"definitions\": [{\"name\": \"a\", \"expr\": \"b + x\"}, "
        "{\"name\": \"b\", \"expr\": \"1\"}], \"kinetic_energy\": \"a*x'^2\"}",
        "invalid-model", "model.definitions[0].expr", 1,
        "unknown identifier 'b': it is definitions[1], and a definition may use only those before it");
    compile_fails("{\"coordinates\": [\"x\"], \"definitions\": [{\"name\": \"c\", \"expr\": \"c + 1\"}], "
                  "\"kinetic_energy\": \"x'^2\"}",
                  "invalid-model", "model.definitions[0].expr", 1,
                  "unknown identifier 'c': a definition cannot use itself");
}

Test(model, error_unknown_identifier_in_T)
{
    /* column of k in "m*x'^2/2 + k*x^2": 12 */
    compile_fails(
        "{\"coordinates\": [\"x\"], \"parameters\": {\"m\": 1}, \"kinetic_energy\": \"m*x'^2/2 + k*x^2\"}",
        "invalid-model", "model.kinetic_energy", 12, "unknown identifier 'k'");
}

Test(model, error_syntax_in_constraint)
{
    compile_fails("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T
                  ", \"constraints\": [{\"name\": \"k\", \"expr\": \"x'*sin(phi - y'\"}]}",
                  "invalid-model", "model.constraints[0].expr", 16, "expected ',' or ')'");
    compile_fails("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", \"constraints\": [\"x' + y''\"]}",
                  "invalid-model", "model.constraints[0]", 8, "second derivatives");
}

Test(model, error_velocity_in_potential_energy)
{
    /* column of x' in "m*g*x + 0.1*x'": 13 */
    compile_fails("{\"coordinates\": [\"x\"], \"parameters\": {\"m\": 1, \"g\": 9.81}, "
                  "\"kinetic_energy\": \"m*x'^2/2\", \"potential_energy\": \"m*g*x + 0.1*x'\"}",
                  "invalid-model", "model.potential_energy", 13, "velocity x' is not allowed");
    /* through a definition that uses velocities */
    compile_fails("{\"coordinates\": [\"x\"], \"definitions\": [{\"name\": \"v\", \"expr\": \"2*x'\"}], "
                  "\"kinetic_energy\": \"v^2\", \"potential_energy\": \"x + v\"}",
                  "invalid-model", "model.potential_energy", 5, "definition 'v' uses velocities");
}

Test(model, error_nonlinear_speed)
{
    compile_fails("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C
                  ", \"speeds\": [{\"name\": \"u1\", \"expr\": \"x'*cos(phi) + y'*sin(phi)\"}, "
                  "{\"name\": \"u2\", \"expr\": \"phi'^2\"}]}",
                  "nonlinear-speed", "model.speeds[1].expr", 0, "not linear");
    compile_fails(
        "{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C
        ", \"speeds\": [{\"name\": \"u1\", \"expr\": \"x'*y'\"}, {\"name\": \"u2\", \"expr\": \"phi'\"}]}",
        "nonlinear-speed", "model.speeds[0].expr", 0, "not linear");
}

Test(model, error_speed_count)
{
    /* n = 3, m = 1: two speeds needed, three given */
    compile_fails("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C
                  ", \"speeds\": [\"x'\", \"y'\", \"phi'\"]}",
                  "invalid-model", "model.speeds", 0, "expected n - m = 3 - 1 = 2 speeds");
    compile_fails("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C ", \"speeds\": [\"phi'\"]}",
                  "invalid-model", "model.speeds", 0, "got 1");
}

Test(model, error_singular_psi)
{
    /* Two identical speeds: Psi has two equal rows. */
    compile_fails(
        "{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C
        ", \"speeds\": [{\"name\": \"u1\", \"expr\": \"phi'\"}, {\"name\": \"u2\", \"expr\": \"phi'\"}]}",
        "singular-transformation", "model.speeds", 0, "singular");
    /* A speed that is a multiple of the constraint. */
    compile_fails("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C
                  ", \"speeds\": [{\"name\": \"u1\", \"expr\": \"2*x'*sin(phi) - 2*y'*cos(phi)\"}, "
                  "{\"name\": \"u2\", \"expr\": \"phi'\"}]}",
                  "singular-transformation", "model.speeds", 0, "singular");
}

/* A kinetic energy that gives a speed no inertia is refused like a singular Psi, naming
 * model.kinetic_energy (review round 3: it compiled, POST /v1/models answered 201, and
 * only a run failed, with no field named): y missing from T, a combination (x' + y')
 * of two coordinates, and a sleigh whose only inertia about its blade is I = 0. A
 * coordinate without inertia whose rate a constraint fixes is no error. */
Test(model, error_speed_without_inertia)
{
    compile_fails("{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"1/2*x'^2\", "
                  "\"potential_energy\": \"x^2 + y^2\"}",
                  "invalid-model", "model.kinetic_energy", 0, "gives speed y' no inertia");
    compile_fails("{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"1/2*(x' + y')^2\"}",
                  "invalid-model", "model.kinetic_energy", 0, "a combination of the speeds no inertia");
    compile_fails("{\"coordinates\": [\"x\", \"y\", \"th\"], \"parameters\": {\"m\": 2.3, \"I\": 0},"
                  " \"kinetic_energy\": \"m/2*(x'^2 + y'^2) + I/2*th'^2\","
                  " \"constraints\": [\"-sin(th)*x' + cos(th)*y'\"],"
                  " \"speeds\": [{\"name\": \"v\", \"expr\": \"cos(th)*x' + sin(th)*y'\"}, {\"name\": \"w\", "
                  "\"expr\": \"th'\"}]}",
                  "invalid-model", "model.kinetic_energy", 0, "gives speed w no inertia");
    engine_model *m = compile_ok("{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"1/2*x'^2\", "
                                 "\"constraints\": [\"y' - x'\"]}");
    engine_model_release(m);
    /* a mass of 1e6 beside one of 1e-9 (or 1e-20) is inertia, not none: judged per speed */
    m = compile_ok("{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"M\": 1e6, \"mm\": 1e-9},"
                   " \"kinetic_energy\": \"1/2*M*x'^2 + 1/2*mm*y'^2\"}");
    engine_model_release(m);
    m = compile_ok(
        "{\"coordinates\": [\"x\", \"y\", \"th\"], \"parameters\": {\"m\": 1e6, \"I\": 1e-20},"
        " \"kinetic_energy\": \"m/2*(x'^2 + y'^2) + I/2*th'^2\","
        " \"constraints\": [\"-sin(th)*x' + cos(th)*y'\"],"
        " \"speeds\": [{\"name\": \"v\", \"expr\": \"cos(th)*x' + sin(th)*y'\"}, {\"name\": \"w\", "
        "\"expr\": \"th'\"}]}");
    engine_model_release(m);
}

/* Nonlinear constraints that say the same as another, or whose gradient vanishes where
 * they hold, leave the multipliers undetermined: a 422 at model.constraints (review
 * round 3: it compiled, and every run failed with "the right-hand side could not be
 * evaluated"). A nonlinear constraint times 1e-9 beside a linear one is independent. */
Test(model, error_dependent_nonlinear_constraints)
{
    compile_fails("{\"coordinates\": [\"x\", \"y\", \"z\"], \"kinetic_energy\": \"(x'^2 + y'^2 + z'^2)/2\","
                  " \"constraints\": [\"x'^2 + y'^2 - 1\", \"2*x'^2 + 2*y'^2 - 2\"]}",
                  "invalid-model", "model.constraints", 0, "gradients df/dq' are dependent");
    compile_fails("{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"(x'^2 + y'^2)/2\","
                  " \"constraints\": [\"x' - y'\", \"(x' - y')^3\"]}",
                  "invalid-model", "model.constraints", 0, "gradients df/dq' are dependent");
    engine_model *m = compile_ok("{\"coordinates\": [\"x\", \"y\", \"z\"], \"parameters\": {\"k\": 1e-9},"
                                 " \"kinetic_energy\": \"(x'^2 + y'^2 + z'^2)/2\","
                                 " \"constraints\": [\"k*(x'^2 + y'^2 - 1)\", \"z' - x*y'\"]}");
    engine_model_release(m);
}

Test(model, error_force_on_non_coordinate)
{
    compile_fails("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", \"generalized_forces\": {\"z\": \"-x'\"}}",
                  "invalid-model", "model.generalized_forces.z", 0, "'z' is not a coordinate");
}

Test(model, error_constraint_without_velocities)
{
    compile_fails("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", \"constraints\": [\"x - y\"]}",
                  "invalid-model", "model.constraints[0]", 0, "has no velocities");
}

Test(model, error_not_an_object)
{
    compile_fails("[1, 2, 3]", "invalid-model", "model", 0, "object");
    compile_fails("\"coordinates\"", "invalid-model", "model", 0, "object");
}

Test(model, error_parameter_not_a_number)
{
    compile_fails(
        "{\"coordinates\": [\"x\"], \"parameters\": {\"m\": \"heavy\"}, \"kinetic_energy\": \"m*x'^2\"}",
        "invalid-model", "model.parameters.m", 0, "finite number");
    compile_fails("{\"coordinates\": [\"x\"], \"parameters\": [1], \"kinetic_energy\": \"x'^2\"}",
                  "invalid-model", "model.parameters", 0, NULL);
}

Test(model, error_too_many_linear_constraints)
{
    compile_fails("{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2 + y'^2\", "
                  "\"constraints\": [\"x' - y'\", \"x' + y'\"]}",
                  "invalid-model", "model.constraints", 0, "no degree of freedom");
}

Test(model, error_expression_too_long)
{
    size_t n = engine_default_limits.max_expr_chars + 10;
    char *text = malloc(n + 256);
    int off = snprintf(text, n + 256, "{\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2");
    for (size_t i = 0; i < n / 4; i++)
        off += snprintf(text + off, 8, " + x");
    snprintf(text + off, 8, "\"}");
    compile_fails(text, "invalid-model", "model.kinetic_energy",
                  (int)engine_default_limits.max_expr_chars + 1, "longer than");
    free(text);
}

/* Several independent errors are all reported, in document order. */
Test(model, error_list_is_complete)
{
    json_t *js = load("{\"coordinates\": [\"x\"], \"parameters\": {\"a\": \"?\", \"b\": \"?\"}, "
                      "\"kinetic_energy\": \"x'^2\"}");
    engine_model *m;
    json_t *problem;
    cr_assert_lt(engine_model_compile(js, NULL, &m, &problem), 0);
    json_t *errs = json_object_get(problem, "errors");
    cr_assert_eq(json_array_size(errs), 2);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(errs, 1), "path")),
                     "model.parameters.b");
    json_decref(problem);
    json_decref(js);
}

/* ---- the model id ---------------------------------------------------------------- */

static char *id_of(const char *text)
{
    engine_model *m = compile_ok(text);
    char *id = strdup(engine_model_id(m));
    cr_assert_eq(strncmp(id, "sha256:", 7), 0, "id %s", id);
    cr_assert_eq(strlen(id), 7 + 64, "id %s", id);
    engine_model_release(m);
    return id;
}

Test(model, id_ignores_formatting)
{
    char *base = id_of("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C "}");
    static const char *const same[] = {
        /* whitespace inside expressions and around JSON tokens */
        "{\n  \"coordinates\":[\"x\",\"y\",\"phi\"],\"parameters\":{\"m\":2,\"J\":0.5},"
        "\"kinetic_energy\":\"m*(x'^2+y'^2)/2+J*phi'^2/2\",\n"
        "\"constraints\":[{\"name\":\"knife\",\"expr\":\"  x' * sin(phi)-y'*cos( phi ) \"}]}",
        /* parameter key order */
        "{" KNIFE_COORDS ", \"parameters\": {\"J\": 0.5, \"m\": 2}, " KNIFE_T ", " KNIFE_C "}",
        /* ** for ^ */
        "{" KNIFE_COORDS ", " KNIFE_P ", \"kinetic_energy\": \"m*(x'**2 + y'**2)/2 + J*phi'**2/2\", " KNIFE_C
        "}",
        /* definitions instead of inline text */
        "{" KNIFE_COORDS ", " KNIFE_P ", \"definitions\": [{\"name\": \"v2\", \"expr\": \"x'^2 + y'^2\"}, "
        "{\"name\": \"Trot\", \"expr\": \"J*phi'^2/2\"}], \"kinetic_energy\": \"m*v2/2 + Trot\", " KNIFE_C
        "}",
        /* terms and factors reordered (not expanded: m*(a + b) and m*a + m*b are
         * different canonical forms, by design) */
        "{" KNIFE_COORDS ", " KNIFE_P ", \"kinetic_energy\": \"phi'^2*J/2 + (y'^2 + x'^2)*m/2\", " KNIFE_C
        "}",
        /* key order of the model object itself */
        "{" KNIFE_C ", " KNIFE_T ", " KNIFE_P ", " KNIFE_COORDS "}",
        /* an integer parameter written as a real */
        "{" KNIFE_COORDS ", \"parameters\": {\"m\": 2.0, \"J\": 0.5}, " KNIFE_T ", " KNIFE_C "}",
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char *id = id_of(same[i]);
        cr_expect_str_eq(id, base, "variant %zu has another id: %s", i, same[i]);
        free(id);
    }
    free(base);
}

Test(model, id_changes_with_content)
{
    char *base = id_of("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C "}");
    static const char *const other[] = {
        "{" KNIFE_COORDS ", \"parameters\": {\"m\": 2.5, \"J\": 0.5}, " KNIFE_T ", " KNIFE_C "}",
        "{" KNIFE_COORDS ", \"parameters\": {\"m\": 2, \"J\": 0.5000000001}, " KNIFE_T ", " KNIFE_C "}",
        "{" KNIFE_COORDS ", " KNIFE_P ", \"kinetic_energy\": \"m*(x'^2 + y'^2)/2 + J*phi'^2/3\", " KNIFE_C
        "}",
        "{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", \"constraints\": [{\"name\": \"blade\", \"expr\": "
        "\"x'*sin(phi) - y'*cos(phi)\"}]}",
        "{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C ", \"potential_energy\": \"m*x\"}",
        "{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C
        ", \"speeds\": [\"x'*cos(phi) + y'*sin(phi)\", \"phi'\"]}",
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char *id = id_of(other[i]);
        cr_expect_str_neq(id, base, "variant %zu should have another id: %s", i, other[i]);
        free(id);
    }
    free(base);
}

/* ---- summaries ------------------------------------------------------------------- */

Test(model, summary_rolling_disk)
{
    json_t *cs = shared_case("greenwood-5.3-rolling-disk.json");
    json_t *model = json_object_get(cs, "model");
    cr_assert(json_is_object(model), "greenwood-5.3 has no model object");
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(model, NULL, &m, &problem);
    cr_assert_eq(rc, 0, "greenwood-5.3 does not compile");
    json_t *s = summary_of(m);
    cr_expect_eq(json_integer_value(json_object_get(s, "n")), 5);
    cr_expect_eq(json_integer_value(json_object_get(s, "m")), 2);
    cr_expect_eq(json_integer_value(json_object_get(s, "dof")), 3);
    cr_expect_str_eq(json_string_value(json_object_get(s, "model_id")), engine_model_id(m));
    json_t *cons = json_object_get(s, "constraints");
    cr_assert_eq(json_array_size(cons), 2);
    for (size_t j = 0; j < 2; j++) {
        json_t *c = json_array_get(cons, j);
        cr_expect(jbool(c, "linear"), "constraint %zu not linear", j);
        cr_expect(!jbool(c, "holonomic"), "constraint %zu called holonomic", j);
        cr_expect(!jbool(c, "rheonomic"), "constraint %zu called rheonomic", j);
    }
    cr_expect(jbool(s, "scleronomic"));
    cr_expect(jbool(s, "energy_conserved"));
    json_t *speeds = json_object_get(s, "speeds");
    cr_expect_eq(json_array_size(speeds), 3);
    cr_expect_str_eq(json_string_value(json_array_get(speeds, 2)), "Omega");
    json_decref(s);
    engine_model_release(m);
    json_decref(cs);
}

/* A constraint that moves with time: the particle's heading is driven at speed
 * v0*t. Rheonomic, so energy is not expected to be conserved, with the reason. */
Test(model, summary_rheonomic)
{
    engine_model *m =
        compile_ok("{\"coordinates\": [\"x\", \"y\", \"phi\"], \"parameters\": {\"m\": 1, \"v0\": 0.3}, "
                   "\"kinetic_energy\": \"m*(x'^2 + y'^2 + phi'^2)/2\", "
                   "\"constraints\": [{\"name\": \"drive\", \"expr\": \"x' - v0*t*cos(phi)\"}]}");
    json_t *s = summary_of(m);
    json_t *c = json_array_get(json_object_get(s, "constraints"), 0);
    cr_expect(jbool(c, "linear"));
    cr_expect(jbool(c, "rheonomic"));
    cr_expect(!jbool(s, "scleronomic"));
    cr_expect(!jbool(s, "energy_conserved"));
    const char *why = json_string_value(json_object_get(s, "energy_reason"));
    cr_expect(why && strstr(why, "rheonomic"), "energy_reason: %s", why ? why : "(none)");
    json_decref(s);
    engine_model_release(m);

    /* A velocity-free part without t is rheonomic in the engine's sense too (the
     * constraint is not homogeneous in q'), and so is T depending on t. */
    m = compile_ok("{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"v0\": 0.3}, "
                   "\"kinetic_energy\": \"(x'^2 + y'^2)/2\", \"constraints\": [\"x' - v0\"]}");
    s = summary_of(m);
    cr_expect(jbool(json_array_get(json_object_get(s, "constraints"), 0), "rheonomic"));
    cr_expect(!jbool(s, "energy_conserved"));
    json_decref(s);
    engine_model_release(m);

    m = compile_ok("{\"coordinates\": [\"x\"], \"kinetic_energy\": \"(1 + t^2)*x'^2/2\"}");
    s = summary_of(m);
    cr_expect(jbool(s, "scleronomic"), "no constraints: scleronomic");
    cr_expect(!jbool(s, "energy_conserved"), "T depends on t");
    why = json_string_value(json_object_get(s, "energy_reason"));
    cr_expect(why && strstr(why, "T depends explicitly on t"), "energy_reason: %s", why ? why : "(none)");
    json_decref(s);
    engine_model_release(m);

    m = compile_ok("{\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2/2\", "
                   "\"generalized_forces\": {\"x\": \"-0.1*x'\"}}");
    s = summary_of(m);
    cr_expect(!jbool(s, "energy_conserved"), "a damping force acts");
    json_decref(s);
    engine_model_release(m);

    /* a Lorentz force (q B y', -q B x') does no work: E = T + V is conserved (review
     * round 3: "non-potential generalized forces act", so no energy check was made) */
    m = compile_ok("{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"qB\": 2},"
                   " \"kinetic_energy\": \"(x'^2 + y'^2)/2\", \"potential_energy\": \"(x^2 + y^2)/4\","
                   " \"generalized_forces\": {\"x\": \"qB*y'\", \"y\": \"-qB*x'\"}}");
    s = summary_of(m);
    cr_expect(jbool(s, "energy_conserved"), "a force that does no work keeps the energy");
    why = json_string_value(json_object_get(s, "energy_reason"));
    cr_expect(why && strstr(why, "do no work"), "energy_reason: %s", why ? why : "(none)");
    json_decref(s);
    engine_model_release(m);
    m = compile_ok("{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"qB\": 2},"
                   " \"kinetic_energy\": \"(x'^2 + y'^2)/2\","
                   " \"generalized_forces\": {\"x\": \"qB*y'\", \"y\": \"-qB*x' - 1e-9*y'\"}}");
    s = summary_of(m);
    cr_expect(!jbool(s, "energy_conserved"), "the same with a little damping does work");
    json_decref(s);
    engine_model_release(m);
}

/* Without "speeds", the later coordinates are the dependent ones: for the rolling
 * disk (x', y' fixed by the rolling constraints) the speeds are phi', theta', psi'. */
Test(model, default_speeds_rolling_disk)
{
    json_t *cs = shared_case("greenwood-5.3-rolling-disk.json");
    json_t *model = json_deep_copy(json_object_get(cs, "model"));
    cr_assert_not_null(model);
    json_object_del(model, "speeds");
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(model, NULL, &m, &problem), 0, "rolling disk without speeds fails");
    json_t *s = summary_of(m);
    json_t *speeds = json_object_get(s, "speeds");
    cr_assert_eq(json_array_size(speeds), 3);
    static const char *const want[] = {"phi'", "theta'", "psi'"};
    for (int r = 0; r < 3; r++)
        cr_expect_str_eq(json_string_value(json_array_get(speeds, r)), want[r], "speed %d", r);
    cr_expect(jbool(s, "default_speeds"));
    cr_expect_eq(json_integer_value(json_object_get(s, "dof")), 3);
    json_decref(s);
    engine_model_release(m);
    json_decref(model);
    json_decref(cs);
}

/* When the last coordinate's velocity does not appear in the constraint, the
 * dependent velocity is the latest one that does. */
Test(model, default_speeds_skip_absent_velocity)
{
    engine_model *m =
        compile_ok("{\"coordinates\": [\"x\", \"y\", \"phi\"], \"kinetic_energy\": \"x'^2 + y'^2 + phi'^2\", "
                   "\"constraints\": [\"x'*sin(phi) - y'*cos(phi)\"]}");
    json_t *s = summary_of(m);
    json_t *speeds = json_object_get(s, "speeds");
    cr_assert_eq(json_array_size(speeds), 2);
    cr_expect_str_eq(json_string_value(json_array_get(speeds, 0)), "x'");
    cr_expect_str_eq(json_string_value(json_array_get(speeds, 1)), "phi'");
    json_decref(s);
    engine_model_release(m);
}

/* A holonomic constraint in velocity form is flagged holonomic (Frobenius). */
Test(model, holonomic_flag)
{
    engine_model *m = compile_ok("{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2 + y'^2\", "
                                 "\"constraints\": [\"y*x' + x*y'\"]}");
    json_t *s = summary_of(m);
    cr_expect(jbool(json_array_get(json_object_get(s, "constraints"), 0), "holonomic"),
              "d(xy) = 0 is integrable");
    json_decref(s);
    engine_model_release(m);
}

/* Retain / release and the borrowed strings; the canonical form is a model with the
 * same id. */
static void canonical_recompiles(const char *text)
{
    engine_model *m = compile_ok(text);
    cr_expect_eq(engine_model_retain(m), m);
    engine_model_release(m);
    const char *canon = engine_model_canonical(m);
    cr_assert_not_null(canon);
    json_error_t jerr;
    json_t *cj = json_loads(canon, 0, &jerr);
    cr_assert_not_null(cj, "canonical form is not JSON: %s", canon);
    /* The canonical form compiles to the same id. */
    engine_model *m2 = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(cj, NULL, &m2, &problem), 0, "canonical form does not compile: %s",
                 canon);
    cr_expect_str_eq(engine_model_id(m2), engine_model_id(m));
    cr_expect_gt(engine_model_bytes(m), 0);
    engine_model_release(m2);
    json_decref(cj);
    engine_model_release(m);
    engine_model_release(NULL);
}

Test(model, refcount_and_canonical)
{
    canonical_recompiles(
        "{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C
        ", \"speeds\": [{\"name\": \"v\", \"expr\": \"x'*cos(phi) + y'*sin(phi)\"}, \"phi'\"]}");
}

/* Known bug: with default speeds the canonical form names the speeds "x'" and
 * "phi'", which are not identifiers, so the canonical model is not a valid model
 * ("'x'' is not an identifier" at model.speeds[0].name). */
Test(model, canonical_form_recompiles_default_speeds)
{
    canonical_recompiles("{" KNIFE_COORDS ", " KNIFE_P ", " KNIFE_T ", " KNIFE_C "}");
}

/* Known bug: a non-finite constant in an expression (1/0) is accepted; the model
 * compiles, and its canonical form then holds "inf", which does not parse. A model
 * must be rejected with the expression's path and column. */
Test(model, nonfinite_constant_rejected)
{
    json_t *js = load("{\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2/2 + 1/0\"}");
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(js, NULL, &m, &problem);
    cr_expect_lt(rc, 0, "T = x'^2/2 + 1/0 compiled (canonical: %s)", m ? engine_model_canonical(m) : "");
    if (rc == 0)
        engine_model_release(m);
    json_decref(problem);
    json_decref(js);
}

/* Known bug (found by tests/fuzz/fuzz_model): with a smaller node cap, a
 * non-quadratic kinetic energy (the rolling disk with one square made a 9th power
 * and theta'^2 made theta'^4, no speeds) makes equations_derive run out of its node
 * budget, and printing the equations dereferences a NULL expression (print.c
 * print_rec, via equations.c str) — SIGSEGV. Any outcome but a crash is accepted:
 * success, or a limit-exceeded problem. */
Test(model, small_node_limit_no_crash)
{
    json_t *js = load("{\"coordinates\": [\"phi\", \"theta\", \"psi\", \"x\", \"y\"], "
                      "\"parameters\": {\"m\": 1, \"r\": 0.5, \"g\": 9.81}, \"kinetic_energy\": "
                      "\"1/2*m*((x' - r*phi'*cos(phi)*cos(theta) + r*theta'*sin(phi)*sin(theta))^2 + "
                      "(y' - r*phi'*sin(phi)*cos(theta) - r*theta'*cos(phi)*sin(theta))^9 + "
                      "r^2*theta'^2*cos(theta)^2) + 1/8*m*r^2*(phi'^2*sin(theta)^2 + theta'^4) + "
                      "1/4*m*r^2*(phi'*cos(theta) + psi')^2\", \"potential_energy\": \"m*g*r*sin(theta)\", "
                      "\"constraints\": [{\"name\": \"slip_x\", \"expr\": \"r*psi'*cos(phi) + x'\"}, "
                      "{\"name\": \"slip_y\", \"expr\": \"r*psi'*sin(phi) + y'\"}]}");
    engine_limits lim = engine_default_limits;
    lim.max_nodes = 200000;
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(js, &lim, &m, &problem);
    if (rc == 0) {
        cr_expect_not_null(m);
        /* the equations are printed on first request now: print them */
        json_t *eq = NULL, *eq_problem = NULL;
        if (engine_equations(m, &eq, &eq_problem) == 0)
            cr_expect_not_null(eq);
        else
            cr_expect_not_null(eq_problem);
        json_decref(eq);
        json_decref(eq_problem);
        engine_model_release(m);
    } else {
        cr_expect_not_null(problem);
        json_decref(problem);
    }
    json_decref(js);
}

/* Known bug (found by tests/fuzz/fuzz_model): a 60-byte model crashes the compiler.
 * simplify.c expand rewrites cos^n as cos^(n-2)*(1 - sin^2) recursively, one stack
 * frame pair per step, so cos(x)^1000000 overflows the stack (SIGSEGV in a normal
 * -O2 build; under ASan already cos(theta)^2^2^2^2 = cos^65536 does). Any outcome
 * but a crash is accepted. */
Test(model, huge_integer_power_no_crash)
{
    json_t *js = load("{\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2*(1 + cos(x)^1000000)\"}");
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(js, NULL, &m, &problem);
    if (rc == 0)
        engine_model_release(m);
    else
        json_decref(problem);
    json_decref(js);
}

/* JSON does not tell 11 from 11.0: whole reals are accepted where counts are asked for,
 * and a request means the same with either (one simulation key). 11.5 is refused. */
Test(model, requests_take_whole_reals_as_integers)
{
    engine_model *m = compile_ok("{\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2/2\","
                                 " \"potential_energy\": \"x^2/2\"}");
    const char *const forms[] = {"{\"initial\": {\"q\": {\"x\": 1}, \"qdot\": {\"x\": 0}}, \"t_end\": 1, "
                                 "\"output\": {\"samples\": 11},"
                                 " \"integrator\": {\"max_steps\": 1000}}",
                                 "{\"initial\": {\"q\": {\"x\": 1.0}, \"qdot\": {\"x\": 0.0}}, \"t_end\": "
                                 "1.0, \"output\": {\"samples\": "
                                 "11.0}, \"integrator\": {\"max_steps\": 1e3}}"};
    char keys[2][80];
    for (int f = 0; f < 2; f++) {
        json_t *req = load(forms[f]), *result = NULL, *problem = NULL;
        cr_assert_eq(engine_simulation_key(m, req, keys[f], &problem), 0);
        int rc = engine_simulate(m, req, NULL, NULL, &result, &problem);
        cr_assert_eq(rc, 0, "form %d: %s", f, problem ? json_dumps(problem, 0) : "");
        json_t *t = json_object_get(json_object_get(result, "trajectory"), "t");
        cr_assert_eq(json_array_size(t), 11, "form %d: 11 samples", f);
        json_decref(result);
        json_decref(req);
    }
    cr_assert_str_eq(keys[0], keys[1], "one request, one key");

    json_t *req = load("{\"initial\": {\"q\": {\"x\": 1}, \"qdot\": {\"x\": 0}}, \"t_end\": 1,"
                       " \"output\": {\"samples\": 11.5}}");
    json_t *result = NULL, *problem = NULL;
    cr_assert_neq(engine_simulate(m, req, NULL, NULL, &result, &problem), 0, "11.5 samples is refused");
    char *text = json_dumps(problem, 0);
    cr_assert(strstr(text, "output.samples"), "the error names the field: %s", text);
    free(text);
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
}

/* "units" (issue 17): labels for parameters, coordinates, speeds and t, kept in the
 * canonical form and the summary; a model without them is unchanged; a unit for a
 * symbol the model does not have, or one that is not a short string, is an error. */
Test(model, units_label_symbols_and_are_checked)
{
    static const char base[] =
        "{\"coordinates\": [\"x\"], \"parameters\": {\"m\": 2}, \"kinetic_energy\": \"m*x'^2/2\"";
    char text[512];
    snprintf(text, sizeof text, "%s}", base);
    engine_model *plain = compile_ok(text);
    json_t *s0 = engine_model_summary(plain);
    cr_assert_null(json_object_get(s0, "units"), "no units unless given");
    cr_assert_null(strstr(engine_model_canonical(plain), "units"));
    snprintf(text, sizeof text, "%s, \"units\": {\"m\": \"kg\", \"x\": \"m\", \"t\": \"s\"}}", base);
    engine_model *m = compile_ok(text);
    json_t *s = engine_model_summary(m);
    json_t *u = json_object_get(s, "units");
    cr_assert_str_eq(json_string_value(json_object_get(u, "m")), "kg");
    cr_assert_str_eq(json_string_value(json_object_get(u, "x")), "m");
    cr_assert_str_eq(json_string_value(json_object_get(u, "t")), "s");
    cr_assert_not_null(strstr(engine_model_canonical(m), "\"units\":{\"m\":\"kg\",\"t\":\"s\",\"x\":\"m\"}"),
                       "canonical: %s", engine_model_canonical(m));
    cr_assert_str_neq(engine_model_id(m), engine_model_id(plain), "the units are part of the model");
    json_decref(s);
    json_decref(s0);
    engine_model_release(m);
    engine_model_release(plain);
    snprintf(text, sizeof text, "%s, \"units\": {\"mass\": \"kg\"}}", base);
    compile_fails(text, "invalid-model", "model.units.mass", 0, "unknown symbol");
    snprintf(text, sizeof text, "%s, \"units\": {\"m\": 3}}", base);
    compile_fails(text, "invalid-model", "model.units.m", 0, "string");
    snprintf(text, sizeof text, "%s, \"units\": [\"kg\"]}", base);
    compile_fails(text, "invalid-model", "model.units", 0, "object");
}

/* Issue 15: a regular Psi badly scaled at the test configurations (an exp of a
 * feature far from them: [[1, 0], [1e17, 1]]) was called singular there; such a
 * point proves nothing now. Dependent rows are still found. */
Test(model, badly_scaled_psi_is_not_called_singular)
{
    static const char *const ok[] = {"y' + 1e17*x'", "y' + 0.3*exp((x + 2913)/71.7)*x'",
                                     "y' - 3*exp(-100*(x - 40)^2)*x'",
                                     "y' + 0.298*x'^3 + 1.12*exp((y + 315.6)/20.7)*x'"};
    for (int i = 0; i < 4; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2 + y'^2\", \"constraints\": "
                 "[{\"name\": \"c\", \"expr\": \"%s\"}], \"speeds\": [{\"name\": \"u\", \"expr\": \"x'\"}]}",
                 ok[i]);
        engine_model_release(compile_ok(text)); /* asserts it compiles */
    }
    compile_fails(
        "{\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2 + y'^2\", \"constraints\": "
        "[{\"name\": \"c\", \"expr\": \"2*x'\"}], \"speeds\": [{\"name\": \"u\", \"expr\": \"x'\"}]}",
        "singular-transformation", "model.speeds", 0, "singular");
}

/* A chain of n thin disks rolling on a plane, neighbours' contact points linked by
 * springs (bench/models/gen_models.py's disk-chain-N: 5 coordinates, 2 constraints and
 * 3 speeds a disk), as a case {"model", "simulation"}. */
static json_t *disk_chain(int n)
{
    json_t *coords = json_array(), *defs = json_array(), *cons = json_array(), *speeds = json_array();
    json_t *q0 = json_object(), *u0 = json_object();
    size_t cap = (size_t)n * 400 + 64;
    char *T = malloc(cap), *V = malloc(cap), b[400];
    cr_assert(T && V);
    T[0] = V[0] = 0;
    for (int i = 1; i <= n; i++) {
        char ph[16], th[16], ps[16], x[16], y[16];
        snprintf(ph, sizeof ph, "phi%d", i);
        snprintf(th, sizeof th, "theta%d", i);
        snprintf(ps, sizeof ps, "psi%d", i);
        snprintf(x, sizeof x, "x%d", i);
        snprintf(y, sizeof y, "y%d", i);
        const char *c5[] = {ph, th, ps, x, y};
        for (int j = 0; j < 5; j++)
            json_array_append_new(coords, json_string(c5[j]));
        snprintf(b, sizeof b, "%s' - r*%s'*cos(%s)*cos(%s) + r*%s'*sin(%s)*sin(%s)", x, ph, ph, th, th, ph,
                 th);
        json_array_append_new(defs, json_pack("{s:s+, s:s}", "name", "vx", ph + 3, "expr", b));
        snprintf(b, sizeof b, "%s' - r*%s'*sin(%s)*cos(%s) - r*%s'*cos(%s)*sin(%s)", y, ph, ph, th, th, ph,
                 th);
        json_array_append_new(defs, json_pack("{s:s+, s:s}", "name", "vy", ph + 3, "expr", b));
        snprintf(b, sizeof b, "r*%s'*cos(%s)", th, th);
        json_array_append_new(defs, json_pack("{s:s+, s:s}", "name", "vz", ph + 3, "expr", b));
        snprintf(T + strlen(T), cap - strlen(T),
                 "%s1/2*m*(vx%d^2 + vy%d^2 + vz%d^2) + 1/8*m*r^2*(%s'^2*sin(%s)^2 + %s'^2) + "
                 "1/4*m*r^2*(%s'*cos(%s) + %s')^2",
                 i > 1 ? " + " : "", i, i, i, ph, th, th, ph, th, ps);
        snprintf(V + strlen(V), cap - strlen(V), "%sm*g*r*sin(%s)", i > 1 ? " + " : "", th);
        if (i < n)
            snprintf(V + strlen(V), cap - strlen(V), " + 1/2*k*((x%d - %s - L)^2 + (y%d - %s)^2)", i + 1, x,
                     i + 1, y);
        snprintf(b, sizeof b, "r*%s'*cos(%s) + %s'", ps, ph, x);
        json_array_append_new(cons, json_pack("{s:s+, s:s}", "name", "slip_x", ph + 3, "expr", b));
        snprintf(b, sizeof b, "r*%s'*sin(%s) + %s'", ps, ph, y);
        json_array_append_new(cons, json_pack("{s:s+, s:s}", "name", "slip_y", ph + 3, "expr", b));
        snprintf(b, sizeof b, "%s'*sin(%s)", ph, th);
        json_array_append_new(speeds, json_pack("{s:s+, s:s}", "name", "wd", ph + 3, "expr", b));
        snprintf(b, sizeof b, "%s'", th);
        json_array_append_new(speeds, json_pack("{s:s+, s:s}", "name", "thd", ph + 3, "expr", b));
        snprintf(b, sizeof b, "%s'*cos(%s) + %s'", ph, th, ps);
        json_array_append_new(speeds, json_pack("{s:s+, s:s}", "name", "Omega", ph + 3, "expr", b));
        json_object_set_new(q0, ph, json_real(0.1 * i));
        json_object_set_new(q0, th, json_real(1.2 - 0.01 * (i % 7)));
        json_object_set_new(q0, ps, json_real(0.0));
        json_object_set_new(q0, x, json_real(1.5 * (i - 1)));
        json_object_set_new(q0, y, json_real(0.02 * (i % 3)));
        snprintf(b, sizeof b, "wd%d", i);
        json_object_set_new(u0, b, json_real(0.3 + 0.01 * (i % 5)));
        snprintf(b, sizeof b, "thd%d", i);
        json_object_set_new(u0, b, json_real(0.0));
        snprintf(b, sizeof b, "Omega%d", i);
        json_object_set_new(u0, b, json_real(4.0 - 0.05 * (i % 4)));
    }
    json_t *model =
        json_pack("{s:o, s:{s:f, s:f, s:f, s:f, s:f}, s:o, s:s, s:s, s:o, s:o}", "coordinates", coords,
                  "parameters", "m", 1.0, "r", 0.5, "g", 9.81, "k", 2.0, "L", 1.5, "definitions", defs,
                  "kinetic_energy", T, "potential_energy", V, "constraints", cons, "speeds", speeds);
    free(T);
    free(V);
    cr_assert_not_null(model);
    return json_pack("{s:o, s:{s:{s:f, s:o, s:o}}}", "model", model, "simulation", "initial", "t", 0.0, "q",
                     q0, "speeds", u0);
}

/* Issue 19 item 6: the default limits take 200 coordinates (a chain of 40 rolling
 * disks compiles and runs, conserving its energy), and refuse the 201st naming
 * model.coordinates. The compile's time budget is widened only for the sanitizer
 * builds (the chain takes about 0.7 s of CPU at -O2). */
Test(model, two_hundred_coordinates_compile_and_run, .timeout = 600)
{
    cr_assert_geq(engine_default_limits.max_coordinates, 200);
    json_t *c = disk_chain(40);
    engine_limits lim = engine_default_limits;
    lim.max_compile_seconds = 300;
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(json_object_get(c, "model"), &lim, &m, &problem);
    char *p = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
    cr_assert_eq(rc, 0, "a 40-disk chain does not compile: %.400s", p ? p : "");
    free(p);
    json_t *req = json_deep_copy(json_object_get(c, "simulation"));
    json_object_set_new(req, "t_end", json_real(0.5));
    json_object_set_new(req, "output", json_pack("{s:i}", "samples", 6));
    json_t *res = NULL;
    rc = engine_simulate(m, req, &lim, NULL, &res, &problem);
    p = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
    cr_assert_eq(rc, 0, "the 40-disk chain does not run: %.400s", p ? p : "");
    free(p);
    const json_t *energy = json_object_get(json_object_get(res, "checks"), "energy");
    cr_assert(json_is_true(json_object_get(energy, "conserved_expected")));
    double drift = json_number_value(json_object_get(energy, "max_rel_drift"));
    cr_assert_lt(drift, 1e-8, "energy drifts by %g relative", drift);
    json_decref(res);
    json_decref(req);
    engine_model_release(m);

    json_array_append_new(json_object_get(json_object_get(c, "model"), "coordinates"), json_string("extra"));
    m = NULL;
    rc = engine_model_compile(json_object_get(c, "model"), &lim, &m, &problem);
    cr_assert_lt(rc, 0);
    const json_t *e0 = json_array_get(json_object_get(problem, "errors"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(e0, "path")), "model.coordinates");
    cr_assert_not_null(strstr(json_string_value(json_object_get(e0, "reason")), "at most 200"));
    json_decref(problem);
    json_decref(c);
}
