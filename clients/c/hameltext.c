/* hameltext.c — CSV, summary and problem text shared by hamel and hamel-remote. */
#include "hameltext.h"

#include <stdlib.h>
#include <string.h>

#define HAMELTEXT_MAX_KEY 256 /* one member name along a problem's path */

static const char *text_sv(const json_t *v, const char *dflt)
{
    const char *s = json_string_value(v);
    return s != NULL ? s : dflt;
}

void hameltext_put_double(FILE *f, const char *sep, double v)
{
    char buf[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fprintf(f, "%s%s", sep, buf);
}

json_t *hameltext_names(const json_t *list)
{
    json_t *names = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *n =
            json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "name"));
        if (n != NULL)
            json_array_append_new(names, json_string(n));
    }
    return names;
}

/* Column names: `names` (an array of strings, e.g. the model's coordinates) when it
 * lists every key of `group`, else the group's own key order. Caller frees. */
static json_t *text_columns(const json_t *group, const json_t *names)
{
    if (json_is_array(names) && json_array_size(names) == json_object_size(group)) {
        size_t i;
        json_t *n;
        int all = 1;
        json_array_foreach(names, i, n) all &= json_object_get(group, text_sv(n, "")) != NULL;
        if (all)
            return json_incref((json_t *)names);
    }
    json_t *cols = json_array();
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)group, key, v) json_array_append_new(cols, json_string(key));
    return cols;
}

int hameltext_csv(FILE *f, const json_t *result, const json_t *model)
{
    json_t *tr = json_object_get(result, "trajectory");
    json_t *t = json_object_get(tr, "t");
    if (!json_is_array(t)) {
        fprintf(stderr, "hamel: the result has no trajectory\n");
        return -1;
    }
    /* the multipliers formulation's constraint forces last, as lambda_<constraint> */
    enum { NGROUPS = 4 };
    static const char *const groups[NGROUPS] = {"q", "speeds", "qdot", "multipliers"};
    static const char *const prefix[NGROUPS] = {"", "", "", "lambda_"}, *const suffix[NGROUPS] = {"", "", "'",
                                                                                                  ""};
    json_t *coords = json_object_get(model, "coordinates");
    json_t *speed_names = hameltext_names(json_object_get(model, "speeds"));
    json_t *cons = hameltext_names(json_object_get(model, "constraints"));
    json_t *cols[NGROUPS];
    for (int g = 0; g < NGROUPS; g++) {
        json_t *grp = json_object_get(tr, groups[g]);
        cols[g] = json_is_object(grp) ? text_columns(grp, g == 1 ? speed_names : (g == 3 ? cons : coords))
                                      : json_array();
    }
    json_decref(speed_names);
    json_decref(cons);
    fputs("t", f);
    for (int g = 0; g < NGROUPS; g++) {
        size_t i;
        json_t *n;
        json_array_foreach(cols[g], i, n) fprintf(f, ",%s%s%s", prefix[g], json_string_value(n), suffix[g]);
    }
    fputc('\n', f);
    size_t rows = json_array_size(t);
    for (size_t k = 0; k < rows; k++) {
        hameltext_put_double(f, "", json_number_value(json_array_get(t, k)));
        for (int g = 0; g < NGROUPS; g++) {
            json_t *grp = json_object_get(tr, groups[g]);
            size_t i;
            json_t *n;
            json_array_foreach(cols[g], i, n)
            {
                json_t *v = json_array_get(json_object_get(grp, json_string_value(n)), k);
                if (json_is_number(v))
                    hameltext_put_double(f, ",", json_number_value(v));
                else
                    fputs(",", f);
            }
        }
        fputc('\n', f);
    }
    for (int g = 0; g < NGROUPS; g++)
        json_decref(cols[g]);
    return 0;
}

void hameltext_summary(FILE *f, const char *file, const json_t *summary, int created)
{
    fprintf(f, "%s: valid, %s%s\n", file, text_sv(json_object_get(summary, "model_id"), "?"),
            created == 1 ? " (new)" : (created == 0 ? " (known)" : ""));
    fprintf(f, "  n=%lld m=%lld dof=%lld%s%s\n", (long long)json_integer_value(json_object_get(summary, "n")),
            (long long)json_integer_value(json_object_get(summary, "m")),
            (long long)json_integer_value(json_object_get(summary, "dof")),
            json_is_true(json_object_get(summary, "scleronomic")) ? ", scleronomic" : ", rheonomic",
            json_is_true(json_object_get(summary, "energy_conserved")) ? ", energy conserved" : "");
    static const char *const lists[] = {"coordinates", "speeds"};
    for (int l = 0; l < 2; l++) {
        json_t *names = hameltext_names(json_object_get(summary, lists[l]));
        fprintf(f, "  %s:", lists[l]);
        size_t i;
        json_t *n;
        json_array_foreach(names, i, n) fprintf(f, " %s", json_string_value(n));
        fputc('\n', f);
        json_decref(names);
    }
    size_t i;
    json_t *con;
    json_array_foreach(json_object_get(summary, "constraints"), i, con)
    {
        fprintf(f, "  constraint %s: %s, %s, %s\n", text_sv(json_object_get(con, "name"), "?"),
                json_is_true(json_object_get(con, "linear")) ? "linear" : "nonlinear",
                json_is_true(json_object_get(con, "rheonomic")) ? "rheonomic" : "scleronomic",
                json_is_true(json_object_get(con, "holonomic")) ? "holonomic" : "not integrable alone");
    }
}

