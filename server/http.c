/* http.c — libmicrohttpd daemon, request lifecycle, routing and the v1 endpoints.
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
 * from inside their content reader while no line is ready (see http__stream_read).
 * Work that can take seconds runs on the offload pool (offload.h) while its connection
 * is suspended, so it holds up no other connection: compiling a model that is not in the
 * cache (a POST carrying a new "model", or a model known only to the store, after a
 * restart, on its first use by id; the request then goes on as if the model had been
 * cached) and /v1/hamel's coefficients. Still on the poll thread, bounded by
 * engine_limits and cheap: engine_simulation_check. (The derived equations are printed
 * when the model is compiled; serving them is a copy.)
 *
 * Request lifecycle (MHD's access handler is called repeatedly per request):
 * first call — headers only: route, method (405 + Allow), CORS preflight, bearer token
 * (401), Content-Type (415) and Content-Length (413 at once if the client waits for 100
 * Continue or the body is past cap*4) are checked, GET and DELETE answered;
 * next calls — body bytes appended up to the cap (past it: drained and answered 413);
 * last call — JSON depth cap, parse, dispatch. A long-poll adds one more call after the
 * connection is resumed. The completion callback logs the access line and counts metrics.
 */
#include "http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <openssl/sha.h>
#include <pthread.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob.h"
#include "hangup.h"
#include "jsonout.h"
#include "offload.h"
#include "metrics.h"

#define HTTP_MAX_JSON_DEPTH 64       /* nesting of request bodies; jansson allows 2048 */
#define HTTP_LOG_PATH_MAX 256        /* request path kept for the access log */
#define HTTP_ID_MAX 128              /* longest {id} path segment */
#define HTTP_DRAIN_FACTOR 4          /* past cap*factor an oversized body closes */
#define HTTP_RETRY_AFTER_FULL "1"    /* seconds, queue full */
#define HTTP_RETRY_AFTER_DOWN "5"    /* seconds, shutting down */
#define HTTP_CONN_MEMORY (16 * 1024) /* per-connection header and read buffer (MHD zeroes it per request) */
#define HTTP_OFFLOAD_QUEUE 256       /* requests waiting for an offload thread (past it: 503) */
#define HTTP_CORS_MAX_AGE "600"
#define HTTP_EXPOSE_HEADERS "Location, ETag, Retry-After"
#define HTTP_BODY_MEMO_BYTES ((size_t)8 << 20) /* body hash -> simulation key memo */
#define HTTP_STREAM_BLOCK 4096 /* NDJSON bytes handed to MHD per read (fits HTTP_CONN_MEMORY) */
#define HTTP_NDJSON "application/x-ndjson"
#define HTTP_STOP_STREAM_SECONDS 2.0 /* http_stop lets open batch streams finish this long */
#define HTTP_STOP_POLL_NS 5000000L   /* ... polling every 5 ms */

struct http_server {
    http_deps d;
    struct MHD_Daemon *daemon;
    atomic_int ready;
    /* SHA-256 of a POST /v1/simulations body, exactly as received -> its simulation key
     * (a blob). Identical bytes are an identical request, so a repeat is answered from
     * the result cache without parsing or canonicalising the JSON (the cache-hit path
     * of a polling or batch client). Requests equal only after canonicalisation still
     * take the full path and still hit the result cache. */
    cache *memo;
    atomic_int streams; /* batch streams whose response MHD still holds */
    offload *offload;   /* compilations and /v1/hamel: off the poll threads */
    hangup *hangups;    /* cancels an offloaded compilation whose client hung up (hangup.h) */
    /* Compilations in flight by spec key: a request for a model that is being compiled
     * waits for that compilation instead of starting another (http__compile_first). */
    pthread_mutex_t flights_mu; /* a leaf; MHD's own locks are taken inside it, never around it */
    struct http_flight *flights;
};

/* A compilation in flight. It stays listed after it ends, holding its outcome for
 * latecomers, until its owner has put the model in the cache (http__flight_end). */
typedef struct http_flight {
    char key[CACHE_MAX_KEY + 1];
    struct http_conn *waiters; /* linked by next_waiter; resumed when it ends */
    int finished, rc;          /* ended, with engine_model_compile's outcome: */
    engine_model *model;
    json_t *problem;
    struct http_flight *next;
} http_flight;

typedef enum http_method {
    HTTP_GET,
    HTTP_HEAD,
    HTTP_POST,
    HTTP_DELETE,
    HTTP_OPTIONS,
    HTTP_OTHER,
} http_method;

typedef struct http_conn {
    http_server *srv;
    struct MHD_Connection *conn;
    metrics_route route;
    http_method method;
    double t0;
    int status;
    size_t bytes;
    int answered;
    char id[HTTP_ID_MAX + 1]; /* the {id} of the route, percent-decoded */
    char *body;
    size_t len, cap, drained;
    int too_big;
    job *job;             /* a long-poll's job (a reference) */
    job_waiter waiter;    /* parked on job while suspended */
    batch *batch;         /* a batch long-poll's batch (a reference) */
    batch_waiter bwaiter; /* parked on batch while suspended */
    /* Offloaded work (see http__offload): what to do on the resumed call, whether the
     * work ran, and its inputs and outputs. */
    enum MHD_Result (*on_resume)(struct http_conn *c);
    int ran, off_rc, work_rc;
    json_t *pending;                  /* the parsed body the work is for */
    engine_model *work_model;         /* the model /v1/hamel or the equations work on */
    json_t *out, *out_problem;        /* their result */
    char *spec_text;                  /* the request's model spec, compact with sorted keys */
    char spec_key[CACHE_MAX_KEY + 1]; /* "b:" + SHA-256 of spec_text */
    int pre_set;                      /* the offloaded compilation's outcome, taken by */
    int pre_rc;                       /* http__model_by_spec */
    engine_model *pre_model;
    json_t *pre_problem;
    json_t *stored_spec;        /* a model known by id, read from the store to compile */
    http_flight *flight;        /* the compilation this request runs for others too */
    engine_control compile_ctl; /* its cancel flag, set by hangups (client gone, shutdown) */
    hangup_entry hup;
    struct http_conn *next_waiter; /* in its flight's waiters */

    atomic_int resumed;
    int suspended;
    char method_name[16];
    char path[HTTP_LOG_PATH_MAX];
} http_conn;

/* ---- responses ---------------------------------------------------------------------- */

static const char *http__header(http_conn *c, const char *name)
{
    return MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, name);
}

static void http__cors(http_conn *c, struct MHD_Response *r)
{
    const server_config *cfg = c->srv->d.cfg;
    const char *origin = http__header(c, "Origin");
    if (cfg->cors_any) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    } else if (origin && config_origin_allowed(cfg, origin)) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(r, "Vary", "Origin");
    } else {
        return;
    }
    MHD_add_response_header(r, "Access-Control-Expose-Headers", HTTP_EXPOSE_HEADERS);
}

