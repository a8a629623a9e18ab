/* gzip.c — gzip through zlib: whole buffers, a result's deflated rest framed per answer,
 * and line-flushed streams. */
#include "gzip.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GZIP_WINDOW_BITS 15
#define GZIP_MEM_LEVEL 8
#define GZIP_STREAM_FIRST 8192 /* first allocation of a stream's output */

/* The ten bytes of a gzip header: magic, deflate, no flags, no time, no extra flags,
 * OS unknown (RFC 1952 §2.3). */
static const unsigned char gzip__header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};

static void gzip__le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

unsigned char *gzip_buffer(const char *data, size_t len, int level, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, level, Z_DEFLATED, GZIP_WINDOW_BITS + 16, GZIP_MEM_LEVEL, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        return NULL;
    size_t cap = deflateBound(&z, (uLong)len) + 32;
    unsigned char *out = malloc(cap);
    if (!out) {
        deflateEnd(&z);
        return NULL;
    }
    z.next_in = (Bytef *)(uintptr_t)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

blob *gzip_deflate_rest(const blob *b)
{
    if (b->len < 1)
        return NULL;
    const unsigned char *rest = (const unsigned char *)b->data + 1;
    size_t n = b->len - 1;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, GZIP_LEVEL, Z_DEFLATED, -GZIP_WINDOW_BITS, GZIP_MEM_LEVEL, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        return NULL;
    size_t cap = deflateBound(&z, (uLong)n) + 16;
    char *out = malloc(cap + 1);
    if (!out) {
        deflateEnd(&z);
        return NULL;
    }
    z.next_in = (Bytef *)(uintptr_t)rest;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    size_t got = cap - z.avail_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    out[got] = '\0';
    char *shrunk = realloc(out, got + 1);
    if (shrunk)
        out = shrunk;
    blob *g = blob_take_len(out, got);
    if (g)
        g->aux = crc32(crc32(0L, Z_NULL, 0), rest, (uInt)n);
    return g;
}

void gzip_frame_fill(gzip_frame *f, const char *prefix, size_t plen, const blob *rest, size_t rest_len)
{
    if (plen > GZIP_PREFIX_MAX)
        plen = GZIP_PREFIX_MAX;
    unsigned char *p = f->head;
    memcpy(p, gzip__header, sizeof gzip__header);
    p += sizeof gzip__header;
    if (plen > 0) { /* a stored block, not final (RFC 1951 §3.2.4): the rest follows it */
        *p++ = 0x00;
        *p++ = (unsigned char)(plen & 0xff);
        *p++ = (unsigned char)(plen >> 8);
        *p++ = (unsigned char)(~plen & 0xff);
        *p++ = (unsigned char)((~plen >> 8) & 0xff);
        memcpy(p, prefix, plen);
        p += plen;
    }
    f->head_len = (size_t)(p - f->head);
    uLong crc = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)prefix, (uInt)plen);
    crc = crc32_combine(crc, (uLong)rest->aux, (z_off_t)rest_len);
    gzip__le32(f->tail, (uint32_t)crc);
    gzip__le32(f->tail + 4, (uint32_t)(plen + rest_len));
}

int gzip_stream_init(gzip_stream *g, int level)
{
    memset(g, 0, sizeof *g);
    if (deflateInit2(&g->z, level, Z_DEFLATED, GZIP_WINDOW_BITS + 16, GZIP_MEM_LEVEL, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        return -1;
    g->ready = 1;
    return 0;
}

/* Runs deflate with `flush` until it has taken all its input (and, for a flush, written
 * everything out), growing the output buffer as needed. */
static int gzip__run(gzip_stream *g, int flush)
{
    for (;;) {
        if (g->pos == g->len)
            g->pos = g->len = 0; /* all taken: start over at the front */
        if (g->cap - g->len < 64) {
            size_t cap = g->cap ? 2 * g->cap : GZIP_STREAM_FIRST;
            unsigned char *out = realloc(g->out, cap);
            if (!out)
                return -1;
            g->out = out;
            g->cap = cap;
        }
        g->z.next_out = g->out + g->len;
        g->z.avail_out = (uInt)(g->cap - g->len);
        int rc = deflate(&g->z, flush);
        g->len = g->cap - g->z.avail_out;
        if (rc == Z_STREAM_END)
            return 0;
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return -1;
        if (g->z.avail_in == 0 && g->z.avail_out > 0 && flush != Z_FINISH)
            return 0; /* with avail_out left over, a flush has written everything */
    }
}

int gzip_stream_add(gzip_stream *g, const char *p, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        size_t k = nl ? (size_t)(nl - p) + 1 : n;
        g->z.next_in = (Bytef *)(uintptr_t)p;
        g->z.avail_in = (uInt)k;
        if (gzip__run(g, nl ? Z_SYNC_FLUSH : Z_NO_FLUSH) != 0)
            return -1;
        p += k;
        n -= k;
    }
    return 0;
}

int gzip_stream_finish(gzip_stream *g)
{
    g->z.next_in = Z_NULL;
    g->z.avail_in = 0;
    return gzip__run(g, Z_FINISH);
}

size_t gzip_stream_take(gzip_stream *g, char *buf, size_t max)
{
    size_t k = g->len - g->pos;
    if (k > max)
        k = max;
    if (k == 0)
        return 0; /* g->out may still be NULL */
    memcpy(buf, g->out + g->pos, k);
    g->pos += k;
    return k;
}

void gzip_stream_free(gzip_stream *g)
{
    if (g->ready)
        deflateEnd(&g->z);
    free(g->out);
    memset(g, 0, sizeof *g);
}
