/* test_server.c — the HTTP contract of API.md §2–5 against the real hamel-server.
 *
 * Each test starts its own build/hamel-server (harness.h: ephemeral loopback
 * port read from its "listening on" line, a fresh HAMEL_DATA) and speaks raw HTTP to it
 * with libcurl, so status codes, headers and bodies are checked exactly as a browser or
 * curl user sees them. Numbers are compared with the shared knife-edge case
 * (greenwood-5.1): pass if |got - expected| <= abs + rel*|expected|.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <dirent.h>
#include <sqlite3.h>

#include "harness.h"

#define KNIFE_CASE "greenwood-5.1-knife-edge-body.json"
#define TEST_WAIT "120"      /* ?wait= for requests that must finish */
#define CANCEL_BUDGET_S 0.35 /* DELETE to an idle worker: 100 ms + HTTP round trips */
#define CONCURRENT 64
#define CRASH_JOBS 24 /* simulations in flight when the server is killed */
#define CRASH_AFTER 6 /* finished answers seen before the kill -9 */

static harness_server srv;
static json_t *knife; /* the case file */

static json_t *load_case(const char *name)
{
    char path[PATH_MAX];
    json_error_t jerr;
    json_t *doc = harness_case_load(name, path, sizeof path, &jerr);
    if (!doc)
        cr_assert_fail("cannot load the shared case %s (%s): is ../shared/cases there?", path, jerr.text);
    return doc;
}

static void start_env(const char *const *env)
{
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
    if (!knife)
        knife = load_case(KNIFE_CASE);
}

static void setup(void)
{
    static const char *const env[] = {"HAMEL_MAX_WALL=30", NULL};
    start_env(env);
}

/* SIGTERM, then the exit status: a server that does not drain to a clean exit 0 (a
 * crash, a hang, or a LeakSanitizer report in the build-san/ servers) fails the test,
 * with the tail of its log. Then the harness removes the directory. */
static void stop_checked(harness_server *s)
{
    int status;
    int clean = harness_stop_checked(s, &status);
    harness_stop(s);
    cr_assert(clean, "the server did not exit 0 on SIGTERM (wait status %#x; log above)", status);
}

/* A test whose body ends by stopping the server with stop_checked: Criterion does not
 * fail a test for what happens in .fini, so the exit status is checked in the body. A
 * body that fails earlier leaves the server to teardown's plain harness_stop. */
#define SERVER_TEST(suite, name)                                                                             \
    static void suite##_##name##_body(void);                                                                 \
    Test(suite, name)                                                                                        \
    {                                                                                                        \
        suite##_##name##_body();                                                                             \
        stop_checked(&srv);                                                                                  \
    }                                                                                                        \
    static void suite##_##name##_body(void)

static void teardown(void)
{
    harness_stop(&srv);
    json_decref(knife);
    knife = NULL;
}

static harness_resp request(const char *method, const char *path, const char *body, const char *const *hdrs)
{
    harness_resp r;
    CURLcode rc = harness_request(&srv, method, path, body, hdrs, &r);
    cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, path, curl_easy_strerror(rc));
    return r;
}

static char *dump(const json_t *j) { return json_dumps(j, JSON_COMPACT); }

static json_t *knife_request(void)
{
    json_t *req = json_deep_copy(json_object_get(knife, "simulation"));
    json_object_set(req, "model", json_object_get(knife, "model"));
    return req;
}

static harness_resp post_json(const char *path, const json_t *body)
{
    char *text = dump(body);
    harness_resp r = request("POST", path, text, NULL);
    free(text);
    return r;
}

static const char *str(const json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

/* str(), or "" when the member is absent or not a string (for strstr). */
static const char *text(const json_t *j, const char *key)
{
    const char *s = str(j, key);
    return s ? s : "";
}

static void assert_problem(const harness_resp *r, long status, const char *slug)
{
    char ct[128];
    cr_assert_eq(r->status, status, "status %ld, expected %ld; body %s", r->status, status,
                 r->body ? r->body : "");
    cr_assert(harness_header(r, "Content-Type", ct, sizeof ct) && strstr(ct, "application/problem+json"),
              "a %ld is application/problem+json (got %s)", status, ct);
    cr_assert(json_is_object(r->json), "the problem is a JSON object: %s", r->body);
    cr_assert_eq(json_integer_value(json_object_get(r->json, "status")), status,
                 "problem.status matches the HTTP status");
    const char *type = str(r->json, "type");
    cr_assert(type && strstr(type, "/problems/") == type, "type %s", type);
    cr_assert(str(r->json, "title"), "the problem has a title");
    if (slug)
        cr_assert(strstr(type, slug), "type %s names %s", type, slug);
}

/* |got - expected| <= abs + rel*|expected| with the tolerance of case file `c`. */
static void assert_close_in(const json_t *c, const char *what, double got, double expected)
{
    json_t *tol = json_object_get(json_object_get(c, "expected"), "tolerance");
    double t = json_number_value(json_object_get(tol, "abs")) +
               json_number_value(json_object_get(tol, "rel")) * fabs(expected);
    cr_assert(isfinite(got) && fabs(got - expected) <= t,
              "%s: got %.17g, expected %.17g (|diff| %.3g > tol %.3g)", what, got, expected,
              fabs(got - expected), t);
}

static void assert_close(const char *what, double got, double expected)
{
    assert_close_in(knife, what, got, expected);
}

/* Every expected t, q, speed and qdot sample of case file `c` in a result. */
static void assert_samples(const json_t *c, const json_t *result)
{
    const char *name_of_case = json_string_value(json_object_get(json_object_get(c, "model"), "name"));
    json_t *tr = json_object_get(result, "trajectory");
    json_t *samples = json_object_get(json_object_get(c, "expected"), "samples");
    json_t *t = json_object_get(tr, "t");
    cr_assert(json_array_size(samples) > 0, "%s: the case has expected samples", name_of_case);
    cr_assert_eq(json_array_size(t), json_array_size(samples), "%s: sample count %zu, expected %zu",
                 name_of_case, json_array_size(t), json_array_size(samples));
    static const char *const groups[] = {"q", "speeds", "qdot"};
    size_t k;
    json_t *s;
    json_array_foreach(samples, k, s)
    {
        char what[160];
        snprintf(what, sizeof what, "%s: t at sample %zu", name_of_case, k);
        assert_close_in(c, what, json_number_value(json_array_get(t, k)),
                        json_number_value(json_object_get(s, "t")));
        for (int g = 0; g < 3; g++) {
            const char *name;
            json_t *v;
            json_object_foreach(json_object_get(s, groups[g]), name, v)
            {
                snprintf(what, sizeof what, "%s: %s.%s at sample %zu", name_of_case, groups[g], name, k);
                json_t *series = json_object_get(json_object_get(tr, groups[g]), name);
                cr_assert(json_is_array(series), "%s: missing", what);
                assert_close_in(c, what, json_number_value(json_array_get(series, k)), json_number_value(v));
            }
        }
    }
}

static void assert_knife(const json_t *result) { assert_samples(knife, result); }

/* A metric's value from /metrics (the first line starting with `series`), or -1. */
static double metric(const char *series)
{
    harness_resp r = request("GET", "/metrics", NULL, NULL);
    cr_assert_eq(r.status, 200);
    double v = harness_metric(&r, series);
    harness_resp_free(&r);
    return v;
}

/* A job that runs until cancelled (or the 30 s wall limit): the rolling disk keeps
 * oscillating, so its integrator keeps taking small steps (about 1e-3 of t_end = 1e6 a
 * second here). The knife edge is no good for this: its turning rate decays and the
 * integrator then crosses millions of seconds in a few large steps. */
static json_t *long_request(double t_end)
{
    json_t *rolling = load_case("greenwood-5.3-rolling-disk.json");
    json_t *req = json_deep_copy(json_object_get(rolling, "simulation"));
    json_object_set(req, "model", json_object_get(rolling, "model"));
    json_decref(rolling);
    json_object_set_new(req, "t_end", json_real(t_end));
    json_object_set_new(req, "output", json_pack("{s:i}", "samples", 2));
    json_object_set_new(json_object_get(req, "integrator"), "max_steps", json_integer(1000000000));
    return req;
}

static void wait_running(const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    for (int i = 0; i < 500; i++) {
        harness_resp r = request("GET", path, NULL, NULL);
        int running = r.json && !strcmp(str(r.json, "status"), "running");
        harness_resp_free(&r);
        if (running)
            return;
        harness_nap(10);
    }
    cr_assert_fail("job %s never started running", id);
}

TestSuite(server, .init = setup, .fini = teardown, .timeout = 240);

SERVER_TEST(server, health_livez_readyz_metrics)
{
    harness_resp r = request("GET", "/v1/health", NULL, NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(str(r.json, "status"), "ok");
    cr_assert(str(r.json, "version") && str(r.json, "version")[0], "health names a version");
    harness_resp_free(&r);
    r = request("GET", "/livez", NULL, NULL);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
    r = request("GET", "/readyz", NULL, NULL);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
    r = request("HEAD", "/v1/health", NULL, NULL);
    cr_assert_eq(r.status, 200, "HEAD is GET without a body");
    harness_resp_free(&r);
    r = request("GET", "/metrics", NULL, NULL);
    cr_assert_eq(r.status, 200);
    char ct[128];
    cr_assert(harness_header(&r, "Content-Type", ct, sizeof ct) && strstr(ct, "text/plain"), "%s", ct);
    static const char *const names[] = {
        "hamel_http_requests_total{route=\"/v1/health\",code=\"200\"}",
        "hamel_http_request_duration_seconds_bucket",
        "hamel_queue_depth",
        "hamel_jobs_total{outcome=\"done\"}",
        "hamel_derive_seconds_sum",
        "hamel_integrate_seconds_sum",
        "hamel_cache_hits_total{cache=\"results\"}",
        "hamel_cache_misses_total{cache=\"models\"}",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_assert(strstr(r.body, names[i]), "/metrics has %s", names[i]);
    harness_resp_free(&r);
}

SERVER_TEST(server, models_submit_get_equations)
{
    json_t *model = json_object_get(knife, "model");
    harness_resp r = post_json("/v1/models", model);
    cr_assert_eq(r.status, 201, "a new model is 201: %s", r.body);
    const char *id = str(r.json, "model_id");
    cr_assert(id && !strncmp(id, "sha256:", 7) && strlen(id) == 71, "model_id %s", id);
    char loc[256], etag[256], want[256];
    snprintf(want, sizeof want, "/v1/models/%s", id);
    cr_assert(harness_header(&r, "Location", loc, sizeof loc) && !strcmp(loc, want), "Location %s", loc);
    cr_assert(harness_header(&r, "ETag", etag, sizeof etag), "a summary has an ETag");
    cr_assert_eq(json_integer_value(json_object_get(r.json, "n")), 3);
    cr_assert_eq(json_integer_value(json_object_get(r.json, "m")), 1);
    cr_assert_eq(json_integer_value(json_object_get(r.json, "dof")), 2);
    cr_assert(json_is_array(json_object_get(r.json, "constraints")));
    cr_assert(json_is_boolean(json_object_get(r.json, "scleronomic")));
    cr_assert(json_is_boolean(json_object_get(r.json, "energy_conserved")));
    char model_id[128];
    snprintf(model_id, sizeof model_id, "%s", id);

    /* The same model, formatted differently: known, same id. */
    char *pretty = json_dumps(model, JSON_INDENT(3) | JSON_SORT_KEYS);
    harness_resp again = request("POST", "/v1/models", pretty, NULL);
    free(pretty);
    cr_assert_eq(again.status, 200, "a known model is 200: %s", again.body);
    cr_assert_str_eq(str(again.json, "model_id"), model_id);
    harness_resp_free(&again);

    /* GET by id, raw and percent-encoded; ETag revalidation. */
    char path[256];
    snprintf(path, sizeof path, "/v1/models/%s", model_id);
    harness_resp g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200);
    cr_assert(json_equal(g.json, r.json), "GET returns the summary POST returned");
    harness_resp_free(&g);
    snprintf(path, sizeof path, "/v1/models/sha256%%3A%s", model_id + 7);
    g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200, "percent-encoded ':' is accepted: %s", g.body);
    cr_assert_str_eq(str(g.json, "model_id"), model_id);
    harness_resp_free(&g);
    char inm[300];
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *const cond[] = {inm, NULL};
    snprintf(path, sizeof path, "/v1/models/%s", model_id);
    g = request("GET", path, NULL, cond);
    cr_assert_eq(g.status, 304, "If-None-Match with the ETag is 304");
    harness_resp_free(&g);

    snprintf(path, sizeof path, "/v1/models/%s/equations", model_id);
    g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200, "%s", g.body);
    cr_assert_str_eq(str(g.json, "model_id"), model_id);
    cr_assert(str(g.json, "formulation"), "equations name their formulation");
    cr_assert(json_is_array(json_object_get(g.json, "mass_matrix")), "a mass matrix");
    harness_resp_free(&g);

    /* The classical forms (issue 10): ?form=kane, and a form that does not exist. */
    snprintf(path, sizeof path, "/v1/models/%s/equations?form=kane", model_id);
    g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200, "%s", g.body);
    cr_assert_str_eq(str(g.json, "form"), "kane");
    cr_assert(json_is_object(json_object_get(g.json, "partial_velocities")), "Kane's partial velocities");
    cr_assert_eq(json_array_size(json_object_get(g.json, "equations")), 2, "one equation per speed");
    harness_resp_free(&g);
    snprintf(path, sizeof path, "/v1/models/%s/equations?form=lagrange", model_id);
    g = request("GET", path, NULL, NULL);
    assert_problem(&g, 422, NULL);
    cr_assert(strstr(g.body, "\"form\""), "the problem names the form: %s", g.body);
    harness_resp_free(&g);

    g = request("GET", "/v1/models/sha256:0000000000000000000000000000000000000000000000000000000000000000",
                NULL, NULL);
    assert_problem(&g, 404, "not-found");
    harness_resp_free(&g);
    g = request("GET", "/v1/models/sha256:00/equations", NULL, NULL);
    assert_problem(&g, 404, "not-found");
    harness_resp_free(&g);

    /* An invalid model: 422 naming the JSON path. */
    json_t *bad = json_deep_copy(model);
    json_object_set_new(bad, "kinetic_energy", json_string("1/2*m*x'^2 + bogus"));
    harness_resp b = post_json("/v1/models", bad);
    assert_problem(&b, 422, NULL);
    cr_assert(json_array_size(json_object_get(b.json, "errors")) >= 1, "errors[] is filled");
    harness_resp_free(&b);
    json_decref(bad);
    harness_resp_free(&r);
}