/* Queues r with status and the common headers, and destroys our handle on it. */
static enum MHD_Result http__send(http_conn *c, int status, struct MHD_Response *r, const char *ctype,
                                  size_t bytes)
{
    if (!r)
        return MHD_NO;
    if (ctype)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    http__cors(c, r);
    c->status = status;
    c->bytes = bytes;
    c->answered = 1;
    enum MHD_Result ret = MHD_queue_response(c->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static struct MHD_Response *http__text_response(char *text, size_t len)
{
    return MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
}

/* Sends a JSON value (stolen) with status, content type and up to two extra headers
 * (a NULL name skips one). */
static enum MHD_Result http__json_h(http_conn *c, int status, json_t *j, const char *ctype, const char *h1,
                                    const char *v1, const char *h2, const char *v2)
{
    size_t len = 0;
    char *text = j ? jsonout_dumps(j, &len) : NULL;
    json_decref(j);
    if (!text)
        return MHD_NO;
    struct MHD_Response *r = http__text_response(text, len);
    if (r && h1)
        MHD_add_response_header(r, h1, v1);
    if (r && h2)
        MHD_add_response_header(r, h2, v2);
    return http__send(c, status, r, ctype, len);
}

static enum MHD_Result http__json(http_conn *c, int status, json_t *j)
{
    return http__json_h(c, status, j, "application/json", NULL, NULL, NULL, NULL);
}

/* Sends a problem document (stolen) with the status it carries. */
static enum MHD_Result http__problem_h(http_conn *c, json_t *problem, const char *h1, const char *v1)
{
    if (!problem)
        problem = hamel_problem_new(HAMEL_E_INTERNAL, NULL);
    json_t *st = json_object_get(problem, "status");
    int status = json_is_integer(st) ? (int)json_integer_value(st) : 500;
    if (status < 400 || status > 599)
        status = 500;
    if (!json_object_get(problem, "instance"))
        json_object_set_new(problem, "instance", json_string(c->path));
    return http__json_h(c, status, problem, "application/problem+json", h1, v1, NULL, NULL);
}

static enum MHD_Result http__problem(http_conn *c, json_t *problem)
{
    if (hamel_problem_code(problem) == HAMEL_E_UNAVAILABLE) /* a retry can succeed later */
        return http__problem_h(c, problem, MHD_HTTP_HEADER_RETRY_AFTER, HTTP_RETRY_AFTER_DOWN);
    return http__problem_h(c, problem, NULL, NULL);
}

static enum MHD_Result http__error(http_conn *c, int code, const char *detail)
{
    return http__problem(c, hamel_problem_new(code, detail));
}

static enum MHD_Result http__error_at(http_conn *c, int code, const char *path, const char *reason)
{
    json_t *p = hamel_problem_new(code, NULL);
    hamel_problem_add(p, path, -1, reason);
    return http__problem(c, p);
}

static void http__blob_free(void *cls) { blob_release(cls); }

/* Sends a result blob (borrowed; the response keeps its own reference) as
 * {"cached":<cached>, ...rest of the blob}: no copy of the trajectory is made. */
static enum MHD_Result http__result(http_conn *c, blob *b, int cached, const char *etag)
{
    static const char yes[] = "{\"cached\":true,";
    static const char no[] = "{\"cached\":false,";
    const char *prefix = cached ? yes : no;
    size_t plen = cached ? sizeof yes - 1 : sizeof no - 1;
    if (b->len < 2 || b->data[0] != '{')
        return http__error(c, HAMEL_E_INTERNAL, "stored result is not an object");
    int empty = b->data[1] == '}';
    struct MHD_IoVec iov[2] = {{prefix, empty ? plen - 1 : plen}, {b->data + 1, b->len - 1}};
    const char *inm = http__header(c, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (etag && inm && !strcmp(inm, etag)) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        if (r)
            MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
        return http__send(c, MHD_HTTP_NOT_MODIFIED, r, NULL, 0);
    }
    struct MHD_Response *r = MHD_create_response_from_iovec(iov, 2, http__blob_free, blob_retain(b));
    if (!r) {
        blob_release(b);
        return MHD_NO;
    }
    if (etag)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
    return http__send(c, MHD_HTTP_OK, r, "application/json", iov[0].iov_len + iov[1].iov_len);
}

/* ---- requests ----------------------------------------------------------------------- */

static int http__hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Percent-decodes src (n bytes) into dst[cap]. Returns 0, or -1 if it does not fit or
 * decodes to a NUL or a '/'. */
static int http__decode(const char *src, size_t n, char *dst, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = src[i];
        if (ch == '%' && i + 2 < n) {
            int hi = http__hexval(src[i + 1]);
            int lo = http__hexval(src[i + 2]);
            if (hi >= 0 && lo >= 0) {
                ch = (char)(hi * 16 + lo);
                i += 2;
            }
        }
        if (ch == '\0' || ch == '/' || o + 1 >= cap)
            return -1;
        dst[o++] = ch;
    }
    dst[o] = '\0';
    return 0;
}

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

static int http__token_ok(http_conn *c)
{
    const char *want = c->srv->d.cfg->token;
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

/* The number in ?wait=N, capped; -1 when malformed. */
static double http__wait(http_conn *c)
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
static enum MHD_Result http__bad_wait(http_conn *c)
{
    return http__error_at(c, HAMEL_E_BAD_REQUEST, "?wait", "must be a number of seconds");
}

static void http__hex(const unsigned char *d, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * n] = '\0';
}

/* ---- the body memo ---------------------------------------------------------------- */

static void *http__memo_retain(void *v) { return blob_retain(v); }
static void http__memo_release(void *v) { blob_release(v); }
static const cache_ops http__memo_ops = {http__memo_retain, http__memo_release};

/* The memo maps request text to what it stands for: "s:<sha256 of a simulation body>" to
 * its simulation key, "b:<sha256 of a model spec>" to its model id. */

/* The memo key of a body: "s:" and the hex SHA-256 of its bytes. */
static void http__memo_key(const http_conn *c, char out[CACHE_MAX_KEY + 1])
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)c->body, c->len, d);
    memcpy(out, "s:", 2);
    http__hex(d, sizeof d, out + 2);
}

/* Answers a POST /v1/simulations whose exact body was seen before and whose result is
 * still cached; returns 1 if it answered. */
static int http__simulation_memo(http_conn *c, enum MHD_Result *ret)
{
    http_server *s = c->srv;
    char mkey[CACHE_MAX_KEY + 1];
    http__memo_key(c, mkey);
    blob *key = cache_peek(s->memo, mkey);
    if (!key)
        return 0;
    /* peek first so that a miss here is not counted twice (the full path counts it) */
    blob *seen = cache_peek(s->d.results, key->data);
    blob *hit = seen ? cache_get(s->d.results, key->data) : NULL;
    blob_release(seen);
    if (hit) {
        char etag[CACHE_MAX_KEY + 3];
        snprintf(etag, sizeof etag, "\"%s\"", key->data);
        metrics_job(METRICS_JOB_CACHED);
        *ret = http__result(c, hit, 1, etag);
        blob_release(hit);
    }
    blob_release(key);
    return hit != NULL;
}

/* Remembers the simulation key of the current body. */
static void http__memo_put(http_conn *c, const char *key)
{
    char mkey[CACHE_MAX_KEY + 1];
    http__memo_key(c, mkey);
    blob *b = blob_new(key, strlen(key));
    if (b)
        cache_put(c->srv->memo, mkey, b, sizeof *b + b->len + 1 + strlen(mkey));
    blob_release(b);
}

/* ---- models ------------------------------------------------------------------------- */

/* Caches m under "m:<id>" and, given the key of the spec text it came from, points that
 * key at the id in the memo (the model's bytes are charged to the model cache once). */
static void http__model_remember(http_server *s, engine_model *m, const char *bkey)
{
    char key[CACHE_MAX_KEY + 1];
    snprintf(key, sizeof key, "m:%s", engine_model_id(m));
    cache_put(s->d.models, key, m, engine_model_bytes(m));
    blob *id = bkey ? blob_new(engine_model_id(m), strlen(engine_model_id(m))) : NULL;
    if (id)
        cache_put(s->memo, bkey, id, sizeof *id + id->len + 1 + strlen(bkey));
    blob_release(id);
}

/* The cached model of a spec text key ("b:<sha256>"), a new reference, or NULL. A miss
 * is counted in the model cache's metrics only when `count` is set. */
static engine_model *http__model_by_text(http_server *s, const char *bkey, int count)
{
    blob *id = cache_peek(s->memo, bkey);
    char key[CACHE_MAX_KEY + 1];
    if (id)
        snprintf(key, sizeof key, "m:%s", id->data);
    blob_release(id);
    engine_model *m = NULL;
    if (id)
        m = count ? cache_get(s->d.models, key) : cache_peek(s->d.models, key);
    else if (count)
        cache_get(s->d.models, bkey); /* counts the miss */
    return m;
}

/* Compiles spec (borrowed); on success *out is a new model reference. */
static int http__compile(http_server *s, const json_t *spec, engine_model **out, json_t **problem)
{
    double t0 = jobs_now();
    int rc = engine_model_compile(spec, s->d.limits, out, problem);
    metrics_derive(jobs_now() - t0);
    if (rc == HAMEL_E_COMPILE_LIMIT)
        metrics_compile_stopped(METRICS_COMPILE_LIMIT);
    return rc;
}

/* Takes the outcome of the request's offloaded compilation, if there is one (returns 1). */
static int http__take_compiled(http_conn *c, int *rc, engine_model **out, json_t **problem)
{
    if (!c->pre_set)
        return 0;
    *rc = c->pre_rc;
    *out = c->pre_model;
    *problem = c->pre_problem;
    c->pre_set = 0;
    c->pre_model = NULL;
    c->pre_problem = NULL;
    if (*rc == HAMEL_E_CANCELLED) { /* a compilation cancelled by shutdown or its first client leaving */
        json_decref(*problem);
        *rc = HAMEL_E_UNAVAILABLE;
        *problem =
            hamel_problem_new(*rc, "the model's compilation was cancelled (the service is stopping, or "
                                   "the client that started it went away); retry");
    }
    return 1;
}

