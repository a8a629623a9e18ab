/* remote.c — `hamel remote ...`: the hamel service from the command line, over
 * libhamelclient.
 *
 *   hamel remote [--url URL] [--token T] run FILE [--csv|--json] [-o OUT]
 *   hamel remote check FILE
 *   hamel remote gamma FILE [--q name=value,...] [--t T] [--json]
 *   hamel remote equations FILE [--json]
 *   hamel remote job ID [--wait] [--csv|--json] [-o OUT]
 *   hamel remote cancel ID
 *
 * FILE is a case file (with "model" and "simulation"), a simulation request (with
 * "model" or "model_id"), or, where only a model is needed, a bare model. The URL
 * defaults to $HAMEL_URL, then http://127.0.0.1:8080; the token to $HAMEL_TOKEN.
 */
#include "hamelclient.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REMOTE_MAX_ARGS 16 /* positional arguments */
#define REMOTE_BAR_WIDTH 30

enum {
    REMOTE_EXIT_OK = 0,
    REMOTE_EXIT_PROBLEM = 1,
    REMOTE_EXIT_USAGE = 2,
    REMOTE_EXIT_TRANSPORT = 3,
    REMOTE_EXIT_INTERRUPTED = 130
};

typedef struct remote_args {
    const char *url, *token, *out, *q, *t;
    int csv, json, wait, help;
    int npos;
    const char *pos[REMOTE_MAX_ARGS];
} remote_args;

/* What the progress callback draws on and watches. */
typedef struct remote_ui {
    int tty;
    int drawn;
} remote_ui;

static volatile sig_atomic_t remote_interrupted;

/* The string value of `v`, or `dflt` when it is not a string. */
static const char *remote_sv(const json_t *v, const char *dflt)
{
    const char *s = json_string_value(v);
    return s != NULL ? s : dflt;
}

/* The string member `key` of `obj`, or `dflt`. */
static const char *remote_str(const json_t *obj, const char *key, const char *dflt)
{
    return remote_sv(json_object_get(obj, key), dflt);
}

static void remote_on_sigint(int sig)
{
    (void)sig;
    remote_interrupted = 1;
}

static const char remote_usage_text[] =
    "usage: hamel remote [--url URL] [--token T] COMMAND ...\n"
    "  run FILE [--csv|--json] [-o OUT]   simulate a case file or a simulation request\n"
    "  check FILE                         validate the model of FILE\n"
    "  gamma FILE [--q name=v,...] [--t T] [--json]\n"
    "                                     Hamel coefficients at a configuration\n"
    "  equations FILE [--json]            the derived equations of the model of FILE\n"
    "  job ID [--wait] [--csv|--json] [-o OUT]\n"
    "                                     a job's status (or, with --wait, its result)\n"
    "  cancel ID                          cancel a queued or running job\n"
    "URL defaults to $HAMEL_URL, then " HAMELCLIENT_DEFAULT_URL "; T to $HAMEL_TOKEN.\n"
    "CSV columns: t, the coordinates, the speeds, then q' of each coordinate as name'.\n"
    "Exit status: 0 ok, 1 the service reported a problem, 2 usage, 3 transport.\n";

static int remote_usage(const char *msg)
{
    if (msg != NULL)
        fprintf(stderr, "hamel remote: %s\n", msg);
    fputs(remote_usage_text, stderr);
    return REMOTE_EXIT_USAGE;
}

