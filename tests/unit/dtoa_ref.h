/* dtoa_ref.h — the previous dtoa.c (commit ada11bf, table computed at first use with
 * multi-word integers), kept verbatim apart from names (ref_ prefix, all static) as the
 * reference the tests compare engine/dtoa.c with byte for byte, and whose table code
 * checks the generated engine/dtoa_table.h. Included by test_dtoa.c only.
 */
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
static int ref_flog10pow2(int e) { return (int)((int64_t)e * 661971961083LL >> 41); }
static int ref_flog10threequarterspow2(int e)
{
    return (int)(((int64_t)e * 661971961083LL - 274743187321LL) >> 41);
}
static int ref_flog2pow10(int e) { return (int)((int64_t)e * 913124641741LL >> 38); }

/* ---- the table g(k) = floor(10^-k 2^-r) + 1, r = ref_flog2pow10(-k) - 125 ------------ */

static u128 ref_dtoa_g[DTOA_K_MAX - DTOA_K_MIN + 1];
static pthread_once_t ref_dtoa_once = PTHREAD_ONCE_INIT;

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

static void ref_dtoa__init(void)
{
    /* k <= 0: 10^-k is an integer */
    big p;
    memset(&p, 0, sizeof p);
    p.w[0] = 1;
    for (int e = 0; e <= -DTOA_K_MIN; e++) {
        int fl = ref_flog2pow10(e);
        ref_dtoa_g[-e - DTOA_K_MIN] = big_scaled(&p, 125 - fl) + 1;
        big_mul10(&p);
    }
    /* k > 0: floor(2^(125 - fl) / 10^k) = floor(floor(2^N / 10^k) / 2^(N - 125 + fl)) */
    const int N = 1120;
    memset(&p, 0, sizeof p);
    p.w[N / 32] = 1u << (N % 32);
    for (int k = 1; k <= DTOA_K_MAX; k++) {
        big_div10(&p);
        int fl = ref_flog2pow10(-k);
        ref_dtoa_g[k - DTOA_K_MIN] = big_scaled(&p, -(N - 125 + fl)) + 1;
    }
}

/* ---- the algorithm ---------------------------------------------------------------- */

/* Round to odd of g cp / 2^127: floor, with the last bit set when not exact, where
 * "exact" ignores the product's bits below 2^-63 (with g = g1 2^63 + g0, the low half
 * of g0 cp and the last bit of g1 cp). This is the paper's ref_rop: it is what makes the
 * over-approximation g = floor + 1 harmless when 10^-k 2^-r is an integer (k <= 0
 * small), where the exact product would always look inexact. */
static uint64_t ref_rop(u128 g, uint64_t cp)
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
static void ref_to_decimal(int q, uint64_t c, uint64_t *f, int *e)
{
    uint64_t out = c & 1, cb = c << 2, cbr = cb + 2, cbl;
    int k;
    if (c != DTOA_C_MIN || q == DTOA_Q_MIN) {
        cbl = cb - 2;
        k = ref_flog10pow2(q);
    } else {
        cbl = cb - 1;
        k = ref_flog10threequarterspow2(q);
    }
    int h = q + ref_flog2pow10(-k) + 2;
    u128 g = ref_dtoa_g[k - DTOA_K_MIN];
    uint64_t vb = ref_rop(g, cb << h), vbl = ref_rop(g, cbl << h), vbr = ref_rop(g, cbr << h);
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

static int ref_dtoa_decimal(double v, unsigned long long *digits, int *exp10, int *neg)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    *neg = (int)(bits >> 63);
    int bq = (int)(bits >> 52) & 0x7ff;
    uint64_t t = bits & (DTOA_C_MIN - 1);
    if (bq == 0x7ff)
        return -1;
    pthread_once(&ref_dtoa_once, ref_dtoa__init);
    uint64_t f;
    int e;
    if (bq == 0 && t == 0) {
        *digits = 0;
        *exp10 = 0;
        return 0;
    }
    if (bq != 0)
        ref_to_decimal(bq - 1075, DTOA_C_MIN | t, &f, &e);
    else
        ref_to_decimal(DTOA_Q_MIN, t, &f, &e);
    while (f % 10 == 0) {
        f /= 10;
        e++;
    }
    *digits = f;
    *exp10 = e;
    return 0;
}

