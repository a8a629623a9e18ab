/* sha256.h — SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written out here so that
 * the engine needs no cryptographic library: model ids, request keys and the native code
 * cache's names and records. A one-shot `hamel run` used to spend a third of its time
 * loading libcrypto and initialising its provider (issue 19, item 3); these are a few
 * hundred lines with no state beyond the context, no configuration and no allocation.
 *
 * A sha256_ctx is plain data owned by the caller: init, any number of updates, final.
 * Every function is thread-safe on distinct contexts.
 */
#ifndef HAMEL_SHA256_H
#define HAMEL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_BYTES 32       /* a digest */
#define SHA256_BLOCK_BYTES 64 /* the compression function's block */

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t bytes; /* hashed so far */
    unsigned char block[SHA256_BLOCK_BYTES];
    size_t fill; /* bytes waiting in block */
} sha256_ctx;

/* Starts a digest. */
void sha256_init(sha256_ctx *c);

/* Hashes len bytes of data (borrowed; may be NULL when len is 0). */
void sha256_update(sha256_ctx *c, const void *data, size_t len);

/* Writes the digest into out and wipes the context. */
void sha256_final(sha256_ctx *c, unsigned char out[SHA256_BYTES]);

/* The digest of one buffer. */
void sha256(const void *data, size_t len, unsigned char out[SHA256_BYTES]);

/* HMAC-SHA256 of msg under key (RFC 2104; a key longer than a block is hashed first). */
void hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                 unsigned char out[SHA256_BYTES]);

/* 1 when a[0..len) equals b[0..len), in time that does not depend on where they differ. */
int sha256_equal(const void *a, const void *b, size_t len);

/* Overwrites p[0..len) with zeros in a way the compiler does not drop (key material). */
void sha256_wipe(void *p, size_t len);

#endif
