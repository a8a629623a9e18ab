/* engine.h — the public face of the hamel engine.
 *
 * A model (API.md §1) goes in as JSON and is validated and compiled once into an
 * immutable engine_model; simulations, Hamel coefficients and derived equations are
 * then computed from it, each returning JSON shaped as in API.md §2–5. The engine has
 * no HTTP in it: the server and the CLI are thin layers over these calls.
 *
 * Ownership: every json_t returned through an out-parameter is a new reference the
 * caller must json_decref. Input json_t are borrowed. An engine_model is reference
 * counted and safe to share between threads once compiled (all calls below are
 * read-only on it and thread-safe).
 *
 * Errors: each call returns 0 on success or a negative engine error code (error.h);
 * on error *problem receives an RFC 9457 problem document (type, title, status,
 * detail, and an "errors" array of {path, column?, reason}) and nothing else is set.
 */
#ifndef HAMEL_ENGINE_H
#define HAMEL_ENGINE_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>

#include "error.h"
#include "engine_types.h"
#include "identity.h"

/* Initialises the process-wide state (GSL error handler off, JIT lock). Call once
 * from main before anything else; calling again is harmless. */
void engine_init(void);

/* Validates and compiles a model. On success *out holds a new model with one
 * reference. `limits` may be NULL. */
int engine_model_compile(const json_t *model, const engine_limits *limits, engine_model **out,
                         json_t **problem);

/* engine_model_compile with a control: compilation stops with HAMEL_E_CANCELLED soon
 * after ctl->cancel is set (a client gone, a server draining), and with
 * HAMEL_E_COMPILE_LIMIT past limits->max_compile_seconds of this thread's CPU time, past
 * ENGINE_COMPILE_WALL_FACTOR times it of wall-clock time (or ctl->max_wall_seconds when
 * that is set and smaller), or past max_compile_bytes. `ctl` may be NULL. */
int engine_model_compile_ctl(const json_t *model, const engine_limits *limits, engine_control *ctl,
                             engine_model **out, json_t **problem);

/* Turns on the optimizing code tier (engine/mech/native.h): models compiled afterwards are
 * also compiled by the system C compiler in a background thread, cached as shared
 * objects in `dir` (created if missing), and later runs use that code. NULL or "" turns
 * it off (the default). Returns 0, or -1 if the directory cannot be made. */
int engine_code_cache(const char *dir);

/* Has the optimizing tier build m now, as it would once m is hot (when the tier is on and
 * m can have it), and waits up to `seconds` for the build. Returns 1 when m's runs now
 * start on native code, 0 when the build is still running, -1 when none will come (the
 * tier is off, m cannot have it, or its build failed). For a caller about to run m many
 * times (a long batch sweep), which loses less waiting for the build than running the
 * first tier meanwhile. */
int engine_model_native_wait(engine_model *m, double seconds);

/* Stops the engine's background work (the optimizing tier's builds: queued ones are
 * dropped, a running compiler is killed) so that the process can exit with every model
 * released. Call once, last, before exit. */
void engine_shutdown(void);

/* engine_model_retain and engine_model_release: engine_types.h. */

/* "sha256:<64 hex>" of the canonical model; borrowed, lives as long as the model. */
const char *engine_model_id(const engine_model *m);

/* The canonical model JSON (expressions re-printed, keys sorted); borrowed. */
const char *engine_model_canonical(const engine_model *m);

/* Rough memory held by a compiled model, in bytes (for cache accounting). */
size_t engine_model_bytes(const engine_model *m);

/* The model summary of API.md §2 (new reference). */
json_t *engine_model_summary(const engine_model *m);

/* The warnings about the members of the model object `spec` (borrowed) that are not
 * model members and are ignored: ["unknown field model.NAME ignored", ...] (the first 64,
 * then "and N more unknown fields ignored"), a new array (empty when there are none;
 * NULL when out of memory). They belong to one
 * request: the model id and its summary do not depend on them. */
json_t *engine_model_unknown_members(const json_t *spec);

/* A model compiled elsewhere (in an engine worker process, server/isolate.h): it has
 * the id, the canonical JSON, the summary (borrowed: a reference is taken) and the
 * byte count of the compiled one, and nothing else. Only the five accessors above may
 * be called on it; the computations need the compiled model (the worker runs them).
 * NULL when out of memory. */
engine_model *engine_model_shell(const char *id, const char *canonical, json_t *summary, size_t bytes);

/* Whether m was made by engine_model_shell. */
int engine_model_is_shell(const engine_model *m);

/* Runs a simulation request (API.md §3; its "model"/"model_id" members are ignored:
 * the model is given). On success *result holds the result object with trajectory,
 * checks, hamel and stats (no job_id, status or cached: the caller adds those).
 * A run that fails part-way (step or time budget, cancellation, integrator failure)
 * returns the error code and a problem document that carries the partial trajectory
 * under "partial" and the reason. `ctl` may be NULL. */
int engine_simulate(const engine_model *m, const json_t *request, const engine_limits *limits,
                    engine_control *ctl, json_t **result, json_t **problem);

