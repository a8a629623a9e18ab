/* test_batch.c — POST /v1/batches against the real hamel-server.
 *
 * Each test starts its own build/hamel-server (harness.h: an ephemeral loopback
 * port, a fresh HAMEL_DATA) and talks to it with libcurl. The runs vary the initial spin
 * Omega of the shared rolling-disk case (greenwood-5.3); a run's line is checked against
 * a single POST /v1/simulations of the same request, which must give the identical final
 * state (bit for bit: same engine, same request, JSON numbers printed with 17 digits).
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

#define ROLLING_CASE "greenwood-5.3-rolling-disk.json"
#define STREAM_RUNS 200
#define DRIFT_TOL 1e-8      /* energy drift and constraint residual of each run, relative */
#define CANCEL_BUDGET_S 1.0 /* DELETE to every run stopped, with HTTP round trips */

static harness_server bsrv;
static json_t *rolling; /* the case file */

static void bstart(const char *const *env)
{
    cr_assert_eq(harness_start(&bsrv, env), 0, "the server did not start (log above)");
    char path[PATH_MAX];
    json_error_t err;
    rolling = harness_case_load(ROLLING_CASE, path, sizeof path, &err);
    cr_assert(rolling, "cannot load %s: %s", path, err.text);
}

static void setup_default(void)
{
    static const char *const env[] = {"HAMEL_MAX_WALL=30", "HAMEL_MAX_BATCH=300", "HAMEL_ACCESS_LOG=0", NULL};
    bstart(env);
}

static void setup_small_pool(void)
{
    static const char *const env[] = {"HAMEL_WORKERS=1",    "HAMEL_QUEUE=4",           "HAMEL_MAX_WALL=30",
                                      "HAMEL_ACCESS_LOG=0", "HAMEL_DRAIN_SECONDS=0.2", NULL};
    bstart(env);
}

static void setup_two_workers(void)
{
    static const char *const env[] = {"HAMEL_WORKERS=2",    "HAMEL_QUEUE=8",           "HAMEL_MAX_WALL=30",
                                      "HAMEL_ACCESS_LOG=0", "HAMEL_DRAIN_SECONDS=0.2", NULL};
    bstart(env);
}

/* SIGTERM and the exit status: a server that does not drain to exit 0 (a crash, a hang,
 * a LeakSanitizer report in the build-san/ servers) fails the test, with its log. Called
 * at the end of a test body (Criterion ignores failures in .fini). */
static void bstop_checked(void)
{
    int status;
    int clean = harness_stop_checked(&bsrv, &status);
    cr_assert(clean, "the server did not exit 0 on SIGTERM (wait status %#x; log above)", status);
}

static void bteardown(void)
{
    harness_stop(&bsrv);
    json_decref(rolling);
    rolling = NULL;
}

/* One request; `accept` may be NULL. The body (if any) is sent as application/json. */
static harness_resp breq(const char *method, const char *path, const char *body, const char *accept)
{
    char a[128];
    snprintf(a, sizeof a, "Accept: %s", accept ? accept : "");
    const char *const hdrs[] = {accept ? a : NULL, NULL};
    harness_resp r;
    CURLcode rc = harness_request(&bsrv, method, path, body, hdrs, &r);
    cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, path, curl_easy_strerror(rc));
    return r;
}

static harness_resp bpost(const char *path, const json_t *body, const char *accept)
{
    char *text = json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(17));
    harness_resp r = breq("POST", path, text, accept);
    free(text);
    return r;
}

