/* quarantine.c — models whose engine work faulted (quarantine.h). */
#include "quarantine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "problems.h"

#define QUARANTINE_MEMORY 256 /* records kept in memory (the store keeps every one) */
#define QUARANTINE_KEY_MAX 160
/* With a store, a record is held in memory this long before the store is asked again
 * (an operator may have cleared it on another instance). */
#define QUARANTINE_MEMORY_SECONDS 1.0

typedef struct quarantine_entry {
    char key[QUARANTINE_KEY_MAX];
    char *doc;
    double expires; /* wall clock */
} quarantine_entry;

static pthread_mutex_t quarantine__mu = PTHREAD_MUTEX_INITIALIZER;
static quarantine_entry quarantine__mem[QUARANTINE_MEMORY];
static int quarantine__next;
static store *quarantine__store;
static double quarantine__seconds = QUARANTINE_DEFAULT_SECONDS;

static double quarantine__wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The store key of a model id; 0 when the id is too long to be one. */
static int quarantine__key(const char *model_id, char key[QUARANTINE_KEY_MAX])
{
    return snprintf(key, QUARANTINE_KEY_MAX, "%s/%s", engine_identity(), model_id) < QUARANTINE_KEY_MAX;
}

void quarantine_start(store *st, double seconds)
{
    pthread_mutex_lock(&quarantine__mu);
    quarantine__store = st;
    quarantine__seconds = seconds > 0 ? seconds : QUARANTINE_DEFAULT_SECONDS;
    pthread_mutex_unlock(&quarantine__mu);
}

void quarantine_stop(void)
{
    pthread_mutex_lock(&quarantine__mu);
    quarantine__store = NULL;
    for (int i = 0; i < QUARANTINE_MEMORY; i++) {
        free(quarantine__mem[i].doc);
        memset(&quarantine__mem[i], 0, sizeof quarantine__mem[i]);
    }
    pthread_mutex_unlock(&quarantine__mu);
}

/* The memory's entry of key, or NULL (expired ones are dropped). Called with the lock. */
static quarantine_entry *quarantine__find(const char *key, double now)
{
    for (int i = 0; i < QUARANTINE_MEMORY; i++) {
        quarantine_entry *e = &quarantine__mem[i];
        if (!e->doc || strcmp(e->key, key) != 0)
            continue;
        if (e->expires > now)
            return e;
        free(e->doc);
        memset(e, 0, sizeof *e);
    }
    return NULL;
}

/* Remembers key in memory (doc copied). Called with the lock. */
static void quarantine__remember(const char *key, const char *doc, double expires)
{
    double now = quarantine__wall();
    if (quarantine__store && expires > now + QUARANTINE_MEMORY_SECONDS)
        expires = now + QUARANTINE_MEMORY_SECONDS;
    quarantine_entry *e = quarantine__find(key, 0);
    if (!e) {
        e = &quarantine__mem[quarantine__next];
        quarantine__next = (quarantine__next + 1) % QUARANTINE_MEMORY;
    }
    char *copy = strdup(doc);
    if (!copy)
        return;
    free(e->doc);
    snprintf(e->key, sizeof e->key, "%s", key);
    e->doc = copy;
    e->expires = expires;
}

int quarantine_check(const char *model_id, json_t **problem)
{
    *problem = NULL;
    char key[QUARANTINE_KEY_MAX];
    if (!model_id || !*model_id || !quarantine__key(model_id, key))
        return 0;
    double now = quarantine__wall();
    char *doc = NULL;
    pthread_mutex_lock(&quarantine__mu);
    quarantine_entry *e = quarantine__find(key, now);
    if (e)
        doc = strdup(e->doc);
    store *st = quarantine__store;
    pthread_mutex_unlock(&quarantine__mu);
    double expires = 0;
    if (!doc && st && store_quarantine_get(st, key, &doc, &expires) == 0 && doc) {
        pthread_mutex_lock(&quarantine__mu);
        quarantine__remember(key, doc, expires);
        pthread_mutex_unlock(&quarantine__mu);
    }
    if (!doc)
        return 0;
    *problem = json_loads(doc, 0, NULL);
    free(doc);
    if (!*problem) {
        *problem = hamel_problem_new(HAMEL_E_ENGINE_FAULT, "the engine failed on this model before");
        json_object_set_new(*problem, "model_id", json_string(model_id));
    }
    return 1;
}

void quarantine_add(const char *model_id, json_t *problem)
{
    char key[QUARANTINE_KEY_MAX];
    if (!model_id || !*model_id || !quarantine__key(model_id, key))
        return;
    pthread_mutex_lock(&quarantine__mu);
    double expires = quarantine__wall() + quarantine__seconds;
    store *st = quarantine__store;
    pthread_mutex_unlock(&quarantine__mu);
    time_t t = (time_t)expires;
    struct tm tm;
    char until[40];
    gmtime_r(&t, &tm);
    strftime(until, sizeof until, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(problem, "quarantined_until", json_string(until));
    char *doc = json_dumps(problem, JSON_COMPACT);
    if (!doc)
        return;
    pthread_mutex_lock(&quarantine__mu);
    quarantine__remember(key, doc, expires);
    pthread_mutex_unlock(&quarantine__mu);
    if (st && store_quarantine_put(st, key, doc, expires) != 0)
        fprintf(stderr, "hamel-server: the quarantine of %s could not be stored (it holds in this process)\n",
                model_id);
    free(doc);
}

int quarantine_clear(const char *model_id)
{
    char key[QUARANTINE_KEY_MAX];
    if (!model_id || !quarantine__key(model_id, key))
        return 1;
    pthread_mutex_lock(&quarantine__mu);
    quarantine_entry *e = quarantine__find(key, quarantine__wall());
    int found = e != NULL;
    if (e) {
        free(e->doc);
        memset(e, 0, sizeof *e);
    }
    store *st = quarantine__store;
    pthread_mutex_unlock(&quarantine__mu);
    int rc = st ? store_quarantine_del(st, key) : 1;
    if (rc < 0)
        return -1;
    return found || rc == 0 ? 0 : 1;
}
