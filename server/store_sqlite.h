/* store_sqlite.h — store.c's SQLite store as one backend behind the seam of store.h.
 *
 * store.c was written as the only store, against the names of store.h. Rather than
 * rename its functions, store.c includes this header with STORE_SQLITE_IMPL defined,
 * which maps those names to store_sqlite_* (and its struct to struct store_sqlite)
 * before store.h declares them; every other file sees the plain declarations below,
 * and store_seam.c puts them behind store_ops. store_job_clear is shared, not mapped.
 */
#ifndef HAMEL_SERVER_STORE_SQLITE_H
#define HAMEL_SERVER_STORE_SQLITE_H

#ifdef STORE_SQLITE_IMPL
#define store store_sqlite
#define store_open store_sqlite_open
#define store_close store_sqlite_close
#define store_counts store_sqlite_counts
#define store_put_model store_sqlite_put_model
#define store_get_model store_sqlite_get_model
#define store_put_job store_sqlite_put_job
#define store_put_done store_sqlite_put_done
#define store_get_result store_sqlite_get_result
#define store_get_job store_sqlite_get_job
#define store_put_job_async store_sqlite_put_job_async
#define store_put_model_async store_sqlite_put_model_async
#define store_commit_counts store_sqlite_commit_counts
#define store_full store_sqlite_full
#define store_new store_sqlite_new_unused
#define store_quarantine_put store_sqlite_quarantine_put
#define store_quarantine_get store_sqlite_quarantine_get
#define store_quarantine_del store_sqlite_quarantine_del
#include "store.h"
#else
#include "store.h"

typedef struct store_sqlite store_sqlite;

int store_sqlite_open(const char *dir, const store_limits *lim, store_sqlite **out);
void store_sqlite_close(store_sqlite *s);
void store_sqlite_counts(store_sqlite *s, size_t *result_bytes, size_t *results, size_t *jobs);
int store_sqlite_put_model(store_sqlite *s, const char *model_id, const char *json);
int store_sqlite_get_model(store_sqlite *s, const char *model_id, char **json);
int store_sqlite_put_job(store_sqlite *s, const char *id, const char *status, const char *model_id,
                         const char *key, const char *doc, double created);
int store_sqlite_put_done(store_sqlite *s, const char *id, const char *model_id, const char *key,
                          const blob *body, double created);
int store_sqlite_get_result(store_sqlite *s, const char *key, blob **out);
int store_sqlite_get_job(store_sqlite *s, const char *id, store_job *out);
int store_sqlite_put_job_async(store_sqlite *s, const char *id, const char *status, const char *model_id,
                               const char *key, const char *doc, double created);
void store_sqlite_commit_counts(store_sqlite *s, long long *commits, long long *writes);
int store_sqlite_put_model_async(store_sqlite *s, const char *model_id, const char *json);
int store_sqlite_full(store_sqlite *s);
int store_sqlite_quarantine_put(store_sqlite *s, const char *key, const char *doc, double expires);
int store_sqlite_quarantine_get(store_sqlite *s, const char *key, char **doc, double *expires);
int store_sqlite_quarantine_del(store_sqlite *s, const char *key);
#endif

#endif
