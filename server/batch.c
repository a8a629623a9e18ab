/* batch.c — batch records, run merging and validation, gradual feeding of the pool,
 * NDJSON lines, long-poll and stream waiters, and the module's timer thread.
 *
 * Lock order: bs->lock is the only lock here and is never held across a call into the
 * pool, the caches, the store or a wake function. A run in flight holds a reference on
 * its batch from the moment it is claimed until its completion has been recorded. */
#include "batch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ids.h"
#include "isolate.h"
#include "jsonout.h"
#include "merge.h"
#include "metrics.h"

#define BATCH_CLAIM_MAX 64         /* runs claimed per pass of the feeder */
#define BATCH_RETRY_SECONDS 0.05   /* queue full with nothing of ours in flight: retry */
#define BATCH_RUN_PARK_SECONDS 1e9 /* a run's job waiter: woken by the job, not a clock */
#define BATCH_MAX_REPORTED 20      /* invalid runs described in one 422 */
#define BATCH_PATH_MAX 256         /* a problem path with its runs[i] prefix */
#define BATCH_TIMER_IDLE_SECONDS 3600.0
#define BATCH_BLOCK_MAX 1024    /* runs in one block: one worker call, one store commit */
#define BATCH_BLOCK_SECONDS 0.1 /* a block's aim on a worker: its lines come this often */
#define BATCH_CANCEL_WAIT 15.0  /* DELETE waits for running blocks to stop at most this */
#define BATCH_NATIVE_SHARE 0.5  /* a block waits for the native tier up to this share of */
#define BATCH_NATIVE_MAX 10.0   /* ... the work left per worker, at most this, seconds */

enum { RUN_PENDING, RUN_CLAIMED, RUN_INFLIGHT, RUN_FINISHED };
enum { RUN_DONE, RUN_FAILED, RUN_CANCELLED };

/* What each line carries besides index, status, job_id and cached. */
enum {
    FIELD_RUN = 1 << 0,
    FIELD_FINAL = 1 << 1,
    FIELD_CHECKS = 1 << 2,
    FIELD_STATS = 1 << 3,
    FIELD_TRAJECTORY = 1 << 4,
    FIELD_HAMEL = 1 << 5,
    FIELD_EVENTS = 1 << 6, /* events, stopped_by, events_dropped: only runs with events have them */
};
#define FIELD_DEFAULT (FIELD_FINAL | FIELD_CHECKS | FIELD_STATS | FIELD_EVENTS)
static const char *const batch__field_names[] = {"run",        "final", "checks", "stats",
                                                 "trajectory", "hamel", "events"};
#define BATCH_NFIELDS (sizeof batch__field_names / sizeof batch__field_names[0])

typedef struct batch_block batch_block;

typedef struct batch_run {
    batch *b;
    size_t index;
    job *job;     /* in flight: the pool's job (a reference) */
    job_waiter w; /* in flight: parked on job */
    blob *line;   /* finished: one NDJSON line, '\n'-terminated */
    char key[80];
    char job_id[JOB_ID_LEN + 1];
    unsigned char state, status, cached;
} batch_run;

struct batch {
    batches *bs;
    char id[BATCH_ID_LEN + 1];
    char model_id[80];
    int refs; /* under bs->lock; the kept list holds one */
    engine_model *model;
    json_t *base; /* deep copies; dropped when the batch finishes */
    json_t *partials;
    unsigned fields;
    size_t count, cursor, inflight, finished, succeeded, failed, cancelled, cached;
    size_t *order; /* run indices in completion order; `finished` of them */
    batch_run *runs;
    size_t bytes; /* of its lines */
    int cancel, done, kept;
    double retry_at; /* monotonic; 0: none */
    double t0, t1;   /* monotonic: created, finished */
    batch_waiter *streams;
    batch *prev, *next; /* kept list, newest first */
    /* blocks (without a shared queue): the runs are fed as tasks of up to
     * BATCH_BLOCK_MAX runs, each one worker call and one store commit */
    int blocks_on;
    batch_block *blocks; /* in flight (queued or running) */
    size_t nblocks;
    double run_seconds; /* one run's time on a worker, as measured (0: not yet) */
};

/* A block of runs in flight: a task of the pool. */
struct batch_block {
    batch *b;
    engine_control ctl;
    int started, dropped; /* under bs->lock: on a worker; cancelled before it started */
    batch_block *prev, *next;
    size_t n;
    batch_run *runs[];
};

struct batches {
    pthread_mutex_t lock;
    pthread_cond_t timer;
    pthread_t timer_thread;
    int timer_started, exiting;
    batches_config cfg;
    jobs *pool;
    cache *results;
    store *st;
    batch *head, *tail;
    size_t kept, active, bytes;
    batch_waiter *waiters; /* long-polls */
    pthread_cond_t ended;  /* a block ended (batch__cancel waits for running ones) */
};

/* ---- records ------------------------------------------------------------------------ */

/* Frees what a finished batch no longer needs (outside the lock: a model can be heavy). */
static void batch__drop_inputs(engine_model *m, json_t *base, json_t *partials)
{
    engine_model_release(m);
    json_decref(base);
    json_decref(partials);
}

static void batch__destroy(batch *b)
{
    for (size_t i = 0; i < b->count && b->runs; i++)
        blob_release(b->runs[i].line);
    free(b->runs);
    free(b->order);
    batch__drop_inputs(b->model, b->base, b->partials);
    free(b);
}

/* Drops a reference under bs->lock; returns b if it must be destroyed after unlocking. */
static batch *batch__unref_locked(batch *b) { return --b->refs == 0 ? b : NULL; }

void batch_release(batches *bs, batch *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&bs->lock);
    batch *dead = batch__unref_locked(b);
    pthread_mutex_unlock(&bs->lock);
    if (dead)
        batch__destroy(dead);
}

/* Removes b from the kept list. Caller holds bs->lock. */
static void batch__unlink_locked(batches *bs, batch *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        bs->head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        bs->tail = b->prev;
    b->prev = b->next = NULL;
    b->kept = 0;
    bs->kept--;
    bs->bytes -= b->bytes;
}

/* Evicts the oldest finished batches (but `keep`) while the records or their lines are
 * over budget. Caller holds bs->lock; batches whose last reference went are chained on
 * *dead through next. */
static void batch__evict_locked(batches *bs, batch *keep, batch **dead)
{
    batch *b = bs->tail;
    while (b && (bs->kept > bs->cfg.max_kept || bs->bytes > bs->cfg.max_bytes)) {
        batch *prev = b->prev;
        if (b->done && b != keep) {
            batch__unlink_locked(bs, b);
            if (batch__unref_locked(b)) {
                b->next = *dead;
                *dead = b;
            }
        }
        b = prev;
    }
}

static void batch__destroy_chain(batch *dead)
{
    while (dead) {
        batch *n = dead->next;
        batch__destroy(dead);
        dead = n;
    }
}

/* ---- waiters ------------------------------------------------------------------------ */

/* The list w is on: its batch's stream readers, or the module's long-polls. */
static batch_waiter **batch__list(batches *bs, batch_waiter *w)
{
    return w->stream ? &((batch *)w->on)->streams : &bs->waiters;
}

/* ---- lines -------------------------------------------------------------------------- */

static blob *batch__dump_line(json_t *line)
{
    size_t n = 0;
    char *text = jsonout_dumps(line, &n);
    json_decref(line);
    if (!text)
        return NULL;
    blob *b = malloc(sizeof *b + n + 2);
    if (b) {
        atomic_init(&b->refs, 1);
        atomic_init(&b->gz, NULL);
        b->aux = 0;
        b->len = n + 1;
        b->data = (char *)(b + 1);
        memcpy(b->data, text, n);
        b->data[n] = '\n';
        b->data[n + 1] = '\0';
    }
    free(text);
    return b;
}

/* The last sample of every series of a trajectory group ({"name": [...]}, ...). */
static json_t *batch__last(const json_t *group)
{
    json_t *out = json_object();
    const char *name;
    json_t *series;
    json_object_foreach((json_t *)group, name, series)
    {
        size_t n = json_array_size(series);
        if (n)
            json_object_set(out, name, json_array_get(series, n - 1));
    }
    return out;
}

/* {"t", "q", "speeds", "qdot", "multipliers"?} at the end of a trajectory. */
static json_t *batch__final(const json_t *tr)
{
    json_t *t = json_object_get(tr, "t");
    size_t n = json_array_size(t);
    json_t *fin = json_object();
    if (n)
        json_object_set(fin, "t", json_array_get(t, n - 1));
    static const char *const groups[] = {"q", "speeds", "qdot", "multipliers"};
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        json_t *grp = json_object_get(tr, groups[g]);
        if (json_is_object(grp))
            json_object_set_new(fin, groups[g], batch__last(grp));
    }
    return fin;
}

/* The checks without their per-sample series (those come with "trajectory"). */
static json_t *batch__checks(const json_t *checks, unsigned fields)
{
    json_t *c = json_deep_copy(checks);
    if (!c || (fields & FIELD_TRAJECTORY))
        return c;
    json_object_del(json_object_get(c, "energy"), "values");
    json_object_del(json_object_get(c, "constraints"), "max_abs_series");
    const char *name;
    json_t *inv;
    json_object_foreach(json_object_get(c, "invariants"), name, inv) { json_object_del(inv, "values"); }
    return c;
}

