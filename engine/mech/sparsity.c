/* sparsity.c — the structure of Psi and M (sparsity.h). */
#include "sparsity.h"

#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "reduce.h"
#include "tape.h"

void hamel_sparse_free(struct hamel_sparse *sp)
{
    if (!sp)
        return;
    free(sp->start);
    free(sp->row);
    free(sp->col);
    free(sp->lu_off);
    free(sp->off_ptr);
    free(sp->off_col);
    free(sp->m_ptr);
    free(sp->m_col);
    free(sp->m_at);
    free(sp->reach_ptr);
    free(sp->reach);
    free(sp->ms_r);
    free(sp->ms_s);
    free(sp->mc_start);
    free(sp->mc_idx);
    free(sp->xs_ptr);
    free(sp->xs_idx);
    free(sp->mxs_ptr);
    free(sp->mxs_idx);
    free(sp->cnz_ptr);
    free(sp->cnz_row);
    free(sp->mq_start);
    free(sp->mq_idx);
    free(sp);
}

/* Nonzero unless output o of tape t is the constant 0. */
static int output_nonzero(const tape *t, int o)
{
    const tape_ins *ins = &t->ins[t->outputs[o]];
    return !(ins->op == TAPE_CONST && ins->c == 0.0);
}

int sparse_find_root(int *parent, int a)
{
    while (parent[a] != a)
        a = parent[a] = parent[parent[a]];
    return a;
}

/* Which entries of M* = Phi_S^T M Phi_S can be nonzero (column r of Phi_S lives in
 * the blocks reach[r] reaches, M's pattern spreads it), and the connected components
 * of that pattern, solved one by one. */
static int mass_pattern(struct hamel_sparse *sp, int n, int k)
{
    unsigned char *sx = calloc((size_t)k * n + 1, 1), *smx = calloc((size_t)k * n + 1, 1);
    int *parent = calloc(k + 1, sizeof *parent);
    sp->ms_r = calloc((size_t)k * (k + 1) / 2 + 1, sizeof *sp->ms_r);
    sp->ms_s = calloc((size_t)k * (k + 1) / 2 + 1, sizeof *sp->ms_s);
    sp->mc_start = calloc(k + 2, sizeof *sp->mc_start);
    sp->mc_idx = calloc(k + 1, sizeof *sp->mc_idx);
    sp->xs_ptr = calloc(k + 1, sizeof *sp->xs_ptr);
    sp->xs_idx = calloc((size_t)k * n + 1, sizeof *sp->xs_idx);
    sp->mxs_ptr = calloc(k + 1, sizeof *sp->mxs_ptr);
    sp->mxs_idx = calloc((size_t)k * n + 1, sizeof *sp->mxs_idx);
    int rc = -1;
    if (!sx || !smx || !parent || !sp->ms_r || !sp->ms_s || !sp->mc_start || !sp->mc_idx || !sp->xs_ptr ||
        !sp->xs_idx || !sp->mxs_ptr || !sp->mxs_idx)
        goto done;
    for (int r = 0; r < k; r++) {
        unsigned char *x = sx + (size_t)r * n, *mx = smx + (size_t)r * n;
        for (int j = sp->reach_ptr[r]; j < sp->reach_ptr[r + 1]; j++) {
            int b = sp->reach[j];
            for (int q = sp->start[b]; q < sp->start[b + 1]; q++)
                x[sp->col[q]] = 1;
        }
        for (int l = 0; l < n; l++)
            if (x[l])
                for (int j = sp->m_ptr[l]; j < sp->m_ptr[l + 1]; j++)
                    mx[sp->m_col[j]] = 1;
        parent[r] = r;
    }
    int nx = 0, nmx = 0;
    for (int r = 0; r < k; r++) {
        sp->xs_ptr[r] = nx;
        sp->mxs_ptr[r] = nmx;
        for (int i = 0; i < n; i++) {
            if (sx[(size_t)r * n + i])
                sp->xs_idx[nx++] = i;
            if (smx[(size_t)r * n + i])
                sp->mxs_idx[nmx++] = i;
        }
    }
    sp->xs_ptr[k] = nx;
    sp->mxs_ptr[k] = nmx;
    for (int r = 0; r < k; r++)
        for (int s2 = 0; s2 <= r; s2++) {
            const unsigned char *x = sx + (size_t)r * n, *mx = smx + (size_t)s2 * n;
            int meet = 0;
            for (int i = 0; i < n && !meet; i++)
                meet = x[i] && mx[i];
            if (!meet && s2 != r)
                continue;
            sp->ms_r[sp->nms] = r;
            sp->ms_s[sp->nms++] = s2;
            parent[sparse_find_root(parent, r)] = sparse_find_root(parent, s2);
        }
    int t = 0;
    for (int root = 0; root < k; root++) {
        if (sparse_find_root(parent, root) != root)
            continue;
        sp->mc_start[sp->nmc++] = t;
        for (int r = 0; r < k; r++)
            if (sparse_find_root(parent, r) == root)
                sp->mc_idx[t++] = r;
    }
    sp->mc_start[sp->nmc] = t;
    rc = 0;
done:
    free(sx);
    free(smx);
    free(parent);
    return rc;
}

