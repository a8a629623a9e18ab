/* baseline.h — hand-written right-hand sides: the speed limit the engine is measured by.
 *
 * Each baseline_system is the Boltzmann–Hamel system of one shared case written out by
 * hand in C, as a careful human would (trigonometric functions computed once, masses
 * cancelled, no allocation): the equations of motion solved for the speed derivatives
 * and the kinematics q' = Φ u. The state is y = (q, u), coordinates then independent
 * speeds, in the order of the case file. baseline_run integrates a system through the
 * engine's own driver (engine/integ.h: gsl_odeiv2 rk8pd, y-abs/rel standard control,
 * stepping exactly to each output time), so the engine and the baseline differ only in
 * the right-hand side and what happens at each sample.
 *
 * bench/ is not a library the Makefile builds: the two programs that use the baseline
 * (bench/bench_engine.c and tests/unit/test_baseline.c) compile baseline.c into
 * themselves by including it once.
 */
#ifndef HAMEL_BENCH_BASELINE_H
#define HAMEL_BENCH_BASELINE_H

#include <stddef.h>

#define BASELINE_MAX_DIM 16   /* state dimension nq + nu of any baseline system */
#define BASELINE_MAX_PARAMS 8 /* parameters of any baseline system */

/* What a right-hand side reads: parameter values in the order of the system's
 * param_names. */
typedef struct baseline_params {
    double p[BASELINE_MAX_PARAMS];
} baseline_params;

/* One hand-written system. `rhs` has the gsl_odeiv2_system signature and takes a
 * baseline_params as its last argument. */
typedef struct baseline_system {
    const char *name; /* the model name of the case it implements */
    const char *file; /* the case file name in ../shared/cases */
    int nq;           /* coordinates */
    int nu;           /* independent speeds */
    int nparams;      /* parameters */
    const char *const *q_names;
    const char *const *u_names;
    const char *const *param_names;
    const double *param_defaults; /* the case file's values */
    int (*rhs)(double t, const double y[], double dydt[], void *params);
} baseline_system;

/* Greenwood Example 5.3: the thin disk rolling without slipping, (5.193)-(5.195). */
extern const baseline_system baseline_rolling_disk;

/* Greenwood Example 5.2: the knife-edge dumbbell, (5.121)-(5.122). */
extern const baseline_system baseline_dumbbell;

/* What one baseline_run did. */
typedef struct baseline_stats {
    long steps;          /* accepted steps */
    long failed_steps;   /* rejected step attempts */
    long rhs_evals;      /* right-hand side evaluations */
    double integrate_ms; /* wall time of the driver's run (integ_stats.wall_ms), as the
                            engine reports it in stats.integrate_ms */
    char reason[256];    /* why a run failed, "" on success */
} baseline_stats;

/* Sets par to the system's default parameters. */
void baseline_params_default(const baseline_system *sys, baseline_params *par);

/* The n output times t0 + (t_end - t0) i / (n - 1), i = 0..n-1, the last exactly t_end,
 * written into times[n]; n = 1 gives t0 only. */
void baseline_times(double t0, double t_end, int n, double times[]);

/* Integrates sys from state y0 at t0 with rk8pd under gsl_odeiv2_control_y_new(atol,
 * rtol) through integ_driver_apply, landing on each of the n ascending output times
 * (times[0] may equal t0), and writes the state at times[i] into out[i * (nq + nu) ...].
 * Borrows every argument; out (n * (nq + nu) doubles) and st (may be NULL) are the
 * caller's. Returns 0, or the driver's engine error code (error.h) with st->reason. */
int baseline_run(const baseline_system *sys, baseline_params *par, double t0, const double y0[],
                 const double times[], int n, double rtol, double atol, double out[], baseline_stats *st);

#endif
