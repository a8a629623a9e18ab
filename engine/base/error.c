/* error.c — slug and title of each error code, the embedding program's classes and
 * statuses (hamel_error_use), and problem documents. */
#include "error.h"
#include <stdarg.h>

#include <stdio.h>
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
        json_object_set_new(p, "detail", json_string(detail));
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
    json_t *e = json_pack("{s:s, s:s}", "path", path ? path : "", "reason", reason ? reason : "");
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
        json_object_set_new(problem, "detail", json_string(buf));
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
