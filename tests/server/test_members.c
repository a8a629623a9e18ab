/* test_members.c — what a request says is what runs: members the service does not know
 * are refused naming them, not ignored, against the real hamel-server (review from
 * outside, round 3).
 *
 * A misspelled member nested in a simulation request (`integrator.metod`, `output.sample`,
 * `initial.speed`, `invariants[0].exp`) used to run the defaults silently; two invariants
 * of one name kept only one of them under checks.invariants. Both are now a 422
 * invalid-request naming the member. POST /v1/models answers the `warnings` about unknown
 * members of the model it was sent, not of the first request that posted that model id.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static harness_server srv;

static void setup(void)
{
    cr_assert_eq(harness_start(&srv, NULL), 0, "the server did not start (log above)");
}

static void teardown(void) { harness_stop(&srv); }

TestSuite(members, .init = setup, .fini = teardown, .timeout = 120);

/* The rolling disk's simulation request (its model inline), t_end varied so that no
 * earlier answer is cached. */
static json_t *rolling_request(double t_end)
{
    char path[PATH_MAX];
    json_error_t err;
    json_t *req = harness_case_request("greenwood-5.3-rolling-disk.json", path, sizeof path, &err);
    cr_assert(req, "cannot load %s: %s", path, err.text);
    json_object_set_new(req, "t_end", json_real(t_end));
    json_object_set_new(req, "output", json_pack("{s:i}", "samples", 3));
    return req;
}

static harness_resp post(const char *path, const json_t *body) { return harness_post(&srv, path, body); }

/* Whether the problem document in r lists an error at `path`. */
static int names_path(const harness_resp *r, const char *path)
{
    json_t *errors = json_object_get(r->json, "errors");
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e)
    {
        const char *p = json_string_value(json_object_get(e, "path"));
        if (p && !strcmp(p, path))
            return 1;
    }
    return 0;
}

/* POSTs req to /v1/simulations?wait=20 and asserts a 422 invalid-request naming path. */
static void assert_refused_at(json_t *req, const char *path)
{
    harness_resp r = post("/v1/simulations?wait=20", req);
    cr_assert_eq(r.status, 422, "%s: expected 422, got %ld: %.300s", path, r.status, r.body);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "type")), "/problems/invalid-request");
    cr_assert(names_path(&r, path), "the 422 does not name %s: %.400s", path, r.body);
    harness_resp_free(&r);
    json_decref(req);
}

Test(members, a_misspelled_nested_simulation_member_is_refused_naming_it)
{
    json_t *req = rolling_request(1.101);
    json_object_set_new(req, "integrator", json_pack("{s:s}", "metod", "rk4"));
    assert_refused_at(req, "integrator.metod");

    req = rolling_request(1.102);
    json_object_set_new(req, "output", json_pack("{s:i}", "sample", 5));
    assert_refused_at(req, "output.sample");

    req = rolling_request(1.103);
    json_object_set_new(json_object_get(req, "initial"), "tt", json_real(0.5));
    assert_refused_at(req, "initial.tt");

    req = rolling_request(1.104);
    json_object_set_new(req, "invariants", json_pack("[{s:s, s:s}]", "name", "a", "exp", "x"));
    assert_refused_at(req, "invariants[0].exp");

    /* the members it knows still run */
    req = rolling_request(1.105);
    json_object_set_new(req, "integrator",
                        json_pack("{s:s, s:f, s:f, s:i}", "method", "rk8pd", "rtol", 1e-10, "atol", 1e-12,
                                  "max_steps", 100000));
    harness_resp r = post("/v1/simulations?wait=20", req);
    cr_assert_eq(r.status, 200, "a request with known members only: %ld %.300s", r.status, r.body);
    harness_resp_free(&r);
    json_decref(req);
}

