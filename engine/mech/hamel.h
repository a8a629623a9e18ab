/* hamel.h — the Hamel coefficients and the Boltzmann–Hamel equations of motion.
 *
 * With quasi-velocities u = Psi(q,t) q' + Psi_t(q,t) (speeds first, then the linear
 * constraints, whose u vanish) and Phi = Psi^-1, the Hamel coefficients are
 * (Greenwood 5.57, 5.58)
 *   gamma^j_rl = sum_ik (dPsi_ji/dq_k - dPsi_jk/dq_i) Phi_kl Phi_ir,
 *   gamma^j_r  = sum_ik (dPsi_ji/dq_k - dPsi_jk/dq_i) Phi_kt Phi_ir
 *              + sum_i (dPsi_ji/dt - dPsi_jt/dq_i) Phi_ir,   Phi_t = -Phi Psi_t.
 *
 * The equations of motion on the k independent speeds are the Boltzmann–Hamel
 * equations (Greenwood 5.94). hamel_rhs evaluates them in their projected form
 *   (Phi_S^T M Phi_S) u' = Phi_S^T (Q - dV/dq + dT/dq - D(dT/dq') + M Phi b),
 *   q' = Phi [u; 0] - Phi Psi_t,
 * with M = d2T/dq'dq', b = D(Psi q' + Psi_t) (D: the total time derivative at fixed
 * q'), Phi_S the first k columns of Phi. Expanding d/dt(dT/du_r) and dT/dtheta_r of
 * (5.94) through q' = Phi u + Phi_t gives exactly this system: the gamma terms of
 * (5.94) are the part of Phi_S^T (d/dt(M q') ...) that comes from d Phi / dt. Phi is
 * obtained numerically (LU with partial pivoting) at each evaluation, unless the model
 * has an exact symbolic reduction (reduce.h), whose tape then gives q', M* and F
 * directly; see DESIGN.md.
 * hamel_bh_residual evaluates (5.94) term by term with the gammas, as a check.
 */
#ifndef HAMEL_HAMEL_H
#define HAMEL_HAMEL_H

#include "model.h"

typedef struct hamel_ws hamel_ws;

/* A workspace for one thread's evaluations of model m with the given parameter values
 * (np of them, copied). Allocates everything the right-hand side needs once. Caller
 * frees with hamel_ws_free. Borrows m, which must outlive it. */
hamel_ws *hamel_ws_new(const struct engine_model *m, const double *params);

/* Frees a workspace. Accepts NULL. */
void hamel_ws_free(hamel_ws *w);

/* The parameter values a workspace evaluates with (borrowed, the model's np). */
const double *hamel_ws_params(const hamel_ws *w);

/* Each constraint's scale at (t, q, q'): max_i |df_j/dq'_i| (1 where that is 0 or not
 * finite). A residual |f_j| divided by it is in the units of a velocity whatever factor
 * the constraint was written with (1e-12*(y' - x') is y' - x'). Uses w's scratch, not its
 * state. 0, or -1 out of memory (the scales then 1). */
int hamel_constraint_scales(hamel_ws *w, double t, const double *q, const double *qd, double *scale);

/* How far each constraint may miss at the state (t, q, q'), as a simulation's initial
 * qdot and a linearization's or evaluation's state are checked: limit[j] = tol *
 * max |q'| * scale[j] (no floor of 1: a model at 1e-9 m/s is checked as one at 1 m/s). */
int hamel_residual_limits(hamel_ws *w, double t, const double *q, const double *qd, double tol,
                          double *limit);

/* With numeric != 0, hamel_rhs ignores the symbolically reduced equations and
 * inverts Psi numerically at every evaluation (the two must agree; tests compare);
 * with numeric == 2 it also ignores the sparsity (dense LU of Psi, dense products). */
void hamel_ws_set_numeric(hamel_ws *w, int numeric);

/* The code tier the right-hand side of w runs on: "native", "tcc" or "interp". */
const char *hamel_ws_tier(const hamel_ws *w);

/* M*^-1 (k x k, row-major) of a model whose M* depends on the parameters only, computed
 * exactly as hamel_rhs computes it at its first evaluation. Returns 0, or -1 (no such
 * M*, or singular). For the native tier, which folds it into the code. */
int hamel_const_mass_inverse(const struct engine_model *m, const double *params, double *minv);

/* Whether the symbolically reduced equations (tape_fast) agree with the numeric path
 * at pseudo-random states (1 also when there is no tape_fast). The model compiler drops
 * a reduction that does not: a wrong simplification must never reach a user.
 * *numeric_ok: at how many of the states the numeric path could be evaluated. */
int hamel_fast_agrees(const struct engine_model *m, int *numeric_ok);
/* Finds the gamma^j_rl and gamma^j_r that are not identically zero (numerically, at
 * several random configurations, against the rounding scale of their sums) and sets
 * each linear constraint's gamma_free flag (a first-order test, not integrability:
 * see holonomy.h). Called by the model compiler. */
int hamel_structure(struct engine_model *m);

/* The Hamel coefficients at (t, q): gamma[(j*n + r)*n + l], gamma_t[j*n + r]. Either
 * output may be NULL. Returns 0, or -1 where Psi is singular. */
int hamel_gamma(hamel_ws *w, double t, const double *q, double *gamma, double *gamma_t);

