/* test_isolate.c — an engine fault costs one request, never the service (issue 15, item 4),
 * against the real hamel-server.
 *
 * The engine runs in worker processes (server/isolate.h). With HAMEL_TEST_FAULTS=1 a
 * model named __fault_segv__ raises SIGSEGV while compiled, __fault_oom__ allocates
 * without bound while compiled (the worker's memory cap, HAMEL_WORKER_MEMORY_MB, ends it)
 * and __fault_abort__ calls abort() when run (__fault_abort_t13__ only in a run with
 * t_end 13: a fault in the middle of a batch). Each must answer 500 engine-fault naming
 * the model, while a job of another model running at the same time finishes and the
 * server goes on answering; the model is then quarantined: answered at once (no worker
 * dies again: hamel_engine_faults_total stays), after a restart on the same HAMEL_DATA
 * too, and listed by GET /v1/quarantine, until DELETE /v1/quarantine/{id} clears it. Without
 * HAMEL_TEST_FAULTS the names mean nothing. A worker killed from outside between calls is replaced, and that
 * is no model's fault.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

#define ISO_JOB_SECONDS 120.0 /* generous bound on the long job under a sanitizer */

static harness_server srv, srv2;

static void teardown(void)
{
    harness_stop(&srv2); /* first: it may use srv's data directory */
    harness_stop(&srv);
}

static const char *const fault_env[] = {"HAMEL_TEST_FAULTS=1", "HAMEL_WORKER_MEMORY_MB=1024", NULL};

static void start(harness_server *s, const char *const *env)
{
    cr_assert_eq(harness_start(s, env), 0, "the server did not start (log above)");
}

/* A one-coordinate model named `name` (a pendulum: V = -cos x). */
static char *model(const char *name)
{
    char *m = NULL;
    cr_assert(asprintf(&m,
                       "{\"name\":\"%s\",\"coordinates\":[\"x\"],\"kinetic_energy\":\"x'^2/2\","
                       "\"potential_energy\":\"-cos(x)\"}",
                       name) > 0);
    return m;
}

/* A simulation request of model(name) to t_end, as JSON text (caller frees). */
static char *simulation(const char *name, double t_end)
{
    char *m = model(name), *r = NULL;
    cr_assert(asprintf(&r,
                       "{\"model\":%s,\"initial\":{\"q\":{\"x\":1},\"qdot\":{\"x\":0}},\"t_end\":%g,"
                       "\"output\":{\"samples\":11},\"integrator\":{\"max_steps\":100000000}}",
                       m, t_end) > 0);
    free(m);
    return r;
}

static long request(harness_server *s, const char *method, const char *path, const char *body,
                    harness_resp *r)
{
    cr_assert_eq(harness_request(s, method, path, body, NULL, r), CURLE_OK, "%s %s", method, path);
    return r->status;
}

static double faults(harness_server *s)
{
    harness_resp r = {0};
    cr_assert_eq(request(s, "GET", "/metrics", NULL, &r), 200);
    double v = harness_metric(&r, "hamel_engine_faults_total");
    harness_resp_free(&r);
    return v;
}

/* Asserts r is the 500 engine-fault problem of the model named `name`; its model id
 * goes to id[80]. */
static void assert_fault(const harness_resp *r, const char *name, const char *signal, char id[80])
{
    cr_assert_eq(r->status, 500, "status %ld: %s", r->status, r->body);
    const char *type = json_string_value(json_object_get(r->json, "type"));
    cr_assert(type && strstr(type, "/engine-fault"), "type: %s", r->body);
    const char *mid = json_string_value(json_object_get(r->json, "model_id"));
    cr_assert(mid && !strncmp(mid, "sha256:", 7), "model_id: %s", r->body);
    const char *detail = json_string_value(json_object_get(r->json, "detail"));
    cr_assert(detail && strstr(detail, mid) && strstr(detail, name), "the detail names the model: %s",
              r->body);
    cr_assert_str_eq(json_string_value(json_object_get(r->json, "model_name")), name);
    if (signal)
        cr_assert_str_eq(json_string_value(json_object_get(r->json, "signal")), signal, "%s", r->body);
    snprintf(id, 80, "%s", mid);
}

