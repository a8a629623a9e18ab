/* dynbuf.h — a growable byte buffer with a named maximum (curl's dynbuf with its toobig).
 *
 * Owns the bytes it holds: grown by doubling from a first allocation, never past `max`;
 * a failure (past max, out of memory) is sticky, so a caller can write on and check once.
 * The text is not NUL-terminated unless written with dynbuf_printf. Used for request
 * bodies (http.c) and the metrics text (metrics.c).
 */
#ifndef HAMEL_SERVER_DYNBUF_H
#define HAMEL_SERVER_DYNBUF_H

#include <stddef.h>

typedef struct dynbuf {
    char *s; /* NULL until the first write */
    size_t len, cap;
    size_t first, max; /* the first allocation, and the most it may hold */
    int failed;        /* a write failed: later writes do nothing */
} dynbuf;

/* An empty buffer that will hold at most max bytes. Allocates nothing. */
void dynbuf_init(dynbuf *b, size_t first, size_t max);

/* Appends n bytes. Returns 0, or -1 past max or out of memory (then b->failed). */
int dynbuf_add(dynbuf *b, const void *p, size_t n);

/* Appends printf output (and keeps it NUL-terminated). Returns 0, or -1 as dynbuf_add. */
int dynbuf_printf(dynbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Frees the bytes and empties b (its limits stay). Accepts an empty b. */
void dynbuf_free(dynbuf *b);

#endif
