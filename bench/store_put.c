/* store_put.c — the store's commit latency as a finished job sees it (issue 11): N jobs
 * of a 277 KB result (a rolling disk's 1001 samples) through the real SQLite store
 * (server/store.c), one thread, as a worker writes them: store_put_job "queued",
 * store_put_job_async "running", then store_put_done, timed. A fresh body is written
 * between two jobs (about the time a simulation's JSON takes). Prints the median, p90,
 * p99 and largest put_done, the median and largest put_job, and the largest -wal file
 * seen. Usage: build/bench-store_put [N (500)]; the data directory is made under
 * $TMPDIR (/tmp) and removed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob.h"
#include "store.h"
#include "timing.h"

#define STORE_PUT_BYTES (277 * 1024)

/* Fills body[0..len) with comma-separated random numbers, as a result's JSON. */
static void store_put_body(char *body, size_t len)
{
    size_t k = 0;
    while (k < len) {
        int m = snprintf(body + k, len - k, "%.15g,", (double)rand() / RAND_MAX);
        if (m <= 0)
            break;
        k += (size_t)m;
    }
    body[len - 1] = ']';
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 500;
    if (n < 10) {
        fprintf(stderr, "usage: %s [N >= 10]\n", argv[0]);
        return 2;
    }
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[512], wal[600];
    snprintf(dir, sizeof dir, "%s/hamel-bench-store-%ld", tmp, (long)getpid());
    snprintf(wal, sizeof wal, "%s/hamel.db-wal", dir);
    store_limits lim = {(size_t)1 << 30, 1000000, 0}; /* the server's defaults */
    store *s = NULL;
    if (store_open(dir, &lim, &s) != 0)
        return 1;
    char *body = malloc(STORE_PUT_BYTES);
    double *done = malloc((size_t)n * sizeof *done), *queued = malloc((size_t)n * sizeof *queued);
    if (!body || !done || !queued)
        return 1;
    srand(1);
    long long wal_max = 0;
    int status = 0;
    for (int i = 0; i < n && status == 0; i++) {
        store_put_body(body, STORE_PUT_BYTES);
        blob *b = blob_new(body, STORE_PUT_BYTES);
        if (!b)
            return 1;
        char id[32], key[32];
        snprintf(id, sizeof id, "job-%d", i);
        snprintf(key, sizeof key, "key-%d", i);
        double t0 = now_ms();
        int rc = store_put_job(s, id, "queued", "m", key, NULL, 1.0);
        queued[i] = now_ms() - t0;
        rc |= store_put_job_async(s, id, "running", "m", key, NULL, 1.0);
        t0 = now_ms();
        rc |= store_put_done(s, id, "m", key, b, 1.0);
        done[i] = now_ms() - t0;
        blob_release(b);
        if (rc != 0) {
            fprintf(stderr, "store_put: write %d failed\n", i);
            status = 1;
        }
        struct stat st;
        if (stat(wal, &st) == 0 && st.st_size > wal_max)
            wal_max = st.st_size;
    }
    if (status == 0) {
        double med = median(done, n); /* sorts */
        printf("put_done %d KB x %d: median %.3f ms, p90 %.3f, p99 %.3f, max %.3f; largest -wal %.1f MB\n",
               STORE_PUT_BYTES / 1024, n, med, done[n * 9 / 10], done[n * 99 / 100], done[n - 1],
               (double)wal_max / 1e6);
        med = median(queued, n);
        printf("put_job queued x %d: median %.3f ms, p90 %.3f, max %.3f\n", n, med, queued[n * 9 / 10],
               queued[n - 1]);
    }
    store_close(s);
    free(body);
    free(done);
    free(queued);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        status = 1;
    return status;
}
