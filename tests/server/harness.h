/* harness.h — the real hamel-server and raw HTTP for the server tests (tests/server/).
 *
 * harness_start forks build/hamel-server (the hamel-server beside the running test
 * binary, so build-san/ tests run build-san/ servers; $HAMEL_SERVER_BIN overrides) with
 * HAMEL_PORT=0 and a fresh temporary HAMEL_DATA, its output going to server.log in the
 * same temporary directory, and waits for its "listening on http://127.0.0.1:PORT"
 * line. harness_stop sends SIGTERM (SIGKILL after a grace period), reaps it and removes
 * the directory; harness_stop_checked stops it and says whether it exited 0. The server
 * dies with the test process (PR_SET_PDEATHSIG), so a crashed or timed-out test leaves no
 * daemon behind.
 *
 * harness_easy / harness_request speak HTTP to it with libcurl, collecting the status,
 * headers and body (parsed as JSON when it is JSON) into a harness_resp; harness_metric
 * reads one series from a /metrics answer.
 *
 * harness.c also tells LeakSanitizer to ignore libcriterion's own leak (see there).
 */
#ifndef HAMEL_TESTS_HARNESS_H
#define HAMEL_TESTS_HARNESS_H

#include <curl/curl.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#define HARNESS_START_SECONDS 20.0 /* longest wait for the listening line */
#define HARNESS_STOP_SECONDS 10.0  /* SIGTERM grace before SIGKILL */
#define HARNESS_MAX_ENV 12
#define HARNESS_DIR_MAX 1024         /* directory paths, short enough to append file names */
#define HARNESS_HEADERS_MAX 8192     /* response headers kept by harness_resp */
#define HARNESS_TIMEOUT_SECONDS 180L /* one HTTP request, start to end */

typedef struct harness_server {
    pid_t pid;
    int port;
    char url[64];
    char dir[HARNESS_DIR_MAX]; /* temporary directory: data/ and server.log */
    char data[PATH_MAX];       /* HAMEL_DATA */
    char log[PATH_MAX];        /* the server's stdout and stderr */
} harness_server;

/* One HTTP answer: the status, the raw headers, the body (NUL-terminated) and, when the
 * body parses, its JSON. */
typedef struct harness_resp {
    long status;
    char *body;
    size_t len;
    char headers[HARNESS_HEADERS_MAX];
    size_t hlen;
    json_t *json;
} harness_resp;

/* Seconds on the monotonic clock. */
double harness_now(void);

/* Sleeps `ms` milliseconds. */
void harness_nap(long ms);

/* The path of the server binary to run, into buf[size]. */
void harness_server_bin(char *buf, size_t size);

/* The path of a shared case file (../shared/cases/NAME from the repository root, found
 * from the test binary's build directory, else from the working directory). */
void harness_case_path(const char *name, char *buf, size_t size);

/* Loads the shared case file NAME; its path goes to path[size] (for messages). Returns
 * the document (caller owns it) or NULL with *err filled. */
json_t *harness_case_load(const char *name, char *path, size_t size, json_error_t *err);

/* The simulation request of the shared case NAME with its model inline (caller owns it),
 * or NULL as harness_case_load. */
json_t *harness_case_request(const char *name, char *path, size_t size, json_error_t *err);

/* Starts a server. `env` is a NULL-terminated list of extra "NAME=value" settings (or
 * NULL), borrowed. Returns 0 with *s filled, or -1 (with the log printed to stderr). */
int harness_start(harness_server *s, const char *const *env);

/* Copies the server's log to stderr. */
void harness_print_log(const harness_server *s);

/* Sends SIGTERM and reaps the server (SIGKILL after HARNESS_STOP_SECONDS). Returns 1 if
 * it exited 0 on its own (or was not running), else 0 with its log printed to stderr; the
 * wait status goes to *status. The directory stays for harness_stop to remove. */
int harness_stop_checked(harness_server *s, int *status);

/* Stops the server (if running), reaps it and removes its directory. Safe to call on
 * a harness_server that failed to start or was already stopped. */
/* 1 while the server runs; when it has ended on its own, prints its log and returns 0. */
int harness_alive(harness_server *s);

void harness_stop(harness_server *s);

/* A configured easy handle for METHOD s->url PATH writing into r (cleared first). `body`
 * (borrowed, may be NULL) is sent with length body_len, or strlen(body) if body_len < 0,
 * as application/json unless `hdrs` (a NULL-terminated list, may be NULL) names a
 * Content-Type. The header list goes to *list; the caller frees the handle, the list and
 * r (harness_resp_free), after harness_finish. */
CURL *harness_easy(const harness_server *s, const char *method, const char *path, const char *body,
                   long body_len, const char *const *hdrs, struct curl_slist **list, harness_resp *r);

/* Reads the status of a performed handle into r and parses r's body as JSON. */
void harness_finish(CURL *h, harness_resp *r);

/* One request (harness_easy, perform, harness_finish) into *r, which the caller frees
 * with harness_resp_free. Returns curl's result. */
CURLcode harness_request(const harness_server *s, const char *method, const char *path, const char *body,
                         const char *const *hdrs, harness_resp *r);

/* A POST of body's compact JSON text to path on s; a transport error is status 0 with
 * curl's message as the body. */
harness_resp harness_post(const harness_server *s, const char *path, const json_t *body);

/* Frees what r holds and clears it. */
void harness_resp_free(harness_resp *r);

/* The value of a response header (case-insensitive name), into buf[cap]; NULL if absent. */
const char *harness_header(const harness_resp *r, const char *name, char *buf, size_t cap);

/* The value on the first line of a /metrics body in r that starts with `series` and a
 * space, or -1 if there is none. */
double harness_metric(const harness_resp *r, const char *series);

#endif
