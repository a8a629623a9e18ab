/* test_store.c — the SQLite store (server/store.c), on a real SQLite file: its writer
 * thread commits concurrent writers in shared transactions, every synchronous write is
 * committed when it returns (a second connection sees it at once), asynchronous writes
 * are committed by the next group or by store_close (which drains the queue), everything
 * is there after a reopen, the -wal file stays bounded under a stream of large results,
 * reads do not wait for a write transaction, a kill -9 loses no result whose
 * put_done had returned, and models are kept within their bytes.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blob.h"
#include "store.h"

#define ST_THREADS 8
#define ST_PER_THREAD 40

static char st_dir[128];

static store *st_open(void)
{
    store_limits lim = {(size_t)1 << 30, 1000000, 0};
    store *s = NULL;
    cr_assert_eq(store_open(st_dir, &lim, &s), 0);
    return s;
}

/* Whether a second connection (another "process") sees the done job `id`. */
static int st_visible(const char *id)
{
    char path[200];
    snprintf(path, sizeof path, "%s/hamel.db", st_dir);
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int seen = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT status FROM jobs WHERE id = ?1", -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
        seen = sqlite3_step(q) == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(q, 0), "done") == 0;
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return seen;
}

typedef struct st_arg {
    store *s;
    int t;
    int failures, invisible;
} st_arg;

static void *st_writer(void *p)
{
    st_arg *a = p;
    for (int i = 0; i < ST_PER_THREAD; i++) {
        char id[32], key[32], body[64];
        snprintf(id, sizeof id, "job-%d-%d", a->t, i);
        snprintf(key, sizeof key, "key-%d-%d", a->t, i);
        snprintf(body, sizeof body, "{\"n\":%d}", a->t * 1000 + i);
        blob *b = blob_new(body, strlen(body));
        if (store_put_job(a->s, id, "queued", "m", key, NULL, 1.0) != 0)
            a->failures++;
        if (store_put_job_async(a->s, id, "running", "m", key, NULL, 1.0) != 0)
            a->failures++;
        if (store_put_done(a->s, id, "m", key, b, 1.0) != 0)
            a->failures++;
        /* stored when it returns: the store's reads see it right away (in the journal
         * until the writer's group commits it: a read waits for that) */
        store_job j;
        if (i % 8 == 0 && (store_get_job(a->s, id, &j) != 0 || strcmp(j.status, "done") != 0))
            a->invisible++;
        if (i % 8 == 0)
            store_job_clear(&j);
        blob_release(b);
    }
    return NULL;
}

Test(store, group_commit_commits_every_write)
{
    snprintf(st_dir, sizeof st_dir, "/tmp/hamel-store-test-%ld-XXXXXX", (long)getpid());
    cr_assert_not_null(mkdtemp(st_dir));
    store *s = st_open();
    pthread_t th[ST_THREADS];
    st_arg args[ST_THREADS];
    for (int t = 0; t < ST_THREADS; t++) {
        args[t] = (st_arg){s, t, 0, 0};
        cr_assert_eq(pthread_create(&th[t], NULL, st_writer, &args[t]), 0);
    }
    for (int t = 0; t < ST_THREADS; t++) {
        pthread_join(th[t], NULL);
        cr_expect_eq(args[t].failures, 0, "writer %d: failed writes", t);
        cr_expect_eq(args[t].invisible, 0, "writer %d: a done job not yet committed when reported", t);
    }
    /* and another connection once the queue is committed */
    cr_assert_eq(store_barrier(s), 0);
    cr_expect(st_visible("job-0-0") && st_visible("job-7-39"), "committed after a barrier");
    long long commits = 0, writes = 0;
    store_commit_counts(s, &commits, &writes);
    /* the async "running" writes ride along with later groups */
    cr_expect_eq(writes, 3LL * ST_THREADS * ST_PER_THREAD + 1,
                 "every write committed once, and the barrier (%lld)", writes);
    cr_expect_leq(commits, writes);
    fprintf(stderr, "store group commit: %lld writes in %lld transactions\n", writes, commits);
    /* an async write with no later group is committed by store_close */
    cr_expect_eq(store_put_job_async(s, "late", "running", "m", NULL, NULL, 2.0), 0);
    store_close(s);

    s = st_open();
    for (int t = 0; t < ST_THREADS; t++)
        for (int i = 0; i < ST_PER_THREAD; i++) {
            char key[32];
            snprintf(key, sizeof key, "key-%d-%d", t, i);
            blob *b = NULL;
            cr_assert_eq(store_get_result(s, key, &b), 0, "result %s kept", key);
            char want[64];
            snprintf(want, sizeof want, "{\"n\":%d}", t * 1000 + i);
            cr_expect_eq(b->len, strlen(want));
            cr_expect(memcmp(b->data, want, b->len) == 0);
            blob_release(b);
        }
    store_job j;
    /* "running" at open is turned into failed: the record was written */
    cr_assert_eq(store_get_job(s, "late", &j), 0, "the async record was committed at close");
    cr_expect_str_eq(j.status, "failed");
    store_job_clear(&j);
    store_close(s);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", st_dir);
    cr_expect_eq(system(cmd), 0);
}

