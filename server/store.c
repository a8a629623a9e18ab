/* store.c — the SQLite store: tables models, results and jobs in <data>/hamel.db (WAL),
 * and the three threads' worth of connections that keep no job waiting on the disk.
 *
 * - The writer thread owns the only connection that writes. Every write (a model, a job
 *   record, a done job with its result) is queued; the thread takes all queued writes,
 *   commits them in one transaction (group commit), trims the tables to their limits in
 *   that transaction, and wakes the synchronous callers, whose calls return only after
 *   their commit (a result is on disk before anyone is told its job is done).
 *   Asynchronous writes ride along with the next group, or with store_close, which
 *   drains the queue and stops the thread.
 * - Reads use their own connection under their own mutex: in WAL mode a reader sees the
 *   last commit and never waits for the writer's transaction.
 * - The checkpoint thread owns a third connection: SQLite's automatic checkpoint (which
 *   ran inside a job's commit: 12 ms for every ~14th 277 KB result) is off, and this
 *   thread copies the WAL into the database beside the writer (see STORE_CKPT_FRAMES).
 * - The results journal, <data>/results.journal: a done job's result is appended there
 *   (one write, into the kernel's page cache as a WAL commit with synchronous=NORMAL is:
 *   it survives the process, kill -9 included) and committed by the writer's next group,
 *   which starts at once; so a job's answer waits for one append, not for a transaction.
 *   The journal is emptied whenever everything in it is committed; entries found in it
 *   at startup (the server killed between the two) are committed before anything else.
 *   Emptied is rewound, not truncated: the file starts with a header naming its epoch,
 *   each entry carries the epoch it was written in, and emptying writes the header with
 *   the next epoch, so the entries after it are written over pages the kernel already
 *   holds (a 277 KB append into fresh pages of a truncated file took ~45 us, over cached
 *   ones ~5 us) and a replay stops at the first entry of another epoch.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <unistd.h>

#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_TRIM_BATCH 32 /* rows dropped per statement when over a limit */
#define STORE_TRIM_TO 0.9   /* ... down to this fraction of the limit */
/* Checkpoints (WAL frames: pages of 4 KiB). The writer's WAL hook wakes the checkpoint
 * thread once STORE_CKPT_FRAMES frames were added since its last complete checkpoint; it
 * copies them to the database (PASSIVE: it never blocks the writer or a reader, so
 * commits go on during it). The WAL is reused from its start (and cut to
 * STORE_WAL_KEEP_BYTES) by the first write transaction that begins after a complete
 * checkpoint, which first syncs the new WAL header to disk (1-6 ms here): so when a
 * checkpoint copied everything and nothing was committed since, the idle writer thread
 * makes that write itself (store__restart_wal), not the next job. A commit made during
 * the checkpoint spoils the restart, so while the WAL is over STORE_WAL_RESTART_FRAMES
 * the thread checkpoints again at once (up to STORE_CKPT_CHASE times) to copy those too.
 * Should a steady stream of commits still let it grow past STORE_WAL_CAP_FRAMES, the
 * writer thread truncates it after a group (doing the copying that is left: that
 * group's callers wait for it), at the first group that ends with no checkpoint
 * running, or at twice the cap in any case: the -wal file stays under about 2 * 16 MB
 * and one group. */
#define STORE_CKPT_FRAMES 256
#define STORE_CKPT_NICE 5 /* the checkpoint thread's nice value */
#define STORE_WAL_RESTART_FRAMES 1024
#define STORE_CKPT_CHASE 4
#define STORE_WAL_CAP_FRAMES 4096
#define STORE_WAL_KEEP_BYTES (4LL << 20)
/* The results journal's bound: past it a result is committed before its answer, as
 * without a journal, and that commit takes the journaled ones queued before it along, so
 * a steady stream of results empties the journal at least every STORE_JOURNAL_CAP bytes
 * (and commits failing, say for a full disk, end in synchronous commits that report it). */
#define STORE_JOURNAL_CAP (16LL << 20)
/* The filter of result keys the database may hold (store__bloom_*): 2^23 bits (1 MiB),
 * three probes; a key not in it is not looked up (a new request's result: ~0.03 ms of
 * a read transaction). Past about a million results its false positives grow (they cost
 * the lookup as before); trimmed results stay in it likewise. */
#define STORE_BLOOM_BITS (1u << 23)
#define STORE_JOURNAL_MAGIC "HJ2"      /* an entry: magic, epoch, lengths, created, sum */
#define STORE_JOURNAL_LEGACY "HJ1"     /* ... as written before the epochs (read at startup) */
#define STORE_JOURNAL_HEAD_MAGIC "HJE" /* the file's header: "HJE <epoch, 16 hex>\n" */
#define STORE_JOURNAL_HEAD 21          /* its length */

/* The writer connection's statements. */
enum {
    STMT_PUT_MODEL,
    STMT_PUT_JOB,
    STMT_PUT_RESULT,
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_ROLLBACK,
    STMT_OLDEST_RESULTS,
    STMT_DROP_RESULT,
    STMT_DROP_OLD_JOBS,
    STMT_OLDEST_MODELS,
    STMT_DROP_MODEL,
    STMT_COUNT_
};

static const char *const store__sql[STMT_COUNT_] = {
    [STMT_PUT_MODEL] = "INSERT OR IGNORE INTO models(id, json) VALUES(?1, ?2)",
    [STMT_PUT_JOB] = "INSERT OR REPLACE INTO jobs(id, status, model_id, key, doc, created, "
                     "updated) VALUES(?1, ?2, ?3, ?4, ?5, ?6, (julianday('now') - 2440587.5) * 86400.0)",
    [STMT_PUT_RESULT] = "INSERT OR IGNORE INTO results(key, model_id, job_id, bytes, body, created) "
                        "VALUES(?1, ?2, ?3, ?4, ?5, (julianday('now') - 2440587.5) * 86400.0)",
    [STMT_BEGIN] = "BEGIN IMMEDIATE",
    [STMT_COMMIT] = "COMMIT",
    [STMT_ROLLBACK] = "ROLLBACK",
    [STMT_OLDEST_RESULTS] = "SELECT rowid, bytes FROM results ORDER BY rowid LIMIT ?1",
    [STMT_DROP_RESULT] = "DELETE FROM results WHERE rowid = ?1",
    [STMT_DROP_OLD_JOBS] = "DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs ORDER BY rowid LIMIT ?1)",
    [STMT_OLDEST_MODELS] = "SELECT rowid, length(CAST(json AS BLOB)) FROM models ORDER BY rowid LIMIT ?1",
    [STMT_DROP_MODEL] = "DELETE FROM models WHERE rowid = ?1",
};

/* The bytes of the models' JSON text kept (the sum HAMEL_STORE_MODEL_BYTES bounds). */
#define STORE_MODEL_BYTES_SQL "SELECT coalesce(sum(length(CAST(json AS BLOB))), 0) FROM models"

/* The reader connection's statements. */
enum { RSTMT_GET_MODEL, RSTMT_GET_RESULT, RSTMT_GET_JOB, RSTMT_GET_QUARANTINE, RSTMT_COUNT_ };

static const char *const store__rsql[RSTMT_COUNT_] = {
    [RSTMT_GET_MODEL] = "SELECT json FROM models WHERE id = ?1",
    [RSTMT_GET_RESULT] = "SELECT body FROM results WHERE key = ?1",
    [RSTMT_GET_JOB] = "SELECT status, model_id, key, doc, created FROM jobs WHERE id = ?1",
    [RSTMT_GET_QUARANTINE] = "SELECT doc, expires FROM quarantine WHERE key = ?1 AND expires > "
                             "(julianday('now') - 2440587.5) * 86400.0",
};

static const char store__schema[] =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "PRAGMA wal_autocheckpoint=0;"
    "CREATE TABLE IF NOT EXISTS models(id TEXT PRIMARY KEY, json TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS quarantine(key TEXT PRIMARY KEY, doc TEXT NOT NULL, expires REAL NOT NULL);"
    "CREATE TABLE IF NOT EXISTS results(key TEXT PRIMARY KEY, model_id TEXT NOT NULL,"
    "  job_id TEXT NOT NULL, bytes INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, body TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS jobs(id TEXT PRIMARY KEY, status TEXT NOT NULL,"
    "  model_id TEXT, key TEXT, doc TEXT, created REAL NOT NULL, updated REAL NOT NULL);"
    "UPDATE jobs SET status = 'failed', updated = (julianday('now') - 2440587.5) * 86400.0, doc = "
    "json_object("
    "  'job_id', id, 'status', 'failed', 'model_id', model_id, 'progress', 0,"
    "  'problem', json_object('type', '/problems/internal',"
    "    'title', 'Internal error', 'status', 500,"
    "    'detail', 'the server stopped before this job finished', 'errors', json_array()))"
    "  WHERE status IN ('queued', 'running');";