/* Posts model (201: new) and reads GET /v1/models/{id}?source=1 of it (200); its id goes
 * to model_id[128]. */
static harness_resp model_source(const json_t *model, char model_id[128])
{
    harness_resp r = post_json("/v1/models", model);
    cr_assert_eq(r.status, 201, "%s", r.body);
    snprintf(model_id, 128, "%s", str(r.json, "model_id"));
    harness_resp_free(&r);
    char path[256];
    snprintf(path, sizeof path, "/v1/models/%s?source=1", model_id);
    harness_resp g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200, "%s", g.body);
    return g;
}

/* GET /v1/models/{id}?source=1 (issue 17): the summary with the model itself under
 * "source", which posts back to the same id; without ?source there is none. */
SERVER_TEST(server, model_source_reads_back_to_the_same_id)
{
    json_t *model = json_object_get(knife, "model");
    char path[256], model_id[128];
    harness_resp g = model_source(model, model_id);
    snprintf(path, sizeof path, "/v1/models/%s", model_id);
    harness_resp plain = request("GET", path, NULL, NULL);
    cr_assert_eq(plain.status, 200, "%s", plain.body);
    cr_assert_null(json_object_get(plain.json, "source"), "no source unless asked for");
    harness_resp_free(&plain);
    cr_assert_str_eq(str(g.json, "model_id"), model_id);
    json_t *source = json_object_get(g.json, "source");
    cr_assert(json_is_object(source), "?source=1 carries the model: %s", g.body);
    cr_assert(json_equal(json_object_get(source, "coordinates"), json_object_get(model, "coordinates")));
    cr_assert_str_eq(json_string_value(json_object_get(source, "name")),
                     json_string_value(json_object_get(model, "name")));
    harness_resp again = post_json("/v1/models", source);
    cr_assert_eq(again.status, 200, "the source is the known model: %s", again.body);
    cr_assert_str_eq(str(again.json, "model_id"), model_id);
    harness_resp_free(&again);
    harness_resp_free(&g);
    stop_checked(&srv);
}

/* ?source=1 gives the model as it was first posted (issue 17's share links): its
 * definitions, its own expressions and description; the canonical form folds the
 * definitions into the expressions, so a model reopened from a link lost them (and an
 * event or invariant naming one could not be run again elsewhere). */
SERVER_TEST(server, model_source_is_the_model_as_posted_with_its_definitions)
{
    const char *spec =
        "{\"name\": \"defs-sleigh\", \"description\": \"a sleigh written with definitions\","
        " \"coordinates\": [\"X\", \"Y\", \"th\"], \"parameters\": {\"M\": 3, \"J\": 0.7, \"b\": 0.25},"
        " \"definitions\": [{\"name\": \"vcx\", \"expr\": \"X' - b*th'*sin(th)\"},"
        " {\"name\": \"vcy\", \"expr\": \"Y' + b*th'*cos(th)\"}],"
        " \"kinetic_energy\": \"1/2*M*(vcx^2 + vcy^2) + 1/2*J*th'^2\","
        " \"constraints\": [{\"name\": \"blade\", \"expr\": \"-X'*sin(th) + Y'*cos(th)\"}]}";
    json_t *model = json_loads(spec, 0, NULL);
    cr_assert_not_null(model);
    char model_id[128];
    harness_resp g = model_source(model, model_id);
    json_t *source = json_object_get(g.json, "source");
    cr_assert(json_is_object(source), "%s", g.body);
    cr_assert(json_equal(json_object_get(source, "definitions"), json_object_get(model, "definitions")),
              "the definitions as posted: %s", g.body);
    cr_assert_str_eq(json_string_value(json_object_get(source, "kinetic_energy")),
                     json_string_value(json_object_get(model, "kinetic_energy")));
    cr_assert_str_eq(json_string_value(json_object_get(source, "description")),
                     json_string_value(json_object_get(model, "description")));
    harness_resp again = post_json("/v1/models", source);
    cr_assert_eq(again.status, 200, "the source is the known model: %s", again.body);
    cr_assert_str_eq(str(again.json, "model_id"), model_id);
    harness_resp_free(&again);
    harness_resp_free(&g);
    json_decref(model);
    stop_checked(&srv);
}

SERVER_TEST(server, simulate_wait_then_cached_identical)
{
    json_t *req = knife_request();
    harness_resp r = post_json("/v1/simulations?wait=" TEST_WAIT, req);
    cr_assert_eq(r.status, 200, "done within wait: %s", r.body);
    cr_assert_str_eq(str(r.json, "status"), "done");
    cr_assert(json_is_false(json_object_get(r.json, "cached")), "first run is not cached");
    const char *id = str(r.json, "job_id");
    cr_assert(id && id[0]);
    cr_assert(str(r.json, "model_id") && !strncmp(str(r.json, "model_id"), "sha256:", 7));
    cr_assert(json_is_object(json_object_get(r.json, "checks")), "checks present");
    cr_assert(json_is_object(json_object_get(r.json, "stats")), "stats present");
    assert_knife(r.json);

    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    harness_resp g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200);
    cr_assert(json_equal(g.json, r.json), "GET /v1/jobs/{id} returns the result");
    harness_resp_free(&g);

    double hits = metric("hamel_cache_hits_total{cache=\"results\"}");
    /* Same request, keys in another order: answered from the cache, identical. */
    char *text = json_dumps(req, JSON_SORT_KEYS | JSON_INDENT(1));
    harness_resp c = request("POST", "/v1/simulations", text, NULL);
    free(text);
    cr_assert_eq(c.status, 200, "a cached answer is 200 even without wait: %s", c.body);
    cr_assert(json_is_true(json_object_get(c.json, "cached")), "cached: true");
    json_object_del(c.json, "cached");
    json_object_del(r.json, "cached");
    cr_assert(json_equal(c.json, r.json), "the cached answer is the computed one");
    cr_assert_eq(metric("hamel_cache_hits_total{cache=\"results\"}"), hits + 1, "the hit is counted");
    char etag_c[128], etag_e[128];
    cr_assert(harness_header(&c, "ETag", etag_c, sizeof etag_c), "a cached answer has an ETag");

    /* The very bytes of the first request (the server's body memo answers these
     * without parsing): cached, identical again, counted, same ETag. */
    harness_resp e = post_json("/v1/simulations", req);
    cr_assert_eq(e.status, 200, "%s", e.body);
    cr_assert(json_is_true(json_object_get(e.json, "cached")), "an exact repeat is cached");
    json_object_del(e.json, "cached");
    cr_assert(json_equal(e.json, r.json), "the exact repeat is the computed answer");
    cr_assert(harness_header(&e, "ETag", etag_e, sizeof etag_e) && !strcmp(etag_e, etag_c),
              "same ETag on both cache paths (%s, %s)", etag_e, etag_c);
    cr_assert_eq(metric("hamel_cache_hits_total{cache=\"results\"}"), hits + 2,
                 "the exact repeat's hit is counted");
    cr_assert_eq(metric("hamel_jobs_total{outcome=\"cached\"}"), 2);
    cr_assert_eq(metric("hamel_jobs_total{outcome=\"done\"}"), 1, "computed once");
    harness_resp_free(&e);

    /* The same numbers written as reals (samples 41.0 for 41, t_end 10.0 for 10): one
     * JSON number, so one request — cached too. */
    json_t *reals = json_deep_copy(req);
    json_t *out = json_object_get(reals, "output");
    const char *k;
    json_t *v;
    int converted = 0;
    json_object_foreach(out, k, v)
    {
        if (json_is_integer(v)) {
            json_object_set_new(out, k, json_real((double)json_integer_value(v)));
            converted++;
        }
    }
    cr_assert_gt(converted, 0, "the case's output has an integer to rewrite");
    e = post_json("/v1/simulations", reals);
    cr_assert_eq(e.status, 200, "%s", e.body);
    cr_assert(json_is_true(json_object_get(e.json, "cached")), "5 and 5.0 are one number: %.200s", e.body);
    harness_resp_free(&e);
    json_decref(reals);
    harness_resp_free(&c);
    harness_resp_free(&r);
    json_decref(req);
}

