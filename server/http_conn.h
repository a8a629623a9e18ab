/* http_conn.h — what the pieces of the HTTP face share (internal to server/http*.c,
 * respond.c, routes.c, resolve.c and the h_*.c endpoint files; nothing else includes it).
 *
 * Owns the types of the running server (http_server) and of one request (http_conn),
 * and declares the functions the pieces call across files. Names are http__*: internal
 * to the HTTP face (the libuv convention of uv__ for what is shared but not public).
 *   http.c      the libmicrohttpd daemon, the request lifecycle (headers, body, suspend
 *               and resume, offload), dispatch through the route table
 *   respond.c   responses: JSON, problem documents, result blobs, CORS headers
 *   routes.c    the route table: method + path pattern -> handler, flags and hooks, 405/Allow,
 *               preflight
 *   resolve.c   the model a request names (inline or model_id), compiled off the poll
 *               threads (offload pool) with one compilation per spec in flight
 *   h_*.c       one file per resource; h_simulations.h, h_batches.h and h_models.h
 *               declare the per-route state of theirs
 *
 * A request (http_conn) is where it is by its state (http_conn_state) and holds, besides
 * the core's fields (http.c), one group per concern, each named after and owned by one
 * file: off (http.c: the offload round trip), work (the offloaded work's inputs and
 * outputs, filled by the handler's task), resolve (resolve.c: the model the request
 * names), gz (respond.c: a large result deflated off the poll thread), and one per-route
 * state, a union member declared by the endpoint's header (sim, batch, form). The core
 * reaches a route's state only through its route row's hooks (after_compile, on_wake,
 * release): nothing tests which route a request is.
 */
#ifndef HAMEL_SERVER_HTTP_CONN_H
#define HAMEL_SERVER_HTTP_CONN_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "dynbuf.h"
#include "h_batches.h"
#include "h_models.h"
#include "h_simulations.h"
#include "hangup.h"
#include "heads.h"
#include "http.h"
#include "isolate.h"
#include "metrics.h"
#include "offload.h"
#include "once.h"

#define HTTP_LOG_PATH_MAX 256     /* request path kept for the access log */
#define HTTP_ID_MAX 128           /* longest {id} path segment */
#define HTTP_RETRY_AFTER_FULL "1" /* seconds, queue full */
#define HTTP_RETRY_AFTER_DOWN "5" /* seconds, shutting down */

struct http_server {
    http_deps d;
    struct MHD_Daemon *daemon;
    atomic_int ready;
    /* SHA-256 of a POST /v1/simulations body, exactly as received -> its simulation key
     * (a blob). Identical bytes are an identical request, so a repeat is answered from
     * the result cache without parsing or canonicalising the JSON (the cache-hit path
     * of a polling or batch client). Requests equal only after canonicalisation still
     * take the full path and still hit the result cache. */
    cache *memo;
    atomic_int streams;       /* batch streams whose response MHD still holds */
    atomic_size_t body_bytes; /* bytes held by request bodies of every connection (http.c) */
    offload *offload;         /* slow work and store round trips: off the poll threads */
    /* Derivations that can take the whole compile budget (?form=, /v1/hamel, /v1/evaluate,
     * /v1/linearize): a lane of their own, so that however many of them run, a new model
     * still finds an offload thread to compile on. */
    offload *derive;
    once *forms;     /* one derivation per (model, form, limits); compile-limit answers remembered */
    hangup *hangups; /* cancels an offloaded compilation whose client hung up (hangup.h) */
    heads *heads;    /* the deadline of request heads; the oldest give way at capacity */
    /* Compilations in flight by spec key: a request for a model that is being compiled
     * waits for that compilation instead of starting another (http__compile_first). */
    pthread_mutex_t flights_mu; /* a leaf; MHD's own locks are taken inside it, never around it */
    struct http_flight *flights;
};

/* A compilation in flight. It stays listed after it ends, holding its outcome for
 * latecomers, until its owner has put the model in the cache (http__flight_end). */
typedef struct http_flight {
    char key[CACHE_MAX_KEY + 1];
    struct http_conn *waiters; /* linked by next_waiter; resumed when it ends */
    int finished, rc;          /* ended, with engine_model_compile's outcome: */
    int recorded;              /* the model was looked up and put in the store */
    engine_model *model;
    json_t *problem;
    struct http_flight *next;
} http_flight;