/* engine_simulate with the result written straight to compact JSON text (shortest
 * round-trip numbers, engine/base/jsonout.h) instead of a jansson tree: the members of
 * `head` (an object, may be NULL; borrowed) come first, then the result's members of
 * other names. On success *text (malloc'd, NUL-terminated; caller frees) and *len; on
 * failure as engine_simulate (the problem's "partial" is a jansson document). */
int engine_simulate_text(const engine_model *m, const json_t *request, const engine_limits *limits,
                         engine_control *ctl, const json_t *head, char **text, size_t *len, json_t **problem);

/* Validates a simulation request against the model without running it (the checks
 * engine_simulate makes first: fields, initial state, constraints at the initial
 * state). Returns 0, or an error code with *problem. */
int engine_simulation_check(const engine_model *m, const json_t *request, const engine_limits *limits,
                            json_t **problem);

/* Computes the canonical key of a simulation request for the result cache:
 * "sha256:<hex>" over the model id, the engine's build identity (engine_identity) and
 * the canonicalised request, so an older engine's results are never served. Writes into
 * key[80]. Returns an error (with problem) only if the request is not an object. */
int engine_simulation_key(const engine_model *m, const json_t *request, char key[80], json_t **problem);

/* Hamel coefficients at the configuration(s) of a /v1/hamel request (API.md §4). */
int engine_hamel(const engine_model *m, const json_t *request, const engine_limits *limits, json_t **result,
                 json_t **problem);

/* The derived equations of API.md §5. */
int engine_equations(const engine_model *m, json_t **result, json_t **problem);

/* The derived equations in one of the classical forms of the seeds: "hamel", "appell",
 * "kane", "maggi", "voronec" (GET /v1/models/{id}/equations?form=). NULL is the
 * default document of engine_equations. An unknown or inapplicable form is a 422
 * naming "form". */
int engine_equations_form(const engine_model *m, const char *form, json_t **result, json_t **problem);

/* engine_equations_form under a compile budget: deriving a form not derived before stops
 * past limits->max_compile_seconds of CPU time (its wall-clock backstop, or
 * ctl->max_wall_seconds when smaller), past limits->max_compile_bytes more than the
 * model holds, or when ctl->cancel is set, with HAMEL_E_COMPILE_LIMIT (422
 * compile-limit) or HAMEL_E_CANCELLED and a problem naming the stage. limits and ctl
 * may be NULL (NULL for both: no budget). */
int engine_equations_form_ctl(const engine_model *m, const char *form, const engine_limits *limits,
                              engine_control *ctl, json_t **result, json_t **problem);

/* POST /v1/evaluate: for each state {t, q, speeds | qdot} of the request, qdot,
 * speeds_dot, qddot of every coordinate and the multipliers, exact to rounding. */
int engine_evaluate(const engine_model *m, const json_t *request, const engine_limits *limits,
                    json_t **result, json_t **problem);

/* engine_evaluate with a control, and both it and engine_linearize under the budget of
 * a request answered inline: limits->max_compile_seconds (or ctl->max_wall_seconds when
 * set and smaller) and ctl->cancel, checked per state and per pass of tangent
 * directions; a stop is HAMEL_E_COMPILE_LIMIT (limit "max_compile_seconds") or
 * HAMEL_E_CANCELLED, as a compilation's. `ctl` may be NULL; NULL limits and ctl: no
 * budget. */
int engine_evaluate_ctl(const engine_model *m, const json_t *request, const engine_limits *limits,
                        engine_control *ctl, json_t **result, json_t **problem);

/* POST /v1/linearize: about an operating point {t, q, speeds} (or a list of points),
 * the state names, A = d(q', u')/d(q, u) by forward-mode derivatives through the
 * compiled equations, its eigenvalues, and B for named inputs. `ctl` may be NULL. */
int engine_linearize(const engine_model *m, const json_t *request, const engine_limits *limits,
                     engine_control *ctl, json_t **result, json_t **problem);

/* POST /v1/steady: from the guessed "state" {t, q, speeds}, the steady motion (every
 * speed derivative zero) over the "unknowns" (coordinates, speeds, parameters) by
 * Newton's method on the exact Jacobian (as many unknowns as independent equations,
 * else 422 saying how many); with "continuation" {vary, to, steps} the branch by
 * pseudo-arclength steps, ending at `to` exactly: "points" (state, values, eigenvalues
 * without the structural zeros, stable) and "stability_changes" [{value, kind: "real" |
 * "complex"}] located to 1e-10 (engine/steady_api.c). `ctl` may be NULL. */
int engine_steady(const engine_model *m, const json_t *request, const engine_limits *limits,
                  engine_control *ctl, json_t **result, json_t **problem);

/* Generated code (POST /v1/code, GET /v1/models/{id}/code, hamel export): one standalone
 * source file for m in `lang` ("c" or "python"; NULL: "c") with the right-hand side,
 * its Jacobian, the kinematics and the parameters (engine/run/export.h). With a
 * simulation `request` (its "lang" member is ignored; NULL: none) the file bakes its
 * initial state, parameters, times and tolerances and has a main. On success *text
 * (malloc'd, NUL-terminated; caller frees) and *len; else an error code with *problem
 * (422 naming "lang", a request member, or the model when its formulation cannot be
 * carried). */
int engine_code(const engine_model *m, const json_t *request, const char *lang, const engine_limits *limits,
                char **text, size_t *len, json_t **problem);

#endif
