/* compile.c — the compilation of a model as a table of named stages.
 *
 * engine_model_compile_ctl (engine.h) runs the rows of `stages` in order, one call
 * each, as libuv's uv_run reads as its phases: it sets the budget's stage before a
 * row, gives an optional row its soft share of the budget, checks the budget after
 * each row and turns a stop into a 422 compile-limit (or a cancellation) naming the
 * stage that stopped. The model's own steps (parsing, constraints, Psi, dynamics, ...)
 * are in mech/model.c (model_build.h); the reduction, the Boltzmann–Hamel structure,
 * the holonomy analysis and the code tiers are called from here, so that model.c
 * runs no pipeline: compile -> {reduce, nonlin, hamel, holonomy, equations, native} ->
 * model.
 */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_errno.h>

#include "budget.h"

_Static_assert(BUDGET_WALL_FACTOR == ENGINE_COMPILE_WALL_FACTOR, "one wall-clock backstop (engine_types.h)");
#include "equations.h"
#include "hamel.h"
#include "linalg.h"
#include "holonomy.h"
#include "model.h"
#include "model_build.h"
#include "native.h"
#include "nonlin.h"
#include "reduce.h"

#define COMPILE_HOLONOMY_SECONDS 0.04 /* the Lie brackets past this: "complete": false */
#define COMPILE_REDUCE_SHARE 0.25     /* of max_compile_seconds the symbolic reduction may use */

/* What the stages after the model's own steps share: the reduction's result. */
struct compile_run {
    struct model_build b;
    reduce_result red;
    int have_red;   /* red holds a result to free */
    int rejected;   /* the reduced equations disagreed with the numeric path */
    int numeric_ok; /* states where that numeric path could be evaluated; -1: not tried */
};

/* ---- the stages that are not the model's own steps ---- */

static int stage_hamel(struct compile_run *r)
{
    budget_stage(r->b.bud, "Hamel coefficients",
                 r->b.m->default_speeds ? "model.constraints" : "model.speeds");
    if (hamel_structure(r->b.m) < 0 || holonomy_flags(r->b.m) < 0)
        return MB_OOM;
    return MB_OK;
}

/* A kinetic energy that gives a speed no inertia: M* singular at every test
 * configuration (with the model's parameters) is refused as Psi singular is, naming
 * model.kinetic_energy; a run whose parameters make it singular still says so at its
 * initial state (hamel_explain). Linear constraints only (the nonlinear ones solve q'
 * by Newton's method from a guess, and a test point may have no root). Free when the
 * reduction's check (hamel_fast_agrees) evaluated the numeric right-hand side. */
#define COMPILE_MASS_POINTS 3

/* With a nonlinear constraint the linear ones' independence (model.c) does not cover
 * all: two constraints may say the same (x'^2 + y'^2 - 1 and 2*x'^2 + 2*y'^2 - 2), or a
 * gradient vanish along a linear one ((x' - y')^3 beside x' - y'). Then the multipliers
 * are not determined and every run failed with "the right-hand side could not be
 * evaluated". Dependent: the gradients df/dq', each scaled to unit length, are
 * dependent (or one is zero) at every test configuration. */
static int nonlinear_dependent(const struct engine_model *m)
{
    int n = m->n, nc = m->nc, dependent = 0, independent = 0;
    if (nc < 1 || !m->tape_mult)
        return 0;
    double *in = calloc(m->n_in + 1, sizeof *in), *work = calloc(m->work_len + 1, sizeof *work);
    double *jf = calloc((size_t)nc * (n + 1) + 1, sizeof *jf), *a = calloc((size_t)nc * nc + 1, sizeof *a);
    int *piv = calloc(nc + 1, sizeof *piv);
    for (int k = 0; k < COMPILE_MASS_POINTS && in && work && jf && a && piv; k++) {
        model_test_point(m, k, in);
        tape_run(m->tape_mult, in, work, jf);
        int zero = 0, finite = 1;
        for (int j = 0; j < nc; j++) {
            /* scaled by the largest |entry| before the squares: a gradient of 1e200 or
             * 1e-200 (a constraint written times a factor) neither overflows to "proves
             * nothing" nor underflows to "zero" */
            double mx = 0.0, norm = 0.0;
            for (int i = 0; i < n; i++)
                mx = fmax(mx, fabs(jf[j * n + i]));
            for (int i = 0; i < n && mx > 0.0 && isfinite(mx); i++)
                jf[j * n + i] /= mx;
            for (int i = 0; i < n; i++)
                norm += jf[j * n + i] * jf[j * n + i];
            finite = finite && isfinite(norm);
            zero = zero || !(norm > 0.0);
            for (int i = 0; i < n && norm > 0.0; i++)
                jf[j * n + i] /= sqrt(norm);
        }
        if (!finite)
            continue; /* proves nothing */
        if (zero) {
            dependent++;
            continue;
        }
        for (int x = 0; x < nc; x++)
            for (int y = 0; y < nc; y++) {
                double v = 0.0;
                for (int i = 0; i < n; i++)
                    v += jf[x * n + i] * jf[y * n + i];
                a[x * nc + y] = v;
            }
        if (linalg_lu(nc, a, piv) < 0)
            dependent++;
        else
            independent++;
    }
    free(in), free(work), free(jf), free(a), free(piv);
    return dependent > 0 && !independent;
}

