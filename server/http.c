/* http.c — the libmicrohttpd daemon and the request lifecycle.
 *
 * Owns the daemon (start, drain, stop), the access handler's calls per request (framing,
 * header checks, body collection, parse), suspend and resume (long-polls, the offload
 * pool) and the completion callback (access log, metrics). Which handler answers is the
 * route table's (routes.c); the endpoints are the h_*.c files, model resolution is
 * resolve.c's and every answer is queued by respond.c.
 *
 * Threading model: MHD_USE_EPOLL_INTERNAL_THREAD with a small thread pool
 * (MHD_OPTION_THREAD_POOL_SIZE, default one per core). Thread-per-connection would
 * spend a thread (and its stack) on every idle keep-alive connection, which a shared lab
 * machine or 64 benchmark connections turns into hundreds of threads; an epoll pool
 * serves any number of connections from a few threads, which is what the cache-hit path
 * (a hash lookup and a zero-copy send) needs. The price is that handler code must not
 * block: simulations run on the job pool, and ?wait long-polls suspend the connection
 * (MHD_ALLOW_SUSPEND_RESUME) and are resumed by the pool's worker or timer thread.
 * Batch streams (POST /v1/batches with Accept: application/x-ndjson) suspend the same way
 * from inside their content reader while no line is ready (see h_batches.c).
 * Work that can take seconds, and every store round trip (SQLite behind its mutex, or
 * Redis), runs on the offload pool (offload.h) while its connection is suspended, so it
 * holds up no other connection: compiling a model that is not in the cache (a POST
 * carrying a new "model", or a model known only to the store, after a restart, on its
 * first use by id; the request then goes on as if the model had been cached) and
 * recording a new model in the store; /v1/hamel's, /v1/evaluate's and /v1/linearize's
 * engine calls; creating a batch; a simulation result not in memory, with the check and
 * the submission of its job (the "queued" record's commit, with HAMEL_REDIS the XADD);
 * a job known only to the store, and with HAMEL_REDIS the state of a job run elsewhere
 * (jobs_view_stale); cancelling a job or a batch (store writes); a classical form of the
 * equations (?form=, derived on its first request under the compile budget); with
 * HAMEL_REDIS, /readyz's ping and /metrics' stream length. A new simulation or batch of
 * a model that is not cached is one task: compilation, then result lookup, check and
 * submission (http__simulation_work) or batch_create (http__batch_work). Still on the
 * poll thread, bounded by engine_limits, the body cap and cheap: parsing the body, and
 * without a store engine_simulation_check, jobs_submit and cancellations (memory only).
 * When the offload queue is full, store reads, a submission and a cancellation are done
 * on the poll thread as before rather than refused (http__offload_read). (The default
 * equations are printed when the model is compiled; serving them is a copy.)
 *
 * Request lifecycle (MHD's access handler is called repeatedly per request):
 * first call — headers only: route, method (405 + Allow), CORS preflight, bearer token
 * (401), Content-Type (415) and Content-Length (413 at once if the client waits for 100
 * Continue or the body is past cap*4) are checked, GET and DELETE answered;
 * next calls — body bytes appended up to the cap (past it: drained and answered 413);
 * last call — JSON depth cap, parse, dispatch. A long-poll adds one more call after the
 * connection is resumed. The completion callback logs the access line and counts metrics.
 * A head must arrive whole within HAMEL_HEAD_SECONDS of the connection's start (or of the
 * previous answer on a kept-alive one), and near the connection limit the oldest
 * connections still waiting for a head give way (heads.h).
 */
#include "http_conn.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "blob.h"
#include "hangup.h"
#include "offload.h"
#include "metrics.h"

#define HTTP_MAX_JSON_DEPTH 64   /* nesting of request bodies; jansson allows 2048 */
#define HTTP_MAX_QUERY_PARAMS 64 /* query parameters of one request (routes read a handful) */
#define HTTP_DRAIN_FACTOR 4      /* past cap*factor an oversized body closes */
#define HTTP_BODY_FIRST 4096     /* first allocation of a request body (then doubled up to the cap) */
/* At least this many bodies at the cap fit in what all bodies may hold (HAMEL_BODIES_BYTES). */
#define HTTP_BODIES_CAPS 4
#define HTTP_BODY_SMALL ((size_t)64 << 10) /* a body this small always fits (1024 of them: 64 MiB) */
#define HTTP_CONN_MEMORY (16 * 1024) /* per-connection header and read buffer (MHD zeroes it per request) */
#define HTTP_OFFLOAD_QUEUE 256       /* requests waiting for an offload thread (past it: 503) */
/* Offload threads per poll thread. Besides compilations its tasks wait on store commits
 * and Redis (a new job's record, cancellations): with one per poll thread, 16 clients
 * posting new simulations made 4-11% fewer per second than when the poll threads did the
 * commits themselves (bench-server.sh, cold part); with two, as many or more. */
