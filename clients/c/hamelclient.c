/* hamelclient.c — the handle, its HTTP exchange over libcurl, and the typed errors.
 *
 * Every public call goes through client_request: one HTTP exchange (resent after a 503
 * that carries Retry-After), the body collected into a capped buffer and parsed as
 * JSON, a 4xx/5xx turned into a hamelclient_error from its problem document.
 */
#include "hamelclient.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define CLIENT_DEFAULT_CONNECT_MS 5000L
#define CLIENT_DEFAULT_REQUEST_MS 60000L
#define CLIENT_DEFAULT_POLL_MS 100L
#define CLIENT_DEFAULT_RETRIES 5
#define CLIENT_MAX_POLL_MS 1000L /* polls slow down to this while a job runs long */
#define HAMELCLIENT_XSTR(x) #x
#define HAMELCLIENT_STR(x) HAMELCLIENT_XSTR(x)

/* A response body being received; grows up to HAMELCLIENT_MAX_RESPONSE_BYTES. */
typedef struct client_buf {
    char *data;
    size_t len, cap;
    int too_big;
} client_buf;

struct hamelclient {
    char *base;        /* without trailing slash */
    char *auth_header; /* "Authorization: Bearer ...", or NULL */
    long connect_ms, request_ms, poll_ms;
    int long_poll_s;
    double wait_timeout_s;
    int retries_503;
    CURL *curl;
    char curl_err[CURL_ERROR_SIZE];
    client_buf body;
    double retry_after; /* of the current response, -1 when absent */
    json_t *problem;    /* of the last failed call, or NULL */
};

static const char *const client_kind_names[] = {
    "ok", "transport", "problem", "protocol", "usage", "nomem", "cancelled", "stopped", "timeout",
};

const char *hamelclient_kind_name(int kind)
{
    if (kind > 0 || -kind >= (int)(sizeof client_kind_names / sizeof *client_kind_names))
        return "unknown";
    return client_kind_names[-kind];
}

static void client_copy(char *dst, size_t size, const char *src)
{
    if (src == NULL)
        src = "";
    snprintf(dst, size, "%s", src);
}

static void error_clear(hamelclient_error *err)
{
    if (err == NULL)
        return;
    memset(err, 0, sizeof *err);
    err->column = -1;
    err->retry_after = -1;
}

/* Fills a non-problem error (transport, protocol, usage, ...) and returns its kind. */
static int error_set(hamelclient_error *err, int kind, int status, const char *fmt, ...)
{
    if (err == NULL)
        return kind;
    error_clear(err);
    err->kind = kind;
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return kind;
}

static const char *json_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* Fills *err from a problem document and keeps a reference to it in the handle.
 * Borrows `doc` (which may be NULL or not an object: then only the status is known).
 * Returns `kind`. */
static int error_from_problem(hamelclient *c, int kind, const json_t *doc, long http_status,
                              hamelclient_error *err)
{
    json_decref(c->problem);
    c->problem = json_is_object(doc) ? json_incref((json_t *)doc) : NULL;
    if (err == NULL)
        return kind;
    error_clear(err);
    err->kind = kind;
    err->status = (int)http_status;
    err->retry_after = c->retry_after;
    if (json_is_object(doc)) {
        json_t *st = json_object_get(doc, "status");
        if (json_is_integer(st))
            err->status = (int)json_integer_value(st);
        client_copy(err->type, sizeof err->type, json_str(doc, "type"));
        client_copy(err->title, sizeof err->title, json_str(doc, "title"));
        client_copy(err->detail, sizeof err->detail, json_str(doc, "detail"));
        json_t *errors = json_object_get(doc, "errors");
        err->n_errors = (int)json_array_size(errors);
        json_t *first = json_array_get(errors, 0);
        if (json_is_object(first)) {
            client_copy(err->path, sizeof err->path, json_str(first, "path"));
            client_copy(err->reason, sizeof err->reason, json_str(first, "reason"));
            json_t *col = json_object_get(first, "column");
            if (json_is_integer(col))
                err->column = (int)json_integer_value(col);
        }
    }
    hamelclient_error_string(err, err->message, sizeof err->message);
    return kind;
}

