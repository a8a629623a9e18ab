/* geom.c — the range of a model's geometry under a request's parameters (geom.h). */
#include "geom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tape.h"

void geom_take(struct engine_model *m, bodies_result *br)
{
    m->geom = br->geom;
    m->n_geom = br->n_geom;
    br->geom = NULL;
    br->n_geom = 0;
}

int geom_compile(struct engine_model *m)
{
    if (!m->n_geom)
        return 0;
    int n_roots = 0;
    for (int g = 0; g < m->n_geom; g++)
        n_roots += m->geom[g].n_roots;
    expr **roots = calloc((size_t)n_roots, sizeof *roots);
    m->geom_deps = calloc((size_t)m->n_geom * (m->np + 1), 1);
    if (!roots || !m->geom_deps) {
        free(roots);
        return -1;
    }
    int r = 0;
    for (int g = 0; g < m->n_geom; g++)
        for (int i = 0; i < m->geom[g].n_roots; i++) {
            roots[r++] = m->geom[g].e[i];
            for (int p = 0; p < m->np; p++)
                if (expr_depends(m->geom[g].e[i], m->sym_p[p]))
                    m->geom_deps[(size_t)g * m->np + p] = 1;
        }
    m->tape_geom = model_tape(m, m->ctx, roots, n_roots);
    free(roots);
    return m->tape_geom ? 0 : -1;
}

/* Whether the quantity's values v (1 or 9) are in range; the failure in words. */
static int geom__ok(const bodies_geom *g, const double *v, char *why, size_t len)
{
    if (g->kind != BODIES_GEOM_INERTIA) {
        if (v[0] > 0 && isfinite(v[0]))
            return 1;
        snprintf(why, len, "must be positive: it is %.17g", v[0]);
        return 0;
    }
    const double *a = v;
    for (int i = 0; i < 9; i++)
        if (!isfinite(a[i])) {
            snprintf(why, len, "must be finite");
            return 0;
        }
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (!(fabs(a[3 * i + j] - a[3 * j + i]) <= 1e-12 * (fabs(a[3 * i + j]) + fabs(a[3 * j + i])))) {
                snprintf(why, len, "must be symmetric: [%d][%d] = %.17g but [%d][%d] = %.17g", i, j,
                         a[3 * i + j], j, i, a[3 * j + i]);
                return 0;
            }
    /* as bodies.c: the leading minors of I + eps*trace (Sylvester, with a rounding margin) */
    double tr = a[0] + a[4] + a[8], eps = 1e-12 * fabs(tr);
    double m1 = a[0] + eps, m2 = (a[0] + eps) * (a[4] + eps) - a[1] * a[3];
    double m3 = (a[0] + eps) * ((a[4] + eps) * (a[8] + eps) - a[5] * a[7]) -
                a[1] * (a[3] * (a[8] + eps) - a[5] * a[6]) + a[2] * (a[3] * a[7] - (a[4] + eps) * a[6]);
    if (tr > 0 && m1 >= 0 && m2 >= 0 && m3 >= 0 && a[4] + eps >= 0 && a[8] + eps >= 0)
        return 1;
    snprintf(why, len,
             "must be positive (semi-)definite: diagonal %.6g, %.6g, %.6g; leading minors %.6g, %.6g, %.6g",
             a[0], a[4], a[8], m1, m2, m3);
    return 0;
}

int geom_check(const struct engine_model *m, const double *params, json_t **problem)
{
    if (!m->tape_geom || !params)
        return 0;
    int changed = 0;
    for (int p = 0; p < m->np; p++)
        if (memcmp(&params[p], &m->param_values[p], sizeof *params) != 0)
            changed = 1;
    if (!changed)
        return 0; /* checked when the model compiled */
    const tape *t = m->tape_geom;
    double *in = calloc((size_t)m->n_in + 1, sizeof *in), *work = calloc((size_t)t->n_ins + 1, sizeof *work),
           *out = calloc((size_t)t->n_outputs + 1, sizeof *out);
    int rc = 0;
    if (!in || !work || !out) {
        hamel_problem_addf(problem, HAMEL_E_INTERNAL, "parameters", "out of memory");
        rc = -1;
        goto done;
    }
    memcpy(in, params, (size_t)m->np * sizeof *in);
    tape_eval(t, in, work, out);
    int r = 0;
    for (int g = 0; g < m->n_geom; g++) {
        const bodies_geom *q = &m->geom[g];
        char why[200];
        int ok = geom__ok(q, out + r, why, sizeof why);
        r += q->n_roots;
        if (ok)
            continue;
        rc = -1;
        int named = 0;
        for (int p = 0; p < m->np; p++) {
            if (!m->geom_deps[(size_t)g * m->np + p] ||
                memcmp(&params[p], &m->param_values[p], sizeof *params) == 0)
                continue;
            char path[128];
            snprintf(path, sizeof path, "parameters.%.100s", m->params[p]);
            hamel_problem_addf(problem, HAMEL_E_BAD_REQUEST, path, "with this value %s %s", q->path, why);
            named = 1;
        }
        if (!named)
            hamel_problem_addf(problem, HAMEL_E_BAD_REQUEST, "parameters", "with these values %s %s", q->path,
                               why);
    }
done:
    free(in);
    free(work);
    free(out);
    return rc;
}

void geom_free(struct engine_model *m)
{
    free(m->geom);
    free(m->geom_deps);
    tape_free(m->tape_geom);
    m->geom = NULL;
    m->geom_deps = NULL;
    m->tape_geom = NULL;
    m->n_geom = 0;
}
