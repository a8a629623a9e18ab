/* lin_api.c — POST /v1/evaluate and POST /v1/linearize (engine_evaluate,
 * engine_linearize): request validation, the state derivatives at each state, the
 * Jacobians A = d(q', u')/d(q, u) and B = d(q', u')/d(inputs) with forward-mode
 * tangents (linearize.h), the eigenvalues of A (gsl_eigen_nonsymmv), and the result
 * documents.
 *
 * Eigenvalues are sorted by real part, largest first, then by imaginary part, largest
 * first (so a conjugate pair lists +im before -im); real ones have im exactly 0.
 */
#include <gsl/gsl_complex_math.h>
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "engine.h"
#include "hamel.h"
#include "holo.h"
#include "linalg.h"
#include "linearize.h"
#include "model.h"
#include "mult.h"
#include "sim.h"

/* Tangent work of one request (points x directions x tape slots): about a second. */
#define LIN_MAX_WORK 1e9
/* Doubles of slot tangents one evaluation may hold (directions are done in chunks). */
#define LIN_MAX_TANGENT_DOUBLES ((size_t)1 << 22)
#define LIN_DEFAULT_STEADY_TOL 1e-8
#define LIN_CONSTRAINT_TOL 1e-8 /* as the simulate request's initial.qdot check */
#define LIN_POSITION_TOL 1e-10  /* position-level constraints, as a simulation's initial solve */

/* Adds one error to *problem, creating it with the code first (error.h). */
#define bad hamel_problem_addf

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *named(char **names, const double *v, int count)
{
    json_t *o = json_object();
    for (int i = 0; i < count; i++)
        json_object_set_new(o, names[i], num(v[i]));
    return o;
}

/* One state of the model: t, q, and the velocities both ways. */
typedef struct lin_state {
    double t;
    double *q, *u, *qd; /* [n], [k], [n] */
    int from_speeds;    /* given as speeds (else as qdot) */
    int *dep;           /* [npos] position-level constraints: the solved coordinates */
} lin_state;

static json_t *matrix_json(const double *a, int rows, int cols);
static json_t *eigen_json(int N, const double *A, const char *const *names, int vectors);

/* Position-level constraints f(q, t) = 0: their dependent coordinates are solved by
 * Newton from the given q (a guess), as for a simulation's initial state. Returns 0, or
 * -1 with an error at <prefix>q.<coordinate> naming the guess and the residual. */
static int solve_position(const struct engine_model *m, const double *params, lin_state *st,
                          const char *prefix, json_t **problem)
{
    int h = m->npos, rc = -1, iters = 0;
    holo_ws *w = holo_ws_new(m, params);
    int *dep = calloc(h, sizeof *dep);
    double resid = 0.0;
    char path[160];
    if (!w || !dep) {
        bad(problem, HAMEL_E_INTERNAL, "", "out of memory");
        goto done;
    }
    snprintf(path, sizeof path, "%sq", prefix);
    if (holo_choose(w, st->t, st->q, dep) < 0) {
        bad(problem, HAMEL_E_BAD_REQUEST, path,
            "the gradients of the position-level constraints are linearly dependent here: no coordinates can "
            "be solved for");
        goto done;
    }
    char guess[512] = "";
    for (int j = 0; j < h; j++) {
        size_t a = strlen(guess);
        snprintf(guess + a, sizeof guess - a, "%s%s = %.17g", j ? ", " : "", m->coords[dep[j]],
                 st->q[dep[j]]);
    }
    if (holo_solve(w, st->t, st->q, dep, LIN_POSITION_TOL, &resid, &iters) < 0) {
        snprintf(path, sizeof path, "%sq.%s", prefix, m->coords[dep[0]]);
        bad(problem, HAMEL_E_BAD_REQUEST, path,
            "Newton's method on the position-level constraints from the guess %s did not converge: max |f| = "
            "%.3g after %d iterations (tolerance %.1g); give a better guess",
            guess, resid, iters, LIN_POSITION_TOL);
        goto done;
    }
    for (int j = 0; j < h; j++)
        st->dep[j] = dep[j];
    rc = 0;
done:
    holo_ws_free(w);
    free(dep);
    return rc;
}

/* A on the independent coordinates and the speeds, for a model with position-level
 * constraints f(q, t) = 0: the dependent coordinates follow the independent ones on
 * the constraint manifold (dq_dep = -(df/dq_dep)^-1 df/dq_ind dq_ind), so with E that
 * map and P the rows of the independent states, A_red = P A E (the manifold is
 * invariant under the linearized flow: A E = E A_red). B_red = P B. Returns the
 * {"states", "A", "B"?, "eigenvalues"} object, or NULL where df/dq_dep is singular. */
static json_t *reduced_json(const struct engine_model *m, const double *params, const lin_state *st,
                            const double *A, const double *B, int ni, int vectors)
{
    int n = m->n, k = m->k, h = m->npos, N = n + k, Nr = N - h;
    if (h >= n)
        return NULL;
    double *in = calloc(m->n_in, sizeof *in), *work = calloc(m->tape_pos->n_ins + 1, sizeof *work);
    double *out = calloc((size_t)h * (n + 1), sizeof *out), *D = calloc((size_t)h * h, sizeof *D);
    double *E = calloc((size_t)N * Nr, sizeof *E), *Ar = calloc((size_t)Nr * Nr, sizeof *Ar);
    double *Br = calloc((size_t)Nr * ni + 1, sizeof *Br);
    double *z = calloc(h, sizeof *z);
    int *piv = calloc(h, sizeof *piv), *rows = calloc(Nr, sizeof *rows);
    unsigned char *isdep = calloc(n, 1);
    const char **rn = calloc(Nr, sizeof *rn);
    json_t *res = NULL;
    if (!in || !work || !out || !D || !E || !Ar || !Br || !rows || !z || !piv || !isdep || !rn)
        goto done;
    memcpy(in, params, m->np * sizeof *in);
    in[model_input_t(m)] = st->t;
    memcpy(in + model_input_q(m), st->q, n * sizeof *in);
    tape_eval(m->tape_pos, in, work, out);
    const double *G = out + h; /* d f_j / d q_i at G[j * n + i] */
    for (int j = 0; j < h; j++) {
        isdep[st->dep[j]] = 1;
        for (int l = 0; l < h; l++)
            D[j * h + l] = G[j * n + st->dep[l]];
    }
    if (linalg_lu(h, D, piv) < 0)
        goto done;
    for (int i = 0, a = 0; i < n; i++) {
        if (isdep[i])
            continue;
        rows[a] = i;
        E[(size_t)i * Nr + a] = 1.0;
        for (int j = 0; j < h; j++)
            z[j] = -G[j * n + i];
        linalg_lu_solve(h, D, piv, z);
        for (int j = 0; j < h; j++)
            E[(size_t)st->dep[j] * Nr + a] = z[j];
        a++;
    }
    for (int r = 0; r < k; r++) {
        rows[n - h + r] = n + r;
        E[(size_t)(n + r) * Nr + n - h + r] = 1.0;
    }
    for (int i = 0; i < Nr; i++) {
        for (int a = 0; a < Nr; a++) {
            double v = 0.0;
            for (int j = 0; j < N; j++)
                v += A[(size_t)rows[i] * N + j] * E[(size_t)j * Nr + a];
            Ar[(size_t)i * Nr + a] = v;
        }
        for (int c = 0; c < ni; c++)
            Br[(size_t)i * ni + c] = B[(size_t)rows[i] * ni + c];
    }
    json_t *names = json_array();
    for (int i = 0; i < Nr; i++) {
        rn[i] = rows[i] < n ? m->coords[rows[i]] : m->speeds[rows[i] - n];
        json_array_append_new(names, json_string(rn[i]));
    }
    json_t *eig = eigen_json(Nr, Ar, rn, vectors);
    if (!eig) {
        json_decref(names);
        goto done;
    }
    res = json_pack("{s:o, s:o, s:o}", "states", names, "A", matrix_json(Ar, Nr, Nr), "eigenvalues", eig);
    if (ni)
        json_object_set_new(res, "B", matrix_json(Br, Nr, ni));
done:
    free(in);
    free(work);
    free(out);
    free(D);
    free(E);
    free(Ar);
    free(Br);
    free(rows);
    free(z);
    free(piv);
    free(isdep);
    free(rn);
    return res;
}

