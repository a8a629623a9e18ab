/* nonlin.h — nonlinear (Chetaev) constraints in the reduced form: a model with n - m
 * speeds, m counting every constraint (model.h: nl_reduced).
 *
 * The velocities q' are solved from the speeds u = Psi_S q' + Psi_St and the
 * constraints f(q, q', t) = 0 symbolically where that is explicit (one equation at a
 * time, linear in its last unknown velocity: Appell's z' = a sqrt(x'^2 + y'^2)); the
 * reduced equations then follow with Chetaev's virtual displacements Phi_S = dq'/du:
 *   M* = Phi_S^T M Phi_S,  F = Phi_S^T (g - M (dK/dq K + dK/dt)),  q' = K(q, u, t),
 * and become the model's fast tape (reduce.h's layout). Otherwise the integrator
 * solves q' by Newton's method at each evaluation (hamel.c). Either way this module
 * writes the model's derived-equations document.
 */
#ifndef HAMEL_NONLIN_H
#define HAMEL_NONLIN_H

#include "model.h"
#include "reduce.h"

/* For an nl_reduced model: fills red (kin, mass, forcing, tstar; have_phi = exact = 1)
 * when the velocities are explicit, and writes m->equations. Does nothing for other
 * models. Returns 0, or -1 on allocation failure. */
int nonlin_derive(struct engine_model *m, reduce_result *red);

#endif
