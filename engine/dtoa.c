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

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef unsigned __int128 u128;

#define DTOA_K_MIN (-324)
#define DTOA_K_MAX 292
#define DTOA_Q_MIN (-1074)
#define DTOA_C_MIN (1ULL << 52)

/* floor(e log10 2), floor(log10(3/4 2^e)) and floor(e log2 10), for |e| <= 5000
 * (Giulietti's fixed-point constants; checked against long double logs in tests). */
static int flog10pow2(int e) { return (int)((int64_t)e * 661971961083LL >> 41); }
static int flog10threequarterspow2(int e)
{
    return (int)(((int64_t)e * 661971961083LL - 274743187321LL) >> 41);
}
static int flog2pow10(int e) { return (int)((int64_t)e * 913124641741LL >> 38); }

/* ---- the table g(k) = floor(10^-k 2^-r) + 1, r = flog2pow10(-k) - 125 ------------ */

static u128 dtoa_g[DTOA_K_MAX - DTOA_K_MIN + 1];
static pthread_once_t dtoa_once = PTHREAD_ONCE_INIT;

#define BIG_WORDS 40 /* 1280 bits: 2^1120 and 10^324 (1077 bits) fit */
typedef struct big {
    uint32_t w[BIG_WORDS]; /* little-endian words */
} big;

static void big_mul10(big *b)
{
    uint64_t carry = 0;
    for (int i = 0; i < BIG_WORDS; i++) {
        uint64_t x = (uint64_t)b->w[i] * 10 + carry;
        b->w[i] = (uint32_t)x;
        carry = x >> 32;
    }
}

static void big_div10(big *b)
{
    uint64_t rem = 0;
    for (int i = BIG_WORDS - 1; i >= 0; i--) {
        uint64_t x = (rem << 32) | b->w[i];
        b->w[i] = (uint32_t)(x / 10);
        rem = x % 10;
    }
}

/* floor(b 2^shift), which the caller knows is below 2^128. */
static u128 big_scaled(const big *b, int shift)
{
    u128 r = 0;
    if (shift >= 0) {
        for (int i = 3; i >= 0; i--)
            r = (r << 32) | b->w[i];
        return r << shift;
    }
    int s = -shift, q = s / 32, bit = s % 32;
    for (int i = 3; i >= 0; i--)
        r = (r << 32) | (q + i < BIG_WORDS ? b->w[q + i] : 0);
    r >>= bit;
    if (bit) {
        uint32_t top = q + 4 < BIG_WORDS ? b->w[q + 4] : 0;
        r |= (u128)top << (128 - bit);
    }
    return r;
}

static void dtoa__init(void)
{
    /* k <= 0: 10^-k is an integer */
    big p;
    memset(&p, 0, sizeof p);
    p.w[0] = 1;
    for (int e = 0; e <= -DTOA_K_MIN; e++) {
        int fl = flog2pow10(e);
        dtoa_g[-e - DTOA_K_MIN] = big_scaled(&p, 125 - fl) + 1;
        big_mul10(&p);
    }
    /* k > 0: floor(2^(125 - fl) / 10^k) = floor(floor(2^N / 10^k) / 2^(N - 125 + fl)) */
    const int N = 1120;
    memset(&p, 0, sizeof p);
    p.w[N / 32] = 1u << (N % 32);
    for (int k = 1; k <= DTOA_K_MAX; k++) {
        big_div10(&p);
        int fl = flog2pow10(-k);
        dtoa_g[k - DTOA_K_MIN] = big_scaled(&p, -(N - 125 + fl)) + 1;
    }
}

/* ---- the algorithm ---------------------------------------------------------------- */

/* Round to odd of g cp / 2^127: floor, with the last bit set when not exact, where
 * "exact" ignores the product's bits below 2^-63 (with g = g1 2^63 + g0, the low half
 * of g0 cp and the last bit of g1 cp). This is the paper's rop: it is what makes the
 * over-approximation g = floor + 1 harmless when 10^-k 2^-r is an integer (k <= 0
 * small), where the exact product would always look inexact. */
static uint64_t rop(u128 g, uint64_t cp)
{
    const uint64_t mask63 = (1ULL << 63) - 1;
    uint64_t g1 = (uint64_t)(g >> 63), g0 = (uint64_t)g & mask63;
    uint64_t x1 = (uint64_t)(((u128)g0 * cp) >> 64);
    u128 y = (u128)g1 * cp;
    uint64_t y1 = (uint64_t)(y >> 64), y0 = (uint64_t)y;
    uint64_t z = (y0 >> 1) + x1;
    uint64_t vbp = y1 + (z >> 63);
    return vbp | (((z & mask63) + mask63) >> 63);
}