/* store_put_many: a block of results and job records in one transaction, each readable
 * afterwards (store_get_results in one read; a key never written comes back NULL). */
Test(store, put_many_writes_a_block_in_one_commit)
{
    snprintf(st_dir, sizeof st_dir, "/tmp/hamel-store-test-%ld-XXXXXX", (long)getpid());
    cr_assert_not_null(mkdtemp(st_dir));
    store *s = st_open();
    enum { N = 50 };
    char ids[N][32], keys[N][32];
    blob *bodies[N];
    store_item items[N];
    for (int i = 0; i < N; i++) {
        char body[64];
        snprintf(ids[i], sizeof ids[i], "job-%d", i);
        snprintf(keys[i], sizeof keys[i], "key-%d", i);
        snprintf(body, sizeof body, "{\"n\":%d}", i);
        bodies[i] = blob_new(body, strlen(body));
        /* every fifth a failed job's record, the others done with a result */
        items[i] = (store_item){ids[i],
                                "failed",
                                "m",
                                keys[i],
                                i % 5 ? NULL : "{\"status\":\"failed\"}",
                                i % 5 ? bodies[i] : NULL,
                                1.0,
                                -7};
    }
    long long c0 = 0, w0 = 0, c1 = 0, w1 = 0;
    store_commit_counts(s, &c0, &w0);
    cr_assert_eq(store_put_many(s, items, N), 0);
    store_commit_counts(s, &c1, &w1);
    cr_expect_eq(c1 - c0, 1, "one transaction for the block (%lld)", c1 - c0);
    cr_expect_eq(w1 - w0, N, "every item written (%lld)", w1 - w0);
    for (int i = 0; i < N; i++)
        cr_expect_eq(items[i].rc, 0, "item %d", i);
    cr_expect(st_visible("job-1"), "committed when it returns");
    const char *ask[N + 1];
    for (int i = 0; i < N; i++)
        ask[i] = keys[i];
    ask[N] = "never-written";
    blob *got[N + 1];
    cr_assert_eq(store_get_results(s, ask, N + 1, got), 0);
    for (int i = 0; i <= N; i++) {
        if (i == N || i % 5 == 0) {
            cr_expect_null(got[i], "no result under %s", ask[i]);
        } else {
            cr_assert_not_null(got[i], "result %s", ask[i]);
            cr_expect(got[i]->len == bodies[i]->len && !memcmp(got[i]->data, bodies[i]->data, got[i]->len),
                      "result %s as written", ask[i]);
        }
        blob_release(got[i]);
    }
    store_job j;
    cr_assert_eq(store_get_job(s, "job-5", &j), 0);
    cr_expect_str_eq(j.status, "failed");
    cr_expect_str_eq(j.doc, "{\"status\":\"failed\"}");
    store_job_clear(&j);
    cr_assert_eq(store_get_job(s, "job-6", &j), 0);
    cr_expect_str_eq(j.status, "done");
    store_job_clear(&j);
    for (int i = 0; i < N; i++)
        blob_release(bodies[i]);
    store_close(s);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", st_dir);
    cr_expect_eq(system(cmd), 0);
}

