/* dynbuf.c — a growable byte buffer with a named maximum (dynbuf.h). */
#include "dynbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dynbuf_init(dynbuf *b, size_t first, size_t max)
{
    memset(b, 0, sizeof *b);
    b->first = first;
    b->max = max;
}

/* Makes room for `need` bytes in all: doubling from b->first, at most b->max. */
static int dynbuf__reserve(dynbuf *b, size_t need)
{
    if (b->failed)
        return -1;
    if (need <= b->cap)
        return 0;
    if (need > b->max) {
        b->failed = 1;
        return -1;
    }
    size_t ncap = b->cap ? b->cap : b->first;
    while (ncap < need)
        ncap *= 2;
    if (ncap > b->max)
        ncap = b->max;
    char *s = realloc(b->s, ncap);
    if (!s) {
        b->failed = 1;
        return -1;
    }
    b->s = s;
    b->cap = ncap;
    return 0;
}

int dynbuf_add(dynbuf *b, const void *p, size_t n)
{
    if (dynbuf__reserve(b, b->len + n) != 0)
        return -1;
    memcpy(b->s + b->len, p, n);
    b->len += n;
    return 0;
}

int dynbuf_printf(dynbuf *b, const char *fmt, ...)
{
    for (;;) {
        if (b->failed)
            return -1;
        size_t room = b->cap - b->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return -1;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return 0;
        }
        if (dynbuf__reserve(b, b->len + (size_t)n + 1) != 0)
            return -1;
    }
}

void dynbuf_free(dynbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}
