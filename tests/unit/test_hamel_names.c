/* test_hamel_names.c — POST /v1/hamel (engine_hamel) refuses a configuration naming
 * something that is not a coordinate, as a simulation's initial.q does (issue 17: "thet"
 * was ignored and the coefficients computed at the request's other values). */
#include <criterion/criterion.h>
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
