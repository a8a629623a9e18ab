/* problems.c — one row per error code: HTTP status, what it means, what to do; the
 * service's own classes; the /problems pages generated from the rows. */
#include "problems.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct problems_row {
    int code;
    int status;
    const char *meaning;
    const char *todo;
} problems_row;

static const problems_row problems__rows[] = {
    /* the engine's codes (engine/base/error.h) */
    {HAMEL_E_BAD_JSON, 400,
     "The request body (or the model file) is not valid JSON; the first entry of `errors` gives where "
     "parsing stopped.",
     "Fix the JSON at that position (quotes, commas, brackets) and send it as application/json."},
    {HAMEL_E_BAD_REQUEST, 422,
     "The JSON is well-formed, but a field of the request is missing, unknown, of the wrong type or out of "
     "range; each entry of `errors` names the field (`path`) and why.",
     "Correct the fields named in `errors`; api/openapi.yaml has the schema of every request."},
    {HAMEL_E_INVALID_MODEL, 422,
     "The model is not well-formed: a coordinate, speed, constraint, body, force or parameter is missing, "
     "repeated or inconsistent; `errors` names each.",
     "Correct the model at the paths named in `errors`."},
    {HAMEL_E_PARSE, 422,
     "An expression could not be parsed; `errors` names the field and the column where parsing stopped.",
     "Fix the expression at that column: operators, parentheses, function names and identifiers must be "
     "those of the expression grammar (engine/DESIGN.md)."},
    {HAMEL_E_NONLINEAR_SPEED, 422,
     "A speed is not linear in the velocities, or a nonlinear constraint leaves several solutions for the "
     "velocities, so they cannot be recovered from the speeds uniquely.",
     "Define the speeds as linear combinations of the velocities, or give `qdot` choosing the root where "
     "the problem lists them."},
    {HAMEL_E_SINGULAR, 422,
     "The speeds together with the constraints do not determine the velocities: the matrix relating them "
     "is singular (everywhere, or at the configuration named).",
     "Choose independent speeds, remove dependent constraints, or start away from the configuration named."},
    {HAMEL_E_BAD_INITIAL, 422,
     "The initial state is incomplete, not finite, or violates the constraints beyond tolerance.",
     "Give every coordinate and speed named in `errors`, consistent with the constraints."},
    {HAMEL_E_FORMULATION, 422, "The formulation asked for cannot run this model.",
     "Use one of the model's `formulations` (GET /v1/models/{id}), or omit `formulation` for its default."},
    {HAMEL_E_LIMIT, 422,
     "The request asks for more than a limit of the service allows (samples times series, steps, "
     "expression size); `errors` names the field.",
     "Ask for fewer samples or a shorter span, or split the work; the operator sets the limits "
     "(HAMEL_MAX_* settings)."},
    {HAMEL_E_COMPILE_LIMIT, 422,
     "Compiling the model (differentiation, simplification, code generation) needed more time or memory "
     "than allowed; the problem names the stage that stopped.",
     "Simplify the model (fewer coordinates, simpler expressions or speeds), or ask the operator to raise "
     "HAMEL_MAX_COMPILE_SECONDS or HAMEL_MAX_COMPILE_BYTES."},
    {HAMEL_E_STEP_LIMIT, 422,
     "The integrator took its largest number of steps before reaching t_end; the partial trajectory comes "
     "with the problem.",
     "Raise max_steps, loosen rtol and atol, shorten t_end, or use an implicit method if the system is "
     "stiff."},
    {HAMEL_E_TIME_LIMIT, 422,
     "The simulation ran past its wall-time limit; the partial trajectory comes with the problem.",
     "Shorten t_end, loosen the tolerances, or ask the operator to raise HAMEL_MAX_WALL."},
    {HAMEL_E_CANCELLED, 409,
     "The work was cancelled before it finished (DELETE of the job or its batch, a client that hung up, or "
     "the server stopping).",
     "Submit the request again if you still want its result."},
    {HAMEL_E_INTEGRATOR, 422,
     "The integrator could not continue: its step fell below the smallest it can take, or it did not "
     "converge.",
     "Check the initial state and parameters for a singularity, change the tolerances, or try another "
     "method."},
    {HAMEL_E_NUMERIC, 422,
     "The equations of motion could not be evaluated at the state named: a division by zero, a function "
     "outside its domain, or a singular mass matrix.",
     "Check the state and parameters named: the motion may reach a singular configuration."},
    {HAMEL_E_INTERNAL, 500,
     "The service failed in a way it did not expect; nothing is known to be wrong "
     "with the request.",
     "Retry; if it happens again, report it with the request and the server's log."},
    /* the service's codes (PROBLEMS_SERVER_MAP) */
    {HAMEL_E_TOO_LARGE, 413, "The request body is larger than the server accepts (HAMEL_MAX_BODY).",
     "Send a smaller body, or ask the operator to raise HAMEL_MAX_BODY."},
    {HAMEL_E_NOT_FOUND, 404,
     "Nothing is at that path: an unknown endpoint, or a model, job or batch id the server does not know "
     "(jobs and batches are kept for a bounded time).",
     "Check the path and the id; post the model or the request again if it has expired."},
    {HAMEL_E_METHOD, 405,
     "The path exists but does not take that method; the Allow header lists those it does.",
     "Use a method from the Allow header."},
    {HAMEL_E_UNAUTHORIZED, 401,
     "The server requires a bearer token (HAMEL_TOKEN, or HAMEL_METRICS_TOKEN for /metrics) and the "
     "request had none or another.",
     "Send `Authorization: Bearer <token>` with the server's token."},
    {HAMEL_E_QUEUE_FULL, 503, "Every worker is busy and the job queue is full.",
     "Retry after the seconds of the Retry-After header."},
    {HAMEL_E_UNSUPPORTED_MEDIA, 415, "The body was not sent as application/json.",
     "Send the body with `Content-Type: application/json`."},
    {HAMEL_E_CONFLICT, 409,
     "The resource is not in a state that allows this (for instance cancelling a job that has finished).",
     "Read the resource's state (GET) and act on that."},
    {HAMEL_E_GONE, 410,
     "The job finished, but its result is no longer kept (results are kept within HAMEL_STORE_BYTES, the "
     "oldest dropped first).",
     "Submit the same request again: it is computed once more."},
    {HAMEL_E_UNAVAILABLE, 503,
     "The service cannot take the request now: it is stopping, or the shared store (HAMEL_REDIS) cannot be "
     "reached.",
     "Retry after the seconds of the Retry-After header."},
    {HAMEL_E_NOT_IMPLEMENTED, 501, "The server does not implement what the request asks for.",
     "Use the endpoints and methods of api/openapi.yaml."},
    {HAMEL_E_BAD_HTTP, 400,
     "The request is not well-formed HTTP (a malformed header, chunk or request line).",
     "Fix the client; an HTTP library sends well-formed requests."},
    {HAMEL_E_ENGINE_FAULT, 500,
     "The engine crashed on this model (a signal in its worker process); the service went on, and the "
     "model is quarantined, answered at once with this problem until the quarantine ends.",
     "Report the model; once it is fixed, an operator clears the quarantine with "
     "DELETE /v1/quarantine/{model_id}."},
};

