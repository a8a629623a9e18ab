/* cache.c — a chained hash table threaded on a doubly-linked LRU list.
 *
 * Lock order: the cache mutex is a leaf; values are released after it is dropped so
 * that freeing a model never runs under the lock. */
#include "cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ids.h"

#define CACHE_MIN_BUCKETS 64
#define CACHE_ENTRY_OVERHEAD 96 /* bookkeeping charged to each entry */

typedef struct cache_entry {
    struct cache_entry *next_hash;
    struct cache_entry *prev, *next; /* LRU: head is the most recent */
    void *value;
    size_t bytes;
    uint64_t hash;
    char key[CACHE_MAX_KEY + 1];
} cache_entry;

struct cache {
    pthread_mutex_t lock;
    const cache_ops *ops;
    cache_entry **buckets;
    size_t nbuckets, entries, bytes, max_bytes;
    cache_entry *head, *tail;
    uint64_t hits, misses, evictions;
};

cache *cache_new(size_t max_bytes, const cache_ops *ops)
{
    cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->buckets = calloc(CACHE_MIN_BUCKETS, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    c->nbuckets = CACHE_MIN_BUCKETS;
    c->max_bytes = max_bytes;
    c->ops = ops;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void cache_free(cache *c)
{
    if (!c)
        return;
    cache_entry *e = c->head;
    while (e) {
        cache_entry *n = e->next;
        c->ops->release(e->value);
        free(e);
        e = n;
    }
    free(c->buckets);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static cache_entry **cache__slot(cache *c, const char *key, uint64_t h)
{
    cache_entry **p = &c->buckets[h & (c->nbuckets - 1)];
    while (*p && ((*p)->hash != h || strcmp((*p)->key, key) != 0))
        p = &(*p)->next_hash;
    return p;
}

static void cache__unlink(cache *c, cache_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void cache__push_front(cache *c, cache_entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
}

static void cache__grow(cache *c)
{
    size_t n = c->nbuckets * 2;
    cache_entry **b = calloc(n, sizeof *b);
    if (!b)
        return; /* keep the longer chains; still correct */
    for (size_t i = 0; i < c->nbuckets; i++) {
        cache_entry *e = c->buckets[i];
        while (e) {
            cache_entry *next = e->next_hash;
            e->next_hash = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(c->buckets);
    c->buckets = b;
    c->nbuckets = n;
}

static void *cache__lookup(cache *c, const char *key, int count)
{
    uint64_t h = ids_hash(key);
    void *v = NULL;
    pthread_mutex_lock(&c->lock);
    cache_entry *e = *cache__slot(c, key, h);
    if (e) {
        v = c->ops->retain(e->value);
        if (count) {
            c->hits++;
            cache__unlink(c, e);
            cache__push_front(c, e);
        }
    } else if (count) {
        c->misses++;
    }
    pthread_mutex_unlock(&c->lock);
    return v;
}

void *cache_get(cache *c, const char *key) { return cache__lookup(c, key, 1); }

void *cache_peek(cache *c, const char *key) { return cache__lookup(c, key, 0); }

/* Removes e from the table and the list; the caller releases e->value and frees e. */
static void cache__remove(cache *c, cache_entry *e)
{
    cache_entry **p = cache__slot(c, e->key, e->hash);
    *p = e->next_hash;
    cache__unlink(c, e);
    c->entries--;
    c->bytes -= e->bytes;
}

int cache_put(cache *c, const char *key, void *value, size_t bytes)
{
    size_t klen = strlen(key);
    size_t cost = bytes + klen + CACHE_ENTRY_OVERHEAD;
    if (klen > CACHE_MAX_KEY || cost > c->max_bytes)
        return 1;
    cache_entry *e = calloc(1, sizeof *e);
    if (!e)
        return -1;
    memcpy(e->key, key, klen + 1);
    e->hash = ids_hash(key);
    e->bytes = cost;
    e->value = c->ops->retain(value);

    cache_entry *evicted = NULL; /* chained through next_hash, released after unlock */
    pthread_mutex_lock(&c->lock);
    cache_entry *old = *cache__slot(c, key, e->hash);
    if (old) {
        cache__remove(c, old);
        old->next_hash = evicted;
        evicted = old;
    }
    while (c->bytes + cost > c->max_bytes && c->tail) {
        cache_entry *victim = c->tail;
        cache__remove(c, victim);
        victim->next_hash = evicted;
        evicted = victim;
        c->evictions++;
    }
    if (c->entries + 1 > c->nbuckets)
        cache__grow(c);
    cache_entry **slot = &c->buckets[e->hash & (c->nbuckets - 1)];
    e->next_hash = *slot;
    *slot = e;
    cache__push_front(c, e);
    c->entries++;
    c->bytes += cost;
    pthread_mutex_unlock(&c->lock);

    while (evicted) {
        cache_entry *n = evicted->next_hash;
        c->ops->release(evicted->value);
        free(evicted);
        evicted = n;
    }
    return 0;
}

void cache_stats_get(cache *c, cache_stats *out)
{
    pthread_mutex_lock(&c->lock);
    out->hits = c->hits;
    out->misses = c->misses;
    out->evictions = c->evictions;
    out->entries = c->entries;
    out->bytes = c->bytes;
    out->max_bytes = c->max_bytes;
    pthread_mutex_unlock(&c->lock);
}
