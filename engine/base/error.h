/* error.h — every error the engine can report, and the problem documents that carry them.
 *
 * One X-macro list gives each of the engine's errors its code, problem-type slug and
 * title, so the problem+json documents can never drift from the code (libuv's
 * UV_ERRNO_MAP). The problem "type" is the relative URI "/problems/<slug>".
 *
 * The engine knows no protocol: HTTP statuses, and the codes only a service has (not
 * found, queue full, ...), belong to the program that embeds it, which hands them over
 * once at start with hamel_error_use (the server and the CLI: server/problems.c). A
 * problem document then carries that program's "status" after its title; without one
 * it carries none.
 */
#ifndef HAMEL_ERROR_H
#define HAMEL_ERROR_H

#include <jansson.h>
#include <stddef.h>

#define HAMEL_PROBLEM_TYPE_PREFIX "/problems/"

#define HAMEL_ERROR_MAP(X)                                                                                   \
    X(BAD_JSON, "bad-json", "The body is not valid JSON")                                                    \
    X(BAD_REQUEST, "invalid-request", "The request is not valid")                                            \
    X(INVALID_MODEL, "invalid-model", "The model is not valid")                                              \
    X(PARSE, "expression-syntax", "An expression could not be parsed")                                       \
    X(NONLINEAR_SPEED, "nonlinear-speed", "A speed is not linear in the velocities")                         \
    X(SINGULAR, "singular-transformation", "The speeds and constraints are dependent")                       \
    X(BAD_INITIAL, "invalid-initial-state", "The initial state is not valid")                                \
    X(FORMULATION, "formulation-unavailable", "That formulation cannot run this model")                      \
    X(LIMIT, "limit-exceeded", "The request exceeds a limit")                                                \
    X(COMPILE_LIMIT, "compile-limit", "The model is too large to compile within the limits")                 \
    X(STEP_LIMIT, "step-limit", "The integrator reached its step limit")                                     \
    X(TIME_LIMIT, "time-limit", "The simulation reached its wall-time limit")                                \
    X(CANCELLED, "cancelled", "The job was cancelled")                                                       \
    X(INTEGRATOR, "integrator-failure", "The integrator failed")                                             \
    X(NUMERIC, "numerical-failure", "The equations could not be evaluated")                                  \
    X(INTERNAL, "internal", "Internal error")

typedef enum hamel_error {
    HAMEL_OK = 0,
#define HAMEL_ERROR_ENUM(name, slug, title) HAMEL_E_##name,
    HAMEL_ERROR_FIRST_ = -100,
    HAMEL_ERROR_MAP(HAMEL_ERROR_ENUM)
#undef HAMEL_ERROR_ENUM
    /* the embedding program's codes (hamel_error_use) are numbered from here on */
    HAMEL_ERROR_END_
} hamel_error;

/* An error class of the embedding program: its code (HAMEL_ERROR_END_ or above), slug and
 * title (static strings). */
typedef struct hamel_error_class {
    int code;
    const char *slug;
    const char *title;
} hamel_error_class;

/* What the embedding program adds to the engine's errors: its own classes, and the
 * status its protocol reports for any code (written into each problem document; NULL:
 * no "status" member). Everything is borrowed and must be static. */
typedef struct hamel_error_protocol {
    const hamel_error_class *classes;
    size_t n_classes;
    int (*status)(int code);
} hamel_error_protocol;

/* Installs the embedding program's classes and statuses (NULL: none). Call once at start,
 * before any thread uses the engine; the pointer is read without a lock afterwards. */
void hamel_error_use(const hamel_error_protocol *protocol);

/* The problem-type slug and title of an error code (static strings; INTERNAL's for an
 * unknown code). */
const char *hamel_error_slug(int code);
const char *hamel_error_title(int code);

/* The status the embedding program reports for a code, or 0 when it installed none. */
int hamel_error_status(int code);

/* A new problem document {type, title, status (when the embedding program gives one),
 * errors: [], detail}. `detail` may be
 * NULL. Caller owns the result. */
json_t *hamel_problem_new(int code, const char *detail);

/* Gives a problem document the type, title and status (or none) of another code (its errors
 * and detail stay). Borrows `problem`. */
void hamel_problem_recode(json_t *problem, int code);

/* The error code whose problem type the document carries (HAMEL_E_INTERNAL if none);
 * any type ending in /<slug> counts, so documents stored with an older absolute type
 * URI still map. */
int hamel_problem_code(const json_t *problem);

/* Appends {path, column?, reason} to the problem's "errors" array; column < 0 means
 * none. Borrows `problem`. */
void hamel_problem_add(json_t *problem, const char *path, int column, const char *reason);

/* hamel_problem_add with a printf-formatted reason (cut at 511 bytes) and no column,
 * creating *problem with `code` first when it is NULL. */
void hamel_problem_addf(json_t **problem, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One 422 invalid-request error for each member of the object `obj` (borrowed; nothing
 * when it is not an object) whose name is not in keys[] (NULL-ended): its path is
 * `prefix` + "." + the name (the name alone when prefix is ""), its reason lists the
 * expected names. *problem is created when NULL. Returns how many members were unknown. */
int hamel_problem_unknown_members(json_t **problem, const json_t *obj, const char *prefix,
                                  const char *const *keys);

#endif