/* Parses options anywhere on the line; the rest are positional. Returns 0 or -1. */
static int remote_parse(int argc, char **argv, remote_args *a)
{
    memset(a, 0, sizeof *a);
    int i = 1;
    if (i < argc && strcmp(argv[i], "remote") == 0)
        i++;
    for (; i < argc; i++) {
        const char *s = argv[i];
        const char **slot = NULL;
        if (strcmp(s, "--url") == 0)
            slot = &a->url;
        else if (strcmp(s, "--token") == 0)
            slot = &a->token;
        else if (strcmp(s, "-o") == 0 || strcmp(s, "--output") == 0)
            slot = &a->out;
        else if (strcmp(s, "--q") == 0 || strcmp(s, "-q") == 0)
            slot = &a->q;
        else if (strcmp(s, "--t") == 0)
            slot = &a->t;
        else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0)
            a->help = 1;
        else if (strcmp(s, "--csv") == 0)
            a->csv = 1;
        else if (strcmp(s, "--json") == 0)
            a->json = 1;
        else if (strcmp(s, "--wait") == 0)
            a->wait = 1;
        else if (strncmp(s, "--url=", 6) == 0)
            a->url = s + 6;
        else if (strncmp(s, "--token=", 8) == 0)
            a->token = s + 8;
        else if (strncmp(s, "--q=", 4) == 0)
            a->q = s + 4;
        else if (strncmp(s, "--t=", 4) == 0)
            a->t = s + 4;
        else if (s[0] == '-' && s[1] != '\0') {
            fprintf(stderr, "hamel remote: unknown option %s\n", s);
            return -1;
        } else if (a->npos < REMOTE_MAX_ARGS)
            a->pos[a->npos++] = s;
        else {
            fprintf(stderr, "hamel remote: too many arguments\n");
            return -1;
        }
        if (slot != NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "hamel remote: %s needs a value\n", s);
                return -1;
            }
            *slot = argv[++i];
        }
    }
    if (a->csv && a->json) {
        fprintf(stderr, "hamel remote: --csv and --json exclude each other\n");
        return -1;
    }
    return 0;
}

static int remote_exit_for(int rc)
{
    switch (rc) {
    case HAMELCLIENT_OK: return REMOTE_EXIT_OK;
    case HAMELCLIENT_E_PROBLEM:
    case HAMELCLIENT_E_CANCELLED: return REMOTE_EXIT_PROBLEM;
    case HAMELCLIENT_E_USAGE: return REMOTE_EXIT_USAGE;
    case HAMELCLIENT_E_STOPPED: return REMOTE_EXIT_INTERRUPTED;
    default: return REMOTE_EXIT_TRANSPORT;
    }
}

/* Prints the error of a failed call, with every entry of its problem's "errors". */
static int remote_fail(hamelclient *c, const char *what, int rc, const hamelclient_error *err)
{
    char line[2 * HAMELCLIENT_TEXT_MAX];
    fprintf(stderr, "hamel remote: %s: %s\n", what, hamelclient_error_string(err, line, sizeof line));
    const json_t *doc = hamelclient_last_problem(c);
    json_t *errors = json_object_get(doc, "errors");
    if (json_array_size(errors) > 1) {
        size_t i;
        json_t *e;
        json_array_foreach(errors, i, e)
        {
            json_t *col = json_object_get(e, "column");
            fprintf(stderr, "  %s", remote_str(e, "path", "(no path)"));
            if (json_is_integer(col))
                fprintf(stderr, " column %lld", (long long)json_integer_value(col));
            fprintf(stderr, ": %s\n", remote_str(e, "reason", ""));
        }
    }
    return remote_exit_for(rc);
}

