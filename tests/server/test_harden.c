/* test_harden.c — the server's defences against large, malformed and hostile requests,
 * against the real hamel-server (issue 11, item 4).
 *
 * The cap on output values per job (422 naming the figure and the cap); the per-address
 * connection limit (slow connections from one loopback address, 127.0.0.2, do not keep
 * 127.0.0.1 out); static files that never leave HAMEL_STATIC through a symbolic link;
 * request framing over raw sockets (conflicting Content-Length: 400; a transfer coding
 * other than chunked: 501 at once, not a hang); numeric settings given as an empty
 * string (as compose passes ${VAR:-}) keep their defaults; a `Connection: close` answer
 * to a request whose model was compiled ends (FIN) with its last byte; a store that
 * cannot write (a full disk) makes jobs fail, never reports done a result it lost.
 * Slow heads from many addresses, each under the per-address limit: a client from
 * another address is answered within 2 s, and each slow head ends at HAMEL_HEAD_SECONDS;
 * so is one beside slow bodies (whole heads, then a byte now and then). Large bodies
 * together hold at most HAMEL_BODIES_BYTES (one past it: 503 with Retry-After), small
 * ones are served beside them.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define HARDEN_READ_SECONDS 5 /* longest wait for a raw answer */
#define HARDEN_PER_IP 8
#define HARDEN_SLOW 40 /* slow connections opened from one address (more than the total cap) */

static harness_server srv;

static void teardown(void) { harness_stop(&srv); }

static void start(const char *const *env)
{
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
}

/* A TCP connection to the server from local address `from` ("127.0.0.2"), with a
 * receive timeout; -1 on failure. */
