/* test_client.c — libhamelclient and `hamel remote` against the real hamel-server.
 *
 * Each test starts its own build/hamel-server on an ephemeral loopback port with a
 * temporary HAMEL_DATA (harness.h), talks to it through the library, and checks
 * the answers against the shared rolling-disk case (greenwood-5.3), whose samples pass
 * if |got - expected| <= abs + rel*|expected|.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hamelclient.h"

#define DISK_CASE "greenwood-5.3-rolling-disk.json"

static harness_server srv;
static hamelclient *cli;
static json_t *disk; /* the case file */

static json_t *load_case(const char *name)
{
    char path[PATH_MAX];
    json_error_t jerr;
    json_t *doc = harness_case_load(name, path, sizeof path, &jerr);
    cr_assert_not_null(doc, "cannot load %s: %s", path, jerr.text);
    return doc;
}

static void start_with(const char *const *env)
{
    unsetenv("HAMEL_TOKEN");
    unsetenv("HAMEL_URL");
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
    cr_assert_eq(hamelclient_new(srv.url, NULL, &cli), HAMELCLIENT_OK);
    disk = load_case(DISK_CASE);
}

static void setup(void) { start_with(NULL); }

static void teardown(void)
{
    hamelclient_free(cli);
    cli = NULL;
    json_decref(disk);
    disk = NULL;
    harness_stop(&srv);
}

TestSuite(client, .init = setup, .fini = teardown, .timeout = 120);

/* The case's simulation request with its model inline. Caller owns it. */
static json_t *disk_request(void)
{
    json_t *req = json_deep_copy(json_object_get(disk, "simulation"));
    json_object_set(req, "model", json_object_get(disk, "model"));
    return req;
}

static double case_tol(const char *what, double expected)
{
    json_t *tol = json_object_get(json_object_get(disk, "expected"), "tolerance");
    double abs_tol = json_number_value(json_object_get(tol, "abs"));
    double rel_tol = json_number_value(json_object_get(tol, "rel"));
    cr_assert(abs_tol > 0 && rel_tol > 0, "%s: the case has no tolerance", what);
    return abs_tol + rel_tol * fabs(expected);
}

static void assert_close(const char *what, double got, double expected)
{
    double tol = case_tol(what, expected);
    cr_assert(isfinite(got) && fabs(got - expected) <= tol,
              "%s: got %.17g, expected %.17g (|diff| %.3g > tol %.3g)", what, got, expected,
              fabs(got - expected), tol);
}

/* Compares every q, speed and qdot of every expected sample with the trajectory. */
static void assert_matches_case(const json_t *result)
{
    json_t *tr = json_object_get(result, "trajectory");
    json_t *t = json_object_get(tr, "t");
    json_t *samples = json_object_get(json_object_get(disk, "expected"), "samples");
    cr_assert_eq(json_array_size(t), json_array_size(samples), "sample count: got %zu, expected %zu",
                 json_array_size(t), json_array_size(samples));
    static const char *const groups[] = {"q", "speeds", "qdot"};
    size_t k;
    json_t *s;
    json_array_foreach(samples, k, s)
    {
        assert_close("t", json_number_value(json_array_get(t, k)),
                     json_number_value(json_object_get(s, "t")));
        for (int g = 0; g < 3; g++) {
            const char *name;
            json_t *v;
            json_object_foreach(json_object_get(s, groups[g]), name, v)
            {
                char what[128];
                snprintf(what, sizeof what, "%s.%s at sample %zu (t=%g)", groups[g], name, k,
                         json_number_value(json_object_get(s, "t")));
                json_t *series = json_object_get(json_object_get(tr, groups[g]), name);
                cr_assert(json_is_array(series), "%s: missing from the result", what);
                assert_close(what, json_number_value(json_array_get(series, k)), json_number_value(v));
            }
        }
    }
}

typedef struct progress_log {
    int calls;
    double last;
    int decreased;
    char status[32];
} progress_log;

