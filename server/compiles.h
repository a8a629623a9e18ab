/* compiles.h — model compilations off libmicrohttpd's threads.
 *
 * Deriving a model (parse, differentiate, reduce, JIT) takes from a millisecond to about
 * a second for a large hostile one. Done on a poll thread it would stall every other
 * connection of that thread, so a request whose model is not in the cache hands the model
 * to this small pool, suspends its connection and is resumed by the task's done function.
 *
 * A fixed number of threads take tasks from a bounded FIFO queue (full:
 * HAMEL_E_QUEUE_FULL). done(arg) is called exactly once per accepted task, from a compile
 * thread, with no lock held: when the compilation ended, or at shutdown for a task that
 * never started. The task is then the caller's to read and free.
 */
#ifndef HAMEL_SERVER_COMPILES_H
#define HAMEL_SERVER_COMPILES_H

#include <jansson.h>

#include "engine.h"

typedef struct compiles compiles;
typedef struct compile_task compile_task;

/* Starts `threads` compile threads with a queue of `queue` tasks. Borrows limits (which
 * must outlive the pool). Returns NULL on failure. */
compiles *compiles_new(int threads, int queue, const engine_limits *limits);

/* Queues the compilation of spec (the pool takes its own reference). On 0, *out is the
 * task and done(arg) will be called once; otherwise (HAMEL_E_QUEUE_FULL, or
 * HAMEL_E_UNAVAILABLE after compiles_stop) nothing is queued and done is never called. */
int compiles_submit(compiles *p, json_t *spec, void (*done)(void *arg), void *arg, compile_task **out);

/* After done: the outcome of engine_model_compile (0 or an error code); *model (a new
 * reference) or *problem pass to the caller; *seconds is the time spent compiling. */
int compile_task_result(compile_task *t, engine_model **model, json_t **problem, double *seconds);

void compile_task_free(compile_task *t);

/* How many tasks wait in the queue and how many are being compiled now. */
void compiles_counts(compiles *p, size_t *queued, size_t *running);

/* Stops taking tasks; queued ones end with HAMEL_E_UNAVAILABLE, running ones finish.
 * Returns when every accepted task's done has been called. */
void compiles_stop(compiles *p);

/* Stops (if not yet) and frees the pool. */
void compiles_free(compiles *p);

#endif
