/* test_linearize.c — POST /v1/evaluate and POST /v1/linearize against the real
 * hamel-server (harness.h): the rolling disk's accelerations at its initial state
 * satisfy Greenwood (5.193)-(5.195), a model posted first is used by model_id, the
 * upright rolling disk's eigenvalues are the closed form's, and bad requests are 422
 * problems naming the field, with the server still up. A nonlinear constraint solved by
 * Newton linearizes as its explicit writing does. Under the synchronous budget
 * (HAMEL_MAX_COMPILE_SECONDS) a long sweep is a 422 compile-limit, and a client that
 * hangs up cancels its linearization (the compile-stop counter's client_gone). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdatomic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
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
    harness_resp r = post("/v1/evaluate",
                          json_pack("{s:O, s:[O]}", "model", json_object_get(disk, "model"), "states", init));
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
    cr_assert(json_is_number(json_object_get(json_object_get(st, "qddot"), "x")),
              "qddot of every coordinate");
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
    r = post("/v1/evaluate",
             json_pack("{s:O, s:[o]}", "model", json_object_get(disk, "model"), "states", bad));
    cr_assert_eq(r.status, 422, "%s", r.body);
    cr_assert(has_error_at(&r, "states[0].q.theta"), "%s", r.body);
    harness_resp_free(&r);
}

/* A state so large that A overflows: a 422 that says so and names the point, not "the
 * eigenvalues of A did not converge" (GSL fed infinities). */
Test(server_linearize, an_overflowing_state_says_a_is_not_finite)
{
    json_t *pts =
        json_pack("[{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}]", "q", "phi", 0.0, "theta", 1.2, "psi",
                  0.0, "x", 0.0, "y", 0.0, "speeds", "wd", 1e308, "thd", 0.0, "Omega", 4.0);
    harness_resp r =
        post("/v1/linearize", json_pack("{s:O, s:o, s:b}", "model", json_object_get(disk, "model"), "points",
                                        pts, "steady", 0));
    cr_assert_eq(r.status, 422, "%s", r.body);
    cr_assert(strstr(json_string_value(json_object_get(r.json, "detail")), "not finite"), "%s", r.body);
    cr_assert(has_error_at(&r, "points[0]"), "the point is not named: %s", r.body);
    harness_resp_free(&r);
}

Test(server_linearize, upright_disk_eigenvalues)
{
    const double g = 9.81, rr = 0.5, W = 4.0;
    json_t *pts = json_array();
    for (int i = 0; i < 3; i++)
        json_array_append_new(pts, json_pack("{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}", "q", "phi",
                                             0.0, "theta", M_PI / 2, "psi", 0.0, "x", 0.0, "y", 0.0, "speeds",
                                             "wd", 0.0, "thd", 0.0, "Omega", W + i));
    harness_resp r = post("/v1/linearize",
                          json_pack("{s:O, s:o}", "model", json_object_get(disk, "model"), "points", pts));
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
    r = post("/v1/linearize",
             json_pack("{s:O, s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}", "model",
                       json_object_get(disk, "model"), "q", "phi", 0.0, "theta", 1.2, "psi", 0.0, "x", 0.0,
                       "y", 0.0, "speeds", "wd", 0.0, "thd", 0.0, "Omega", 0.0));
    cr_assert_eq(r.status, 422, "%s", r.body);
    cr_assert(has_error_at(&r, "speeds.thd"), "%s", r.body);
    harness_resp_free(&r);

    /* still up */
    harness_resp h;
    cr_assert_eq(harness_request(&lsrv, "GET", "/v1/health", NULL, NULL, &h), CURLE_OK);
    cr_assert_eq(h.status, 200);
    harness_resp_free(&h);
}

/* Appell's example (speeds x', y') with its constraint as given (explicit z') or squared
 * (q' by Newton): the same A and B over HTTP, to 1e-9; evaluate answers for both. */
