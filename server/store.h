/* store.h — the record of models, finished results and jobs, and the seam between the
 * server and where that record lives.
 *
 * Two backends implement the functions below (store_ops): SQLite on local disk, the
 * default for one machine (store_open; store.c, described next), and Redis, shared by
 * several instances (redis_store_open, redis.h). Callers see one `store` either way.
 *
 * One SQLite database, <data>/hamel.db, in WAL mode. SQLite was chosen over a
 * content-addressed file store because its commits are atomic and its recovery after a
 * crash is well tested: a kill -9 mid-write leaves either the old or the new row, never
 * a torn file, and the next open rolls the WAL forward without a repair step of ours.
 * synchronous=NORMAL: in WAL mode a commit is written to the WAL before it returns, so a
 * killed process loses nothing that committed (the kernel still has the pages); only a
 * power cut can drop the last commits, never corrupt the file. FULL would add an fsync
 * per finished job for protection against power loss of results that can be recomputed.
 *
 * Bounded: results are kept up to a byte budget and job records up to a count, the
 * oldest dropped first (in the transaction that adds the new one), so no stream of
 * requests can fill the disk. A job whose result was dropped still says it was done;
 * GET /v1/jobs/{id} then answers 410 (resubmitting the request computes it again).
 *
 * Thread-safe. One writer thread owns the connection that writes, a second connection
 * serves reads (WAL: they never wait for a write), and a third thread checkpoints the
 * WAL beside the writer, so no job's commit waits for a checkpoint (store.c). Writes
 * happen on worker threads when jobs finish; reads only on in-memory cache misses.
 *
 * Group commit: writes are queued; the writer thread commits every write queued so far
 * in one transaction, and a write call returns only once its rows are committed (a job
 * is marked done only after that: no result is lost to a kill -9 once a job is reported
 * done), while concurrent jobs share transactions. store_put_job_async queues without
 * waiting (for states a crash makes "failed" anyway): it is committed with the next
 * group, or by store_close, which commits whatever is queued before it returns.
 */
#ifndef HAMEL_SERVER_STORE_H
#define HAMEL_SERVER_STORE_H

#include "blob.h"

typedef struct store store;

/* What the store knows of one job. Strings are owned by the struct; see
 * store_job_clear. `doc` is the job's JSON body for failed/cancelled jobs, else NULL. */
typedef struct store_job {
    char *status, *model_id, *key, *doc;
    double created;
} store_job;

/* The store's bounds: result bodies kept (bytes) and job records kept (count). */
typedef struct store_limits {
    size_t max_result_bytes;
    size_t max_jobs;
    size_t max_model_bytes; /* of the models' JSON text, oldest dropped first; 0: no bound */
} store_limits;

/* Opens (creating if needed) the database under directory `dir` (created too), marks
 * jobs that were queued or running when the last process died as failed, trims it to
 * `lim` (copied), and sets *out. Returns 0 or -1 with a message on stderr. */
int store_open(const char *dir, const store_limits *lim, store **out);

/* Result bytes and job records kept now. */
void store_counts(store *s, size_t *result_bytes, size_t *results, size_t *jobs);

/* Closes the database. Accepts NULL. */
void store_close(store *s);

/* Remembers a model's JSON text under its id. Borrows both. Returns 0 or -1. */
int store_put_model(store *s, const char *model_id, const char *json);

/* As store_put_model, but returns at once: the model is committed with the next group,
 * before any write queued after it (so a job record that names it is never on disk
 * without it). Copies its arguments. Returns 0 or -1. */
int store_put_model_async(store *s, const char *model_id, const char *json);

/* The JSON text of a stored model: 0 and *json (caller frees), 1 if unknown, -1. */
int store_get_model(store *s, const char *model_id, char **json);

/* Records a job that is not done (queued, running, failed, cancelled); `key` and `doc`
 * may be NULL. Borrows everything. Returns 0 or -1. */
int store_put_job(store *s, const char *id, const char *status, const char *model_id, const char *key,
                  const char *doc, double created);

/* As store_put_job, but returns at once: the record is committed with the next group
 * (a synchronous write or store_close). Copies its arguments. Returns 0 or -1. */
int store_put_job_async(store *s, const char *id, const char *status, const char *model_id, const char *key,
                        const char *doc, double created);

/* Returns once every write queued before this call (the asynchronous ones included) has
 * been committed, or has failed. 0, or -1 once the store is closing. */
int store_barrier(store *s);

/* Whether the last write that failed failed for want of space (the disk is full, or the
 * process's file size limit was reached); 0 for a backend that cannot tell. */
int store_full(store *s);

/* Transactions committed and writes in them, since open (group commit statistics). */
void store_commit_counts(store *s, long long *commits, long long *writes);

/* Records a done job and its result body in one transaction (a result already stored
 * under `key` is kept: it is the same answer), then drops the oldest results and job
 * records past the limits. Borrows everything. Returns 0 or -1. */