static json_t *remote_load(const char *file)
{
    json_error_t jerr;
    json_t *doc = strcmp(file, "-") == 0 ? json_loadf(stdin, 0, &jerr) : json_load_file(file, 0, &jerr);
    if (doc == NULL)
        fprintf(stderr, "%s:%d:%d: %s\n", file, jerr.line, jerr.column, jerr.text);
    else if (!json_is_object(doc)) {
        fprintf(stderr, "%s: not a JSON object\n", file);
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

/* The model inside a case file or request, else the document itself if it looks like
 * a model; NULL otherwise. Borrowed from `doc`. */
static json_t *remote_model_of(json_t *doc)
{
    json_t *m = json_object_get(doc, "model");
    if (json_is_object(m))
        return m;
    return json_object_get(doc, "coordinates") != NULL ? doc : NULL;
}

/* The preamble of the commands that take one FILE holding a model: checks the
 * arguments, loads FILE and finds its model. Returns 0 with *doc (caller frees) and
 * *model (borrowed from *doc), or the exit code to return. */
static int remote_load_model(const remote_args *a, const char *cmd, json_t **doc, json_t **model)
{
    char usage[64];
    snprintf(usage, sizeof usage, "%s needs one FILE", cmd);
    if (a->npos != 2)
        return remote_usage(usage);
    *doc = remote_load(a->pos[1]);
    if (*doc == NULL)
        return REMOTE_EXIT_USAGE;
    *model = remote_model_of(*doc);
    if (*model == NULL) {
        fprintf(stderr, "%s: no model in this file\n", a->pos[1]);
        json_decref(*doc);
        return REMOTE_EXIT_USAGE;
    }
    return 0;
}

/* A simulation request from a case file ({"model", "simulation"}) or a request itself.
 * Caller owns the result; NULL (with a message) when FILE is neither. */
static json_t *remote_request_of(const char *file, json_t *doc)
{
    json_t *sim = json_object_get(doc, "simulation");
    if (json_is_object(sim)) {
        json_t *req = json_deep_copy(sim);
        if (json_object_get(req, "model") == NULL && json_object_get(req, "model_id") == NULL)
            json_object_set(req, "model", json_object_get(doc, "model"));
        return req;
    }
    if (json_object_get(doc, "model") != NULL || json_object_get(doc, "model_id") != NULL)
        return json_incref(doc);
    fprintf(stderr, "%s: neither a case file (model + simulation) nor a simulation request\n", file);
    return NULL;
}

static int remote_progress(void *user, const char *job_id, const char *status, double p)
{
    remote_ui *ui = user;
    if (ui->tty) {
        static const char hashes[] = "##############################";
        int fill = (int)(p * REMOTE_BAR_WIDTH + 0.5);
        fill = fill < 0 ? 0 : (fill > REMOTE_BAR_WIDTH ? REMOTE_BAR_WIDTH : fill);
        fprintf(stderr, "\r%.16s [%.*s%*s] %5.1f%% %-9s", job_id, fill, hashes, REMOTE_BAR_WIDTH - fill, "",
                100.0 * p, status);
        fflush(stderr);
        ui->drawn = 1;
    }
    return remote_interrupted ? 1 : 0;
}

static void remote_progress_end(remote_ui *ui)
{
    if (ui->drawn)
        fputc('\n', stderr);
    ui->drawn = 0;
}

static FILE *remote_open_out(const char *out)
{
    if (out == NULL || strcmp(out, "-") == 0)
        return stdout;
    FILE *f = fopen(out, "w");
    if (f == NULL)
        perror(out);
    return f;
}

static int remote_close_out(FILE *f, const char *out)
{
    int bad = ferror(f);
    if (f != stdout)
        bad |= fclose(f) != 0;
    else
        bad |= fflush(f) != 0;
    if (bad) {
        fprintf(stderr, "hamel remote: writing %s failed\n", out ? out : "stdout");
        return REMOTE_EXIT_USAGE;
    }
    return REMOTE_EXIT_OK;
}

static void remote_print_json(FILE *f, const json_t *doc, int compact)
{
    json_dumpf(doc, f, compact ? JSON_COMPACT : JSON_INDENT(2));
    fputc('\n', f);
}

/* Column names: `names` (an array of strings, e.g. the model's coordinates) when it
 * lists every key of `group`, else the group's own key order. */
static json_t *remote_columns(const json_t *group, const json_t *names)
{
    if (json_is_array(names) && json_array_size(names) == json_object_size(group)) {
        size_t i;
        json_t *n;
        int all = 1;
        json_array_foreach(names, i, n) all &= json_object_get(group, remote_sv(n, "")) != NULL;
        if (all)
            return json_incref((json_t *)names);
    }
    json_t *cols = json_array();
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)group, key, v) json_array_append_new(cols, json_string(key));
    return cols;
}

