/* steady_api.c — POST /v1/steady (engine_steady): steady motions by Newton's method on
 * the exact Jacobian, and their branches by pseudo-arclength continuation.
 *
 * Every evaluation is one /v1/linearize of the point (engine_linearize, steady: false):
 * its speeds_dot are the residual (every speed derivative zero), its A (on the
 * independent states when the model has position constraints) and B (on the parameters
 * among the unknowns) the exact derivatives, so the branch is the very equations that
 * are integrated, and the position constraints are solved at every point as linearize
 * solves them.
 *
 * Newton: the residual u' (k values) over the unknowns (nu of them, among coordinates,
 * speeds and parameters); each step is the least-squares step of smallest norm (SVD,
 * singular values below 1e-10 of the largest dropped), so equations that hold
 * identically on the unknowns (a speed derivative that stays zero) cost nothing. As many
 * unknowns as independent equations (the rank of du'/d(unknowns) at the guess): fewer
 * independent equations than unknowns is a 422 saying how many.
 *
 * Continuation: x = (unknowns, vary) follows F(x) = 0 with pseudo-arclength steps: the
 * tangent is the null vector of dF/dx (the right singular vector of the smallest
 * singular value, oriented as the step before), the predictor x + ds t, the corrector
 * Newton on [F; t . (x - x_pred)] = 0; a failed corrector halves ds. The last point is
 * solved at vary = to exactly. At each point the eigenvalues of A after removing the
 * states that do not enter (a column of A that is zero, removed again and again: a
 * coordinate that no equation reads, a speed that only such coordinates read) and the
 * zeros every point has (persistent zeros: first integrals, families of steady motions).
 * A stability change is where the number of eigenvalues with positive real part changes
 * (two real ones meeting and leaving as a complex pair change nothing): complex (a pair
 * crosses) or real; it is located by the Illinois method on the real part
 * of the crossing eigenvalue, solving the steady motion at each trial value of vary, to
 * 1e-12 relative (at least 1e-10 as promised).
 */
#include "engine.h"

#include <gsl/gsl_linalg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget.h"
#include "linearize.h"
#include "model.h"

#define STEADY_MAX_NEWTON 40
#define STEADY_MAX_STEPS 2000
#define STEADY_RANK_TOL 1e-10   /* singular values below this times the largest are dropped */
#define STEADY_LOCATE_TOL 1e-12 /* stability changes, relative to max(1, |value|) */
/* halvings between two branch points whose growing modes change in both kinds */
#define STEADY_PERSISTENT_NEAR 1e-4 /* a persistent zero is at most this much of the spectrum's size */
#define STEADY_SPLIT_DEPTH 40
/* a branch point: the second smallest singular value of the branch's Jacobian below this
 * times the largest met on the branch */
#define STEADY_BRANCH_POINT_GAP 1e-10

#define bad(problem, path, ...) hamel_problem_addf((problem), HAMEL_E_BAD_REQUEST, (path), __VA_ARGS__)

enum { VAR_Q, VAR_U, VAR_P };

typedef struct steady_var {
    const char *name;
    int kind; /* VAR_Q / VAR_U / VAR_P */
    int idx;  /* coordinate, speed or parameter index */
} steady_var;

typedef struct steady {
    const struct engine_model *m;
    const engine_limits *lim;
    engine_control *ctl;
    double t;
    double *q, *u, *p; /* the current point: n, k, np values */
    steady_var *var;   /* the unknowns, then (continuation) vary last */
    int nu, nv;        /* unknowns; variables (nu or nu + 1) */
    int k;
    budget bud; /* the whole search: ENGINE_STEADY_BUDGET_FACTOR compile budgets of CPU time */
    /* the last evaluation */
    double *r;      /* [k] u' */
    double *J;      /* [k * nv] du'/d(var) */
    int N;          /* states of A (reduced when the model has position constraints) */
    double *A;      /* [N * N] */
    json_t *point;  /* the linearize point (q solved, speeds) */
    json_t *states; /* borrowed from point's answer: names of A's states */
    json_t *answer; /* the last linearize answer */
} steady;

static double var_get(const steady *s, int i)
{
    const steady_var *v = &s->var[i];
    return v->kind == VAR_Q ? s->q[v->idx] : v->kind == VAR_U ? s->u[v->idx] : s->p[v->idx];
}

static void var_set(steady *s, int i, double x)
{
    const steady_var *v = &s->var[i];
    double *where = v->kind == VAR_Q ? &s->q[v->idx] : v->kind == VAR_U ? &s->u[v->idx] : &s->p[v->idx];
    *where = x;
}

/* The state as {t, q, speeds} (new reference). */
static json_t *state_json(const steady *s)
{
    const struct engine_model *m = s->m;
    json_t *q = json_object(), *sp = json_object();
    for (int i = 0; i < m->n; i++)
        json_object_set_new(q, m->coords[i], json_real(s->q[i]));
    for (int r = 0; r < m->k; r++)
        json_object_set_new(sp, m->speeds[r], json_real(s->u[r]));
    return json_pack("{s:f, s:o, s:o}", "t", s->t, "q", q, "speeds", sp);
}

static json_t *params_json(const steady *s)
{
    json_t *p = json_object();
    for (int a = 0; a < s->m->np; a++)
        json_object_set_new(p, s->m->params[a], json_real(s->p[a]));
    return p;
}

/* Reads a matrix rows x cols from JSON arrays into out; 0 or -1. */
static int read_matrix(const json_t *js, int rows, int cols, double *out)
{
    if ((int)json_array_size(js) != rows)
        return -1;
    for (int i = 0; i < rows; i++) {
        const json_t *row = json_array_get(js, (size_t)i);
        if ((int)json_array_size(row) != cols)
            return -1;
        for (int j = 0; j < cols; j++) {
            const json_t *v = json_array_get(row, (size_t)j);
            if (!json_is_number(v))
                return -1;
            out[i * cols + j] = json_number_value(v);
        }
    }
    return 0;
}

static int state_index(const json_t *states, const char *name)
{
    for (size_t i = 0; i < json_array_size(states); i++)
        if (!strcmp(json_string_value(json_array_get(states, i)), name))
            return (int)i;
    return -1;
}

/* Evaluates the point: r, J, A. Position constraints: the dependent coordinates are
 * solved (and kept). Returns 0, or an error code with *problem. */
