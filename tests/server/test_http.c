/* test_http.c — HTTP conventions against the real hamel-server on loopback: content
 * codings (gzip of results, batch documents and NDJSON streams), conditional requests
 * (If-None-Match with weak tags, lists and "*"; immutable models; ETags of equations and
 * static files) and NDJSON negotiation by q-values.
 *
 * Bodies are read raw (libcurl is not asked to decode) and inflated here with zlib, so
 * what is checked is the bytes the server sent.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"

#define DISK_CASE "greenwood-5.3-rolling-disk.json"
#define SAMPLES 1001 /* the large result: about 277 KB of JSON */

static harness_server srv;
static json_t *disk;
static char static_dir[HARNESS_DIR_MAX];

static void start_with(const char *const *env)
{
    char path[PATH_MAX];
    json_error_t jerr;
    disk = harness_case_load(DISK_CASE, path, sizeof path, &jerr);
    cr_assert_not_null(disk, "cannot load %s: %s", path, jerr.text);
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
}

static void setup(void) { start_with(NULL); }

static void teardown(void)
{
    json_decref(disk);
    disk = NULL;
    harness_stop(&srv);
    if (static_dir[0]) {
        char cmd[HARNESS_DIR_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", static_dir);
        cr_assert_eq(system(cmd), 0);
        static_dir[0] = '\0';
    }
}

TestSuite(encoding, .init = setup, .fini = teardown, .timeout = 180);
TestSuite(conditional, .init = setup, .fini = teardown, .timeout = 120);
TestSuite(negotiate, .init = setup, .fini = teardown, .timeout = 120);

/* One request with extra headers (NULL-terminated, may be NULL); body as JSON text. */
static harness_resp req(const char *method, const char *path, const json_t *body, const char *const *hdrs)
{
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    harness_resp r;
    CURLcode rc = harness_request(&srv, method, path, text, hdrs, &r);
    free(text);
    cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, path, curl_easy_strerror(rc));
    return r;
}

/* A header of r, "" when absent (a static buffer per slot, two slots). */
static const char *hdr(const harness_resp *r, const char *name, int slot)
{
    static char buf[2][512];
    const char *v = harness_header(r, name, buf[slot], sizeof buf[slot]);
    return v ? v : "";
}

/* Inflates a whole gzip member; returns the text (caller frees), NUL-terminated. */
static char *gunzip(const char *in, size_t n, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert_eq(inflateInit2(&z, 15 + 16), Z_OK);
    size_t cap = 1 << 20, len = 0;
    char *out = malloc(cap);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    int rc;
    do {
        if (cap - len < 65536) {
            cap *= 2;
            out = realloc(out, cap);
        }
        z.next_out = (Bytef *)out + len;
        z.avail_out = (uInt)(cap - len - 1);
        rc = inflate(&z, Z_NO_FLUSH);
        len = cap - 1 - z.avail_out;
        cr_assert(rc == Z_OK || rc == Z_STREAM_END, "the body is not valid gzip (zlib %d)", rc);
    } while (rc != Z_STREAM_END);
    cr_assert_eq(z.avail_in, 0, "bytes after the gzip member: %u", z.avail_in);
    inflateEnd(&z);
    out[len] = '\0';
    *out_len = len;
    return out;
}

/* The case's simulation with `samples` samples and the model inline. Caller owns it. */
static json_t *disk_request(int samples)
{
    json_t *r = json_deep_copy(json_object_get(disk, "simulation"));
    json_object_set_new(r, "output", json_pack("{s:i}", "samples", samples));
    json_object_set(r, "model", json_object_get(disk, "model"));
    return r;
}

static double results_cache_bytes(void)
{
    harness_resp m = req("GET", "/metrics", NULL, NULL);
    double v = harness_metric(&m, "hamel_cache_bytes{cache=\"results\"}");
    harness_resp_free(&m);
    return v;
}

