/* dtoa.c — shortest round-trip double formatting: Schubfach (see dtoa.h).
 *
 * Notation of the paper: a finite positive double is v = c 2^q with integer c < 2^53.
 * Its rounding interval is R = [v - ulp_lo/2, v + ulp_hi/2] (ends included iff c is
 * even: round half to even); ulp_lo = ulp_hi except when c = 2^52 (and q is not the
 * minimum), where the spacing below halves. With k chosen so that 10^-k v has about
 * 17 digits, the scaled ends and the value, multiplied by 4 to keep two fraction bits,
 *     vbl ~ 4 (v - ulp_lo/2) 10^-k,  vb ~ 4 v 10^-k,  vbr ~ 4 (v + ulp_hi/2) 10^-k,
 * are computed with one 64 x 126-bit product each against g ~ 10^-k 2^-r (an
 * over-approximation, floor + 1) and rounded to odd (the last bit says "inexact"),
 * which the paper shows is enough to decide membership of R exactly. Then:
 *   - if exactly one of the multiples of ten next to s = floor(vb/4) lies in R, it has
 *     one digit fewer than any other candidate: take it;
 *   - else the one of s, s+1 that lies in R, or the one closer to v (ties to even).
 */
#include "dtoa.h"

#include <stdint.h>
#include <string.h>

/* The digits with SSE2 where there is SSE2 (every x86-64), else in 64-bit words;
 * -DDTOA_SSE2=0 forces the second (the tests build both and compare them). */
#ifndef DTOA_SSE2
#if defined(__SSE2__)
#define DTOA_SSE2 1
#else
#define DTOA_SSE2 0
#endif
#endif
#if DTOA_SSE2
#include <emmintrin.h>
#endif

typedef unsigned __int128 u128;

#define DTOA_K_MIN (-324)
#define DTOA_K_MAX 292
#define DTOA_Q_MIN (-1074)
#define DTOA_C_MIN (1ULL << 52)

/* g(k) for k = DTOA_K_MIN..DTOA_K_MAX, split as the products below use it: computed
 * offline by scripts/gen-dtoa-table.py (exact integers), checked by the tests
 * against a multi-word computation in C. */
#include "dtoa_table.h"

/* floor(e log10 2), floor(log10(3/4 2^e)) and floor(e log2 10), for |e| <= 5000
 * (Giulietti's fixed-point constants; checked against long double logs in tests). */
static inline int flog10pow2(int e) { return (int)((int64_t)e * 661971961083LL >> 41); }
static inline int flog10threequarterspow2(int e)
{
    return (int)(((int64_t)e * 661971961083LL - 274743187321LL) >> 41);
}
static inline int flog2pow10(int e) { return (int)((int64_t)e * 913124641741LL >> 38); }

/* ---- the algorithm ---------------------------------------------------------------- */

/* Round to odd of g cp / 2^127 (g = g1 2^63 + g0): floor, with the last bit set when
 * not exact, where "exact" ignores the product's bits below 2^-63 (the low half of
 * g0 cp and the last bit of g1 cp). This is the paper's rop: it is what makes the
 * over-approximation g = floor + 1 harmless when 10^-k 2^-r is an integer (k <= 0
 * small), where the exact product would always look inexact. */
static inline uint64_t rop(uint64_t g1, uint64_t g0, uint64_t cp)
{
    const uint64_t mask63 = (1ULL << 63) - 1;
    uint64_t x1 = (uint64_t)(((u128)g0 * cp) >> 64);
    u128 y = (u128)g1 * cp;
    uint64_t y1 = (uint64_t)(y >> 64), y0 = (uint64_t)y;
    uint64_t z = (y0 >> 1) + x1;
    uint64_t vbp = y1 + (z >> 63);
    return vbp | (((z & mask63) + mask63) >> 63);
}

