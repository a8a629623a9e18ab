/* nonlin.c — nonlinear (Chetaev) constraints in the reduced form (nonlin.h): the
 * velocities solved symbolically from the speeds and the constraints where that is
 * explicit, the reduced equations M*(q, u, t) u' = F(q, u, t) derived from that
 * solution, and the derived-equations document of such a model. */
#include "nonlin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "equations.h"
#include "exprjson.h"

#define NL_MAX_TERMS 4000

static expr *simp(expr_ctx *c, expr *e)
{
    e = expr_expand(c, e, NL_MAX_TERMS);
    return expr_is_zero(c, e) ? expr_num(c, 0.0) : e;
}

/* Does e really depend on symbol s (not just on its mask)? */
static int depends(expr_ctx *c, expr *e, int s)
{
    return expr_depends(e, s) && !expr_is_zero(c, expr_diff(c, e, s));
}

/* Solves the n equations u_r - speed_r(q') = 0, f_j(q, q', t) = 0 for q' one at a
 * time: an equation left with a single unknown velocity, in which it is linear with
 * a coefficient not identically zero, gives it. Fills kin[n]; returns 1 when every
 * velocity was found, 0 otherwise. */
static int solve_explicit(struct engine_model *m, expr **kin)
{
    expr_ctx *c = m->ctx;
    int n = m->n, k = m->k, ns = expr_sym_count(c);
    int ne = k + m->nc, solved = 0;
    expr **eqs = calloc(ne + 1, sizeof *eqs), **sub = calloc(ns + 1, sizeof *sub);
    unsigned char *used = calloc(ne + 1, 1);
    if (!eqs || !sub || !used)
        goto done;
    for (int r = 0; r < k; r++)
        eqs[r] = expr_sub(c, m->speed_f[r], expr_sym(c, m->sym_u[r]));
    for (int j = 0; j < m->nc; j++)
        eqs[k + j] = m->cons[j].f;
    for (int progress = 1; progress && solved < n;) {
        progress = 0;
        for (int e = 0; e < ne && solved < n; e++) {
            if (used[e])
                continue;
            expr *g = expr_subst(c, eqs[e], sub, ns);
            int v = -1, count = 0;
            for (int i = 0; i < n; i++)
                if (!kin[i] && depends(c, g, m->sym_qd[i])) {
                    v = i;
                    count++;
                }
            if (count != 1)
                continue;
            expr *a = expr_diff(c, g, m->sym_qd[v]);
            if (depends(c, a, m->sym_qd[v]) || expr_is_zero(c, a))
                continue;
            expr **zero = calloc(ns + 1, sizeof *zero);
            if (!zero)
                goto done;
            zero[m->sym_qd[v]] = expr_num(c, 0.0);
            expr *rest = expr_subst(c, g, zero, ns);
            free(zero);
            kin[v] = simp(c, expr_neg(c, expr_div(c, rest, a)));
            sub[m->sym_qd[v]] = kin[v];
            used[e] = 1;
            solved++;
            progress = 1;
        }
    }
done:
    free(eqs);
    free(sub);
    free(used);
    return solved == n && !expr_ctx_overflow(c);
}

/* With q' = K(q, u, t): Phi_S = dK/du (the Chetaev virtual displacements: J dK/du = 0,
 * Psi_S dK/du = I), q'' = dK/du u' + a0 with a0 = dK/dq K + dK/dt, and
 * Phi_S^T (M q'' - g) = 0 gives M* = Phi_S^T M Phi_S, F = Phi_S^T (g - M a0), all at
 * q' = K, with g = Q - dV/dq + dT/dq - D(dT/dq'). */