SERVER_TEST(server, simulate_async_202_location_and_by_model_id)
{
    json_t *model = json_object_get(knife, "model");
    harness_resp m = post_json("/v1/models", model);
    cr_assert(m.status == 201 || m.status == 200);
    json_t *req = json_deep_copy(json_object_get(knife, "simulation"));
    json_object_set(req, "model_id", json_object_get(m.json, "model_id"));
    harness_resp r = post_json("/v1/simulations", req);
    cr_assert_eq(r.status, 202, "without wait: 202 (%s)", r.body);
    const char *id = str(r.json, "job_id");
    const char *st = str(r.json, "status");
    cr_assert(st && (!strcmp(st, "queued") || !strcmp(st, "running")), "status %s", st);
    char loc[256], want[256];
    snprintf(want, sizeof want, "/v1/jobs/%s", id);
    cr_assert(harness_header(&r, "Location", loc, sizeof loc) && !strcmp(loc, want), "Location %s", loc);

    snprintf(want, sizeof want, "/v1/jobs/%s?wait=" TEST_WAIT, id);
    harness_resp g = request("GET", want, NULL, NULL);
    cr_assert_eq(g.status, 200);
    cr_assert_str_eq(str(g.json, "status"), "done", "%s", g.body);
    cr_assert_str_eq(str(g.json, "model_id"), str(m.json, "model_id"));
    double p = json_number_value(json_object_get(g.json, "progress"));
    cr_assert(json_is_number(json_object_get(g.json, "progress")) && fabs(p - 1) < 1e-12,
              "progress 1 when done: %s", g.body);
    assert_knife(g.json);
    harness_resp_free(&g);

    /* Unknown model id and no model at all. */
    json_object_set_new(req, "model_id", json_string("sha256:1234"));
    harness_resp u = post_json("/v1/simulations", req);
    assert_problem(&u, 404, "not-found");
    harness_resp_free(&u);
    json_object_del(req, "model_id");
    u = post_json("/v1/simulations", req);
    assert_problem(&u, 422, NULL);
    harness_resp_free(&u);
    harness_resp_free(&r);
    harness_resp_free(&m);
    json_decref(req);
}

/* Every expected gamma of case file `c` is in `gamma` (an API.md §4 points[].gamma) with
 * its value, and nothing else is: entries that vanish identically are left out. */
static void assert_gamma(const json_t *c, const json_t *gamma)
{
    const char *cname = json_string_value(json_object_get(json_object_get(c, "model"), "name"));
    json_t *expected = json_object_get(json_object_get(c, "expected"), "hamel_at_initial");
    cr_assert(json_is_array(gamma), "%s: gamma is an array", cname);
    cr_assert_eq(json_array_size(gamma), json_array_size(expected), "%s: %zu nonzero gammas, expected %zu",
                 cname, json_array_size(gamma), json_array_size(expected));
    size_t i;
    json_t *e;
    json_array_foreach(expected, i, e)
    {
        int found = 0;
        size_t k;
        json_t *g;
        json_array_foreach(gamma, k, g)
        {
            if (!strcmp(str(g, "j"), str(e, "j")) && !strcmp(str(g, "r"), str(e, "r")) &&
                !strcmp(str(g, "l"), str(e, "l"))) {
                char what[160];
                snprintf(what, sizeof what, "%s: gamma^%s_%s%s", cname, str(e, "j"), str(e, "r"),
                         str(e, "l"));
                found = 1;
                assert_close_in(c, what, json_number_value(json_object_get(g, "value")),
                                json_number_value(json_object_get(e, "value")));
            }
        }
        cr_assert(found, "%s: gamma^%s_%s%s listed", cname, str(e, "j"), str(e, "r"), str(e, "l"));
    }
}

/* Every case in ../shared/cases, run through the service: its samples, its gammas at
 * the initial state, its constraints and (where conserved) its energy. */
SERVER_TEST(server, every_shared_case_matches_through_the_service)
{
    char dir[PATH_MAX];
    harness_case_path("", dir, sizeof dir);
    DIR *d = opendir(dir);
    cr_assert(d, "cannot list %s", dir);
    int cases = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        json_t *c = load_case(de->d_name);
        json_t *req = json_deep_copy(json_object_get(c, "simulation"));
        json_object_set(req, "model", json_object_get(c, "model"));
        harness_resp r = post_json("/v1/simulations?wait=" TEST_WAIT, req);
        cr_assert_eq(r.status, 200, "%s: %ld %s", de->d_name, r.status, r.body);
        cr_assert_str_eq(str(r.json, "status"), "done", "%s", de->d_name);
        assert_samples(c, r.json);
        json_t *tol = json_object_get(json_object_get(c, "expected"), "tolerance");
        double abs_tol = json_number_value(json_object_get(tol, "abs"));
        json_t *checks = json_object_get(r.json, "checks");
        double resid =
            json_number_value(json_object_get(json_object_get(checks, "constraints"), "max_abs_residual"));
        cr_assert(json_object_get(json_object_get(checks, "constraints"), "max_abs_residual") &&
                      resid <= abs_tol,
                  "%s: constraint residual %g > %g", de->d_name, resid, abs_tol);
        json_t *energy = json_object_get(checks, "energy");
        if (json_is_true(json_object_get(energy, "conserved_expected"))) {
            double drift = json_number_value(json_object_get(energy, "max_abs_drift"));
            double e0 = json_number_value(json_object_get(energy, "initial"));
            cr_assert(drift <= abs_tol + 1e-6 * fabs(e0), "%s: energy drift %g (E0 %g)", de->d_name, drift,
                      e0);
        }
        if (json_object_get(json_object_get(c, "expected"), "hamel_at_initial")) {
            json_t *pts = json_object_get(json_object_get(r.json, "hamel"), "points");
            assert_gamma(c, json_object_get(json_array_get(pts, 0), "gamma"));
        }
        harness_resp_free(&r);
        json_decref(req);
        json_decref(c);
        cases++;
    }
    closedir(d);
    cr_assert_geq(cases, 5, "only %d shared cases found in %s", cases, dir);
}

/* A non-holonomic constraint nonlinear in the velocities (Chetaev type): a point of
 * fixed speed in the plane, plus a free rotor. */
static json_t *chetaev_request(const char *formulation)
{
    return json_pack("{s:{s:[s,s,s], s:{s:f}, s:s, s:[{s:s, s:s}]},"
                     " s:{s:{s:f, s:f, s:f}, s:{s:f, s:f, s:f}}, s:f, s:s}",
                     "model", "coordinates", "x", "y", "th", "parameters", "m", 1.0, "kinetic_energy",
                     "1/2*m*(x'^2 + y'^2) + 1/2*th'^2", "constraints", "name", "speed", "expr",
                     "x'^2 + y'^2 - 1", "initial", "q", "x", 0.0, "y", 0.0, "th", 0.0, "qdot", "x", 1.0, "y",
                     0.0, "th", 0.5, "t_end", 1.0, "formulation", formulation);
}

/* A rolling-disk request's initial state given as a qdot that violates slip_x and slip_y. */
static void set_slipping_qdot(json_t *req)
{
    json_t *init = json_object_get(req, "initial");
    json_object_del(init, "speeds");
    json_object_set_new(
        init, "qdot",
        json_pack("{s:f, s:f, s:f, s:f, s:f}", "phi", 0.1, "theta", 0.0, "psi", 1.0, "x", 0.0, "y", 0.0));
}

/* The 4xx of an invalid simulation comes back at once, with or without ?wait, and no
 * job is created for it. */
static void assert_refused(const json_t *req, const char *slug, const char *path_part)
{
    static const char *const paths[] = {"/v1/simulations", "/v1/simulations?wait=" TEST_WAIT};
    for (int i = 0; i < 2; i++) {
        double t0 = harness_now();
        harness_resp r = post_json(paths[i], req);
        double took = harness_now() - t0;
        assert_problem(&r, 422, slug);
        char loc[256];
        cr_assert_null(harness_header(&r, "Location", loc, sizeof loc), "%s: no job, no Location", slug);
        cr_assert_null(json_object_get(r.json, "job_id"), "%s: no job id: %s", slug, r.body);
        cr_assert(took < 2.0, "%s: refused after %.3f s", slug, took);
        int named = 0;
        size_t k;
        json_t *e;
        json_array_foreach(json_object_get(r.json, "errors"), k, e) named |=
            str(e, "path") && strstr(str(e, "path"), path_part) != NULL;
        cr_assert(named, "%s: an error names %s: %s", slug, path_part, r.body);
        harness_resp_free(&r);
    }
}

SERVER_TEST(server, invalid_simulations_are_refused_synchronously)
{
    json_t *rolling = load_case("greenwood-5.3-rolling-disk.json");
    json_t *base = json_deep_copy(json_object_get(rolling, "simulation"));
    json_object_set(base, "model", json_object_get(rolling, "model"));

    /* initial.qdot that violates slip_x and slip_y. */
    json_t *req = json_deep_copy(base);
    set_slipping_qdot(req);
    assert_refused(req, "invalid-initial-state", "initial.qdot");
    json_decref(req);

    /* A coordinate the model does not have. */
    req = json_deep_copy(base);
    json_object_set_new(json_object_get(json_object_get(req, "initial"), "q"), "zeta", json_real(1.0));
    assert_refused(req, NULL, "zeta");
    json_decref(req);

    /* No t_end. */
    req = json_deep_copy(base);
    json_object_del(req, "t_end");
    assert_refused(req, NULL, "t_end");
    json_decref(req);

    /* "hamel" on a model whose constraint is nonlinear in the velocities. */
    req = chetaev_request("hamel");
    assert_refused(req, "formulation-unavailable", "constraints");
    json_decref(req);

    cr_assert_eq(metric("hamel_jobs_total{outcome=\"failed\"}"), 0, "no failed jobs");
    cr_assert_eq(metric("hamel_jobs_total{outcome=\"done\"}"), 0, "no jobs at all");

    /* The same model runs with multipliers, and keeps |v| = 1. */
    req = chetaev_request("multipliers");
    harness_resp r = post_json("/v1/simulations?wait=" TEST_WAIT, req);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(str(r.json, "formulation"), "multipliers");
    json_t *tr = json_object_get(r.json, "trajectory");
    json_t *vx = json_object_get(json_object_get(tr, "qdot"), "x");
    json_t *vy = json_object_get(json_object_get(tr, "qdot"), "y");
    cr_assert_gt(json_array_size(vx), 1);
    for (size_t k = 0; k < json_array_size(vx); k++) {
        double a = json_number_value(json_array_get(vx, k));
        double b = json_number_value(json_array_get(vy, k));
        cr_assert(fabs(a * a + b * b - 1) <= 1e-6, "|v|^2 - 1 = %g at sample %zu", a * a + b * b - 1, k);
    }
    harness_resp_free(&r);
    json_decref(req);
    json_decref(base);
    json_decref(rolling);
}

/* A new model's simulation is checked in the same engine-worker call as its compile
 * (HTTP_ROUTE_CHECKS_RUN): that check's outcome is the request's own — a bad initial
 * state of a model never seen is a 422 naming the field, no job; the same model with a
 * good state then runs (an outcome is never reused for another request), and so does a
 * new model whose first request is good. */
SERVER_TEST(server, a_new_models_simulation_is_checked_with_its_compile)
{
    json_t *rolling = load_case("greenwood-5.3-rolling-disk.json");
    for (int good_first = 0; good_first < 2; good_first++) {
        json_t *req = json_deep_copy(json_object_get(rolling, "simulation"));
        json_t *model = json_deep_copy(json_object_get(rolling, "model"));
        json_object_set_new(json_object_get(model, "parameters"), "m", json_real(good_first ? 1.375 : 1.625));
        json_object_set_new(req, "model", model);
        json_t *bad = json_deep_copy(req);
        set_slipping_qdot(bad);
        for (int k = 0; k < 2; k++) {
            int is_bad = good_first ? k == 1 : k == 0;
            harness_resp r = post_json("/v1/simulations?wait=" TEST_WAIT, is_bad ? bad : req);
            if (is_bad) {
                assert_problem(&r, 422, "invalid-initial-state");
                cr_assert(strstr(r.body, "initial.qdot"), "the error names initial.qdot: %s", r.body);
                cr_assert_null(json_object_get(r.json, "job_id"), "no job: %s", r.body);
            } else {
                cr_assert_eq(r.status, 200, "%s", r.body);
                cr_assert_str_eq(str(r.json, "status"), "done", "%s", r.body);
            }
            harness_resp_free(&r);
        }
        json_decref(bad);
        json_decref(req);
    }
    cr_assert_eq(metric("hamel_jobs_total{outcome=\"done\"}"), 2, "one job per good request");
    json_decref(rolling);
}

