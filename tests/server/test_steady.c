/* test_steady.c — POST /v1/steady against the real hamel-server (harness.h): the rolling
 * disk's steady circles along a branch in Omega are Greenwood's closed form, by model
 * and by model_id; too many unknowns is a 422 naming them and saying how many. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static harness_server ssrv;
static json_t *disk; /* greenwood-5.3 case */

static void steady_setup(void)
{
    cr_assert_eq(harness_start(&ssrv, NULL), 0, "the server did not start (log above)");
    char path[PATH_MAX];
    json_error_t err;
    disk = harness_case_load("greenwood-5.3-rolling-disk.json", path, sizeof path, &err);
    cr_assert_not_null(disk, "cannot load %s: %s", path, err.text);
}

static void steady_teardown(void)
{
    harness_stop(&ssrv);
    json_decref(disk);
    disk = NULL;
}

static harness_resp post(json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    harness_resp r;
    CURLcode rc = harness_request(&ssrv, "POST", "/v1/steady", text, NULL, &r);
    free(text);
    json_decref(body);
    cr_assert_eq(rc, CURLE_OK, "POST /v1/steady: %s", curl_easy_strerror(rc));
    return r;
}

TestSuite(server_steady, .init = steady_setup, .fini = steady_teardown, .timeout = 120);

Test(server_steady, disk_circles_by_model_and_by_id)
{
    const double g = 9.81, r = 0.5, th = 1.2;
    json_t *state =
        json_pack("{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}", "q", "phi", 0.0, "theta", th, "psi",
                  0.0, "x", 0.0, "y", 0.0, "speeds", "wd", 0.3, "thd", 0.0, "Omega", 4.0);
    harness_resp h = post(json_pack("{s:O, s:O, s:[s], s:{s:s, s:f, s:i}}", "model",
                                    json_object_get(disk, "model"), "state", state, "unknowns", "wd",
                                    "continuation", "vary", "Omega", "to", 6.0, "steps", 4));
    cr_assert_eq(h.status, 200, "%.400s", h.body);
    const json_t *pts = json_object_get(h.json, "points");
    cr_assert_geq(json_array_size(pts), 5);
    for (size_t i = 0; i < json_array_size(pts); i++) {
        const json_t *val = json_object_get(json_array_get(pts, i), "values");
        double W = json_number_value(json_object_get(val, "Omega")),
               wd = json_number_value(json_object_get(val, "wd"));
        double a = 0.25 / tan(th), b = -1.5 * W, c = -g / r * cos(th);
        double root = (-b - sqrt(b * b - 4 * a * c)) / (2 * a);
        cr_assert(fabs(wd - root) <= 1e-12 * fmax(1.0, fabs(root)), "Omega %g: wd %.17g vs %.17g", W, wd,
                  root);
    }
    char id[128];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(h.json, "model_id")));
    harness_resp_free(&h);

    h = post(json_pack("{s:s, s:O, s:[s]}", "model_id", id, "state", state, "unknowns", "wd"));
    cr_assert_eq(h.status, 200, "%.400s", h.body);
    cr_assert(json_is_object(json_object_get(h.json, "steady")), "the steady motion");
    harness_resp_free(&h);

    h = post(json_pack("{s:s, s:O, s:[s, s]}", "model_id", id, "state", state, "unknowns", "wd", "Omega"));
    cr_assert_eq(h.status, 422, "%.400s", h.body);
    const json_t *e0 = json_array_get(json_object_get(h.json, "errors"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(e0, "path")), "unknowns");
    cr_assert(strstr(json_string_value(json_object_get(e0, "reason")), "only 1 of these 2"), "%s", h.body);
    harness_resp_free(&h);
    json_decref(state);
}
