/* remote.c — `hamel remote ...`: the hamel service from the command line, over
 * libhamelclient.
 *
 *   hamel remote [--url URL] [--token T] run FILE [--csv|--json] [-o OUT]
 *   hamel remote check FILE
 *   hamel remote gamma FILE [--q name=value,...] [--t T] [--qdot name=value,...] [--json]
 *   hamel remote equations FILE [--json]
 *   hamel remote job ID [--wait] [--csv|--json] [-o OUT]
 *   hamel remote cancel ID
 *   hamel remote quarantine [--json]
 *   hamel remote quarantine clear ID
 *
 * FILE is a case file (with "model" and "simulation"), a simulation request (with
 * "model" or "model_id"), or, where only a model is needed, a bare model. The URL
 * defaults to $HAMEL_URL, then http://127.0.0.1:8080; the token to $HAMEL_TOKEN.
 */
#include "hamelclient.h"
#include "hameltext.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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
    const char *url, *token, *out, *q, *t, *qdot, *form;
    int csv, json, wait, help;
    int progress; /* -1: on a terminal (the default); 0: --no-progress; 1: --progress */
    int npos;
    const char *pos[REMOTE_MAX_ARGS];
} remote_args;

#define REMOTE_PROGRESS_AFTER_S 1.0 /* progress shows once a wait has taken this long */
#define REMOTE_PROGRESS_LINE_S 1.0  /* one line per interval when stderr is not a terminal */

/* What the progress callback draws on and watches: a bar redrawn in place on a terminal,
 * else (--progress) a line a second; nothing in a wait's first second. */
typedef struct remote_ui {
    char id[HAMELCLIENT_MAX_ID]; /* the job or batch waited for, as the progress callback saw it */
    int tty;
    int drawn;
    int show;         /* draw at all */
    double start;     /* monotonic seconds when the wait began */
    double last_line; /* when the last line was written (not a terminal) */
} remote_ui;

static double remote_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A remote_ui for a wait starting now, as -a asks. */
static remote_ui remote_ui_new(const remote_args *a)
{
    remote_ui ui = {"", isatty(STDERR_FILENO), 0, 0, remote_now(), 0};
    ui.show = a->progress > 0 || (a->progress < 0 && ui.tty);
    return ui;
}

/* The signal that interrupted a wait (SIGINT, SIGTERM, SIGHUP), 0 while none has. */
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

static void remote_on_signal(int sig) { remote_interrupted = sig; }

/* The exit status of a wait interrupted by remote_interrupted: 128 + the signal (130
 * for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP), as a shell reports a process it ended. */
static int remote_exit_interrupted(void)
{
    return remote_interrupted > 0 ? 128 + (int)remote_interrupted : REMOTE_EXIT_INTERRUPTED;
}

