/* test_poll.c — the poll threads touch only memory (issue 11): against the real
 * hamel-server with one poll thread (HAMEL_HTTP_THREADS=1), a store that cannot commit
 * for a while (its SQLite file's write lock held by this process) delays the request
 * whose job it records, and /v1/health is still answered at once; a classical form
 * (GET /v1/models/{id}/equations?form=) too large for the compile budget is derived off
 * the poll thread, ends as a 422 compile-limit, and a client that hangs up cancels it.
 *
 * The bounds are generous (the held store takes HOLD_SECONDS, /v1/health must answer in
 * under HEALTH_BOUND_SECONDS), so a loaded machine does not make the test flaky.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define HOLD_SECONDS 3.0         /* the store's write lock is held this long */
#define HEALTH_BOUND_SECONDS 1.0 /* /v1/health answers within this, meanwhile */
#define SETTLE_MS 300            /* for the held request to reach the store */

static harness_server srv;

static void teardown(void) { harness_stop(&srv); }

TestSuite(poll, .fini = teardown, .timeout = 120);

/* The knife-edge case's simulation with its model, integrated to t_end (caller frees
 * the text). */
static char *knife_text(double t_end)
{
    char path[1024];
    json_error_t err;
    json_t *c = harness_case_load("greenwood-5.1-knife-edge-body.json", path, sizeof path, &err);
    cr_assert(c, "%s: %s", path, err.text);
    json_t *req = json_deep_copy(json_object_get(c, "simulation"));
    json_object_set(req, "model", json_object_get(c, "model"));
    json_object_set_new(req, "t_end", json_real(t_end));
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    json_decref(c);
    return text;
}

struct post {
    const char *path, *body;
    long status;
    atomic_int done;
};

static void *post_thread(void *arg)
{
    struct post *p = arg;
    harness_resp r;
    CURLcode rc = harness_request(&srv, "POST", p->path, p->body, NULL, &r);
    p->status = rc == CURLE_OK ? r.status : -1;
    harness_resp_free(&r);
    atomic_store(&p->done, 1);
    return NULL;
}

/* A new job's record waits for the store's write lock (held here for HOLD_SECONDS):
 * its request is delayed, /v1/health on the same single poll thread is not. */
Test(poll, a_held_store_does_not_stall_the_poll_thread)
{
    static const char *const env[] = {"HAMEL_HTTP_THREADS=1", "HAMEL_WORKERS=1", NULL};
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
    /* The model compiled and cached, its first result stored. */
    char *first = knife_text(1.0);
    harness_resp r;
    cr_assert_eq(harness_request(&srv, "POST", "/v1/simulations?wait=30", first, NULL, &r), CURLE_OK);
    cr_assert_eq(r.status, 200, "the first simulation: %s", r.body);
    harness_resp_free(&r);
    free(first);

    char db_path[PATH_MAX + 16];
    snprintf(db_path, sizeof db_path, "%s/hamel.db", srv.data);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK, "%s", db_path);
    sqlite3_busy_timeout(db, 5000);
    cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
    double held = harness_now();

    char *second = knife_text(2.0); /* a new request of the cached model: a new job */
    struct post p = {.path = "/v1/simulations", .body = second};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, post_thread, &p), 0);
    harness_nap(SETTLE_MS);

    double t0 = harness_now();
    cr_assert_eq(harness_request(&srv, "GET", "/v1/health", NULL, NULL, &r), CURLE_OK);
    double took = harness_now() - t0;
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
    int pending = !atomic_load(&p.done);

    double left = HOLD_SECONDS - (harness_now() - held);
    if (left > 0)
        harness_nap((long)(left * 1e3));
    cr_assert_eq(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    pthread_join(th, NULL);
    free(second);

    cr_assert_lt(took, HEALTH_BOUND_SECONDS, "/v1/health took %.3f s while the store was held", took);
    cr_assert(pending, "the new job's request was held by the store while /v1/health was asked");
    cr_assert_eq(p.status, 202, "the held request is accepted once the store commits (status %ld)", p.status);
    int status;
    cr_assert(harness_stop_checked(&srv, &status), "exit status %#x", status);
}

