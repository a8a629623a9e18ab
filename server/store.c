/* store.c — SQLite tables models, results and jobs. */
#define STORE_SQLITE_IMPL /* this file is the SQLite backend: store_sqlite.h */
#include "store_sqlite.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_TRIM_BATCH 32 /* rows dropped per statement when over a limit */
#define STORE_TRIM_TO 0.9   /* ... down to this fraction of the limit */

enum {
    STMT_PUT_MODEL,
    STMT_GET_MODEL,
    STMT_PUT_JOB,
    STMT_PUT_RESULT,
    STMT_GET_RESULT,
    STMT_GET_JOB,
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_ROLLBACK,
    STMT_OLDEST_RESULTS,
    STMT_DROP_RESULT,
    STMT_DROP_OLD_JOBS,
    STMT_COUNT_
};

static const char *const store__sql[STMT_COUNT_] = {
    [STMT_PUT_MODEL] = "INSERT OR IGNORE INTO models(id, json) VALUES(?1, ?2)",
    [STMT_GET_MODEL] = "SELECT json FROM models WHERE id = ?1",
    [STMT_PUT_JOB] = "INSERT OR REPLACE INTO jobs(id, status, model_id, key, doc, created, "
                     "updated) VALUES(?1, ?2, ?3, ?4, ?5, ?6, (julianday('now') - 2440587.5) * 86400.0)",
    [STMT_PUT_RESULT] = "INSERT OR IGNORE INTO results(key, model_id, job_id, bytes, body, created) "
                        "VALUES(?1, ?2, ?3, ?4, ?5, (julianday('now') - 2440587.5) * 86400.0)",
    [STMT_GET_RESULT] = "SELECT body FROM results WHERE key = ?1",
    [STMT_GET_JOB] = "SELECT status, model_id, key, doc, created FROM jobs WHERE id = ?1",
    [STMT_BEGIN] = "BEGIN IMMEDIATE",
    [STMT_COMMIT] = "COMMIT",
    [STMT_ROLLBACK] = "ROLLBACK",
    [STMT_OLDEST_RESULTS] = "SELECT rowid, bytes FROM results ORDER BY rowid LIMIT ?1",
    [STMT_DROP_RESULT] = "DELETE FROM results WHERE rowid = ?1",
    [STMT_DROP_OLD_JOBS] = "DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs ORDER BY rowid LIMIT ?1)",
};

