/* hamel.c — the command-line program: the engine on files, and the remote client.
 *
 *   hamel run FILE        a case file (model + simulation) or a simulation request
 *                         with "model": prints the result JSON
 *   hamel check FILE      prints the model summary (API.md §2)
 *   hamel gamma FILE [--q name=value,...] [--t T]
 *                         prints the Hamel coefficients (API.md §4)
 *   hamel equations FILE  prints the derived equations (API.md §5)
 *   hamel linearize FILE  a file {"model": ..., "linearize": {...}} (or a /v1/linearize
 *                         request with "model"): prints A, B and the eigenvalues
 *   hamel evaluate FILE   a file {"model": ..., "evaluate": {"states": [...]}} (or a
 *                         /v1/evaluate request with "model"): prints q', u', q'', multipliers
 *   hamel remote ...      the same against a server (see hamel remote --help)
 *
 * FILE may be "-" for standard input. Errors: the problem document on stderr, exit 1.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "jsonout.h"

static void usage(FILE *f)
{
    fputs("usage: hamel run FILE | check FILE | gamma FILE [--q name=value,...] [--t T] |\n"
          "             equations FILE [--form hamel|appell|kane|maggi|voronec] |\n"
          "             linearize FILE | evaluate FILE | remote ... | --version\n"
          "FILE: a model, a simulation request with \"model\", or a case file with \"model\" and\n"
          "\"simulation\" (as in ../shared/cases); - reads standard input.\n",
          f);
}

static int fail(json_t *problem)
{
    json_dumpf(problem, stderr, JSON_INDENT(2));
    fputc('\n', stderr);
    json_decref(problem);
    return 1;
}

static int print(json_t *j)
{
    size_t len = 0;
    char *text = jsonout_dumps_indent(j, 1, &len);
    if (text) {
        fwrite(text, 1, len, stdout);
        free(text);
    } else {
        json_dumpf(j, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    }
    fputc('\n', stdout);
    json_decref(j);
    return 0;
}

/* Reads FILE ("-": standard input) as JSON into *doc (caller frees); returns 0, or
 * reports the parse error (file:line, column) and returns fail()'s status. */
static int load_doc(const char *path, json_t **doc)
{
    json_error_t err;
    *doc = strcmp(path, "-") == 0 ? json_loadf(stdin, 0, &err) : json_load_file(path, 0, &err);
    if (*doc)
        return 0;
    json_t *p = hamel_problem_new(HAMEL_E_BAD_JSON, err.text);
    char where[64];
    snprintf(where, sizeof where, "%s:%d", path, err.line);
    hamel_problem_add(p, where, err.column, err.text);
    return fail(p);
}

/* Loads FILE and splits it into the model and the request (which may be NULL). */
static int load(const char *path, json_t **model, json_t **request)
{
    json_t *doc = NULL;
    int lrc = load_doc(path, &doc);
    if (lrc)
        return lrc;
    json_t *m = json_object_get(doc, "model");
    json_t *sim = json_object_get(doc, "simulation");
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

static int compile(const char *path, engine_model **out, json_t **request)
{
    json_t *model = NULL, *problem = NULL;
    *request = NULL;
    if (load(path, &model, request))
        return 1;
    int rc = engine_model_compile(model, NULL, out, &problem);
    json_decref(model);
    if (rc) {
        json_decref(*request);
        return fail(problem);
    }
    return 0;
}

static int cmd_run(const char *path)
{
    engine_model *m;
    json_t *req, *result, *problem;
    if (compile(path, &m, &req))
        return 1;
    if (!req) {
        engine_model_release(m);
        return fail(hamel_problem_new(HAMEL_E_BAD_REQUEST, "the file has no simulation request"));
    }
    int rc = engine_simulate(m, req, NULL, NULL, &result, &problem);
    json_decref(req);
    if (rc) {
        engine_model_release(m);
        return fail(problem);
    }
    json_object_set_new(result, "status", json_string("done"));
    json_object_set_new(result, "cached", json_false());
    engine_model_release(m);
    return print(result);
}

static int cmd_check(const char *path)
{
    engine_model *m;
    json_t *req;
    if (compile(path, &m, &req))
        return 1;
    json_decref(req);
    json_t *s = engine_model_summary(m);
    engine_model_release(m);
    return print(s);
}

static int cmd_equations(const char *path, const char *form)
{
    engine_model *m;
    json_t *req, *eq, *problem;
    if (compile(path, &m, &req))
        return 1;
    json_decref(req);
    int rc = form ? engine_equations_form(m, form, &eq, &problem) : engine_equations(m, &eq, &problem);
    engine_model_release(m);
    return rc ? fail(problem) : print(eq);
}

/* hamel gamma FILE [--q a=1,b=2] [--t T]: q defaults to the request's initial q. */
static int cmd_gamma(int argc, char **argv)
{
    engine_model *m;
    json_t *req, *result, *problem;
    if (compile(argv[0], &m, &req))
        return 1;
    json_t *q = json_object();
    double t = 0.0;
    json_t *init = req ? json_object_get(req, "initial") : NULL;
    if (init) {
        json_object_update(q, json_object_get(init, "q"));
        if (json_is_number(json_object_get(init, "t")))
            t = json_number_value(json_object_get(init, "t"));
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--t") == 0 && i + 1 < argc) {
            t = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--q") == 0 && i + 1 < argc) {
            char *list = strdup(argv[++i]);
            for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(tok, '=');
                if (!eq) {
                    free(list);
                    json_decref(q);
                    json_decref(req);
                    engine_model_release(m);
                    return fail(hamel_problem_new(HAMEL_E_BAD_REQUEST, "--q takes name=value,..."));
                }
                *eq = '\0';
                json_object_set_new(q, tok, json_real(strtod(eq + 1, NULL)));
            }
            free(list);
        } else {
            json_decref(q);
            json_decref(req);
            engine_model_release(m);
            usage(stderr);
            return 2;
        }
    }
    json_t *hreq = json_pack("{s:f, s:o}", "t", t, "q", q);
    if (init && json_object_get(init, "qdot")) /* velocity-dependent coefficients (nonlinear) */
        json_object_set(hreq, "qdot", json_object_get(init, "qdot"));
    else if (init && json_object_get(init, "speeds"))
        json_object_set(hreq, "speeds", json_object_get(init, "speeds"));
    if (req && json_object_get(req, "parameters"))
        json_object_set(hreq, "parameters", json_object_get(req, "parameters"));
    json_decref(req);
    int rc = engine_hamel(m, hreq, NULL, &result, &problem);
    json_decref(hreq);
    engine_model_release(m);
    return rc ? fail(problem) : print(result);
}