Test(encoding, a_cached_result_in_gzip_is_kept_and_decodes_to_the_identity_bytes)
{
    json_t *sim = disk_request(SAMPLES);
    harness_resp r = req("POST", "/v1/simulations?wait=60", sim, NULL);
    cr_assert_eq(r.status, 200, "%.300s", r.body);
    char job_path[128];
    snprintf(job_path, sizeof job_path, "/v1/jobs/%s", json_string_value(json_object_get(r.json, "job_id")));
    harness_resp_free(&r);

    harness_resp id = req("POST", "/v1/simulations", sim, NULL);
    cr_assert_eq(id.status, 200);
    cr_assert(json_is_true(json_object_get(id.json, "cached")), "the repeat is a cache hit");
    cr_assert(id.len > 200000, "a %d-sample result is large: %zu bytes", SAMPLES, id.len);
    cr_assert_str_eq(hdr(&id, "Content-Encoding", 0), "", "identity unless asked");
    cr_assert(strstr(hdr(&id, "Vary", 0), "Accept-Encoding"), "Vary: %s", hdr(&id, "Vary", 0));
    char etag[256];
    snprintf(etag, sizeof etag, "%s", hdr(&id, "ETag", 0));
    cr_assert(etag[0] == '"', "ETag %s", etag);

    double before = results_cache_bytes();
    static const char *const gz[] = {"Accept-Encoding: gzip", NULL};
    harness_resp z = req("POST", "/v1/simulations", sim, gz);
    cr_assert_eq(z.status, 200);
    cr_assert_str_eq(hdr(&z, "Content-Encoding", 0), "gzip");
    cr_assert(strstr(hdr(&z, "Vary", 0), "Accept-Encoding"));
    char gz_etag[300];
    snprintf(gz_etag, sizeof gz_etag, "%.*s-gzip\"", (int)strlen(etag) - 1, etag);
    cr_assert_str_eq(hdr(&z, "ETag", 0), gz_etag, "the gzip form has its own tag");
    cr_assert(z.len * 2 < id.len, "gzip halves a result at least: %zu of %zu bytes", z.len, id.len);
    size_t n = 0;
    char *plain = gunzip(z.body, z.len, &n);
    cr_assert(n == id.len && !memcmp(plain, id.body, n), "the gzip body inflates to the identity bytes");
    free(plain);
    /* kept with the cached result: its cost in the results cache grows by the deflated form */
    double grown = results_cache_bytes() - before;
    cr_assert(grown > (double)z.len - 128 && grown <= (double)z.len, "the results cache grew by %.0f for %zu",
              grown, z.len);
    harness_resp z2 = req("POST", "/v1/simulations", sim, gz);
    cr_assert(z2.len == z.len && !memcmp(z2.body, z.body, z.len), "the same gzip bytes again");
    cr_assert_eq(results_cache_bytes() - before, grown, "deflated once");
    harness_resp_free(&z2);

    /* the job's own answer ("cached": false) reuses the deflated form with its prefix */
    harness_resp jid = req("GET", job_path, NULL, NULL);
    harness_resp jz = req("GET", job_path, NULL, gz);
    cr_assert_str_eq(hdr(&jz, "Content-Encoding", 0), "gzip");
    char job_etag[300];
    snprintf(job_etag, sizeof job_etag, "%s", hdr(&jz, "ETag", 0));
    cr_assert(strstr(job_etag, "-gzip\""), "the job's gzip tag: %s", job_etag);
    plain = gunzip(jz.body, jz.len, &n);
    cr_assert(n == jid.len && !memcmp(plain, jid.body, n), "the job's gzip answer inflates to its identity");
    cr_assert(json_is_false(json_object_get(jid.json, "cached")));
    free(plain);
    harness_resp_free(&jid);
    harness_resp_free(&jz);

    /* codings by q-value */
    static const char *const q0[] = {"Accept-Encoding: gzip;q=0, identity", NULL};
    static const char *const star[] = {"Accept-Encoding: br;q=1, *;q=0.5", NULL};
    harness_resp a = req("POST", "/v1/simulations", sim, q0);
    cr_assert_str_eq(hdr(&a, "Content-Encoding", 0), "", "gzip;q=0 refuses gzip");
    harness_resp_free(&a);
    a = req("POST", "/v1/simulations", sim, star);
    cr_assert_str_eq(hdr(&a, "Content-Encoding", 0), "gzip", "* accepts gzip");
    harness_resp_free(&a);

    /* If-None-Match: weak tags, lists, "*", each against the representation chosen */
    char h1[400], h2[400];
    snprintf(h1, sizeof h1, "If-None-Match: W/%s", gz_etag);
    const char *const weak[] = {"Accept-Encoding: gzip", h1, NULL};
    a = req("POST", "/v1/simulations", sim, weak);
    cr_assert_eq(a.status, 304, "a weak tag matches (weak comparison): %ld", a.status);
    cr_assert_str_eq(hdr(&a, "ETag", 0), gz_etag);
    cr_assert(strstr(hdr(&a, "Vary", 0), "Accept-Encoding"), "a 304 carries Vary");
    harness_resp_free(&a);
    snprintf(h2, sizeof h2, "If-None-Match: \"other\", W/\"x\" , %s", job_etag);
    const char *const list[] = {"Accept-Encoding: gzip", h2, NULL};
    a = req("GET", job_path, NULL, list);
    cr_assert_eq(a.status, 304, "a list holding the tag matches: %ld", a.status);
    harness_resp_free(&a);
    static const char *const any[] = {"If-None-Match: *", NULL};
    a = req("GET", job_path, NULL, any);
    cr_assert_eq(a.status, 304, "* matches a result that exists");
    harness_resp_free(&a);
    const char *const gz_tag_identity[] = {h1, NULL};
    a = req("POST", "/v1/simulations", sim, gz_tag_identity);
    cr_assert_eq(a.status, 200, "the gzip tag does not match the identity form");
    cr_assert_str_eq(hdr(&a, "ETag", 0), etag);
    harness_resp_free(&a);
    static const char *const other[] = {"If-None-Match: \"a\", \"b\"", NULL};
    a = req("POST", "/v1/simulations", sim, other);
    cr_assert_eq(a.status, 200, "no tag of the list matches");
    harness_resp_free(&a);

    harness_resp_free(&z);
    harness_resp_free(&id);
    json_decref(sim);
}