static int evaluate(steady *s, json_t **problem)
{
    const struct engine_model *m = s->m;
    if (budget_check(&s->bud) == BUDGET_TIME) {
        char detail[400], when[240];
        budget_time_text(&s->bud, when, sizeof when);
        snprintf(detail, sizeof detail,
                 "the steady-motion search ran out of time (%d compile budgets): stopped after %s",
                 ENGINE_STEADY_BUDGET_FACTOR, when);
        *problem = hamel_problem_new(HAMEL_E_COMPILE_LIMIT, detail);
        hamel_problem_add(*problem, "continuation", -1, "ask for fewer steps");
        return HAMEL_E_COMPILE_LIMIT;
    }
    json_t *req = state_json(s), *inputs = json_array();
    for (int i = 0; i < s->nv; i++)
        if (s->var[i].kind == VAR_P)
            json_array_append_new(inputs, json_string(s->var[i].name));
    json_object_set_new(req, "parameters", params_json(s));
    json_object_set_new(req, "inputs", inputs);
    json_object_set_new(req, "steady", json_false());
    json_t *res = NULL;
    int rc = engine_linearize(m, req, s->lim, s->ctl, &res, problem);
    json_decref(req);
    if (rc)
        return rc;
    json_decref(s->answer);
    s->answer = res;
    const json_t *pt = json_array_get(json_object_get(res, "points"), 0);
    const json_t *ind = json_object_get(pt, "independent");
    const json_t *blk = ind ? ind : pt;
    s->states = json_object_get(ind ? ind : res, "states");
    int N = (int)json_array_size(s->states), ni = 0;
    for (int i = 0; i < s->nv; i++)
        ni += s->var[i].kind == VAR_P;
    free(s->A);
    s->A = calloc((size_t)N * N + 1, sizeof *s->A);
    double *B = calloc((size_t)N * (ni + 1), sizeof *B);
    s->N = N;
    if (!s->A || !B || read_matrix(json_object_get(blk, "A"), N, N, s->A) < 0 ||
        (ni && read_matrix(json_object_get(blk, "B"), N, ni, B) < 0)) {
        free(B);
        *problem = hamel_problem_new(HAMEL_E_NUMERIC, "the equations could not be evaluated at this point");
        return HAMEL_E_NUMERIC;
    }
    /* the solved coordinates (position constraints) */
    const json_t *qs = json_object_get(pt, "q");
    for (int i = 0; i < m->n; i++) {
        const json_t *v = json_object_get(qs, m->coords[i]);
        if (json_is_number(v))
            s->q[i] = json_number_value(v);
    }
    const json_t *ud = json_object_get(pt, "speeds_dot");
    for (int r = 0; r < s->k; r++) {
        const json_t *v = json_object_get(ud, m->speeds[r]);
        s->r[r] = json_is_number(v) ? json_number_value(v) : NAN;
    }
    for (int r = 0; r < s->k; r++) {
        int row = state_index(s->states, m->speeds[r]);
        for (int i = 0, pi = 0; i < s->nv; i++) {
            double d = 0.0;
            if (s->var[i].kind == VAR_P)
                d = row >= 0 ? B[row * ni + pi++] : 0.0;
            else {
                int col = state_index(s->states, s->var[i].name);
                d = row >= 0 && col >= 0 ? s->A[row * N + col] : 0.0;
            }
            s->J[r * s->nv + i] = d;
        }
    }
    free(B);
    json_decref(s->point);
    s->point = json_incref((json_t *)pt);
    for (int r = 0; r < s->k; r++)
        if (!isfinite(s->r[r])) {
            *problem = hamel_problem_new(HAMEL_E_NUMERIC, "a speed derivative is not finite at this point");
            return HAMEL_E_NUMERIC;
        }
    return 0;
}

/* The least-squares solution of smallest norm of M x = b (rows x cols, rows >= cols
 * after padding), singular values below STEADY_RANK_TOL of the largest dropped; *rank
 * receives the rank. M and b are not changed. Returns 0 or -1. */
static int lsq(int rows, int cols, const double *M, const double *b, double *x, int *rank)
{
    int R = rows >= cols ? rows : cols;
    gsl_matrix *U = gsl_matrix_calloc((size_t)R, (size_t)cols),
               *V = gsl_matrix_alloc((size_t)cols, (size_t)cols);
    gsl_vector *S = gsl_vector_alloc((size_t)cols), *work = gsl_vector_alloc((size_t)cols);
    int rc = -1;
    if (U && V && S && work) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++)
                gsl_matrix_set(U, (size_t)i, (size_t)j, M[i * cols + j]);
        if (gsl_linalg_SV_decomp(U, V, S, work) == 0) {
            double smax = gsl_vector_get(S, 0);
            int rk = 0;
            for (int j = 0; j < cols; j++)
                rk += gsl_vector_get(S, (size_t)j) > STEADY_RANK_TOL * smax && smax > 0;
            if (rank)
                *rank = rk;
            if (x) {
                for (int j = 0; j < cols; j++)
                    x[j] = 0.0;
                for (int c = 0; c < rk; c++) {
                    double dot = 0.0;
                    for (int i = 0; i < rows; i++)
                        dot += gsl_matrix_get(U, (size_t)i, (size_t)c) * b[i];
                    dot /= gsl_vector_get(S, (size_t)c);
                    for (int j = 0; j < cols; j++)
                        x[j] += gsl_matrix_get(V, (size_t)j, (size_t)c) * dot;
                }
            }
            rc = 0;
        }
    }
    gsl_matrix_free(U);
    gsl_matrix_free(V);
    gsl_vector_free(S);
    gsl_vector_free(work);
    return rc;
}

/* The unit null vector of the k x nv matrix J (the right singular vector of its smallest
 * singular value) into t, the largest singular value into *big and the second smallest
 * into *next (near 0 the null space has more than one direction: a branch point).
 * Returns 0 or -1. */
static int null_vector(int k, int nv, const double *J, double *t, double *big, double *next)
{
    *big = *next = 0.0;
    int R = k >= nv ? k : nv;
    gsl_matrix *U = gsl_matrix_calloc((size_t)R, (size_t)nv), *V = gsl_matrix_alloc((size_t)nv, (size_t)nv);
    gsl_vector *S = gsl_vector_alloc((size_t)nv), *work = gsl_vector_alloc((size_t)nv);
    int rc = -1;
    if (U && V && S && work) {
        for (int i = 0; i < k; i++)
            for (int j = 0; j < nv; j++)
                gsl_matrix_set(U, (size_t)i, (size_t)j, J[i * nv + j]);
        if (gsl_linalg_SV_decomp(U, V, S, work) == 0) {
            for (int j = 0; j < nv; j++)
                t[j] = gsl_matrix_get(V, (size_t)j, (size_t)nv - 1);
            *big = gsl_vector_get(S, 0);
            *next = nv >= 2 ? gsl_vector_get(S, (size_t)nv - 2) : *big;
            rc = 0;
        }
    }
    gsl_matrix_free(U);
    gsl_matrix_free(V);
    gsl_vector_free(S);
    gsl_vector_free(work);
    return rc;
}

static double max_abs(const double *v, int n)
{
    double m = 0.0;
    for (int i = 0; i < n; i++)
        m = fmax(m, fabs(v[i]));
    return m;
}

/* Converged: every speed derivative within rounding of the equations' scale. */
static int converged(const steady *s)
{
    double scale = 1.0;
    for (int i = 0; i < s->N * s->N; i++)
        scale = fmax(scale, fabs(s->A[i]));
    double x = 1.0;
    for (int i = 0; i < s->nv; i++)
        x = fmax(x, fabs(var_get(s, i)));
    return max_abs(s->r, s->k) <= 1e-12 * scale * x;
}

/* Newton on the first `nfree` variables (the others held), optionally with the
 * arclength row tan . (x - x0) = 0 over all nv variables (tan, x0 non-NULL). Returns 0
 * (converged; s holds the solution evaluated), 1 (no convergence) or an error code. */