/* A new model's simulation that waits starts running in the engine worker that compiled
 * it, before its job exists (the job takes the run over): the answer is that job's (its
 * job_id, the same result by GET), and a DELETE of such a job while it runs stops it and
 * frees the worker for the next new model. */
SERVER_TEST(server, a_run_started_with_its_compile_is_its_jobs_and_cancels)
{
    json_t *quick = knife_request();
    json_object_set_new(json_object_get(json_object_get(quick, "model"), "parameters"), "m",
                        json_real(2.125));
    harness_resp r = post_json("/v1/simulations?wait=" TEST_WAIT, quick);
    cr_assert_eq(r.status, 200, "%s", r.body);
    char id[64], path[128];
    snprintf(id, sizeof id, "%s", str(r.json, "job_id"));
    cr_assert_eq(strlen(id), 32, "a job id: %s", id);
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    harness_resp g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200, "%s", g.body);
    cr_assert_str_eq(g.body, r.body, "GET of the job answers the result it was answered with");
    harness_resp_free(&g);
    harness_resp_free(&r);

    json_t *slow = long_request(1e6);
    json_object_set_new(json_object_get(json_object_get(slow, "model"), "parameters"), "m",
                        json_real(1.0625));
    r = post_json("/v1/simulations?wait=0.3", slow);
    cr_assert_eq(r.status, 202, "still running after its wait: %s", r.body);
    snprintf(id, sizeof id, "%s", str(r.json, "job_id"));
    harness_resp_free(&r);
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    g = request("GET", path, NULL, NULL);
    cr_assert_str_eq(str(g.json, "status"), "running", "%s", g.body);
    harness_resp_free(&g);
    double t0 = harness_now();
    harness_resp d = request("DELETE", path, NULL, NULL);
    cr_assert_eq(d.status, 200, "%s", d.body);
    harness_resp_free(&d);
    double running = 1;
    while (harness_now() - t0 < 10 && running != 0)
        running = metric("hamel_jobs_running");
    cr_assert_eq(running, 0, "the cancelled run still runs %.3f s after DELETE", harness_now() - t0);
    g = request("GET", path, NULL, NULL);
    cr_assert_str_eq(str(g.json, "status"), "cancelled", "%s", g.body);
    harness_resp_free(&g);

    json_object_set_new(json_object_get(json_object_get(quick, "model"), "parameters"), "m", json_real(3.25));
    r = post_json("/v1/simulations?wait=" TEST_WAIT, quick);
    cr_assert_eq(r.status, 200, "the next new model runs: %s", r.body);
    cr_assert_str_eq(str(r.json, "status"), "done");
    harness_resp_free(&r);
    json_decref(slow);
    json_decref(quick);
}

SERVER_TEST(server, hamel_coefficients)
{
    json_t *init = json_object_get(json_object_get(knife, "simulation"), "initial");
    json_t *req =
        json_pack("{s:O, s:O}", "model", json_object_get(knife, "model"), "q", json_object_get(init, "q"));
    harness_resp r = post_json("/v1/hamel", req);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert(json_is_array(json_object_get(r.json, "order")));
    cr_assert_eq(json_array_size(json_object_get(r.json, "order")), 3, "n quasi-velocities");
    cr_assert_eq(json_array_size(json_object_get(r.json, "points")), 1);
    json_t *pt = json_array_get(json_object_get(r.json, "points"), 0);
    json_t *expected = json_object_get(json_object_get(knife, "expected"), "hamel_at_initial");
    json_t *gamma = json_object_get(pt, "gamma");
    cr_assert_eq(json_array_size(gamma), json_array_size(expected), "nonzero gamma count");
    size_t i;
    json_t *e;
    json_array_foreach(expected, i, e)
    {
        int found = 0;
        size_t k;
        json_t *g;
        json_array_foreach(gamma, k, g)
        {
            if (!strcmp(str(g, "j"), str(e, "j")) && !strcmp(str(g, "r"), str(e, "r")) &&
                !strcmp(str(g, "l"), str(e, "l"))) {
                found = 1;
                assert_close("gamma", json_number_value(json_object_get(g, "value")),
                             json_number_value(json_object_get(e, "value")));
            }
        }
        cr_assert(found, "gamma^%s_%s%s listed", str(e, "j"), str(e, "r"), str(e, "l"));
    }
    harness_resp_free(&r);
    json_object_del(req, "q");
    json_object_set_new(req, "q", json_string("nope"));
    r = post_json("/v1/hamel", req);
    assert_problem(&r, 422, NULL);
    harness_resp_free(&r);
    json_decref(req);
}

/* A body that is not JSON says where in words a user reads (line, column) and why, in
 * the detail and in errors[0]; jansson's own jargon (a flag's name) is not passed on, and
 * NaN or Infinity is said to be what JSON lacks. */
SERVER_TEST(server, bad_json_says_line_column_and_why_in_words)
{
    harness_resp r = request("POST", "/v1/models", "{\"model\": {\n \"coordinates\": [\"x\",]\n}}", NULL);
    assert_problem(&r, 400, "bad-json");
    json_t *e = json_array_get(json_object_get(r.json, "errors"), 0);
    cr_assert_str_eq(str(r.json, "detail"), "line 2, column 22: unexpected token near ']'");
    cr_assert(json_integer_value(json_object_get(e, "line")) == 2 &&
                  json_integer_value(json_object_get(e, "column")) == 22,
              "errors[0] names line 2, column 22");
    cr_assert(json_integer_value(json_object_get(r.json, "line")) == 2, "line kept at the top too");
    harness_resp_free(&r);
    static const char *const nonfinite[] = {"{\"t_end\": NaN}", "{\"t_end\": Infinity}",
                                            "{\"a\": [1, -Infinity]}"};
    for (size_t i = 0; i < sizeof nonfinite / sizeof *nonfinite; i++) {
        r = request("POST", "/v1/simulations", nonfinite[i], NULL);
        assert_problem(&r, 400, "bad-json");
        cr_assert(strstr(text(r.json, "detail"), "JSON has no NaN or Infinity") != NULL, "%s: %s",
                  nonfinite[i], str(r.json, "detail"));
        cr_assert(strncmp(text(r.json, "detail"), "line 1, column ", 15) == 0, "%s", str(r.json, "detail"));
        harness_resp_free(&r);
    }
    r = request("POST", "/v1/models", "{\"name\": \"a\\u0000b\"}", NULL);
    assert_problem(&r, 400, "bad-json");
    cr_assert(strstr(text(r.json, "detail"), "NUL") && !strstr(text(r.json, "detail"), "JSON_ALLOW_NUL"),
              "%s", str(r.json, "detail"));
    harness_resp_free(&r);
    /* a byte that is not UTF-8 is named at its own column (jansson says the one before) */
    r = request("POST", "/v1/models", "{\"name\":\n\xff}", NULL);
    assert_problem(&r, 400, "bad-json");
    cr_assert_str_eq(text(r.json, "detail"), "line 2, column 1: unable to decode byte 0xff");
    harness_resp_free(&r);
    r = request("POST", "/v1/models", "[1, 2]", NULL);
    assert_problem(&r, 422, "invalid-request");
    cr_assert_str_eq(str(r.json, "detail"), "the body must be a JSON object");
    harness_resp_free(&r);
}

/* A t_end so far away that the sample times overflow is refused naming t_end (it was a
 * path-less "output time 2 (inf) is not finite"). */
SERVER_TEST(server, absurd_times_and_steps_are_named_or_capped)
{
    json_t *req = knife_request();
    json_object_set_new(req, "t_end", json_real(1e308));
    harness_resp r = post_json("/v1/simulations?wait=" TEST_WAIT, req);
    assert_problem(&r, 422, "invalid-request");
    json_t *e = json_array_get(json_object_get(r.json, "errors"), 0);
    cr_assert_str_eq(str(e, "path"), "t_end");
    cr_assert(strstr(text(e, "reason"), "overflow") != NULL, "%s", str(e, "reason"));
    harness_resp_free(&r);
    /* a dt giving 3e300 samples says so in a few characters (it printed 301 digits) */
    json_object_set_new(req, "t_end", json_real(3));
    json_object_set_new(req, "output", json_pack("{s:f}", "dt", 1e-300));
    r = post_json("/v1/simulations?wait=" TEST_WAIT, req);
    assert_problem(&r, 422, "invalid-request");
    e = json_array_get(json_object_get(r.json, "errors"), 0);
    cr_assert_str_eq(str(e, "path"), "output.dt");
    cr_assert(strlen(text(e, "reason")) < 60, "%s", text(e, "reason"));
    harness_resp_free(&r);
    /* max_steps 1e18 is a whole number as much as 1000000000000000000 is: the limit */
    json_object_del(req, "output");
    json_object_set_new(req, "integrator", json_pack("{s:f}", "max_steps", 1e18));
    r = post_json("/v1/simulations?wait=" TEST_WAIT, req);
    cr_assert_eq(r.status, 200, "%s", r.body);
    harness_resp_free(&r);
    json_decref(req);
}

SERVER_TEST(server, bad_bodies_get_4xx_and_the_server_stays_up)
{
    /* Truncated JSON. */
    harness_resp r = request("POST", "/v1/simulations", "{\"model\": {\"coordinates\": [\"x\"", NULL);
    assert_problem(&r, 400, "bad-json");
    cr_assert(json_array_size(json_object_get(r.json, "errors")) == 1, "where it broke");
    harness_resp_free(&r);
    /* Not an object. */
    r = request("POST", "/v1/simulations", "[1, 2, 3]", NULL);
    assert_problem(&r, 422, NULL);
    harness_resp_free(&r);
    r = request("POST", "/v1/models", "", NULL);
    assert_problem(&r, 400, "bad-json");
    harness_resp_free(&r);
    /* Mistyped members. */
    json_t *req = knife_request();
    json_object_set_new(req, "t_end", json_string("ten"));
    r = post_json("/v1/simulations?wait=" TEST_WAIT, req);
    assert_problem(&r, 422, NULL);
    harness_resp_free(&r);
    json_object_set_new(req, "model", json_string("not a model"));
    r = post_json("/v1/simulations", req);
    assert_problem(&r, 422, NULL);
    harness_resp_free(&r);
    json_decref(req);
    /* Wrong content type. */
    const char *const form[] = {"Content-Type: application/x-www-form-urlencoded", NULL};
    r = request("POST", "/v1/models", "a=1", form);
    assert_problem(&r, 415, "unsupported-media-type");
    harness_resp_free(&r);
    /* Deeply nested: refused before the parser recurses. */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 1);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    r = request("POST", "/v1/simulations", deep, NULL);
    assert_problem(&r, 400, "bad-json");
    cr_assert(strstr(str(r.json, "detail"), "deeper"), "detail says why: %s", str(r.json, "detail"));
    harness_resp_free(&r);
    free(deep);
    /* Oversized, announced by Content-Length (refused from the headers) ... */
    size_t big = 5u << 20;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[big] = '\0';
    r = request("POST", "/v1/simulations", huge, NULL);
    assert_problem(&r, 413, "too-large");
    harness_resp_free(&r);
    /* ... the same with "Expect: 100-continue": answered before the body is sent ... */
    const char *const expect[] = {"Content-Type: application/json", "Expect: 100-continue", NULL};
    r = request("POST", "/v1/simulations", huge, expect);
    assert_problem(&r, 413, "too-large");
    harness_resp_free(&r);
    /* ... and streamed in chunks without a length. */
    const char *const chunked[] = {"Transfer-Encoding: chunked", NULL};
    {
        struct curl_slist *list;
        CURL *h = harness_easy(&srv, "POST", "/v1/simulations", NULL, -1, chunked, &list, &r);
        list = curl_slist_append(list, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
        FILE *f = fmemopen(huge, big, "r");
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "POST");
        curl_easy_setopt(h, CURLOPT_READDATA, f);
        CURLcode rc = curl_easy_perform(h);
        cr_assert_eq(rc, CURLE_OK, "%s", curl_easy_strerror(rc));
        harness_finish(h, &r);
        curl_easy_cleanup(h);
        curl_slist_free_all(list);
        fclose(f);
    }
    assert_problem(&r, 413, "too-large");
    harness_resp_free(&r);
    free(huge);
    /* Wrong method: 405 with Allow; unknown route: 404. */
    r = request("PUT", "/v1/simulations", NULL, NULL);
    assert_problem(&r, 405, "method-not-allowed");
    char allow[128];
    cr_assert(harness_header(&r, "Allow", allow, sizeof allow) && strstr(allow, "POST"), "Allow %s", allow);
    harness_resp_free(&r);
    r = request("GET", "/v1/simulations", NULL, NULL);
    assert_problem(&r, 405, NULL);
    harness_resp_free(&r);
    r = request("DELETE", "/v1/models", NULL, NULL);
    assert_problem(&r, 405, NULL);
    harness_resp_free(&r);
    r = request("GET", "/v1/nothing-here", NULL, NULL);
    assert_problem(&r, 404, "not-found");
    harness_resp_free(&r);
    r = request("GET", "/v1/jobs/0123456789abcdef0123456789abcdef", NULL, NULL);
    assert_problem(&r, 404, "not-found");
    harness_resp_free(&r);
    r = request("GET", "/v1/jobs/x?wait=soon", NULL, NULL);
    cr_assert(r.status == 404 || r.status == 422, "a bad job path is refused");
    harness_resp_free(&r);

    r = request("GET", "/v1/health", NULL, NULL);
    cr_assert_eq(r.status, 200, "still serving after the bad bodies");
    harness_resp_free(&r);
}

