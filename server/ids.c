/* ids.c — random hex ids, the hex form of bytes and the hash of keys (ids.h). */
#include "ids.h"

#include <errno.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>

#define IDS_MAX_BYTES 32 /* ids_random's longest id: 64 hex digits */

void ids_hex(const unsigned char *d, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * n] = '\0';
}

void ids_random(char *out, size_t len)
{
    unsigned char r[IDS_MAX_BYTES];
    size_t want = len / 2 < sizeof r ? len / 2 : sizeof r;
    size_t got = 0;
    while (got < want) {
        ssize_t n = getrandom(r + got, want - got, 0);
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0)
            got += (size_t)n;
    }
    if (got < want) { /* no entropy source: fall back to time and address bits */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t x = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ (uint64_t)(uintptr_t)out;
        for (size_t i = 0; i < want; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            r[i] = (unsigned char)x;
        }
    }
    ids_hex(r, want, out);
}

uint64_t ids_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}