static int newton(steady *s, int nfree, const double *tan, const double *x0, int *iters, json_t **problem)
{
    int rows = s->k + (tan ? 1 : 0), cols = tan ? s->nv : nfree;
    double *M = calloc((size_t)(rows + 1) * (cols + 1), sizeof *M), *b = calloc((size_t)rows + 1, sizeof *b),
           *dx = calloc((size_t)cols + 1, sizeof *dx);
    int rc = M && b && dx ? 1 : HAMEL_E_INTERNAL, polished = 0;
    if (rc != 1)
        *problem = hamel_problem_new(rc, "out of memory");
    for (int it = 0; rc == 1 && it <= STEADY_MAX_NEWTON; it++) {
        int erc = evaluate(s, problem);
        if (erc) {
            rc = erc;
            break;
        }
        if (iters)
            *iters = it;
        double arc = 0.0;
        if (tan)
            for (int i = 0; i < s->nv; i++)
                arc += tan[i] * (var_get(s, i) - x0[i]);
        if (converged(s) && (!tan || fabs(arc) <= 1e-12 * (1.0 + max_abs(x0, s->nv)))) {
            if (polished || it == STEADY_MAX_NEWTON) {
                rc = 0;
                break;
            }
            polished = 1; /* one more step: the last digits */
        }
        if (it == STEADY_MAX_NEWTON)
            break;
        for (int r = 0; r < s->k; r++) {
            for (int j = 0; j < cols; j++)
                M[r * cols + j] = s->J[r * s->nv + j];
            b[r] = -s->r[r];
        }
        if (tan) {
            for (int j = 0; j < cols; j++)
                M[s->k * cols + j] = tan[j];
            b[s->k] = -arc;
        }
        if (lsq(rows, cols, M, b, dx, NULL) < 0) {
            rc = HAMEL_E_NUMERIC;
            *problem = hamel_problem_new(rc, "the Newton step could not be computed (SVD)");
            break;
        }
        double step = 0.0, size = 0.0;
        for (int j = 0; j < cols; j++) {
            var_set(s, j, var_get(s, j) + dx[j]);
            step = fmax(step, fabs(dx[j]));
            size = fmax(size, fabs(var_get(s, j)));
        }
        if (!isfinite(step))
            break;
    }
    free(M);
    free(b);
    free(dx);
    return rc;
}

/* ---- eigenvalues without the structural zeros -------------------------------------- */

/* The eigenvalues of A with the states that do not enter removed (a zero column, again
 * and again), into re/im (at most N); returns their number, or -1. */
static int reduced_eigenvalues(const steady *s, double *re, double *im, int *removed)
{
    int N = s->N;
    double scale = 0.0;
    for (int i = 0; i < N * N; i++)
        scale = fmax(scale, fabs(s->A[i]));
    double tiny = 1e-14 * scale;
    char *gone = calloc((size_t)N + 1, 1);
    double *B = calloc((size_t)N * N + 1, sizeof *B);
    if (!gone || !B) {
        free(gone);
        free(B);
        return -1;
    }
    for (int again = 1; again;) {
        again = 0;
        for (int j = 0; j < N; j++) {
            if (gone[j])
                continue;
            int zero = 1;
            for (int i = 0; i < N && zero; i++)
                zero = gone[i] || fabs(s->A[i * N + j]) <= tiny;
            if (zero) {
                gone[j] = 1;
                again = 1;
            }
        }
    }
    int M = 0;
    int *keep = calloc((size_t)N + 1, sizeof *keep);
    for (int j = 0; keep && j < N; j++)
        if (!gone[j])
            keep[M++] = j;
    for (int i = 0; keep && i < M; i++)
        for (int j = 0; j < M; j++)
            B[i * M + j] = s->A[keep[i] * N + keep[j]];
    int rc = keep && (M == 0 || lin_eigenvalues(M, B, re, im) == 0) ? M : -1;
    if (removed)
        *removed = N - M;
    free(keep);
    free(gone);
    free(B);
    return rc;
}

typedef struct spectrum {
    int count;
    double re[128], im[128];
} spectrum;

/* The spectrum of the current point (at most 128 eigenvalues kept). */
static int spectrum_now(const steady *s, spectrum *sp, int *removed)
{
    if (s->N > 128) {
        sp->count = 0;
        return -1;
    }
    int c = reduced_eigenvalues(s, sp->re, sp->im, removed);
    sp->count = c < 0 ? 0 : c;
    return c < 0 ? -1 : 0;
}

/* The size scale of a spectrum: max(1, max |lambda|). */
static double spec_scale(const spectrum *sp)
{
    double m = 1.0;
    for (int i = 0; i < sp->count; i++)
        m = fmax(m, hypot(sp->re[i], sp->im[i]));
    return m;
}

/* Whether eigenvalue i is one of the z closest to the origin (persistent zeros) and near
 * it: within STEADY_PERSISTENT_NEAR of the spectrum's size, so that a triple zero split by
 * rounding (~1e-7) is one, and a point with fewer zeros than the branch's count (the
 * upright disk at spin 0, whose reduced spectrum there is only the real pair +-3.96) does
 * not lose a genuine eigenvalue instead (that made a stability change out of nothing). */
static int is_persistent(const spectrum *sp, int i, int z)
{
    double a = hypot(sp->re[i], sp->im[i]);
    if (a > STEADY_PERSISTENT_NEAR * spec_scale(sp))
        return 0;
    int closer = 0;
    for (int j = 0; j < sp->count; j++) {
        double b = hypot(sp->re[j], sp->im[j]);
        if (b < a || (b == a && j < i))
            closer++;
    }
    return closer < z;
}

static int is_complex(const spectrum *sp, int i) { return fabs(sp->im[i]) > 1e-9 * spec_scale(sp); }

/* Eigenvalues with positive real part of the kind (1 complex, 0 real), persistent zeros
 * left out; a real part within rounding of zero (1e-10 of the spectrum's size: a
 * conservative system's pairs on the imaginary axis) is not positive. */
static int unstable_count(const spectrum *sp, int z, int complex_kind)
{
    int c = 0;
    double tol = 1e-10 * spec_scale(sp);
    for (int i = 0; i < sp->count; i++)
        if (!is_persistent(sp, i, z) && is_complex(sp, i) == complex_kind && sp->re[i] > tol)
            c++;
    return c;
}

/* The real part of the eigenvalue of the kind nearest the imaginary axis. */
static double critical_re(const spectrum *sp, int z, int complex_kind)
{
    double best = HUGE_VAL, val = NAN;
    for (int i = 0; i < sp->count; i++)
        if (!is_persistent(sp, i, z) && is_complex(sp, i) == complex_kind && fabs(sp->re[i]) < best) {
            best = fabs(sp->re[i]);
            val = sp->re[i];
        }
    return val;
}

static json_t *eigen_list(const spectrum *sp)
{
    json_t *a = json_array();
    for (int i = 0; i < sp->count; i++)
        json_array_append_new(a, json_pack("{s:f, s:f}", "re", sp->re[i], "im", sp->im[i]));
    return a;
}

/* ---- the request ------------------------------------------------------------------- */

/* A name among the coordinates, speeds and parameters, into v; 0 or -1. */
static int lookup(const struct engine_model *m, const char *name, steady_var *v)
{
    int i;
    v->name = name;
    if ((i = model_coord_index(m, name)) >= 0)
        v->kind = VAR_Q;
    else if ((i = model_speed_index(m, name)) >= 0)
        v->kind = VAR_U;
    else if ((i = model_param_index(m, name)) >= 0)
        v->kind = VAR_P;
    v->idx = i;
    return i >= 0 ? 0 : -1;
}

