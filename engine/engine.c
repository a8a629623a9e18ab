/* engine.c — the facade of engine.h: process setup, limits, and the calls that are
 * not a module of their own (simulation entry point, request keys, /v1/hamel). */
#include "engine.h"

#include <gsl/gsl_errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget.h"
#include "equations.h"
#include "export.h"
#include "expr_internal.h"
#include "forms.h"
#include "hamel.h"
#include "model.h"
#include "native.h"
#include "sha256.h"
#include "sim.h"

/* points * n^4 of one /v1/hamel request (the gammas cost n^4 each): about a second */
#define ENGINE_MAX_GAMMA_WORK                                                                                \
    5e8 /* points * n^4 of one /v1/hamel request: 1.6 s and 16 MB of JSON at n = 48 */

const engine_limits engine_default_limits = {
    .max_expr_chars = 20000,
    .max_nodes = 2000000,
    .max_coordinates = 200,
    .max_samples = 100000,
    .max_steps = 10000000,
    .max_wall_seconds = 120.0,
    .max_points = 10000,
    .max_compile_seconds = 2.0,
    .max_compile_bytes = (size_t)256 << 20,
    .max_states = 10000,
    .max_parameters = 10000,
    .max_definitions = 10000,
    .max_output_values = 2000000, /* rolling disk at 100,000 samples: 1.3e6 values, 38 MB */
};

void engine_init(void) { gsl_set_error_handler_off(); }

int engine_simulate(const engine_model *m, const json_t *request, const engine_limits *limits,
                    engine_control *ctl, json_t **result, json_t **problem)
{
    sim_request req;
    *result = NULL;
    int rc = sim_request_parse(m, request, limits ? limits : &engine_default_limits, &req, problem);
    if (rc)
        return rc;
    rc = sim_run(m, &req, limits, ctl, result, problem);
    sim_request_free(&req);
    return rc;
}

int engine_simulate_text(const engine_model *m, const json_t *request, const engine_limits *limits,
                         engine_control *ctl, const json_t *head, char **text, size_t *len, json_t **problem)
{
    sim_request req;
    *text = NULL;
    *len = 0;
    int rc = sim_request_parse(m, request, limits ? limits : &engine_default_limits, &req, problem);
    if (rc)
        return rc;
    rc = sim_run_text(m, &req, limits, ctl, head, text, len, problem);
    sim_request_free(&req);
    return rc;
}

int engine_simulation_check(const engine_model *m, const json_t *request, const engine_limits *limits,
                            json_t **problem)
{
    sim_request req;
    int rc = sim_request_parse(m, request, limits ? limits : &engine_default_limits, &req, problem);
    if (rc == 0)
        sim_request_free(&req);
    return rc;
}

static int sha256_hex(const char *text, const char *prefix, char out[80])
{
    unsigned char md[SHA256_BYTES];
    sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, prefix, strlen(prefix));
    sha256_update(&ctx, "\n", 1);
    sha256_update(&ctx, text, strlen(text));
    sha256_final(&ctx, md);
    strcpy(out, "sha256:");
    for (unsigned i = 0; i < SHA256_BYTES; i++)
        sprintf(out + 7 + 2 * i, "%02x", md[i]);
    return 0;
}

/* Every integer in j becomes the equal real, so that 5 and 5.0 (one JSON number) give
 * one canonical text: the request reads both the same way. */
static void numbers_as_reals(json_t *j)
{
    const char *k;
    json_t *v;
    size_t i;
    if (json_is_object(j)) {
        json_object_foreach(j, k, v)
        {
            if (json_is_integer(v))
                json_object_set_new(j, k, json_real((double)json_integer_value(v)));
            else
                numbers_as_reals(v);
        }
    } else if (json_is_array(j)) {
        json_array_foreach(j, i, v)
        {
            if (json_is_integer(v))
                json_array_set_new(j, i, json_real((double)json_integer_value(v)));
            else
                numbers_as_reals(v);
        }
    }
}

