/* harness.c — starts and stops the real hamel-server and speaks HTTP to it (harness.h). */
#include "harness.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HARNESS_LISTENING "listening on http://127.0.0.1:"

/* Criterion's own runner leaks one 48-byte block when it runs several suites in
 * parallel (-j2, its default here); the stack is entirely inside libcriterion. Under
 * -fsanitize=address that would fail every run, so LeakSanitizer is told to ignore
 * leaks whose allocation comes from that library, and only from it. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libcriterion.so\n"; }

double harness_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void harness_nap(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The directory of the running executable (e.g. /repo/build), into buf[size]. */
static int harness__exe_dir(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    return 0;
}

void harness_server_bin(char *buf, size_t size)
{
    const char *env = getenv("HAMEL_SERVER_BIN");
    char dir[HARNESS_DIR_MAX];
    if (env != NULL && env[0] != '\0')
        snprintf(buf, size, "%s", env);
    else if (harness__exe_dir(dir, sizeof dir) == 0)
        snprintf(buf, size, "%s/hamel-server", dir);
    else
        snprintf(buf, size, "build/hamel-server");
}

void harness_case_path(const char *name, char *buf, size_t size)
{
    char dir[HARNESS_DIR_MAX];
    if (harness__exe_dir(dir, sizeof dir) == 0) {
        snprintf(buf, size, "%s/../../shared/cases/%s", dir, name);
        if (access(buf, R_OK) == 0)
            return;
    }
    snprintf(buf, size, "../shared/cases/%s", name);
}

json_t *harness_case_load(const char *name, char *path, size_t size, json_error_t *err)
{
    harness_case_path(name, path, size);
    return json_load_file(path, 0, err);
}

json_t *harness_case_request(const char *name, char *path, size_t size, json_error_t *err)
{
    json_t *c = harness_case_load(name, path, size, err);
    if (!c)
        return NULL;
    json_t *req = json_deep_copy(json_object_get(c, "simulation"));
    json_object_set(req, "model", json_object_get(c, "model"));
    json_decref(c);
    return req;
}

/* Scans the log for the listening line; returns the port or 0. */
static int harness__port_from_log(const char *log)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return 0;
    char line[512];
    int port = 0;
    while (port == 0 && fgets(line, sizeof line, f) != NULL) {
        const char *p = strstr(line, HARNESS_LISTENING);
        if (p != NULL)
            port = atoi(p + strlen(HARNESS_LISTENING));
    }
    fclose(f);
    return port;
}

void harness_print_log(const harness_server *s)
{
    FILE *f = fopen(s->log, "r");
    char line[512];
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        fputs(line, stderr);
    if (f != NULL)
        fclose(f);
}

int harness_start(harness_server *s, const char *const *env)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s/hamel-client-test.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(s->dir) == NULL) {
        perror("harness: mkdtemp");
        return -1;
    }
    snprintf(s->data, sizeof s->data, "%s/data", s->dir);
    snprintf(s->log, sizeof s->log, "%s/server.log", s->dir);
    if (mkdir(s->data, 0700) != 0) {
        perror("harness: mkdir");
        return -1;
    }
    char bin[PATH_MAX];
    harness_server_bin(bin, sizeof bin);
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "harness: no server binary at %s\n", bin);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("harness: fork");
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        setenv("HAMEL_PORT", "0", 1);
        setenv("HAMEL_ADDR", "127.0.0.1", 1);
        setenv("HAMEL_DATA", s->data, 1);
        unsetenv("HAMEL_TOKEN");
        for (int i = 0; env != NULL && env[i] != NULL && i < HARNESS_MAX_ENV; i++)
            putenv((char *)env[i]);
        execl(bin, bin, (char *)NULL);
        perror("harness: exec");
        _exit(127);
    }
    s->pid = pid;
    double deadline = harness_now() + HARNESS_START_SECONDS;
    while (harness_now() < deadline) {
        s->port = harness__port_from_log(s->log);
        if (s->port > 0)
            break;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            s->pid = 0;
            break;
        }
        harness_nap(10);
    }
    if (s->port <= 0) {
        fprintf(stderr, "harness: %s did not start; its log:\n", bin);
        harness_print_log(s);
        return -1;
    }
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    return 0;
}

int harness_stop_checked(harness_server *s, int *status)
{
    int reaped = 0;
    *status = 0;
    if (s->pid <= 0)
        return 1;
    kill(s->pid, SIGTERM);
    double deadline = harness_now() + HARNESS_STOP_SECONDS;
    while (!reaped && harness_now() < deadline) {
        reaped = waitpid(s->pid, status, WNOHANG) == s->pid;
        if (!reaped)
            harness_nap(10);
    }
    if (!reaped) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, status, 0);
    }
    s->pid = 0;
    int clean = reaped && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
    if (!clean) {
        fprintf(stderr, "server log %s:\n", s->log);
        harness_print_log(s);
    }
    return clean;
}

