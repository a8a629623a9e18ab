/* test_budget.c — hostile models against the real hamel-server (issue 8): each is
 * answered with a 422 compile-limit naming the culprit while the server keeps
 * answering; a client that hangs up cancels its compilation (counted in /metrics as
 * hamel_compiles_stopped_total{reason="client_gone"}), but not the compilation of another
 * client that waits for the same model; SIGTERM during a hostile compilation exits 0
 * within HAMEL_DRAIN_SECONDS + 1 s.
 *
 * Nothing here times a computation; the SIGTERM test checks an upper bound of the
 * exit with a generous margin.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

#define BUDGET_DRAIN_S 1.0
#define BUDGET_EXIT_MARGIN_S 3.0 /* on top of the bound drain + 1 s: a loaded machine */

static harness_server srv;

static void teardown(void) { harness_stop(&srv); }

TestSuite(server_budget, .fini = teardown, .timeout = 120);

/* d_0 = x, d_i = d_{i-1} + x*d_{i-1}, T = 1/2 d_30 x'^2 (its printed form doubles with
 * each definition); `name` tells two of them apart. Caller frees. */
static char *chain_model(const char *name)
{
    json_t *defs = json_array();
    json_array_append_new(defs, json_pack("{s:s, s:s}", "name", "d0", "expr", "x"));
    for (int i = 1; i <= 30; i++) {
        char dn[16], e[64];
        snprintf(dn, sizeof dn, "d%d", i);
        snprintf(e, sizeof e, "d%d + x*d%d", i - 1, i - 1);
        json_array_append_new(defs, json_pack("{s:s, s:s}", "name", dn, "expr", e));
    }
    json_t *m = json_pack("{s:s, s:[s], s:o, s:s}", "name", name, "coordinates", "x", "definitions", defs,
                          "kinetic_energy", "0.5*d30*x'^2");
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return text;
}

static const char *const pendulum =
    "{\"name\": \"pendulum\", \"coordinates\": [\"th\"], \"parameters\": {\"m\": 1, \"l\": 2, \"g\": 9.81}, "
    "\"kinetic_energy\": \"m*l^2*th'^2/2\", \"potential_energy\": \"-m*g*l*cos(th)\"}";

static harness_resp request(const char *method, const char *path, const char *body)
{
    harness_resp r;
    CURLcode rc = harness_request(&srv, method, path, body, NULL, &r);
    cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, path, curl_easy_strerror(rc));
    return r;
}

static double metric(const char *series)
{
    harness_resp r = request("GET", "/metrics", NULL);
    cr_assert_eq(r.status, 200);
    double v = harness_metric(&r, series);
    harness_resp_free(&r);
    return v;
}

/* Polls until metric `series` reaches at least `want` (up to `seconds`); its value. */
static double metric_reaches(const char *series, double want, double seconds)
{
    double until = harness_now() + seconds, v = metric(series);
    while (v < want && harness_now() < until) {
        harness_nap(20);
        v = metric(series);
    }
    return v;
}

struct post {
    const char *body;
    long timeout_ms; /* 0: none */
    CURLcode rc;
    long status;
    char type[128], path[128];
    atomic_int done;
};

static void *post_thread(void *arg)
{
    struct post *p = arg;
    harness_resp r;
    struct curl_slist *list = NULL;
    CURL *h = harness_easy(&srv, "POST", "/v1/models", p->body, -1, NULL, &list, &r);
    if (p->timeout_ms)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, p->timeout_ms);
    p->rc = curl_easy_perform(h);
    harness_finish(h, &r);
    p->status = p->rc == CURLE_OK ? r.status : -1;
    const char *type = json_string_value(json_object_get(r.json, "type"));
    const char *path =
        json_string_value(json_object_get(json_array_get(json_object_get(r.json, "errors"), 0), "path"));
    snprintf(p->type, sizeof p->type, "%s", type ? type : "");
    snprintf(p->path, sizeof p->path, "%s", path ? path : "");
    curl_easy_cleanup(h);
    curl_slist_free_all(list);
    harness_resp_free(&r);
    atomic_store(&p->done, 1);
    return NULL;
}

/* Two hostile compilations occupy both offload threads; /v1/health is answered while
 * they run, a normal model is compiled (after the budget frees a thread), and both
 * hostile ones end with a 422 compile-limit naming a definition. */
Test(server_budget, two_hostile_compiles_leave_the_server_responsive)
{
    static const char *const env[] = {"HAMEL_HTTP_THREADS=1" /* two offload threads */, NULL};
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
    char *a_body = chain_model("hostile-a"), *b_body = chain_model("hostile-b");
    struct post a = {.body = a_body}, b = {.body = b_body};
    pthread_t ta, tb;
    cr_assert_eq(pthread_create(&ta, NULL, post_thread, &a), 0);
    cr_assert_eq(pthread_create(&tb, NULL, post_thread, &b), 0);
    double running = metric_reaches("hamel_offload_running", 2, 10);
    cr_assert_geq(running + atomic_load(&a.done) + atomic_load(&b.done), 2,
                  "both hostile models were compiling");
    harness_resp h = request("GET", "/v1/health", NULL);
    cr_assert_eq(h.status, 200, "/v1/health answers during two hostile compilations");
    harness_resp_free(&h);
    harness_resp n = request("POST", "/v1/models", pendulum);
    cr_assert_eq(n.status, 201, "a normal model compiles: %s", n.body);
    harness_resp_free(&n);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    const struct post *ps[] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(ps[i]->status, 422, "hostile model %d: status %ld", i, ps[i]->status);
        cr_assert_str_eq(ps[i]->type, "/problems/compile-limit");
        cr_assert_eq(strncmp(ps[i]->path, "model.definitions[", 18), 0, "culprit %s", ps[i]->path);
    }
    cr_assert_eq(metric("hamel_compiles_stopped_total{reason=\"limit\"}"), 2);
    free(a_body);
    free(b_body);
    int status;
    cr_assert(harness_stop_checked(&srv, &status), "exit status %#x", status);
}