static json_t *batch__line_head(size_t index, const char *status, const char *job_id)
{
    json_t *line = json_object();
    json_object_set_new(line, "index", json_integer((json_int_t)index));
    json_object_set_new(line, "status", json_string(status));
    if (job_id && job_id[0])
        json_object_set_new(line, "job_id", json_string(job_id));
    return line;
}

/* ---- lines from the result's text ---------------------------------------------------
 * A result body is written by jsonout (compact, reals in their shortest form), so a
 * member copied from its text is byte for byte what parsing it and writing it again
 * gives. The line of a done run is built from spans of the body: only "checks" (whose
 * series are taken out) is parsed. Parsing the whole body with jansson cost more than
 * the integration of a small run. */

typedef struct bl_span {
    const char *p, *e; /* [p, e): one JSON value; p == NULL: absent */
} bl_span;

static const char *bl__ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

/* The end of the string starting at p ('"'), past its closing quote, or NULL. */
static const char *bl__string_end(const char *p, const char *e)
{
    for (p++; p < e; p++) {
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

/* The end of the value starting at p (no leading space), or NULL when malformed. */
static const char *bl__value_end(const char *p, const char *e)
{
    if (p >= e)
        return NULL;
    if (*p == '"')
        return bl__string_end(p, e);
    if (*p != '{' && *p != '[') {
        while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n')
            p++;
        return p;
    }
    int depth = 0;
    for (; p < e; p++) {
        if (*p == '"') {
            p = bl__string_end(p, e);
            if (!p)
                return NULL;
            p--;
        } else if (*p == '[' && p + 1 < e && (p[1] == '-' || (p[1] >= '0' && p[1] <= '9'))) {
            /* a series of numbers (most of a result): its end found with memchr */
            const char *q = memchr(p, ']', (size_t)(e - p));
            size_t n = q ? (size_t)(q - p) : 0;
            if (q && !memchr(p + 1, '[', n) && !memchr(p, '{', n) && !memchr(p, '"', n)) {
                if (depth == 0)
                    return q + 1;
                p = q;
            } else {
                depth++;
            }
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if ((*p == '}' || *p == ']') && --depth == 0) {
            return p + 1;
        }
    }
    return NULL;
}

/* Steps through a container: *p at '{' or '[' on the first call (start = 1), then where
 * the previous call left it. Sets the member's key (objects; without quotes, raw) and
 * value. Returns 1 for a member, 0 at the end, -1 when malformed. */
static int bl__next(const char **p, const char *e, int start, bl_span *key, bl_span *val)
{
    const char *q = *p;
    int object = 0;
    if (start) {
        object = *q == '{';
        q = bl__ws(q + 1, e);
        if (q < e && (*q == '}' || *q == ']')) {
            *p = q + 1;
            return 0;
        }
    } else {
        q = bl__ws(q, e);
        if (q < e && (*q == '}' || *q == ']')) {
            *p = q + 1;
            return 0;
        }
        if (q >= e || *q != ',')
            return -1;
        q = bl__ws(q + 1, e);
    }
    if (q < e && *q == '"' && (start ? object : key != NULL)) {
        const char *ke = bl__string_end(q, e);
        if (!ke)
            return -1;
        key->p = q + 1;
        key->e = ke - 1;
        q = bl__ws(ke, e);
        if (q >= e || *q != ':')
            return -1;
        q = bl__ws(q + 1, e);
    } else if (key) {
        key->p = key->e = NULL;
    }
    const char *ve = bl__value_end(q, e);
    if (!ve)
        return -1;
    val->p = q;
    val->e = ve;
    *p = ve;
    return 1;
}

static int bl__key_is(const bl_span *k, const char *name)
{
    size_t n = strlen(name);
    return k->p && (size_t)(k->e - k->p) == n && !memcmp(k->p, name, n);
}

/* The values of members names[0..n-1] of the object v (absent: p NULL), in one pass;
 * -1 when malformed. */
static int bl__members(bl_span v, const char *const *names, size_t n, bl_span *out)
{
    for (size_t i = 0; i < n; i++)
        out[i].p = out[i].e = NULL;
    if (!v.p || *v.p != '{')
        return 0;
    const char *p = v.p;
    bl_span k, x;
    int rc;
    for (int start = 1; (rc = bl__next(&p, v.e, start, &k, &x)) == 1; start = 0)
        for (size_t i = 0; i < n; i++)
            if (!out[i].p && bl__key_is(&k, names[i])) {
                out[i] = x;
                break;
            }
    return rc;
}

/* The last element of the array v (absent when v is not a non-empty array); -1 when
 * malformed. */
static int bl__last(bl_span v, bl_span *out)
{
    out->p = out->e = NULL;
    if (!v.p || *v.p != '[')
        return 0;
    /* A series of numbers (what a trajectory holds): its last element is after the last
     * comma, found from the end without walking the series. */
    const char *e = v.e - 1; /* at ']' */
    const char *q = e;
    while (q > v.p && q[-1] != ',' && q[-1] != '[' && q[-1] != '"' && q[-1] != '}' && q[-1] != ']')
        q--;
    if (q > v.p && (q[-1] == ',' || q[-1] == '[') && q < e && *e == ']') {
        const char *b = bl__ws(q, e), *f = e;
        while (f > b && (f[-1] == ' ' || f[-1] == '\n' || f[-1] == '\r' || f[-1] == '\t'))
            f--;
        if (b < f && *b != '"' && *b != '{' && *b != '[') {
            out->p = b;
            out->e = f;
            return 0;
        }
    }
    const char *p = v.p;
    bl_span x;
    int rc;
    for (int start = 1; (rc = bl__next(&p, v.e, start, NULL, &x)) == 1; start = 0)
        *out = x;
    return rc;
}

static void bl__put_member(jsonout *o, const char *name, bl_span v)
{
    jsonout_raw(o, ",", 1);
    jsonout_string(o, name, strlen(name));
    jsonout_raw(o, ":", 1);
    jsonout_raw(o, v.p, (size_t)(v.e - v.p));
}

/* "final" from the trajectory's text (batch__final's result). Returns -1 when malformed. */
static int bl__final(jsonout *o, bl_span tr)
{
    static const char *const names[] = {"t", "q", "speeds", "qdot", "multipliers"};
    bl_span m[5], last;
    if (bl__members(tr, names, 5, m) < 0 || bl__last(m[0], &last) < 0)
        return -1;
    jsonout_raw(o, ",\"final\":{", 10);
    int first = 1;
    if (last.p) {
        jsonout_raw(o, "\"t\":", 4);
        jsonout_raw(o, last.p, (size_t)(last.e - last.p));
        first = 0;
    }
    for (size_t g = 1; g < 5; g++) {
        bl_span grp = m[g];
        if (!grp.p || *grp.p != '{')
            continue;
        jsonout_raw(o, ",", first ? 0 : 1);
        first = 0;
        jsonout_string(o, names[g], strlen(names[g]));
        jsonout_raw(o, ":{", 2);
        const char *p = grp.p;
        bl_span k, series;
        int rc, inner = 1;
        for (int start = 1; (rc = bl__next(&p, grp.e, start, &k, &series)) == 1; start = 0) {
            if (bl__last(series, &last) < 0)
                return -1;
            if (!last.p)
                continue;
            jsonout_raw(o, ",", inner ? 0 : 1);
            inner = 0;
            jsonout_raw(o, k.p - 1, (size_t)(k.e - k.p) + 2); /* the key as written */
            jsonout_raw(o, ":", 1);
            jsonout_raw(o, last.p, (size_t)(last.e - last.p));
        }
        if (rc < 0)
            return -1;
        jsonout_raw(o, "}", 1);
    }
    jsonout_raw(o, "}", 1);
    return 0;
}

/* The object v written without its member `skip` (NULL: none). -1 when malformed. */
static int bl__copy_except(jsonout *o, bl_span v, const char *skip)
{
    if (!v.p || *v.p != '{') {
        jsonout_raw(o, v.p, (size_t)(v.e - v.p));
        return v.p ? 0 : -1;
    }
    jsonout_raw(o, "{", 1);
    const char *p = v.p;
    bl_span k, x;
    int rc, first = 1;
    for (int start = 1; (rc = bl__next(&p, v.e, start, &k, &x)) == 1; start = 0) {
        if (skip && bl__key_is(&k, skip))
            continue;
        jsonout_raw(o, ",", first ? 0 : 1);
        first = 0;
        jsonout_raw(o, k.p - 1, (size_t)(k.e - k.p) + 2); /* the key as written */
        jsonout_raw(o, ":", 1);
        jsonout_raw(o, x.p, (size_t)(x.e - x.p));
    }
    jsonout_raw(o, "}", 1);
    return rc;
}

/* "checks" from its text without the per-sample series (batch__checks' result): energy
 * without "values", constraints without "max_abs_series", each invariant without
 * "values". Returns -1 when malformed. */
static int bl__checks(jsonout *o, bl_span v)
{
    if (*v.p != '{')
        return -1;
    jsonout_raw(o, "{", 1);
    const char *p = v.p;
    bl_span k, x, k2, x2;
    int rc, first = 1;
    for (int start = 1; (rc = bl__next(&p, v.e, start, &k, &x)) == 1; start = 0) {
        jsonout_raw(o, ",", first ? 0 : 1);
        first = 0;
        jsonout_raw(o, k.p - 1, (size_t)(k.e - k.p) + 2);
        jsonout_raw(o, ":", 1);
        int r = 0;
        if (bl__key_is(&k, "energy")) {
            r = bl__copy_except(o, x, "values");
        } else if (bl__key_is(&k, "constraints")) {
            r = bl__copy_except(o, x, "max_abs_series");
        } else if (bl__key_is(&k, "invariants") && *x.p == '{') {
            jsonout_raw(o, "{", 1);
            const char *q = x.p;
            int inner = 1;
            for (int s2 = 1; r >= 0 && (r = bl__next(&q, x.e, s2, &k2, &x2)) == 1; s2 = 0) {
                jsonout_raw(o, ",", inner ? 0 : 1);
                inner = 0;
                jsonout_raw(o, k2.p - 1, (size_t)(k2.e - k2.p) + 2);
                jsonout_raw(o, ":", 1);
                r = bl__copy_except(o, x2, "values");
            }
            jsonout_raw(o, "}", 1);
        } else {
            jsonout_raw(o, x.p, (size_t)(x.e - x.p));
        }
        if (r < 0)
            return -1;
    }
    jsonout_raw(o, "}", 1);
    return rc;
}

static json_t *batch__checks(const json_t *checks, unsigned fields);

/* batch__line_done from the body's text; NULL when the text is not what the engine
 * writes (the caller then parses it). */
static blob *batch__line_fast(const batch *b, batch_run *r, const blob *result, int cached)
{
    /* the top-level members used, found in one pass over the body */
    enum {
        M_JOB_ID,
        M_TRAJECTORY,
        M_WARNINGS,
        M_PROVENANCE,
        M_CHECKS,
        M_STATS,
        M_HAMEL,
        M_EVENTS,
        M_EVENTS_DROPPED,
        M_STOPPED_BY,
        M_COUNT
    };
    static const char *const names[M_COUNT] = {"job_id",         "trajectory", "warnings", "provenance",
                                               "checks",         "stats",      "hamel",    "events",
                                               "events_dropped", "stopped_by"};
    bl_span res = {result->data, result->data + result->len}, m[M_COUNT], v;
    res.p = bl__ws(res.p, res.e);
    if (res.p >= res.e || *res.p != '{' || bl__members(res, names, M_COUNT, m) < 0)
        return NULL;
    char jid_buf[sizeof r->job_id];
    const char *jid = r->job_id;
    if (cached && (v = m[M_JOB_ID]).p) { /* the job that computed it: a plain string of hex digits */
        if (*v.p != '"' || (size_t)(v.e - v.p) - 2 >= sizeof jid_buf ||
            memchr(v.p + 1, '\\', (size_t)(v.e - v.p) - 2))
            return NULL;
        memcpy(jid_buf, v.p + 1, (size_t)(v.e - v.p) - 2);
        jid_buf[v.e - v.p - 2] = '\0';
        jid = jid_buf;
    }
    jsonout o;
    if (jsonout_init(&o, result->len / 2 + 512) < 0)
        return NULL;
    char head[64];
    int n = snprintf(head, sizeof head, "{\"index\":%zu,\"status\":\"done\"", r->index);
    jsonout_raw(&o, head, (size_t)n);
    if (jid[0]) {
        jsonout_raw(&o, ",\"job_id\":", 10);
        jsonout_string(&o, jid, strlen(jid));
    }
    jsonout_raw(&o, cached ? ",\"cached\":true" : ",\"cached\":false", cached ? 14 : 15);
    unsigned f = b->fields;
    if (f & FIELD_RUN) {
        jsonout_raw(&o, ",\"run\":", 7);
        jsonout_value(&o, json_array_get(b->partials, r->index));
    }
    int bad = 0;
    for (int i = M_WARNINGS; i <= M_PROVENANCE; i++)
        if (m[i].p)
            bl__put_member(&o, names[i], m[i]);
    if (f & FIELD_FINAL)
        bad = bl__final(&o, m[M_TRAJECTORY]) < 0;
    if (!bad && (f & FIELD_CHECKS) && (v = m[M_CHECKS]).p) {
        jsonout_raw(&o, ",\"checks\":", 10);
        if (f & FIELD_TRAJECTORY)
            jsonout_raw(&o, v.p, (size_t)(v.e - v.p));
        else
            bad = bl__checks(&o, v) < 0;
    }
    static const unsigned field_of[M_COUNT] = {
        [M_STATS] = FIELD_STATS,   [M_TRAJECTORY] = FIELD_TRAJECTORY, [M_HAMEL] = FIELD_HAMEL,
        [M_EVENTS] = FIELD_EVENTS, [M_EVENTS_DROPPED] = FIELD_EVENTS, [M_STOPPED_BY] = FIELD_EVENTS};
    static const int pass2[] = {M_STATS, M_TRAJECTORY, M_HAMEL, M_EVENTS, M_EVENTS_DROPPED, M_STOPPED_BY};
    for (size_t i = 0; !bad && i < sizeof pass2 / sizeof pass2[0]; i++)
        if ((f & field_of[pass2[i]]) && m[pass2[i]].p)
            bl__put_member(&o, names[pass2[i]], m[pass2[i]]);
    jsonout_raw(&o, "}\n", 2);
    size_t len = 0;
    char *text = jsonout_finish(&o, &len);
    if (bad || !text) {
        free(text);
        return NULL;
    }
    if (cached && jid != r->job_id)
        snprintf(r->job_id, sizeof r->job_id, "%s", jid);
    return blob_take_len(text, len); /* frees text when it fails */
}

/* The line of a run done with `result` (a job body); a cached one takes its job_id. b's
 * partials are alive: the batch cannot finish before this run does. */
static blob *batch__line_done(const batch *b, batch_run *r, const blob *result, int cached)
{
    blob *fast = batch__line_fast(b, r, result, cached);
    if (fast)
        return fast;

    json_t *res = json_loadb(result->data, result->len, 0, NULL);
    const char *jid = json_string_value(json_object_get(res, "job_id"));
    if (cached && jid) /* the job that computed it; a run in flight knows its own */
        snprintf(r->job_id, sizeof r->job_id, "%s", jid);
    json_t *line = batch__line_head(r->index, "done", r->job_id);
    json_object_set_new(line, "cached", json_boolean(cached));
    unsigned f = b->fields;
    if (f & FIELD_RUN)
        json_object_set_new(line, "run", json_deep_copy(json_array_get(b->partials, r->index)));
    json_t *tr = json_object_get(res, "trajectory");
    /* whatever the fields, a run's failed checks and its provenance are said */
    if (json_object_get(res, "warnings"))
        json_object_set(line, "warnings", json_object_get(res, "warnings"));
    if (json_object_get(res, "provenance"))
        json_object_set(line, "provenance", json_object_get(res, "provenance"));
    if (f & FIELD_FINAL)
        json_object_set_new(line, "final", batch__final(tr));
    if ((f & FIELD_CHECKS) && json_object_get(res, "checks"))
        json_object_set_new(line, "checks", batch__checks(json_object_get(res, "checks"), f));
    if ((f & FIELD_STATS) && json_object_get(res, "stats"))
        json_object_set(line, "stats", json_object_get(res, "stats"));
    if ((f & FIELD_TRAJECTORY) && tr)
        json_object_set(line, "trajectory", tr);
    if ((f & FIELD_HAMEL) && json_object_get(res, "hamel"))
        json_object_set(line, "hamel", json_object_get(res, "hamel"));
    static const char *const ev_members[] = {"events", "events_dropped", "stopped_by"};
    for (size_t i = 0; (f & FIELD_EVENTS) && i < sizeof ev_members / sizeof *ev_members; i++)
        if (json_object_get(res, ev_members[i]))
            json_object_set(line, ev_members[i], json_object_get(res, ev_members[i]));
    json_decref(res);
    return batch__dump_line(line);
}

/* The line of a run that did not finish: `problem` is taken. */
static blob *batch__line_problem(const batch *b, batch_run *r, int status, json_t *problem)
{
    json_t *line = batch__line_head(r->index, status == RUN_CANCELLED ? "cancelled" : "failed", r->job_id);
    if (b->fields & FIELD_RUN)
        json_object_set_new(line, "run", json_deep_copy(json_array_get(b->partials, r->index)));
    if (!(b->fields & FIELD_TRAJECTORY))
        json_object_del(problem, "partial");
    json_object_set_new(line, "problem", problem ? problem : hamel_problem_new(HAMEL_E_INTERNAL, NULL));
    return batch__dump_line(line);
}

/* A line kept in place of one that does not fit the byte budget. Caller holds the lock. */
static blob *batch__line_stub(const batch_run *r)
{
    char text[256];
    int n = snprintf(text, sizeof text,
                     "{\"index\":%zu,\"status\":\"done\",\"job_id\":\"%s\",\"cached\":%s,\"omitted\":true,"
                     "\"result\":\"/v1/jobs/%s\"}\n",
                     r->index, r->job_id, r->cached ? "true" : "false", r->job_id);
    return blob_new(text, (size_t)n);
}

/* ---- completion --------------------------------------------------------------------- */

/* Marks b finished. Caller holds bs->lock; long-poll waiters go on *fired. */
static void batch__complete_locked(batches *bs, batch *b, batch_waiter **fired)
{
    b->done = 1;
    b->t1 = jobs_now();
    bs->active--;
    waiters_detach_on(&bs->waiters, b, fired);
    metrics_batch(b->cancel ? METRICS_BATCH_CANCELLED : METRICS_BATCH_DONE);
}

/* Records the end of runs rs[0..n) with their lines (taken; NULL when out of memory),
 * under one lock and with one wake of the batch's readers. `claimed` says whether the
 * runs counted as in flight. */
static void batch__finish_runs(batches *bs, batch *b, batch_run *const *rs, blob **lines, const int *status,
                               int cached, int claimed, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!lines[i])
            lines[i] = batch__line_problem(b, rs[i], RUN_FAILED,
                                           hamel_problem_new(HAMEL_E_INTERNAL, "out of memory"));
    batch_waiter *fired = NULL;
    batch *dead = NULL;
    engine_model *m = NULL;
    json_t *base = NULL, *partials = NULL;
    pthread_mutex_lock(&bs->lock);
    for (size_t i = 0; i < n; i++) {
        batch_run *r = rs[i];
        blob *line = lines[i];
        r->state = RUN_FINISHED;
        r->status = (unsigned char)status[i];
        r->cached = (unsigned char)cached;
        if (claimed)
            b->inflight--;
        b->order[b->finished++] = r->index;
        if (status[i] == RUN_DONE)
            b->succeeded++;
        else if (status[i] == RUN_FAILED)
            b->failed++;
        else
            b->cancelled++;
        if (cached)
            b->cached++;
        if (line && b->kept && bs->bytes + line->len > bs->cfg.max_bytes)
            batch__evict_locked(bs, b, &dead);
        if (line && status[i] == RUN_DONE && bs->bytes + line->len > bs->cfg.max_bytes) {
            blob *stub = batch__line_stub(r);
            if (stub) {
                blob_release(line);
                line = stub;
            }
        }
        r->line = line;
        if (line) {
            b->bytes += line->len;
            if (b->kept)
                bs->bytes += line->len;
        }
    }
    waiters_detach_all(&b->streams, &fired);
    if (b->finished == b->count && !b->done) {
        batch__complete_locked(bs, b, &fired);
        m = b->model;
        base = b->base;
        partials = b->partials;
        b->model = NULL;
        b->base = b->partials = NULL;
    }
    pthread_mutex_unlock(&bs->lock);
    for (size_t i = 0; i < n; i++)
        metrics_batch_run(cached                    ? METRICS_RUN_CACHED
                          : status[i] == RUN_DONE   ? METRICS_RUN_DONE
                          : status[i] == RUN_FAILED ? METRICS_RUN_FAILED
                                                    : METRICS_RUN_CANCELLED);
    waiters_fire(fired);
    batch__drop_inputs(m, base, partials);
    batch__destroy_chain(dead);
}

/* batch__finish_runs of one run. */
static void batch__finish_run(batches *bs, batch *b, batch_run *r, blob *line, int status, int cached,
                              int claimed)
{
    batch__finish_runs(bs, b, &r, &line, &status, cached, claimed, 1);
}

/* A claimed run is over: drops the reference it held on its batch. */
static void batch__run_end(batches *bs, batch *b) { batch_release(bs, b); }

static void batch__feed(batches *bs, batch *b);

/* Records the end of a run's job. `feed`: queue more of the batch (from the pool's wake;
 * the feeder itself calls this with 0 for a job that finished before it could park, and
 * carries on feeding, so finishing runs never recurse). */
static void batch__run_complete(batch_run *r, int feed)
{
    batch *b = r->b;
    batches *bs = b->bs;
    job_view v;
    jobs_view_get(bs->pool, r->job, &v);
    blob *line = NULL;
    int status;
    if (v.state == JOB_DONE && v.body) {
        status = RUN_DONE;
        line = batch__line_done(b, r, v.body, 0);
    } else if ((v.state == JOB_FAILED || v.state == JOB_CANCELLED) && v.body) {
        status = v.state == JOB_FAILED ? RUN_FAILED : RUN_CANCELLED;
        json_t *doc = json_loadb(v.body->data, v.body->len, 0, NULL);
        json_t *problem = json_incref(json_object_get(doc, "problem"));
        json_decref(doc);
        line = batch__line_problem(b, r, status, problem);
    } else { /* still queued or running: the pool is shutting down */
        status = RUN_CANCELLED;
        line =
            batch__line_problem(b, r, status, hamel_problem_new(HAMEL_E_UNAVAILABLE, "the server shut down"));
    }
    blob_release(v.body);
    pthread_mutex_lock(&bs->lock);
    job *j = r->job;
    r->job = NULL;
    pthread_mutex_unlock(&bs->lock);
    job_release(bs->pool, j);
    batch__finish_run(bs, b, r, line, status, 0, 1);
    if (feed)
        batch__feed(bs, b);
    batch__run_end(bs, b);
}

static void batch__run_wake(void *arg) { batch__run_complete(arg, 1); }

/* ---- feeding ------------------------------------------------------------------------ */

enum { SUBMIT_INFLIGHT, SUBMIT_ANSWERED, SUBMIT_REQUEUED };

/* Queues one claimed run, or answers it from the result cache. Returns SUBMIT_INFLIGHT
 * (its job's completion ends the claim), SUBMIT_ANSWERED (finished here) or
 * SUBMIT_REQUEUED (the queue was full: the run is pending again). */
static int batch__submit(batches *bs, batch *b, batch_run *r)
{
    pthread_mutex_lock(&bs->lock);
    int cancel = b->cancel;
    pthread_mutex_unlock(&bs->lock);
    if (cancel) {
        blob *line = batch__line_problem(b, r, RUN_CANCELLED,
                                         hamel_problem_new(HAMEL_E_CANCELLED, "the batch was cancelled"));
        batch__finish_run(bs, b, r, line, RUN_CANCELLED, 0, 1);
        return SUBMIT_ANSWERED;
    }
    blob *hit = cache_get(bs->results, r->key);
    if (!hit && bs->st && store_get_result(bs->st, r->key, &hit) == 0)
        cache_put(bs->results, r->key, hit, hit->len);
    if (hit) {
        metrics_job(METRICS_JOB_CACHED);
        blob *line = batch__line_done(b, r, hit, 1);
        blob_release(hit);
        batch__finish_run(bs, b, r, line, RUN_DONE, 1, 1);
        return SUBMIT_ANSWERED;
    }
    json_t *req = merge_run(b->base, json_array_get(b->partials, r->index));
    job *j = NULL;
    int rc = req ? jobs_submit_flags(bs->pool, b->model, req, r->key, JOBS_SUBMIT_LAZY_RECORD, &j)
                 : HAMEL_E_INTERNAL;
    json_decref(req);
    if (rc == HAMEL_E_QUEUE_FULL) { /* others fill the queue: this run waits its turn */
        pthread_mutex_lock(&bs->lock);
        r->state = RUN_PENDING;
        b->inflight--;
        if (r->index < b->cursor)
            b->cursor = r->index;
        b->retry_at = jobs_now() + BATCH_RETRY_SECONDS;
        pthread_cond_signal(&bs->timer);
        pthread_mutex_unlock(&bs->lock);
        return SUBMIT_REQUEUED;
    }
    if (rc != 0) {
        int status = rc == HAMEL_E_UNAVAILABLE ? RUN_CANCELLED : RUN_FAILED;
        blob *line = batch__line_problem(b, r, status, hamel_problem_new(rc, NULL));
        batch__finish_run(bs, b, r, line, status, 0, 1);
        return SUBMIT_ANSWERED;
    }
    job_view v;
    jobs_view_get(bs->pool, j, &v);
    blob_release(v.body);
    pthread_mutex_lock(&bs->lock);
    snprintf(r->job_id, sizeof r->job_id, "%s", v.id);
    r->job = j;
    r->state = RUN_INFLIGHT;
    cancel = b->cancel; /* a DELETE before this point did not see the job: cancel it here */
    pthread_mutex_unlock(&bs->lock);
    if (cancel)
        jobs_cancel(bs->pool, j);
    r->w.wake = batch__run_wake;
    r->w.arg = r;
    r->w.deadline = jobs_now() + BATCH_RUN_PARK_SECONDS;
    if (jobs_wait(bs->pool, j, &r->w) != 0) /* finished already: no wake will come */
        batch__run_complete(r, 0);
    return SUBMIT_INFLIGHT;
}

/* Claims runs while b has room in flight and submits them as jobs, until nothing more
 * can be claimed (with a shared queue). The caller holds a reference on b. */
static void batch__feed_jobs(batches *bs, batch *b)
{
    for (;;) {
        batch_run *claim[BATCH_CLAIM_MAX];
        size_t n = 0;
        pthread_mutex_lock(&bs->lock);
        while (n < BATCH_CLAIM_MAX && !b->cancel && b->inflight < bs->cfg.max_inflight) {
            while (b->cursor < b->count && b->runs[b->cursor].state != RUN_PENDING)
                b->cursor++;
            if (b->cursor >= b->count)
                break;
            batch_run *r = &b->runs[b->cursor++];
            r->state = RUN_CLAIMED;
            b->inflight++;
            b->refs++; /* the run's, until its claim ends */
            claim[n++] = r;
        }
        pthread_mutex_unlock(&bs->lock);
        if (n == 0)
            return;
        for (size_t i = 0; i < n; i++) {
            int how = batch__submit(bs, b, claim[i]);
            if (how == SUBMIT_ANSWERED) {
                batch__run_end(bs, b);
            } else if (how == SUBMIT_REQUEUED) { /* the queue is full: the rest go back too */
                pthread_mutex_lock(&bs->lock);
                for (size_t k = i + 1; k < n; k++) {
                    claim[k]->state = RUN_PENDING;
                    b->inflight--;
                    if (claim[k]->index < b->cursor)
                        b->cursor = claim[k]->index;
                }
                pthread_mutex_unlock(&bs->lock);
                for (size_t k = i; k < n; k++)
                    batch__run_end(bs, b);
                return;
            }
        }
    }
}

/* ---- blocks ------------------------------------------------------------------------- */

/* How many runs the next block takes: about BATCH_BLOCK_SECONDS of work (one run while
 * nothing is measured yet), and no more than a share of what is left, so the last runs
 * are spread over the workers. Caller holds bs->lock. */
static size_t batch__block_size_locked(const batches *bs, const batch *b)
{
    size_t workers = bs->cfg.workers > 0 ? (size_t)bs->cfg.workers : 1;
    size_t left = b->count - b->finished - b->inflight;
    size_t k = 1;
    if (b->run_seconds > 0) {
        double want = BATCH_BLOCK_SECONDS / b->run_seconds;
        k = want >= BATCH_BLOCK_MAX ? BATCH_BLOCK_MAX : want < 1 ? 1 : (size_t)want;
    }
    size_t share = (left + 2 * workers - 1) / (2 * workers);
    if (k > share)
        k = share;
    return k ? k : 1;
}

/* The most blocks of one batch in flight: two per worker (one running, one queued
 * behind it, so no worker waits for the feeder), within the batch's places. */
static size_t batch__blocks_max(const batches *bs)
{
    size_t two = 2 * (size_t)(bs->cfg.workers > 0 ? bs->cfg.workers : 1);
    return two < bs->cfg.max_inflight ? two : bs->cfg.max_inflight;
}

static void batch__block_unlink_locked(batch *b, batch_block *k)
{
    if (k->prev)
        k->prev->next = k->next;
    else
        b->blocks = k->next;
    if (k->next)
        k->next->prev = k->prev;
    k->prev = k->next = NULL;
    b->nblocks--;
}

/* The problem document of a failed or cancelled job body, a new reference. */
static json_t *batch__body_problem(const blob *body, int rc)
{
    json_t *doc = body ? json_loadb(body->data, body->len, 0, NULL) : NULL;
    json_t *problem = json_incref(json_object_get(doc, "problem"));
    json_decref(doc);
    return problem ? problem : hamel_problem_new(rc ? rc : HAMEL_E_INTERNAL, NULL);
}

static void batch__feed(batches *bs, batch *b);

/* The work arrays of one block's run on a worker. */
typedef struct block_work {
    isolate_result *res;
    jobs_outcome *out;
    blob **lines;
    int *status;
    batch_run **fin; /* the runs that ended, with lines[i] and status[i] */
    const char **ids;
    size_t nfin;
} block_work;

static void block_work_free(block_work *w, size_t n)
{
    for (size_t i = 0; w->res && i < n; i++) {
        free(w->res[i].text);
        json_decref(w->res[i].problem);
    }
    free(w->res);
    free(w->out);
    free(w->lines);
    free(w->status);
    free(w->fin);
    free(w->ids);
}

static int block_work_new(block_work *w, size_t n)
{
    memset(w, 0, sizeof *w);
    w->res = calloc(n, sizeof *w->res);
    w->out = calloc(n, sizeof *w->out);
    w->lines = calloc(n, sizeof *w->lines);
    w->status = calloc(n, sizeof *w->status);
    w->fin = calloc(n, sizeof *w->fin);
    w->ids = calloc(n, sizeof *w->ids);
    if (w->res && w->out && w->lines && w->status && w->fin && w->ids)
        return 0;
    block_work_free(w, 0);
    return -1;
}

/* Every run of k ends with status st and a copy of problem (taken), without a job. */
static void batch__block_end_all(batches *bs, batch_block *k, int st, json_t *problem)
{
    for (size_t i = 0; i < k->n; i++) {
        blob *line = batch__line_problem(k->b, k->runs[i], st, json_deep_copy(problem));
        batch__finish_run(bs, k->b, k->runs[i], line, st, 0, 1);
    }
    json_decref(problem);
}

/* The worker call of block k: one message with the base, every run's own members and
 * its job id. Returns isolate_simulate_many's status (*problem when not 0). */
static int batch__block_call(batches *bs, batch_block *k, block_work *w, json_t **problem)
{
    batch *b = k->b;
    const json_t **runs = calloc(k->n, sizeof *runs);
    for (size_t i = 0; runs && i < k->n; i++) {
        batch_run *r = k->runs[i];
        ids_random(r->job_id, JOB_ID_LEN);
        w->ids[i] = r->job_id;
        runs[i] = json_array_get(b->partials, r->index);
    }
    json_t *head = json_pack("{s:s, s:s, s:s, s:f}", "job_id", "", "status", "done", "model_id", b->model_id,
                             "progress", 1.0);
    /* A long sweep waits for the optimizing tier rather than run the first one meanwhile
     * (once its runs are measured: the first blocks have made the model hot anyway). */
    pthread_mutex_lock(&bs->lock);
    double left = (double)(b->count - b->finished) * b->run_seconds /
                  (double)(bs->cfg.workers > 0 ? bs->cfg.workers : 1);
    pthread_mutex_unlock(&bs->lock);
    double wait = BATCH_NATIVE_SHARE * left < BATCH_NATIVE_MAX ? BATCH_NATIVE_SHARE * left : BATCH_NATIVE_MAX;
    *problem = NULL;
    int rc = runs && head ? isolate_simulate_many(b->model, b->base, runs, k->n, head, w->ids, wait,
                                                  &bs->cfg.limits, &k->ctl, w->res, problem)
                          : HAMEL_E_INTERNAL;
    if (rc != 0 && !*problem)
        *problem = hamel_problem_new(rc, NULL);
    free(runs);
    json_decref(head);
    return rc;
}

/* Records the runs of k that ran as jobs (one store commit) and makes their lines; the
 * runs a fault left unrun go back to pending. `dt`: the call's seconds. */
static void batch__block_record(batches *bs, batch_block *k, block_work *w, double created, double dt)
{
    batch *b = k->b;
    size_t nout = 0, nagain = 0;
    for (size_t i = 0; i < k->n; i++) {
        isolate_result *x = &w->res[i];
        if (x->rc == -1) { /* not run: kept at the front of k->runs for below */
            k->runs[nagain++] = k->runs[i];
            continue;
        }
        jobs_outcome *o = &w->out[nout];
        o->id = k->runs[i]->job_id;
        o->key = k->runs[i]->key;
        o->rc = x->rc;
        o->body = x->rc == 0 ? blob_take_len(x->text, x->len) : NULL;
        o->problem = x->problem;
        x->text = NULL;
        x->problem = NULL;
        w->fin[nout++] = k->runs[i];
    }
    metrics_integrate(dt);
    jobs_finish_many(bs->pool, b->model_id, created, w->out, nout);
    for (size_t i = 0; i < nout; i++) {
        jobs_outcome *o = &w->out[i];
        if (o->state == JOB_DONE) {
            w->status[i] = RUN_DONE;
            w->lines[i] = batch__line_done(b, w->fin[i], o->body, 0);
        } else {
            w->status[i] = o->state == JOB_CANCELLED ? RUN_CANCELLED : RUN_FAILED;
            w->lines[i] =
                batch__line_problem(b, w->fin[i], w->status[i], batch__body_problem(o->body, o->rc));
        }
        blob_release(o->body);
        o->body = NULL;
    }
    w->nfin = nout;
    pthread_mutex_lock(&bs->lock);
    if (nout > 0 && nagain == 0) { /* the measure of a run, for the next blocks */
        double one = dt / (double)nout;
        b->run_seconds = b->run_seconds > 0 ? 0.5 * (b->run_seconds + one) : one;
    }
    for (size_t i = 0; i < nagain; i++) {
        k->runs[i]->state = RUN_PENDING;
        b->inflight--;
        if (k->runs[i]->index < b->cursor)
            b->cursor = k->runs[i]->index;
    }
    pthread_mutex_unlock(&bs->lock);
}

/* Runs a block on a pool thread (cancelled: the pool shut down before it started): one
 * worker call for its runs, their results stored in one commit as job records, their
 * lines added at once. */
static void batch__block_task(void *arg, int cancelled)
{
    batch_block *k = arg;
    batch *b = k->b;
    batches *bs = b->bs;
    pthread_mutex_lock(&bs->lock);
    int dropped = k->dropped, cancel = b->cancel;
    k->started = 1;
    pthread_mutex_unlock(&bs->lock);
    block_work w;
    if (dropped) {                    /* batch__cancel ended its runs */
    } else if (cancelled || cancel) { /* never started: no jobs */
        batch__block_end_all(
            bs, k, RUN_CANCELLED,
            hamel_problem_new(HAMEL_E_CANCELLED, cancelled ? "the server shut down before the run started"
                                                           : "the batch was cancelled"));
    } else if (block_work_new(&w, k->n) != 0) {
        batch__block_end_all(bs, k, RUN_FAILED, hamel_problem_new(HAMEL_E_INTERNAL, "out of memory"));
    } else {
        double t0 = jobs_now(), created = jobs_wall();
        json_t *problem = NULL;
        int rc = batch__block_call(bs, k, &w, &problem);
        if (rc != 0) /* nothing ran: every run ends so (the pool stopping: cancelled) */
            batch__block_end_all(bs, k, rc == HAMEL_E_UNAVAILABLE ? RUN_CANCELLED : RUN_FAILED, problem);
        else
            batch__block_record(bs, k, &w, created, jobs_now() - t0);
        batch__finish_runs(bs, b, w.fin, w.lines, w.status, 0, 1, w.nfin);
        block_work_free(&w, k->n);
    }
    pthread_mutex_lock(&bs->lock);
    batch__block_unlink_locked(b, k);
    pthread_cond_broadcast(&bs->ended);
    pthread_mutex_unlock(&bs->lock);
    free(k);
    if (!cancelled)
        batch__feed(bs, b);
    batch_release(bs, b); /* the block's reference */
}

/* Claims runs in blocks while b has room and queues each block as a task of the pool;
 * runs whose result is cached (in memory, or in the store: one read for the block) are
 * answered at once. The caller holds a reference on b. */
static void batch__feed_blocks(batches *bs, batch *b)
{
    for (;;) {
        pthread_mutex_lock(&bs->lock);
        size_t want = batch__block_size_locked(bs, b);
        if (b->cancel || b->nblocks >= batch__blocks_max(bs)) {
            pthread_mutex_unlock(&bs->lock);
            return;
        }
        batch_block *k = malloc(sizeof *k + want * sizeof k->runs[0]);
        size_t n = 0;
        while (k && n < want) {
            while (b->cursor < b->count && b->runs[b->cursor].state != RUN_PENDING)
                b->cursor++;
            if (b->cursor >= b->count)
                break;
            batch_run *r = &b->runs[b->cursor++];
            r->state = RUN_CLAIMED;
            b->inflight++;
            k->runs[n++] = r;
        }
        pthread_mutex_unlock(&bs->lock);
        if (n == 0) {
            free(k);
            return;
        }
        /* answers from the cache, then from the store */
        blob **hit = calloc(n, sizeof *hit);
        const char **keys = calloc(n, sizeof *keys);
        size_t *miss = calloc(n, sizeof *miss), nmiss = 0;
        for (size_t i = 0; hit && keys && miss && i < n; i++) {
            hit[i] = cache_get(bs->results, k->runs[i]->key);
            if (!hit[i]) {
                keys[nmiss] = k->runs[i]->key;
                miss[nmiss++] = i;
            }
        }
        if (hit && keys && miss && nmiss > 0 && bs->st) {
            blob **got = calloc(nmiss, sizeof *got);
            if (got && store_get_results(bs->st, keys, nmiss, got) == 0)
                for (size_t j = 0; j < nmiss; j++)
                    if (got[j]) {
                        cache_put(bs->results, keys[j], got[j], got[j]->len);
                        hit[miss[j]] = got[j];
                    }
            free(got);
        }
        size_t m = 0, nhit = 0;
        for (size_t i = 0; i < n; i++) {
            if (hit && hit[i]) {
                batch_run *r = k->runs[i];
                metrics_job(METRICS_JOB_CACHED);
                blob *line = batch__line_done(b, r, hit[i], 1);
                blob_release(hit[i]);
                batch__finish_run(bs, b, r, line, RUN_DONE, 1, 1);
                nhit++;
            } else {
                k->runs[m++] = k->runs[i];
            }
        }
        free(hit);
        free(keys);
        free(miss);
        if (m == 0) {
            free(k);
            continue;
        }
        k->n = m;
        k->b = b;
        k->started = k->dropped = 0;
        atomic_init(&k->ctl.cancel, 0);
        atomic_init(&k->ctl.progress, 0.0);
        k->ctl.max_steps = 0;
        k->ctl.max_wall_seconds = 0;
        pthread_mutex_lock(&bs->lock);
        b->refs++; /* the block's */
        k->prev = NULL;
        k->next = b->blocks;
        if (b->blocks)
            b->blocks->prev = k;
        b->blocks = k;
        b->nblocks++;
        pthread_mutex_unlock(&bs->lock);
        int rc = jobs_submit_task(bs->pool, batch__block_task, k, &k->ctl);
        if (rc == 0)
            continue;
        pthread_mutex_lock(&bs->lock);
        batch__block_unlink_locked(b, k);
        if (rc == HAMEL_E_QUEUE_FULL) { /* others fill the queue: these runs wait their turn */
            for (size_t i = 0; i < m; i++) {
                k->runs[i]->state = RUN_PENDING;
                b->inflight--;
                if (k->runs[i]->index < b->cursor)
                    b->cursor = k->runs[i]->index;
            }
            b->retry_at = jobs_now() + BATCH_RETRY_SECONDS;
            pthread_cond_signal(&bs->timer);
        }
        pthread_mutex_unlock(&bs->lock);
        if (rc != HAMEL_E_QUEUE_FULL) {
            int st = rc == HAMEL_E_UNAVAILABLE ? RUN_CANCELLED : RUN_FAILED;
            for (size_t i = 0; i < m; i++) {
                blob *line = batch__line_problem(b, k->runs[i], st, hamel_problem_new(rc, NULL));
                batch__finish_run(bs, b, k->runs[i], line, st, 0, 1);
            }
        }
        free(k);
        batch_release(bs, b);
        if (rc == HAMEL_E_QUEUE_FULL)
            return;
    }
}

static void batch__feed(batches *bs, batch *b)
{
    if (b->blocks_on)
        batch__feed_blocks(bs, b);
    else
        batch__feed_jobs(bs, b);
}

/* ---- creation ----------------------------------------------------------------------- */

/* The path of an engine error inside the batch body: runs[i].<path> when the run gives
 * the member the path starts with, else base.<path> (the value came from the base). */
static void batch__problem_path(const json_t *run, size_t i, const char *path, char out[BATCH_PATH_MAX])
{
    size_t head = strcspn(path, ".[");
    char member[BATCH_PATH_MAX];
    snprintf(member, sizeof member, "%.*s", (int)(head < sizeof member ? head : sizeof member - 1), path);
    if (!path[0])
        snprintf(out, BATCH_PATH_MAX, "runs[%zu]", i);
    else if (json_object_get(run, member))
        snprintf(out, BATCH_PATH_MAX, "runs[%zu].%s", i, path);
    else
        snprintf(out, BATCH_PATH_MAX, "base.%s", path);
}

/* Appends {path, column?, reason} unless the same path and reason are there already (an
 * invalid base makes every run fail alike). */
static void batch__add_error(json_t *into, const char *path, int column, const char *reason)
{
    size_t k;
    json_t *e;
    json_array_foreach(json_object_get(into, "errors"), k, e)
    {
        if (!strcmp(json_string_value(json_object_get(e, "path")), path) &&
            !strcmp(json_string_value(json_object_get(e, "reason")), reason))
            return;
    }
    hamel_problem_add(into, path, column, reason);
}

/* Adds the errors of run i's problem (borrowed) to the batch's problem. */
static void batch__add_errors(json_t *into, const json_t *run, size_t i, const json_t *problem)
{
    const json_t *errs = json_object_get(problem, "errors");
    size_t k;
    json_t *e;
    char path[BATCH_PATH_MAX];
    if (json_array_size(errs) == 0) {
        const char *detail = json_string_value(json_object_get(problem, "detail"));
        batch__problem_path(run, i, "", path);
        batch__add_error(into, path, -1, detail ? detail : "invalid");
        return;
    }
    json_array_foreach(errs, k, e)
    {
        const char *p = json_string_value(json_object_get(e, "path"));
        const char *reason = json_string_value(json_object_get(e, "reason"));
        json_t *col = json_object_get(e, "column");
        batch__problem_path(run, i, p ? p : "", path);
        batch__add_error(into, path, json_is_integer(col) ? (int)json_integer_value(col) : -1,
                         reason ? reason : "invalid");
    }
}

static int batch__bad(json_t **problem, const char *path, const char *reason)
{
    *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
    hamel_problem_add(*problem, path, -1, reason);
    return HAMEL_E_BAD_REQUEST;
}

/* The top-level members, base, runs and fields of a batch body. */
static int batch__check_shape(const batches *bs, const json_t *body, unsigned *fields, json_t **problem)
{
    static const char *const members[] = {"model", "model_id", "base", "runs", "fields"};
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)body, k, v)
    {
        int known = 0;
        for (size_t i = 0; i < sizeof members / sizeof members[0]; i++)
            known |= !strcmp(k, members[i]);
        if (!known)
            return batch__bad(problem, k,
                              "unknown field (expected one of model, model_id, base, runs, fields)");
    }
    const json_t *base = json_object_get(body, "base");
    if (base && !json_is_object(base))
        return batch__bad(problem, "base", "must be an object (a simulation request without the model)");
    if (json_object_get(base, "model") || json_object_get(base, "model_id"))
        return batch__bad(problem, json_object_get(base, "model") ? "base.model" : "base.model_id",
                          "give the model once, at the top level");
    const json_t *runs = json_object_get(body, "runs");
    if (!json_is_array(runs) || json_array_size(runs) == 0)
        return batch__bad(problem, "runs", "must be a non-empty array of objects");
    if (json_array_size(runs) > bs->cfg.max_runs) {
        char reason[96];
        snprintf(reason, sizeof reason, "%zu runs; at most %zu per batch", json_array_size(runs),
                 bs->cfg.max_runs);
        *problem = hamel_problem_new(HAMEL_E_LIMIT, reason);
        hamel_problem_add(*problem, "runs", -1, reason);
        return HAMEL_E_LIMIT;
    }
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        char path[BATCH_PATH_MAX];
        if (!json_is_object(run)) {
            snprintf(path, sizeof path, "runs[%zu]", i);
            return batch__bad(problem, path, "must be an object (a partial simulation request)");
        }
        if (json_object_get(run, "model") || json_object_get(run, "model_id")) {
            snprintf(path, sizeof path, "runs[%zu].%s", i,
                     json_object_get(run, "model") ? "model" : "model_id");
            return batch__bad(problem, path, "give the model once, at the top level");
        }
    }
    *fields = FIELD_DEFAULT;
    const json_t *f = json_object_get(body, "fields");
    if (f) {
        if (!json_is_array(f))
            return batch__bad(problem, "fields", "must be an array of field names");
        *fields = 0;
        json_array_foreach(f, i, v)
        {
            size_t j = 0;
            const char *name = json_string_value(v);
            while (name && j < BATCH_NFIELDS && strcmp(name, batch__field_names[j]) != 0)
                j++;
            if (!name || j == BATCH_NFIELDS) {
                char path[64];
                snprintf(path, sizeof path, "fields[%zu]", i);
                return batch__bad(problem, path,
                                  "unknown field (expected run, final, checks, stats, trajectory, hamel or "
                                  "events)");
            }
            *fields |= 1u << j;
        }
    }
    return 0;
}