static const char store__schema[] =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS models(id TEXT PRIMARY KEY, json TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS results(key TEXT PRIMARY KEY, model_id TEXT NOT NULL,"
    "  job_id TEXT NOT NULL, bytes INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, body TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS jobs(id TEXT PRIMARY KEY, status TEXT NOT NULL,"
    "  model_id TEXT, key TEXT, doc TEXT, created REAL NOT NULL, updated REAL NOT NULL);"
    "UPDATE jobs SET status = 'failed', updated = (julianday('now') - 2440587.5) * 86400.0, doc = "
    "json_object("
    "  'job_id', id, 'status', 'failed', 'model_id', model_id, 'progress', 0,"
    "  'problem', json_object('type', 'https://hamel.dev/problems/internal',"
    "    'title', 'Internal error', 'status', 500,"
    "    'detail', 'the server stopped before this job finished', 'errors', json_array()))"
    "  WHERE status IN ('queued', 'running');";

/* After store__schema: the byte column of a database from before the limits. The oldest
 * rows are found by rowid, which grows with every insert (a replaced job record gets a
 * new one, so jobs go least recently written first): an index on `created` would cost
 * every write. */
static const char store__upgrade[] = "UPDATE results SET bytes = length(CAST(body AS BLOB)) WHERE bytes = 0;";

/* One write waiting for the group commit: a job record, or a done job with its result. */
typedef struct store_write {
    int done_kind; /* 1: store_put_done, 0: store_put_job */
    const char *id, *status, *model_id, *key, *doc;
    const blob *body;
    double created;
    int async;    /* nobody waits: the strings are owned copies, freed once written */
    int finished; /* under qlock */
    int rc;
    struct store_write *next;
} store_write;

/* Group commit. Lock order: qlock, then lock (the leader takes lock with qlock
 * released; nothing takes qlock while holding lock). */
struct store {
    pthread_mutex_t lock;
    sqlite3 *db;
    sqlite3_stmt *stmt[STMT_COUNT_];
    store_limits lim;
    long long result_bytes, results, jobs; /* kept now (under lock) */
    /* their values after the last commit, for readers that must not wait for one
     * (/metrics on a poll thread): written under lock, read without it */
    _Atomic long long pub_bytes, pub_results, pub_jobs;

    pthread_mutex_t qlock; /* the queue of writes and the leader flag */
    pthread_cond_t qcond;  /* a group was committed */
    store_write *qhead, *qtail;
    int writing;                /* a leader is committing a group */
    long long commits, grouped; /* transactions and writes in them (under lock) */
};

/* Publishes the counts (lock held). */
static void store__publish_locked(store *s)
{
    atomic_store(&s->pub_bytes, s->result_bytes);
    atomic_store(&s->pub_results, s->results);
    atomic_store(&s->pub_jobs, s->jobs);
}

static int store__mkdirs(const char *dir)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path)
        return -1;
    memcpy(path, dir, n + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* The single integer a query returns, or -1. */
static long long store__int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Adds the bytes column to a results table from before it existed. */
static int store__add_bytes_column(sqlite3 *db)
{
    if (store__int(db, "SELECT count(*) FROM pragma_table_info('results') WHERE name = 'bytes'") != 0)
        return SQLITE_OK;
    return sqlite3_exec(db, "ALTER TABLE results ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0", NULL, NULL,
                        NULL);
}

static int store__exec(store *s, sqlite3_stmt *st);
static int store__trim_locked(store *s);

int store_open(const char *dir, const store_limits *lim, store **out)
{
    *out = NULL;
    if (store__mkdirs(dir) != 0) {
        fprintf(stderr, "hamel-server: cannot create data directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/hamel.db", dir);
    store *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->qlock, NULL);
    pthread_cond_init(&s->qcond, NULL);
    s->lim = *lim;
    int rc =
        sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
    char *err = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, store__schema, NULL, NULL, &err);
    if (rc == SQLITE_OK)
        rc = store__add_bytes_column(s->db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->db, store__upgrade, NULL, NULL, &err);
    for (int i = 0; rc == SQLITE_OK && i < STMT_COUNT_; i++)
        rc = sqlite3_prepare_v3(s->db, store__sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[i], NULL);
    if (rc == SQLITE_OK) {
        s->result_bytes = store__int(s->db, "SELECT coalesce(sum(bytes), 0) FROM results");
        s->results = store__int(s->db, "SELECT count(*) FROM results");
        s->jobs = store__int(s->db, "SELECT count(*) FROM jobs");
        if (s->result_bytes < 0 || s->results < 0 || s->jobs < 0)
            rc = SQLITE_ERROR;
    }
    if (rc == SQLITE_OK && store__trim_locked(s) != 0)
        rc = SQLITE_ERROR;
    if (rc == SQLITE_OK)
        store__publish_locked(s);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "hamel-server: store %s: %s\n", path,
                err ? err : (s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc)));
        sqlite3_free(err);
        store_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

static void store__flush(store *s);

void store_close(store *s)
{
    if (!s)
        return;
    if (s->stmt[STMT_COMMIT])
        store__flush(s); /* asynchronous writes still queued */
    pthread_cond_destroy(&s->qcond);
    pthread_mutex_destroy(&s->qlock);
    for (int i = 0; i < STMT_COUNT_; i++)
        sqlite3_finalize(s->stmt[i]);
    sqlite3_close(s->db);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static void store__text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

/* Steps a statement to completion and resets it. Caller holds the lock. */
static int store__exec(store *s, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE) {
        fprintf(stderr, "hamel-server: store: %s\n", sqlite3_errmsg(s->db));
        return -1;
    }
    return 0;
}