/* One finite number per name (the model's speeds, else its coordinates) from object obj
 * at <prefix><part> into out; missing: the message for a name without a value. */
static void read_named(const struct engine_model *m, const json_t *obj, const char *prefix, const char *part,
                       int speeds, const char *missing, double *out, json_t **problem)
{
    char path[160];
    char *const *names = speeds ? m->speeds : m->coords;
    int count = speeds ? m->k : m->n;
    for (int i = 0; i < count; i++) {
        const json_t *v = json_object_get(obj, names[i]);
        snprintf(path, sizeof path, "%s%s.%s", prefix, part, names[i]);
        if (!v)
            bad(problem, HAMEL_E_BAD_REQUEST, path, "%s", missing);
        else if (!json_is_number(v) || !isfinite(json_number_value(v)))
            bad(problem, HAMEL_E_BAD_REQUEST, path, "must be a finite number");
        else
            out[i] = json_number_value(v);
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        if ((speeds ? model_speed_index(m, key) : model_coord_index(m, key)) < 0) {
            snprintf(path, sizeof path, "%s%s.%.80s", prefix, part, key);
            bad(problem, HAMEL_E_BAD_REQUEST, path,
                speeds ? "'%s' is not a speed of the model" : "'%s' is not a coordinate", key);
        }
    }
}

/* The velocities of a state: speeds (every constraint linear, or nonlinear ones in the
 * reduced form: all_linear) or qdot, not both. */
static void read_velocities(const struct engine_model *m, const json_t *js, const char *prefix,
                            int all_linear, lin_state *st, json_t **problem)
{
    char path[160];
    const json_t *sp = json_object_get(js, "speeds"), *qd = json_object_get(js, "qdot");
    snprintf(path, sizeof path, "%s", *prefix ? prefix : "");
    if (*prefix)
        path[strlen(path) - 1] = '\0'; /* "states[3]" */
    if (sp && qd) {
        bad(problem, HAMEL_E_BAD_REQUEST, *path ? path : "speeds", "give speeds or qdot, not both");
    } else if (sp) {
        snprintf(path, sizeof path, "%sspeeds", prefix);
        if (!all_linear) {
            bad(problem, HAMEL_E_BAD_REQUEST, path, "this model has nonlinear constraints: give qdot");
        } else if (!json_is_object(sp)) {
            bad(problem, HAMEL_E_BAD_REQUEST, path, "must be an object with a value for every speed");
        } else {
            st->from_speeds = 1;
            read_named(m, sp, prefix, "speeds", 1, "missing: every independent speed needs a value", st->u,
                       problem);
        }
    } else if (qd) {
        snprintf(path, sizeof path, "%sqdot", prefix);
        if (!json_is_object(qd))
            bad(problem, HAMEL_E_BAD_REQUEST, path, "must be an object with a value for every coordinate");
        else
            read_named(m, qd, prefix, "qdot", 0, "missing: every coordinate needs a velocity", st->qd,
                       problem);
    } else {
        bad(problem, HAMEL_E_BAD_REQUEST, *path ? path : "speeds",
            all_linear ? "give speeds (or qdot)" : "give qdot");
    }
}

/* A state given by its qdot: the constraints hold within LIN_CONSTRAINT_TOL of its scale
 * and, with linear constraints, the speeds from it (Psi must be regular). */
static void check_qdot(const struct engine_model *m, hamel_ws *hw, const char *prefix, int all_linear,
                       lin_state *st, json_t **problem)
{
    char path[160];
    int n = m->n;
    double *v = calloc(1 + 2 * (size_t)m->nc, sizeof *v);
    if (!v)
        return;
    double *limit = v + 1 + m->nc;
    hamel_observe(hw, st->t, st->q, st->qd, v);
    hamel_residual_limits(hw, st->t, st->q, st->qd, LIN_CONSTRAINT_TOL, limit);
    snprintf(path, sizeof path, "%sqdot", prefix);
    for (int j = 0; j < m->nc; j++)
        if (!(fabs(v[1 + j]) <= limit[j]))
            bad(problem, HAMEL_E_BAD_REQUEST, path, "violates constraint %s by %.3g (tolerance %.1g)",
                m->cons[j].name, v[1 + j], limit[j]);
    free(v);
    if (*problem || !all_linear)
        return;
    hamel_speeds(hw, st->t, st->q, st->qd, st->u);
    hamel_ws_set_guess(hw, st->qd);
    double *check = calloc(n, sizeof *check);
    if (check && hamel_qdot(hw, st->t, st->q, st->u, check) < 0) {
        snprintf(path, sizeof path, "%sq", prefix);
        bad(problem, HAMEL_E_BAD_REQUEST, path, "Psi (speeds and constraints) is singular here");
    }
    free(check);
}

/* Reads {t?, q, speeds | qdot} at `prefix` ("" or "states[3].") into st; solves the
 * position-level constraints for their dependent coordinates (q is the guess); checks
 * that qdot satisfies the constraints and that Psi is regular. Adds errors to *problem. */
static void read_state(const struct engine_model *m, hamel_ws *hw, const double *params, const json_t *js,
                       const char *prefix, lin_state *st, json_t **problem)
{
    char path[160];
    /* speeds: every constraint linear, or nonlinear ones in the reduced form */
    int all_linear = m->nlin == m->nc || m->nl_reduced, before = *problem != NULL;
    int errs0 = *problem ? (int)json_array_size(json_object_get(*problem, "errors")) : 0;
    st->t = 0.0;
    st->from_speeds = 0;
    const json_t *tv = json_object_get(js, "t");
    snprintf(path, sizeof path, "%st", prefix);
    if (tv && (!json_is_number(tv) || !isfinite(json_number_value(tv))))
        bad(problem, HAMEL_E_BAD_REQUEST, path, "must be a finite number");
    else if (tv)
        st->t = json_number_value(tv);
    const json_t *q = json_object_get(js, "q");
    snprintf(path, sizeof path, "%sq", prefix);
    if (!json_is_object(q))
        bad(problem, HAMEL_E_BAD_REQUEST, path, "required: an object with a value for every coordinate");
    else
        read_named(m, q, prefix, "q", 0, "missing: every coordinate needs a value", st->q, problem);
    read_velocities(m, js, prefix, all_linear, st, problem);
    int errs = *problem ? (int)json_array_size(json_object_get(*problem, "errors")) : 0;
    if ((before && errs > errs0) || (!before && *problem))
        return;
    if (m->npos > 0 && solve_position(m, params, st, prefix, problem) < 0)
        return;

    /* Consistency, as for a simulation's initial state. */
    if (!st->from_speeds) {
        check_qdot(m, hw, prefix, all_linear, st, problem);
        return;
    }
    if (m->nl_reduced) {
        /* nonlinear constraints: the speeds must determine q' (none or several: a
         * 422 naming them), as for a simulation's initial state */
        snprintf(path, sizeof path, "%sspeeds", prefix);
        sim_nl_velocity(m, hw, st->t, st->q, st->u, st->qd, path, problem);
    } else if (hamel_qdot(hw, st->t, st->q, st->u, st->qd) < 0) {
        snprintf(path, sizeof path, "%sq", prefix);
        bad(problem, HAMEL_E_BAD_REQUEST, path,
            "Psi (speeds and constraints) is singular here: the speeds do not determine q'");
    }
}