static int on_progress(void *user, const char *job_id, const char *status, double p)
{
    progress_log *log = user;
    cr_assert_not_null(job_id);
    if (log->calls > 0 && p < log->last)
        log->decreased = 1;
    log->calls++;
    log->last = p;
    snprintf(log->status, sizeof log->status, "%s", status);
    return 0;
}

Test(client, health_and_model_submit)
{
    hamelclient_error err;
    json_t *health = NULL;
    cr_assert_eq(hamelclient_health(cli, &health, &err), HAMELCLIENT_OK, "%s", err.message);
    cr_assert_str_eq(json_string_value(json_object_get(health, "status")), "ok");
    json_decref(health);

    json_t *sum = NULL;
    int created = -1;
    int rc = hamelclient_model_submit(cli, json_object_get(disk, "model"), &sum, &created, &err);
    cr_assert_eq(rc, HAMELCLIENT_OK, "submit: %s", err.message);
    cr_assert_eq(created, 1, "a model the fresh server has not seen is created (201)");
    const char *id = json_string_value(json_object_get(sum, "model_id"));
    cr_assert(id != NULL && strncmp(id, "sha256:", 7) == 0 && strlen(id) == 7 + 64, "model_id %s", id);
    cr_assert_eq(json_integer_value(json_object_get(sum, "n")), 5);
    cr_assert_eq(json_integer_value(json_object_get(sum, "m")), 2);
    cr_assert_eq(json_integer_value(json_object_get(sum, "dof")), 3);

    json_t *again = NULL;
    rc = hamelclient_model_submit(cli, json_object_get(disk, "model"), &again, &created, &err);
    cr_assert_eq(rc, HAMELCLIENT_OK, "second submit: %s", err.message);
    cr_assert_eq(created, 0, "the same model again is known (200)");
    cr_assert_str_eq(json_string_value(json_object_get(again, "model_id")), id);

    json_t *got = NULL;
    cr_assert_eq(hamelclient_model_get(cli, id, &got, &err), HAMELCLIENT_OK, "%s", err.message);
    cr_assert_str_eq(json_string_value(json_object_get(got, "model_id")), id);
    json_decref(got);
    json_decref(again);
    json_decref(sum);
}

Test(client, simulate_rolling_disk_matches_case_with_progress)
{
    json_t *req = disk_request();
    progress_log log = {0};
    hamelclient_error err;
    json_t *result = NULL;
    int rc = hamelclient_simulate(cli, req, on_progress, &log, &result, &err);
    cr_assert_eq(rc, HAMELCLIENT_OK, "simulate: %s", err.message);
    cr_assert_str_eq(json_string_value(json_object_get(result, "status")), "done");
    cr_assert_geq(log.calls, 1, "the progress callback was called");
    cr_assert_float_eq(log.last, 1.0, 1e-12, "the last progress reported is 1, got %g", log.last);
    cr_assert_str_eq(log.status, "done");
    cr_assert_eq(log.decreased, 0, "progress never goes back");
    assert_matches_case(result);

    json_t *energy = json_object_get(json_object_get(result, "checks"), "energy");
    json_t *ref = json_object_get(json_object_get(disk, "expected"), "energy");
    assert_close("checks.energy.initial", json_number_value(json_object_get(energy, "initial")),
                 json_number_value(json_object_get(ref, "initial")));
    double drift = json_number_value(json_object_get(energy, "max_abs_drift"));
    cr_assert(drift >= 0 && drift < 1e-8, "energy drift %g at rtol 1e-12", drift);
    json_decref(result);
    json_decref(req);
}

