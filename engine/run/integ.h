/* integ.h — the integration driver: y' = f(t, y) from t0 through a list of output times.
 *
 * Owns the choice of GSL stepper (gsl_odeiv2), the step-size control, the budgets
 * (total steps, wall time), cancellation and progress reporting, and the translation of
 * integrator failures into engine error codes (error.h). It knows nothing about
 * mechanics: any right-hand side will do.
 *
 * The driver steps with gsl_odeiv2_evolve_apply, landing exactly on each output time
 * (no step goes past it; bsimp's sub-steps may evaluate f a few ulps beyond), and checks the cancel flag, the
 * step budget and the deadline between every two steps. Each output time is handed to a sample callback in
 * order; samples already delivered stay valid when a run fails part-way.
 *
 * Implicit steppers (rk1imp rk2imp rk4imp bsimp msbdf) get a forward-difference
 * Jacobian of the right-hand side (step sqrt(eps) max(|y_j|, 1)), df/dt included: dim + 2
 * right-hand side calls each. A NaN or infinite derivative or state is a failure
 * (HAMEL_E_NUMERIC), never a reason to shrink the step.
 *
 * Events (integ_options.n_events > 0): functions g_i(t, y) whose sign changes are
 * located. After every accepted step (and its step check) the driver compares the
 * signs of g at the step's two ends; for each crossing in the requested direction it
 * finds the time by Brent's method (gsl_root_fsolver_brent) on
 * phi(tau) = g_i(tau, Y(tau)), where Y(tau) re-integrates from the step's start to
 * tau with the same method and tolerances in a second, private stepper (for rk8pd and
 * the other one-step methods: one step of size tau - t_a, smaller than the accepted
 * one, so Y is as accurate as the trajectory itself; msadams/msbdf restart there).
 * This is dense output of the method's own order, not an interpolant: the time is
 * found to a few ulps of the exact root of phi, and its error is that of the
 * integration. For the first n_probe_events events g is also evaluated at
 * INTEG_EVENT_PROBES interior points of each step on the cubic Hermite interpolant of
 * the state (one more right-hand side per step): where these show g crossing zero and
 * coming back within the step, each piece between probes whose signs on the
 * re-integration differ is located on its own (a free rotor's sin(th), stepped over in
 * 2.5 s steps, loses no crossing). A dip between two probes is still not seen; a g that
 * is zero at the run's start is not a crossing there. The
 * crossings of one step are reported in time order through event_hit, which may end
 * the run at the event: the state is then the one at the event time and a last sample
 * is delivered there.
 *
 * The process must have called gsl_set_error_handler_off() (engine_init does).
 */
#ifndef HAMEL_INTEG_H
#define HAMEL_INTEG_H

#include <stdatomic.h>
#include <stddef.h>

#define INTEG_DEFAULT_METHOD "rk8pd"
#define INTEG_DEFAULT_RTOL 1e-10
#define INTEG_DEFAULT_ATOL 1e-12
#define INTEG_DEFAULT_MAX_STEPS 10000000L   /* when integ_options.max_steps <= 0 */
#define INTEG_DEFAULT_MAX_WALL_SECONDS 3600 /* when integ_options.max_wall_seconds <= 0 */
#define INTEG_REASON_MAX 256                /* bytes of integ_stats.reason, with its NUL */

/* The right-hand side: writes dydt[dim] = f(t, y). Returns GSL_SUCCESS, or GSL_EBADFUNC
 * when it cannot be evaluated there (singular matrix, domain error); any other nonzero
 * value is treated as GSL_EBADFUNC. Must not keep y or dydt. */
typedef int (*integ_rhs_fn)(double t, const double *y, double *dydt, void *params);

/* Called at every output time, in order, with the state there (borrowed for the call).
 * Returns 0 to go on; any other value stops the run and is returned by
 * integ_driver_apply unchanged (so return an engine error code, e.g. HAMEL_E_LIMIT). */
typedef int (*integ_sample_fn)(double t, const double *y, void *ctx);

/* Called after every accepted step with the state there (borrowed for the call).
 * Returns 0 to go on; any other value stops the run and is returned by
 * integ_driver_apply unchanged (the singularity watch of sim.c uses it). */
typedef int (*integ_step_fn)(double t, const double *y, void *ctx);

/* Event functions: writes g[n_events] at (t, y) (both borrowed). Returns 0, or nonzero
 * when they cannot be evaluated there (the run then fails with HAMEL_E_NUMERIC). */
typedef int (*integ_event_fn)(double t, const double *y, double *g, void *ctx);

/* Called for each located crossing, in time order, with the event's index, the time
 * and the state there (borrowed for the call). Returns 0 to go on, INTEG_EVENT_STOP to
 * end the run there (a last sample is delivered at t and integ_driver_apply returns
 * 0 with stats->stopped_by set), or an engine error code that ends the run. */
typedef int (*integ_hit_fn)(int index, double t, const double *y, void *ctx);
#define INTEG_EVENT_STOP 100

/* Crossing directions of integ_options.event_dir. */
enum integ_event_dir { INTEG_EVENT_BOTH = 0, INTEG_EVENT_RISING = 1, INTEG_EVENT_FALLING = -1 };

