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
    char *data; /* len bytes, then a NUL: right after the struct (blob_new), or a block
                 * of its own taken over (blob_take_len: the engine's result text) */
    /* A result's gzip form (gzip.h: gzip_deflate_rest), made on the first answer that
     * asks for it and kept as long as the blob; released with it. Set once, by
     * compare-and-swap (respond.c). */
    _Atomic(struct blob *) gz;
    unsigned long aux; /* what a derived blob says of its source (gzip: its CRC-32); 0 */
} blob;

/* A new blob with one reference holding a copy of `len` bytes of `data` (borrowed).
 * Returns NULL when out of memory. */
blob *blob_new(const char *data, size_t len);

/* A new blob that takes ownership of the malloc'd, NUL-terminated string `s` (not
 * copied: the blob frees it). Returns NULL when out of memory (s is freed too). */
blob *blob_take(char *s);

/* blob_take when the length is known: s[len] is the NUL. */
blob *blob_take_len(char *s, size_t len);

/* Adds a reference and returns b. */
blob *blob_retain(blob *b);

/* Drops a reference; the last frees. Accepts NULL. */
void blob_release(blob *b);

#endif