int batch_create(batches *bs, engine_model *m, const json_t *body, batch **out, json_t **problem)
{
    *out = NULL;
    *problem = NULL;
    unsigned fields = 0;
    int rc = batch__check_shape(bs, body, &fields, problem);
    if (rc != 0) {
        metrics_batch(METRICS_BATCH_INVALID);
        return rc;
    }
    const json_t *runs = json_object_get(body, "runs");
    size_t count = json_array_size(runs);
    batch *b = calloc(1, sizeof *b);
    if (b) {
        b->runs = calloc(count, sizeof *b->runs);
        b->order = calloc(count, sizeof *b->order);
        b->base =
            json_object_get(body, "base") ? json_deep_copy(json_object_get(body, "base")) : json_object();
        b->partials = json_deep_copy(runs);
    }
    if (!b || !b->runs || !b->order || !b->base || !b->partials) {
        if (b)
            batch__destroy(b);
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
        return HAMEL_E_INTERNAL;
    }
    b->bs = bs;
    b->count = count;
    b->fields = fields;
    b->blocks_on = jobs_takes_tasks(bs->pool);

    /* Every run is checked before anything is queued (in one call to the engine's worker,
     * which merges each over the base), then merged here for its key. */
    json_t *bad = NULL;
    size_t nbad = 0;
    json_t **checks = calloc(count ? count : 1, sizeof *checks);
    const json_t **parts = calloc(count ? count : 1, sizeof *parts);
    int all = checks && parts ? 0 : HAMEL_E_INTERNAL;
    for (size_t i = 0; all == 0 && i < count; i++)
        parts[i] = json_array_get(b->partials, i);
    json_t *all_problem = NULL;
    if (all == 0)
        all = isolate_simulation_check_all(m, b->base, parts, count, &bs->cfg.limits, checks, &all_problem);
    free(parts);
    if (all != 0) {
        free(checks);
        batch__destroy(b);
        *problem = all_problem ? all_problem : hamel_problem_new(all, "out of memory");
        return all;
    }
    for (size_t i = 0; i < count; i++) {
        batch_run *r = &b->runs[i];
        r->b = b;
        r->index = i;
        const json_t *run = json_array_get(b->partials, i);
        json_t *p = checks[i];
        int c = p ? hamel_problem_code(p) : 0;
        if (c == 0) {
            json_t *req = merge_run(b->base, run);
            c = req ? engine_simulation_key(m, req, r->key, &p) : HAMEL_E_INTERNAL;
            json_decref(req);
        }
        if (c != 0) {
            if (!bad) {
                bad = hamel_problem_new(c, NULL);
                json_object_set_new(bad, "run_index", json_integer((json_int_t)i));
            }
            if (nbad < BATCH_MAX_REPORTED)
                batch__add_errors(bad, run, i, p);
            nbad++;
        }
        json_decref(p);
    }
    free(checks);
    if (bad) {
        char detail[160];
        snprintf(detail, sizeof detail,
                 "%zu of %zu runs are invalid (the first at index %lld); nothing was run", nbad, count,
                 (long long)json_integer_value(json_object_get(bad, "run_index")));
        json_object_set_new(bad, "detail", json_string(detail));
        json_object_set_new(bad, "invalid_runs", json_integer((json_int_t)nbad));
        batch__destroy(b);
        metrics_batch(METRICS_BATCH_INVALID);
        *problem = bad;
        return HAMEL_E_BAD_REQUEST;
    }

    ids_random(b->id, BATCH_ID_LEN);
    snprintf(b->model_id, sizeof b->model_id, "%s", engine_model_id(m));
    b->model = engine_model_retain(m);
    b->t0 = jobs_now();
    batch *dead = NULL;
    pthread_mutex_lock(&bs->lock);
    if (bs->exiting) {
        pthread_mutex_unlock(&bs->lock);
        batch__destroy(b);
        *problem = hamel_problem_new(HAMEL_E_UNAVAILABLE, NULL);
        return HAMEL_E_UNAVAILABLE;
    }
    b->refs = 2; /* the kept list's and the caller's */
    b->kept = 1;
    b->next = bs->head;
    if (bs->head)
        bs->head->prev = b;
    else
        bs->tail = b;
    bs->head = b;
    bs->kept++;
    bs->active++;
    batch__evict_locked(bs, b, &dead);
    pthread_mutex_unlock(&bs->lock);
    batch__destroy_chain(dead);
    metrics_batch(METRICS_BATCH_CREATED);
    batch__feed(bs, b);
    *out = b;
    return 0;
}