/* hamel linearize FILE / hamel evaluate FILE: the file's "model" with its "linearize"
 * (or "evaluate") member as the request, else the file itself as the request. */
static int cmd_lin(const char *path, const char *which)
{
    json_t *doc = NULL;
    int lrc = load_doc(path, &doc);
    if (lrc)
        return lrc;
    json_t *model = json_object_get(doc, "model"), *inner = json_object_get(doc, which);
    json_t *r = inner ? inner : doc;
    if (!json_is_object(model) || !json_is_object(r)) {
        json_decref(doc);
        char why[160];
        snprintf(why, sizeof why, "the file needs \"model\" and a \"%s\" request (or to be one)", which);
        return fail(hamel_problem_new(HAMEL_E_BAD_REQUEST, why));
    }
    engine_model *m = NULL;
    json_t *result = NULL, *problem = NULL;
    int rc = engine_model_compile(model, NULL, &m, &problem);
    if (rc == 0)
        rc = strcmp(which, "evaluate") ? engine_linearize(m, r, NULL, NULL, &result, &problem)
                                       : engine_evaluate(m, r, NULL, &result, &problem);
    json_decref(doc);
    engine_model_release(m);
    return rc ? fail(problem) : print(result);
}

#define HAMEL_REMOTE_PROGRAM "hamel-remote"

/* hamel remote ARGS: execs hamel-remote ARGS, the program beside this one (found through
 * /proc/self/exe), else the one on PATH. Returns only when neither can be run. */
static int exec_remote(int argc, char **argv)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    argv[0] = HAMEL_REMOTE_PROGRAM; /* argv[argc] is NULL: the rest are its arguments */
    (void)argc;
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash && (size_t)(slash + 1 - self) + sizeof HAMEL_REMOTE_PROGRAM <= sizeof self) {
            memcpy(slash + 1, HAMEL_REMOTE_PROGRAM, sizeof HAMEL_REMOTE_PROGRAM);
            if (access(self, X_OK) == 0)
                execv(self, argv);
        }
    }
    execvp(HAMEL_REMOTE_PROGRAM, argv);
    perror("hamel remote: cannot run " HAMEL_REMOTE_PROGRAM " (it belongs beside hamel or on PATH)");
    return 3;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "remote") == 0)
        return exec_remote(argc - 1, argv + 1);
    engine_init();
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        printf("hamel %s\n", ENGINE_VERSION);
        return 0;
    }
    if (argc < 3) {
        usage(argc >= 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr);
        return argc >= 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    if (strcmp(argv[1], "run") == 0 && argc == 3)
        return cmd_run(argv[2]);
    if (strcmp(argv[1], "check") == 0 && argc == 3)
        return cmd_check(argv[2]);
    if (strcmp(argv[1], "equations") == 0 && argc == 3)
        return cmd_equations(argv[2], NULL);
    if (strcmp(argv[1], "equations") == 0 && argc == 5 && strcmp(argv[3], "--form") == 0)
        return cmd_equations(argv[2], argv[4]);
    if (strcmp(argv[1], "gamma") == 0)
        return cmd_gamma(argc - 2, argv + 2);
    if ((strcmp(argv[1], "linearize") == 0 || strcmp(argv[1], "evaluate") == 0) && argc == 3)
        return cmd_lin(argv[2], argv[1]);
    usage(stderr);
    return 2;
}