static int get_values(const struct engine_model *m, const json_t *obj, const char *path, int kind,
                      double *out, int required, json_t **problem)
{
    int count = kind == VAR_Q ? m->n : kind == VAR_U ? m->k : m->np;
    if (obj && !json_is_object(obj)) {
        bad(problem, path, "must be an object of numbers");
        return -1;
    }
    for (int i = 0; i < count; i++) {
        const char *name = kind == VAR_Q ? m->coords[i] : kind == VAR_U ? m->speeds[i] : m->params[i];
        const json_t *v = json_object_get(obj, name);
        char where[160];
        snprintf(where, sizeof where, "%s.%s", path, name);
        if (!v) {
            if (required)
                bad(problem, where, "missing");
            continue;
        }
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            bad(problem, where, "must be a finite number");
        else
            out[i] = json_number_value(v);
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        steady_var sv;
        if (lookup(m, key, &sv) < 0 || sv.kind != kind) {
            char where[160];
            snprintf(where, sizeof where, "%s.%.100s", path, key);
            bad(problem, where, "'%.100s' is not a %s of the model", key,
                kind == VAR_Q   ? "coordinate"
                : kind == VAR_U ? "speed"
                                : "parameter");
        }
    }
    return 0;
}

/* The point's JSON: state, parameters (those varied), eigenvalues, residual. */
static json_t *point_json(const steady *s, const spectrum *sp, int with_params)
{
    json_t *o = state_json(s);
    const json_t *sq = json_object_get(s->point, "q");
    if (sq)
        json_object_set(o, "q", (json_t *)sq);
    json_t *unk = json_object();
    for (int i = 0; i < s->nv; i++)
        json_object_set_new(unk, s->var[i].name, json_real(var_get(s, i)));
    json_object_set_new(o, "values", unk);
    if (with_params)
        json_object_set_new(o, "parameters", params_json(s));
    json_object_set_new(o, "eigenvalues", eigen_list(sp));
    json_object_set_new(o, "max_abs_speeds_dot", json_real(max_abs(s->r, s->k)));
    return o;
}

static void steady_free(steady *s)
{
    free(s->q);
    free(s->u);
    free(s->p);
    free(s->var);
    free(s->r);
    free(s->J);
    free(s->A);
    json_decref(s->point);
    json_decref(s->answer);
}

/* Solves the steady motion at vary = v (held) from the current point. */
static int solve_at(steady *s, double v, json_t **problem)
{
    var_set(s, s->nv - 1, v);
    int rc = newton(s, s->nu, NULL, NULL, NULL, problem);
    return rc;
}

/* The steady motion at vary = v between the branch points xa and xb, solved from the
 * guess interpolated between them, and its spectrum into *sp. Returns 0 or -1. */
static int solve_between(steady *s, const double *xa, const double *xb, double v, spectrum *sp)
{
    int nv = s->nv;
    double w = (v - xa[nv - 1]) / (xb[nv - 1] - xa[nv - 1]);
    for (int i = 0; i < nv; i++)
        var_set(s, i, xa[i] + w * (xb[i] - xa[i]));
    json_t *p = NULL;
    int nrc = solve_at(s, v, &p);
    json_decref(p);
    return nrc != 0 || spectrum_now(s, sp, NULL) < 0 ? -1 : 0;
}

/* Bisection between branch points a and b on the number of unstable eigenvalues of the
 * kind, solving the steady motion at each midpoint; 0 with *value, or -1. */
static int bisect_count(steady *s, const double *xa, const double *xb, int z, int complex_kind, double *value)
{
    int nv = s->nv;
    double va = xa[nv - 1], vb = xb[nv - 1];
    spectrum sp;
    int ca = -1;
    for (int it = 0; it < 200; it++) {
        double v = it == 0 ? va : 0.5 * (va + vb);
        if (solve_between(s, xa, xb, v, &sp) != 0)
            return -1;
        int c = unstable_count(&sp, z, complex_kind);
        if (it == 0) {
            ca = c;
            continue;
        }
        if (c == ca)
            va = v;
        else
            vb = v;
        if (fabs(vb - va) <= STEADY_LOCATE_TOL * fmax(1.0, fabs(v))) {
            *value = 0.5 * (va + vb);
            return 0;
        }
    }
    return -1;
}

/* Locates a stability change of the kind between branch points a and b (their
 * variables xa, xb) by the Illinois method on critical_re, solving the steady motion at
 * each trial value. *value receives the crossing. Returns 0, or -1 when it cannot. */
static int locate(steady *s, const double *xa, const double *xb, int z, int complex_kind, double *value,
                  json_t **problem)
{
    int nv = s->nv;
    double va = xa[nv - 1], vb = xb[nv - 1];
    double fa = NAN, fb = NAN;
    spectrum sp;
    double *x = calloc((size_t)nv + 1, sizeof *x);
    if (!x)
        return -1;
    /* f at the two ends */
    for (int end = 0; end < 2; end++) {
        const double *xe = end ? xb : xa;
        for (int i = 0; i < nv; i++)
            var_set(s, i, xe[i]);
        json_t *p = NULL;
        if (newton(s, s->nu, NULL, NULL, NULL, &p) != 0 || spectrum_now(s, &sp, NULL) < 0) {
            json_decref(p);
            free(x);
            return -1;
        }
        (end ? &fb : &fa)[0] = critical_re(&sp, z, complex_kind);
    }
    if (!(fa * fb <= 0)) {
        /* no smooth sign change to follow (a real pair meeting at zero and leaving as an
         * imaginary pair, as a conservative system's do): bisection on the count */
        free(x);
        return bisect_count(s, xa, xb, z, complex_kind, value);
    }
    int side = 0, rc = -1;
    for (int it = 0; it < 200; it++) {
        double v = fa == fb ? 0.5 * (va + vb) : (va * fb - vb * fa) / (fb - fa);
        if (!(v > fmin(va, vb) && v < fmax(va, vb)))
            v = 0.5 * (va + vb);
        double w = (v - va) / (vb - va);
        for (int i = 0; i < nv; i++)
            var_set(s, i, xa[i] + w * (xb[i] - xa[i]));
        json_t *p = NULL;
        int nrc = solve_at(s, v, &p);
        json_decref(p);
        if (nrc != 0 || spectrum_now(s, &sp, NULL) < 0)
            break;
        double f = critical_re(&sp, z, complex_kind);
        if (f == 0.0 || !isfinite(f)) {
            *value = v;
            rc = 0;
            break;
        }
        if ((f < 0) == (fa < 0)) {
            va = v;
            fa = f;
            if (side == -1)
                fb *= 0.5;
            side = -1;
        } else {
            vb = v;
            fb = f;
            if (side == 1)
                fa *= 0.5;
            side = 1;
        }
        if (fabs(vb - va) <= STEADY_LOCATE_TOL * fmax(1.0, fabs(v))) {
            *value = fabs(fa) < fabs(fb) ? va : vb;
            rc = 0;
            break;
        }
    }
    (void)problem;
    free(x);
    return rc;
}

/* Every member of the request is one we know. */
static void steady_check_keys(const json_t *request, json_t **problem)
{
    static const char *const known[] = {"model",      "model_id",     "state", "unknowns",
                                        "parameters", "continuation", NULL};
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)request, key, val)
    {
        int ok = 0;
        for (int i = 0; known[i]; i++)
            ok |= !strcmp(key, known[i]);
        if (!ok)
            bad(problem, key, "unknown member (model, model_id, state, unknowns, parameters, continuation)");
    }
}