/* Starts the long job of another model and waits until it runs (its progress, written by
 * the worker process, is past 0). Its id goes to job[64]. */
static void start_long_job(char job[64])
{
    char *body = simulation("long", 5e5);
    harness_resp r = {0};
    long st = request(&srv, "POST", "/v1/simulations", body, &r);
    free(body);
    cr_assert(st == 202 || st == 201 || st == 200, "the long job was accepted (%ld: %s)", st, r.body);
    snprintf(job, 64, "%s", json_string_value(json_object_get(r.json, "job_id")));
    harness_resp_free(&r);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", job);
    double deadline = harness_now() + ISO_JOB_SECONDS;
    double progress = 0;
    while (progress <= 0 && harness_now() < deadline) {
        cr_assert_eq(request(&srv, "GET", path, NULL, &r), 200);
        progress = json_number_value(json_object_get(r.json, "progress"));
        const char *st = json_string_value(json_object_get(r.json, "status"));
        cr_assert(st && (!strcmp(st, "queued") || !strcmp(st, "running")), "%s", r.body);
        harness_resp_free(&r);
        if (progress <= 0)
            harness_nap(20);
    }
    cr_assert(progress > 0, "the long job's progress crosses from its worker process");
}

/* The long job ran through the fault (it is still running, or, where the fault took longer
 * than the job, as under ThreadSanitizer's allocator beside other test passes, it has
 * already finished), then finishes done. */
static void long_job_finishes(const char *job)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", job);
    harness_resp r = {0};
    cr_assert_eq(request(&srv, "GET", path, NULL, &r), 200);
    const char *now = json_string_value(json_object_get(r.json, "status"));
    cr_assert(now && (!strcmp(now, "running") || !strcmp(now, "done")),
              "the long job ran through the fault: %s", r.body);
    char last[32];
    snprintf(last, sizeof last, "%s", now);
    harness_resp_free(&r);
    double deadline = harness_now() + ISO_JOB_SECONDS;
    while (!strcmp(last, "running") && harness_now() < deadline) {
        snprintf(path, sizeof path, "/v1/jobs/%s?wait=5", job);
        cr_assert_eq(request(&srv, "GET", path, NULL, &r), 200);
        const char *status = json_string_value(json_object_get(r.json, "status"));
        snprintf(last, sizeof last, "%s", status ? status : "?");
        harness_resp_free(&r);
    }
    cr_assert_str_eq(last, "done", "the other model's job finished");
}

/* Whether GET /v1/quarantine lists the model with this id: 1 with its entry checked
 * (its name, signal, operation and both dates), 0 when it is not listed. */
static int listed(harness_server *s, const char *id, const char *name, const char *signal)
{
    harness_resp r = {0};
    cr_assert_eq(request(s, "GET", "/v1/quarantine", NULL, &r), 200, "%s", r.body);
    json_t *list = json_object_get(r.json, "quarantined");
    cr_assert(json_is_array(list), "%s", r.body);
    cr_assert_eq(json_integer_value(json_object_get(r.json, "count")), (json_int_t)json_array_size(list),
                 "%s", r.body);
    cr_assert(json_is_false(json_object_get(r.json, "truncated")), "%s", r.body);
    int found = 0;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *mid = json_string_value(json_object_get(e, "model_id"));
        cr_assert(mid, "every entry has its model_id: %s", r.body);
        if (strcmp(mid, id) != 0)
            continue;
        found = 1;
        cr_assert_str_eq(json_string_value(json_object_get(e, "model_name")), name, "%s", r.body);
        cr_assert_str_eq(json_string_value(json_object_get(e, "signal")), signal, "%s", r.body);
        cr_assert_str_eq(json_string_value(json_object_get(e, "operation")), "running", "%s", r.body);
        const char *at = json_string_value(json_object_get(e, "quarantined_at"));
        const char *until = json_string_value(json_object_get(e, "quarantined_until"));
        cr_assert(at && until && strlen(at) == 20 && strcmp(at, until) < 0, "a day from at to until: %s",
                  r.body);
    }
    harness_resp_free(&r);
    return found;
}

static void healthy(harness_server *s)
{
    harness_resp r = {0};
    cr_assert_eq(request(s, "GET", "/v1/health", NULL, &r), 200, "the server goes on answering");
    harness_resp_free(&r);
}