/* The positions of each block of Psi: its rows and columns in order, and the offsets of
 * the blocks' LU factors. */
static void sparse_blocks(struct hamel_sparse *sp, int n, const int *block, const int *col_of, int *pos)
{
    int p = 0;
    for (int b = 0; b < sp->nblocks; b++) {
        sp->start[b] = p;
        for (int i = 0; i < n; i++)
            if (block[i] == b) {
                pos[i] = p;
                sp->row[p] = i;
                sp->col[p++] = col_of[i];
            }
        int size = p - sp->start[b];
        sp->lu_off[b] = sp->lu_len;
        sp->lu_len += size * size;
    }
    sp->start[sp->nblocks] = n;
}

/* The off-block entries of Psi by position and the entries of M that can be nonzero. */
static void sparse_entries(struct hamel_sparse *sp, const struct engine_model *m, const unsigned char *nz,
                           const int *block, const int *col_of, int *pos)
{
    int n = m->n;
    /* the column of each position's block, to tell off-block entries */
    int *col_block = pos; /* reuse: block of each column */
    for (int i = 0; i < n; i++)
        col_block[col_of[i]] = block[i];
    int t = 0;
    for (int q = 0; q < n; q++) {
        int i = sp->row[q];
        sp->off_ptr[q] = t;
        for (int j = 0; j < n; j++)
            if (nz[i * n + j] && col_block[j] != block[i])
                sp->off_col[t++] = j;
    }
    sp->off_ptr[n] = t;
    t = 0;
    for (int i = 0; i < n; i++) {
        sp->m_ptr[i] = t;
        for (int l = 0; l < n; l++) {
            int a = i < l ? i : l, c = i < l ? l : i;
            int at = a * n - a * (a - 1) / 2 + (c - a); /* packed upper triangle, row a */
            if (output_nonzero(m->tape_dyn, at)) {
                sp->m_col[t] = l;
                sp->m_at[t++] = at;
            }
        }
    }
    sp->m_ptr[n] = t;
}

/* Psi^-1 e_r (for r < k: Phi_S e_r) is nonzero only in the blocks reached from row r;
 * every row's (the watch's condition number takes all columns of Psi^-1). -1 when out
 * of memory. */
static int sparse_reach(struct hamel_sparse *sp, int n)
{
    int nb = sp->nblocks;
    sp->reach_ptr = calloc(n + 1, sizeof *sp->reach_ptr);
    sp->reach = calloc((size_t)n * nb + 1, sizeof *sp->reach);
    unsigned char *hit = calloc(n, 1); /* by column */
    if (!sp->reach_ptr || !sp->reach || !hit) {
        free(hit);
        return -1;
    }
    int t = 0;
    for (int r = 0; r < n; r++) {
        sp->reach_ptr[r] = t;
        memset(hit, 0, n);
        for (int b = 0; b < nb; b++) {
            int reached = 0;
            for (int q = sp->start[b]; q < sp->start[b + 1] && !reached; q++) {
                reached = sp->row[q] == r;
                for (int x = sp->off_ptr[q]; x < sp->off_ptr[q + 1] && !reached; x++)
                    reached = hit[sp->off_col[x]];
            }
            if (!reached)
                continue;
            sp->reach[t++] = b;
            for (int q = sp->start[b]; q < sp->start[b + 1]; q++)
                hit[sp->col[q]] = 1;
        }
    }
    sp->reach_ptr[n] = t;
    free(hit);
    return 0;
}

/* The sign of the permutation p -> perm[p] of 0..n-1, from its cycles (a cycle of
 * length L is L - 1 transpositions); 0 past ENGINE_COORDINATES_CEILING, which no model
 * reaches. */
static int permutation_sign(int n, const int *perm)
{
    unsigned char seen[ENGINE_COORDINATES_CEILING] = {0};
    int sign = 1;
    if (n > ENGINE_COORDINATES_CEILING)
        return 0;
    for (int p = 0; p < n; p++) {
        int len = 0;
        for (int c = p; !seen[c]; c = perm[c], len++)
            seen[c] = 1;
        if (len > 1 && (len - 1) % 2)
            sign = -sign;
    }
    return sign;
}

/* nmq, mq_start, mq_idx from M's pattern (m_ptr, m_col): coordinates joined by an entry
 * of M that can be nonzero, each component's listed increasing; -1 when out of memory. */