/* ---- queries ------------------------------------------------------------------------ */

batch *batches_find(batches *bs, const char *id)
{
    pthread_mutex_lock(&bs->lock);
    batch *b = bs->head;
    while (b && strcmp(b->id, id) != 0)
        b = b->next;
    if (b)
        b->refs++;
    pthread_mutex_unlock(&bs->lock);
    return b;
}

const char *batch_id(const batch *b) { return b->id; }

int batch_finished(batches *bs, batch *b)
{
    pthread_mutex_lock(&bs->lock);
    int done = b->done;
    pthread_mutex_unlock(&bs->lock);
    return done;
}

char *batch_render(batches *bs, batch *b, int results, size_t *len)
{
    pthread_mutex_lock(&bs->lock);
    int done = b->done;
    const char *status = !done ? "running" : b->cancel ? "cancelled" : "done";
    json_t *fields = json_array();
    for (size_t i = 0; i < BATCH_NFIELDS; i++)
        if (b->fields & (1u << i))
            json_array_append_new(fields, json_string(batch__field_names[i]));
    json_t *doc = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o, s:f}", "batch_id",
                            b->id, "status", status, "model_id", b->model_id, "count", (json_int_t)b->count,
                            "finished", (json_int_t)b->finished, "succeeded", (json_int_t)b->succeeded,
                            "failed", (json_int_t)b->failed, "cancelled", (json_int_t)b->cancelled, "cached",
                            (json_int_t)b->cached, "queued_or_running", (json_int_t)b->inflight, "progress",
                            b->count ? (double)b->finished / (double)b->count : 1.0, "fields", fields,
                            "elapsed_ms", ((done ? b->t1 : jobs_now()) - b->t0) * 1e3);
    pthread_mutex_unlock(&bs->lock);
    size_t hlen = 0;
    char *head = doc ? jsonout_dumps(doc, &hlen) : NULL;
    json_decref(doc);
    if (!head)
        return NULL;
    if (!results || !done) {
        *len = hlen;
        return head;
    }
    /* Done: the lines no longer change, and the caller's reference keeps them. */
    size_t total = hlen + sizeof ",\"results\":[]}";
    for (size_t i = 0; i < b->count; i++)
        total += b->runs[i].line ? b->runs[i].line->len : 2;
    char *text = malloc(total);
    if (!text) {
        free(head);
        return NULL;
    }
    size_t n = hlen - 1; /* without the closing brace */
    memcpy(text, head, n);
    free(head);
    memcpy(text + n, ",\"results\":[", 12);
    n += 12;
    for (size_t i = 0; i < b->count; i++) {
        const blob *l = b->runs[i].line;
        if (i)
            text[n++] = ',';
        if (l) {
            memcpy(text + n, l->data, l->len - 1); /* without the newline */
            n += l->len - 1;
        } else {
            memcpy(text + n, "{}", 2);
            n += 2;
        }
    }
    memcpy(text + n, "]}", 3);
    *len = n + 2;
    return text;
}