static int check_keys(const json_t *js, const char *const *known, const char *list, const char *prefix,
                      json_t **problem)
{
    const char *key;
    const json_t *val;
    int bad_keys = 0;
    json_object_foreach((json_t *)js, key, val)
    {
        int ok = 0;
        for (int i = 0; known[i]; i++)
            ok |= strcmp(key, known[i]) == 0;
        if (!ok) {
            char path[160];
            snprintf(path, sizeof path, "%s%.80s", prefix, key);
            bad(problem, HAMEL_E_BAD_REQUEST, path, "unknown field (expected one of %s)", list);
            bad_keys++;
        }
    }
    return bad_keys;
}

static int max_slots(const struct engine_model *m)
{
    int s = 1;
    const tape *t[] = {m->tape_psi, m->tape_dyn, m->tape_fast, m->tape_mult, m->tape_mass};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i] && t[i]->n_ins > s)
            s = t[i]->n_ins;
    return s;
}

/* The budget of one request (evaluate, linearize): it answers inline, so it has the
 * synchronous budget every computing request has, limits->max_compile_seconds (or
 * ctl->max_wall_seconds when set and smaller), and ctl's cancel flag (a client gone, a
 * server draining). Checked per state and per pass of tangent directions. NULL limits
 * and ctl: no budget (the command line), as engine_equations_form_ctl. */
static void lin_budget(budget *b, const engine_limits *limits, engine_control *ctl, const char *stage)
{
    budget_init(b, limits ? limits->max_compile_seconds : 0.0, 0, ctl ? &ctl->cancel : NULL);
    budget_cap_wall(b, ctl ? ctl->max_wall_seconds : 0);
    budget_stage(b, stage, NULL);
}

/* The problem of a request whose budget stopped after `done` of `total` states: the
 * compile's problem types (HAMEL_E_CANCELLED, HAMEL_E_COMPILE_LIMIT with "stage",
 * "limit", "limit_value", "reached"), replacing *problem. Returns the error. */
static int lin_stopped(budget *b, const char *what, int done, int total, json_t **problem)
{
    json_decref(*problem);
    *problem = budget_problem(b);
    int rc = budget_error(b);
    char detail[480], when[240];
    budget_time_text(b, when, sizeof when);
    if (rc == HAMEL_E_CANCELLED)
        snprintf(detail, sizeof detail, "the %s was cancelled after %.3f s (%d of %d states done)", what,
                 b->at_seconds, done, total);
    else
        snprintf(detail, sizeof detail,
                 "the %s takes longer than %s allows: stopped after %s with %d of %d states done; send "
                 "fewer states per request",
                 what, b->limit ? b->limit : "max_compile_seconds", when, done, total);
    if (*problem)
        json_object_set_new(*problem, "detail", json_string(detail));
    return rc;
}

/* ---- /v1/evaluate ---- */

/* The multipliers of a Boltzmann–Hamel state: J^T lam = M q'' - g (mult.h's sign),
 * solved in the least-squares sense through J J^T (J has full row rank where Psi is
 * regular). in = [params, t, q, q']. */
static int hamel_multipliers(const struct engine_model *m, double *in, double *work, const double *qdd,
                             double *lam)
{
    int n = m->n, nc = m->nc;
    if (!nc)
        return 0;
    size_t nu = (size_t)n * (n + 1) / 2;
    double *dyn = calloc(nu + 2 * n, sizeof *dyn), *jf = calloc((size_t)nc * n + nc, sizeof *jf);
    double *M = calloc((size_t)n * n, sizeof *M), *r = calloc(n, sizeof *r);
    double *A = calloc((size_t)nc * nc, sizeof *A);
    int *piv = calloc(nc, sizeof *piv), rc = -1;
    if (!dyn || !jf || !M || !r || !A || !piv)
        goto done;
    tape_run(m->tape_dyn, in, work, dyn);
    tape_run(m->tape_mult, in, work, jf);
    for (int i = 0, idx = 0; i < n; i++)
        for (int l = i; l < n; l++, idx++)
            M[i * n + l] = M[l * n + i] = dyn[idx];
    for (int i = 0; i < n; i++) {
        double s = -dyn[nu + i];
        for (int l = 0; l < n; l++)
            s += M[i * n + l] * qdd[l];
        r[i] = s;
    }
    for (int a = 0; a < nc; a++) {
        double s = 0.0;
        for (int i = 0; i < n; i++)
            s += jf[a * n + i] * r[i];
        lam[a] = s;
        for (int b = 0; b < nc; b++) {
            double v = 0.0;
            for (int i = 0; i < n; i++)
                v += jf[a * n + i] * jf[b * n + i];
            A[a * nc + b] = v;
        }
    }
    if (linalg_lu(nc, A, piv) == 0) {
        linalg_lu_solve(nc, A, piv, lam);
        rc = 0;
    }
done:
    free(dyn);
    free(jf);
    free(M);
    free(r);
    free(A);
    free(piv);
    return rc;
}

static const char *const evaluate_keys[] = {"model", "model_id",    "parameters", "states",
                                            "name",  "description", NULL};
static const char *const state_keys[] = {"t", "q", "speeds", "qdot", NULL};

/* The buffers of an evaluation, shared by its states. */
struct eval_ws {
    const struct engine_model *m;
    const double *params;
    hamel_ws *hw;
    lin_ws *lw;
    mult_ws *mw;
    double *in, *work, *y, *dy, *seed, *f, *qdd, *lam;
};

/* Every constraint linear: q', u' from the integrated right-hand side itself; q'' as its
 * tangent along the motion (dt = 1, dq = q', du = u'); the multipliers from q''. Into o;
 * 0 when the equations cannot be evaluated. */
static int evaluate_hamel(const struct eval_ws *E, lin_state *s, json_t *o)
{
    const struct engine_model *m = E->m;
    int n = m->n, k = m->k;
    double *y = E->y, *dy = E->dy, *seed = E->seed, *in = E->in;
    memcpy(y, s->q, n * sizeof *y);
    memcpy(y + n, s->u, k * sizeof *y);
    int ok = hamel_rhs(s->t, y, dy, E->hw) == 0;
    if (ok) {
        memcpy(s->qd, dy, n * sizeof *dy);
        memset(seed, 0, (1 + n + k + m->np) * sizeof *seed);
        seed[0] = 1.0;
        memcpy(seed + 1, dy, (n + k) * sizeof *seed);
        ok = lin_rhs_tangent(E->lw, s->t, s->q, s->u, seed, 1, E->f, E->qdd) == 0;
    }
    if (ok) {
        memcpy(in, E->params, m->np * sizeof *in);
        in[model_input_t(m)] = s->t;
        memcpy(in + model_input_q(m), s->q, n * sizeof *in);
        memcpy(in + model_input_qd(m), s->qd, n * sizeof *in);
        ok = hamel_multipliers(m, in, E->work, E->qdd, E->lam) == 0;
    }
    json_object_set_new(o, "speeds", named(m->speeds, s->u, k));
    json_object_set_new(o, "qdot", named(m->coords, s->qd, n));
    if (ok)
        json_object_set_new(o, "speeds_dot", named(m->speeds, dy + n, k));
    return ok;
}

/* Nonlinear constraints: q'' and the multipliers from the multipliers formulation's KKT
 * system at (q, q'); in the reduced form also the speeds and their derivatives from the
 * integrated right-hand side on (q, u). Into o; 0 when the equations cannot be evaluated. */