char *hamelclient_error_string(const hamelclient_error *err, char *buf, size_t size)
{
    if (buf == NULL || size == 0)
        return buf;
    buf[0] = '\0';
    if (err == NULL)
        return buf;
    if (err->kind != HAMELCLIENT_E_PROBLEM && err->kind != HAMELCLIENT_E_CANCELLED) {
        if (buf != err->message)
            snprintf(buf, size, "%s: %s", hamelclient_kind_name(err->kind), err->message);
        return buf;
    }
    const char *slug = strrchr(err->type, '/');
    slug = slug != NULL ? slug + 1 : err->type;
    int n = snprintf(buf, size, "%d %s: %s", err->status, slug[0] ? slug : "error",
                     err->detail[0] ? err->detail : err->title);
    /* the service's detail of a one-error problem is "path: reason": said once */
    int said = err->detail[0] != '\0' && strstr(err->detail, err->path) != NULL &&
               (err->reason[0] == '\0' || strstr(err->detail, err->reason) != NULL);
    if (n >= 0 && (size_t)n < size && err->path[0] != '\0' && !said) {
        int m = snprintf(buf + n, size - (size_t)n, " (at %s", err->path);
        n += m > 0 ? m : 0;
        if (err->column >= 0 && (size_t)n < size) {
            m = snprintf(buf + n, size - (size_t)n, ", column %d", err->column);
            n += m > 0 ? m : 0;
        }
        if (err->reason[0] != '\0' && (size_t)n < size) {
            m = snprintf(buf + n, size - (size_t)n, ": %s", err->reason);
            n += m > 0 ? m : 0;
        }
        if ((size_t)n < size)
            snprintf(buf + n, size - (size_t)n, ")");
    }
    return buf;
}

/* ---- handle ------------------------------------------------------------------------ */

/* Whether base[0..len) can be the service's root: http:// or https:// (or no scheme,
 * which curl takes as http), no query, no fragment, nothing curl would not send. */
static int client_base_ok(const char *base, size_t len)
{
    const char *sep = strstr(base, "://");
    if (sep != NULL && (size_t)(sep - base) < len) {
        size_t n = (size_t)(sep - base);
        if (!((n == 4 && strncasecmp(base, "http", 4) == 0) ||
              (n == 5 && strncasecmp(base, "https", 5) == 0)))
            return 0;
    }
    for (size_t i = 0; i < len; i++)
        if (base[i] == '?' || base[i] == '#' || (unsigned char)base[i] <= 0x20 ||
            (unsigned char)base[i] == 0x7f)
            return 0;
    return 1;
}

int hamelclient_new(const char *base_url, const hamelclient_options *opts, hamelclient **out)
{
    if (out == NULL)
        return HAMELCLIENT_E_USAGE;
    *out = NULL;
    if (base_url == NULL || base_url[0] == '\0')
        base_url = getenv("HAMEL_URL");
    if (base_url == NULL || base_url[0] == '\0')
        base_url = HAMELCLIENT_DEFAULT_URL;
    size_t len = strlen(base_url);
    while (len > 0 && base_url[len - 1] == '/')
        len--;
    /* the service's root: "http://host:8080/v1" as a base would ask for /v1/v1/... */
    if (len >= 3 && strncmp(base_url + len - 3, "/v1", 3) == 0) {
        len -= 3;
        while (len > 0 && base_url[len - 1] == '/')
            len--;
    }
    if (len == 0 || len > HAMELCLIENT_MAX_URL / 2 || !client_base_ok(base_url, len))
        return HAMELCLIENT_E_USAGE;
    const char *tok = opts != NULL && opts->token != NULL ? opts->token : getenv("HAMEL_TOKEN");
    for (const char *t = tok; t != NULL && *t != '\0'; t++)
        if ((unsigned char)*t < 0x21 || (unsigned char)*t == 0x7f) /* a header cannot carry it */
            return HAMELCLIENT_E_USAGE;
    hamelclient *c = calloc(1, sizeof *c);
    if (c == NULL)
        return HAMELCLIENT_E_NOMEM;
    c->base = strndup(base_url, len);
    c->curl = curl_easy_init();
    const char *token = opts != NULL ? opts->token : NULL;
    if (token == NULL)
        token = getenv("HAMEL_TOKEN");
    if (token != NULL && token[0] != '\0') {
        size_t n = strlen(token) + sizeof "Authorization: Bearer ";
        c->auth_header = malloc(n);
        if (c->auth_header != NULL)
            snprintf(c->auth_header, n, "Authorization: Bearer %s", token);
    }
    if (c->base == NULL || c->curl == NULL || (token != NULL && token[0] != '\0' && c->auth_header == NULL)) {
        hamelclient_free(c);
        return HAMELCLIENT_E_NOMEM;
    }
    hamelclient_options o = {0};
    if (opts != NULL)
        o = *opts;
    c->connect_ms = o.connect_timeout_ms > 0 ? o.connect_timeout_ms : CLIENT_DEFAULT_CONNECT_MS;
    c->request_ms = o.request_timeout_ms > 0 ? o.request_timeout_ms : CLIENT_DEFAULT_REQUEST_MS;
    c->poll_ms = o.poll_interval_ms > 0 ? o.poll_interval_ms : CLIENT_DEFAULT_POLL_MS;
    c->long_poll_s = o.long_poll_s > 0 ? o.long_poll_s : 0;
    c->wait_timeout_s = o.wait_timeout_s > 0 ? o.wait_timeout_s : 0;
    c->retries_503 = o.retries_503 == 0 ? CLIENT_DEFAULT_RETRIES : (o.retries_503 < 0 ? 0 : o.retries_503);
    c->retry_after = -1;
    *out = c;
    return HAMELCLIENT_OK;
}