/* A fresh directory in st_dir. */
static void st_mkdir(void)
{
    snprintf(st_dir, sizeof st_dir, "/tmp/hamel-store-test-%ld-XXXXXX", (long)getpid());
    cr_assert_not_null(mkdtemp(st_dir));
}

static void st_rmdir(void)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", st_dir);
    cr_expect_eq(system(cmd), 0);
}

typedef struct st_async_arg {
    store *s;
    int t;
    int failures;
} st_async_arg;

static void *st_async_writer(void *p)
{
    st_async_arg *a = p;
    for (int i = 0; i < ST_PER_THREAD; i++) {
        char id[32];
        snprintf(id, sizeof id, "async-%d-%d", a->t, i);
        if (store_put_job_async(a->s, id, "cancelled", "m", NULL, "{}", 1.0) != 0)
            a->failures++;
    }
    return NULL;
}

/* Asynchronous writes only (nothing wakes the writer thread for them): store_close
 * commits every one before it returns. */
Test(store, close_drains_the_queue)
{
    st_mkdir();
    store *s = st_open();
    pthread_t th[ST_THREADS];
    st_async_arg args[ST_THREADS];
    for (int t = 0; t < ST_THREADS; t++) {
        args[t] = (st_async_arg){s, t, 0};
        cr_assert_eq(pthread_create(&th[t], NULL, st_async_writer, &args[t]), 0);
    }
    for (int t = 0; t < ST_THREADS; t++) {
        pthread_join(th[t], NULL);
        cr_expect_eq(args[t].failures, 0, "writer %d: failed writes", t);
    }
    store_close(s);

    s = st_open();
    size_t bytes = 0, results = 0, jobs = 0;
    store_counts(s, &bytes, &results, &jobs);
    cr_expect_eq(jobs, (size_t)(ST_THREADS * ST_PER_THREAD), "records counted at open (%zu)", jobs);
    for (int t = 0; t < ST_THREADS; t++)
        for (int i = 0; i < ST_PER_THREAD; i++) {
            char id[32];
            snprintf(id, sizeof id, "async-%d-%d", t, i);
            store_job j;
            cr_assert_eq(store_get_job(s, id, &j), 0, "%s committed by store_close", id);
            cr_expect_str_eq(j.status, "cancelled");
            store_job_clear(&j);
        }
    store_close(s);
    st_rmdir();
}

/* A model written asynchronously is committed no later than a synchronous write queued
 * after it: once the job record that names it is stored, so is the model (a second
 * connection sees both), and before that it waits in the queue, unwritten. */
Test(store, an_async_model_is_committed_with_the_next_write)
{
    st_mkdir();
    store *s = st_open();
    cr_assert_eq(store_put_model_async(s, "m-async", "{\"coordinates\":[\"x\"]}"), 0);
    char *json = NULL;
    cr_expect_eq(store_get_model(s, "m-async", &json), 1, "not committed before a synchronous write");
    free(json);
    cr_assert_eq(store_put_job(s, "j-after", "queued", "m-async", "k", NULL, 1.0), 0);
    json = NULL;
    cr_assert_eq(store_get_model(s, "m-async", &json), 0, "the model is stored with the job that names it");
    cr_expect_str_eq(json, "{\"coordinates\":[\"x\"]}");
    free(json);
    store_close(s);
    st_rmdir();
}

/* Models are kept within max_model_bytes, oldest dropped first, counted again at open:
 * distinct models posted without end (each up to the body cap) grew the database for
 * ever. */
