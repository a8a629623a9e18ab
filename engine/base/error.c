/* error.c — slug and title of each error code, the embedding program's classes and
 * statuses (hamel_error_use), and problem documents. */
#include "error.h"
#include <stdarg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const hamel_error_class infos[] = {
#define HAMEL_ERROR_INFO(name, slug, title) {HAMEL_E_##name, slug, title},
    HAMEL_ERROR_MAP(HAMEL_ERROR_INFO)
#undef HAMEL_ERROR_INFO
};

static const hamel_error_protocol *error_protocol; /* hamel_error_use; NULL: none */

void hamel_error_use(const hamel_error_protocol *protocol) { error_protocol = protocol; }

static const hamel_error_class *error_find(int code)
{
    for (size_t i = 0; i < sizeof infos / sizeof infos[0]; i++)
        if (infos[i].code == code)
            return &infos[i];
    for (size_t i = 0; error_protocol && i < error_protocol->n_classes; i++)
        if (error_protocol->classes[i].code == code)
            return &error_protocol->classes[i];
    return &infos[sizeof infos / sizeof infos[0] - 1]; /* INTERNAL */
}

int hamel_error_status(int code)
{
    return error_protocol && error_protocol->status ? error_protocol->status(code) : 0;
}

const char *hamel_error_slug(int code) { return error_find(code)->slug; }

const char *hamel_error_title(int code) { return error_find(code)->title; }

/* The length of the UTF-8 sequence at s (1 to 4 bytes), or 0 when the bytes there are
 * not a whole, valid one (a stray byte, a sequence cut short, an overlong form, a
 * surrogate, past U+10FFFF): what jansson refuses in a string. */
static size_t error_utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (n && (s[1] < lo || s[1] > hi))
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* A JSON string of text (NULL: ""), every byte that is not part of a valid UTF-8
 * sequence replaced by '?': a name cut at a byte count ("%.80s" of "θθθ…") in the middle
 * of a character would otherwise make json_string fail, and the error it carried
 * would be lost (a model with such a parameter name was accepted). */
static json_t *error_string(const char *text)
{
    if (!text)
        return json_string("");
    size_t len = strlen(text);
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    size_t i = 0;
    while (i < len) {
        size_t n = error_utf8_len((const unsigned char *)text + i);
        if (n == 0) {
            copy[i++] = '?';
            continue;
        }
        memcpy(copy + i, text + i, n);
        i += n;
    }
    copy[len] = '\0';
    json_t *js = json_string(copy);
    free(copy);
    return js;
}

json_t *hamel_problem_new(int code, const char *detail)
{
    const hamel_error_class *e = error_find(code);
    char type[128];
    snprintf(type, sizeof type, HAMEL_PROBLEM_TYPE_PREFIX "%s", e->slug);
    int status = hamel_error_status(e->code);
    json_t *p = status ? json_pack("{s:s, s:s, s:i, s:[]}", "type", type, "title", e->title, "status", status,
                                   "errors")
                       : json_pack("{s:s, s:s, s:[]}", "type", type, "title", e->title, "errors");
    if (p && detail)
        json_object_set_new(p, "detail", error_string(detail));
    return p;
}

void hamel_problem_recode(json_t *problem, int code)
{
    const hamel_error_class *e = error_find(code);
    char type[128];
    snprintf(type, sizeof type, HAMEL_PROBLEM_TYPE_PREFIX "%s", e->slug);
    json_object_set_new(problem, "type", json_string(type));
    json_object_set_new(problem, "title", json_string(e->title));
    int status = hamel_error_status(e->code);
    if (status)
        json_object_set_new(problem, "status", json_integer(status));
    else
        json_object_del(problem, "status");
}

static int error_by_slug(const char *slug)
{
    for (size_t i = 0; i < sizeof infos / sizeof infos[0]; i++)
        if (strcmp(infos[i].slug, slug) == 0)
            return infos[i].code;
    for (size_t i = 0; error_protocol && i < error_protocol->n_classes; i++)
        if (strcmp(error_protocol->classes[i].slug, slug) == 0)
            return error_protocol->classes[i].code;
    return HAMEL_E_INTERNAL;
}

int hamel_problem_code(const json_t *problem)
{
    const char *type = json_string_value(json_object_get(problem, "type"));
    const char *slash = type ? strrchr(type, '/') : NULL;
    return slash ? error_by_slug(slash + 1) : HAMEL_E_INTERNAL;
}

void hamel_problem_add(json_t *problem, const char *path, int column, const char *reason)
{
    if (!problem)
        return;
    json_t *errors = json_object_get(problem, "errors");
    if (!errors) {
        errors = json_array();
        json_object_set_new(problem, "errors", errors);
    }
    json_t *e = json_pack("{s:o, s:o}", "path", error_string(path), "reason", error_string(reason));
    if (column >= 0)
        json_object_set_new(e, "column", json_integer(column));
    json_array_append_new(errors, e);
    if (!json_object_get(problem, "detail")) {
        char buf[512];
        const char *at = path && path[0] ? path : NULL; /* the body itself: no "path: " */
        if (column >= 0)
            snprintf(buf, sizeof buf, "%s%scolumn %d: %s", at ? at : "", at ? ": " : "", column,
                     reason ? reason : "");
        else
            snprintf(buf, sizeof buf, "%s%s%s", at ? at : "", at ? ": " : "", reason ? reason : "");
        json_object_set_new(problem, "detail", error_string(buf));
    }
}

void hamel_problem_addf(json_t **problem, int code, const char *path, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!*problem)
        *problem = hamel_problem_new(code, NULL);
    hamel_problem_add(*problem, path, -1, buf);
}

int hamel_problem_unknown_members(json_t **problem, const json_t *obj, const char *prefix,
                                  const char *const *keys)
{
    char expected[256] = "";
    for (int j = 0; keys[j]; j++) {
        size_t used = strlen(expected);
        snprintf(expected + used, sizeof expected - used, "%s%s", j ? ", " : "", keys[j]);
    }
    int unknown = 0;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        int known = 0;
        for (int j = 0; keys[j]; j++)
            known |= strcmp(key, keys[j]) == 0;
        if (!known) {
            char path[192];
            snprintf(path, sizeof path, "%s%s%.80s", prefix, *prefix ? "." : "", key);
            hamel_problem_addf(problem, HAMEL_E_BAD_REQUEST, path, "unknown member (expected %s)", expected);
            unknown++;
        }
    }
    return unknown;
}