Test(isolate, a_segv_while_compiling_costs_one_request, .fini = teardown, .timeout = 300)
{
    start(&srv, fault_env);
    char job[64], id[80];
    start_long_job(job);
    char *m = model("__fault_segv__");
    harness_resp r = {0};
    request(&srv, "POST", "/v1/models", m, &r);
    assert_fault(&r, "__fault_segv__", "SIGSEGV", id);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "operation")), "compiling");
    harness_resp_free(&r);
    long_job_finishes(job);
    healthy(&srv);
    cr_assert_eq(faults(&srv), 1);

    /* quarantined: the same problem at once, no worker dies again (as a simulation too) */
    char again[80];
    request(&srv, "POST", "/v1/models", m, &r);
    assert_fault(&r, "__fault_segv__", "SIGSEGV", again);
    cr_assert_str_eq(again, id);
    cr_assert(json_string_value(json_object_get(r.json, "quarantined_until")), "%s", r.body);
    harness_resp_free(&r);
    char *sim = simulation("__fault_segv__", 1);
    request(&srv, "POST", "/v1/simulations?wait=30", sim, &r);
    assert_fault(&r, "__fault_segv__", "SIGSEGV", again);
    harness_resp_free(&r);
    cr_assert_eq(faults(&srv), 1, "answered from the quarantine");

    /* other models are still compiled and run */
    char *ok = simulation("fine", 1);
    cr_assert_eq(request(&srv, "POST", "/v1/simulations?wait=30", ok, &r), 200, "%s", r.body);
    harness_resp_free(&r);
    free(ok);
    free(sim);
    free(m);
}

Test(isolate, a_runaway_allocation_while_compiling_meets_the_memory_cap, .fini = teardown, .timeout = 300)
{
    start(&srv, fault_env);
    char job[64], id[80];
    start_long_job(job);
    char *m = model("__fault_oom__");
    harness_resp r = {0};
    request(&srv, "POST", "/v1/models", m, &r);
    assert_fault(&r, "__fault_oom__", NULL, id);
    harness_resp_free(&r);
    long_job_finishes(job);
    healthy(&srv);
    request(&srv, "POST", "/v1/models", m, &r);
    assert_fault(&r, "__fault_oom__", NULL, id);
    harness_resp_free(&r);
    cr_assert_eq(faults(&srv), 1, "answered from the quarantine");
    free(m);
}

Test(isolate, an_abort_while_running_fails_the_job_and_quarantines_until_cleared, .fini = teardown,
     .timeout = 300)
{
    start(&srv, fault_env);
    char job[64], id[80], again[80];
    start_long_job(job);
    char *sim = simulation("__fault_abort__", 1);
    harness_resp r = {0};
    request(&srv, "POST", "/v1/simulations?wait=30", sim, &r);
    assert_fault(&r, "__fault_abort__", "SIGABRT", id);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "operation")), "running");
    harness_resp_free(&r);
    long_job_finishes(job);
    healthy(&srv);

    /* the model compiled: its real id is quarantined, for every request naming it */
    char path[160];
    snprintf(path, sizeof path, "/v1/models/%s", id);
    request(&srv, "GET", path, NULL, &r);
    assert_fault(&r, "__fault_abort__", "SIGABRT", again);
    harness_resp_free(&r);
    request(&srv, "POST", "/v1/simulations?wait=30", sim, &r);
    assert_fault(&r, "__fault_abort__", "SIGABRT", again);
    cr_assert_str_eq(again, id);
    harness_resp_free(&r);
    cr_assert_eq(faults(&srv), 1, "answered from the quarantine");
    snprintf(path, sizeof path, "/v1/quarantine/%s", id);
    cr_assert_eq(request(&srv, "GET", path, NULL, &r), 200, "%s", r.body);
    harness_resp_free(&r);
    cr_assert(listed(&srv, id, "__fault_abort__", "SIGABRT"), "GET /v1/quarantine lists the model");

    /* after a restart on the same data: still quarantined, at once */
    int status;
    cr_assert(harness_stop_checked(&srv, &status), "the server stopped cleanly");
    char data_env[PATH_MAX + 16];
    snprintf(data_env, sizeof data_env, "HAMEL_DATA=%s", srv.data);
    const char *env2[] = {"HAMEL_TEST_FAULTS=1", "HAMEL_WORKER_MEMORY_MB=1024", data_env, NULL};
    start(&srv2, env2);
    request(&srv2, "POST", "/v1/simulations?wait=30", sim, &r);
    assert_fault(&r, "__fault_abort__", "SIGABRT", again);
    cr_assert_str_eq(again, id);
    harness_resp_free(&r);
    cr_assert_eq(faults(&srv2), 0, "answered from the stored quarantine");
    cr_assert(listed(&srv2, id, "__fault_abort__", "SIGABRT"),
              "listed after a restart (read from the store)");

    /* an operator clears it: the model is run again (and, the hook still on, faults again) */
    cr_assert_eq(request(&srv2, "DELETE", path, NULL, &r), 204, "%s", r.body);
    harness_resp_free(&r);
    cr_assert_eq(request(&srv2, "DELETE", path, NULL, &r), 404, "%s", r.body);
    harness_resp_free(&r);
    cr_assert(!listed(&srv2, id, "__fault_abort__", "SIGABRT"), "no longer listed once cleared");
    request(&srv2, "POST", "/v1/simulations?wait=30", sim, &r);
    assert_fault(&r, "__fault_abort__", "SIGABRT", again);
    harness_resp_free(&r);
    cr_assert_eq(faults(&srv2), 1, "run again after the clear");
    healthy(&srv2);
    free(sim);
}