Test(client, simulate_by_model_id_then_cached)
{
    hamelclient_error err;
    json_t *sum = NULL;
    cr_assert_eq(hamelclient_model_submit(cli, json_object_get(disk, "model"), &sum, NULL, &err),
                 HAMELCLIENT_OK, "%s", err.message);
    json_t *req = json_deep_copy(json_object_get(disk, "simulation"));
    json_object_set(req, "model_id", json_object_get(sum, "model_id"));

    json_t *first = NULL;
    int rc = hamelclient_simulation_start(cli, req, 30, &first, &err);
    cr_assert_eq(rc, HAMELCLIENT_OK, "start: %s", err.message);
    if (json_object_get(first, "trajectory") == NULL) { /* outlasted ?wait=30: wait on */
        char id[HAMELCLIENT_MAX_ID];
        snprintf(id, sizeof id, "%s", json_string_value(json_object_get(first, "job_id")));
        json_decref(first);
        cr_assert_eq(hamelclient_job_wait(cli, id, NULL, NULL, &first, &err), HAMELCLIENT_OK, "%s",
                     err.message);
    }
    assert_matches_case(first);
    cr_assert_str_eq(json_string_value(json_object_get(first, "model_id")),
                     json_string_value(json_object_get(sum, "model_id")));

    json_t *second = NULL;
    rc = hamelclient_simulation_start(cli, req, 30, &second, &err);
    cr_assert_eq(rc, HAMELCLIENT_OK, "repeat: %s", err.message);
    cr_assert(json_is_true(json_object_get(second, "cached")), "an equal request is answered from the cache");
    cr_assert(json_equal(json_object_get(first, "trajectory"), json_object_get(second, "trajectory")),
              "the cached trajectory is identical");
    json_decref(second);
    json_decref(first);
    json_decref(req);
    json_decref(sum);
}

Test(client, a_failed_check_is_a_warning_the_client_exposes)
{
    /* an oscillator integrated by rk2 at rtol 0.5: its energy drifts by tens of per cent */
    json_error_t jerr;
    json_t *req = json_loads("{\"model\": {\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2/2\","
                             " \"potential_energy\": \"x^2/2\"}, \"initial\": {\"q\": {\"x\": 1},"
                             " \"qdot\": {\"x\": 0}}, \"t_end\": 200, \"integrator\": {\"method\": \"rk2\","
                             " \"rtol\": 0.5, \"atol\": 0.5}}",
                             0, &jerr);
    cr_assert_not_null(req, "%s", jerr.text);
    hamelclient_error err;
    json_t *result = NULL;
    cr_assert_eq(hamelclient_simulate(cli, req, NULL, NULL, &result, &err), HAMELCLIENT_OK, "%s",
                 err.message);
    hamelclient_warning w[4];
    size_t n = hamelclient_warnings(result, w, 4);
    cr_assert_geq(n, 1, "the drifting energy is a warning");
    cr_assert_str_eq(w[0].code, "energy-drift");
    cr_assert_str_eq(w[0].check, "checks.energy.max_rel_drift");
    cr_assert_gt(w[0].value, w[0].threshold, "the value passed the threshold");
    cr_assert_not_null(strstr(w[0].message, "conserved"));
    json_decref(result);
    json_decref(req);

    /* the rolling disk keeps its energy: no warnings */
    req = json_deep_copy(json_object_get(disk, "simulation"));
    json_object_set(req, "model", json_object_get(disk, "model"));
    cr_assert_eq(hamelclient_simulate(cli, req, NULL, NULL, &result, &err), HAMELCLIENT_OK, "%s",
                 err.message);
    cr_assert_eq(hamelclient_warnings(result, NULL, 0), 0, "no warnings for the case");
    json_decref(result);
    json_decref(req);
}

Test(client, long_poll_wait)
{
    hamelclient_options opts = {.long_poll_s = 5};
    hamelclient *lp = NULL;
    cr_assert_eq(hamelclient_new(srv.url, &opts, &lp), HAMELCLIENT_OK);
    json_t *req = disk_request();
    progress_log log = {0};
    hamelclient_error err;
    json_t *result = NULL;
    cr_assert_eq(hamelclient_simulate(lp, req, on_progress, &log, &result, &err), HAMELCLIENT_OK, "%s",
                 err.message);
    cr_assert_geq(log.calls, 1);
    assert_matches_case(result);
    json_decref(result);
    json_decref(req);
    hamelclient_free(lp);
}