static json_t *remote_names(const json_t *list)
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

/* Prints `v` with the fewest significant digits (15 to 17) that read back exactly. */
static void remote_put_double(FILE *f, const char *sep, double v)
{
    char buf[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fprintf(f, "%s%s", sep, buf);
}

/* Writes the trajectory of `result` as CSV: t, q..., speeds..., q'... . The model (may
 * be NULL) gives the column order. Returns 0, or -1 when the result has no trajectory. */
static int remote_write_csv(FILE *f, const json_t *result, const json_t *model)
{
    json_t *tr = json_object_get(result, "trajectory");
    json_t *t = json_object_get(tr, "t");
    if (!json_is_array(t)) {
        fprintf(stderr, "hamel remote: the result has no trajectory\n");
        return -1;
    }
    static const char *const groups[] = {"q", "speeds", "qdot"};
    json_t *coords = json_object_get(model, "coordinates");
    json_t *speed_names = remote_names(json_object_get(model, "speeds"));
    json_t *cols[3];
    for (int g = 0; g < 3; g++) {
        json_t *grp = json_object_get(tr, groups[g]);
        cols[g] = json_is_object(grp) ? remote_columns(grp, g == 1 ? speed_names : coords) : json_array();
    }
    json_decref(speed_names);
    fputs("t", f);
    for (int g = 0; g < 3; g++) {
        size_t i;
        json_t *n;
        json_array_foreach(cols[g], i, n) fprintf(f, ",%s%s", json_string_value(n), g == 2 ? "'" : "");
    }
    fputc('\n', f);
    size_t rows = json_array_size(t);
    for (size_t k = 0; k < rows; k++) {
        remote_put_double(f, "", json_number_value(json_array_get(t, k)));
        for (int g = 0; g < 3; g++) {
            json_t *grp = json_object_get(tr, groups[g]);
            size_t i;
            json_t *n;
            json_array_foreach(cols[g], i, n)
            {
                json_t *v = json_array_get(json_object_get(grp, json_string_value(n)), k);
                if (json_is_number(v))
                    remote_put_double(f, ",", json_number_value(v));
                else
                    fputs(",", f);
            }
        }
        fputc('\n', f);
    }
    for (int g = 0; g < 3; g++)
        json_decref(cols[g]);
    return 0;
}

/* Writes a finished result as JSON (compact) or CSV to -o OUT or stdout. */
static int remote_emit_result(const remote_args *a, const json_t *result, const json_t *model)
{
    FILE *f = remote_open_out(a->out);
    if (f == NULL)
        return REMOTE_EXIT_USAGE;
    int bad = 0;
    if (a->csv)
        bad = remote_write_csv(f, result, model) != 0;
    else
        remote_print_json(f, result, 1);
    int rc = remote_close_out(f, a->out);
    return bad ? REMOTE_EXIT_TRANSPORT : rc;
}

/* Waits for a job with a progress bar on a terminal; Ctrl-C cancels the job. On
 * success *result holds the result (caller owns it). */
static int remote_wait(hamelclient *c, const char *job_id, json_t *started, json_t **result)
{
    remote_ui ui = {isatty(STDERR_FILENO), 0};
    hamelclient_error err;
    int rc;
    if (started != NULL && json_object_get(started, "trajectory") != NULL) {
        remote_progress(&ui, job_id, "done", 1.0);
        *result = json_incref(started);
        rc = HAMELCLIENT_OK;
    } else {
        rc = hamelclient_job_wait(c, job_id, remote_progress, &ui, result, &err);
    }
    remote_progress_end(&ui);
    if (rc == HAMELCLIENT_E_STOPPED) {
        fprintf(stderr, "hamel remote: interrupted; cancelling job %s\n", job_id);
        hamelclient_job_cancel(c, job_id, NULL, &err);
        return REMOTE_EXIT_INTERRUPTED;
    }
    if (rc != HAMELCLIENT_OK)
        return remote_fail(c, job_id, rc, &err);
    return REMOTE_EXIT_OK;
}

static int remote_run(hamelclient *c, const remote_args *a)
{
    if (a->npos != 2)
        return remote_usage("run needs one FILE");
    json_t *doc = remote_load(a->pos[1]);
    if (doc == NULL)
        return REMOTE_EXIT_USAGE;
    json_t *req = remote_request_of(a->pos[1], doc);
    if (req == NULL) {
        json_decref(doc);
        return REMOTE_EXIT_USAGE;
    }
    hamelclient_error err;
    json_t *started = NULL, *result = NULL;
    int rc = hamelclient_simulation_start(c, req, 0, &started, &err);
    int code;
    if (rc != HAMELCLIENT_OK)
        code = remote_fail(c, a->pos[1], rc, &err);
    else {
        const char *id = json_string_value(json_object_get(started, "job_id"));
        code = remote_wait(c, id ? id : "", started, &result);
    }
    if (code == REMOTE_EXIT_OK)
        code = remote_emit_result(a, result, json_object_get(req, "model"));
    json_decref(result);
    json_decref(started);
    json_decref(req);
    json_decref(doc);
    return code;
}

/* Prints the expression at `path` (the service's form: "model.constraints[1].expr",
 * rooted at the model) with a caret under `column` (1-based), when the path leads to
 * a string of the model. */
static void remote_point_at(const json_t *model, const char *path, int column)
{
    static const char root[] = "model";
    if (path == NULL || strncmp(path, root, sizeof root - 1) != 0 || column < 1)
        return;
    const json_t *cur = model;
    const char *p = path + sizeof root - 1;
    char key[256];
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
    fprintf(stderr, "    %s\n    %*s^\n", s, column - 1, "");
}

static int remote_check(hamelclient *c, const remote_args *a)
{
    json_t *doc, *model;
    int pre = remote_load_model(a, "check", &doc, &model);
    if (pre)
        return pre;
    const char *file = a->pos[1];
    hamelclient_error err;
    json_t *sum = NULL;
    int created = 0;
    int rc = hamelclient_model_submit(c, model, &sum, &created, &err);
    if (rc == HAMELCLIENT_E_PROBLEM) {
        const json_t *prob = hamelclient_last_problem(c);
        fprintf(stderr, "%s: %s (HTTP %d)\n", file, err.title[0] ? err.title : "invalid model", err.status);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(prob, "errors"), i, e)
        {
            const char *path = json_string_value(json_object_get(e, "path"));
            json_t *col = json_object_get(e, "column");
            fprintf(stderr, "%s: %s", file, path ? path : "(no path)");
            if (json_is_integer(col))
                fprintf(stderr, ": column %lld", (long long)json_integer_value(col));
            fprintf(stderr, ": %s\n", remote_str(e, "reason", ""));
            if (json_is_integer(col))
                remote_point_at(model, path, (int)json_integer_value(col));
        }
        json_decref(doc);
        return REMOTE_EXIT_PROBLEM;
    }
    if (rc != HAMELCLIENT_OK) {
        json_decref(doc);
        return remote_fail(c, file, rc, &err);
    }
    printf("%s: valid, %s (%s)\n", file, remote_str(sum, "model_id", "?"), created ? "new" : "known");
    printf("  n=%lld m=%lld dof=%lld%s%s\n", (long long)json_integer_value(json_object_get(sum, "n")),
           (long long)json_integer_value(json_object_get(sum, "m")),
           (long long)json_integer_value(json_object_get(sum, "dof")),
           json_is_true(json_object_get(sum, "scleronomic")) ? ", scleronomic" : ", rheonomic",
           json_is_true(json_object_get(sum, "energy_conserved")) ? ", energy conserved" : "");
    static const char *const lists[] = {"coordinates", "speeds"};
    for (int l = 0; l < 2; l++) {
        json_t *names = remote_names(json_object_get(sum, lists[l]));
        printf("  %s:", lists[l]);
        size_t i;
        json_t *n;
        json_array_foreach(names, i, n) printf(" %s", json_string_value(n));
        putchar('\n');
        json_decref(names);
    }
    size_t i;
    json_t *con;
    json_array_foreach(json_object_get(sum, "constraints"), i, con)
    {
        printf("  constraint %s: %s, %s, %s\n", remote_str(con, "name", "?"),
               json_is_true(json_object_get(con, "linear")) ? "linear" : "nonlinear",
               json_is_true(json_object_get(con, "rheonomic")) ? "rheonomic" : "scleronomic",
               json_is_true(json_object_get(con, "holonomic")) ? "holonomic" : "not integrable alone");
    }
    json_decref(sum);
    json_decref(doc);
    return REMOTE_EXIT_OK;
}

