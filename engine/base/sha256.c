/* sha256.c — SHA-256 and HMAC-SHA256 through OpenSSL's libcrypto (sha256.h). */
#include "sha256.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t sha256__once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256__md; /* fetched once, kept for the process */

static void sha256__init_once(void)
{
    /* no openssl.cnf: nothing of the machine's configuration changes what a digest is */
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
    sha256__md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256__method(void)
{
    pthread_once(&sha256__once, sha256__init_once);
    if (!sha256__md) {
        fputs("hamel: libcrypto has no SHA-256\n", stderr);
        abort();
    }
    return sha256__md;
}

static void sha256__check(int ok)
{
    if (!ok) {
        fputs("hamel: libcrypto failed while hashing (out of memory)\n", stderr);
        abort();
    }
}

void sha256_init(sha256_ctx *c)
{
    const EVP_MD *md = sha256__method();
    EVP_MD_CTX *x = EVP_MD_CTX_new();
    sha256__check(x != NULL);
    sha256__check(EVP_DigestInit_ex(x, md, NULL) == 1);
    c->evp = x;
}

void sha256_update(sha256_ctx *c, const void *data, size_t len)
{
    if (len)
        sha256__check(EVP_DigestUpdate(c->evp, data, len) == 1);
}

void sha256_final(sha256_ctx *c, unsigned char out[SHA256_BYTES])
{
    unsigned int n = 0;
    sha256__check(EVP_DigestFinal_ex(c->evp, out, &n) == 1 && n == SHA256_BYTES);
    EVP_MD_CTX_free(c->evp);
    c->evp = NULL;
}

void sha256(const void *data, size_t len, unsigned char out[SHA256_BYTES])
{
    unsigned int n = 0;
    sha256__check(EVP_Digest(data, len, out, &n, sha256__method(), NULL) == 1 && n == SHA256_BYTES);
}

void hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                 unsigned char out[SHA256_BYTES])
{
    unsigned int n = 0;
    sha256__check(HMAC(sha256__method(), key, (int)key_len, msg, msg_len, out, &n) != NULL &&
                  n == SHA256_BYTES);
}

int sha256_equal(const void *a, const void *b, size_t len) { return CRYPTO_memcmp(a, b, len) == 0; }

void sha256_wipe(void *p, size_t len) { OPENSSL_cleanse(p, len); }