Test(encoding, a_result_past_a_megabyte_is_deflated_off_the_poll_thread_and_decodes)
{
    json_t *sim = disk_request(6001); /* about 1.7 MB of JSON: deflated on the offload pool */
    static const char *const gz[] = {"Accept-Encoding: gzip", NULL};
    harness_resp z = req("POST", "/v1/simulations?wait=60", sim, gz);
    cr_assert_eq(z.status, 200, "%ld", z.status);
    cr_assert_str_eq(hdr(&z, "Content-Encoding", 0), "gzip", "a job's answer after the wait, gzip");
    harness_resp id = req("POST", "/v1/simulations", sim, NULL);
    cr_assert(id.len > (1u << 20), "past a megabyte: %zu", id.len);
    harness_resp z2 = req("POST", "/v1/simulations", sim, gz);
    cr_assert_str_eq(hdr(&z2, "Content-Encoding", 0), "gzip");
    size_t n = 0;
    char *plain = gunzip(z2.body, z2.len, &n);
    cr_assert(n == id.len && !memcmp(plain, id.body, n), "inflates to the identity bytes");
    free(plain);
    plain = gunzip(z.body, z.len, &n);
    json_t *first = json_loadb(plain, n, 0, NULL);
    cr_assert(json_is_false(json_object_get(first, "cached")), "the first answer is the job's own");
    json_decref(first);
    free(plain);
    harness_resp_free(&z);
    harness_resp_free(&z2);
    harness_resp_free(&id);
    json_decref(sim);
}

/* ---- NDJSON through gzip, decoded as it arrives ---------------------------------------- */

typedef struct live {
    z_stream z;
    char text[1 << 16]; /* inflated, not yet split into lines */
    size_t len;
    int lines, indexed, stop_after;
    int ended; /* inflate reached the end of the member */
} live;

/* libcurl's write callback: inflates what arrived and counts the whole lines it makes.
 * Returning short (stop_after reached) ends the transfer there. */
