/* ids.h — identifiers: random ids as lowercase hex (jobs, batches, consumer names), the
 * hex form of digests (memo and cache keys), and the hash of a key for hash tables.
 */
#ifndef HAMEL_SERVER_IDS_H
#define HAMEL_SERVER_IDS_H

#include <stddef.h>
#include <stdint.h>

/* Writes the lowercase hex of the n bytes at d into out[2n + 1] (NUL-terminated). */
void ids_hex(const unsigned char *d, size_t n, char *out);

/* Writes a random id of `len` hex digits (len even, at most 64) into out[len + 1], from
 * getrandom; without an entropy source, from time and address bits. */
void ids_random(char *out, size_t len);

/* FNV-1a of a NUL-terminated key (cache keys, job ids), for hash table buckets. */
uint64_t ids_hash(const char *s);

#endif