Test(store, models_are_kept_within_their_bytes_oldest_dropped_first)
{
    st_mkdir();
    store_limits lim = {(size_t)1 << 30, 1000000, 64 << 10};
    store *s = NULL;
    cr_assert_eq(store_open(st_dir, &lim, &s), 0);
    char text[1024 + 64], id[32];
    memset(text, ' ', sizeof text);
    for (int i = 0; i < 200; i++) { /* 200 KB of models past a 64 KB bound */
        snprintf(id, sizeof id, "m-%03d", i);
        int n = snprintf(text, sizeof text, "{\"name\":\"%s\",\"pad\":\"", id);
        memset(text + n, 'p', 1000);
        strcpy(text + n + 1000, "\"}");
        cr_assert_eq(i % 2 ? store_put_model(s, id, text) : store_put_model_async(s, id, text), 0);
    }
    cr_assert_eq(store_put_job(s, "j-last", "queued", "m-199", "k", NULL, 1.0), 0); /* commits the queue */
    char *json = NULL;
    cr_expect_eq(store_get_model(s, "m-000", &json), 1, "the oldest model is still kept past the bound");
    free(json);
    json = NULL;
    cr_expect_eq(store_get_model(s, "m-199", &json), 0, "the newest model was dropped");
    free(json);
    store_close(s);
    /* the bytes kept, read from the file: within the bound */
    char path[200];
    snprintf(path, sizeof path, "%s/hamel.db", st_dir);
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT sum(length(json)), count(*) FROM models", -1, &q, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
    long long kept = sqlite3_column_int64(q, 0), count = sqlite3_column_int64(q, 1);
    sqlite3_finalize(q);
    sqlite3_close(db);
    cr_expect(kept <= 64 << 10 && count > 10, "%lld bytes in %lld models kept, bound 65536", kept, count);
    /* a smaller bound at the next open trims at once */
    lim.max_model_bytes = 16 << 10;
    cr_assert_eq(store_open(st_dir, &lim, &s), 0);
    json = NULL;
    cr_expect_eq(store_get_model(s, "m-199", &json), 0, "the newest model was dropped at open");
    free(json);
    json = NULL;
    cr_expect_eq(store_get_model(s, "m-150", &json), 1, "a smaller bound at open kept an older model");
    free(json);
    store_close(s);
    st_rmdir();
}

/* A model write that fails takes the job record that names it down with it (no record
 * names a model the store lacks), while the other writes of the same group are written:
 * a trigger (added by another connection) refuses the model "m-bad". */
Test(store, a_failed_model_write_fails_the_job_that_names_it)
{
    st_mkdir();
    store *s = st_open();
    char path[200];
    snprintf(path, sizeof path, "%s/hamel.db", st_dir);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db,
                              "CREATE TRIGGER refuse_bad BEFORE INSERT ON models WHEN NEW.id = 'm-bad' "
                              "BEGIN SELECT RAISE(ABORT, 'refused'); END;",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    cr_assert_eq(store_put_model_async(s, "m-bad", "{}"), 0);
    cr_assert_eq(store_put_model_async(s, "m-good", "{}"), 0);
    cr_assert_eq(store_put_job_async(s, "j-good", "queued", "m-good", "k1", NULL, 1.0), 0);
    cr_expect_neq(store_put_job(s, "j-bad", "queued", "m-bad", "k2", NULL, 1.0), 0,
                  "the record naming the refused model is not written");
    store_job j;
    cr_expect_eq(store_get_job(s, "j-bad", &j), 1, "no record j-bad");
    cr_assert_eq(store_get_job(s, "j-good", &j), 0, "the rest of the group is written");
    store_job_clear(&j);
    char *json = NULL;
    cr_expect_eq(store_get_model(s, "m-good", &json), 0);
    free(json);
    store_close(s);
    st_rmdir();
}

#define ST_BIG_BYTES (277 * 1024) /* a rolling disk's 1001 samples */
#define ST_BIG_WRITES 400         /* about 110 MB through the WAL */
#define ST_WAL_BOUND (40LL << 20) /* the store's hard cap (twice 16 MB) and one group */