typedef enum http_method {
    HTTP_GET,
    HTTP_HEAD,
    HTTP_POST,
    HTTP_DELETE,
    HTTP_OPTIONS,
    HTTP_OTHER,
} http_method;

/* A row of the route table (routes.c). */
typedef struct http_route http_route;

/* What a route row asks of the core (http_route.flags), so that nothing tests a route's
 * metrics label. */
#define HTTP_ROUTE_METRICS_TOKEN 0x01u  /* needs HAMEL_METRICS_TOKEN when one is set */
#define HTTP_ROUTE_EQUATIONS 0x02u      /* GET of a model answers its equations */
#define HTTP_ROUTE_BODY_IS_MODEL 0x04u  /* the POST body is the model itself (not {"model": ...}) */
#define HTTP_ROUTE_SUBMITS 0x08u        /* submits the job or batch it answers about (?wait applies) */
#define HTTP_ROUTE_RESULT_MEMO 0x10u    /* a repeated body may be answered from the result memo */
#define HTTP_ROUTE_MODEL_WITH_JOB 0x20u /* a new model is committed with the job's record */
#define HTTP_ROUTE_CHECKS_RUN 0x40u     /* a new model's compile also checks the body's simulation */

/* Whether the request's route row (c->row) has flag. */
int http__route_has(const struct http_conn *c, unsigned flag);

/* The row's after-compile work (http_route.after_compile), if any, with model m: returns
 * 1 when it committed a job whose record carries the model, else 0. */
int http__after_compile(struct http_conn *c, engine_model *m);

/* The answer of a parked request once woken: its row's on_wake (a job's or a batch's). */
enum MHD_Result http__on_wake(struct http_conn *c);

/* At the request's end: frees the route's own state by its row's release hook. */
void http__route_release(struct http_conn *c);

/* What the route table says about a path and the request's method (http__route). */
typedef struct http_route_match {
    metrics_route route;   /* the path's, for the metrics */
    const http_route *row; /* the row for the request's method; NULL: 405 */
    char allow[48];        /* the path's methods, for 405 and preflight */
} http_route_match;

/* Where a request is between the access handler's calls (after libmicrohttpd's, curl's
 * named states). Set and read on the connection's poll thread only, except that an
 * offloaded task or a flight's owner resumes it (http__offloaded, http__wake). */
typedef enum http_conn_state {
    HTTP_CONN_ROUTED = 0, /* being answered: headers routed, a POST's body arriving or parsed */
    HTTP_CONN_OFFLOADED,  /* suspended while work runs elsewhere; the resumed call is off.resume's */
    HTTP_CONN_PARKED,     /* suspended on a job or batch (a long-poll); woken by http__wake */
    HTTP_CONN_ANSWERED,   /* a response is queued (http__send): later calls drop what comes */
} http_conn_state;

/* Offloaded work's round trip (http.c: http__offload and its kin): what answers on the
 * resumed call, whether the work ran, and why not. */
typedef struct http_offload_state {
    enum MHD_Result (*resume)(struct http_conn *c);
    int ran; /* the work ran (else rc, or HAMEL_E_UNAVAILABLE, is the 503's) */
    int rc;  /* offload_submit's refusal */
} http_offload_state;

/* The inputs and outputs of the offloaded work of a handler (h_*.c, resolve.c): the
 * engine call of /v1/hamel, /v1/evaluate, /v1/linearize, /v1/steady, /v1/code, the
 * equations, a store write, a health probe. */
typedef struct http_work {
    json_t *body;          /* the parsed request body it is for (a reference) */
    engine_model *model;   /* the model it works on (a reference) */
    int rc;                /* its outcome: 0, or a HAMEL_E_* code with problem */
    json_t *out, *problem; /* its result */
    char *text;            /* ... or a text (/metrics), text_len bytes */
    size_t text_len;
    /* Engine work under the compile budget (a compilation, a derivation) is cancelled
     * through ctl, which the hang-up watch (http__watch_begin) sets when the client goes
     * away or the service stops. */
    engine_control ctl;
    hangup_entry hup;
} http_work;

/* The outcome of the request's model compilation, run on the offload pool before its
 * handler (or copied from another request's flight), taken by http__model_by_spec and
 * http__model_by_id (resolve.c). */