int engine_simulation_key(const engine_model *m, const json_t *request, char key[80], json_t **problem)
{
    *problem = NULL;
    if (!json_is_object(request)) {
        *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, "the request must be a JSON object");
        hamel_problem_add(*problem, "", -1, "must be an object");
        return HAMEL_E_BAD_REQUEST;
    }
    json_t *copy = json_deep_copy(request);
    json_object_del(copy, "model");
    json_object_del(copy, "model_id");
    numbers_as_reals(copy);
    char *text = json_dumps(copy, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(copy);
    /* the engine's build identity is part of the key: a result of an engine whose
     * numbers may differ is recomputed, not served (identity.h) */
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s %s", engine_model_id(m), engine_identity());
    int rc = text ? sha256_hex(text, prefix, key) : -1;
    free(text);
    if (rc < 0) {
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "hashing failed");
        return HAMEL_E_INTERNAL;
    }
    return 0;
}

/* Adds an error under `path``member`.NAME for each member of obj (when an object) that is
 * none of names[0..count): an unknown name is refused, never ignored. Returns how many. */
static int unknown_names(const json_t *obj, const char *const *names, int count, const char *path,
                         const char *member, const char *what, json_t **problem)
{
    int bad = 0;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        int known = 0;
        for (int i = 0; i < count && !known; i++)
            known = strcmp(names[i], key) == 0;
        if (known)
            continue;
        char p[160], why[128];
        snprintf(p, sizeof p, "%s%s.%.80s", path, member, key);
        snprintf(why, sizeof why, "'%.80s' is not %s", key, what);
        if (!*problem)
            *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
        hamel_problem_add(*problem, p, -1, why);
        bad++;
    }
    return bad;
}

/* Reads {"t"?, "q": {...}} into t, q; adds errors under `path`. */
static void read_point(const engine_model *m, const json_t *pt, const char *path, double *t, double *q,
                       json_t **problem)
{
    char p[128];
    *t = 0.0;
    const json_t *tv = json_object_get(pt, "t");
    if (tv && !json_is_number(tv)) {
        snprintf(p, sizeof p, "%st", path);
        if (!*problem)
            *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
        hamel_problem_add(*problem, p, -1, "must be a number");
    } else if (tv) {
        *t = json_number_value(tv);
    }
    const json_t *qv = json_object_get(pt, "q");
    for (int i = 0; i < m->n; i++) {
        const json_t *v = json_is_object(qv) ? json_object_get(qv, m->coords[i]) : NULL;
        snprintf(p, sizeof p, "%sq.%s", path, m->coords[i]);
        if (!v || !json_is_number(v) || !isfinite(json_number_value(v))) {
            if (!*problem)
                *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
            hamel_problem_add(*problem, p, -1,
                              v ? "must be a finite number" : "missing: every coordinate needs a value");
        } else {
            q[i] = json_number_value(v);
        }
    }
    /* a name that is not a coordinate is an error, as in a simulation's initial.q */
    unknown_names(qv, (const char *const *)m->coords, m->n, path, "q", "a coordinate", problem);
}

/* The speeds of a point (`path`speeds.NAME) into u; -1 after an error. */
static int read_point_speeds(const engine_model *m, const json_t *sv, const char *path, double *u,
                             json_t **problem)
{
    char p[160];
    for (int r = 0; r < m->k; r++) {
        const json_t *v = json_object_get(sv, m->speeds[r]);
        if (!json_is_number(v)) {
            *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
            snprintf(p, sizeof p, "%sspeeds.%s", path, m->speeds[r]);
            hamel_problem_add(*problem, p, -1, "missing or not a number");
            return -1;
        }
        u[r] = json_number_value(v);
    }
    return 0;
}

/* Whether qd satisfies every constraint at (t, q) within 1e-8 of its scale (as a
 * simulation's initial.qdot must); if not, the worst one's words into why[size]. */
static int qdot_on_constraints(const engine_model *m, hamel_ws *w, double t, const double *q,
                               const double *qd, char *why, size_t size)
{
    double *v = calloc(2 * (size_t)m->nc + 1, sizeof *v), worst = 0.0;
    int at = -1;
    if (!v)
        return 1;
    double *limit = v + 1 + m->nc;
    hamel_observe(w, t, q, qd, v);
    hamel_residual_limits(w, t, q, qd, 1e-8, limit);
    for (int j = 0; j < m->nc; j++)
        if (!(fabs(v[1 + j]) <= limit[j]) && (at < 0 || !(fabs(v[1 + j]) <= worst))) {
            at = j;
            worst = fabs(v[1 + j]);
        }
    if (at >= 0)
        snprintf(why, size, "this qdot violates constraint %s by %.3g here, and its speeds", m->cons[at].name,
                 v[1 + at]);
    free(v);
    return at < 0;
}