static const char remote_usage_text[] =
    "usage: hamel remote [--url URL] [--token T] [--progress|--no-progress] COMMAND ...\n"
    "  run FILE [--csv|--json] [-o OUT]   simulate a case file or a simulation request\n"
    "  check FILE [--json]                validate the model of FILE (text; --json: the summary)\n"
    "  gamma FILE [--q name=v,...] [--t T] [--qdot name=v,...] [--json]\n"
    "                                     Hamel coefficients at a configuration (nonlinear\n"
    "                                     constraints: the initial qdot or speeds, --qdot on top)\n"
    "  equations FILE [--form F] [--json] the derived equations of the model of FILE (text), or\n"
    "                                     a form F (hamel|appell|kane|maggi|voronec) as JSON\n"
    "  linearize FILE [-o OUT]            A, B and the eigenvalues ({\"model\", \"linearize\": {...}}\n"
    "                                     or a /v1/linearize request)\n"
    "  evaluate FILE [-o OUT]             q', u', q'', multipliers ({\"model\", \"evaluate\": {...}}\n"
    "                                     or a /v1/evaluate request)\n"
    "  batch FILE [--json] [-o OUT]       a batch ({\"model\"|\"model_id\", \"base\"?, \"runs\"}, or a case\n"
    "                                     file with \"runs\"): one NDJSON line per run, in index order\n"
    "  job ID [--wait] [--csv|--json] [-o OUT]\n"
    "                                     a job's status (or, with --wait, its result)\n"
    "  cancel ID                          cancel a queued or running job\n"
    "  quarantine [--json]                the models quarantined after their engine work\n"
    "                                     crashed: id, name, signal, operation, since, until\n"
    "  quarantine clear ID                clear a model's quarantine (it is run again)\n"
    "URL defaults to $HAMEL_URL, then " HAMELCLIENT_DEFAULT_URL "; T to $HAMEL_TOKEN.\n"
    "CSV columns: t, the coordinates, the speeds, then q' of each coordinate as name'\n"
    "(a multipliers run: then lambda_<constraint>).\n"
    "A wait longer than a second shows its progress on standard error when that is a\n"
    "terminal (--progress: always, a line a second when it is not; --no-progress: never).\n"
    "Exit status: 0 ok, 1 the service refused the request or a run failed (its problem on\n"
    "standard error: a line, or with --json the problem document), or FILE is not\n"
    "JSON, 2 usage (bad arguments, a FILE that cannot be read), 3 transport (no answer, or\n"
    "not the API's), 130 interrupted by Ctrl-C (143 by SIGTERM, 129 by SIGHUP): the job or\n"
    "batch waited for is cancelled.\n";

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
    a->progress = -1;
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
        else if (strcmp(s, "--qdot") == 0)
            slot = &a->qdot;
        else if (strcmp(s, "--form") == 0)
            slot = &a->form;
        else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0)
            a->help = 1;
        else if (strcmp(s, "--csv") == 0)
            a->csv = 1;
        else if (strcmp(s, "--json") == 0)
            a->json = 1;
        else if (strcmp(s, "--wait") == 0)
            a->wait = 1;
        else if (strcmp(s, "--progress") == 0)
            a->progress = 1;
        else if (strcmp(s, "--no-progress") == 0)
            a->progress = 0;
        else if (strncmp(s, "--url=", 6) == 0)
            a->url = s + 6;
        else if (strncmp(s, "--token=", 8) == 0)
            a->token = s + 8;
        else if (strncmp(s, "--q=", 4) == 0)
            a->q = s + 4;
        else if (strncmp(s, "--t=", 4) == 0)
            a->t = s + 4;
        else if (strncmp(s, "--qdot=", 7) == 0)
            a->qdot = s + 7;
        else if (strncmp(s, "--form=", 7) == 0)
            a->form = s + 7;
        else if (strncmp(s, "--output=", 9) == 0)
            a->out = s + 9;
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

/* --json was given: a refusal is printed as its problem document, as the local commands
 * print it (and `check --json` did), not as lines. */
static int remote_json_problems;

/* Prints the error of a failed call, with every entry of its problem's "errors" (with
 * --json, the problem document itself). */
