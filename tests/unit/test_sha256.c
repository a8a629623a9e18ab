/* test_sha256.c — engine/base/sha256.c against the published vectors: FIPS 180-4's
 * examples (NIST CSRC "SHA256.pdf", one and two blocks, a million 'a') and RFC 4231's
 * HMAC-SHA256 test cases 1, 2 and 6 (a key longer than a block); the HMAC (RFC 2104
 * over libcrypto's SHA-256) equals libcrypto's EVP HMAC() for every key length around
 * the block; the digest in pieces equals the digest in one; the rolling disk's model id is the one API.md's
 * examples carry (it was made by OpenSSL's SHA-256). */
#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "sha256.h"
#include "support.h"

static void hex(const unsigned char *d, char out[2 * SHA256_BYTES + 1])
{
    for (int i = 0; i < SHA256_BYTES; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void expect_digest(const void *data, size_t len, const char *want, const char *what)
{
    unsigned char d[SHA256_BYTES];
    char h[2 * SHA256_BYTES + 1];
    sha256(data, len, d);
    hex(d, h);
    cr_expect_str_eq(h, want, "SHA-256 of %s", what);
}

Test(sha256, fips_180_4_examples)
{
    expect_digest("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "\"\"");
    expect_digest("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abc");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    expect_digest(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
                  "the 448-bit message");
    static char million[1000000];
    memset(million, 'a', sizeof million);
    expect_digest(million, sizeof million, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
                  "a million 'a'");
}

Test(sha256, pieces_equal_the_whole)
{
    unsigned char msg[300], whole[SHA256_BYTES], parts[SHA256_BYTES];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (unsigned char)(i * 7 + 3);
    for (size_t len = 0; len <= sizeof msg; len += 13) {
        sha256(msg, len, whole);
        for (size_t cut = 0; cut <= len; cut += 5) {
            sha256_ctx c;
            sha256_init(&c);
            sha256_update(&c, msg, cut);
            sha256_update(&c, NULL, 0);
            sha256_update(&c, msg + cut, len - cut);
            sha256_final(&c, parts);
            cr_assert(memcmp(whole, parts, SHA256_BYTES) == 0, "length %zu cut at %zu", len, cut);
        }
    }
}

Test(sha256, rfc_4231_hmac)
{
    unsigned char mac[SHA256_BYTES], key[131];
    char h[2 * SHA256_BYTES + 1];
    memset(key, 0x0b, 20);
    hmac_sha256(key, 20, "Hi There", 8, mac);
    hex(mac, h);
    cr_expect_str_eq(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", "test case 1");
    const char *data = "what do ya want for nothing?";
    hmac_sha256("Jefe", 4, data, strlen(data), mac);
    hex(mac, h);
    cr_expect_str_eq(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", "test case 2");
    memset(key, 0xaa, sizeof key);
    data = "Test Using Larger Than Block-Size Key - Hash Key First";
    hmac_sha256(key, sizeof key, data, strlen(data), mac);
    hex(mac, h);
    cr_expect_str_eq(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", "test case 6");
    cr_expect(sha256_equal(mac, mac, SHA256_BYTES));
    unsigned char other[SHA256_BYTES];
    memcpy(other, mac, sizeof other);
    other[SHA256_BYTES - 1] ^= 1;
    cr_expect(!sha256_equal(mac, other, SHA256_BYTES), "a last byte that differs is seen");
}

Test(sha256, hmac_equals_libcrypto_evp_hmac)
{
    unsigned char key[200], msg[300], ours[SHA256_BYTES], theirs[EVP_MAX_MD_SIZE];
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (unsigned char)(i * 31 + 7);
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (unsigned char)(i * 13 + 1);
    for (size_t klen = 0; klen <= sizeof key; klen += (klen >= 60 && klen < 70) ? 1 : 9) {
        for (size_t mlen = 0; mlen <= sizeof msg; mlen += 37) {
            unsigned int n = 0;
            hmac_sha256(key, klen, msg, mlen, ours);
            cr_assert(HMAC(EVP_sha256(), key, (int)klen, msg, mlen, theirs, &n) != NULL && n == SHA256_BYTES);
            cr_assert(memcmp(ours, theirs, SHA256_BYTES) == 0, "key of %zu bytes, message of %zu", klen,
                      mlen);
        }
    }
}

Test(sha256, model_id_is_unchanged)
{
    json_t *c = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    json_t *s = engine_model_summary(m);
    cr_expect_str_eq(json_string_value(json_object_get(s, "model_id")),
                     "sha256:c25906d0ff52d7e352a65437806636cb2ac9d644f034f8a02ba95e5d34c8a5e3",
                     "the id api/examples/*.json carry for the rolling disk");
    json_decref(s);
    engine_model_release(m);
    json_decref(c);
}
