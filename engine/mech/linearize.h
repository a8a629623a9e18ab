/* linearize.h — state derivatives and linearization of the equations of motion.
 *
 * Owns POST /v1/evaluate and POST /v1/linearize (engine_evaluate, engine_linearize).
 * Both work on the state that is integrated, y = [q (n), u (k)], and on the same
 * compiled equations: the symbolically reduced tape when the model has one, else
 * Psi's LU and the dynamics tape (hamel.h). Derivatives are forward-mode: the tapes
 * run on dual numbers (tangent.h) and the tangents are carried through the linear
 * solves exactly (x = K^-1 f gives dx = K^-1 (df - dK x)), so A = d(q', u')/d(q, u)
 * is exact to rounding.
 */
#ifndef HAMEL_LINEARIZE_H
#define HAMEL_LINEARIZE_H

#include "model.h"

typedef struct lin_ws lin_ws;

/* A workspace for evaluations of m with parameter values params[np] (copied), for up
 * to nd_max tangent directions per call. numeric != 0 ignores the reduced tape (for
 * cross-checks). Returns NULL when out of memory or when the model has nonlinear
 * constraints not in the reduced form (model.h: nl_reduced). In the reduced form q' is
 * the reduced tape's (explicit kinematics) or Newton's (the numeric path), and its
 * derivatives the implicit function theorem's: dq' = -(dG/dq')^-1 dG/dx with G the
 * speeds' and constraints' residual, dG/dq' = Psi. Caller frees. */
lin_ws *lin_ws_new(const struct engine_model *m, const double *params, int nd_max, int numeric);

/* Frees a workspace. Accepts NULL. */
void lin_ws_free(lin_ws *w);

/* Nonlinear constraints solved by Newton (no explicit kinematics): the starting point
 * qd[n] of the next solve of q' from (q, u), which picks the branch (z'^2 = a^2 v^2 has
 * two). Each solve starts from the last solution. Does nothing for other models. */
void lin_ws_set_guess(lin_ws *w, const double *qd);

/* The right-hand side f(t, y) = [q', u'] (n + k values) at t, q, u and its
 * derivatives df[(n + k) * nd] along nd (<= nd_max) directions. seed[(1 + n + k + np)
 * * nd] gives the direction of each variable: t, then q_1..q_n, u_1..u_k, then the
 * parameters (variable v, direction d at seed[v * nd + d]). Returns 0, or -1 where
 * Psi or the mass matrix is singular or a tape has no tangent rule. */
int lin_rhs_tangent(lin_ws *w, double t, const double *q, const double *u, const double *seed, int nd,
                    double *f, double *df);

/* The Jacobians at (t, q, u) of the model with parameter values params[np]: f[N] =
 * [q', u'], A[N*N] = df/d(q, u) row-major (N = n + k), and B[N*n_inputs] = df/dp for
 * the parameters of index inputs[0..n_inputs) (B may be NULL when n_inputs is 0), and
 * ft[N] = df/dt when ft is not NULL. numeric != 0 ignores the reduced tape. Returns 0,
 * or -1 (singular or out of memory). */
int lin_jacobian(const struct engine_model *m, const double *params, double t, const double *q,
                 const double *u, const int *inputs, int n_inputs, int numeric, double *f, double *A,
                 double *B, double *ft);

/* Internal, for tests: lin_jacobian with at most `chunk` tangent directions per pass
 * (lin_jacobian takes as many as fit in its slot-memory cap). */
int lin__jacobian(const struct engine_model *m, const double *params, double t, const double *q,
                  const double *u, const int *inputs, int n_inputs, int numeric, double *f, double *A,
                  double *B, double *ft, int chunk);

struct budget;

/* lin__jacobian from Newton's start qd[n] (nonlinear constraints solved by Newton: the
 * branch of q'; NULL: the workspace's default) under a budget (NULL: none) checked
 * before each pass of `chunk` directions (chunk <= 0: lin_jacobian's). Returns 0, -1
 * (singular, out of memory), or -2 when the budget stopped (deadline, cancel flag). */
int lin_jacobian_at(const struct engine_model *m, const double *params, double t, const double *q,
                    const double *u, const double *qd, const int *inputs, int n_inputs, int numeric,
                    double *f, double *A, double *B, double *ft, int chunk, struct budget *bud);

/* The eigenvalues of the N x N row-major matrix A (gsl_eigen_nonsymmv), sorted by real
 * part descending, then imaginary part descending, into re[N], im[N]. Returns 0, or
 * -1 (no convergence, out of memory). */
int lin_eigenvalues(int N, const double *A, double *re, double *im);

#endif