SERVER_TEST(server, failed_job_carries_its_problem)
{
    json_t *req = knife_request();
    json_object_set_new(json_object_get(req, "integrator"), "max_steps", json_integer(3));
    harness_resp r = post_json("/v1/simulations?wait=" TEST_WAIT, req);
    cr_assert(r.status >= 400 && r.status < 500, "status %ld: %s", r.status, r.body);
    assert_problem(&r, r.status, "step-limit");
    const char *id = str(r.json, "job_id");
    cr_assert(id, "the failed job's id is in the problem");
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    harness_resp g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200);
    cr_assert_str_eq(str(g.json, "status"), "failed");
    json_t *p = json_object_get(g.json, "problem");
    cr_assert(str(p, "type") && strstr(str(p, "type"), "step-limit"), "%s", g.body);
    harness_resp_free(&g);
    harness_resp_free(&r);
    json_decref(req);
    r = request("GET", "/v1/health", NULL, NULL);
    cr_assert_eq(r.status, 200, "the service keeps serving");
    harness_resp_free(&r);
}

SERVER_TEST(server, cancel_running_and_queued)
{
    json_t *req = long_request(1e6);
    harness_resp a = post_json("/v1/simulations", req);
    cr_assert_eq(a.status, 202, "%s", a.body);
    char id[64], path[128];
    snprintf(id, sizeof id, "%s", str(a.json, "job_id"));
    harness_resp_free(&a);
    wait_running(id);
    harness_nap(100);
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    harness_resp g = request("GET", path, NULL, NULL);
    double p = json_number_value(json_object_get(g.json, "progress"));
    cr_assert(p >= 0 && p < 1, "running progress in [0,1): %g", p);
    harness_resp_free(&g);

    /* The worker is free again within the budget. A shared machine can stall any one
     * measurement, so a late one is repeated on a fresh job, three tries at most. */
    double best = 1e9;
    harness_resp d;
    for (int attempt = 0; attempt < 3 && best > CANCEL_BUDGET_S; attempt++) {
        char apath[128];
        snprintf(apath, sizeof apath, "%s", path);
        if (attempt > 0) {
            json_t *again = long_request(1e6 + attempt);
            harness_resp b = post_json("/v1/simulations", again);
            json_decref(again);
            cr_assert_eq(b.status, 202, "%s", b.body);
            char bid[64];
            snprintf(bid, sizeof bid, "%s", str(b.json, "job_id"));
            harness_resp_free(&b);
            wait_running(bid);
            snprintf(apath, sizeof apath, "/v1/jobs/%s", bid);
        }
        double t0 = harness_now();
        d = request("DELETE", apath, NULL, NULL);
        cr_assert_eq(d.status, 200, "%s", d.body);
        cr_assert_str_eq(str(d.json, "status"), "cancelled");
        harness_resp_free(&d);
        double running = 1;
        while (harness_now() - t0 < CANCEL_BUDGET_S * 4 && running != 0)
            running = metric("hamel_jobs_running");
        double took = harness_now() - t0;
        cr_assert_eq(running, 0, "the cancelled job still runs after %.3f s", took);
        if (took < best)
            best = took;
    }
    cr_assert(best <= CANCEL_BUDGET_S, "the job stopped %.3f s after DELETE at best of three (budget %.2f s)",
              best, CANCEL_BUDGET_S);
    g = request("GET", path, NULL, NULL);
    cr_assert_str_eq(str(g.json, "status"), "cancelled");
    cr_assert(json_is_object(json_object_get(g.json, "problem")), "with a problem document");
    harness_resp_free(&g);
    d = request("DELETE", path, NULL, NULL);
    cr_assert_eq(d.status, 200, "cancelling again is harmless");
    harness_resp_free(&d);

    /* A finished job cannot be cancelled; an unknown one is 404. */
    json_t *quick = knife_request();
    harness_resp q = post_json("/v1/simulations?wait=" TEST_WAIT, quick);
    cr_assert_eq(q.status, 200);
    snprintf(path, sizeof path, "/v1/jobs/%s", str(q.json, "job_id"));
    d = request("DELETE", path, NULL, NULL);
    assert_problem(&d, 409, "conflict");
    harness_resp_free(&d);
    d = request("DELETE", "/v1/jobs/ffffffffffffffffffffffffffffffff", NULL, NULL);
    assert_problem(&d, 404, "not-found");
    harness_resp_free(&d);
    harness_resp_free(&q);
    json_decref(quick);
    json_decref(req);
}

SERVER_TEST(server, long_poll_parks_without_a_thread)
{
    stop_checked(&srv);
    static const char *const env[] = {"HAMEL_MAX_WALL=30", "HAMEL_HTTP_THREADS=1", "HAMEL_WORKERS=1", NULL};
    start_env(env);
    json_t *req = long_request(2e6);
    harness_resp a = post_json("/v1/simulations", req);
    cr_assert_eq(a.status, 202);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s?wait=1", str(a.json, "job_id"));

    /* Eight long-polls parked on one HTTP thread; health still answers at once. */
    enum { POLLS = 8 };
    CURLM *multi = curl_multi_init();
    CURL *h[POLLS];
    harness_resp rs[POLLS];
    struct curl_slist *lists[POLLS];
    for (int i = 0; i < POLLS; i++) {
        h[i] = harness_easy(&srv, "GET", path, NULL, -1, NULL, &lists[i], &rs[i]);
        curl_multi_add_handle(multi, h[i]);
    }
    int still = 0;
    double t0 = harness_now();
    while (harness_now() - t0 < 0.3) {
        curl_multi_perform(multi, &still);
        curl_multi_poll(multi, NULL, 0, 20, NULL);
    }
    double h0 = harness_now();
    harness_resp health = request("GET", "/v1/health", NULL, NULL);
    double health_s = harness_now() - h0;
    cr_assert_eq(health.status, 200);
    cr_assert(health_s < 0.5, "health took %.3f s beside parked polls", health_s);
    harness_resp_free(&health);
    do {
        curl_multi_perform(multi, &still);
        curl_multi_poll(multi, NULL, 0, 50, NULL);
    } while (still);
    double waited = harness_now() - t0;
    for (int i = 0; i < POLLS; i++) {
        harness_finish(h[i], &rs[i]);
        cr_assert_eq(rs[i].status, 200);
        cr_assert_str_eq(str(rs[i].json, "status"), "running", "still running after wait=1");
        curl_multi_remove_handle(multi, h[i]);
        curl_easy_cleanup(h[i]);
        curl_slist_free_all(lists[i]);
        harness_resp_free(&rs[i]);
    }
    curl_multi_cleanup(multi);
    cr_assert(waited >= 0.95 && waited < 5, "a wait=1 poll returned after %.3f s", waited);
    snprintf(path, sizeof path, "/v1/jobs/%s", str(a.json, "job_id"));
    harness_resp d = request("DELETE", path, NULL, NULL);
    cr_assert_eq(d.status, 200);
    harness_resp_free(&d);
    harness_resp_free(&a);
    json_decref(req);
}

SERVER_TEST(server, queue_full_is_503_with_retry_after)
{
    stop_checked(&srv);
    static const char *const env[] = {"HAMEL_MAX_WALL=30", "HAMEL_WORKERS=1", "HAMEL_QUEUE=1", NULL};
    start_env(env);
    char ids[2][64];
    for (int i = 0; i < 2; i++) {
        json_t *req = long_request(1e6 + i); /* distinct requests: no cache */
        harness_resp r = post_json("/v1/simulations", req);
        cr_assert_eq(r.status, 202, "job %d accepted: %s", i, r.body);
        snprintf(ids[i], sizeof ids[i], "%s", str(r.json, "job_id"));
        harness_resp_free(&r);
        json_decref(req);
        if (i == 0)
            wait_running(ids[0]);
    }
    json_t *req = long_request(1e6 + 2);
    harness_resp r = post_json("/v1/simulations", req);
    assert_problem(&r, 503, "queue-full");
    char ra[32];
    cr_assert(harness_header(&r, "Retry-After", ra, sizeof ra) && atoi(ra) >= 1, "Retry-After %s", ra);
    harness_resp_free(&r);
    json_decref(req);
    cr_assert_eq(metric("hamel_queue_depth"), 1);
    cr_assert_geq(metric("hamel_jobs_total{outcome=\"rejected\"}"), 1);
    for (int i = 1; i >= 0; i--) {
        char path[128];
        snprintf(path, sizeof path, "/v1/jobs/%s", ids[i]);
        harness_resp d = request("DELETE", path, NULL, NULL);
        cr_assert_eq(d.status, 200, "cancel %s: %s", ids[i], d.body);
        cr_assert_str_eq(str(d.json, "status"), "cancelled");
        harness_resp_free(&d);
    }
    r = request("GET", "/readyz", NULL, NULL);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
}