static int derive_reduced(struct engine_model *m, reduce_result *red)
{
    expr_ctx *c = m->ctx;
    int n = m->n, k = m->k, ns = expr_sym_count(c), rc = -1;
    expr **sub = calloc(ns + 1, sizeof *sub), **phis = calloc((size_t)n * k + 1, sizeof *phis);
    expr **a0 = calloc(n, sizeof *a0), **M = calloc((size_t)n * n, sizeof *M), **g = calloc(n, sizeof *g);
    expr **terms = calloc((size_t)n * n + n + 1, sizeof *terms);
    if (!sub || !phis || !a0 || !M || !g || !terms)
        goto done;
    for (int i = 0; i < n; i++)
        sub[m->sym_qd[i]] = red->kin[i];
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < k; r++)
            phis[i * k + r] = simp(c, expr_diff(c, red->kin[i], m->sym_u[r]));
        int t = 0;
        for (int kk = 0; kk < n; kk++)
            if (expr_depends(red->kin[i], m->sym_q[kk]))
                terms[t++] = expr_mul(c, expr_diff(c, red->kin[i], m->sym_q[kk]), red->kin[kk]);
        terms[t++] = expr_diff(c, red->kin[i], m->sym_t);
        a0[i] = expr_sum(c, terms, t);
        expr *p = expr_diff(c, m->T, m->sym_qd[i]);
        for (int l = 0; l < n; l++)
            M[i * n + l] = expr_subst(c, expr_diff(c, p, m->sym_qd[l]), sub, ns);
        expr *gi = expr_sub(c, m->Q[i], expr_diff(c, m->V, m->sym_q[i]));
        gi = expr_add(c, gi, expr_diff(c, m->T, m->sym_q[i]));
        gi = expr_sub(c, gi, expr_dt(c, p));
        g[i] = expr_subst(c, gi, sub, ns);
    }
    for (int r = 0; r < k; r++) {
        int t = 0;
        for (int i = 0; i < n; i++) {
            expr *h = g[i];
            for (int l = 0; l < n; l++)
                if (!expr_is_num(M[i * n + l], 0.0))
                    h = expr_sub(c, h, expr_mul(c, M[i * n + l], a0[l]));
            terms[t++] = expr_mul(c, phis[i * k + r], h);
        }
        red->forcing[r] = simp(c, expr_sum(c, terms, t));
        for (int s = 0; s < k; s++) {
            t = 0;
            for (int i = 0; i < n; i++)
                for (int l = 0; l < n; l++)
                    if (!expr_is_num(M[i * n + l], 0.0))
                        terms[t++] =
                            expr_product(c, (expr *[]){phis[i * k + r], M[i * n + l], phis[l * k + s]}, 3);
            red->mass[r * k + s] = simp(c, expr_sum(c, terms, t));
        }
    }
    red->tstar = simp(c, expr_subst(c, m->T, sub, ns));
    rc = expr_ctx_overflow(c) ? 1 : 0;
done:
    free(sub);
    free(phis);
    free(a0);
    free(M);
    free(g);
    free(terms);
    return rc;
}

/* The derived-equations document of a reduced nonlinear model. */
static int write_equations(struct engine_model *m, const reduce_result *red, int explicit_kin)
{
    expr_ctx *c = m->ctx;
    int n = m->n, k = m->k;
    json_t *eq = equations_head(m, "hamel");
    json_object_set_new(eq, "nonlinear_form", json_string("reduced"));
    if (!explicit_kin) {
        json_object_set_new(eq, "complete", json_false());
        json_object_set_new(eq, "kinematics_solved", json_string("newton"));
        json_object_set_new(
            eq, "reason",
            json_string("the velocities cannot be solved explicitly from the speeds and the "
                        "nonlinear constraints: the integrator solves them by Newton's method at "
                        "each evaluation and projects the equations numerically (Phi_S^T M Phi_S "
                        "u' = Phi_S^T (g + M Phi b), Psi's last rows df/dq')"));
        goto store;
    }
    json_object_set_new(eq, "kinematics_solved", json_string("explicit"));
    json_t *kj = json_object(), *kl = json_object();
    for (int i = 0; i < n; i++) {
        json_object_set_new(kj, m->coords[i], exprjson_text(c, red->kin[i]));
        json_object_set_new(kl, m->coords[i], exprjson_latex(c, red->kin[i]));
    }
    json_object_set_new(eq, "kinematics", kj);
    json_object_set_new(eq, "kinematics_latex", kl);
    json_t *mm = json_array(), *fj = json_array(), *eqs = json_array();
    for (int r = 0; r < k; r++) {
        json_t *row = json_array();
        for (int s = 0; s < k; s++)
            json_array_append_new(row, exprjson_text(c, red->mass[r * k + s]));
        expr *lhs = equations_mass_lhs(m, red->mass + (size_t)r * k);
        if (!lhs) {
            json_decref(row);
            goto fail;
        }
        json_array_append_new(mm, row);
        json_array_append_new(fj, exprjson_text(c, red->forcing[r]));
        json_array_append_new(eqs, exprjson_equation(c, lhs, red->forcing[r], 0));
    }
    json_object_set_new(eq, "mass_matrix", mm);
    json_object_set_new(eq, "forcing", fj);
    json_object_set_new(eq, "equations", eqs);
    json_object_set_new(eq, "kinetic_energy_in_speeds", exprjson_text(c, red->tstar));
    json_object_set_new(eq, "gamma", json_array());
    json_object_set_new(eq, "note",
                        json_string("Chetaev's virtual displacements: Phi_S = dq'/du; the Hamel coefficients "
                                    "depend on the velocities (POST /v1/hamel with speeds or qdot)"));
    json_object_set_new(eq, "complete", json_boolean(!expr_ctx_overflow(c)));
store:
    return equations_store(m, eq);
fail:
    json_decref(eq);
    return -1;
}

int nonlin_derive(struct engine_model *m, reduce_result *red)
{
    if (!m->nl_reduced)
        return 0;
    if (!red->kin || !red->mass || !red->forcing)
        return -1;
    int explicit_kin = solve_explicit(m, red->kin);
    if (explicit_kin) {
        int d = derive_reduced(m, red);
        if (d < 0)
            return -1;
        explicit_kin = d == 0;
    }
    red->have_phi = red->exact = explicit_kin;
    return write_equations(m, red, explicit_kin);
}