/* Parses "name=value,name=value" into `q` (borrowed). Returns 0 or -1. */
static int remote_parse_q(const char *spec, json_t *q)
{
    char *copy = strdup(spec);
    if (copy == NULL)
        return -1;
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        char *end = NULL;
        if (eq == NULL || eq == item) {
            rc = -1;
            break;
        }
        *eq = '\0';
        double v = strtod(eq + 1, &end);
        if (end == eq + 1 || *end != '\0') {
            rc = -1;
            break;
        }
        json_object_set_new(q, item, json_real(v));
    }
    free(copy);
    return rc;
}

static void remote_print_gamma_list(const json_t *list, const char *title, int with_l)
{
    printf("%s\n", title);
    if (json_array_size(list) == 0) {
        printf("  (none)\n");
        return;
    }
    size_t i;
    json_t *g;
    json_array_foreach(list, i, g)
    {
        printf("  %-10s %-10s", remote_str(g, "j", "?"), remote_str(g, "r", "?"));
        if (with_l)
            printf(" %-10s", remote_str(g, "l", "?"));
        printf(" % .17g\n", json_number_value(json_object_get(g, "value")));
    }
}

static int remote_gamma(hamelclient *c, const remote_args *a)
{
    json_t *doc, *model;
    int pre = remote_load_model(a, "gamma", &doc, &model);
    if (pre)
        return pre;
    /* The configuration: the file's initial state if it has one, each coordinate 0
     * otherwise, then --q and --t on top. */
    json_t *sim = json_object_get(doc, "simulation");
    if (sim == NULL)
        sim = doc;
    json_t *init = json_object_get(sim, "initial");
    json_t *q = json_object();
    size_t i;
    json_t *name;
    json_array_foreach(json_object_get(model, "coordinates"), i, name)
    {
        json_t *v = json_object_get(json_object_get(init, "q"), remote_sv(name, ""));
        json_object_set_new(q, remote_sv(name, ""), json_is_number(v) ? json_copy(v) : json_real(0));
    }
    json_t *req = json_pack("{s:O, s:o}", "model", model, "q", q);
    json_t *t0 = json_object_get(init, "t");
    if (json_is_number(t0))
        json_object_set(req, "t", t0);
    if (json_is_object(json_object_get(sim, "parameters")))
        json_object_set(req, "parameters", json_object_get(sim, "parameters"));
    int code = REMOTE_EXIT_OK;
    if (a->q != NULL && remote_parse_q(a->q, json_object_get(req, "q")) != 0)
        code = remote_usage("--q wants name=value,name=value");
    if (code == REMOTE_EXIT_OK && a->t != NULL) {
        char *end = NULL;
        double t = strtod(a->t, &end);
        if (end == a->t || *end != '\0')
            code = remote_usage("--t wants a number");
        else
            json_object_set_new(req, "t", json_real(t));
    }
    json_t *out = NULL;
    hamelclient_error err;
    if (code == REMOTE_EXIT_OK) {
        int rc = hamelclient_hamel(c, req, &out, &err);
        code = rc == HAMELCLIENT_OK ? REMOTE_EXIT_OK : remote_fail(c, a->pos[1], rc, &err);
    }
    if (code == REMOTE_EXIT_OK && a->json)
        remote_print_json(stdout, out, 0);
    else if (code == REMOTE_EXIT_OK) {
        printf("model %s\norder:", remote_str(out, "model_id", "?"));
        json_array_foreach(json_object_get(out, "order"), i, name) printf(" %s", json_string_value(name));
        putchar('\n');
        json_t *pt;
        json_array_foreach(json_object_get(out, "points"), i, pt)
        {
            printf("at t=%.17g:", json_number_value(json_object_get(pt, "t")));
            const char *key;
            json_t *v;
            json_object_foreach(json_object_get(pt, "q"), key, v)
                printf(" %s=%.17g", key, json_number_value(v));
            putchar('\n');
            remote_print_gamma_list(json_object_get(pt, "gamma"), "gamma^j_rl (j r l value):", 1);
            remote_print_gamma_list(json_object_get(pt, "gamma_t"), "gamma^j_r (j r value):", 0);
        }
    }
    json_decref(out);
    json_decref(req);
    json_decref(doc);
    return code;
}

