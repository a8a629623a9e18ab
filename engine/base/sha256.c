/* sha256.c — SHA-256 and HMAC-SHA256 on OpenSSL's libcrypto (sha256.h).
 *
 * The digest is libcrypto's own SHA-256 code called directly (SHA256_Init, _Update,
 * _Final): OpenSSL 3 marks these deprecated in favour of EVP, but EVP's first digest
 * initialises the library and builds its provider and name tables (0.4 ms, a tenth of
 * a one-shot `hamel run`), and linking the EVP layer pulls most of libcrypto into the
 * program. The functions are the same code EVP's default provider runs (the
 * assembler for the CPU), so the digests are OpenSSL's. HMAC is libcrypto's
 * HMAC() (through EVP: only the native tier's cache records use it, never a one-shot
 * run); tests/unit/test_sha256.c checks both against RFC 4231's vectors. */
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_Init and friends: see above */
#include "sha256.h"

#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(SHA256_CTX) <= sizeof(((sha256_ctx *)0)->state), "sha256_ctx holds a SHA256_CTX");
_Static_assert(SHA256_DIGEST_LENGTH == SHA256_BYTES && SHA256_CBLOCK == SHA256_BLOCK_BYTES,
               "libcrypto's SHA-256 sizes");

static SHA256_CTX *sha256__ctx(sha256_ctx *c) { return (SHA256_CTX *)(void *)c->state; }

static void sha256__check(int ok)
{
    if (!ok) { /* libcrypto's SHA-256 fails only on a NULL context */
        fputs("hamel: libcrypto failed while hashing\n", stderr);
        abort();
    }
}

void sha256_init(sha256_ctx *c) { sha256__check(SHA256_Init(sha256__ctx(c)) == 1); }

void sha256_update(sha256_ctx *c, const void *data, size_t len)
{
    if (len)
        sha256__check(SHA256_Update(sha256__ctx(c), data, len) == 1);
}

void sha256_final(sha256_ctx *c, unsigned char out[SHA256_BYTES])
{
    sha256__check(SHA256_Final(out, sha256__ctx(c)) == 1);
    OPENSSL_cleanse(c, sizeof *c);
}

void sha256(const void *data, size_t len, unsigned char out[SHA256_BYTES])
{
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, data, len);
    sha256_final(&c, out);
}

void hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                 unsigned char out[SHA256_BYTES])
{
    static const unsigned char none = 0; /* HMAC() wants a key pointer even when empty */
    unsigned int len = 0;
    /* EVP's first use initialises libcrypto: without reading openssl.cnf (or what
     * OPENSSL_CONF names), whose providers and settings are not the service's to take */
    sha256__check(OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL) == 1);
    unsigned char *r =
        HMAC(EVP_sha256(), key_len ? key : &none, (int)key_len, msg_len ? msg : &none, msg_len, out, &len);
    sha256__check(r != NULL && len == SHA256_BYTES && key_len <= INT_MAX);
}

int sha256_equal(const void *a, const void *b, size_t len) { return CRYPTO_memcmp(a, b, len) == 0; }

void sha256_wipe(void *p, size_t len) { OPENSSL_cleanse(p, len); }