static int stage_mass(struct compile_run *r)
{
    struct engine_model *m = r->b.m;
    int nonlinear = 0;
    for (int j = 0; j < m->nc; j++)
        nonlinear += !m->cons[j].linear;
    if (nonlinear && nonlinear_dependent(m)) {
        hamel_problem_add(
            r->b.prob, "model.constraints", -1,
            "the constraints are dependent: their velocity gradients df/dq' are dependent at every test "
            "configuration (two constraints say the same, or a gradient vanishes where the "
            "constraint holds, as for (x' - y')^3): the constraint forces are not determined");
        return MB_FAIL;
    }
    if (m->k == 0 || m->nl_reduced || r->numeric_ok > 0 || nonlinear)
        return MB_OK; /* the reduction's check evaluated the right-hand side already */
    hamel_ws *w = hamel_ws_new(m, m->param_values);
    double *in = calloc(m->n_in + 1, sizeof *in);
    if (!w || !in) {
        hamel_ws_free(w);
        free(in);
        return MB_OOM;
    }
    hamel_ws_set_numeric(w, 1); /* as hamel_fast_agrees's numeric path */
    int regular = 0, singular = 0;
    char why[320] = "", first[320] = "";
    double *y = malloc(((size_t)m->n + m->k) * 2 * sizeof *y);
    if (!y) {
        hamel_ws_free(w);
        free(in);
        return MB_OOM;
    }
    /* the right-hand side as a run evaluates it (sparse where it can be): one point
     * where it succeeds settles it; the reason is asked only where it fails */
    for (int k = 0; k < COMPILE_MASS_POINTS && !regular; k++) {
        model_test_point(m, k, in);
        double t = in[model_input_t(m)];
        memcpy(y, in + model_input_q(m), (size_t)m->n * sizeof *y);
        memcpy(y + m->n, in + model_input_qd(m), (size_t)m->k * sizeof *y);
        if (hamel_rhs(t, y, y + m->n + m->k, w) == GSL_SUCCESS)
            regular++;
        else if (hamel_explain(w, t, y, y + m->n, why, sizeof why) == 2 && singular++ == 0)
            memcpy(first, why, sizeof first);
    }
    free(y);
    hamel_ws_free(w);
    free(in);
    if (regular || !singular)
        return MB_OK;
    char reason[512];
    snprintf(reason, sizeof reason,
             "the equations of motion cannot be solved for the speeds' rates: %s at every test "
             "configuration (a mass or an inertia missing from T, or zero through the parameters)",
             first);
    hamel_problem_add(r->b.prob, "model.kinetic_energy", -1, reason);
    return MB_FAIL;
}

/* Where tape_fast's compiled entry reads each input (tape.h yin): t, q_i = y[i] and
 * u_r = y[n + r]; the parameters (and anything else) from in[]. Without it (no memory)
 * the first tier copies the state into in[] as the interpreter does. */
static void fast_state_inputs(const struct engine_model *m, tape *t)
{
    t->yin = malloc((t->n_inputs + 1) * sizeof *t->yin);
    if (!t->yin)
        return;
    for (int a = 0; a < t->n_inputs; a++)
        t->yin[a] = TAPE_YIN_IN;
    if (model_input_t(m) < t->n_inputs)
        t->yin[model_input_t(m)] = TAPE_YIN_T;
    for (int i = 0; i < m->n && model_input_q(m) + i < t->n_inputs; i++)
        t->yin[model_input_q(m) + i] = i;
    for (int r = 0; r < m->k; r++)
        if (m->u_slot[r] < t->n_inputs)
            t->yin[m->u_slot[r]] = m->n + r;
}

