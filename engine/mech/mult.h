/* mult.h — the multipliers formulation: Lagrange's equations with multipliers on the
 * full state (q, q'), for constraints f(q, q', t) = 0 linear or nonlinear in q', with
 * Chetaev's virtual displacements (df/dq' . delta q = 0; Hussain, ch. 1–2):
 *
 *   [ M  -J^T ] [ q'' ]   [ Q - h                                  ]
 *   [ J    0  ] [ lam ] = [ -(df/dq . q' + df/dt) - alpha f(q,q',t) ]
 *
 * with M = d2T/dq'dq', J = df/dq', Q - h = Q - dV/dq + dT/dq - D(dT/dq'). J^T lam are
 * the generalized constraint forces. The last term is Baumgarte's stabilisation of
 * the velocity-level constraints (f' = -alpha f), with alpha = MULT_BAUMGARTE_ALPHA;
 * the initial velocities are projected onto f = 0 by Gauss–Newton before the run.
 * The system is solved scaled: M's diagonal to about 1 and each row of J to a largest
 * entry of about 1 (powers of two, mult.c), so neither a constraint's factor nor the
 * spread of the inertias makes it look singular.
 */
#ifndef HAMEL_MULT_H
#define HAMEL_MULT_H

#include "model.h"

/* Baumgarte's rate, 1/s: constraint drift decays as exp(-alpha t). */
#define MULT_BAUMGARTE_ALPHA 10.0

typedef struct mult_ws mult_ws;

/* A workspace for one thread's evaluations (parameters copied). Caller frees. */
mult_ws *mult_ws_new(const struct engine_model *m, const double *params);

/* Frees a workspace. Accepts NULL. */
void mult_ws_free(mult_ws *w);

/* Right-hand side of y = [q (n), q' (n)] for integ.h; params is the mult_ws. */
int mult_rhs(double t, const double *y, double *dydt, void *params);

/* The multipliers at state y: lam[nc]. Returns 0 or -1 (singular system). */
int mult_lambda(mult_ws *w, double t, const double *y, double *lam);

/* Projects the velocities y[n..2n) onto f(q, q', t) = 0 (a few Gauss–Newton steps
 * q' -= J^T (J J^T)^-1 f). Returns 0 or -1. */
int mult_project(mult_ws *w, double t, double *y);

#endif
