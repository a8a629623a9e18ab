/* isolate.h — the engine's work done in supervised worker processes, so that a fault in
 * the engine (SIGSEGV, SIGBUS, SIGFPE, abort, a runaway allocation) costs one request,
 * never the service.
 *
 * Every engine call that runs on user input (compiling a model, checking and running a
 * simulation, Hamel coefficients, evaluate, linearize, the equations and their forms)
 * is sent to an engine worker: this same executable started with --engine-worker
 * (exec'd with posix_spawn, never a bare fork of the threaded server), which holds a
 * cache of compiled models keyed by model id, so a model is compiled once per worker.
 * The server keeps shells of the models (engine_model_shell: id, canonical JSON,
 * summary), which is all its caches, keys and answers need.
 *
 * The protocol on a socketpair is small and length-prefixed: a request {operation,
 * limits, model id, model JSON text, request JSON text, head, argument} and a reply
 * {status, text (the result text, passed through as is, or the problem document),
 * and for a compilation id, canonical JSON, summary, bytes}; a long text (64 KB to
 * 256 MB) is left in the worker's reply memfd instead, flagged in the reply's head. Cancellation and progress
 * go through a page of shared memory holding the call's engine_control (its atomics are
 * lock-free, so they work across the two processes): while it waits, the calling thread
 * copies the caller's cancel flag in and the worker's progress out.
 *
 * The pool: up to isolate_config.max_workers processes, started when first needed. A
 * thread takes a free worker (one that has the model compiled, when there is one), sends
 * it the call and waits. If the process dies (end of file on the socket; waitpid says
 * how: a signal, or an exit), or passes the call's hard deadline (it is killed), the call
 * ends with HAMEL_E_ENGINE_FAULT (500 engine-fault) naming the model and the signal, the
 * model is quarantined (quarantine.h), and the next call starts a new worker. Each worker
 * caps its own address space (RLIMIT_AS: the memory it had at start plus
 * isolate_config.memory_mb), so a runaway allocation ends that worker, not the machine.
 *
 * Before every call the model's quarantine is consulted: a quarantined model is
 * answered at once with its recorded problem.
 *
 * Without isolate_start (the unit tests, the CLI, HAMEL_ISOLATE=0) every function below
 * calls the engine in this process (still consulting the quarantine when one is set up).
 *
 * Thread-safe. Lock order: the pool mutex is a leaf; it is never held during a call.
 */
#ifndef HAMEL_SERVER_ISOLATE_H
#define HAMEL_SERVER_ISOLATE_H

#include <jansson.h>

#include "engine.h"
#include "problems.h"

typedef struct isolate_config {
    const char *exe;      /* the worker executable (this hamel-server), borrowed; copied */
    int max_workers;      /* processes at most (one per thread that can call at once) */
    long memory_mb;       /* RLIMIT_AS headroom of a worker over its start, MiB (0: none) */
    const char *code_dir; /* the native code cache for the workers ("" or NULL: none) */
    size_t model_bytes;   /* compiled models a worker keeps, bytes (the least recently used go) */
} isolate_config;

/* Starts the worker pool (no process yet: they start when first needed). Returns 0 or -1
 * with a message on stderr. Call once from main, after quarantine_start. */
int isolate_start(const isolate_config *cfg);

/* Ends every worker (closing its socket, then SIGKILL after a moment) and frees the
 * pool. Calls still running end with HAMEL_E_UNAVAILABLE. Harmless without a start. */
void isolate_stop(void);

/* Whether the engine runs in worker processes. */
int isolate_active(void);

/* The worker process's main (hamel-server --engine-worker FD SHMFD MEMORY_MB CODE_DIR
 * MODEL_BYTES): answers calls on FD until it is closed, then exits. */
int isolate_worker_main(int argc, char **argv);

/* The engine.h calls of the same names, run in a worker. The models they take are
 * shells made by isolate_model_compile_ctl (or compiled models, when not isolated). */
int isolate_model_compile_ctl(const json_t *model, const engine_limits *limits, engine_control *ctl,
                              engine_model **out, json_t **problem);
int isolate_simulation_check(const engine_model *m, const json_t *request, const engine_limits *limits,
                             json_t **problem);

/* The outcome of a check made with a compilation (isolate_model_compile_check). */
typedef struct isolate_check {
    int ran;         /* the check ran (else: check separately) */
    int rc;          /* engine_simulation_check's status ... */
    json_t *problem; /* ... and its problem (the caller's) */
} isolate_check;

/* A simulation already running in an engine worker, started by the call that compiled its
 * model (isolate_model_compile_check); its worker is reserved for it until it is taken
 * (isolate_prerun_finish) or dropped (isolate_prerun_drop), exactly once. */
typedef struct isolate_prerun isolate_prerun;