void batches_counts(batches *bs, size_t *active, size_t *kept, size_t *bytes)
{
    pthread_mutex_lock(&bs->lock);
    *active = bs->active;
    *kept = bs->kept;
    *bytes = bs->bytes;
    pthread_mutex_unlock(&bs->lock);
}

/* ---- cancellation ------------------------------------------------------------------- */

/* Cancels b's runs; `why` goes into the lines of runs that never started. */
static int batch__cancel(batches *bs, batch *b, const char *why)
{
    pthread_mutex_lock(&bs->lock);
    if (b->done) {
        int rc = b->cancel ? 0 : HAMEL_E_CONFLICT;
        pthread_mutex_unlock(&bs->lock);
        return rc;
    }
    b->cancel = 1;
    size_t npending = 0, ninflight = 0;
    for (size_t i = 0; i < b->count; i++) {
        npending += b->runs[i].state == RUN_PENDING;
        ninflight += b->runs[i].state == RUN_INFLIGHT;
    }
    size_t *pending = malloc((npending + 1) * sizeof *pending);
    char(*ids)[JOB_ID_LEN + 1] = malloc((ninflight + 1) * sizeof *ids);
    size_t np = 0, ni = 0;
    for (size_t i = 0; i < b->count && pending && ids; i++) {
        batch_run *r = &b->runs[i];
        if (r->state == RUN_PENDING) {
            r->state = RUN_CLAIMED; /* the feeder will not take it */
            pending[np++] = i;
        } else if (r->state == RUN_INFLIGHT) {
            memcpy(ids[ni++], r->job_id, sizeof ids[0]);
        }
    }
    /* blocks: the queued ones are dropped (their runs end here), the running ones told */
    size_t ndropped = 0;
    for (batch_block *k = b->blocks; k; k = k->next) {
        if (k->started)
            atomic_store(&k->ctl.cancel, 1);
        else if (!k->dropped)
            ndropped += k->n;
    }
    batch_run **dropped = malloc((ndropped + 1) * sizeof *dropped);
    size_t nd = 0;
    for (batch_block *k = b->blocks; k && dropped; k = k->next)
        if (!k->started && !k->dropped) {
            k->dropped = 1;
            for (size_t i = 0; i < k->n; i++)
                dropped[nd++] = k->runs[i];
        }
    b->refs++; /* held across the unlocked part */
    pthread_mutex_unlock(&bs->lock);
    for (size_t k = 0; k < nd; k++) {
        batch_run *r = dropped[k];
        blob *line = batch__line_problem(b, r, RUN_CANCELLED, hamel_problem_new(HAMEL_E_CANCELLED, why));
        batch__finish_run(bs, b, r, line, RUN_CANCELLED, 0, 1);
    }
    free(dropped);
    /* Running blocks stop at their runs' next step: the answer waits for them, so that it
     * counts every run cancelled (as a job's cancellation does at once). */
    pthread_mutex_lock(&bs->lock);
    double until = jobs_now() + BATCH_CANCEL_WAIT;
    for (;;) {
        int running = 0;
        for (batch_block *k = b->blocks; k; k = k->next)
            running |= k->started;
        if (!running || jobs_now() >= until)
            break;
        struct timespec ts;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&bs->ended, &bs->lock, &ts);
    }
    pthread_mutex_unlock(&bs->lock);
    for (size_t k = 0; k < ni; k++) {
        job *j = jobs_find(bs->pool, ids[k]);
        if (j) /* its completion (the pool's wake) records the run as cancelled */
            jobs_cancel(bs->pool, j);
        job_release(bs->pool, j);
    }
    for (size_t k = 0; k < np; k++) {
        batch_run *r = &b->runs[pending[k]];
        blob *line = batch__line_problem(b, r, RUN_CANCELLED, hamel_problem_new(HAMEL_E_CANCELLED, why));
        batch__finish_run(bs, b, r, line, RUN_CANCELLED, 0, 0);
    }
    free(pending);
    free(ids);
    batch_release(bs, b);
    return 0;
}