/* state (the guess: t, q, speeds) and parameters into s. */
static void steady_read_state(steady *s, const json_t *request, json_t **problem)
{
    const struct engine_model *m = s->m;
    const json_t *st = json_object_get(request, "state");
    if (!json_is_object(st)) {
        bad(problem, "state", "required: {\"t\"?, \"q\", \"speeds\"}, the guess");
    } else {
        const json_t *tv = json_object_get(st, "t");
        if (tv && !json_is_number(tv))
            bad(problem, "state.t", "must be a number");
        s->t = tv ? json_number_value(tv) : 0.0;
        get_values(m, json_object_get(st, "q"), "state.q", VAR_Q, s->q, 1, problem);
        get_values(m, json_object_get(st, "speeds"), "state.speeds", VAR_U, s->u, 1, problem);
    }
    get_values(m, json_object_get(request, "parameters"), "parameters", VAR_P, s->p, 0, problem);
}

/* unknowns (nu of them): coordinates, speeds or parameters, each once, at most k, into
 * s->var. */
static void parse_unknowns(steady *s, const json_t *unk, size_t nu, json_t **problem)
{
    const struct engine_model *m = s->m;
    if (!json_is_array(unk) || nu == 0) {
        bad(problem, "unknowns", "required: a non-empty array of names (coordinates, speeds, parameters)");
        return;
    }
    if ((int)nu > m->k) {
        bad(problem, "unknowns", "%zu unknowns, but the model has %d speed equations: give at most %d", nu,
            m->k, m->k);
        return;
    }
    for (size_t i = 0; s->var && i < nu; i++) {
        const json_t *v = json_array_get(unk, i);
        char where[48];
        snprintf(where, sizeof where, "unknowns[%zu]", i);
        if (!json_is_string(v) || lookup(m, json_string_value(v), &s->var[i]) < 0)
            bad(problem, where, "not a coordinate, speed or parameter of the model");
        for (size_t j = 0; j < i && json_is_string(v); j++)
            if (s->var[j].name && !strcmp(s->var[j].name, json_string_value(v)))
                bad(problem, where, "'%s' is named twice", json_string_value(v));
    }
}

/* continuation: {vary (not an unknown; into s->var[nu]), to, steps}. */
static void parse_continuation(steady *s, const json_t *cont, size_t nu, double *to, long *steps,
                               json_t **problem)
{
    const struct engine_model *m = s->m;
    const json_t *vy = json_object_get(cont, "vary"), *tv = json_object_get(cont, "to"),
                 *sv = json_object_get(cont, "steps");
    if (!json_is_object(cont)) {
        bad(problem, "continuation", "must be {\"vary\", \"to\", \"steps\"}");
        return;
    }
    if (!json_is_string(vy) || !s->var || lookup(m, json_string_value(vy), &s->var[nu]) < 0)
        bad(problem, "continuation.vary", "must name a coordinate, speed or parameter of the model");
    for (size_t j = 0; json_is_string(vy) && s->var && j < nu; j++)
        if (s->var[j].name && !strcmp(s->var[j].name, json_string_value(vy)))
            bad(problem, "continuation.vary", "'%s' is an unknown: vary another quantity",
                json_string_value(vy));
    if (!json_is_number(tv) || !isfinite(json_number_value(tv)))
        bad(problem, "continuation.to", "must be a finite number");
    else
        *to = json_number_value(tv);
    if (!json_is_integer(sv) || json_integer_value(sv) < 1 || json_integer_value(sv) > STEADY_MAX_STEPS)
        bad(problem, "continuation.steps", "must be an integer from 1 to %d", STEADY_MAX_STEPS);
    else
        *steps = (long)json_integer_value(sv);
}

/* The rank of du'/d(unknowns) at the guess: as many unknowns as independent equations.
 * 0, or HAMEL_E_BAD_REQUEST with *problem. */
static int check_rank(steady *s, json_t **problem)
{
    int rank = 0;
    double *Ju = calloc((size_t)(s->k + 1) * (s->nu + 1), sizeof *Ju);
    for (int r = 0; Ju && r < s->k; r++)
        for (int j = 0; j < s->nu; j++)
            Ju[r * s->nu + j] = s->J[r * s->nv + j];
    if (!Ju || lsq(s->k, s->nu, Ju, s->r, NULL, &rank) < 0)
        rank = -1;
    free(Ju);
    if (rank >= s->nu)
        return 0;
    json_t *p =
        hamel_problem_new(HAMEL_E_BAD_REQUEST, "as many unknowns as independent equations are needed");
    char why[320];
    if (rank <= 0)
        snprintf(why, sizeof why,
                 "the speed derivatives do not depend on %s at the guess (a coordinate that does not enter, "
                 "or one fixed by a position-level constraint): choose unknowns they depend on",
                 s->nu == 1 ? "this unknown" : "any of these unknowns");
    else
        snprintf(
            why, sizeof why,
            "the speed derivatives depend independently on only %d of these %d unknowns at the guess "
            "(the rank of du'/d(unknowns)): give %d unknowns, or a guess where they enter (a guess "
            "exactly at a stability change, where an eigenvalue is zero, lowers it too: start beside it)",
            rank, s->nu, rank);
    hamel_problem_add(p, "unknowns", -1, why);
    *problem = p;
    return HAMEL_E_BAD_REQUEST;
}

/* Whether the speed derivatives left at the last point lie outside what the unknowns can
 * change (the least-squares step removes less than half of them: Newton stalled at a
 * least-squares point); then also the names of the states the worst one depends on
 * that are not unknowns, into `names`. */
static int more_equations_than_unknowns(const steady *s, int worst, char *names, size_t size)
{
    double *Ju = calloc((size_t)(s->k + 1) * (s->nu + 1), sizeof *Ju),
           *dx = calloc((size_t)s->nu + 1, sizeof *dx), *b = calloc((size_t)s->k + 1, sizeof *b);
    int stalled = 0;
    if (Ju && dx && b) {
        for (int r = 0; r < s->k; r++) {
            for (int j = 0; j < s->nu; j++)
                Ju[r * s->nu + j] = s->J[r * s->nv + j];
            b[r] = -s->r[r];
        }
        if (lsq(s->k, s->nu, Ju, b, dx, NULL) == 0) {
            double left = 0.0;
            for (int r = 0; r < s->k; r++) {
                double e = s->r[r];
                for (int j = 0; j < s->nu; j++)
                    e += Ju[r * s->nu + j] * dx[j];
                left = fmax(left, fabs(e));
            }
            stalled = left > 0.5 * max_abs(s->r, s->k);
        }
    }
    free(Ju);
    free(dx);
    free(b);
    names[0] = 0;
    int row = stalled ? state_index(s->states, s->m->speeds[worst]) : -1;
    size_t len = 0;
    for (int j = 0; row >= 0 && j < s->N && len + 64 < size; j++) {
        const char *nm = json_string_value(json_array_get(s->states, (size_t)j));
        int known = 0;
        for (int i = 0; i < s->nu && nm; i++)
            known |= !strcmp(s->var[i].name, nm);
        if (nm && !known && s->A[row * s->N + j] != 0.0 && strlen(nm) < 40)
            len += (size_t)snprintf(names + len, size - len, "%s%s", len ? ", " : "", nm);
    }
    return stalled;
}

