/* test_dtoa_scalar.c — engine/dtoa.c built a second time without SSE2 (the portable
 * digit path, -DDTOA_SSE2=0 as on a machine without it), its entry points renamed, and
 * compared byte for byte with the library's (SSE2 on x86-64) on the same classes of
 * values as test_dtoa.c.
 */
#define DTOA_SSE2 0
#define dtoa_shortest dtoa_scalar_shortest
#define dtoa_join dtoa_scalar_join
#define dtoa_decimal dtoa_scalar_decimal
#include "../../engine/base/dtoa.c"
#undef dtoa_shortest
#undef dtoa_join
#undef dtoa_decimal

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* the library's (the header was read under the renames above) */
int dtoa_shortest(double v, char *buf);
size_t dtoa_join(const double *v, size_t count, char *out);

static uint64_t ds_state = 0x2545F4914F6CDD1DULL;
static uint64_t ds_rand(void)
{
    ds_state ^= ds_state << 13;
    ds_state ^= ds_state >> 7;
    ds_state ^= ds_state << 17;
    return ds_state;
}

static void ds_same(double v)
{
    char a[DTOA_MAX], b[DTOA_MAX];
    int na = dtoa_shortest(v, a), nb = dtoa_scalar_shortest(v, b);
    cr_assert(na == nb && memcmp(a, b, (size_t)na + 1) == 0, "%a: \"%s\" (portable path: \"%s\")", v, a, b);
}

Test(dtoa_scalar, same_bytes_as_the_sse2_path, .timeout = 120)
{
    for (int p = -325; p <= 309; p++) {
        char s[16];
        snprintf(s, sizeof s, "1e%d", p);
        double v = strtod(s, NULL);
        uint64_t bits;
        memcpy(&bits, &v, sizeof bits);
        for (int d = -3; d <= 3; d++) {
            uint64_t x = bits + (uint64_t)(int64_t)d;
            double w;
            memcpy(&w, &x, sizeof w);
            ds_same(w);
            ds_same(-w);
        }
    }
    for (long i = 0; i < 500000; i++) {
        uint64_t x = ds_rand();
        double w;
        memcpy(&w, &x, sizeof w);
        ds_same(w);
        ds_same((double)(int64_t)(ds_rand() >> (ds_rand() % 64)));
        ds_same((double)(int64_t)(ds_rand() % 2000001) / 1000.0 - 1000.0);
        ds_same(sin((double)i * 0.37) * pow(10.0, (double)(i % 40) - 20));
    }
    /* dtoa_join too */
    enum { N = 3000 };
    double *v = malloc(N * sizeof *v);
    char *a = malloc(N * (DTOA_LEN + 1) + DTOA_MAX), *b = malloc(N * (DTOA_LEN + 1) + DTOA_MAX);
    cr_assert(v && a && b);
    for (int i = 0; i < N; i++)
        v[i] = sin(i * 0.37) * pow(10.0, (i % 40) - 20);
    size_t na = dtoa_join(v, N, a), nb = dtoa_scalar_join(v, N, b);
    cr_assert(na == nb && memcmp(a, b, na) == 0, "dtoa_join differs from the portable path");
    free(v);
    free(a);
    free(b);
}