void hamelclient_free(hamelclient *c)
{
    if (c == NULL)
        return;
    if (c->curl != NULL)
        curl_easy_cleanup(c->curl);
    json_decref(c->problem);
    free(c->body.data);
    free(c->auth_header);
    free(c->base);
    free(c);
}

const char *hamelclient_url(const hamelclient *c) { return c != NULL ? c->base : NULL; }

const json_t *hamelclient_last_problem(const hamelclient *c) { return c != NULL ? c->problem : NULL; }

/* ---- HTTP exchange ----------------------------------------------------------------- */

static size_t client_on_body(char *ptr, size_t size, size_t nmemb, void *user)
{
    client_buf *b = user;
    size_t n = size * nmemb;
    if (b->len + n + 1 > HAMELCLIENT_MAX_RESPONSE_BYTES) {
        b->too_big = 1;
        return 0;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (d == NULL)
            return 0;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

static size_t client_on_header(char *ptr, size_t size, size_t nmemb, void *user)
{
    hamelclient *c = user;
    size_t n = size * nmemb;
    static const char name[] = "retry-after:";
    if (n > sizeof name - 1 && strncasecmp(ptr, name, sizeof name - 1) == 0) {
        char tmp[64];
        size_t k = n - (sizeof name - 1);
        if (k >= sizeof tmp)
            k = sizeof tmp - 1;
        memcpy(tmp, ptr + sizeof name - 1, k);
        tmp[k] = '\0';
        char *end = NULL;
        double v = strtod(tmp, &end);
        /* Retry-After may also be an HTTP date; then wait one second. */
        c->retry_after = end != tmp && v >= 0 ? v : 1.0;
    }
    return n;
}

static double client_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void client_sleep(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Ids go into URL paths unescaped, so only these characters are allowed. */
static int client_id_ok(const char *id)
{
    if (id == NULL || id[0] == '\0' || strlen(id) >= HAMELCLIENT_MAX_ID)
        return 0;
    for (const char *p = id; *p; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == ':' || ch == '-' || ch == '_' || ch == '.';
        if (!ok)
            return 0;
    }
    return 1;
}

/* One HTTP exchange: `method` on base+`path`, with `body` (borrowed, may be NULL) as
 * JSON. `wait_s` lengthens the timeout for a server-side wait. On a 2xx, *status holds
 * it and *out the parsed body (caller owns it; NULL for an empty body). A 503 is resent
 * after Retry-After up to the handle's retries; any other 4xx/5xx fills *err. */
static int client_request(hamelclient *c, const char *method, const char *path, const json_t *body,
                          int wait_s, long *status, json_t **out, hamelclient_error *err)
{
    *out = NULL;
    *status = 0;
    json_decref(c->problem);
    c->problem = NULL;
    char url[HAMELCLIENT_MAX_URL];
    int n = snprintf(url, sizeof url, "%s%s", c->base, path);
    if (n < 0 || (size_t)n >= sizeof url)
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "URL longer than %d bytes", HAMELCLIENT_MAX_URL);
    char *payload = NULL;
    if (body != NULL) {
        payload = json_dumps(body, JSON_COMPACT);
        if (payload == NULL)
            return error_set(err, HAMELCLIENT_E_USAGE, 0, "the request cannot be serialised");
    }
    struct curl_slist *headers = NULL;
    struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
    headers = h;
    if (h != NULL && payload != NULL)
        h = curl_slist_append(headers, "Content-Type: application/json");
    if (h != NULL && c->auth_header != NULL)
        h = curl_slist_append(headers, c->auth_header);
    if (h == NULL) {
        curl_slist_free_all(headers);
        free(payload);
        return error_set(err, HAMELCLIENT_E_NOMEM, 0, "out of memory");
    }

    int rc = HAMELCLIENT_OK;
    for (int attempt = 0;; attempt++) {
        CURL *e = c->curl;
        curl_easy_reset(e);
        c->body.len = 0;
        c->body.too_big = 0;
        if (c->body.data != NULL)
            c->body.data[0] = '\0';
        c->retry_after = -1;
        c->curl_err[0] = '\0';
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_USERAGENT,
                         "libhamelclient/"
                         "0.1");
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->curl_err);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, c->connect_ms);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, c->request_ms + 1000L * (wait_s > 0 ? wait_s : 0));
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, client_on_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &c->body);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, client_on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
        curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
        if (payload != NULL) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, payload);
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
        }
        if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);

        CURLcode cc = curl_easy_perform(e);
        if (cc != CURLE_OK) {
            if (c->body.too_big)
                rc = error_set(err, HAMELCLIENT_E_NOMEM, 0, "%s %s: response larger than %zu bytes", method,
                               path, HAMELCLIENT_MAX_RESPONSE_BYTES);
            else
                rc = error_set(err, HAMELCLIENT_E_TRANSPORT, 0, "%s %s: %s", method, url,
                               c->curl_err[0] ? c->curl_err : curl_easy_strerror(cc));
            break;
        }
        long code = 0;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
        json_t *doc = NULL;
        if (c->body.len > 0) {
            json_error_t jerr;
            doc = json_loadb(c->body.data, c->body.len, JSON_DECODE_ANY, &jerr);
        }
        if (code == 503 && attempt < c->retries_503) {
            json_decref(doc);
            double wait = c->retry_after >= 0 ? c->retry_after : 1.0;
            if (wait > HAMELCLIENT_MAX_RETRY_AFTER_S)
                wait = HAMELCLIENT_MAX_RETRY_AFTER_S;
            client_sleep(wait);
            continue;
        }
        if (code >= 400 && !json_is_string(json_object_get(doc, "type"))) {
            /* not a problem document: a proxy's or another server's page, not the API's */
            char *ctype = NULL;
            curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ctype);
            json_decref(doc);
            rc = error_set(err, HAMELCLIENT_E_PROTOCOL, (int)code,
                           "%s %s: HTTP %ld with %s, not a problem document: is %s the hamel service?",
                           method, path, code, ctype != NULL ? ctype : "no content type", c->base);
            break;
        }
        if (code >= 400) {
            rc = error_from_problem(c, HAMELCLIENT_E_PROBLEM, doc, code, err);
            json_decref(doc);
            break;
        }
        if (code < 200 || code >= 300 || (c->body.len > 0 && doc == NULL)) {
            json_decref(doc);
            rc = error_set(err, HAMELCLIENT_E_PROTOCOL, (int)code,
                           "%s %s: unexpected answer (HTTP %ld, %zu bytes%s)", method, path, code,
                           c->body.len, c->body.len > 0 ? ", not JSON" : "");
            break;
        }
        *status = code;
        *out = doc;
        break;
    }
    curl_slist_free_all(headers);
    free(payload);
    return rc;
}