static long long st_wal_bytes(void)
{
    char path[200];
    snprintf(path, sizeof path, "%s/hamel.db-wal", st_dir);
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* A steady stream of large results, written back to back as fast as one thread can:
 * the -wal file stays bounded (checkpoints and truncation happen while jobs write),
 * and the results are all there (within the byte limit, the newest). */
Test(store, wal_stays_bounded, .timeout = 120)
{
    st_mkdir();
    store_limits lim = {(size_t)64 << 20, 1000000, 0};
    store *s = NULL;
    cr_assert_eq(store_open(st_dir, &lim, &s), 0);
    char *body = malloc(ST_BIG_BYTES);
    cr_assert_not_null(body);
    long long wal_max = 0;
    for (int i = 0; i < ST_BIG_WRITES; i++) {
        for (size_t k = 0; k < ST_BIG_BYTES; k++)
            body[k] = (char)('0' + (k * 7 + (size_t)i) % 10);
        blob *b = blob_new(body, ST_BIG_BYTES);
        char id[32], key[32];
        snprintf(id, sizeof id, "big-%d", i);
        snprintf(key, sizeof key, "bigkey-%d", i);
        cr_assert_eq(store_put_job(s, id, "queued", "m", key, NULL, 1.0), 0);
        cr_assert_eq(store_put_done(s, id, "m", key, b, 1.0), 0);
        blob_release(b);
        long long w = st_wal_bytes();
        if (w > wal_max)
            wal_max = w;
    }
    free(body);
    fprintf(stderr, "store: %d results of %d bytes, largest -wal %.1f MB\n", ST_BIG_WRITES, ST_BIG_BYTES,
            (double)wal_max / 1e6);
    cr_expect_leq(wal_max, ST_WAL_BOUND, "the -wal file reached %lld bytes", wal_max);
    cr_expect_gt(wal_max, 0, "the store writes through a WAL");
    blob *b = NULL;
    char key[32];
    snprintf(key, sizeof key, "bigkey-%d", ST_BIG_WRITES - 1);
    cr_assert_eq(store_get_result(s, key, &b), 0, "the newest result is there");
    cr_expect_eq(b->len, (size_t)ST_BIG_BYTES);
    blob_release(b);
    size_t bytes = 0, results = 0, jobs = 0;
    store_counts(s, &bytes, &results, &jobs);
    cr_expect_leq(bytes, lim.max_result_bytes, "trimmed to the limit on the writer thread (%zu)", bytes);
    cr_expect_eq(jobs, (size_t)ST_BIG_WRITES);
    store_close(s);
    st_rmdir();
}

typedef struct st_pending {
    store *s;
    blob *b;
    int rc;
    _Atomic int returned;
} st_pending;

static void *st_put_done_thread(void *p)
{
    st_pending *a = p;
    a->rc = store_put_done(a->s, "blocked", "m", "blocked-key", a->b, 1.0);
    atomic_store(&a->returned, 1);
    return NULL;
}

static void *st_put_job_thread(void *p)
{
    st_pending *a = p;
    a->rc = store_put_job(a->s, "sync", "queued", "m", "sync-key", "{}", 1.0);
    atomic_store(&a->returned, 1);
    return NULL;
}

/* Another connection holds the database's write lock, so the store's writer waits
 * (inside its busy timeout) with a write in hand: reads are answered meanwhile, and a
 * put_done returns at once (its result is in the journal) and is seen by them. */
Test(store, reads_do_not_wait_for_a_write)
{
    st_mkdir();
    store *s = st_open();
    blob *old = blob_new("{\"old\":1}", 9);
    cr_assert_eq(store_put_done(s, "old", "m", "old-key", old, 1.0), 0);
    blob_release(old);
    cr_assert_eq(store_barrier(s), 0); /* its commit (after the journal) is over */

    char path[200];
    snprintf(path, sizeof path, "%s/hamel.db", st_dir);
    sqlite3 *other = NULL;
    cr_assert_eq(sqlite3_open(path, &other), SQLITE_OK);
    sqlite3_busy_timeout(other, 5000); /* a checkpoint may hold the lock a moment */
    cr_assert_eq(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);

    st_pending a = {s, blob_new("{\"new\":1}", 9), -2, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, st_put_done_thread, &a), 0);
    usleep(50 * 1000); /* let the writer reach the lock (the assertions hold either way) */

    blob *got = NULL;
    cr_expect_eq(store_get_result(s, "old-key", &got), 0, "a read while the writer waits");
    blob_release(got);
    for (int i = 0; i < 200 && !atomic_load(&a.returned); i++)
        usleep(10 * 1000);
    cr_expect_eq(atomic_load(&a.returned), 1, "put_done returned before its commit (journaled)");
    cr_expect_eq(a.rc, 0);
    store_job j;
    cr_assert_eq(store_get_job(s, "blocked", &j), 0, "the journaled result is seen by reads");
    cr_expect_str_eq(j.status, "done");
    store_job_clear(&j);
    got = NULL;
    cr_assert_eq(store_get_result(s, "blocked-key", &got), 0);
    cr_expect(got->len == 9 && !memcmp(got->data, "{\"new\":1}", 9));
    blob_release(got);
    /* a synchronous write waits for the lock meanwhile: reads are still answered */
    st_pending q = {s, NULL, -2, 0};
    pthread_t tq;
    cr_assert_eq(pthread_create(&tq, NULL, st_put_job_thread, &q), 0);
    usleep(50 * 1000);
    got = NULL;
    cr_expect_eq(store_get_result(s, "old-key", &got), 0, "a read while a synchronous write waits");
    cr_expect_eq(atomic_load(&q.returned), 0, "the read was answered before the write could commit");
    blob_release(got);

    cr_assert_eq(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(other);
    pthread_join(th, NULL);
    pthread_join(tq, NULL);
    cr_expect_eq(q.rc, 0, "the write commits once the lock is free");
    cr_assert_eq(store_barrier(s), 0);
    cr_expect(st_visible("blocked"), "the journaled result committed once the lock is free");
    blob_release(a.b);
    cr_assert_eq(store_get_job(s, "blocked", &j), 0);
    cr_expect_str_eq(j.status, "done");
    store_job_clear(&j);
    store_close(s);
    st_rmdir();
}

#define ST_KILL_AFTER 150 /* results reported done before the kill: past a WAL cap or two */

/* The child: writes large results as fast as it can and reports each index on fd once
 * its put_done has returned. Never returns. */
static void st_kill_child(int fd)
{
    store_limits lim = {(size_t)1 << 30, 1000000, 0};
    store *s = NULL;
    if (store_open(st_dir, &lim, &s) != 0)
        _exit(2);
    char *body = malloc(ST_BIG_BYTES);
    if (!body)
        _exit(2);
    for (int i = 0;; i++) {
        memset(body, '0' + i % 10, ST_BIG_BYTES);
        blob *b = blob_new(body, ST_BIG_BYTES);
        char id[32], key[32];
        snprintf(id, sizeof id, "k-%d", i);
        snprintf(key, sizeof key, "kkey-%d", i);
        if (!b || store_put_done(s, id, "m", key, b, 1.0) != 0)
            _exit(3);
        blob_release(b);
        if (write(fd, &i, sizeof i) != (ssize_t)sizeof i)
            _exit(4);
    }
}

/* Results reported done by a process killed with SIGKILL while it writes (checkpoints
 * and WAL truncations in flight) are all in the database when it is opened again. */
Test(store, kill_9_keeps_every_reported_result, .timeout = 120)
{
    st_mkdir();
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        close(fds[0]);
        st_kill_child(fds[1]);
    }
    close(fds[1]);
    int last = -1, i;
    while (last + 1 < ST_KILL_AFTER && read(fds[0], &i, sizeof i) == (ssize_t)sizeof i)
        last = i;
    kill(pid, SIGKILL);
    /* a report written after the last one read: also done before the kill */
    while (read(fds[0], &i, sizeof i) == (ssize_t)sizeof i)
        last = i;
    int status = 0;
    waitpid(pid, &status, 0);
    close(fds[0]);
    cr_assert(WIFSIGNALED(status), "the writer was killed, not ended (status %d)", status);
    cr_assert_geq(last + 1, ST_KILL_AFTER, "the writer reported %d results", last + 1);

    store *s = st_open();
    for (i = 0; i <= last; i++) {
        char key[32];
        snprintf(key, sizeof key, "kkey-%d", i);
        blob *b = NULL;
        cr_assert_eq(store_get_result(s, key, &b), 0, "result %d of %d reported done is kept", i, last + 1);
        cr_expect_eq(b->len, (size_t)ST_BIG_BYTES);
        cr_expect_eq(b->data[0], '0' + i % 10);
        blob_release(b);
    }
    store_close(s);
    st_rmdir();
}

