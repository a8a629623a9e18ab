/* trust.c — see trust.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "linalg.h"

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

int model_psi_verdict(const struct engine_model *m, const double *in, const double *psi)
{
    int n = m->n;
    double *a = malloc(((size_t)n * n + 1) * sizeof *a);
    int *piv = malloc((n + 1) * sizeof *piv);
    int verdict = 0;
    if (!a || !piv)
        goto done;
    memcpy(a, psi, (size_t)n * n * sizeof *a);
    for (int i = 0; i < n * n; i++)
        if (!isfinite(a[i]))
            goto done; /* proves nothing */
    /* equilibrate rows, then columns: D1 Psi D2 is regular exactly when Psi is */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            double mx = 0.0;
            for (int j = 0; j < n; j++)
                mx = fmax(mx, fabs(pass ? a[j * n + i] : a[i * n + j]));
            if (mx > 0.0)
                for (int j = 0; j < n; j++)
                    *(pass ? &a[j * n + i] : &a[i * n + j]) /= mx;
        }
    if (linalg_lu(n, a, piv) == 0)
        verdict = 1;
    else if (model_constraints_trusted_at(m, in))
        verdict = -1;
done:
    free(a);
    free(piv);
    return verdict;
}