/* A batch's runs go to a worker in blocks (one call for several runs): a fault in one run
 * costs that run (engine-fault, the model quarantined); runs finished before it keep
 * their results, runs after it meet the quarantine, and the server goes on. */
Test(isolate, a_fault_inside_a_batch_costs_its_run_and_quarantines_the_rest, .fini = teardown, .timeout = 300)
{
    static const char *const env[] = {"HAMEL_TEST_FAULTS=1", "HAMEL_WORKER_MEMORY_MB=1024", "HAMEL_WORKERS=1",
                                      NULL};
    start(&srv, env);
    enum { RUNS = 8, BAD = 6 };
    char *m = model("__fault_abort_t13__"), *body = NULL, runs[1024] = "";
    for (int i = 0; i < RUNS; i++) {
        size_t len = strlen(runs);
        snprintf(runs + len, sizeof runs - len, "%s{\"t_end\":%g}", i ? "," : "",
                 i == BAD ? 13 : 1 + 0.1 * i);
    }
    cr_assert(asprintf(&body,
                       "{\"model\":%s,\"base\":{\"initial\":{\"q\":{\"x\":1},\"qdot\":{\"x\":0}},"
                       "\"output\":{\"samples\":11}},\"runs\":[%s]}",
                       m, runs) > 0);
    free(m);
    harness_resp r = {0};
    cr_assert_eq(request(&srv, "POST", "/v1/batches?wait=120", body, &r), 200, "%s", r.body);
    free(body);
    json_t *res = json_object_get(r.json, "results");
    cr_assert_eq(json_array_size(res), RUNS, "%s", r.body);
    char done_job[64] = "";
    for (int i = 0; i < RUNS; i++) {
        json_t *line = json_array_get(res, (size_t)i);
        const char *st = json_string_value(json_object_get(line, "status"));
        json_t *p = json_object_get(line, "problem");
        const char *type = json_string_value(json_object_get(p, "type"));
        if (i < BAD) {
            cr_assert_str_eq(st, "done", "run %d before the fault keeps its result: %s", i, r.body);
            snprintf(done_job, sizeof done_job, "%s", json_string_value(json_object_get(line, "job_id")));
        } else {
            cr_assert_str_eq(st, "failed", "run %d: %s", i, r.body);
            cr_assert(type && strstr(type, "/engine-fault"), "run %d fails as an engine fault: %s", i,
                      r.body);
        }
        if (i == BAD)
            cr_assert_str_eq(json_string_value(json_object_get(p, "signal")), "SIGABRT",
                             "the run that aborted");
    }
    cr_assert_eq(json_integer_value(json_object_get(r.json, "succeeded")), BAD);
    harness_resp_free(&r);
    cr_assert_eq(faults(&srv), 1, "one worker died; the runs after it were answered by the quarantine");

    /* a run of the block is a job like any other */
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", done_job);
    cr_assert_eq(request(&srv, "GET", path, NULL, &r), 200, "%s", r.body);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "status")), "done");
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "job_id")), done_job);
    cr_assert_eq(json_array_size(json_object_get(json_object_get(r.json, "trajectory"), "t")), 11);
    harness_resp_free(&r);
    healthy(&srv);
}