/* A request whose 2xx answer must be a JSON object. */
static int client_object(hamelclient *c, const char *method, const char *path, const json_t *body, int wait_s,
                         long *status, json_t **out, hamelclient_error *err)
{
    long st = 0;
    int rc = client_request(c, method, path, body, wait_s, &st, out, err);
    if (rc != HAMELCLIENT_OK)
        return rc;
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return error_set(err, HAMELCLIENT_E_PROTOCOL, (int)st, "%s %s: the answer is not an object", method,
                         path);
    }
    if (status != NULL)
        *status = st;
    return HAMELCLIENT_OK;
}

/* ---- endpoints ---------------------------------------------------------------------- */

#define CLIENT_CHECK(c, out, err)                                                                            \
    do {                                                                                                     \
        error_clear(err);                                                                                    \
        if ((out) != NULL)                                                                                   \
            *(out) = NULL;                                                                                   \
        if ((c) == NULL || (out) == NULL)                                                                    \
            return error_set(err, HAMELCLIENT_E_USAGE, 0, "NULL handle or out-parameter");                   \
    } while (0)

int hamelclient_health(hamelclient *c, json_t **out, hamelclient_error *err)
{
    CLIENT_CHECK(c, out, err);
    return client_object(c, "GET", "/v1/health", NULL, 0, NULL, out, err);
}