static int evaluate_multipliers(const struct eval_ws *E, lin_state *s, json_t *o)
{
    const struct engine_model *m = E->m;
    int n = m->n, k = m->k;
    double *y = E->y, *dy = E->dy;
    memcpy(y, s->q, n * sizeof *y);
    memcpy(y + n, s->qd, n * sizeof *y);
    int ok = mult_rhs(s->t, y, dy, E->mw) == 0 && mult_lambda(E->mw, s->t, y, E->lam) == 0;
    memcpy(E->qdd, dy + n, n * sizeof *E->qdd);
    if (ok && m->nl_reduced) {
        memcpy(y + n, s->u, k * sizeof *y);
        hamel_ws_set_guess(E->hw, s->qd);
        ok = hamel_rhs(s->t, y, dy, E->hw) == 0;
        json_object_set_new(o, "speeds", named(m->speeds, s->u, k));
        if (ok)
            json_object_set_new(o, "speeds_dot", named(m->speeds, dy + n, k));
    }
    json_object_set_new(o, "qdot", named(m->coords, s->qd, n));
    return ok;
}

/* The document of state s: t, q, the velocities, q'' and the multipliers. NULL when the
 * equations cannot be evaluated there. */
static json_t *evaluate_state(const struct eval_ws *E, lin_state *s, int all_linear)
{
    const struct engine_model *m = E->m;
    json_t *o = json_object();
    json_object_set_new(o, "t", num(s->t));
    json_object_set_new(o, "q", named(m->coords, s->q, m->n));
    int ok = all_linear ? evaluate_hamel(E, s, o) : evaluate_multipliers(E, s, o);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    json_object_set_new(o, "qddot", named(m->coords, E->qdd, m->n));
    json_t *mo = json_object();
    for (int j = 0; j < m->nc; j++)
        json_object_set_new(mo, m->cons[j].name, num(E->lam[j]));
    json_object_set_new(o, "multipliers", mo);
    return o;
}

/* evaluate's states: a non-empty array within the limits (the count, the work, and the
 * answer's size within max_output_values). */
static void check_states(const struct engine_model *m, const json_t *states, int ns,
                         const engine_limits *limits, json_t **problem)
{
    double per = 4.0 + 3.0 * m->n + 2.0 * m->k + m->nc; /* t, q, speeds, q', their rates, q'', lambda */
    if (!json_is_array(states) || ns == 0)
        bad(problem, HAMEL_E_BAD_REQUEST, "states",
            "required: a non-empty array of states {\"t\", \"q\": {...}, \"speeds\": {...} or \"qdot\": "
            "{...}}");
    else if (ns > limits->max_states || (double)ns * 2 * max_slots(m) > LIN_MAX_WORK)
        bad(problem, HAMEL_E_BAD_REQUEST, "states", "too many states: at most %d for this model",
            (int)fmin(limits->max_states, LIN_MAX_WORK / (2.0 * max_slots(m))));
    else if (limits->max_output_values && ns * per > (double)limits->max_output_values)
        bad(problem, HAMEL_E_LIMIT, "states",
            "%d states x %.0f values (t, q, speeds, q', their rates, q'', the multipliers) = %.0f; at most "
            "%zu "
            "values per answer",
            ns, per, ns * per, limits->max_output_values);
}

int engine_evaluate(const engine_model *m, const json_t *request, const engine_limits *limits,
                    json_t **result, json_t **problem)
{
    return engine_evaluate_ctl(m, request, limits, NULL, result, problem);
}

int engine_evaluate_ctl(const engine_model *m, const json_t *request, const engine_limits *limits,
                        engine_control *ctl, json_t **result, json_t **problem)
{
    *result = NULL;
    *problem = NULL;
    budget bud;
    lin_budget(&bud, limits || ctl ? (limits ? limits : &engine_default_limits) : NULL, ctl, "evaluation");
    if (!limits)
        limits = &engine_default_limits;
    if (!json_is_object(request)) {
        *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, "the request must be a JSON object");
        hamel_problem_add(*problem, "", -1, "must be an object");
        return HAMEL_E_BAD_REQUEST;
    }
    int n = m->n, k = m->k, nc = m->nc, all_linear = m->nlin == m->nc;
    check_keys(request, evaluate_keys, "model, model_id, parameters, states", "", problem);
    double *params = calloc(m->np + 1, sizeof *params);
    if (!params)
        return HAMEL_E_INTERNAL;
    sim_parse_parameters(m, json_object_get(request, "parameters"), params, problem);
    const json_t *states = json_object_get(request, "states");
    int ns = json_is_array(states) ? (int)json_array_size(states) : 0;
    check_states(m, states, ns, limits, problem);
    if (*problem) {
        free(params);
        return hamel_problem_code(*problem);
    }
    int rc = 0;
    hamel_ws *hw = hamel_ws_new(m, params);
    lin_ws *lw = all_linear ? lin_ws_new(m, params, 1, 0) : NULL;
    mult_ws *mw = mult_ws_new(m, params);
    lin_state *st = calloc(ns, sizeof *st);
    int *deps = calloc((size_t)ns * (m->npos + 1), sizeof *deps);
    double *store = calloc((size_t)ns * (2 * n + k + 1), sizeof *store);
    double *in = calloc(m->n_in, sizeof *in), *work = calloc(m->work_len + 1, sizeof *work);
    double *y = calloc(2 * n + 1, sizeof *y), *dy = calloc(2 * n + 1, sizeof *dy);
    double *seed = calloc(1 + n + k + m->np, sizeof *seed), *f = calloc(n + k + 1, sizeof *f);
    double *qdd = calloc(n + k + 1, sizeof *qdd), *lam = calloc(nc + 1, sizeof *lam);
    json_t *arr = NULL;
    if (!hw || (all_linear && !lw) || !mw || !st || !deps || !store || !in || !work || !y || !dy || !seed ||
        !f || !qdd || !lam) {
        rc = HAMEL_E_INTERNAL;
        *problem = hamel_problem_new(rc, "out of memory");
        goto done;
    }
    for (int i = 0; i < ns; i++) {
        char prefix[48];
        snprintf(prefix, sizeof prefix, "states[%d].", i);
        const json_t *sj = json_array_get(states, i);
        st[i].q = store + (size_t)i * (2 * n + k + 1);
        st[i].dep = deps + (size_t)i * (m->npos + 1);
        st[i].qd = st[i].q + n;
        st[i].u = st[i].qd + n;
        if (!json_is_object(sj)) {
            snprintf(prefix, sizeof prefix, "states[%d]", i);
            bad(problem, HAMEL_E_BAD_REQUEST, prefix,
                "must be an object {\"t\", \"q\", \"speeds\" or \"qdot\"}");
            continue;
        }
        if (budget_check(&bud)) {
            rc = lin_stopped(&bud, "evaluation", 0, ns, problem);
            goto done;
        }
        if (check_keys(sj, state_keys, "t, q, speeds, qdot", prefix, problem) == 0)
            read_state(m, hw, params, sj, prefix, &st[i], problem);
    }
    if (*problem) {
        rc = hamel_problem_code(*problem);
        goto done;
    }
    struct eval_ws E = {m, params, hw, lw, mw, in, work, y, dy, seed, f, qdd, lam};
    arr = json_array();
    for (int i = 0; i < ns; i++) {
        lin_state *s = &st[i];
        if (budget_check(&bud)) {
            rc = lin_stopped(&bud, "evaluation", i, ns, problem);
            goto done;
        }
        json_t *o = evaluate_state(&E, s, all_linear);
        if (!o) {
            rc = HAMEL_E_NUMERIC;
            char path[48];
            snprintf(path, sizeof path, "states[%d].q", i);
            *problem = hamel_problem_new(rc, "the equations cannot be evaluated at this state");
            hamel_problem_add(*problem, path, -1, "the mass matrix or Psi is singular here");
            goto done;
        }
        json_array_append_new(arr, o);
    }
    *result = json_pack("{s:s, s:s, s:O}", "model_id", m->id, "formulation",
                        all_linear || m->nl_reduced ? "hamel" : "multipliers", "states", arr);