static const hamel_error_class problems__classes[] = {
#define PROBLEMS_CLASS(name, slug, title) {HAMEL_E_##name, slug, title},
    PROBLEMS_SERVER_MAP(PROBLEMS_CLASS)
#undef PROBLEMS_CLASS
};

#define PROBLEMS_N (sizeof problems__rows / sizeof problems__rows[0])

static const problems_row *problems__find(int code)
{
    for (size_t i = 0; i < PROBLEMS_N; i++)
        if (problems__rows[i].code == code)
            return &problems__rows[i];
    return NULL;
}

int problems_status(int code)
{
    const problems_row *r = problems__find(code);
    return r ? r->status : 500;
}

static const hamel_error_protocol problems__protocol = {
    problems__classes, sizeof problems__classes / sizeof problems__classes[0], problems_status};

void problems_init(void) { hamel_error_use(&problems__protocol); }

size_t problems_count(void) { return PROBLEMS_N; }

int problems_code_at(size_t i) { return i < PROBLEMS_N ? problems__rows[i].code : HAMEL_E_INTERNAL; }

/* Appends text to f, HTML-escaped, with `code` spans for backquoted parts. */
static void problems__html_text(FILE *f, const char *s)
{
    int code = 0;
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '`':
            fputs(code ? "</code>" : "<code>", f);
            code = !code;
            break;
        default: fputc(*s, f);
        }
    }
    if (code)
        fputs("</code>", f);
}

static void problems__head(FILE *f, const char *title)
{
    fputs("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    problems__html_text(f, title);
    fputs(" — hamel</title>\n<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46em;margin:2em auto;"
          "padding:0 1em}code{font-size:90%}td,th{text-align:left;padding:.2em .8em .2em 0;"
          "vertical-align:top}</style>\n</head>\n<body>\n",
          f);
}

char *problems_page(const char *slug, size_t *len)
{
    const problems_row *row = NULL;
    if (slug && *slug) {
        for (size_t i = 0; !row && i < PROBLEMS_N; i++)
            if (!strcmp(hamel_error_slug(problems__rows[i].code), slug))
                row = &problems__rows[i];
        if (!row)
            return NULL;
    }
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    if (row) {
        const char *title = hamel_error_title(row->code);
        problems__head(f, title);
        fprintf(f, "<h1>");
        problems__html_text(f, title);
        fprintf(f,
                "</h1>\n<p>Problem type <code>" HAMEL_PROBLEM_TYPE_PREFIX "%s</code>, HTTP status %d.</p>\n",
                hamel_error_slug(row->code), row->status);
        fputs("<h2>What it means</h2>\n<p>", f);
        problems__html_text(f, row->meaning);
        fputs("</p>\n<h2>What to do</h2>\n<p>", f);
        problems__html_text(f, row->todo);
        fputs("</p>\n<p><a href=\"" HAMEL_PROBLEM_TYPE_PREFIX "\">Every problem type</a></p>\n", f);
    } else {
        problems__head(f, "Problem types");
        fputs(
            "<h1>Problem types</h1>\n<p>Every error of the hamel API is a problem document "
            "(<code>application/problem+json</code>, RFC 9457) whose <code>type</code> is one of these.</p>\n"
            "<table>\n<tr><th>Type</th><th>Status</th><th>Title</th></tr>\n",
            f);
        for (size_t i = 0; i < PROBLEMS_N; i++) {
            const char *s = hamel_error_slug(problems__rows[i].code);
            fprintf(f,
                    "<tr><td><a href=\"" HAMEL_PROBLEM_TYPE_PREFIX
                    "%s\"><code>%s</code></a></td><td>%d</td><td>",
                    s, s, problems__rows[i].status);
            problems__html_text(f, hamel_error_title(problems__rows[i].code));
            fputs("</td></tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    fputs("</body>\n</html>\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
