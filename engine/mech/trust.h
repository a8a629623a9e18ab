/* trust.h — whether a numeric test of a compiled model at a test configuration can
 * prove anything there (issue 15): the expressions it evaluates must stay finite, in
 * the safe range, without underflow, and without a function of a cancelled argument
 * (expr_trusted_at). A test at an untrusted point claims nothing. */
#ifndef HAMEL_TRUST_H
#define HAMEL_TRUST_H

#include "model.h"

/* 1 if every root (NULL ones skipped) is trustworthy at the tape input in (the layout
 * of model_input_*: parameters, t, q, q'; speeds read the q' slots), 0 otherwise. */
int model_trusted_at(const struct engine_model *m, expr *const *roots, int n, const double *in);

/* The same for Psi, Psi_t and every constraint: what the structural tests (Hamel
 * coefficients, holonomy) evaluate through the tapes. */
int model_constraints_trusted_at(const struct engine_model *m, const double *in);

/* Can Psi's values psi [n*n] at in, found singular there, be believed? Only when its
 * expressions are trustworthy at in and its nonzero entries span at most 1e8: with
 * y' + 1e17*x' (an exp of a feature far from the test points) the matrix
 * [[1, 0], [1e17, 1]] is regular but its LU's pivot test calls it singular. */
int model_psi_evidence(const struct engine_model *m, const double *in, const double *psi);

#endif
