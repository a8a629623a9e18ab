/* store_seam.c — the store functions of store.h, dispatched to a backend (store_ops),
 * and the SQLite backend's entry in that table (its functions are in store.c). */
#include <stdlib.h>

#include "store_sqlite.h"

struct store {
    const store_ops *ops;
    void *impl;
};

store *store_new(const store_ops *ops, void *impl)
{
    store *s = malloc(sizeof *s);
    if (!s) {
        ops->close(impl);
        return NULL;
    }
    s->ops = ops;
    s->impl = impl;
    return s;
}

void store_close(store *s)
{
    if (!s)
        return;
    s->ops->close(s->impl);
    free(s);
}

void store_counts(store *s, size_t *result_bytes, size_t *results, size_t *jobs)
{
    s->ops->counts(s->impl, result_bytes, results, jobs);
}

int store_put_model(store *s, const char *model_id, const char *json)
{
    return s->ops->put_model(s->impl, model_id, json);
}

int store_get_model(store *s, const char *model_id, char **json)
{
    return s->ops->get_model(s->impl, model_id, json);
}

int store_put_job(store *s, const char *id, const char *status, const char *model_id, const char *key,
                  const char *doc, double created)
{
    return s->ops->put_job(s->impl, id, status, model_id, key, doc, created);
}

int store_put_done(store *s, const char *id, const char *model_id, const char *key, const blob *body,
                   double created)
{
    return s->ops->put_done(s->impl, id, model_id, key, body, created);
}

int store_put_job_async(store *s, const char *id, const char *status, const char *model_id, const char *key,
                        const char *doc, double created)
{
    if (s->ops->put_job_async)
        return s->ops->put_job_async(s->impl, id, status, model_id, key, doc, created);
    return s->ops->put_job(s->impl, id, status, model_id, key, doc, created);
}

int store_put_model_async(store *s, const char *model_id, const char *json)
{
    if (s->ops->put_model_async)
        return s->ops->put_model_async(s->impl, model_id, json);
    return s->ops->put_model(s->impl, model_id, json);
}

int store_full(store *s) { return s && s->ops->full ? s->ops->full(s->impl) : 0; }

void store_commit_counts(store *s, long long *commits, long long *writes)
{
    *commits = *writes = 0;
    if (s->ops->commit_counts)
        s->ops->commit_counts(s->impl, commits, writes);
}

int store_get_result(store *s, const char *key, blob **out) { return s->ops->get_result(s->impl, key, out); }

int store_get_job(store *s, const char *id, store_job *out) { return s->ops->get_job(s->impl, id, out); }

/* ---- SQLite (store.c) ---------------------------------------------------------------- */

static int seam__put_model(void *impl, const char *model_id, const char *json)
{
    return store_sqlite_put_model(impl, model_id, json);
}

static int seam__get_model(void *impl, const char *model_id, char **json)
{
    return store_sqlite_get_model(impl, model_id, json);
}

static int seam__put_job(void *impl, const char *id, const char *status, const char *model_id,
                         const char *key, const char *doc, double created)
{
    return store_sqlite_put_job(impl, id, status, model_id, key, doc, created);
}

static int seam__put_done(void *impl, const char *id, const char *model_id, const char *key, const blob *body,
                          double created)
{
    return store_sqlite_put_done(impl, id, model_id, key, body, created);
}

static int seam__get_result(void *impl, const char *key, blob **out)
{
    return store_sqlite_get_result(impl, key, out);
}

static int seam__get_job(void *impl, const char *id, store_job *out)
{
    return store_sqlite_get_job(impl, id, out);
}

static void seam__counts(void *impl, size_t *result_bytes, size_t *results, size_t *jobs)
{
    store_sqlite_counts(impl, result_bytes, results, jobs);
}

static void seam__close(void *impl) { store_sqlite_close(impl); }

static int seam__put_job_async(void *impl, const char *id, const char *status, const char *model_id,
                               const char *key, const char *doc, double created)
{
    return store_sqlite_put_job_async(impl, id, status, model_id, key, doc, created);
}

static void seam__commit_counts(void *impl, long long *commits, long long *writes)
{
    store_sqlite_commit_counts(impl, commits, writes);
}

static int seam__put_model_async(void *impl, const char *model_id, const char *json)
{
    return store_sqlite_put_model_async(impl, model_id, json);
}

static int seam__full(void *impl) { return store_sqlite_full(impl); }

static int seam__quarantine_put(void *impl, const char *key, const char *doc, double expires)
{
    return store_sqlite_quarantine_put(impl, key, doc, expires);
}

static int seam__quarantine_get(void *impl, const char *key, char **doc, double *expires)
{
    return store_sqlite_quarantine_get(impl, key, doc, expires);
}

static int seam__quarantine_del(void *impl, const char *key)
{
    return store_sqlite_quarantine_del(impl, key);
}

static const store_ops seam__sqlite = {
    seam__put_model,       seam__get_model, seam__put_job,        seam__put_done,       seam__get_result,
    seam__get_job,         seam__counts,    seam__close,          seam__put_job_async,  seam__commit_counts,
    seam__put_model_async, seam__full,      seam__quarantine_put, seam__quarantine_get, seam__quarantine_del};

int store_open(const char *dir, const store_limits *lim, store **out)
{
    *out = NULL;
    store_sqlite *impl = NULL;
    if (store_sqlite_open(dir, lim, &impl) != 0)
        return -1;
    *out = store_new(&seam__sqlite, impl);
    return *out ? 0 : -1;
}

int store_quarantine_put(store *s, const char *key, const char *doc, double expires)
{
    return s->ops->quarantine_put ? s->ops->quarantine_put(s->impl, key, doc, expires) : -1;
}

int store_quarantine_get(store *s, const char *key, char **doc, double *expires)
{
    *doc = NULL;
    return s->ops->quarantine_get ? s->ops->quarantine_get(s->impl, key, doc, expires) : -1;
}

int store_quarantine_del(store *s, const char *key)
{
    return s->ops->quarantine_del ? s->ops->quarantine_del(s->impl, key) : -1;
}