#define HTTP_OFFLOAD_PER_POLL 2
#define HTTP_DERIVE_PER_POLL 1                 /* derivation threads per poll thread (the second lane) */
#define HTTP_FORMS_REMEMBERED 256              /* compile-limit answers of ?form= remembered ... */
#define HTTP_FORMS_REMEMBER_SECONDS 600.0      /* ... for ten minutes each */
#define HTTP_BODY_MEMO_BYTES ((size_t)8 << 20) /* body hash -> simulation key memo */
#define HTTP_STOP_STREAM_SECONDS 2.0           /* http_stop lets open batch streams finish this long */
#define HTTP_STOP_POLL_NS 5000000L             /* ... polling every 5 ms */

/* ---- requests ----------------------------------------------------------------------- */

/* Whether the nesting of the JSON text stays within max (strings skipped). */
static int http__depth_ok(const char *s, size_t n, int max)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = 0;
        } else if (ch == '"') {
            in_str = 1;
        } else if (ch == '[' || ch == '{') {
            if (++depth > max)
                return 0;
        } else if (ch == ']' || ch == '}') {
            depth--;
        }
    }
    return 1;
}

/* Whether a Content-Type names JSON: application/json or application/<x>+json, with
 * optional parameters. A missing Content-Type is taken as JSON. */
static int http__is_json(const char *ct)
{
    if (!ct)
        return 1;
    while (*ct == ' ')
        ct++;
    size_t n = strcspn(ct, "; ");
    if (n == 16 && !strncasecmp(ct, "application/json", 16))
        return 1;
    return n > 17 && !strncasecmp(ct, "application/", 12) && !strncasecmp(ct + n - 5, "+json", 5);
}

/* Whether the request's Authorization is "Bearer <want>" (any token when want is ""). */
static int http__bearer_ok(http_conn *c, const char *want)
{
    if (!want[0])
        return 1;
    const char *got = http__header(c, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!got || strncasecmp(got, "Bearer ", 7) != 0)
        return 0;
    got += 7;
    while (*got == ' ')
        got++;
    size_t gl = strlen(got), wl = strlen(want);
    unsigned char diff = gl != wl;
    for (size_t i = 0; i < wl; i++) /* constant time in the token's length */
        diff |= (unsigned char)(want[i] ^ (i < gl ? got[i] : 0));
    return diff == 0;
}

static int http__token_ok(http_conn *c) { return http__bearer_ok(c, c->srv->d.cfg->token); }

/* Whether the request carries a body (a Content-Length above 0, or a transfer coding). */
static int http__has_body(http_conn *c)
{
    const char *cl = http__header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return (cl && strtoull(cl, NULL, 10) > 0) || http__header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING);
}

/* The 401 of a request without the token it needs. */
static enum MHD_Result http__unauthorized(http_conn *c)
{
    const char *detail = http__header(c, MHD_HTTP_HEADER_AUTHORIZATION)
                             ? "the Authorization header does not hold this server's bearer token"
                             : "send the token as Authorization: Bearer <token>";
    return http__problem_h(c, hamel_problem_new(HAMEL_E_UNAUTHORIZED, detail),
                           MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"hamel\"");
}

/* What *req_cls starts as for a request whose raw path holds "%00", or whose query
 * string has more than HTTP_MAX_QUERY_PARAMS parameters (http__uri_seen). */
static char http__nul_mark, http__params_mark;

/* libmicrohttpd's URI log callback, called with the raw request target before it
 * decodes the path (cutting it at a %00) and before it splits the query string. Each
 * query parameter takes a record in the connection's memory (HTTP_CONN_MEMORY): a few
 * hundred of them exhaust it, and libmicrohttpd then closes the connection without an
 * answer. So a query string of more parameters than any route reads is cut here, where
 * it still can be (the bytes are the connection's read buffer, which libmicrohttpd lets
 * the callback see before it parses them; the cut is within the string), and the
 * request is answered 400 naming why. */
static void *http__uri_seen(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    const char *nul = strstr(uri, "%00");
    const char *query = strchr(uri, '?');
    if (nul && (!query || nul < query))
        return &http__nul_mark;
    int params = query && query[1] ? 1 : 0;
    for (const char *p = query; p && *p; p++)
        params += *p == '&';
    if (params > HTTP_MAX_QUERY_PARAMS) {
        ((char *)query)[1] = '\0'; /* an empty query string: no parameter records */
        return &http__params_mark;
    }
    return NULL;
}

