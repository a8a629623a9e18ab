/* watch.h — the singularity watch: Psi (the speeds and the linear constraints) must
 * stay regular along a Boltzmann–Hamel run.
 *
 * After every accepted step (integ_options.step_check = watch_step) the watch tests
 * Psi: with one expression pivot in the model's symbolic inverse that pivot alone
 * (det Psi up to a number: a sign change is a crossing, a tenfold decay against the
 * chart's start is trouble ahead), otherwise its 1-norm condition number and
 * determinant. With default speeds a stop re-chooses the velocities used as speeds
 * (hamel_choose_speeds) at the last good state and the integration goes on
 * (watch_integrate); with speeds the user gave it ends the run with
 * HAMEL_E_SINGULAR and a reason naming t and q. Models whose det Psi is a number
 * (model.h: psi_det_const) need no watch.
 */
#ifndef HAMEL_WATCH_H
#define HAMEL_WATCH_H

#include "hamel.h"
#include "integ.h"
#include "model.h"

typedef struct sim_watch sim_watch;

/* A watch over the workspace w (borrowed: the integration's own). Caller frees. */
sim_watch *watch_new(const struct engine_model *m, hamel_ws *w);

/* Frees a watch. Accepts NULL. */
void watch_free(sim_watch *W);

/* The step check for integ_options (ctx: the watch). */
int watch_step(double t, const double *y, void *ctx);

/* Integrates sys through times[*delivered..n_times) from (t0, y0 = [q, u]), calling
 * sample(ctx) at each time (which must advance *delivered); with a watch (W may be
 * NULL), in segments between re-choices of the speeds, starting in the best chart
 * when the model's own choice (initial speeds u0) is poor at t0. y0 is overwritten.
 * Statistics add up over the segments into *st. Returns 0 or an engine error code
 * (HAMEL_E_SINGULAR with watch_reason when Psi turned singular). */
int watch_integrate(sim_watch *W, const struct engine_model *m, const integ_system *sys, integ_options *opt,
                    double t0, double *y0, const double *u0, const double *times, int n_times,
                    const int *delivered, integ_sample_fn sample, void *ctx, integ_stats *st, char *reason,
                    size_t reason_size);

/* Whether velocities other than the model's own speeds are in force (the state's u
 * are then q'_c for the columns the watch chose). */
int watch_selected(const sim_watch *W);

/* Whether the speeds are the engine's (default speeds: re-chosen when needed). */
int watch_movable(const sim_watch *W);

/* The velocity columns of the model's own default speeds [k]. */
const int *watch_own_columns(const sim_watch *W);

/* When a run fails otherwise (the integrator, the step limit, a right-hand side that
 * is not finite), whether Psi is the likely cause: its 1-norm condition number at the
 * last accepted step (the model's own speeds) is WATCH_FAILURE_GROWTH times that at the
 * run's start or more, or Psi is singular there (cond_last infinite). Fills info either
 * way when it returns 1; 0 when not (or no chart of the model's own speeds is in force). */
#define WATCH_FAILURE_GROWTH 1e3
struct watch_failure_info {
    double t_first, cond_first, t_last, cond_last;
};
int watch_failure(sim_watch *W, struct watch_failure_info *info);

/* Re-choices made so far; the reason the watch ended a run, or NULL. */
int watch_switches(const sim_watch *W);
const char *watch_reason(const sim_watch *W);

#endif
