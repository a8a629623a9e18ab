/* trust.c — see trust.h. */
#include <math.h>
#include <stdlib.h>

#include "trust.h"

int model_trusted_at(const struct engine_model *m, expr *const *roots, int n, const double *in)
{
    int ns = expr_sym_count(m->ctx);
    double *vals = malloc((ns + 1) * sizeof *vals);
    if (!vals)
        return 0;
    for (int s = 0; s < ns; s++) {
        const expr_symbol *sym = expr_sym_get(m->ctx, s);
        switch (sym->cls) {
        case SYM_PARAM: vals[s] = in[sym->index]; break;
        case SYM_TIME: vals[s] = in[model_input_t(m)]; break;
        case SYM_COORD: vals[s] = in[model_input_q(m) + sym->index]; break;
        case SYM_VELOCITY:
        case SYM_SPEED: vals[s] = in[model_input_qd(m) + sym->index % (m->n ? m->n : 1)]; break;
        default: vals[s] = 0.5; break;
        }
    }
    int ok = expr_trusted_at(m->ctx, roots, n, vals);
    free(vals);
    return ok;
}

int model_constraints_trusted_at(const struct engine_model *m, const double *in)
{
    int n = m->n, count = 0;
    expr **roots = malloc(((size_t)n * n + n + m->nc + 1) * sizeof *roots);
    if (!roots)
        return 0;
    if (m->psi)
        for (int i = 0; i < n * n; i++)
            roots[count++] = m->psi[i];
    if (m->psi_t)
        for (int i = 0; i < n; i++)
            roots[count++] = m->psi_t[i];
    for (int j = 0; j < m->nc; j++)
        roots[count++] = m->cons[j].f;
    int ok = model_trusted_at(m, roots, count, in);
    free(roots);
    return ok;
}

int model_psi_evidence(const struct engine_model *m, const double *in, const double *psi)
{
    double lo = INFINITY, hi = 0.0;
    for (int i = 0; i < m->n * m->n; i++) {
        double v = fabs(psi[i]);
        if (!isfinite(v))
            return 0;
        if (v > 0.0 && v < lo)
            lo = v;
        if (v > hi)
            hi = v;
    }
    return hi <= 1e8 * lo && model_constraints_trusted_at(m, in);
}
