/* equations.h — the derived equations of API.md §5 as expressions: kinematics
 * q' = Phi u + Phi_t, the mass matrix and forcing of the Boltzmann–Hamel equations on
 * the independent speeds, the non-vanishing gamma^j_rl, and T*(q, u, t). */
#ifndef HAMEL_EQUATIONS_H
#define HAMEL_EQUATIONS_H

#include "model.h"

/* Derives the equations symbolically and stores their JSON text in m->equations.
 * When Phi cannot be obtained within the node budget, stores what can be given
 * with "complete": false and a reason. Returns 0, or -1 on allocation failure. */
int equations_derive(struct engine_model *m, size_t node_budget);

#endif
