/* test_bodies.c — models with bodies and position-level constraints through the real
 * hamel-server (harness.h): the rolling disk written with a rigid body and a rolling
 * disk compiles (201, the generated constraints in the summary), a bad inertia is a 422
 * naming model.bodies[0].inertia, and the Cartesian pendulum's simulation solves its
 * initial y and reports checks.constraints.position. Files are read relative to the
 * repository root. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static harness_server bsrv;

static void bodies_setup(void)
{
    cr_assert_eq(harness_start(&bsrv, NULL), 0, "the server did not start (log above)");
}

static void bodies_teardown(void) { harness_stop(&bsrv); }

TestSuite(server_bodies, .init = bodies_setup, .fini = bodies_teardown, .timeout = 120);

static json_t *load(const char *path)
{
    json_error_t err;
    json_t *js = json_load_file(path, 0, &err);
    cr_assert_not_null(js, "%s: %s", path, err.text);
    return js;
}

static harness_resp post(const char *path, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    harness_resp r;
    CURLcode rc = harness_request(&bsrv, "POST", path, text, NULL, &r);
    free(text);
    json_decref(body);
    cr_assert_eq(rc, CURLE_OK, "POST %s: %s", path, curl_easy_strerror(rc));
    return r;
}

Test(server_bodies, model_with_bodies_compiles)
{
    harness_resp r = post("/v1/models", load("api/examples/model-bodies.json"));
    cr_assert(r.status == 201 || r.status == 200, "status %ld: %s", r.status, r.body);
    const json_t *cons = json_object_get(r.json, "constraints");
    cr_assert_eq(json_array_size(cons), 2, "%s", r.body);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(cons, 0), "name")), "disk_rolling");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(cons, 1), "name")), "disk_lateral");
    cr_expect_eq(json_integer_value(json_object_get(r.json, "dof")), 3);
    harness_resp_free(&r);
}

Test(server_bodies, bad_inertia_is_422_with_path)
{
    json_t *model = load("api/examples/model-bodies.json");
    json_t *I = json_object_get(json_array_get(json_object_get(model, "bodies"), 0), "inertia");
    json_array_set_new(json_array_get(I, 0), 1, json_real(0.5)); /* Ixy = 0.5, Iyx = 0 */
    harness_resp r = post("/v1/models", model);
    cr_assert_eq(r.status, 422, "status %ld: %s", r.status, r.body);
    const json_t *e0 = json_array_get(json_object_get(r.json, "errors"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(e0, "path")), "model.bodies[0].inertia", "%s", r.body);
    cr_expect_not_null(strstr(json_string_value(json_object_get(e0, "reason")), "symmetric"), "%s", r.body);
    harness_resp_free(&r);
    /* the server is still up */
    harness_resp h;
    cr_assert_eq(harness_request(&bsrv, "GET", "/v1/health", NULL, NULL, &h), CURLE_OK);
    cr_expect_eq(h.status, 200);
    harness_resp_free(&h);
}

Test(server_bodies, position_constraint_simulation)
{
    harness_resp r = post("/v1/simulations?wait=60", load("api/examples/simulation-position-request.json"));
    cr_assert_eq(r.status, 200, "status %ld: %s", r.status, r.body);
    const json_t *pos =
        json_object_get(json_object_get(json_object_get(r.json, "checks"), "constraints"), "position");
    cr_assert_not_null(pos, "%s", r.body);
    cr_expect(json_number_value(json_object_get(pos, "max_abs_residual")) <= 1e-12, "%s", r.body);
    const json_t *y = json_object_get(json_object_get(json_object_get(r.json, "trajectory"), "q"), "y");
    cr_expect(fabs(json_number_value(json_array_get(y, 0)) + 0.8) <= 1e-15, "initial y solved to -0.8: %s",
              r.body);
    harness_resp_free(&r);
}