/* The number in ?wait=N, capped; -1 when malformed. */
double http__wait(http_conn *c)
{
    const char *w = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "wait");
    if (!w || !*w)
        return 0;
    char *end = NULL;
    double v = strtod(w, &end);
    if (*end || !(v >= 0))
        return -1;
    double cap = c->srv->d.cfg->max_wait;
    return v > cap ? cap : v;
}

/* The 400 answer to a malformed ?wait (http__wait returned -1). */
enum MHD_Result http__bad_wait(http_conn *c)
{
    return http__error_at(c, HAMEL_E_BAD_REQUEST, "?wait", "must be a number of seconds");
}

/* ---- the body memo ---------------------------------------------------------------- */

static void *http__memo_retain(void *v) { return blob_retain(v); }
static void http__memo_release(void *v) { blob_release(v); }
static const cache_ops http__memo_ops = {http__memo_retain, http__memo_release};

/* The memo maps request text to what it stands for: "s:<sha256 of a simulation body>" to
 * its simulation key (h_simulations.c), "b:<sha256 of a model spec>" to its model id
 * (resolve.c). */

/* ---- suspend and resume ------------------------------------------------------------- */

/* The wake of a long-poll's waiter: resumes its connection. */
void http__wake(void *arg)
{
    http_conn *c = arg;
    atomic_store(&c->resumed, 1);
    MHD_resume_connection(c->conn);
}

/* The value of a flag in the query string: ?name, ?name=1 or ?name=true. */
int http__flag(http_conn *c, const char *name)
{
    const char *v = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, name);
    if (!v)
        return 0;
    return !*v || !strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes");
}

void http__suspend_on(http_conn *c, waiter *w, double wait)
{
    w->wake = http__wake;
    w->arg = c;
    w->deadline = jobs_now() + wait;
    http__body_release(c); /* read and remembered: a long-poll holds no body */
    MHD_suspend_connection(c->conn);
    c->state = HTTP_CONN_PARKED;
}

/* ---- the request lifecycle ---------------------------------------------------------- */

/* The detail of a 404 whose path ends in '/' where the path without it is a resource
 * ("/v1/models/"), else NULL. The text is per thread, valid until the next call. */
static const char *http__slash_hint(http_conn *c, const char *url)
{
    static _Thread_local char hint[320];
    size_t n = strlen(url);
    if (n < 2 || url[n - 1] != '/' || n >= 200)
        return NULL;
    char bare[200];
    memcpy(bare, url, n);
    while (n > 1 && bare[n - 1] == '/')
        n--;
    bare[n] = '\0';
    http_route_match m;
    char id[sizeof c->id];
    memcpy(id, c->id, sizeof id); /* http__route writes the path's id */
    int found = http__route(c, bare, &m) == 0 && m.route != METRICS_ROUTE_STATIC;
    memcpy(c->id, id, sizeof id);
    if (!found || !strcmp(bare, "/"))
        return NULL;
    snprintf(hint, sizeof hint, "no such path; did you mean %s (without the trailing slash)?", bare);
    return hint;
}

/* The query parameters the API reads, each one value: one given twice with different
 * values (?form=kane&form=hamel) is refused rather than read as its first. */
static const char *const http__query_names[] = {"wait", "form", "source", "lang"};

typedef struct http_query_seen {
    const char *value[sizeof http__query_names / sizeof *http__query_names];
    const char *twice;
} http_query_seen;

static enum MHD_Result http__query_each(void *cls, enum MHD_ValueKind kind, const char *key,
                                        const char *value)
{
    (void)kind;
    http_query_seen *q = cls;
    for (size_t i = 0; key && i < sizeof http__query_names / sizeof *http__query_names; i++) {
        if (strcmp(key, http__query_names[i]) != 0)
            continue;
        const char *v = value ? value : "";
        if (q->value[i] != NULL && strcmp(q->value[i], v) != 0 && q->twice == NULL)
            q->twice = http__query_names[i];
        q->value[i] = v;
    }
    return MHD_YES;
}

/* The name of an API query parameter given twice with different values, else NULL. */
static const char *http__query_twice(http_conn *c)
{
    http_query_seen q = {{NULL}, NULL};
    MHD_get_connection_values(c->conn, MHD_GET_ARGUMENT_KIND, http__query_each, &q);
    return q.twice;
}

