/* problems.h — the service's side of the error codes: the codes only a service has, the
 * HTTP status of every code, and the /problems/<slug> pages that explain each.
 *
 * One table (problems.c) holds a row per code — the engine's (engine/base/error.h) and the
 * service's below — with its status, what it means and what to do. problems_init hands
 * the service's classes and the statuses to the engine (hamel_error_use), so every
 * problem document, whoever builds it, carries the same type, title and status; the
 * pages are generated from the same rows. Read-only after problems_init: thread-safe.
 */
#ifndef HAMEL_SERVER_PROBLEMS_H
#define HAMEL_SERVER_PROBLEMS_H

#include "error.h"

/* The service's codes: name, slug, title (the engine's list in error.h has the rest). */
#define PROBLEMS_SERVER_MAP(X)                                                                               \
    X(TOO_LARGE, "too-large", "The request exceeds a limit")                                                 \
    X(NOT_FOUND, "not-found", "No such resource")                                                            \
    X(METHOD, "method-not-allowed", "Method not allowed")                                                    \
    X(UNAUTHORIZED, "unauthorized", "A bearer token is required")                                            \
    X(QUEUE_FULL, "queue-full", "The job queue is full")                                                     \
    X(UNSUPPORTED_MEDIA, "unsupported-media-type", "The body must be application/json")                      \
    X(CONFLICT, "conflict", "The resource is not in a state that allows this")                               \
    X(GONE, "gone", "The result is no longer kept")                                                          \
    X(UNAVAILABLE, "unavailable", "The service is unavailable")                                              \
    X(NOT_IMPLEMENTED, "not-implemented", "Not implemented")                                                 \
    X(BAD_HTTP, "bad-http", "The request is not well-formed HTTP")                                           \
    X(ENGINE_FAULT, "engine-fault", "The engine failed on this model")

/* The service's codes keep the engine's HAMEL_E_ prefix: one namespace of problem codes
 * across the project, numbered after the engine's. */
enum problems_code {
    PROBLEMS_FIRST_ = HAMEL_ERROR_END_ - 1,
#define PROBLEMS_ENUM(name, slug, title) HAMEL_E_##name,
    PROBLEMS_SERVER_MAP(PROBLEMS_ENUM)
#undef PROBLEMS_ENUM
        PROBLEMS_END_
};

/* Installs the service's classes and statuses in the engine (hamel_error_use). Call once
 * at the start of main, before any thread (the server, its engine workers, the CLI). */
void problems_init(void);

/* The HTTP status of a code (500 for an unknown one). */
int problems_status(int code);

/* The HTML page of the problem type `slug`, or of the index of all of them when slug is
 * NULL or "": a new string (caller frees) and its length in *len, or NULL for an unknown
 * slug (or out of memory). */
char *problems_page(const char *slug, size_t *len);

/* Codes in the table, and the code of row i (for tests: every code has a row). */
size_t problems_count(void);
int problems_code_at(size_t i);

#endif
