/* test_cluster.c — three hamel-servers on one Redis behind nginx, all on loopback
 * (issue 11, items 1 and 2).
 *
 * Each test starts its own redis-server (append-only file in a temporary directory, so
 * a restart keeps the stream), three build/hamel-server with HAMEL_REDIS (harness.h)
 * and nginx running docker/nginx.conf — the file compose ships — with the upstream
 * addresses and the listen port replaced (after `nginx -t` accepts it). Checked:
 * a result computed through one instance is a cache hit through another and any
 * instance answers for any job; a job running longer than its lease stays with its
 * instance (which renews the lease), and after kill -9 of that instance it is taken over
 * and finishes elsewhere with the result a standalone server computes; a job cancelled
 * through any instance stops where it runs; 1,000 jobs through nginx with none lost and none run twice (the
 * instances' hamel_jobs_total{outcome="done"} sum to 1,000); Redis stopped under load
 * answers a clear 503 (unavailable, Retry-After; /readyz too) and, once Redis is back, the same
 * servers accept and finish jobs again; a batch posted to one instance runs on several;
 * after Redis loses its data (FLUSHALL) a job that waited in the stream fails saying so,
 * the running one finishes and new ones run; results in Redis keep their bounds; with
 * Redis held (SIGSTOP), an instance with one poll thread answers /v1/health while its
 * /readyz waits for Redis; a model the engine crashed on through one instance
 * (HAMEL_TEST_FAULTS=1) is answered from the quarantine by every other and listed by
 * every GET /v1/quarantine, until it is cleared through any.
 *
 * The suite cluster_auth starts redis-server with a password and an ACL user: two
 * servers, one on each, share database 2; a wrong password and rediss:// are refused
 * at start, and no log shows a password.
 *
 * Needs redis-server and nginx (scripts/install-deps.sh test); without them every test
 * is skipped (cluster_auth needs only redis-server). Built as build/test-cluster; scripts/run-tests.sh runs
 * it once.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/server/harness.h"

#define CLUSTER_N 3
#define CLUSTER_LEASE "2"          /* HAMEL_REDIS_LEASE, seconds */
#define CLUSTER_JOBS 1000          /* the lost-and-duplicated test */
#define CLUSTER_THREADS 8          /* clients submitting them */
#define CLUSTER_LONG_T_END 40000.0 /* rolling disk: about 4.3 s of integration (first tier) */
#define CLUSTER_WAIT_SECONDS 30.0
/* The jobs that must outlast a lease are timed on the first tier: a hot model would move
 * to the optimizing tier and finish twice as fast, before the test kills its runner. */
#define CLUSTER_TIER "HAMEL_NO_NATIVE=1"

typedef struct proc {
    pid_t pid;
    int port;
} proc;

static char dir[512];           /* the cluster's temporary directory */
static char root[PATH_MAX + 8]; /* the repository */
static proc redis;
static proc nginx;
static harness_server srv[CLUSTER_N];
static harness_server front; /* nginx, as a harness_server for harness_request */
static json_t *rolling;      /* the shared rolling-disk case */

static int have(const char *prog)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

/* A free loopback port (bound, read, released). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t len = sizeof a;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Whether something accepts connections on 127.0.0.1:port. */
static int port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Starts argv (NULL-terminated) with its output in dir/log; it dies with the test. */
static pid_t spawn(char *const argv[], const char *log)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, log);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void wait_port(int port, const char *what)
{
    for (int i = 0; i < 500; i++) {
        if (port_open(port))
            return;
        harness_nap(10);
    }
    cr_assert_fail("%s did not listen on port %d (logs in %s)", what, port, dir);
}

/* Whether Redis at 127.0.0.1:port answers PING with PONG (it accepts connections while
 * it is still loading its append-only file, and answers LOADING then). */
static int redis_ready(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[64] = "";
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6 && recv(fd, buf, sizeof buf - 1, 0) > 0 &&
             !strncmp(buf, "+PONG", 5);
    close(fd);
    return ok;
}

static void redis_start(void)
{
    char port[16];
    snprintf(port, sizeof port, "%d", redis.port);
    char *const argv[] = {"redis-server", "--port", port,           "--bind", "127.0.0.1",   "--dir", dir,
                          "--save",       "",       "--appendonly", "yes",    "--daemonize", "no",    NULL};
    redis.pid = spawn(argv, "redis.log");
    for (int i = 0; i < 500 && !redis_ready(redis.port); i++)
        harness_nap(10);
    cr_assert(redis_ready(redis.port), "redis-server did not answer PING on port %d (logs in %s)", redis.port,
              dir);
}

/* Stops redis-server with SIGTERM (it writes its append-only file) and reaps it. */
static void redis_stop(void)
{
    if (redis.pid <= 0)
        return;
    kill(redis.pid, SIGTERM);
    waitpid(redis.pid, NULL, 0);
    redis.pid = 0;
}

/* Writes dir/nginx.conf (a main file around docker/nginx.conf with the addresses of
 * this cluster) and checks it with nginx -t. */
static void nginx_config(void)
{
    char src[PATH_MAX + 32];
    snprintf(src, sizeof src, "%s/docker/nginx.conf", root);
    FILE *f = fopen(src, "r");
    cr_assert(f, "cannot read %s", src);
    char *text = calloc(1, 65536);
    size_t n = fread(text, 1, 65535, f);
    fclose(f);
    text[n] = '\0';
    char site[PATH_MAX + 32], main_conf[PATH_MAX + 32];
    snprintf(site, sizeof site, "%s/hamel.conf", dir);
    snprintf(main_conf, sizeof main_conf, "%s/nginx.conf", dir);
    FILE *out = fopen(site, "w");
    cr_assert(out);
    int replaced = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char from[32];
        int done = 0;
        for (int i = 0; i < CLUSTER_N && !done; i++) {
            snprintf(from, sizeof from, "hamel%d:8080", i + 1);
            char *at = strstr(line, from);
            if (at) {
                fprintf(out, "%.*s127.0.0.1:%d%s\n", (int)(at - line), line, srv[i].port, at + strlen(from));
                done = 1;
                replaced++;
            }
        }
        if (!done && strstr(line, "listen 8080;")) {
            fprintf(out, "    listen 127.0.0.1:%d;\n", nginx.port);
            done = 1;
            replaced++;
        }
        if (!done)
            fprintf(out, "%s\n", line);
    }
    fclose(out);
    free(text);
    cr_assert_eq(replaced, CLUSTER_N + 1, "docker/nginx.conf: %d of the %d addresses found", replaced,
                 CLUSTER_N + 1);
    out = fopen(main_conf, "w");
    cr_assert(out);
    fprintf(out,
            "daemon off;\nmaster_process off;\nworker_processes 1;\npid %s/nginx.pid;\n"
            "error_log %s/nginx-error.log warn;\nevents { worker_connections 4096; }\n"
            "http {\n  access_log off;\n  client_body_temp_path %s/nginx-body;\n"
            "  proxy_temp_path %s/nginx-proxy;\n  fastcgi_temp_path %s/nginx-fcgi;\n"
            "  uwsgi_temp_path %s/nginx-uwsgi;\n  scgi_temp_path %s/nginx-scgi;\n  include %s;\n}\n",
            dir, dir, dir, dir, dir, dir, dir, site);
    fclose(out);
    char cmd[8 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "nginx -t -q -p '%s' -e '%s/nginx-error.log' -c '%s' >>'%s/nginx.log' 2>&1",
             dir, dir, main_conf, dir);
    cr_assert_eq(system(cmd), 0, "nginx -t rejects docker/nginx.conf (see %s/nginx.log)", dir);
}