Test(client, bad_model_is_a_typed_422_with_path_and_column)
{
    json_t *model = json_deep_copy(json_object_get(disk, "model"));
    /* "bogus" starts at column 14 (1-based) of the expression. */
    json_object_set_new(model, "kinetic_energy", json_string("1/2*m*x'^2 + bogus*y'^2"));
    hamelclient_error err;
    json_t *sum = NULL;
    int rc = hamelclient_model_submit(cli, model, &sum, NULL, &err);
    cr_assert_eq(rc, HAMELCLIENT_E_PROBLEM, "got %s: %s", hamelclient_kind_name(rc), err.message);
    cr_assert_null(sum);
    cr_assert_eq(err.kind, HAMELCLIENT_E_PROBLEM);
    cr_assert_eq(err.status, 422, "status %d", err.status);
    cr_assert(strstr(err.type, "/problems/") == err.type, "type %s", err.type);
    cr_assert_neq(err.title[0], '\0', "the problem has a title");
    cr_assert(strstr(err.path, "kinetic_energy") != NULL, "path %s names kinetic_energy", err.path);
    cr_assert_eq(err.column, 14, "column %d of \"bogus\"", err.column);
    cr_assert(strstr(err.reason, "bogus") != NULL, "reason \"%s\" names the identifier", err.reason);
    cr_assert_geq(err.n_errors, 1);
    const json_t *doc = hamelclient_last_problem(cli);
    cr_assert(json_is_array(json_object_get(doc, "errors")), "the whole problem document is kept");

    /* The same model inside a simulation: nothing runs, same typed error. */
    json_t *req = json_deep_copy(json_object_get(disk, "simulation"));
    json_object_set(req, "model", model);
    json_t *res = NULL;
    rc = hamelclient_simulate(cli, req, NULL, NULL, &res, &err);
    cr_assert_eq(rc, HAMELCLIENT_E_PROBLEM, "got %s: %s", hamelclient_kind_name(rc), err.message);
    cr_assert_eq(err.status, 422);
    cr_assert(strstr(err.path, "kinetic_energy") != NULL, "path %s", err.path);
    json_decref(req);
    json_decref(model);
}

Test(client, transport_error_is_not_a_problem)
{
    /* Stop the server: its port now refuses connections. */
    harness_stop(&srv);
    hamelclient_error err;
    json_t *health = NULL;
    int rc = hamelclient_health(cli, &health, &err);
    cr_assert_eq(rc, HAMELCLIENT_E_TRANSPORT, "got %s", hamelclient_kind_name(rc));
    cr_assert_eq(err.kind, HAMELCLIENT_E_TRANSPORT);
    cr_assert_eq(err.status, 0, "no HTTP status without an answer");
    cr_assert_eq(err.type[0], '\0');
    cr_assert_neq(err.message[0], '\0', "the transport error says what happened");
    cr_assert_null(hamelclient_last_problem(cli));
    cr_assert_null(health);
}

Test(client, unknown_job_is_404)
{
    hamelclient_error err;
    json_t *job = NULL;
    int rc = hamelclient_job_get(cli, "0123456789abcdef0123456789abcdef", 0, &job, &err);
    cr_assert_eq(rc, HAMELCLIENT_E_PROBLEM, "got %s", hamelclient_kind_name(rc));
    cr_assert_eq(err.status, 404);
    rc = hamelclient_job_get(cli, "../etc/passwd", 0, &job, &err);
    cr_assert_eq(rc, HAMELCLIENT_E_USAGE, "an unsafe id never reaches the wire");
}

