/* test_hamel_names.c — POST /v1/hamel (engine_hamel) refuses a configuration naming
 * something that is not a coordinate, as a simulation's initial.q does (issue 17: "thet"
 * was ignored and the coefficients computed at the request's other values). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "support.h"

/* The errors[].path of a problem document joined by spaces (caller frees). */
static char *paths_of(const json_t *problem)
{
    char *out = calloc(1, 1024);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(problem, "errors"), i, e)
    {
        strncat(out, json_string_value(json_object_get(e, "path")), 1000 - strlen(out));
        strncat(out, " ", 1000 - strlen(out));
    }
    return out;
}

Test(hamel_names, an_unknown_coordinate_is_refused_with_its_path)
{
    engine_init();
    json_t *c = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    json_t *req = support_loads("{\"q\": {\"phi\": 0, \"theta\": 1.2, \"psi\": 0, \"x\": 0, \"y\": 0}}");
    json_t *res = NULL, *problem = NULL;
    cr_assert_eq(engine_hamel(m, req, NULL, &res, &problem), 0,
                 "every coordinate and nothing else: answered");
    json_decref(res);
    res = NULL;
    json_object_set_new(json_object_get(req, "q"), "thet", json_real(0.7));
    int rc = engine_hamel(m, req, NULL, &res, &problem);
    cr_assert_eq(rc, HAMEL_E_BAD_REQUEST, "a name that is not a coordinate is refused");
    cr_assert_null(res);
    char *paths = paths_of(problem);
    cr_expect_not_null(strstr(paths, "q.thet "), "the error names q.thet: %s", paths);
    char *text = json_dumps(problem, 0);
    cr_expect_not_null(strstr(text, "'thet' is not a coordinate"), "and says why: %s", text);
    free(text);
    free(paths);
    json_decref(problem);
    json_decref(req);
    /* in a list of points, the point's own path */
    req = support_loads("{\"points\": [{\"q\": {\"phi\": 0, \"theta\": 1.2, \"psi\": 0, \"x\": 0, \"y\": 0}},"
                        " {\"q\": {\"phi\": 0, \"theta\": 1.2, \"psi\": 0, \"x\": 0, \"y\": 0, \"z\": 1}}]}");
    problem = NULL;
    cr_assert_eq(engine_hamel(m, req, NULL, &res, &problem), HAMEL_E_BAD_REQUEST);
    paths = paths_of(problem);
    cr_expect_not_null(strstr(paths, "points[1].q.z"), "the error names points[1].q.z: %s", paths);
    free(paths);
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
    json_decref(c);
}

/* A model with a nonlinear constraint in the reduced form takes the point's velocities
 * as "speeds" or "qdot": a name there that is not a speed or a coordinate is refused
 * too (it was ignored). */
Test(hamel_names, unknown_speeds_and_qdot_names_are_refused)
{
    engine_init();
    engine_model *m = support_compile_text(
        "{\"coordinates\":[\"p\",\"x\",\"y\"],\"kinetic_energy\":\"p'^2+x'^2+y'^2\","
        "\"constraints\":[{\"name\":\"cx\",\"expr\":\"x' + y'^2\"},{\"name\":\"cy\",\"expr\":\"y'\"}],"
        "\"speeds\":[{\"name\":\"a\",\"expr\":\"p'\"}]}");
    const char *reqs[][2] = {
        {"{\"q\": {\"p\": 0, \"x\": 0, \"y\": 0}, \"speeds\": {\"a\": 1, \"b\": 2}}", "speeds.b "},
        {"{\"q\": {\"p\": 0, \"x\": 0, \"y\": 0}, \"qdot\": {\"p\": 1, \"x\": 0, \"y\": 0, \"w\": 1}}",
         "qdot.w "},
    };
    for (size_t i = 0; i < 2; i++) {
        json_t *req = support_loads(reqs[i][0]);
        json_t *res = NULL, *problem = NULL;
        cr_expect_eq(engine_hamel(m, req, NULL, &res, &problem), HAMEL_E_BAD_REQUEST, "%s is refused",
                     reqs[i][0]);
        char *paths = problem ? paths_of(problem) : strdup("");
        cr_expect_not_null(strstr(paths, reqs[i][1]), "the error names %s: %s", reqs[i][1], paths);
        free(paths);
        json_decref(problem);
        json_decref(res);
        json_decref(req);
    }
    engine_model_release(m);
}