/* c 2^q (c > 0) as f 10^e, shortest, and closest among the shortest (ties to even);
 * f may have trailing zeros (the callers strip them) and is below 10^17. (The paper
 * works on 10 c, dk = -1, for c < 3 at the minimum exponent, to give Java's two digits
 * "4.9E-324"; we want the shortest, "5e-324", and the plain path gives it: tests check
 * c = 1, 2 against a search.) The choices are made without branches: on real data
 * (trajectories) which candidate wins is unpredictable. */
static inline __attribute__((always_inline)) uint64_t to_decimal(int q, uint64_t c, int *e)
{
    uint64_t out = c & 1, cb = c << 2, cbr = cb + 2, cbl;
    int k;
    if (c != DTOA_C_MIN || q == DTOA_Q_MIN) {
        cbl = cb - 2;
        k = flog10pow2(q);
    } else {
        cbl = cb - 1;
        k = flog10threequarterspow2(q);
    }
    int h = q + flog2pow10(-k) + 2;
    const uint64_t *g = dtoa_g[k - DTOA_K_MIN];
    uint64_t vb = rop(g[0], g[1], cb << h), vbl = rop(g[0], g[1], cbl << h), vbr = rop(g[0], g[1], cbr << h);
    uint64_t s = vb >> 2, t = s + 1;
    /* The paper asks s >= 100 (Java wants two digits at least); we want the shortest,
     * and for subnormals s can have two digits only: s >= 10 keeps sp10 > 0.
     * One of the multiples of ten next to s alone in R: it is the shortest. */
    uint64_t sp10 = s / 10 * 10, tp10 = sp10 + 10;
    int upin = vbl + out <= sp10 << 2, wpin = (tp10 << 2) + out <= vbr;
    int short_ok = (s >= 10) & (upin != wpin);
    /* else the one of s, t in R, or (both in) the one closer to v, ties to even */
    int uin = vbl + out <= s << 2, win = (t << 2) + out <= vbr;
    int64_t cmp = (int64_t)(vb - ((s + t) << 1));
    int take_s = uin != win ? uin : (cmp < 0) | ((cmp == 0) & ((s & 1) == 0));
    uint64_t f = take_s ? s : t;
    *e = k;
    return short_ok ? (upin ? sp10 : tp10) : f;
}

/* The decimal form of the finite nonzero |v| with bits `bits`: f 10^e, f < 10^17
 * (possibly with trailing zeros). */
static inline __attribute__((always_inline)) uint64_t dtoa__decimal(uint64_t bits, int *e)
{
    int bq = (int)(bits >> 52) & 0x7ff;
    uint64_t t = bits & (DTOA_C_MIN - 1);
    int q = bq ? bq - 1075 : DTOA_Q_MIN;
    return to_decimal(q, bq ? DTOA_C_MIN | t : t, e);
}

int dtoa_decimal(double v, unsigned long long *digits, int *exp10, int *neg)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    *neg = (int)(bits >> 63);
    if ((bits >> 52 & 0x7ff) == 0x7ff)
        return -1;
    if ((bits << 1) == 0) {
        *digits = 0;
        *exp10 = 0;
        return 0;
    }
    uint64_t f = dtoa__decimal(bits, exp10);
    while (f % 10 == 0) {
        f /= 10;
        (*exp10)++;
    }
    *digits = f;
    return 0;
}

/* ---- the text --------------------------------------------------------------------- */

#if DTOA_SSE2
/* The 16 digits of a, b < 10^8 (a's first) as ASCII, with SSE2 (the scheme of
 * Wojciech Mula's SSE2 itoa): divmod 10^4 by a multiply-shift in 64-bit lanes, then
 * the four digits of each 4-digit group at once by 16-bit multiply-highs by
 * 2^k / 10^j (exact below 10^4), less ten times the group's previous prefix. */