static void nginx_start(void)
{
    char main_conf[PATH_MAX + 32], err[PATH_MAX + 32];
    snprintf(main_conf, sizeof main_conf, "%s/nginx.conf", dir);
    snprintf(err, sizeof err, "%s/nginx-error.log", dir);
    char *const argv[] = {"nginx", "-p", dir, "-e", err, "-c", main_conf, NULL};
    nginx.pid = spawn(argv, "nginx.log");
    wait_port(nginx.port, "nginx");
}

static void server_start(int i)
{
    static char url[64];
    snprintf(url, sizeof url, "HAMEL_REDIS=redis://127.0.0.1:%d", redis.port);
    const char *const env[] = {url,
                               "HAMEL_REDIS_LEASE=" CLUSTER_LEASE,
                               "HAMEL_MAX_CONNECTIONS_PER_IP=0",
                               "HAMEL_QUEUE=4096",
                               "HAMEL_WORKERS=2",
                               "HAMEL_ACCESS_LOG=0",
                               "HAMEL_REDIS_TIMEOUT=1",
                               CLUSTER_TIER,
                               "HAMEL_TEST_FAULTS=1",
                               "HAMEL_WORKER_MEMORY_MB=1024",
                               NULL};
    cr_assert_eq(harness_start(&srv[i], env), 0, "instance %d did not start (log above)", i);
}