/* bench/models/NAME of the repository (found from the test binary in build/), as text
 * (caller frees). */
static char *bench_model(const char *name)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(path, sizeof path, "%s/../bench/models/%s", exe, name);
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    cr_assert(doc, "%s: %s", path, err.text);
    char *text = json_dumps(json_object_get(doc, "model"), JSON_COMPACT);
    json_decref(doc);
    return text;
}

struct get {
    const char *path;
    long timeout_ms; /* 0: none */
    long status;
    char type[128];
    atomic_int done;
};

static void *get_thread(void *arg)
{
    struct get *g = arg;
    harness_resp r;
    struct curl_slist *list = NULL;
    CURL *h = harness_easy(&srv, "GET", g->path, NULL, 0, NULL, &list, &r);
    if (g->timeout_ms)
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, g->timeout_ms);
    CURLcode rc = curl_easy_perform(h);
    harness_finish(h, &r);
    g->status = rc == CURLE_OK ? r.status : -1;
    const char *type = json_string_value(json_object_get(r.json, "type"));
    snprintf(g->type, sizeof g->type, "%s", type ? type : "");
    curl_easy_cleanup(h);
    curl_slist_free_all(list);
    harness_resp_free(&r);
    atomic_store(&g->done, 1);
    return NULL;
}

static double metric(const char *series)
{
    harness_resp r;
    cr_assert_eq(harness_request(&srv, "GET", "/metrics", NULL, NULL, &r), CURLE_OK);
    cr_assert_eq(r.status, 200);
    double v = harness_metric(&r, series);
    harness_resp_free(&r);
    return v;
}

/* Starts the server with env, POSTs bench/models/car-trailers-10.json (asserting 201)
 * and writes its id to id[size]. */
static void start_with_car10(const char *const *env, char *id, size_t size)
{
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
    char *model = bench_model("car-trailers-10.json");
    harness_resp r;
    cr_assert_eq(harness_request(&srv, "POST", "/v1/models", model, NULL, &r), CURLE_OK);
    free(model);
    cr_assert_eq(r.status, 201, "the model compiles: %s", r.body);
    snprintf(id, size, "%s", json_string_value(json_object_get(r.json, "model_id")));
    harness_resp_free(&r);
}

/* Kane's form of a car with ten trailers takes longer than the compile budget (2 s by
 * default; main's server spent 8.7 s on it on the poll thread): it is a 422
 * compile-limit, /v1/health answers meanwhile, and a client that gives up after 300 ms
 * cancels its derivation (hamel_compiles_stopped_total{reason="client_gone"}). */
Test(poll, a_form_past_the_compile_budget_is_stopped_off_the_poll_thread)
{
    static const char *const env[] = {"HAMEL_HTTP_THREADS=1", NULL};
    char id[128], path[256], hpath[256];
    start_with_car10(env, id, sizeof id);
    snprintf(path, sizeof path, "/v1/models/%s/equations?form=kane", id);
    snprintf(hpath, sizeof hpath, "/v1/models/%s/equations?form=appell", id);
    harness_resp r;

    struct get g = {.path = path};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, get_thread, &g), 0);
    harness_nap(SETTLE_MS);
    double t0 = harness_now();
    cr_assert_eq(harness_request(&srv, "GET", "/v1/health", NULL, NULL, &r), CURLE_OK);
    double took = harness_now() - t0;
    int pending = !atomic_load(&g.done);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
    pthread_join(th, NULL);
    cr_assert_lt(took, HEALTH_BOUND_SECONDS, "/v1/health took %.3f s while a form was derived", took);
    cr_assert(pending, "the form was still being derived when /v1/health was asked");
    cr_assert_eq(g.status, 422, "the form past the budget: %ld", g.status);
    cr_assert_str_eq(g.type, "/problems/compile-limit");

    double gone = metric("hamel_compiles_stopped_total{reason=\"client_gone\"}");
    struct get h = {.path = hpath, .timeout_ms = 300};
    get_thread(&h);
    cr_assert_eq(h.status, -1, "the client gave up before an answer");
    double until = harness_now() + 10, v = metric("hamel_compiles_stopped_total{reason=\"client_gone\"}");
    while (v < gone + 1 && harness_now() < until) {
        harness_nap(20);
        v = metric("hamel_compiles_stopped_total{reason=\"client_gone\"}");
    }
    cr_assert_eq(v, gone + 1, "the derivation of the abandoned form was cancelled");
    int status;
    cr_assert(harness_stop_checked(&srv, &status), "exit status %#x", status);
}

