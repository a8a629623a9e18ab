/* holonomy.h — which linear constraints are integrable, alone and together.
 *
 * Per constraint: its Pfaffian form omega = sum a_i dq_i + a_t dt is integrable by
 * itself (Frobenius for one form: omega ^ d omega = 0, tested on every triple of
 * coordinates of (q, t) at several random configurations). Only then is it called
 * "holonomic".
 *
 * For the system: the constraint distribution D (the velocities the linear
 * constraints allow, spanned by the columns of Phi_S, and in (q, t) by (Phi_t, 1)
 * when a constraint is rheonomic) and its involutive closure, spanned by D and the
 * iterated Lie brackets of its fields (evaluated numerically with hyper-dual numbers
 * on a tape of the generators, their rank decided at
 * three generic configurations). The codimension of the closure is the number of
 * independent integrable combinations of the constraints: the annihilator of the
 * closure, a subspace of the constraints' forms. Each combination is shown as
 * coefficients on the constraints, as a constraint expression and, when its form has
 * constant coefficients, its integral. Nonlinear constraints are not part of D.
 */
#ifndef HAMEL_HOLONOMY_H
#define HAMEL_HOLONOMY_H

#include "model.h"
#include "reduce.h"

/* Sets each constraint's `holonomic` flag (omega ^ d omega = 0; linear ones only).
 * Returns 0, or -1 on allocation failure. */
int holonomy_flags(struct engine_model *m);

/* The analysis of the closure of D as the JSON object of the summary's "holonomy"
 * member (new reference; {"complete": false, "reason"} when Phi is not available or a
 * budget runs out). Uses red->phi and red->kin; adds nodes to m->ctx. */
json_t *holonomy_analyse(struct engine_model *m, const reduce_result *red);

#endif
