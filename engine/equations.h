/* equations.h — the derived equations of API.md §5 as expressions: kinematics
 * q' = Phi u + Phi_t, the mass matrix and forcing of the Boltzmann–Hamel equations on
 * the independent speeds, the non-vanishing gamma^j_rl, and T*(q, u, t). */
#ifndef HAMEL_EQUATIONS_H
#define HAMEL_EQUATIONS_H

#include "model.h"
#include "reduce.h"

/* Writes the equations of a reduction as JSON text into m->equations. When Phi could
 * not be obtained, writes what can be given with "complete": false and the reason.
 * Returns 0, or -1 on allocation failure. */
int equations_derive(struct engine_model *m, const reduce_result *red);

#endif