/* The "m:<id>" key of a model id into key; returns 0 if the id is too long to be one. */
static int http__id_key(const char *id, char key[CACHE_MAX_KEY + 1])
{
    if (strlen(id) + 2 > CACHE_MAX_KEY)
        return 0;
    snprintf(key, CACHE_MAX_KEY + 1, "m:%s", id);
    return 1;
}

/* The stored JSON of the model with this id (a new reference), or NULL. */
static json_t *http__stored_spec(http_server *s, const char *id)
{
    char *text = NULL;
    if (!s->d.st || store_get_model(s->d.st, id, &text) != 0)
        return NULL;
    json_t *spec = json_loads(text, 0, NULL);
    free(text);
    return spec;
}

/* The model with this id from the cache or the store (compiled again from its stored
 * JSON: on the offload pool when http__compile_stored_first ran before, else here).
 * Returns 0 and a new reference, HAMEL_E_NOT_FOUND, or another error + problem. */
static int http__model_by_id(http_conn *c, const char *id, engine_model **out, json_t **problem)
{
    http_server *s = c->srv;
    char key[CACHE_MAX_KEY + 1];
    *out = NULL;
    if (!http__id_key(id, key))
        return HAMEL_E_NOT_FOUND;
    *out = cache_get(s->d.models, key);
    if (*out)
        return 0;
    int rc;
    if (!http__take_compiled(c, &rc, out, problem)) {
        json_t *spec = http__stored_spec(s, id);
        if (!spec)
            return HAMEL_E_NOT_FOUND;
        rc = http__compile(s, spec, out, problem);
        json_decref(spec);
    }
    if (rc != 0)
        return rc;
    if (strcmp(engine_model_id(*out), id) != 0) { /* the canonical form changed since */
        engine_model_release(*out);
        *out = NULL;
        return HAMEL_E_NOT_FOUND;
    }
    http__model_remember(s, *out, NULL);
    return 0;
}

/* Sets c->spec_text and c->spec_key for spec (once per request). Returns 0 or -1. */
static int http__spec_key(http_conn *c, const json_t *spec)
{
    if (c->spec_text)
        return 0;
    c->spec_text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    if (!c->spec_text)
        return -1;
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)c->spec_text, strlen(c->spec_text), d);
    snprintf(c->spec_key, sizeof c->spec_key, "b:");
    http__hex(d, sizeof d, c->spec_key + 2);
    return 0;
}

/* The model of a spec object: a hit on the hash of its JSON text skips the engine;
 * otherwise it is the outcome of the request's compilation (run on the compile pool
 * before the handler, see http__compile_first) or, failing that, compiled here; if its
 * id is new it is remembered in the store. *created says whether the service had never
 * seen this model id. */
static int http__model_by_spec(http_conn *c, const json_t *spec, engine_model **out, int *created,
                               json_t **problem)
{
    http_server *s = c->srv;
    *out = NULL;
    *created = 0;
    if (http__spec_key(c, spec) != 0)
        return HAMEL_E_INTERNAL;
    *out = http__model_by_text(s, c->spec_key, 1);
    if (*out)
        return 0;
    int rc;
    if (!http__take_compiled(c, &rc, out, problem))
        rc = http__compile(s, spec, out, problem);
    if (rc != 0)
        return rc;
    char mkey[CACHE_MAX_KEY + 1];
    snprintf(mkey, sizeof mkey, "m:%s", engine_model_id(*out));
    engine_model *known = cache_peek(s->d.models, mkey);
    if (known) { /* same model, other formatting: share the compiled one */
        engine_model_release(*out);
        *out = known;
    } else if (s->d.st) {
        char *stored = NULL;
        int found = store_get_model(s->d.st, engine_model_id(*out), &stored);
        free(stored);
        if (found == 1) {
            *created = 1;
            store_put_model(s->d.st, engine_model_id(*out), c->spec_text);
        }
    } else {
        *created = 1;
    }
    http__model_remember(s, *out, c->spec_key);
    return 0;
}

/* The model a request body names with "model" or "model_id". */
static int http__model_of(http_conn *c, const json_t *body, engine_model **out, json_t **problem)
{
    const json_t *spec = json_object_get(body, "model");
    const json_t *id = json_object_get(body, "model_id");
    int created = 0;
    if (json_is_object(spec))
        return http__model_by_spec(c, spec, out, &created, problem);
    if (json_is_string(id)) {
        int rc = http__model_by_id(c, json_string_value(id), out, problem);
        if (rc == HAMEL_E_NOT_FOUND) {
            *problem = hamel_problem_new(rc, "no model has this id; POST it to /v1/models");
            hamel_problem_add(*problem, "model_id", -1, "unknown model id");
        }
        return rc;
    }
    *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
    hamel_problem_add(*problem, spec || id ? (spec ? "model" : "model_id") : "model", -1,
                      spec ? "must be an object"
                      : id ? "must be a string"
                           : "either model or model_id is required");
    return HAMEL_E_BAD_REQUEST;
}

/* ---- endpoints ---------------------------------------------------------------------- */

static enum MHD_Result http__offload(http_conn *c, void (*run)(void *),
                                     enum MHD_Result (*resume)(http_conn *));
static int http__compile_stored_first(http_conn *c, const char *id, enum MHD_Result (*resume)(http_conn *),
                                      enum MHD_Result *ret);
static enum MHD_Result http__get_model(http_conn *c, int equations);

static enum MHD_Result http__health(http_conn *c)
{
    return http__json(c, 200, json_pack("{s:s, s:s}", "status", "ok", "version", ENGINE_VERSION));
}

static enum MHD_Result http__readyz(http_conn *c)
{
    http_server *s = c->srv;
    if (atomic_load(&s->ready) && jobs_accepting(s->d.jobs))
        return http__json(c, 200, json_pack("{s:s}", "status", "ready"));
    return http__error(c, HAMEL_E_UNAVAILABLE, "not accepting work");
}

static enum MHD_Result http__metrics(http_conn *c)
{
    http_server *s = c->srv;
    metrics_gauges g = {0};
    jobs_counts(s->d.jobs, &g.queue_depth, &g.queue_capacity, &g.jobs_running, &g.jobs_kept);
    g.workers = (size_t)s->d.cfg->workers;
    cache_stats_get(s->d.models, &g.models);
    cache_stats_get(s->d.results, &g.results);
    /* The daemon from the connection: h->daemon is assigned after MHD_start_daemon returns,
     * when its threads may already be serving (ThreadSanitizer saw that race). */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_DAEMON);
    const union MHD_DaemonInfo *info =
        ci ? MHD_get_daemon_info(ci->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS) : NULL;
    g.connections = info ? (long)info->num_connections : -1;
    batches_counts(s->d.batches, &g.batches_active, &g.batches_kept, &g.batch_bytes);
    offload_counts(s->offload, &g.offload_queued, &g.offload_running);
    if (s->d.st)
        store_counts(s->d.st, &g.store_result_bytes, &g.store_results, &g.store_jobs);
    size_t len = 0;
    char *text = metrics_render(&g, &len);
    if (!text)
        return http__error(c, HAMEL_E_INTERNAL, "out of memory");
    return http__send(c, 200, http__text_response(text, len), "text/plain; version=0.0.4; charset=utf-8",
                      len);
}

