/* h_batches.c — the batches resource: POST /v1/batches, GET and DELETE /v1/batches/{id}.
 *
 * Owns the batch answers: the status document (202 + Location while unfinished, with
 * "results" when finished), long-polls with ?wait parked on the batch, and NDJSON streams
 * (Accept: application/x-ndjson or ?stream=1, q-values honoured): a content reader that
 * suspends its connection while no line is ready, so a stream never blocks a poll thread;
 * with Accept-Encoding: gzip the stream is one gzip member flushed (Z_SYNC_FLUSH) at
 * every line end, and a large status document is deflated for its answer. Creating a
 * batch and cancelling one (its jobs' cancellations are store writes) run on the offload
 * pool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gzip.h"
#include "http_conn.h"
#include "negotiate.h"

#define HTTP_STREAM_BLOCK 4096 /* NDJSON bytes handed to MHD per read (fits HTTP_CONN_MEMORY) */
#define HTTP_NDJSON "application/x-ndjson"

/* A streamed batch: the content reader's state, freed by MHD through http__stream_free. */
typedef struct http_stream {
    http_server *srv;
    struct MHD_Connection *conn;
    batch *b;
    batch_cursor cur;
    batch_waiter w;
    int gz;        /* the lines go through z (Content-Encoding: gzip) */
    int gz_end;    /* ... and the member has been finished */
    gzip_stream z; /* ... holding the deflated bytes not yet handed to MHD */
    char raw[HTTP_STREAM_BLOCK];
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
    if (st->gz) { /* deflated bytes still waiting go first; then new lines are deflated */
        for (;;) {
            size_t k = gzip_stream_take(&st->z, buf, max);
            if (k > 0)
                return (ssize_t)k;
            if (st->gz_end)
                return MHD_CONTENT_READER_END_OF_STREAM;
            ssize_t n = batch_read(bs, st->b, &st->cur, st->raw, sizeof st->raw);
            if (n == 0)
                break;
            int rc = n < 0 ? gzip_stream_finish(&st->z) : gzip_stream_add(&st->z, st->raw, (size_t)n);
            if (rc != 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            st->gz_end = n < 0;
        }
    } else {
        ssize_t n = batch_read(bs, st->b, &st->cur, buf, max);
        if (n < 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (n > 0)
            return n;
    }
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
    gzip_stream_free(&st->z);
    atomic_fetch_sub(&st->srv->streams, 1);
    free(st);
}

/* Whether the client asked for NDJSON: Accept naming application/x-ndjson (or
 * application/ndjson) with a q-value above 0 and not below application/json's (so
 * "application/x-ndjson;q=0.9, application/json" is JSON; wildcards alone never pick
 * NDJSON), or ?stream=1 unless Accept gives NDJSON q=0. */
static int http__wants_stream(http_conn *c)
{
    const char *accept = http__header(c, MHD_HTTP_HEADER_ACCEPT);
    negotiate_match how = NEGOTIATE_NONE, how2 = NEGOTIATE_NONE;
    double q = negotiate_accept(accept, HTTP_NDJSON, &how);
    double q2 = negotiate_accept(accept, "application/ndjson", &how2);
    if (how2 > how || (how2 == how && q2 > q)) {
        q = q2;
        how = how2;
    }
    double qjson = negotiate_accept(accept, "application/json", NULL);
    if (accept && how == NEGOTIATE_EXACT && q > 0 && q >= qjson)
        return 1;
    return http__flag(c, "stream") && (!accept || how == NEGOTIATE_NONE || q > 0);
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
    if (http__gzip_ok(c)) {
        if (gzip_stream_init(&st->z, GZIP_LEVEL_ONCE) != 0) {
            http__stream_free(st);
            return http__error(c, HAMEL_E_INTERNAL, "out of memory");
        }
        st->gz = 1;
    }
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
    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    if (st->gz)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    return http__send(c, MHD_HTTP_OK, r, HTTP_NDJSON, 0);
}

/* Answers with c->batch.b's status document. `sync` (POST): unfinished is 202, and the
 * answer carries Location. A finished batch carries "results" unless `bare`. */
static enum MHD_Result http__batch_answer(http_conn *c, int sync, int bare)
{
    batches *bs = c->srv->d.batches;
    batch *b = c->batch.b;
    int done = batch_finished(bs, b);
    size_t len = 0;
    char *text = batch_render(bs, b, !bare, &len);
    if (!text)
        return http__error(c, HAMEL_E_INTERNAL, "out of memory");
    size_t sent = 0;
    struct MHD_Response *r = http__encoded_response(c, text, len, &sent);
    char location[BATCH_ID_LEN + 16];
    snprintf(location, sizeof location, "/v1/batches/%s", batch_id(b));
    if (r && sync)
        MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, location);
    return http__send(c, sync && !done ? MHD_HTTP_ACCEPTED : MHD_HTTP_OK, r, "application/json", sent);
}

/* Parks the connection on c->batch.b until it finishes or `wait` seconds pass. */
static enum MHD_Result http__park_batch(http_conn *c, double wait)
{
    http__suspend_on(c, &c->batch.waiter, wait);
    if (batch_wait(c->srv->d.batches, c->batch.b, &c->batch.waiter) != 0)
        http__wake(c); /* already finished: resume at once */
    return MHD_YES;
}

int http__batch_work(http_conn *c, engine_model *m)
{
    if (http__wait(c) < 0)
        return 0; /* answered 400 on the resumed call, before anything is done */
    batch *b = NULL;
    c->work.rc = batch_create(c->srv->d.batches, m, c->work.body, &b, &c->work.problem);
    c->batch.b = b;
    c->batch.created = 1;
    return 0;
}

/* Offloaded: batch_create for c->work.body on c->work.model. */
static void http__run_batch_create(void *arg)
{
    http_conn *c = arg;
    http__batch_work(c, c->work.model);
}

/* The answer to a POST /v1/batches once its batch is created: a stream, a long-poll or
 * the status document. */
static enum MHD_Result http__resume_batch_create(http_conn *c)
{
    c->batch.created = 0;
    json_t *problem = c->work.problem;
    c->work.problem = NULL;
    int rc = c->work.rc;
    if (rc != 0)
        return rc == HAMEL_E_UNAVAILABLE
                   ? http__problem_h(c, problem, MHD_HTTP_HEADER_RETRY_AFTER, HTTP_RETRY_AFTER_DOWN)
                   : http__problem(c, problem);
    if (http__wants_stream(c)) {
        batch *b = c->batch.b;
        c->batch.b = NULL;
        return http__batch_stream(c, b);
    }
    double wait = http__wait(c);
    if (wait > 0)
        return http__park_batch(c, wait);
    return http__batch_answer(c, 1, 0);
}

enum MHD_Result http__post_batch(http_conn *c, json_t *body)
{
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
    if (c->batch.created) { /* created with the model's compilation, on the offload pool */
        engine_model_release(m);
        return http__resume_batch_create(c);
    }
    /* Validating and starting thousands of runs takes a while: on the offload pool. */
    http__hold_work(c, m, body);
    return http__offload(c, http__run_batch_create, http__resume_batch_create);
}

/* Offloaded: cancels c->batch.b and its runs in flight (each job's cancellation is
 * recorded in the store). */
static void http__run_batch_cancel(void *arg)
{
    http_conn *c = arg;
    c->work.rc = batch_cancel(c->srv->d.batches, c->batch.b);
}

static enum MHD_Result http__batch_cancel_answer(http_conn *c)
{
    return c->work.rc == 0 ? http__batch_answer(c, 0, 1)
                           : http__error(c, c->work.rc, "the batch has already finished");
}

enum MHD_Result http__batch(http_conn *c)
{
    batches *bs = c->srv->d.batches;
    batch *b = batches_find(bs, c->id);
    if (!b)
        return http__error(c, HAMEL_E_NOT_FOUND, "no batch has this id (batches are kept in memory only)");
    if (c->method == HTTP_DELETE) {
        c->batch.b = b;
        /* off the poll thread: its jobs' cancellations are store writes, and it waits for
         * the batch's running blocks to stop */
        return http__offload_read(c, http__run_batch_cancel, http__batch_cancel_answer);
    }
    if (http__wants_stream(c))
        return http__batch_stream(c, b);
    c->batch.b = b;
    double wait = http__wait(c);
    if (wait < 0)
        return http__bad_wait(c);
    if (wait > 0)
        return http__park_batch(c, wait);
    return http__batch_answer(c, 0, 0);
}

enum MHD_Result http__batch_wake(http_conn *c)
{
    return http__batch_answer(c, http__route_has(c, HTTP_ROUTE_SUBMITS), 0);
}

void http__batch_release(http_conn *c)
{
    if (!c->batch.b)
        return;
    batch_unpark(c->srv->d.batches, &c->batch.waiter);
    batch_release(c->srv->d.batches, c->batch.b);
}