/* The kinematics q' = Phi [u; 0] + Phi_t at (t, q). With nonlinear constraints in the
 * reduced form (m->nl_reduced) q' solves u = Psi_S q' + Psi_St, the linear
 * constraints and f(q, q', t) = 0 by Newton's method from the last solution (or the
 * one set by hamel_ws_set_guess). Returns 0 or -1 (Psi singular, no convergence). */
int hamel_qdot(hamel_ws *w, double t, const double *q, const double *u, double *qd);

/* Nonlinear constraints in the reduced form: the distinct solutions q' of the speeds u
 * at (t, q), found by Newton's method from deterministic starting points spread over
 * signs and scales. Writes up to max of them to roots[max][n] and returns how many were
 * found in all (0: none; more than one: the speeds do not determine q'). On return the
 * guess for hamel_qdot is the first root (when there is one). n <= 256. */
int hamel_qdot_roots(hamel_ws *w, double t, const double *q, const double *u, double *roots, int max);

/* Newton's starting point for the next hamel_qdot (nonlinear constraints): q' [n]. */
void hamel_ws_set_guess(hamel_ws *w, const double *qd);

/* Why hamel_rhs fails at (t, q, u), for a run's problem document: Psi singular there (or
 * no q' for nonlinear constraints), M or the forcing not finite, or M* singular (naming
 * the speed without inertia when one has none). Writes the clause to why[size] and
 * returns 2 for M* singular, 1 for the others; returns 0 (why untouched) when none of
 * these holds. */
int hamel_explain(hamel_ws *w, double t, const double *q, const double *u, char *why, size_t size);

/* The speeds u_r = Psi_r q' + Psi_rt for a given q'. Returns 0. */
int hamel_speeds(hamel_ws *w, double t, const double *q, const double *qd, double *u);

/* The right-hand side of the state y = [q (n), u (k)] for integ.h; params is the
 * hamel_ws. Returns GSL_SUCCESS or GSL_EBADFUNC (Psi or the mass matrix singular). */
int hamel_rhs(double t, const double *y, double *dydt, void *params);

/* Energy and constraint values at (t, q, q'): out[0] = energy, out[1 + j] = f_j. */
void hamel_observe(hamel_ws *w, double t, const double *q, const double *qd, double *out);

/* Whether the mass matrix M = d2T/dq'dq' at (t, q, q') is positive semi-definite (up to
 * 1e-9 of its largest diagonal entry): 1, 0 when it has a negative eigenvalue (a mass or
 * an inertia out of range), -1 when it could not be evaluated. Uses w's scratch. */
int hamel_mass_semidefinite(hamel_ws *w, double t, const double *q, const double *qd);

/* The residual of the Boltzmann–Hamel equations (5.94) written out with the gammas,
 * at state y and speed derivatives udot (k): res[r] for r < k. For checks. */
int hamel_bh_residual(hamel_ws *w, double t, const double *y, const double *udot, double *res);

/* The singularity watch. hamel_ws_select makes the workspace use the velocities
 * q'_cols[r] (k of them) as the speeds instead of the model's own speed rows (NULL
 * restores them); the symbolically reduced tape is then not used. Copies cols. */
void hamel_ws_select(hamel_ws *w, const int *cols);

/* The 1-norm condition number of Psi (with the selection in force) and its
 * determinant at (t, q). Returns 0, or -1 (cond = inf) where Psi is singular. With the
 * model's own speeds and Psi's block structure (model.h: sparse) it is computed on the
 * blocks, each column of Psi^-1 through the blocks it reaches only (O(n^2) at most,
 * rather than a dense LU and n solves: the watch calls it after every step); the same
 * number up to rounding. */
int hamel_psi_condition(hamel_ws *w, double t, const double *q, double *cond, double *det);

/* The best-conditioned choice of k velocities as speeds at (t, q): QR with column
 * pivoting on the linear-constraint rows (each scaled to its largest entry) picks the
 * dependent velocities; cols[k] receives the others, increasing. Returns 0 or -1. */
int hamel_choose_speeds(hamel_ws *w, double t, const double *q, int *cols);

/* det Psi up to a nonzero number, from the model's one expression pivot (model.h:
 * tape_det), at (t, q): the watch's cheap test in the model's own chart. Returns 0, or
 * -1 when there is no such pivot or a selection is in force. */
int hamel_det_pivot(hamel_ws *w, double t, const double *q, double *d);

/* The Boltzmann–Hamel projection at one state: the one assembly of hamel_rhs's dense path
 * and of linearize.c's numeric path (whose tangent rules differentiate it line by line).
 * From Psi's LU (lu, piv) and the dynamics tape's outputs dyn (M's upper triangle, then
 * g [n], then b [n]) it fills M [n*n] (full), a = Psi^-1 b [n], X (the columns of Phi_S,
 * X_r at X + r*n), h = g + M a [n], MX = M X (column r at MX + r*n), F_r = X_r . h [k]
 * and M*_rs = X_r . M X_s [k*k]. Allocates nothing: every array is the caller's. */
void hamel_project(int n, int k, const double *lu, const int *piv, const double *dyn, double *M, double *a,
                   double *X, double *h, double *MX, double *F, double *Ms);

#endif
