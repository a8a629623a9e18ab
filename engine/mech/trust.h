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

/* What Psi's values psi [n*n] at the test configuration in say: 1 regular (after
 * equilibrating rows and columns: [[1, 0], [1e17, 1]], from an exp of a feature far
 * from the test points, is regular though its LU's pivot test calls it singular),
 * -1 singular (and its expressions are trustworthy there), 0 nothing. */
int model_psi_verdict(const struct engine_model *m, const double *in, const double *psi);

#endif
