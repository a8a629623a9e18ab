/* test_dtoa.c — shortest round-trip formatting (engine/dtoa.h) and the result writer
 * (engine/jsonout.h).
 *
 * Every formatted double must read back (strtod) to the same bits, and have no more
 * significant digits than the shortest %.{P}e form that reads back (the search over P
 * = 1..17 that defines "shortest"). Random bit patterns cover every exponent; further
 * classes: subnormals, neighbours of powers of ten, integers. The count per class is
 * HAMEL_DTOA_COUNT (default 50,000; the report runs millions).
 *
 * The writer was rewritten for speed (constant table, fixed-width digit blocks): the
 * previous one is kept in dtoa_ref.h and the new text must equal it byte for byte on
 * every class above (and dtoa_join equal the joined texts); the generated table must
 * equal the previous one's multi-word computation.
 */
#include <criterion/criterion.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtoa.h"
#include "dtoa_ref.h"
#include "dtoa_table.h"
#include "jsonout.h"

static uint64_t dt_state = 0x9E3779B97F4A7C15ULL;
static uint64_t dt_rand(void)
{
    dt_state ^= dt_state << 13;
    dt_state ^= dt_state >> 7;
    dt_state ^= dt_state << 17;
    return dt_state;
}

static double dt_from_bits(uint64_t b)
{
    double v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* Significant digits of the shortest %.*e that reads back to v. */
static int dt_shortest_printf(double v)
{
    for (int p = 1; p <= 17; p++) {
        char b[40];
        snprintf(b, sizeof b, "%.*e", p - 1, v);
        if (strtod(b, NULL) == v)
            return p;
    }
    return 99;
}

static int dt_digits(unsigned long long f)
{
    int n = 0;
    do {
        n++;
        f /= 10;
    } while (f);
    return n;
}

/* Asserts the round trip and the length for one value. */
static void dt_check(double v)
{
    char b[DTOA_MAX];
    int len = dtoa_shortest(v, b);
    cr_assert_eq((size_t)len, strlen(b));
    cr_assert_lt(len, DTOA_MAX);
    double w = strtod(b, NULL);
    cr_assert(memcmp(&v, &w, sizeof v) == 0, "%a formatted as \"%s\" reads back as %a", v, b, w);
    unsigned long long f;
    int e, neg;
    cr_assert_eq(dtoa_decimal(v, &f, &e, &neg), 0);
    if (v != 0) {
        int p = dt_shortest_printf(v);
        cr_assert_leq(dt_digits(f), p, "%a as \"%s\": %d digits, %%.%de reads back with %d", v, b,
                      dt_digits(f), p - 1, p);
        cr_assert_neq(f % 10, 0, "trailing zero in the digits of %a", v);
    }
}

static long dt_count(void)
{
    const char *s = getenv("HAMEL_DTOA_COUNT");
    long n = s ? atol(s) : 0;
    return n > 0 ? n : 50000;
}

Test(dtoa, edge_cases)
{
    static const struct {
        double v;
        const char *text;
    } cases[] = {
        {0.0, "0.0"},
        {-0.0, "-0.0"},
        {5e-324, "5e-324"},
        {-5e-324, "-5e-324"},
        {1e-323, "1e-323"},
        {1.7976931348623157e308, "1.7976931348623157e308"},
        {2.2250738585072014e-308, "2.2250738585072014e-308"},
        {2.225073858507201e-308, "2.225073858507201e-308"},
        {1.0, "1.0"},
        {-1.5, "-1.5"},
        {0.1, "0.1"},
        {0.3, "0.3"},
        {1.0 / 3.0, "0.3333333333333333"},
        {123.0, "123.0"},
        {1e16, "10000000000000000.0"},
        {1e17, "1e17"},
        {1e23, "1e23"},
        {1e-5, "0.00001"},
        {1e-6, "1e-6"},
        {9007199254740993.0, "9007199254740992.0"},
        {1e308, "1e308"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char b[DTOA_MAX];
        dtoa_shortest(cases[i].v, b);
        cr_expect_str_eq(b, cases[i].text, "%a", cases[i].v);
        dt_check(cases[i].v);
    }
    char b[DTOA_MAX];
    dtoa_shortest(NAN, b);
    cr_expect_str_eq(b, "null", "NaN is null (API.md)");
    dtoa_shortest(-INFINITY, b);
    cr_expect_str_eq(b, "null");
    /* every power of ten and its neighbours */
    for (int p = -323; p <= 308; p++) {
        char s[16];
        snprintf(s, sizeof s, "1e%d", p);
        double v = strtod(s, NULL);
        uint64_t bits;
        memcpy(&bits, &v, sizeof bits);
        for (int d = -2; d <= 2; d++)
            dt_check(dt_from_bits(bits + (uint64_t)(int64_t)d));
        char out[DTOA_MAX];
        dtoa_shortest(v, out);
        unsigned long long f;
        int e, neg;
        dtoa_decimal(v, &f, &e, &neg);
        cr_expect_eq(f, 1ULL, "1e%d has digits %llu", p, f);
        cr_expect_eq(e, p, "1e%d", p);
    }
    /* the smallest subnormals and the binade edges */
    for (uint64_t c = 1; c < 2000; c++)
        dt_check(dt_from_bits(c));
    for (int q = 1; q < 2047; q++)
        for (int d = -1; d <= 1; d++)
            dt_check(dt_from_bits(((uint64_t)q << 52) + (uint64_t)(int64_t)d));
}

Test(dtoa, random_bits_round_trip_shortest, .timeout = 120)
{
    long n = dt_count();
    for (long i = 0; i < n; i++) {
        double v = dt_from_bits(dt_rand());
        if (isfinite(v))
            dt_check(v);
    }
}

Test(dtoa, random_subnormals_and_integers, .timeout = 120)
{
    long n = dt_count();
    for (long i = 0; i < n; i++) {
        dt_check(dt_from_bits(dt_rand() & 0x800FFFFFFFFFFFFFULL));
        dt_check((double)(int64_t)(dt_rand() >> (dt_rand() % 64)));
        dt_check((double)(dt_rand() % 100000) / 1000.0); /* short decimals */
    }
}

Test(jsonout, matches_jansson_structure)
{
    const char *text = "{\"a\":[1,-2,3.5,0.1,true,false,null,\"x\\\"y\\\\z\\n\\u0001\\u00e9/\"],"
                       "\"b\":{},\"c\":[],\"d\":{\"e\":1e300,\"f\":-0.0,\"g\":9223372036854775807}}";
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    cr_assert_not_null(j, "%s", err.text);
    size_t len = 0;
    char *out = jsonout_dumps(j, &len);
    cr_assert_not_null(out);
    cr_assert_eq(len, strlen(out));
    cr_expect_str_eq(out, "{\"a\":[1,-2,3.5,0.1,true,false,null,\"x\\\"y\\\\z\\n\\u0001\xc3\xa9/\"],"
                          "\"b\":{},\"c\":[],\"d\":{\"e\":1e300,\"f\":-0.0,\"g\":9223372036854775807}}");
    /* the text parses back to an equal document */
    json_t *back = json_loads(out, 0, &err);
    cr_assert_not_null(back, "%s", err.text);
    cr_expect(json_equal(j, back));
    char *ind = jsonout_dumps_indent(j, 1, NULL);
    json_t *back2 = json_loads(ind, 0, &err);
    cr_expect(json_equal(j, back2), "indented text parses back");
    free(ind);
    json_decref(back2);
    /* without reals (whose digits differ: jansson prints %.17g), the indented layout
     * is jansson's, byte for byte */
    json_t *k = json_loads("{\"a\":[1,2,{\"b\":\"c\"}],\"d\":{},\"e\":[],\"f\":{\"g\":[true]}}", 0, &err);
    cr_assert_not_null(k);
    char *mine = jsonout_dumps_indent(k, 2, NULL), *ref = json_dumps(k, JSON_INDENT(2));
    cr_expect_str_eq(mine, ref);
    free(mine);
    free(ref);
    json_decref(k);
    free(out);
    json_decref(back);
    json_decref(j);
}

Test(jsonout, big_array_round_trips)
{
    json_t *a = json_array();
    double *v = malloc(100000 * sizeof *v);
    cr_assert_not_null(v);
    for (int i = 0; i < 100000; i++) {
        v[i] = sin(i * 0.37) * pow(10.0, (i % 40) - 20);
        json_array_append_new(a, json_real(v[i]));
    }
    char *out = jsonout_dumps(a, NULL);
    cr_assert_not_null(out);
    json_t *back = json_loads(out, 0, NULL);
    cr_assert_not_null(back);
    cr_assert_eq(json_array_size(back), 100000u);
    for (int i = 0; i < 100000; i++) {
        json_t *x = json_array_get(back, i);
        cr_assert(json_is_number(x));
        cr_assert(json_number_value(x) == v[i], "element %d: %.17g != %.17g", i, json_number_value(x), v[i]);
    }
    free(out);
    free(v);
    json_decref(back);
    json_decref(a);
}

/* ---- the rewritten writer against the previous one ---- */

Test(dtoa, generated_table_equals_multiword_computation)
{
    pthread_once(&ref_dtoa_once, ref_dtoa__init);
    cr_assert_eq(sizeof dtoa_g / sizeof dtoa_g[0], (size_t)(DTOA_K_MAX - DTOA_K_MIN + 1));
    for (int i = 0; i <= DTOA_K_MAX - DTOA_K_MIN; i++) {
        u128 g = ref_dtoa_g[i];
        cr_assert_eq(dtoa_g[i][0], (uint64_t)(g >> 63), "k = %d: high half", i + DTOA_K_MIN);
        cr_assert_eq(dtoa_g[i][1], (uint64_t)g & ((1ULL << 63) - 1), "k = %d: low half", i + DTOA_K_MIN);
        cr_assert_eq((uint64_t)(g >> 126), 0u, "k = %d: g < 2^126", i + DTOA_K_MIN);
        cr_assert_eq((uint64_t)(g >> 125), 1u, "k = %d: g >= 2^125", i + DTOA_K_MIN);
    }
}

/* Asserts the same text as the previous writer, and the same decimal form. */
static void dt_same(double v)
{
    char mine[DTOA_MAX], ref[64];
    memset(mine, 'x', sizeof mine);
    int n = dtoa_shortest(v, mine), rn = ref_dtoa_shortest(v, ref);
    cr_assert(n == rn && memcmp(mine, ref, (size_t)n + 1) == 0, "%a: \"%s\" (previous: \"%s\")", v, mine,
              ref);
    cr_assert_leq(n, DTOA_LEN);
    unsigned long long f, rf;
    int e, re, neg, rneg;
    int rc = dtoa_decimal(v, &f, &e, &neg), rrc = ref_dtoa_decimal(v, &rf, &re, &rneg);
    cr_assert_eq(rc, rrc);
    if (rc == 0)
        cr_assert(f == rf && e == re && neg == rneg, "%a: %llue%d (previous %llue%d)", v, f, e, rf, re);
}

Test(dtoa, same_bytes_as_previous_writer, .timeout = 300)
{
    static const double special[] = {0.0,
                                     -0.0,
                                     NAN,
                                     -NAN,
                                     INFINITY,
                                     -INFINITY,
                                     5e-324,
                                     -5e-324,
                                     DBL_MIN,
                                     DBL_MAX,
                                     -DBL_MAX,
                                     1.0,
                                     -1.0,
                                     0.1,
                                     1e16,
                                     1e17,
                                     1e-5,
                                     1e-6,
                                     12345678901234567.0,
                                     0.00012345678901234567,
                                     1.2345678901234567e-308};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        dt_same(special[i]);
    /* powers of ten and their neighbours, every binade edge, the smallest subnormals */
    for (int p = -325; p <= 309; p++) {
        char s[16];
        snprintf(s, sizeof s, "1e%d", p);
        double v = strtod(s, NULL);
        uint64_t bits;
        memcpy(&bits, &v, sizeof bits);
        for (int d = -3; d <= 3; d++) {
            dt_same(dt_from_bits(bits + (uint64_t)(int64_t)d));
            dt_same(-dt_from_bits(bits + (uint64_t)(int64_t)d));
        }
    }
    for (int q = 0; q < 2048; q++)
        for (int d = -2; d <= 2; d++)
            dt_same(dt_from_bits(((uint64_t)q << 52) + (uint64_t)(int64_t)d));
    for (uint64_t c = 0; c < 5000; c++)
        dt_same(dt_from_bits(c));
    /* random: bit patterns (every exponent, NaNs, infinities), subnormals, integers,
     * short decimals, numbers with 1..17 digits at every decimal exponent of the fixed
     * layout and around it, and a trajectory-like mix */
    long n = 4 * dt_count();
    for (long i = 0; i < n; i++) {
        dt_same(dt_from_bits(dt_rand()));
        dt_same(dt_from_bits(dt_rand() & 0x800FFFFFFFFFFFFFULL));
        dt_same((double)(int64_t)(dt_rand() >> (dt_rand() % 64)));
        dt_same((double)(int64_t)(dt_rand() % 2000001) / 1000.0 - 1000.0);
        int digits = 1 + (int)(dt_rand() % 17), x = (int)(dt_rand() % 30) - 10;
        char s[48];
        snprintf(s, sizeof s, "%llue%d",
                 (unsigned long long)(dt_rand() % 100000000000000000ULL) %
                     (unsigned long long)pow(10, digits),
                 x - digits);
        dt_same(strtod(s, NULL));
        dt_same(sin((double)i * 0.37) * pow(10.0, (double)(i % 40) - 20));
    }
}

Test(dtoa, join_equals_joined_texts)
{
    enum { N = 20000 };
    double *v = malloc(N * sizeof *v);
    char *out = malloc(N * (DTOA_LEN + 1) + DTOA_MAX), *ref = malloc(N * 64);
    cr_assert(v && out && ref);
    for (int i = 0; i < N; i++)
        v[i] = i % 7 == 0   ? dt_from_bits(dt_rand())
               : i % 7 == 1 ? (double)i
                            : sin(i * 0.37) * pow(10.0, (i % 40) - 20);
    for (size_t count = 0; count <= N; count = count ? count * 3 : 1) {
        memset(out, 'x', N * (DTOA_LEN + 1) + DTOA_MAX);
        size_t len = dtoa_join(v, count, out), rlen = 0;
        for (size_t i = 0; i < count; i++) {
            if (i)
                ref[rlen++] = ',';
            rlen += (size_t)ref_dtoa_shortest(v[i], ref + rlen);
        }
        cr_assert_eq(len, rlen, "%zu numbers", count);
        cr_assert(memcmp(out, ref, len) == 0, "%zu numbers: the texts differ", count);
    }
    /* the worst case fills the room it asks for and no more */
    for (int i = 0; i < N; i++)
        v[i] = -1.2345678901234567e-308;
    cr_assert_eq(dtoa_join(v, N, out), (size_t)N * (DTOA_LEN + 1) - 1);
    free(v);
    free(out);
    free(ref);
}

Test(jsonout, doubles_equal_one_at_a_time)
{
    static const size_t counts[] = {0, 1, 2, 255, 256, 257, 511, 512, 513, 1001, 5000};
    double *v = malloc(5000 * sizeof *v);
    cr_assert_not_null(v);
    for (int i = 0; i < 5000; i++)
        v[i] = i % 5 == 0   ? dt_from_bits(dt_rand())
               : i % 5 == 1 ? -1.2345678901234567e-308
                            : sin(i * 0.37) * pow(10.0, (i % 40) - 20);
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        jsonout a, b;
        cr_assert_eq(jsonout_init(&a, 1), 0); /* tiny: every block grows the buffer */
        cr_assert_eq(jsonout_init(&b, 0), 0);
        jsonout_raw(&a, "x", 1);
        jsonout_doubles(&a, v, counts[c]);
        jsonout_raw(&b, "x[", 2);
        for (size_t i = 0; i < counts[c]; i++) {
            if (i)
                jsonout_raw(&b, ",", 1);
            jsonout_double(&b, v[i]);
        }
        jsonout_raw(&b, "]", 1);
        size_t la, lb;
        char *ta = jsonout_finish(&a, &la), *tb = jsonout_finish(&b, &lb);
        cr_assert(ta && tb);
        cr_expect(la == lb && strcmp(ta, tb) == 0, "%zu numbers: the texts differ", counts[c]);
        free(ta);
        free(tb);
    }
    free(v);
}
