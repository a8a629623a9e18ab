/* equations.c — the derived equations (API.md §5), symbolically.
 *
 * Phi = Psi^-1 by Gauss–Jordan elimination on expressions, each pivot the simplest
 * entry that is not identically zero (numeric test). Then the kinematics
 * q' = Phi_S u + Phi_t, T*(q, u, t) = T with the kinematics substituted, the mass
 * matrix M*_rs = d2(T*)/du_r du_s, the forcing F_r = Phi_S^T (Q - dV/dq + dT/dq -
 * D(dT/dq') + M Phi b) on the kinematics (the right-hand side hamel.h integrates),
 * and the gamma^j_rl of Greenwood (5.57) that are not identically zero.
 *
 * This is for people to read: the integrator never uses these expressions (it
 * inverts Psi numerically, which stays accurate where a symbolic pivot vanishes).
 */
#include "equations.h"

#include <stdlib.h>
#include <string.h>

static size_t node_weight(const expr *e)
{
    if (e->kind == EXPR_NUM)
        return 0;
    if (e->kind == EXPR_SYM)
        return 1;
    size_t w = 1;
    for (int i = 0; i < e->nargs && w < 1000; i++)
        w += node_weight(e->args[i]);
    return w;
}

static expr *clean(expr_ctx *c, expr *e) { return expr_is_zero(c, e) ? expr_num(c, 0.0) : e; }

/* Gauss–Jordan on the n x n expression matrix a (destroyed); phi receives the
 * inverse. Returns 0, -1 if singular, -2 past the node budget. */
static int invert(expr_ctx *c, int n, expr **a, expr **phi, size_t budget)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            phi[i * n + j] = expr_num(c, i == j ? 1.0 : 0.0);
    for (int col = 0; col < n; col++) {
        int best = -1;
        size_t bw = (size_t)-1;
        for (int r = col; r < n; r++) {
            expr *e = a[r * n + col];
            if (expr_is_num(e, 0.0) || expr_is_zero(c, e))
                continue;
            size_t w = node_weight(e);
            if (w < bw) {
                bw = w;
                best = r;
            }
        }
        if (best < 0)
            return -1;
        if (best != col)
            for (int j = 0; j < n; j++) {
                expr *t = a[col * n + j];
                a[col * n + j] = a[best * n + j];
                a[best * n + j] = t;
                t = phi[col * n + j];
                phi[col * n + j] = phi[best * n + j];
                phi[best * n + j] = t;
            }
        expr *inv = expr_powi(c, a[col * n + col], -1);
        for (int j = 0; j < n; j++) {
            a[col * n + j] = clean(c, expr_mul(c, a[col * n + j], inv));
            phi[col * n + j] = clean(c, expr_mul(c, phi[col * n + j], inv));
        }
        for (int r = 0; r < n; r++) {
            expr *f = a[r * n + col];
            if (r == col || expr_is_num(f, 0.0))
                continue;
            for (int j = 0; j < n; j++) {
                a[r * n + j] = clean(c, expr_sub(c, a[r * n + j], expr_mul(c, f, a[col * n + j])));
                phi[r * n + j] = clean(c, expr_sub(c, phi[r * n + j], expr_mul(c, f, phi[col * n + j])));
            }
        }
        if (expr_ctx_overflow(c) || expr_ctx_nodes(c) > budget)
            return -2;
    }
    return 0;
}

static json_t *str(const expr_ctx *c, const expr *e)
{
    char *s = expr_print(c, e);
    json_t *j = json_string(s ? s : "");
    free(s);
    return j;
}

static json_t *latex(const expr_ctx *c, const expr *e)
{
    char *s = expr_print_latex(c, e);
    json_t *j = json_string(s ? s : "");
    free(s);
    return j;
}

