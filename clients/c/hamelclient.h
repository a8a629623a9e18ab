/* hamelclient.h — libhamelclient, a C client of the hamel service (API.md) on libcurl.
 *
 * A hamelclient handle holds a base URL, an optional bearer token, timeouts and one
 * libcurl easy handle (so connections are reused). Every call sends one or more HTTP
 * requests and hands back the response body as jansson JSON.
 *
 * Ownership: every json_t returned through an out-parameter is a new reference the
 * caller must json_decref; input json_t and strings are borrowed. A handle is used by
 * one thread at a time; use one handle per thread (a multithreaded program calls
 * curl_global_init itself before creating handles).
 *
 * Errors: each call returns HAMELCLIENT_OK (0) or a negative hamelclient_kind and, when
 * `err` is not NULL, fills *err. Two kinds matter most and are kept apart:
 * HAMELCLIENT_E_TRANSPORT (no HTTP answer: connection refused, timeout, TLS; see
 * err->message) and HAMELCLIENT_E_PROBLEM (the service answered with an RFC 9457 problem
 * document: err->status, type, title, detail, and the first entry of its "errors"
 * array as path/column/reason). The whole problem document of the last failed call
 * stays readable through hamelclient_last_problem.
 */
#ifndef HAMELCLIENT_H
#define HAMELCLIENT_H

#include <jansson.h>
#include <stddef.h>

#define HAMELCLIENT_DEFAULT_URL "http://127.0.0.1:8080"

/* Named limits. */
#define HAMELCLIENT_MAX_RESPONSE_BYTES ((size_t)256 << 20) /* one response body */
#define HAMELCLIENT_MAX_URL 2048                           /* base URL + path + query */
#define HAMELCLIENT_MAX_ID 128                             /* model or job id */
#define HAMELCLIENT_MAX_RETRY_AFTER_S 60                   /* longest honoured Retry-After */

/* What went wrong. Calls return 0 or one of these negative values. */
typedef enum hamelclient_kind {
    HAMELCLIENT_OK = 0,
    HAMELCLIENT_E_TRANSPORT = -1, /* no HTTP response (connect, timeout, TLS, ...) */
    HAMELCLIENT_E_PROBLEM = -2,   /* the service answered 4xx/5xx, or a job failed */
    HAMELCLIENT_E_PROTOCOL = -3,  /* the answer is not what API.md promises */
    HAMELCLIENT_E_USAGE = -4,     /* a bad argument (NULL request, unsafe id, ...) */
    HAMELCLIENT_E_NOMEM = -5,     /* out of memory, or a response past its limit */
    HAMELCLIENT_E_CANCELLED = -6, /* the waited-for job was cancelled */
    HAMELCLIENT_E_STOPPED = -7,   /* the progress callback asked to stop waiting */
    HAMELCLIENT_E_TIMEOUT = -8    /* the wait outlasted the handle's wait timeout */
} hamelclient_kind;

#define HAMELCLIENT_TEXT_MAX 512

/* A failed call, typed. Plain data: nothing to free. Strings are "" when absent. */
typedef struct hamelclient_error {
    int kind;                           /* a hamelclient_kind */
    int status;                         /* HTTP status (or the problem's), 0 if none */
    char type[HAMELCLIENT_TEXT_MAX];    /* problem "type" URI */
    char title[HAMELCLIENT_TEXT_MAX];   /* problem "title" */
    char detail[HAMELCLIENT_TEXT_MAX];  /* problem "detail" */
    char path[HAMELCLIENT_TEXT_MAX];    /* errors[0].path, e.g. "model.kinetic_energy" */
    int column;                         /* errors[0].column, -1 when absent */
    char reason[HAMELCLIENT_TEXT_MAX];  /* errors[0].reason */
    int n_errors;                       /* entries in the problem's "errors" array */
    double retry_after;                 /* seconds from Retry-After, -1 when absent */
    char message[HAMELCLIENT_TEXT_MAX]; /* one line for humans (transport: curl's text) */
} hamelclient_error;

/* Settings of a handle; zero fields take the defaults noted. */
typedef struct hamelclient_options {
    const char *token;       /* bearer token; NULL: $HAMEL_TOKEN if set, else none */
    long connect_timeout_ms; /* 0: 5000 */
    long request_timeout_ms; /* one request, beyond any ?wait= it asks for; 0: 60000 */
    long poll_interval_ms;   /* between job polls; 0: 100 */
    int long_poll_s;         /* > 0: poll with GET /v1/jobs/{id}?wait=N */
    double wait_timeout_s;   /* longest hamelclient_job_wait; 0: no limit */
    int retries_503;         /* resends after 503 + Retry-After; 0: 5, < 0: none */
} hamelclient_options;

