/* hamel.c — the command-line program: the engine on files; `hamel remote` execs the
 * remote client (cli/hamel-remote.c) so that a local run does not load libcurl.
 *
 * One table (cli_commands) holds every subcommand: its name, its help text, the options
 * it takes and its function. The options are parsed once, anywhere on the line, into a
 * cli_args; an option a subcommand does not take is a usage error naming it.
 *
 * Exit status (hamel --help, README): 0 ok; 1 the input was refused (its problem
 * document, or for `check` its text, on standard error: a file that is not JSON, an
 * invalid model or request, a failed run); 2 usage; 3 `remote` found no answer (or
 * hamel-remote itself is missing); 130 interrupted.
 */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "hameltext.h"
#include "jsonout.h"
#include "problems.h"

#define CLI_REMOTE_PROGRAM "hamel-remote"
#define CLI_PROGRESS_AFTER_S 1.0 /* a run shows progress once it has taken this long */
#define CLI_PROGRESS_TICK_S 0.1  /* redraw interval on a terminal */
#define CLI_PROGRESS_LINE_S 1.0  /* one line per interval when standard error is not one */
#define CLI_BAR_WIDTH 30

enum { CLI_EXIT_OK = 0, CLI_EXIT_PROBLEM = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_TRANSPORT = 3 };

/* Options a subcommand may take (cli_command.opts). */
enum {
    CLI_OPT_OUT = 1 << 0,      /* -o FILE */
    CLI_OPT_CSV = 1 << 1,      /* --csv */
    CLI_OPT_JSON = 1 << 2,     /* --json */
    CLI_OPT_PROGRESS = 1 << 3, /* --progress, --no-progress */
    CLI_OPT_Q = 1 << 4,        /* --q name=value,... */
    CLI_OPT_T = 1 << 5,        /* --t T */
    CLI_OPT_FORM = 1 << 6,     /* --form F */
    CLI_OPT_LANG = 1 << 7,     /* --lang c|python */
    CLI_OPT_BUDGET = 1 << 8,   /* --max-compile-seconds S (every subcommand) */
    CLI_OPT_QDOT = 1 << 9      /* --qdot name=value,... */
};

/* The engine limits of this run: the engine's, with --max-compile-seconds. */
static engine_limits cli_limits;

typedef struct cli_args {
    const char *file, *out, *q, *t, *form, *lang, *qdot;
    int csv, json;
    int progress; /* -1: when standard error is a terminal; 0 never; 1 always */
} cli_args;

typedef struct cli_command {
    const char *name;
    const char *help; /* usage line(s), then what it does */
    unsigned opts;
    int (*fn)(const cli_args *a);
} cli_command;

static const char cli_file_help[] =
    "FILE: a model, a simulation request with \"model\", or a case file with \"model\" and\n"
    "\"simulation\" (as in ../shared/cases); - reads standard input.\n";

static const char cli_budget_help[] =
    "--max-compile-seconds S: the compile budget, S seconds of CPU time to compile the model,\n"
    "derive a form (equations --form) or answer linearize or evaluate (and, for steady, 5 x S\n"
    "for the whole search); past it, or past 4 x S of wall-clock time, the compile-limit\n"
    "problem. Default 2 (the server's HAMEL_MAX_COMPILE_SECONDS); 0: none.\n";

static const char cli_exit_help[] =
    "Exit status: 0 ok; 1 the input was refused (a file that is not JSON, an invalid model or\n"
    "request, a failed run: the problem document on standard error, or for check its text);\n"
    "2 usage (unknown command or option, missing FILE); 3 remote: no answer from the server;\n"
    "130 interrupted.\n";

/* ---- output --------------------------------------------------------------------------- */

/* Opens -o OUT (NULL or "-": standard output); NULL after a message when it cannot. */
static FILE *cli_open_out(const char *out)
{
    if (out == NULL || strcmp(out, "-") == 0)
        return stdout;
    FILE *f = fopen(out, "w");
    if (f == NULL)
        perror(out);
    return f;
}