int batch_cancel(batches *bs, batch *b) { return batch__cancel(bs, b, "the batch was cancelled"); }

/* ---- waiting and reading ------------------------------------------------------------ */

int batch_wait(batches *bs, batch *b, batch_waiter *w)
{
    pthread_mutex_lock(&bs->lock);
    if (b->done || bs->exiting) {
        pthread_mutex_unlock(&bs->lock);
        return 1;
    }
    w->on = b;
    w->stream = 0;
    waiters_add(&bs->waiters, w);
    pthread_cond_signal(&bs->timer);
    pthread_mutex_unlock(&bs->lock);
    return 0;
}

/* The number of lines a reader at cur will get in all. Caller holds bs->lock. */
static size_t batch__lines_total(const batch *b, const batch_cursor *cur)
{
    return b->count + (cur->summary ? 1 : 0);
}

ssize_t batch_read(batches *bs, batch *b, batch_cursor *cur, char *buf, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&bs->lock);
    while (n < max) {
        const char *src;
        size_t len;
        if (cur->line < b->finished) {
            const blob *l = b->runs[b->order[cur->line]].line;
            src = l ? l->data : "{}\n";
            len = l ? l->len : 3;
        } else if (b->done && cur->summary && cur->line == b->count) {
            if (!cur->summary_sent) {
                snprintf(cur->tail, sizeof cur->tail,
                         "{\"done\":true,\"batch_id\":\"%s\",\"status\":\"%s\",\"count\":%zu,"
                         "\"succeeded\":%zu,\"failed\":%zu,\"cancelled\":%zu,\"cached\":%zu}\n",
                         b->id, b->cancel ? "cancelled" : "done", b->count, b->succeeded, b->failed,
                         b->cancelled, b->cached);
                cur->summary_sent = 1;
            }
            src = cur->tail;
            len = strlen(cur->tail);
        } else {
            break;
        }
        size_t k = len - cur->offset;
        if (k > max - n)
            k = max - n;
        memcpy(buf + n, src + cur->offset, k);
        n += k;
        cur->offset += k;
        if (cur->offset == len) {
            cur->line++;
            cur->offset = 0;
        }
    }
    int end = b->done && cur->line >= batch__lines_total(b, cur);
    pthread_mutex_unlock(&bs->lock);
    if (n == 0 && end)
        return -1;
    return (ssize_t)n;
}

