/* test_voronec.c — for models whose speeds are true velocities (Suslov/Voronec form),
 * the equations the engine integrates coincide with Voronec's equations (Lemos,
 * eqs. 10–11), derived here independently with the expression engine:
 *
 *   d/dt(dLb/dq_i') - dLb/dq_i = sum_v dLb/dq_{m+v} a_vi + sum_v sum_j dL/dq'_{m+v} b^v_ij q_j'
 *   b^v_ij = da_vi/dq_j - da_vj/dq_i + sum_u (da_vi/dq_{m+u} a_uj - da_vj/dq_{m+u} a_ui)
 *
 * with Lb the Lagrangian with the constraints q'_{m+v} = sum_i a_vi q_i' substituted.
 * On the rolling sphere the naive reduced Lagrangian (Lemos eq. 6,
 * 7 th'' - 5 ps'^2 sin th cos th + 2 ph' ps' sin th = 0) is violated by the true motion,
 * while th'' + ph' ps' sin th = 0 (eq. 16) holds.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "hamel.h"
#include "model.h"
#include "support.h"

static void setup(void) { engine_init(); }

static engine_model *load(const char *name, json_t **case_out)
{
    json_t *c = support_load_case(name);
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0, "%s", name);
    *case_out = c;
    return m;
}

/* Voronec residuals at random states; returns the largest |residual| / scale and, for
 * the sphere, the residuals of Lemos (6) and (16) for theta. */
static double voronec_check(engine_model *em, double *naive_theta, double *eq16)
{
    struct engine_model *m = em;
    expr_ctx *c = m->ctx;
    int n = m->n, k = m->k, nd = n - k;
    int ind[64], dep[64], isind[64] = {0};
    /* the speeds are the velocities of the independent coordinates */
    for (int r = 0; r < k; r++) {
        int found = -1;
        for (int i = 0; i < n; i++)
            if (expr_depends(m->speed_f[r], m->sym_qd[i]))
                found = i;
        cr_assert_geq(found, 0);
        ind[r] = found;
        isind[found] = 1;
    }
    for (int i = 0, d = 0; i < n; i++)
        if (!isind[i])
            dep[d++] = i;
    /* a_vi from the constraints: f_v = 0 solved for q'_{dep v} (each constraint has one
     * dependent velocity with a nonzero constant coefficient in these models) */
    expr *a[16][16];
    cr_assert_eq(m->nc, nd);
    for (int v = 0; v < nd; v++) {
        int j = -1;
        for (int cc = 0; cc < m->nc; cc++)
            if (!expr_is_zero(c, expr_diff(c, m->cons[cc].f, m->sym_qd[dep[v]])))
                j = cc;
        cr_assert_geq(j, 0);
        expr *coef = expr_diff(c, m->cons[j].f, m->sym_qd[dep[v]]);
        for (int i = 0; i < k; i++)
            a[v][i] = expr_neg(c, expr_div(c, expr_diff(c, m->cons[j].f, m->sym_qd[ind[i]]), coef));
    }
    int ns = expr_sym_count(c);
    expr **sub = calloc(ns, sizeof *sub);
    for (int v = 0; v < nd; v++) {
        expr *terms[16];
        for (int i = 0; i < k; i++)
            terms[i] = expr_mul(c, a[v][i], expr_sym(c, m->sym_qd[ind[i]]));
        sub[m->sym_qd[dep[v]]] = expr_sum(c, terms, k);
    }
    expr *L = expr_sub(c, m->T, m->V);
    expr *Lb = expr_subst(c, L, sub, ns);

    hamel_ws *w = hamel_ws_new(m, m->param_values);
    double *vals = calloc(ns, sizeof *vals), in[256], y[128], dy[128];
    double worst = 0.0;
    for (int trial = 0; trial < 8; trial++) {
        model_test_point(m, 300 + trial, in);
        for (int i = 0; i < n; i++)
            y[i] = 2.0 * in[model_input_q(m) + i] - 0.7;
        for (int r = 0; r < k; r++)
            y[n + r] = 3.0 * in[model_input_qd(m) + r] - 2.0;
        double t = 0.0;
        cr_assert_eq(hamel_rhs(t, y, dy, w), 0);
        /* symbol values: parameters, t, q, all q' (dy[0..n) is q') */
        for (int s = 0; s < ns; s++) {
            const expr_symbol *sym = expr_sym_get(c, s);
            switch (sym->cls) {
            case SYM_PARAM: vals[s] = m->param_values[sym->index]; break;
            case SYM_TIME: vals[s] = t; break;
            case SYM_COORD: vals[s] = y[sym->index]; break;
            case SYM_VELOCITY: vals[s] = dy[sym->index]; break;
            default: vals[s] = 0.0; break;
            }
        }
        double qdd[64];
        for (int r = 0; r < k; r++)
            qdd[ind[r]] = dy[n + r]; /* u_r = q'_{ind r}, so u_r' = q''_{ind r} */
        for (int i = 0; i < k; i++) {
            int qi = ind[i];
            expr *p = expr_diff(c, Lb, m->sym_qd[qi]);
            double lhs = expr_eval(c, expr_diff(c, p, m->sym_t), vals);
            for (int j = 0; j < k; j++)
                lhs += expr_eval(c, expr_diff(c, p, m->sym_qd[ind[j]]), vals) * qdd[ind[j]];
            for (int kk = 0; kk < n; kk++)
                lhs += expr_eval(c, expr_diff(c, p, m->sym_q[kk]), vals) * dy[kk];
            lhs -= expr_eval(c, expr_diff(c, Lb, m->sym_q[qi]), vals);
            double rhs = 0.0, scale = fabs(lhs);
            for (int v = 0; v < nd; v++) {
                rhs += expr_eval(c, expr_diff(c, Lb, m->sym_q[dep[v]]), vals) * expr_eval(c, a[v][i], vals);
                double pdep = expr_eval(c, expr_diff(c, L, m->sym_qd[dep[v]]), vals);
                for (int j = 0; j < k; j++) {
                    expr *b = expr_sub(c, expr_diff(c, a[v][i], m->sym_q[ind[j]]),
                                       expr_diff(c, a[v][j], m->sym_q[qi]));
                    for (int u = 0; u < nd; u++)
                        b = expr_add(c, b,
                                     expr_sub(c,
                                              expr_mul(c, expr_diff(c, a[v][i], m->sym_q[dep[u]]), a[u][j]),
                                              expr_mul(c, expr_diff(c, a[v][j], m->sym_q[dep[u]]), a[u][i])));
                    rhs += pdep * expr_eval(c, b, vals) * dy[ind[j]];
                }
            }
            scale = fmax(1.0, fmax(scale, fabs(rhs)));
            worst = fmax(worst, fabs(lhs - rhs) / scale);
            const expr_symbol *qs = expr_sym_get(c, m->sym_q[qi]);
            if (naive_theta && strcmp(qs->name, "theta") == 0) {
                double th = y[qi], thdd = qdd[qi], phd = dy[0], psd = dy[2];
                naive_theta[trial] = 7 * thdd - 5 * psd * psd * sin(th) * cos(th) + 2 * phd * psd * sin(th);
                eq16[trial] = thdd + phd * psd * sin(th);
            }
        }
    }
    hamel_ws_free(w);
    free(vals);
    free(sub);
    return worst;
}