int hamelclient_model_submit(hamelclient *c, const json_t *model, json_t **summary, int *created,
                             hamelclient_error *err)
{
    CLIENT_CHECK(c, summary, err);
    if (!json_is_object(model))
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "the model must be a JSON object");
    long st = 0;
    int rc = client_object(c, "POST", "/v1/models", model, 0, &st, summary, err);
    if (rc == HAMELCLIENT_OK && created != NULL)
        *created = st == 201;
    return rc;
}

static int client_get_id(hamelclient *c, const char *prefix, const char *id, const char *suffix, json_t **out,
                         hamelclient_error *err)
{
    if (!client_id_ok(id))
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "not a valid id: \"%.100s\"", id ? id : "");
    char path[HAMELCLIENT_MAX_ID + 64];
    snprintf(path, sizeof path, "%s%s%s", prefix, id, suffix);
    return client_object(c, "GET", path, NULL, 0, NULL, out, err);
}

int hamelclient_model_get(hamelclient *c, const char *model_id, json_t **summary, hamelclient_error *err)
{
    CLIENT_CHECK(c, summary, err);
    return client_get_id(c, "/v1/models/", model_id, "", summary, err);
}

int hamelclient_equations(hamelclient *c, const char *model_id, json_t **out, hamelclient_error *err)
{
    return hamelclient_equations_form(c, model_id, NULL, out, err);
}

int hamelclient_equations_form(hamelclient *c, const char *model_id, const char *form, json_t **out,
                               hamelclient_error *err)
{
    CLIENT_CHECK(c, out, err);
    if (form == NULL || form[0] == '\0')
        return client_get_id(c, "/v1/models/", model_id, "/equations", out, err);
    /* a form is a word (hamel, appell, kane, maggi, voronec): the service names the
     * unknown ones; anything else would change the URL */
    size_t n = strspn(form, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-0123456789");
    if (form[n] != '\0' || n > 32)
        return error_set(err, HAMELCLIENT_E_USAGE, 0,
                         "not a form: \"%.40s\" (hamel, appell, kane, maggi, voronec)", form);
    char suffix[64];
    snprintf(suffix, sizeof suffix, "/equations?form=%s", form);
    return client_get_id(c, "/v1/models/", model_id, suffix, out, err);
}

int hamelclient_hamel(hamelclient *c, const json_t *request, json_t **out, hamelclient_error *err)
{
    CLIENT_CHECK(c, out, err);
    if (!json_is_object(request))
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "the request must be a JSON object");
    return client_object(c, "POST", "/v1/hamel", request, 0, NULL, out, err);
}

/* What a job document says: 1 pending (queued/running), 0 done, or a negative kind with
 * *err filled (failed → PROBLEM, cancelled → CANCELLED, anything else → PROTOCOL). */