/* isolate_model_compile_ctl with the model's compact sorted JSON text when the caller has
 * it (NULL: made here), and, when `request` and `check` are not NULL and the model
 * compiles, isolate_simulation_check of the request on it in the same call to the worker
 * (a new model's simulation: one round trip instead of two), its outcome in *check.
 * With `prerun` too (and engine workers), when the check passes the worker goes on at
 * once to run the request (isolate_simulate_text's, with `head`, whose "model_id" member
 * the worker sets to the model's id) and *prerun is that run in flight, else NULL: the
 * run overlaps what the caller does between the compilation and the job. */
int isolate_model_compile_check(const json_t *model, const char *model_text, const json_t *request,
                                const engine_limits *limits, engine_control *ctl, engine_model **out,
                                json_t **problem, isolate_check *check, const json_t *head,
                                isolate_prerun **prerun);

/* The outcome of the run p (as isolate_simulate_text's, cancelled through ctl, whose
 * progress it reports); frees p. A run cancelled before it was taken (the compilation's
 * cancel, a hang-up in its last moment) runs again here unless ctl is cancelled. */
int isolate_prerun_finish(isolate_prerun *p, const json_t *request, const engine_limits *limits,
                          engine_control *ctl, const json_t *head, char **text, size_t *len,
                          json_t **problem);

/* Cancels the run p, waits for its worker to stop and frees p (nobody wants its result).
 * Accepts NULL. */
void isolate_prerun_drop(isolate_prerun *p);
/* isolate_simulation_check of the batch runs runs[0..n) (borrowed), each merged over
 * `base` (merge.h), in one call to a worker (sent the base once and each run's own
 * members): problems[i] is NULL or the problem of run i (caller releases). Returns 0, or
 * an error with *problem when the call itself failed (then no problems[i] is set). */
int isolate_simulation_check_all(const engine_model *m, const json_t *base, const json_t *const *runs,
                                 size_t n, const engine_limits *limits, json_t **problems, json_t **problem);
int isolate_simulate_text(const engine_model *m, const json_t *request, const engine_limits *limits,
                          engine_control *ctl, const json_t *head, char **text, size_t *len,
                          json_t **problem);
/* One run of isolate_simulate_many: its outcome. */
typedef struct isolate_result {
    int rc;     /* 0: text is the result; else problem (-1: not run, see below) */
    char *text; /* the result text (caller frees) */
    size_t len;
    json_t *problem; /* rc != 0: why (caller releases; NULL when not run) */
} isolate_result;

/* isolate_simulate_text of the batch runs runs[0..n) (borrowed), each merged over
 * `base` (merge.h; the worker is sent the base once and each run's own members), in one
 * worker call: one message out, the results back one by one as they finish; each result
 * has `head` in which "job_id" is job_ids[i]. ctl (may be NULL) cancels the call: the run
 * in progress stops and the rest answer cancelled. The call's deadline is the budget of
 * one run past the last result that came back. If the worker dies, the run it was on
 * fails with the engine fault (the model is quarantined) and the runs after it are not
 * run (rc -1, no problem): the caller may submit them again (they meet the quarantine).
 * With native_wait > 0 the worker first has the model's optimizing tier built and waits
 * for it up to that many seconds (engine_model_native_wait: a long sweep's runs then
 * start on native code). Returns 0 (every results[i] set), or an error with *problem when
 * nothing was run. */
int isolate_simulate_many(const engine_model *m, const json_t *base, const json_t *const *runs, size_t n,
                          const json_t *head, const char *const *job_ids, double native_wait,
                          const engine_limits *limits, engine_control *ctl, isolate_result *results,
                          json_t **problem);

int isolate_hamel(const engine_model *m, const json_t *request, const engine_limits *limits, json_t **result,
                  json_t **problem);
int isolate_evaluate_ctl(const engine_model *m, const json_t *request, const engine_limits *limits,
                         engine_control *ctl, json_t **result, json_t **problem);
int isolate_linearize(const engine_model *m, const json_t *request, const engine_limits *limits,
                      engine_control *ctl, json_t **result, json_t **problem);
/* engine_equations (form NULL, limits and ctl ignored) or engine_equations_form_ctl. */
int isolate_equations_form_ctl(const engine_model *m, const char *form, const engine_limits *limits,
                               engine_control *ctl, json_t **result, json_t **problem);

/* engine_steady in a worker. */
int isolate_steady(const engine_model *m, const json_t *request, const engine_limits *limits,
                   engine_control *ctl, json_t **result, json_t **problem);

/* engine_code in a worker: the source text (caller frees) passed through. */
int isolate_code(const engine_model *m, const json_t *request, const char *lang, const engine_limits *limits,
                 char **text, size_t *len, json_t **problem);

/* Worker processes started and faults seen since start (for /metrics). */
void isolate_counts(long *started, long *faults);

#endif