static const char *bstr(const json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

static long long bint(const json_t *j, const char *key)
{
    return json_integer_value(json_object_get(j, key));
}

/* A metric's value from /metrics (the line starting with `series`), or -1. */
static double bmetric(const char *series)
{
    harness_resp r = breq("GET", "/metrics", NULL, NULL);
    double v = harness_metric(&r, series);
    harness_resp_free(&r);
    return v;
}

/* The initial spin of run k. */
static double omega_of(size_t k) { return 0.5 + 0.05 * (double)k; }

/* {"model", "base": the case's simulation (with t_end), "runs": n spins} */
static json_t *sweep(size_t n, double t_end)
{
    json_t *base = json_deep_copy(json_object_get(rolling, "simulation"));
    json_object_set_new(base, "t_end", json_real(t_end));
    json_t *runs = json_array();
    for (size_t k = 0; k < n; k++)
        json_array_append_new(runs, json_pack("{s:{s:{s:f}}}", "initial", "speeds", "Omega", omega_of(k)));
    return json_pack("{s:O, s:o, s:o}", "model", json_object_get(rolling, "model"), "base", base, "runs",
                     runs);
}

/* A run that keeps the integrator busy until cancelled (the disk keeps oscillating). */
static json_t *long_sweep(size_t n)
{
    json_t *b = sweep(n, 1e6);
    json_t *base = json_object_get(b, "base");
    json_object_set_new(base, "output", json_pack("{s:i}", "samples", 2));
    json_object_set_new(json_object_get(base, "integrator"), "max_steps", json_integer(1000000000));
    return b;
}

/* The single simulation request equal to run k of batch b: the base with the run's spin. */
static json_t *single_of(const json_t *b, size_t k)
{
    json_t *req = json_deep_copy(json_object_get(b, "base"));
    json_object_set_new(json_object_get(json_object_get(req, "initial"), "speeds"), "Omega",
                        json_real(omega_of(k)));
    json_object_set(req, "model", json_object_get(b, "model"));
    return req;
}

/* Every number of a final state group must be identical (==) in both. */
static void assert_same_group(const json_t *line_final, const json_t *traj, const char *group, size_t k)
{
    json_t *want = json_object_get(traj, group);
    json_t *got = json_object_get(line_final, group);
    cr_assert(json_object_size(want) > 0, "run %zu: the single simulation has %s", k, group);
    const char *name;
    json_t *series;
    json_object_foreach(want, name, series)
    {
        double w = json_number_value(json_array_get(series, json_array_size(series) - 1));
        json_t *g = json_object_get(got, name);
        cr_assert(json_is_number(g), "run %zu: the line's final.%s.%s is a number", k, group, name);
        cr_assert(json_number_value(g) == w, "run %zu: final.%s.%s = %.17g in the batch, %.17g alone", k,
                  group, name, json_number_value(g), w);
    }
}

static void assert_line_matches_single(const json_t *line, const json_t *result, size_t k)
{
    json_t *fin = json_object_get(line, "final");
    json_t *tr = json_object_get(result, "trajectory");
    json_t *t = json_object_get(tr, "t");
    cr_assert(json_number_value(json_object_get(fin, "t")) ==
                  json_number_value(json_array_get(t, json_array_size(t) - 1)),
              "run %zu: final.t", k);
    assert_same_group(fin, tr, "q", k);
    assert_same_group(fin, tr, "speeds", k);
    assert_same_group(fin, tr, "qdot", k);
}

/* Physics of one done line: energy conserved, constraints held. */
static void assert_line_sound(const json_t *line, size_t k)
{
    json_t *checks = json_object_get(line, "checks");
    double drift = json_number_value(json_object_get(json_object_get(checks, "energy"), "max_rel_drift"));
    double resid =
        json_number_value(json_object_get(json_object_get(checks, "constraints"), "max_abs_residual"));
    cr_assert(json_is_object(checks), "run %zu carries checks", k);
    cr_assert(isfinite(drift) && drift < DRIFT_TOL, "run %zu: energy drift %.3g >= %.1g", k, drift,
              DRIFT_TOL);
    cr_assert(isfinite(resid) && resid < DRIFT_TOL, "run %zu: constraint residual %.3g", k, resid);
    cr_assert(!json_object_get(json_object_get(checks, "energy"), "values"),
              "run %zu: the per-sample series stay out of a line without trajectory", k);
    cr_assert(json_is_object(json_object_get(line, "stats")), "run %zu carries stats", k);
    cr_assert(!json_object_get(line, "trajectory"), "run %zu: no trajectory unless asked", k);
    double omega = json_number_value(
        json_object_get(json_object_get(json_object_get(line, "final"), "speeds"), "Omega"));
    cr_assert(isfinite(omega), "run %zu: final.speeds.Omega", k);
}

/* Splits an NDJSON body into parsed lines (a new array). */
static json_t *ndjson_lines(const char *body)
{
    json_t *out = json_array();
    const char *p = body;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        cr_assert(nl, "every NDJSON line ends with a newline: %.80s", p);
        json_error_t err;
        json_t *j = json_loadb(p, (size_t)(nl - p), 0, &err);
        cr_assert(json_is_object(j), "an NDJSON line is a JSON object (%s): %.200s", err.text, p);
        json_array_append_new(out, j);
        p = nl + 1;
    }
    return out;
}

TestSuite(batch, .init = setup_default, .fini = bteardown, .timeout = 300);

