/* holo.h — position-level (holonomic) constraints f(q, t) = 0 at run time: their
 * residuals, the choice of the coordinates they determine, and Newton's method on
 * those coordinates (the initial state from a guess, and the projection that removes
 * drift along a run).
 *
 * The model keeps each f as an expression (model_constraint.pos) and its time
 * derivative among the linear velocity constraints, so the equations of motion keep
 * f constant; what integration error lets drift is measured and, past a tolerance,
 * projected away here. Values and gradients come from one tape (model.tape_pos).
 */
#ifndef HAMEL_HOLO_H
#define HAMEL_HOLO_H

#include "model.h"

#define HOLO_MAX_ITER 50

typedef struct holo_ws holo_ws;

/* A workspace for model m (m->npos > 0) with parameter values params[np] (copied).
 * Caller frees with holo_ws_free. Borrows m. */
holo_ws *holo_ws_new(const struct engine_model *m, const double *params);

/* Frees a workspace. Accepts NULL. */
void holo_ws_free(holo_ws *w);

/* The residuals f_j(q, t), j < m->npos, into f. */
void holo_residual(holo_ws *w, double t, const double *q, double *f);

/* Chooses the npos dependent coordinates dep[npos] at (t, q): a coordinate the model
 * names for a constraint ("dependent") is kept; the others are taken from the last
 * coordinate backwards whose gradient column is independent of those chosen. Returns 0,
 * or -1 if the gradients are dependent there (no choice solves for them). */
int holo_choose(holo_ws *w, double t, const double *q, int *dep);

/* Newton's method on q[dep[j]] (the other coordinates held) until max |f| <= 1e-15
 * or the step stalls at rounding, at most HOLO_MAX_ITER iterations (a step that
 * increases |f| is halved, up to 20 times). Writes the final max |f| to *resid and
 * the iterations to *iters. Returns 0 if max |f| <= tol at the end, else -1
 * (singular Jacobian, or no convergence). */
int holo_solve(holo_ws *w, double t, double *q, const int *dep, double tol, double *resid, int *iters);

#endif