/* The server's resident memory in kB (/proc/<pid>/status VmRSS); -1 if unreadable. */
static long server_rss_kb(void)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)srv.pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* Whether the server under test runs with AddressSanitizer or ThreadSanitizer (the
 * suite runs these tests against such builds too): their runtime is mapped. */
static int server_sanitized(void)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)srv.pid);
    FILE *f = fopen(path, "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, "libasan") || strstr(line, "libtsan");
    if (f)
        fclose(f);
    return found;
}

/* A stopped form leaves the model as it was (expr_ctx_rollback): on main the nodes of
 * a stopped derivation stayed in the model's context, so after kane's 422 appell was
 * stopped by the node limit (422 limit-exceeded) and hamel answered 500 "out of
 * memory", for anyone, with hundreds of MB kept per model. Now every answer of the
 * sequence is a compile-limit or the form, and the memory of the stopped derivations
 * is given back. */
Test(poll, a_stopped_form_does_not_poison_the_model)
{
    char id[128];
    start_with_car10(NULL, id, sizeof id);
    long rss0 = server_rss_kb();

    static const char *const forms[] = {"kane", "appell", "appell", "hamel", "kane"};
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/models/%s/equations?form=%s", id, forms[i]);
        struct get g = {.path = path};
        get_thread(&g);
        cr_assert(g.status == 200 || (g.status == 422 && !strcmp(g.type, "/problems/compile-limit")),
                  "request %zu (%s): %ld %s; only the form or a compile-limit", i + 1, forms[i], g.status,
                  g.type);
    }
    long rss1 = server_rss_kb();
    cr_assert(rss0 > 0 && rss1 > 0, "the server's VmRSS is readable");
    if (!server_sanitized()) /* a sanitizer's allocator keeps freed memory (quarantine) */
        cr_assert_lt(rss1 - rss0, 128 * 1024, "the stopped derivations keep %ld kB (%ld -> %ld)", rss1 - rss0,
                     rss0, rss1);
    int status;
    cr_assert(harness_stop_checked(&srv, &status), "exit status %#x", status);
}

/* Requests for one model's forms derive one at a time; one that waits for another's
 * derivation still sees its client hang up: it ends then and frees its thread (it used
 * to wait for the lock, a whole derivation, before it could notice). */
Test(poll, a_form_waiting_for_another_is_cancelled_by_its_hang_up)
{
    static const char *const env[] = {"HAMEL_MAX_COMPILE_SECONDS=3", NULL};
    char id[128], first[256], second[256];
    start_with_car10(env, id, sizeof id);
    snprintf(first, sizeof first, "/v1/models/%s/equations?form=kane", id);
    snprintf(second, sizeof second, "/v1/models/%s/equations?form=appell", id);

    struct get g = {.path = first};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, get_thread, &g), 0);
    harness_nap(100);
    /* the first derivation ends at its byte budget after about 1.3 s here (3 s at most):
     * the second client leaves at 0.3 s, its derivation must end well before the first */
    struct get h = {.path = second, .timeout_ms = 200};
    get_thread(&h);
    cr_assert_eq(h.status, -1, "the second client gave up");
    double until = harness_now() + 1.5, gone = 0;
    while ((gone = metric("hamel_compiles_stopped_total{reason=\"client_gone\"}")) < 1 &&
           harness_now() < until)
        harness_nap(20);
    int pending = !atomic_load(&g.done);
    cr_assert_eq(gone, 1, "the waiting derivation ended when its client hung up");
    cr_assert(pending, "... while the first derivation (budget 3 s) still ran");
    pthread_join(th, NULL);
    cr_assert_eq(g.status, 422, "the first form past its budget: %ld", g.status);
    int status;
    cr_assert(harness_stop_checked(&srv, &status), "exit status %#x", status);
}