/* Everything that can be answered from the headers alone; returns 1 if it answered. */
static int http__headers(http_conn *c, const char *url, enum MHD_Result *ret)
{
    http_route_match m;
    c->url = url;
    if (c->nul_in_path) {
        *ret = http__error(c, HAMEL_E_BAD_HTTP, "the path holds an encoded NUL byte (%00)");
        return 1;
    }
    if (c->many_params) {
        char detail[96];
        snprintf(detail, sizeof detail, "the query string has more than %d parameters",
                 HTTP_MAX_QUERY_PARAMS);
        *ret = http__error(c, HAMEL_E_BAD_HTTP, detail);
        return 1;
    }
    /* With a token, every /v1 path needs it, known or not: which paths exist is not
     * told to a client without it. */
    int v1 = !strncmp(url, "/v1/", 4) || !strcmp(url, "/v1");
    if (v1 && c->method != HTTP_OPTIONS && !http__token_ok(c)) {
        c->route = METRICS_ROUTE_OTHER;
        *ret = http__unauthorized(c);
        return 1;
    }
    if (http__route(c, url, &m) != 0) {
        c->route = METRICS_ROUTE_OTHER;
        *ret = c->method == HTTP_OPTIONS ? http__preflight(c, "GET, POST, DELETE, OPTIONS")
                                         : http__error(c, HAMEL_E_NOT_FOUND, http__slash_hint(c, url));
        return 1;
    }
    c->route = m.route;
    if (c->method == HTTP_OPTIONS) {
        *ret = http__preflight(c, m.allow);
        return 1;
    }
    c->row = m.row;
    if (http__route_has(c, HTTP_ROUTE_METRICS_TOKEN) && !http__bearer_ok(c, c->srv->d.cfg->metrics_token)) {
        *ret = http__unauthorized(c);
        return 1;
    }
    if (!m.row) {
        char detail[96];
        snprintf(detail, sizeof detail, "allowed: %s", m.allow);
        *ret = http__problem_h(c, hamel_problem_new(HAMEL_E_METHOD, detail), MHD_HTTP_HEADER_ALLOW, m.allow);
        return 1;
    }
    const char *twice = v1 ? http__query_twice(c) : NULL;
    if (twice != NULL) {
        char path[32];
        snprintf(path, sizeof path, "?%s", twice);
        *ret =
            http__error_at(c, HAMEL_E_BAD_REQUEST, path, "given twice with different values: give it once");
        return 1;
    }
    /* A body nobody reads is still refused when it says it is not JSON. */
    if (c->method != HTTP_POST && http__has_body(c) &&
        !http__is_json(http__header(c, MHD_HTTP_HEADER_CONTENT_TYPE))) {
        *ret = http__error(c, HAMEL_E_UNSUPPORTED_MEDIA, "send Content-Type: application/json");
        return 1;
    }
    if (c->method == HTTP_POST) {
        if (!http__is_json(http__header(c, MHD_HTTP_HEADER_CONTENT_TYPE))) {
            *ret = http__error(c, HAMEL_E_UNSUPPORTED_MEDIA, "send Content-Type: application/json");
            return 1;
        }
        /* An announced oversized body is answered now only when the client waits for
         * "100 Continue" (it then sends nothing) or when draining it would cost more than
         * cap*factor; otherwise it is drained and answered 413 after it, because a client
         * still sending when the socket closes sees a reset instead of the 413. */
        size_t cap = c->srv->d.cfg->max_body;
        const char *cl = http__header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long announced = cl ? strtoull(cl, NULL, 10) : 0;
        if (announced > cap) {
            const char *expect = http__header(c, MHD_HTTP_HEADER_EXPECT);
            if ((expect && !strcasecmp(expect, "100-continue")) || announced / HTTP_DRAIN_FACTOR > cap) {
                char detail[96];
                snprintf(detail, sizeof detail, "the body is larger than %zu bytes", cap);
                *ret = http__error(c, HAMEL_E_TOO_LARGE, detail);
                return 1;
            }
            c->too_big = 1;
        }
        return 0; /* the body follows */
    }
    *ret = http__answer(c, m.row);
    return 1;
}

int http__submit(http_conn *c, offload *pool, void (*run)(void *), void (*done)(void *, int))
{
    c->off.rc = 0;
    int rc = offload_submit(pool, run, done, c);
    if (rc != 0)
        c->off.rc = rc;
    return rc;
}

void http__offloaded(void *arg, int ran)
{
    http_conn *c = arg;
    c->off.ran = ran;
    atomic_store(&c->resumed, 1);
    MHD_resume_connection(c->conn);
}

/* Suspends the connection and runs run(c) on the offload pool, then done(c, ran) (which
 * must end in http__offloaded); the resumed call answers with resume(c). Past the queue
 * (or while stopping) the answer is a 503. */
static enum MHD_Result http__offload_to(http_conn *c, offload *pool, void (*run)(void *),
                                        void (*done)(void *, int), enum MHD_Result (*resume)(http_conn *))
{
    c->off.resume = resume;
    c->off.ran = 0;
    /* Suspend first: the pool may finish (and resume) before offload_submit returns. */
    MHD_suspend_connection(c->conn);
    c->state = HTTP_CONN_OFFLOADED;
    if (http__submit(c, pool, run, done) != 0) /* not queued: the refusal is answered on the resumed call */
        done(c, 0);
    return MHD_YES;
}