static int client_job_outcome(hamelclient *c, const json_t *job, hamelclient_error *err)
{
    const char *status = json_str(job, "status");
    if (status == NULL)
        return json_object_get(job, "trajectory") != NULL
                   ? 0
                   : error_set(err, HAMELCLIENT_E_PROTOCOL, 0, "a job without a status");
    if (strcmp(status, "done") == 0)
        return 0;
    if (strcmp(status, "queued") == 0 || strcmp(status, "running") == 0)
        return 1;
    if (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0) {
        int kind = status[0] == 'f' ? HAMELCLIENT_E_PROBLEM : HAMELCLIENT_E_CANCELLED;
        const json_t *doc = json_object_get(job, "problem");
        if (!json_is_object(doc))
            doc = json_object_get(job, "error");
        if (!json_is_object(doc))
            doc = job; /* the problem's fields may sit on the job itself */
        error_from_problem(c, kind, doc, 0, err);
        if (err != NULL && err->message[0] == '\0')
            snprintf(err->message, sizeof err->message, "the job was %s", status);
        if (err != NULL && kind == HAMELCLIENT_E_CANCELLED && err->title[0] == '\0') {
            client_copy(err->title, sizeof err->title, "The job was cancelled");
            hamelclient_error_string(err, err->message, sizeof err->message);
        }
        return kind;
    }
    return error_set(err, HAMELCLIENT_E_PROTOCOL, 0, "unknown job status \"%.64s\"", status);
}

int hamelclient_simulation_start(hamelclient *c, const json_t *request, int wait_s, json_t **out,
                                 hamelclient_error *err)
{
    CLIENT_CHECK(c, out, err);
    if (!json_is_object(request))
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "the request must be a JSON object");
    char path[64] = "/v1/simulations";
    if (wait_s > 0)
        snprintf(path, sizeof path, "/v1/simulations?wait=%d", wait_s);
    json_t *doc = NULL;
    int rc = client_object(c, "POST", path, request, wait_s, NULL, &doc, err);
    if (rc == HAMELCLIENT_E_PROBLEM) {
        /* A job that ended within wait_s is answered with its problem document, which
         * names the job's status: a cancelled one is reported as such. */
        const char *js = json_str(c->problem, "job_status");
        if (js != NULL && strcmp(js, "cancelled") == 0) {
            if (err != NULL)
                err->kind = HAMELCLIENT_E_CANCELLED;
            rc = HAMELCLIENT_E_CANCELLED;
        }
    }
    if (rc != HAMELCLIENT_OK)
        return rc;
    int state = client_job_outcome(c, doc, err);
    if (state < 0) {
        json_decref(doc);
        return state;
    }
    if (state == 1 && !client_id_ok(json_str(doc, "job_id"))) {
        json_decref(doc);
        return error_set(err, HAMELCLIENT_E_PROTOCOL, 0, "a pending job without a usable job_id");
    }
    *out = doc;
    return HAMELCLIENT_OK;
}

int hamelclient_job_get(hamelclient *c, const char *job_id, int wait_s, json_t **out, hamelclient_error *err)
{
    CLIENT_CHECK(c, out, err);
    if (!client_id_ok(job_id))
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "not a valid job id: \"%.100s\"", job_id ? job_id : "");
    char path[HAMELCLIENT_MAX_ID + 64];
    if (wait_s > 0)
        snprintf(path, sizeof path, "/v1/jobs/%s?wait=%d", job_id, wait_s);
    else
        snprintf(path, sizeof path, "/v1/jobs/%s", job_id);
    return client_object(c, "GET", path, NULL, wait_s, NULL, out, err);
}

static double job_progress(const json_t *job, int state)
{
    if (state == 0)
        return 1.0;
    json_t *p = json_object_get(job, "progress");
    double v = json_is_number(p) ? json_number_value(p) : 0.0;
    return v < 0 ? 0 : (v > 1 ? 1 : v);
}