/* Newton's method found no steady motion: the problem names the worst speed derivative;
 * when that is left because there are more independent equations than unknowns (Newton
 * stalled at a least-squares point), a 422 invalid-request saying how many to give. */
static int newton_failed(const steady *s, json_t **problem)
{
    int worst = 0;
    for (int r = 1; r < s->k; r++)
        if (fabs(s->r[r]) > fabs(s->r[worst]))
            worst = r;
    char names[256], why[600];
    if (more_equations_than_unknowns(s, worst, names, sizeof names)) {
        json_t *p =
            hamel_problem_new(HAMEL_E_BAD_REQUEST, "as many unknowns as independent equations are needed");
        snprintf(
            why, sizeof why,
            "the speed derivatives are more independent equations than these %d unknowns can solve: at "
            "their least-squares point %s' = %.6g is left, and the unknowns cannot change it there; give "
            "%d unknowns or more (one that %s' depends on%s%s)",
            s->nu, s->m->speeds[worst], s->r[worst], s->nu + 1, s->m->speeds[worst], names[0] ? ": " : "",
            names);
        hamel_problem_add(p, "unknowns", -1, why);
        *problem = p;
        return HAMEL_E_BAD_REQUEST;
    }
    json_t *p = hamel_problem_new(HAMEL_E_NUMERIC, "no steady motion found from the guess");
    snprintf(why, sizeof why,
             "Newton's method did not make every speed derivative zero in %d iterations (%s' = %.6g): the "
             "unknowns may not be able to (more independent equations than unknowns), or the guess is too "
             "far",
             STEADY_MAX_NEWTON, s->m->speeds[worst], s->r[worst]);
    hamel_problem_add(p, "unknowns", -1, why);
    *problem = p;
    return HAMEL_E_NUMERIC;
}

/* The states left out of the eigenvalues (their columns of A vanish, repeatedly): by
 * name for the answer. */
static json_t *excluded_states(const steady *s)
{
    json_t *excluded = json_array();
    int N = s->N;
    double scale = 0.0;
    for (int i = 0; i < N * N; i++)
        scale = fmax(scale, fabs(s->A[i]));
    char *gone = calloc((size_t)N + 1, 1);
    for (int again = 1; gone && again;) {
        again = 0;
        for (int j = 0; j < N; j++) {
            int zero = !gone[j];
            for (int i = 0; i < N && zero; i++)
                zero = gone[i] || fabs(s->A[i * N + j]) <= 1e-14 * scale;
            if (zero) {
                gone[j] = 1;
                again = 1;
            }
        }
    }
    for (int j = 0; gone && j < N; j++)
        if (gone[j])
            json_array_append_new(excluded, json_incref(json_array_get(s->states, (size_t)j)));
    free(gone);
    return excluded;
}

/* No eigenvalue of sp with a positive real part (beyond rounding). */
static int spectrum_stable(const spectrum *sp)
{
    int unstable = 0;
    double tol0 = 1e-10 * spec_scale(sp);
    for (int i = 0; i < sp->count; i++)
        unstable += sp->re[i] > tol0;
    return unstable == 0;
}

/* The smallest share of a step's arclength counted as vary's when the step is capped
 * (branch_step): near a fold, where vary stands still, a step is at most 1000 times
 * |to - from| / steps long. */
#define STEADY_MIN_VARY_SHARE 1e-3

/* A branch followed by pseudo-arclength continuation in the last variable. */
struct branch {
    int nv;
    double from, to, dir, ds;
    double jscale; /* the largest singular value of the Jacobian met so far */
    long steps, max_points, np;
    double *x, *xp, *tan, *tprev; /* [nv]: the point, the predictor, the tangent and the last one */
    double *xs;                   /* [max_points * nv] the points */
    spectrum *specs;              /* [max_points] their spectra */
    unsigned char *branch_point;  /* [max_points] the point is a branch point (its count is not read) */
    json_t *points;
};

/* The corrector from B->x along B->tan: steps of B->ds, halved on failure (at most 30
 * tries); past `to`, the last point at `to` exactly (*done). Returns 0 with *accepted, or
 * an error code with *problem. */
static int branch_correct(steady *s, struct branch *B, int *accepted, int *done, json_t **problem)
{
    int nv = B->nv;
    *accepted = 0;
    for (int tries = 0; !*accepted && tries < 30; tries++) {
        for (int i = 0; i < nv; i++)
            B->xp[i] = B->x[i] + B->ds * B->tan[i];
        /* past the end, or within rounding of it (not a second point a few ulps short of
         * `to`): the last point at `to` exactly */
        if ((B->xp[nv - 1] - B->to) * B->dir >= -1e-9 * fabs(B->to - B->from)) {
            double w = (B->to - B->x[nv - 1]) / (B->xp[nv - 1] - B->x[nv - 1]);
            for (int i = 0; i < nv; i++)
                var_set(s, i, B->x[i] + w * (B->xp[i] - B->x[i]));
            json_t *p = NULL;
            int nrc = solve_at(s, B->to, &p);
            if (nrc == 0) {
                json_decref(p);
                *accepted = *done = 1;
                break;
            }
            if (nrc != 1) {
                *problem = p;
                return nrc;
            }
            json_decref(p);
            B->ds *= 0.5;
            continue;
        }
        for (int i = 0; i < nv; i++)
            var_set(s, i, B->xp[i]);
        json_t *p = NULL;
        int nrc = newton(s, nv, B->tan, B->xp, NULL, &p);
        if (nrc == 0) {
            json_decref(p);
            *accepted = 1;
        } else if (nrc != 1) {
            *problem = p;
            return nrc;
        } else {
            json_decref(p);
            B->ds *= 0.5;
        }
    }
    return 0;
}

/* One step along the branch: the tangent at x (null vector of dF/dx, oriented as the
 * step before), the corrector, the new point recorded with its spectrum. Returns 0 or an
 * error code with *problem. */
static int branch_step(steady *s, struct branch *B, int *done, json_t **problem)
{
    int nv = B->nv;
    double big, next;
    if (null_vector(s->k, nv, s->J, B->tan, &big, &next) < 0) {
        *problem = hamel_problem_new(HAMEL_E_NUMERIC, "the branch's tangent could not be computed");
        return HAMEL_E_NUMERIC;
    }
    /* at a branch point (another branch crosses: the null space has two directions and
     * the one the SVD gives is any of them) the branch goes straight on; the scale is the
     * largest singular value met on the branch (the Jacobian may vanish there) */
    B->jscale = fmax(B->jscale, big);
    if (next <= STEADY_BRANCH_POINT_GAP * B->jscale) {
        memcpy(B->tan, B->tprev, (size_t)nv * sizeof *B->tan);
        B->branch_point[B->np - 1] = 1;
    }
    double dot = 0.0;
    for (int i = 0; i < nv; i++)
        dot += B->tan[i] * B->tprev[i];
    if (dot < 0)
        for (int i = 0; i < nv; i++)
            B->tan[i] = -B->tan[i];
    int accepted;
    int rc = branch_correct(s, B, &accepted, done, problem);
    if (rc)
        return rc;
    if (!accepted) {
        *problem = hamel_problem_new(HAMEL_E_NUMERIC, "the branch could not be followed further");
        char why[200];
        snprintf(why, sizeof why,
                 "the corrector failed at %s = %.10g even with small steps (a fold or an end)",
                 s->var[nv - 1].name, B->x[nv - 1]);
        hamel_problem_add(*problem, "continuation", -1, why);
        return HAMEL_E_NUMERIC;
    }
    memcpy(B->tprev, B->tan, (size_t)nv * sizeof *B->tan);
    for (int i = 0; i < nv; i++)
        B->x[i] = var_get(s, i);
    memcpy(B->xs + (size_t)B->np * nv, B->x, (size_t)nv * sizeof *B->x);
    spectrum_now(s, &B->specs[B->np], NULL);
    json_array_append_new(B->points, point_json(s, &B->specs[B->np], 0));
    B->np++;
    /* A step moves vary by at most |to - from| / steps. ds is arclength in every
     * variable: where the unknowns change much faster than vary (a steep branch), vary's
     * share of it is |tan_vary|, so the cap is that over |tan_vary| (at most 1000 times
     * it, near a fold where vary stands still). */
    B->ds = fmin(B->ds * 1.5, fabs(B->to - B->from) / (double)B->steps /
                                  fmax(fabs(B->tan[nv - 1]), STEADY_MIN_VARY_SHARE));
    return 0;
}