static void setup(void)
{
    char path_env[4096];
    snprintf(path_env, sizeof path_env, "%s:/usr/sbin:/sbin",
             getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    setenv("PATH", path_env, 1); /* nginx lives in /usr/sbin */
    if (!have("redis-server") || !have("nginx"))
        cr_skip_test("redis-server or nginx is not installed (scripts/install-deps.sh test)");
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert(n > 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0'; /* build/ */
    snprintf(root, sizeof root, "%s/..", exe);
    snprintf(dir, sizeof dir, "%s/hamel-cluster-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(dir));
    redis.port = free_port();
    redis_start();
    for (int i = 0; i < CLUSTER_N; i++)
        server_start(i);
    nginx.port = free_port();
    nginx_config();
    nginx_start();
    memset(&front, 0, sizeof front);
    front.port = nginx.port;
    snprintf(front.url, sizeof front.url, "http://127.0.0.1:%d", nginx.port);
    char path[PATH_MAX];
    json_error_t jerr;
    rolling = harness_case_load("greenwood-5.3-rolling-disk.json", path, sizeof path, &jerr);
    cr_assert(rolling, "cannot load %s: %s", path, jerr.text);
}

static void teardown(void)
{
    for (int i = 0; i < CLUSTER_N; i++)
        harness_stop(&srv[i]);
    if (nginx.pid > 0) {
        kill(nginx.pid, SIGTERM);
        waitpid(nginx.pid, NULL, 0);
        nginx.pid = 0;
    }
    redis_stop();
    json_decref(rolling);
    rolling = NULL;
    if (dir[0] && !getenv("HAMEL_KEEP_TEST_DIRS")) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    dir[0] = '\0';
}

/* The rolling-disk request ending at t_end with `samples` samples. */
static json_t *rolling_request(double t_end, int samples)
{
    json_t *req = json_deep_copy(json_object_get(rolling, "simulation"));
    json_object_set(req, "model", json_object_get(rolling, "model"));
    json_object_set_new(req, "t_end", json_real(t_end));
    json_object_set_new(req, "output", json_pack("{s:i}", "samples", samples));
    json_object_set_new(json_object_get(req, "integrator"), "max_steps", json_integer(1000000000));
    return req;
}

static harness_resp call(const harness_server *s, const char *method, const char *path, const json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    harness_resp r;
    CURLcode rc = harness_request(s, method, path, text, NULL, &r);
    free(text);
    cr_assert_eq(rc, CURLE_OK, "%s %s%s: %s", method, s->url, path, curl_easy_strerror(rc));
    return r;
}

static const char *str(const json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

/* GET /v1/jobs/{id} through s until it is no longer queued or running; the last answer. */
static harness_resp wait_job(const harness_server *s, const char *id, double seconds)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    double until = harness_now() + seconds;
    for (;;) {
        harness_resp r = call(s, "GET", path, NULL);
        const char *st = r.json ? str(r.json, "status") : NULL;
        int pending = r.status == 200 && st && (!strcmp(st, "queued") || !strcmp(st, "running"));
        if (!pending || harness_now() > until)
            return r;
        harness_resp_free(&r);
        harness_nap(20);
    }
}

/* The sum of one series over the running instances' /metrics. */
static double metric_sum(const char *series)
{
    double sum = 0;
    for (int i = 0; i < CLUSTER_N; i++) {
        if (srv[i].pid <= 0)
            continue;
        harness_resp r = call(&srv[i], "GET", "/metrics", NULL);
        double v = harness_metric(&r, series);
        harness_resp_free(&r);
        sum += v > 0 ? v : 0;
    }
    return sum;
}

TestSuite(cluster, .init = setup, .fini = teardown, .timeout = 120);

Test(cluster, a_result_computed_through_one_instance_is_a_cache_hit_through_another)
{
    json_t *req = rolling_request(2.0, 50);
    harness_resp a = call(&srv[0], "POST", "/v1/simulations?wait=30", req);
    cr_assert_eq(a.status, 200, "through A: %ld %s", a.status, a.body);
    cr_assert(json_is_false(json_object_get(a.json, "cached")), "A computed it");
    harness_resp b = call(&srv[1], "POST", "/v1/simulations?wait=30", req);
    cr_assert_eq(b.status, 200, "through B: %ld %s", b.status, b.body);
    cr_assert(json_is_true(json_object_get(b.json, "cached")), "B answers from the shared store: %.200s",
              b.body);
    cr_assert(json_equal(json_object_get(a.json, "trajectory"), json_object_get(b.json, "trajectory")),
              "the same trajectory");
    /* Any instance answers for the job, and the model is known everywhere. */
    char path[160];
    snprintf(path, sizeof path, "/v1/jobs/%s", str(a.json, "job_id"));
    harness_resp c = call(&srv[2], "GET", path, NULL);
    cr_assert_eq(c.status, 200, "C answers for A's job: %ld %s", c.status, c.body);
    cr_assert_str_eq(str(c.json, "status"), "done");
    snprintf(path, sizeof path, "/v1/models/%s", str(a.json, "model_id"));
    harness_resp m = call(&srv[2], "GET", path, NULL);
    cr_assert_eq(m.status, 200, "C knows A's model: %ld %s", m.status, m.body);
    harness_resp_free(&a);
    harness_resp_free(&b);
    harness_resp_free(&c);
    harness_resp_free(&m);
    json_decref(req);
}

Test(cluster, a_job_whose_instance_dies_is_finished_by_another)
{
    /* The reference: the same request on a standalone server (SQLite, no Redis). */
    harness_server alone;
    const char *const alone_env[] = {CLUSTER_TIER, NULL};
    cr_assert_eq(harness_start(&alone, alone_env), 0);
    json_t *req = rolling_request(CLUSTER_LONG_T_END, 2);
    harness_resp ref = call(&alone, "POST", "/v1/simulations", req);
    cr_assert_eq(ref.status, 202);
    char ref_id[64];
    snprintf(ref_id, sizeof ref_id, "%s", str(ref.json, "job_id"));
    harness_resp_free(&ref);

    harness_resp sub = call(&srv[0], "POST", "/v1/simulations", req);
    cr_assert_eq(sub.status, 202, "%ld %s", sub.status, sub.body);
    char id[64];
    snprintf(id, sizeof id, "%s", str(sub.json, "job_id"));
    harness_resp_free(&sub);

    /* Which instance runs it? Kill that one, without warning. */
    int victim = -1;
    for (int k = 0; k < 500 && victim < 0; k++) {
        for (int i = 0; i < CLUSTER_N && victim < 0; i++) {
            harness_resp r = call(&srv[i], "GET", "/metrics", NULL);
            if (harness_metric(&r, "hamel_jobs_running") >= 1)
                victim = i;
            harness_resp_free(&r);
        }
        harness_nap(10);
    }
    cr_assert(victim >= 0, "no instance ran the job");
    /* Longer than the lease: the running instance renews it, nobody takes the job. */
    harness_nap(2600);
    for (int i = 0; i < CLUSTER_N; i++) {
        char cmd[PATH_MAX + 128];
        snprintf(cmd, sizeof cmd, "grep -q 'job %s: taken over' '%s'", id, srv[i].log);
        cr_assert(system(cmd) != 0, "instance %d took the job over from a live instance", i);
    }
    harness_resp still = call(&srv[victim], "GET", "/metrics", NULL);
    double running = harness_metric(&still, "hamel_jobs_running");
    harness_resp_free(&still);
    cr_assert_eq(running, 1, "instance %d still runs it (hamel_jobs_running %g)", victim, running);
    kill(srv[victim].pid, SIGKILL);
    waitpid(srv[victim].pid, NULL, 0);
    srv[victim].pid = 0;

    harness_resp done = wait_job(&front, id, CLUSTER_WAIT_SECONDS);
    cr_assert_eq(done.status, 200, "%ld %s", done.status, done.body);
    cr_assert_str_eq(str(done.json, "status"), "done", "the job finished after instance %d died: %.300s",
                     victim, done.body);
    harness_resp want = wait_job(&alone, ref_id, CLUSTER_WAIT_SECONDS);
    cr_assert_str_eq(str(want.json, "status"), "done");
    cr_assert(json_equal(json_object_get(done.json, "trajectory"), json_object_get(want.json, "trajectory")),
              "the taken-over run gives the standalone server's trajectory");
    /* A survivor's log says it took the job over. */
    int seen = 0;
    for (int i = 0; i < CLUSTER_N; i++) {
        if (i == victim)
            continue;
        char cmd[PATH_MAX + 128];
        snprintf(cmd, sizeof cmd, "grep -q 'job %s: taken over' '%s'", id, srv[i].log);
        seen |= system(cmd) == 0;
    }
    cr_assert(seen, "no survivor logged taking job %s over", id);
    harness_resp_free(&done);
    harness_resp_free(&want);
    json_decref(req);
    harness_stop(&alone);
}

/* The instance whose hamel_jobs_running is at least 1 (waiting up to 5 s), or -1. */
static int running_on(void)
{
    for (int k = 0; k < 500; k++) {
        for (int i = 0; i < CLUSTER_N; i++) {
            if (srv[i].pid <= 0)
                continue;
            harness_resp r = call(&srv[i], "GET", "/metrics", NULL);
            double v = harness_metric(&r, "hamel_jobs_running");
            harness_resp_free(&r);
            if (v >= 1)
                return i;
        }
        harness_nap(10);
    }
    return -1;
}

Test(cluster, a_job_cancelled_through_any_instance_stops_where_it_runs)
{
    json_t *req = rolling_request(CLUSTER_LONG_T_END * 30, 2);
    harness_resp sub = call(&srv[0], "POST", "/v1/simulations", req);
    cr_assert_eq(sub.status, 202, "%ld %s", sub.status, sub.body);
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", str(sub.json, "job_id"));
    harness_resp_free(&sub);
    int runner = running_on();
    cr_assert(runner >= 0, "no instance ran the job");
    int other = runner == 2 ? 1 : 2; /* neither the runner nor the submitter (0), if possible */
    harness_resp del = call(&srv[other], "DELETE", path, NULL);
    cr_assert_eq(del.status, 200, "DELETE through instance %d: %ld %s", other, del.status, del.body);
    cr_assert_str_eq(str(del.json, "status"), "cancelled");
    harness_resp_free(&del);
    double t0 = harness_now();
    for (;;) {
        harness_resp r = call(&srv[runner], "GET", "/metrics", NULL);
        double v = harness_metric(&r, "hamel_jobs_running");
        harness_resp_free(&r);
        if (v == 0)
            break;
        cr_assert(harness_now() - t0 < 5.0, "instance %d still runs the cancelled job", runner);
        harness_nap(20);
    }
    for (int i = 0; i < CLUSTER_N; i++) {
        harness_resp r = wait_job(&srv[i], path + strlen("/v1/jobs/"), 5.0);
        cr_assert_str_eq(str(r.json, "status"), "cancelled", "instance %d: %.200s", i, r.body);
        harness_resp_free(&r);
    }
    json_decref(req);
}

Test(cluster, a_job_that_outlives_its_instances_twice_fails_instead_of_running_again)
{
    json_t *req = rolling_request(CLUSTER_LONG_T_END, 2);
    harness_resp sub = call(&srv[0], "POST", "/v1/simulations", req);
    cr_assert_eq(sub.status, 202, "%ld %s", sub.status, sub.body);
    char id[64];
    snprintf(id, sizeof id, "%s", str(sub.json, "job_id"));
    harness_resp_free(&sub);
    for (int k = 0; k < 2; k++) { /* the instance running it dies, twice */
        int victim = running_on();
        cr_assert(victim >= 0, "round %d: no instance ran the job", k);
        kill(srv[victim].pid, SIGKILL);
        waitpid(srv[victim].pid, NULL, 0);
        srv[victim].pid = 0;
    }
    harness_resp r = wait_job(&front, id, CLUSTER_WAIT_SECONDS);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    cr_assert_str_eq(str(r.json, "status"), "failed", "%.300s", r.body);
    const char *detail = str(json_object_get(r.json, "problem"), "detail");
    cr_assert(detail && strstr(detail, "2 instances stopped"), "the problem says why: %s", detail);
    harness_resp_free(&r);
    json_decref(req);
}

/* Whether GET /v1/quarantine through s lists the model with this id (with its name and
 * signal). */
static int quarantine_lists(const harness_server *s, const char *id)
{
    harness_resp r = call(s, "GET", "/v1/quarantine", NULL);
    cr_assert_eq(r.status, 200, "%ld %s", r.status, r.body);
    int found = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(r.json, "quarantined"), i, e)
    {
        const char *mid = str(e, "model_id");
        cr_assert(mid, "every entry has its model_id: %s", r.body);
        if (strcmp(mid, id) != 0)
            continue;
        found = 1;
        cr_assert_str_eq(str(e, "model_name"), "__fault_abort__", "%s", r.body);
        cr_assert_str_eq(str(e, "signal"), "SIGABRT", "%s", r.body);
        cr_assert(str(e, "quarantined_at") && str(e, "quarantined_until"), "%s", r.body);
    }
    harness_resp_free(&r);
    return found;
}

/* A model the engine crashes on (the test hook) through one instance is quarantined on
 * all: the others answer its 500 engine-fault at once, no worker of theirs dies. */
Test(cluster, a_poison_model_does_not_walk_from_instance_to_instance)
{
    json_t *model = json_pack("{s:s, s:[s], s:s, s:s}", "name", "__fault_abort__", "coordinates", "x",
                              "kinetic_energy", "x'^2/2", "potential_energy", "x^2/2");
    json_t *req = json_pack("{s:O, s:{s:{s:f}, s:{s:f}}, s:f}", "model", model, "initial", "q", "x", 1.0,
                            "qdot", "x", 0.0, "t_end", 1.0);
    harness_resp r = call(&srv[0], "POST", "/v1/simulations?wait=30", req);
    cr_assert_eq(r.status, 500, "%ld %s", r.status, r.body);
    cr_assert(strstr(str(r.json, "type"), "/engine-fault"), "%s", r.body);
    char id[80];
    snprintf(id, sizeof id, "%s", str(r.json, "model_id"));
    harness_resp_free(&r);
    cr_assert_eq(metric_sum("hamel_engine_faults_total"), 1, "one worker died, on whichever instance ran it");
    for (int i = 0; i < CLUSTER_N; i++) {
        r = call(&srv[i], "POST", "/v1/simulations?wait=30", req);
        cr_assert_eq(r.status, 500, "instance %d: %ld %s", i, r.status, r.body);
        cr_assert_str_eq(str(r.json, "model_id"), id, "instance %d", i);
        cr_assert(str(r.json, "quarantined_until"), "instance %d answers from the quarantine: %s", i, r.body);
        harness_resp_free(&r);
    }
    cr_assert_eq(metric_sum("hamel_engine_faults_total"), 1, "no instance ran it again");
    for (int i = 0; i < CLUSTER_N; i++)
        cr_assert(quarantine_lists(&srv[i], id), "instance %d lists the model (from Redis)", i);

    /* cleared through one instance, it is run again through another (and, the hook on,
     * crashes its worker again) */
    char path[160];
    snprintf(path, sizeof path, "/v1/quarantine/%s", id);
    r = call(&srv[1], "DELETE", path, NULL);
    cr_assert_eq(r.status, 204, "%ld %s", r.status, r.body);
    harness_resp_free(&r);
    harness_nap(1500); /* past what another instance holds in memory of a record it read */
    cr_assert(!quarantine_lists(&srv[0], id), "cleared: no instance lists it");
    r = call(&srv[2], "POST", "/v1/simulations?wait=30", req);
    cr_assert_eq(r.status, 500, "%ld %s", r.status, r.body);
    harness_resp_free(&r);
    cr_assert_eq(metric_sum("hamel_engine_faults_total"), 2, "run again once cleared");
    json_decref(req);
    json_decref(model);
}

/* ---- 1,000 jobs --------------------------------------------------------------------- */

typedef struct load {
    int first, step, n;
    char (*ids)[64];
    int retries;
} load;

static double load_t_end(int i) { return 0.5 + 1e-3 * i; }

static void *load_submit(void *arg)
{
    load *l = arg;
    for (int i = l->first; i < l->n; i += l->step) {
        json_t *req = rolling_request(load_t_end(i), 3);
        char *text = json_dumps(req, JSON_COMPACT | JSON_REAL_PRECISION(17));
        json_decref(req);
        for (int attempt = 0; attempt < 200; attempt++) {
            harness_resp r;
            CURLcode rc = harness_request(&front, "POST", "/v1/simulations", text, NULL, &r);
            int ok = rc == CURLE_OK && r.status == 202 && r.json;
            if (ok)
                snprintf(l->ids[i], sizeof l->ids[i], "%s", str(r.json, "job_id"));
            harness_resp_free(&r);
            if (ok)
                break;
            l->retries++;
            harness_nap(50);
        }
        free(text);
    }
    return NULL;
}

Test(cluster, a_thousand_jobs_through_nginx_none_lost_none_duplicated)
{
    static char ids[CLUSTER_JOBS][64];
    memset(ids, 0, sizeof ids);
    pthread_t th[CLUSTER_THREADS];
    load l[CLUSTER_THREADS];
    double t0 = harness_now();
    for (int k = 0; k < CLUSTER_THREADS; k++) {
        l[k] = (load){k, CLUSTER_THREADS, CLUSTER_JOBS, ids, 0};
        pthread_create(&th[k], NULL, load_submit, &l[k]);
    }
    int retries = 0;
    for (int k = 0; k < CLUSTER_THREADS; k++) {
        pthread_join(th[k], NULL);
        retries += l[k].retries;
    }
    double submitted = harness_now() - t0;
    for (int i = 0; i < CLUSTER_JOBS; i++) {
        cr_assert(ids[i][0], "job %d was never accepted", i);
        for (int k = 0; k < i; k++)
            cr_assert(strcmp(ids[i], ids[k]) != 0, "jobs %d and %d share the id %s", k, i, ids[i]);
    }
    int done = 0;
    for (int i = 0; i < CLUSTER_JOBS; i++) {
        harness_resp r = wait_job(&front, ids[i], CLUSTER_WAIT_SECONDS);
        cr_assert_eq(r.status, 200, "job %d: %ld %s", i, r.status, r.body);
        cr_assert_str_eq(str(r.json, "status"), "done", "job %d: %.300s", i, r.body);
        json_t *t = json_object_get(json_object_get(r.json, "trajectory"), "t");
        double last = json_number_value(json_array_get(t, json_array_size(t) - 1));
        cr_assert_float_eq(last, load_t_end(i), 1e-12,
                           "job %d carries its own request's result (t_end %g, got %g)", i, load_t_end(i),
                           last);
        done++;
        harness_resp_free(&r);
    }
    double finished = harness_now() - t0;
    double runs = metric_sum("hamel_jobs_total{outcome=\"done\"}");
    fprintf(stderr,
            "cluster: %d jobs submitted through nginx in %.2f s (%d retries after 503), all done in %.2f s; "
            "runs counted by the instances: %.0f\n",
            CLUSTER_JOBS, submitted, retries, finished, runs);
    cr_assert_eq(done, CLUSTER_JOBS);
    cr_assert_eq((int)runs, CLUSTER_JOBS, "the instances ran %.0f jobs for %d requests (0 lost, 0 twice)",
                 runs, CLUSTER_JOBS);
    int busy = 0;
    for (int i = 0; i < CLUSTER_N; i++) {
        harness_resp r = call(&srv[i], "GET", "/metrics", NULL);
        busy += harness_metric(&r, "hamel_jobs_total{outcome=\"done\"}") > 0;
        harness_resp_free(&r);
    }
    cr_assert_eq(busy, CLUSTER_N, "every instance's workers took jobs (%d of %d did)", busy, CLUSTER_N);
}

/* ---- Redis restarted under load ------------------------------------------------------ */

#define RESTART_MAX 4000

typedef struct restart_load {
    atomic_int stop;
    int n;
    char ids[RESTART_MAX][64];
    double t[RESTART_MAX];
    long status[RESTART_MAX];
    int unclear; /* 503s without the unavailable problem and Retry-After, or other 5xx */
} restart_load;

static void *restart_submit(void *arg)
{
    restart_load *l = arg;
    for (int i = 0; i < RESTART_MAX && !atomic_load(&l->stop); i++) {
        json_t *req = rolling_request(0.25 + 1e-4 * i, 3);
        char *text = json_dumps(req, JSON_COMPACT | JSON_REAL_PRECISION(17));
        json_decref(req);
        harness_resp r;
        CURLcode rc = harness_request(&front, "POST", "/v1/simulations", text, NULL, &r);
        free(text);
        l->t[i] = harness_now();
        l->status[i] = rc == CURLE_OK ? r.status : -1;
        if (rc == CURLE_OK && r.status == 202)
            snprintf(l->ids[i], sizeof l->ids[i], "%s", str(r.json, "job_id"));
        if (rc == CURLE_OK && r.status == 503) {
            char ra[16];
            const char *type = r.json ? str(r.json, "type") : NULL;
            if (!type || !strstr(type, "unavailable") || !harness_header(&r, "Retry-After", ra, sizeof ra))
                l->unclear++;
        } else if (rc != CURLE_OK || (r.status >= 500 && r.status != 503)) {
            l->unclear++;
        }
        harness_resp_free(&r);
        l->n = i + 1;
        harness_nap(5);
    }
    return NULL;
}

Test(cluster, a_redis_restart_is_a_clear_503_then_recovery)
{
    static restart_load l;
    memset(&l, 0, sizeof l);
    pid_t pids[CLUSTER_N];
    for (int i = 0; i < CLUSTER_N; i++)
        pids[i] = srv[i].pid;
    pthread_t th;
    pthread_create(&th, NULL, restart_submit, &l);
    harness_nap(1000);
    double down = harness_now();
    redis_stop();
    harness_nap(700);
    harness_resp ready = call(&srv[1], "GET", "/readyz", NULL);
    cr_assert_eq(ready.status, 503, "/readyz while Redis is down: %ld %s", ready.status, ready.body);
    harness_resp_free(&ready);
    harness_nap(800);
    redis_start();
    double up = harness_now();
    harness_nap(3000);
    ready = call(&srv[1], "GET", "/readyz", NULL);
    cr_assert_eq(ready.status, 200, "/readyz once Redis is back: %ld %s", ready.status, ready.body);
    harness_resp_free(&ready);
    atomic_store(&l.stop, 1);
    pthread_join(th, NULL);

    int before = 0, during503 = 0, after = 0;
    double first_after = 0;
    for (int i = 0; i < l.n; i++) {
        if (l.t[i] < down && l.status[i] == 202)
            before++;
        if (l.t[i] > down + 0.2 && l.t[i] < up && l.status[i] == 503)
            during503++;
        if (l.t[i] > up && l.status[i] == 202) {
            after++;
            if (!first_after)
                first_after = l.t[i] - up;
        }
    }
    fprintf(stderr,
            "cluster: Redis restart: %d accepted before, %d answered 503 while it was down, %d accepted "
            "after (the first %.2f s after it was back), %d unclear answers\n",
            before, during503, after, first_after, l.unclear);
    cr_assert(before > 0, "jobs were accepted before the restart");
    cr_assert(during503 > 0, "Redis down: 503");
    cr_assert_eq(l.unclear, 0, "every failure was a 503 unavailable with Retry-After (%d were not)",
                 l.unclear);
    cr_assert(after > 0 && first_after < 2.0, "accepted again %.2f s after Redis came back", first_after);
    for (int i = 0; i < CLUSTER_N; i++)
        cr_assert_eq(srv[i].pid, pids[i], "instance %d was not restarted", i);
    for (int i = 0; i < CLUSTER_N; i++)
        cr_assert_eq(waitpid(srv[i].pid, NULL, WNOHANG), 0, "instance %d is still running", i);
    /* Every job accepted, before or after, finishes. */
    for (int i = 0; i < l.n; i++) {
        if (l.status[i] != 202)
            continue;
        harness_resp r = wait_job(&front, l.ids[i], CLUSTER_WAIT_SECONDS);
        cr_assert_eq(r.status, 200, "job %d (%s): %ld %s", i, l.ids[i], r.status, r.body);
        cr_assert_str_eq(str(r.json, "status"), "done", "job %d: %.300s", i, r.body);
        harness_resp_free(&r);
    }
    /* A restart while nothing is asked: the first request after it is served (the idle
     * connections from before the restart are not each worth a 503). */
    redis_stop();
    redis_start();
    json_t *req = rolling_request(0.2, 3);
    harness_resp r = call(&srv[0], "POST", "/v1/simulations?wait=30", req);
    cr_assert_eq(r.status, 200, "the first request after a quiet restart: %ld %.300s", r.status, r.body);
    harness_resp_free(&r);
    json_decref(req);
}

Test(cluster, a_batch_through_one_instance_runs_on_every_instance)
{
    enum { RUNS = 120 };
    json_t *base = rolling_request(1.0, 3);
    json_t *model = json_incref(json_object_get(base, "model"));
    json_object_del(base, "model");
    json_t *runs = json_array();
    for (int i = 0; i < RUNS; i++)
        json_array_append_new(runs, json_pack("{s:f}", "t_end", 1.0 + 1e-3 * i));
    json_t *body = json_pack("{s:o, s:o, s:o}", "model", model, "base", base, "runs", runs);
    harness_resp r = call(&srv[0], "POST", "/v1/batches?wait=60", body);
    cr_assert_eq(r.status, 200, "%ld %.300s", r.status, r.body);
    cr_assert_str_eq(str(r.json, "status"), "done", "%.300s", r.body);
    cr_assert_eq(json_integer_value(json_object_get(r.json, "succeeded")), RUNS, "%.300s", r.body);
    int busy = 0;
    double runs_done = 0;
    for (int i = 0; i < CLUSTER_N; i++) {
        harness_resp m = call(&srv[i], "GET", "/metrics", NULL);
        double v = harness_metric(&m, "hamel_jobs_total{outcome=\"done\"}");
        busy += v > 0;
        runs_done += v > 0 ? v : 0;
        harness_resp_free(&m);
    }
    cr_assert_eq((int)runs_done, RUNS, "%.0f runs for %d", runs_done, RUNS);
    cr_assert(busy >= 2, "the batch's runs went to %d instance(s); more than one expected", busy);
    harness_resp_free(&r);
    json_decref(body);
}

Test(cluster, shared_results_keep_their_byte_and_time_bounds)
{
    /* Two instances with small bounds replace the three (the runner's settings apply). */
    for (int i = 0; i < CLUSTER_N; i++)
        harness_stop(&srv[i]);
    static char url[64];
    snprintf(url, sizeof url, "HAMEL_REDIS=redis://127.0.0.1:%d", redis.port);
    const char *const env[] = {
        url, CLUSTER_TIER, "HAMEL_STORE_BYTES=40000", "HAMEL_REDIS_TTL=4", "HAMEL_ACCESS_LOG=0", NULL};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(harness_start(&srv[i], env), 0);
    enum { N = 30 };
    char ids[N][64];
    double t0 = harness_now();
    for (int i = 0; i < N; i++) {
        json_t *req = rolling_request(1.0 + 1e-3 * i, 20);
        harness_resp r = call(&srv[0], "POST", "/v1/simulations?wait=30", req);
        cr_assert_eq(r.status, 200, "%ld %.300s", r.status, r.body);
        snprintf(ids[i], sizeof ids[i], "%s", str(r.json, "job_id"));
        harness_resp_free(&r);
        json_decref(req);
    }
    double t_last = harness_now();
    fprintf(stderr, "cluster: %d results written in %.2f s\n", N, t_last - t0);
    /* A third instance holds none of these jobs in memory: it answers from Redis. */
    cr_assert_eq(harness_start(&srv[2], env), 0);
    harness_resp m = call(&srv[2], "GET", "/metrics", NULL);
    double bytes = harness_metric(&m, "hamel_store_result_bytes");
    harness_resp_free(&m);
    cr_assert(bytes > 0 && bytes <= 40000, "results in Redis: %.0f bytes, the bound is 40000", bytes);
    /* The oldest result was dropped: its job is gone; the newest is there. */
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", ids[0]);
    harness_resp r = call(&srv[2], "GET", path, NULL);
    cr_assert_eq(r.status, 410, "the oldest job: %ld %.200s", r.status, r.body);
    harness_resp_free(&r);
    snprintf(path, sizeof path, "/v1/jobs/%s", ids[N - 1]);
    r = call(&srv[2], "GET", path, NULL);
    cr_assert_eq(r.status, 200, "the newest job: %ld %.200s", r.status, r.body);
    harness_resp_free(&r);
    /* After HAMEL_REDIS_TTL the records themselves expire. */
    while (harness_now() < t_last + 5.0)
        harness_nap(100);
    r = call(&srv[2], "GET", path, NULL);
    cr_assert_eq(r.status, 404, "after the TTL: %ld %.200s", r.status, r.body);
    harness_resp_free(&r);
}

/* Sends one inline command to Redis (FLUSHALL, ...) and returns whether it answered +OK. */
static int redis_say(const char *cmd)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)redis.port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    char line[128], buf[64] = "";
    snprintf(line, sizeof line, "%s\r\n", cmd);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             send(fd, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line) &&
             recv(fd, buf, sizeof buf - 1, 0) > 0 && !strncmp(buf, "+OK", 3);
    close(fd);
    return ok;
}