Test(members, two_invariants_of_one_name_are_refused)
{
    json_t *req = rolling_request(1.201);
    json_object_set_new(
        req, "invariants",
        json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", "a", "expr", "x", "name", "a", "expr", "y"));
    assert_refused_at(req, "invariants[1].name");

    /* a default name (I<position>) taken by a named one */
    req = rolling_request(1.202);
    json_object_set_new(req, "invariants",
                        json_pack("[{s:s}, {s:s, s:s}]", "expr", "x", "name", "I1", "expr", "y"));
    assert_refused_at(req, "invariants[1].name");

    req = rolling_request(1.203);
    json_object_set_new(req, "invariants", json_pack("[{s:i, s:s}]", "name", 5, "expr", "x"));
    assert_refused_at(req, "invariants[0].name");

    /* two names: both reported */
    req = rolling_request(1.204);
    json_object_set_new(
        req, "invariants",
        json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", "a", "expr", "x", "name", "b", "expr", "y"));
    harness_resp r = post("/v1/simulations?wait=20", req);
    cr_assert_eq(r.status, 200, "%ld %.300s", r.status, r.body);
    json_t *inv = json_object_get(json_object_get(r.json, "checks"), "invariants");
    cr_assert(json_object_get(inv, "a") && json_object_get(inv, "b"), "checks.invariants: %.300s",
              json_dumps(inv, JSON_COMPACT));
    harness_resp_free(&r);
    json_decref(req);
}

/* The warnings of a POST /v1/models answer (array or NULL) for the model text. */
static json_t *model_warnings(const char *model, long *status)
{
    harness_resp r;
    CURLcode rc = harness_request(&srv, "POST", "/v1/models", model, NULL, &r);
    cr_assert_eq(rc, CURLE_OK, "POST /v1/models: %s", curl_easy_strerror(rc));
    *status = r.status;
    json_t *w = json_incref(json_object_get(r.json, "warnings"));
    harness_resp_free(&r);
    return w;
}

Test(members, model_warnings_are_about_the_request_answered)
{
    const char *clean = "{\"name\":\"w\",\"coordinates\":[\"x\"],\"kinetic_energy\":\"1/2*x'^2\"}";
    const char *typo = "{\"name\":\"w\",\"coordinates\":[\"x\"],\"kinetic_energy\":\"1/"
                       "2*x'^2\",\"potential_enrgy\":\"x^2\"}";
    long status;
    /* the model id is posted first without the typo, then with it: the typo is warned */
    json_t *w = model_warnings(clean, &status);
    cr_assert_eq(status, 201);
    cr_assert_null(w, "a model without unknown members has no warnings");
    w = model_warnings(typo, &status);
    cr_assert_eq(status, 200, "the unknown member does not change the model id");
    cr_assert(json_is_array(w) && json_array_size(w) == 1, "the typo is not warned about");
    cr_assert(strstr(json_string_value(json_array_get(w, 0)), "model.potential_enrgy"), "%s",
              json_string_value(json_array_get(w, 0)));
    json_decref(w);
    /* and the clean request again has none (not the typo of the request before) */
    w = model_warnings(clean, &status);
    cr_assert_eq(status, 200);
    cr_assert_null(w, "a clean request got the warnings of an earlier one");

    /* the other order: the typo first; then a clean request and a GET carry none */
    const char *typo2 = "{\"name\":\"w2\",\"coordinates\":[\"x\"],\"kinetic_energy\":\"1/2*x'^2\",\"foo\":1}";
    const char *clean2 = "{\"name\":\"w2\",\"coordinates\":[\"x\"],\"kinetic_energy\":\"1/2*x'^2\"}";
    w = model_warnings(typo2, &status);
    cr_assert_eq(status, 201);
    cr_assert(json_array_size(w) == 1, "the first request's unknown member is warned about");
    json_decref(w);
    w = model_warnings(clean2, &status);
    cr_assert_eq(status, 200);
    cr_assert_null(w, "a clean request got the warnings of the first one");
    harness_resp r;
    CURLcode rc = harness_request(&srv, "POST", "/v1/models", clean2, NULL, &r);
    cr_assert_eq(rc, CURLE_OK);
    char path[200];
    snprintf(path, sizeof path, "/v1/models/%s", json_string_value(json_object_get(r.json, "model_id")));
    harness_resp_free(&r);
    rc = harness_request(&srv, "GET", path, NULL, NULL, &r);
    cr_assert_eq(rc, CURLE_OK);
    cr_assert_eq(r.status, 200);
    cr_assert_null(json_object_get(r.json, "warnings"), "GET %s: warnings of a request: %.300s", path,
                   r.body);
    harness_resp_free(&r);
}

/* POSTs body (a JSON text) to path and asserts a 422 invalid-request naming epath. */
static void assert_text_refused_at(const char *path, json_t *body, const char *epath)
{
    harness_resp r = post(path, body);
    cr_assert_eq(r.status, 422, "%s %s: expected 422, got %ld: %.300s", path, epath, r.status, r.body);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "type")), "/problems/invalid-request");
    cr_assert(names_path(&r, epath), "%s: the 422 does not name %s: %.400s", path, epath, r.body);
    harness_resp_free(&r);
    json_decref(body);
}