enum MHD_Result http__offload_with(http_conn *c, void (*run)(void *), void (*done)(void *, int),
                                   enum MHD_Result (*resume)(http_conn *))
{
    return http__offload_to(c, c->srv->offload, run, done, resume);
}

enum MHD_Result http__offload_derive(http_conn *c, void (*run)(void *),
                                     enum MHD_Result (*resume)(http_conn *))
{
    return http__offload_to(c, c->srv->derive, run, http__offloaded, resume);
}

enum MHD_Result http__offload(http_conn *c, void (*run)(void *), enum MHD_Result (*resume)(http_conn *))
{
    return http__offload_with(c, run, http__offloaded, resume);
}

enum MHD_Result http__offload_read(http_conn *c, void (*run)(void *), enum MHD_Result (*resume)(http_conn *))
{
    c->off.resume = resume;
    c->off.ran = 0;
    MHD_suspend_connection(c->conn); /* first: the pool may finish before submit returns */
    c->state = HTTP_CONN_OFFLOADED;
    int rc = http__submit(c, c->srv->offload, run, http__offloaded);
    if (rc == HAMEL_E_QUEUE_FULL) { /* the pool is busy: read here, as before */
        c->off.rc = 0;
        run(c);
        http__offloaded(c, 1);
    } else if (rc != 0) {
        http__offloaded(c, 0);
    }
    return MHD_YES;
}

/* The resumed call of an offloaded request. */
static enum MHD_Result http__resume_offloaded(http_conn *c)
{
    enum MHD_Result (*resume)(http_conn *) = c->off.resume;
    c->off.resume = NULL;
    if (c->off.ran)
        return resume(c);
    int rc = c->off.rc ? c->off.rc : HAMEL_E_UNAVAILABLE;
    return http__problem_h(c, hamel_problem_new(rc, "no thread is free for this request; retry"),
                           MHD_HTTP_HEADER_RETRY_AFTER,
                           rc == HAMEL_E_QUEUE_FULL ? HTTP_RETRY_AFTER_FULL : HTTP_RETRY_AFTER_DOWN);
}

/* The bad-json problem of a body jansson refused: errors[0] with the line and column,
 * the detail "line L, column C: reason", and jansson's words where they are its own
 * (a flag's name) or leave the cause unsaid (NaN, Infinity). */
static int http__near_nonfinite(const char *body, size_t len, int position)
{
    size_t at = position > 0 ? (size_t)position : 0, from = at > 12 ? at - 12 : 0,
           to = at + 12 < len ? at + 12 : len;
    for (size_t i = from; i < to; i++)
        if ((i + 3 <= len && strncasecmp(body + i, "nan", 3) == 0) ||
            (i + 3 <= len && strncasecmp(body + i, "inf", 3) == 0))
            return 1;
    return 0;
}

static json_t *http__bad_json(const json_error_t *err, const char *body, size_t len)
{
    const char *reason = err->text;
    char buf[sizeof err->text + 64];
    if (strstr(reason, "JSON_ALLOW_NUL") != NULL)
        reason = "\\u0000 (NUL) is not allowed in a string";
    else if (strstr(reason, "invalid token near '") != NULL &&
             strchr("NnIi-+", strstr(reason, "near '")[6]) != NULL &&
             http__near_nonfinite(body, len, err->position)) {
        snprintf(buf, sizeof buf, "%s: JSON has no NaN or Infinity (send a finite number)", reason);
        reason = buf;
    }
    char detail[sizeof buf + 64];
    /* jansson names the character before a byte it cannot decode (column 0 at a line's
     * start): the byte's own column, 1-based like the others */
    int column = strncmp(reason, "unable to decode byte", 21) == 0 ? err->column + 1 : err->column;
    snprintf(detail, sizeof detail, "line %d, column %d: %s", err->line, column, reason);
    json_t *p = hamel_problem_new(HAMEL_E_BAD_JSON, detail);
    hamel_problem_add(p, "", column, reason);
    json_object_set_new(json_array_get(json_object_get(p, "errors"), 0), "line", json_integer(err->line));
    json_object_set_new(p, "line", json_integer(err->line));
    json_object_set_new(p, "position", json_integer(err->position));
    return p;
}

/* The bytes every request body may hold together (HAMEL_BODIES_BYTES, at least
 * HTTP_BODIES_CAPS bodies at the cap). */
