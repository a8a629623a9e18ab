/* test_linearize.c — POST /v1/evaluate and POST /v1/linearize against the real
 * hamel-server (harness.h): the rolling disk's accelerations at its initial state
 * satisfy Greenwood (5.193)-(5.195), a model posted first is used by model_id, the
 * upright rolling disk's eigenvalues are the closed form's, and bad requests are 422
 * problems naming the field, with the server still up. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static harness_server lsrv;
static json_t *disk; /* greenwood-5.3 case */

static void lin_setup(void)
{
    cr_assert_eq(harness_start(&lsrv, NULL), 0, "the server did not start (log above)");
    char path[PATH_MAX];
    json_error_t err;
    disk = harness_case_load("greenwood-5.3-rolling-disk.json", path, sizeof path, &err);
    cr_assert_not_null(disk, "cannot load %s: %s", path, err.text);
}

static void lin_teardown(void)
{
    harness_stop(&lsrv);
    json_decref(disk);
    disk = NULL;
}

static harness_resp post(const char *path, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    harness_resp r;
    CURLcode rc = harness_request(&lsrv, "POST", path, text, NULL, &r);
    free(text);
    json_decref(body);
    cr_assert_eq(rc, CURLE_OK, "POST %s: %s", path, curl_easy_strerror(rc));
    return r;
}

static double num_at(const json_t *o, const char *a, const char *b)
{
    return json_number_value(json_object_get(json_object_get(o, a), b));
}

static int has_error_at(const harness_resp *r, const char *path)
{
    const json_t *errs = json_object_get(r->json, "errors");
    for (size_t i = 0; i < json_array_size(errs); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(errs, i), "path")), path))
            return 1;
    return 0;
}

TestSuite(server_linearize, .init = lin_setup, .fini = lin_teardown, .timeout = 120);

Test(server_linearize, evaluate_rolling_disk)
{
    json_t *init = json_object_get(json_object_get(disk, "simulation"), "initial");
    harness_resp r = post("/v1/evaluate", json_pack("{s:O, s:[O]}", "model", json_object_get(disk, "model"),
                                                    "states", init));
    cr_assert_eq(r.status, 200, "%s", r.body);
    const json_t *st = json_array_get(json_object_get(r.json, "states"), 0);
    double th = num_at(st, "q", "theta"), wd = num_at(st, "speeds", "wd"), thd = num_at(st, "speeds", "thd"),
           W = num_at(st, "speeds", "Omega");
    double rr = 0.5, g = 9.81;
    /* Greenwood (5.193)-(5.195) solved for the speed derivatives */
    double wd_d = -wd * thd / tan(th) + 2 * thd * W;
    double thd_d = 0.8 * (0.25 * wd * wd / tan(th) - 1.5 * wd * W - g / rr * cos(th));
    double W_d = 2.0 / 3.0 * wd * thd;
    cr_assert(fabs(num_at(st, "speeds_dot", "wd") - wd_d) < 1e-12, "wd' %.17g vs %.17g",
              num_at(st, "speeds_dot", "wd"), wd_d);
    cr_assert(fabs(num_at(st, "speeds_dot", "thd") - thd_d) < 1e-12, "thd' %.17g vs %.17g",
              num_at(st, "speeds_dot", "thd"), thd_d);
    cr_assert(fabs(num_at(st, "speeds_dot", "Omega") - W_d) < 1e-12, "Omega'");
    cr_assert(json_is_number(json_object_get(json_object_get(st, "qddot"), "x")), "qddot of every coordinate");
    cr_assert(json_is_number(json_object_get(json_object_get(st, "multipliers"), "slip_x")), "multipliers");
    const char *id = json_string_value(json_object_get(r.json, "model_id"));
    cr_assert(id && !strncmp(id, "sha256:", 7));

    /* the same model by id */
    harness_resp r2 = post("/v1/evaluate", json_pack("{s:s, s:[O]}", "model_id", id, "states", init));
    cr_assert_eq(r2.status, 200, "%s", r2.body);
    cr_assert(json_equal(json_object_get(r2.json, "states"), json_object_get(r.json, "states")),
              "by model_id: the same answer");
    harness_resp_free(&r2);
    harness_resp_free(&r);

    /* a bad state names the field */
    json_t *bad = json_deep_copy(init);
    json_object_del(json_object_get(bad, "q"), "theta");
    r = post("/v1/evaluate", json_pack("{s:O, s:[o]}", "model", json_object_get(disk, "model"), "states", bad));
    cr_assert_eq(r.status, 422, "%s", r.body);
    cr_assert(has_error_at(&r, "states[0].q.theta"), "%s", r.body);
    harness_resp_free(&r);
}

Test(server_linearize, upright_disk_eigenvalues)
{
    const double g = 9.81, rr = 0.5, W = 4.0;
    json_t *pts = json_array();
    for (int i = 0; i < 3; i++)
        json_array_append_new(pts, json_pack("{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}", "q", "phi", 0.0,
                                             "theta", M_PI / 2, "psi", 0.0, "x", 0.0, "y", 0.0, "speeds", "wd",
                                             0.0, "thd", 0.0, "Omega", W + i));
    harness_resp r =
        post("/v1/linearize", json_pack("{s:O, s:o}", "model", json_object_get(disk, "model"), "points", pts));
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_eq(json_array_size(json_object_get(r.json, "states")), 8);
    for (int i = 0; i < 3; i++) {
        const json_t *pt = json_array_get(json_object_get(r.json, "points"), i);
        double w = sqrt((12 * (W + i) * (W + i) - 4 * g / rr) / 5);
        int found = 0;
        const json_t *ev = json_object_get(pt, "eigenvalues");
        for (size_t e = 0; e < json_array_size(ev); e++) {
            double re = json_number_value(json_object_get(json_array_get(ev, e), "re"));
            double im = json_number_value(json_object_get(json_array_get(ev, e), "im"));
            found += fabs(re) < 1e-12 && fabs(fabs(im) - w) < 1e-12;
        }
        cr_assert_eq(found, 2, "Omega = %g: +-%.17g i among %s", W + i, w, json_dumps(ev, 0));
        cr_assert_eq(json_array_size(json_object_get(pt, "A")), 8);
    }
    harness_resp_free(&r);

    /* not steady: tilted disk at rest falls */
    r = post("/v1/linearize", json_pack("{s:O, s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}", "model",
                                        json_object_get(disk, "model"), "q", "phi", 0.0, "theta", 1.2, "psi", 0.0,
                                        "x", 0.0, "y", 0.0, "speeds", "wd", 0.0, "thd", 0.0, "Omega", 0.0));
    cr_assert_eq(r.status, 422, "%s", r.body);
    cr_assert(has_error_at(&r, "speeds.thd"), "%s", r.body);
    harness_resp_free(&r);

    /* still up */
    harness_resp h;
    cr_assert_eq(harness_request(&lsrv, "GET", "/v1/health", NULL, NULL, &h), CURLE_OK);
    cr_assert_eq(h.status, 200);
    harness_resp_free(&h);
}
