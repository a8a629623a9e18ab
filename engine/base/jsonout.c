/* jsonout.c — the JSON writer for result documents (see jsonout.h). */
#include "jsonout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtoa.h"

int jsonout_init(jsonout *o, size_t reserve)
{
    o->len = 0;
    o->err = 0;
    o->indent = 0;
    o->depth = 0;
    o->hook = NULL;
    o->hook_ctx = NULL;
    o->cap = reserve ? reserve : 4096;
    o->p = malloc(o->cap);
    if (!o->p) {
        o->cap = 0;
        o->err = 1;
        return -1;
    }
    return 0;
}

/* Makes room for `more` bytes (and a NUL); returns 0 or -1 (the writer fails). */
static int jsonout__grow(jsonout *o, size_t more)
{
    if (o->err)
        return -1;
    size_t need = o->len + more + 1;
    if (need <= o->cap)
        return 0;
    if (need > JSONOUT_MAX) {
        o->err = 1;
        return -1;
    }
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < need)
        cap *= 2;
    if (cap > JSONOUT_MAX)
        cap = JSONOUT_MAX;
    char *p = realloc(o->p, cap);
    if (!p) {
        o->err = 1;
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

void jsonout_raw(jsonout *o, const char *s, size_t len)
{
    if (jsonout__grow(o, len) < 0)
        return;
    memcpy(o->p + o->len, s, len);
    o->len += len;
}

void jsonout_double(jsonout *o, double v)
{
    if (jsonout__grow(o, DTOA_MAX) < 0)
        return;
    o->len += (size_t)dtoa_shortest(v, o->p + o->len);
}

void jsonout_doubles(jsonout *o, const double *v, size_t count)
{
    /* in blocks: one room check per block, the numbers written by dtoa_join */
    enum { BLOCK = 256 };
    if (jsonout__grow(o, 2) < 0)
        return;
    o->p[o->len++] = '[';
    for (size_t i = 0; i < count; i += BLOCK) {
        size_t m = count - i < BLOCK ? count - i : BLOCK;
        if (jsonout__grow(o, m * (DTOA_LEN + 1) + DTOA_MAX) < 0)
            return;
        if (i)
            o->p[o->len++] = ',';
        o->len += dtoa_join(v + i, m, o->p + o->len);
    }
    o->p[o->len++] = ']';
}

static void jsonout__integer(jsonout *o, json_int_t v)
{
    if (jsonout__grow(o, 24) < 0)
        return;
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? -(unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    char *p = o->p + o->len;
    if (v < 0)
        *p++ = '-';
    while (n)
        *p++ = tmp[--n];
    o->len = (size_t)(p - o->p);
}

void jsonout_string(jsonout *o, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    /* worst case: every byte becomes \u00XX */
    if (len > JSONOUT_MAX / 6 || jsonout__grow(o, 6 * len + 2) < 0) {
        o->err = 1;
        return;
    }
    char *p = o->p + o->len;
    *p++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *p++ = (char)c;
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        default:
            *p++ = 'u';
            *p++ = '0';
            *p++ = '0';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
            break;
        }
    }
    *p++ = '"';
    o->len = (size_t)(p - o->p);
}

/* A newline and the current level's indentation (indented mode only). */
static void jsonout__newline(jsonout *o)
{
    if (!o->indent)
        return;
    size_t n = (size_t)o->indent * (size_t)o->depth;
    if (jsonout__grow(o, n + 1) < 0)
        return;
    o->p[o->len++] = '\n';
    memset(o->p + o->len, ' ', n);
    o->len += n;
}

void jsonout_value(jsonout *o, const json_t *j)
{
    if (o->err)
        return;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jsonout_raw(o, "{", 1);
        o->depth++;
        int first = 1;
        const char *key;
        size_t klen;
        json_t *v;
        json_object_keylen_foreach((json_t *)j, key, klen, v)
        {
            if (!first)
                jsonout_raw(o, ",", 1);
            first = 0;
            jsonout__newline(o);
            jsonout_string(o, key, klen);
            jsonout_raw(o, ": ", o->indent ? 2 : 1);
            jsonout_value(o, v);
        }
        o->depth--;
        if (!first)
            jsonout__newline(o);
        jsonout_raw(o, "}", 1);
        break;
    }
    case JSON_ARRAY: {
        jsonout_raw(o, "[", 1);
        o->depth++;
        size_t n = json_array_size(j);
        for (size_t i = 0; i < n && !o->err; i++) {
            if (i)
                jsonout_raw(o, ",", 1);
            jsonout__newline(o);
            jsonout_value(o, json_array_get(j, i));
        }
        o->depth--;
        if (n)
            jsonout__newline(o);
        jsonout_raw(o, "]", 1);
        break;
    }
    case JSON_STRING: {
        const char *s = json_string_value(j);
        size_t len = json_string_length(j);
        if (!(o->hook && len && s[0] == 1 && o->hook(o, s, len, o->hook_ctx)))
            jsonout_string(o, s, len);
        break;
    }
    case JSON_INTEGER: jsonout__integer(o, json_integer_value(j)); break;
    case JSON_REAL: jsonout_double(o, json_real_value(j)); break;
    case JSON_TRUE: jsonout_raw(o, "true", 4); break;
    case JSON_FALSE: jsonout_raw(o, "false", 5); break;
    case JSON_NULL: jsonout_raw(o, "null", 4); break;
    default: o->err = 1; break;
    }
}

char *jsonout_finish(jsonout *o, size_t *len)
{
    if (!o->err && jsonout__grow(o, 0) == 0) {
        char *p = o->p;
        p[o->len] = 0;
        /* the room reserved from an estimate is given back: the text may be kept for
         * long (result caches count its length, so a 4.5 KB result in an 8 KB block made
         * the server's RSS 1.8x what the caches held); shrinking in place does not copy */
        if (o->cap - o->len > 64) {
            /* a short text is copied: realloc keeps a mapped block at least a page */
            char *q = o->len < 4096 ? malloc(o->len + 1) : realloc(p, o->len + 1);
            if (q && o->len < 4096) {
                memcpy(q, p, o->len + 1);
                free(p);
            }
            if (q)
                p = q;
        }
        if (len)
            *len = o->len;
        o->p = NULL;
        o->len = o->cap = 0;
        return p;
    }
    jsonout_free(o);
    return NULL;
}

void jsonout_free(jsonout *o)
{
    free(o->p);
    o->p = NULL;
    o->len = o->cap = 0;
}

char *jsonout_dumps(const json_t *j, size_t *len)
{
    if (!j)
        return NULL;
    jsonout o;
    if (jsonout_init(&o, 0) < 0)
        return NULL;
    jsonout_value(&o, j);
    return jsonout_finish(&o, len);
}

char *jsonout_dumps_indent(const json_t *j, int indent, size_t *len)
{
    if (!j)
        return NULL;
    jsonout o;
    if (jsonout_init(&o, 0) < 0)
        return NULL;
    o.indent = indent;
    jsonout_value(&o, j);
    return jsonout_finish(&o, len);
}
