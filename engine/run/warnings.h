/* warnings.h — the checks of a run that failed, as the result's top-level "warnings".
 *
 * A run's checks (checks.energy, checks.constraints) are numbers a user must think to
 * read; a check that fails is also said in words, as an entry {code, message, check,
 * value, threshold} of the result's "warnings" array, which every client shows. The
 * thresholds (engine/DESIGN.md "Warnings", api/openapi.yaml) follow the request's
 * tolerances: with tol = max(1e-6, min(1e3 * rtol, 1e-2)),
 *   energy-drift          energy expected conserved, |E - E0| / |E0| > tol (absolute when E0 = 0)
 *                         and |E - E0| > min(1e3 * atol, 1e-6) (an energy zero up to rounding says nothing)
 *   constraint-residual   a velocity constraint's residual > tol * max(1, max |q'|) * max_i |df/dq'_i|
 *                         (the last where it misses most: a constraint written times 1e12 is the same)
 *   position-drift        a position constraint's residual > max(position_tolerance, tol),
 *                         projection off
 *   projection-failed     a projection back onto a position constraint failed
 *   mass-indefinite       the kinetic energy is not positive semi-definite at the initial
 *                         state (a negative mass or inertia, in T or through parameters)
 *   contact-lift-off      a contact's normal force turned negative (checks.contacts, contact.h)
 *   contact-slip          a contact's |F_t| exceeded friction * N
 * and any check that is not a number (NaN) fails.
 */
#ifndef HAMEL_WARNINGS_H
#define HAMEL_WARNINGS_H

#include <jansson.h>

/* What the thresholds depend on besides the checks themselves. */
typedef struct warn_scale {
    double rtol;                  /* the request's relative tolerance */
    double atol;                  /* the request's absolute tolerance */
    double qdot_max;              /* the largest |q'| over the samples (the scale of a velocity residual) */
    int mass_indefinite;          /* M = d2T/dq'dq' has a negative eigenvalue at the initial state */
    int nc;                       /* constraints with a scale below (0: every scale 1) */
    const char *const *cons_name; /* [nc] their names, as in checks.constraints.per_constraint */
    const double *cons_scale;     /* [nc] max_i |df_j/dq'_i| where f_j misses most (hamel.h) */
} warn_scale;

/* The relative threshold for a request with relative tolerance rtol:
 * max(1e-6, min(1e3 * rtol, 1e-2)). */
double warn_tolerance(double rtol);

/* The warnings of a run whose checks object (the result's "checks", borrowed) is given:
 * a new array, empty when every check passes; NULL only when out of memory. */
json_t *warn_from_checks(const json_t *checks, const warn_scale *scale);

#endif