/* Flushes or closes what cli_open_out opened; returns the exit status. */
static int cli_close_out(FILE *f, const char *out)
{
    int bad = ferror(f);
    bad |= f == stdout ? fflush(f) != 0 : fclose(f) != 0;
    if (bad) {
        fprintf(stderr, "hamel: writing %s failed\n", out && strcmp(out, "-") ? out : "standard output");
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

static void cli_dump(FILE *f, const json_t *j)
{
    size_t len = 0;
    char *text = jsonout_dumps_indent(j, 1, &len);
    if (text) {
        fwrite(text, 1, len, f);
        free(text);
    } else {
        json_dumpf(j, f, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    }
    fputc('\n', f);
}

/* Prints `j` (consumed) as indented JSON to -o OUT or standard output. */
static int cli_print(const cli_args *a, json_t *j)
{
    FILE *f = cli_open_out(a->out);
    int rc = CLI_EXIT_USAGE;
    if (f != NULL) {
        cli_dump(f, j);
        rc = cli_close_out(f, a->out);
    }
    json_decref(j);
    return rc;
}

/* What a one-shot command holds when its output is written: left to the process's
 * exit, which returns the memory at once, instead of freeing the model (its libtcc
 * state) and the result tree piece by piece. Kept reachable from here, so a leak
 * checker (ASan's, valgrind's) does not count them as leaks. */
static struct {
    engine_model *volatile model; /* volatile: stores nobody reads are not dropped */
    json_t *volatile doc;
} cli_kept;

static void cli_keep_model(engine_model *m) { cli_kept.model = m; }

/* cli_print, the document kept until exit (cli_kept). */
static int cli_print_kept(const cli_args *a, json_t *j)
{
    cli_kept.doc = json_incref(j);
    return cli_print(a, j);
}

/* Prints a problem document (consumed) on standard error; returns 1. */
static int cli_fail(json_t *problem)
{
    json_dumpf(problem, stderr, JSON_INDENT(2));
    fputc('\n', stderr);
    json_decref(problem);
    return CLI_EXIT_PROBLEM;
}

/* ---- input ---------------------------------------------------------------------------- */

/* The JSON document in the file at path, read whole and parsed from memory (jansson
 * reads a FILE a character at a time through getc), or NULL with *err set. A file that
 * cannot be opened or read goes to json_load_file, so its error text stays jansson's. */
static json_t *cli_load_file(const char *path, json_error_t *err)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    if (f && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        buf = malloc((size_t)st.st_size);
        len = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    }
    int whole = buf && len == (size_t)st.st_size && getc(f) == EOF && !ferror(f);
    if (f)
        fclose(f);
    json_t *doc = whole ? json_loadb(buf, len, 0, err) : json_load_file(path, 0, err);
    free(buf);
    return doc;
}

/* Set by `check` without --json: a FILE that cannot be read or is not JSON is said as text,
 * "FILE:LINE:COLUMN: reason" (as `hamel remote` says it), not as a problem document. */
static int cli_text_problems;

/* Reads FILE ("-": standard input) as JSON into *doc (caller frees); returns 0, or
 * reports the parse error (file:line, column) and returns cli_fail()'s status. */
static int cli_load_doc(const char *path, json_t **doc)
{
    json_error_t err;
    struct stat st;
    if (cli_text_problems) {
        if (strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            fprintf(stderr, "hamel: %s is a directory, not a file\n", path);
            *doc = NULL;
            return CLI_EXIT_PROBLEM;
        }
        *doc = strcmp(path, "-") == 0 ? json_loadf(stdin, 0, &err) : cli_load_file(path, &err);
        if (*doc)
            return 0;
        if (err.line > 0)
            fprintf(stderr, "%s:%d:%d: %s\n", path, err.line, err.column, err.text);
        else /* not opened or not read: no line to name */
            fprintf(stderr, "hamel: %s\n", err.text);
        return CLI_EXIT_PROBLEM;
    }
    if (strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        json_t *p = hamel_problem_new(HAMEL_E_BAD_JSON, "FILE is a directory, not a file");
        hamel_problem_add(p, path, -1, "a directory, not a file");
        *doc = NULL;
        return cli_fail(p);
    }
    *doc = strcmp(path, "-") == 0 ? json_loadf(stdin, 0, &err) : cli_load_file(path, &err);
    if (*doc)
        return 0;
    json_t *p = hamel_problem_new(HAMEL_E_BAD_JSON, err.text);
    char where[64];
    if (err.line > 0)
        snprintf(where, sizeof where, "%.50s:%d", path, err.line);
    else /* not opened or not read: no line to name */
        snprintf(where, sizeof where, "%.50s", path);
    hamel_problem_add(p, where, err.column, err.text);
    return cli_fail(p);
}

/* Loads FILE and splits it into the model and the request (which may be NULL). */
static int cli_load(const char *path, json_t **model, json_t **request)
{
    json_t *doc = NULL;
    int lrc = cli_load_doc(path, &doc);
    if (lrc)
        return lrc;
    json_t *m = json_object_get(doc, "model");
    json_t *sim = json_object_get(doc, "simulation");
    if (!m && json_object_get(doc, "model_id") && !json_object_get(doc, "coordinates")) {
        /* a request naming its model by id: only a server knows the id */
        json_t *p = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
        hamel_problem_add(p, "model_id", -1,
                          "the local commands need the model itself (\"model\"): a model id is known to a "
                          "server (hamel remote)");
        json_decref(doc);
        return cli_fail(p);
    }
    if (m && sim) { /* a case file */
        *model = json_incref(m);
        *request = json_incref(sim);
    } else if (m) { /* a request with its model */
        *model = json_incref(m);
        *request = json_incref(doc);
    } else { /* a bare model */
        *model = json_incref(doc);
        *request = NULL;
    }
    json_decref(doc);
    return 0;
}

/* Loads and compiles FILE's model; *request (caller frees, may be NULL) is the rest, and
 * *model_doc, when model_doc is not NULL, the model's JSON (caller frees). */
static int cli_compile(const char *path, engine_model **out, json_t **request, json_t **model_doc)
{
    json_t *model = NULL, *problem = NULL;
    *request = NULL;
    if (cli_load(path, &model, request))
        return CLI_EXIT_PROBLEM;
    int rc = engine_model_compile(model, &cli_limits, out, &problem);
    if (rc) {
        json_decref(model);
        json_decref(*request);
        return cli_fail(problem);
    }
    if (model_doc)
        *model_doc = model;
    else
        json_decref(model);
    return 0;
}

/* ---- progress ------------------------------------------------------------------------- */

/* A thread that draws a run's progress on standard error once it has taken
 * CLI_PROGRESS_AFTER_S: a bar redrawn in place on a terminal, else a line a second.
 * Lock order: only `mu`, never held while the engine runs. */
typedef struct cli_progress {
    engine_control *ctl;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done; /* under mu */
    int tty;
    int drawn;
    struct timespec start;
} cli_progress;

static double cli_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void cli_progress_draw(cli_progress *p, double frac)
{
    frac = frac < 0 ? 0 : (frac > 1 ? 1 : frac);
    double s = cli_since(&p->start);
    if (p->tty) {
        static const char hashes[] = "##############################";
        int fill = (int)(frac * CLI_BAR_WIDTH + 0.5);
        fprintf(stderr, "\rhamel run [%.*s%*s] %5.1f%% %6.1f s", fill, hashes, CLI_BAR_WIDTH - fill, "",
                100.0 * frac, s);
    } else {
        fprintf(stderr, "hamel run: %5.1f%% after %.1f s\n", 100.0 * frac, s);
    }
    fflush(stderr);
    p->drawn = 1;
}

static void *cli_progress_main(void *arg)
{
    cli_progress *p = arg;
    double tick = p->tty ? CLI_PROGRESS_TICK_S : CLI_PROGRESS_LINE_S;
    double next = CLI_PROGRESS_AFTER_S;
    pthread_mutex_lock(&p->mu);
    while (!p->done) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double wait = next - cli_since(&p->start);
        if (wait > 0) {
            long ns = until.tv_nsec + (long)((wait - (double)(long)wait) * 1e9);
            until.tv_sec += (time_t)wait + ns / 1000000000L;
            until.tv_nsec = ns % 1000000000L;
            pthread_cond_timedwait(&p->cv, &p->mu, &until);
            continue;
        }
        cli_progress_draw(p, atomic_load(&p->ctl->progress));
        next += tick;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- subcommands ---------------------------------------------------------------------- */

static int cmd_run(const cli_args *a)
{
    engine_model *m;
    json_t *req, *result = NULL, *problem = NULL, *model_doc = NULL;
    if (cli_compile(a->file, &m, &req, &model_doc))
        return CLI_EXIT_PROBLEM;
    if (!req) {
        json_decref(model_doc);
        engine_model_release(m);
        return cli_fail(hamel_problem_new(HAMEL_E_BAD_REQUEST, "the file has no simulation request"));
    }
    engine_control ctl;
    memset(&ctl, 0, sizeof ctl);
    atomic_init(&ctl.cancel, 0);
    atomic_init(&ctl.progress, 0.0);
    cli_progress prog = {.ctl = &ctl, .tty = isatty(STDERR_FILENO)};
    pthread_t th;
    int show = a->progress > 0 || (a->progress < 0 && prog.tty);
    if (show) {
        clock_gettime(CLOCK_MONOTONIC, &prog.start);
        pthread_mutex_init(&prog.mu, NULL);
        pthread_cond_init(&prog.cv, NULL);
        show = pthread_create(&th, NULL, cli_progress_main, &prog) == 0;
    }
    int rc = engine_simulate(m, req, NULL, &ctl, &result, &problem);
    if (show) {
        pthread_mutex_lock(&prog.mu);
        prog.done = 1;
        pthread_cond_signal(&prog.cv);
        pthread_mutex_unlock(&prog.mu);
        pthread_join(th, NULL);
        if (prog.drawn) {
            cli_progress_draw(&prog, rc ? atomic_load(&ctl.progress) : 1.0);
            if (prog.tty)
                fputc('\n', stderr);
        }
        pthread_cond_destroy(&prog.cv);
        pthread_mutex_destroy(&prog.mu);
    }
    json_decref(req);
    if (rc) {
        engine_model_release(m);
        json_decref(model_doc);
        return cli_fail(problem);
    }
    cli_keep_model(m);
    json_object_set_new(result, "status", json_string("done"));
    json_object_set_new(result, "cached", json_false());
    hameltext_warnings(stderr, "hamel", result); /* a check that failed, said in words */
    if (!a->csv) {
        json_decref(model_doc);
        return cli_print_kept(a, result);
    }
    FILE *f = cli_open_out(a->out);
    int code = CLI_EXIT_USAGE;
    if (f != NULL) {
        code = hameltext_csv(f, result, model_doc) == 0 ? CLI_EXIT_OK : CLI_EXIT_PROBLEM;
        int c2 = cli_close_out(f, a->out);
        code = code ? code : c2;
    }
    json_decref(model_doc);
    json_decref(result);
    return code;
}

static int cmd_check(const cli_args *a)
{
    json_t *model = NULL, *req = NULL, *problem = NULL;
    cli_text_problems = !a->json;
    if (cli_load(a->file, &model, &req))
        return CLI_EXIT_PROBLEM;
    json_decref(req);
    engine_model *m = NULL;
    int rc = engine_model_compile(model, &cli_limits, &m, &problem);
    if (rc) {
        if (a->json) {
            json_decref(model);
            return cli_fail(problem);
        }
        hameltext_problem(stderr, a->file, problem, model, 0);
        json_decref(problem);
        json_decref(model);
        return CLI_EXIT_PROBLEM;
    }
    json_decref(model);
    json_t *s = engine_model_summary(m);
    engine_model_release(m);
    if (a->json)
        return cli_print(a, s);
    FILE *f = cli_open_out(a->out);
    int code = CLI_EXIT_USAGE;
    if (f != NULL) {
        hameltext_summary(f, a->file, s, -1);
        code = cli_close_out(f, a->out);
    }
    json_decref(s);
    return code;
}

static int cmd_equations(const cli_args *a)
{
    engine_model *m;
    json_t *req, *eq, *problem;
    if (cli_compile(a->file, &m, &req, NULL))
        return CLI_EXIT_PROBLEM;
    json_decref(req);
    /* a form's derivation under the compile budget, as the server's (it had none here:
     * the Kane form of a 3000-deep x^(x^(...)) ran for minutes) */
    int rc = a->form ? engine_equations_form_ctl(m, a->form, &cli_limits, NULL, &eq, &problem)
                     : engine_equations(m, &eq, &problem);
    engine_model_release(m);
    return rc ? cli_fail(problem) : cli_print(a, eq);
}

/* A whole-string finite number, or -1 (nan, inf and 1e999 are not numbers a request can
 * hold: JSON has no NaN or Infinity). */
static int cli_number(const char *s, double *out)
{
    char *end = NULL;
    *out = strtod(s, &end);
    return end == s || *end != '\0' || !isfinite(*out) ? -1 : 0;
}

/* Parses "name=value,name=value" (the value of `opt`) into `q` (borrowed). Returns 0, or
 * -1 after a message. */
static int cli_parse_q(const char *opt, const char *spec, json_t *q)
{
    char *list = strdup(spec);
    json_t *given = json_object(); /* the names of this option, each once */
    int rc = list && given ? 0 : -1;
    for (char *save = NULL, *tok = list ? strtok_r(list, ",", &save) : NULL; tok && rc == 0;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        double v;
        if (!eq || eq == tok || cli_number(eq + 1, &v)) {
            fprintf(stderr, "hamel gamma: %s takes name=value,... with finite numbers (not '%s')\n", opt,
                    tok);
            rc = -1;
        } else {
            *eq = '\0';
            if (json_object_get(given, tok) != NULL) {
                fprintf(stderr, "hamel gamma: %s gives %s twice\n", opt, tok);
                rc = -1;
            } else {
                json_object_set_new(given, tok, json_true());
                json_object_set_new(q, tok, json_real(v));
            }
        }
    }
    json_decref(given);
    free(list);
    return rc;
}

/* hamel gamma FILE [--q a=1,b=2] [--t T] [--qdot a=1,...]: q defaults to the request's
 * initial q; a name that is not a coordinate is refused by the engine (q.NAME). With
 * nonlinear constraints the velocities are the initial ones (qdot or speeds), or --qdot
 * over the initial qdot: a qdot off the constraints at q counts as its speeds, and speeds
 * that leave several roots for q' are refused with the roots named (the engine). */
static int cmd_gamma(const cli_args *a)
{
    engine_model *m;
    json_t *req, *result, *problem;
    if (cli_compile(a->file, &m, &req, NULL))
        return CLI_EXIT_PROBLEM;
    json_t *q = json_object();
    double t = 0.0;
    json_t *init = req ? json_object_get(req, "initial") : NULL;
    if (init) {
        json_object_update(q, json_object_get(init, "q"));
        if (json_is_number(json_object_get(init, "t")))
            t = json_number_value(json_object_get(init, "t"));
    }
    json_t *qdot = json_object();
    if (init && json_is_object(json_object_get(init, "qdot")))
        json_object_update(qdot, json_object_get(init, "qdot"));
    int bad = (a->q && cli_parse_q("--q", a->q, q)) || (a->qdot && cli_parse_q("--qdot", a->qdot, qdot));
    if (!bad && a->t && cli_number(a->t, &t)) {
        fprintf(stderr, "hamel gamma: --t takes a finite number (not '%s')\n", a->t);
        bad = 1;
    }
    if (bad) {
        json_decref(q);
        json_decref(qdot);
        json_decref(req);
        engine_model_release(m);
        return CLI_EXIT_USAGE;
    }
    json_t *hreq = json_pack("{s:f, s:o}", "t", t, "q", q);
    if (a->qdot || (init && json_object_get(init, "qdot"))) /* velocity-dependent coefficients (nonlinear) */
        json_object_set(hreq, "qdot", qdot);
    else if (init && json_object_get(init, "speeds"))
        json_object_set(hreq, "speeds", json_object_get(init, "speeds"));
    json_decref(qdot);
    if (req && json_object_get(req, "parameters"))
        json_object_set(hreq, "parameters", json_object_get(req, "parameters"));
    json_decref(req);
    int rc = engine_hamel(m, hreq, NULL, &result, &problem);
    json_decref(hreq);
    engine_model_release(m);
    return rc ? cli_fail(problem) : cli_print(a, result);
}

/* hamel linearize FILE / hamel evaluate FILE: the file's "model" with its "linearize"
 * (or "evaluate") member as the request, else the file itself as the request. */
static int cmd_lin(const cli_args *a, const char *which)
{
    json_t *doc = NULL;
    int lrc = cli_load_doc(a->file, &doc);
    if (lrc)
        return lrc;
    json_t *model = json_object_get(doc, "model"), *inner = json_object_get(doc, which);
    json_t *r = inner ? inner : doc;
    const char *stray = hameltext_stray_member(doc, which);
    if (stray) { /* {"model", "linearize": {...}, "parameters": ...}: it would be left out */
        char why[160];
        snprintf(why, sizeof why, "beside \"%s\" it is not read: put it inside \"%s\"", which, which);
        json_t *p = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
        hamel_problem_add(p, stray, -1, why);
        json_decref(doc);
        return cli_fail(p);
    }
    if (!json_is_object(model) || !json_is_object(r)) {
        json_decref(doc);
        char why[160];
        snprintf(why, sizeof why, "the file needs \"model\" and a \"%s\" request (or to be one)", which);
        return cli_fail(hamel_problem_new(HAMEL_E_BAD_REQUEST, why));
    }
    engine_model *m = NULL;
    json_t *result = NULL, *problem = NULL;
    int rc = engine_model_compile(model, &cli_limits, &m, &problem);
    if (rc == 0)
        rc = !strcmp(which, "evaluate") ? engine_evaluate(m, r, &cli_limits, &result, &problem)
             : !strcmp(which, "steady") ? engine_steady(m, r, &cli_limits, NULL, &result, &problem)
                                        : engine_linearize(m, r, &cli_limits, NULL, &result, &problem);
    json_decref(doc);
    engine_model_release(m);
    return rc ? cli_fail(problem) : cli_print(a, result);
}

static int cmd_linearize(const cli_args *a) { return cmd_lin(a, "linearize"); }

static int cmd_evaluate(const cli_args *a) { return cmd_lin(a, "evaluate"); }

static int cmd_steady(const cli_args *a) { return cmd_lin(a, "steady"); }

/* hamel export FILE [--lang c|python] [-o OUT]: the generated source (engine_code). */
static int cmd_export(const cli_args *a)
{
    engine_model *m;
    json_t *req, *problem = NULL;
    char *text = NULL;
    size_t len = 0;
    if (cli_compile(a->file, &m, &req, NULL))
        return CLI_EXIT_PROBLEM;
    int rc = engine_code(m, req, a->lang ? a->lang : "c", NULL, &text, &len, &problem);
    json_decref(req);
    engine_model_release(m);
    if (rc)
        return cli_fail(problem);
    FILE *f = cli_open_out(a->out);
    int code = CLI_EXIT_USAGE;
    if (f != NULL) {
        fwrite(text, 1, len, f);
        code = cli_close_out(f, a->out);
    }
    free(text);
    return code;
}

static const cli_command cli_commands[] = {
    {"run",
     "usage: hamel run FILE [--csv|--json] [-o OUT] [--progress|--no-progress]\n"
     "Simulates FILE (a case file, or a simulation request with \"model\") and prints the result\n"
     "JSON, or with --csv its trajectory: t, the coordinates, the speeds, then each coordinate's\n"
     "rate as name' (a multipliers run: then lambda_<constraint>). -o OUT writes to OUT. A run\n"
     "longer than a second shows its progress on standard error when that is a terminal\n"
     "(--progress: always, a line a second when it is not; --no-progress: never). A check that\n"
     "failed (energy expected conserved but drifting, a constraint not kept) is printed on\n"
     "standard error as \"hamel: warning: CODE: ...\" and listed under \"warnings\" in the result.\n",
     CLI_OPT_OUT | CLI_OPT_CSV | CLI_OPT_JSON | CLI_OPT_PROGRESS, cmd_run},
    {"check",
     "usage: hamel check FILE [--json] [-o OUT]\n"
     "Validates and compiles the model of FILE and prints its summary as text (n, m, dof, the\n"
     "coordinates, speeds and constraints), or with --json the summary document (API.md 2).\n"
     "An invalid model: each error's path, column and reason on standard error, with the\n"
     "expression and a caret under the column; a FILE that is not JSON: FILE:LINE:COLUMN: and\n"
     "the reason (--json: the problem document).\n",
     CLI_OPT_OUT | CLI_OPT_JSON, cmd_check},
    {"gamma",
     "usage: hamel gamma FILE [--q name=value,...] [--t T] [--qdot name=value,...] [--json] [-o OUT]\n"
     "Prints the Hamel coefficients (API.md 4) at the configuration of FILE's initial state,\n"
     "with --q and --t on top. A name in --q that is not a coordinate is an error. With\n"
     "nonlinear constraints the coefficients depend on q': the initial qdot (or speeds), with\n"
     "--qdot on top, chooses it; speeds that leave several q' at this configuration (a qdot\n"
     "off its constraints counts as its speeds) are refused with the roots named: give one as\n"
     "--qdot. The numbers must be finite, each name given once. The output is JSON (--json, as\n"
     "`hamel remote gamma` takes it, changes nothing).\n",
     CLI_OPT_OUT | CLI_OPT_JSON | CLI_OPT_Q | CLI_OPT_T | CLI_OPT_QDOT, cmd_gamma},
    {"equations",
     "usage: hamel equations FILE [--form hamel|appell|kane|maggi|voronec] [--json] [-o OUT]\n"
     "Prints the derived equations (API.md 5), or one of the classical forms, as JSON (--json,\n"
     "as `hamel remote equations` takes it, changes nothing).\n",
     CLI_OPT_OUT | CLI_OPT_JSON | CLI_OPT_FORM, cmd_equations},
    {"linearize",
     "usage: hamel linearize FILE [-o OUT]\n"
     "FILE is {\"model\": ..., \"linearize\": {\"q\", \"speeds\", \"inputs\"?, ...}} (or a /v1/linearize\n"
     "request with \"model\"): prints A, B and the eigenvalues at each operating point. A request\n"
     "member beside \"linearize\" (\"parameters\", \"q\", ...) is refused: put it inside.\n",
     CLI_OPT_OUT, cmd_linearize},
    {"evaluate",
     "usage: hamel evaluate FILE [-o OUT]\n"
     "FILE is {\"model\": ..., \"evaluate\": {\"states\": [...]}} (or a /v1/evaluate request with\n"
     "\"model\"): prints q', u', q'' and the multipliers at each state. A request member beside\n"
     "\"evaluate\" (\"parameters\", \"states\") is refused: put it inside.\n",
     CLI_OPT_OUT, cmd_evaluate},
    {"steady",
     "usage: hamel steady FILE [-o OUT]\n"
     "FILE is {\"model\": ..., \"steady\": {\"state\", \"unknowns\", \"continuation\"?}} (or a /v1/steady\n"
     "request with \"model\"): prints the steady motion found by Newton's method from the state,\n"
     "and with continuation the branch, its eigenvalues and where its stability changes. A\n"
     "request member beside \"steady\" (\"parameters\", \"state\", ...) is refused: put it inside.\n",
     CLI_OPT_OUT, cmd_steady},
    {"export",
     "usage: hamel export FILE [--lang c|python] [-o OUT]\n"
     "Prints one standalone source file with the right-hand side, its Jacobian, the kinematics\n"
     "and the parameters of FILE's model. With a simulation request in FILE its state, times and\n"
     "tolerances are baked in: `cc -O2 -DHAMEL_MAIN file.c -lgsl -lgslcblas -lm` builds a program\n"
     "(and `python3 file.py` runs the module with scipy) that prints the trajectory as CSV: t, the\n"
     "coordinates, the speeds; the request's events too (a stop event ends it at the event, each\n"
     "crossing is printed on standard error), unless one reads a constraint force.\n",
     CLI_OPT_OUT | CLI_OPT_LANG, cmd_export},
};

#define CLI_NCOMMANDS (sizeof cli_commands / sizeof *cli_commands)

static void cli_usage(FILE *f)
{
    fputs("usage: hamel COMMAND FILE [options]      (hamel COMMAND --help for each)\n"
          "  run FILE [--csv|--json] [-o OUT] [--progress]   simulate; the result JSON or CSV\n"
          "  check FILE [--json]                 validate the model; its summary as text or JSON\n"
          "  gamma FILE [--q name=v,...] [--t T]  Hamel coefficients at a configuration\n"
          "  equations FILE [--form F]           the derived equations (F: hamel|appell|kane|maggi|voronec)\n"
          "  linearize FILE                      A, B and eigenvalues about operating points\n"
          "  evaluate FILE                       q', u', q'' and multipliers at states\n"
          "  steady FILE                         steady motions and their branches, stability changes\n"
          "  export FILE [--lang c|python]       generated code: rhs, Jacobian, a main for a request\n"
          "  remote [--url URL] COMMAND ...      run, check, gamma, equations, linearize, evaluate\n"
          "                                      against a server, and batch, job, cancel, quarantine\n"
          "                                      (hamel remote --help)\n"
          "  --max-compile-seconds S             (any command) the compile budget, CPU seconds\n"
          "  --version, --help\n",
          f);
    fputs(cli_file_help, f);
    fputs(cli_budget_help, f);
    fputs(cli_exit_help, f);
}

/* Parses the options after the subcommand. Returns 0, or CLI_EXIT_USAGE after a message. */
static int cli_parse(const cli_command *cmd, int argc, char **argv, cli_args *a, int *help)
{
    memset(a, 0, sizeof *a);
    a->progress = -1;
    *help = 0;
    static const struct {
        const char *name;
        unsigned opt;
        int takes_value;
    } opts[] = {
        {"-o", CLI_OPT_OUT, 1},
        {"--output", CLI_OPT_OUT, 1},
        {"--csv", CLI_OPT_CSV, 0},
        {"--json", CLI_OPT_JSON, 0},
        {"--progress", CLI_OPT_PROGRESS, 0},
        {"--no-progress", CLI_OPT_PROGRESS, 0},
        {"--q", CLI_OPT_Q, 1},
        {"-q", CLI_OPT_Q, 1},
        {"--t", CLI_OPT_T, 1},
        {"--form", CLI_OPT_FORM, 1},
        {"--lang", CLI_OPT_LANG, 1},
        {"--max-compile-seconds", CLI_OPT_BUDGET, 1},
        {"--qdot", CLI_OPT_QDOT, 1},
    };
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            *help = 1;
            return 0;
        }
        if (s[0] != '-' || strcmp(s, "-") == 0) {
            if (a->file) {
                fprintf(stderr, "hamel %s: one FILE only ('%s' is a second)\n", cmd->name, s);
                return CLI_EXIT_USAGE;
            }
            a->file = s;
            continue;
        }
        /* --name=value as well as --name value (as `hamel remote` takes them) */
        const char *eq = strncmp(s, "--", 2) == 0 ? strchr(s, '=') : NULL;
        size_t len = eq ? (size_t)(eq - s) : strlen(s);
        size_t k = 0;
        while (k < sizeof opts / sizeof *opts &&
               (strlen(opts[k].name) != len || strncmp(s, opts[k].name, len) != 0))
            k++;
        if (k == sizeof opts / sizeof *opts || !((cmd->opts | CLI_OPT_BUDGET) & opts[k].opt) ||
            (eq && !opts[k].takes_value)) {
            fprintf(stderr, "hamel %s: unknown option %s (hamel %s --help)\n", cmd->name, s, cmd->name);
            return CLI_EXIT_USAGE;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (opts[k].takes_value && !eq) {
            if (i + 1 >= argc) {
                fprintf(stderr, "hamel %s: %s needs a value\n", cmd->name, s);
                return CLI_EXIT_USAGE;
            }
            v = argv[++i];
        }
        switch (opts[k].opt) {
        case CLI_OPT_OUT: a->out = v; break;
        case CLI_OPT_CSV: a->csv = 1; break;
        case CLI_OPT_JSON: a->json = 1; break;
        case CLI_OPT_PROGRESS: a->progress = strcmp(s, "--progress") == 0; break;
        case CLI_OPT_Q: a->q = v; break;
        case CLI_OPT_T: a->t = v; break;
        case CLI_OPT_LANG: a->lang = v; break;
        case CLI_OPT_QDOT: a->qdot = v; break;
        case CLI_OPT_BUDGET: {
            char *end = NULL;
            double sec = strtod(v, &end);
            if (end == v || *end != '\0' || !(sec >= 0 && sec <= 1e6)) {
                fprintf(stderr, "hamel %s: --max-compile-seconds needs seconds from 0 to 1e6, not '%s'\n",
                        cmd->name, v);
                return CLI_EXIT_USAGE;
            }
            cli_limits.max_compile_seconds = sec;
            break;
        }
        default: a->form = v; break;
        }
    }
    if (a->csv && a->json) {
        fprintf(stderr, "hamel %s: --csv and --json exclude each other\n", cmd->name);
        return CLI_EXIT_USAGE;
    }
    if (!a->file) {
        fprintf(stderr, "hamel %s: FILE is missing\n%s", cmd->name, cmd->help);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/* hamel remote ARGS: execs hamel-remote ARGS, the program beside this one (found through
 * /proc/self/exe), else the one on PATH. Returns only when neither can be run. */
static int cli_exec_remote(char **argv)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    argv[0] = CLI_REMOTE_PROGRAM; /* the rest, up to argv's NULL, are its arguments */
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash && (size_t)(slash + 1 - self) + sizeof CLI_REMOTE_PROGRAM <= sizeof self) {
            memcpy(slash + 1, CLI_REMOTE_PROGRAM, sizeof CLI_REMOTE_PROGRAM);
            if (access(self, X_OK) == 0)
                execv(self, argv);
        }
    }
    execvp(CLI_REMOTE_PROGRAM, argv);
    perror("hamel remote: cannot run " CLI_REMOTE_PROGRAM " (it belongs beside hamel or on PATH)");
    return CLI_EXIT_TRANSPORT;
}

static const cli_command *cli_find(const char *name)
{
    for (size_t i = 0; i < CLI_NCOMMANDS; i++)
        if (strcmp(cli_commands[i].name, name) == 0)
            return &cli_commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "remote") == 0)
        return cli_exec_remote(argv + 1);
    /* The server's statuses in the problem documents the CLI prints, from the server's own
     * table (server/problems.c), so `hamel run` and the API give the same JSON. */
    problems_init();
    if (argc < 2) {
        cli_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    cli_limits = engine_default_limits;
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0) {
        printf("hamel %s\n", ENGINE_VERSION);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        const cli_command *c = argc >= 3 ? cli_find(argv[2]) : NULL;
        if (c) {
            fputs(c->help, stdout);
            fputs(cli_file_help, stdout);
            fputs(cli_exit_help, stdout);
        } else if (argc >= 3 && strcmp(argv[2], "remote") == 0) {
            char *rargv[] = {"remote", "--help", NULL};
            return cli_exec_remote(rargv);
        } else {
            cli_usage(stdout);
        }
        return CLI_EXIT_OK;
    }
    const cli_command *cmd = cli_find(name);
    if (cmd == NULL) {
        fprintf(stderr, "hamel: unknown command '%s'\n", name);
        cli_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    cli_args a;
    int help = 0;
    int rc = cli_parse(cmd, argc - 2, argv + 2, &a, &help);
    if (help) {
        fputs(cmd->help, stdout);
        fputs(cli_file_help, stdout);
        fputs(cli_budget_help, stdout);
        fputs(cli_exit_help, stdout);
        return CLI_EXIT_OK;
    }
    if (rc)
        return rc;
    engine_init();
    return cmd->fn(&a);
}