/* Nonlinear constraints in the reduced form: the point's velocities, from "qdot" or
 * "speeds" (not both), on return in qd with w holding Psi at (q, q'). A qdot on the
 * constraints is the choice of a root (Newton's method polishes it); one off them (a
 * simulation's initial q' at another q) counts as its speeds. Speeds that leave several
 * roots are refused with the roots named, never one taken silently. Returns 0, or -1
 * with an error in *problem. */
static int nl_point_velocity(const engine_model *m, hamel_ws *w, const json_t *pt, const char *path, double t,
                             const double *q, double *qd, json_t **problem)
{
    int n = m->n;
    const json_t *qv = json_object_get(pt, "qdot"), *sv = json_object_get(pt, "speeds");
    double u[ENGINE_COORDINATES_CEILING], guess[ENGINE_COORDINATES_CEILING];
    char p[160], why[256];
    if (json_is_object(qv) == json_is_object(sv)) {
        *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
        snprintf(p, sizeof p, "%sspeeds", path);
        hamel_problem_add(
            *problem, p, -1,
            json_is_object(qv)
                ? "give speeds or qdot, not both (qdot chooses among the roots of its speeds)"
                : "required: the coefficients of a model with nonlinear constraints depend on the "
                  "velocities: give \"speeds\" or \"qdot\" with the configuration");
        return -1;
    }
    if (unknown_names(qv, (const char *const *)m->coords, n, path, "qdot", "a coordinate", problem) +
            unknown_names(sv, (const char *const *)m->speeds, m->k, path, "speeds", "a speed of the model",
                          problem) >
        0)
        return -1;
    if (!json_is_object(qv)) {
        /* speeds only: they must determine q' */
        if (read_point_speeds(m, sv, path, u, problem) < 0)
            return -1;
        for (int i = 0; i < n; i++)
            guess[i] = 0.5 + 0.37 * ((i * 7) % 5);
        hamel_ws_set_guess(w, guess);
        snprintf(p, sizeof p, "%sspeeds", path);
        return sim_nl_velocity(m, w, t, q, u, qd, p, problem) ? -1 : 0;
    }
    for (int i = 0; i < n; i++) {
        const json_t *v = json_object_get(qv, m->coords[i]);
        if (!json_is_number(v)) {
            *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
            snprintf(p, sizeof p, "%sqdot.%s", path, m->coords[i]);
            hamel_problem_add(*problem, p, -1, "missing or not a number");
            return -1;
        }
        guess[i] = json_number_value(v);
    }
    hamel_speeds(w, t, q, guess, u);
    hamel_ws_set_guess(w, guess);
    snprintf(p, sizeof p, "%sqdot", path);
    if (!qdot_on_constraints(m, w, t, q, guess, why, sizeof why))
        return sim_nl_velocity_why(m, w, t, q, u, qd, p, why,
                                   "give one of them as qdot (a qdot on the constraints chooses that root)",
                                   problem)
                   ? -1
                   : 0;
    if (hamel_qdot(w, t, q, u, qd) < 0) {
        *problem =
            hamel_problem_new(HAMEL_E_NUMERIC, "no velocities satisfy the constraints with these speeds");
        hamel_problem_add(*problem, p, -1, "Newton's method found no q' on the constraints");
        return -1;
    }
    return 0;
}

/* The members of a /v1/hamel request other than its parameters and points' values:
 * none unknown, one configuration or `points` (not both), within the limits. Problems
 * are added to *problem. */