static size_t live_write(char *p, size_t size, size_t nmemb, void *arg)
{
    live *l = arg;
    size_t n = size * nmemb;
    l->z.next_in = (Bytef *)p;
    l->z.avail_in = (uInt)n;
    while (l->z.avail_in > 0 && !l->ended) {
        l->z.next_out = (Bytef *)l->text + l->len;
        l->z.avail_out = (uInt)(sizeof l->text - 1 - l->len);
        int rc = inflate(&l->z, Z_SYNC_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
            return 0;
        l->len = sizeof l->text - 1 - l->z.avail_out;
        l->ended = rc == Z_STREAM_END;
        char *nl;
        while ((nl = memchr(l->text, '\n', l->len))) {
            json_t *j = json_loadb(l->text, (size_t)(nl - l->text), 0, NULL);
            l->lines++;
            l->indexed += json_is_integer(json_object_get(j, "index"));
            json_decref(j);
            size_t k = (size_t)(nl - l->text) + 1;
            memmove(l->text, nl + 1, l->len - k);
            l->len -= k;
        }
        if (l->len == sizeof l->text - 1)
            return 0; /* a line longer than the test's buffer */
    }
    return l->stop_after && l->lines >= l->stop_after ? 0 : n;
}

/* A batch: `quick` runs of 0.5 s, then `slow` runs that go on until cancelled. */
static json_t *batch_body(int quick, int slow)
{
    json_t *base = json_deep_copy(json_object_get(disk, "simulation"));
    json_object_set_new(base, "t_end", json_real(0.5));
    json_t *runs = json_array();
    for (int k = 0; k < quick; k++)
        json_array_append_new(runs, json_pack("{s:{s:{s:f}}}", "initial", "speeds", "Omega", 1.0 + 0.1 * k));
    for (int k = 0; k < slow; k++)
        json_array_append_new(runs, json_pack("{s:f, s:{s:i}, s:{s:i}}", "t_end", 1e6, "output", "samples", 2,
                                              "integrator", "max_steps", 1000000000));
    return json_pack("{s:O, s:o, s:o}", "model", json_object_get(disk, "model"), "base", base, "runs", runs);
}

/* Streams POST /v1/batches (NDJSON, gzip) into *l; returns the harness answer (headers). */
static harness_resp stream_batch(const json_t *body, const char *path, live *l)
{
    memset(&l->z, 0, sizeof l->z);
    cr_assert_eq(inflateInit2(&l->z, 15 + 16), Z_OK);
    char *text = json_dumps(body, JSON_COMPACT);
    static const char *const hdrs[] = {"Accept: application/x-ndjson", "Accept-Encoding: gzip", NULL};
    struct curl_slist *list;
    harness_resp r;
    CURL *h = harness_easy(&srv, "POST", path, text, -1, hdrs, &list, &r);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, live_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, l);
    CURLcode rc = curl_easy_perform(h);
    cr_assert(rc == CURLE_OK || (l->stop_after && rc == CURLE_WRITE_ERROR), "the stream: %s",
              curl_easy_strerror(rc));
    harness_finish(h, &r);
    curl_easy_cleanup(h);
    curl_slist_free_all(list);
    free(text);
    inflateEnd(&l->z);
    return r;
}

Test(encoding, a_gzip_ndjson_stream_decodes_line_by_line_as_it_arrives)
{
    /* Whole: every line and the summary, then the end of the gzip member. */
    json_t *b = batch_body(6, 0);
    static live l;
    memset(&l, 0, sizeof l);
    harness_resp r = stream_batch(b, "/v1/batches?summary=1", &l);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(hdr(&r, "Content-Encoding", 0), "gzip");
    cr_assert(strstr(hdr(&r, "Content-Type", 0), "application/x-ndjson"));
    cr_assert(strstr(hdr(&r, "Vary", 0), "Accept-Encoding"));
    cr_assert(l.ended, "the gzip member is finished");
    cr_assert_eq(l.lines, 7, "6 runs and the summary: %d lines", l.lines);
    cr_assert_eq(l.indexed, 6, "each run's line has its index");
    cr_assert_eq(l.len, 0, "nothing after the last newline");
    harness_resp_free(&r);
    json_decref(b);

    /* Live: 3 quick runs and one that runs until cancelled; their lines decode while the
     * stream is open (a line is flushed as it is written), so the test stops reading
     * after them, with the batch still running. */
    b = batch_body(3, 1);
    memset(&l, 0, sizeof l);
    l.stop_after = 3;
    r = stream_batch(b, "/v1/batches", &l);
    cr_assert_eq(l.lines, 3, "three lines decoded from an unfinished stream: %d", l.lines);
    cr_assert(!l.ended, "the gzip member is not finished yet");
    char path[128];
    snprintf(path, sizeof path, "/v1/batches/%s", hdr(&r, "X-Batch-Id", 0));
    harness_resp s = req("GET", path, NULL, NULL);
    cr_assert_eq(s.status, 200, "%s: %.200s", path, s.body);
    cr_assert_str_eq(json_string_value(json_object_get(s.json, "status")), "running",
                     "the lines were decoded while the batch ran");
    harness_resp_free(&s);
    s = req("DELETE", path, NULL, NULL);
    cr_assert_eq(s.status, 200);
    harness_resp_free(&s);
    harness_resp_free(&r);
    json_decref(b);
}

