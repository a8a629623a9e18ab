/* linalg.h — dense linear algebra for the small systems of a right-hand side.
 *
 * The matrices here are n x n with n the number of coordinates (typically 3–12) and
 * are factored at every right-hand-side evaluation. GSL's LU (gsl_linalg_LU_decomp)
 * is blocked and recursive since GSL 2.7 and costs several times more than these
 * straight loops at this size (measured in engine/DESIGN.md: 390 ns against 140-200 ns at n = 5); for larger
 * n the difference vanishes. Row-major storage, no allocation.
 */
#ifndef HAMEL_LINALG_H
#define HAMEL_LINALG_H

/* LU-factors the n x n row-major matrix a in place with partial pivoting; piv[n]
 * receives the row permutation. Returns 0, or -1 if a pivot is zero or smaller than
 * 1e-13 times the largest entry of its column (numerically singular). */
int linalg_lu(int n, double *a, int *piv);

/* Solves A x = b in place in b, with a and piv from linalg_lu. */
void linalg_lu_solve(int n, const double *a, const int *piv, double *b);

/* Cholesky-factors the symmetric positive definite n x n matrix a in place (lower
 * triangle used and overwritten). Returns 0, or -1 if it is not positive definite. */
int linalg_chol(int n, double *a);

/* Solves A x = b in place in b, with a from linalg_chol. */
void linalg_chol_solve(int n, const double *a, double *b);

#endif