int batch_stream_park(batches *bs, batch *b, const batch_cursor *cur, batch_waiter *w)
{
    pthread_mutex_lock(&bs->lock);
    if (cur->line < b->finished || b->done || bs->exiting) {
        pthread_mutex_unlock(&bs->lock);
        return 1;
    }
    w->on = b;
    w->stream = 1;
    waiters_add(&b->streams, w);
    pthread_mutex_unlock(&bs->lock);
    return 0;
}

void batch_unpark(batches *bs, batch_waiter *w)
{
    pthread_mutex_lock(&bs->lock);
    if (w->armed)
        waiters_remove(batch__list(bs, w), w);
    pthread_mutex_unlock(&bs->lock);
}

/* ---- the timer and the module ------------------------------------------------------- */

/* Wakes long-polls past their deadline and feeds batches whose queue-full retry is due. */
static void *batch__timer(void *arg)
{
    batches *bs = arg;
    pthread_mutex_lock(&bs->lock);
    while (!bs->exiting) {
        double now = jobs_now(), next = now + BATCH_TIMER_IDLE_SECONDS;
        batch_waiter *fired = NULL;
        double due = waiters_expire(&bs->waiters, now, &fired);
        if (due > 0 && due < next)
            next = due;
        batch *retry = NULL;
        for (batch *b = bs->head; b && !retry; b = b->next) {
            if (b->done || b->retry_at <= 0)
                continue;
            if (b->retry_at <= now) {
                b->retry_at = 0;
                b->refs++;
                retry = b;
            } else if (b->retry_at < next) {
                next = b->retry_at;
            }
        }
        if (fired || retry) {
            pthread_mutex_unlock(&bs->lock);
            waiters_fire(fired);
            if (retry) {
                batch__feed(bs, retry);
                batch_release(bs, retry);
            }
            pthread_mutex_lock(&bs->lock);
            continue;
        }
        struct timespec ts;
        ts.tv_sec = (time_t)next;
        ts.tv_nsec = (long)((next - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&bs->timer, &bs->lock, &ts);
    }
    pthread_mutex_unlock(&bs->lock);
    return NULL;
}

batches *batches_new(const batches_config *cfg, jobs *pool, cache *results, store *st)
{
    batches *bs = calloc(1, sizeof *bs);
    if (!bs)
        return NULL;
    bs->cfg = *cfg;
    if (bs->cfg.max_inflight < 1)
        bs->cfg.max_inflight = 1;
    bs->pool = pool;
    bs->results = results;
    bs->st = st;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&bs->lock, NULL);
    pthread_cond_init(&bs->timer, &ca);
    pthread_cond_init(&bs->ended, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&bs->timer_thread, NULL, batch__timer, bs) != 0) {
        batches_free(bs);
        return NULL;
    }
    bs->timer_started = 1;
    return bs;
}