Test(client, cancel_a_running_job)
{
    json_t *req = disk_request();
    json_object_set_new(req, "t_end", json_real(1e6));
    json_object_set_new(json_object_get(req, "output"), "samples", json_integer(101));
    json_object_set_new(json_object_get(req, "integrator"), "max_steps", json_integer(1000000000));
    hamelclient_error err;
    json_t *stub = NULL;
    cr_assert_eq(hamelclient_simulation_start(cli, req, 0, &stub, &err), HAMELCLIENT_OK, "%s", err.message);
    const char *st = json_string_value(json_object_get(stub, "status"));
    cr_assert(st && (strcmp(st, "queued") == 0 || strcmp(st, "running") == 0), "status %s", st);
    char id[HAMELCLIENT_MAX_ID];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(stub, "job_id")));

    json_t *out = NULL;
    cr_assert_eq(hamelclient_job_cancel(cli, id, &out, &err), HAMELCLIENT_OK, "cancel: %s", err.message);
    json_decref(out);
    json_t *result = NULL;
    int rc = hamelclient_job_wait(cli, id, NULL, NULL, &result, &err);
    cr_assert_eq(rc, HAMELCLIENT_E_CANCELLED, "got %s: %s", hamelclient_kind_name(rc), err.message);
    cr_assert_eq(err.kind, HAMELCLIENT_E_CANCELLED);
    cr_assert_null(result);

    json_t *job = NULL;
    cr_assert_eq(hamelclient_job_get(cli, id, 0, &job, &err), HAMELCLIENT_OK);
    cr_assert_str_eq(json_string_value(json_object_get(job, "status")), "cancelled");
    json_decref(job);
    json_decref(stub);
    json_decref(req);
}

Test(client, failed_job_carries_its_problem)
{
    json_t *req = disk_request();
    json_object_set_new(json_object_get(req, "integrator"), "max_steps", json_integer(5));
    hamelclient_error err;
    json_t *result = NULL;
    int rc = hamelclient_simulate(cli, req, NULL, NULL, &result, &err);
    cr_assert_eq(rc, HAMELCLIENT_E_PROBLEM, "got %s: %s", hamelclient_kind_name(rc), err.message);
    cr_assert_null(result);
    cr_assert(strstr(err.type, "step-limit") != NULL, "type %s", err.type);
    cr_assert_geq(err.status, 400, "status %d", err.status);
    json_decref(req);
}

Test(client, hamel_coefficients_match_case)
{
    json_t *init = json_object_get(json_object_get(disk, "simulation"), "initial");
    json_t *req = json_pack("{s:O, s:O, s:O}", "model", json_object_get(disk, "model"), "t",
                            json_object_get(init, "t"), "q", json_object_get(init, "q"));
    hamelclient_error err;
    json_t *out = NULL;
    cr_assert_eq(hamelclient_hamel(cli, req, &out, &err), HAMELCLIENT_OK, "%s", err.message);
    json_t *gamma = json_object_get(json_array_get(json_object_get(out, "points"), 0), "gamma");
    json_t *expected = json_object_get(json_object_get(disk, "expected"), "hamel_at_initial");
    size_t i, k;
    json_t *e, *g;
    json_array_foreach(expected, i, e)
    {
        const char *j = json_string_value(json_object_get(e, "j"));
        const char *r = json_string_value(json_object_get(e, "r"));
        const char *l = json_string_value(json_object_get(e, "l"));
        int found = 0;
        json_array_foreach(gamma, k, g)
        {
            if (strcmp(json_string_value(json_object_get(g, "j")), j) == 0 &&
                strcmp(json_string_value(json_object_get(g, "r")), r) == 0 &&
                strcmp(json_string_value(json_object_get(g, "l")), l) == 0) {
                char what[96];
                snprintf(what, sizeof what, "gamma^%s_%s,%s", j, r, l);
                assert_close(what, json_number_value(json_object_get(g, "value")),
                             json_number_value(json_object_get(e, "value")));
                found = 1;
            }
        }
        cr_assert(found, "gamma^%s_%s,%s is listed", j, r, l);
    }
    cr_assert_eq(json_array_size(gamma), json_array_size(expected), "no other non-zero gamma");
    json_decref(out);
    json_decref(req);
}

Test(client, equations_of_a_submitted_model)
{
    hamelclient_error err;
    json_t *sum = NULL, *eq = NULL;
    cr_assert_eq(hamelclient_model_submit(cli, json_object_get(disk, "model"), &sum, NULL, &err),
                 HAMELCLIENT_OK, "%s", err.message);
    const char *id = json_string_value(json_object_get(sum, "model_id"));
    cr_assert_eq(hamelclient_equations(cli, id, &eq, &err), HAMELCLIENT_OK, "%s", err.message);
    cr_assert_str_eq(json_string_value(json_object_get(eq, "model_id")), id);
    json_t *mm = json_object_get(eq, "mass_matrix");
    cr_assert_eq(json_array_size(mm), 3, "M is dof x dof");
    cr_assert_eq(json_array_size(json_array_get(mm, 0)), 3);
    cr_assert_eq(json_object_size(json_object_get(eq, "kinematics")), 5, "one q' per coordinate");
    cr_assert_eq(json_array_size(json_object_get(eq, "forcing")), 3);
    json_decref(eq);
    json_decref(sum);
}