static inline __m128i dtoa__sixteen(uint32_t a, uint32_t b)
{
    const __m128i div10000 = _mm_set1_epi32((int)0xd1b71759), k10000 = _mm_set1_epi32(10000);
    const __m128i divpow = _mm_setr_epi16(8389, 5243, 13108, (short)32768, 8389, 5243, 13108, (short)32768);
    const __m128i shpow = _mm_setr_epi16(1 << 7, 1 << 11, 1 << 13, (short)(1 << 15), 1 << 7, 1 << 11, 1 << 13,
                                         (short)(1 << 15));
    const __m128i k10 = _mm_set1_epi16(10);
    __m128i x = _mm_set_epi64x(b, a);
    __m128i hi = _mm_srli_epi64(_mm_mul_epu32(x, div10000), 45); /* x / 10^4 */
    __m128i lo = _mm_sub_epi32(x, _mm_mul_epu32(hi, k10000));    /* x % 10^4 */
    /* 16-bit [4 hi, 4 lo, 0, 0] per 64-bit lane, then each value 4 times */
    __m128i v1 = _mm_slli_epi64(_mm_or_si128(hi, _mm_slli_epi64(lo, 16)), 2);
    __m128i va = _mm_unpacklo_epi16(v1, v1), vb = _mm_unpackhi_epi16(v1, v1);
    va = _mm_unpacklo_epi32(va, va);
    vb = _mm_unpacklo_epi32(vb, vb);
    /* the prefixes d1, d1d2, d1d2d3, d1d2d3d4 of each group */
    va = _mm_mulhi_epu16(_mm_mulhi_epu16(va, divpow), shpow);
    vb = _mm_mulhi_epu16(_mm_mulhi_epu16(vb, divpow), shpow);
    /* the digits: each prefix less ten times the one before */
    va = _mm_sub_epi16(va, _mm_slli_epi64(_mm_mullo_epi16(va, k10), 16));
    vb = _mm_sub_epi16(vb, _mm_slli_epi64(_mm_mullo_epi16(vb, k10), 16));
    return _mm_add_epi8(_mm_packus_epi16(va, vb), _mm_set1_epi8('0'));
}
#else
/* The 8 decimal digits of x < 10^8 as 8 ASCII bytes in memory order (little-endian
 * lanes): halves of 4 digits in 32-bit lanes, pairs in 16-bit lanes, digits in bytes,
 * each split by a multiply-shift division (exact for these ranges). */
static inline uint64_t dtoa__eight(uint32_t x)
{
    uint64_t hi = x / 10000, lo = x % 10000;
    uint64_t m = hi | lo << 32;
    uint64_t top = (m * 10486) >> 20 & (0x7FULL << 32 | 0x7FULL); /* /100 per lane */
    uint64_t pairs = ((m - 100 * top) << 16) + top;
    uint64_t tens = (pairs * 103) >> 10 & (0xFULL << 48 | 0xFULL << 32 | 0xFULL << 16 | 0xFULL);
    tens += (pairs - 10 * tens) << 8;
    return tens + 0x3030303030303030ULL;
}
#endif

static const uint64_t dtoa_pow10[20] = {1ULL,
                                        10ULL,
                                        100ULL,
                                        1000ULL,
                                        10000ULL,
                                        100000ULL,
                                        1000000ULL,
                                        10000000ULL,
                                        100000000ULL,
                                        1000000000ULL,
                                        10000000000ULL,
                                        100000000000ULL,
                                        1000000000000ULL,
                                        10000000000000ULL,
                                        100000000000000ULL,
                                        1000000000000000ULL,
                                        10000000000000000ULL,
                                        100000000000000000ULL,
                                        1000000000000000000ULL,
                                        10000000000000000000ULL};

/* "00".."99" */
static const char dtoa_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

#define DTOA_ZEROS 0x3030303030303030ULL /* "00000000" */

/* Writes the text of v at buf (without the NUL), using up to DTOA_MAX bytes of it as
 * scratch; returns the text's length (at most DTOA_LEN).
 *
 * The digits of f are laid out once, 17 wide with leading zeros, in a scratch row of
 * '0's: D = "00000000" f[17 digits] "000...". The fixed notation is then one shape for
 * all three cases, without branches: "0.000ddd" is "ddd" with 1 - E more leading zeros
 * (and E = 1), "ddd000.0" the digits with their trailing zeros up to E + 1 digits; each
 * is written as the first E digits, '.', the rest, by fixed-size copies that run past
 * the text's end (the next text overwrites them). */