/* A client that gives up after 300 ms cancels its compilation (whose own budget is a
 * minute): the counter of cancelled compilations moves, the offload thread is freed. */
Test(server_budget, a_client_that_hangs_up_cancels_its_compile)
{
    static const char *const env[] = {"HAMEL_MAX_COMPILE_SECONDS=60", "HAMEL_MAX_COMPILE_BYTES=1000000000",
                                      NULL};
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
    char *body = chain_model("leaver");
    struct post p = {.body = body, .timeout_ms = 300};
    post_thread(&p);
    cr_assert_eq(p.rc, CURLE_OPERATION_TIMEDOUT, "the client gave up: %s", curl_easy_strerror(p.rc));
    double gone = metric_reaches("hamel_compiles_stopped_total{reason=\"client_gone\"}", 1, 20);
    cr_assert_eq(gone, 1, "the compilation was cancelled when its client hung up");
    cr_assert_eq(metric("hamel_compiles_stopped_total{reason=\"limit\"}"), 0);
    double until = harness_now() + 5;
    while (metric("hamel_offload_running") > 0 && harness_now() < until)
        harness_nap(20);
    cr_assert_eq(metric("hamel_offload_running"), 0, "the offload thread is free again");
    harness_resp n = request("POST", "/v1/models", pendulum);
    cr_assert_eq(n.status, 201, "%s", n.body);
    harness_resp_free(&n);
    free(body);
    int status;
    cr_assert(harness_stop_checked(&srv, &status), "exit status %#x", status);
}

/* Two clients send the same model; the first (whose compilation the second waits for)
 * gives up after 300 ms. Its hang-up cancels that compilation, but the second client's
 * answer is its own: the model compiled again for it, here to the compile budget's 422,
 * not a 503 "cancelled" copied from the client that left. */
Test(server_budget, a_hang_up_does_not_cancel_a_waiting_clients_compile)
{
    static const char *const env[] = {"HAMEL_MAX_COMPILE_SECONDS=3", NULL};
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
    char *body = chain_model("shared");
    struct post leaver = {.body = body, .timeout_ms = 300}, stayer = {.body = body};
    pthread_t tl, ts;
    cr_assert_eq(pthread_create(&tl, NULL, post_thread, &leaver), 0);
    harness_nap(100);
    cr_assert_eq(pthread_create(&ts, NULL, post_thread, &stayer), 0);
    pthread_join(tl, NULL);
    pthread_join(ts, NULL);
    cr_assert_eq(leaver.rc, CURLE_OPERATION_TIMEDOUT, "the first client gave up: %s",
                 curl_easy_strerror(leaver.rc));
    cr_assert_eq(stayer.status, 422, "the waiting client's own answer: %ld %s", stayer.status, stayer.type);
    cr_assert_str_eq(stayer.type, "/problems/compile-limit");
    cr_assert_eq(metric_reaches("hamel_compiles_stopped_total{reason=\"client_gone\"}", 1, 10), 1);
    free(body);
    int status;
    cr_assert(harness_stop_checked(&srv, &status), "exit status %#x", status);
}

/* SIGTERM while a hostile model compiles (with a minute of budget): the compilation is
 * cancelled and the server exits 0 within HAMEL_DRAIN_SECONDS + 1 s (plus a margin). */
Test(server_budget, sigterm_during_a_hostile_compile_exits_in_time)
{
    static const char *const env[] = {"HAMEL_DRAIN_SECONDS=1", "HAMEL_MAX_COMPILE_SECONDS=60",
                                      "HAMEL_MAX_COMPILE_BYTES=1000000000", NULL};
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
    char *body = chain_model("sigterm");
    struct post p = {.body = body};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, post_thread, &p), 0);
    cr_assert_geq(metric_reaches("hamel_offload_running", 1, 10), 1, "the hostile model is compiling");
    double t0 = harness_now();
    cr_assert_eq(kill(srv.pid, SIGTERM), 0);
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(srv.pid, &status, WNOHANG)) == 0 && harness_now() - t0 < 30)
        harness_nap(10);
    double took = harness_now() - t0;
    cr_assert_eq(got, srv.pid, "the server exited");
    srv.pid = 0;
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %#x", status);
    cr_assert_leq(took, BUDGET_DRAIN_S + 1.0 + BUDGET_EXIT_MARGIN_S, "exit took %.2f s", took);
    pthread_join(th, NULL);
    cr_assert(p.status == 503 || p.status == -1, "the hostile request was refused or cut, not answered %ld",
              p.status);
    free(body);
}
