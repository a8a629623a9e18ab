/* store_seam.c — the store functions of store.h, dispatched to the backend chosen at
 * start (store_ops, as SQLite's VFS: store.c's SQLite, redis.c's Redis). */
#include <stdlib.h>

#include "store.h"

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

int store_barrier(store *s) { return s->ops->barrier ? s->ops->barrier(s->impl) : 0; }

int store_full(store *s) { return s && s->ops->full ? s->ops->full(s->impl) : 0; }

void store_commit_counts(store *s, long long *commits, long long *writes)
{
    *commits = *writes = 0;
    if (s->ops->commit_counts)
        s->ops->commit_counts(s->impl, commits, writes);
}

int store_get_result(store *s, const char *key, blob **out) { return s->ops->get_result(s->impl, key, out); }

int store_put_many(store *s, store_item *items, size_t n)
{
    if (s->ops->put_many)
        return s->ops->put_many(s->impl, items, n);
    int all = 0;
    for (size_t i = 0; i < n; i++) {
        store_item *it = &items[i];
        it->rc = it->body ? s->ops->put_done(s->impl, it->id, it->model_id, it->key, it->body, it->created)
                          : s->ops->put_job(s->impl, it->id, it->status, it->model_id, it->key, it->doc,
                                            it->created);
        all |= it->rc;
    }
    return all ? -1 : 0;
}

int store_get_results(store *s, const char *const *keys, size_t n, blob **out)
{
    if (s->ops->get_results)
        return s->ops->get_results(s->impl, keys, n, out);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = NULL;
        bad |= s->ops->get_result(s->impl, keys[i], &out[i]) < 0;
    }
    return bad ? -1 : 0;
}

int store_get_job(store *s, const char *id, store_job *out) { return s->ops->get_job(s->impl, id, out); }

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

int store_quarantine_list(store *s, const char *prefix, size_t max, store_quarantine_record **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    return s->ops->quarantine_list ? s->ops->quarantine_list(s->impl, prefix, max, out, n) : -1;
}

void store_quarantine_records_free(store_quarantine_record *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++) {
        free(r[i].key);
        free(r[i].doc);
    }
    free(r);
}
