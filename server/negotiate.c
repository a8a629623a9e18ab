/* negotiate.c — q-values of Accept and Accept-Encoding, If-None-Match (RFC 9110). */
#include "negotiate.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One element of a comma list: the token before any ';' and the element's q. */
typedef struct negotiate__elem {
    const char *tok;
    size_t len;
    double q;
} negotiate__elem;

static const char *negotiate__ows(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* Reads the list element at *s (a media range or coding with parameters) into *e and
 * moves *s past it and its comma. Returns 0 at the end of the list. Quoted parameter
 * values may hold commas and semicolons. */
static int negotiate__next(const char **s, negotiate__elem *e)
{
    const char *p = *s;
    while (*p == ',' || *p == ' ' || *p == '\t')
        p++;
    if (!*p)
        return 0;
    e->tok = p;
    while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
        p++;
    e->len = (size_t)(p - e->tok);
    e->q = 1;
    for (;;) { /* parameters, up to the next comma outside quotes */
        p = negotiate__ows(p);
        if (*p != ';')
            break;
        p = negotiate__ows(p + 1);
        const char *name = p;
        while (*p && *p != '=' && *p != ',' && *p != ';')
            p++;
        int is_q = p - name == 1 && (*name == 'q' || *name == 'Q');
        if (*p != '=')
            continue;
        p++;
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (*p == '"')
                p++;
            continue;
        }
        const char *v = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        if (is_q) {
            char *end = NULL;
            double q = strtod(v, &end);
            e->q = end == p && q >= 0 ? (q > 1 ? 1 : q) : 0; /* a malformed weight accepts nothing */
        }
    }
    while (*p && *p != ',') /* whatever is left of a malformed element */
        p++;
    *s = p;
    return 1;
}

double negotiate_accept(const char *accept, const char *type, negotiate_match *how)
{
    if (how)
        *how = NEGOTIATE_NONE;
    if (!accept)
        return 1;
    const char *slash = strchr(type, '/');
    size_t major = slash ? (size_t)(slash - type) : strlen(type);
    negotiate_match best = NEGOTIATE_NONE;
    double q = 0;
    negotiate__elem e;
    const char *s = accept;
    while (negotiate__next(&s, &e)) {
        negotiate_match m = NEGOTIATE_NONE;
        if (e.len == strlen(type) && !strncasecmp(e.tok, type, e.len))
            m = NEGOTIATE_EXACT;
        else if (e.len == major + 2 && !strncasecmp(e.tok, type, major) && !strncmp(e.tok + major, "/*", 2))
            m = NEGOTIATE_SUBTYPES;
        else if (e.len == 3 && !strncmp(e.tok, "*/*", 3))
            m = NEGOTIATE_ANY;
        if (m > best) {
            best = m;
            q = e.q;
        }
    }
    if (how)
        *how = best;
    return q;
}

double negotiate_coding(const char *ae, const char *coding)
{
    if (!ae)
        return 0;
    double own = -1, any = -1;
    int gzip = !strcasecmp(coding, "gzip");
    negotiate__elem e;
    const char *s = ae;
    while (negotiate__next(&s, &e)) {
        int named = (e.len == strlen(coding) && !strncasecmp(e.tok, coding, e.len)) ||
                    (gzip && e.len == 6 && !strncasecmp(e.tok, "x-gzip", 6));
        if (named && own < 0)
            own = e.q;
        else if (e.len == 1 && e.tok[0] == '*' && any < 0)
            any = e.q;
    }
    return own >= 0 ? own : any >= 0 ? any : 0;
}

/* The opaque part of an entity tag at s (after any W/): between its quotes. */
static const char *negotiate__opaque(const char *s, size_t *len)
{
    if (!strncmp(s, "W/", 2))
        s += 2;
    if (*s != '"')
        return NULL;
    const char *end = strchr(s + 1, '"');
    if (!end)
        return NULL;
    *len = (size_t)(end - s - 1);
    return s + 1;
}

int negotiate_none_match(const char *inm, const char *etag)
{
    size_t want_len = 0;
    const char *want = etag ? negotiate__opaque(etag, &want_len) : NULL;
    if (!inm || !want)
        return 0;
    const char *p = inm;
    for (;;) {
        while (*p == ',' || *p == ' ' || *p == '\t')
            p++;
        if (!*p)
            return 0;
        if (*p == '*')
            return 1;
        size_t len = 0;
        const char *got = negotiate__opaque(p, &len);
        if (!got)
            return 0; /* malformed: nothing after it is read */
        if (len == want_len && !memcmp(got, want, len))
            return 1;
        p = got + len + 1;
    }
}