Test(members, hamel_coefficients_refuse_unknown_members_and_two_configurations)
{
    json_t *req = rolling_request(1.0);
    json_t *q = json_object_get(json_object_get(req, "initial"), "q");
    json_t *model = json_object_get(req, "model");
    /* "paramters" answered the coefficients for the default parameters */
    assert_text_refused_at("/v1/hamel",
                           json_pack("{s:O, s:O, s:{s:f}}", "model", model, "q", q, "paramters", "r", 2.0),
                           "paramters");
    assert_text_refused_at("/v1/hamel",
                           json_pack("{s:O, s:[{s:O, s:f}]}", "model", model, "points", "q", q, "tt", 1.0),
                           "points[0].tt");
    /* a configuration and points: one of them was ignored */
    assert_text_refused_at("/v1/hamel",
                           json_pack("{s:O, s:O, s:[{s:O}]}", "model", model, "q", q, "points", "q", q), "q");
    json_t *ok =
        json_pack("{s:O, s:O, s:f, s:{s:f}}", "model", model, "q", q, "t", 0.5, "parameters", "r", 0.4);
    harness_resp r = post("/v1/hamel", ok);
    json_decref(ok);
    cr_assert_eq(r.status, 200, "known members only: %ld %.300s", r.status, r.body);
    harness_resp_free(&r);
    json_decref(req);
}

/* The value of the /metrics series `series`. */
static double metric(const char *series)
{
    harness_resp r;
    cr_assert_eq(harness_request(&srv, "GET", "/metrics", NULL, NULL, &r), CURLE_OK);
    double v = harness_metric(&r, series);
    harness_resp_free(&r);
    return v;
}

Test(members, a_model_id_beside_a_model_must_be_its_id_and_nothing_runs_otherwise)
{
    const char *other = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    /* a model the server has not seen (compiled for this request), then a known one */
    for (int pass = 0; pass < 2; pass++) {
        json_t *req = rolling_request(1.301);
        json_object_set_new(req, "model_id", json_string(other));
        harness_resp r = post("/v1/simulations?wait=20", req);
        cr_assert_eq(r.status, 422, "pass %d: a model_id not the model's: %ld %.300s", pass, r.status,
                     r.body);
        cr_assert(names_path(&r, "model_id"), "%.300s", r.body);
        harness_resp_free(&r);
        json_object_set_new(req, "model_id", json_integer(7));
        assert_text_refused_at("/v1/simulations?wait=20", json_incref(req), "model_id");
        json_decref(req);
    }
    cr_assert_eq(metric("hamel_jobs_total{outcome=\"done\"}"), 0, "a refused request ran a job");
    /* nothing was cached either: the same request without model_id runs */
    json_t *req = rolling_request(1.301);
    harness_resp r = post("/v1/simulations?wait=20", req);
    cr_assert_eq(r.status, 200, "%ld %.300s", r.status, r.body);
    cr_assert(json_is_false(json_object_get(r.json, "cached")), "the refused request's result was cached");
    /* and the model's own id beside it is accepted */
    json_object_set(req, "model_id", json_object_get(r.json, "model_id"));
    harness_resp_free(&r);
    r = post("/v1/simulations?wait=20", req);
    cr_assert_eq(r.status, 200, "the model's own id beside it: %ld %.300s", r.status, r.body);
    harness_resp_free(&r);
    json_decref(req);
}

