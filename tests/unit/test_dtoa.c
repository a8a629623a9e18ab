/* test_dtoa.c — shortest round-trip formatting (engine/dtoa.h) and the result writer
 * (engine/jsonout.h).
 *
 * Every formatted double must read back (strtod) to the same bits, and have no more
 * significant digits than the shortest %.{P}e form that reads back (the search over P
 * = 1..17 that defines "shortest"). Random bit patterns cover every exponent; further
 * classes: subnormals, neighbours of powers of ten, integers. The count per class is
 * HAMEL_DTOA_COUNT (default 50,000; the report runs millions).
 */
#include <criterion/criterion.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtoa.h"
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