static void token_setup(void)
{
    static const char *const env[] = {"HAMEL_TOKEN=s3cret", NULL};
    start_with(env);
}

TestSuite(client_auth, .init = token_setup, .fini = teardown, .timeout = 120);

Test(client_auth, bearer_token)
{
    hamelclient_error err;
    json_t *sum = NULL;
    int rc = hamelclient_model_submit(cli, json_object_get(disk, "model"), &sum, NULL, &err);
    cr_assert_eq(rc, HAMELCLIENT_E_PROBLEM, "without the token: %s", hamelclient_kind_name(rc));
    cr_assert_eq(err.status, 401);

    hamelclient_options opts = {.token = "s3cret"};
    hamelclient *auth = NULL;
    cr_assert_eq(hamelclient_new(srv.url, &opts, &auth), HAMELCLIENT_OK);
    rc = hamelclient_model_submit(auth, json_object_get(disk, "model"), &sum, NULL, &err);
    cr_assert_eq(rc, HAMELCLIENT_OK, "with the token: %s", err.message);
    json_decref(sum);
    hamelclient_free(auth);
}

/* ---- hamel remote ------------------------------------------------------------------- */

static int remote(const char *const *args)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = "remote";
    argv[argc++] = "--url";
    argv[argc++] = srv.url;
    for (int i = 0; args[i] != NULL && argc < 15; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    return hamelclient_remote_main(argc, argv);
}

Test(client, remote_run_writes_csv)
{
    char case_path[PATH_MAX], out[PATH_MAX + 16];
    harness_case_path(DISK_CASE, case_path, sizeof case_path);
    snprintf(out, sizeof out, "%s/run.csv", srv.dir);
    const char *args[] = {"run", case_path, "--csv", "-o", out, NULL};
    cr_assert_eq(remote(args), 0, "hamel remote run exits 0");

    FILE *f = fopen(out, "r");
    cr_assert_not_null(f);
    char line[4096];
    cr_assert_not_null(fgets(line, sizeof line, f));
    cr_assert_str_eq(line, "t,phi,theta,psi,x,y,wd,thd,Omega,phi',theta',psi',x',y'\n");
    json_t *samples = json_object_get(json_object_get(disk, "expected"), "samples");
    size_t rows = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        double v[14];
        int n = 0;
        char *save = NULL;
        for (char *tok = strtok_r(line, ",\n", &save); tok && n < 14; tok = strtok_r(NULL, ",\n", &save))
            v[n++] = strtod(tok, NULL);
        cr_assert_eq(n, 14, "row %zu has 14 columns", rows);
        json_t *s = json_array_get(samples, rows);
        cr_assert_not_null(s, "more rows than samples");
        assert_close("csv t", v[0], json_number_value(json_object_get(s, "t")));
        assert_close("csv theta", v[2], json_number_value(json_object_get(json_object_get(s, "q"), "theta")));
        assert_close("csv Omega", v[8],
                     json_number_value(json_object_get(json_object_get(s, "speeds"), "Omega")));
        assert_close("csv x'", v[12], json_number_value(json_object_get(json_object_get(s, "qdot"), "x")));
        rows++;
    }
    fclose(f);
    cr_assert_eq(rows, json_array_size(samples), "one CSV row per sample");
}

