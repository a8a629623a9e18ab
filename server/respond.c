/* respond.c — responses: how every answer of the HTTP face is queued.
 *
 * Owns the common headers (CORS, Content-Type), JSON bodies, problem documents (RFC 9457:
 * status from the document, "instance" = the request path, Retry-After for a 503), and the
 * zero-copy answer of a stored result blob ({"cached":...} + the blob, with ETag and
 * 304 on If-None-Match), the content coding of large answers (gzip when Accept-Encoding
 * allows it: a result's deflated form made once and kept with it, under its own ETag,
 * the identity one + "-gzip"; a batch document deflated per answer) and conditional
 * answers (If-None-Match with weak tags, lists and "*"). Every answer records its status
 * and size on the http_conn for the access log and metrics.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob.h"
#include "gzip.h"
#include "http_conn.h"
#include "jsonout.h"
#include "negotiate.h"

/* A result larger than this that has no gzip form yet is deflated on the offload pool
 * (about 10 ms a megabyte at GZIP_LEVEL); smaller ones on the poll thread, once. */
#define HTTP_GZIP_INLINE_MAX ((size_t)1 << 20)

#define HTTP_EXPOSE_HEADERS "Location, ETag, Retry-After"

const char *http__header(http_conn *c, const char *name)
{
    return MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, name);
}

static void http__expose(struct MHD_Response *r)
{
    MHD_add_response_header(r, "Access-Control-Expose-Headers", HTTP_EXPOSE_HEADERS);
}

static void http__cors(http_conn *c, struct MHD_Response *r)
{
    const server_config *cfg = c->srv->d.cfg;
    const char *origin = http__header(c, "Origin");
    if (cfg->cors_any) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
        http__expose(r);
        return;
    }
    /* With a list, the answer depends on Origin whether or not it is listed: a shared
     * cache must not give one origin's answer (without the header) to another. */
    MHD_add_response_header(r, "Vary", "Origin");
    if (origin && config_origin_allowed(cfg, origin)) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
        http__expose(r);
    }
}