/* The results journal (store.c): st_journal_child stores three results (j-0..j-2) in a
 * child that ends without closing the store, as a kill -9 would: held (with
 * HAMEL_TEST_JOURNAL_HOLD journaled results wait for another write's group, so they are
 * only in <dir>/results.journal) or committed first. */
enum st_child_end {
    ST_HELD,           /* HAMEL_TEST_JOURNAL_HOLD: the results only in the journal */
    ST_HELD_CANCELLED, /* ... and j-0 recorded cancelled before its result */
    ST_COMMITTED,      /* committed (the journal rewound: its entries still in the file) */
};

static void st_journal_child(enum st_child_end end)
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        if (end != ST_COMMITTED)
            setenv("HAMEL_TEST_JOURNAL_HOLD", "1", 1);
        store_limits lim = {(size_t)1 << 30, 1000000, 0};
        store *s = NULL;
        if (store_open(st_dir, &lim, &s) != 0)
            _exit(2);
        if (end == ST_HELD_CANCELLED && store_put_job(s, "j-0", "cancelled", "m", "jk-0", "{}", 1.0) != 0)
            _exit(3);
        for (int i = 0; i < 3; i++) {
            char id[16], key[16], body[64];
            snprintf(id, sizeof id, "j-%d", i);
            snprintf(key, sizeof key, "jk-%d", i);
            snprintf(body, sizeof body, "{\"result\":%d}", i);
            blob *b = blob_new(body, strlen(body));
            if (!b || store_put_done(s, id, "m", key, b, 1.0 + i) != 0)
                _exit(4);
            blob_release(b);
        }
        /* no store_close: the queue is not drained */
        _exit(end == ST_COMMITTED && store_barrier(s) != 0 ? 5 : 0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child stored its results (%d)", status);
}