static enum MHD_Result http__model_summary(http_conn *c, engine_model *m, int status)
{
    json_t *summary = engine_model_summary(m);
    char etag[CACHE_MAX_KEY + 3], location[CACHE_MAX_KEY + 16];
    snprintf(etag, sizeof etag, "\"%s\"", engine_model_id(m));
    snprintf(location, sizeof location, "/v1/models/%s", engine_model_id(m));
    const char *inm = http__header(c, MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (status == 200 && inm && !strcmp(inm, etag) && c->method != HTTP_POST) {
        json_decref(summary);
        struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        if (r)
            MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
        return http__send(c, MHD_HTTP_NOT_MODIFIED, r, NULL, 0);
    }
    if (!summary)
        return http__error(c, HAMEL_E_INTERNAL, "no summary");
    return http__json_h(c, status, summary, "application/json", MHD_HTTP_HEADER_ETAG, etag,
                        status == 201 ? MHD_HTTP_HEADER_LOCATION : NULL, location);
}

static enum MHD_Result http__post_model(http_conn *c, json_t *body)
{
    const json_t *spec = body;
    json_t *inner = json_object_get(body, "model");
    if (json_is_object(inner) && !json_object_get(body, "coordinates"))
        spec = inner; /* {"model": {...}} is accepted as well as the bare model */
    engine_model *m = NULL;
    json_t *problem = NULL;
    int created = 0;
    int rc = http__model_by_spec(c, spec, &m, &created, &problem);
    if (rc != 0)
        return http__problem(c, problem ? problem : hamel_problem_new(rc, NULL));
    enum MHD_Result ret = http__model_summary(c, m, created ? 201 : 200);
    engine_model_release(m);
    return ret;
}

static enum MHD_Result http__resume_get_model(http_conn *c)
{
    return http__get_model(c, c->route == METRICS_ROUTE_EQUATIONS);
}

static enum MHD_Result http__get_model(http_conn *c, int equations)
{
    enum MHD_Result ret;
    if (!c->pre_set && http__compile_stored_first(c, c->id, http__resume_get_model, &ret))
        return ret;
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = http__model_by_id(c, c->id, &m, &problem);
    if (rc == HAMEL_E_NOT_FOUND) {
        json_decref(problem);
        return http__error(c, rc, "no model has this id");
    }
    if (rc != 0)
        return http__problem(c, problem);
    if (!equations) {
        ret = http__model_summary(c, m, 200);
    } else {
        json_t *eq = NULL;
        const char *form = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "form");
        rc = form ? engine_equations_form(m, form, &eq, &problem) : engine_equations(m, &eq, &problem);
        ret = rc == 0 ? http__json(c, 200, eq) : http__problem(c, problem);
    }
    engine_model_release(m);
    return ret;
}

/* Offloaded: the Hamel coefficients of c->work_model at the points of c->pending. */
static void http__run_hamel(void *arg)
{
    http_conn *c = arg;
    c->work_rc = engine_hamel(c->work_model, c->pending, c->srv->d.limits, &c->out, &c->out_problem);
}

static enum MHD_Result http__resume_hamel(http_conn *c)
{
    json_t *out = c->out, *problem = c->out_problem;
    c->out = c->out_problem = NULL;
    return c->work_rc == 0 ? http__json(c, 200, out) : http__problem(c, problem);
}

static enum MHD_Result http__post_hamel(http_conn *c, json_t *body)
{
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = http__model_of(c, body, &m, &problem);
    if (rc != 0)
        return http__problem(c, problem);
    c->work_model = m;
    json_decref(c->pending);
    c->pending = json_incref(body);
    return http__offload(c, http__run_hamel, http__resume_hamel);
}

/* Offloaded: /v1/evaluate or /v1/linearize on c->work_model (engine_evaluate,
 * engine_linearize); answered like /v1/hamel. */
static void http__run_lin(void *arg)
{
    http_conn *c = arg;
    if (c->route == METRICS_ROUTE_EVALUATE)
        c->work_rc = engine_evaluate(c->work_model, c->pending, c->srv->d.limits, &c->out, &c->out_problem);
    else
        c->work_rc =
            engine_linearize(c->work_model, c->pending, c->srv->d.limits, NULL, &c->out, &c->out_problem);
}

static enum MHD_Result http__post_lin(http_conn *c, json_t *body)
{
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = http__model_of(c, body, &m, &problem);
    if (rc != 0)
        return http__problem(c, problem);
    c->work_model = m;
    json_decref(c->pending);
    c->pending = json_incref(body);
    return http__offload(c, http__run_lin, http__resume_hamel);
}

/* The body of a job that is still queued or running. */
static json_t *http__pending_doc(const job_view *v)
{
    return json_pack("{s:s, s:s, s:s, s:f}", "job_id", v->id, "status", job_state_name(v->state), "model_id",
                     v->model_id, "progress", v->progress);
}

/* Answers with the current state of c->job. `sync` is set for POST /v1/simulations:
 * a still-running job is 202 with Location; a failed one is its problem document. */
static enum MHD_Result http__job_answer(http_conn *c, job *j, int sync)
{
    job_view v;
    jobs_view_get(c->srv->d.jobs, j, &v);
    enum MHD_Result ret;
    char etag[JOB_ID_LEN + 3];
    snprintf(etag, sizeof etag, "\"%s\"", v.id);
    if (v.state == JOB_DONE && v.body) {
        ret = http__result(c, v.body, 0, etag);
    } else if ((v.state == JOB_FAILED || v.state == JOB_CANCELLED) && v.body) {
        json_t *doc = json_loadb(v.body->data, v.body->len, 0, NULL);
        json_t *problem = json_object_get(doc, "problem");
        if (sync && json_is_object(problem)) {
            json_object_set_new(problem, "job_id", json_string(v.id));
            json_object_set_new(problem, "job_status", json_string(job_state_name(v.state)));
            ret = http__problem(c, json_incref(problem));
            json_decref(doc);
        } else {
            ret = http__json(c, 200, doc);
        }
    } else {
        char location[JOB_ID_LEN + 16];
        snprintf(location, sizeof location, "/v1/jobs/%s", v.id);
        ret = sync ? http__json_h(c, 202, http__pending_doc(&v), "application/json", MHD_HTTP_HEADER_LOCATION,
                                  location, NULL, NULL)
                   : http__json(c, 200, http__pending_doc(&v));
    }
    blob_release(v.body);
    return ret;
}

/* The answer to a POST /v1/simulations without ?wait: always 202 with Location, as the
 * contract says, even when a quick job has already finished by now (the body then shows
 * the state it was accepted in: queued, progress 0); the result is at Location. */
static enum MHD_Result http__job_accepted(http_conn *c, job *j)
{
    job_view v;
    jobs_view_get(c->srv->d.jobs, j, &v);
    blob_release(v.body);
    v.body = NULL;
    if (v.state != JOB_QUEUED && v.state != JOB_RUNNING) {
        v.state = JOB_QUEUED;
        v.progress = 0;
    }
    char location[JOB_ID_LEN + 16];
    snprintf(location, sizeof location, "/v1/jobs/%s", v.id);
    return http__json_h(c, 202, http__pending_doc(&v), "application/json", MHD_HTTP_HEADER_LOCATION, location,
                        NULL, NULL);
}

static void http__wake(void *arg)
{
    http_conn *c = arg;
    atomic_store(&c->resumed, 1);
    MHD_resume_connection(c->conn);
}

/* Parks the connection on c->job until it finishes or `wait` seconds pass. */
static enum MHD_Result http__park(http_conn *c, double wait)
{
    c->waiter.wake = http__wake;
    c->waiter.arg = c;
    c->waiter.deadline = jobs_now() + wait;
    MHD_suspend_connection(c->conn);
    c->suspended = 1;
    if (jobs_wait(c->srv->d.jobs, c->job, &c->waiter) != 0)
        http__wake(c); /* already finished: resume at once */
    return MHD_YES;
}

static enum MHD_Result http__post_simulation(http_conn *c, json_t *body)
{
    http_server *s = c->srv;
    double wait = http__wait(c);
    if (wait < 0)
        return http__bad_wait(c);
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = http__model_of(c, body, &m, &problem);
    if (rc != 0)
        return http__problem(c, problem);
    char key[80];
    rc = engine_simulation_key(m, body, key, &problem);
    if (rc != 0) {
        engine_model_release(m);
        return http__problem(c, problem);
    }
    http__memo_put(c, key);
    char etag[sizeof key + 2];
    snprintf(etag, sizeof etag, "\"%s\"", key);
    blob *hit = cache_get(s->d.results, key);
    if (!hit && s->d.st && store_get_result(s->d.st, key, &hit) == 0)
        cache_put(s->d.results, key, hit, hit->len);
    if (hit) {
        engine_model_release(m);
        metrics_job(METRICS_JOB_CACHED);
        enum MHD_Result ret = http__result(c, hit, 1, etag);
        blob_release(hit);
        return ret;
    }
    /* A cache hit was valid when it was computed; anything else is checked here, so a
     * bad initial state or an unusable formulation is a 4xx now, not a failed job. */
    rc = engine_simulation_check(m, body, s->d.limits, &problem);
    if (rc != 0) {
        engine_model_release(m);
        return http__problem(c, problem ? problem : hamel_problem_new(rc, NULL));
    }
    job *j = NULL;
    rc = jobs_submit(s->d.jobs, m, body, key, &j);
    engine_model_release(m);
    if (rc != 0) {
        if (rc == HAMEL_E_QUEUE_FULL)
            metrics_job(METRICS_JOB_REJECTED);
        /* Not shutting down: the shared queue (HAMEL_REDIS) is out of reach for now. */
        const char *lost = rc == HAMEL_E_UNAVAILABLE && jobs_accepting(s->d.jobs)
                               ? "the shared store and queue (HAMEL_REDIS) cannot be reached; try again"
                               : NULL;
        return http__problem_h(c, hamel_problem_new(rc, lost), MHD_HTTP_HEADER_RETRY_AFTER,
                               rc == HAMEL_E_QUEUE_FULL || lost ? HTTP_RETRY_AFTER_FULL
                                                                : HTTP_RETRY_AFTER_DOWN);
    }
    c->job = j;
    if (wait > 0)
        return http__park(c, wait);
    return http__job_accepted(c, j);
}

