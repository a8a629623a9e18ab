/* offload.c — a small fixed thread pool with a bounded FIFO queue for the HTTP layer.
 *
 * Lock order: the pool has one mutex, a leaf: it is never held while a task runs, while
 * a done function is called, or together with any other lock.
 */
#include "offload.h"

#include <pthread.h>
#include <stdlib.h>

#include "problems.h"

typedef struct offload_task {
    void (*run)(void *arg);
    void (*done)(void *arg, int ran);
    void *arg;
    struct offload_task *next;
} offload_task;

struct offload {
    pthread_mutex_t mu;
    pthread_cond_t more; /* a task was queued, or stopping */
    pthread_t *threads;
    int nthreads;
    int queued, max_queued, running;
    offload_task *head, *tail;
    int stopping, stopped;
};

static void *offload__thread(void *arg)
{
    offload *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->more, &p->mu);
        offload_task *t = p->head;
        if (!t) { /* stopping with nothing left */
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        p->head = t->next;
        if (!p->head)
            p->tail = NULL;
        p->queued--;
        int ran = !p->stopping;
        p->running += ran;
        pthread_mutex_unlock(&p->mu);
        if (ran) {
            t->run(t->arg);
            pthread_mutex_lock(&p->mu);
            p->running--;
            pthread_mutex_unlock(&p->mu);
        }
        void (*done)(void *, int) = t->done;
        void *targ = t->arg;
        free(t);
        done(targ, ran);
    }
}

offload *offload_new(int threads, int queue)
{
    offload *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->threads = calloc((size_t)(threads > 0 ? threads : 1), sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->more, NULL);
    p->max_queued = queue;
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&p->threads[i], NULL, offload__thread, p) != 0)
            break;
        p->nthreads++;
    }
    if (p->nthreads == 0) {
        offload_free(p);
        return NULL;
    }
    return p;
}

int offload_submit(offload *p, void (*run)(void *arg), void (*done)(void *arg, int ran), void *arg)
{
    offload_task *t = calloc(1, sizeof *t);
    if (!t)
        return HAMEL_E_INTERNAL;
    t->run = run;
    t->done = done;
    t->arg = arg;
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    if (p->stopping)
        rc = HAMEL_E_UNAVAILABLE;
    else if (p->queued >= p->max_queued)
        rc = HAMEL_E_QUEUE_FULL;
    if (rc == 0) {
        if (p->tail)
            p->tail->next = t;
        else
            p->head = t;
        p->tail = t;
        p->queued++;
        pthread_cond_signal(&p->more);
    }
    pthread_mutex_unlock(&p->mu);
    if (rc != 0)
        free(t);
    return rc;
}

void offload_counts(offload *p, size_t *queued, size_t *running)
{
    pthread_mutex_lock(&p->mu);
    *queued = (size_t)p->queued;
    *running = (size_t)p->running;
    pthread_mutex_unlock(&p->mu);
}

void offload_stop(offload *p)
{
    pthread_mutex_lock(&p->mu);
    int first = !p->stopping;
    p->stopping = 1;
    pthread_cond_broadcast(&p->more);
    pthread_mutex_unlock(&p->mu);
    if (!first)
        return;
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    p->stopped = 1;
}

void offload_free(offload *p)
{
    if (!p)
        return;
    if (!p->stopped)
        offload_stop(p);
    pthread_cond_destroy(&p->more);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}