#define ST_JOURNAL_HEAD 21 /* "HJE <epoch, 16 hex>\n": the journal with no entry */

static long st_journal_size(void)
{
    char path[200];
    snprintf(path, sizeof path, "%s/results.journal", st_dir);
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* Which of j-0, j-1, j-2 the store has as done with their results: a bit each. */
static int st_journal_done(store *s)
{
    int got = 0;
    for (int i = 0; i < 3; i++) {
        char id[16], key[16], want[64];
        snprintf(id, sizeof id, "j-%d", i);
        snprintf(key, sizeof key, "jk-%d", i);
        snprintf(want, sizeof want, "{\"result\":%d}", i);
        store_job j;
        blob *b = NULL;
        if (store_get_job(s, id, &j) == 0) {
            if (!strcmp(j.status, "done") && store_get_result(s, key, &b) == 0 && b->len == strlen(want) &&
                !memcmp(b->data, want, b->len))
                got |= 1 << i;
            store_job_clear(&j);
        }
        blob_release(b);
    }
    return got;
}

Test(store, journaled_results_left_by_a_kill_are_committed_at_open)
{
    st_mkdir();
    st_journal_child(ST_HELD);
    cr_assert_gt(st_journal_size(), 0, "the results are in the journal");
    cr_assert(!st_visible("j-0"), "and not in the database");
    store *s = st_open();
    cr_expect_eq(st_journal_done(s), 7, "all three results committed at open");
    cr_expect_eq(st_journal_size(), ST_JOURNAL_HEAD, "the journal emptied (its header only)");
    store_close(s);
    st_rmdir();
}

Test(store, a_torn_or_damaged_journal_entry_ends_what_is_committed)
{
    st_mkdir();
    st_journal_child(ST_HELD);
    char path[200];
    snprintf(path, sizeof path, "%s/results.journal", st_dir);
    long n = st_journal_size();
    cr_assert_gt(n, 0);
    /* damage the last entry's result (its last "}" before the newline): a bad sum */
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    cr_assert_eq(fseek(f, n - 2, SEEK_SET), 0);
    cr_assert_eq(fputc('0', f), '0');
    /* and a torn entry of the same epoch after it */
    char epoch[17] = "";
    cr_assert_eq(fseek(f, 4, SEEK_SET), 0);
    cr_assert_eq(fread(epoch, 1, 16, f), 16);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    fprintf(f, "HJ2 %s 3 1 4 999999 1 0\nj-9mjk-9{\"re", epoch);
    fclose(f);
    store *s = st_open();
    cr_expect_eq(st_journal_done(s), 3, "the entries before the damaged one, and none after");
    cr_expect_eq(st_journal_size(), ST_JOURNAL_HEAD, "the journal emptied (its header only)");
    store_close(s);
    st_rmdir();
}

/* Emptying the journal rewinds it (a new epoch in its header) instead of truncating it:
 * the entries of earlier epochs stay in the file, written over by the next ones, and a
 * replay must never commit them again. Here three results are committed (the journal
 * rewound: their entries stay in the file), the store is left as a kill -9 leaves it,
 * one of them is then dropped from the database (as the results' trim would), and the
 * next open must not bring it back. */
Test(store, a_rewound_journal_replays_nothing_of_its_old_epochs)
{
    st_mkdir();
    st_journal_child(ST_COMMITTED);
    cr_assert_gt(st_journal_size(), ST_JOURNAL_HEAD, "the old entries are still in the file");
    cr_assert(st_visible("j-1"), "committed before the kill");
    char path[200];
    snprintf(path, sizeof path, "%s/hamel.db", st_dir);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db,
                              "DELETE FROM results WHERE key = 'jk-1'; DELETE FROM jobs WHERE id = 'j-1';",
                              NULL, NULL, NULL),
                 SQLITE_OK, "%s", sqlite3_errmsg(db));
    sqlite3_close(db);
    store *s = st_open();
    cr_expect_eq(st_journal_done(s), 5, "j-0 and j-2 as committed, j-1 not brought back");
    store_close(s);
    st_rmdir();
}