Test(batch, two_hundred_rolling_disk_runs_streamed_as_ndjson)
{
    json_t *b = sweep(STREAM_RUNS, 5.0);
    harness_resp r = bpost("/v1/batches", b, "application/x-ndjson");
    char ct[128], loc[128], bid[64];
    cr_assert_eq(r.status, 200, "a streamed batch is 200: %.300s", r.body ? r.body : "");
    cr_assert(harness_header(&r, "Content-Type", ct, sizeof ct) && strstr(ct, "application/x-ndjson"), "%s",
              ct);
    cr_assert(harness_header(&r, "Location", loc, sizeof loc) && !strncmp(loc, "/v1/batches/", 12),
              "Location %s", loc);
    cr_assert(harness_header(&r, "X-Batch-Id", bid, sizeof bid) && !strcmp(bid, loc + 12), "X-Batch-Id %s",
              bid);

    json_t *lines = ndjson_lines(r.body);
    cr_assert_eq(json_array_size(lines), STREAM_RUNS, "exactly one line per run: %zu",
                 json_array_size(lines));
    static int seen[STREAM_RUNS];
    memset(seen, 0, sizeof seen);
    json_t *by_index[STREAM_RUNS] = {0};
    size_t i;
    json_t *line;
    json_array_foreach(lines, i, line)
    {
        json_t *ix = json_object_get(line, "index");
        cr_assert(json_is_integer(ix), "line %zu has an integer index", i);
        long long k = json_integer_value(ix);
        cr_assert(k >= 0 && k < STREAM_RUNS, "index %lld in range", k);
        cr_assert_eq(seen[k], 0, "index %lld appears once", k);
        seen[k] = 1;
        by_index[k] = line;
        cr_assert_str_eq(bstr(line, "status"), "done", "run %lld: %s", k, json_dumps(line, JSON_COMPACT));
        cr_assert(bstr(line, "job_id"), "run %lld names its job", k);
        assert_line_sound(line, (size_t)k);
    }

    /* Each line is its run: three of them against single simulations computed afresh
     * ("hamel": "none" gives another cache key but the same integration), then the exact
     * request, which the batch has put in the result cache. */
    static const size_t probe[] = {0, 101, STREAM_RUNS - 1};
    for (size_t p = 0; p < sizeof probe / sizeof probe[0]; p++) {
        size_t k = probe[p];
        json_t *req = single_of(b, k);
        json_object_set_new(req, "hamel", json_string("none"));
        harness_resp s = bpost("/v1/simulations?wait=60", req, NULL);
        cr_assert_eq(s.status, 200, "single run %zu: %.300s", k, s.body);
        cr_assert(json_is_false(json_object_get(s.json, "cached")), "run %zu alone was computed, not cached",
                  k);
        assert_line_matches_single(by_index[k], s.json, k);
        harness_resp_free(&s);
        json_object_del(req, "hamel");
        json_object_set(req, "hamel", json_object_get(json_object_get(rolling, "simulation"), "hamel"));
        s = bpost("/v1/simulations?wait=60", req, NULL);
        cr_assert_eq(s.status, 200);
        cr_assert(json_is_true(json_object_get(s.json, "cached")), "run %zu: same key as a single simulation",
                  k);
        cr_assert_str_eq(bstr(s.json, "job_id"), bstr(by_index[k], "job_id"), "run %zu: the batch's job", k);
        assert_line_matches_single(by_index[k], s.json, k);
        harness_resp_free(&s);
        json_decref(req);
    }

    /* The record: done, every run counted; metrics by outcome. */
    char path[128];
    snprintf(path, sizeof path, "/v1/batches/%s", bid);
    harness_resp g = breq("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200);
    cr_assert_str_eq(bstr(g.json, "status"), "done");
    cr_assert_eq(bint(g.json, "count"), STREAM_RUNS);
    cr_assert_eq(bint(g.json, "succeeded"), STREAM_RUNS);
    cr_assert_eq(json_array_size(json_object_get(g.json, "results")), STREAM_RUNS);
    harness_resp_free(&g);
    cr_assert_eq(bmetric("hamel_batches_total{outcome=\"done\"}"), 1);
    cr_assert_eq(bmetric("hamel_batch_runs_total{outcome=\"done\"}"), STREAM_RUNS);

    /* Again, with ?stream=1 and a summary line: every run from the cache. */
    harness_resp again = bpost("/v1/batches?stream=1&summary=1", b, NULL);
    cr_assert_eq(again.status, 200);
    json_t *l2 = ndjson_lines(again.body);
    cr_assert_eq(json_array_size(l2), STREAM_RUNS + 1, "runs and the summary line");
    json_t *sum = json_array_get(l2, STREAM_RUNS);
    cr_assert(json_is_true(json_object_get(sum, "done")), "the last line is the summary");
    cr_assert_eq(bint(sum, "count"), STREAM_RUNS);
    cr_assert_eq(bint(sum, "cached"), STREAM_RUNS, "a repeated run is answered from the cache");
    cr_assert_eq(bint(sum, "failed"), 0);
    json_array_foreach(l2, i, line)
    {
        if (i == STREAM_RUNS)
            break;
        long long k = bint(line, "index");
        cr_assert(json_is_true(json_object_get(line, "cached")), "run %lld cached", k);
        cr_assert(json_equal(json_object_get(line, "final"), json_object_get(by_index[k], "final")),
                  "run %lld: the cached final state is identical", k);
    }
    json_decref(l2);
    harness_resp_free(&again);
    json_decref(lines);
    harness_resp_free(&r);
    json_decref(b);
    bstop_checked();
}

Test(batch, whole_result_in_index_order)
{
    json_t *b = sweep(12, 2.0);
    json_object_set_new(b, "fields", json_pack("[s,s,s]", "run", "final", "trajectory"));
    harness_resp r = bpost("/v1/batches", b, NULL);
    cr_assert_eq(r.status, 202, "without wait: 202 (%ld) %.200s", r.status, r.body);
    char loc[128];
    cr_assert(harness_header(&r, "Location", loc, sizeof loc), "202 has Location");
    cr_assert_str_eq(loc + 12, bstr(r.json, "batch_id"));
    harness_resp_free(&r);

    char path[256];
    snprintf(path, sizeof path, "%s?wait=120", loc);
    harness_resp g = breq("GET", path, NULL, NULL);
    cr_assert_eq(g.status, 200);
    cr_assert_str_eq(bstr(g.json, "status"), "done", "%.300s", g.body);
    cr_assert_eq(json_number_value(json_object_get(g.json, "progress")), 1.0);
    cr_assert_eq(bint(g.json, "finished"), 12);
    json_t *res = json_object_get(g.json, "results");
    cr_assert_eq(json_array_size(res), 12, "results for every run");
    for (size_t k = 0; k < 12; k++) {
        json_t *line = json_array_get(res, k);
        cr_assert_eq(bint(line, "index"), (long long)k, "results are in index order");
        cr_assert_str_eq(bstr(line, "status"), "done");
        double w = json_number_value(json_object_get(
            json_object_get(json_object_get(json_object_get(line, "run"), "initial"), "speeds"), "Omega"));
        cr_assert(fabs(w - omega_of(k)) < 1e-15, "run %zu echoes its own run object (Omega %g)", k, w);
        json_t *tr = json_object_get(line, "trajectory");
        cr_assert_eq(json_array_size(json_object_get(tr, "t")), 11, "run %zu: the full trajectory on request",
                     k);
        cr_assert(!json_object_get(line, "stats") && !json_object_get(line, "checks"),
                  "only the fields asked for");
        double w0 =
            json_number_value(json_array_get(json_object_get(json_object_get(tr, "speeds"), "Omega"), 0));
        cr_assert(fabs(w0 - omega_of(k)) < 1e-12, "run %zu started at its own Omega (%g)", k, w0);
    }
    /* One against a single simulation of the same request. */
    json_t *req = single_of(b, 7);
    json_object_set_new(req, "hamel", json_string("none"));
    harness_resp s = bpost("/v1/simulations?wait=60", req, NULL);
    cr_assert_eq(s.status, 200);
    assert_line_matches_single(json_array_get(res, 7), s.json, 7);
    harness_resp_free(&s);
    json_decref(req);
    harness_resp_free(&g);

    /* POST with ?wait: 200 with the results at once (all cached now). */
    r = bpost("/v1/batches?wait=60", b, NULL);
    cr_assert_eq(r.status, 200, "%.200s", r.body);
    cr_assert_eq(bint(r.json, "cached"), 12);
    cr_assert_eq(json_array_size(json_object_get(r.json, "results")), 12);
    harness_resp_free(&r);

    /* Unknown ids, methods. */
    g = breq("GET", "/v1/batches/0123456789abcdef0123456789abcdef", NULL, NULL);
    cr_assert_eq(g.status, 404);
    harness_resp_free(&g);
    g = breq("GET", "/v1/batches", NULL, NULL);
    cr_assert_eq(g.status, 405);
    harness_resp_free(&g);
    json_decref(b);
    bstop_checked();
}

static void assert_problem_path(const harness_resp *r, long status, const char *path)
{
    char ct[128];
    cr_assert_eq(r->status, status, "status %ld, expected %ld: %.400s", r->status, status, r->body);
    cr_assert(harness_header(r, "Content-Type", ct, sizeof ct) && strstr(ct, "application/problem+json"),
              "%s", ct);
    json_t *errs = json_object_get(r->json, "errors");
    size_t i;
    json_t *e;
    json_array_foreach(errs, i, e) if (!strcmp(bstr(e, "path"), path)) return;
    cr_assert_fail("no error at %s in %s", path, r->body);
}

Test(batch, a_bad_run_is_422_naming_its_index_and_nothing_runs)
{
    json_t *b = sweep(10, 1.0);
    json_object_set_new(
        json_object_get(json_object_get(json_array_get(json_object_get(b, "runs"), 7), "initial"), "speeds"),
        "Omega", json_string("fast"));
    harness_resp r = bpost("/v1/batches", b, "application/x-ndjson");
    assert_problem_path(&r, 422, "runs[7].initial.speeds.Omega");
    cr_assert_eq(bint(r.json, "run_index"), 7);
    harness_resp_free(&r);

    /* A run whose merged request breaks a constraint of the engine: t_end before t. */
    json_object_set_new(json_array_get(json_object_get(b, "runs"), 7), "initial",
                        json_pack("{s:f}", "t", 0.0));
    json_object_set_new(json_array_get(json_object_get(b, "runs"), 3), "t_end", json_real(-1));
    r = bpost("/v1/batches", b, NULL);
    assert_problem_path(&r, 422, "runs[3].t_end");
    harness_resp_free(&r);
    json_object_del(json_array_get(json_object_get(b, "runs"), 3), "t_end");

    /* The same mistake in the base is reported once, at base.<path>. */
    json_object_set_new(json_object_get(b, "base"), "t_end", json_real(-1));
    r = bpost("/v1/batches", b, NULL);
    assert_problem_path(&r, 422, "base.t_end");
    cr_assert_eq(json_array_size(json_object_get(r.json, "errors")), 1, "one error for ten runs: %s", r.body);
    harness_resp_free(&r);
    json_object_set_new(json_object_get(b, "base"), "t_end", json_real(1));

    /* Shape errors. */
    json_object_set_new(b, "fields", json_pack("[s,s]", "final", "bogus"));
    r = bpost("/v1/batches", b, NULL);
    assert_problem_path(&r, 422, "fields[1]");
    harness_resp_free(&r);
    json_object_del(b, "fields");
    json_object_set_new(json_array_get(json_object_get(b, "runs"), 2), "model_id", json_string("sha256:00"));
    r = bpost("/v1/batches", b, NULL);
    assert_problem_path(&r, 422, "runs[2].model_id");
    harness_resp_free(&r);
    json_object_set_new(b, "runs", json_array());
    r = bpost("/v1/batches", b, NULL);
    assert_problem_path(&r, 422, "runs");
    harness_resp_free(&r);
    json_decref(b);

    /* More runs than HAMEL_MAX_BATCH (300 here). */
    b = sweep(301, 1.0);
    r = bpost("/v1/batches", b, NULL);
    assert_problem_path(&r, 422, "runs");
    cr_assert(strstr(bstr(r.json, "type"), "limit-exceeded"), "%s", bstr(r.json, "type"));
    harness_resp_free(&r);
    json_decref(b);

    cr_assert_eq(bmetric("hamel_batches_total{outcome=\"created\"}"), 0, "no invalid batch was created");
    cr_assert_eq(bmetric("hamel_batches_total{outcome=\"invalid\"}"), 7);
    cr_assert_eq(bmetric("hamel_jobs_total{outcome=\"done\"}"), 0, "nothing ran");
    r = breq("GET", "/v1/health", NULL, NULL);
    cr_assert_eq(r.status, 200, "the server is still up");
    harness_resp_free(&r);
    bstop_checked();
}

/* Events over HTTP: a single simulation with a stop event returns `events` and
 * `stopped_by`, its trajectory ending at the event; a batch carries events through its
 * merge (the base's, or a run's own replacing them) into each line; a bad event in one
 * run is a 422 naming runs[i].events[0].expr. */
Test(batch, events_over_http_single_and_batch)
{
    json_t *b = sweep(3, 3.0);
    json_t *base = json_object_get(b, "base");
    json_object_set_new(base, "events",
                        json_pack("[{s:s, s:s, s:s, s:s}]", "name", "low", "expr", "theta - 1", "direction",
                                  "falling", "action", "stop"));
    json_t *req = single_of(b, 1);
    harness_resp s = bpost("/v1/simulations?wait=60", req, NULL);
    cr_assert_eq(s.status, 200, "%.400s", s.body);
    json_t *ev = json_object_get(s.json, "events");
    cr_assert_eq(json_array_size(ev), 1, "one stop event: %.400s", s.body);
    cr_assert_str_eq(bstr(json_array_get(ev, 0), "name"), "low");
    cr_assert_str_eq(bstr(s.json, "stopped_by"), "low");
    double te = json_number_value(json_object_get(json_array_get(ev, 0), "t"));
    json_t *ts = json_object_get(json_object_get(s.json, "trajectory"), "t");
    cr_assert(te > 0 && te < 3.0, "stopped inside the run at %g", te);
    cr_assert_eq(json_number_value(json_array_get(ts, json_array_size(ts) - 1)), te,
                 "last sample at the event");
    double th = json_number_value(json_object_get(json_object_get(json_array_get(ev, 0), "q"), "theta"));
    cr_assert(fabs(th - 1) < 1e-12, "theta %.17g at the event", th);
    harness_resp_free(&s);
    json_decref(req);

    /* run 2 records crossings of its own event instead of stopping */
    json_object_set_new(json_array_get(json_object_get(b, "runs"), 2), "events",
                        json_pack("[{s:s, s:s}]", "name", "cross", "expr", "theta - 1"));
    harness_resp r = bpost("/v1/batches?wait=120", b, NULL);
    cr_assert_eq(r.status, 200, "%.300s", r.body);
    json_t *res = json_object_get(r.json, "results");
    cr_assert_eq(json_array_size(res), 3);
    for (size_t k = 0; k < 3; k++) {
        json_t *line = json_array_get(res, k);
        cr_assert_str_eq(bstr(line, "status"), "done", "%.300s", r.body);
        json_t *lev = json_object_get(line, "events");
        cr_assert(json_array_size(lev) >= 1, "run %zu: its events in the line", k);
        if (k < 2) {
            cr_assert_str_eq(bstr(line, "stopped_by"), "low", "run %zu", k);
            cr_assert_eq(json_number_value(json_object_get(json_object_get(line, "final"), "t")),
                         json_number_value(json_object_get(json_array_get(lev, 0), "t")),
                         "run %zu: the final state is at the event", k);
        } else {
            cr_assert_null(json_object_get(line, "stopped_by"), "run 2 only records");
            cr_assert_str_eq(bstr(json_array_get(lev, 0), "name"), "cross");
            cr_assert_eq(json_number_value(json_object_get(json_object_get(line, "final"), "t")), 3.0);
        }
    }
    harness_resp_free(&r);

    json_object_set_new(json_array_get(json_object_get(b, "runs"), 1), "events",
                        json_pack("[{s:s, s:s}]", "name", "bad", "expr", "theta - nope"));
    r = bpost("/v1/batches", b, NULL);
    assert_problem_path(&r, 422, "runs[1].events[0].expr");
    harness_resp_free(&r);
    json_decref(b);
    bstop_checked();
}

TestSuite(batch_two_workers, .init = setup_two_workers, .fini = bteardown, .timeout = 300);

/* Runs in the pool: the running-jobs gauge. */
static double running(void) { return bmetric("hamel_jobs_running"); }

Test(batch_two_workers, delete_cancels_every_run)
{
    json_t *b = long_sweep(10);
    harness_resp r = bpost("/v1/batches", b, NULL);
    cr_assert_eq(r.status, 202, "%.200s", r.body);
    char path[128];
    snprintf(path, sizeof path, "/v1/batches/%s", bstr(r.json, "batch_id"));
    harness_resp_free(&r);
    for (int i = 0; i < 500 && running() < 2; i++)
        harness_nap(10);
    cr_assert_eq(running(), 2, "both workers run the batch");
    r = breq("GET", path, NULL, NULL);
    cr_assert_str_eq(bstr(r.json, "status"), "running");
    cr_assert(bint(r.json, "queued_or_running") <= 4, "at most half the queue (8) in flight: %lld",
              bint(r.json, "queued_or_running"));
    harness_resp_free(&r);

    double t0 = harness_now();
    r = breq("DELETE", path, NULL, NULL);
    cr_assert_eq(r.status, 200, "%.200s", r.body);
    cr_assert_str_eq(bstr(r.json, "status"), "cancelled");
    cr_assert_eq(bint(r.json, "cancelled"), 10, "%.300s", r.body);
    cr_assert(!json_object_get(r.json, "results"), "DELETE answers with the status only");
    harness_resp_free(&r);
    while (running() > 0 && harness_now() - t0 < 5)
        harness_nap(5);
    double dt = harness_now() - t0;
    cr_assert(dt < CANCEL_BUDGET_S, "the running runs stopped %.3f s after DELETE", dt);

    /* The stream of a cancelled batch: one line per run, all cancelled. */
    char spath[160];
    snprintf(spath, sizeof spath, "%s?stream=1", path);
    r = breq("GET", spath, NULL, NULL);
    cr_assert_eq(r.status, 200);
    json_t *lines = ndjson_lines(r.body);
    cr_assert_eq(json_array_size(lines), 10);
    size_t i;
    json_t *line;
    json_array_foreach(lines, i, line)
    {
        cr_assert_str_eq(bstr(line, "status"), "cancelled");
        cr_assert(strstr(bstr(json_object_get(line, "problem"), "type"), "cancelled"));
    }
    json_decref(lines);
    harness_resp_free(&r);
    r = breq("DELETE", path, NULL, NULL);
    cr_assert_eq(r.status, 200, "cancelling again is harmless");
    harness_resp_free(&r);
    cr_assert_eq(bmetric("hamel_batches_total{outcome=\"cancelled\"}"), 1);
    cr_assert_eq(bmetric("hamel_batch_runs_total{outcome=\"cancelled\"}"), 10);

    /* A finished batch cannot be cancelled. */
    json_decref(b);
    b = sweep(2, 0.5);
    r = bpost("/v1/batches?wait=60", b, NULL);
    cr_assert_eq(r.status, 200);
    snprintf(path, sizeof path, "/v1/batches/%s", bstr(r.json, "batch_id"));
    harness_resp_free(&r);
    r = breq("DELETE", path, NULL, NULL);
    cr_assert_eq(r.status, 409, "%.200s", r.body);
    harness_resp_free(&r);
    json_decref(b);
    bstop_checked();
}

/* Short runs go to the workers in blocks of many: a DELETE in the middle stops the
 * running blocks, drops the queued ones and answers once every run is counted. */
Test(batch_two_workers, delete_amid_blocks_counts_every_run)
{
    enum { N = 6000 };
    json_t *b = sweep(N, 1.0);
    harness_resp r = bpost("/v1/batches", b, NULL);
    cr_assert_eq(r.status, 202, "%.200s", r.body);
    char path[128];
    snprintf(path, sizeof path, "/v1/batches/%s", bstr(r.json, "batch_id"));
    harness_resp_free(&r);
    long long finished = 0;
    for (int i = 0; i < 2000 && finished < 20; i++) {
        harness_nap(5);
        r = breq("GET", path, NULL, NULL);
        finished = bint(r.json, "finished");
        harness_resp_free(&r);
    }
    cr_assert(finished >= 20 && finished < N, "some runs finished, not all (%lld)", finished);
    r = breq("DELETE", path, NULL, NULL);
    cr_assert_eq(r.status, 200, "%.200s", r.body);
    cr_assert_str_eq(bstr(r.json, "status"), "cancelled");
    cr_assert_eq(bint(r.json, "finished"), N, "every run counted when DELETE answers: %.300s", r.body);
    cr_assert_eq(bint(r.json, "queued_or_running"), 0, "%.300s", r.body);
    cr_assert_eq(bint(r.json, "succeeded") + bint(r.json, "cancelled") + bint(r.json, "failed"), N);
    cr_assert(bint(r.json, "cancelled") > 0 && bint(r.json, "failed") == 0, "%.300s", r.body);
    harness_resp_free(&r);

    /* every run has its line; a done run's job is kept like any other */
    char spath[160];
    snprintf(spath, sizeof spath, "%s?stream=1", path);
    r = breq("GET", spath, NULL, NULL);
    json_t *lines = ndjson_lines(r.body);
    cr_assert_eq(json_array_size(lines), N);
    char job[80] = "";
    size_t i;
    json_t *line;
    json_array_foreach(lines, i, line)
    {
        if (!job[0] && !strcmp(bstr(line, "status"), "done"))
            snprintf(job, sizeof job, "/v1/jobs/%s", bstr(line, "job_id"));
    }
    json_decref(lines);
    harness_resp_free(&r);
    cr_assert(job[0], "a done line");
    r = breq("GET", job, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s: %.200s", job, r.body);
    cr_assert_str_eq(bstr(r.json, "status"), "done");
    harness_resp_free(&r);
    cr_assert_eq(running(), 0, "nothing left running");
    json_decref(b);
    bstop_checked();
}

/* A stream read on its own thread, so the test can act while it runs. */
typedef struct stream_arg {
    const json_t *body;
    harness_resp r;
} stream_arg;

static void *stream_thread(void *p)
{
    stream_arg *a = p;
    char *text = json_dumps(a->body, JSON_COMPACT | JSON_REAL_PRECISION(17));
    static const char *const hdrs[] = {"Accept: application/x-ndjson", NULL};
    struct curl_slist *list;
    CURL *h = harness_easy(&bsrv, "POST", "/v1/batches?summary=1", text, -1, hdrs, &list, &a->r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(h);
    a->r.status = rc == CURLE_OK ? 0 : -(long)rc;
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->r.status);
    curl_easy_cleanup(h);
    curl_slist_free_all(list);
    free(text);
    return NULL;
}

Test(batch_two_workers, sigterm_ends_an_open_stream_cleanly)
{
    json_t *b = long_sweep(6);
    stream_arg a = {b, {0}};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, stream_thread, &a), 0);
    for (int i = 0; i < 500 && running() < 2; i++)
        harness_nap(10);
    cr_assert_eq(running(), 2, "the stream's runs are running");
    kill(bsrv.pid, SIGTERM);
    pthread_join(th, NULL);
    int status = 0;
    pid_t got = waitpid(bsrv.pid, &status, 0);
    bsrv.pid = 0;
    cr_assert(got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the server exits 0 (status %#x)",
              status);
    cr_assert_eq(a.r.status, 200, "the stream ended as a complete chunked response (%ld)", a.r.status);
    json_t *lines = ndjson_lines(a.r.body);
    cr_assert_eq(json_array_size(lines), 7, "six runs and the summary: %s", a.r.body);
    json_t *sum = json_array_get(lines, 6);
    cr_assert(json_is_true(json_object_get(sum, "done")));
    cr_assert_eq(bint(sum, "cancelled"), 6, "every run was cancelled by the shutdown");
    json_decref(lines);
    free(a.r.body);
    json_decref(b);
}

TestSuite(batch_small_pool, .init = setup_small_pool, .fini = bteardown, .timeout = 300);

Test(batch_small_pool, more_runs_than_the_queue_and_others_still_get_in)
{
    /* One worker, a queue of 4: a batch of 30 runs may hold at most 2 places. */
    json_t *b = sweep(30, 400.0);
    json_object_set_new(json_object_get(b, "base"), "output", json_pack("{s:i}", "samples", 3));
    harness_resp r = bpost("/v1/batches", b, NULL);
    cr_assert_eq(r.status, 202, "%.200s", r.body);
    char path[160];
    snprintf(path, sizeof path, "/v1/batches/%s?wait=120", bstr(r.json, "batch_id"));
    harness_resp_free(&r);

    double depth = bmetric("hamel_queue_depth");
    cr_assert(depth <= 2, "the batch holds at most half the queue (depth %g)", depth);
    /* Another user's simulation is queued beside the batch, not refused. */
    json_t *single = single_of(b, 0);
    json_object_set_new(single, "t_end", json_real(1.0));
    r = bpost("/v1/simulations?wait=120", single, NULL);
    cr_assert_eq(r.status, 200, "a single simulation during the batch: %ld %.200s", r.status, r.body);
    harness_resp_free(&r);
    json_decref(single);

    r = breq("GET", path, NULL, NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(bstr(r.json, "status"), "done", "%.300s", r.body);
    cr_assert_eq(bint(r.json, "succeeded"), 30, "%.300s", r.body);
    json_t *res = json_object_get(r.json, "results");
    for (size_t k = 0; k < 30; k++)
        assert_line_sound(json_array_get(res, k), k);
    harness_resp_free(&r);
    json_decref(b);
    bstop_checked();
}