static size_t http__bodies_budget(const http_server *s)
{
    size_t caps = HTTP_BODIES_CAPS * s->d.cfg->max_body;
    return caps > s->d.cfg->bodies_bytes ? caps : s->d.cfg->bodies_bytes;
}

/* Appends n bytes to c's body within its cap and, once it is larger than HTTP_BODY_SMALL,
 * within what all bodies may hold together; past that the body is dropped (c->body_busy:
 * 503 once it is in), so a small request is still served while large ones fill it. */
static enum MHD_Result http__body_add(http_conn *c, const char *data, size_t n)
{
    http_server *s = c->srv;
    if (c->body_busy) {
        c->drained += n;
        return c->drained > s->d.cfg->max_body * HTTP_DRAIN_FACTOR ? MHD_NO : MHD_YES;
    }
    size_t before = c->body.cap;
    size_t after = before ? before : HTTP_BODY_FIRST; /* dynbuf's doubling */
    while (after < c->body.len + n && after < SIZE_MAX / 2)
        after *= 2;
    size_t grow = c->body.len + n > before ? after - before : 0;
    if (grow && before + grow > HTTP_BODY_SMALL &&
        atomic_load(&s->body_bytes) + grow > http__bodies_budget(s)) {
        c->body_busy = 1;
        c->drained = n;
        http__body_release(c);
        return MHD_YES;
    }
    int rc = dynbuf_add(&c->body, data, n);
    atomic_fetch_add(&s->body_bytes, c->body.cap - before);
    return rc == 0 ? MHD_YES : MHD_NO;
}

void http__body_release(http_conn *c)
{
    atomic_fetch_sub(&c->srv->body_bytes, c->body.cap);
    dynbuf_free(&c->body);
}

/* The whole body has arrived: parse and dispatch. */
static enum MHD_Result http__body(http_conn *c)
{
    const server_config *cfg = c->srv->d.cfg;
    if (c->body_busy)
        return http__problem_h(c,
                               hamel_problem_new(HAMEL_E_UNAVAILABLE,
                                                 "the server holds as many request bodies "
                                                 "as it may (HAMEL_BODIES_BYTES): retry"),
                               MHD_HTTP_HEADER_RETRY_AFTER, HTTP_RETRY_AFTER_FULL);
    if (c->too_big) {
        char detail[96];
        snprintf(detail, sizeof detail, "the body is larger than %zu bytes", cfg->max_body);
        return http__error(c, HAMEL_E_TOO_LARGE, detail);
    }
    if (c->body.len == 0)
        return http__error(c, HAMEL_E_BAD_JSON, "the body is empty");
    enum MHD_Result fast;
    if (http__route_has(c, HTTP_ROUTE_RESULT_MEMO) && http__wait(c) >= 0 && http__simulation_memo(c, &fast))
        return fast;
    if (!http__depth_ok(c->body.s, c->body.len, HTTP_MAX_JSON_DEPTH)) {
        char detail[96];
        snprintf(detail, sizeof detail, "the body nests deeper than %d levels", HTTP_MAX_JSON_DEPTH);
        return http__error(c, HAMEL_E_BAD_JSON, detail);
    }
    json_error_t err;
    json_t *body = json_loadb(c->body.s, c->body.len, JSON_REJECT_DUPLICATES, &err);
    if (!body)
        return http__problem(c, http__bad_json(&err, c->body.s, c->body.len));
    enum MHD_Result ret;
    if (!json_is_object(body))
        ret = http__error_at(c, HAMEL_E_BAD_REQUEST, "", "the body must be a JSON object");
    else if (!http__compile_first(c, body, &ret))
        ret = http__dispatch(c, body);
    json_decref(body);
    return ret;
}

/* What the framing headers of a request say (http__framing). */
typedef struct http_framing {
    int lengths, conflict; /* Content-Length headers, and whether their values differ */
    const char *length;
    int codings; /* Transfer-Encoding headers */
    int chunked_only;
} http_framing;

static enum MHD_Result http__framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                            const char *value)
{
    (void)kind;
    http_framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (f->lengths++ && strcmp(f->length, value ? value : "") != 0)
            f->conflict = 1;
        f->length = value ? value : "";
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        f->chunked_only = f->codings++ == 0 && value && !strcasecmp(value, "chunked");
    }
    return MHD_YES;
}

/* Refuses a request whose body cannot be delimited safely, before any of it is read
 * (libmicrohttpd takes the first Content-Length and reads a body of an unknown coding
 * until the client closes): Content-Length headers that disagree, or one beside
 * Transfer-Encoding, are a 400 (request smuggling); a transfer coding other than
 * "chunked" alone is a 501. Returns 1 when it answered (the connection then closes). */