done:
    json_decref(arr);
    hamel_ws_free(hw);
    lin_ws_free(lw);
    mult_ws_free(mw);
    free(st);
    free(deps);
    free(store);
    free(in);
    free(work);
    free(y);
    free(dy);
    free(seed);
    free(f);
    free(qdd);
    free(lam);
    free(params);
    return rc;
}

/* ---- /v1/linearize ---- */

typedef struct lin_eig {
    double re, im;
    int k; /* index in GSL's order (its eigenvector's column) */
} lin_eig;

static int eig_cmp(const void *pa, const void *pb)
{
    const lin_eig *a = pa, *b = pb;
    if (a->re != b->re)
        return a->re > b->re ? -1 : 1;
    if (a->im != b->im)
        return a->im > b->im ? -1 : 1;
    return 0;
}

int lin_eigen(int N, const double *A, double *re, double *im, double *vre, double *vim)
{
    if (N < 1)
        return 0;
    gsl_matrix *a = gsl_matrix_alloc(N, N);
    gsl_vector_complex *ev = gsl_vector_complex_alloc(N);
    gsl_matrix_complex *vec = gsl_matrix_complex_alloc(N, N);
    gsl_eigen_nonsymmv_workspace *ws = gsl_eigen_nonsymmv_alloc(N);
    lin_eig *e = calloc(N, sizeof *e);
    int rc = -1;
    if (a && ev && vec && ws && e) {
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++)
                gsl_matrix_set(a, i, j, A[(size_t)i * N + j]);
        int status = gsl_eigen_nonsymmv(a, ev, vec, ws);
        if (status != GSL_SUCCESS) {
            /* Francis' QR can stall on a sparse A with repeated zeros (an upright disk's
             * near a real pair meeting at zero: GSL_EMAXITER): again on the balanced
             * matrix, whose different rounding starts the iteration elsewhere. The
             * eigenvectors are still those of A (GSL accumulates the balancing). */
            for (int i = 0; i < N; i++)
                for (int j = 0; j < N; j++)
                    gsl_matrix_set(a, i, j, A[(size_t)i * N + j]);
            gsl_eigen_nonsymmv_params(1, ws);
            status = gsl_eigen_nonsymmv(a, ev, vec, ws);
        }
        if (status == GSL_SUCCESS) {
            for (int i = 0; i < N; i++) {
                gsl_complex z = gsl_vector_complex_get(ev, i);
                e[i].re = GSL_REAL(z);
                e[i].im = GSL_IMAG(z);
                e[i].k = i;
            }
            qsort(e, N, sizeof *e, eig_cmp);
            for (int i = 0; i < N; i++) {
                re[i] = e[i].re;
                im[i] = e[i].im;
                if (!vre || !vim)
                    continue;
                /* eigenvector i, scaled so that its largest component is exactly 1 */
                int big = 0;
                double bigabs = -1.0;
                for (int s = 0; s < N; s++) {
                    double m = gsl_complex_abs(gsl_matrix_complex_get(vec, s, e[i].k));
                    if (m > bigabs) {
                        bigabs = m;
                        big = s;
                    }
                }
                gsl_complex piv = gsl_matrix_complex_get(vec, big, e[i].k);
                for (int s = 0; s < N; s++) {
                    gsl_complex z = gsl_complex_div(gsl_matrix_complex_get(vec, s, e[i].k), piv);
                    vre[(size_t)i * N + s] = s == big ? 1.0 : GSL_REAL(z);
                    vim[(size_t)i * N + s] = s == big ? 0.0 : GSL_IMAG(z);
                }
            }
            rc = 0;
        }
    }
    if (a)
        gsl_matrix_free(a);
    if (ev)
        gsl_vector_complex_free(ev);
    if (vec)
        gsl_matrix_complex_free(vec);
    if (ws)
        gsl_eigen_nonsymmv_free(ws);
    free(e);
    return rc;
}

int lin_eigenvalues(int N, const double *A, double *re, double *im)
{
    return lin_eigen(N, A, re, im, NULL, NULL);
}

/* The eigenvalues of the N x N matrix A as [{re, im, vector?}], with each eigenvector
 * (when `vectors`) as {state name: {re, im}}; NULL when they do not converge. */
static json_t *eigen_json(int N, const double *A, const char *const *names, int vectors)
{
    double *re = calloc(N + 1, sizeof *re), *im = calloc(N + 1, sizeof *im);
    double *vre = vectors ? calloc((size_t)N * N + 1, sizeof *vre) : NULL;
    double *vim = vectors ? calloc((size_t)N * N + 1, sizeof *vim) : NULL;
    json_t *arr = NULL;
    if (re && im && (!vectors || (vre && vim)) && lin_eigen(N, A, re, im, vre, vim) == 0) {
        arr = json_array();
        for (int i = 0; i < N; i++) {
            json_t *o = json_pack("{s:o, s:o}", "re", num(re[i]), "im", num(im[i]));
            if (vectors) {
                json_t *v = json_object();
                for (int s = 0; s < N; s++)
                    json_object_set_new(v, names[s],
                                        json_pack("{s:o, s:o}", "re", num(vre[(size_t)i * N + s]), "im",
                                                  num(vim[(size_t)i * N + s])));
                json_object_set_new(o, "vector", v);
            }
            json_array_append_new(arr, o);
        }
    }
    free(re);
    free(im);
    free(vre);
    free(vim);
    return arr;
}

int lin_jacobian(const struct engine_model *m, const double *params, double t, const double *q,
                 const double *u, const int *inputs, int n_inputs, int numeric, double *f, double *A,
                 double *B, double *ft)
{
    return lin__jacobian(m, params, t, q, u, inputs, n_inputs, numeric, f, A, B, ft,
                         (int)(LIN_MAX_TANGENT_DOUBLES / (size_t)max_slots(m)));
}

int lin__jacobian(const struct engine_model *m, const double *params, double t, const double *q,
                  const double *u, const int *inputs, int n_inputs, int numeric, double *f, double *A,
                  double *B, double *ft, int chunk)
{
    return lin_jacobian_at(m, params, t, q, u, NULL, inputs, n_inputs, numeric, f, A, B, ft, chunk, NULL);
}

int lin_jacobian_at(const struct engine_model *m, const double *params, double t, const double *q,
                    const double *u, const double *qd, const int *inputs, int n_inputs, int numeric,
                    double *f, double *A, double *B, double *ft, int chunk, budget *bud)
{
    int n = m->n, k = m->k, N = n + k, nd = N + n_inputs + (ft != NULL), nv = 1 + N + m->np;
    if (chunk <= 0)
        chunk = (int)(LIN_MAX_TANGENT_DOUBLES / (size_t)max_slots(m));
    if (chunk < 1)
        chunk = 1;
    if (chunk > nd)
        chunk = nd;
    lin_ws *w = lin_ws_new(m, params, chunk, numeric);
    double *seed = calloc((size_t)nv * chunk, sizeof *seed), *df = calloc((size_t)N * chunk, sizeof *df);
    int rc = -1;
    if (!w || !seed || !df)
        goto done;
    if (qd)
        lin_ws_set_guess(w, qd);
    for (int d0 = 0; d0 < nd; d0 += chunk) {
        int c = nd - d0 < chunk ? nd - d0 : chunk;
        if (budget_check(bud)) {
            rc = -2;
            goto done;
        }
        if (qd) /* every chunk solves q' again: on the same branch */
            lin_ws_set_guess(w, qd);
        memset(seed, 0, (size_t)nv * c * sizeof *seed);
        for (int d = 0; d < c; d++) {
            int dir = d0 + d;
            int var = dir < N ? 1 + dir : dir < N + n_inputs ? 1 + N + inputs[dir - N] : 0;
            seed[(size_t)var * c + d] = 1.0;
        }
        if (lin_rhs_tangent(w, t, q, u, seed, c, f, df) < 0)
            goto done;
        for (int i = 0; i < N; i++)
            for (int d = 0; d < c; d++) {
                int dir = d0 + d;
                if (dir < N)
                    A[(size_t)i * N + dir] = df[(size_t)i * c + d];
                else if (dir < N + n_inputs)
                    B[(size_t)i * n_inputs + dir - N] = df[(size_t)i * c + d];
                else
                    ft[i] = df[(size_t)i * c + d];
            }
    }
    rc = 0;
done:
    lin_ws_free(w);
    free(seed);
    free(df);
    return rc;
}