/* The branch's persistent zeros: the number of eigenvalues near zero that most of its
 * points have (the fewer on a tie). Not the fewest at any point: at a point exactly at a
 * stability change the crossing pair meets a persistent zero in a triple zero, which
 * the eigenvalue solver splits into three of about 1e-7, so that point has none near
 * zero, and every persistent zero elsewhere would count as a crossing eigenvalue. */
static int persistent_zeros(const struct branch *B)
{
    int *count = calloc((size_t)B->np + 1, sizeof *count);
    int best = 0, best_n = 0, max_c = 0;
    for (long i = 0; i < B->np; i++) {
        double tol0 = 1e-8 * spec_scale(&B->specs[i]);
        int c = 0;
        for (int j = 0; j < B->specs[i].count; j++)
            c += hypot(B->specs[i].re[j], B->specs[i].im[j]) <= tol0;
        if (count)
            count[i] = c;
        best = i == 0 || c < best ? c : best; /* the fewest, if counting fails */
        max_c = c > max_c ? c : max_c;
    }
    for (int c = 0; count && c <= max_c; c++) {
        int n = 0;
        for (long i = 0; i < B->np; i++)
            n += count[i] == c;
        if (n > best_n) {
            best_n = n;
            best = c;
        }
    }
    free(count);
    return best;
}

/* The counts of growing modes (complex kind in *c, real in *r) at vary = v between the
 * branch points xa and xb: the steady motion solved there from the interpolated guess,
 * its variables into x[nv]. Returns 0 or -1. */
static int counts_at(steady *s, const double *xa, const double *xb, double v, int z, double *x, int *c,
                     int *r)
{
    int nv = s->nv;
    spectrum sp;
    if (solve_between(s, xa, xb, v, &sp) != 0)
        return -1;
    for (int i = 0; i < nv; i++)
        x[i] = var_get(s, i);
    *c = unstable_count(&sp, z, 1);
    *r = unstable_count(&sp, z, 0);
    return 0;
}

/* The stability changes between the branch points xa and xb (growing modes: ac complex
 * and ar real at xa, bc and br at xb), in order along the branch, into changes. Where the
 * count of one kind changes, that change is located. Where both change there may be two
 * changes between the points (the bicycle's weave and capsize within one step) or none
 * (two real growing modes that meet and leave as a complex pair, or the reverse): the
 * interval is halved until each part shows one kind changing, at most
 * STEADY_SPLIT_DEPTH times; what is still mixed then counts by its total, as one change
 * or none. */
static void changes_between(steady *s, const double *xa, const double *xb, int ac, int ar, int bc, int br,
                            int z, int depth, json_t *changes)
{
    int nv = s->nv;
    if (ac == bc && ar == br)
        return;
    if (ac != bc && ar != br && depth < STEADY_SPLIT_DEPTH) {
        double *x = malloc((size_t)nv * sizeof *x);
        int mc, mr;
        if (x && counts_at(s, xa, xb, 0.5 * (xa[nv - 1] + xb[nv - 1]), z, x, &mc, &mr) == 0) {
            changes_between(s, xa, x, ac, ar, mc, mr, z, depth + 1, changes);
            changes_between(s, x, xb, mc, mr, bc, br, z, depth + 1, changes);
            free(x);
            return;
        }
        free(x);
    }
    int da = ac + ar, db = bc + br, kind;
    if (ac != bc && ar != br) {
        if (da == db)
            return;
        kind = (bc - ac) * (db - da) > 0 ? 1 : 0;
    } else {
        kind = ac != bc;
        da = kind ? ac : ar;
        db = kind ? bc : br;
    }
    double value = NAN;
    json_t *p = NULL;
    if (locate(s, xa, xb, z, kind, &value, &p) == 0)
        json_array_append_new(changes,
                              json_pack("{s:f, s:s, s:s}", "value", value, "kind", kind ? "complex" : "real",
                                        "direction", db > da ? "loses stability" : "gains stability"));
    json_decref(p);
}

/* Each point's stability (z persistent zeros left out), and the changes of the number of
 * growing modes between points, located, into changes. */
static void branch_stability(steady *s, const struct branch *B, int z, json_t *changes)
{
    int nv = B->nv;
    for (long i = 0; i < B->np; i++)
        json_object_set_new(
            json_array_get(B->points, (size_t)i), "stable",
            json_boolean(unstable_count(&B->specs[i], z, 0) + unstable_count(&B->specs[i], z, 1) == 0));
    /* between consecutive points, a branch point passed over (another branch's zero
     * eigenvalue makes its count noise) */
    for (long i = 0; i + 1 < B->np; i++) {
        if (B->branch_point[i] && i > 0)
            continue;
        long j = i + 1;
        while (j + 1 < B->np && B->branch_point[j])
            j++;
        changes_between(s, B->xs + (size_t)i * nv, B->xs + (size_t)j * nv, unstable_count(&B->specs[i], z, 1),
                        unstable_count(&B->specs[i], z, 0), unstable_count(&B->specs[j], z, 1),
                        unstable_count(&B->specs[j], z, 0), z, 0, changes);
    }
}

/* A branch that did not reach `to` within its points: when it turned back (the point
 * furthest towards `to` is not the last, a fold in vary), more steps do not help, and
 * the problem says where it turned (numerical-failure); else limit-exceeded. */
static int branch_unfinished(const steady *s, const struct branch *B, json_t **problem)
{
    int nv = B->nv;
    long far = 0;
    for (long i = 1; i < B->np; i++)
        if ((B->xs[(size_t)i * nv + nv - 1] - B->xs[(size_t)far * nv + nv - 1]) * B->dir > 0)
            far = i;
    if (far == B->np - 1 || B->np < 2) {
        *problem = hamel_problem_new(HAMEL_E_LIMIT, "the branch did not reach `to` within the steps allowed");
        hamel_problem_add(*problem, "continuation.steps", -1, "more steps, or a nearer `to`");
        return HAMEL_E_LIMIT;
    }
    const double *x = B->xs + (size_t)far * nv;
    char at[600];
    int len = 0;
    for (int i = 0; i < nv - 1 && len < (int)sizeof at - 80; i++)
        len +=
            snprintf(at + len, sizeof at - (size_t)len, "%s%s = %.10g", i ? ", " : "", s->var[i].name, x[i]);
    char detail[900];
    snprintf(detail, sizeof detail,
             "the branch turns back at a fold near %s = %.10g (%s) and did not come back to %s = %.10g: "
             "no steady motion of this branch reaches it",
             s->var[nv - 1].name, x[nv - 1], at, s->var[nv - 1].name, B->to);
    *problem = hamel_problem_new(HAMEL_E_NUMERIC, detail);
    char why[200];
    snprintf(why, sizeof why, "the branch turns back at %s = %.10g (a fold): give a `to` before it",
             s->var[nv - 1].name, x[nv - 1]);
    hamel_problem_add(*problem, "continuation.to", -1, why);
    return HAMEL_E_NUMERIC;
}