/* After store__schema: the byte column of a database from before the limits. The oldest
 * rows are found by rowid, which grows with every insert (a replaced job record gets a
 * new one, so jobs go least recently written first): an index on `created` would cost
 * every write. */
static const char store__upgrade[] = "UPDATE results SET bytes = length(CAST(body AS BLOB)) WHERE bytes = 0;";

enum { W_JOB, W_DONE, W_MODEL, W_NONE /* store_barrier: nothing to write */ };

/* One write waiting for the writer thread: a job record, a done job with its result, or
 * a model (id in `id`, its JSON in `doc`). */
typedef struct store_write {
    int kind;
    const char *id, *status, *model_id, *key, *doc;
    const blob *body;
    double created;
    int async;    /* nobody waits: the strings are owned copies, freed once written */
    int finished; /* under qlock */
    int rc;
    struct store_write *next;
    int journaled;             /* a W_DONE whose result is in the journal (async; body retained) */
    struct store_write *jnext; /* ... in the list of those not yet committed (jlock) */
    int jdone;                 /* ... committed (writer thread) */
} store_write;

/* Three connections, three kinds of thread.
 *
 * The writer thread owns wdb, its statements and the counts (result_bytes, results,
 * jobs); nothing else touches them after store_open. Callers queue writes under qlock
 * and wait on qdone; the writer waits on qwork for a synchronous write (asynchronous
 * ones ride along with the next group) or for store_close.
 *
 * Readers share rdb under rlock (WAL: a read never waits for the writer's commit).
 *
 * The checkpoint thread owns cdb; the writer's WAL hook wakes it (ckpt_wanted, under
 * clock), and it wakes the writer (restart_wal, under qlock) when the WAL is all copied.
 * Lock order: qlock, rlock and clock are leaves, never held together. */
typedef struct sqlite_store sqlite_store;

struct sqlite_store {
    sqlite3 *wdb;
    sqlite3_stmt *stmt[STMT_COUNT_];
    store_limits lim;
    long long result_bytes, results, jobs; /* kept now (writer thread) */
    long long model_bytes;                 /* of the models' text (writer thread) */
    /* their values after the last commit, for readers that must not wait for one
     * (/metrics on a poll thread): written by the writer thread, read by anyone */
    _Atomic long long pub_bytes, pub_results, pub_jobs;
    _Atomic long long commits, grouped; /* transactions and writes in them */
    atomic_int full;                    /* the last failed write failed for want of space (store_full) */

    pthread_mutex_t qlock; /* the queue of writes */
    pthread_cond_t qwork;  /* to the writer: a synchronous write, or stop */
    pthread_cond_t qdone;  /* to the callers: a group was committed */
    store_write *qhead, *qtail;
    int qsync;       /* synchronous writes queued */
    int qkick;       /* a journaled result queued: commit now, nobody waits */
    int stopping;    /* store_close: drain the queue and end */
    int restart_wal; /* a checkpoint copied the whole WAL: restart it while idle */

    int writer_running;
    pthread_t writer;

    pthread_mutex_t rlock;
    sqlite3 *rdb;
    sqlite3_stmt *rstmt[RSTMT_COUNT_];

    pthread_mutex_t clock;
    pthread_cond_t ccond;
    int ckpt_wanted, ckpt_stop, ckpt_running;
    int ckpt_active; /* a checkpoint is running on cdb */
    int ckpt_hold;   /* the writer truncates: start none */
    pthread_t ckpt;
    sqlite3 *cdb;
    _Atomic int wal_frames;  /* in the WAL after the writer's last commit */
    _Atomic int ckpt_frames; /* the WAL's length when the last checkpoint was complete */

    _Atomic uint64_t *bloom; /* STORE_BLOOM_BITS: keys of results the database may hold (NULL: none) */

    pthread_mutex_t jlock; /* the journal: a leaf lock, like the others */
    int jfd;               /* -1: no journal (results are committed before their answer) */
    long long jbytes;      /* its length in use (its header and this epoch's entries) */
    uint64_t jepoch;       /* the epoch in its header, which its entries carry */
    long jpending;         /* entries in it not yet committed */
    store_write *jlist;    /* ... those entries' writes: reads find them there */
    int jhold;             /* HAMEL_TEST_JOURNAL_HOLD=1: journaled results wait for the
                            * next group another write starts (a test's kill -9 finds them
                            * only in the journal) */
};

/* Publishes the counts (writer thread). */
static void store__publish(sqlite_store *s)
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

static int store__exec(sqlite_store *s, sqlite3_stmt *st);
static int store__trim(sqlite_store *s);
static void *store__writer_main(void *arg);
static void *store__ckpt_main(void *arg);
static void store__journal_settle(sqlite_store *s, store_write *list);
static void store__journal_open(sqlite_store *s, const char *dir);
static void store__bloom_fill(sqlite_store *s);

/* The WAL hook of wdb, after every commit (writer thread): wakes the checkpoint thread
 * when STORE_CKPT_FRAMES frames were added since its last complete checkpoint. */
static int store__wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
    (void)db;
    (void)name;
    sqlite_store *s = arg;
    if (frames < atomic_load(&s->wal_frames)) /* the WAL started again: nothing copied yet */
        atomic_store(&s->ckpt_frames, 0);
    int copied = atomic_load(&s->ckpt_frames);
    atomic_store(&s->wal_frames, frames);
    if (frames - (frames >= copied ? copied : 0) >= STORE_CKPT_FRAMES) {
        pthread_mutex_lock(&s->clock);
        s->ckpt_wanted = 1;
        pthread_cond_broadcast(&s->ccond);
        pthread_mutex_unlock(&s->clock);
    }
    return SQLITE_OK;
}

/* Opens another connection to the database at path (readers, checkpoints). */
static int store__connect(const char *path, sqlite3 **db)
{
    int rc = sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(*db, STORE_BUSY_TIMEOUT_MS);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(*db, "PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0;", NULL, NULL, NULL);
    return rc;
}

static void sqlite__close(void *impl);

static int sqlite__open(const char *dir, const store_limits *lim, sqlite_store **out)
{
    *out = NULL;
    if (store__mkdirs(dir) != 0) {
        fprintf(stderr, "hamel-server: cannot create data directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/hamel.db", dir);
    sqlite_store *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    pthread_mutex_init(&s->qlock, NULL);
    pthread_cond_init(&s->qwork, NULL);
    pthread_cond_init(&s->qdone, NULL);
    pthread_mutex_init(&s->rlock, NULL);
    pthread_mutex_init(&s->clock, NULL);
    pthread_cond_init(&s->ccond, NULL);
    pthread_mutex_init(&s->jlock, NULL);
    s->jfd = -1;
    s->lim = *lim;
    int rc = sqlite3_open_v2(path, &s->wdb, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(s->wdb, STORE_BUSY_TIMEOUT_MS);
    char *err = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->wdb, store__schema, NULL, NULL, &err);
    if (rc == SQLITE_OK)
        rc = store__add_bytes_column(s->wdb);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->wdb, store__upgrade, NULL, NULL, &err);
    if (rc == SQLITE_OK) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA journal_size_limit=%lld", STORE_WAL_KEEP_BYTES);
        rc = sqlite3_exec(s->wdb, sql, NULL, NULL, &err);
    }
    for (int i = 0; rc == SQLITE_OK && i < STMT_COUNT_; i++)
        rc = sqlite3_prepare_v3(s->wdb, store__sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[i], NULL);
    if (rc == SQLITE_OK) {
        s->result_bytes = store__int(s->wdb, "SELECT coalesce(sum(bytes), 0) FROM results");
        s->results = store__int(s->wdb, "SELECT count(*) FROM results");
        s->jobs = store__int(s->wdb, "SELECT count(*) FROM jobs");
        s->model_bytes = store__int(s->wdb, STORE_MODEL_BYTES_SQL);
        if (s->result_bytes < 0 || s->results < 0 || s->jobs < 0 || s->model_bytes < 0)
            rc = SQLITE_ERROR;
    }
    if (rc == SQLITE_OK && store__trim(s) != 0)
        rc = SQLITE_ERROR;
    if (rc == SQLITE_OK)
        store__bloom_fill(s);
    if (rc == SQLITE_OK)
        store__journal_open(s, dir);
    if (rc == SQLITE_OK)
        store__publish(s);
    sqlite3 *failed = s->wdb;
    if (rc == SQLITE_OK) {
        failed = NULL;
        rc = store__connect(path, &s->rdb);
        if (rc != SQLITE_OK)
            failed = s->rdb;
    }
    for (int i = 0; rc == SQLITE_OK && i < RSTMT_COUNT_; i++) {
        rc = sqlite3_prepare_v3(s->rdb, store__rsql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->rstmt[i], NULL);
        if (rc != SQLITE_OK)
            failed = s->rdb;
    }
    if (rc == SQLITE_OK) {
        rc = store__connect(path, &s->cdb);
        if (rc != SQLITE_OK)
            failed = s->cdb;
    }
    if (rc == SQLITE_OK) {
        sqlite3_wal_hook(s->wdb, store__wal_hook, s);
        s->writer_running = pthread_create(&s->writer, NULL, store__writer_main, s) == 0;
        s->ckpt_running = pthread_create(&s->ckpt, NULL, store__ckpt_main, s) == 0;
        if (!s->writer_running || !s->ckpt_running) {
            err = sqlite3_mprintf("cannot start the store's threads");
            rc = SQLITE_ERROR;
        }
    }
    if (rc != SQLITE_OK) {
        fprintf(stderr, "hamel-server: store %s: %s\n", path,
                err ? err : (failed ? sqlite3_errmsg(failed) : sqlite3_errstr(rc)));
        sqlite3_free(err);
        sqlite__close(s);
        return -1;
    }
    *out = s;
    return 0;
}