Test(isolate, the_fault_names_mean_nothing_without_the_test_flag, .fini = teardown, .timeout = 120)
{
    start(&srv, NULL);
    const char *names[] = {"__fault_segv__", "__fault_oom__", "__fault_abort__"};
    for (int i = 0; i < 3; i++) {
        char *sim = simulation(names[i], 1);
        harness_resp r = {0};
        cr_assert_eq(request(&srv, "POST", "/v1/simulations?wait=30", sim, &r), 200, "%s: %s", names[i],
                     r.body);
        harness_resp_free(&r);
        free(sim);
    }
    cr_assert_eq(faults(&srv), 0);
}

Test(isolate, listing_and_clearing_a_quarantine_need_the_token, .fini = teardown, .timeout = 120)
{
    const char *env[] = {"HAMEL_TEST_FAULTS=1", "HAMEL_TOKEN=sesame", NULL};
    start(&srv, env);
    harness_resp r = {0};
    cr_assert_eq(request(&srv, "DELETE", "/v1/quarantine/sha256:00", NULL, &r), 401, "%s", r.body);
    harness_resp_free(&r);
    cr_assert_eq(request(&srv, "GET", "/v1/quarantine", NULL, &r), 401, "%s", r.body);
    cr_assert_null(json_object_get(r.json, "quarantined"), "nothing of the list without the token: %s",
                   r.body);
    harness_resp_free(&r);
    const char *auth[] = {"Authorization: Bearer sesame", NULL};
    cr_assert_eq(harness_request(&srv, "DELETE", "/v1/quarantine/sha256:00", NULL, auth, &r), CURLE_OK);
    cr_assert_eq(r.status, 404, "%s", r.body);
    harness_resp_free(&r);
    cr_assert_eq(harness_request(&srv, "GET", "/v1/quarantine", NULL, auth, &r), CURLE_OK);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_eq(json_array_size(json_object_get(r.json, "quarantined")), 0, "%s", r.body);
    harness_resp_free(&r);
}

/* The engine worker processes of the server (children whose command line has
 * --engine-worker), into pids[cap]; returns how many. */
static int workers_of(pid_t server, pid_t *pids, int cap)
{
    int n = 0;
    DIR *d = opendir("/proc");
    cr_assert(d);
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        char path[300], buf[4096];
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0)
            continue;
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int ppid = 0;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *rp = strrchr(buf, ')');
        if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1 || ppid != server)
            continue;
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
        f = fopen(path, "r");
        if (!f)
            continue;
        len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < len; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[len] = '\0';
        if (strstr(buf, "--engine-worker"))
            pids[n++] = pid;
    }
    closedir(d);
    return n;
}

Test(isolate, a_worker_killed_while_idle_is_replaced_without_a_fault, .fini = teardown, .timeout = 120)
{
    start(&srv, NULL);
    harness_resp r = {0};
    char *m = model("first");
    cr_assert_eq(request(&srv, "POST", "/v1/models", m, &r), 201, "%s", r.body);
    harness_resp_free(&r);
    free(m);
    pid_t pids[64];
    int n = workers_of(srv.pid, pids, 64);
    cr_assert(n >= 1, "the engine runs in a worker process of the server");
    for (int i = 0; i < n; i++)
        kill(pids[i], SIGKILL);
    harness_nap(100);
    m = model("second");
    cr_assert_eq(request(&srv, "POST", "/v1/models", m, &r), 201, "a new worker compiles it: %s", r.body);
    harness_resp_free(&r);
    free(m);
    char *sim = simulation("first", 1);
    cr_assert_eq(request(&srv, "POST", "/v1/simulations?wait=30", sim, &r), 200,
                 "a model the dead worker held is compiled again where it runs: %s", r.body);
    harness_resp_free(&r);
    free(sim);
    cr_assert_eq(faults(&srv), 0, "a worker that died between calls is no model's fault");
}

