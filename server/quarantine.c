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
/* Memory holds every record of the store (one not shared, read at start): a check whose
 * key is not in memory is not quarantined, without asking the store (two store reads on
 * every new model's compilation). Cleared when a live record is pushed out of memory. */
static int quarantine__complete;

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

static void quarantine__remember(const char *key, const char *doc, double expires);

void quarantine_start(store *st, double seconds, int shared)
{
    pthread_mutex_lock(&quarantine__mu);
    quarantine__store = st;
    quarantine__seconds = seconds > 0 ? seconds : QUARANTINE_DEFAULT_SECONDS;
    quarantine__complete = 0;
    pthread_mutex_unlock(&quarantine__mu);
    if (!st || shared)
        return;
    /* every live record of this engine (those of other engines are never checked) */
    char prefix[QUARANTINE_KEY_MAX];
    snprintf(prefix, sizeof prefix, "%s/", engine_identity());
    store_quarantine_record *r = NULL;
    size_t n = 0;
    if (store_quarantine_list(st, prefix, QUARANTINE_MEMORY, &r, &n) != 0)
        return;
    pthread_mutex_lock(&quarantine__mu);
    if (n < QUARANTINE_MEMORY) {
        quarantine__complete = 1;
        for (size_t i = 0; i < n; i++)
            if (r[i].key && r[i].doc)
                quarantine__remember(r[i].key, r[i].doc, r[i].expires);
    }
    pthread_mutex_unlock(&quarantine__mu);
    store_quarantine_records_free(r, n);
}

void quarantine_stop(void)
{
    pthread_mutex_lock(&quarantine__mu);
    quarantine__store = NULL;
    quarantine__complete = 0;
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
    if (quarantine__store && !quarantine__complete && expires > now + QUARANTINE_MEMORY_SECONDS)
        expires = now + QUARANTINE_MEMORY_SECONDS;
    quarantine_entry *e = quarantine__find(key, 0);
    if (!e) {
        e = &quarantine__mem[quarantine__next];
        quarantine__next = (quarantine__next + 1) % QUARANTINE_MEMORY;
        if (e->doc && e->expires > now) /* a live record leaves memory: the store holds more */
            quarantine__complete = 0;
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
    store *st = quarantine__complete ? NULL : quarantine__store;
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

/* Wall-clock seconds as an RFC 3339 date-time (UTC) in out[40]. */
static void quarantine__date(double wall, char out[40])
{
    time_t t = (time_t)wall;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 40, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void quarantine_add(const char *model_id, json_t *problem)
{
    char key[QUARANTINE_KEY_MAX];
    if (!model_id || !*model_id || !quarantine__key(model_id, key))
        return;
    double now = quarantine__wall();
    pthread_mutex_lock(&quarantine__mu);
    double expires = now + quarantine__seconds;
    store *st = quarantine__store;
    pthread_mutex_unlock(&quarantine__mu);
    char at[40], until[40];
    quarantine__date(now, at);
    quarantine__date(expires, until);
    json_object_set_new(problem, "quarantined_at", json_string(at));
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

/* One entry of the listing from a record (its key, whose first plen bytes are the
 * prefix, its document and expiry): the id, and what the document says (a document
 * that is not JSON gives the id and the expiry alone). NULL when out of memory. */
static json_t *quarantine__entry(const char *key, size_t plen, const char *doc, double expires)
{
    json_t *out = json_pack("{s:s}", "model_id", key + plen);
    json_t *p = json_loads(doc, 0, NULL);
    static const char *const copied[] = {"model_name", "signal",         "operation",
                                         "detail",     "quarantined_at", "quarantined_until"};
    for (size_t i = 0; out && i < sizeof copied / sizeof *copied; i++) {
        json_t *v = json_object_get(p, copied[i]);
        if (json_is_string(v))
            json_object_set(out, copied[i], v);
    }
    if (out && !json_object_get(out, "quarantined_until")) {
        char until[40];
        quarantine__date(expires, until);
        json_object_set_new(out, "quarantined_until", json_string(until));
    }
    json_decref(p);
    return out;
}

/* Orders records the latest to expire first. */
static int quarantine__later_first(const void *a, const void *b)
{
    double x = ((const store_quarantine_record *)a)->expires,
           y = ((const store_quarantine_record *)b)->expires;
    return (x < y) - (x > y);
}

/* The memory's records under prefix, as a store would list them. Called with the lock. */
static size_t quarantine__memory_list(const char *prefix, double now, store_quarantine_record *out,
                                      size_t max)
{
    size_t n = 0, plen = strlen(prefix);
    for (int i = 0; i < QUARANTINE_MEMORY && n < max; i++) {
        const quarantine_entry *e = &quarantine__mem[i];
        if (!e->doc || e->expires <= now || strncmp(e->key, prefix, plen) != 0)
            continue;
        out[n].key = strdup(e->key);
        out[n].doc = strdup(e->doc);
        out[n].expires = e->expires;
        n++;
    }
    return n;
}

int quarantine_list(json_t **out)
{
    *out = NULL;
    char prefix[QUARANTINE_KEY_MAX];
    snprintf(prefix, sizeof prefix, "%s/", engine_identity());
    store_quarantine_record *r = NULL;
    size_t n = 0, max = QUARANTINE_LIST_MAX + 1; /* one more: whether there are more */
    pthread_mutex_lock(&quarantine__mu);
    store *st = quarantine__store;
    if (!st) {
        r = calloc(max, sizeof *r);
        n = r ? quarantine__memory_list(prefix, quarantine__wall(), r, max) : 0;
    }
    pthread_mutex_unlock(&quarantine__mu);
    if (st && store_quarantine_list(st, prefix, max, &r, &n) != 0)
        return -1;
    if (!r)
        return -1;
    qsort(r, n, sizeof *r, quarantine__later_first);
    int truncated = n > QUARANTINE_LIST_MAX;
    if (truncated)
        n = QUARANTINE_LIST_MAX;
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        if (r[i].key && r[i].doc)
            json_array_append_new(list, quarantine__entry(r[i].key, strlen(prefix), r[i].doc, r[i].expires));
    store_quarantine_records_free(r, truncated ? n + 1 : n);
    *out = json_pack("{s:o, s:I, s:b}", "quarantined", list, "count", (json_int_t)json_array_size(list),
                     "truncated", truncated);
    return *out ? 0 : -1;
}