static int http__framing(http_conn *c, enum MHD_Result *ret)
{
    http_framing f = {0};
    MHD_get_connection_values(c->conn, MHD_HEADER_KIND, http__framing_header, &f);
    if (f.conflict) {
        *ret =
            http__error(c, HAMEL_E_BAD_HTTP, "Content-Length is given more than once with different values");
        return 1;
    }
    if (f.codings && f.lengths) {
        *ret = http__error(c, HAMEL_E_BAD_HTTP, "Content-Length and Transfer-Encoding together");
        return 1;
    }
    if (f.codings && !f.chunked_only) {
        *ret = http__error(c, HAMEL_E_NOT_IMPLEMENTED,
                           "Transfer-Encoding: only \"chunked\" is supported (no other transfer coding)");
        return 1;
    }
    return 0;
}

static http_method http__method(const char *m)
{
    if (!strcmp(m, "GET"))
        return HTTP_GET;
    if (!strcmp(m, "HEAD"))
        return HTTP_HEAD;
    if (!strcmp(m, "POST"))
        return HTTP_POST;
    if (!strcmp(m, "DELETE"))
        return HTTP_DELETE;
    if (!strcmp(m, "OPTIONS"))
        return HTTP_OPTIONS;
    return HTTP_OTHER;
}

/* Whether a body follows conn's request head (a Content-Length above 0, or a transfer
 * coding), so that the connection still waits for its request after the head. */
static int http__body_follows(struct MHD_Connection *conn)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    return te != NULL || (cl && strtoull(cl, NULL, 10) > 0);
}

static enum MHD_Result http__access(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version, const char *upload_data,
                                    size_t *upload_data_size, void **req_cls)
{
    (void)version;
    http_server *s = cls;
    http_conn *c = *req_cls;
    int nul_in_path = c == (void *)&http__nul_mark, many_params = c == (void *)&http__params_mark;
    if (nul_in_path || many_params)
        c = NULL;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c)
            return MHD_NO;
        *req_cls = c;
        c->nul_in_path = nul_in_path;
        c->many_params = many_params;
        heads_arrived(s->heads, conn, http__body_follows(conn));
        c->srv = s;
        c->conn = conn;
        dynbuf_init(&c->body, HTTP_BODY_FIRST, s->d.cfg->max_body);
        c->t0 = jobs_now();
        c->route = METRICS_ROUTE_OTHER;
        c->method = http__method(method);
        snprintf(c->method_name, sizeof c->method_name, "%s", method);
        snprintf(c->path, sizeof c->path, "%s", url);
        /* Answering before MHD has seen the end of the request makes it close the
         * connection, so only a POST (whose body may be refused unread) is answered on
         * this first call; everything else waits for the next one, keeping keep-alive. */
        enum MHD_Result ret = MHD_YES;
        if (http__framing(c, &ret))
            return ret;
        if (c->method == HTTP_POST && http__headers(c, url, &ret))
            return ret;
        return MHD_YES;
    }
    if (*upload_data_size == 0)
        heads_body_done(s->heads, conn); /* after the first call, 0 means the body is in */
    if (c->state == HTTP_CONN_OFFLOADED || c->state == HTTP_CONN_PARKED) {
        /* resumed: the work ran, or the long-poll finished, passed its deadline or the
         * server is stopping */
        http_conn_state was = c->state;
        c->state = HTTP_CONN_ROUTED;
        if (was == HTTP_CONN_OFFLOADED)
            return http__resume_offloaded(c);
        return http__on_wake(c); /* the row's: the job's or the batch's answer */
    }
    if (c->state == HTTP_CONN_ANSWERED || (c->method != HTTP_POST && *upload_data_size)) {
        *upload_data_size = 0; /* an early answer, or a body nobody reads: dropped */
        return MHD_YES;
    }
    if (c->method != HTTP_POST) {
        enum MHD_Result ret = MHD_YES;
        http__headers(c, url, &ret);
        return ret;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        size_t cap = s->d.cfg->max_body;
        if (c->too_big || c->body.len + n > cap) {
            c->too_big = 1;
            c->drained += n;
            return c->drained > cap * HTTP_DRAIN_FACTOR ? MHD_NO : MHD_YES;
        }
        return http__body_add(c, upload_data, n);
    }
    return http__body(c);
}

/* Frees what offloaded work left in w. */
static void http__work_clear(http_work *w)
{
    json_decref(w->body);
    if (w->model)
        engine_model_release(w->model);
    json_decref(w->out);
    json_decref(w->problem);
    free(w->text);
}