static int dial(const char *from)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &a.sin_addr);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0, "bind %s: %s", from, strerror(errno));
    struct timeval tv = {HARDEN_READ_SECONDS, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv.port)};
    inet_pton(AF_INET, "127.0.0.1", &s.sin_addr);
    if (connect(fd, (struct sockaddr *)&s, sizeof s) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends `req` on a new connection and reads the reply, until the server closes the
 * connection, or (unless until_close) once the headers and Content-Length bytes are in,
 * or HARDEN_READ_SECONDS pass. *full: seconds until the Content-Length bytes were in (-1
 * if never); *eof: seconds until the close (-1 if not seen). Returns the reply (caller
 * frees; "" if none). */
static char *raw_read(const char *req, int until_close, double *full, double *eof)
{
    int fd = dial("127.0.0.1");
    cr_assert(fd >= 0, "connect: %s", strerror(errno));
    double t0 = harness_now();
    cr_assert_eq(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    size_t cap = 1 << 20, len = 0;
    char *buf = calloc(1, cap);
    *full = *eof = -1;
    for (;;) {
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n == 0)
            *eof = harness_now() - t0;
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        const char *cl = strcasestr(buf, "\r\nContent-Length:");
        if (*full < 0 && end && cl && cl < end &&
            len >= (size_t)(end + 4 - buf) + strtoul(cl + 17, NULL, 10)) {
            *full = harness_now() - t0;
            if (!until_close)
                break;
        }
        if (len + 1 >= cap)
            break;
    }
    close(fd);
    return buf;
}

/* raw_read up to the reply's end; the seconds it took in *secs. */
static char *raw(const char *req, double *secs)
{
    double full, eof;
    double t0 = harness_now();
    char *reply = raw_read(req, 0, &full, &eof);
    *secs = harness_now() - t0;
    return reply;
}

/* The status code of a raw reply, or 0. */
static int raw_status(const char *reply)
{
    int status = 0;
    return sscanf(reply, "HTTP/1.%*d %d", &status) == 1 ? status : 0;
}

static json_t *rolling_request(int samples)
{
    char path[PATH_MAX];
    json_error_t err;
    json_t *req = harness_case_request("greenwood-5.3-rolling-disk.json", path, sizeof path, &err);
    cr_assert(req, "cannot load %s: %s", path, err.text);
    json_object_set_new(req, "output", json_pack("{s:i}", "samples", samples));
    return req;
}

static harness_resp post(const char *path, const json_t *body) { return harness_post(&srv, path, body); }

TestSuite(harden, .fini = teardown, .timeout = 120);

Test(harden, output_values_are_capped_per_job)
{
    static const char *const env[] = {"HAMEL_MAX_OUTPUT_VALUES=20000", NULL};
    start(env);
    json_t *big = rolling_request(5000);
    harness_resp r = post("/v1/simulations?wait=60", big);
    cr_assert_eq(r.status, 422, "5000 samples of the rolling disk: %ld %s", r.status, r.body);
    const char *type = json_string_value(json_object_get(r.json, "type"));
    const char *detail = json_string_value(json_object_get(r.json, "detail"));
    cr_assert(type && strstr(type, "limit-exceeded"), "type %s", type);
    cr_assert(detail && strstr(detail, "5000 samples x") && strstr(detail, "at most 20000"),
              "the detail names the figure and the cap: %s", detail);
    json_t *err0 = json_array_get(json_object_get(r.json, "errors"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(err0, "path")), "output");
    harness_resp_free(&r);
    json_decref(big);

    json_t *small = rolling_request(100);
    r = post("/v1/simulations?wait=60", small);
    cr_assert(r.status == 200 || r.status == 202, "100 samples are within the cap: %ld %s", r.status, r.body);
    harness_resp_free(&r);
    json_decref(small);
}

Test(harden, slow_connections_from_one_address_do_not_lock_out_others)
{
    static const char *const env[] = {"HAMEL_MAX_CONNECTIONS=32", "HAMEL_MAX_CONNECTIONS_PER_IP=8",
                                      "HAMEL_CONN_TIMEOUT=60", NULL};
    start(env);
    int fds[HARDEN_SLOW];
    int open_ = 0;
    static const char partial[] = "GET /livez HTTP/1.1\r\nHost: x\r\n"; /* never finished */
    for (int i = 0; i < HARDEN_SLOW; i++) {
        fds[i] = dial("127.0.0.2");
        if (fds[i] >= 0)
            send(fds[i], partial, sizeof partial - 1, MSG_NOSIGNAL);
    }
    harness_nap(300);
    /* The server closes every connection past the per-address limit at once. */
    for (int i = 0; i < HARDEN_SLOW; i++) {
        if (fds[i] < 0)
            continue;
        char c;
        ssize_t n = recv(fds[i], &c, 1, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            open_++;
    }
    cr_assert_eq(open_, HARDEN_PER_IP, "127.0.0.2 holds %d connections; the limit is %d", open_,
                 HARDEN_PER_IP);
    double t0 = harness_now();
    harness_resp r;
    CURLcode rc = harness_request(&srv, "GET", "/livez", NULL, NULL, &r);
    double secs = harness_now() - t0;
    cr_assert_eq(rc, CURLE_OK, "127.0.0.1 is served beside them: %s", curl_easy_strerror(rc));
    cr_assert_eq(r.status, 200);
    cr_assert(secs < 2.0, "127.0.0.1 waited %.2f s", secs);
    harness_resp_free(&r);
    for (int i = 0; i < HARDEN_SLOW; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

#define HARDEN_HEAD_SECONDS 3
#define HARDEN_ADDRS 4     /* slow addresses, each at the per-address limit ... */
#define HARDEN_PER_ADDR 16 /* ... which together hold more than the 48 connections allowed */

/* A GET /livez from address `from` on a new connection: its status (0 if none) and the
 * seconds it took in *secs. */
static int probe(const char *from, double *secs)
{
    double t0 = harness_now();
    int fd = dial(from);
    int status = 0;
    if (fd >= 0) {
        static const char req[] = "GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
        char buf[256] = {0};
        if (recv(fd, buf, sizeof buf - 1, 0) > 0)
            status = raw_status(buf);
        close(fd);
    }
    *secs = harness_now() - t0;
    return status;
}

Test(harden, slow_heads_from_many_addresses_give_way_and_end_at_the_deadline)
{
    static const char *const env[] = {"HAMEL_MAX_CONNECTIONS=48", "HAMEL_MAX_CONNECTIONS_PER_IP=16",
                                      "HAMEL_HEAD_SECONDS=3", "HAMEL_CONN_TIMEOUT=60", NULL};
    start(env);
    int fds[HARDEN_ADDRS * HARDEN_PER_ADDR];
    int n = 0;
    static const char partial[] = "POST /v1/models HTTP/1.1\r\nHost: x\r\n"; /* one line at a time */
    for (int a = 0; a < HARDEN_ADDRS; a++) {
        char from[32];
        snprintf(from, sizeof from, "127.0.1.%d", 10 + a);
        for (int k = 0; k < HARDEN_PER_ADDR; k++) {
            int fd = dial(from);
            if (fd >= 0 && send(fd, partial, sizeof partial - 1, MSG_NOSIGNAL) > 0)
                fds[n++] = fd;
            else if (fd >= 0)
                close(fd);
        }
    }
    harness_nap(300);
    double secs;
    int status = probe("127.0.3.99", &secs);
    cr_assert_eq(status, 200, "a client from another address beside %d slow heads: status %d after %.2f s", n,
                 status, secs);
    cr_assert(secs < 2.0, "a client from another address waited %.2f s", secs);
    /* One header line a second keeps each connection busy (the idle timeout is 60 s), but
     * the head as a whole is late after HAMEL_HEAD_SECONDS: every one is closed. */
    double t0 = harness_now();
    while (harness_now() - t0 < HARDEN_HEAD_SECONDS + 1.5) {
        for (int i = 0; i < n; i++)
            send(fds[i], "X-a: b\r\n", 8, MSG_NOSIGNAL);
        harness_nap(1000);
    }
    int still = 0;
    for (int i = 0; i < n; i++) {
        char c;
        ssize_t got = recv(fds[i], &c, 1, MSG_DONTWAIT);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            still++;
        close(fds[i]);
    }
    cr_assert_eq(still, 0, "%d of %d slow heads are still open %.1f s after they began", still, n,
                 HARDEN_HEAD_SECONDS + 1.5);
    status = probe("127.0.1.10", &secs);
    cr_assert_eq(status, 200, "a slow address is served again once its heads are gone: %d", status);
}

Test(harden, slow_bodies_from_many_addresses_give_way)
{
    static const char *const env[] = {"HAMEL_MAX_CONNECTIONS=48", "HAMEL_MAX_CONNECTIONS_PER_IP=16",
                                      "HAMEL_HEAD_SECONDS=3", "HAMEL_CONN_TIMEOUT=60", NULL};
    start(env);
    int fds[HARDEN_ADDRS * HARDEN_PER_ADDR];
    int n = 0;
    /* a whole head, then a body of which a byte comes now and then */
    static const char head[] = "POST /v1/models HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                               "Content-Length: 100000\r\n\r\n{";
    for (int a = 0; a < HARDEN_ADDRS; a++) {
        char from[32];
        snprintf(from, sizeof from, "127.0.1.%d", 10 + a);
        for (int k = 0; k < HARDEN_PER_ADDR; k++) {
            int fd = dial(from);
            if (fd >= 0 && send(fd, head, sizeof head - 1, MSG_NOSIGNAL) > 0)
                fds[n++] = fd;
            else if (fd >= 0)
                close(fd);
        }
    }
    double t0 = harness_now();
    while (harness_now() - t0 < HARDEN_HEAD_SECONDS + 1.5) { /* past the heads' deadline too */
        for (int i = 0; i < n; i++)
            send(fds[i], " ", 1, MSG_NOSIGNAL);
        harness_nap(500);
    }
    double secs;
    int status = probe("127.0.3.99", &secs);
    cr_assert_eq(status, 200, "a client from another address beside %d slow bodies: status %d after %.2f s",
                 n, status, secs);
    cr_assert(secs < 2.0, "a client from another address waited %.2f s", secs);
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

Test(harden, a_query_string_of_many_parameters_is_a_400_not_a_silent_close)
{
    start(NULL);
    /* 300 parameters, 1.2 KB: each took a record of the connection's memory, and
     * libmicrohttpd closed the connection without an answer past about 250 */
    char path[4096] = "/v1/health?";
    for (int i = 0; i < 300; i++)
        strcat(path, i ? "&a=b" : "a=b");
    harness_resp r;
    CURLcode rc = harness_request(&srv, "GET", path, NULL, NULL, &r);
    cr_assert_eq(rc, CURLE_OK, "300 query parameters: no answer (%s)", curl_easy_strerror(rc));
    cr_assert_eq(r.status, 400, "%ld %.300s", r.status, r.body);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "type")), "/problems/bad-http");
    cr_assert(strstr(json_string_value(json_object_get(r.json, "detail")), "parameters"), "%.300s", r.body);
    harness_resp_free(&r);
    /* a handful (as routes read them) are fine, and the server goes on */
    rc = harness_request(&srv, "GET", "/v1/health?a=1&b=2&c=3&wait=1", NULL, NULL, &r);
    cr_assert_eq(rc, CURLE_OK);
    cr_assert_eq(r.status, 200, "%ld %.300s", r.status, r.body);
    harness_resp_free(&r);
}

#define HARDEN_BIG_BODY 900000 /* bytes of each large body: 5 of them pass 4 MiB */

/* A connection that has sent a POST /v1/models head announcing HARDEN_BIG_BODY + 1 bytes
 * and all of them but the last (the body is a string of x). */
static int big_body_but_one(void)
{
    int fd = dial("127.0.0.1");
    cr_assert(fd >= 0);
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "POST /v1/models HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Connection: close\r\nContent-Length: %d\r\n\r\n",
                      HARDEN_BIG_BODY + 1);
    char *body = malloc(HARDEN_BIG_BODY);
    cr_assert(body);
    memset(body, 'x', HARDEN_BIG_BODY);
    body[0] = '"';
    cr_assert_eq(send(fd, head, (size_t)hl, MSG_NOSIGNAL), hl);
    size_t sent = 0;
    while (sent < HARDEN_BIG_BODY) {
        ssize_t k = send(fd, body + sent, HARDEN_BIG_BODY - sent, MSG_NOSIGNAL);
        cr_assert(k > 0, "send: %s", strerror(errno));
        sent += (size_t)k;
    }
    free(body);
    return fd;
}

/* Sends the last byte of a big_body_but_one and returns the answer's status. */
static int big_body_end(int fd, char *reply, size_t cap)
{
    cr_assert_eq(send(fd, "\"", 1, MSG_NOSIGNAL), 1);
    size_t len = 0;
    ssize_t k;
    while (len + 1 < cap && (k = recv(fd, reply + len, cap - 1 - len, 0)) > 0)
        len += (size_t)k;
    reply[len] = '\0';
    close(fd);
    return raw_status(reply);
}

Test(harden, large_bodies_together_stay_within_their_budget)
{
    /* 1 MiB bodies; all large bodies together: 4 of them (the setting's floor) */
    static const char *const env[] = {"HAMEL_MAX_BODY=1048576", "HAMEL_BODIES_BYTES=65536", NULL};
    start(env);
    int fds[5];
    for (int i = 0; i < 5; i++) {
        fds[i] = big_body_but_one();
        harness_nap(100); /* read into its buffer before the next one */
    }
    /* the fifth did not fit: once it is in, a 503 that says why, Retry-After */
    char reply[4096];
    int status = big_body_end(fds[4], reply, sizeof reply);
    cr_assert_eq(status, 503, "the fifth large body: %.300s", reply);
    cr_assert(strcasestr(reply, "\r\nRetry-After: 1\r\n"), "no Retry-After: %.300s", reply);
    cr_assert(strstr(reply, "HAMEL_BODIES_BYTES"), "the 503 does not say why: %.400s", reply);
    /* a small request is served beside them */
    harness_resp r;
    cr_assert_eq(harness_request(&srv, "POST", "/v1/models",
                                 "{\"name\":\"small\",\"coordinates\":[\"x\"],\"kinetic_energy\":\"x'^2\"}",
                                 NULL, &r),
                 CURLE_OK);
    cr_assert_eq(r.status, 201, "a small body beside the large ones: %ld %.300s", r.status, r.body);
    harness_resp_free(&r);
    /* the four that fit are answered (400: a body that is not an object), and their
     * bytes are let go: another large body fits again */
    for (int i = 0; i < 4; i++) {
        status = big_body_end(fds[i], reply, sizeof reply);
        cr_assert_eq(status, 400, "large body %d: %.300s", i, reply);
    }
    status = big_body_end(big_body_but_one(), reply, sizeof reply);
    cr_assert_eq(status, 400, "a large body after the others ended: %.300s", reply);
}

/* Writes `text` to path. */
static void put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

Test(harden, static_files_never_leave_the_static_directory)
{
    char dir[] = "/tmp/hamel-static-XXXXXX";
    cr_assert(mkdtemp(dir));
    char web[256], path[PATH_MAX], target[PATH_MAX], env_static[300];
    snprintf(web, sizeof web, "%s/web", dir);
    cr_assert_eq(mkdir(web, 0700), 0);
    snprintf(path, sizeof path, "%s/index.html", web);
    put_file(path, "<p>inside</p>");
    snprintf(target, sizeof target, "%s/secret.txt", dir);
    put_file(target, "outside");
    snprintf(path, sizeof path, "%s/leak.txt", web);
    cr_assert_eq(symlink(target, path), 0); /* a file link out */
    snprintf(path, sizeof path, "%s/etc", web);
    cr_assert_eq(symlink("/etc", path), 0); /* a directory link out */
    snprintf(path, sizeof path, "%s/alias.html", web);
    cr_assert_eq(symlink("index.html", path), 0); /* a link that stays inside */
    snprintf(env_static, sizeof env_static, "HAMEL_STATIC=%s", web);
    const char *const env[] = {env_static, NULL};
    start(env);

    static const struct {
        const char *path;
        long status;
    } cases[] = {{"/", 200},           {"/alias.html", 200},    {"/leak.txt", 404},
                 {"/etc/passwd", 404}, {"/etc/hostname", 404},  {"/index.html%00.png", 400},
                 {"/%00", 400},        {"/v1/health%00/x", 400}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        harness_resp r;
        cr_assert_eq(harness_request(&srv, "GET", cases[i].path, NULL, NULL, &r), CURLE_OK);
        cr_assert_eq(r.status, cases[i].status, "GET %s: %ld, expected %ld", cases[i].path, r.status,
                     cases[i].status);
        if (cases[i].status == 404)
            cr_assert(!r.body || !strstr(r.body, "outside"), "GET %s leaked the file", cases[i].path);
        harness_resp_free(&r);
    }
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    cr_assert_eq(system(path), 0);
}

/* A body is refused when its Content-Type says it is not JSON, on every method (a POST
 * always was; a body sent with GET or DELETE was read past); JSON with parameters and
 * +json types, and a body without a Content-Type, stay accepted. */
Test(harden, a_body_that_is_not_json_is_a_415_on_every_method)
{
    start(NULL);
    static const struct {
        const char *method, *path, *type;
        int status;
    } cases[] = {
        {"DELETE", "/v1/jobs/nope", "Content-Type: text/plain\r\n", 415},
        {"GET", "/v1/health", "Content-Type: application/x-www-form-urlencoded\r\n", 415},
        {"GET", "/v1/health", "Content-Type: application/json; charset=utf-8\r\n", 200},
        {"GET", "/v1/health", "Content-Type: application/vnd.lab+json\r\n", 200},
        {"GET", "/v1/health", "", 200},
        {"POST", "/v1/models", "Content-Type: text/plain\r\n", 415},
        {"POST", "/v1/models", "Content-Type: application/problem+json; charset=utf-8\r\n", 422},
        {"POST", "/v1/models", "", 422},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char req[512];
        snprintf(req, sizeof req,
                 "%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                 cases[i].method, cases[i].path, cases[i].type);
        double secs;
        char *reply = raw(req, &secs);
        cr_assert_eq(raw_status(reply), cases[i].status, "%s %s with [%s] and a body: %.300s",
                     cases[i].method, cases[i].path, cases[i].type, reply);
        free(reply);
    }
}

Test(harden, conflicting_content_lengths_are_a_400)
{
    start(NULL);
    double secs;
    char *reply = raw("POST /v1/simulations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}",
                      &secs);
    cr_assert_eq(raw_status(reply), 400, "two different Content-Lengths: %s", reply);
    cr_assert(strstr(reply, "bad-http") && strstr(reply, "Content-Length"), "the problem says why: %s",
              reply);
    free(reply);
    reply = raw("POST /v1/simulations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                &secs);
    cr_assert_eq(raw_status(reply), 400, "Content-Length beside Transfer-Encoding: %s", reply);
    free(reply);
    /* The same length twice is one length (RFC 9110 §8.6): the request goes on. */
    reply = raw("POST /v1/simulations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: 2\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                &secs);
    cr_assert_eq(raw_status(reply), 422, "a repeated equal Content-Length is read: %s", reply);
    free(reply);
}

Test(harden, unsupported_transfer_codings_are_a_501_at_once)
{
    start(NULL);
    static const char *const codings[] = {"gzip, chunked", "gzip", "chunked, chunked", "identity"};
    for (size_t i = 0; i < sizeof codings / sizeof codings[0]; i++) {
        char req[512];
        snprintf(req, sizeof req,
                 "POST /v1/simulations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: %s\r\n\r\n",
                 codings[i]);
        double secs;
        char *reply = raw(req, &secs);
        cr_assert_eq(raw_status(reply), 501, "Transfer-Encoding: %s: %s", codings[i], reply);
        cr_assert(secs < 2.0, "Transfer-Encoding: %s answered after %.2f s", codings[i], secs);
        free(reply);
    }
    /* chunked alone still works. */
    double secs;
    char *reply = raw("POST /v1/simulations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                      &secs);
    cr_assert_eq(raw_status(reply), 422, "a chunked body is read: %s", reply);
    free(reply);
}

Test(harden, empty_numeric_settings_keep_their_defaults)
{
    static const char *const env[] = {
        "HAMEL_WORKERS=", "HAMEL_QUEUE=", "HAMEL_MAX_CONNECTIONS_PER_IP=", NULL};
    start(env);
    harness_resp r;
    cr_assert_eq(harness_request(&srv, "GET", "/v1/health", NULL, NULL, &r), CURLE_OK);
    cr_assert_eq(r.status, 200, "the server started with empty settings: %ld", r.status);
    harness_resp_free(&r);
}

/* The hang-up watcher polls the sockets of requests whose model compiles; a poll()
 * keeps its own reference to each socket, so a socket libmicrohttpd closed while the
 * watcher polled it stayed open until the poll period ran out: every such client waited
 * a whole period for the end of a `Connection: close` answer. With a 5 s period that
 * wait would be seconds; the close must follow the answer at once. */
Test(harden, a_close_answer_after_a_compile_ends_at_once)
{
    static const char *const env[] = {"HAMEL_HANGUP_POLL_MS=5000", NULL};
    start(env);
    json_t *req = rolling_request(11);
    json_object_set_new(json_object_get(json_object_get(req, "model"), "parameters"), "m", json_real(1.25));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    char head[512];
    snprintf(head, sizeof head,
             "POST /v1/simulations?wait=30 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nConnection: close\r\n\r\n",
             strlen(body));
    char *msg = malloc(strlen(head) + strlen(body) + 1);
    strcpy(msg, head);
    strcat(msg, body);
    double full, eof;
    char *reply = raw_read(msg, 1, &full, &eof);
    cr_assert_eq(raw_status(reply), 200, "a new model, compiled and run: %.200s", reply);
    cr_assert(full >= 0, "the whole answer arrived");
    cr_assert(eof >= 0, "the server closed the connection within %d s", HARDEN_READ_SECONDS);
    cr_assert_lt(eof - full, 2.5, "the close came %.3f s after the answer's last byte (poll period 5 s)",
                 eof - full);
    free(reply);
    free(msg);
    free(body);
}

#define HARDEN_FULL_BYTES (3L << 20) /* the largest file the "full disk" server may write */
#define HARDEN_FULL_JOBS 30          /* 277 KB results: about 8 MB in all */

/* Starts srv on data with files capped at HARDEN_FULL_BYTES (as a full disk) and SIGXFSZ
 * in the disposition `xfsz`, both inherited by the server; the test's own are restored. */
static void start_capped(const char *data, void (*xfsz)(int))
{
    char setting[PATH_MAX + 16];
    snprintf(setting, sizeof setting, "HAMEL_DATA=%s", data);
    const char *const env[] = {setting, NULL};
    struct rlimit old, cap;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    cap = old;
    cap.rlim_cur = HARDEN_FULL_BYTES;
    signal(SIGXFSZ, xfsz);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &cap), 0);
    int started = harness_start(&srv, env);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    cr_assert_eq(started, 0, "the server did not start (log above)");
}

/* A store that cannot write (here: files capped at 3 MB, as a full disk): every job
 * answered "done" was stored, so it is still done after kill -9 and a restart; those
 * whose result could not be stored failed (503), none was reported done and lost. */
Test(harden, a_file_size_limit_is_a_full_disk_not_the_end_of_the_server, .timeout = 180)
{
    char data[] = "/tmp/hamel-fsize-XXXXXX";
    cr_assert_not_null(mkdtemp(data));
    /* as an operator's `ulimit -f` leaves it: SIGXFSZ's default disposition ends a
     * process that writes past the limit, unless it ignores the signal itself */
    start_capped(data, SIG_DFL);
    int refused = 0;
    for (int i = 0; i < HARDEN_FULL_JOBS && !refused; i++) {
        json_t *req = rolling_request(1001);
        json_object_set_new(json_object_get(json_object_get(req, "model"), "parameters"), "m",
                            json_real(2.0 + 0.01 * i));
        char *text = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        harness_resp r;
        CURLcode rc = harness_request(&srv, "POST", "/v1/simulations?wait=60", text, NULL, &r);
        free(text);
        cr_assert_eq(rc, CURLE_OK, "simulation %d: no answer (%s): the server ended at the file-size limit",
                     i, curl_easy_strerror(rc));
        refused = r.status == 503;
        harness_resp_free(&r);
    }
    cr_assert(refused, "no simulation was refused within %d: the limit was never reached", HARDEN_FULL_JOBS);
    cr_assert(harness_alive(&srv), "the server ended at the file-size limit");
    harness_resp r;
    cr_assert_eq(harness_request(&srv, "GET", "/v1/health", NULL, NULL, &r), CURLE_OK);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);
    harness_stop(&srv);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", data);
    cr_expect_eq(system(cmd), 0);
}

Test(harden, a_full_disk_reports_no_result_it_did_not_store, .timeout = 180)
{
    char data[] = "/tmp/hamel-full-disk-XXXXXX";
    cr_assert_not_null(mkdtemp(data));
    /* the server inherits both: a write past the cap fails with EFBIG, no signal */
    start_capped(data, SIG_IGN);
    char setting[PATH_MAX + 16];
    snprintf(setting, sizeof setting, "HAMEL_DATA=%s", data);
    const char *const env[] = {setting, NULL};

    char ids[HARDEN_FULL_JOBS][64];
    int done = 0, failed = 0;
    for (int i = 0; i < HARDEN_FULL_JOBS; i++) {
        json_t *req = rolling_request(1001);
        json_object_set_new(json_object_get(json_object_get(req, "model"), "parameters"), "m",
                            json_real(1.0 + 0.01 * i));
        harness_resp r = post("/v1/simulations?wait=60", req);
        json_decref(req);
        const char *status = json_string_value(json_object_get(r.json, "status"));
        if (r.status == 200 && status && !strcmp(status, "done"))
            snprintf(ids[done++], sizeof ids[0], "%s", json_string_value(json_object_get(r.json, "job_id")));
        else
            cr_assert(r.status == 503, "a job whose result could not be stored: %ld %.300s", r.status,
                      r.body);
        if (r.status == 503) { /* says why, and does not blame a Redis there is none of */
            const char *detail = json_string_value(json_object_get(r.json, "detail"));
            cr_assert(detail && strstr(detail, "the disk is full") && !strstr(detail, "REDIS"),
                      "a full disk is named: %.300s", r.body);
        }
        failed += r.status == 503;
        harness_resp_free(&r);
    }
    cr_assert_gt(failed, 0, "the cap was reached (%d done)", done);
    kill(srv.pid, SIGKILL);
    waitpid(srv.pid, NULL, 0);
    srv.pid = 0;
    harness_stop(&srv);

    start(env);
    for (int i = 0; i < done; i++) {
        char path[sizeof ids[0] + 16];
        snprintf(path, sizeof path, "/v1/jobs/%.63s", ids[i]);
        harness_resp g;
        cr_assert_eq(harness_request(&srv, "GET", path, NULL, NULL, &g), CURLE_OK);
        cr_assert_eq(g.status, 200, "job %s was answered done before kill -9: %ld %.200s", ids[i], g.status,
                     g.body);
        cr_assert_str_eq(json_string_value(json_object_get(g.json, "status")), "done", "job %s", ids[i]);
        harness_resp_free(&g);
    }
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", data);
    cr_expect_eq(system(cmd), 0);
}

/* A simulation refused after its model compiled (here a bad t_end) still leaves the new
 * model stored: POST /v1/models of it answers 200 (known), so it must survive kill -9. */
Test(harden, a_model_known_from_a_refused_simulation_survives_kill_9)
{
    char data[] = "/tmp/hamel-model-kept-XXXXXX";
    cr_assert_not_null(mkdtemp(data));
    char setting[PATH_MAX + 16];
    snprintf(setting, sizeof setting, "HAMEL_DATA=%s", data);
    const char *const env[] = {setting, NULL};
    start(env);
    json_t *req = rolling_request(11);
    json_object_set_new(json_object_get(json_object_get(req, "model"), "parameters"), "m", json_real(1.75));
    json_object_set_new(req, "t_end", json_real(-1.0));
    harness_resp r = post("/v1/simulations?wait=30", req);
    cr_assert_eq(r.status, 422, "a negative t_end: %ld %.300s", r.status, r.body);
    harness_resp_free(&r);
    r = post("/v1/models", json_object_get(req, "model"));
    cr_assert_eq(r.status, 200, "the model is known already: %ld %.300s", r.status, r.body);
    char path[200];
    snprintf(path, sizeof path, "/v1/models/%.150s", json_string_value(json_object_get(r.json, "model_id")));
    harness_resp_free(&r);
    json_decref(req);
    kill(srv.pid, SIGKILL);
    waitpid(srv.pid, NULL, 0);
    srv.pid = 0;
    harness_stop(&srv);

    start(env);
    cr_assert_eq(harness_request(&srv, "GET", path, NULL, NULL, &r), CURLE_OK);
    cr_assert_eq(r.status, 200, "%s after kill -9: %ld %.200s", path, r.status, r.body);
    harness_resp_free(&r);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", data);
    cr_expect_eq(system(cmd), 0);
}
