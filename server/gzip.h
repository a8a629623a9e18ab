/* gzip.h — the gzip content coding (RFC 9110 §8.4.1.3) through zlib.
 *
 * Owns three ways of producing gzip: a whole buffer at once (gzip_buffer: a batch's
 * status document), a result blob's body deflated once and framed per answer
 * (gzip_deflate_rest + gzip_frame: the compressed form kept with a cached result, sent
 * with either "cached" prefix without deflating again), and a stream flushed at every
 * line end (gzip_stream: NDJSON, so each line can be decoded as soon as it arrives).
 */
#ifndef HAMEL_SERVER_GZIP_H
#define HAMEL_SERVER_GZIP_H

#include <stddef.h>
#include <zlib.h>

#include "blob.h"

#define GZIP_LEVEL 6        /* a result's form, deflated once and sent many times */
#define GZIP_LEVEL_ONCE 1   /* a body deflated for one answer, or a stream */
#define GZIP_MIN_BYTES 1024 /* smaller bodies are sent as they are */
#define GZIP_PREFIX_MAX 64  /* longest prefix gzip_frame puts before a deflated rest */
#define GZIP_HEAD_MAX (10 + 5 + GZIP_PREFIX_MAX)

/* The gzip member of `len` bytes of `data` (borrowed) at `level`: a malloc'd buffer the
 * caller frees, its length in *out_len; NULL when out of memory. */
unsigned char *gzip_buffer(const char *data, size_t len, int level, size_t *out_len);

/* The bytes of b after its first (b->data[1..len), borrowed) as a raw deflate stream
 * that ends in a final block: a new blob (caller releases) whose `aux` is the CRC-32 of
 * those bytes. NULL when b is empty or out of memory. */
blob *gzip_deflate_rest(const blob *b);

/* The head and tail of a gzip member whose data is `prefix` (plen <= GZIP_PREFIX_MAX
 * bytes, borrowed) then the rest_len bytes that `rest` (gzip_deflate_rest's) deflates:
 * sending head, rest->data and tail in that order is the member. */
typedef struct gzip_frame {
    unsigned char head[GZIP_HEAD_MAX];
    size_t head_len;
    unsigned char tail[8];
} gzip_frame;

/* Fills *f for prefix + the rest deflated in `rest` (rest_len bytes before deflating). */
void gzip_frame_fill(gzip_frame *f, const char *prefix, size_t plen, const blob *rest, size_t rest_len);

/* A gzip member produced a piece at a time. Its output collects in out[pos..len) until
 * taken (gzip_stream_take). */
typedef struct gzip_stream {
    z_stream z;
    int ready; /* deflateInit2 succeeded */
    unsigned char *out;
    size_t len, pos, cap;
} gzip_stream;

/* Starts a member at `level`. Returns 0, or -1 when out of memory. */
int gzip_stream_init(gzip_stream *g, int level);

/* Deflates n bytes of p (borrowed), flushing (Z_SYNC_FLUSH) after every '\n' so that
 * each whole line can be decoded from what has been taken so far. Returns 0 or -1. */
int gzip_stream_add(gzip_stream *g, const char *p, size_t n);

/* Ends the member (the final block and the trailer). Returns 0 or -1. */
int gzip_stream_finish(gzip_stream *g);

/* Moves up to max bytes of output into buf; returns how many. */
size_t gzip_stream_take(gzip_stream *g, char *buf, size_t max);

/* Frees what g holds. Accepts a g never started. */
void gzip_stream_free(gzip_stream *g);

#endif