/* The continuation from the steady point found (spectrum sp) to `to` in `steps` steps:
 * points, stability_changes, vary and persistent_zero_eigenvalues into out. Returns 0 or
 * an error code with *problem. */
static int steady_continue(steady *s, const spectrum *sp, double to, long steps, json_t *out,
                           json_t **problem)
{
    struct branch B = {0};
    int nv = s->nv;
    B.nv = nv;
    B.to = to;
    B.steps = steps;
    B.from = var_get(s, nv - 1);
    B.dir = to > B.from ? 1.0 : -1.0;
    B.ds = fabs(to - B.from) / (double)steps;
    B.max_points = 4 * steps + 20;
    B.x = calloc((size_t)nv, sizeof *B.x), B.xp = calloc((size_t)nv, sizeof *B.xp);
    B.tan = calloc((size_t)nv, sizeof *B.tan), B.tprev = calloc((size_t)nv, sizeof *B.tprev);
    B.xs = calloc((size_t)(B.max_points + 2) * nv, sizeof *B.xs);
    B.specs = calloc((size_t)B.max_points + 2, sizeof *B.specs);
    B.branch_point = calloc((size_t)B.max_points + 2, 1);
    B.points = json_array();
    int rc = B.x && B.xp && B.tan && B.tprev && B.xs && B.specs && B.branch_point ? 0 : HAMEL_E_INTERNAL;
    if (rc)
        *problem = hamel_problem_new(rc, "out of memory");
    for (int i = 0; !rc && i < nv; i++) {
        B.x[i] = var_get(s, i);
        B.tprev[i] = i == nv - 1 ? B.dir : 0.0;
    }
    if (!rc) {
        memcpy(B.xs, B.x, (size_t)nv * sizeof *B.x);
        B.specs[0] = *sp;
        json_array_append_new(B.points, point_json(s, sp, 0));
        B.np = 1;
    }
    int done = 0;
    while (!rc && !done && B.np < B.max_points)
        rc = branch_step(s, &B, &done, problem);
    if (!rc && !done)
        rc = branch_unfinished(s, &B, problem);
    json_t *changes = json_array();
    if (!rc) {
        int z = persistent_zeros(&B);
        branch_stability(s, &B, z, changes);
        json_object_set_new(out, "points", B.points);
        B.points = NULL;
        json_object_set_new(out, "stability_changes", changes);
        changes = NULL;
        json_object_set_new(out, "vary", json_string(s->var[nv - 1].name));
        json_object_set_new(out, "persistent_zero_eigenvalues", json_integer(z));
    }
    json_decref(B.points);
    json_decref(changes);
    free(B.x);
    free(B.xp);
    free(B.tan);
    free(B.tprev);
    free(B.xs);
    free(B.specs);
    free(B.branch_point);
    return rc;
}

int engine_steady(const engine_model *m, const json_t *request, const engine_limits *limits,
                  engine_control *ctl, json_t **result, json_t **problem)
{
    *result = NULL;
    *problem = NULL;
    if (!limits)
        limits = &engine_default_limits;
    steady s;
    memset(&s, 0, sizeof s);
    s.m = m;
    s.lim = limits;
    s.ctl = ctl;
    s.k = m->k;
    budget_init(&s.bud,
                ENGINE_STEADY_BUDGET_FACTOR *
                    (limits->max_compile_seconds > 0 ? limits->max_compile_seconds : 2.0),
                0, NULL);
    s.q = calloc((size_t)m->n + 1, sizeof *s.q);
    s.u = calloc((size_t)m->k + 1, sizeof *s.u);
    s.p = calloc((size_t)m->np + 1, sizeof *s.p);
    if (!s.q || !s.u || !s.p) {
        steady_free(&s);
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
        return HAMEL_E_INTERNAL;
    }
    if (m->np)
        memcpy(s.p, m->param_values, (size_t)m->np * sizeof *s.p);
    if (!json_is_object(request)) {
        bad(problem, "", "the request must be a JSON object");
        steady_free(&s);
        return HAMEL_E_BAD_REQUEST;
    }
    steady_check_keys(request, problem);
    steady_read_state(&s, request, problem);
    const json_t *unk = json_object_get(request, "unknowns");
    const json_t *cont = json_object_get(request, "continuation");
    size_t nu = json_array_size(unk);
    s.var = calloc(nu + 2, sizeof *s.var);
    parse_unknowns(&s, unk, nu, problem);
    s.nu = (int)nu;
    s.nv = s.nu;
    double to = 0.0;
    long steps = 0;
    if (cont) {
        parse_continuation(&s, cont, nu, &to, &steps, problem);
        s.nv = s.nu + 1;
    }
    s.r = calloc((size_t)m->k + 1, sizeof *s.r);
    s.J = calloc((size_t)(m->k + 1) * (s.nv + 1), sizeof *s.J);
    if (*problem || !s.var || !s.r || !s.J) {
        int code = *problem ? HAMEL_E_BAD_REQUEST : HAMEL_E_INTERNAL;
        if (!*problem)
            *problem = hamel_problem_new(code, "out of memory");
        steady_free(&s);
        return code;
    }
    if (cont && json_object_get(cont, "vary") && fabs(to - var_get(&s, s.nv - 1)) == 0.0) {
        bad(problem, "continuation.to", "equals the state's value of %s: nothing to follow",
            s.var[s.nu].name);
        steady_free(&s);
        return HAMEL_E_BAD_REQUEST;
    }

    /* the rank of du'/d(unknowns) at the guess, then Newton's method from it */
    int rc = evaluate(&s, problem);
    if (!rc)
        rc = check_rank(&s, problem);
    int iters = 0;
    if (!rc)
        rc = newton(&s, s.nu, NULL, NULL, &iters, problem);
    if (rc == 1)
        rc = newton_failed(&s, problem);
    if (rc) {
        steady_free(&s);
        return rc;
    }
    spectrum sp;
    int removed = 0;
    spectrum_now(&s, &sp, &removed);
    json_t *out = json_pack("{s:s, s:i, s:o}", "model_id", m->id, "iterations", iters, "steady",
                            point_json(&s, &sp, 1));
    json_object_set_new(out, "excluded_states", excluded_states(&s));
    json_object_set_new(json_object_get(out, "steady"), "stable", json_boolean(spectrum_stable(&sp)));
    if (cont)
        rc = steady_continue(&s, &sp, to, steps, out, problem);
    steady_free(&s);
    if (rc) {
        json_decref(out);
        return rc;
    }
    *result = out;
    return 0;
}