SERVER_TEST(server, sixty_four_concurrent_simulations)
{
    stop_checked(&srv);
    static const char *const env[] = {"HAMEL_MAX_WALL=60", "HAMEL_QUEUE=128", NULL};
    start_env(env);
    CURLM *multi = curl_multi_init();
    CURL *h[CONCURRENT];
    harness_resp rs[CONCURRENT];
    struct curl_slist *lists[CONCURRENT];
    char *bodies[CONCURRENT];
    for (int i = 0; i < CONCURRENT; i++) {
        json_t *req = knife_request();
        /* distinct but equivalent requests, so each one is really computed */
        json_object_set_new(json_object_get(req, "integrator"), "rtol", json_real(1e-12 * (1.0 + i / 64.0)));
        bodies[i] = dump(req);
        json_decref(req);
        h[i] = harness_easy(&srv, "POST", "/v1/simulations?wait=" TEST_WAIT, bodies[i], -1, NULL, &lists[i],
                            &rs[i]);
        curl_multi_add_handle(multi, h[i]);
    }
    int still = 0;
    do {
        curl_multi_perform(multi, &still);
        curl_multi_poll(multi, NULL, 0, 100, NULL);
    } while (still);
    char seen[CONCURRENT][64];
    for (int i = 0; i < CONCURRENT; i++) {
        harness_finish(h[i], &rs[i]);
        cr_assert_eq(rs[i].status, 200, "request %d: %ld %s", i, rs[i].status, rs[i].body);
        cr_assert_str_eq(str(rs[i].json, "status"), "done");
        cr_assert(json_is_false(json_object_get(rs[i].json, "cached")), "request %d computed", i);
        assert_knife(rs[i].json);
        snprintf(seen[i], sizeof seen[i], "%s", str(rs[i].json, "job_id"));
        for (int k = 0; k < i; k++)
            cr_assert_str_neq(seen[k], seen[i], "job ids are distinct");
        curl_multi_remove_handle(multi, h[i]);
        curl_easy_cleanup(h[i]);
        curl_slist_free_all(lists[i]);
        harness_resp_free(&rs[i]);
        free(bodies[i]);
    }
    curl_multi_cleanup(multi);
    cr_assert_eq(metric("hamel_jobs_total{outcome=\"done\"}"), CONCURRENT);
    double compiles = metric("hamel_derive_seconds_count");
    cr_assert_eq(compiles, 1, "one model, compiled once for all 64 (%g)", compiles);
}

static void token_setup(void)
{
    static const char *const env[] = {"HAMEL_MAX_WALL=30", "HAMEL_TOKEN=s3cret-token",
                                      "HAMEL_METRICS_TOKEN=m3trics-token", NULL};
    start_env(env);
}

TestSuite(server_auth, .init = token_setup, .fini = teardown, .timeout = 120);

SERVER_TEST(server_auth, bearer_token_guards_v1)
{
    harness_resp r = request("GET", "/v1/health", NULL, NULL);
    assert_problem(&r, 401, "unauthorized");
    char www[128];
    cr_assert(harness_header(&r, "WWW-Authenticate", www, sizeof www) && strstr(www, "Bearer"));
    harness_resp_free(&r);
    const char *const wrong[] = {"Authorization: Bearer s3cret-tokeN", NULL};
    r = request("GET", "/v1/health", NULL, wrong);
    assert_problem(&r, 401, NULL);
    harness_resp_free(&r);
    r = post_json("/v1/models", json_object_get(knife, "model"));
    assert_problem(&r, 401, NULL);
    harness_resp_free(&r);
    const char *const right[] = {"Authorization: Bearer s3cret-token", NULL};
    r = request("GET", "/v1/health", NULL, right);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
    char *model = dump(json_object_get(knife, "model"));
    r = request("POST", "/v1/models", model, right);
    cr_assert_eq(r.status, 201, "%s", r.body);
    harness_resp_free(&r);
    free(model);
    /* Probes and the browser's preflight need no token. */
    r = request("GET", "/livez", NULL, NULL);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
    const char *const pre[] = {"Origin: http://lab.example", "Access-Control-Request-Method: POST",
                               "Access-Control-Request-Headers: authorization, content-type", NULL};
    r = request("OPTIONS", "/v1/simulations", NULL, pre);
    cr_assert_eq(r.status, 204);
    harness_resp_free(&r);
}

/* With a token, an unknown /v1 path answers 401 like a known one (a 404 would tell a
 * client without the token which paths exist); HAMEL_METRICS_TOKEN guards /metrics. */
SERVER_TEST(server_auth, unknown_v1_paths_and_metrics_need_their_tokens)
{
    harness_resp r = request("GET", "/v1/no-such-thing", NULL, NULL);
    assert_problem(&r, 401, "unauthorized");
    harness_resp_free(&r);
    r = request("POST", "/v1/nope/deeper", "{}", NULL);
    assert_problem(&r, 401, "unauthorized");
    harness_resp_free(&r);
    const char *const right[] = {"Authorization: Bearer s3cret-token", NULL};
    r = request("GET", "/v1/no-such-thing", NULL, right);
    assert_problem(&r, 404, NULL);
    harness_resp_free(&r);

    r = request("GET", "/metrics", NULL, NULL);
    assert_problem(&r, 401, "unauthorized");
    harness_resp_free(&r);
    r = request("GET", "/metrics", NULL, right); /* the /v1 token is not the metrics token */
    assert_problem(&r, 401, "unauthorized");
    harness_resp_free(&r);
    const char *const scrape[] = {"Authorization: Bearer m3trics-token", NULL};
    r = request("GET", "/metrics", NULL, scrape);
    cr_assert_eq(r.status, 200, "the metrics token: %ld", r.status);
    cr_assert(r.body && strstr(r.body, "hamel_http_requests_total"), "the metrics themselves");
    harness_resp_free(&r);
    r = request("GET", "/livez", NULL, NULL);
    cr_assert_eq(r.status, 200, "probes still need no token");
    harness_resp_free(&r);
}

/* A 401 says what to do: without an Authorization header, send the token; with one that
 * is not the token, that it is not (the title alone read "A bearer token is required" to
 * a client that had sent one). */
SERVER_TEST(server_auth, a_401_says_whether_the_token_is_missing_or_wrong)
{
    harness_resp r = request("GET", "/v1/health", NULL, NULL);
    assert_problem(&r, 401, "unauthorized");
    cr_assert(strstr(text(r.json, "detail"), "Authorization: Bearer") != NULL, "%s", text(r.json, "detail"));
    harness_resp_free(&r);
    const char *const wrong[] = {"Authorization: Bearer s3cret-tokeN", NULL};
    r = request("GET", "/v1/models/x", NULL, wrong);
    assert_problem(&r, 401, "unauthorized");
    cr_assert(strstr(text(r.json, "detail"), "does not hold this server's bearer token") != NULL, "%s",
              text(r.json, "detail"));
    cr_assert(strstr(r.body, "s3cret") == NULL, "the token is not echoed");
    harness_resp_free(&r);
}

/* A /v1 path with a trailing slash is a 404 that names the path without it. */
SERVER_TEST(server, a_trailing_slash_404_names_the_path_without_it)
{
    static const char *const paths[][2] = {
        {"/v1/health/", "/v1/health"},
        {"/v1/models/", "/v1/models"},
        {"/v1/jobs/abc//", "/v1/jobs/abc"},
        {"/v1/models/sha256:00/equations/", "/v1/models/sha256:00/equations"}};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        harness_resp r = request("GET", paths[i][0], NULL, NULL);
        assert_problem(&r, 404, "not-found");
        char want[160];
        snprintf(want, sizeof want, "did you mean %s (without the trailing slash)?", paths[i][1]);
        cr_assert(strstr(text(r.json, "detail"), want) != NULL, "%s: %s", paths[i][0],
                  text(r.json, "detail"));
        harness_resp_free(&r);
    }
    harness_resp r = request("GET", "/v1/nope/", NULL, NULL);
    assert_problem(&r, 404, "not-found");
    cr_assert(json_object_get(r.json, "detail") == NULL ||
                  strstr(text(r.json, "detail"), "did you mean") == NULL,
              "no hint where the bare path is not one either");
    harness_resp_free(&r);
}

/* A query parameter the API reads given twice with different values is refused naming
 * it (?form=kane&form=hamel read as kane); the same value twice, or another name, is not. */
SERVER_TEST(server, a_query_parameter_given_twice_differently_is_refused)
{
    char *model = dump(json_object_get(knife, "model"));
    harness_resp r = request("POST", "/v1/models", model, NULL);
    free(model);
    cr_assert(r.status == 200 || r.status == 201, "%s", r.body);
    char path[256];
    snprintf(path, sizeof path, "/v1/models/%s/equations?form=kane&form=hamel", str(r.json, "model_id"));
    char base[200];
    snprintf(base, sizeof base, "/v1/models/%s", str(r.json, "model_id"));
    harness_resp_free(&r);
    r = request("GET", path, NULL, NULL);
    assert_problem(&r, 422, "invalid-request");
    cr_assert_str_eq(str(json_array_get(json_object_get(r.json, "errors"), 0), "path"), "?form");
    harness_resp_free(&r);
    snprintf(path, sizeof path, "%s?source=1&source=0", base);
    r = request("GET", path, NULL, NULL);
    assert_problem(&r, 422, "invalid-request");
    harness_resp_free(&r);
    snprintf(path, sizeof path, "%s/equations?form=kane&form=kane&x=1&x=2", base);
    r = request("GET", path, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(str(r.json, "form"), "kane");
    harness_resp_free(&r);
}

SERVER_TEST(server, token_off_by_default)
{
    const char *const any[] = {"Authorization: Bearer whatever", NULL};
    harness_resp r = request("GET", "/v1/health", NULL, any);
    cr_assert_eq(r.status, 200, "no HAMEL_TOKEN: no token needed, any is ignored");
    harness_resp_free(&r);
}

SERVER_TEST(server, cors_preflight_and_exposed_headers)
{
    const char *const pre[] = {"Origin: http://lab.example", "Access-Control-Request-Method: POST",
                               "Access-Control-Request-Headers: content-type", NULL};
    harness_resp r = request("OPTIONS", "/v1/simulations", NULL, pre);
    cr_assert_eq(r.status, 204);
    char v[256];
    cr_assert(harness_header(&r, "Access-Control-Allow-Origin", v, sizeof v) && !strcmp(v, "*"), "%s", v);
    cr_assert(harness_header(&r, "Access-Control-Allow-Methods", v, sizeof v) && strstr(v, "POST"));
    cr_assert(harness_header(&r, "Access-Control-Allow-Headers", v, sizeof v) &&
              strcasestr(v, "content-type"));
    harness_resp_free(&r);
    const char *const origin[] = {"Origin: http://lab.example", NULL};
    r = request("GET", "/v1/health", NULL, origin);
    cr_assert(harness_header(&r, "Access-Control-Allow-Origin", v, sizeof v));
    cr_assert(harness_header(&r, "Access-Control-Expose-Headers", v, sizeof v) && strstr(v, "Location") &&
                  strstr(v, "ETag") && strstr(v, "Retry-After"),
              "expose %s", v);
    harness_resp_free(&r);
}

static void cors_setup(void)
{
    static const char *const env[] = {"HAMEL_CORS_ORIGINS=http://a.example, http://b.example", NULL};
    start_env(env);
}

TestSuite(server_cors, .init = cors_setup, .fini = teardown, .timeout = 60);

SERVER_TEST(server_cors, only_listed_origins)
{
    const char *const a[] = {"Origin: http://b.example", NULL};
    harness_resp r = request("GET", "/v1/health", NULL, a);
    char v[256];
    cr_assert(harness_header(&r, "Access-Control-Allow-Origin", v, sizeof v) &&
                  !strcmp(v, "http://b.example"),
              "a listed origin is echoed");
    harness_resp_free(&r);
    const char *const c[] = {"Origin: http://evil.example", NULL};
    r = request("GET", "/v1/health", NULL, c);
    cr_assert_eq(r.status, 200);
    cr_assert_null(harness_header(&r, "Access-Control-Allow-Origin", v, sizeof v),
                   "an unlisted origin gets no Allow-Origin");
    /* the answer depends on Origin either way: a shared cache keys it by Origin */
    cr_assert(harness_header(&r, "Vary", v, sizeof v) && strstr(v, "Origin"),
              "Vary: Origin for an unlisted one");
    harness_resp_free(&r);
    r = request("GET", "/v1/health", NULL, NULL);
    cr_assert(harness_header(&r, "Vary", v, sizeof v) && strstr(v, "Origin"), "Vary: Origin without Origin");
    harness_resp_free(&r);
}

/* Starts a server on an existing data directory (a restart). */
static void restart_on(const char *data, harness_server *s)
{
    char setting[PATH_MAX + 16];
    snprintf(setting, sizeof setting, "HAMEL_DATA=%s", data);
    const char *const env[] = {setting, "HAMEL_MAX_WALL=30", NULL};
    cr_assert_eq(harness_start(s, env), 0, "restart on %s", data);
}

/* Kills `first` with SIGKILL and starts `second` on the same data directory (as srv). */
static void kill_and_restart(harness_server *first, const char *data, harness_server *second)
{
    kill(first->pid, SIGKILL);
    waitpid(first->pid, NULL, 0);
    first->pid = 0;
    restart_on(data, second);
    srv = *second;
}

/* The job `id` is done after the restart, with the trajectory of its first answer `r`. */
static void assert_done_as_answered(const char *id, const harness_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    harness_resp g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200, "the job answered done survives kill -9: %s", g.body);
    cr_assert_str_eq(str(g.json, "status"), "done");
    cr_assert(json_equal(json_object_get(g.json, "trajectory"), json_object_get(r->json, "trajectory")),
              "the same trajectory after the restart");
    harness_resp_free(&g);
}