int hamelclient_job_wait(hamelclient *c, const char *job_id, hamelclient_progress_fn progress, void *user,
                         json_t **result, hamelclient_error *err)
{
    CLIENT_CHECK(c, result, err);
    double start = client_now();
    long pause_ms = c->poll_ms;
    for (;;) {
        double asked = client_now();
        json_t *job = NULL;
        int rc = hamelclient_job_get(c, job_id, c->long_poll_s, &job, err);
        if (rc != HAMELCLIENT_OK)
            return rc;
        int state = client_job_outcome(c, job, err);
        const char *status = json_str(job, "status");
        if (progress != NULL && state >= 0 &&
            progress(user, job_id, status ? status : "done", job_progress(job, state)) != 0) {
            json_decref(job);
            return error_set(err, HAMELCLIENT_E_STOPPED, 0, "stopped waiting for job %s", job_id);
        }
        if (state <= 0) {
            if (state == 0)
                *result = job;
            else
                json_decref(job);
            return state;
        }
        json_decref(job);
        if (c->wait_timeout_s > 0 && client_now() - start > c->wait_timeout_s)
            return error_set(err, HAMELCLIENT_E_TIMEOUT, 0, "job %s still running after %.1f s", job_id,
                             c->wait_timeout_s);
        /* Between polls: the configured pause, less the time a long poll already took;
         * a long-running job is polled gradually less often. */
        double left = (double)pause_ms / 1000.0 - (client_now() - asked);
        client_sleep(left);
        if (client_now() - start > 10.0 && pause_ms < CLIENT_MAX_POLL_MS)
            pause_ms = pause_ms * 5 / 4 + 1;
    }
}

/* DELETE prefix{id} (a job or a batch); `what` names it in errors. */
static int client_cancel(hamelclient *c, const char *prefix, const char *what, const char *id, json_t **out,
                         hamelclient_error *err)
{
    error_clear(err);
    if (out != NULL)
        *out = NULL;
    if (c == NULL)
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "NULL handle");
    if (!client_id_ok(id))
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "not a valid %s id: \"%.100s\"", what, id ? id : "");
    char path[HAMELCLIENT_MAX_ID + 64];
    snprintf(path, sizeof path, "%s%s", prefix, id);
    long st = 0;
    json_t *doc = NULL;
    int rc = client_request(c, "DELETE", path, NULL, 0, &st, &doc, err);
    if (rc == HAMELCLIENT_OK && out != NULL)
        *out = doc;
    else
        json_decref(doc);
    return rc;
}

int hamelclient_job_cancel(hamelclient *c, const char *job_id, json_t **out, hamelclient_error *err)
{
    return client_cancel(c, "/v1/jobs/", "job", job_id, out, err);
}

int hamelclient_batch_cancel(hamelclient *c, const char *batch_id, json_t **out, hamelclient_error *err)
{
    return client_cancel(c, "/v1/batches/", "batch", batch_id, out, err);
}

int hamelclient_quarantine(hamelclient *c, json_t **out, hamelclient_error *err)
{
    CLIENT_CHECK(c, out, err);
    return client_object(c, "GET", "/v1/quarantine", NULL, 0, NULL, out, err);
}

int hamelclient_quarantine_clear(hamelclient *c, const char *model_id, hamelclient_error *err)
{
    error_clear(err);
    if (c == NULL)
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "NULL handle");
    if (!client_id_ok(model_id))
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "not a valid model id: \"%.100s\"",
                         model_id ? model_id : "");
    char path[HAMELCLIENT_MAX_ID + 64];
    snprintf(path, sizeof path, "/v1/quarantine/%s", model_id);
    long st = 0;
    json_t *doc = NULL;
    int rc = client_request(c, "DELETE", path, NULL, 0, &st, &doc, err);
    json_decref(doc);
    return rc;
}

int hamelclient_simulate(hamelclient *c, const json_t *request, hamelclient_progress_fn progress, void *user,
                         json_t **result, hamelclient_error *err)
{
    CLIENT_CHECK(c, result, err);
    json_t *doc = NULL;
    int rc = hamelclient_simulation_start(c, request, 0, &doc, err);
    if (rc != HAMELCLIENT_OK)
        return rc;
    if (client_job_outcome(c, doc, err) == 0) {
        /* Answered at once (from the cache): report it done. */
        const char *id = json_str(doc, "job_id");
        if (progress != NULL && progress(user, id ? id : "", "done", 1.0) != 0) {
            json_decref(doc);
            return error_set(err, HAMELCLIENT_E_STOPPED, 0, "stopped");
        }
        *result = doc;
        return HAMELCLIENT_OK;
    }
    char id[HAMELCLIENT_MAX_ID];
    client_copy(id, sizeof id, json_str(doc, "job_id"));
    json_decref(doc);
    return hamelclient_job_wait(c, id, progress, user, result, err);
}