/* Writes the expression at `path` ("model.constraints[1].expr", rooted at the model)
 * with a caret under `column` (1-based), when the path leads to a string of the model. */
static void text_point_at(FILE *f, const json_t *model, const char *path, int column)
{
    static const char root[] = "model";
    if (path == NULL || strncmp(path, root, sizeof root - 1) != 0 || column < 1)
        return;
    const json_t *cur = model;
    const char *p = path + sizeof root - 1;
    char key[HAMELTEXT_MAX_KEY];
    while (cur != NULL && *p != '\0') {
        if (*p == '.') {
            p++;
            size_t n = strcspn(p, ".[");
            if (n == 0 || n >= sizeof key)
                return;
            memcpy(key, p, n);
            key[n] = '\0';
            cur = json_object_get(cur, key);
            p += n;
        } else if (*p == '[') {
            char *end = NULL;
            long idx = strtol(p + 1, &end, 10);
            if (end == p + 1 || *end != ']' || idx < 0)
                return;
            cur = json_array_get(cur, (size_t)idx);
            p = end + 1;
        } else
            return;
    }
    if (json_is_object(cur) && json_is_string(json_object_get(cur, "expr")))
        cur = json_object_get(cur, "expr");
    const char *s = json_string_value(cur);
    if (s == NULL || (size_t)column > strlen(s) + 1)
        return;
    fprintf(f, "    %s\n    %*s^\n", s, column - 1, "");
}

void hameltext_problem(FILE *f, const char *file, const json_t *problem, const json_t *model, int status)
{
    const char *title = text_sv(json_object_get(problem, "title"), "");
    if (!title[0])
        title = text_sv(json_object_get(problem, "detail"), "refused");
    if (status > 0)
        fprintf(f, "%s: %s (HTTP %d)\n", file, title, status);
    else
        fprintf(f, "%s: %s\n", file, title);
    json_t *errors = json_object_get(problem, "errors");
    if (json_array_size(errors) == 0 && json_is_string(json_object_get(problem, "detail")) &&
        strcmp(title, json_string_value(json_object_get(problem, "detail"))) != 0)
        fprintf(f, "%s: %s\n", file, json_string_value(json_object_get(problem, "detail")));
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e)
    {
        const char *path = json_string_value(json_object_get(e, "path"));
        json_t *col = json_object_get(e, "column");
        fprintf(f, "%s: %s", file, path ? path : "(no path)");
        if (json_is_integer(col))
            fprintf(f, ": column %lld", (long long)json_integer_value(col));
        fprintf(f, ": %s\n", text_sv(json_object_get(e, "reason"), ""));
        if (json_is_integer(col) && model != NULL)
            text_point_at(f, model, path, (int)json_integer_value(col));
    }
}

int hameltext_warnings(FILE *f, const char *prog, const json_t *result)
{
    const json_t *ws = json_object_get(result, "warnings");
    size_t i;
    const json_t *w;
    int n = 0;
    json_array_foreach(ws, i, w)
    {
        fprintf(f, "%s: warning: %s: %s\n", prog, text_sv(json_object_get(w, "code"), "warning"),
                text_sv(json_object_get(w, "message"), ""));
        n++;
    }
    return n;
}

/* The members of /v1/linearize, /v1/evaluate and /v1/steady requests but model and
 * model_id (api/openapi.yaml). */
static const char *const hameltext__request_members[] = {"parameters",
                                                         "t",
                                                         "q",
                                                         "speeds",
                                                         "qdot",
                                                         "points",
                                                         "inputs",
                                                         "steady",
                                                         "steady_tolerance",
                                                         "select",
                                                         "eigenvectors",
                                                         "states",
                                                         "state",
                                                         "unknowns",
                                                         "continuation",
                                                         NULL};

const char *hameltext_stray_member(const json_t *doc, const char *which)
{
    if (!json_is_object(json_object_get(doc, which)))
        return NULL;
    for (const char *const *k = hameltext__request_members; *k; k++)
        if (strcmp(*k, which) != 0 && json_object_get(doc, *k)) /* "steady" is also linearize's member */
            return *k;
    return NULL;
}