static void http__completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                            enum MHD_RequestTerminationCode toe)
{
    http_server *s = cls;
    http_conn *c = *req_cls;
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        heads_waiting(s->heads, conn); /* kept alive: the next head has the same deadline */
    if (!c || c == (void *)&http__nul_mark || c == (void *)&http__params_mark)
        return;
    *req_cls = NULL;
    double secs = jobs_now() - c->t0;
    int answered = c->state == HTTP_CONN_ANSWERED;
    int status = answered ? c->status : 499; /* closed before an answer */
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !answered)
        status = 499;
    metrics_request(c->route, status, secs);
    if (s->d.cfg->access_log)
        fprintf(stderr, "%s %s %d %zu %.3f\n", c->method_name, c->path, status, c->bytes, secs * 1e3);
    http__route_release(c); /* the route's own state (its row's hook) */
    http__resolve_clear(c); /* and the flight of an owner that ended before its model was cached */
    http__work_clear(&c->work);
    hangup_settle(s->hangups, &c->work.hup); /* a poll round that watched it has ended */
    blob_release(c->gz.src);
    http__body_release(c);
    free(c);
}

static void http__log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    fputs("hamel-server: microhttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

int http_start(const http_deps *deps, http_server **out, int *port)
{
    *out = NULL;
    http_server *h = calloc(1, sizeof *h);
    if (!h)
        return -1;
    h->d = *deps;
    const server_config *cfg = deps->cfg;
    h->memo = cache_new(HTTP_BODY_MEMO_BYTES, &http__memo_ops);
    h->offload = offload_new(cfg->http_threads * HTTP_OFFLOAD_PER_POLL, HTTP_OFFLOAD_QUEUE);
    h->hangups = hangup_new(cfg->hangup_poll_ms);
    h->heads = heads_new(cfg->head_seconds, cfg->max_connections);
    h->derive = offload_new(cfg->http_threads * HTTP_DERIVE_PER_POLL, HTTP_OFFLOAD_QUEUE);
    h->forms = once_new(HTTP_FORMS_REMEMBERED, HTTP_FORMS_REMEMBER_SECONDS);
    pthread_mutex_init(&h->flights_mu, NULL);
    if (!h->memo || !h->offload || !h->hangups || !h->heads || !h->derive || !h->forms)
        goto fail;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned int flags =
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_TURBO;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, cfg->addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)cfg->port);
    } else if (inet_pton(AF_INET6, cfg->addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)cfg->port);
        flags |= MHD_USE_IPv6;
    } else {
        fprintf(stderr, "hamel-server: HAMEL_ADDR=%s is not an IPv4 or IPv6 address\n", cfg->addr);
        goto fail;
    }
    h->daemon = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, http__access, h, MHD_OPTION_EXTERNAL_LOGGER, http__log, h,
        MHD_OPTION_SOCK_ADDR, &ss, MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)cfg->http_threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)cfg->conn_timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
        MHD_OPTION_NOTIFY_COMPLETED, http__completed, h, MHD_OPTION_URI_LOG_CALLBACK, http__uri_seen, h,
        MHD_OPTION_NOTIFY_CONNECTION, heads_notify, h->heads, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned int)cfg->max_per_ip, MHD_OPTION_END);
    if (!h->daemon) {
        fprintf(stderr, "hamel-server: cannot listen on %s port %d\n", cfg->addr, cfg->port);
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : cfg->port;
    atomic_store(&h->ready, 1);
    *out = h;
    return 0;
fail:
    offload_free(h->offload);
    offload_free(h->derive);
    once_free(h->forms);
    hangup_free(h->hangups);
    heads_free(h->heads);
    pthread_mutex_destroy(&h->flights_mu);
    cache_free(h->memo);
    free(h);
    return -1;
}

void http_drain(http_server *h)
{
    atomic_store(&h->ready, 0);
    hangup_shutdown(h->hangups); /* running compilations stop now, later ones at once */
}

void http_stop(http_server *h)
{
    if (!h)
        return;
    /* A stream woken by batches_shutdown still has its last lines and the chunked end to
     * send; MHD_stop_daemon would cut it, so give it a moment. */
    double until = jobs_now() + HTTP_STOP_STREAM_SECONDS;
    while (atomic_load(&h->streams) > 0 && jobs_now() < until)
        nanosleep(&(struct timespec){0, HTTP_STOP_POLL_NS}, NULL);
    /* Every connection suspended on a compilation is resumed (its done function has run)
     * before MHD_stop_daemon, which must not meet a suspended connection. */
    offload_stop(h->derive); /* first: a form's waiters may try again, on this lane only */
    offload_stop(h->offload);
    MHD_stop_daemon(h->daemon);
    offload_free(h->derive);
    once_free(h->forms);
    offload_free(h->offload);
    hangup_free(h->hangups);
    heads_free(h->heads);
    pthread_mutex_destroy(&h->flights_mu);
    cache_free(h->memo);
    free(h);
}
