/* blob.h — immutable, reference-counted byte strings.
 *
 * A finished result is serialised once and then shared: by the result cache, by the
 * job that computed it and by every response in flight that sends it (zero-copy,
 * released by libmicrohttpd's free callback).
 */
#ifndef HAMEL_SERVER_BLOB_H
#define HAMEL_SERVER_BLOB_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct blob {
    atomic_long refs;
    size_t len;
    char data[]; /* len bytes, then a NUL */
} blob;

/* A new blob with one reference holding a copy of `len` bytes of `data` (borrowed).
 * Returns NULL when out of memory. */
blob *blob_new(const char *data, size_t len);

/* A new blob that takes ownership of the malloc'd, NUL-terminated string `s` contents
 * (s is freed). Returns NULL when out of memory (s is freed too). */
blob *blob_take(char *s);

/* Adds a reference and returns b. */
blob *blob_retain(blob *b);

/* Drops a reference; the last frees. Accepts NULL. */
void blob_release(blob *b);

#endif