/* The wheel with a Chetaev governor (tests/adversarial: x'^2 + y'^2 = vv^2, no lateral
 * slip, rolling): at a heading th the speed w = th' leaves two q', forward and backward,
 * and gamma^lateral_{w,speed} = +-1/(2 vv) changes sign between them. The initial q'
 * of heading 0.7 given at th = 3.9 is off the constraints there: refused with both roots
 * named (it was taken to the backward one by Newton's method, silently); a root given
 * as qdot is that root; speeds and qdot together are refused. */
Test(hamel_names, a_qdot_off_the_constraints_with_two_roots_is_refused_naming_them)
{
    engine_init();
    json_t *c = support_load_file("tests/adversarial/cases/governed-wheel-chetaev.json");
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    const double vv = 1.2, th = 3.9, r = 0.35;
    json_t *req = support_loads("{\"q\": {\"x\": 0, \"y\": 0, \"th\": 3.9, \"ph\": 0}}");
    json_object_set(req, "qdot",
                    json_object_get(json_object_get(json_object_get(c, "simulation"), "initial"), "qdot"));
    json_t *res = NULL, *problem = NULL;
    int rc = engine_hamel(m, req, NULL, &res, &problem);
    cr_assert_neq(rc, 0, "the initial q' at another heading is refused");
    char *text = json_dumps(problem, JSON_COMPACT), *paths = paths_of(problem);
    cr_expect_eq(hamel_problem_code(problem), HAMEL_E_BAD_INITIAL, "422: %s", text);
    cr_expect_not_null(strstr(paths, "qdot "), "the error names qdot: %s", paths);
    cr_expect_not_null(strstr(text, "leave 2 solutions"), "%s", text);
    const json_t *roots = json_object_get(problem, "roots");
    cr_assert_eq(json_array_size(roots), 2, "both roots: %s", text);
    for (size_t i = 0; i < 2; i++) {
        double x = json_number_value(json_object_get(json_array_get(roots, i), "x"));
        cr_expect_float_eq(fabs(x), vv * fabs(cos(th)), 1e-12, "root %zu: x' = +-vv cos th", i);
    }
    free(text);
    free(paths);
    json_decref(problem);
    /* each root as qdot: gamma^lateral_{w,speed} = 1/(2 vv) forward, its negative backward */
    for (int sign = 1; sign >= -1; sign -= 2) {
        char q[256];
        snprintf(
            q, sizeof q,
            "{\"q\": {\"x\": 0, \"y\": 0, \"th\": 3.9, \"ph\": 0}, \"qdot\": {\"x\": %.17g, \"y\": %.17g,"
            " \"th\": -0.5, \"ph\": %.17g}}",
            sign * vv * cos(th), sign * vv * sin(th), sign * vv / r);
        json_decref(req);
        req = support_loads(q);
        problem = NULL;
        rc = engine_hamel(m, req, NULL, &res, &problem);
        cr_assert_eq(rc, 0, "a root as qdot: %s", problem ? json_dumps(problem, 0) : "");
        const json_t *pt = json_array_get(json_object_get(res, "points"), 0), *e;
        cr_expect_float_eq(json_number_value(json_object_get(json_object_get(pt, "qdot"), "x")),
                           sign * vv * cos(th), 1e-12, "that root is taken");
        double got = NAN;
        size_t i;
        json_array_foreach(json_object_get(pt, "gamma"), i, e)
        {
            if (!strcmp(json_string_value(json_object_get(e, "j")), "lateral") &&
                !strcmp(json_string_value(json_object_get(e, "r")), "w") &&
                !strcmp(json_string_value(json_object_get(e, "l")), "speed"))
                got = json_number_value(json_object_get(e, "value"));
        }
        cr_expect_float_eq(got, sign / (2 * vv), 1e-12, "gamma^lateral_{w,speed} (%+d): %g", sign, got);
        json_decref(res);
    }
    /* speeds and qdot together */
    json_object_set_new(req, "speeds", support_loads("{\"w\": -0.5}"));
    problem = NULL;
    cr_expect_eq(engine_hamel(m, req, NULL, &res, &problem), HAMEL_E_BAD_REQUEST, "speeds and qdot refused");
    text = problem ? json_dumps(problem, JSON_COMPACT) : strdup("");
    cr_expect_not_null(strstr(text, "not both"), "%s", text);
    free(text);
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
    json_decref(c);
}