typedef struct integ_system {
    size_t dim; /* > 0 */
    integ_rhs_fn rhs;
    void *params; /* passed to rhs; borrowed */
} integ_system;

typedef struct integ_options {
    const char *method; /* a gsl_odeiv2 stepper name; NULL or "": INTEG_DEFAULT_METHOD */
    double rtol, atol;  /* per component: |err| <= atol + rtol |y| (control_y_new) */
    double h0;          /* first step size; 0: chosen from f(t0, y0) */
    long max_steps;     /* accepted steps of one run, all intervals together */
    long steps_done;    /* steps of earlier runs of one simulation (restarts): they count against max_steps */
    double max_wall_seconds; /* wall time of one run */
    double deadline;    /* integ_now() past which a run stops too (one budget for the runs of one simulation:
                           restarts after a projection or a new chart); 0: none */
    atomic_int *cancel; /* nonzero stops the run between steps; may be NULL */
    _Atomic double *progress;       /* receives (t - t0) / (t_end - t0) after each step; may be NULL */
    integ_step_fn step_check;       /* after each accepted step; may be NULL */
    void *step_ctx;                 /* passed to step_check; borrowed */
    int n_events;                   /* event functions; 0: none (the rest of these unused) */
    const int *event_dir;           /* [n_events] enum integ_event_dir; NULL: both; borrowed */
    integ_event_fn event;           /* writes g[n_events] */
    integ_hit_fn event_hit;         /* each located crossing */
    void *event_ctx;                /* passed to event and event_hit; borrowed */
    int n_probe_events;             /* the first n_probe_events are also looked at inside each step */
    const char *const *state_names; /* [dim] the state's components, for messages; NULL: numbers */
    const char *const *event_names; /* [n_events] the events, for messages; NULL: numbers */
} integ_options;

/* What one run did. On failure `reason` says what went wrong, where, in plain words. */
typedef struct integ_stats {
    long steps;                    /* accepted steps */
    long failed_steps;             /* rejected attempts (error too large, or the stepper failed) */
    long rhs_evals;                /* every call of the right-hand side, jac_rhs_evals included */
    long jac_evals;                /* finite-difference Jacobians formed (implicit steppers) */
    long jac_rhs_evals;            /* right-hand side calls spent on those Jacobians */
    long samples;                  /* sample callbacks made */
    double t;                      /* time reached (the last accepted step) */
    double h;                      /* step size the integrator would try next, or the one that failed */
    double wall_ms;                /* wall time of the run */
    char reason[INTEG_REASON_MAX]; /* "" on success */
    long event_rhs_evals;          /* right-hand side calls spent locating events (in rhs_evals) */
    int stopped_by;                /* 1 + the index of the event that ended the run, else 0 */
} integ_stats;

typedef struct integ_driver integ_driver;

/* Options with the defaults above, no cancel flag and no progress. */
extern const integ_options integ_default_options;

/* The clock of integ_options.deadline: CLOCK_MONOTONIC in seconds. */
double integ_now(void);

/* 1 if `name` is a known stepper name (NULL and "" mean the default), else 0. */
int integ_method_known(const char *name);

/* Allocates a driver for `sys` with every workspace a run needs (stepper, control,
 * evolve, Jacobian scratch), so that runs allocate nothing. Copies *sys and *opt; the
 * params, cancel and progress pointers inside them are borrowed and must outlive the
 * driver. Returns 0 and sets *out (caller frees with integ_driver_free), or
 * HAMEL_E_BAD_REQUEST (unknown method, bad tolerances or budgets) or HAMEL_E_INTERNAL
 * (out of memory) with a message in reason[reason_size] when reason is not NULL. */
int integ_driver_new(const integ_system *sys, const integ_options *opt, integ_driver **out, char *reason,
                     size_t reason_size);

/* Integrates from (t0, y0) through times[0..n_times) (increasing; times[0] may equal t0),
 * calling sample (may be NULL) at each of them. Borrows y0 and times; fills *stats (may
 * be NULL).
 * Returns 0 when every sample was delivered, else HAMEL_E_STEP_LIMIT, _TIME_LIMIT,
 * _CANCELLED, _NUMERIC (the right-hand side failed or a value is not finite),
 * _INTEGRATOR (step size underflow, stepper failure), _BAD_REQUEST / _BAD_INITIAL (bad
 * times or y0) or the sample callback's nonzero value. A driver runs one apply at a
 * time; it may be applied again afterwards (each run starts afresh). */
int integ_driver_apply(integ_driver *d, double t0, const double *y0, const double *times, size_t n_times,
                       integ_sample_fn sample, void *ctx, integ_stats *stats);

/* Frees a driver and everything it allocated. Accepts NULL. */
void integ_driver_free(integ_driver *d);

/* One run: integ_driver_new + integ_driver_apply + integ_driver_free. The reason of a
 * failure to create the driver goes to stats->reason. Same returns as those two. */
int integ_run(const integ_system *sys, const integ_options *opt, double t0, const double *y0,
              const double *times, size_t n_times, integ_sample_fn sample, void *ctx, integ_stats *stats);

#endif