/* A job that is only in the store (evicted from memory, or from before a restart). */
static enum MHD_Result http__stored_job(http_conn *c)
{
    store *st = c->srv->d.st;
    store_job sj;
    int rc = st ? store_get_job(st, c->id, &sj) : 1;
    if (rc < 0) /* the shared store (HAMEL_REDIS) is out of reach */
        return http__problem_h(
            c, hamel_problem_new(HAMEL_E_UNAVAILABLE, "the store cannot be reached; try again"),
            MHD_HTTP_HEADER_RETRY_AFTER, HTTP_RETRY_AFTER_FULL);
    if (rc != 0)
        return http__error(c, HAMEL_E_NOT_FOUND, "no job has this id");
    enum MHD_Result ret;
    if (c->method == HTTP_DELETE) {
        ret = !strcmp(sj.status, "cancelled")
                  ? http__json(c, 200, sj.doc ? json_loads(sj.doc, 0, NULL) : NULL)
                  : http__error(c, HAMEL_E_CONFLICT, "the job has already finished");
    } else if (!strcmp(sj.status, "done") && sj.key) {
        blob *b = NULL;
        int got = store_get_result(st, sj.key, &b);
        if (got == 1) {
            ret = http__error(c, HAMEL_E_GONE,
                              "the job finished, but its result was dropped to keep the store within "
                              "HAMEL_STORE_BYTES; POST the same request again to compute it");
        } else if (got != 0) {
            ret = http__error(c, HAMEL_E_INTERNAL, "the job's result could not be read from the store");
        } else {
            json_t *doc = json_loadb(b->data, b->len, 0, NULL);
            json_t *jid = json_object_get(doc, "job_id");
            if (doc && (!json_is_string(jid) || strcmp(json_string_value(jid), c->id) != 0)) {
                /* the result row was written by an identical job: answer as this one */
                json_object_set_new(doc, "job_id", json_string(c->id));
                blob_release(b);
                b = blob_take(jsonout_dumps(doc, NULL));
            }
            json_decref(doc);
            char etag[HTTP_ID_MAX + 3];
            snprintf(etag, sizeof etag, "\"%s\"", c->id);
            ret = b ? http__result(c, b, 0, etag) : http__error(c, HAMEL_E_INTERNAL, NULL);
            blob_release(b);
        }
    } else if (sj.doc) {
        ret = http__json(c, 200, json_loads(sj.doc, 0, NULL));
    } else {
        ret = http__json(
            c, 200,
            json_pack("{s:s, s:s, s:s?}", "job_id", c->id, "status", sj.status, "model_id", sj.model_id));
    }
    store_job_clear(&sj);
    return ret;
}

static enum MHD_Result http__job(http_conn *c)
{
    jobs *p = c->srv->d.jobs;
    job *j = jobs_find(p, c->id);
    if (!j)
        return http__stored_job(c);
    if (c->method == HTTP_DELETE) {
        int rc = jobs_cancel(p, j);
        enum MHD_Result ret =
            rc == 0 ? http__job_answer(c, j, 0) : http__error(c, rc, "the job has already finished");
        job_release(p, j);
        return ret;
    }
    double wait = http__wait(c);
    if (wait < 0) {
        job_release(p, j);
        return http__bad_wait(c);
    }
    c->job = j;
    if (wait > 0)
        return http__park(c, wait);
    return http__job_answer(c, j, 0);
}

/* ---- batches ----------------------------------------------------------------------- */

/* A streamed batch: the content reader's state, freed by MHD through http__stream_free. */
typedef struct http_stream {
    http_server *srv;
    struct MHD_Connection *conn;
    batch *b;
    batch_cursor cur;
    batch_waiter w;
} http_stream;

static void http__stream_wake(void *arg)
{
    http_stream *st = arg;
    MHD_resume_connection(st->conn);
}

/* MHD's content reader for an NDJSON stream. With MHD_USE_EPOLL_INTERNAL_THREAD a reader
 * that returns 0 is called again at once (MHD's documentation: 0 is only for use with
 * MHD_suspend_connection, else it busy-waits), and blocking here would stall every
 * connection of this poll thread. So when no line is ready the reader suspends its
 * connection (allowed from a content reader; it takes effect when we return) and parks
 * a waiter on the batch; the batch's wake (a worker finishing a run, or shutdown) resumes
 * it and MHD calls the reader again. The suspend comes before the park, so a resume can
 * never precede its suspend; when a line arrived in between, park refuses and we resume
 * at once. Lines are copied in pieces of at most `max` bytes (MHD's buffer, bounded by
 * HTTP_STREAM_BLOCK), so a line of any size streams through a fixed buffer. */
static ssize_t http__stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    http_stream *st = cls;
    batches *bs = st->srv->d.batches;
    ssize_t n = batch_read(bs, st->b, &st->cur, buf, max);
    if (n < 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (n > 0)
        return n;
    MHD_suspend_connection(st->conn);
    if (batch_stream_park(bs, st->b, &st->cur, &st->w) != 0)
        MHD_resume_connection(st->conn);
    return 0;
}

static void http__stream_free(void *cls)
{
    http_stream *st = cls;
    batches *bs = st->srv->d.batches;
    batch_unpark(bs, &st->w);
    batch_release(bs, st->b);
    atomic_fetch_sub(&st->srv->streams, 1);
    free(st);
}

/* The value of a flag in the query string: ?name, ?name=1 or ?name=true. */
static int http__flag(http_conn *c, const char *name)
{
    const char *v = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, name);
    if (!v)
        return 0;
    return !*v || !strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes");
}

/* Whether the client asked for NDJSON: Accept: application/x-ndjson (or
 * application/ndjson), or ?stream=1. */
static int http__wants_stream(http_conn *c)
{
    const char *accept = http__header(c, MHD_HTTP_HEADER_ACCEPT);
    if (accept && (strcasestr(accept, HTTP_NDJSON) || strcasestr(accept, "application/ndjson")))
        return 1;
    return http__flag(c, "stream");
}

/* Streams b's lines (completion order) as chunked NDJSON; takes the reference on b. */
static enum MHD_Result http__batch_stream(http_conn *c, batch *b)
{
    http_stream *st = calloc(1, sizeof *st);
    if (!st) {
        batch_release(c->srv->d.batches, b);
        return http__error(c, HAMEL_E_INTERNAL, "out of memory");
    }
    st->srv = c->srv;
    st->conn = c->conn;
    st->b = b;
    atomic_fetch_add(&c->srv->streams, 1);
    st->cur.summary = http__flag(c, "summary");
    st->w.wake = http__stream_wake;
    st->w.arg = st;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, HTTP_STREAM_BLOCK,
                                                               http__stream_read, st, http__stream_free);
    if (!r) {
        http__stream_free(st);
        return MHD_NO;
    }
    char location[BATCH_ID_LEN + 16];
    snprintf(location, sizeof location, "/v1/batches/%s", batch_id(b));
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, location);
    MHD_add_response_header(r, "X-Batch-Id", batch_id(b));
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no"); /* proxies: pass lines on at once */
    return http__send(c, MHD_HTTP_OK, r, HTTP_NDJSON, 0);
}

/* Answers with c->batch's status document. `sync` (POST): unfinished is 202, and the
 * answer carries Location. A finished batch carries "results" unless `bare`. */
static enum MHD_Result http__batch_answer(http_conn *c, int sync, int bare)
{
    batches *bs = c->srv->d.batches;
    batch *b = c->batch;
    int done = batch_finished(bs, b);
    size_t len = 0;
    char *text = batch_render(bs, b, !bare, &len);
    if (!text)
        return http__error(c, HAMEL_E_INTERNAL, "out of memory");
    struct MHD_Response *r = http__text_response(text, len);
    char location[BATCH_ID_LEN + 16];
    snprintf(location, sizeof location, "/v1/batches/%s", batch_id(b));
    if (r && sync)
        MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, location);
    return http__send(c, sync && !done ? MHD_HTTP_ACCEPTED : MHD_HTTP_OK, r, "application/json", len);
}