static void hamel_request_check(const engine_model *m, const json_t *request, const engine_limits *limits,
                                json_t **problem)
{
    int n = m->n;
    const json_t *points = json_object_get(request, "points");
    int np = points ? (int)json_array_size(points) : 1;
    /* a misspelled member ("paramters") would otherwise answer for the defaults */
    static const char *const keys[] = {"model",  "model_id", "parameters", "t", "q",
                                       "speeds", "qdot",     "points",     NULL};
    static const char *const point_keys[] = {"t", "q", "speeds", "qdot", NULL};
    hamel_problem_unknown_members(problem, request, "", keys);
    for (int p = 0; json_is_array(points) && p < np; p++) {
        char path[32];
        snprintf(path, sizeof path, "points[%d]", p);
        if (!json_is_object(json_array_get(points, p)))
            hamel_problem_addf(problem, HAMEL_E_BAD_REQUEST, path, "must be an object {\"t\", \"q\"}");
        hamel_problem_unknown_members(problem, json_array_get(points, p), path, point_keys);
    }
    for (int i = 3; points && i < 7; i++)
        if (json_object_get(request, keys[i]))
            hamel_problem_addf(problem, HAMEL_E_BAD_REQUEST, keys[i],
                               "give points, or one point (t, q, speeds or qdot), not both");
    if (points && (!json_is_array(points) || np == 0)) {
        if (!*problem)
            *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
        hamel_problem_add(*problem, "points", -1, "must be a non-empty array of {\"t\", \"q\"}");
    } else if (np > limits->max_points || (double)np * n * n * n * n > ENGINE_MAX_GAMMA_WORK) {
        if (!*problem)
            *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
        char why[160];
        snprintf(why, sizeof why,
                 "too many points: at most %d, and at most %.0f for a model with %d coordinates",
                 limits->max_points, floor(ENGINE_MAX_GAMMA_WORK / ((double)n * n * n * n)), n);
        hamel_problem_add(*problem, "points", -1, why);
    } else if (limits->max_output_values &&
               (double)np * (double)m->gamma_values > (double)limits->max_output_values) {
        /* the answer's size: a point of a model whose coefficients are all there (n^3 of
         * them) is 4 n^3 numbers; 10,000 such points at n = 12 were 58 million */
        if (!*problem)
            *problem = hamel_problem_new(HAMEL_E_LIMIT, NULL);
        char why[200];
        snprintf(
            why, sizeof why,
            "%d points x %zu values (t, q, and j, r, l, value of each coefficient listed) = %.0f; at most "
            "%zu values per answer",
            np, m->gamma_values, (double)np * (double)m->gamma_values, limits->max_output_values);
        hamel_problem_add(*problem, points ? "points" : "q", -1, why);
    } else if (!points && !json_object_get(request, "q")) {
        if (!*problem)
            *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
        hamel_problem_add(*problem, "q", -1, "required: the configuration (or \"points\")");
    }
}

