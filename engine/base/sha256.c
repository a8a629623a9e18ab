/* sha256.c — SHA-256 and HMAC-SHA256 of sha256.h, from FIPS 180-4 §6.2 and RFC 2104. */
#include "sha256.h"

#include <string.h>

static const uint32_t sha256__k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t sha256__rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the state (FIPS 180-4 §6.2.2). */
static void sha256__compress(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
               (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = sha256__rotr(w[i - 15], 7) ^ sha256__rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = sha256__rotr(w[i - 2], 17) ^ sha256__rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = sha256__rotr(e, 6) ^ sha256__rotr(e, 11) ^ sha256__rotr(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = k + S1 + ch + sha256__k[i] + w[i];
        uint32_t S0 = sha256__rotr(a, 2) ^ sha256__rotr(a, 13) ^ sha256__rotr(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

void sha256_init(sha256_ctx *c)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->bytes = 0;
    c->fill = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t len)
{
    const unsigned char *p = data;
    if (len == 0)
        return;
    c->bytes += len;
    if (c->fill > 0) {
        size_t take = SHA256_BLOCK_BYTES - c->fill;
        take = take < len ? take : len;
        memcpy(c->block + c->fill, p, take);
        c->fill += take;
        p += take;
        len -= take;
        if (c->fill < SHA256_BLOCK_BYTES)
            return;
        sha256__compress(c->h, c->block);
        c->fill = 0;
    }
    for (; len >= SHA256_BLOCK_BYTES; p += SHA256_BLOCK_BYTES, len -= SHA256_BLOCK_BYTES)
        sha256__compress(c->h, p);
    if (len > 0) {
        memcpy(c->block, p, len);
        c->fill = len;
    }
}

void sha256_final(sha256_ctx *c, unsigned char out[SHA256_BYTES])
{
    uint64_t bits = c->bytes * 8;
    c->block[c->fill++] = 0x80;
    if (c->fill > SHA256_BLOCK_BYTES - 8) {
        memset(c->block + c->fill, 0, SHA256_BLOCK_BYTES - c->fill);
        sha256__compress(c->h, c->block);
        c->fill = 0;
    }
    memset(c->block + c->fill, 0, SHA256_BLOCK_BYTES - 8 - c->fill);
    for (int i = 0; i < 8; i++)
        c->block[SHA256_BLOCK_BYTES - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha256__compress(c->h, c->block);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(c->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)c->h[i];
    }
    sha256_wipe(c, sizeof *c);
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
    unsigned char k[SHA256_BLOCK_BYTES], pad[SHA256_BLOCK_BYTES], inner[SHA256_BYTES];
    memset(k, 0, sizeof k);
    if (key_len > SHA256_BLOCK_BYTES)
        sha256(key, key_len, k);
    else if (key_len > 0)
        memcpy(k, key, key_len);
    sha256_ctx c;
    for (int i = 0; i < SHA256_BLOCK_BYTES; i++)
        pad[i] = k[i] ^ 0x36;
    sha256_init(&c);
    sha256_update(&c, pad, sizeof pad);
    sha256_update(&c, msg, msg_len);
    sha256_final(&c, inner);
    for (int i = 0; i < SHA256_BLOCK_BYTES; i++)
        pad[i] = k[i] ^ 0x5c;
    sha256_init(&c);
    sha256_update(&c, pad, sizeof pad);
    sha256_update(&c, inner, sizeof inner);
    sha256_final(&c, out);
    sha256_wipe(k, sizeof k);
    sha256_wipe(pad, sizeof pad);
    sha256_wipe(inner, sizeof inner);
}

int sha256_equal(const void *a, const void *b, size_t len)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char diff = 0;
    for (size_t i = 0; i < len; i++)
        diff |= (unsigned char)(x[i] ^ y[i]);
    return diff == 0;
}

void sha256_wipe(void *p, size_t len)
{
    volatile unsigned char *v = p;
    while (len--)
        *v++ = 0;
}