/* Parks the connection on c->batch until it finishes or `wait` seconds pass. */
static enum MHD_Result http__park_batch(http_conn *c, double wait)
{
    c->bwaiter.wake = http__wake;
    c->bwaiter.arg = c;
    c->bwaiter.deadline = jobs_now() + wait;
    MHD_suspend_connection(c->conn);
    c->suspended = 1;
    if (batch_wait(c->srv->d.batches, c->batch, &c->bwaiter) != 0)
        http__wake(c); /* already finished: resume at once */
    return MHD_YES;
}

static enum MHD_Result http__post_batch(http_conn *c, json_t *body)
{
    http_server *s = c->srv;
    int stream = http__wants_stream(c);
    double wait = http__wait(c);
    if (wait < 0)
        return http__bad_wait(c);
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = http__model_of(c, body, &m, &problem);
    if (rc != 0) {
        metrics_batch(METRICS_BATCH_INVALID);
        return http__problem(c, problem);
    }
    batch *b = NULL;
    rc = batch_create(s->d.batches, m, body, &b, &problem);
    engine_model_release(m);
    if (rc != 0)
        return rc == HAMEL_E_UNAVAILABLE
                   ? http__problem_h(c, problem, MHD_HTTP_HEADER_RETRY_AFTER, HTTP_RETRY_AFTER_DOWN)
                   : http__problem(c, problem);
    if (stream)
        return http__batch_stream(c, b);
    c->batch = b;
    if (wait > 0)
        return http__park_batch(c, wait);
    return http__batch_answer(c, 1, 0);
}

static enum MHD_Result http__batch(http_conn *c)
{
    batches *bs = c->srv->d.batches;
    batch *b = batches_find(bs, c->id);
    if (!b)
        return http__error(c, HAMEL_E_NOT_FOUND, "no batch has this id (batches are kept in memory only)");
    if (c->method == HTTP_DELETE) {
        c->batch = b;
        int rc = batch_cancel(bs, b);
        return rc == 0 ? http__batch_answer(c, 0, 1) : http__error(c, rc, "the batch has already finished");
    }
    if (http__wants_stream(c))
        return http__batch_stream(c, b);
    c->batch = b;
    double wait = http__wait(c);
    if (wait < 0)
        return http__bad_wait(c);
    if (wait > 0)
        return http__park_batch(c, wait);
    return http__batch_answer(c, 0, 0);
}

static const char *http__mime(const char *path)
{
    static const char *const map[][2] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".wasm", "application/wasm"},
        {".map", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof map / sizeof map[0]; i++)
        if (!strcasecmp(dot, map[i][0]))
            return map[i][1];
    return "application/octet-stream";
}

/* Whether the file open on fd lies under directory root once every symbolic link is
 * resolved: the path the kernel opened (/proc/self/fd) against realpath(root). Checking
 * the opened file, not the name, leaves no window for a link swapped in between. */
static int http__inside(const char *root, int fd)
{
    char base[PATH_MAX], link[64], got[PATH_MAX];
    if (!realpath(root, base))
        return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, got, sizeof got - 1);
    if (n <= 0)
        return 0;
    got[n] = '\0';
    size_t b = strlen(base);
    if (b == 1) /* root is "/" */
        return 1;
    return strncmp(got, base, b) == 0 && got[b] == '/';
}

static enum MHD_Result http__static(http_conn *c, const char *url)
{
    const char *root = c->srv->d.cfg->statics;
    if (!root[0]) {
        if (!strcmp(url, "/"))
            return http__json(c, 200,
                              json_pack("{s:s, s:s, s:[s,s,s,s,s,s,s,s]}", "service", "hamel", "version",
                                        ENGINE_VERSION, "endpoints", "/v1/health", "/v1/models", "/v1/hamel",
                                        "/v1/simulations", "/v1/jobs/{id}", "/v1/batches", "/metrics",
                                        "/readyz"));
        return http__error(c, HAMEL_E_NOT_FOUND, NULL);
    }
    char rel[CONFIG_PATH_MAX];
    const char *u = !strcmp(url, "/") ? "/index.html" : url;
    if (strstr(u, "..") || strlen(u) >= sizeof rel)
        return http__error(c, HAMEL_E_NOT_FOUND, NULL);
    snprintf(rel, sizeof rel, "%s", u);
    char full[2 * CONFIG_PATH_MAX + 2];
    snprintf(full, sizeof full, "%s%s", root, rel);
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && !http__inside(root, fd)) { /* a symbolic link out of HAMEL_STATIC */
        close(fd);
        fd = -1;
    }
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return http__error(c, HAMEL_E_NOT_FOUND, NULL);
    }
    struct MHD_Response *r = MHD_create_response_from_fd((size_t)st.st_size, fd);
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    return http__send(c, 200, r, http__mime(rel), (size_t)st.st_size);
}

/* ---- routing ------------------------------------------------------------------------ */

typedef struct http_route_match {
    metrics_route route;
    const char *allow; /* methods, for 405 and preflight */
} http_route_match;

/* Matches a path to a route and fills c->id. Returns 0, or -1 for an unknown or
 * malformed /v1 path. */
static int http__match(http_conn *c, const char *url, http_route_match *m)
{
    static const char models[] = "/v1/models/", jobs_[] = "/v1/jobs/", batches_[] = "/v1/batches/";
    m->allow = "GET, HEAD, OPTIONS";
    if (!strcmp(url, "/v1/health")) {
        m->route = METRICS_ROUTE_HEALTH;
    } else if (!strcmp(url, "/v1/models")) {
        m->route = METRICS_ROUTE_MODELS;
        m->allow = "POST, OPTIONS";
    } else if (!strcmp(url, "/v1/hamel")) {
        m->route = METRICS_ROUTE_HAMEL;
        m->allow = "POST, OPTIONS";
    } else if (!strcmp(url, "/v1/evaluate") || !strcmp(url, "/v1/linearize")) {
        m->route = url[4] == 'e' ? METRICS_ROUTE_EVALUATE : METRICS_ROUTE_LINEARIZE;
        m->allow = "POST, OPTIONS";
    } else if (!strcmp(url, "/v1/simulations")) {
        m->route = METRICS_ROUTE_SIMULATIONS;
        m->allow = "POST, OPTIONS";
    } else if (!strcmp(url, "/v1/batches")) {
        m->route = METRICS_ROUTE_BATCHES;
        m->allow = "POST, OPTIONS";
    } else if (!strncmp(url, batches_, sizeof batches_ - 1)) {
        const char *id = url + sizeof batches_ - 1;
        if (!*id || strchr(id, '/') || http__decode(id, strlen(id), c->id, sizeof c->id) != 0)
            return -1;
        m->route = METRICS_ROUTE_BATCH;
        m->allow = "GET, HEAD, DELETE, OPTIONS";
    } else if (!strncmp(url, models, sizeof models - 1)) {
        const char *id = url + sizeof models - 1;
        const char *slash = strchr(id, '/');
        size_t n = slash ? (size_t)(slash - id) : strlen(id);
        if (slash && strcmp(slash, "/equations") != 0)
            return -1;
        if (n == 0 || http__decode(id, n, c->id, sizeof c->id) != 0)
            return -1;
        m->route = slash ? METRICS_ROUTE_EQUATIONS : METRICS_ROUTE_MODEL;
    } else if (!strncmp(url, jobs_, sizeof jobs_ - 1)) {
        const char *id = url + sizeof jobs_ - 1;
        if (!*id || strchr(id, '/') || http__decode(id, strlen(id), c->id, sizeof c->id) != 0)
            return -1;
        m->route = METRICS_ROUTE_JOB;
        m->allow = "GET, HEAD, DELETE, OPTIONS";
    } else if (!strcmp(url, "/metrics")) {
        m->route = METRICS_ROUTE_METRICS;
    } else if (!strcmp(url, "/livez")) {
        m->route = METRICS_ROUTE_LIVEZ;
    } else if (!strcmp(url, "/readyz")) {
        m->route = METRICS_ROUTE_READYZ;
    } else if (!strncmp(url, "/v1/", 4) || !strcmp(url, "/v1")) {
        return -1;
    } else {
        m->route = METRICS_ROUTE_STATIC;
    }
    return 0;
}

static int http__allows(const char *allow, http_method m)
{
    static const char *const names[] = {"GET", "HEAD", "POST", "DELETE", "OPTIONS"};
    if (m == HTTP_OTHER)
        return 0;
    const char *p = strstr(allow, names[m]);
    return p != NULL;
}