int engine_hamel(const engine_model *m, const json_t *request, const engine_limits *limits, json_t **result,
                 json_t **problem)
{
    *result = NULL;
    *problem = NULL;
    if (!limits)
        limits = &engine_default_limits;
    if (!json_is_object(request)) {
        *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, "the request must be a JSON object");
        hamel_problem_add(*problem, "", -1, "must be an object");
        return HAMEL_E_BAD_REQUEST;
    }
    if (m->nlin != m->nc && !m->nl_reduced) {
        *problem = hamel_problem_new(HAMEL_E_FORMULATION,
                                     "Hamel coefficients need constraints linear in the velocities, or n - m "
                                     "speeds for nonlinear ones (m counting every constraint)");
        return HAMEL_E_FORMULATION;
    }
    int n = m->n;
    double *params = calloc(m->np + 1, sizeof *params);
    if (!params)
        return HAMEL_E_INTERNAL;
    sim_parse_parameters(m, json_object_get(request, "parameters"), params, problem);
    const json_t *points = json_object_get(request, "points");
    int np = points ? (int)json_array_size(points) : 1;
    hamel_request_check(m, request, limits, problem);
    if (*problem) {
        free(params);
        return hamel_problem_code(*problem);
    }
    double *t = calloc(np, sizeof *t), *q = calloc((size_t)np * n, sizeof *q);
    double *g = calloc((size_t)n * n * n, sizeof *g), *gt = calloc((size_t)n * n, sizeof *gt);
    hamel_ws *w = hamel_ws_new(m, params);
    int rc = 0;
    if (!t || !q || !g || !gt || !w) {
        rc = HAMEL_E_INTERNAL;
        *problem = hamel_problem_new(rc, "out of memory");
        goto done;
    }
    for (int p = 0; p < np; p++) {
        char path[48] = "";
        if (points)
            snprintf(path, sizeof path, "points[%d].", p);
        read_point(m, points ? json_array_get(points, p) : request, path, &t[p], q + (size_t)p * n, problem);
    }
    if (*problem) {
        rc = HAMEL_E_BAD_REQUEST;
        goto done;
    }
    json_t *arr = json_array();
    for (int p = 0; p < np; p++) {
        double qd[ENGINE_COORDINATES_CEILING];
        if (m->nl_reduced) {
            /* velocity-dependent coefficients: Psi at (q, q'), q' on the constraints */
            char path[48] = "";
            if (points)
                snprintf(path, sizeof path, "points[%d].", p);
            if (n > ENGINE_COORDINATES_CEILING ||
                nl_point_velocity(m, w, points ? json_array_get(points, p) : request, path, t[p],
                                  q + (size_t)p * n, qd, problem) < 0) {
                json_decref(arr);
                rc = *problem ? hamel_problem_code(*problem) : HAMEL_E_BAD_REQUEST;
                goto done;
            }
        }
        if (hamel_gamma(w, t[p], q + (size_t)p * n, g, gt) < 0) {
            json_decref(arr);
            rc = HAMEL_E_NUMERIC;
            *problem =
                hamel_problem_new(rc, "Psi is singular at this configuration: Phi = Psi^-1 does not exist");
            char path[48];
            snprintf(path, sizeof path, points ? "points[%d].q" : "q", p);
            hamel_problem_add(*problem, path, -1, "Psi is singular here");
            goto done;
        }
        json_t *pt =
            sim_gamma_point(m, t[p], q + (size_t)p * n, g, gt, model_gamma_mask(m, hamel_ws_params(w)));
        if (m->nl_reduced) {
            json_t *qo = json_object();
            for (int i = 0; i < n; i++)
                json_object_set_new(qo, m->coords[i], json_real(qd[i]));
            json_object_set_new(pt, "qdot", qo);
        }
        json_array_append_new(arr, pt);
    }
    *result = json_pack("{s:s, s:o, s:o}", "model_id", m->id, "order", sim_gamma_order(m), "points", arr);
    if (m->nl_reduced)
        json_object_set_new(*result, "velocity_dependent", json_true());
done:
    hamel_ws_free(w);
    free(params);
    free(t);
    free(q);
    free(g);
    free(gt);
    return rc;
}

int engine_equations(const engine_model *m, json_t **result, json_t **problem)
{
    *problem = NULL;
    json_error_t err;
    /* The document is printed on first request (equations_ensure), under the lock that
     * guards the forms' additions to the model's context. */
    struct engine_model *mm = (struct engine_model *)m;
    pthread_mutex_lock(&mm->forms_lock);
    *result = equations_ensure(mm) == 0 && mm->equations ? json_loads(mm->equations, 0, &err) : NULL;
    pthread_mutex_unlock(&mm->forms_lock);
    if (!*result) {
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "the derived equations are not available");
        return HAMEL_E_INTERNAL;
    }
    return 0;
}

int engine_equations_form(const engine_model *m, const char *form, json_t **result, json_t **problem)
{
    return engine_equations_form_ctl(m, form, NULL, NULL, result, problem);
}

/* Takes m->forms_lock for a budgeted form request. Requests for one model's forms wait
 * for each other here; a waiting one still sees its cancel flag and its deadline (it
 * would otherwise keep its thread, past both, until the derivation before it ends).
 * Returns 0 with the lock held, or an error code with *problem. */
static int engine__forms_lock(struct engine_model *mm, double seconds, engine_control *ctl, const char *form,
                              json_t **problem)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_REALTIME, &t0); /* pthread_mutex_timedlock's clock */
    now = t0;
    for (;;) {
        struct timespec until = now;
        until.tv_nsec += 20 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_mutex_timedlock(&mm->forms_lock, &until) == 0)
            return 0;
        char detail[300];
        if (ctl && atomic_load(&ctl->cancel)) {
            snprintf(detail, sizeof detail, "deriving the %s form was cancelled while it waited for another",
                     form);
            *problem = hamel_problem_new(HAMEL_E_CANCELLED, detail);
            return HAMEL_E_CANCELLED;
        }
        clock_gettime(CLOCK_REALTIME, &now);
        double waited = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9;
        if (seconds > 0 && waited > seconds) {
            snprintf(
                detail, sizeof detail,
                "deriving the %s form waited %g s of wall-clock time (the backstop of max_compile_seconds) "
                "for another derivation of this model's forms; retry",
                form, seconds);
            *problem = hamel_problem_new(HAMEL_E_COMPILE_LIMIT, detail);
            json_object_set_new(*problem, "stage", json_string("equations form"));
            json_object_set_new(*problem, "limit", json_string("max_compile_seconds"));
            json_object_set_new(*problem, "limit_value", json_real(seconds));
            json_object_set_new(*problem, "reached", json_real(waited));
            return HAMEL_E_COMPILE_LIMIT;
        }
    }
}