static json_t *matrix_json(const double *a, int rows, int cols)
{
    json_t *arr = json_array();
    for (int i = 0; i < rows; i++) {
        json_t *row = json_array();
        for (int j = 0; j < cols; j++)
            json_array_append_new(row, num(a[(size_t)i * cols + j]));
        json_array_append_new(arr, row);
    }
    return arr;
}

static const char *const linearize_keys[] = {"model",
                                             "model_id",
                                             "parameters",
                                             "t",
                                             "q",
                                             "speeds",
                                             "qdot",
                                             "points",
                                             "inputs",
                                             "steady",
                                             "steady_tolerance",
                                             "select",
                                             "eigenvectors",
                                             "name",
                                             "description",
                                             NULL};
#define LINEARIZE_KEYS                                                                                       \
    "model, model_id, parameters, t, q, speeds, qdot, points, inputs, steady, steady_tolerance, select, "    \
    "eigenvectors"

/* The steady-motion test of one point: u' = 0 and d(u')/dt = A_u f + du'/dt = 0 along
 * the motion, against tol times their rounding scales. Adds an error naming the speed. */
static void check_steady(const struct engine_model *m, const lin_state *st, const double *f, const double *A,
                         const double *ft, double tol, int check, const char *prefix, json_t **problem,
                         double *max_ud, double *max_drift)
{
    int n = m->n, k = m->k, N = n + k;
    double scale = 1.0;
    for (int i = 0; i < N; i++) /* q, u and q' (not u', which is what is tested) */
        scale = fmax(scale, fmax(fabs(i < n ? f[i] : 0.0), fabs(i < n ? st->q[i] : st->u[i - n])));
    *max_ud = *max_drift = 0.0;
    for (int r = 0; r < k; r++) {
        double ud = f[n + r], drift = ft[n + r], dscale = fmax(1.0, fabs(ft[n + r]));
        for (int j = 0; j < N; j++) {
            drift += A[(size_t)(n + r) * N + j] * f[j];
            dscale = fmax(dscale, fabs(A[(size_t)(n + r) * N + j] * f[j]));
        }
        *max_ud = fmax(*max_ud, fabs(ud));
        *max_drift = fmax(*max_drift, fabs(drift));
        if (!check)
            continue;
        char path[160];
        if (st->from_speeds)
            snprintf(path, sizeof path, "%sspeeds.%s", prefix, m->speeds[r]);
        else
            snprintf(path, sizeof path, "%sqdot", prefix);
        if (!(fabs(ud) <= tol * scale))
            bad(problem, HAMEL_E_BAD_REQUEST, path,
                "not an equilibrium or steady motion: the speed %s changes (%s' = %.6g, tolerance %.2g); "
                "give a steady state or set \"steady\": false",
                m->speeds[r], m->speeds[r], ud, tol * scale);
        else if (!(fabs(drift) <= tol * dscale * N))
            bad(problem, HAMEL_E_BAD_REQUEST, path,
                "not a steady motion: %s' = 0 here but changes along the motion (d(%s')/dt = %.6g): a "
                "coordinate that moves enters the equations; give a steady state or set \"steady\": false",
                m->speeds[r], m->speeds[r], drift);
    }
}

/* What a linearization request asks besides its points. */
struct lin_request {
    int ni, *inp;   /* inputs: parameter indices, the columns of B */
    int nsel, *sel; /* select: state indices whose block of A is also reported */
    const json_t *select;
    int vectors; /* eigenvectors too */
    int check;   /* check that the point is steady */
    double tol;  /* its tolerance */
};

/* Linearization needs constraints linear in the velocities, or nonlinear ones in the
 * reduced form: the problem (HAMEL_E_FORMULATION) naming the others. */
static int lin_refuse_nonlinear(const struct engine_model *m, json_t **problem)
{
    *problem = hamel_problem_new(HAMEL_E_FORMULATION,
                                 "linearization needs constraints linear in the velocities, or nonlinear "
                                 "ones in the reduced form (speeds given: n - m of them), so that the "
                                 "state is q and the independent speeds");
    for (int j = 0; j < m->nc; j++)
        if (!m->cons[j].linear) {
            char path[64];
            snprintf(path, sizeof path, "model.constraints[%d]", j);
            hamel_problem_add(*problem, path, -1, "nonlinear in the velocities");
        }
    return HAMEL_E_FORMULATION;
}

/* inputs: parameter names, each once, into inp[ni]. */
static void parse_inputs(const struct engine_model *m, const json_t *inputs, int ni, int *inp,
                         json_t **problem)
{
    if (inputs && !json_is_array(inputs))
        bad(problem, HAMEL_E_BAD_REQUEST, "inputs", "must be an array of parameter names");
    for (int i = 0; i < ni; i++) {
        const json_t *v = json_array_get(inputs, i);
        char path[48];
        snprintf(path, sizeof path, "inputs[%d]", i);
        inp[i] = json_is_string(v) ? model_param_index(m, json_string_value(v)) : -1;
        if (!json_is_string(v))
            bad(problem, HAMEL_E_BAD_REQUEST, path, "must be a parameter name");
        else if (inp[i] < 0)
            bad(problem, HAMEL_E_BAD_REQUEST, path,
                "'%s' is not a parameter of the model (inputs are parameters, e.g. a generalized force "
                "given as a parameter)",
                json_string_value(v));
        for (int j = 0; j < i && inp[i] >= 0; j++)
            if (inp[j] == inp[i])
                bad(problem, HAMEL_E_BAD_REQUEST, path, "'%s' is listed twice", json_string_value(v));
    }
}

/* select: state names (coordinates, speeds), each once, into sel[nsel] as state indices. */
static void parse_select(const struct engine_model *m, const json_t *select, int nsel, int *sel,
                         json_t **problem)
{
    int n = m->n;
    if (select && (!json_is_array(select) || nsel == 0))
        bad(problem, HAMEL_E_BAD_REQUEST, "select",
            "must be a non-empty array of state names (coordinates, speeds)");
    for (int i = 0; i < nsel; i++) {
        const json_t *v = json_array_get(select, i);
        char path[48];
        snprintf(path, sizeof path, "select[%d]", i);
        const char *name = json_string_value(v);
        int ci = name ? model_coord_index(m, name) : -1, si = name ? model_speed_index(m, name) : -1;
        sel[i] = ci >= 0 ? ci : si >= 0 ? n + si : -1;
        if (!name)
            bad(problem, HAMEL_E_BAD_REQUEST, path, "must be a state name");
        else if (sel[i] < 0)
            bad(problem, HAMEL_E_BAD_REQUEST, path, "'%s' is neither a coordinate nor a speed of the model",
                name);
        for (int j = 0; j < i && sel[i] >= 0; j++)
            if (sel[j] == sel[i])
                bad(problem, HAMEL_E_BAD_REQUEST, path, "'%s' is listed twice", name);
    }
}