Test(cluster, jobs_lost_with_the_redis_data_fail_and_new_ones_run)
{
    /* One instance with one worker, so a second job waits in the stream. */
    for (int i = 0; i < CLUSTER_N; i++)
        harness_stop(&srv[i]);
    static char url[64];
    snprintf(url, sizeof url, "HAMEL_REDIS=redis://127.0.0.1:%d", redis.port);
    const char *const env[] = {
        url, CLUSTER_TIER, "HAMEL_WORKERS=1", "HAMEL_REDIS_LEASE=0.5", "HAMEL_ACCESS_LOG=0", NULL};
    cr_assert_eq(harness_start(&srv[0], env), 0);
    json_t *req = rolling_request(CLUSTER_LONG_T_END / 3, 2); /* about 1.5 s */
    harness_resp a = call(&srv[0], "POST", "/v1/simulations", req);
    cr_assert_eq(running_on(), 0, "the first job runs");
    json_object_set_new(req, "t_end", json_real(1.0));
    harness_resp b = call(&srv[0], "POST", "/v1/simulations", req);
    cr_assert(a.status == 202 && b.status == 202);
    cr_assert(redis_say("FLUSHALL"), "FLUSHALL");
    /* The waiting job went with the data: it fails, saying so, after four leases. */
    harness_resp rb = wait_job(&srv[0], str(b.json, "job_id"), CLUSTER_WAIT_SECONDS);
    cr_assert_str_eq(str(rb.json, "status"), "failed", "%.300s", rb.body);
    const char *detail = str(json_object_get(rb.json, "problem"), "detail");
    cr_assert(detail && strstr(detail, "no longer knows"), "%s", detail);
    /* The running one finishes, and new jobs run (the stream and group are made again). */
    harness_resp ra = wait_job(&srv[0], str(a.json, "job_id"), CLUSTER_WAIT_SECONDS);
    cr_assert_str_eq(str(ra.json, "status"), "done", "%.300s", ra.body);
    harness_resp c = call(&srv[0], "POST", "/v1/simulations?wait=30", req);
    cr_assert_eq(c.status, 200, "a new job after the data was lost: %ld %.300s", c.status, c.body);
    harness_resp_free(&a);
    harness_resp_free(&b);
    harness_resp_free(&ra);
    harness_resp_free(&rb);
    harness_resp_free(&c);
    json_decref(req);
}

