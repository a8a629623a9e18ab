/* error.h — every error the engine (and the service above it) can report.
 *
 * One X-macro list gives each error its code, HTTP status, problem-type slug and
 * title, so the problem+json documents can never drift from the code (libuv's
 * UV_ERRNO_MAP). The problem "type" is "https://hamel.dev/problems/<slug>".
 */
#ifndef HAMEL_ERROR_H
#define HAMEL_ERROR_H

#include <jansson.h>

#define HAMEL_ERROR_MAP(X)                                                                                   \
    X(BAD_JSON, 400, "bad-json", "The body is not valid JSON")                                               \
    X(BAD_REQUEST, 422, "invalid-request", "The request is not valid")                                       \
    X(INVALID_MODEL, 422, "invalid-model", "The model is not valid")                                         \
    X(PARSE, 422, "expression-syntax", "An expression could not be parsed")                                  \
    X(NONLINEAR_SPEED, 422, "nonlinear-speed", "A speed is not linear in the velocities")                    \
    X(SINGULAR, 422, "singular-transformation", "The speeds and constraints are dependent")                  \
    X(BAD_INITIAL, 422, "invalid-initial-state", "The initial state is not valid")                           \
    X(FORMULATION, 422, "formulation-unavailable", "That formulation cannot run this model")                 \
    X(TOO_LARGE, 413, "too-large", "The request exceeds a limit")                                            \
    X(LIMIT, 422, "limit-exceeded", "The request exceeds a limit")                                           \
    X(COMPILE_LIMIT, 422, "compile-limit", "The model is too large to compile within the limits")            \
    X(NOT_FOUND, 404, "not-found", "No such resource")                                                       \
    X(METHOD, 405, "method-not-allowed", "Method not allowed")                                               \
    X(UNAUTHORIZED, 401, "unauthorized", "A bearer token is required")                                       \
    X(QUEUE_FULL, 503, "queue-full", "The job queue is full")                                                \
    X(UNSUPPORTED_MEDIA, 415, "unsupported-media-type", "The body must be application/json")                 \
    X(STEP_LIMIT, 422, "step-limit", "The integrator reached its step limit")                                \
    X(TIME_LIMIT, 422, "time-limit", "The simulation reached its wall-time limit")                           \
    X(CANCELLED, 409, "cancelled", "The job was cancelled")                                                  \
    X(INTEGRATOR, 422, "integrator-failure", "The integrator failed")                                        \
    X(NUMERIC, 422, "numerical-failure", "The equations could not be evaluated")                             \
    X(CONFLICT, 409, "conflict", "The resource is not in a state that allows this")                          \
    X(GONE, 410, "gone", "The result is no longer kept")                                                     \
    X(UNAVAILABLE, 503, "unavailable", "The service is unavailable")                                         \
    X(NOT_IMPLEMENTED, 501, "not-implemented", "Not implemented")                                            \
    X(INTERNAL, 500, "internal", "Internal error")                                                           \
    X(BAD_HTTP, 400, "bad-http", "The request is not well-formed HTTP")                                      \
    X(ENGINE_FAULT, 500, "engine-fault", "The engine failed on this model")

typedef enum hamel_error {
    HAMEL_OK = 0,
#define HAMEL_ERROR_ENUM(name, status, slug, title) HAMEL_E_##name,
    HAMEL_ERROR_FIRST_ = -100,
    HAMEL_ERROR_MAP(HAMEL_ERROR_ENUM)
#undef HAMEL_ERROR_ENUM
} hamel_error;

/* The HTTP status of an error code (500 for an unknown one). */
int hamel_error_status(int code);

/* The problem-type slug and title of an error code (static strings). */
const char *hamel_error_slug(int code);
const char *hamel_error_title(int code);

/* A new problem document {type, title, status, detail, errors: []}. `detail` may be
 * NULL. Caller owns the result. */
json_t *hamel_problem_new(int code, const char *detail);

/* Gives a problem document the type, title and status of another code (its errors
 * and detail stay). Borrows `problem`. */
void hamel_problem_recode(json_t *problem, int code);

/* The error code whose problem type the document carries (HAMEL_E_INTERNAL if none). */
int hamel_problem_code(const json_t *problem);

/* Appends {path, column?, reason} to the problem's "errors" array; column < 0 means
 * none. Borrows `problem`. */
void hamel_problem_add(json_t *problem, const char *path, int column, const char *reason);

/* hamel_problem_add with a printf-formatted reason (cut at 511 bytes) and no column,
 * creating *problem with `code` first when it is NULL. */
void hamel_problem_addf(json_t **problem, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