/* The fast path: the symbolically reduced equations as one tape. */
static int build_fast(struct engine_model *m, const reduce_result *red)
{
    int n = m->n, k = m->k;
    const char *off = getenv("HAMEL_NO_REDUCTION"); /* for measurements: numeric Phi always */
    if (!red->have_phi || !red->exact || (off && *off && strcmp(off, "0") != 0))
        return 0;
    /* The speeds must be the only velocity symbols left after the substitution. */
    int ns = expr_sym_count(m->ctx);
    unsigned char *allowed = calloc(ns + 1, 1);
    expr **roots = calloc((size_t)n + k * (k + 1) / 2 + k, sizeof *roots);
    m->u_slot = calloc(k + 1, sizeof *m->u_slot);
    if (!allowed || !roots || !m->u_slot) {
        free(allowed);
        free(roots);
        return -1;
    }
    for (int r = 0; r < k; r++) {
        allowed[m->sym_u[r]] = 1;
        const expr_symbol *sym = expr_sym_get(m->ctx, m->sym_u[r]);
        m->u_slot[r] = model_input_qd(m) + sym->index;
    }
    int idx = 0;
    for (int i = 0; i < n; i++)
        roots[idx++] = red->kin[i];
    for (int r = 0; r < k; r++)
        for (int s = r; s < k; s++)
            roots[idx++] = red->mass[r * k + s];
    for (int r = 0; r < k; r++)
        roots[idx++] = red->forcing[r];
    int clean = 1;
    for (int i = 0; i < idx && clean; i++)
        for (int s = 0; s < ns && clean; s++) {
            const expr_symbol *sym = expr_sym_get(m->ctx, s);
            if ((sym->cls == SYM_VELOCITY || sym->cls == SYM_SPEED) && !allowed[s] &&
                expr_depends(roots[i], s))
                clean = 0;
        }
    m->fast_mass_const = 1;
    for (int i = n; i < n + k * (k + 1) / 2; i++)
        for (int s = 0; s < ns; s++)
            if (expr_sym_get(m->ctx, s)->cls != SYM_PARAM && expr_depends(roots[i], s))
                m->fast_mass_const = 0;
    if (clean)
        expr_factor_sums(m->ctx, roots, idx); /* fewer multiplications in the tapes */
    if (clean && m->fast_mass_const) {
        /* M* depends on the parameters only: its own tape, run once per workspace
         * (hamel.c inverts it then), and the fast tape gives q' and F alone. */
        int nm = k * (k + 1) / 2;
        m->tape_mass = model_build_tape(m, roots + n, nm);
        memmove(roots + n, roots + n + nm, k * sizeof *roots);
        idx = n + k;
        if (!m->tape_mass)
            clean = 0;
    }
    if (clean)
        m->tape_fast = model_build_tape(m, roots, idx);
    if (m->tape_fast) /* the first tier's right-hand side reads t, q and u from the state */
        fast_state_inputs(m, m->tape_fast);
    free(allowed);
    free(roots);
    return 0;
}

/* The symbolic reduction is optional (the numeric path needs none of it): it runs on
 * a soft share of what is left of the budget, and past it the model is compiled
 * without it (reduce_late). */
static int stage_reduce(struct compile_run *r)
{
    int rc = reduce_derive(r->b.m, r->b.lim->max_nodes / 4, &r->red);
    r->have_red = 1;
    return rc < 0 ? MB_OOM : MB_OK;
}

static void reduce_late(struct compile_run *r)
{
    reduce_result_free(&r->red); /* past its share: the numeric path */
    memset(&r->red, 0, sizeof r->red);
    snprintf(r->red.why, sizeof r->red.why,
             "the symbolic reduction takes longer than its share of max_compile_seconds");
}

/* The reduced equations: the nonlinear form's, the fast tape, and the check that they
 * agree with the numeric path (a disagreement is a bug of ours or cancellation:
 * the model is then integrated without them). */
static int stage_equations(struct compile_run *r)
{
    struct engine_model *m = r->b.m;
    if (nonlin_derive(m, &r->red) < 0 || build_fast(m, &r->red) < 0)
        return budget_check(r->b.bud) ? MB_OVER : MB_OOM;
    if (!m->nl_reduced && r->red.have_phi)
        equations_accel_symbols(m); /* the equations themselves are printed on request */
    if (budget_check(r->b.bud))
        return MB_OVER;
    r->numeric_ok = -1;
    if (m->tape_fast && !m->nl_reduced)
        r->rejected = !hamel_fast_agrees(m, &r->numeric_ok);
    if (r->rejected) {
        tape_free(m->tape_fast);
        m->tape_fast = NULL;
        m->fast_mass_const = 0;
        json_object_set_new(m->summary, "reduction_rejected",
                            json_string("the symbolically reduced equations disagreed with the "
                                        "numeric path at a test state"));
        /* nor are they shown: the equations document says why instead */
        reduce_result none;
        memset(&none, 0, sizeof none);
        snprintf(none.why, sizeof none.why,
                 "the symbolically reduced equations disagreed with the numeric path at a test "
                 "state; the model is integrated on the numeric path");
        if (!m->nl_reduced && equations_defer(m, &none) < 0)
            return MB_OOM;
    }
    return MB_OK;
}

