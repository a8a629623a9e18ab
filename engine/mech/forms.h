/* forms.h — the equations of motion in the classical forms of the seeds, derived
 * symbolically on demand from the model's reduction (q' = K(q, u, t)):
 *
 *   hamel    Boltzmann–Hamel (Greenwood 5.94) with the gamma terms written out
 *            (Ts: T in the quasi-velocities, T* of the text):
 *            d/dt(dTs/du_r) + sum_jl dTs/du_j gamma^j_rl u_l + sum_j dTs/du_j gamma^j_r
 *            - dTs/dtheta_r = Q_r   (linear constraints)
 *   appell   the acceleration energy S(q, u, u') (up to terms free of u') and
 *            dS/du'_r = Pi_r (Wang & Pao; Hussain 2.7)
 *   kane     partial velocities dq'/du_r, generalized active forces F_r and inertia
 *            forces F*_r, F_r + F*_r = 0 (Wang & Pao)
 *   maggi    sum_i C_ir (d/dt dT/dq_i' - dT/dq_i - Q_i) = 0 with q' = C u + ...
 *            (Greenwood ch. 4)
 *   voronec  Voronec's equations for Chaplygin-type speeds (each speed one velocity,
 *            linear scleronomic constraints) with the reduced Lagrangian (Lemos (10))
 *
 * Each document carries the pieces and "equations" as "lhs = rhs" strings; the
 * residual expressions (lhs - rhs, in q, u, u', t) are returned for checks. Building a
 * form adds nodes to the model's expression context: callers hold m->forms_lock.
 */
#ifndef HAMEL_FORMS_H
#define HAMEL_FORMS_H

#include "model.h"

#define FORMS_COUNT 5

/* The index of a form name (0..FORMS_COUNT-1), or -1. */
int forms_index(const char *form);

/* Builds a form. On success returns 0, *doc (new reference), *residual [k] (caller
 * frees the array; the nodes belong to m->ctx) and *acc [k] the symbols of u'_r
 * (caller frees). Returns an engine error code with *problem when the form does not
 * apply to the model (422 naming "form") or exceeds the budgets. residual and acc may
 * be NULL. */
int forms_build(struct engine_model *m, const char *form, json_t **doc, expr ***residual, int **acc,
                json_t **problem);

#endif