static char *store__dup_column(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

int store_put_model(store *s, const char *model_id, const char *json)
{
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st = s->stmt[STMT_PUT_MODEL];
    store__text(st, 1, model_id);
    store__text(st, 2, json);
    int rc = store__exec(s, st);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int store_get_model(store *s, const char *model_id, char **json)
{
    *json = NULL;
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st = s->stmt[STMT_GET_MODEL];
    store__text(st, 1, model_id);
    int rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? 1 : -1;
    if (out == 0) {
        *json = store__dup_column(st, 0);
        if (!*json)
            out = -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    pthread_mutex_unlock(&s->lock);
    return out;
}

static int store__put_job_locked(store *s, const char *id, const char *status, const char *model_id,
                                 const char *key, const char *doc, double created)
{
    sqlite3_stmt *st = s->stmt[STMT_PUT_JOB];
    store__text(st, 1, id);
    store__text(st, 2, status);
    store__text(st, 3, model_id);
    store__text(st, 4, key);
    store__text(st, 5, doc);
    sqlite3_bind_double(st, 6, created);
    int rc = store__exec(s, st);
    /* A job's record is created once, "queued", when it is submitted; later writes
     * replace it. (One dropped meanwhile comes back uncounted until the next open.) */
    if (rc == 0 && !strcmp(status, "queued"))
        s->jobs++;
    return rc;
}

/* Drops the oldest results and job records past the limits, down to STORE_TRIM_TO of
 * them. Caller holds the lock, inside a transaction or not. Returns 0 or -1. */
static int store__trim_locked(store *s)
{
    long long max_bytes = (long long)s->lim.max_result_bytes, max_jobs = (long long)s->lim.max_jobs;
    if (s->result_bytes > max_bytes) {
        long long target = (long long)(STORE_TRIM_TO * (double)max_bytes);
        while (s->result_bytes > target && s->results > 0) {
            sqlite3_stmt *st = s->stmt[STMT_OLDEST_RESULTS];
            sqlite3_bind_int(st, 1, STORE_TRIM_BATCH);
            long long rowid[STORE_TRIM_BATCH], bytes[STORE_TRIM_BATCH];
            int n = 0;
            while (n < STORE_TRIM_BATCH && sqlite3_step(st) == SQLITE_ROW) {
                rowid[n] = sqlite3_column_int64(st, 0);
                bytes[n] = sqlite3_column_int64(st, 1);
                n++;
            }
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
            if (n == 0)
                break;
            for (int i = 0; i < n && s->result_bytes > target; i++) {
                sqlite3_bind_int64(s->stmt[STMT_DROP_RESULT], 1, rowid[i]);
                if (store__exec(s, s->stmt[STMT_DROP_RESULT]) != 0)
                    return -1;
                s->result_bytes -= bytes[i];
                s->results--;
            }
        }
    }
    if (s->jobs > max_jobs) {
        long long drop = s->jobs - (long long)(STORE_TRIM_TO * (double)max_jobs);
        sqlite3_bind_int64(s->stmt[STMT_DROP_OLD_JOBS], 1, drop);
        if (store__exec(s, s->stmt[STMT_DROP_OLD_JOBS]) != 0)
            return -1;
        s->jobs -= sqlite3_changes(s->db);
    }
    return 0;
}

/* One queued write inside the group's transaction. Caller holds lock. */
static int store__apply_locked(store *s, const store_write *w)
{
    if (!w->done_kind)
        return store__put_job_locked(s, w->id, w->status, w->model_id, w->key, w->doc, w->created);
    sqlite3_stmt *st = s->stmt[STMT_PUT_RESULT];
    store__text(st, 1, w->key);
    store__text(st, 2, w->model_id);
    store__text(st, 3, w->id);
    sqlite3_bind_int64(st, 4, (long long)w->body->len);
    sqlite3_bind_text(st, 5, w->body->data, (int)w->body->len, SQLITE_STATIC);
    int rc = store__exec(s, st);
    if (rc == 0 && sqlite3_changes(s->db) == 1) {
        s->result_bytes += (long long)w->body->len;
        s->results++;
    }
    if (rc == 0)
        rc = store__put_job_locked(s, w->id, "done", w->model_id, w->key, NULL, w->created);
    return rc;
}

/* Writes ws[0..n) in one transaction (then trims). Caller holds lock. On failure the
 * transaction is rolled back and the counts are read again. */
static int store__commit_locked(store *s, store_write *const *ws, int n)
{
    int rc = store__exec(s, s->stmt[STMT_BEGIN]);
    for (int i = 0; i < n && rc == 0; i++)
        rc = store__apply_locked(s, ws[i]);
    if (rc == 0)
        rc = store__trim_locked(s);
    if (rc == 0)
        rc = store__exec(s, s->stmt[STMT_COMMIT]);
    if (rc == 0) {
        s->commits++;
        s->grouped += n;
        store__publish_locked(s);
        return 0;
    }
    /* the counts may now be off by this transaction: read them again */
    store__exec(s, s->stmt[STMT_ROLLBACK]);
    s->result_bytes = store__int(s->db, "SELECT coalesce(sum(bytes), 0) FROM results");
    s->results = store__int(s->db, "SELECT count(*) FROM results");
    s->jobs = store__int(s->db, "SELECT count(*) FROM jobs");
    store__publish_locked(s);
    return -1;
}

/* The leader: writes every queued write (a group) in one transaction; if that fails,
 * each in its own, so one bad write fails alone. Called and returns with qlock held;
 * releases it meanwhile. */
static void store__lead(store *s)
{
    s->writing = 1;
    store_write *list = s->qhead;
    s->qhead = s->qtail = NULL;
    pthread_mutex_unlock(&s->qlock);

    int n = 0;
    for (store_write *w = list; w; w = w->next)
        n++;
    store_write *small[64] = {0}, **ws = n <= 64 ? small : malloc((size_t)n * sizeof *ws);
    pthread_mutex_lock(&s->lock);
    if (ws) {
        int i = 0;
        for (store_write *w = list; w; w = w->next)
            ws[i++] = w;
        int rc = store__commit_locked(s, ws, n);
        for (i = 0; i < n; i++)
            ws[i]->rc = rc == 0 ? 0 : store__commit_locked(s, &ws[i], 1);
        if (ws != small)
            free(ws);
    } else {
        for (store_write *w = list; w; w = w->next)
            w->rc = store__commit_locked(s, &w, 1);
    }
    pthread_mutex_unlock(&s->lock);

    pthread_mutex_lock(&s->qlock);
    for (store_write *w = list, *next; w; w = next) {
        next = w->next;
        if (w->async)
            free(w); /* one block with its strings */
        else
            w->finished = 1;
    }
    s->writing = 0;
    pthread_cond_broadcast(&s->qcond);
}

/* Queues w; unless it is asynchronous, returns only once it is committed (leading a
 * group when no one else is), with its result. */
static int store__submit(store *s, store_write *w)
{
    w->next = NULL;
    pthread_mutex_lock(&s->qlock);
    if (s->qtail)
        s->qtail->next = w;
    else
        s->qhead = w;
    s->qtail = w;
    if (w->async) { /* written with the next group */
        pthread_mutex_unlock(&s->qlock);
        return 0;
    }
    while (!w->finished) {
        if (!s->writing)
            store__lead(s);
        else
            pthread_cond_wait(&s->qcond, &s->qlock);
    }
    int rc = w->rc;
    pthread_mutex_unlock(&s->qlock);
    return rc;
}

/* Commits whatever asynchronous writes are queued. */
static void store__flush(store *s)
{
    pthread_mutex_lock(&s->qlock);
    while (s->qhead || s->writing) {
        if (!s->writing)
            store__lead(s);
        else
            pthread_cond_wait(&s->qcond, &s->qlock);
    }
    pthread_mutex_unlock(&s->qlock);
}

int store_put_job(store *s, const char *id, const char *status, const char *model_id, const char *key,
                  const char *doc, double created)
{
    store_write w = {0, id, status, model_id, key, doc, NULL, created, 0, 0, 0, NULL};
    return store__submit(s, &w);
}

/* A copy of s at *p (advanced), or NULL for NULL. */
static const char *store__copy(char **p, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    memcpy(*p, s, n);
    const char *out = *p;
    *p += n;
    return out;
}

int store_put_job_async(store *s, const char *id, const char *status, const char *model_id, const char *key,
                        const char *doc, double created)
{
    size_t need = sizeof(store_write);
    const char *strs[] = {id, status, model_id, key, doc};
    for (int i = 0; i < 5; i++)
        need += strs[i] ? strlen(strs[i]) + 1 : 0;
    store_write *w = malloc(need);
    if (!w)
        return store_put_job(s, id, status, model_id, key, doc, created);
    char *p = (char *)(w + 1);
    *w = (store_write){0, NULL, NULL, NULL, NULL, NULL, NULL, created, 1, 0, 0, NULL};
    w->id = store__copy(&p, id);
    w->status = store__copy(&p, status);
    w->model_id = store__copy(&p, model_id);
    w->key = store__copy(&p, key);
    w->doc = store__copy(&p, doc);
    return store__submit(s, w);
}

int store_put_done(store *s, const char *id, const char *model_id, const char *key, const blob *body,
                   double created)
{
    store_write w = {1, id, "done", model_id, key, NULL, body, created, 0, 0, 0, NULL};
    return store__submit(s, &w);
}

void store_commit_counts(store *s, long long *commits, long long *writes)
{
    pthread_mutex_lock(&s->lock);
    *commits = s->commits;
    *writes = s->grouped;
    pthread_mutex_unlock(&s->lock);
}

void store_counts(store *s, size_t *result_bytes, size_t *results, size_t *jobs)
{
    /* the last commit's counts: never waits for the writer (a poll thread calls this) */
    long long b = atomic_load(&s->pub_bytes), r = atomic_load(&s->pub_results), j = atomic_load(&s->pub_jobs);
    *result_bytes = b > 0 ? (size_t)b : 0;
    *results = r > 0 ? (size_t)r : 0;
    *jobs = j > 0 ? (size_t)j : 0;
}

int store_get_result(store *s, const char *key, blob **out)
{
    *out = NULL;
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st = s->stmt[STMT_GET_RESULT];
    store__text(st, 1, key);
    int rc = sqlite3_step(st);
    int res = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? 1 : -1;
    if (res == 0) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        int n = sqlite3_column_bytes(st, 0);
        *out = t ? blob_new(t, (size_t)n) : NULL;
        if (!*out)
            res = -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    pthread_mutex_unlock(&s->lock);
    return res;
}

int store_get_job(store *s, const char *id, store_job *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->lock);
    sqlite3_stmt *st = s->stmt[STMT_GET_JOB];
    store__text(st, 1, id);
    int rc = sqlite3_step(st);
    int res = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? 1 : -1;
    if (res == 0) {
        out->status = store__dup_column(st, 0);
        out->model_id = store__dup_column(st, 1);
        out->key = store__dup_column(st, 2);
        out->doc = store__dup_column(st, 3);
        out->created = sqlite3_column_double(st, 4);
        if (!out->status)
            res = -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    pthread_mutex_unlock(&s->lock);
    if (res < 0)
        store_job_clear(out);
    return res;
}

void store_job_clear(store_job *j)
{
    free(j->status);
    free(j->model_id);
    free(j->key);
    free(j->doc);
    memset(j, 0, sizeof *j);
}