static inline __attribute__((always_inline)) int dtoa__write(double v, char *buf)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    if ((bits >> 52 & 0x7ff) == 0x7ff) {
        memcpy(buf, "null", 4);
        return 4;
    }
    char *p = buf;
    *p = '-';
    p += bits >> 63;
    if ((bits << 1) == 0) {
        memcpy(p, "0.0", 3);
        return (int)(p - buf) + 3;
    }
    int e;
    uint64_t f = dtoa__decimal(bits, &e); /* < 10^17 */
    int bl = 64 - __builtin_clzll(f);     /* f in [2^(bl-1), 2^bl) */
    int t = (bl * 1233) >> 12;            /* floor(bl log10 2): the digits are t or t + 1 */
    int n0 = t + (f >= dtoa_pow10[t]);
    uint32_t hi = (uint32_t)(f / 100000000), lo = (uint32_t)(f - (uint64_t)hi * 100000000);
    uint32_t top = hi / 100000000, mid = hi - top * 100000000;
    uint64_t wmid, wlo, z = DTOA_ZEROS;
    char D[80];
    memcpy(D, &z, 8);
    D[8] = (char)('0' + top);
#if DTOA_SSE2
    __m128i dig = dtoa__sixteen(mid, lo);
    _mm_storeu_si128((__m128i *)(void *)(D + 9), dig);
    wmid = (uint64_t)_mm_cvtsi128_si64(dig);
    wlo = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(dig, dig));
#else
    wmid = dtoa__eight(mid);
    wlo = dtoa__eight(lo);
    memcpy(D + 9, &wmid, 8);
    memcpy(D + 17, &wlo, 8);
#endif
    memset(D + 25, '0', 55);
    /* trailing zeros: the last digit of a piece is its highest byte */
    uint64_t xlo = wlo ^ DTOA_ZEROS, xmid = wmid ^ DTOA_ZEROS;
    int nz = xlo ? __builtin_clzll(xlo) >> 3 : xmid ? 8 + (__builtin_clzll(xmid) >> 3) : 16;
    int n = n0 - nz;             /* significant digits */
    const char *d = D + 25 - n0; /* the first of them */
    int E = e + n0;              /* the value is 0.d1..dn x 10^E */
    if (E >= -4 && E <= 17) {
        int pad = E <= 0 ? 1 - E : 0;
        d -= pad;
        n += pad;
        E += pad;
        n = n > E ? n : E + 1;
        memcpy(p, d, 24);
        p[E] = '.';
        memcpy(p + E + 1, d + E, 24);
        return (int)(p - buf) + n + 1;
    }
    /* d.ddde-x */
    p[0] = d[0];
    p[1] = '.';
    memcpy(p + 2, d + 1, 16);
    p += n > 1 ? n + 1 : 1;
    *p++ = 'e';
    int x = E - 1;
    if (x < 0) {
        *p++ = '-';
        x = -x;
    }
    if (x >= 100) {
        *p++ = (char)('0' + x / 100);
        x %= 100;
        memcpy(p, dtoa_pairs + 2 * x, 2);
        p += 2;
    } else if (x >= 10) {
        memcpy(p, dtoa_pairs + 2 * x, 2);
        p += 2;
    } else {
        *p++ = (char)('0' + x);
    }
    return (int)(p - buf);
}

int dtoa_shortest(double v, char *buf)
{
    int n = dtoa__write(v, buf);
    buf[n] = 0;
    return n;
}

size_t dtoa_join(const double *v, size_t count, char *out)
{
    char *p = out;
    for (size_t i = 0; i < count; i++) {
        p += dtoa__write(v[i], p);
        *p++ = ',';
    }
    return count ? (size_t)(p - out) - 1 : 0;
}
