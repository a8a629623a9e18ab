/* pool.c — a small pool of threads with a bounded FIFO queue (see pool.h).
 *
 * The queue is a ring of `queue` slots allocated with the pool, so submitting allocates
 * nothing. Threads are started by pool_submit, under the lock, when the tasks waiting
 * outnumber the threads waiting for one.
 *
 * Lock order: one mutex, a leaf. It is never held while a task's run or done is called,
 * nor while another lock is taken; pthread_create is called under it (the new thread
 * waits for it like any other).
 */
#include "pool.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct pool_task {
    void (*run)(void *arg);
    void (*done)(void *arg, int ran);
    void *arg;
} pool_task;

struct pool {
    pthread_mutex_t mu;
    pthread_cond_t more; /* a task was queued, or stopping */
    size_t stack_bytes;
    pthread_t *threads;
    int max_threads, nthreads; /* started so far (never more once stopping) */
    int idle;                  /* threads waiting on `more` */
    pool_task *ring;
    int cap, head, queued, running;
    int stopping;
};

/* Takes the oldest queued task; under p->mu, with p->queued > 0. */
static pool_task pool__pop(pool *p)
{
    pool_task t = p->ring[p->head];
    p->head = (p->head + 1) % p->cap;
    p->queued--;
    return t;
}

static void *pool__thread(void *arg)
{
    pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->queued && !p->stopping) {
            p->idle++;
            pthread_cond_wait(&p->more, &p->mu);
            p->idle--;
        }
        if (p->stopping) /* what is still queued is pool_shutdown's to drop */
            break;
        pool_task t = pool__pop(p);
        p->running++;
        pthread_mutex_unlock(&p->mu);
        t.run(t.arg);
        pthread_mutex_lock(&p->mu);
        p->running--;
        pthread_mutex_unlock(&p->mu);
        if (t.done)
            t.done(t.arg, 1);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

pool *pool_new(int threads, int queue, size_t stack_bytes)
{
    pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->max_threads = threads > 0 ? threads : 1;
    p->cap = queue > 0 ? queue : 0;
    p->stack_bytes = stack_bytes;
    p->threads = calloc((size_t)p->max_threads, sizeof *p->threads);
    p->ring = calloc((size_t)(p->cap > 0 ? p->cap : 1), sizeof *p->ring);
    if (!p->threads || !p->ring) {
        free(p->threads);
        free(p->ring);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->more, NULL);
    return p;
}

/* Starts one more thread; under p->mu. Returns 0 or -1. */
static int pool__start(pool *p)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (p->stack_bytes)
        pthread_attr_setstacksize(&attr, p->stack_bytes);
    int rc = pthread_create(&p->threads[p->nthreads], &attr, pool__thread, p);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return -1;
    p->nthreads++;
    return 0;
}

int pool_submit(pool *p, void (*run)(void *arg), void (*done)(void *arg, int ran), void *arg)
{
    pthread_mutex_lock(&p->mu);
    int rc = POOL_OK;
    if (p->stopping)
        rc = POOL_STOPPING;
    else if (p->queued >= p->cap)
        rc = POOL_FULL;
    else if (p->queued >= p->idle && p->nthreads < p->max_threads && pool__start(p) != 0 && !p->nthreads)
        rc = POOL_NO_THREAD; /* with a thread already running, the task waits for it */
    if (rc == POOL_OK) {
        p->ring[(p->head + p->queued) % p->cap] = (pool_task){run, done, arg};
        p->queued++;
        pthread_cond_signal(&p->more);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void pool_counts(pool *p, size_t *queued, size_t *running)
{
    pthread_mutex_lock(&p->mu);
    *queued = (size_t)p->queued;
    *running = (size_t)p->running;
    pthread_mutex_unlock(&p->mu);
}

void pool_shutdown(pool *p)
{
    pthread_mutex_lock(&p->mu);
    int first = !p->stopping;
    p->stopping = 1;
    pthread_cond_broadcast(&p->more);
    pthread_mutex_unlock(&p->mu);
    if (!first)
        return;
    /* The threads take nothing more: drop the queue here, one task at a time, so that
     * each done runs with no lock held. */
    for (;;) {
        pthread_mutex_lock(&p->mu);
        if (!p->queued) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        pool_task t = pool__pop(p);
        pthread_mutex_unlock(&p->mu);
        if (t.done)
            t.done(t.arg, 0);
    }
    /* nthreads no longer changes: submit starts no thread once stopping */
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
}

void pool_free(pool *p)
{
    if (!p)
        return;
    pool_shutdown(p);
    pthread_cond_destroy(&p->more);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p->ring);
    free(p);
}