typedef struct hamelclient hamelclient;

/* Called by hamelclient_job_wait after every poll with the job's status ("queued",
 * "running", "done", ...) and progress (0..1). The strings are borrowed for the call.
 * Return 0 to go on waiting, nonzero to stop (the wait returns HAMELCLIENT_E_STOPPED
 * and the job keeps running). */
typedef int (*hamelclient_progress_fn)(void *user, const char *job_id, const char *status, double progress);

/* Creates a handle for the service at `base_url` (NULL: $HAMEL_URL if set, else
 * HAMELCLIENT_DEFAULT_URL): its root, http:// or https://, a trailing "/v1" dropped. `opts`
 * is borrowed and may be NULL; its token is copied. A URL of another scheme or with a
 * ?query or #fragment, or a token with spaces or control characters, is
 * HAMELCLIENT_E_USAGE. On success *out holds a new handle the caller frees with
 * hamelclient_free. */
int hamelclient_new(const char *base_url, const hamelclient_options *opts, hamelclient **out);

/* Frees a handle and everything it holds. Accepts NULL. */
void hamelclient_free(hamelclient *c);

/* The base URL without a trailing slash; borrowed, lives as long as the handle. */
const char *hamelclient_url(const hamelclient *c);

/* The full problem document of the last call that failed with HAMELCLIENT_E_PROBLEM
 * (for a failed job, including any "partial" trajectory), or NULL. Borrowed: valid
 * until the next call on the handle. */
const json_t *hamelclient_last_problem(const hamelclient *c);

/* A static name for a hamelclient_kind ("transport", "problem", ...). */
const char *hamelclient_kind_name(int kind);

/* GET /v1/health. On success *out holds the health object (caller owns it). */
int hamelclient_health(hamelclient *c, json_t **out, hamelclient_error *err);

/* POST /v1/models: validates and compiles `model` (borrowed). On success *summary holds
 * the model summary (caller owns it) and, when `created` is not NULL, *created is 1 if
 * the service had not seen the model (201) and 0 if it had (200). An invalid model
 * fails with HAMELCLIENT_E_PROBLEM, status 422 and the offending path and column. */
int hamelclient_model_submit(hamelclient *c, const json_t *model, json_t **summary, int *created,
                             hamelclient_error *err);

/* GET /v1/models/{id}. On success *summary holds the summary (caller owns it). */
int hamelclient_model_get(hamelclient *c, const char *model_id, json_t **summary, hamelclient_error *err);

/* GET /v1/models/{id}/equations. On success *out holds the derived equations (caller
 * owns them). */
int hamelclient_equations(hamelclient *c, const char *model_id, json_t **out, hamelclient_error *err);

/* GET /v1/models/{id}/equations?form=FORM: one of the classical forms (hamel, appell,
 * kane, maggi, voronec; NULL or "": as hamelclient_equations). A form that is not a
 * word is HAMELCLIENT_E_USAGE; an unknown one the service's 422 naming `form`. */
int hamelclient_equations_form(hamelclient *c, const char *model_id, const char *form, json_t **out,
                               hamelclient_error *err);

/* POST /v1/hamel with `request` (borrowed: {"model" | "model_id", "q", ...}). On
 * success *out holds the coefficients (caller owns them). */
int hamelclient_hamel(hamelclient *c, const json_t *request, json_t **out, hamelclient_error *err);

/* POST /v1/simulations[?wait=wait_s] with `request` (borrowed; it carries "model" or
 * "model_id"). On success *out (caller owns it) is either the finished result
 * ("status": "done", answered within wait_s or from the cache) or the job stub
 * {"job_id", "status": "queued"|"running"} to pass to hamelclient_job_wait. A job that
 * failed within wait_s fails the call with HAMELCLIENT_E_PROBLEM. A 503 is resent after
 * its Retry-After, up to the handle's retries. */
int hamelclient_simulation_start(hamelclient *c, const json_t *request, int wait_s, json_t **out,
                                 hamelclient_error *err);

/* GET /v1/jobs/{id}[?wait=wait_s]: the job as it is now, whatever its status. On
 * success *out holds it (caller owns it). */
int hamelclient_job_get(hamelclient *c, const char *job_id, int wait_s, json_t **out, hamelclient_error *err);

/* Polls a job until it is done, calling `progress` (may be NULL; `user` is passed to
 * it) after every poll. On success *result holds the done job's result (caller owns
 * it). A failed job returns HAMELCLIENT_E_PROBLEM with its problem document; a
 * cancelled one HAMELCLIENT_E_CANCELLED. */