/* A job answered done whose result's commit had not happened yet (held back by
 * HAMEL_TEST_JOURNAL_HOLD: it is only in <data>/results.journal) survives kill -9: the
 * restart commits it from the journal, and the journal is empty after. */
SERVER_TEST(server, a_result_only_in_the_journal_survives_kill_9)
{
    char data[PATH_MAX], setting[PATH_MAX + 16], journal[PATH_MAX + 32];
    snprintf(data, sizeof data, "%s/journaled", srv.dir);
    snprintf(setting, sizeof setting, "HAMEL_DATA=%s", data);
    snprintf(journal, sizeof journal, "%s/results.journal", data);
    const char *const env[] = {setting, "HAMEL_MAX_WALL=30", "HAMEL_TEST_JOURNAL_HOLD=1", NULL};
    harness_server first, second, saved = srv;
    cr_assert_eq(harness_start(&first, env), 0, "start on %s", data);
    srv = first;
    json_t *req = knife_request();
    harness_resp r = post_json("/v1/simulations?wait=" TEST_WAIT, req);
    cr_assert_eq(r.status, 200, "%s", r.body);
    char id[64];
    snprintf(id, sizeof id, "%s", str(r.json, "job_id"));
    struct stat sb;
    cr_assert(stat(journal, &sb) == 0 && sb.st_size > 1000, "the result is in the journal (%lld bytes)",
              (long long)(stat(journal, &sb) == 0 ? sb.st_size : -1));
    kill_and_restart(&first, data, &second);
    assert_done_as_answered(id, &r);
    /* emptied: its header ("HJE <epoch>\n", 21 bytes) and no entry */
    cr_expect(stat(journal, &sb) == 0 && sb.st_size == 21,
              "the journal is empty after the restart (%lld bytes)", (long long)sb.st_size);
    harness_resp_free(&r);
    json_decref(req);
    stop_checked(&srv);
    harness_stop(&first);
    srv = saved;
}

SERVER_TEST(server, restart_after_kill_keeps_finished_results)
{
    /* A data directory that outlives the first server. */
    char data[PATH_MAX];
    snprintf(data, sizeof data, "%s/kept", srv.dir);
    json_t *req = knife_request();
    harness_server first, second;
    restart_on(data, &first);
    harness_server saved = srv;
    srv = first;
    harness_resp r = post_json("/v1/simulations?wait=" TEST_WAIT, req);
    cr_assert_eq(r.status, 200, "%s", r.body);
    char id[64], model_id[96];
    snprintf(id, sizeof id, "%s", str(r.json, "job_id"));
    snprintf(model_id, sizeof model_id, "%s", str(r.json, "model_id"));
    /* A job still running when the process dies. */
    json_t *longreq = long_request(1e6);
    harness_resp a = post_json("/v1/simulations", longreq);
    cr_assert_eq(a.status, 202);
    char lid[64];
    snprintf(lid, sizeof lid, "%s", str(a.json, "job_id"));
    harness_resp_free(&a);
    /* One whose wait ends first: its record is written lazily, so the 202 that shows its id
     * comes only once the record is committed. */
    json_t *waitreq = long_request(2e6);
    harness_resp w = post_json("/v1/simulations?wait=0.3", waitreq);
    cr_assert_eq(w.status, 202, "%s", w.body);
    char wid[64];
    snprintf(wid, sizeof wid, "%s", str(w.json, "job_id"));
    harness_resp_free(&w);
    json_decref(waitreq);
    kill_and_restart(&first, data, &second);
    assert_done_as_answered(id, &r);
    char path[128];
    harness_resp g;
    /* a malformed ?wait is refused for a job read from the store as for one in memory */
    snprintf(path, sizeof path, "/v1/jobs/%s?wait=abc", id);
    g = request("GET", path, NULL, NULL);
    assert_problem(&g, 422, "invalid-request");
    cr_assert_str_eq(str(json_array_get(json_object_get(g.json, "errors"), 0), "path"), "?wait");
    harness_resp_free(&g);
    harness_resp c = post_json("/v1/simulations", req);
    cr_assert_eq(c.status, 200, "%s", c.body);
    cr_assert(json_is_true(json_object_get(c.json, "cached")), "answered from the store");
    harness_resp_free(&c);
    snprintf(path, sizeof path, "/v1/models/%s", model_id);
    g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200, "the model is known after the restart");
    harness_resp_free(&g);
    snprintf(path, sizeof path, "/v1/jobs/%s", lid);
    g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200);
    cr_assert_str_eq(str(g.json, "status"), "failed", "the interrupted job says so: %s", g.body);
    harness_resp_free(&g);
    snprintf(path, sizeof path, "/v1/jobs/%s", wid);
    g = request("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200, "a job shown by a 202 after its wait is known after kill -9: %s", g.body);
    cr_assert_str_eq(str(g.json, "status"), "failed", "the interrupted job says so: %s", g.body);
    harness_resp_free(&g);

    /* SIGTERM: a graceful exit with status 0. */
    kill(second.pid, SIGTERM);
    int status = 0;
    cr_assert_eq(waitpid(second.pid, &status, 0), second.pid);
    second.pid = 0;
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d", status);
    harness_stop(&second);
    harness_stop(&first);
    srv = saved;
    harness_resp_free(&r);
    json_decref(longreq);
    json_decref(req);
}

/* SIGTERM while a job runs: for HAMEL_DRAIN_SECONDS the server still answers on new
 * connections — /readyz 503, new work 503 unavailable with Retry-After, the running job
 * can be polled — then cancels the job and exits 0. */
Test(server, sigterm_drains_and_still_answers)
{
    static const char *const env[] = {"HAMEL_DRAIN_SECONDS=4", "HAMEL_MAX_WALL=30", NULL};
    harness_server saved = srv, d;
    cr_assert_eq(harness_start(&d, env), 0, "the server did not start (log above)");
    srv = d;
    json_t *req = long_request(1e6);
    harness_resp a = post_json("/v1/simulations", req);
    cr_assert_eq(a.status, 202, "%s", a.body);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", str(a.json, "job_id"));
    harness_resp_free(&a);
    wait_running(path + strlen("/v1/jobs/"));
    kill(d.pid, SIGTERM);
    harness_resp r;
    for (int i = 0; i < 100; i++) { /* the signal is handled asynchronously */
        r = request("GET", "/readyz", NULL, NULL);
        if (r.status == 503)
            break;
        harness_resp_free(&r);
        harness_nap(10);
    }
    cr_assert_eq(r.status, 503, "/readyz turns 503 while draining");
    harness_resp_free(&r);
    json_t *knife_req = knife_request();
    r = post_json("/v1/simulations", knife_req);
    json_decref(knife_req);
    assert_problem(&r, 503, "unavailable");
    char ra[16];
    cr_assert(harness_header(&r, "Retry-After", ra, sizeof ra) && atoi(ra) >= 1, "Retry-After %s", ra);
    harness_resp_free(&r);
    r = request("GET", path, NULL, NULL);
    cr_assert_eq(r.status, 200, "the running job can still be polled: %s", r.body);
    cr_assert_str_eq(str(r.json, "status"), "running");
    harness_resp_free(&r);
    int status = 0;
    cr_assert_eq(waitpid(d.pid, &status, 0), d.pid);
    d.pid = 0;
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %#x", status);
    harness_stop(&d);
    srv = saved;
    json_decref(req);
}

/* A model of n coordinates with a dense kinetic energy and n/4 nonholonomic
 * constraints: valid, and slow to derive (about a second for n = 48). Caller frees. */
static char *heavy_model(int n)
{
    size_t cap = 64 * 1024, len = 0;
    char *b = malloc(cap);
#define PUT(...) (len += (size_t)snprintf(b + len, cap - len, __VA_ARGS__))
    PUT("{\"coordinates\": [");
    for (int i = 0; i < n; i++)
        PUT("%s\"q%d\"", i ? ", " : "", i);
    PUT("], \"kinetic_energy\": \"");
    for (int i = 0; i < n; i++)
        PUT("(1 + sin(q%d)^2*cos(q%d))*q%d'^2 + cos(q%d - q%d)*q%d'*q%d'%s", i, (i + 1) % n, i, i,
            (i + 3) % n, i, (i + 3) % n, i + 1 < n ? " + " : "");
    PUT("\", \"constraints\": [");
    for (int j = 0; j < n / 4; j++) {
        PUT("%s\"", j ? ", " : "");
        for (int k = 0; k < 4; k++)
            PUT("%ssin(q%d + q%d)*q%d'", k ? " + " : "", (j + k) % n, (j * 3 + k) % n, (j + 2 * k) % n);
        PUT("\"");
    }
    PUT("]}");
#undef PUT
    cr_assert_lt(len, cap, "the heavy model fits its buffer");
    return b;
}

struct slow_arg {
    const harness_server *srv;
    const char *method, *path, *body;
    long status;
    char model_id[96];
    atomic_int done;
};

static void *slow_thread(void *arg)
{
    struct slow_arg *a = arg;
    harness_resp r;
    CURLcode rc = harness_request(a->srv, a->method, a->path, a->body, NULL, &r);
    a->status = rc == CURLE_OK ? r.status : -1;
    const char *id = json_string_value(json_object_get(r.json, "model_id"));
    snprintf(a->model_id, sizeof a->model_id, "%s", id ? id : "");
    harness_resp_free(&r);
    atomic_store(&a->done, 1);
    return NULL;
}

/* Sends a->method a->path from another thread and, while the server works on it on its
 * offload pool, asks /v1/health: that must be answered first. Returns a->status. */
static long answered_around(struct slow_arg *a)
{
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, slow_thread, a), 0);
    int seen = 0;
    for (int i = 0; i < 500 && !seen && !atomic_load(&a->done); i++) {
        seen = metric("hamel_offload_running") >= 1;
        if (!seen)
            harness_nap(2);
    }
    cr_assert(seen, "%s %s was seen running on the offload pool (done=%d, status %ld)", a->method, a->path,
              atomic_load(&a->done), a->status);
    harness_resp r = request("GET", "/v1/health", NULL, NULL);
    int done_before = atomic_load(&a->done);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
    cr_assert(!done_before, "/v1/health was answered while %s %s was still compiling", a->method, a->path);
    pthread_join(th, NULL);
    cr_assert_eq(metric("hamel_offload_running"), 0);
    return a->status;
}

/* Models are derived on the offload pool, not on libmicrohttpd's threads: with a single
 * poll thread, other requests are answered while a slow model compiles — when it is
 * posted, and when it is first used by id after a restart (recompiled from the store). */
