/* test_geometry.c — geometry out of range is a 422 naming the field (issue 15 item 6):
 * a rolling disk's radius or tube_radius that is zero or negative, a mass that is not
 * positive, an inertia that is not positive semi-definite — in the model, and when a
 * request's parameters make them so (engine/mech/geom.h).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "support.h"

static void setup(void) { engine_init(); }

static json_t *golden(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "tests/golden/bodies/%s", name);
    return support_load_file(path);
}

/* The model, compiled: expects a 422 whose errors include `path`, with `word` in its reason. */
static void refused(const json_t *model, const char *path, const char *word)
{
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(model, NULL, &m, &problem);
    engine_model_release(m);
    cr_assert_neq(rc, 0, "the model compiles; expected a 422 at %s", path);
    cr_assert_neq(hamel_problem_code(problem), HAMEL_E_INTERNAL);
    size_t i;
    const json_t *e;
    int found = 0;
    json_array_foreach(json_object_get(problem, "errors"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "path")), path) == 0 &&
            strstr(json_string_value(json_object_get(e, "reason")), word))
            found = 1;
    }
    char *text = json_dumps(problem, JSON_COMPACT);
    cr_assert(found, "no error at %s saying '%s': %s", path, word, text);
    free(text);
    json_decref(problem);
}

/* The file's simulation with `params` over the model's: expects a 422 at `path` naming `field`. */
static void run_refused(const char *file, const char *params, const char *path, const char *field)
{
    json_t *f = golden(file);
    engine_model *m = support_compile_json(json_object_get(f, "model"));
    json_t *req = json_deep_copy(json_object_get(f, "simulation"));
    json_object_set_new(req, "parameters", support_loads(params));
    json_t *result = NULL, *problem = NULL;
    int rc = engine_simulate(m, req, NULL, NULL, &result, &problem);
    cr_assert_neq(rc, 0, "%s with %s runs; expected a 422 at %s", file, params, path);
    char *text = json_dumps(problem, JSON_COMPACT);
    cr_assert_neq(hamel_problem_code(problem), HAMEL_E_INTERNAL, "%s", text);
    size_t i;
    const json_t *e;
    int found = 0;
    json_array_foreach(json_object_get(problem, "errors"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "path")), path) == 0 &&
            strstr(json_string_value(json_object_get(e, "reason")), field))
            found = 1;
    }
    cr_assert(found, "no error at %s naming %s: %s", path, field, text);
    free(text);
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
    json_decref(f);
}

Test(geometry, a_radius_that_is_not_positive_is_refused, .init = setup)
{
    static const char *const bad[] = {"-0.5", "0"};
    for (int i = 0; i < 2; i++) {
        json_t *f = golden("rolling-disk-primitive.json");
        json_t *model = json_object_get(f, "model");
        json_t *disk = json_array_get(json_object_get(model, "rolling_disks"), 0);
        json_object_set_new(disk, "radius", json_string(bad[i]));
        refused(model, "model.rolling_disks[0].radius", "positive");
        json_decref(f);
    }
}

Test(geometry, a_tube_radius_that_is_not_positive_is_refused, .init = setup)
{
    static const char *const bad[] = {"-0.1", "0", "-rho"};
    for (int i = 0; i < 3; i++) {
        json_t *f = golden("rolling-torus-primitive.json");
        json_t *model = json_object_get(f, "model");
        json_t *disk = json_array_get(json_object_get(model, "rolling_disks"), 0);
        json_object_set_new(disk, "tube_radius", json_string(bad[i]));
        refused(model, "model.rolling_disks[0].tube_radius", "positive");
        json_decref(f);
    }
}

Test(geometry, a_mass_or_inertia_out_of_range_is_refused, .init = setup)
{
    json_t *f = golden("physical-pendulum-body.json");
    json_t *body = json_array_get(json_object_get(json_object_get(f, "model"), "bodies"), 0);
    json_object_set_new(body, "mass", json_real(0.0));
    refused(json_object_get(f, "model"), "model.bodies[0].mass", "positive");
    json_decref(f);
    f = golden("physical-pendulum-body.json");
    body = json_array_get(json_object_get(json_object_get(f, "model"), "bodies"), 0);
    json_object_set_new(body, "inertia", support_loads("[[1, 0, 0], [0, -1, 0], [0, 0, 1]]"));
    refused(json_object_get(f, "model"), "model.bodies[0].inertia", "semi-)definite");
    json_decref(f);
}

Test(geometry, parameters_that_make_the_geometry_out_of_range_are_refused, .init = setup)
{
    run_refused("physical-pendulum-body.json", "{\"m\": -2}", "parameters.m", "model.bodies[0].mass");
    run_refused("physical-pendulum-body.json", "{\"m\": 0}", "parameters.m", "model.bodies[0].mass");
    run_refused("physical-pendulum-body.json", "{\"Ixx\": -5}", "parameters.Ixx", "model.bodies[0].inertia");
    run_refused("rolling-torus-primitive.json", "{\"rho\": -0.1}", "parameters.rho",
                "model.rolling_disks[0].tube_radius");
    run_refused("rolling-disk-primitive.json", "{\"r\": 0}", "parameters.r", "model.rolling_disks[0].radius");

    /* values in range still run */
    json_t *f = golden("rolling-torus-primitive.json");
    engine_model *m = support_compile_json(json_object_get(f, "model"));
    json_t *req = json_deep_copy(json_object_get(f, "simulation"));
    json_object_set_new(req, "parameters", support_loads("{\"rho\": 0.05}"));
    json_t *r = support_simulate(m, req, "the torus with rho = 0.05");
    json_decref(r);
    json_decref(req);
    engine_model_release(m);
    json_decref(f);
}