Test(server_linearize, nonlinear_constraint_by_newton)
{
    json_error_t err;
    json_t *base = json_load_file("api/examples/model-nonlinear.json", 0, &err);
    cr_assert_not_null(base, "%s", err.text);
    json_object_set_new(
        base, "speeds",
        json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", "eta1", "expr", "x'", "name", "eta2", "expr", "y'"));
    json_t *sq = json_deep_copy(base);
    json_object_set_new(sq, "constraints",
                        json_pack("[{s:s, s:s}]", "name", "appell", "expr", "z'^2 - a^2*(x'^2 + y'^2)"));
    json_t *models[2] = {base, sq};
    harness_resp r[2];
    /* the squared writing leaves z' = +-a v for these speeds (a 422 naming both roots):
     * its upper root is given as qdot */
    double a = json_number_value(json_object_get(json_object_get(base, "parameters"), "a"));
    harness_resp two =
        post("/v1/linearize",
             json_pack("{s:O, s:{s:f, s:f, s:f}, s:{s:f, s:f}, s:[s], s:b}", "model", sq, "q", "x", 0.3, "y",
                       -0.2, "z", 1.1, "speeds", "eta1", 1.3, "eta2", -0.7, "inputs", "g", "steady", 0));
    cr_assert_eq(two.status, 422, "two roots: %s", two.body);
    cr_assert_eq(json_array_size(json_object_get(two.json, "roots")), 2, "%s", two.body);
    harness_resp_free(&two);
    for (int i = 0; i < 2; i++) {
        if (i == 0)
            r[i] =
                post("/v1/linearize", json_pack("{s:O, s:{s:f, s:f, s:f}, s:{s:f, s:f}, s:[s], s:b}", "model",
                                                models[i], "q", "x", 0.3, "y", -0.2, "z", 1.1, "speeds",
                                                "eta1", 1.3, "eta2", -0.7, "inputs", "g", "steady", 0));
        else
            r[i] = post("/v1/linearize",
                        json_pack("{s:O, s:{s:f, s:f, s:f}, s:{s:f, s:f, s:f}, s:[s], s:b}", "model",
                                  models[i], "q", "x", 0.3, "y", -0.2, "z", 1.1, "qdot", "x", 1.3, "y", -0.7,
                                  "z", a * hypot(1.3, 0.7), "inputs", "g", "steady", 0));
        cr_assert_eq(r[i].status, 200, "%s", r[i].body);
    }
    const json_t *p0 = json_array_get(json_object_get(r[0].json, "points"), 0);
    const json_t *p1 = json_array_get(json_object_get(r[1].json, "points"), 0);
    const char *keys[] = {"A", "B"};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < (k ? 1 : 5); j++) {
                double a =
                    json_number_value(json_array_get(json_array_get(json_object_get(p0, keys[k]), i), j));
                double b =
                    json_number_value(json_array_get(json_array_get(json_object_get(p1, keys[k]), i), j));
                cr_assert(fabs(a - b) <= 1e-9 * (1 + fabs(a)), "%s[%d][%d]: %.17g vs %.17g", keys[k], i, j, a,
                          b);
            }
    harness_resp_free(&r[0]);
    harness_resp_free(&r[1]);
    harness_resp e = post("/v1/evaluate", json_pack("{s:O, s:[{s:{s:f, s:f, s:f}, s:{s:f, s:f, s:f}}]}",
                                                    "model", sq, "states", "q", "x", 0.0, "y", 0.0, "z", 1.0,
                                                    "qdot", "x", 3.0, "y", 4.0, "z", 1.5));
    cr_assert_eq(e.status, 200, "%s", e.body);
    double xdd = -0.3 * 9.81 * 3.0 / (5.0 * 1.09);
    double got = num_at(json_array_get(json_object_get(e.json, "states"), 0), "speeds_dot", "eta1");
    cr_assert(fabs(got - xdd) < 1e-12, "eta1' %.17g, closed form %.17g", got, xdd);
    harness_resp_free(&e);
    json_decref(base);
    json_decref(sq);
}