int hamelclient_job_wait(hamelclient *c, const char *job_id, hamelclient_progress_fn progress, void *user,
                         json_t **result, hamelclient_error *err);

/* DELETE /v1/jobs/{id}: asks the service to cancel a queued or running job. On success
 * *out, if `out` is not NULL, holds the service's answer (caller owns it). */
int hamelclient_job_cancel(hamelclient *c, const char *job_id, json_t **out, hamelclient_error *err);

/* DELETE /v1/batches/{id}: cancels what is left of a batch (queued runs at once, running
 * ones at their next step; finished runs keep their lines). On success *out (may be
 * NULL) holds the status document. A batch that had finished fails with status 409. */
int hamelclient_batch_cancel(hamelclient *c, const char *batch_id, json_t **out, hamelclient_error *err);

/* Starts a simulation and waits for it: hamelclient_simulation_start without waiting,
 * then hamelclient_job_wait. `progress` may be NULL. On success *result holds the
 * result (caller owns it). */
int hamelclient_simulate(hamelclient *c, const json_t *request, hamelclient_progress_fn progress, void *user,
                         json_t **result, hamelclient_error *err);

/* One failed check of a result (its "warnings" entry): code (energy-drift,
 * constraint-residual, position-drift, projection-failed), the message to show, the
 * check that failed (a path in the result), its value and the threshold it passed
 * (NAN when absent). The strings are borrowed from the result. */
typedef struct hamelclient_warning {
    const char *code, *message, *check;
    double value, threshold;
} hamelclient_warning;

/* The warnings of a result (or of a batch line): returns how many it has and fills
 * out[0..min(count, max)) (out may be NULL when max is 0). A result without warnings,
 * as from a server before 0.3.0, has none. Borrows `result`; the strings live as long
 * as it does. */
size_t hamelclient_warnings(const json_t *result, hamelclient_warning *out, size_t max);

/* POST /v1/linearize with `request` (borrowed: {"model" | "model_id", "q", "speeds",
 * ...} or "points"). On success *out holds A, B and the eigenvalues (caller owns it). */
int hamelclient_linearize(hamelclient *c, const json_t *request, json_t **out, hamelclient_error *err);

/* POST /v1/evaluate with `request` (borrowed: {"model" | "model_id", "states"}). On
 * success *out holds q', u', q'' and the multipliers of each state (caller owns it). */
int hamelclient_evaluate(hamelclient *c, const json_t *request, json_t **out, hamelclient_error *err);

/* POST /v1/batches with `request` (borrowed: {"model" | "model_id", "base"?, "runs",
 * "fields"?}), then GET /v1/batches/{id}?wait= until it has finished, calling
 * `progress` (may be NULL) after every answer with the batch id, its status and the
 * fraction of runs finished. On success *out holds the finished batch's status document
 * with "results", one line per run in index order (caller owns it); runs that failed
 * are lines with "status": "failed" and their "problem", not an error of the call. An
 * invalid run refuses the whole batch: HAMELCLIENT_E_PROBLEM naming runs[i]. */
int hamelclient_batch(hamelclient *c, const json_t *request, hamelclient_progress_fn progress, void *user,
                      json_t **out, hamelclient_error *err);

/* GET /v1/quarantine: the models quarantined now (their engine work crashed). On
 * success *out holds {"quarantined": [{model_id, model_name?, signal?, operation?,
 * detail?, quarantined_at?, quarantined_until}], "count", "truncated"} (caller owns it).
 * An operator's call: it needs the token when the service has one. */
int hamelclient_quarantine(hamelclient *c, json_t **out, hamelclient_error *err);

/* DELETE /v1/quarantine/{id}: clears the quarantine of a model, which is then compiled
 * and run again on its next request. A model that is not quarantined fails with
 * HAMELCLIENT_E_PROBLEM, status 404. */
int hamelclient_quarantine_clear(hamelclient *c, const char *model_id, hamelclient_error *err);

/* Writes a one-line description of `err` ("422 invalid-model: ... at /x column 3")
 * into buf[size], always NUL-terminated. Returns buf. */
char *hamelclient_error_string(const hamelclient_error *err, char *buf, size_t size);

/* The `hamel remote ...` subcommand; argv[0] is the program or subcommand name as in
 * main (a leading "remote" after it is skipped). Returns the process exit status:
 * 0 success, 1 the service reported a problem, 2 usage, 3 transport or protocol. */
int hamelclient_remote_main(int argc, char **argv);

#endif
