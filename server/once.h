/* once.h — one attempt at a piece of work per key, shared by everyone who asks for it
 * meanwhile, and a failure that hit a limit remembered for a while.
 *
 * A classical form of a large model derived past the compile budget answers 422 after
 * the whole budget; twelve clients asking again and again each paid it again, and
 * together held every thread that could compile a new model. With once, the first asker
 * of a key runs the work (ONCE_RUN); askers that arrive while it runs wait for its
 * outcome without a thread (ONCE_WAIT: once only lists them; the caller suspends them and
 * wakes those once_end hands back); and an outcome the caller chooses to remember (a
 * problem document) answers every asker of that key at once (ONCE_REMEMBERED) until it
 * expires. At most `max_remembered` outcomes are kept, the least recently used dropped
 * first.
 *
 * Thread-safe; the mutex inside is a leaf (no call out of this file is made under it).
 */
#ifndef HAMEL_SERVER_ONCE_H
#define HAMEL_SERVER_ONCE_H

#include <jansson.h>
#include <stddef.h>

#define ONCE_KEY_MAX 256

typedef struct once once;

enum { ONCE_RUN, ONCE_WAIT, ONCE_REMEMBERED };

/* A table remembering up to max_remembered outcomes for `seconds` each, or NULL. */
once *once_new(size_t max_remembered, double seconds);

/* Frees the table and what it remembers. Accepts NULL. No attempt may be running. */
void once_free(once *o);

/* Asks for key on behalf of `waiter` (borrowed, opaque). ONCE_RUN: no attempt runs and
 * none is remembered, the caller runs it now and must call once_end; ONCE_WAIT: one runs,
 * waiter is listed and is handed back by its once_end; ONCE_REMEMBERED: *remembered is a
 * new copy of the remembered outcome (caller owns it). A key longer than ONCE_KEY_MAX is
 * ONCE_RUN and never shared. */
int once_begin(once *o, const char *key, void *waiter, json_t **remembered);

/* The attempt at key ended. `remember` (borrowed, may be NULL): an outcome to answer the
 * key's later askers with, copied. The waiters listed meanwhile go to *waiters[*n]
 * (caller frees the array, NULL when none) for the caller to wake. */
void once_end(once *o, const char *key, const json_t *remember, void ***waiters, size_t *n);

/* Outcomes remembered now. */
size_t once_remembered(once *o);

#endif