int engine_equations_form_ctl(const engine_model *m, const char *form, const engine_limits *limits,
                              engine_control *ctl, json_t **result, json_t **problem)
{
    if (!form)
        return engine_equations(m, result, problem);
    *result = NULL;
    *problem = NULL;
    int f = forms_index(form);
    if (f < 0) {
        *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
        hamel_problem_add(*problem, "form", -1, "unknown form: one of hamel, appell, kane, maggi, voronec");
        return HAMEL_E_BAD_REQUEST;
    }
    /* A form is derived once, on first request, into the model's expression context:
     * the only mutation of a compiled model, under its own lock. Nothing else creates
     * nodes or symbols in mm->ctx after compilation: equations_ensure (the printed
     * equations) runs under the same lock; simulations, hamel_gamma, engine_evaluate
     * and engine_linearize only run the model's tapes (request.c parses invariants into a
     * context of its own, model_fresh_ctx); watch.c reads symbol indices under the
     * lock. So a mark taken under the lock sees every node a build adds, and a rollback
     * under it frees them with nobody else holding one. */
    struct engine_model *mm = (struct engine_model *)m;
    int rc = 0;
    if (limits || ctl) {
        /* waiting spends no CPU time: it is bounded by the wall clock, as long as the
         * derivation it waits for may run (its wall-clock backstop, budget.h) */
        double seconds = limits ? limits->max_compile_seconds * BUDGET_WALL_FACTOR : 0;
        if (ctl && ctl->max_wall_seconds > 0 && (seconds <= 0 || ctl->max_wall_seconds < seconds))
            seconds = ctl->max_wall_seconds;
        rc = engine__forms_lock(mm, seconds, ctl, form, problem);
        if (rc)
            return rc;
    } else {
        pthread_mutex_lock(&mm->forms_lock);
    }
    if (!mm->forms[f]) {
        json_t *doc = NULL;
        /* the equations document first, so that the context gains its nodes and
         * acceleration symbols in the same order whichever is asked for first */
        if (equations_ensure(mm) < 0) {
            pthread_mutex_unlock(&mm->forms_lock);
            *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory deriving the equations");
            return HAMEL_E_INTERNAL;
        }
        /* Under a compile budget of its own (limits or ctl given): the nodes the model
         * holds already are not counted against max_compile_bytes. A build that fails
         * (budget, node limit, out of memory, inapplicable form) is rolled back to the
         * mark: the context holds exactly the nodes, symbols and bytes it held before,
         * so a stopped derivation costs the model nothing and the next one starts from
         * the same state (and the same byte allowance). */
        expr_mark mark;
        expr_ctx_mark(mm->ctx, &mark);
        budget bud;
        size_t base = 0; /* the bytes the model holds: max_compile_bytes counts above them */
        int budgeted = limits || ctl;
        if (budgeted) {
            base = expr__held_bytes(mm->ctx);
            size_t bytes = limits && limits->max_compile_bytes ? base + limits->max_compile_bytes : 0;
            budget_init(&bud, limits ? limits->max_compile_seconds : 0, bytes, ctl ? &ctl->cancel : NULL);
            budget_cap_wall(&bud, ctl ? ctl->max_wall_seconds : 0);
            budget_stage(&bud, "equations form", "form");
            expr_ctx_set_budget(mm->ctx, &bud);
        }
        /* A budget already spent or cancelled stops at once; one overrun by a build too
         * short to tick the budget's clock is a stop at the end. */
        rc = budgeted && budget_check(&bud) ? HAMEL_E_COMPILE_LIMIT
                                            : forms_build(mm, form, &doc, NULL, NULL, problem);
        if (budgeted) {
            if (budget_check(&bud)) {
                json_decref(doc);
                doc = NULL;
                json_decref(*problem);
                *problem = budget_problem(&bud);
                rc = budget_error(&bud);
                char detail[400], when[240];
                budget_time_text(&bud, when, sizeof when);
                int by_bytes = bud.stop == BUDGET_BYTES;
                if (by_bytes && *problem) {
                    /* the limit and the figure reached as the client set them: above the
                     * model's own bytes */
                    json_object_set_new(*problem, "limit_value",
                                        json_integer((json_int_t)(bud.max_bytes - base)));
                    json_object_set_new(*problem, "reached", json_integer((json_int_t)(bud.at_bytes - base)));
                }
                if (rc == HAMEL_E_CANCELLED)
                    snprintf(detail, sizeof detail, "deriving the %s form was cancelled after %.3f s", form,
                             bud.at_seconds);
                else if (by_bytes)
                    snprintf(detail, sizeof detail,
                             "deriving the %s form exceeds max_compile_bytes = %zu bytes beyond the model's "
                             "%zu (%zu reached after %.3f s)",
                             form, bud.max_bytes - base, base, bud.at_bytes - base, bud.at_seconds);
                else
                    snprintf(detail, sizeof detail, "deriving the %s form exceeds %s: stopped after %s", form,
                             bud.limit ? bud.limit : "max_compile_seconds", when);
                if (*problem)
                    json_object_set_new(*problem, "detail", json_string(detail));
            }
            expr_ctx_set_budget(mm->ctx, NULL);
        }
        if (rc) {
            expr_ctx_rollback(mm->ctx, &mark);
#ifdef __GLIBC__
            malloc_trim(0); /* give the freed arena back to the system, not only to malloc */
#endif
        }
        if (rc == 0) {
            mm->forms[f] = json_dumps(doc, JSON_COMPACT);
            json_decref(doc);
        }
    }
    pthread_mutex_unlock(&mm->forms_lock);
    if (rc)
        return rc;
    json_error_t err;
    *result = mm->forms[f] ? json_loads(mm->forms[f], 0, &err) : NULL;
    if (!*result) {
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "the form is not available");
        return HAMEL_E_INTERNAL;
    }
    return 0;
}

