/* sparsity.h — the structure of Psi and M that the Boltzmann–Hamel evaluation exploits
 * (hamel.c): Psi's block-triangular form (its diagonal blocks factored alone, each column
 * of Psi^-1 through the blocks it reaches), M's pattern and the connected components of
 * M's and M*'s patterns (each solved alone), and which entries of M* and of Phi_S can be
 * nonzero. Built once per model from the tapes' constant-zero outputs, when
 * hamel_structure runs (compile); read-only afterwards, so shared by every workspace and
 * thread that evaluates the model. */
#ifndef HAMEL_SPARSITY_H
#define HAMEL_SPARSITY_H

struct engine_model;

struct hamel_sparse {
    int nblocks;
    int *start;                  /* [nblocks+1]: positions of each block in row[], col[] */
    int *row, *col;              /* [n]: the rows in block order and their matched columns */
    int *lu_off;                 /* [nblocks]: offset of each block's LU in the packed factors */
    int lu_len;                  /* doubles of packed factors */
    int *off_ptr, *off_col;      /* [n+1], [..]: columns of earlier blocks in the row at each position */
    int *m_ptr, *m_col;          /* [n+1], [..]: M's nonzeros, row by row (symmetric, both halves) */
    int *m_at;                   /* [..]: where each is in tape_dyn's packed upper triangle */
    int *reach_ptr, *reach;      /* [n+1], [..]: the blocks column r of Psi^-1 can be nonzero in
                                  * (r < k: the columns of Phi_S) */
    int sign;                    /* the sign of the permutations: det Psi = sign * prod det(block) */
    int *cnz_ptr, *cnz_row;      /* [n+1], [..]: the rows of each column of Psi that can be nonzero,
                                  * increasing */
    int nmq, *mq_start, *mq_idx; /* M's pattern's connected components: their coordinates, increasing */
    int nms, *ms_r, *ms_s;       /* the entries (r, s), s <= r, of M* that can be nonzero */
    int nmc, *mc_start, *mc_idx; /* M*'s pattern's connected components: their speeds */
    int *xs_ptr, *xs_idx;        /* [k+1], [..]: rows where column r of Phi_S can be nonzero */
    int *mxs_ptr, *mxs_idx;      /* [k+1], [..]: ... and column r of M Phi_S */
};

/* The sparsity the numeric right-hand side exploits: Psi's block-triangular form
 * (reduce_block_triangular on the entries of tape_psi that are not the constant 0)
 * and the pattern of M. With it each evaluation factors only Psi's diagonal blocks
 * (dense LU with partial pivoting in each, exact substitution between them) and the
 * products with M and Phi_S skip their zeros. Called by hamel_structure (m's tapes
 * built); NULL: no block structure found (the dense path is used) or out of memory. */
struct hamel_sparse *hamel_sparse_new(const struct engine_model *m);

void hamel_sparse_free(struct hamel_sparse *sp);

/* The root of a in a union-find forest (parent[i] == i at a root), halving the path. */
int sparse_find_root(int *parent, int a);

#endif