struct probe {
    harness_server *s;
    const char *path;
    long status;
    atomic_int done;
};

static void *probe_thread(void *arg)
{
    struct probe *p = arg;
    harness_resp r;
    CURLcode rc = harness_request(p->s, "GET", p->path, NULL, NULL, &r);
    p->status = rc == CURLE_OK ? r.status : -1;
    harness_resp_free(&r);
    atomic_store(&p->done, 1);
    return NULL;
}

/* A fourth instance with one poll thread: while Redis is held (SIGSTOP) its /readyz,
 * which pings Redis, waits (up to HAMEL_REDIS_TIMEOUT, 3 s), and /v1/health on the same
 * poll thread is answered meanwhile (under 1 s: Redis is asked from the offload pool). */
Test(cluster, a_held_redis_does_not_stall_the_poll_thread)
{
    static char url[64];
    snprintf(url, sizeof url, "HAMEL_REDIS=redis://127.0.0.1:%d", redis.port);
    const char *const env[] = {url, "HAMEL_HTTP_THREADS=1", "HAMEL_REDIS_TIMEOUT=3", "HAMEL_ACCESS_LOG=0",
                               NULL};
    harness_server one;
    cr_assert_eq(harness_start(&one, env), 0, "the one-thread instance did not start (log above)");
    harness_resp r = call(&one, "GET", "/readyz", NULL);
    cr_assert_eq(r.status, 200, "ready before Redis is held: %s", r.body);
    harness_resp_free(&r);

    kill(redis.pid, SIGSTOP);
    struct probe p = {.s = &one, .path = "/readyz"};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, probe_thread, &p), 0);
    harness_nap(300);
    double t0 = harness_now();
    r = call(&one, "GET", "/v1/health", NULL);
    double took = harness_now() - t0;
    int pending = !atomic_load(&p.done);
    kill(redis.pid, SIGCONT);
    pthread_join(th, NULL);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
    cr_assert_lt(took, 1.0, "/v1/health took %.3f s while Redis was held", took);
    cr_assert(pending, "/readyz was waiting for the held Redis when /v1/health was asked");
    /* Redis is let go before its timeout: it answers the held ping, so 200 (503 if the
     * machine stalled past the timeout) */
    cr_assert(p.status == 200 || p.status == 503, "/readyz after the held Redis: %ld", p.status);
    harness_stop(&one);
}