/* ---- the budget of a linearization (own servers) ---- */

static harness_server bsrv;

static void bteardown(void) { harness_stop(&bsrv); }

TestSuite(server_linearize_budget, .fini = bteardown, .timeout = 120);

static harness_resp breq(const char *method, const char *path, const char *body)
{
    harness_resp r;
    CURLcode rc = harness_request(&bsrv, method, path, body, NULL, &r);
    cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, path, curl_easy_strerror(rc));
    return r;
}

static double bmetric(const char *series)
{
    harness_resp r = breq("GET", "/metrics", NULL);
    double v = harness_metric(&r, series);
    harness_resp_free(&r);
    return v;
}

/* The benchmark bicycle posted to /v1/models; its id into id[size]. A body of `count`
 * points (key "points" or "states") about its straight run, by model id. */
static char *bicycle_sweep(const char *key, int count, char *id, size_t size)
{
    json_error_t err;
    json_t *doc = json_load_file("api/examples/whipple-bicycle.json", 0, &err);
    cr_assert_not_null(doc, "%s", err.text);
    char *text = json_dumps(json_object_get(doc, "model"), JSON_COMPACT);
    harness_resp m = breq("POST", "/v1/models", text);
    free(text);
    cr_assert(m.status == 201 || m.status == 200, "%s", m.body);
    snprintf(id, size, "%s", json_string_value(json_object_get(m.json, "model_id")));
    harness_resp_free(&m);
    json_t *pts = json_array();
    const json_t *p = json_object_get(doc, "linearize");
    for (int i = 0; i < count; i++) {
        json_t *q = json_deep_copy(p);
        json_object_set_new(json_object_get(q, "speeds"), "thetaRd", json_real(-16.6 + 1e-4 * i));
        json_array_append_new(pts, q);
    }
    json_t *body = json_pack("{s:s, s:o}", "model_id", id, key, pts);
    if (!strcmp(key, "points"))
        json_object_set_new(body, "eigenvectors", json_true());
    char *out = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    json_decref(doc);
    return out;
}

/* Starts bsrv with the smallest compile budget, from 0.3 s doubling, within which the
 * bicycle itself compiles on this machine (under ThreadSanitizer beside the other sanitizer
 * passes it can take more than 0.3 s), and registers it: the sweeps below are 7 or more
 * times its compile, so they pass any of these budgets in the same environment. */
static double start_with_a_budget_the_bicycle_fits(void)
{
    for (double budget = 0.3;; budget *= 2) {
        char setting[64];
        snprintf(setting, sizeof setting, "HAMEL_MAX_COMPILE_SECONDS=%g", budget);
        /* the sweeps' answers (5000 points with eigenvectors: 4 million numbers) would pass
         * max_output_values before the budget, which is what these tests are about */
        const char *const env[] = {setting, "HAMEL_MAX_OUTPUT_VALUES=100000000", NULL};
        cr_assert_eq(harness_start(&bsrv, env), 0, "the server did not start (log above)");
        json_error_t err;
        json_t *doc = json_load_file("api/examples/whipple-bicycle.json", 0, &err);
        cr_assert_not_null(doc, "%s", err.text);
        char *text = json_dumps(json_object_get(doc, "model"), JSON_COMPACT);
        json_decref(doc);
        harness_resp m = breq("POST", "/v1/models", text);
        free(text);
        int fits = m.status != 422 || budget >= 2.4;
        harness_resp_free(&m);
        if (fits)
            return budget;
        harness_stop(&bsrv);
    }
}

/* A budget of 0.3 s (the bicycle compiles in about 40 ms; more where the machine is slower): 5000 points of a
 * sweep (about 2 s of work) and 10000 states stop with 422 compile-limit at stage linearization / evaluation;
 * one point still answers. */