static void sqlite__close(void *impl)
{
    sqlite_store *s = impl;
    if (!s)
        return;
    if (s->writer_running) { /* it commits whatever is still queued, then ends */
        pthread_mutex_lock(&s->qlock);
        s->stopping = 1;
        pthread_cond_signal(&s->qwork);
        pthread_mutex_unlock(&s->qlock);
        pthread_join(s->writer, NULL);
    }
    if (s->ckpt_running) {
        pthread_mutex_lock(&s->clock);
        s->ckpt_stop = 1;
        pthread_cond_broadcast(&s->ccond);
        pthread_mutex_unlock(&s->clock);
        pthread_join(s->ckpt, NULL);
    }
    for (int i = 0; i < RSTMT_COUNT_; i++)
        sqlite3_finalize(s->rstmt[i]);
    sqlite3_close(s->rdb);
    sqlite3_close(s->cdb);
    for (int i = 0; i < STMT_COUNT_; i++)
        sqlite3_finalize(s->stmt[i]);
    sqlite3_close(s->wdb); /* the last connection: checkpoints and removes the WAL */
    if (s->jfd >= 0)       /* empty unless a result's commit failed (the next start commits it) */
        close(s->jfd);
    for (store_write *w = s->jlist, *next; w; w = next) {
        next = w->jnext;
        blob_release((blob *)w->body);
        free(w);
    }
    free((void *)s->bloom);
    pthread_mutex_destroy(&s->jlock);
    pthread_cond_destroy(&s->ccond);
    pthread_mutex_destroy(&s->clock);
    pthread_mutex_destroy(&s->rlock);
    pthread_cond_destroy(&s->qdone);
    pthread_cond_destroy(&s->qwork);
    pthread_mutex_destroy(&s->qlock);
    free(s);
}

static void store__text(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static int store__space_errno(int e) { return e == ENOSPC || e == EFBIG || e == EDQUOT; }

/* Whether the last failure on db was for want of space: SQLITE_FULL, or a write that
 * failed with ENOSPC, EFBIG (the file size limit) or EDQUOT. SQLite keeps that errno in
 * the file that failed (the database or its WAL), not always in sqlite3_system_errno. */
static int store__out_of_space(sqlite3 *db)
{
    int e = 0;
    if (sqlite3_errcode(db) == SQLITE_FULL || store__space_errno(sqlite3_system_errno(db)))
        return 1;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_LAST_ERRNO, &e) == SQLITE_OK && store__space_errno(e))
        return 1;
    sqlite3_file *wal = NULL;
    e = 0;
    return sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) == SQLITE_OK && wal &&
           wal->pMethods && wal->pMethods->xFileControl &&
           wal->pMethods->xFileControl(wal, SQLITE_FCNTL_LAST_ERRNO, &e) == SQLITE_OK &&
           store__space_errno(e);
}

/* Steps a writer statement to completion and resets it (writer thread). */
static int store__exec(sqlite_store *s, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_DONE) {
        int full = store__out_of_space(s->wdb);
        atomic_store(&s->full, full);
        fprintf(stderr, "hamel-server: store: %s%s\n", sqlite3_errmsg(s->wdb),
                full ? " (the disk under HAMEL_DATA is full)" : "");
        return -1;
    }
    return 0;
}

static char *store__dup_column(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

/* ---- the filter of result keys ---------------------------------------------------- */

/* The three bits of key (FNV-1a, double hashing). */
static void store__bloom_bits(const char *key, uint32_t bit[3])
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    uint64_t h2 = (h >> 29 | h << 35) | 1;
    for (int i = 0; i < 3; i++)
        bit[i] = (uint32_t)((h + (uint64_t)i * h2) & (STORE_BLOOM_BITS - 1));
}

/* Before a result of key can be in the database (it is added before its commit). */
static void store__bloom_add(sqlite_store *s, const char *key)
{
    if (!s->bloom || !key)
        return;
    uint32_t bit[3];
    store__bloom_bits(key, bit);
    for (int i = 0; i < 3; i++)
        atomic_fetch_or(&s->bloom[bit[i] / 64], (uint64_t)1 << (bit[i] % 64));
}

/* Whether the database may hold a result of key (0: it does not). */
static int store__bloom_may(sqlite_store *s, const char *key)
{
    if (!s->bloom)
        return 1;
    uint32_t bit[3];
    store__bloom_bits(key, bit);
    for (int i = 0; i < 3; i++)
        if (!(atomic_load(&s->bloom[bit[i] / 64]) & ((uint64_t)1 << (bit[i] % 64))))
            return 0;
    return 1;
}

/* At open: every key the results table holds. Without the memory (or on a read error)
 * there is no filter: every key is looked up. */