/* The holonomy analysis (Lie brackets) is optional too: past its share of the budget
 * it is reported as not done rather than failing the model (holonomy_late). */
static int stage_holonomy(struct compile_run *r)
{
    json_object_set_new(r->b.m->summary, "holonomy", holonomy_analyse(r->b.m, &r->red));
    return MB_OK;
}

static void holonomy_late(struct compile_run *r)
{
    json_object_set_new(
        r->b.m->summary, "holonomy",
        json_pack("{s:b, s:s}", "complete", 0, "reason",
                  "the holonomy analysis takes longer than its 40 ms share of the compilation"));
}

/* What the model keeps of the reduction: the watch's cheap determinant, the
 * kinematics and Phi for the classical forms, and the deferred equations document. */
static int stage_keep_reduction(struct compile_run *r)
{
    struct engine_model *m = r->b.m;
    reduce_result *red = &r->red;
    if (m->nlin != m->nc)
        json_object_set_new(m->summary, "nonlinear_form",
                            json_string(m->nl_reduced ? "reduced" : "multipliers"));
    m->psi_det_const = red->have_phi && red->pivots_expr == 0 && m->nlin == m->nc;
    if (red->have_phi && red->pivots_expr == 1 && red->pivot_expr && m->nlin == m->nc)
        m->tape_det = model_build_tape(m, &red->pivot_expr, 1); /* the watch's cheap test */
    if (red->have_phi && red->exact && !r->rejected) {          /* kept for the classical forms (forms.h) */
        m->red_kin = red->kin;
        red->kin = NULL;
        if (m->nlin == m->nc) {
            m->red_phi = red->phi;
            red->phi = NULL;
        }
    }
    json_object_set_new(m->summary, "reduction",
                        json_string(m->tape_fast    ? "symbolic"
                                    : red->have_phi ? "numeric (symbolic Phi has "
                                                      "pivots that may vanish)"
                                                    : "numeric"));
    /* The equations document is printed on first request, from this reduction. */
    if (!m->nl_reduced && !r->rejected && equations_defer(m, red) < 0)
        return MB_OOM;
    return MB_OK;
}

static int step_begin(struct compile_run *r) { return model_build_begin(&r->b); }
static int step_parse(struct compile_run *r) { return model_build_parse(&r->b); }
static int step_constraints(struct compile_run *r) { return model_build_constraints(&r->b); }
static int step_psi(struct compile_run *r) { return model_build_psi(&r->b); }
static int step_dynamics(struct compile_run *r) { return model_build_dynamics(&r->b); }
static int step_dpsi(struct compile_run *r) { return model_build_dpsi(&r->b); }
static int step_positions(struct compile_run *r) { return model_build_positions(&r->b); }
static int step_energy(struct compile_run *r) { return model_build_energy(&r->b); }
static int step_canonical(struct compile_run *r) { return model_build_canonical(&r->b); }
static int step_summary(struct compile_run *r) { return model_build_summary(&r->b); }

/* One row a stage. `stage`/`path` set the budget's stage before the row (NULL: the
 * row's steps name their own, finer, stages, or keep the one before); a row with a
 * `share` runs on a soft deadline of that share of the whole budget (capped at `cap`
 * seconds, or `cap` alone when the budget has no time limit) and, past it, `late`
 * replaces what it made; a row without one runs on the hard budget. */
struct compile_stage {
    const char *name;
    int (*run)(struct compile_run *);
    const char *stage, *path;
    double share, cap;
    void (*late)(struct compile_run *);
};