static int remote_fail(hamelclient *c, const char *what, int rc, const hamelclient_error *err)
{
    char line[2 * HAMELCLIENT_TEXT_MAX];
    const json_t *doc = hamelclient_last_problem(c);
    if (remote_json_problems && json_is_object(doc) &&
        (rc == HAMELCLIENT_E_PROBLEM || rc == HAMELCLIENT_E_CANCELLED)) {
        json_dumpf(doc, stderr, JSON_INDENT(2));
        fputc('\n', stderr);
        return remote_exit_for(rc);
    }
    json_t *errors = json_object_get(doc, "errors");
    if (json_array_size(errors) > 1 && (rc == HAMELCLIENT_E_PROBLEM || rc == HAMELCLIENT_E_CANCELLED)) {
        /* the status and the problem's own words, then every error once */
        const char *slug = strrchr(err->type, '/');
        int first =
            err->detail[0] == '\0' || (strstr(err->detail, err->path) && strstr(err->detail, err->reason));
        fprintf(stderr, "hamel remote: %s: %d %s: %s\n", what, err->status,
                slug != NULL ? slug + 1 : err->type, first ? err->title : err->detail);
    } else
        fprintf(stderr, "hamel remote: %s: %s\n", what, hamelclient_error_string(err, line, sizeof line));
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

/* The exit status of the last remote_load that failed: 2 (usage) for a FILE that cannot
 * be read, 1 for one that is read and refused (not JSON, not an object), as `hamel run`. */
static int remote_load_code = REMOTE_EXIT_USAGE;

static json_t *remote_load(const char *file)
{
    json_error_t jerr;
    struct stat st;
    remote_load_code = REMOTE_EXIT_USAGE;
    if (strcmp(file, "-") != 0 && stat(file, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "hamel remote: %s is a directory, not a file\n", file);
        return NULL;
    }
    json_t *doc = strcmp(file, "-") == 0 ? json_loadf(stdin, 0, &jerr) : json_load_file(file, 0, &jerr);
    if (doc == NULL && jerr.line > 0) {
        fprintf(stderr, "%s:%d:%d: %s\n", file, jerr.line, jerr.column, jerr.text);
        remote_load_code = REMOTE_EXIT_PROBLEM;
    } else if (doc == NULL) /* not opened or not read: jansson names no line */
        fprintf(stderr, "hamel remote: %s\n", jerr.text);
    else if (!json_is_object(doc)) {
        fprintf(stderr, "%s: not a JSON object\n", file);
        json_decref(doc);
        doc = NULL;
        remote_load_code = REMOTE_EXIT_PROBLEM;
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
        return remote_load_code;
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
    if (job_id != NULL && ui->id[0] == '\0')
        snprintf(ui->id, sizeof ui->id, "%s", job_id);
    double now = remote_now();
    if (!ui->show || now - ui->start < REMOTE_PROGRESS_AFTER_S) {
        /* not yet (or not at all) */
    } else if (!ui->tty) {
        if (now - ui->last_line >= REMOTE_PROGRESS_LINE_S || p >= 1.0) {
            fprintf(stderr, "hamel remote: %s %5.1f%% %s after %.1f s\n", job_id, 100.0 * p, status,
                    now - ui->start);
            ui->last_line = now;
        }
    } else {
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
    if (ui->drawn && ui->tty)
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

/* Writes a finished result as JSON (compact) or CSV to -o OUT or stdout. */
static int remote_emit_result(const remote_args *a, const json_t *result, const json_t *model)
{
    /* a check that failed is said on standard error, whatever the output */
    hamelclient_warning w[16];
    size_t nw = hamelclient_warnings(result, w, sizeof w / sizeof w[0]);
    for (size_t i = 0; i < nw && i < sizeof w / sizeof w[0]; i++)
        fprintf(stderr, "hamel remote: warning: %s: %s\n", w[i].code, w[i].message);
    if (nw > sizeof w / sizeof w[0])
        fprintf(stderr, "hamel remote: warning: %zu more (see \"warnings\" in the result)\n",
                nw - sizeof w / sizeof w[0]);
    FILE *f = remote_open_out(a->out);
    if (f == NULL)
        return REMOTE_EXIT_USAGE;
    int bad = 0;
    if (a->csv)
        bad = hameltext_csv(f, result, model) != 0;
    else
        remote_print_json(f, result, 1);
    int rc = remote_close_out(f, a->out);
    return bad ? REMOTE_EXIT_TRANSPORT : rc;
}

/* Waits for a job with a progress bar on a terminal; Ctrl-C cancels the job. On
 * success *result holds the result (caller owns it). */
static int remote_wait(hamelclient *c, const remote_args *a, const char *job_id, json_t *started,
                       json_t **result)
{
    remote_ui ui = remote_ui_new(a);
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
        return remote_exit_interrupted();
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
        return remote_load_code;
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
        code = remote_wait(c, a, id ? id : "", started, &result);
    }
    if (code == REMOTE_EXIT_OK)
        code = remote_emit_result(a, result, json_object_get(req, "model"));
    json_decref(result);
    json_decref(started);
    json_decref(req);
    json_decref(doc);
    return code;
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
        if (a->json)
            remote_print_json(stderr, prob, 0);
        else
            hameltext_problem(stderr, file, prob, model, err.status);
        json_decref(doc);
        return REMOTE_EXIT_PROBLEM;
    }
    if (rc != HAMELCLIENT_OK) {
        json_decref(doc);
        return remote_fail(c, file, rc, &err);
    }
    if (a->json)
        remote_print_json(stdout, sum, 0);
    else
        hameltext_summary(stdout, file, sum, created);
    json_decref(sum);
    json_decref(doc);
    return REMOTE_EXIT_OK;
}

/* Parses "name=value,name=value" into `q` (borrowed): finite numbers (JSON has no NaN or
 * Infinity), each name once. Returns 0, or -1 after saying what is wrong. */
static int remote_parse_q(const char *opt, const char *spec, json_t *q)
{
    char *copy = strdup(spec);
    json_t *given = json_object();
    int rc = copy != NULL && given != NULL ? 0 : -1;
    char *save = NULL;
    for (char *item = rc == 0 ? strtok_r(copy, ",", &save) : NULL; item != NULL && rc == 0;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        char *end = NULL;
        double v = eq != NULL ? strtod(eq + 1, &end) : 0.0;
        if (eq == NULL || eq == item || end == eq + 1 || *end != '\0' || !isfinite(v)) {
            fprintf(stderr, "hamel remote: %s takes name=value,... with finite numbers (not '%s')\n", opt,
                    item);
            rc = -1;
            break;
        }
        *eq = '\0';
        if (json_object_get(given, item) != NULL) {
            fprintf(stderr, "hamel remote: %s gives %s twice\n", opt, item);
            rc = -1;
            break;
        }
        json_object_set_new(given, item, json_true());
        json_object_set_new(q, item, json_real(v));
    }
    json_decref(given);
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
    if (a->q != NULL && remote_parse_q("--q", a->q, json_object_get(req, "q")) != 0)
        code = REMOTE_EXIT_USAGE;
    /* nonlinear constraints: the initial velocities, --qdot over the initial qdot (the
     * service refuses speeds, or a qdot off the constraints, that leave several q') */
    json_t *qdot = json_is_object(json_object_get(init, "qdot")) ? json_copy(json_object_get(init, "qdot"))
                                                                 : json_object();
    if (code == REMOTE_EXIT_OK && a->qdot != NULL && remote_parse_q("--qdot", a->qdot, qdot) != 0)
        code = REMOTE_EXIT_USAGE;
    if (a->qdot != NULL || json_object_size(qdot) > 0)
        json_object_set(req, "qdot", qdot);
    else if (json_is_object(json_object_get(init, "speeds")))
        json_object_set(req, "speeds", json_object_get(init, "speeds"));
    json_decref(qdot);
    if (code == REMOTE_EXIT_OK && a->t != NULL) {
        char *end = NULL;
        double t = strtod(a->t, &end);
        if (end == a->t || *end != '\0' || !isfinite(t))
            code = remote_usage("--t wants a finite number");
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
        rc = hamelclient_equations_form(c, json_string_value(json_object_get(sum, "model_id")), a->form, &eq,
                                        &err);
    int code = rc == HAMELCLIENT_OK ? REMOTE_EXIT_OK : remote_fail(c, a->pos[1], rc, &err);
    if (code == REMOTE_EXIT_OK && (a->json || a->form != NULL)) /* a form: its document */
        remote_print_json(stdout, eq, 0);
    else if (code == REMOTE_EXIT_OK) {
        json_t *speeds = hameltext_names(json_object_get(sum, "speeds"));
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

/* The request of `hamel remote linearize|evaluate FILE`: the file's "model" (or
 * "model_id") with its `which` member as the request, else the file itself. Returns 0
 * with *req (caller frees) or the exit code. */
static int remote_inner_request(const remote_args *a, const char *which, json_t **req)
{
    char usage[64];
    snprintf(usage, sizeof usage, "%s needs one FILE", which);
    if (a->npos != 2)
        return remote_usage(usage);
    json_t *doc = remote_load(a->pos[1]);
    if (doc == NULL)
        return remote_load_code;
    json_t *inner = json_object_get(doc, which);
    const char *stray = hameltext_stray_member(doc, which);
    if (stray) { /* {"model", "linearize": {...}, "parameters": ...}: it would be left out */
        fprintf(stderr, "hamel remote: %s: %s: beside \"%s\" it is not read: put it inside \"%s\"\n",
                a->pos[1], stray, which, which);
        json_decref(doc);
        return REMOTE_EXIT_PROBLEM;
    }
    if (json_is_object(inner)) {
        *req = json_deep_copy(inner);
        if (json_object_get(doc, "model") != NULL)
            json_object_set(*req, "model", json_object_get(doc, "model"));
        else if (json_object_get(doc, "model_id") != NULL)
            json_object_set(*req, "model_id", json_object_get(doc, "model_id"));
    } else {
        *req = json_incref(doc);
    }
    json_decref(doc);
    if (json_object_get(*req, "model") == NULL && json_object_get(*req, "model_id") == NULL) {
        fprintf(stderr, "%s: needs \"model\" (or \"model_id\") and a \"%s\" request, or to be one\n",
                a->pos[1], which);
        json_decref(*req);
        return REMOTE_EXIT_USAGE;
    }
    return 0;
}

static int remote_linearize_or_evaluate(hamelclient *c, const remote_args *a, const char *which)
{
    json_t *req = NULL, *out = NULL;
    int pre = remote_inner_request(a, which, &req);
    if (pre)
        return pre;
    hamelclient_error err;
    int rc = strcmp(which, "linearize") == 0 ? hamelclient_linearize(c, req, &out, &err)
                                             : hamelclient_evaluate(c, req, &out, &err);
    int code = rc == HAMELCLIENT_OK ? REMOTE_EXIT_OK : remote_fail(c, a->pos[1], rc, &err);
    if (code == REMOTE_EXIT_OK) {
        FILE *f = remote_open_out(a->out);
        if (f == NULL)
            code = REMOTE_EXIT_USAGE;
        else {
            remote_print_json(f, out, 0);
            code = remote_close_out(f, a->out);
        }
    }
    json_decref(out);
    json_decref(req);
    return code;
}

static int remote_linearize(hamelclient *c, const remote_args *a)
{
    return remote_linearize_or_evaluate(c, a, "linearize");
}

static int remote_evaluate(hamelclient *c, const remote_args *a)
{
    return remote_linearize_or_evaluate(c, a, "evaluate");
}

/* hamel remote batch FILE: FILE is a batch request ({"model" | "model_id", "base"?,
 * "runs", "fields"?}) or a case file with "runs" (its "simulation" is the base; other
 * members of the file are left out). Prints
 * each run's line as NDJSON in index order (--json: the whole batch document); exits 1
 * when a run failed or was cancelled. */
static int remote_batch(hamelclient *c, const remote_args *a)
{
    if (a->npos != 2)
        return remote_usage("batch needs one FILE");
    json_t *doc = remote_load(a->pos[1]);
    if (doc == NULL)
        return remote_load_code;
    if (!json_is_array(json_object_get(doc, "runs"))) {
        fprintf(stderr, "%s: a batch needs \"runs\" (and \"model\" or \"model_id\")\n", a->pos[1]);
        json_decref(doc);
        return REMOTE_EXIT_USAGE;
    }
    /* the members of a batch request; a case file's "simulation" is the base */
    json_t *req = json_object();
    static const char *const members[] = {"model", "model_id", "base", "runs", "fields"};
    for (size_t i = 0; i < sizeof members / sizeof *members; i++)
        if (json_object_get(doc, members[i]) != NULL)
            json_object_set(req, members[i], json_object_get(doc, members[i]));
    json_t *sim = json_object_get(doc, "simulation");
    if (json_is_object(sim) && json_object_get(req, "base") == NULL)
        json_object_set(req, "base", sim);
    json_decref(doc);
    remote_ui ui = remote_ui_new(a);
    hamelclient_error err;
    json_t *out = NULL;
    int rc = hamelclient_batch(c, req, remote_progress, &ui, &out, &err);
    remote_progress_end(&ui);
    if (rc == HAMELCLIENT_E_STOPPED) { /* interrupted: what is left of the batch is cancelled */
        fprintf(stderr, "hamel remote: interrupted; cancelling batch %s\n", ui.id);
        hamelclient_batch_cancel(c, ui.id, NULL, &err);
        json_decref(req);
        return remote_exit_interrupted();
    }
    int code = rc == HAMELCLIENT_OK ? REMOTE_EXIT_OK : remote_fail(c, a->pos[1], rc, &err);
    if (code == REMOTE_EXIT_OK) {
        FILE *f = remote_open_out(a->out);
        if (f == NULL)
            code = REMOTE_EXIT_USAGE;
        else {
            if (a->json)
                remote_print_json(f, out, 0);
            else {
                size_t i;
                json_t *line;
                json_array_foreach(json_object_get(out, "results"), i, line) remote_print_json(f, line, 1);
            }
            code = remote_close_out(f, a->out);
        }
        json_int_t bad = json_integer_value(json_object_get(out, "failed")) +
                         json_integer_value(json_object_get(out, "cancelled"));
        if (code == REMOTE_EXIT_OK && bad > 0) {
            fprintf(stderr, "hamel remote: %lld of %lld runs did not finish\n", (long long)bad,
                    (long long)json_integer_value(json_object_get(out, "count")));
            code = REMOTE_EXIT_PROBLEM;
        }
    }
    json_decref(out);
    json_decref(req);
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
        code = remote_wait(c, a, a->pos[1], job, &result);
        if (code == REMOTE_EXIT_OK)
            code = remote_emit_result(a, result, NULL);
        json_decref(result);
    } else if (a->csv && json_object_get(job, "trajectory") == NULL) { /* queued, running, failed */
        const char *st = remote_str(job, "status", "?");
        int pending = strcmp(st, "queued") == 0 || strcmp(st, "running") == 0;
        fprintf(stderr, "hamel remote: job %s is %s: no trajectory to write%s\n", a->pos[1], st,
                pending ? " (--wait waits for it)" : "");
        code = REMOTE_EXIT_PROBLEM;
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

/* hamel remote quarantine [--json]: one line per quarantined model (id, name, signal,
 * operation, since, until; "-" for what its record lacks), or the service's document. */
static int remote_quarantine_list(hamelclient *c, const remote_args *a)
{
    hamelclient_error err;
    json_t *doc = NULL;
    int rc = hamelclient_quarantine(c, &doc, &err);
    if (rc != HAMELCLIENT_OK)
        return remote_fail(c, "quarantine", rc, &err);
    json_t *list = json_object_get(doc, "quarantined");
    if (a->json)
        remote_print_json(stdout, doc, 0);
    else if (json_array_size(list) == 0)
        printf("no model is quarantined\n");
    else {
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e)
        {
            static const char *const fields[] = {"model_id",  "model_name",     "signal",
                                                 "operation", "quarantined_at", "quarantined_until"};
            for (size_t k = 0; k < sizeof fields / sizeof *fields; k++)
                printf("%s%s", k ? "  " : "", remote_str(e, fields[k], "-"));
            putchar('\n');
        }
    }
    if (json_is_true(json_object_get(doc, "truncated")))
        fprintf(stderr, "hamel remote: more models are quarantined than the service lists (%zu shown)\n",
                json_array_size(list));
    json_decref(doc);
    return REMOTE_EXIT_OK;
}

/* hamel remote quarantine clear ID */
static int remote_quarantine_clear(hamelclient *c, const remote_args *a)
{
    hamelclient_error err;
    int rc = hamelclient_quarantine_clear(c, a->pos[2], &err);
    if (rc != HAMELCLIENT_OK)
        return remote_fail(c, a->pos[2], rc, &err);
    printf("cleared %s\n", a->pos[2]);
    return REMOTE_EXIT_OK;
}

static int remote_quarantine(hamelclient *c, const remote_args *a)
{
    if (a->npos == 1)
        return remote_quarantine_list(c, a);
    if (a->npos == 3 && strcmp(a->pos[1], "clear") == 0)
        return remote_quarantine_clear(c, a);
    return remote_usage("quarantine takes nothing (the list) or clear ID");
}

int hamelclient_remote_main(int argc, char **argv)
{
    remote_args a;
    if (remote_parse(argc, argv, &a) != 0)
        return remote_usage(NULL);
    remote_json_problems = a.json;
    int help = a.help || (a.npos > 0 && strcmp(a.pos[0], "help") == 0);
    if (help && (a.npos == 0 || strcmp(a.pos[0], "help") == 0)) {
        fputs(remote_usage_text, stdout);
        return REMOTE_EXIT_OK;
    }
    if (a.npos == 0)
        return remote_usage(NULL);
    static const struct {
        const char *name;
        int (*fn)(hamelclient *, const remote_args *);
    } commands[] = {
        {"run", remote_run},
        {"check", remote_check},
        {"gamma", remote_gamma},
        {"equations", remote_equations},
        {"job", remote_job},
        {"cancel", remote_cancel},
        {"linearize", remote_linearize},
        {"evaluate", remote_evaluate},
        {"batch", remote_batch},
        {"quarantine", remote_quarantine},
    };
    int (*fn)(hamelclient *, const remote_args *) = NULL;
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(a.pos[0], commands[i].name) == 0)
            fn = commands[i].fn;
    if (fn == NULL) {
        fprintf(stderr, "hamel remote: unknown command %s\n", a.pos[0]);
        return remote_usage(NULL);
    }
    if (help) { /* hamel remote CMD --help */
        fputs(remote_usage_text, stdout);
        return REMOTE_EXIT_OK;
    }
    if (a.form != NULL && fn != remote_equations) {
        fprintf(stderr, "hamel remote: --form belongs to equations\n");
        return remote_usage(NULL);
    }
    hamelclient_options opts = {.token = a.token};
    hamelclient *c = NULL;
    int rc = hamelclient_new(a.url, &opts, &c);
    if (rc == HAMELCLIENT_E_USAGE) {
        fprintf(
            stderr,
            "hamel remote: cannot use the URL %s or the token: the URL is http://host[:port] or https://... "
            "(no ?query, no #fragment), the token printable characters without spaces\n",
            a.url && a.url[0] ? a.url : "$HAMEL_URL");
        return REMOTE_EXIT_USAGE;
    }
    if (rc != HAMELCLIENT_OK) {
        fprintf(stderr, "hamel remote: cannot create a client for %s (%s)\n", a.url ? a.url : "$HAMEL_URL",
                hamelclient_kind_name(rc));
        return rc == HAMELCLIENT_E_USAGE ? REMOTE_EXIT_USAGE : REMOTE_EXIT_TRANSPORT;
    }
    /* Ctrl-C, SIGTERM (a timeout, a CI runner) and SIGHUP (the terminal closed) end a
     * wait at its next answer and cancel what was waited for */
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa, old[sizeof sigs / sizeof *sigs];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = remote_on_signal;
    sigemptyset(&sa.sa_mask);
    remote_interrupted = 0;
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        sigaction(sigs[i], NULL, &old[i]);
        if (old[i].sa_handler != SIG_IGN) /* nohup's SIGHUP, a background job's SIGINT: kept ignored */
            sigaction(sigs[i], &sa, NULL);
    }
    int code = fn(c, &a);
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        sigaction(sigs[i], &old[i], NULL);
    hamelclient_free(c);
    return code;
}