static void remote_print_exprs(const char *title, const json_t *list, const json_t *labels)
{
    printf("%s\n", title);
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *label = json_string_value(json_array_get(labels, i));
        if (label != NULL)
            printf("  [%s] %s\n", label, remote_sv(e, "?"));
        else
            printf("  [%zu] %s\n", i, remote_sv(e, "?"));
    }
}

static int remote_equations(hamelclient *c, const remote_args *a)
{
    json_t *doc, *model;
    int pre = remote_load_model(a, "equations", &doc, &model);
    if (pre)
        return pre;
    hamelclient_error err;
    json_t *sum = NULL, *eq = NULL;
    int rc = hamelclient_model_submit(c, model, &sum, NULL, &err);
    if (rc == HAMELCLIENT_OK)
        rc = hamelclient_equations(c, json_string_value(json_object_get(sum, "model_id")), &eq, &err);
    int code = rc == HAMELCLIENT_OK ? REMOTE_EXIT_OK : remote_fail(c, a->pos[1], rc, &err);
    if (code == REMOTE_EXIT_OK && a->json)
        remote_print_json(stdout, eq, 0);
    else if (code == REMOTE_EXIT_OK) {
        json_t *speeds = remote_names(json_object_get(sum, "speeds"));
        printf("model %s\nformulation %s\n", remote_str(eq, "model_id", "?"),
               remote_str(eq, "formulation", "?"));
        printf("kinematics (q' = Phi u + Phi_t):\n");
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(eq, "kinematics"), key, v)
            printf("  %s' = %s\n", key, remote_sv(v, "?"));
        printf("mass matrix M (M u' = forcing):\n");
        size_t i, k;
        json_t *row, *cell;
        json_array_foreach(json_object_get(eq, "mass_matrix"), i, row)
        {
            json_array_foreach(row, k, cell)
            {
                const char *s = json_string_value(cell);
                if (s != NULL && strcmp(s, "0") != 0) {
                    const char *ri = json_string_value(json_array_get(speeds, i));
                    const char *ck = json_string_value(json_array_get(speeds, k));
                    if (ri != NULL && ck != NULL)
                        printf("  M[%s,%s] = %s\n", ri, ck, s);
                    else
                        printf("  M[%zu,%zu] = %s\n", i, k, s);
                }
            }
        }
        remote_print_exprs("forcing:", json_object_get(eq, "forcing"), speeds);
        printf("gamma^j_rl:\n");
        json_t *g;
        json_array_foreach(json_object_get(eq, "gamma"), i, g)
            printf("  gamma^%s_{%s,%s} = %s\n", remote_str(g, "j", "?"), remote_str(g, "r", "?"),
                   remote_str(g, "l", "?"), remote_str(g, "expr", "?"));
        const char *ts = json_string_value(json_object_get(eq, "kinetic_energy_in_speeds"));
        if (ts != NULL)
            printf("T* = %s\n", ts);
        json_decref(speeds);
    }
    json_decref(eq);
    json_decref(sum);
    json_decref(doc);
    return code;
}