static const struct compile_stage stages[] = {
    {"begin", step_begin, NULL, NULL, 0, 0, NULL},
    {"parse", step_parse, NULL, NULL, 0, 0, NULL},
    {"constraints and speeds", step_constraints, NULL, NULL, 0, 0, NULL},
    {"Psi", step_psi, NULL, NULL, 0, 0, NULL},
    {"dynamics", step_dynamics, NULL, NULL, 0, 0, NULL},
    {"Hamel pieces", step_dpsi, NULL, NULL, 0, 0, NULL},
    {"position constraints", step_positions, NULL, NULL, 0, 0, NULL},
    {"energy", step_energy, "simplification", "model.kinetic_energy", 0, 0, NULL},
    {"Hamel structure", stage_hamel, NULL, NULL, 0, 0, NULL},
    {"canonical form", step_canonical, NULL, NULL, 0, 0, NULL},
    {"summary", step_summary, "printing", "model", 0, 0, NULL},
    {"symbolic reduction", stage_reduce, "symbolic reduction", "model", COMPILE_REDUCE_SHARE, 0, reduce_late},
    {"equations", stage_equations, "equations", "model", 0, 0, NULL},
    {"holonomy analysis", stage_holonomy, "holonomy analysis", "model.constraints", COMPILE_REDUCE_SHARE,
     COMPILE_HOLONOMY_SECONDS, holonomy_late},
    {"keep the reduction", stage_keep_reduction, NULL, NULL, 0, 0, NULL},
    {"mass matrix", stage_mass, "mass matrix", "model.kinetic_energy", 0, 0, NULL},
    {"machine code", NULL, "machine code", "model", 0, 0, NULL},
};

int engine_model_compile(const json_t *js, const engine_limits *lim, engine_model **out, json_t **problem)
{
    return engine_model_compile_ctl(js, lim, NULL, out, problem);
}

int engine_model_compile_ctl(const json_t *js, const engine_limits *lim, engine_control *ctl,
                             engine_model **out, json_t **problem)
{
    *out = NULL;
    *problem = NULL;
    if (!lim)
        lim = &engine_default_limits;
    if (!json_is_object(js)) {
        *problem = hamel_problem_new(HAMEL_E_INVALID_MODEL, "the model must be a JSON object");
        hamel_problem_add(*problem, "model", -1, "must be an object");
        return HAMEL_E_INVALID_MODEL;
    }
    struct timespec t_start;
    clock_gettime(CLOCK_MONOTONIC, &t_start);
    /* The compile budget: the stages tick it from inside their loops (budget.h). */
    budget bud;
    budget_init(&bud, lim->max_compile_seconds, lim->max_compile_bytes, ctl ? &ctl->cancel : NULL);
    budget_cap_wall(&bud, ctl ? ctl->max_wall_seconds : 0);
    struct compile_run r;
    memset(&r, 0, sizeof r);
    r.b.js = js;
    r.b.lim = lim;
    r.b.bud = &bud;
    int rc = MB_OK;
    for (size_t i = 0; i < sizeof stages / sizeof stages[0] && rc == MB_OK; i++) {
        const struct compile_stage *st = &stages[i];
        if (st->stage)
            budget_stage(&bud, st->stage, st->path);
        if (st->share > 0) {
            double s = bud.seconds > 0 ? st->share * bud.seconds : st->cap;
            budget_soft_begin(&bud, st->cap > 0 && bud.seconds > 0 ? fmin(st->cap, s) : s);
        }
        rc = st->run ? st->run(&r) : MB_OK;
        if (st->share > 0 && budget_soft_end(&bud) && rc == MB_OK && st->late)
            st->late(&r);
        if (rc == MB_OK && budget_check(&bud))
            rc = MB_OVER;
        if (rc == MB_OOM && budget_check(&bud))
            rc = MB_OVER; /* a constructor refused past the budget's bytes */
    }
    if (r.have_red)
        reduce_result_free(&r.red);
    if (rc == MB_OK) {
        struct engine_model *m = r.b.m;
        expr_ctx_set_budget(m->ctx, NULL); /* bud ends here; the model's context is read-only now */
        /* libtcc, in one state: in the background when the tiers are on (native.h). The
         * background job holds a reference: no failure path (model_free) may follow. */
        native_jit(m);
        model_build_end(&r.b, 1);
        struct timespec t_end;
        clock_gettime(CLOCK_MONOTONIC, &t_end);
        m->compile_ms = (t_end.tv_sec - t_start.tv_sec) * 1e3 + (t_end.tv_nsec - t_start.tv_nsec) / 1e6;
        json_object_set_new(m->summary, "compile_ms", json_real(m->compile_ms));
        *out = m;
        return 0;
    }
    int code = r.b.code;
    json_t *prob = r.b.prob;
    r.b.prob = NULL;
    if (rc == MB_OVER) {
        code = budget_error(&bud);
        json_decref(prob);
        prob = budget_problem(&bud);
    } else if (rc == MB_OOM) {
        code = HAMEL_E_INTERNAL;
        json_decref(prob);
        prob = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory while compiling the model");
    }
    model_build_end(&r.b, 0);
    hamel_problem_recode(prob, code);
    *problem = prob;
    return code;
}
