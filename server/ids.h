/* ids.h — identifiers as lowercase hex: random ids (jobs, batches, consumer names) and
 * the hex form of digests (memo and cache keys).
 */
#ifndef HAMEL_SERVER_IDS_H
#define HAMEL_SERVER_IDS_H

#include <stddef.h>

/* Writes the lowercase hex of the n bytes at d into out[2n + 1] (NUL-terminated). */
void ids_hex(const unsigned char *d, size_t n, char *out);

/* Writes a random id of `len` hex digits (len even, at most 64) into out[len + 1], from
 * getrandom; without an entropy source, from time and address bits. */
void ids_random(char *out, size_t len);

#endif