Test(server_linearize_budget, a_long_sweep_is_a_compile_limit)
{
    double budget = start_with_a_budget_the_bicycle_fits();
    char id[128];
    const char *route[] = {"/v1/linearize", "/v1/evaluate"}, *stage[] = {"linearization", "evaluation"};
    for (int e = 0; e < 2; e++) {
        char *body = bicycle_sweep(e ? "states" : "points", e ? 10000 : 5000, id, sizeof id);
        double t0 = harness_now();
        harness_resp r = breq("POST", route[e], body);
        double took = harness_now() - t0;
        free(body);
        cr_assert_eq(r.status, 422, "%s: %ld %.300s", route[e], r.status, r.body);
        cr_assert_str_eq(json_string_value(json_object_get(r.json, "type")), "/problems/compile-limit");
        cr_assert_str_eq(json_string_value(json_object_get(r.json, "stage")), stage[e]);
        cr_assert_str_eq(json_string_value(json_object_get(r.json, "limit")), "max_compile_seconds");
        cr_assert_lt(took, ENGINE_COMPILE_WALL_FACTOR * budget + 2.2,
                     "stopped by its budget of %g s of CPU time (or the wall-clock backstop): %.3f s", budget,
                     took);
        harness_resp_free(&r);
    }
    char *one = bicycle_sweep("points", 1, id, sizeof id);
    harness_resp r = breq("POST", "/v1/linearize", one);
    free(one);
    cr_assert_eq(r.status, 200, "%.300s", r.body);
    harness_resp_free(&r);
    cr_assert_eq(bmetric("hamel_compiles_stopped_total{reason=\"limit\"}"), 2);
    int status;
    cr_assert(harness_stop_checked(&bsrv, &status), "exit status %#x", status);
}

/* A client that gives up after 300 ms on a 5000-point sweep (a minute of budget): the
 * linearization is cancelled (client_gone), the offload thread is freed long before
 * the sweep's 2 s, and the server answers again. */
Test(server_linearize_budget, a_client_that_hangs_up_cancels_its_linearization)
{
    static const char *const env[] = {"HAMEL_MAX_COMPILE_SECONDS=60", "HAMEL_MAX_OUTPUT_VALUES=100000000",
                                      NULL};
    cr_assert_eq(harness_start(&bsrv, env), 0, "the server did not start (log above)");
    char id[128];
    char *body = bicycle_sweep("points", 5000, id, sizeof id);
    harness_resp r;
    struct curl_slist *list = NULL;
    CURL *h = harness_easy(&bsrv, "POST", "/v1/linearize", body, -1, NULL, &list, &r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 300L);
    CURLcode rc = curl_easy_perform(h);
    double t_gone = harness_now();
    harness_finish(h, &r);
    curl_easy_cleanup(h);
    curl_slist_free_all(list);
    harness_resp_free(&r);
    free(body);
    cr_assert_eq(rc, CURLE_OPERATION_TIMEDOUT, "the client gave up: %s", curl_easy_strerror(rc));
    double gone = bmetric("hamel_compiles_stopped_total{reason=\"client_gone\"}");
    while (gone < 1 && harness_now() - t_gone < 20) {
        harness_nap(20);
        gone = bmetric("hamel_compiles_stopped_total{reason=\"client_gone\"}");
    }
    cr_assert_eq(gone, 1, "the linearization was cancelled when its client hung up");
    double freed = harness_now() - t_gone;
    while (bmetric("hamel_offload_running") > 0 && harness_now() - t_gone < 20)
        harness_nap(20);
    cr_assert_eq(bmetric("hamel_offload_running"), 0, "the offload thread is free again");
    cr_assert_lt(freed, 1.5, "cancelled %.3f s after the hang-up", freed);
    cr_assert_eq(bmetric("hamel_compiles_stopped_total{reason=\"limit\"}"), 0);
    char *one = bicycle_sweep("points", 1, id, sizeof id);
    r = breq("POST", "/v1/linearize", one);
    free(one);
    cr_assert_eq(r.status, 200, "%.300s", r.body);
    harness_resp_free(&r);
    int status;
    cr_assert(harness_stop_checked(&bsrv, &status), "exit status %#x", status);
}