Test(client, remote_check_reports_problems)
{
    char case_path[PATH_MAX], bad[PATH_MAX + 16];
    harness_case_path(DISK_CASE, case_path, sizeof case_path);
    const char *ok_args[] = {"check", case_path, NULL};
    cr_assert_eq(remote(ok_args), 0, "a valid case checks out");

    json_t *model = json_deep_copy(json_object_get(disk, "model"));
    json_object_set_new(model, "potential_energy", json_string("m*g*r*sin(theta')"));
    snprintf(bad, sizeof bad, "%s/bad-model.json", srv.dir);
    cr_assert_eq(json_dump_file(model, bad, 0), 0);
    json_decref(model);
    const char *bad_args[] = {"check", bad, NULL};
    cr_assert_eq(remote(bad_args), 1, "a model with q' inside V is rejected (exit 1)");

    const char *usage[] = {"frobnicate", NULL};
    cr_assert_eq(remote(usage), 2, "an unknown command is a usage error");
}

/* ---- linearize, evaluate, batch -------------------------------------------------------- */

static int count_progress(void *user, const char *id, const char *status, double p)
{
    (void)id;
    (void)status;
    cr_assert(p >= 0 && p <= 1, "progress %g", p);
    (*(int *)user)++;
    return 0;
}

Test(client, linearize_evaluate_and_a_batch)
{
    hamelclient_error err;
    json_t *lin = NULL, *ev = NULL, *batch = NULL;
    json_t *lreq = json_pack("{s:O, s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}", "model",
                             json_object_get(disk, "model"), "q", "phi", 0.0, "theta", M_PI / 2, "psi", 0.0,
                             "x", 0.0, "y", 0.0, "speeds", "wd", 0.0, "thd", 0.0, "Omega", 4.0);
    cr_assert_eq(hamelclient_linearize(cli, lreq, &lin, &err), HAMELCLIENT_OK, "%s", err.message);
    json_t *a = json_object_get(json_array_get(json_object_get(lin, "points"), 0), "A");
    cr_assert_eq(json_array_size(a), 8, "A is 8 x 8");
    /* upright: the tilt rate's row has (4/5) g / r = 15.696 in the tilt's column */
    cr_assert_float_eq(json_number_value(json_array_get(json_array_get(a, 6), 1)), 15.696, 1e-12);

    json_t *ereq = json_pack("{s:O, s:[O]}", "model", json_object_get(disk, "model"), "states",
                             json_object_get(json_object_get(disk, "simulation"), "initial"));
    cr_assert_eq(hamelclient_evaluate(cli, ereq, &ev, &err), HAMELCLIENT_OK, "%s", err.message);
    cr_assert(
        json_is_object(json_object_get(json_array_get(json_object_get(ev, "states"), 0), "speeds_dot")));

    json_t *breq = json_pack("{s:O, s:O, s:[{s:{s:{s:f}}}, {s:{s:i}}]}", "model",
                             json_object_get(disk, "model"), "base", json_object_get(disk, "simulation"),
                             "runs", "initial", "speeds", "Omega", 3.0, "integrator", "max_steps", 3);
    int polls = 0;
    cr_assert_eq(hamelclient_batch(cli, breq, count_progress, &polls, &batch, &err), HAMELCLIENT_OK, "%s",
                 err.message);
    cr_assert_geq(polls, 1, "progress was reported");
    json_t *results = json_object_get(batch, "results");
    cr_assert_eq(json_array_size(results), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(results, 0), "status")), "done");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(results, 1), "status")), "failed",
                     "a failed run is a line of the batch, not an error of the call");
    json_decref(batch);
    batch = NULL;

    /* an invalid run refuses the whole batch, naming it */
    json_object_set_new(json_array_get(json_object_get(breq, "runs"), 0), "initial",
                        json_pack("{s:{s:f}}", "q", "thet", 1.0));
    int rc = hamelclient_batch(cli, breq, NULL, NULL, &batch, &err);
    cr_assert_eq(rc, HAMELCLIENT_E_PROBLEM, "got %s", hamelclient_kind_name(rc));
    cr_assert_null(batch);
    cr_assert(strstr(err.path, "runs[0]") != NULL, "path %s", err.path);
    json_decref(breq);
    json_decref(ev);
    json_decref(ereq);
    json_decref(lin);
    json_decref(lreq);
}