Test(voronec, rolling_sphere, .init = setup)
{
    json_t *c;
    engine_model *m = load("lemos-rolling-sphere.json", &c);
    double naive[8], eq16[8];
    double worst = voronec_check(m, naive, eq16);
    cr_expect_leq(worst, 1e-10, "Voronec's equations hold to %g", worst);
    double biggest_naive = 0.0;
    for (int i = 0; i < 8; i++) {
        cr_expect_leq(fabs(eq16[i]), 1e-10, "theta'' + phi' psi' sin(theta) = %g (Lemos 16)", eq16[i]);
        biggest_naive = fmax(biggest_naive, fabs(naive[i]));
    }
    cr_expect_geq(biggest_naive, 0.1,
                  "the naive reduced Lagrangian (Lemos 6) should fail on the true motion");
    /* and the derived equation shown to people is the correct one */
    json_t *eq = NULL, *problem = NULL;
    cr_assert_eq(engine_equations(m, &eq, &problem), 0);
    const char *theta_eq = json_string_value(json_array_get(json_object_get(eq, "equations"), 1));
    cr_assert_not_null(theta_eq);
    cr_expect(strstr(theta_eq, "thd'") && strstr(theta_eq, "phid*psid*sin(theta)") &&
                  !strstr(theta_eq, "cos"),
              "theta equation reads as 7/5 m R^2 (theta'' + phi' psi' sin(theta)): %s", theta_eq);
    json_decref(eq);
    engine_model_release(m);
    json_decref(c);
}

Test(voronec, suslov_forms, .init = setup)
{
    static const char *const files[] = {"greenwood-5.4-dumbbell-suslov.json",
                                        "greenwood-5.5-rolling-disk-suslov.json"};
    for (size_t f = 0; f < 2; f++) {
        json_t *c;
        engine_model *m = load(files[f], &c);
        double worst = voronec_check(m, NULL, NULL);
        cr_expect_leq(worst, 1e-10, "%s: Voronec's equations hold to %g", files[f], worst);
        engine_model_release(m);
        json_decref(c);
    }
}
