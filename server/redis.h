/* redis.h — the shared state of several hamel-servers, in one Redis (HAMEL_REDIS).
 *
 * Two things live here. The Redis store backend (redis_store_open): models, results and
 * job records under "hamel:" keys, behind the seam of store.h, so every instance reads
 * what any instance wrote. Results and job records expire after HAMEL_REDIS_TTL, and
 * results are also kept within HAMEL_STORE_BYTES, oldest dropped first (a Lua script
 * adds the result and trims in one step). And the shared job queue (redis_queue): a
 * Redis Stream "hamel:queue" read by the consumer group "workers", so any instance's
 * workers take any instance's jobs. A taken entry stays pending until it is
 * acknowledged; a worker renews the lease of the entries it runs (XCLAIM to itself,
 * every lease/3), and an entry idle longer than the lease — its instance died — is taken
 * over by another worker (XAUTOCLAIM) and run again from its request. Events ("done
 * <id>", "cancel <id>") go to every instance on the channel "hamel:events", so an
 * instance that holds a job's record in memory learns that another finished it, and a
 * running job stops wherever it runs when any instance cancels it.
 *
 * Failure: every call made while Redis cannot be reached returns -1 (the HTTP layer
 * answers 503) within HAMEL_REDIS_TIMEOUT seconds; the next call connects again, so an
 * instance recovers by itself when Redis is back. Connections come from a pool (one per
 * thread in use); the subscriber thread reconnects with a back-off.
 *
 * Thread-safe. Lock order: each object's own mutex is a leaf.
 */
#ifndef HAMEL_SERVER_REDIS_H
#define HAMEL_SERVER_REDIS_H

#include <stddef.h>

#include "store.h"

#define REDIS_ID_MAX 64        /* a stream entry id */
#define REDIS_MAX_DELIVERIES 3 /* a job handed out this often fails instead of running again */

typedef struct redis_queue redis_queue;

/* url (HAMEL_REDIS) as it may be printed: the password of redis://user:password@host is
 * replaced by *** (and a user part without a colon as a whole), into buf[cap]. */
void redis_url_shown(const char *url, char *buf, size_t cap);

/* What the shared store and queue need to know. */
typedef struct redis_config {
    const char *url;     /* redis://[[user]:password@]host[:port][/db] */
    double timeout;      /* seconds for one command, and to connect */
    double lease;        /* seconds a taken entry stays with its worker without renewal */
    long ttl;            /* seconds results and job records are kept */
    size_t max_queue;    /* entries waiting in the stream before HAMEL_E_QUEUE_FULL */
    store_limits limits; /* result bytes kept */
} redis_config;

/* Opens the Redis store backend (checking that Redis answers). Borrows cfg. Returns 0
 * and *out, or -1 with a message on stderr. */
int redis_store_open(const redis_config *cfg, store **out);

/* One job taken from the queue. `request` (the job's request without its model) and
 * `model` (the model's canonical JSON) are malloc'd; redis_task_clear frees them. */
typedef struct redis_task {
    char entry[REDIS_ID_MAX];
    char id[REDIS_ID_MAX];
    char model_id[80];
    char key[80];
    char *model;
    char *request;
    double created;
    int deliveries; /* taken over: how many times it has been handed out (else 0) */
} redis_task;

/* Called by the subscriber thread for each event, with no lock held. */
typedef void (*redis_event_fn)(void *arg, const char *event, const char *job_id);

/* Opens the shared queue (creating the stream and group if needed) as consumer
 * `consumer` (borrowed; unique per process) and starts the subscriber thread, which
 * calls on_event(arg, ...) for every event. Returns 0 and *out, or -1. */
int redis_queue_open(const redis_config *cfg, const char *consumer, redis_event_fn on_event, void *arg,
                     redis_queue **out);

/* Stops the subscriber and renewal threads and frees the queue. Accepts NULL. */
void redis_queue_free(redis_queue *q);

/* Appends a job. Borrows everything. Returns 0, HAMEL_E_QUEUE_FULL, or
 * HAMEL_E_UNAVAILABLE when Redis cannot be reached. */
int redis_queue_push(redis_queue *q, const char *id, const char *model_id, const char *key, const char *model,
                     const char *request, double created);

/* Takes the next job for this consumer: first an entry whose lease ran out, else a new
 * one, waiting up to `block` seconds. Returns 0 with *t filled (the entry's lease is
 * renewed until redis_queue_ack), 1 when there was none, -1 when Redis cannot be
 * reached (the caller waits a moment and tries again). */
int redis_queue_take(redis_queue *q, double block, redis_task *t);

/* Acknowledges and deletes a taken entry (its job has an outcome in the store). */
int redis_queue_ack(redis_queue *q, const char *entry);

/* Stops renewing a taken entry without acknowledging it: after the lease another
 * worker takes it over (a job this instance gives up while shutting down). */
void redis_queue_forget(redis_queue *q, const char *entry);

/* Sends an event to every instance. Returns 0 or -1. */
int redis_queue_publish(redis_queue *q, const char *event, const char *job_id);

/* Entries in the stream (waiting or being run). Returns -1 when Redis cannot be reached. */
long redis_queue_length(redis_queue *q);

/* Frees what a task holds and clears it. */
void redis_task_clear(redis_task *t);

#endif
