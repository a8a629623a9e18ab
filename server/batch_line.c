/* batch_line.c — the NDJSON line of a finished run: its index, status, job id and the
 * fields its batch asked for, built from the result's text (parsed with jansson only when
 * the text is not what the engine writes), or from the problem of a run that did not
 * finish, or a stub pointing at /v1/jobs/{id} when the line does not fit the byte budget. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_internal.h"
#include "jsonout.h"

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
blob *batch__line_done(const batch *b, batch_run *r, const blob *result, int cached)
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
blob *batch__line_problem(const batch *b, batch_run *r, int status, json_t *problem)
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
blob *batch__line_stub(const batch_run *r)
{
    char text[256];
    int n = snprintf(text, sizeof text,
                     "{\"index\":%zu,\"status\":\"done\",\"job_id\":\"%s\",\"cached\":%s,\"omitted\":true,"
                     "\"result\":\"/v1/jobs/%s\"}\n",
                     r->index, r->job_id, r->cached ? "true" : "false", r->job_id);
    return blob_new(text, (size_t)n);
}
