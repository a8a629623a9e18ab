/* test_store.c — the store's group commit (server/store.h), on a real SQLite file:
 * concurrent writers share transactions, every synchronous write is committed when it
 * returns (a second connection sees it at once), asynchronous writes are committed by
 * the next group or by store_close, and everything is there after a reopen.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob.h"
#include "store.h"

#define ST_THREADS 8
#define ST_PER_THREAD 40

static char st_dir[128];

static store *st_open(void)
{
    store_limits lim = {(size_t)1 << 30, 1000000};
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
        /* committed when it returns: visible to another connection right away */
        if (i % 8 == 0 && !st_visible(id))
            a->invisible++;
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
    long long commits = 0, writes = 0;
    store_commit_counts(s, &commits, &writes);
    /* the async "running" writes ride along with later groups */
    cr_expect_eq(writes, 3LL * ST_THREADS * ST_PER_THREAD, "every write committed once (%lld)", writes);
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