int equations_derive(struct engine_model *m, size_t node_budget)
{
    expr_ctx *c = m->ctx;
    int n = m->n, k = m->k;
    size_t nn = (size_t)n * n;
    json_t *eq = json_object();
    json_object_set_new(eq, "model_id", json_string(m->id));
    json_object_set_new(eq, "formulation", json_string(m->nlin == m->nc ? "hamel" : "multipliers"));
    json_t *order = json_array();
    for (int j = 0; j < n; j++)
        json_array_append_new(order, json_string(m->row_names[j]));
    json_object_set_new(eq, "order", order);
    json_object_set_new(eq, "speeds", json_copy(json_object_get(m->summary, "speeds")));
    expr **a = calloc(nn, sizeof *a), **phi = calloc(nn, sizeof *phi), **kin = calloc(n, sizeof *kin);
    int ns = expr_sym_count(c);
    expr **sub = calloc(ns + 1, sizeof *sub);
    int rc = -1;
    if (!a || !phi || !kin || !sub)
        goto done;
    if (m->nlin != m->nc) {
        json_object_set_new(eq, "complete", json_false());
        json_object_set_new(eq, "reason", json_string("the model has constraints nonlinear in the velocities: "
                                                      "it is integrated with Lagrange multipliers; there are "
                                                      "no Boltzmann–Hamel equations to show"));
        rc = 0;
        goto store;
    }
    memcpy(a, m->psi, nn * sizeof *a);
    size_t budget = expr_ctx_nodes(c) + node_budget;
    int inv = invert(c, n, a, phi, budget);
    if (inv < 0) {
        json_object_set_new(eq, "complete", json_false());
        json_object_set_new(eq, "reason",
                            json_string(inv == -1 ? "Psi has no symbolic inverse (a pivot vanishes identically)"
                                                  : "Phi = Psi^-1 exceeds the expression node budget; the "
                                                    "integrator inverts Psi numerically instead"));
        rc = 0;
        goto store;
    }
    /* kinematics */
    json_t *kj = json_object(), *kl = json_object();
    for (int i = 0; i < n; i++) {
        expr **terms = calloc(2 * n + 1, sizeof *terms);
        if (!terms)
            goto done;
        int t = 0;
        for (int r = 0; r < k; r++)
            terms[t++] = expr_mul(c, phi[i * n + r], expr_sym(c, m->sym_u[r]));
        for (int j = 0; j < n; j++)
            terms[t++] = expr_neg(c, expr_mul(c, phi[i * n + j], m->psi_t[j]));
        kin[i] = clean(c, expr_sum(c, terms, t));
        free(terms);
        json_object_set_new(kj, m->coords[i], str(c, kin[i]));
        json_object_set_new(kl, m->coords[i], latex(c, kin[i]));
    }
    json_object_set_new(eq, "kinematics", kj);
    json_object_set_new(eq, "kinematics_latex", kl);
    for (int i = 0; i < n; i++)
        sub[m->sym_qd[i]] = kin[i];
    expr *Tstar = clean(c, expr_subst(c, m->T, sub, ns));
    json_object_set_new(eq, "kinetic_energy_in_speeds", str(c, Tstar));
    json_object_set_new(eq, "kinetic_energy_in_speeds_latex", latex(c, Tstar));
    json_t *mm = json_array();
    for (int r = 0; r < k; r++) {
        json_t *row = json_array();
        expr *d = expr_diff(c, Tstar, m->sym_u[r]);
        for (int s = 0; s < k; s++)
            json_array_append_new(row, str(c, clean(c, expr_diff(c, d, m->sym_u[s]))));
        json_array_append_new(mm, row);
    }
    json_object_set_new(eq, "mass_matrix", mm);
    /* forcing: Phi_S^T (g + M Phi b) on the kinematics */
    {
        expr **p = calloc(n, sizeof *p), **g = calloc(n, sizeof *g), **b = calloc(n, sizeof *b);
        expr **pa = calloc(n, sizeof *pa), **terms = calloc(n + 1, sizeof *terms);
        if (!p || !g || !b || !pa || !terms) {
            free(p), free(g), free(b), free(pa), free(terms);
            goto done;
        }
        for (int i = 0; i < n; i++) {
            p[i] = expr_diff(c, m->T, m->sym_qd[i]);
            expr *gi = expr_sub(c, m->Q[i], expr_diff(c, m->V, m->sym_q[i]));
            gi = expr_add(c, gi, expr_diff(c, m->T, m->sym_q[i]));
            g[i] = expr_sub(c, gi, expr_dt(c, p[i]));
        }
        for (int r = 0; r < k; r++)
            b[r] = expr_dt(c, m->speed_f[r]);
        for (int j = 0; j < m->nc; j++)
            b[m->cons[j].row] = expr_dt(c, m->cons[j].f);
        for (int i = 0; i < n; i++) { /* (Phi b)_i */
            for (int j = 0; j < n; j++)
                terms[j] = expr_mul(c, phi[i * n + j], b[j]);
            pa[i] = expr_sum(c, terms, n);
        }
        json_t *fj = json_array(), *fl = json_array();
        for (int r = 0; r < k; r++) {
            expr **outer = calloc(n + 1, sizeof *outer);
            if (!outer)
                break;
            for (int i = 0; i < n; i++) {
                for (int l = 0; l < n; l++)
                    terms[l] = expr_mul(c, expr_diff(c, p[i], m->sym_qd[l]), pa[l]);
                expr *hi = expr_add(c, g[i], expr_sum(c, terms, n));
                outer[i] = expr_mul(c, phi[i * n + r], hi);
            }
            expr *F = clean(c, expr_subst(c, expr_sum(c, outer, n), sub, ns));
            free(outer);
            json_array_append_new(fj, str(c, F));
            json_array_append_new(fl, latex(c, F));
        }
        json_object_set_new(eq, "forcing", fj);
        json_object_set_new(eq, "forcing_latex", fl);
        free(p), free(g), free(b), free(pa), free(terms);
    }
    /* gamma */
    {
        json_t *gj = json_array();
        for (int j = 0; j < n; j++)
            for (int r = 0; r < n; r++)
                for (int l = 0; l < n; l++) {
                    if (!m->gamma_nz[((size_t)j * n + r) * n + l])
                        continue;
                    expr **terms = calloc(nn + 1, sizeof *terms);
                    if (!terms)
                        goto done;
                    int t = 0;
                    for (int i = 0; i < n; i++)
                        for (int kk = 0; kk < n; kk++) {
                            expr *A = expr_sub(c, expr_diff(c, m->psi[j * n + i], m->sym_q[kk]),
                                               expr_diff(c, m->psi[j * n + kk], m->sym_q[i]));
                            if (expr_is_num(A, 0.0))
                                continue;
                            terms[t++] = expr_product(c, (expr *[]){A, phi[kk * n + l], phi[i * n + r]}, 3);
                        }
                    expr *gm = clean(c, expr_sum(c, terms, t));
                    free(terms);
                    json_array_append_new(gj, json_pack("{s:s, s:s, s:s, s:o, s:o}", "j", m->row_names[j], "r",
                                                        m->row_names[r], "l", m->row_names[l], "expr",
                                                        str(c, gm), "latex", latex(c, gm)));
                }
        json_object_set_new(eq, "gamma", gj);
    }
    json_object_set_new(eq, "complete", json_boolean(!expr_ctx_overflow(c)));
    rc = 0;
store:
    m->equations = json_dumps(eq, JSON_COMPACT);
    if (!m->equations)
        rc = -1;
done:
    json_decref(eq);
    free(a);
    free(phi);
    free(kin);
    free(sub);
    return rc;
}
