/* watch.c — the singularity watch of Boltzmann–Hamel runs (watch.h): Psi's condition
 * after every accepted step, the re-choice of default speeds, and the integration in
 * segments between re-choices. */
#include "watch.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* (see watch.h) Along a Boltzmann–Hamel run, Psi (the speeds and the linear constraints) must stay
 * regular. After every accepted step the watch evaluates its 1-norm condition number
 * and determinant. With speeds the engine chose (velocities q'_c), a condition number
 * grown past SIM_WATCH_SWITCH times that of the best choice, or a determinant that
 * changed sign within a step (the step crossed a singular configuration), makes the
 * run stop and continue from the last good state with velocities re-chosen there
 * (hamel_choose_speeds): the trajectory goes on correctly and the samples report the
 * model's own speeds (components of q'). With speeds the user gave, the same events
 * past SIM_WATCH_FAIL end the run with a failure naming the time and configuration.
 * Nonlinear constraints in the reduced form (Psi taken at q'(q, u)): speeds that are
 * plain velocities q_c' are re-chosen as default speeds are; other speeds, and a q' that
 * Newton's method can no longer find (two solutions meeting: the right-hand side fails),
 * end the run with the same failure naming the nonlinear constraints.
 * When det Psi is a nonzero number (model.h: psi_det_const) there is nothing to watch. */
#define SIM_WATCH_SWITCH 10.0
#define SIM_WATCH_FAIL 1e8
#define SIM_WATCH_MAX_SWITCHES 10000
#define SIM_WATCH_STOP 1 /* private return of the step check: not an engine error */

struct sim_watch {
    hamel_ws *w;
    int n, k;
    int movable;     /* default speeds: the choice may change */
    int *orig;       /* [k] the model's own choice (movable) */
    int *cur;        /* [k] the choice in force */
    int on;          /* cur differs from orig */
    int nl;          /* nonlinear constraints in the reduced form: Psi depends on q' */
    double cond_ref; /* condition number of the chart at its start */
    double det_prev; /* determinant at the last accepted step */
    double det_ref;  /* |det Psi| at the chart's start (the cheap test, hamel_det_pivot) */
    double t_prev;   /* the last accepted step */
    double *y_prev;  /* [n + k] */
    double t_hit, cond_hit, *y_hit;
    double t_first, *y_first; /* the run's first state (watch_failure) */
    int have_first;
    int crossed; /* the determinant changed sign (or vanished) in the last step */
    int switches;
    char nl_names[200]; /* the nonlinear constraints (W->nl), for messages */
    char reason[900];   /* why the watch ended the run, or "" */
};

int watch_step(double t, const double *y, void *ctx)
{
    sim_watch *W = ctx;
    double cond = INFINITY, det = 0.0, qd[ENGINE_COORDINATES_CEILING];
    int sing;
    if (W->nl && (W->n > ENGINE_COORDINATES_CEILING || hamel_qdot(W->w, t, y, y + W->n, qd) < 0)) {
        sing = 1; /* Psi is evaluated at (q, q'(q, u)): no q' there */
    } else if (!W->nl && hamel_det_pivot(W->w, t, y, &det) == 0) {
        /* the model's own chart with one expression pivot: det Psi up to a number,
         * its decay against the chart's start stands for the condition number */
        sing = !(det != 0.0) || !isfinite(det);
        cond = sing ? INFINITY : W->det_ref / fabs(det);
    } else {
        sing = hamel_psi_condition(W->w, t, y, &cond, &det) < 0;
    }
    int crossed = sing || (det > 0) != (W->det_prev > 0);
    double limit = W->movable ? SIM_WATCH_SWITCH : SIM_WATCH_FAIL;
    if (crossed || cond > limit * W->cond_ref) {
        W->t_hit = t;
        W->cond_hit = cond;
        W->crossed = crossed;
        memcpy(W->y_hit, y, (W->n + W->k) * sizeof *y);
        return SIM_WATCH_STOP;
    }
    W->t_prev = t;
    W->det_prev = det;
    memcpy(W->y_prev, y, (W->n + W->k) * sizeof *y);
    return 0;
}

/* Starts a chart at (t, y): records its condition number and determinant. */
static int watch_start(sim_watch *W, double t, const double *y)
{
    double cond, det, qd[ENGINE_COORDINATES_CEILING];
    if (W->nl && (W->n > ENGINE_COORDINATES_CEILING || hamel_qdot(W->w, t, y, y + W->n, qd) < 0))
        return -1;
    if (!W->nl && hamel_det_pivot(W->w, t, y, &det) == 0) {
        if (!(det != 0.0) || !isfinite(det))
            return -1;
        W->det_ref = fabs(det);
        W->cond_ref = 1.0;
        W->det_prev = det;
        W->t_prev = t;
        memcpy(W->y_prev, y, (W->n + W->k) * sizeof *y);
        return 0;
    }
    if (hamel_psi_condition(W->w, t, y, &cond, &det) < 0)
        return -1;
    W->cond_ref = cond > 1.0 ? cond : 1.0;
    W->det_prev = det;
    W->t_prev = t;
    memcpy(W->y_prev, y, (W->n + W->k) * sizeof *y);
    return 0;
}

/* Re-chooses the speeds at state y (in the current chart; overwritten with the state
 * in the new chart). Returns 1 if the choice changed, 0 if it is already the best,
 * -1 if no choice is regular there. */
static int watch_rechoose(sim_watch *W, double t, double *y)
{
    int n = W->n, k = W->k, cols[ENGINE_COORDINATES_CEILING], changed = 0;
    double qd[ENGINE_COORDINATES_CEILING];
    if (n > ENGINE_COORDINATES_CEILING || hamel_qdot(W->w, t, y, y + n, qd) < 0 ||
        hamel_choose_speeds(W->w, t, y, cols) < 0)
        return -1;
    for (int r = 0; r < k; r++)
        changed |= cols[r] != W->cur[r];
    if (!changed)
        return 0;
    memcpy(W->cur, cols, k * sizeof *cols);
    W->on = 0;
    for (int r = 0; r < k; r++)
        W->on |= cols[r] != W->orig[r];
    hamel_ws_select(W->w, W->on ? W->cur : NULL);
    for (int r = 0; r < k; r++)
        y[n + r] = qd[cols[r]];
    W->switches++;
    return 1;
}

void watch_free(sim_watch *W)
{
    if (!W)
        return;
    free(W->orig);
    free(W->cur);
    free(W->y_prev);
    free(W->y_hit);
    free(W->y_first);
    free(W);
}

/* Nonlinear constraints in the reduced form: whether every speed is a plain velocity
 * u_r = q_c' (its row of Psi the unit row e_c, Psi_rt = 0, at two test configurations;
 * speeds are linear in q', so probing q' = 0 and q' = e_i reads the rows). Then the
 * watch may re-choose them as it does default speeds, and the samples still report the
 * model's own speeds as components of q'. Fills cols[k]. */
static int watch__plain_velocities_in(const struct engine_model *m, hamel_ws *w, int *cols, double *in,
                                      double *qd, double *u)
{
    int n = m->n, k = m->k;
    double t;
    for (int r = 0; r < k; r++)
        cols[r] = -1;
    for (int point = 0; point < 2; point++) {
        model_test_point(m, point, in);
        t = in[model_input_t(m)];
        const double *q = in + model_input_q(m);
        for (int i = -1; i < n; i++) {
            memset(qd, 0, n * sizeof *qd);
            if (i >= 0)
                qd[i] = 1.0;
            hamel_speeds(w, t, q, qd, u);
            for (int r = 0; r < k; r++) {
                if (i < 0) {
                    if (u[r] != 0.0)
                        return 0;
                } else if (u[r] == 1.0) {
                    if (cols[r] >= 0 && cols[r] != i)
                        return 0;
                    cols[r] = i;
                } else if (u[r] != 0.0) {
                    return 0;
                }
            }
        }
    }
    for (int r = 0; r < k; r++)
        if (cols[r] < 0)
            return 0;
    return 1;
}

/* watch__plain_velocities_in with its scratch (the tape inputs, q', u) allocated once
 * here, at the watch's start: sized by the model, so no count of parameters or
 * coordinates turns the test off. */
static int watch__plain_velocities(const struct engine_model *m, hamel_ws *w, int *cols)
{
    double *in = calloc((size_t)m->n_in + m->n + m->k + 1, sizeof *in);
    int plain = in ? watch__plain_velocities_in(m, w, cols, in, in + m->n_in, in + m->n_in + m->n) : 0;
    free(in);
    return plain;
}

sim_watch *watch_new(const struct engine_model *m, hamel_ws *w)
{
    sim_watch *W = calloc(1, sizeof *W);
    if (!W)
        return NULL;
    W->w = w;
    W->n = m->n;
    W->k = m->k;
    W->movable = m->default_speeds;
    W->nl = m->nl_reduced;
    W->orig = calloc(m->k + 1, sizeof *W->orig);
    W->cur = calloc(m->k + 1, sizeof *W->cur);
    W->y_prev = calloc(m->n + m->k, sizeof *W->y_prev);
    W->y_hit = calloc(m->n + m->k, sizeof *W->y_hit);
    W->y_first = calloc(m->n + m->k, sizeof *W->y_first);
    if (!W->orig || !W->cur || !W->y_prev || !W->y_hit || !W->y_first) {
        watch_free(W);
        return NULL;
    }
    if (W->nl) {
        /* speeds that are velocities can be re-chosen as default speeds are */
        W->movable = watch__plain_velocities(m, w, W->orig);
        memcpy(W->cur, W->orig, m->k * sizeof *W->cur);
        W->nl_names[0] = '\0';
        for (int j = 0, used = 0; j < m->nc; j++)
            if (!m->cons[j].linear && used < (int)sizeof W->nl_names - 90)
                used += snprintf(W->nl_names + used, sizeof W->nl_names - (size_t)used, "%s%s",
                                 used ? ", " : "", m->cons[j].name);
        return W;
    }
    /* the symbol table may grow while a form is derived (forms.h): read it under the lock */
    pthread_mutex_lock((pthread_mutex_t *)&m->forms_lock);
    for (int r = 0; r < m->k && W->movable; r++)
        W->orig[r] = W->cur[r] = expr_sym_get(m->ctx, m->sym_u[r])->index;
    pthread_mutex_unlock((pthread_mutex_t *)&m->forms_lock);
    return W;
}

int watch_selected(const sim_watch *W) { return W && W->on; }
int watch_movable(const sim_watch *W) { return W && W->movable; }
const int *watch_own_columns(const sim_watch *W) { return W->orig; }
int watch_switches(const sim_watch *W) { return W ? W->switches : 0; }
const char *watch_reason(const sim_watch *W) { return W && W->reason[0] ? W->reason : NULL; }

/* At the start: the best chart of speeds when the model's own choice (or the one in
 * force) is poor at (t0, y0); kept otherwise, with u0 back in y0. */
static void watch_first_chart(sim_watch *W, int n, double t0, double *y0, const double *u0)
{
    double cond, det, best, qd0[ENGINE_COORDINATES_CEILING];
    /* nonlinear constraints: Psi is taken at q'(q, u) */
    int regular =
        (!W->nl || (n <= ENGINE_COORDINATES_CEILING && hamel_qdot(W->w, t0, y0, y0 + n, qd0) == 0)) &&
        hamel_psi_condition(W->w, t0, y0, &cond, &det) == 0;
    /* start in the best chart when the model's own choice is poor here */
    int saved[ENGINE_COORDINATES_CEILING];
    if (W->k <= ENGINE_COORDINATES_CEILING)
        memcpy(saved, W->cur, W->k * sizeof *saved);
    if (W->k <= ENGINE_COORDINATES_CEILING && watch_rechoose(W, t0, y0) == 1) {
        hamel_psi_condition(W->w, t0, y0, &best, &det);
        if (regular && cond <= SIM_WATCH_SWITCH * (best > 1 ? best : 1)) {
            /* back to the choice in force at t0 (the model's own at the start of a
             * run; a re-chosen one when a projection restarts it): good enough */
            memcpy(W->cur, saved, W->k * sizeof *saved);
            W->on = 0;
            for (int r = 0; r < W->k; r++)
                W->on |= W->cur[r] != W->orig[r];
            hamel_ws_select(W->w, W->on ? W->cur : NULL);
            memcpy(y0 + n, u0, W->k * sizeof *y0);
            W->switches--; /* the re-choice above is undone */
        }
    }
}

/* Why the run stops singular (rc: the watch's stop or the equations failing) into
 * W->reason: where, how, and what to do. */
static void watch_singular_reason(sim_watch *W, const struct engine_model *m, int rc)
{
    char cfg[400] = "";
    const double *q = rc == SIM_WATCH_STOP ? W->y_hit : W->y_prev;
    for (int i = 0, used = 0; i < m->n && used < (int)sizeof cfg - 100; i++)
        used += snprintf(cfg + used, sizeof cfg - used, "%s%s = %.10g", i ? ", " : "", m->coords[i], q[i]);
    if (W->nl)
        snprintf(W->reason, sizeof W->reason,
                 "Psi (the speeds, the linear constraints and the velocity gradient of the nonlinear "
                 "constraint %s) %s t = %.10g, q = (%s)%s: the speeds no longer determine q' (two "
                 "solutions for q' meet there); %s",
                 W->nl_names,
                 rc == HAMEL_E_NUMERIC ? "turned singular just after"
                 : W->crossed          ? "became singular at"
                                       : "became ill-conditioned at",
                 rc == SIM_WATCH_STOP ? W->t_hit : W->t_prev, cfg,
                 W->crossed && rc == SIM_WATCH_STOP ? " (its determinant changed sign)" : "",
                 W->movable ? "no other choice of velocities is regular there"
                            : "choose speeds that stay regular along the motion (plain velocities q' "
                              "can be re-chosen by the engine), or use the multipliers formulation");
    else
        snprintf(W->reason, sizeof W->reason,
                 "Psi (the speeds and the linear constraints) %s at t = %.10g, q = (%s)%s: the speeds no "
                 "longer determine q'; %s",
                 W->crossed ? "became singular" : "became ill-conditioned",
                 rc == SIM_WATCH_STOP ? W->t_hit : W->t_prev, cfg,
                 W->crossed ? " (its determinant changed sign)" : "",
                 W->movable ? "no other choice of velocities is regular there"
                            : "choose speeds regular along the motion, or leave them to the engine");
}

/* After a stop (rc): the state to go on from in *t, *y, in a re-chosen chart. -1 when
 * no other chart is regular there. */
static int watch_restart(sim_watch *W, int rc, double *t, double **y)
{
    *y = W->crossed || rc != SIM_WATCH_STOP ? W->y_prev : W->y_hit;
    *t = W->crossed || rc != SIM_WATCH_STOP ? W->t_prev : W->t_hit;
    int ch = W->movable && W->switches < SIM_WATCH_MAX_SWITCHES ? watch_rechoose(W, *t, *y) : -1;
    if (ch == 0 && *y != W->y_hit && rc == SIM_WATCH_STOP) {
        /* already the best at the last good state: try where the watch stopped */
        *y = W->y_hit;
        *t = W->t_hit;
        ch = watch_rechoose(W, *t, *y);
    }
    return ch != 1 || watch_start(W, *t, *y) < 0 ? -1 : 0;
}

int watch_integrate(sim_watch *W, const struct engine_model *m, const integ_system *sys, integ_options *opt,
                    double t0, double *y0, const double *u0, const double *times, int n_times,
                    const int *delivered, integ_sample_fn sample, void *ctx, integ_stats *st, char *reason,
                    size_t reason_size)
{
    double wall = 0.0;
    long steps = 0, failed = 0, evals = 0, done_before = opt->steps_done;
    int n = m->n, rc;
    if (W && W->movable)
        watch_first_chart(W, n, t0, y0, u0);
    if (W && watch_start(W, t0, y0) < 0) {
        snprintf(reason, reason_size, "Psi is singular at the initial configuration");
        return HAMEL_E_SINGULAR;
    }
    if (W && !W->have_first) {
        W->t_first = t0;
        memcpy(W->y_first, y0, (size_t)(n + W->k) * sizeof *y0);
        W->have_first = 1;
    }
    for (;;) {
        integ_driver *drv = NULL;
        integ_stats seg;
        memset(&seg, 0, sizeof seg);
        opt->steps_done = done_before + steps; /* one step budget for every segment */
        rc = integ_driver_new(sys, opt, &drv, reason, reason_size);
        if (rc == 0)
            rc = integ_driver_apply(drv, t0, y0, times + *delivered, (size_t)(n_times - *delivered), sample,
                                    ctx, &seg);
        integ_driver_free(drv);
        steps += seg.steps;
        failed += seg.failed_steps;
        evals += seg.rhs_evals;
        wall += seg.wall_ms;
        *st = seg;
        /* the equations failing in the current chart: re-chosen speeds may pass; with
         * nonlinear constraints it is q' that could not be solved (the speeds no longer
         * determine it), said as a singularity */
        if (!W || (rc != SIM_WATCH_STOP && !(rc == HAMEL_E_NUMERIC && (W->movable || W->nl))))
            break;
        /* the watch stopped the run (or the equations failed in the current chart) */
        double t, *y;
        if (watch_restart(W, rc, &t, &y) < 0) {
            watch_singular_reason(W, m, rc);
            snprintf(reason, reason_size, "%.*s", (int)reason_size - 1, W->reason);
            st->reason[0] = '\0';
            rc = HAMEL_E_SINGULAR;
            break;
        }
        t0 = t;
        memcpy(y0, y, (size_t)(n + W->k) * sizeof *y0);
    }
    opt->steps_done = done_before + steps; /* and for the calls after a projection's restart */
    st->steps = steps;
    st->failed_steps = failed;
    st->rhs_evals = evals;
    st->wall_ms = wall;
    return rc;
}

/* The 1-norm condition number of Psi (the model's own speeds) at (t, y = [q, u]);
 * INFINITY where it is singular or, with nonlinear constraints, q' cannot be solved. */
static double watch_condition_at(sim_watch *W, double t, const double *y)
{
    double cond = INFINITY, det, qd[ENGINE_COORDINATES_CEILING];
    if (W->nl && (W->n > ENGINE_COORDINATES_CEILING || hamel_qdot(W->w, t, y, y + W->n, qd) < 0))
        return INFINITY;
    if (hamel_psi_condition(W->w, t, y, &cond, &det) < 0)
        return INFINITY;
    return cond;
}

int watch_failure(sim_watch *W, struct watch_failure_info *info)
{
    if (!W || !W->have_first || W->on)
        return 0; /* the model's own speeds only: a re-chosen chart is another Psi */
    info->t_first = W->t_first;
    info->t_last = W->t_prev;
    info->cond_first = watch_condition_at(W, W->t_first, W->y_first);
    info->cond_last = watch_condition_at(W, W->t_prev, W->y_prev);
    if (!isfinite(info->cond_first))
        return 0;
    return !isfinite(info->cond_last) || info->cond_last >= WATCH_FAILURE_GROWTH * info->cond_first;
}
