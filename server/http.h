/* http.h — the HTTP face of the service: libmicrohttpd daemon, routing and endpoints
 * (http.c; the pieces it is split into share server/http_conn.h).
 *
 * Owns the daemon and every endpoint of API.md §2–5 plus /livez, /readyz, /metrics and
 * the static web front end. The state it serves from (caches, store, job pool) is
 * borrowed from main and must outlive http_stop.
 */
#ifndef HAMEL_SERVER_HTTP_H
#define HAMEL_SERVER_HTTP_H

#include "batch.h"
#include "cache.h"
#include "config.h"
#include "engine.h"
#include "jobs.h"
#include "store.h"

typedef struct http_server http_server;

/* What the endpoints use; all borrowed. */
typedef struct http_deps {
    const server_config *cfg;
    const engine_limits *limits;
    cache *models;  /* engine_model values: "m:<model id>" and "b:<sha256 of model JSON>" */
    cache *results; /* blob values: "<simulation key>" */
    store *st;      /* may be NULL: no persistence */
    jobs *jobs;
    batches *batches;
} http_deps;

/* Binds cfg->addr:cfg->port and starts serving. *port receives the bound port.
 * Returns 0 and *out, or -1 with a message on stderr. Borrows deps. */
int http_start(const http_deps *deps, http_server **out, int *port);

/* Makes /readyz answer 503 (the start of a drain). The listening socket stays open, so
 * a client polling a running job still gets its answer and new work gets 503 + Retry-After
 * from the job pool rather than a refused connection. (MHD_quiesce_daemon is not used:
 * in libmicrohttpd 0.9.75 with an epoll thread pool it races the poll threads removing the
 * same listen socket from their epoll sets and aborts the process.) */
void http_drain(http_server *h);

/* Closes every connection and frees the server, after letting open batch streams finish
 * sending for up to two seconds. Every long-poll and stream must have been woken
 * (jobs_shutdown, batches_shutdown) first. Accepts NULL. */
void http_stop(http_server *h);

#endif