/* A worker keeps at most 64 compiled models (server/isolate.c, ISO_WORKER_MODELS): past
 * them the least recently used one goes, and its next run compiles it again in the worker,
 * with the same result. One worker, so every model passes through it. */
Test(isolate, a_model_a_worker_let_go_is_compiled_again_for_its_run, .fini = teardown, .timeout = 300)
{
    const char *const env[] = {"HAMEL_WORKERS=1", NULL};
    start(&srv, env);
    harness_resp r = {0}, again = {0};
    char *sim = simulation("kept", 1);
    cr_assert_eq(request(&srv, "POST", "/v1/simulations?wait=30", sim, &r), 200, "%s", r.body);
    for (int i = 0; i < 70; i++) { /* more models than a worker keeps */
        char name[32];
        snprintf(name, sizeof name, "other-%d", i);
        char *m = model(name);
        cr_assert_eq(request(&srv, "POST", "/v1/models", m, &again), 201, "%s", again.body);
        harness_resp_free(&again);
        free(m);
    }
    /* the same run of the first model, not from a cache: the result's own cache is
     * bypassed by another t_end, then compared with a run to t_end 1 inside it */
    char *longer = simulation("kept", 2);
    cr_assert_eq(request(&srv, "POST", "/v1/simulations?wait=30", longer, &again), 200, "%s", again.body);
    cr_assert(json_is_false(json_object_get(again.json, "cached")), "computed, not cached");
    json_t *t1 = json_object_get(json_object_get(r.json, "trajectory"), "t");
    json_t *t2 = json_object_get(json_object_get(again.json, "trajectory"), "t");
    cr_assert(json_array_size(t1) > 0 && json_array_size(t2) > 0);
    cr_assert_eq(faults(&srv), 0);
    harness_resp_free(&again);
    harness_resp_free(&r);
    free(longer);
    free(sim);
}

/* The size of fd 5 of process pid (an engine worker's reply memfd), or -1. */
static long long reply_memfd_size(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/5", (int)pid);
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* A result's text of 64 KB or more comes through the worker's reply memfd: a large one
 * (about 9 MB: 100,000 samples), a smaller one after it (whose text is shorter than what the memfd held),
 * and a small one on the socket all arrive whole; the memfd is emptied once a text past
 * 8 MB was read (an idle worker keeps no copy of it). */
Test(isolate, results_through_the_reply_memfd_arrive_whole, .fini = teardown, .timeout = 300)
{
    start(&srv, NULL);
    const int samples[] = {100000, 2001, 11};
    for (int i = 0; i < 3; i++) {
        char *m = model("memfd"), *body = NULL;
        cr_assert(asprintf(&body,
                           "{\"model\":%s,\"initial\":{\"q\":{\"x\":1},\"qdot\":{\"x\":0}},\"t_end\":%d,"
                           "\"output\":{\"samples\":%d},\"hamel\":\"none\"}",
                           m, 10 + i, samples[i]) > 0);
        free(m);
        harness_resp r = {0};
        cr_assert_eq(request(&srv, "POST", "/v1/simulations?wait=120", body, &r), 200, "%.300s", r.body);
        free(body);
        cr_assert(r.json, "the result parses (%zu bytes)", r.len);
        json_t *t = json_object_get(json_object_get(r.json, "trajectory"), "t");
        cr_assert_eq(json_array_size(t), (size_t)samples[i], "%d samples", samples[i]);
        cr_assert_float_eq(json_number_value(json_array_get(t, json_array_size(t) - 1)), 10.0 + i, 1e-12,
                           "the last sample is at t_end");
        if (i == 0) {
            cr_assert_gt(r.len, (size_t)(8 << 20), "past the memfd's keep size: %zu bytes", r.len);
            pid_t pids[64];
            int n = workers_of(srv.pid, pids, 64);
            cr_assert(n >= 1);
            for (int k = 0; k < n; k++)
                cr_assert_leq(reply_memfd_size(pids[k]), (long long)(8 << 20),
                              "worker %d keeps %lld bytes of a text already read", (int)pids[k],
                              reply_memfd_size(pids[k]));
        }
        harness_resp_free(&r);
    }
}