static enum MHD_Result http__preflight(http_conn *c, const char *allow)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", allow);
    const char *req = http__header(c, "Access-Control-Request-Headers");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            req && strlen(req) < 512 ? req : "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", HTTP_CORS_MAX_AGE);
    return http__send(c, MHD_HTTP_NO_CONTENT, r, NULL, 0);
}

/* Everything that can be answered from the headers alone; returns 1 if it answered. */
static int http__headers(http_conn *c, const char *url, enum MHD_Result *ret)
{
    http_route_match m;
    if (http__match(c, url, &m) != 0) {
        c->route = METRICS_ROUTE_OTHER;
        *ret = c->method == HTTP_OPTIONS ? http__preflight(c, "GET, POST, DELETE, OPTIONS")
                                         : http__error(c, HAMEL_E_NOT_FOUND, NULL);
        return 1;
    }
    c->route = m.route;
    if (c->method == HTTP_OPTIONS) {
        *ret = http__preflight(c, m.allow);
        return 1;
    }
    if (m.route == METRICS_ROUTE_STATIC && c->method != HTTP_GET && c->method != HTTP_HEAD)
        m.allow = "GET, HEAD, OPTIONS";
    if (!strncmp(url, "/v1/", 4) && !http__token_ok(c)) {
        *ret = http__problem_h(c, hamel_problem_new(HAMEL_E_UNAUTHORIZED, NULL),
                               MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"hamel\"");
        return 1;
    }
    if (!http__allows(m.allow, c->method)) {
        char detail[96];
        snprintf(detail, sizeof detail, "allowed: %s", m.allow);
        *ret = http__problem_h(c, hamel_problem_new(HAMEL_E_METHOD, detail), MHD_HTTP_HEADER_ALLOW, m.allow);
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
    switch (m.route) {
    case METRICS_ROUTE_HEALTH: *ret = http__health(c); break;
    case METRICS_ROUTE_LIVEZ: *ret = http__json(c, 200, json_pack("{s:s}", "status", "alive")); break;
    case METRICS_ROUTE_READYZ: *ret = http__readyz(c); break;
    case METRICS_ROUTE_METRICS: *ret = http__metrics(c); break;
    case METRICS_ROUTE_MODEL: *ret = http__get_model(c, 0); break;
    case METRICS_ROUTE_EQUATIONS: *ret = http__get_model(c, 1); break;
    case METRICS_ROUTE_JOB: *ret = http__job(c); break;
    case METRICS_ROUTE_BATCH: *ret = http__batch(c); break;
    default: *ret = http__static(c, url); break;
    }
    return 1;
}

/* A parsed POST body (a JSON object) to its route's handler. */
static enum MHD_Result http__dispatch(http_conn *c, json_t *body)
{
    switch (c->route) {
    case METRICS_ROUTE_MODELS: return http__post_model(c, body);
    case METRICS_ROUTE_HAMEL: return http__post_hamel(c, body);
    case METRICS_ROUTE_EVALUATE:
    case METRICS_ROUTE_LINEARIZE: return http__post_lin(c, body);
    case METRICS_ROUTE_BATCHES: return http__post_batch(c, body);
    default: return http__post_simulation(c, body);
    }
}

/* The model spec object a POST body carries, or NULL (a model_id, or nothing). */
static const json_t *http__spec_of(const http_conn *c, const json_t *body)
{
    const json_t *inner = json_object_get(body, "model");
    if (c->route == METRICS_ROUTE_MODELS)
        return json_is_object(inner) && !json_object_get(body, "coordinates") ? inner : body;
    return json_is_object(inner) ? inner : NULL;
}

static void http__offloaded(void *arg, int ran)
{
    http_conn *c = arg;
    c->ran = ran;
    atomic_store(&c->resumed, 1);
    MHD_resume_connection(c->conn);
}

/* Suspends the connection and runs run(c) on the offload pool, then done(c, ran) (which
 * must end in http__offloaded); the resumed call answers with resume(c). Past the queue
 * (or while stopping) the answer is a 503. */
static enum MHD_Result http__offload_with(http_conn *c, void (*run)(void *), void (*done)(void *, int),
                                          enum MHD_Result (*resume)(http_conn *))
{
    c->on_resume = resume;
    c->ran = 0;
    /* Suspend first: the pool may finish (and resume) before offload_submit returns. */
    MHD_suspend_connection(c->conn);
    c->suspended = 1;
    c->off_rc = offload_submit(c->srv->offload, run, done, c);
    if (c->off_rc != 0) /* not queued: the refusal is answered on the resumed call */
        done(c, 0);
    return MHD_YES;
}

static enum MHD_Result http__offload(http_conn *c, void (*run)(void *),
                                     enum MHD_Result (*resume)(http_conn *))
{
    return http__offload_with(c, run, http__offloaded, resume);
}

/* The resumed call of an offloaded request. */
static enum MHD_Result http__resume_offloaded(http_conn *c)
{
    enum MHD_Result (*resume)(http_conn *) = c->on_resume;
    c->on_resume = NULL;
    if (c->ran)
        return resume(c);
    int rc = c->off_rc ? c->off_rc : HAMEL_E_UNAVAILABLE;
    return http__problem_h(c, hamel_problem_new(rc, "no thread is free for this request; retry"),
                           MHD_HTTP_HEADER_RETRY_AFTER,
                           rc == HAMEL_E_QUEUE_FULL ? HTTP_RETRY_AFTER_FULL : HTTP_RETRY_AFTER_DOWN);
}

/* Offloaded: compile the model of c->pending. */
static void http__run_compile(void *arg)
{
    http_conn *c = arg;
    double t0 = jobs_now();
    const json_t *spec = c->stored_spec ? c->stored_spec : http__spec_of(c, c->pending);
    /* The connection is suspended: MHD does not see a hang-up, the watcher does. */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    atomic_store(&c->compile_ctl.cancel, 0);
    hangup_watch(c->srv->hangups, &c->hup, ci ? (int)ci->connect_fd : -1, &c->compile_ctl.cancel);
    c->pre_rc =
        engine_model_compile_ctl(spec, c->srv->d.limits, &c->compile_ctl, &c->pre_model, &c->pre_problem);
    hangup_forget(c->srv->hangups, &c->hup);
    c->pre_set = 1;
    metrics_derive(jobs_now() - t0);
    if (c->pre_rc == HAMEL_E_COMPILE_LIMIT)
        metrics_compile_stopped(METRICS_COMPILE_LIMIT);
    else if (c->pre_rc == HAMEL_E_CANCELLED)
        metrics_compile_stopped(atomic_load(&c->hup.why) == HANGUP_SHUTDOWN ? METRICS_COMPILE_SHUTDOWN
                                                                            : METRICS_COMPILE_CLIENT_GONE);
}

/* A copy of a finished flight's outcome for request w. Called with flights_mu held. */
static void http__flight_copy(const http_flight *f, http_conn *w)
{
    w->pre_set = 1;
    w->pre_rc = f->rc;
    w->pre_model = engine_model_retain(f->model);
    w->pre_problem = f->problem ? json_deep_copy(f->problem) : NULL;
}

/* Unlists and frees c's flight (once the model is cached, or c is gone). */
static void http__flight_end(http_conn *c)
{
    http_server *s = c->srv;
    http_flight *f = c->flight;
    if (!f)
        return;
    c->flight = NULL;
    pthread_mutex_lock(&s->flights_mu);
    http_flight **pp = &s->flights;
    while (*pp && *pp != f)
        pp = &(*pp)->next;
    if (*pp)
        *pp = f->next;
    http_conn *w = f->waiters; /* none unless it never ran */
    f->waiters = NULL;
    pthread_mutex_unlock(&s->flights_mu);
    while (w) {
        http_conn *next = w->next_waiter;
        w->next_waiter = NULL;
        w->off_rc = c->off_rc ? c->off_rc : HAMEL_E_UNAVAILABLE; /* the owner's refusal */
        http__offloaded(w, 0);
        w = next;
    }
    if (f->model)
        engine_model_release(f->model);
    json_decref(f->problem);
    free(f);
}

/* The end of the owner's compilation: the flight keeps the outcome, every request that
 * waited on it gets a copy and is resumed, then the owner. A task that never ran (queue
 * full, shutting down) ends its flight at once, refusing the waiters too, so that no
 * connection stays suspended on it. */
static void http__compile_done(void *arg, int ran)
{
    http_conn *c = arg;
    http_server *s = c->srv;
    http_flight *f = c->flight;
    http_conn *w = NULL;
    if (f && !ran)
        http__flight_end(c);
    if (f && ran) {
        pthread_mutex_lock(&s->flights_mu);
        f->finished = 1;
        f->rc = c->pre_rc;
        f->model = engine_model_retain(c->pre_model);
        f->problem = c->pre_problem ? json_deep_copy(c->pre_problem) : NULL;
        for (http_conn *x = f->waiters; x; x = x->next_waiter)
            http__flight_copy(f, x);
        w = f->waiters;
        f->waiters = NULL;
        pthread_mutex_unlock(&s->flights_mu);
    }
    while (w) {
        http_conn *next = w->next_waiter; /* w may be gone once resumed */
        w->next_waiter = NULL;
        http__offloaded(w, 1);
        w = next;
    }
    http__offloaded(c, ran);
}

static enum MHD_Result http__resume_compiled(http_conn *c)
{
    json_t *body = c->pending;
    c->pending = NULL;
    enum MHD_Result ret = http__dispatch(c, body);
    json_decref(body);
    http__flight_end(c); /* the model is in the cache now */
    return ret;
}

/* When the model with this id is not in the cache but in the store (after a restart,
 * or evicted), compiles its stored JSON on the offload pool and answers with resume(c)
 * when that ends (returns 1 with *ret). Returns 0 to go on now. */
static int http__compile_stored_first(http_conn *c, const char *id, enum MHD_Result (*resume)(http_conn *),
                                      enum MHD_Result *ret)
{
    char key[CACHE_MAX_KEY + 1];
    if (!id || !http__id_key(id, key))
        return 0;
    engine_model *hit = cache_peek(c->srv->d.models, key);
    if (hit) {
        engine_model_release(hit);
        return 0;
    }
    c->stored_spec = http__stored_spec(c->srv, id);
    if (!c->stored_spec)
        return 0;
    *ret = http__offload(c, http__run_compile, resume);
    return 1;
}

/* When the body's model is not in the cache, compiles it (or, for a model_id, its stored
 * JSON) on the offload pool and dispatches the body when that ends (returns 1 with
 * *ret). Returns 0 to dispatch now: a cached model, an unknown id, or no model. */
static int http__compile_first(http_conn *c, json_t *body, enum MHD_Result *ret)
{
    const json_t *spec = http__spec_of(c, body);
    if (!spec) {
        c->pending = json_incref(body);
        if (http__compile_stored_first(c, json_string_value(json_object_get(body, "model_id")),
                                       http__resume_compiled, ret))
            return 1;
        json_decref(c->pending);
        c->pending = NULL;
        return 0;
    }
    if (http__spec_key(c, spec) != 0)
        return 0;
    http_server *s = c->srv;
    engine_model *hit = http__model_by_text(s, c->spec_key, 0);
    if (hit) {
        engine_model_release(hit);
        return 0;
    }
    c->pending = json_incref(body);
    *ret = MHD_YES;
    pthread_mutex_lock(&s->flights_mu);
    http_flight *f = s->flights;
    while (f && strcmp(f->key, c->spec_key) != 0)
        f = f->next;
    if (f && f->finished) { /* compiled, not yet cached: take the outcome and go on */
        http__flight_copy(f, c);
        pthread_mutex_unlock(&s->flights_mu);
        json_decref(c->pending);
        c->pending = NULL;
        return 0;
    }
    if (f) { /* being compiled: wait for it (suspended under the lock, so not yet resumable) */
        c->on_resume = http__resume_compiled;
        c->ran = 0;
        MHD_suspend_connection(c->conn);
        c->suspended = 1;
        c->next_waiter = f->waiters;
        f->waiters = c;
        pthread_mutex_unlock(&s->flights_mu);
        return 1;
    }
    f = calloc(1, sizeof *f);
    if (f) {
        snprintf(f->key, sizeof f->key, "%s", c->spec_key);
        f->next = s->flights;
        s->flights = f;
        c->flight = f;
    }
    pthread_mutex_unlock(&s->flights_mu);
    *ret = http__offload_with(c, http__run_compile, http__compile_done, http__resume_compiled);
    return 1;
}

/* The whole body has arrived: parse and dispatch. */
static enum MHD_Result http__body(http_conn *c)
{
    const server_config *cfg = c->srv->d.cfg;
    if (c->too_big) {
        char detail[96];
        snprintf(detail, sizeof detail, "the body is larger than %zu bytes", cfg->max_body);
        return http__error(c, HAMEL_E_TOO_LARGE, detail);
    }
    if (c->len == 0)
        return http__error(c, HAMEL_E_BAD_JSON, "the body is empty");
    enum MHD_Result fast;
    if (c->route == METRICS_ROUTE_SIMULATIONS && http__wait(c) >= 0 && http__simulation_memo(c, &fast))
        return fast;
    if (!http__depth_ok(c->body, c->len, HTTP_MAX_JSON_DEPTH)) {
        char detail[96];
        snprintf(detail, sizeof detail, "the body nests deeper than %d levels", HTTP_MAX_JSON_DEPTH);
        return http__error(c, HAMEL_E_BAD_JSON, detail);
    }
    json_error_t err;
    json_t *body = json_loadb(c->body, c->len, JSON_REJECT_DUPLICATES, &err);
    if (!body) {
        json_t *p = hamel_problem_new(HAMEL_E_BAD_JSON, NULL);
        hamel_problem_add(p, "", err.column, err.text);
        json_object_set_new(p, "line", json_integer(err.line));
        json_object_set_new(p, "position", json_integer(err.position));
        return http__problem(c, p);
    }
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

static enum MHD_Result http__access(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version, const char *upload_data,
                                    size_t *upload_data_size, void **req_cls)
{
    (void)version;
    http_server *s = cls;
    http_conn *c = *req_cls;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c)
            return MHD_NO;
        *req_cls = c;
        c->srv = s;
        c->conn = conn;
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
    if (c->suspended) { /* resumed: finished, past the deadline or shutting down */
        c->suspended = 0;
        if (c->on_resume)
            return http__resume_offloaded(c);
        if (c->batch)
            return http__batch_answer(c, c->route == METRICS_ROUTE_BATCHES, 0);
        return http__job_answer(c, c->job, c->route == METRICS_ROUTE_SIMULATIONS);
    }
    if (c->answered || (c->method != HTTP_POST && *upload_data_size)) {
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
        if (c->too_big || c->len + n > cap) {
            c->too_big = 1;
            c->drained += n;
            return c->drained > cap * HTTP_DRAIN_FACTOR ? MHD_NO : MHD_YES;
        }
        if (c->len + n > c->cap) {
            size_t ncap = c->cap ? c->cap : 4096;
            while (ncap < c->len + n)
                ncap *= 2;
            if (ncap > cap)
                ncap = cap;
            char *b = realloc(c->body, ncap);
            if (!b)
                return MHD_NO;
            c->body = b;
            c->cap = ncap;
        }
        memcpy(c->body + c->len, upload_data, n);
        c->len += n;
        return MHD_YES;
    }
    return http__body(c);
}

static void http__completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                            enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    http_server *s = cls;
    http_conn *c = *req_cls;
    if (!c)
        return;
    *req_cls = NULL;
    double secs = jobs_now() - c->t0;
    int status = c->answered ? c->status : 499; /* closed before an answer */
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !c->answered)
        status = 499;
    metrics_request(c->route, status, secs);
    if (s->d.cfg->access_log)
        fprintf(stderr, "%s %s %d %zu %.3f\n", c->method_name, c->path, status, c->bytes, secs * 1e3);
    if (c->job)
        job_release(s->d.jobs, c->job);
    if (c->batch) {
        batch_unpark(s->d.batches, &c->bwaiter);
        batch_release(s->d.batches, c->batch);
    }
    http__flight_end(c); /* an owner that ended before its model was cached */
    json_decref(c->pending);
    json_decref(c->stored_spec);
    json_decref(c->out);
    json_decref(c->out_problem);
    if (c->work_model)
        engine_model_release(c->work_model);
    json_decref(c->pre_problem);
    if (c->pre_model)
        engine_model_release(c->pre_model);
    free(c->spec_text);
    free(c->body);
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
    h->offload = offload_new(cfg->http_threads, HTTP_OFFLOAD_QUEUE);
    h->hangups = hangup_new();
    pthread_mutex_init(&h->flights_mu, NULL);
    if (!h->memo || !h->offload || !h->hangups)
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
        MHD_OPTION_NOTIFY_COMPLETED, http__completed, h, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
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
    hangup_free(h->hangups);
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
    offload_stop(h->offload);
    MHD_stop_daemon(h->daemon);
    offload_free(h->offload);
    hangup_free(h->hangups);
    pthread_mutex_destroy(&h->flights_mu);
    cache_free(h->memo);
    free(h);
}