typedef struct http_precompiled {
    int set; /* there is an outcome to take */
    int rc;
    engine_model *model;
    json_t *problem;
    int recorded; /* the store was asked off the poll thread ... */
    int is_new;   /* ... and did not know the model (put there now: 201) */
    /* HTTP_ROUTE_CHECKS_RUN: the body's simulation checked in the same worker call, taken
     * by http__simulation_rest (h_simulations.c); the owner's only, never a flight's copy */
    isolate_check check;
    /* ... and its run, started in the same call when a job would start at once
     * (jobs_prerun_ok; a request that waits): the job prerun_id takes it over */
    isolate_prerun *prerun;
    char prerun_id[JOB_ID_LEN + 1];
} http_precompiled;

/* The model a request names (resolve.c): its spec's text and key, the outcome of its
 * compilation off the poll thread, a model read from the store by id, and the flight
 * (one compilation per spec) it runs or waits on. */
typedef struct http_resolve {
    char *spec_text;                  /* the request's model spec, compact with sorted keys */
    char spec_key[CACHE_MAX_KEY + 1]; /* "b:" + SHA-256 of spec_text */
    http_precompiled pre;
    char stored_id[CACHE_MAX_KEY + 1]; /* a model known by id, read from the store ... */
    json_t *stored_spec;               /* ... to compile (both on the offload pool) */
    http_flight *flight;               /* the compilation this request runs for others too */
    struct http_conn *next_waiter;     /* in the flight's waiters, when it waits on one */
} http_resolve;

/* A large result being deflated on the offload pool before its answer (respond.c,
 * http__result). */
typedef struct http_gz_pending {
    blob *src;                    /* the result (a reference) */
    int cached, tried;            /* answered as "cached"; tried once (no second try) */
    char etag[CACHE_MAX_KEY + 3]; /* its identity ETag ("" none) */
    char key[CACHE_MAX_KEY + 1];  /* counted in the results cache under this */
} http_gz_pending;

/* One request. The core (http.c) owns the first fields; each group after is owned by the
 * file its comment names. */
typedef struct http_conn {
    http_server *srv;
    struct MHD_Connection *conn;
    metrics_route route;
    http_method method;
    const http_route *row; /* the request's route row (NULL until routed, or none) */
    const char *url;       /* MHD's, set by the call that routes the request */
    double t0;
    int status;
    size_t bytes;
    http_conn_state state;
    char id[HTTP_ID_MAX + 1]; /* the {id} of the route, percent-decoded */
    dynbuf body;              /* up to cfg->max_body */
    size_t drained;
    int too_big;
    int body_busy;   /* its body did not fit in the bytes all bodies may hold: 503 after it */
    int nul_in_path; /* the raw path held %00, which libmicrohttpd's decoding cuts at */
    int many_params; /* the query string had more parameters than it may (cut: 400) */
    atomic_int resumed;
    char method_name[16];
    char path[HTTP_LOG_PATH_MAX];

    http_offload_state off; /* http.c: the round trip of offloaded work */
    http_work work;         /* h_*.c: that work's inputs and outputs */
    http_resolve resolve;   /* resolve.c: the model the request names */
    http_gz_pending gz;     /* respond.c: a large result's gzip form, made off the poll thread */

    /* The route's own state: the member of the request's row (c->row), declared by the
     * endpoint's file, zeroed with the connection and released by the row's release
     * hook when the request ends. Nothing outside that endpoint's file and hooks reads it. */
    union {
        http_sim_state sim;     /* h_simulations.h: simulations and their jobs */
        http_batch_state batch; /* h_batches.h: batches */
        http_form_state form;   /* h_models.h: an equations ?form= */
    };
} http_conn;

/* ---- http.c ---- */

/* The resume callback of offloaded work (offload.h's done): records whether it ran and
 * resumes the connection. */
void http__offloaded(void *arg, int ran);

/* offload_submit(pool, run, done, c), with c->off.rc set to 0 before it (the pool may run
 * done(c) before offload_submit returns, and done may read c->off.rc) and to the refusal
 * only when it was refused (then nothing runs on the pool). Returns that refusal or 0. */
int http__submit(http_conn *c, offload *pool, void (*run)(void *), void (*done)(void *, int));

/* Suspends the connection and runs run(c) on the offload pool, then done(c, ran) (which
 * must end in http__offloaded); the resumed call answers with resume(c). Past the queue
 * (or while stopping) the answer is a 503. */