/* eigenvectors, steady and steady_tolerance over their defaults. */
static void parse_lin_options(const json_t *request, struct lin_request *R, json_t **problem)
{
    R->vectors = 0;
    const json_t *vv = json_object_get(request, "eigenvectors");
    if (vv && !json_is_boolean(vv))
        bad(problem, HAMEL_E_BAD_REQUEST, "eigenvectors", "must be true or false");
    else if (vv)
        R->vectors = json_is_true(vv);
    R->check = 1;
    const json_t *sv = json_object_get(request, "steady");
    if (sv && !json_is_boolean(sv))
        bad(problem, HAMEL_E_BAD_REQUEST, "steady", "must be true (check the point is steady) or false");
    else if (sv)
        R->check = json_is_true(sv);
    R->tol = LIN_DEFAULT_STEADY_TOL;
    const json_t *tv = json_object_get(request, "steady_tolerance");
    if (tv && (!json_is_number(tv) || !(json_number_value(tv) > 0) || !isfinite(json_number_value(tv))))
        bad(problem, HAMEL_E_BAD_REQUEST, "steady_tolerance", "must be a positive number");
    else if (tv)
        R->tol = json_number_value(tv);
}

/* The numbers of one point of a linearization's answer: the state, A, B, the eigenvalues
 * (and eigenvectors), the independent block of a model with position constraints and the
 * selected block. */
static double lin_point_values(const struct engine_model *m, const struct lin_request *R)
{
    double N = m->n + m->k, ns = R->nsel, vec = R->vectors ? 2 : 0;
    double block = N * N * (1 + vec) + N * R->ni + 2 * N;
    double selected = ns ? ns * ns * (1 + vec) + ns * R->ni + 2 * ns : 0;
    return 4 + 2.0 * m->n + 2.0 * m->k + block * (m->npos > 0 ? 2 : 1) + selected;
}

/* points (np of them) or one point in the request itself, within the limits: the work,
 * and the answer's size within max_output_values (10,000 points of a 60-coordinate chain
 * were 1.6 GB of JSON and 8 GB of memory in `hamel linearize`). */
static void check_points(const struct engine_model *m, const json_t *request, const json_t *points, int np,
                         const struct lin_request *R, const engine_limits *limits, json_t **problem)
{
    int N = m->n + m->k, ni = R->ni;
    double work = (double)np * (N + ni + 1) * max_slots(m), per = lin_point_values(m, R);
    if (points && (!json_is_array(points) || np == 0)) {
        bad(problem, HAMEL_E_BAD_REQUEST, "points",
            "must be a non-empty array of {\"t\", \"q\", \"speeds\"}");
    } else if (np > limits->max_states || work > LIN_MAX_WORK) {
        bad(problem, HAMEL_E_BAD_REQUEST, "points", "too many points: at most %d for this model",
            (int)fmin(limits->max_states, LIN_MAX_WORK / ((double)(N + ni + 1) * max_slots(m))));
    } else if (limits->max_output_values && np * per > (double)limits->max_output_values) {
        bad(problem, HAMEL_E_LIMIT, points ? "points" : "q",
            "%d points x %.0f values (the state, A, B, the eigenvalues%s) = %.0f; at most %zu values per "
            "answer",
            np, per, R->vectors ? " and eigenvectors" : "", np * per, limits->max_output_values);
    } else if (points && (json_object_get(request, "q") || json_object_get(request, "speeds") ||
                          json_object_get(request, "qdot"))) {
        bad(problem, HAMEL_E_BAD_REQUEST, "points", "give points or one point (t, q, speeds), not both");
    } else if (!points && !json_object_get(request, "q")) {
        bad(problem, HAMEL_E_BAD_REQUEST, "q",
            "required: the operating point {\"t\", \"q\", \"speeds\" or \"qdot\"} (or \"points\")");
    }
}

/* The selected block of A (and B): rows and columns of the named states, with its
 * eigenvalues. */
static json_t *selected_json(const struct engine_model *m, const struct lin_request *R, const double *A,
                             const double *B)
{
    int n = m->n, N = m->n + m->k, nsel = R->nsel, ni = R->ni;
    const int *sel = R->sel;
    double *blk = calloc((size_t)nsel * nsel, sizeof *blk), *bb = calloc((size_t)nsel * ni + 1, sizeof *bb);
    double *bre = calloc(nsel, sizeof *bre), *bim = calloc(nsel, sizeof *bim);
    json_t *bo = json_object();
    if (blk && bb && bre && bim) {
        for (int i = 0; i < nsel; i++) {
            for (int j = 0; j < nsel; j++)
                blk[i * nsel + j] = A[(size_t)sel[i] * N + sel[j]];
            for (int j = 0; j < ni; j++)
                bb[i * ni + j] = B[(size_t)sel[i] * ni + j];
        }
        json_object_set_new(bo, "A", matrix_json(blk, nsel, nsel));
        if (ni)
            json_object_set_new(bo, "B", matrix_json(bb, nsel, ni));
        const char *sn[256];
        for (int i = 0; i < nsel && i < 256; i++)
            sn[i] = sel[i] < n ? m->coords[sel[i]] : m->speeds[sel[i] - n];
        json_t *be = nsel <= 256 ? eigen_json(nsel, blk, sn, R->vectors) : NULL;
        json_object_set_new(bo, "eigenvalues", be ? be : json_array());
    }
    free(blk);
    free(bb);
    free(bre);
    free(bim);
    return bo;
}

/* The document of point s: the state, f, A, B, the eigenvalues eig (taken), the
 * independent and selected blocks, and the steady check. */
static json_t *point_json(const struct engine_model *m, const double *params, const struct lin_request *R,
                          const lin_state *s, const double *f, const double *A, const double *B, json_t *eig,
                          double max_ud, double max_drift)
{
    int n = m->n, k = m->k, N = n + k, ni = R->ni;
    json_t *o = json_object();
    json_object_set_new(o, "t", num(s->t));
    json_object_set_new(o, "q", named(m->coords, s->q, n));
    json_object_set_new(o, "speeds", named(m->speeds, s->u, k));
    json_object_set_new(o, "qdot", named(m->coords, f, n));
    json_object_set_new(o, "speeds_dot", named(m->speeds, f + n, k));
    json_object_set_new(o, "A", matrix_json(A, N, N));
    if (ni)
        json_object_set_new(o, "B", matrix_json(B, N, ni));
    json_object_set_new(o, "eigenvalues", eig);
    if (m->npos > 0) {
        json_t *red = reduced_json(m, params, s, A, B, ni, R->vectors);
        if (red)
            json_object_set_new(o, "independent", red);
    }
    if (R->nsel)
        json_object_set_new(o, "selected", selected_json(m, R, A, B));
    json_object_set_new(o, "steady",
                        json_pack("{s:b, s:o, s:o}", "checked", R->check, "max_abs_speeds_dot", num(max_ud),
                                  "max_abs_drift", num(max_drift)));
    return o;
}

/* The linearization's document: the names of the states, coordinates, speeds and
 * inputs, and the points (arr, borrowed). */
static json_t *linearize_result(const struct engine_model *m, const struct lin_request *R, json_t *arr)
{
    json_t *names = json_array(), *cl = json_array(), *sl = json_array(), *inames = json_array();
    for (int i = 0; i < m->n; i++) {
        json_array_append_new(names, json_string(m->coords[i]));
        json_array_append_new(cl, json_string(m->coords[i]));
    }
    for (int r = 0; r < m->k; r++) {
        json_array_append_new(names, json_string(m->speeds[r]));
        json_array_append_new(sl, json_string(m->speeds[r]));
    }
    for (int i = 0; i < R->ni; i++)
        json_array_append_new(inames, json_string(m->params[R->inp[i]]));
    json_t *result = json_pack("{s:s, s:o, s:o, s:o, s:o, s:s, s:O}", "model_id", m->id, "states", names,
                               "coordinates", cl, "speeds", sl, "inputs", inames, "eigenvalue_order",
                               "real part descending, then imaginary part descending", "points", arr);
    if (R->nsel)
        json_object_set_new(result, "select", json_deep_copy(R->select));
    return result;
}