Test(server, a_slow_model_does_not_hold_up_other_requests)
{
    char data[PATH_MAX], setting[PATH_MAX + 16];
    snprintf(data, sizeof data, "%s/slow", srv.dir);
    snprintf(setting, sizeof setting, "HAMEL_DATA=%s", data);
    const char *const env[] = {"HAMEL_HTTP_THREADS=1", setting, NULL};
    harness_server saved = srv, one, two;
    cr_assert_eq(harness_start(&one, env), 0, "the server did not start (log above)");
    srv = one;
    char *model = heavy_model(48);
    struct slow_arg a = {&srv, "POST", "/v1/models", model, 0, "", 0};
    cr_assert_eq(answered_around(&a), 201, "the slow model compiled (status %ld)", a.status);
    free(model);
    stop_checked(&srv);

    cr_assert_eq(harness_start(&two, env), 0, "the server did not restart (log above)");
    srv = two;
    char path[160];
    snprintf(path, sizeof path, "/v1/models/%s", a.model_id);
    struct slow_arg b = {&srv, "GET", path, NULL, 0, "", 0};
    cr_assert_eq(answered_around(&b), 200, "the stored model compiled again (status %ld)", b.status);
    cr_assert_str_eq(b.model_id, a.model_id);
    stop_checked(&srv);
    srv = saved;
}

/* A compiled model is charged to the model cache once, however many spellings of it
 * point at it: with room for one and a half models, posting a model and then using it
 * by id compiles it once (before, its text alias cost as much again and evicted it). */
Test(server, a_model_is_cached_once)
{
    json_t *model = json_object_get(knife, "model");
    harness_resp r = post_json("/v1/models", model);
    cr_assert_eq(r.status, 201, "%s", r.body);
    harness_resp_free(&r);
    double bytes = metric("hamel_cache_bytes{cache=\"models\"}");
    cr_assert_gt(bytes, 0, "the model is cached");

    char setting[64];
    snprintf(setting, sizeof setting, "HAMEL_CACHE_BYTES=%.0f", 4 * 1.5 * bytes); /* models get 1/4 */
    const char *const env[] = {setting, NULL};
    harness_server saved = srv, small;
    cr_assert_eq(harness_start(&small, env), 0, "the server did not start (log above)");
    srv = small;
    r = post_json("/v1/models", model);
    cr_assert_eq(r.status, 201, "%s", r.body);
    char path[160];
    snprintf(path, sizeof path, "/v1/models/%s", str(r.json, "model_id"));
    harness_resp_free(&r);
    r = request("GET", path, NULL, NULL);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
    r = post_json("/v1/models", model);
    cr_assert_eq(r.status, 200, "known: %s", r.body);
    harness_resp_free(&r);
    cr_assert_eq(metric("hamel_derive_seconds_count"), 1, "compiled once");
    cr_assert_eq(metric("hamel_cache_entries{cache=\"models\"}"), 1);
    stop_checked(&srv);
    srv = saved;
}

/* PRAGMA integrity_check on the store of a stopped server: "ok" or the first problem. */
static void assert_store_intact(const char *data)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/hamel.db", data);
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    cr_assert_eq(rc, SQLITE_OK, "open %s: %s", path, db ? sqlite3_errmsg(db) : "?");
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL);
    cr_assert_eq(rc, SQLITE_OK, "%s", sqlite3_errmsg(db));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    char verdict[256];
    snprintf(verdict, sizeof verdict, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    cr_assert_str_eq(verdict, "ok", "integrity_check of %s", path);
}

/* kill -9 while results are being written: every job the server had answered "done"
 * is still done after a restart, with the same trajectory, and the database passes
 * SQLite's integrity check (once after the kill, before any process opens it, and again
 * after the restarted server has rolled its WAL forward). */
SERVER_TEST(server, kill_during_a_burst_loses_no_answered_result)
{
    char data[PATH_MAX];
    snprintf(data, sizeof data, "%s/burst", srv.dir);
    harness_server first, second;
    restart_on(data, &first);
    harness_server saved = srv;
    srv = first;

    json_t *rolling = load_case("greenwood-5.3-rolling-disk.json");
    CURLM *multi = curl_multi_init();
    CURL *h[CRASH_JOBS];
    harness_resp rs[CRASH_JOBS];
    struct curl_slist *lists[CRASH_JOBS];
    char *bodies[CRASH_JOBS];
    for (int i = 0; i < CRASH_JOBS; i++) {
        json_t *req = json_deep_copy(json_object_get(rolling, "simulation"));
        json_object_set(req, "model", json_object_get(rolling, "model"));
        /* distinct requests (Omega varies), each one computed and written */
        json_object_set_new(json_object_get(json_object_get(req, "initial"), "speeds"), "Omega",
                            json_real(4.0 + 0.01 * i));
        json_object_set_new(req, "output", json_pack("{s:i}", "samples", 501));
        bodies[i] = dump(req);
        json_decref(req);
        h[i] = harness_easy(&srv, "POST", "/v1/simulations?wait=" TEST_WAIT, bodies[i], -1, NULL, &lists[i],
                            &rs[i]);
        curl_multi_add_handle(multi, h[i]);
    }
    int still = 0, answered = 0;
    do {
        curl_multi_perform(multi, &still);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left)))
            if (msg->msg == CURLMSG_DONE && msg->data.result == CURLE_OK)
                answered++;
        if (answered >= CRASH_AFTER)
            break;
        curl_multi_poll(multi, NULL, 0, 5, NULL);
    } while (still);
    kill(first.pid, SIGKILL);
    waitpid(first.pid, NULL, 0);
    first.pid = 0;
    cr_assert_geq(answered, CRASH_AFTER, "answers before the kill");
    cr_assert_lt(answered, CRASH_JOBS, "the kill came while jobs were still running");

    /* Collect what had been answered "done" before the kill. */
    char ids[CRASH_JOBS][64];
    json_t *trajectories[CRASH_JOBS] = {0};
    int done = 0;
    for (int i = 0; i < CRASH_JOBS; i++) {
        curl_multi_remove_handle(multi, h[i]);
        long code = 0;
        curl_easy_getinfo(h[i], CURLINFO_RESPONSE_CODE, &code);
        if (code == 200) {
            harness_finish(h[i], &rs[i]);
            if (rs[i].json && !strcmp(str(rs[i].json, "status"), "done")) {
                snprintf(ids[done], sizeof ids[done], "%s", str(rs[i].json, "job_id"));
                trajectories[done] = json_incref(json_object_get(rs[i].json, "trajectory"));
                done++;
            }
        }
        curl_easy_cleanup(h[i]);
        curl_slist_free_all(lists[i]);
        harness_resp_free(&rs[i]);
        free(bodies[i]);
    }
    curl_multi_cleanup(multi);
    cr_assert_geq(done, CRASH_AFTER, "%d jobs were answered done", done);
    assert_store_intact(data);

    restart_on(data, &second);
    srv = second;
    for (int i = 0; i < done; i++) {
        char path[128];
        snprintf(path, sizeof path, "/v1/jobs/%s", ids[i]);
        harness_resp g = request("GET", path, NULL, NULL);
        cr_assert_eq(g.status, 200, "job %s answered done before kill -9: %s", ids[i], g.body);
        cr_assert_str_eq(str(g.json, "status"), "done", "job %s", ids[i]);
        cr_assert(json_equal(json_object_get(g.json, "trajectory"), trajectories[i]),
                  "job %s: the same trajectory after the restart", ids[i]);
        harness_resp_free(&g);
        json_decref(trajectories[i]);
    }
    harness_resp r = request("GET", "/readyz", NULL, NULL);
    cr_assert_eq(r.status, 200, "the restarted server is ready");
    harness_resp_free(&r);
    stop_checked(&second);
    assert_store_intact(data);
    harness_stop(&first);
    srv = saved;
    json_decref(rolling);
}

/* The store keeps at most HAMEL_STORE_BYTES of results and HAMEL_STORE_JOBS job records,
 * dropping the oldest: after 30 distinct runs the disk holds what fits, a job whose
 * result was dropped answers 410 gone after a restart (its record says it was done),
 * a recent one still answers 200, and posting the dropped request again computes it. */
Test(server, the_store_keeps_within_its_limits)
{
    char data[PATH_MAX], setting[PATH_MAX + 16];
    snprintf(data, sizeof data, "%s/bounded", srv.dir);
    snprintf(setting, sizeof setting, "HAMEL_DATA=%s", data);
    const char *const env[] = {setting, "HAMEL_STORE_BYTES=20000", "HAMEL_STORE_JOBS=24", "HAMEL_MAX_JOBS=16",
                               NULL};
    harness_server saved = srv, a, b;
    cr_assert_eq(harness_start(&a, env), 0, "the server did not start (log above)");
    srv = a;
    enum { RUNS = 30 };
    char ids[RUNS][64];
    json_t *reqs[RUNS];
    for (int i = 0; i < RUNS; i++) {
        reqs[i] = knife_request();
        json_object_set_new(json_object_get(reqs[i], "integrator"), "rtol", json_real(1e-10 * (1 + i)));
        harness_resp r = post_json("/v1/simulations?wait=" TEST_WAIT, reqs[i]);
        cr_assert_eq(r.status, 200, "run %d: %s", i, r.body);
        snprintf(ids[i], sizeof ids[i], "%s", str(r.json, "job_id"));
        harness_resp_free(&r);
    }
    /* the last result's commit follows its answer (server/store.c: the results journal):
     * the counts settle once it is in */
    double bytes = metric("hamel_store_result_bytes"), results = metric("hamel_store_results");
    for (int i = 0; i < 100; i++) {
        usleep(50 * 1000);
        double b2 = metric("hamel_store_result_bytes"), r2 = metric("hamel_store_results");
        if (b2 == bytes && r2 == results)
            break;
        bytes = b2;
        results = r2;
    }
    double jobs = metric("hamel_store_jobs");
    cr_assert(bytes > 0 && bytes <= 20000, "result bytes kept: %g", bytes);
    cr_assert(results > 0 && results < RUNS, "results kept: %g of %d", results, RUNS);
    cr_assert(jobs > 0 && jobs <= 24, "job records kept: %g", jobs);
    stop_checked(&srv);
    assert_store_intact(data);

    cr_assert_eq(harness_start(&b, env), 0, "the server did not restart (log above)");
    srv = b;
    cr_assert_eq(metric("hamel_store_result_bytes"), bytes, "the restart counts the same bytes");
    char path[128];
    int dropped = RUNS - (int)results - 1; /* the newest `results` runs kept their result */
    cr_assert_geq(dropped, RUNS - (int)jobs, "a run without a result but with a record (%g kept)", jobs);
    snprintf(path, sizeof path, "/v1/jobs/%s", ids[dropped]);
    harness_resp r = request("GET", path, NULL, NULL);
    cr_assert_eq(r.status, 410, "a dropped result: %s", r.body);
    assert_problem(&r, 410, "gone");
    harness_resp_free(&r);
    snprintf(path, sizeof path, "/v1/jobs/%s", ids[RUNS - 1]);
    r = request("GET", path, NULL, NULL);
    cr_assert_eq(r.status, 200, "the newest result is kept: %s", r.body);
    cr_assert_str_eq(str(r.json, "status"), "done");
    harness_resp_free(&r);
    r = post_json("/v1/simulations?wait=" TEST_WAIT, reqs[dropped]);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert(json_is_false(json_object_get(r.json, "cached")), "computed again");
    harness_resp_free(&r);
    stop_checked(&srv);
    assert_store_intact(data);
    for (int i = 0; i < RUNS; i++)
        json_decref(reqs[i]);
    srv = saved;
}