enum MHD_Result http__offload_with(http_conn *c, void (*run)(void *), void (*done)(void *, int),
                                   enum MHD_Result (*resume)(http_conn *));

/* http__offload on the derivations' lane (http_server.derive). */
enum MHD_Result http__offload_derive(http_conn *c, void (*run)(void *),
                                     enum MHD_Result (*resume)(http_conn *));

/* http__offload_with with http__offloaded as done. */
enum MHD_Result http__offload(http_conn *c, void (*run)(void *), enum MHD_Result (*resume)(http_conn *));

/* As http__offload, for a store read (a result, a job record): when the offload queue is
 * full it is done on this poll thread, as it was before reads moved to the pool, rather
 * than answered 503; the answer is resume(c) either way. */
enum MHD_Result http__offload_read(http_conn *c, void (*run)(void *), enum MHD_Result (*resume)(http_conn *));

/* The number in ?wait=N, capped at HAMEL_MAX_WAIT; -1 when malformed. */
double http__wait(http_conn *c);

/* The 400 answer to a malformed ?wait (http__wait returned -1). */
enum MHD_Result http__bad_wait(http_conn *c);

/* The value of a flag in the query string: ?name, ?name=1 or ?name=true. */
int http__flag(http_conn *c, const char *name);

/* The wake of a long-poll's waiter (job_waiter, batch_waiter): resumes the connection. */
void http__wake(void *arg);

/* Suspends c for a long-poll: w wakes it (http__wake) when its job or batch finishes or
 * `wait` seconds on. The caller then parks w (jobs_wait, batch_wait) and, when that
 * refuses (finished already), calls http__wake at once. */
void http__suspend_on(http_conn *c, waiter *w, double wait);

/* Frees c's request body and its share of the bytes all bodies may hold (http.c). */
void http__body_release(http_conn *c);

/* ---- routes.c ---- */

/* Matches url against the route table: fills m and c->id. Returns 0, or -1 when no row
 * matches (an unknown or malformed /v1 path). */
int http__route(http_conn *c, const char *url, http_route_match *m);

/* Answers a request without a body by its row's handler. */
enum MHD_Result http__answer(http_conn *c, const http_route *row);

/* A parsed POST body (a JSON object) to its route's handler (c->row). */
enum MHD_Result http__dispatch(http_conn *c, json_t *body);

/* The 204 answer to a CORS preflight (OPTIONS) for a path allowing `allow`. */
enum MHD_Result http__preflight(http_conn *c, const char *allow);

/* ---- respond.c ---- */

/* The value of a request header, or NULL (borrowed from MHD for the request's life). */
const char *http__header(http_conn *c, const char *name);

/* Queues r with status and the common headers, and destroys our handle on it. */
enum MHD_Result http__send(http_conn *c, int status, struct MHD_Response *r, const char *ctype, size_t bytes);

struct MHD_Response *http__text_response(char *text, size_t len);

/* Sends a JSON value (stolen) with status, content type and up to two extra headers
 * (a NULL name skips one). */
enum MHD_Result http__json_h(http_conn *c, int status, json_t *j, const char *ctype, const char *h1,
                             const char *v1, const char *h2, const char *v2);

enum MHD_Result http__json(http_conn *c, int status, json_t *j);

/* Sends a problem document (stolen) with the status it carries. */
enum MHD_Result http__problem_h(http_conn *c, json_t *problem, const char *h1, const char *v1);

enum MHD_Result http__problem(http_conn *c, json_t *problem);

enum MHD_Result http__error(http_conn *c, int code, const char *detail);

enum MHD_Result http__error_at(http_conn *c, int code, const char *path, const char *reason);

/* Sends a result blob (borrowed; the response keeps its own reference) as
 * {"cached":<cached>, ...rest of the blob}: no copy of the trajectory is made. When the
 * request accepts gzip, the answer is b's gzip form (deflated once, kept with b and
 * counted in the results cache's entry under `key`, which may be NULL), under the ETag
 * etag + "-gzip". A matching If-None-Match is a 304. Both carry Vary: Accept-Encoding. */
enum MHD_Result http__result(http_conn *c, blob *b, int cached, const char *etag, const char *key);

/* Whether the request's Accept-Encoding allows gzip (q > 0). */
int http__gzip_ok(http_conn *c);

/* The entity tag etag ("\"x\"") with suffix before its closing quote, into out[cap]. */
void http__etag_variant(const char *etag, const char *suffix, char *out, size_t cap);