/* engine_evaluate and engine_linearize: lin_api.c. */

int engine_code(const engine_model *m, const json_t *request, const char *lang, const engine_limits *limits,
                char **text, size_t *len, json_t **problem)
{
    *text = NULL;
    *problem = NULL;
    int which = EXPORT_C;
    if (lang && strcmp(lang, "python") == 0) {
        which = EXPORT_PYTHON;
    } else if (lang && strcmp(lang, "c") != 0) {
        hamel_problem_addf(problem, HAMEL_E_BAD_REQUEST, "lang", "must be \"c\" or \"python\"");
        return HAMEL_E_BAD_REQUEST;
    }
    if (!request)
        return export_source(m, NULL, which, NULL, NULL, text, len, problem);
    if (!json_is_object(request)) {
        hamel_problem_addf(problem, HAMEL_E_BAD_REQUEST, "", "the request must be a JSON object");
        return HAMEL_E_BAD_REQUEST;
    }
    json_t *copy = json_copy((json_t *)request); /* without "lang", which is not a simulation field */
    if (!copy) {
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
        return HAMEL_E_INTERNAL;
    }
    json_object_del(copy, "lang");
    sim_request req;
    int rc = sim_request_parse(m, copy, limits ? limits : &engine_default_limits, &req, problem);
    if (rc == 0) {
        const json_t *nm = json_object_get(copy, "name"), *ds = json_object_get(copy, "description");
        rc = export_source(m, &req, which, json_is_string(nm) ? json_string_value(nm) : NULL,
                           json_is_string(ds) ? json_string_value(ds) : NULL, text, len, problem);
        sim_request_free(&req);
    }
    json_decref(copy);
    return rc;
}

int engine_model_native_wait(engine_model *m, double seconds)
{
    native_schedule(m);
    int s = native_wait(m, seconds);
    return s == NATIVE_READY ? 1 : s == NATIVE_QUEUED ? 0 : -1;
}