int hamelclient_linearize(hamelclient *c, const json_t *request, json_t **out, hamelclient_error *err)
{
    CLIENT_CHECK(c, out, err);
    if (!json_is_object(request))
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "the request must be a JSON object");
    return client_object(c, "POST", "/v1/linearize", request, 0, NULL, out, err);
}

int hamelclient_evaluate(hamelclient *c, const json_t *request, json_t **out, hamelclient_error *err)
{
    CLIENT_CHECK(c, out, err);
    if (!json_is_object(request))
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "the request must be a JSON object");
    return client_object(c, "POST", "/v1/evaluate", request, 0, NULL, out, err);
}

#define CLIENT_BATCH_WAIT_S 1 /* ?wait= of each batch poll: progress at least every second */

int hamelclient_batch(hamelclient *c, const json_t *request, hamelclient_progress_fn progress, void *user,
                      json_t **out, hamelclient_error *err)
{
    CLIENT_CHECK(c, out, err);
    if (!json_is_object(request))
        return error_set(err, HAMELCLIENT_E_USAGE, 0, "the request must be a JSON object");
    double start = client_now();
    json_t *doc = NULL;
    int rc = client_object(c, "POST", "/v1/batches?wait=" HAMELCLIENT_STR(CLIENT_BATCH_WAIT_S), request,
                           CLIENT_BATCH_WAIT_S, NULL, &doc, err);
    char id[HAMELCLIENT_MAX_ID];
    client_copy(id, sizeof id, rc == HAMELCLIENT_OK ? json_str(doc, "batch_id") : NULL);
    while (rc == HAMELCLIENT_OK) {
        int finished = json_is_array(json_object_get(doc, "results"));
        json_t *p = json_object_get(doc, "progress");
        const char *status = json_str(doc, "status");
        if (progress != NULL &&
            progress(user, id, status ? status : "?",
                     finished ? 1.0 : (json_is_number(p) ? json_number_value(p) : 0.0)) != 0)
            rc = error_set(err, HAMELCLIENT_E_STOPPED, 0, "stopped waiting for batch %s", id);
        else if (finished) {
            *out = doc;
            return HAMELCLIENT_OK;
        } else if (c->wait_timeout_s > 0 && client_now() - start > c->wait_timeout_s)
            rc = error_set(err, HAMELCLIENT_E_TIMEOUT, 0, "batch %s still running after %.1f s", id,
                           c->wait_timeout_s);
        else {
            json_decref(doc);
            doc = NULL;
            rc = client_id_ok(id) ? client_get_id(c, "/v1/batches/", id,
                                                  "?wait=" HAMELCLIENT_STR(CLIENT_BATCH_WAIT_S), &doc, err)
                                  : error_set(err, HAMELCLIENT_E_PROTOCOL, 0, "the batch has no batch_id");
        }
    }
    json_decref(doc);
    return rc;
}

static double client_warning_number(const json_t *w, const char *key)
{
    const json_t *v = json_object_get(w, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

size_t hamelclient_warnings(const json_t *result, hamelclient_warning *out, size_t max)
{
    const json_t *ws = json_object_get(result, "warnings");
    size_t n = json_is_array(ws) ? json_array_size(ws) : 0;
    for (size_t i = 0; i < n && i < max && out != NULL; i++) {
        const json_t *w = json_array_get(ws, i);
        const char *code = json_string_value(json_object_get(w, "code"));
        const char *message = json_string_value(json_object_get(w, "message"));
        const char *check = json_string_value(json_object_get(w, "check"));
        out[i].code = code ? code : "warning";
        out[i].message = message ? message : "";
        out[i].check = check ? check : "";
        out[i].value = client_warning_number(w, "value");
        out[i].threshold = client_warning_number(w, "threshold");
    }
    return n;
}