Test(negotiate, ndjson_is_chosen_by_q_values_and_batch_documents_are_gzip)
{
    json_t *b = batch_body(3, 0);
    struct {
        const char *accept, *path;
        int ndjson;
    } cases[] = {
        {"Accept: application/x-ndjson", "/v1/batches?wait=60", 1},
        {"Accept: application/x-ndjson;q=0.9, application/json;q=1", "/v1/batches?wait=60", 0},
        {"Accept: application/json;q=0.5, application/x-ndjson", "/v1/batches?wait=60", 1},
        {"Accept: application/x-ndjson;q=0", "/v1/batches?wait=60&stream=1", 0},
        {"Accept: */*", "/v1/batches?wait=60", 0},
        {"Accept: */*", "/v1/batches?wait=60&stream=1", 1},
        {"Accept: application/*, application/x-ndjson;q=0.2", "/v1/batches?wait=60", 0},
        {"Accept: application/ndjson; q=1", "/v1/batches?wait=60", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *const hdrs[] = {cases[i].accept, NULL};
        harness_resp r = req("POST", cases[i].path, b, hdrs);
        cr_assert_eq(r.status, 200, "%s: %ld %.200s", cases[i].accept, r.status, r.body);
        const char *ct = hdr(&r, "Content-Type", 0);
        cr_assert_eq(strstr(ct, "ndjson") != NULL, cases[i].ndjson, "%s %s: Content-Type %s", cases[i].accept,
                     cases[i].path, ct);
        harness_resp_free(&r);
    }

    /* The finished batch's document with its results, deflated for the answer. */
    harness_resp r = req("POST", "/v1/batches?wait=60", b, NULL);
    char path[128];
    snprintf(path, sizeof path, "/v1/batches/%s", json_string_value(json_object_get(r.json, "batch_id")));
    harness_resp_free(&r);
    harness_resp id = req("GET", path, NULL, NULL);
    static const char *const gz[] = {"Accept-Encoding: gzip", NULL};
    harness_resp z = req("GET", path, NULL, gz);
    cr_assert(id.len >= 1024, "a document with results: %zu bytes", id.len);
    cr_assert_str_eq(hdr(&z, "Content-Encoding", 0), "gzip");
    cr_assert(strstr(hdr(&z, "Vary", 0), "Accept-Encoding"));
    size_t n = 0;
    char *plain = gunzip(z.body, z.len, &n);
    cr_assert(n == id.len && !memcmp(plain, id.body, n), "the batch document inflates to its identity");
    free(plain);
    harness_resp_free(&id);
    harness_resp_free(&z);
    json_decref(b);
}

/* ---- conditional requests -------------------------------------------------------------- */

Test(conditional, models_are_immutable_and_their_equations_revalidate)
{
    harness_resp r = req("POST", "/v1/models", json_object_get(disk, "model"), NULL);
    cr_assert(r.status == 201 || r.status == 200, "%.200s", r.body);
    cr_assert_str_eq(hdr(&r, "Cache-Control", 0), "", "a POST is not cached");
    char path[256], etag[256];
    snprintf(path, sizeof path, "/v1/models/%s", json_string_value(json_object_get(r.json, "model_id")));
    harness_resp_free(&r);
    cr_assert(!strncmp(path, "/v1/models/sha256:", 18), "%s", path);

    r = req("GET", path, NULL, NULL);
    cr_assert_eq(r.status, 200);
    const char *cc = hdr(&r, "Cache-Control", 0);
    cr_assert(strstr(cc, "immutable") && strstr(cc, "max-age=31536000"), "Cache-Control: %s", cc);
    snprintf(etag, sizeof etag, "%s", hdr(&r, "ETag", 0));
    harness_resp_free(&r);
    char h[400];
    snprintf(h, sizeof h, "If-None-Match: \"nope\", W/%s", etag);
    const char *const weak[] = {h, NULL};
    r = req("GET", path, NULL, weak);
    cr_assert_eq(r.status, 304, "a weak tag in a list: %ld", r.status);
    cr_assert(strstr(hdr(&r, "Cache-Control", 0), "immutable"), "the 304 keeps Cache-Control");
    harness_resp_free(&r);

    /* equations: an ETag per form, 304 without deriving again */
    char eq[300], eq_etag[300], kane_etag[300];
    snprintf(eq, sizeof eq, "%s/equations", path);
    r = req("GET", eq, NULL, NULL);
    cr_assert_eq(r.status, 200);
    snprintf(eq_etag, sizeof eq_etag, "%s", hdr(&r, "ETag", 0));
    cr_assert(eq_etag[0] == '"' && strcmp(eq_etag, etag) != 0, "equations ETag %s", eq_etag);
    harness_resp_free(&r);
    snprintf(h, sizeof h, "If-None-Match: %s", eq_etag);
    const char *const eq_inm[] = {h, NULL};
    r = req("GET", eq, NULL, eq_inm);
    cr_assert_eq(r.status, 304);
    harness_resp_free(&r);
    snprintf(eq, sizeof eq, "%s/equations?form=kane", path);
    r = req("GET", eq, NULL, eq_inm);
    cr_assert_eq(r.status, 200, "another form is another document: %ld", r.status);
    snprintf(kane_etag, sizeof kane_etag, "%s", hdr(&r, "ETag", 0));
    cr_assert(strcmp(kane_etag, eq_etag) != 0, "%s", kane_etag);
    harness_resp_free(&r);
    snprintf(h, sizeof h, "If-None-Match: %s", kane_etag);
    r = req("GET", eq, NULL, eq_inm);
    cr_assert_eq(r.status, 304, "the form's own tag: %ld", r.status);
    harness_resp_free(&r);
}

TestSuite(conditional_static, .fini = teardown, .timeout = 120);

Test(conditional_static, static_files_carry_etags)
{
    snprintf(static_dir, sizeof static_dir, "/tmp/hamel-static-XXXXXX");
    cr_assert_not_null(mkdtemp(static_dir));
    char file[HARNESS_DIR_MAX + 16];
    snprintf(file, sizeof file, "%s/index.html", static_dir);
    FILE *f = fopen(file, "w");
    fputs("<!doctype html><title>one</title>\n", f);
    fclose(f);
    char env[HARNESS_DIR_MAX + 16];
    snprintf(env, sizeof env, "HAMEL_STATIC=%s", static_dir);
    const char *const envs[] = {env, NULL};
    start_with(envs);

    harness_resp r = req("GET", "/", NULL, NULL);
    cr_assert_eq(r.status, 200);
    char etag[128], h[200];
    snprintf(etag, sizeof etag, "%s", hdr(&r, "ETag", 0));
    cr_assert(etag[0] == '"', "ETag %s", etag);
    harness_resp_free(&r);
    snprintf(h, sizeof h, "If-None-Match: %s", etag);
    const char *const inm[] = {h, NULL};
    r = req("GET", "/index.html", NULL, inm);
    cr_assert_eq(r.status, 304);
    cr_assert_str_eq(hdr(&r, "ETag", 0), etag);
    harness_resp_free(&r);

    f = fopen(file, "w"); /* a new version of the page */
    fputs("<!doctype html><title>two, longer</title>\n", f);
    fclose(f);
    r = req("GET", "/", NULL, inm);
    cr_assert_eq(r.status, 200, "a changed file is sent again");
    cr_assert(strcmp(hdr(&r, "ETag", 0), etag) != 0);
    cr_assert(strstr(r.body, "two"));
    harness_resp_free(&r);
}

/* ---- HAMEL_TOKEN_FILE ------------------------------------------------------------------- */

TestSuite(token_file, .fini = teardown, .timeout = 120);

/* Writes text into static_dir/name with mode; returns the path (a static buffer). */
static const char *token_at(const char *name, const char *text, mode_t mode)
{
    static char path[HARNESS_DIR_MAX + 32];
    if (!static_dir[0]) {
        snprintf(static_dir, sizeof static_dir, "/tmp/hamel-token-XXXXXX");
        cr_assert_not_null(mkdtemp(static_dir));
    }
    snprintf(path, sizeof path, "%s/%s", static_dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    cr_assert_eq(chmod(path, mode), 0);
    return path;
}

/* Runs hamel-server with env (a shell word list) until it exits (it is expected to refuse
 * its settings); its output into out[cap]. Returns its exit status. */
static int refused(const char *env, char *out, size_t cap)
{
    char bin[PATH_MAX], cmd[PATH_MAX + 2 * HARNESS_DIR_MAX + 512];
    harness_server_bin(bin, sizeof bin);
    snprintf(cmd, sizeof cmd, "env HAMEL_PORT=0 HAMEL_DATA='%s/data' %s timeout 20 '%s' 2>&1", static_dir,
             env, bin);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(token_file, the_token_comes_from_the_file_and_not_from_the_environment)
{
    const char *path = token_at("token", "  s3cret-from-a-file\n", 0600);
    char env[HARNESS_DIR_MAX + 64];
    snprintf(env, sizeof env, "HAMEL_TOKEN_FILE=%s", path);
    const char *const envs[] = {env, NULL};
    unsetenv("HAMEL_TOKEN");
    start_with(envs);
    harness_resp r = req("GET", "/v1/health", NULL, NULL);
    cr_assert_eq(r.status, 401, "no token: %ld", r.status);
    harness_resp_free(&r);
    static const char *const bad[] = {"Authorization: Bearer s3cret", NULL};
    r = req("GET", "/v1/health", NULL, bad);
    cr_assert_eq(r.status, 401);
    harness_resp_free(&r);
    static const char *const good[] = {"Authorization: Bearer s3cret-from-a-file", NULL};
    r = req("GET", "/v1/health", NULL, good);
    cr_assert_eq(r.status, 200, "the file's token, whitespace dropped: %ld", r.status);
    harness_resp_free(&r);
    /* what ps and /proc show of the server: the file's name, never the token */
    char proc[64], buf[8192];
    for (int k = 0; k < 2; k++) {
        snprintf(proc, sizeof proc, "/proc/%d/%s", (int)srv.pid, k ? "environ" : "cmdline");
        FILE *f = fopen(proc, "r");
        cr_assert_not_null(f, "%s", proc);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        cr_assert(memmem(buf, n, "s3cret", 6) == NULL, "%s holds the token", proc);
    }
    FILE *log = fopen(srv.log, "r");
    size_t n = log ? fread(buf, 1, sizeof buf - 1, log) : 0;
    if (log)
        fclose(log);
    cr_assert(memmem(buf, n, "warning", 7) == NULL, "a 0600 file gives no warning");
}

Test(token_file, a_file_others_can_read_warns_and_bad_files_are_refused)
{
    const char *path = token_at("open", "tok\n", 0644);
    char env[HARNESS_DIR_MAX + 64];
    snprintf(env, sizeof env, "HAMEL_TOKEN_FILE=%s", path);
    const char *const envs[] = {env, NULL};
    unsetenv("HAMEL_TOKEN");
    start_with(envs);
    char buf[8192];
    FILE *log = fopen(srv.log, "r");
    size_t n = log ? fread(buf, 1, sizeof buf - 1, log) : 0;
    if (log)
        fclose(log);
    buf[n] = '\0';
    cr_assert(strstr(buf, "warning: HAMEL_TOKEN_FILE") && strstr(buf, "644"), "the warning: %s", buf);
    static const char *const good[] = {"Authorization: Bearer tok", NULL};
    harness_resp r = req("GET", "/v1/health", NULL, good);
    cr_assert_eq(r.status, 200);
    harness_resp_free(&r);

    static char out[4096];
    char e[HARNESS_DIR_MAX + 128];
    snprintf(e, sizeof e, "HAMEL_TOKEN_FILE='%s'", token_at("empty", "\n", 0600));
    cr_assert_neq(refused(e, out, sizeof out), 0, "an empty token file is refused: %s", out);
    cr_assert(strstr(out, "no token"), "%s", out);
    snprintf(e, sizeof e, "HAMEL_TOKEN_FILE='%s/missing'", static_dir);
    cr_assert_neq(refused(e, out, sizeof out), 0, "a missing file is refused: %s", out);
    snprintf(e, sizeof e, "HAMEL_TOKEN=x HAMEL_TOKEN_FILE='%s'", token_at("both", "y\n", 0600));
    cr_assert_neq(refused(e, out, sizeof out), 0, "HAMEL_TOKEN and HAMEL_TOKEN_FILE together: %s", out);
    cr_assert(strstr(out, "both"), "%s", out);
}