static int remote_job(hamelclient *c, const remote_args *a)
{
    if (a->npos != 2)
        return remote_usage("job needs one ID");
    hamelclient_error err;
    json_t *job = NULL;
    int rc = hamelclient_job_get(c, a->pos[1], 0, &job, &err);
    if (rc != HAMELCLIENT_OK)
        return remote_fail(c, a->pos[1], rc, &err);
    int code = REMOTE_EXIT_OK;
    if (a->wait) {
        json_t *result = NULL;
        code = remote_wait(c, a->pos[1], job, &result);
        if (code == REMOTE_EXIT_OK)
            code = remote_emit_result(a, result, NULL);
        json_decref(result);
    } else if (a->csv) {
        code = remote_emit_result(a, job, NULL);
    } else {
        FILE *f = remote_open_out(a->out);
        if (f == NULL)
            code = REMOTE_EXIT_USAGE;
        else {
            remote_print_json(f, job, a->json);
            code = remote_close_out(f, a->out);
        }
    }
    json_decref(job);
    return code;
}

static int remote_cancel(hamelclient *c, const remote_args *a)
{
    if (a->npos != 2)
        return remote_usage("cancel needs one ID");
    hamelclient_error err;
    json_t *out = NULL;
    int rc = hamelclient_job_cancel(c, a->pos[1], &out, &err);
    if (rc != HAMELCLIENT_OK)
        return remote_fail(c, a->pos[1], rc, &err);
    if (out != NULL)
        remote_print_json(stdout, out, 0);
    else
        printf("cancelled %s\n", a->pos[1]);
    json_decref(out);
    return REMOTE_EXIT_OK;
}