/* The eigen document of A at the point of `prefix` ("points[i]." or "": the request's
 * one point), or NULL with
 * *problem a numerical-failure: A not finite (an overflow at the state: said so, the
 * point named, before GSL is given infinities) or the eigensolver not converging. */
static json_t *lin_point_eigen(int N, const double *A, const char *const *names, int vectors,
                               const char *prefix, json_t **problem)
{
    int finite = 1;
    for (size_t i = 0; i < (size_t)N * N && finite; i++)
        finite = isfinite(A[i]);
    json_t *eig = finite ? eigen_json(N, A, names, vectors) : NULL;
    if (eig)
        return eig;
    if (finite) {
        *problem =
            hamel_problem_new(HAMEL_E_NUMERIC, "the eigenvalues of A did not converge (gsl_eigen_nonsymmv)");
        return NULL;
    }
    *problem =
        hamel_problem_new(HAMEL_E_NUMERIC, "A is not finite at this point (an overflow): the state's values "
                                           "are out of the model's range");
    char path[48];
    snprintf(path, sizeof path, "%.*s", (int)strcspn(prefix, "."), prefix);
    hamel_problem_add(*problem, path, -1,
                      "A (the linearized equations) has an infinite or NaN entry at this state");
    return NULL;
}

int engine_linearize(const engine_model *m, const json_t *request, const engine_limits *limits,
                     engine_control *ctl, json_t **result, json_t **problem)
{
    *result = NULL;
    *problem = NULL;
    budget bud;
    lin_budget(&bud, limits || ctl ? (limits ? limits : &engine_default_limits) : NULL, ctl, "linearization");
    if (!limits)
        limits = &engine_default_limits;
    if (!json_is_object(request)) {
        *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, "the request must be a JSON object");
        hamel_problem_add(*problem, "", -1, "must be an object");
        return HAMEL_E_BAD_REQUEST;
    }
    if (m->nlin != m->nc && !m->nl_reduced)
        return lin_refuse_nonlinear(m, problem);
    int n = m->n, k = m->k, N = n + k;
    check_keys(request, linearize_keys, LINEARIZE_KEYS, "", problem);
    double *params = calloc(m->np + 1, sizeof *params);
    if (!params)
        return HAMEL_E_INTERNAL;
    sim_parse_parameters(m, json_object_get(request, "parameters"), params, problem);
    /* inputs: parameter names, the columns of B */
    const json_t *inputs = json_object_get(request, "inputs");
    int ni = json_is_array(inputs) ? (int)json_array_size(inputs) : 0;
    int *inp = calloc(ni + 1, sizeof *inp);
    if (!inp) {
        free(params);
        return HAMEL_E_INTERNAL;
    }
    parse_inputs(m, inputs, ni, inp, problem);
    /* select: state names whose block of A (rows and columns) is also reported */
    const json_t *select = json_object_get(request, "select");
    int nsel = json_is_array(select) ? (int)json_array_size(select) : 0;
    int *sel = calloc(nsel + 1, sizeof *sel);
    if (!sel) {
        free(params);
        free(inp);
        return HAMEL_E_INTERNAL;
    }
    parse_select(m, select, nsel, sel, problem);
    struct lin_request R = {ni, inp, nsel, sel, select, 0, 1, LIN_DEFAULT_STEADY_TOL};
    parse_lin_options(request, &R, problem);
    const json_t *points = json_object_get(request, "points");
    int np = points ? (int)json_array_size(points) : 1;
    check_points(m, request, points, np, &R, limits, problem);
    if (*problem) {
        free(params);
        free(inp);
        free(sel);
        return hamel_problem_code(*problem);
    }
    int rc = 0;
    hamel_ws *hw = hamel_ws_new(m, params);
    lin_state *st = calloc(np, sizeof *st);
    int *deps = calloc((size_t)np * (m->npos + 1), sizeof *deps);
    double *store = calloc((size_t)np * (2 * n + k + 1), sizeof *store);
    double *f = calloc(N, sizeof *f), *A = calloc((size_t)N * N, sizeof *A), *ft = calloc(N, sizeof *ft);
    const char **state_names = calloc(N, sizeof *state_names);
    double *B = calloc((size_t)N * ni + 1, sizeof *B);
    json_t *arr = NULL;
    if (!hw || !st || !deps || !store || !f || !A || !ft || !B || !state_names) {
        rc = HAMEL_E_INTERNAL;
        *problem = hamel_problem_new(rc, "out of memory");
        goto done;
    }
    for (int i = 0; i < N; i++)
        state_names[i] = i < n ? m->coords[i] : m->speeds[i - n];
    for (int p = 0; p < np; p++) {
        char prefix[48] = "";
        st[p].q = store + (size_t)p * (2 * n + k + 1);
        st[p].dep = deps + (size_t)p * (m->npos + 1);
        st[p].qd = st[p].q + n;
        st[p].u = st[p].qd + n;
        const json_t *pj = points ? json_array_get(points, p) : request;
        if (points) {
            snprintf(prefix, sizeof prefix, "points[%d]", p);
            if (!json_is_object(pj)) {
                bad(problem, HAMEL_E_BAD_REQUEST, prefix, "must be an object {\"t\", \"q\", \"speeds\"}");
                continue;
            }
            snprintf(prefix, sizeof prefix, "points[%d].", p);
            if (check_keys(pj, state_keys, "t, q, speeds, qdot", prefix, problem))
                continue;
        }
        if (budget_check(&bud)) {
            rc = lin_stopped(&bud, "linearization", 0, np, problem);
            goto done;
        }
        read_state(m, hw, params, pj, prefix, &st[p], problem);
    }
    if (*problem) {
        rc = hamel_problem_code(*problem);
        goto done;
    }
    arr = json_array();
    for (int p = 0; p < np; p++) {
        lin_state *s = &st[p];
        char prefix[48] = "";
        if (points)
            snprintf(prefix, sizeof prefix, "points[%d].", p);
        int jr = budget_check(&bud)
                     ? -2
                     : lin_jacobian_at(m, params, s->t, s->q, s->u, s->qd, inp, ni, 0, f, A, B, ft, 0, &bud);
        if (jr == -2) {
            rc = lin_stopped(&bud, "linearization", p, np, problem);
            goto done;
        }
        if (jr < 0) {
            rc = HAMEL_E_NUMERIC;
            *problem = hamel_problem_new(rc, "the equations cannot be differentiated at this point");
            char path[64];
            snprintf(path, sizeof path, "%sq", prefix);
            hamel_problem_add(*problem, path, -1, "the mass matrix or Psi is singular here");
            goto done;
        }
        double max_ud = 0.0, max_drift = 0.0;
        check_steady(m, s, f, A, ft, R.tol, R.check, prefix, problem, &max_ud, &max_drift);
        if (*problem) {
            rc = hamel_problem_code(*problem);
            json_object_set_new(*problem, "detail",
                                json_string("the operating point is not an equilibrium or a steady motion"));
            goto done;
        }
        json_t *eig = lin_point_eigen(N, A, (const char *const *)state_names, R.vectors, prefix, problem);
        if (!eig) {
            rc = HAMEL_E_NUMERIC;
            goto done;
        }
        json_t *o = point_json(m, params, &R, s, f, A, B, eig, max_ud, max_drift);
        json_array_append_new(arr, o);
    }
    *result = linearize_result(m, &R, arr);
done:
    json_decref(arr);
    hamel_ws_free(hw);
    free(st);
    free(deps);
    free(store);
    free(f);
    free(A);
    free(ft);
    free(state_names);
    free(B);
    free(params);
    free(inp);
    free(sel);
    return rc;
}