/* c 2^q (c > 0) as f 10^e, shortest. (The paper works on 10 c, dk = -1, for c < 3 at
 * the minimum exponent, to give Java's two digits "4.9E-324"; we want the shortest,
 * "5e-324", and the plain path gives it: tests check c = 1, 2 against a search.) */
static void to_decimal(int q, uint64_t c, uint64_t *f, int *e)
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
    u128 g = dtoa_g[k - DTOA_K_MIN];
    uint64_t vb = rop(g, cb << h), vbl = rop(g, cbl << h), vbr = rop(g, cbr << h);
    uint64_t s = vb >> 2;
    /* The paper asks s >= 100 (Java wants two digits at least); we want the shortest,
     * and for subnormals s can have two digits only: s >= 10 keeps sp10 > 0. */
    if (s >= 10) {
        uint64_t sp10 = s / 10 * 10, tp10 = sp10 + 10;
        int upin = vbl + out <= sp10 << 2, wpin = (tp10 << 2) + out <= vbr;
        if (upin != wpin) {
            *f = upin ? sp10 : tp10;
            *e = k;
            return;
        }
    }
    uint64_t t = s + 1;
    int uin = vbl + out <= s << 2, win = (t << 2) + out <= vbr;
    if (uin != win) {
        *f = uin ? s : t;
        *e = k;
        return;
    }
    int64_t cmp = (int64_t)(vb - ((s + t) << 1));
    *f = cmp < 0 || (cmp == 0 && (s & 1) == 0) ? s : t;
    *e = k;
}

int dtoa_decimal(double v, unsigned long long *digits, int *exp10, int *neg)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    *neg = (int)(bits >> 63);
    int bq = (int)(bits >> 52) & 0x7ff;
    uint64_t t = bits & (DTOA_C_MIN - 1);
    if (bq == 0x7ff)
        return -1;
    pthread_once(&dtoa_once, dtoa__init);
    uint64_t f;
    int e;
    if (bq == 0 && t == 0) {
        *digits = 0;
        *exp10 = 0;
        return 0;
    }
    if (bq != 0)
        to_decimal(bq - 1075, DTOA_C_MIN | t, &f, &e);
    else
        to_decimal(DTOA_Q_MIN, t, &f, &e);
    while (f % 10 == 0) {
        f /= 10;
        e++;
    }
    *digits = f;
    *exp10 = e;
    return 0;
}

int dtoa_shortest(double v, char *buf)
{
    unsigned long long f;
    int e, neg;
    if (dtoa_decimal(v, &f, &e, &neg) < 0) {
        memcpy(buf, "null", 5);
        return 4;
    }
    char *p = buf;
    if (neg)
        *p++ = '-';
    if (f == 0) {
        memcpy(p, "0.0", 4);
        return (int)(p - buf) + 3;
    }
    char d[20];
    int n = 0;
    for (unsigned long long x = f; x; x /= 10)
        d[n++] = (char)('0' + x % 10);
    /* d holds the digits reversed; the value is 0.D1..Dn x 10^E */
    int E = e + n, x = E - 1;
    if (x >= -5 && x < 17) {
        if (E <= 0) {
            *p++ = '0';
            *p++ = '.';
            for (int i = 0; i < -E; i++)
                *p++ = '0';
            for (int i = n - 1; i >= 0; i--)
                *p++ = d[i];
        } else if (E >= n) {
            for (int i = n - 1; i >= 0; i--)
                *p++ = d[i];
            for (int i = 0; i < E - n; i++)
                *p++ = '0';
            *p++ = '.';
            *p++ = '0';
        } else {
            for (int i = n - 1; i >= 0; i--) {
                *p++ = d[i];
                if (i == n - E)
                    *p++ = '.';
            }
        }
    } else {
        *p++ = d[n - 1];
        if (n > 1) {
            *p++ = '.';
            for (int i = n - 2; i >= 0; i--)
                *p++ = d[i];
        }
        *p++ = 'e';
        if (x < 0) {
            *p++ = '-';
            x = -x;
        }
        char xe[6];
        int m = 0;
        do {
            xe[m++] = (char)('0' + x % 10);
            x /= 10;
        } while (x);
        while (m)
            *p++ = xe[--m];
    }
    *p = 0;
    return (int)(p - buf);
}