/* The legacy journal's sum (store.c's, with epoch 0) of the texts t[0..3]. */
static unsigned long long st_legacy_sum(const char *const t[4])
{
    uint64_t a = 1, b = 0;
    for (int k = 0; k < 4; k++) {
        size_t n = strlen(t[k]), i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            memcpy(&w, t[k] + i, 8);
            a += w;
            b += a;
        }
        for (; i < n; i++) {
            a += (unsigned char)t[k][i];
            b += a;
        }
    }
    return a ^ (b << 1 | b >> 63);
}

/* A journal left by a server from before the epochs (entries "HJ1 ...", no header) is
 * still committed at open: an upgrade after a kill -9 loses no result. */
Test(store, a_journal_from_before_the_epochs_is_committed_at_open)
{
    st_mkdir();
    char path[200];
    snprintf(path, sizeof path, "%s/results.journal", st_dir);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    for (int i = 0; i < 3; i++) {
        char id[16], key[16], body[64];
        snprintf(id, sizeof id, "j-%d", i);
        snprintf(key, sizeof key, "jk-%d", i);
        snprintf(body, sizeof body, "{\"result\":%d}", i);
        const char *t[4] = {id, "m", key, body};
        fprintf(f, "HJ1 %zu 1 %zu %zu %.17g %016llx\n%sm%s%s\n", strlen(id), strlen(key), strlen(body),
                1.0 + i, st_legacy_sum(t), id, key, body);
    }
    fclose(f);
    store *s = st_open();
    cr_expect_eq(st_journal_done(s), 7, "all three results committed at open");
    cr_expect_eq(st_journal_size(), ST_JOURNAL_HEAD, "the journal emptied (its header only)");
    store_close(s);
    st_rmdir();
}

Test(store, a_cancelled_record_is_not_undone_by_the_journal)
{
    st_mkdir();
    st_journal_child(ST_HELD_CANCELLED);
    store *s = st_open();
    store_job j;
    cr_assert_eq(store_get_job(s, "j-0", &j), 0);
    cr_expect_str_eq(j.status, "cancelled", "a job recorded cancelled stays so");
    store_job_clear(&j);
    cr_expect_eq(st_journal_done(s), 6, "the others committed");
    store_close(s);
    st_rmdir();
}