int hamelclient_remote_main(int argc, char **argv)
{
    remote_args a;
    if (remote_parse(argc, argv, &a) != 0)
        return remote_usage(NULL);
    if (a.help || (a.npos > 0 && strcmp(a.pos[0], "help") == 0)) {
        fputs(remote_usage_text, stdout);
        return REMOTE_EXIT_OK;
    }
    if (a.npos == 0)
        return remote_usage(NULL);
    static const struct {
        const char *name;
        int (*fn)(hamelclient *, const remote_args *);
    } commands[] = {
        {"run", remote_run},     {"check", remote_check},
        {"gamma", remote_gamma}, {"equations", remote_equations},
        {"job", remote_job},     {"cancel", remote_cancel},
    };
    int (*fn)(hamelclient *, const remote_args *) = NULL;
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(a.pos[0], commands[i].name) == 0)
            fn = commands[i].fn;
    if (fn == NULL) {
        fprintf(stderr, "hamel remote: unknown command %s\n", a.pos[0]);
        return remote_usage(NULL);
    }
    hamelclient_options opts = {.token = a.token};
    hamelclient *c = NULL;
    int rc = hamelclient_new(a.url, &opts, &c);
    if (rc != HAMELCLIENT_OK) {
        fprintf(stderr, "hamel remote: cannot create a client for %s (%s)\n", a.url ? a.url : "$HAMEL_URL",
                hamelclient_kind_name(rc));
        return rc == HAMELCLIENT_E_USAGE ? REMOTE_EXIT_USAGE : REMOTE_EXIT_TRANSPORT;
    }
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = remote_on_sigint;
    sigemptyset(&sa.sa_mask);
    remote_interrupted = 0;
    sigaction(SIGINT, &sa, &old);
    int code = fn(c, &a);
    sigaction(SIGINT, &old, NULL);
    hamelclient_free(c);
    return code;
}