int store_put_done(store *s, const char *id, const char *model_id, const char *key, const blob *body,
                   double created);

/* The stored result under key: 0 and *out (a new blob), 1 if none, -1. */
int store_get_result(store *s, const char *key, blob **out);

/* One record of store_put_many: a done job with its result (body set; status ignored),
 * or a job record (body NULL: status, doc). Borrowed; rc is set. */
typedef struct store_item {
    const char *id, *status, *model_id, *key, *doc;
    const blob *body;
    double created;
    int rc; /* out: 0 written, -1 not */
} store_item;

/* Writes items[0..n) as store_put_done and store_put_job would, in one transaction
 * where the backend has them (SQLite: the writer's next group, so n results cost one
 * commit; each item falls back to its own transaction if the group fails). Returns once
 * every item is written or has failed (items[i].rc); 0 when all were written, else -1. */
int store_put_many(store *s, store_item *items, size_t n);

/* store_get_result of keys[0..n) in one read transaction where the backend has them:
 * out[i] is a new blob or NULL (none, or unreadable). Returns 0, or -1 when the store
 * could not be read (then every out[i] is NULL). */
int store_get_results(store *s, const char *const *keys, size_t n, blob **out);

/* The stored record of a job: 0 and *out filled, 1 if unknown, -1. */
int store_get_job(store *s, const char *id, store_job *out);

/* The quarantine (quarantine.h): records a problem document under key until `expires`
 * (wall-clock seconds), replacing one there. Returns 0 or -1. */
int store_quarantine_put(store *s, const char *key, const char *doc, double expires);

/* The quarantine record under key: 0 with *doc (caller frees) and *expires, 1 when there
 * is none (or it expired), -1. */
int store_quarantine_get(store *s, const char *key, char **doc, double *expires);

/* Removes the quarantine record under key: 0, 1 when there was none, -1. */
int store_quarantine_del(store *s, const char *key);

/* One quarantine record of store_quarantine_list; its strings are owned by the list. */
typedef struct store_quarantine_record {
    char *key, *doc;
    double expires; /* wall-clock seconds */
} store_quarantine_record;

/* The quarantine records that have not expired and whose key starts with `prefix`, at
 * most `max` of them (which ones when there are more: the latest to expire with SQLite,
 * any with Redis): 0 with *out (caller frees with store_quarantine_records_free) and *n,
 * or -1 (then *out is NULL and *n 0). */
int store_quarantine_list(store *s, const char *prefix, size_t max, store_quarantine_record **out, size_t *n);

/* Frees the n records of a store_quarantine_list. Accepts NULL. */
void store_quarantine_records_free(store_quarantine_record *r, size_t n);

/* Frees the strings of a store_job. */
void store_job_clear(store_job *j);

/* The seam: what a backend implements, on its own state `impl`. Each function has the
 * contract of the store_ function of the same name; results are -1 when the backend
 * cannot be reached. */
typedef struct store_ops {
    int (*put_model)(void *impl, const char *model_id, const char *json);
    int (*get_model)(void *impl, const char *model_id, char **json);
    int (*put_job)(void *impl, const char *id, const char *status, const char *model_id, const char *key,
                   const char *doc, double created);
    int (*put_done)(void *impl, const char *id, const char *model_id, const char *key, const blob *body,
                    double created);
    int (*get_result)(void *impl, const char *key, blob **out);
    int (*get_job)(void *impl, const char *id, store_job *out);
    void (*counts)(void *impl, size_t *result_bytes, size_t *results, size_t *jobs);
    void (*close)(void *impl);
    /* optional (NULL: put_job, and no statistics) */
    int (*put_job_async)(void *impl, const char *id, const char *status, const char *model_id,
                         const char *key, const char *doc, double created);
    void (*commit_counts)(void *impl, long long *commits, long long *writes);
    int (*put_model_async)(void *impl, const char *model_id, const char *json); /* NULL: put_model */
    int (*full)(void *impl);                                                    /* NULL: never */
    /* optional (NULL: no quarantine kept, every call -1) */
    int (*quarantine_put)(void *impl, const char *key, const char *doc, double expires);
    int (*quarantine_get)(void *impl, const char *key, char **doc, double *expires);
    int (*quarantine_del)(void *impl, const char *key);
    /* optional (NULL: one put_done / put_job, or get_result, per item) */
    int (*put_many)(void *impl, store_item *items, size_t n);
    int (*get_results)(void *impl, const char *const *keys, size_t n, blob **out);
    /* optional (NULL: the quarantine cannot be listed, -1) */
    int (*quarantine_list)(void *impl, const char *prefix, size_t max, store_quarantine_record **out,
                           size_t *n);
    /* optional (NULL: every write is done when its call returns) */
    int (*barrier)(void *impl);
} store_ops;

/* A store over a backend's state; takes ownership of impl (released with ops->close by
 * store_close). `ops` is borrowed and must be static. NULL when out of memory (impl is
 * closed then). */
store *store_new(const store_ops *ops, void *impl);

#endif