/* "a" then `n` Greek thetas (2 bytes each in UTF-8), into buf[cap]. */
static const char *thetas(char *buf, size_t cap, const char *pad, int n)
{
    snprintf(buf, cap, "%s", pad);
    for (int i = 0; i < n && strlen(buf) + 3 < cap; i++)
        strcat(buf, "\xce\xb8");
    return buf;
}

Test(members, names_cut_inside_a_character_keep_their_errors)
{
    char name[1024];
    /* a parameter name that is not an identifier, cut at a byte count inside a theta in
     * its message: the error was lost and the model accepted (201) */
    json_t *model = json_pack("{s:s, s:[s], s:{s:i}, s:s}", "name", "u", "coordinates", "x", "parameters",
                              thetas(name, sizeof name, "a", 100), 1, "kinetic_energy", "1/2*x'^2");
    harness_resp r = post("/v1/models", model);
    json_decref(model);
    cr_assert_eq(r.status, 422, "a parameter named a + 100 thetas: %ld %.300s", r.status, r.body);
    cr_assert(json_array_size(json_object_get(r.json, "errors")) > 0, "no error listed: %.300s", r.body);
    harness_resp_free(&r);
    /* an unknown member so named: a 422 with no error in it */
    json_t *req = rolling_request(1.401);
    json_object_set_new(req, "integrator", json_pack("{s:i}", thetas(name, sizeof name, "a", 200), 1));
    r = post("/v1/simulations", req);
    json_decref(req);
    cr_assert_eq(r.status, 422);
    json_t *e = json_array_get(json_object_get(r.json, "errors"), 0);
    const char *path = json_string_value(json_object_get(e, "path"));
    cr_assert(path && !strncmp(path, "integrator.a", 12), "the 422 names no member: %.300s", r.body);
    harness_resp_free(&r);
    /* two model names, cut at 128 bytes inside a theta: no name, and one id for both */
    const char *ids[2];
    json_t *keep[2];
    for (int k = 0; k < 2; k++) {
        model = json_pack("{s:s, s:[s], s:s}", "name", thetas(name, sizeof name, k ? "aaa" : "a", 200),
                          "coordinates", "x", "kinetic_energy", "1/2*x'^2");
        r = post("/v1/models", model);
        json_decref(model);
        cr_assert(r.status == 201 || r.status == 200, "%ld %.300s", r.status, r.body);
        const char *got = json_string_value(json_object_get(r.json, "name"));
        cr_assert(got && !strncmp(got, k ? "aaa\xce\xb8" : "a\xce\xb8", k ? 5 : 3),
                  "the summary lost the name: %.200s", r.body);
        keep[k] = json_incref(json_object_get(r.json, "model_id"));
        ids[k] = json_string_value(keep[k]);
        harness_resp_free(&r);
    }
    cr_assert_str_neq(ids[0], ids[1], "two models of different names got one id");
    /* and an unknown member so named is warned about */
    model = json_pack("{s:s, s:[s], s:s, s:i}", "name", "w3", "coordinates", "x", "kinetic_energy",
                      "1/2*x'^2", thetas(name, sizeof name, "a", 200), 1);
    r = post("/v1/models", model);
    json_decref(model);
    cr_assert_eq(json_array_size(json_object_get(r.json, "warnings")), 1, "no warning: %.300s", r.body);
    harness_resp_free(&r);
    /* many: the first 64, then one line for the rest */
    model = json_pack("{s:s, s:[s], s:s}", "name", "w4", "coordinates", "x", "kinetic_energy", "1/2*x'^2");
    for (int i = 0; i < 1000; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        json_object_set_new(model, key, json_integer(i));
    }
    r = post("/v1/models", model);
    json_decref(model);
    json_t *w = json_object_get(r.json, "warnings");
    cr_assert_eq(json_array_size(w), 65, "1000 unknown members: %zu warnings", json_array_size(w));
    cr_assert_str_eq(json_string_value(json_array_get(w, 64)), "and 936 more unknown fields ignored");
    harness_resp_free(&r);
    json_decref(keep[0]);
    json_decref(keep[1]);
}
