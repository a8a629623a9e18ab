/* cache.h — a byte-bounded LRU map from string keys to reference-counted values.
 *
 * The server keeps two: compiled models (keyed by model id and by the hash of the
 * model's JSON text, so a repeated model skips derivation) and finished results
 * (keyed by engine_simulation_key). Values are shared, never copied: get returns a
 * new reference, put takes one of its own. All calls are thread-safe (one mutex per
 * cache, held only for the map and list updates, never across a retain/release of a
 * value that could free heavy state).
 */
#ifndef HAMEL_SERVER_CACHE_H
#define HAMEL_SERVER_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define CACHE_MAX_KEY 127

typedef struct cache cache;

/* How a cache holds its values. */
typedef struct cache_ops {
    void *(*retain)(void *value);
    void (*release)(void *value);
} cache_ops;

typedef struct cache_stats {
    uint64_t hits, misses, evictions;
    size_t entries, bytes, max_bytes;
} cache_stats;

/* A new empty cache holding at most max_bytes (0 disables it: every put is refused).
 * `ops` is borrowed and must outlive the cache. Returns NULL when out of memory. */
cache *cache_new(size_t max_bytes, const cache_ops *ops);

/* Releases every value and frees the cache. Accepts NULL. */
void cache_free(cache *c);

/* The value under key as a new reference (the caller releases it), or NULL; counts
 * a hit or a miss and makes a hit the most recently used entry. */
void *cache_get(cache *c, const char *key);

/* Like cache_get but counts nothing. */
void *cache_peek(cache *c, const char *key);

/* Stores value under key (replacing any old value), taking a reference of its own,
 * then evicts least recently used entries until the cache fits. `bytes` is what the
 * value costs. Returns 0, or 1 when the entry alone is larger than the cache or the
 * key longer than CACHE_MAX_KEY (nothing stored), -1 when out of memory. */
int cache_put(cache *c, const char *key, void *value, size_t bytes);

/* A snapshot of the counters. */
void cache_stats_get(cache *c, cache_stats *out);

#endif
