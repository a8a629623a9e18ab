/* pool.h — a small pool of threads with a bounded FIFO queue, for work that must not run
 * on the thread that asks for it: the server's two offload lanes (server/offload.c: a
 * model's derivation, store reads, off libmicrohttpd's poll threads) and the optimizing
 * tier's background builds (engine/mech/native.c: the cc build and the first-tier libtcc
 * compile). It knows nothing of HTTP or of models: a task is two functions and a pointer.
 *
 * Up to `threads` threads take tasks in the order they were submitted. A thread is
 * started lazily, when a task is queued and no started thread is free, so a pool that is
 * never used costs no thread. For every accepted task, run(arg) is called on a pool
 * thread and then done(arg, 1) on the same thread; a task still queued when the pool
 * shuts down is dropped: only done(arg, 0) is called, on the thread calling
 * pool_shutdown. done is called exactly once per accepted task, with no lock held, so it
 * may release what arg holds or submit again (refused once the pool stops); after it the
 * pool forgets the task.
 *
 * Ownership: the pool never owns arg; the caller keeps whatever arg refers to alive until
 * done has been called (done is where an owner releases it). A refused submission calls
 * neither function: arg is still entirely the caller's.
 *
 * Thread-safety: pool_submit, pool_counts and pool_shutdown may be called from any thread,
 * concurrently — but pool_shutdown not from inside a run or done of the same pool (it
 * joins that pool's threads). pool_free is the last call on a pool.
 *
 * Lock order: the pool has one mutex, a leaf: it is never held while run or done is
 * called, nor while any other lock is taken, so a caller may hold a lock of its own
 * around pool_submit and pool_counts (native.c does), provided its run and done take
 * that lock only after they start.
 */
#ifndef HAMEL_POOL_H
#define HAMEL_POOL_H

#include <stddef.h>

/* pool_submit's results: accepted, or refused for one of these reasons. */
enum {
    POOL_OK = 0,
    POOL_FULL = -1,      /* `queue` tasks already wait */
    POOL_STOPPING = -2,  /* pool_shutdown has been called */
    POOL_NO_THREAD = -3, /* no thread is running and none could be started */
};

typedef struct pool pool;

/* A pool of at most `threads` threads (at least 1) with room for `queue` waiting tasks
 * (a task being run does not count), each thread with a stack of `stack_bytes` (0: the
 * system's default). No thread starts yet. Returns NULL when out of memory. */
pool *pool_new(int threads, int queue, size_t stack_bytes);

/* Queues run(arg), then done(arg, ran) (done may be NULL). Returns POOL_OK, or
 * POOL_FULL, POOL_STOPPING or POOL_NO_THREAD, in which cases nothing is queued and
 * neither function is ever called. Never blocks on a task. */
int pool_submit(pool *p, void (*run)(void *arg), void (*done)(void *arg, int ran), void *arg);

/* How many tasks wait in the queue and how many are being run now. */
void pool_counts(pool *p, size_t *queued, size_t *running);

/* Stops taking tasks; the queued ones are dropped (done(arg, 0), on this thread), the
 * running ones finish; then every thread is joined. Returns when every accepted task's
 * done has been called. A later or concurrent call returns at once. */
void pool_shutdown(pool *p);

/* Shuts the pool down (if not yet) and frees it. Accepts NULL. */
void pool_free(pool *p);

#endif