/* Queues r with status and the common headers, and destroys our handle on it. */
enum MHD_Result http__send(http_conn *c, int status, struct MHD_Response *r, const char *ctype, size_t bytes)
{
    if (!r)
        return MHD_NO;
    if (ctype)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    http__cors(c, r);
    c->status = status;
    c->bytes = bytes;
    c->state = HTTP_CONN_ANSWERED;
    enum MHD_Result ret = MHD_queue_response(c->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

struct MHD_Response *http__text_response(char *text, size_t len)
{
    return MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
}

/* Sends a JSON value (stolen) with status, content type and up to two extra headers
 * (a NULL name skips one). */
enum MHD_Result http__json_h(http_conn *c, int status, json_t *j, const char *ctype, const char *h1,
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

enum MHD_Result http__json(http_conn *c, int status, json_t *j)
{
    return http__json_h(c, status, j, "application/json", NULL, NULL, NULL, NULL);
}

/* Sends a problem document (stolen) with the status it carries. */
enum MHD_Result http__problem_h(http_conn *c, json_t *problem, const char *h1, const char *v1)
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

enum MHD_Result http__problem(http_conn *c, json_t *problem)
{
    if (hamel_problem_code(problem) == HAMEL_E_UNAVAILABLE) /* a retry can succeed later */
        return http__problem_h(c, problem, MHD_HTTP_HEADER_RETRY_AFTER, HTTP_RETRY_AFTER_DOWN);
    return http__problem_h(c, problem, NULL, NULL);
}

enum MHD_Result http__error(http_conn *c, int code, const char *detail)
{
    return http__problem(c, hamel_problem_new(code, detail));
}

enum MHD_Result http__error_at(http_conn *c, int code, const char *path, const char *reason)
{
    json_t *p = hamel_problem_new(code, NULL);
    hamel_problem_add(p, path, -1, reason);
    return http__problem(c, p);
}

/* ---- content codings and conditional answers ------------------------------------------ */

int http__gzip_ok(http_conn *c)
{
    return negotiate_coding(http__header(c, MHD_HTTP_HEADER_ACCEPT_ENCODING), "gzip") > 0;
}

void http__etag_variant(const char *etag, const char *suffix, char *out, size_t cap)
{
    size_t n = strlen(etag);
    if (n >= 2 && etag[n - 1] == '"')
        snprintf(out, cap, "%.*s%s\"", (int)(n - 1), etag, suffix);
    else
        snprintf(out, cap, "%s", etag);
}

int http__not_modified_since(http_conn *c, const char *etag)
{
    return etag && negotiate_none_match(http__header(c, MHD_HTTP_HEADER_IF_NONE_MATCH), etag);
}

enum MHD_Result http__not_modified(http_conn *c, const char *etag, const char *h1, const char *v1)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (r) {
        MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
        if (h1)
            MHD_add_response_header(r, h1, v1);
    }
    return http__send(c, MHD_HTTP_NOT_MODIFIED, r, NULL, 0);
}

struct MHD_Response *http__encoded_response(http_conn *c, char *text, size_t len, size_t *sent)
{
    *sent = len;
    if (len >= GZIP_MIN_BYTES && http__gzip_ok(c)) {
        size_t zlen = 0;
        unsigned char *z = gzip_buffer(text, len, GZIP_LEVEL_ONCE, &zlen);
        if (z) {
            free(text);
            struct MHD_Response *r = MHD_create_response_from_buffer(zlen, z, MHD_RESPMEM_MUST_FREE);
            if (!r) {
                free(z);
                return NULL;
            }
            MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
            MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
            *sent = zlen;
            return r;
        }
    }
    struct MHD_Response *r = http__text_response(text, len);
    if (r)
        MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    return r;
}

/* ---- result blobs --------------------------------------------------------------------- */

static void http__blob_free(void *cls) { blob_release(cls); }

/* What a gzip answer of a result holds until libmicrohttpd has sent it: the deflated
 * rest (a reference) and the head and tail framing it with this answer's prefix. */
typedef struct http_gz_answer {
    blob *gz;
    gzip_frame f;
} http_gz_answer;

static void http__gz_answer_free(void *cls)
{
    http_gz_answer *a = cls;
    blob_release(a->gz);
    free(a);
}

/* The gzip form of result b (borrowed): deflated on the first answer that asks for it and
 * kept with b (b->gz, set once by compare-and-swap: a loser of the race drops its copy);
 * when b is the results cache's entry under `key`, the entry's cost is raised by it.
 * Returns a new reference, or NULL when out of memory. */
static blob *http__gzip_form(http_conn *c, blob *b, const char *key)
{
    blob *g = atomic_load_explicit(&b->gz, memory_order_acquire);
    if (!g) {
        blob *made = gzip_deflate_rest(b);
        if (!made)
            return NULL;
        blob *expected = NULL;
        if (atomic_compare_exchange_strong_explicit(&b->gz, &expected, made, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            g = made;
            cache *results = c->srv->d.results;
            blob *cur = key && key[0] ? cache_peek(results, key) : NULL;
            if (cur == b)
                cache_put(results, key, b, b->len + made->len);
            blob_release(cur);
        } else {
            blob_release(made);
            g = expected;
        }
    }
    return blob_retain(g);
}

/* Offloaded: the gzip form of c->gz.src, made (and kept with it) off the poll thread. */
static void http__run_gzip(void *arg)
{
    http_conn *c = arg;
    blob_release(http__gzip_form(c, c->gz.src, c->gz.key));
}

/* The answer once the gzip form is made (or not: then the identity form). */
static enum MHD_Result http__resume_gzip(http_conn *c)
{
    blob *b = c->gz.src;
    c->gz.src = NULL;
    enum MHD_Result ret = http__result(c, b, c->gz.cached, c->gz.etag[0] ? c->gz.etag : NULL, c->gz.key);
    blob_release(b);
    return ret;
}

/* Sends a result blob (borrowed; the response keeps its own reference) as
 * {"cached":<cached>, ...rest of the blob}: no copy of the trajectory is made. With gzip
 * accepted, its gzip form (http__gzip_form) framed for this prefix, under etag + "-gzip". */
enum MHD_Result http__result(http_conn *c, blob *b, int cached, const char *etag, const char *key)
{
    static const char yes[] = "{\"cached\":true,";
    static const char no[] = "{\"cached\":false,";
    const char *prefix = cached ? yes : no;
    size_t plen = cached ? sizeof yes - 1 : sizeof no - 1;
    if (b->len < 2 || b->data[0] != '{')
        return http__error(c, HAMEL_E_INTERNAL, "stored result is not an object");
    int empty = b->data[1] == '}';
    if (empty)
        plen--;
    int gz = b->len >= GZIP_MIN_BYTES && http__gzip_ok(c);
    if (gz && b->len > HTTP_GZIP_INLINE_MAX && !c->gz.tried &&
        !atomic_load_explicit(&b->gz, memory_order_acquire)) {
        /* Deflating tens of megabytes takes a second: not on a poll thread. */
        c->gz.tried = 1;
        c->gz.src = blob_retain(b);
        c->gz.cached = cached;
        snprintf(c->gz.etag, sizeof c->gz.etag, "%s", etag ? etag : "");
        snprintf(c->gz.key, sizeof c->gz.key, "%s", key ? key : "");
        return http__offload_read(c, http__run_gzip, http__resume_gzip);
    }
    char tag[NEGOTIATE_ETAG_MAX];
    if (etag && gz) {
        http__etag_variant(etag, "-gzip", tag, sizeof tag);
        etag = tag;
    }
    if (http__not_modified_since(c, etag))
        return http__not_modified(c, etag, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    struct MHD_Response *r = NULL;
    size_t sent = 0;
    http_gz_answer *a = gz ? calloc(1, sizeof *a) : NULL;
    if (a)
        a->gz = http__gzip_form(c, b, key);
    if (a && a->gz) {
        gzip_frame_fill(&a->f, prefix, plen, a->gz, b->len - 1);
        struct MHD_IoVec iov[3] = {
            {a->f.head, a->f.head_len}, {a->gz->data, a->gz->len}, {a->f.tail, sizeof a->f.tail}};
        sent = iov[0].iov_len + iov[1].iov_len + iov[2].iov_len;
        r = MHD_create_response_from_iovec(iov, 3, http__gz_answer_free, a);
        if (!r) {
            http__gz_answer_free(a);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    } else {
        if (a) /* out of memory deflating: the identity form, without a tag */
            http__gz_answer_free(a);
        if (gz && etag == tag)
            etag = NULL;
        struct MHD_IoVec iov[2] = {{prefix, plen}, {b->data + 1, b->len - 1}};
        sent = iov[0].iov_len + iov[1].iov_len;
        r = MHD_create_response_from_iovec(iov, 2, http__blob_free, blob_retain(b));
        if (!r) {
            blob_release(b);
            return MHD_NO;
        }
    }
    if (etag)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    return http__send(c, MHD_HTTP_OK, r, "application/json", sent);
}
