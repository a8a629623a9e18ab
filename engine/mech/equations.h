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

/* Keeps the reduction for equations_derive on first request (equations_ensure), so
 * that a compilation does not print equations nobody may ask for: takes ownership of
 * red's arrays (red keeps none; the kinematics and Phi already moved to m->red_kin
 * and m->red_phi are borrowed from there) and drops any document made before.
 * Returns 0, or -1 on allocation failure. */
int equations_defer(struct engine_model *m, reduce_result *red);

/* Adds the acceleration symbols u_s' that equations_mass_lhs adds, now: at compile
 * time, where the equations used to be printed, so that the symbols keep their
 * indices and a compiled model's symbol table never grows (simulations read it
 * without a lock, watch.c). */
void equations_accel_symbols(struct engine_model *m);

/* Derives m->equations from the deferred reduction if that has not been done yet.
 * The caller holds m->forms_lock (it adds nodes and the acceleration symbols to
 * m->ctx, as the forms do). Returns 0, or -1 on allocation failure. */
int equations_ensure(struct engine_model *m);

/* Frees the deferred reduction, if any. */
void equations_pending_free(struct engine_model *m);

/* A new derived-equations document with its head: model_id, formulation, order (the
 * row names) and the speed definitions. Caller owns it. */
json_t *equations_head(const struct engine_model *m, const char *formulation);

/* Stores the document as JSON text in m->equations (replacing any) and releases it
 * (takes ownership of eq). Returns 0, or -1 on allocation failure. */
int equations_store(struct engine_model *m, json_t *eq);

/* The left-hand side M*_r. u' = sum_s M*_rs u_s' of one equation, given its row
 * mass_row[0..k) of the mass matrix; each entry is kept whole so that the
 * accelerations stay grouped ((2/5*R^2*m + R^2*m*sin(theta)^2)*psid', not two terms).
 * Adds the acceleration symbols u_s' to m->ctx when missing. NULL when out of memory. */
expr *equations_mass_lhs(struct engine_model *m, expr *const *mass_row);

#endif