void batches_shutdown(batches *bs)
{
    pthread_mutex_lock(&bs->lock);
    int again = bs->exiting;
    pthread_mutex_unlock(&bs->lock);
    if (again)
        return;
    /* The pool no longer takes jobs: whatever is unfinished is cancelled. One batch at a
     * time, each held by a reference while the lock is dropped. */
    for (;;) {
        pthread_mutex_lock(&bs->lock);
        batch *b = bs->head;
        while (b && (b->done || b->cancel))
            b = b->next;
        if (b)
            b->refs++;
        pthread_mutex_unlock(&bs->lock);
        if (!b)
            break;
        batch__cancel(bs, b, "the server shut down before the run started");
        batch_release(bs, b);
    }
    batch_waiter *fired = NULL;
    pthread_mutex_lock(&bs->lock);
    bs->exiting = 1;
    waiters_detach_all(&bs->waiters, &fired);
    for (batch *b = bs->head; b; b = b->next)
        waiters_detach_all(&b->streams, &fired);
    pthread_cond_broadcast(&bs->timer);
    pthread_mutex_unlock(&bs->lock);
    waiters_fire(fired);
    if (bs->timer_started) {
        pthread_join(bs->timer_thread, NULL);
        bs->timer_started = 0;
    }
}

void batches_free(batches *bs)
{
    if (!bs)
        return;
    batches_shutdown(bs);
    batch *b = bs->head;
    while (b) {
        batch *n = b->next;
        if (--b->refs == 0)
            batch__destroy(b);
        b = n;
    }
    pthread_cond_destroy(&bs->timer);
    pthread_cond_destroy(&bs->ended);
    pthread_mutex_destroy(&bs->lock);
    free(bs);
}