static int harness__rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int harness_alive(harness_server *s)
{
    int gone = 0;
    if (s->pid > 0 && waitpid(s->pid, &gone, WNOHANG) == s->pid) {
        /* it ended before the test did (a crash, a sanitizer's report): show why */
        fprintf(stderr, "harness: the server ended on its own (%s %d); its log %s:\n",
                WIFSIGNALED(gone) ? "signal" : "exit status",
                WIFSIGNALED(gone) ? WTERMSIG(gone) : WEXITSTATUS(gone), s->log);
        harness_print_log(s);
        s->pid = 0;
    }
    return s->pid > 0;
}

void harness_stop(harness_server *s)
{
    if (harness_alive(s)) {
        kill(s->pid, SIGTERM);
        double deadline = harness_now() + HARNESS_STOP_SECONDS;
        int status;
        while (waitpid(s->pid, &status, WNOHANG) == 0) {
            if (harness_now() > deadline) {
                kill(s->pid, SIGKILL);
                waitpid(s->pid, &status, 0);
                break;
            }
            harness_nap(10);
        }
        s->pid = 0;
    }
    if (s->dir[0] != '\0' && getenv("HAMEL_KEEP_TEST_DIRS") == NULL)
        nftw(s->dir, harness__rm, 16, FTW_DEPTH | FTW_PHYS);
    s->dir[0] = '\0';
}

static size_t harness__on_body(char *p, size_t sz, size_t n, void *u)
{
    harness_resp *r = u;
    size_t k = sz * n;
    char *b = realloc(r->body, r->len + k + 1);
    if (!b)
        return 0;
    memcpy(b + r->len, p, k);
    r->body = b;
    r->len += k;
    r->body[r->len] = '\0';
    return k;
}

static size_t harness__on_header(char *p, size_t sz, size_t n, void *u)
{
    harness_resp *r = u;
    size_t k = sz * n;
    if (r->hlen + k < HARNESS_HEADERS_MAX) {
        memcpy(r->headers + r->hlen, p, k);
        r->hlen += k;
        r->headers[r->hlen] = '\0';
    }
    return k;
}

CURL *harness_easy(const harness_server *s, const char *method, const char *path, const char *body,
                   long body_len, const char *const *hdrs, struct curl_slist **list, harness_resp *r)
{
    memset(r, 0, sizeof *r);
    CURL *h = curl_easy_init();
    char url[1024];
    snprintf(url, sizeof url, "%s%s", s->url, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, harness__on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, harness__on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, HARNESS_TIMEOUT_SECONDS);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    *list = NULL;
    int has_ct = 0;
    for (int i = 0; hdrs && hdrs[i]; i++) {
        *list = curl_slist_append(*list, hdrs[i]);
        if (!strncasecmp(hdrs[i], "Content-Type:", 13))
            has_ct = 1;
    }
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, body_len >= 0 ? body_len : (long)strlen(body));
        if (!has_ct)
            *list = curl_slist_append(*list, "Content-Type: application/json");
    }
    *list = curl_slist_append(*list, "Expect:");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *list);
    return h;
}

void harness_finish(CURL *h, harness_resp *r)
{
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->body)
        r->json = json_loadb(r->body, r->len, 0, NULL);
}

CURLcode harness_request(const harness_server *s, const char *method, const char *path, const char *body,
                         const char *const *hdrs, harness_resp *r)
{
    struct curl_slist *list;
    CURL *h = harness_easy(s, method, path, body, -1, hdrs, &list, r);
    CURLcode rc = curl_easy_perform(h);
    harness_finish(h, r);
    curl_easy_cleanup(h);
    curl_slist_free_all(list);
    return rc;
}

harness_resp harness_post(const harness_server *s, const char *path, const json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    harness_resp r;
    CURLcode rc = harness_request(s, "POST", path, text, NULL, &r);
    free(text);
    if (rc != CURLE_OK) {
        harness_resp_free(&r);
        r.status = 0;
        r.body = strdup(curl_easy_strerror(rc));
        r.len = r.body ? strlen(r.body) : 0;
    }
    return r;
}

void harness_resp_free(harness_resp *r)
{
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

const char *harness_header(const harness_resp *r, const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        if (!end)
            break;
        if (!strncasecmp(line, name, n) && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            size_t len = (size_t)(end - v);
            if (len >= cap)
                len = cap - 1;
            memcpy(buf, v, len);
            buf[len] = '\0';
            return buf;
        }
        line = end + 2;
    }
    return NULL;
}

double harness_metric(const harness_resp *r, const char *series)
{
    double v = -1;
    size_t n = strlen(series);
    for (const char *p = r->body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, series, n) && p[n] == ' ') {
            v = atof(p + n + 1);
            break;
        }
    return v;
}