static int mass_components(struct hamel_sparse *sp, int n)
{
    int *parent = calloc(n, sizeof *parent), *comp = calloc(n, sizeof *comp),
        *fill = calloc(n + 1, sizeof *fill);
    sp->mq_start = calloc(n + 1, sizeof *sp->mq_start);
    sp->mq_idx = calloc(n + 1, sizeof *sp->mq_idx);
    int rc = -1;
    if (!parent || !comp || !fill || !sp->mq_start || !sp->mq_idx)
        goto done;
    for (int i = 0; i < n; i++)
        parent[i] = i;
    for (int i = 0; i < n; i++)
        for (int j = sp->m_ptr[i]; j < sp->m_ptr[i + 1]; j++)
            parent[sparse_find_root(parent, sp->m_col[j])] = sparse_find_root(parent, i);
    for (int i = 0; i < n; i++)
        fill[i] = -1; /* by root: its component's number */
    for (int i = 0; i < n; i++) {
        int root = sparse_find_root(parent, i);
        if (fill[root] < 0)
            fill[root] = sp->nmq++;
        comp[i] = fill[root];
        sp->mq_start[comp[i] + 1]++;
    }
    for (int c = 0; c < sp->nmq; c++) {
        sp->mq_start[c + 1] += sp->mq_start[c];
        fill[c] = sp->mq_start[c];
    }
    for (int i = 0; i < n; i++)
        sp->mq_idx[fill[comp[i]]++] = i;
    rc = 0;
done:
    free(parent);
    free(comp);
    free(fill);
    return rc;
}

/* cnz_ptr, cnz_row from Psi's pattern nz (row-major); -1 when out of memory. */
static int column_rows(struct hamel_sparse *sp, int n, const unsigned char *nz)
{
    int t = 0;
    sp->cnz_ptr = calloc(n + 1, sizeof *sp->cnz_ptr);
    for (size_t i = 0; i < (size_t)n * n; i++)
        t += nz[i] != 0;
    sp->cnz_row = calloc(t + 1, sizeof *sp->cnz_row);
    if (!sp->cnz_ptr || !sp->cnz_row)
        return -1;
    t = 0;
    for (int l = 0; l < n; l++) {
        sp->cnz_ptr[l] = t;
        for (int i = 0; i < n; i++)
            if (nz[(size_t)i * n + l])
                sp->cnz_row[t++] = i;
    }
    sp->cnz_ptr[n] = t;
    return 0;
}

struct hamel_sparse *hamel_sparse_new(const struct engine_model *m)
{
    int n = m->n;
    size_t nn = (size_t)n * n;
    struct hamel_sparse *sp = calloc(1, sizeof *sp);
    unsigned char *nz = calloc(nn, 1);
    int *block = calloc(n, sizeof *block), *col_of = calloc(n, sizeof *col_of), *pos = calloc(n, sizeof *pos);
    if (!sp || !nz || !block || !col_of || !pos)
        goto fail;
    for (size_t i = 0; i < nn; i++)
        nz[i] = (unsigned char)output_nonzero(m->tape_psi, (int)i);
    int nb = reduce_block_triangular(n, nz, block, col_of);
    if (nb <= 0)
        goto fail;
    sp->nblocks = nb;
    sp->start = calloc(nb + 1, sizeof *sp->start);
    sp->lu_off = calloc(nb, sizeof *sp->lu_off);
    sp->row = calloc(n, sizeof *sp->row);
    sp->col = calloc(n, sizeof *sp->col);
    sp->off_ptr = calloc(n + 1, sizeof *sp->off_ptr);
    sp->off_col = calloc(nn + 1, sizeof *sp->off_col);
    sp->m_ptr = calloc(n + 1, sizeof *sp->m_ptr);
    sp->m_col = calloc(nn + 1, sizeof *sp->m_col);
    sp->m_at = calloc(nn + 1, sizeof *sp->m_at);
    if (!sp->start || !sp->lu_off || !sp->row || !sp->col || !sp->off_ptr || !sp->off_col || !sp->m_ptr ||
        !sp->m_col || !sp->m_at)
        goto fail;
    sparse_blocks(sp, n, block, col_of, pos);
    sparse_entries(sp, m, nz, block, col_of, pos);
    if (sparse_reach(sp, n) < 0)
        goto fail;
    sp->sign = permutation_sign(n, sp->row) * permutation_sign(n, sp->col);
    if (column_rows(sp, n, nz) < 0 || mass_components(sp, n) < 0)
        goto fail;
    if (mass_pattern(sp, n, m->k) < 0)
        goto fail;
    free(nz);
    free(block);
    free(col_of);
    free(pos);
    return sp;
fail:
    hamel_sparse_free(sp);
    free(nz);
    free(block);
    free(col_of);
    free(pos);
    return NULL;
}