static void store__bloom_fill(sqlite_store *s)
{
    s->bloom = calloc(STORE_BLOOM_BITS / 64, sizeof *s->bloom);
    sqlite3_stmt *st = NULL;
    if (!s->bloom || sqlite3_prepare_v2(s->wdb, "SELECT key FROM results", -1, &st, NULL) != SQLITE_OK) {
        free((void *)s->bloom);
        s->bloom = NULL;
        return;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        store__bloom_add(s, (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        free((void *)s->bloom);
        s->bloom = NULL;
    }
}

/* ---- the writer thread ----------------------------------------------------------- */

static int store__put_job_w(sqlite_store *s, const char *id, const char *status, const char *model_id,
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

/* Drops the oldest rows that `oldest` lists (rowid, bytes; its ?1 the batch) with `drop`
 * (its ?1 the rowid) until *bytes is at most target, counting each in *bytes and *rows
 * (NULL: not counted). Returns 0 or -1. */
static int store__drop_oldest(sqlite_store *s, int oldest, int drop, long long target, long long *bytes,
                              long long *rows)
{
    while (*bytes > target && (!rows || *rows > 0)) {
        sqlite3_stmt *st = s->stmt[oldest];
        sqlite3_bind_int(st, 1, STORE_TRIM_BATCH);
        long long rowid[STORE_TRIM_BATCH], size[STORE_TRIM_BATCH];
        int n = 0;
        while (n < STORE_TRIM_BATCH && sqlite3_step(st) == SQLITE_ROW) {
            rowid[n] = sqlite3_column_int64(st, 0);
            size[n] = sqlite3_column_int64(st, 1);
            n++;
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (n == 0)
            break;
        for (int i = 0; i < n; i++) {
            if (*bytes <= target)
                break;
            sqlite3_bind_int64(s->stmt[drop], 1, rowid[i]);
            if (store__exec(s, s->stmt[drop]) != 0)
                return -1;
            *bytes -= size[i];
            if (rows)
                (*rows)--;
        }
    }
    return 0;
}

/* Drops the oldest models past lim.max_model_bytes (0: none), down to STORE_TRIM_TO of
 * it. Returns 0 or -1. */
static int store__trim_models(sqlite_store *s)
{
    long long max = (long long)s->lim.max_model_bytes;
    if (!max || s->model_bytes <= max)
        return 0;
    return store__drop_oldest(s, STMT_OLDEST_MODELS, STMT_DROP_MODEL,
                              (long long)(STORE_TRIM_TO * (double)max), &s->model_bytes, NULL);
}

/* Drops the oldest results and job records past the limits, down to STORE_TRIM_TO of
 * them, inside a transaction or not (writer thread, or store_open before it starts).
 * Returns 0 or -1. */
static int store__trim(sqlite_store *s)
{
    long long max_bytes = (long long)s->lim.max_result_bytes, max_jobs = (long long)s->lim.max_jobs;
    if (s->result_bytes > max_bytes && store__drop_oldest(s, STMT_OLDEST_RESULTS, STMT_DROP_RESULT,
                                                          (long long)(STORE_TRIM_TO * (double)max_bytes),
                                                          &s->result_bytes, &s->results) != 0)
        return -1;
    if (store__trim_models(s) != 0)
        return -1;
    if (s->jobs > max_jobs) {
        long long drop = s->jobs - (long long)(STORE_TRIM_TO * (double)max_jobs);
        sqlite3_bind_int64(s->stmt[STMT_DROP_OLD_JOBS], 1, drop);
        if (store__exec(s, s->stmt[STMT_DROP_OLD_JOBS]) != 0)
            return -1;
        s->jobs -= sqlite3_changes(s->wdb);
    }
    return 0;
}

/* One queued write inside the group's transaction. */
static int store__apply(sqlite_store *s, const store_write *w)
{
    if (w->kind == W_MODEL) {
        sqlite3_stmt *st = s->stmt[STMT_PUT_MODEL];
        store__text(st, 1, w->id);
        store__text(st, 2, w->doc);
        int rc = store__exec(s, st);
        if (rc == 0 && sqlite3_changes(s->wdb) == 1)
            s->model_bytes += (long long)strlen(w->doc);
        return rc;
    }
    if (w->kind == W_NONE)
        return 0;
    if (w->kind == W_JOB)
        return store__put_job_w(s, w->id, w->status, w->model_id, w->key, w->doc, w->created);
    store__bloom_add(s, w->key); /* before the commit that makes it readable */
    sqlite3_stmt *st = s->stmt[STMT_PUT_RESULT];
    store__text(st, 1, w->key);
    store__text(st, 2, w->model_id);
    store__text(st, 3, w->id);
    sqlite3_bind_int64(st, 4, (long long)w->body->len);
    sqlite3_bind_text(st, 5, w->body->data, (int)w->body->len, SQLITE_STATIC);
    int rc = store__exec(s, st);
    if (rc == 0 && sqlite3_changes(s->wdb) == 1) {
        s->result_bytes += (long long)w->body->len;
        s->results++;
    }
    if (rc == 0)
        rc = store__put_job_w(s, w->id, "done", w->model_id, w->key, NULL, w->created);
    return rc;
}

/* Writes ws[0..n) in one transaction (then trims). On failure the transaction is
 * rolled back and the counts are read again. */
static int store__commit(sqlite_store *s, store_write *const *ws, int n)
{
    int rc = store__exec(s, s->stmt[STMT_BEGIN]);
    for (int i = 0; i < n && rc == 0; i++)
        rc = store__apply(s, ws[i]);
    if (rc == 0)
        rc = store__trim(s);
    if (rc == 0)
        rc = store__exec(s, s->stmt[STMT_COMMIT]);
    if (rc == 0) {
        atomic_fetch_add(&s->commits, 1);
        atomic_fetch_add(&s->grouped, n);
        store__publish(s);
        return 0;
    }
    /* the counts may now be off by this transaction: read them again */
    if (!sqlite3_get_autocommit(s->wdb))
        store__exec(s, s->stmt[STMT_ROLLBACK]);
    s->result_bytes = store__int(s->wdb, "SELECT coalesce(sum(bytes), 0) FROM results");
    s->results = store__int(s->wdb, "SELECT count(*) FROM results");
    s->jobs = store__int(s->wdb, "SELECT count(*) FROM jobs");
    s->model_bytes = store__int(s->wdb, STORE_MODEL_BYTES_SQL);
    store__publish(s);
    return -1;
}

/* Whether a model write before `upto` in list, for the model `upto` names, failed. */
static int store__model_failed(const store_write *list, const store_write *upto)
{
    if (upto->kind == W_MODEL || !upto->model_id)
        return 0;
    for (const store_write *w = list; w && w != upto; w = w->next)
        if (w->kind == W_MODEL && w->rc != 0 && w->id && !strcmp(w->id, upto->model_id))
            return 1;
    return 0;
}

/* Commits the writes of list as one group; if that fails, each in its own transaction,
 * in order, so one bad write fails alone — except that a job record or result naming a
 * model whose (asynchronous) write just failed fails with it: no record in the store
 * names a model the store lacks. Sets each write's rc. */
static void store__commit_list(sqlite_store *s, store_write *list)
{
    int n = 0;
    for (store_write *w = list; w; w = w->next)
        n++;
    store_write *small[64] = {0}, **ws = n <= 64 ? small : malloc((size_t)n * sizeof *ws);
    int rc = -1;
    if (ws) {
        int i = 0;
        for (store_write *w = list; w; w = w->next)
            ws[i++] = w;
        rc = store__commit(s, ws, n);
        if (ws != small)
            free(ws);
    }
    for (store_write *w = list; w; w = w->next)
        w->rc = rc == 0 ? 0 : store__model_failed(list, w) ? -1 : store__commit(s, &w, 1);
}

/* Truncates the WAL on the writer thread once the checkpoint thread is between two
 * checkpoints (a second checkpointer would be refused at once). While one is running
 * and the WAL is under twice the cap, it only holds the next one off and returns: the
 * writer's next group truncates without waiting for that checkpoint's disk syncs. */
static void store__truncate_wal(sqlite_store *s)
{
    pthread_mutex_lock(&s->clock);
    s->ckpt_hold = 1;
    if (s->ckpt_active && atomic_load(&s->wal_frames) < 2 * STORE_WAL_CAP_FRAMES) {
        pthread_mutex_unlock(&s->clock);
        return;
    }
    while (s->ckpt_active)
        pthread_cond_wait(&s->ccond, &s->clock);
    pthread_mutex_unlock(&s->clock);
    int log = -1, copied = -1;
    int rc = sqlite3_wal_checkpoint_v2(s->wdb, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &copied);
    if (rc == SQLITE_OK)
        atomic_store(&s->wal_frames, 0);
    else
        fprintf(stderr, "hamel-server: store: truncating the WAL: %s\n", sqlite3_errmsg(s->wdb));
    pthread_mutex_lock(&s->clock);
    s->ckpt_hold = 0;
    pthread_cond_broadcast(&s->ccond);
    pthread_mutex_unlock(&s->clock);
}

/* Lets the checkpoint thread go on after a truncation that was held off (see
 * store__truncate_wal) became unneeded: the WAL went back under the cap meanwhile (a
 * checkpoint copied it all and it restarted). */
static void store__release_hold(sqlite_store *s)
{
    pthread_mutex_lock(&s->clock);
    if (s->ckpt_hold) {
        s->ckpt_hold = 0;
        pthread_cond_broadcast(&s->ccond);
    }
    pthread_mutex_unlock(&s->clock);
}

/* Restarts the WAL from its start while the writer is idle, with a write of one page
 * (the header's user_version, unused): the first commit after a complete checkpoint
 * does that and, before it, syncs the new WAL header to disk, a wait better spent here
 * than in a job's commit. Only when nothing was committed since the checkpoint. */
static void store__restart_wal(sqlite_store *s)
{
    if (atomic_load(&s->wal_frames) != atomic_load(&s->ckpt_frames))
        return;
    if (sqlite3_exec(s->wdb, "PRAGMA user_version = 0", NULL, NULL, NULL) != SQLITE_OK)
        fprintf(stderr, "hamel-server: store: restarting the WAL: %s\n", sqlite3_errmsg(s->wdb));
}

/* The writer thread: waits for a synchronous write (or store_close), takes every write
 * queued so far, commits them in one transaction and wakes their callers. On
 * store_close it commits what is left and ends. */
static void *store__writer_main(void *arg)
{
    sqlite_store *s = arg;
    pthread_mutex_lock(&s->qlock);
    for (;;) {
        while (!s->qsync && !s->qkick && !s->stopping && !s->restart_wal)
            pthread_cond_wait(&s->qwork, &s->qlock);
        if (!s->qsync && !s->qkick && !s->stopping) { /* idle, and the WAL is all copied */
            s->restart_wal = 0;
            pthread_mutex_unlock(&s->qlock);
            store__restart_wal(s);
            pthread_mutex_lock(&s->qlock);
            continue;
        }
        store_write *list = s->qhead;
        if (!list)
            break; /* stopping, and nothing left */
        s->qhead = s->qtail = NULL;
        s->qsync = 0;
        s->qkick = 0;
        pthread_mutex_unlock(&s->qlock);

        store__commit_list(s, list);
        if (atomic_load(&s->wal_frames) >= STORE_WAL_CAP_FRAMES)
            store__truncate_wal(s);
        else
            store__release_hold(s);
        store__journal_settle(s, list);

        pthread_mutex_lock(&s->qlock);
        for (store_write *w = list, *next; w; w = next) {
            next = w->next;
            if (w->journaled && !w->jdone) {
                /* its commit failed: it stays in the list reads look in */
            } else if (w->async) {
                if (w->journaled)
                    blob_release((blob *)w->body);
                free(w); /* one block with its strings */
            } else {
                w->finished = 1;
            }
        }
        pthread_cond_broadcast(&s->qdone);
    }
    pthread_mutex_unlock(&s->qlock);
    return NULL;
}

/* Queues w for the writer thread; unless it is asynchronous, returns only once it is
 * committed, with its result. -1 once store_close has begun. */
static int store__submit(sqlite_store *s, store_write *w)
{
    w->next = NULL;
    pthread_mutex_lock(&s->qlock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->qlock);
        if (w->async && !w->journaled) /* a journaled one stays listed until store_close */
            free(w);
        return -1;
    }
    if (s->qtail)
        s->qtail->next = w;
    else
        s->qhead = w;
    s->qtail = w;
    if (w->async) { /* written with the next group (a journaled result: at once) */
        if (w->journaled && !s->jhold) {
            s->qkick = 1;
            pthread_cond_signal(&s->qwork);
        }
        pthread_mutex_unlock(&s->qlock);
        return 0;
    }
    s->qsync++;
    pthread_cond_signal(&s->qwork);
    while (!w->finished)
        pthread_cond_wait(&s->qdone, &s->qlock);
    int rc = w->rc;
    pthread_mutex_unlock(&s->qlock);
    return rc;
}

/* ---- the checkpoint thread ------------------------------------------------------- */

/* Checkpoints on cdb whenever the writer's WAL hook asks, PASSIVE, and again at once
 * while commits made during the last one keep a long WAL from being reused. */
static void *store__ckpt_main(void *arg)
{
    sqlite_store *s = arg;
    int chase = 0;
    /* Background copying nobody waits for: on a busy machine the threads that answer
     * requests go first (Linux: the nice value is per thread). */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), STORE_CKPT_NICE);
    pthread_mutex_lock(&s->clock);
    for (;;) {
        while ((!s->ckpt_wanted && !chase && !s->ckpt_stop) || (s->ckpt_hold && !s->ckpt_stop))
            pthread_cond_wait(&s->ccond, &s->clock);
        if (s->ckpt_stop)
            break;
        if (s->ckpt_wanted)
            chase = 0;
        s->ckpt_wanted = 0;
        s->ckpt_active = 1;
        pthread_mutex_unlock(&s->clock);
        int log = -1, copied = -1;
        int rc = sqlite3_wal_checkpoint_v2(s->cdb, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
        if (rc == SQLITE_OK && copied == log) {
            atomic_store(&s->ckpt_frames, log);
            if (atomic_load(&s->wal_frames) == log) {
                pthread_mutex_lock(&s->qlock);
                s->restart_wal = 1;
                pthread_cond_signal(&s->qwork);
                pthread_mutex_unlock(&s->qlock);
            }
        } else if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            fprintf(stderr, "hamel-server: store checkpoint: %s\n", sqlite3_errmsg(s->cdb));
        /* commits came during it and the WAL is long: copy them too, so that the next
         * write finds it all copied and starts the WAL again */
        int frames = atomic_load(&s->wal_frames);
        if (rc == SQLITE_OK && frames > log && log >= STORE_WAL_RESTART_FRAMES && chase < STORE_CKPT_CHASE)
            chase++;
        else
            chase = 0;
        pthread_mutex_lock(&s->clock);
        s->ckpt_active = 0;
        pthread_cond_broadcast(&s->ccond);
    }
    pthread_mutex_unlock(&s->clock);
    return NULL;
}

/* ---- the results journal -------------------------------------------------------- */

/* A Fletcher-like sum of n bytes over 64-bit words, continued from *a and *b: it sees
 * a tail the disk filled with zeros or old bytes, at about memory speed (a 277 KB
 * result: about 15 us). */
static void store__journal_sum(const char *p, size_t n, uint64_t *a, uint64_t *b)
{
    uint64_t x = *a, y = *b;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        x += w;
        y += x;
    }
    for (; i < n; i++) {
        x += (unsigned char)p[i];
        y += x;
    }
    *a = x;
    *b = y;
}

/* The sum of an entry's texts (store__journal_sum over each in turn). */
static uint64_t store__journal_entry_sum(uint64_t epoch, const char *id, const char *model_id,
                                         const char *key, const char *body, size_t body_len)
{
    uint64_t a = 1 + epoch, b = 0;
    store__journal_sum(id, strlen(id), &a, &b);
    store__journal_sum(model_id, strlen(model_id), &a, &b);
    store__journal_sum(key, strlen(key), &a, &b);
    store__journal_sum(body, body_len, &a, &b);
    return a ^ (b << 1 | b >> 63);
}

/* Writes the journal's header with epoch e at its start (under jlock). Returns 0 or -1. */
static int store__journal_head(int fd, uint64_t e)
{
    char h[STORE_JOURNAL_HEAD + 1];
    snprintf(h, sizeof h, STORE_JOURNAL_HEAD_MAGIC " %016llx\n", (unsigned long long)e);
    return pwrite(fd, h, STORE_JOURNAL_HEAD, 0) == STORE_JOURNAL_HEAD ? 0 : -1;
}

/* Appends w (a done job and its result) to the journal as one entry: a line
 * "HJ2 <epoch> <id bytes> <model id bytes> <key bytes> <result bytes> <created> <sum>",
 * then the four texts one after another and a newline. Returns 0 once it is written, -1
 * when there is no journal, it is at its bound, or the write failed (then it is cut back
 * to what it was, and when even that fails it is given up: the caller commits instead). */
static int store__journal_append_in(sqlite_store *s, store_write *w, uint64_t epoch, int again);

static int store__journal_append(sqlite_store *s, store_write *w)
{
    pthread_mutex_lock(&s->jlock);
    uint64_t epoch = s->jepoch;
    pthread_mutex_unlock(&s->jlock);
    return store__journal_append_in(s, w, epoch, 1);
}

/* store__journal_append in epoch; once more when a new epoch began meanwhile (`again`). */
static int store__journal_append_in(sqlite_store *s, store_write *w, uint64_t epoch, int again)
{
    char head[192];
    uint64_t sum = store__journal_entry_sum(epoch, w->id, w->model_id, w->key, w->body->data, w->body->len);
    int hl = snprintf(head, sizeof head, STORE_JOURNAL_MAGIC " %016llx %zu %zu %zu %zu %.17g %016llx\n",
                      (unsigned long long)epoch, strlen(w->id), strlen(w->model_id), strlen(w->key),
                      w->body->len, w->created, (unsigned long long)sum);
    if (hl < 0 || (size_t)hl >= sizeof head)
        return -1;
    struct iovec iov[6] = {{head, (size_t)hl},
                           {(void *)w->id, strlen(w->id)},
                           {(void *)w->model_id, strlen(w->model_id)},
                           {(void *)w->key, strlen(w->key)},
                           {w->body->data, w->body->len},
                           {"\n", 1}};
    size_t total = 0;
    for (int i = 0; i < 6; i++)
        total += iov[i].iov_len;
    pthread_mutex_lock(&s->jlock);
    if (s->jepoch != epoch && s->jfd >= 0 && again) { /* emptied meanwhile: its sum again */
        uint64_t now = s->jepoch;
        pthread_mutex_unlock(&s->jlock);
        return store__journal_append_in(s, w, now, 0);
    }
    if (s->jfd < 0 || s->jbytes + (long long)total > STORE_JOURNAL_CAP || s->jepoch != epoch) {
        pthread_mutex_unlock(&s->jlock);
        return -1;
    }
    off_t at = (off_t)s->jbytes;
    struct iovec *v = iov;
    int nv = 6;
    size_t done = 0;
    while (done < total) {
        ssize_t n = pwritev(s->jfd, v, nv, at + (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
        while (nv > 0 && (size_t)n >= v->iov_len) { /* past the pieces written whole */
            n -= (ssize_t)v->iov_len;
            v++;
            nv--;
        }
        if (nv > 0) {
            v->iov_base = (char *)v->iov_base + n;
            v->iov_len -= (size_t)n;
        }
    }
    if (done < total) { /* the commit the caller makes instead says whether the disk is full */
        /* a torn entry ends the replay; cut back, the file's next write is at `at` again */
        if (ftruncate(s->jfd, at) != 0) { /* a torn entry: no more appends after it */
            fprintf(stderr,
                    "hamel-server: store: the results journal cannot be cut back (%s): "
                    "results are committed before their answers from now on\n",
                    strerror(errno));
            close(s->jfd);
            s->jfd = -1;
        }
        pthread_mutex_unlock(&s->jlock);
        return -1;
    }
    s->jbytes += (long long)total;
    s->jpending++;
    w->jnext = s->jlist;
    s->jlist = w;
    pthread_mutex_unlock(&s->jlock);
    return 0;
}

/* After the writer committed list: the journaled results in it are in the database
 * (they leave the list reads look in); once nothing else is pending the journal is
 * emptied. A journaled result whose commit failed stays pending: in that list, and in
 * the journal, which the next start commits. */
static void store__journal_settle(sqlite_store *s, store_write *list)
{
    long committed = 0;
    for (store_write *w = list; w; w = w->next) {
        if (!w->journaled)
            continue;
        if (w->rc == 0) {
            w->jdone = 1;
            committed++;
        } else {
            fprintf(stderr,
                    "hamel-server: store: job %s: its result stays in the results journal and is "
                    "committed at the next start\n",
                    w->id);
        }
    }
    if (!committed)
        return;
    pthread_mutex_lock(&s->jlock);
    for (store_write **pp = &s->jlist; *pp;) {
        if ((*pp)->jdone)
            *pp = (*pp)->jnext;
        else
            pp = &(*pp)->jnext;
    }
    s->jpending -= committed;
    /* emptied: the next epoch in the header, and the next entry over the first one */
    if (s->jpending == 0 && s->jbytes > STORE_JOURNAL_HEAD && s->jfd >= 0 &&
        store__journal_head(s->jfd, s->jepoch + 1) == 0) {
        s->jepoch++;
        s->jbytes = STORE_JOURNAL_HEAD;
    }
    pthread_mutex_unlock(&s->jlock);
}

/* The journaled result of key not yet committed, retained, or NULL. */
static blob *store__journal_result(sqlite_store *s, const char *key)
{
    blob *b = NULL;
    pthread_mutex_lock(&s->jlock);
    for (store_write *w = s->jlist; w && !b; w = w->jnext)
        if (!strcmp(w->key, key))
            b = blob_retain((blob *)w->body);
    pthread_mutex_unlock(&s->jlock);
    return b;
}

/* Whether job id is a journaled result not yet committed: then *out is its record (done). */
static int store__journal_job(sqlite_store *s, const char *id, store_job *out)
{
    int found = 0;
    pthread_mutex_lock(&s->jlock);
    for (store_write *w = s->jlist; w && !found; w = w->jnext) {
        if (strcmp(w->id, id) != 0)
            continue;
        found = 1;
        out->status = strdup("done");
        out->model_id = strdup(w->model_id);
        out->key = strdup(w->key);
        out->created = w->created;
    }
    pthread_mutex_unlock(&s->jlock);
    return found;
}

/* One entry of a journal read back: the ids copied out, the result in the journal's bytes. */
typedef struct {
    char *id, *model_id, *key, *body;
    size_t body_len;
    double created;
} store_jentry;

/* Reads the entry at p (n bytes left) into e; returns its length, or 0 when it is torn,
 * not an entry, or of another epoch than `epoch` (the rest of the journal is then
 * dropped). legacy: entries as written before the epochs ("HJ1", no epoch). The id, model
 * id and key are copied into one block (*copies, the caller frees it); the result points
 * into p. */
static size_t store__journal_entry(char *p, size_t n, uint64_t epoch, int legacy, store_jentry *e,
                                   char **copies)
{
    char *nl = memchr(p, '\n', n < 192 ? n : 192);
    if (!nl)
        return 0;
    size_t li, lm, lk, lb;
    double created;
    unsigned long long sum, ep = 0;
    char magic[4];
    *nl = '\0';
    int got =
        legacy
            ? sscanf(p, "%3s %zu %zu %zu %zu %lg %llx", magic, &li, &lm, &lk, &lb, &created, &sum) + 1
            : sscanf(p, "%3s %llx %zu %zu %zu %zu %lg %llx", magic, &ep, &li, &lm, &lk, &lb, &created, &sum);
    *nl = '\n';
    if (got != 8 || strcmp(magic, legacy ? STORE_JOURNAL_LEGACY : STORE_JOURNAL_MAGIC) != 0 || ep != epoch ||
        li == 0 || li > 256 || lm == 0 || lm > 256 || lk == 0 || lk > 1024)
        return 0;
    size_t head = (size_t)(nl - p) + 1;
    if (lb > n || head + li + lm + lk + 1 > n - lb || p[head + li + lm + lk + lb] != '\n')
        return 0;
    char *t = p + head;
    char *c = malloc(li + lm + lk + 3);
    if (!c)
        return 0;
    memcpy(c, t, li);
    c[li] = '\0';
    memcpy(c + li + 1, t + li, lm);
    c[li + 1 + lm] = '\0';
    memcpy(c + li + lm + 2, t + li + lm, lk);
    c[li + lm + 2 + lk] = '\0';
    if (strlen(c) != li || strlen(c + li + 1) != lm || strlen(c + li + lm + 2) != lk) {
        free(c); /* NUL bytes: not ours */
        return 0;
    }
    if (store__journal_entry_sum(legacy ? 0 : epoch, c, c + li + 1, c + li + lm + 2, t + li + lm + lk, lb) !=
        sum) {
        free(c);
        return 0;
    }
    *copies = c;
    *e = (store_jentry){c, c + li + 1, c + li + lm + 2, t + li + lm + lk, lb, created};
    return head + li + lm + lk + lb + 1;
}

/* The status the store's record of job id has, or "" (none). Into out[16]. */
static void store__job_status(sqlite_store *s, const char *id, char out[16])
{
    out[0] = '\0';
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->wdb, "SELECT status FROM jobs WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(out, 16, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

/* Opens <dir>/results.journal at startup (before the threads) and commits what it holds
 * (a job cancelled meanwhile keeps its record); then empties it. When it cannot be
 * opened, read or committed, there is no journal this time (and what it holds is kept
 * for the next start). */
static void store__journal_open(sqlite_store *s, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/results.journal", dir);
    s->jfd = -1;
    const char *hold = getenv("HAMEL_TEST_JOURNAL_HOLD");
    s->jhold = hold && !strcmp(hold, "1");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "hamel-server: store: %s: %s (results are committed before their answers)\n", path,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    size_t n = (size_t)st.st_size;
    char *all = n ? malloc(n) : NULL;
    size_t got = 0;
    while (all && got < n) {
        ssize_t r = pread(fd, all + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (n && got < n) {
        fprintf(stderr, "hamel-server: store: %s cannot be read: kept for the next start\n", path);
        free(all);
        close(fd);
        return;
    }
    /* "HJE <epoch>": this epoch's entries follow; none (an older server's journal):
     * entries without epochs from the start */
    uint64_t epoch = 0;
    int legacy = 1;
    size_t at = 0;
    if (n >= STORE_JOURNAL_HEAD && !memcmp(all, STORE_JOURNAL_HEAD_MAGIC " ", 4) &&
        all[STORE_JOURNAL_HEAD - 1] == '\n') {
        char hex[17];
        memcpy(hex, all + 4, 16);
        hex[16] = '\0';
        epoch = strtoull(hex, NULL, 16);
        legacy = 0;
        at = STORE_JOURNAL_HEAD;
    }
    long entries = 0;
    int rc = 0;
    if (n > at) {
        rc = store__exec(s, s->stmt[STMT_BEGIN]);
        while (rc == 0 && at < n) {
            store_jentry e;
            char *copies = NULL;
            size_t len = store__journal_entry(all + at, n - at, epoch, legacy, &e, &copies);
            if (len == 0)
                break;
            char status[16];
            store__job_status(s, e.id, status);
            if (strcmp(status, "cancelled") != 0) {
                blob *b = blob_new(e.body, e.body_len);
                store_write w = {.kind = W_DONE,
                                 .id = e.id,
                                 .status = "done",
                                 .model_id = e.model_id,
                                 .key = e.key,
                                 .body = b,
                                 .created = e.created};
                rc = b ? store__apply(s, &w) : -1;
                blob_release(b);
            }
            free(copies);
            at += len;
            entries++;
        }
        if (rc == 0)
            rc = store__trim(s);
        if (rc == 0)
            rc = store__exec(s, s->stmt[STMT_COMMIT]);
        if (rc != 0 && !sqlite3_get_autocommit(s->wdb))
            store__exec(s, s->stmt[STMT_ROLLBACK]);
    }
    /* past this epoch's entries: older epochs' (rewound over), or one torn by the kill */
    char mine[32];
    int ml = snprintf(mine, sizeof mine, STORE_JOURNAL_MAGIC " %016llx ", (unsigned long long)epoch);
    int torn = at < n && (legacy || (n - at >= (size_t)ml && !memcmp(all + at, mine, (size_t)ml)));
    free(all);
    if (rc != 0) {
        fprintf(stderr,
                "hamel-server: store: the results in %s cannot be committed: kept for the next start\n",
                path);
        s->result_bytes = store__int(s->wdb, "SELECT coalesce(sum(bytes), 0) FROM results");
        s->results = store__int(s->wdb, "SELECT count(*) FROM results");
        s->jobs = store__int(s->wdb, "SELECT count(*) FROM jobs");
        s->model_bytes = store__int(s->wdb, STORE_MODEL_BYTES_SQL);
        close(fd);
        return;
    }
    if (entries || torn)
        fprintf(stderr, "hamel-server: store: %ld result%s committed from the results journal%s\n", entries,
                entries == 1 ? "" : "s", torn ? " (a torn entry at its end dropped)" : "");
    /* a new epoch: what is after the header is never read again */
    if (ftruncate(fd, 0) != 0 || store__journal_head(fd, epoch + 1) != 0) {
        fprintf(stderr, "hamel-server: store: %s cannot be emptied: %s\n", path, strerror(errno));
        close(fd);
        return;
    }
    s->jepoch = epoch + 1;
    s->jbytes = STORE_JOURNAL_HEAD;
    s->jfd = fd;
}

/* ---- the store's functions ------------------------------------------------------- */

static int sqlite__put_model(void *impl, const char *model_id, const char *json)
{
    sqlite_store *s = impl;
    store_write w = {.kind = W_MODEL, .id = model_id, .doc = json};
    return store__submit(s, &w);
}

/* A synchronous write of nothing: the writer commits it with every write queued before. */
static int sqlite__barrier(void *impl)
{
    sqlite_store *s = impl;
    store_write w = {.kind = W_NONE};
    return store__submit(s, &w);
}

static int sqlite__put_job(void *impl, const char *id, const char *status, const char *model_id,
                           const char *key, const char *doc, double created)
{
    sqlite_store *s = impl;
    store_write w = {.kind = W_JOB,
                     .id = id,
                     .status = status,
                     .model_id = model_id,
                     .key = key,
                     .doc = doc,
                     .created = created};
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

/* An asynchronous write of `kind`: one block with copies of its strings, or NULL when
 * out of memory (the caller then writes synchronously). */
static store_write *store__async_new(int kind, const char *id, const char *status, const char *model_id,
                                     const char *key, const char *doc, double created)
{
    size_t need = sizeof(store_write);
    const char *strs[] = {id, status, model_id, key, doc};
    for (int i = 0; i < 5; i++)
        need += strs[i] ? strlen(strs[i]) + 1 : 0;
    store_write *w = malloc(need);
    if (!w)
        return NULL;
    char *p = (char *)(w + 1);
    *w = (store_write){.kind = kind, .created = created, .async = 1};
    w->id = store__copy(&p, id);
    w->status = store__copy(&p, status);
    w->model_id = store__copy(&p, model_id);
    w->key = store__copy(&p, key);
    w->doc = store__copy(&p, doc);
    return w;
}

static int sqlite__put_job_async(void *impl, const char *id, const char *status, const char *model_id,
                                 const char *key, const char *doc, double created)
{
    sqlite_store *s = impl;
    store_write *w = store__async_new(W_JOB, id, status, model_id, key, doc, created);
    return w ? store__submit(s, w) : sqlite__put_job(s, id, status, model_id, key, doc, created);
}

static int sqlite__put_model_async(void *impl, const char *model_id, const char *json)
{
    sqlite_store *s = impl;
    store_write *w = store__async_new(W_MODEL, model_id, NULL, NULL, NULL, json, 0.0);
    return w ? store__submit(s, w) : sqlite__put_model(s, model_id, json);
}

static int sqlite__put_done(void *impl, const char *id, const char *model_id, const char *key,
                            const blob *body, double created)
{
    sqlite_store *s = impl;
    /* In the journal, then committed with the writer's next group (started at once) */
    store_write *a =
        id && model_id && key ? store__async_new(W_DONE, id, "done", model_id, key, NULL, created) : NULL;
    if (a) {
        a->body = blob_retain((blob *)body);
        a->journaled = 1;
        if (store__journal_append(s, a) == 0) {
            store__submit(s, a); /* refused only while closing: then the next start commits it */
            return 0;
        }
        blob_release((blob *)a->body);
        free(a);
    }
    store_write w = {.kind = W_DONE,
                     .id = id,
                     .status = "done",
                     .model_id = model_id,
                     .key = key,
                     .body = body,
                     .created = created};
    return store__submit(s, &w);
}

/* Queues ws[0..n) (synchronous writes) as one run of the queue, so the writer commits
 * them in one group, and waits until every one is written. */
static int store__submit_many(sqlite_store *s, store_write *ws, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i + 1 < n; i++)
        ws[i].next = &ws[i + 1];
    ws[n - 1].next = NULL;
    pthread_mutex_lock(&s->qlock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->qlock);
        return -1;
    }
    if (s->qtail)
        s->qtail->next = &ws[0];
    else
        s->qhead = &ws[0];
    s->qtail = &ws[n - 1];
    s->qsync++;
    pthread_cond_signal(&s->qwork);
    for (size_t i = 0; i < n; i++)
        while (!ws[i].finished)
            pthread_cond_wait(&s->qdone, &s->qlock);
    pthread_mutex_unlock(&s->qlock);
    return 0;
}

static int sqlite__put_many(void *impl, store_item *items, size_t n)
{
    sqlite_store *s = impl;
    store_write *ws = calloc(n ? n : 1, sizeof *ws);
    if (!ws) {
        for (size_t i = 0; i < n; i++)
            items[i].rc = -1;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const store_item *it = &items[i];
        ws[i] = (store_write){.kind = it->body ? W_DONE : W_JOB,
                              .id = it->id,
                              .status = it->body ? "done" : it->status,
                              .model_id = it->model_id,
                              .key = it->key,
                              .doc = it->body ? NULL : it->doc,
                              .body = it->body,
                              .created = it->created};
    }
    int all = store__submit_many(s, ws, n);
    for (size_t i = 0; i < n; i++) {
        items[i].rc = all != 0 ? -1 : ws[i].rc;
        all |= items[i].rc;
    }
    free(ws);
    return all ? -1 : 0;
}

static int sqlite__full(void *impl)
{
    sqlite_store *s = impl;
    return atomic_load(&s->full);
}

static void sqlite__commit_counts(void *impl, long long *commits, long long *writes)
{
    sqlite_store *s = impl;
    *commits = atomic_load(&s->commits);
    *writes = atomic_load(&s->grouped);
}

static void sqlite__counts(void *impl, size_t *result_bytes, size_t *results, size_t *jobs)
{
    sqlite_store *s = impl;
    /* the last commit's counts: never waits for the writer (a poll thread calls this) */
    long long b = atomic_load(&s->pub_bytes), r = atomic_load(&s->pub_results), j = atomic_load(&s->pub_jobs);
    *result_bytes = b > 0 ? (size_t)b : 0;
    *results = r > 0 ? (size_t)r : 0;
    *jobs = j > 0 ? (size_t)j : 0;
}

/* Reads: the reader connection, under rlock. */

static int sqlite__get_model(void *impl, const char *model_id, char **json)
{
    sqlite_store *s = impl;
    *json = NULL;
    pthread_mutex_lock(&s->rlock);
    sqlite3_stmt *st = s->rstmt[RSTMT_GET_MODEL];
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
    pthread_mutex_unlock(&s->rlock);
    return out;
}

static int sqlite__get_result(void *impl, const char *key, blob **out)
{
    sqlite_store *s = impl;
    /* the journal's list first: an entry leaves it only once committed */
    if ((*out = store__journal_result(s, key)) != NULL)
        return 0;
    if (!store__bloom_may(s, key))
        return 1;
    pthread_mutex_lock(&s->rlock);
    sqlite3_stmt *st = s->rstmt[RSTMT_GET_RESULT];
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
    pthread_mutex_unlock(&s->rlock);
    return res;
}

/* Results of many keys in one read transaction (one snapshot, one lock of the WAL). */
static int sqlite__get_results(void *impl, const char *const *keys, size_t n, blob **out)
{
    sqlite_store *s = impl;
    size_t ask = 0; /* keys the database may hold */
    for (size_t i = 0; i < n; i++) {
        out[i] = store__journal_result(s, keys[i]); /* first: see sqlite__get_result */
        ask += !out[i] && store__bloom_may(s, keys[i]);
    }
    if (ask == 0)
        return 0;
    pthread_mutex_lock(&s->rlock);
    int bad = sqlite3_exec(s->rdb, "BEGIN", NULL, NULL, NULL) != SQLITE_OK;
    sqlite3_stmt *st = s->rstmt[RSTMT_GET_RESULT];
    for (size_t i = 0; !bad && i < n; i++) {
        if (out[i] || !store__bloom_may(s, keys[i]))
            continue;
        store__text(st, 1, keys[i]);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const char *t = (const char *)sqlite3_column_text(st, 0);
            int len = sqlite3_column_bytes(st, 0);
            out[i] = t ? blob_new(t, (size_t)len) : NULL;
        } else if (rc != SQLITE_DONE) {
            bad = 1;
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
    if (!sqlite3_get_autocommit(s->rdb))
        sqlite3_exec(s->rdb, "COMMIT", NULL, NULL, NULL);
    pthread_mutex_unlock(&s->rlock);
    for (size_t i = 0; bad && i < n; i++) {
        blob_release(out[i]);
        out[i] = NULL;
    }
    return bad ? -1 : 0;
}

static int sqlite__get_job(void *impl, const char *id, store_job *out)
{
    sqlite_store *s = impl;
    memset(out, 0, sizeof *out);
    if (store__journal_job(s, id, out)) /* first: see sqlite__get_result */
        return out->status && out->model_id && out->key ? 0 : (store_job_clear(out), -1);
    pthread_mutex_lock(&s->rlock);
    sqlite3_stmt *st = s->rstmt[RSTMT_GET_JOB];
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
    pthread_mutex_unlock(&s->rlock);
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

/* The quarantine: rare writes (a fault, an operator's clear), made on the reader
 * connection under rlock (SQLite serialises them with the writer's transactions; the
 * busy timeout covers a wait), and one read per engine call. */

static int store__quarantine_write(sqlite_store *s, const char *sql, const char *key, const char *doc,
                                   double expires)
{
    pthread_mutex_lock(&s->rlock);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->rdb, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        store__text(st, 1, key);
        if (doc) {
            store__text(st, 2, doc);
            sqlite3_bind_double(st, 3, expires);
        }
        rc = sqlite3_step(st);
    }
    int changed = rc == SQLITE_DONE ? sqlite3_changes(s->rdb) : -1;
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->rlock);
    return changed;
}

static int sqlite__quarantine_put(void *impl, const char *key, const char *doc, double expires)
{
    sqlite_store *s = impl;
    return store__quarantine_write(s,
                                   "INSERT OR REPLACE INTO quarantine(key, doc, expires) VALUES(?1, ?2, ?3)",
                                   key, doc, expires) < 0
               ? -1
               : 0;
}

static int sqlite__quarantine_del(void *impl, const char *key)
{
    sqlite_store *s = impl;
    int n = store__quarantine_write(s, "DELETE FROM quarantine WHERE key = ?1", key, NULL, 0);
    return n < 0 ? -1 : n == 0 ? 1 : 0;
}

static int sqlite__quarantine_get(void *impl, const char *key, char **doc, double *expires)
{
    sqlite_store *s = impl;
    *doc = NULL;
    pthread_mutex_lock(&s->rlock);
    sqlite3_stmt *st = s->rstmt[RSTMT_GET_QUARANTINE];
    store__text(st, 1, key);
    int rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? 1 : -1;
    if (out == 0) {
        *doc = store__dup_column(st, 0);
        *expires = sqlite3_column_double(st, 1);
        if (!*doc)
            out = -1;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    pthread_mutex_unlock(&s->rlock);
    return out;
}

/* The quarantine's records under a key prefix, the latest to expire first (an operator's
 * listing: rare, so prepared each time). */
static int sqlite__quarantine_list(void *impl, const char *prefix, size_t max, store_quarantine_record **out,
                                   size_t *n)
{
    sqlite_store *s = impl;
    *out = calloc(max ? max : 1, sizeof **out);
    *n = 0;
    if (!*out)
        return -1;
    pthread_mutex_lock(&s->rlock);
    sqlite3_stmt *st = NULL;
    int rc =
        sqlite3_prepare_v2(s->rdb,
                           "SELECT key, doc, expires FROM quarantine WHERE substr(key, 1, length(?1)) = ?1 "
                           "AND expires > (julianday('now') - 2440587.5) * 86400.0 ORDER BY expires DESC "
                           "LIMIT ?2",
                           -1, &st, NULL);
    if (rc == SQLITE_OK) {
        store__text(st, 1, prefix);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)max);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW && *n < max) {
            store_quarantine_record *r = &(*out)[*n];
            r->key = store__dup_column(st, 0);
            r->doc = store__dup_column(st, 1);
            r->expires = sqlite3_column_double(st, 2);
            ++*n;
            if (!r->key || !r->doc) {
                rc = SQLITE_NOMEM;
                break;
            }
        }
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&s->rlock);
    if (rc != SQLITE_DONE) {
        store_quarantine_records_free(*out, *n);
        *out = NULL;
        *n = 0;
        return -1;
    }
    return 0;
}

/* ---- the backend ----------------------------------------------------------------- */

static const store_ops sqlite__ops = {
    .put_model = sqlite__put_model,
    .get_model = sqlite__get_model,
    .put_job = sqlite__put_job,
    .put_done = sqlite__put_done,
    .get_result = sqlite__get_result,
    .get_job = sqlite__get_job,
    .counts = sqlite__counts,
    .close = sqlite__close,
    .put_job_async = sqlite__put_job_async,
    .commit_counts = sqlite__commit_counts,
    .put_model_async = sqlite__put_model_async,
    .full = sqlite__full,
    .barrier = sqlite__barrier,
    .quarantine_put = sqlite__quarantine_put,
    .quarantine_get = sqlite__quarantine_get,
    .quarantine_del = sqlite__quarantine_del,
    .put_many = sqlite__put_many,
    .get_results = sqlite__get_results,
    .quarantine_list = sqlite__quarantine_list,
};

int store_open(const char *dir, const store_limits *lim, store **out)
{
    *out = NULL;
    sqlite_store *impl = NULL;
    if (sqlite__open(dir, lim, &impl) != 0)
        return -1;
    *out = store_new(&sqlite__ops, impl);
    return *out ? 0 : -1;
}
