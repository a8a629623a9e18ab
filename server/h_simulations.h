/* h_simulations.h — the per-request state of the simulation and job routes
 * (POST /v1/simulations, GET and DELETE /v1/jobs/{id}), owned by h_simulations.c.
 *
 * It is http_conn's `sim` member (one of the per-route states, http_conn.h): only these
 * routes' handlers and hooks touch it, and their rows' release hook frees it. Set and
 * read on the connection's poll thread, or by the offloaded task while the connection
 * is suspended (never both at once).
 */
#ifndef HAMEL_SERVER_H_SIMULATIONS_H
#define HAMEL_SERVER_H_SIMULATIONS_H

#include <jansson.h>

#include "blob.h"
#include "jobs.h"

/* What the store holds of a job that is not in memory (h_simulations.c). */
typedef struct http_stored_job http_stored_job;

/* What the work of a POST /v1/simulations found (http__simulation_work), answered on
 * the resumed call. */
typedef struct http_submit {
    char key[80];    /* its simulation key */
    blob *hit;       /* its cached or stored result (a reference) */
    int done;        /* the work ran: then hit, problem, rc or the state's job is the answer */
    int rc;          /* jobs_submit's refusal */
    json_t *problem; /* the request's problem (the key or the check) */
} http_submit;

typedef struct http_sim_state {
    job *job;                /* the job answered about (a reference) */
    job_waiter waiter;       /* parked on job while suspended (?wait) */
    int view_set;            /* job's state read off the poll thread: */
    job_view view;           /* ... the next answer about it uses this copy */
    http_stored_job *stored; /* GET or DELETE of a job known only to the store */
    http_submit submit;      /* POST /v1/simulations */
} http_sim_state;

#endif