/* "00".."99" */
static const char ref_dtoa_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Writes the 8 digits of x < 10^8 at p, 32-bit arithmetic. */
static void ref_dtoa__digits8(char *p, uint32_t x)
{
    uint32_t hi = x / 10000, lo = x % 10000;
    memcpy(p, ref_dtoa_pairs + 2 * (hi / 100), 2);
    memcpy(p + 2, ref_dtoa_pairs + 2 * (hi % 100), 2);
    memcpy(p + 4, ref_dtoa_pairs + 2 * (lo / 100), 2);
    memcpy(p + 6, ref_dtoa_pairs + 2 * (lo % 100), 2);
}

/* Writes the n decimal digits of f (10^(n-1) <= f < 10^n) at p[0..n), from the right:
 * 8 at a time in 32-bit pieces, what is left (at most 4: f < 10^20) pairwise. */
static void ref_dtoa__digits(char *p, uint64_t f, int n)
{
    char *q = p + n;
    int left = n;
    while (left > 8) {
        q -= 8;
        ref_dtoa__digits8(q, (uint32_t)(f % 100000000));
        f /= 100000000;
        left -= 8;
    }
    uint32_t x = (uint32_t)f;
    while (x >= 100) {
        q -= 2;
        memcpy(q, ref_dtoa_pairs + 2 * (x % 100), 2);
        x /= 100;
    }
    if (x >= 10) {
        q -= 2;
        memcpy(q, ref_dtoa_pairs + 2 * x, 2);
    } else {
        *--q = (char)('0' + x);
    }
}

/* The number of decimal digits of f > 0. */
static int ref_dtoa__count(uint64_t f)
{
    static const uint64_t pow10[20] = {1ULL,
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
    int bits = 64 - __builtin_clzll(f); /* f in [2^(bits-1), 2^bits) */
    int t = (bits * 1233) >> 12;        /* floor(bits log10 2): digits are t or t + 1 */
    return t + (f >= pow10[t]);
}

static int ref_dtoa_shortest(double v, char *buf)
{
    unsigned long long f;
    int e, neg;
    if (ref_dtoa_decimal(v, &f, &e, &neg) < 0) {
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
    int n = ref_dtoa__count(f);
    /* the value is 0.D1..Dn x 10^E */
    int E = e + n, x = E - 1;
    if (x >= -5 && x < 17) {
        if (E <= 0) { /* 0.000ddd */
            *p++ = '0';
            *p++ = '.';
            memset(p, '0', (size_t)-E);
            p += -E;
            ref_dtoa__digits(p, f, n);
            p += n;
        } else if (E >= n) { /* ddd000.0 */
            ref_dtoa__digits(p, f, n);
            p += n;
            memset(p, '0', (size_t)(E - n));
            p += E - n;
            *p++ = '.';
            *p++ = '0';
        } else { /* dd.ddd: the digits, then the fraction moved right by one */
            ref_dtoa__digits(p, f, n);
            for (int i = n; i > E; i--)
                p[i] = p[i - 1];
            p[E] = '.';
            p += n + 1;
        }
    } else { /* d.ddde-x */
        ref_dtoa__digits(p + 1, f, n);
        p[0] = p[1];
        if (n > 1) {
            p[1] = '.';
            p += n + 1;
        } else {
            p += 1;
        }
        *p++ = 'e';
        if (x < 0) {
            *p++ = '-';
            x = -x;
        }
        if (x >= 100) {
            *p++ = (char)('0' + x / 100);
            x %= 100;
            memcpy(p, ref_dtoa_pairs + 2 * x, 2);
            p += 2;
        } else if (x >= 10) {
            memcpy(p, ref_dtoa_pairs + 2 * x, 2);
            p += 2;
        } else {
            *p++ = (char)('0' + x);
        }
    }
    *p = 0;
    return (int)(p - buf);
}
