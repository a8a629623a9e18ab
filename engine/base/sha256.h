/* sha256.h — the engine's hashing: SHA-256 and HMAC-SHA256 for model ids, request keys
 * and the native code cache's names and records, done by OpenSSL's libcrypto (the
 * project's chosen library for hashing; we do not write our own digest). The digest is
 * libcrypto's SHA-256 code called directly, without EVP: nothing to initialise, no
 * configuration file read, no provider table built, so a one-shot `hamel run` pays for
 * the digest alone (issue 19, item 3). HMAC is RFC 2104 over that digest.
 *
 * A sha256_ctx is owned by the caller, on its stack: init, any number of updates,
 * final (which clears it). Every function is thread-safe on distinct contexts.
 * */
#ifndef HAMEL_SHA256_H
#define HAMEL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_BYTES 32       /* a digest */
#define SHA256_BLOCK_BYTES 64 /* the compression function's block */

typedef struct sha256_ctx {
    uint64_t state[16]; /* libcrypto's SHA256_CTX (112 bytes), opaque here */
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
