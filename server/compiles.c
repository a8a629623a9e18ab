/* compiles.c — a small thread pool that runs engine_model_compile for the HTTP layer.
 *
 * Lock order: the pool has one mutex, a leaf: it is never held while compiling, while
 * calling a done function, or together with any other lock.
 */
#include "compiles.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct compile_task {
    json_t *spec;
    void (*done)(void *arg);
    void *arg;
    int rc;
    engine_model *model;
    json_t *problem;
    double seconds;
    compile_task *next;
};

struct compiles {
    pthread_mutex_t mu;
    pthread_cond_t more; /* a task was queued, or stopping */
    pthread_t *threads;
    int nthreads;
    int queued, max_queued;
    int running;
    compile_task *head, *tail;
    int stopping, stopped;
    const engine_limits *limits;
};

static double compiles__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *compiles__thread(void *arg)
{
    compiles *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->more, &p->mu);
        compile_task *t = p->head;
        if (!t) { /* stopping with nothing left */
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        p->head = t->next;
        if (!p->head)
            p->tail = NULL;
        p->queued--;
        int abandon = p->stopping;
        p->running += !abandon;
        pthread_mutex_unlock(&p->mu);
        if (abandon) {
            t->rc = HAMEL_E_UNAVAILABLE;
        } else {
            double t0 = compiles__now();
            t->rc = engine_model_compile(t->spec, p->limits, &t->model, &t->problem);
            t->seconds = compiles__now() - t0;
            pthread_mutex_lock(&p->mu);
            p->running--;
            pthread_mutex_unlock(&p->mu);
        }
        json_decref(t->spec);
        t->spec = NULL;
        t->done(t->arg); /* the task is the caller's from here on */
    }
}

compiles *compiles_new(int threads, int queue, const engine_limits *limits)
{
    compiles *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->threads = calloc((size_t)threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->more, NULL);
    p->max_queued = queue;
    p->limits = limits;
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&p->threads[i], NULL, compiles__thread, p) != 0)
            break;
        p->nthreads++;
    }
    if (p->nthreads == 0) {
        compiles_free(p);
        return NULL;
    }
    return p;
}

int compiles_submit(compiles *p, json_t *spec, void (*done)(void *arg), void *arg, compile_task **out)
{
    *out = NULL;
    compile_task *t = calloc(1, sizeof *t);
    if (!t)
        return HAMEL_E_INTERNAL;
    t->spec = json_incref(spec);
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
    if (rc != 0) {
        compile_task_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

int compile_task_result(compile_task *t, engine_model **model, json_t **problem, double *seconds)
{
    *model = t->model;
    *problem = t->problem;
    *seconds = t->seconds;
    t->model = NULL;
    t->problem = NULL;
    return t->rc;
}

void compile_task_free(compile_task *t)
{
    if (!t)
        return;
    json_decref(t->spec);
    if (t->model)
        engine_model_release(t->model);
    json_decref(t->problem);
    free(t);
}

void compiles_counts(compiles *p, size_t *queued, size_t *running)
{
    pthread_mutex_lock(&p->mu);
    *queued = (size_t)p->queued;
    *running = (size_t)p->running;
    pthread_mutex_unlock(&p->mu);
}

void compiles_stop(compiles *p)
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

void compiles_free(compiles *p)
{
    if (!p)
        return;
    if (!p->stopped)
        compiles_stop(p);
    pthread_cond_destroy(&p->more);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}