/* Whether the request's If-None-Match matches etag (negotiate_none_match); NULL: no. */
int http__not_modified_since(http_conn *c, const char *etag);

/* The 304 answer for etag, with one more header (a NULL name skips it): a Cache-Control
 * or Vary the 200 would have carried. */
enum MHD_Result http__not_modified(http_conn *c, const char *etag, const char *h1, const char *v1);

/* A response for text (taken: malloc'd, len bytes), gzip-coded when it is at least
 * GZIP_MIN_BYTES and the request accepts gzip; Vary: Accept-Encoding either way. *sent
 * receives the bytes the response holds. NULL when out of memory. */
struct MHD_Response *http__encoded_response(http_conn *c, char *text, size_t len, size_t *sent);

/* ---- h_health.c ---- */

enum MHD_Result http__health(http_conn *c);

enum MHD_Result http__readyz(http_conn *c);

enum MHD_Result http__metrics(http_conn *c);

enum MHD_Result http__livez(http_conn *c);

/* ---- h_quarantine.c ---- */

/* GET and DELETE /v1/quarantine/{id}: a quarantined model's record; clearing it. */
enum MHD_Result http__quarantine(http_conn *c);

/* GET /v1/quarantine: the models quarantined now (quarantine_list). */
enum MHD_Result http__quarantine_list(http_conn *c);

/* ---- h_problems.c ---- */

/* GET /problems/ and /problems/{slug}: the HTML pages of the problem types (problems.h). */
enum MHD_Result http__problems(http_conn *c);

/* ---- h_static.c ---- */

/* GET of a path outside /v1: a file of HAMEL_STATIC (url is the request's, unlimited). */
enum MHD_Result http__static(http_conn *c);

/* ---- resolve.c ---- */

/* The model with this id from the cache or the store (compiled again from its stored
 * JSON: on the offload pool when http__compile_stored_first ran before, else here).
 * Returns 0 and a new reference, HAMEL_E_NOT_FOUND, or another error + problem. */
int http__model_by_id(http_conn *c, const char *id, engine_model **out, json_t **problem);

/* The model of a spec object: a hit on the hash of its JSON text skips the engine;
 * otherwise it is the outcome of the request's compilation (run on the compile pool
 * before the handler, see http__compile_first) or, failing that, compiled here; if its
 * id is new it is remembered in the store. *created says whether the service had never
 * seen this model id. */
int http__model_by_spec(http_conn *c, const json_t *spec, engine_model **out, int *created, json_t **problem);

/* The model a request body names with "model" or "model_id". */
int http__model_of(http_conn *c, const json_t *body, engine_model **out, json_t **problem);

/* On the offload pool, around engine work under the compile budget: watches c's socket
 * so that a hang-up (or a shutdown) sets c->work.ctl.cancel ... */
void http__watch_begin(http_conn *c);

/* ... and stops watching, counting a stop (rc HAMEL_E_COMPILE_LIMIT or HAMEL_E_CANCELLED)
 * in hamel_compiles_stopped_total. */
void http__watch_end(http_conn *c, int rc);

/* Unlists and frees c's flight (once the model is cached, or c is gone). */
void http__flight_end(http_conn *c);

/* At the request's end: frees what c->resolve holds, ending c's flight if it has one. */
void http__resolve_clear(http_conn *c);

/* When the model with this id is not in the cache but in the store (after a restart,
 * or evicted), compiles its stored JSON on the offload pool and answers with resume(c)
 * when that ends (returns 1 with *ret). Returns 0 to go on now. */
int http__compile_stored_first(http_conn *c, const char *id, enum MHD_Result (*resume)(http_conn *),
                               enum MHD_Result *ret);

/* When the body's model is not in the cache, compiles it (or, for a model_id, its stored
 * JSON) on the offload pool and dispatches the body when that ends (returns 1 with
 * *ret). Returns 0 to dispatch now: a cached model, an unknown id, or no model. */
int http__compile_first(http_conn *c, json_t *body, enum MHD_Result *ret);

/* ---- h_models.c (its per-route state: h_models.h, c->form) ---- */

/* POST /v1/models. */
enum MHD_Result http__post_model(http_conn *c, json_t *body);

/* GET /v1/models/{id} or /v1/models/{id}/equations (by c->route). */
enum MHD_Result http__model(http_conn *c);

