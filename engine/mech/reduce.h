/* reduce.h — the equations of motion reduced symbolically to the independent speeds.
 *
 * Phi = Psi^-1 is found by Gauss–Jordan elimination on expressions, block by block in
 * the block-triangular order of Psi's sparsity pattern (reduce_block_triangular).
 * Within a block, nonzero numeric pivots come first, then the adjugate of what is
 * left (at most 4 x 4), else expression pivots. A block's pivots multiply to its own
 * determinant, a factor of det Psi: with at most one expression pivot (or adjugate)
 * per block, every division is by something that vanishes only where Psi is
 * singular, so the symbolic Phi is as accurate as a numeric inverse everywhere: the
 * reduction is then "exact" and the integrator may use it. Otherwise a symbolic pivot
 * can vanish where Psi is regular (the knife edge's cos(phi) at phi = pi/2), so the
 * integrator keeps the numeric LU; the expressions are still shown to people
 * (equations.c).
 *
 * From Phi: the kinematics q' = Phi_S u + Phi_t, the mass matrix
 * M* = Phi_S^T (M Phi_S) and the forcing
 * F_r = sum_i Phi_ir (Q - dV/dq + dT/dq - D(dT/dq') + M Phi b)_i, everything on the
 * kinematics, so that M*(q, t) u' = F(q, u, t). Expressions of at most 400 tree nodes
 * are expanded (simplify.c); larger ones stay shared DAGs.
 */
#ifndef HAMEL_REDUCE_H
#define HAMEL_REDUCE_H

#include "model.h"

typedef struct reduce_result {
    int have_phi;              /* Phi was found within the budget */
    int exact;                 /* at most one expression pivot: safe for integration */
    int pivots_expr;           /* pivots that are expressions, not numbers */
    expr *pivot_expr;          /* the last of them: with pivots_expr == 1, det Psi up to a number */
    int worst_block_pivots;    /* the most expression pivots in one block of Psi */
    int blocks, largest_block; /* Psi's block-triangular structure */
    expr **phi;                /* [n*n] row-major */
    expr **kin;                /* [n] q_i' in terms of (q, u, t) */
    expr **mass;               /* [k*k] */
    expr **forcing;            /* [k] */
    expr *tstar;               /* T with the kinematics substituted */
    char why[200];             /* when !have_phi */
} reduce_result;

/* Derives the reduced equations within `budget` new expression nodes. Fills *out
 * (free with reduce_result_free). Returns 0, or -1 on allocation failure. */
int reduce_derive(struct engine_model *m, size_t budget, reduce_result *out);

/* The block-triangular form of an n x n sparsity pattern nz (row-major, nonzero =
 * structurally nonzero): a maximum matching, then the strongly connected components
 * of the graph it induces (Dulmage–Mendelsohn's fine decomposition). block[i] is the
 * block of row i, numbered in an order in which the blocks can be eliminated one after
 * the other (the rows of a block have nonzeros only in its own columns and those of
 * earlier blocks); col_of[i] is the column matched to row i. Returns the number of
 * blocks, 0 when the pattern is structurally singular, -1 on allocation failure. */
int reduce_block_triangular(int n, const unsigned char *nz, int *block, int *col_of);

/* Frees the arrays of a result (the nodes belong to the model's context). */
void reduce_result_free(reduce_result *r);

#endif