/* ---- a Redis that wants a password (issue 15, item 5) -------------------------------- */

#define AUTH_PASS "s3cret@hamel"       /* the default user's password (requirepass) */
#define AUTH_PASS_URL "s3cret%40hamel" /* ... %-encoded in a URL */
#define AUTH_USER "alice"              /* an ACL user with every right ... */
#define AUTH_USER_PASS "alice-pw-77"   /* ... and her password */
#define AUTH_DB "2"

/* One conversation with Redis as the default user: AUTH, then `cmds` (inline commands
 * separated by \r\n, ending in \r\n); the whole answer into buf[cap]. */
static void redis_talk(const char *cmds, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)redis.port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char line[512];
    snprintf(line, sizeof line, "AUTH " AUTH_PASS "\r\n%s", cmds);
    size_t len = 0;
    buf[0] = '\0';
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        send(fd, line, strlen(line), MSG_NOSIGNAL) == (ssize_t)strlen(line)) {
        harness_nap(100);
        ssize_t n;
        while (len + 1 < cap && (n = recv(fd, buf + len, cap - 1 - len, MSG_DONTWAIT)) > 0)
            len += (size_t)n;
        buf[len] = '\0';
    }
    close(fd);
}

static void auth_setup(void)
{
    char path_env[4096];
    snprintf(path_env, sizeof path_env, "%s:/usr/sbin:/sbin",
             getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    setenv("PATH", path_env, 1);
    if (!have("redis-server"))
        cr_skip_test("redis-server is not installed (scripts/install-deps.sh test)");
    snprintf(dir, sizeof dir, "%s/hamel-auth-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(dir));
    redis.port = free_port();
    char port[16];
    snprintf(port, sizeof port, "%d", redis.port);
    char *const argv[] = {"redis-server", "--port", port,      "--bind", "127.0.0.1",
                          "--dir",        dir,      "--save",  "",       "--requirepass",
                          AUTH_PASS,      "--user", AUTH_USER, "on",     ">" AUTH_USER_PASS,
                          "~*",           "&*",     "+@all",   NULL};
    redis.pid = spawn(argv, "redis.log");
    char buf[256] = "";
    for (int i = 0; i < 500 && !strstr(buf, "+PONG"); i++) {
        harness_nap(10);
        redis_talk("PING\r\n", buf, sizeof buf);
    }
    cr_assert(strstr(buf, "+PONG"), "redis-server with a password did not answer (logs in %s)", dir);
    char path[PATH_MAX];
    json_error_t jerr;
    rolling = harness_case_load("greenwood-5.3-rolling-disk.json", path, sizeof path, &jerr);
    cr_assert(rolling, "cannot load %s: %s", path, jerr.text);
}

/* Starts srv[i] on HAMEL_REDIS=url; returns harness_start's result. */
static int auth_server(int i, const char *url)
{
    static char env_url[CLUSTER_N][300];
    snprintf(env_url[i], sizeof env_url[i], "HAMEL_REDIS=%s", url);
    const char *const env[] = {env_url[i], "HAMEL_REDIS_TIMEOUT=1", "HAMEL_ACCESS_LOG=0", NULL};
    return harness_start(&srv[i], env);
}

/* The whole log of srv[i] (caller frees). */
static char *auth_log(int i)
{
    FILE *f = fopen(srv[i].log, "r");
    cr_assert(f, "no log at %s", srv[i].log);
    char *text = calloc(1, 65536);
    size_t n = fread(text, 1, 65535, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

TestSuite(cluster_auth, .init = auth_setup, .fini = teardown, .timeout = 120);

Test(cluster_auth, a_redis_with_a_password_and_a_database_is_shared_and_no_password_is_printed)
{
    char url[256];
    snprintf(url, sizeof url, "redis://:%s@127.0.0.1:%d/" AUTH_DB, AUTH_PASS_URL, redis.port);
    cr_assert_eq(auth_server(0, url), 0, "a server on %s did not start (log above)", url);
    snprintf(url, sizeof url, "redis://" AUTH_USER ":" AUTH_USER_PASS "@127.0.0.1:%d/" AUTH_DB, redis.port);
    cr_assert_eq(auth_server(1, url), 0, "a server on %s did not start (log above)", url);

    json_t *req = rolling_request(1.0, 11);
    harness_resp a = call(&srv[0], "POST", "/v1/simulations?wait=30", req);
    cr_assert_eq(a.status, 200, "through the password of the default user: %ld %s", a.status, a.body);
    harness_resp b = call(&srv[1], "POST", "/v1/simulations?wait=30", req);
    cr_assert_eq(b.status, 200, "through the ACL user: %ld %s", b.status, b.body);
    cr_assert(json_is_true(json_object_get(b.json, "cached")),
              "the second server reads the first's result: %s", b.body);
    harness_resp_free(&a);
    harness_resp_free(&b);
    json_decref(req);

    char reply[512];
    redis_talk("SELECT " AUTH_DB "\r\nDBSIZE\r\nSELECT 0\r\nDBSIZE\r\n", reply, sizeof reply);
    long in_db = -1, in_zero = -1;
    const char *first = strchr(reply, ':');
    if (first) {
        in_db = strtol(first + 1, NULL, 10);
        const char *second = strchr(first + 1, ':');
        if (second)
            in_zero = strtol(second + 1, NULL, 10);
    }
    cr_assert(in_db > 0 && in_zero == 0, "the keys are in database " AUTH_DB " (%ld), none in 0 (%ld): %s",
              in_db, in_zero, reply);

    /* A wrong password: the server refuses to start, saying so, without printing it. */
    snprintf(url, sizeof url, "redis://:wrong-pw-3141@127.0.0.1:%d", redis.port);
    cr_assert_neq(auth_server(2, url), 0, "a server with a wrong password started");
    char *log = auth_log(2);
    cr_assert(strstr(log, "AUTH refused") && strstr(log, "redis://:***@127.0.0.1"),
              "the refusal is named, the URL masked: %s", log);
    cr_assert(!strstr(log, "wrong-pw-3141"), "the password is printed: %s", log);
    free(log);
    harness_stop(&srv[2]);

    /* TLS: refused with a clear message (Debian's hiredis has no hiredis_ssl). */
    snprintf(url, sizeof url, "rediss://:%s@127.0.0.1:%d", AUTH_PASS_URL, redis.port);
    cr_assert_neq(auth_server(2, url), 0, "a server on rediss:// started");
    log = auth_log(2);
    cr_assert(strstr(log, "TLS") && !strstr(log, "s3cret"), "rediss:// refused clearly and masked: %s", log);
    free(log);

    for (int i = 0; i < 2; i++) {
        harness_stop_checked(&srv[i], &(int){0});
        log = auth_log(i);
        cr_assert(!strstr(log, "s3cret") && !strstr(log, AUTH_USER_PASS), "server %d printed a password: %s",
                  i, log);
        free(log);
    }
}