/* GET /v1/models/{id} (or its /equations when `equations` is set). */
enum MHD_Result http__get_model(http_conn *c, int equations);

/* Hands the resolved model m (the reference is taken) and the request body (a reference
 * is taken) to the offload task that runs next: c->work.model and c->work.body. */
void http__hold_work(http_conn *c, engine_model *m, json_t *body);

/* Resolves the model of body (borrowed) into c->work.model, keeps body as c->work.body and
 * runs run(c) on the offload pool; run fills c->work.rc and c->work.out or c->work.problem,
 * answered as 200 + c->work.out or the problem (/v1/hamel, /v1/evaluate, /v1/linearize). */
enum MHD_Result http__offload_on_model(http_conn *c, json_t *body, void (*run)(void *));

/* ---- h_hamel.c, h_evaluate.c, h_linearize.c ---- */

/* POST /v1/hamel: the Hamel coefficients at the body's points. */
enum MHD_Result http__post_hamel(http_conn *c, json_t *body);

/* POST /v1/evaluate: accelerations and multipliers at the body's states. */
enum MHD_Result http__post_evaluate(http_conn *c, json_t *body);

/* POST /v1/linearize: the linearization about the body's operating point. */
enum MHD_Result http__post_linearize(http_conn *c, json_t *body);

/* ---- h_steady.c ---- */

/* POST /v1/steady: steady motions and their branches. */
enum MHD_Result http__post_steady(http_conn *c, json_t *body);

/* ---- h_code.c ---- */

/* POST /v1/code: the generated file of a simulation request (its "lang"). */
enum MHD_Result http__post_code(http_conn *c, json_t *body);

/* GET /v1/models/{id}/code?lang=: the generated file of a model, no state baked in. */
enum MHD_Result http__model_code(http_conn *c);

/* After an offloaded evaluate/linearize: a cancelled one (c->work.rc HAMEL_E_CANCELLED)
 * becomes 503 unavailable (retry), as a cancelled compilation; `what` names the work. */
void http__lin_cancelled(http_conn *c, const char *what);

/* ---- h_simulations.c (its per-route state: h_simulations.h, c->sim) ---- */

/* Answers a POST /v1/simulations whose exact body was seen before and whose result is
 * still cached; returns 1 if it answered. */
int http__simulation_memo(http_conn *c, enum MHD_Result *ret);

/* The work of a POST /v1/simulations (body c->work.body) once its model m (borrowed) is
 * known, done on the offload pool right after the model's compilation (the row's
 * after_compile): the simulation key, the result cache, the store,
 * engine_simulation_check and jobs_submit (a store commit, with HAMEL_REDIS an XADD).
 * Sets c->sim.submit, which http__post_simulation answers on the resumed call; does
 * nothing for a malformed ?wait (the resumed call answers 400). Returns 1 when it
 * submitted a job (c->sim.job), whose record carries the model. */
int http__simulation_work(http_conn *c, engine_model *m);

/* POST /v1/simulations. */
enum MHD_Result http__post_simulation(http_conn *c, json_t *body);

/* GET and DELETE /v1/jobs/{id}. */
enum MHD_Result http__job(http_conn *c);

/* The rows' on_wake: the answer about c->sim.job after a long-poll. */
enum MHD_Result http__job_wake(http_conn *c);

/* The rows' release: frees c->sim. */
void http__sim_release(http_conn *c);

/* ---- h_batches.c (its per-route state: h_batches.h, c->batch) ---- */

/* The work of a POST /v1/batches (body c->work.body) once its model m (borrowed) is known,
 * done on the offload pool right after the model's compilation (the row's
 * after_compile): batch_create into c->batch.b (or c->work.rc and c->work.problem),
 * answered by http__post_batch on the resumed call; does nothing for a malformed ?wait.
 * Returns 0: a batch's model is not queued to be committed with a job's record (its row
 * has no HTTP_ROUTE_MODEL_WITH_JOB). */
int http__batch_work(http_conn *c, engine_model *m);

/* POST /v1/batches. */
enum MHD_Result http__post_batch(http_conn *c, json_t *body);

/* GET and DELETE /v1/batches/{id}. */
enum MHD_Result http__batch(http_conn *c);

/* The rows' on_wake: c->batch.b's status document after a long-poll. */
enum MHD_Result http__batch_wake(http_conn *c);

/* The rows' release: frees c->batch. */
void http__batch_release(http_conn *c);

#endif
