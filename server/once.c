/* once.c — one attempt per key, shared by concurrent askers; limits remembered (once.h). */
#include "once.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct once_entry {
    char key[ONCE_KEY_MAX + 1];
    int running;
    void **waiters;
    size_t n_waiters, cap_waiters;
    json_t *outcome; /* remembered (not running) */
    double expires, used;
    struct once_entry *next;
} once_entry;

struct once {
    pthread_mutex_t mu;
    size_t max;
    double seconds;
    size_t n_remembered;
    once_entry *entries; /* running or remembered; a few hundred at most, scanned */
};

static double once__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

once *once_new(size_t max_remembered, double seconds)
{
    once *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    pthread_mutex_init(&o->mu, NULL);
    o->max = max_remembered;
    o->seconds = seconds;
    return o;
}

static void once__entry_free(once_entry *e)
{
    json_decref(e->outcome);
    free(e->waiters);
    free(e);
}

void once_free(once *o)
{
    if (!o)
        return;
    while (o->entries) {
        once_entry *e = o->entries;
        o->entries = e->next;
        once__entry_free(e);
    }
    pthread_mutex_destroy(&o->mu);
    free(o);
}

/* Unlinks and frees e. Under mu. */
static void once__drop(once *o, once_entry *e)
{
    for (once_entry **p = &o->entries; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    if (e->outcome)
        o->n_remembered--;
    once__entry_free(e);
}

/* The entry of key, dropping it first when its outcome expired. Under mu. */
static once_entry *once__find(once *o, const char *key, double now)
{
    for (once_entry *e = o->entries; e; e = e->next)
        if (!strcmp(e->key, key)) {
            if (!e->running && now >= e->expires) {
                once__drop(o, e);
                return NULL;
            }
            return e;
        }
    return NULL;
}

int once_begin(once *o, const char *key, void *waiter, json_t **remembered)
{
    *remembered = NULL;
    if (strlen(key) > ONCE_KEY_MAX)
        return ONCE_RUN;
    double now = once__now();
    pthread_mutex_lock(&o->mu);
    once_entry *e = once__find(o, key, now);
    int how = ONCE_RUN;
    if (e && e->running) {
        if (e->n_waiters == e->cap_waiters) {
            size_t cap = e->cap_waiters ? 2 * e->cap_waiters : 8;
            void **w = realloc(e->waiters, cap * sizeof *w);
            if (!w) {
                pthread_mutex_unlock(&o->mu);
                return ONCE_RUN; /* out of memory: not shared */
            }
            e->waiters = w;
            e->cap_waiters = cap;
        }
        e->waiters[e->n_waiters++] = waiter;
        how = ONCE_WAIT;
    } else if (e) {
        e->used = now;
        *remembered = json_deep_copy(e->outcome);
        how = *remembered ? ONCE_REMEMBERED : ONCE_RUN;
    } else {
        e = calloc(1, sizeof *e);
        if (e) {
            strcpy(e->key, key);
            e->running = 1;
            e->next = o->entries;
            o->entries = e;
        }
    }
    pthread_mutex_unlock(&o->mu);
    return how;
}

void once_end(once *o, const char *key, const json_t *remember, void ***waiters, size_t *n)
{
    *waiters = NULL;
    *n = 0;
    json_t *copy = remember && o->max ? json_deep_copy(remember) : NULL;
    double now = once__now();
    pthread_mutex_lock(&o->mu);
    once_entry *e = NULL;
    for (e = o->entries; e; e = e->next)
        if (e->running && !strcmp(e->key, key))
            break;
    if (e) {
        *waiters = e->waiters;
        *n = e->n_waiters;
        e->waiters = NULL;
        e->n_waiters = e->cap_waiters = 0;
        e->running = 0;
        if (copy) {
            e->outcome = copy;
            copy = NULL;
            e->expires = now + o->seconds;
            e->used = now;
            o->n_remembered++;
            while (o->n_remembered > o->max) { /* the least recently used goes */
                once_entry *lru = NULL;
                for (once_entry *x = o->entries; x; x = x->next)
                    if (x->outcome && (!lru || x->used < lru->used))
                        lru = x;
                if (!lru)
                    break;
                once__drop(o, lru);
            }
        } else {
            once__drop(o, e);
        }
    }
    pthread_mutex_unlock(&o->mu);
    json_decref(copy);
}

size_t once_remembered(once *o)
{
    pthread_mutex_lock(&o->mu);
    size_t n = o->n_remembered;
    pthread_mutex_unlock(&o->mu);
    return n;
}
