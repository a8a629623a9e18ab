/* forms.c — the classical forms of the equations of motion (forms.h): Boltzmann–Hamel,
 * Gibbs–Appell, Kane, Maggi and Voronec, from the kinematics q' = K(q, u, t) kept by
 * the model compiler (and Phi for the Hamel coefficients). */
#include "forms.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exprjson.h"

#define FORMS_MAX_TERMS 4000
#define FORMS_MAX_N 16 /* the fixed term buffers below hold every term up to this n */

static const char *const form_names[FORMS_COUNT] = {"hamel", "appell", "kane", "maggi", "voronec"};

int forms_index(const char *form)
{
    for (int i = 0; form && i < FORMS_COUNT; i++)
        if (strcmp(form, form_names[i]) == 0)
            return i;
    return -1;
}

static expr *simp(expr_ctx *c, expr *e)
{
    e = expr_expand(c, e, FORMS_MAX_TERMS);
    return expr_is_zero(c, e) ? expr_num(c, 0.0) : e;
}

/* What every form is built from, all in (q, u, u', t). */
struct pieces {
    struct engine_model *m;
    expr_ctx *c;
    int n, k, ns;
    expr **sub; /* q'_i -> K_i */
    expr **K;   /* [n] */
    expr **C;   /* [n*k] dK_i/du_r: the partial velocities (Chetaev's displacements) */
    expr **a0;  /* [n] dK/dq K + dK/dt */
    expr **qdd; /* [n] C u' + a0 */
    expr **p;   /* [n] dT/dq_i' at K */
    expr **M;   /* [n*n] d2T/dq'dq' at K */
    expr **h;   /* [n] dT/dq - D(dT/dq') at K */
    expr **Qv;  /* [n] Q - dV/dq at K */
    int *acc;   /* [k] u'_r symbols */
};

static void pieces_free(struct pieces *P)
{
    free(P->sub), free(P->C), free(P->a0), free(P->qdd), free(P->p), free(P->M), free(P->h), free(P->Qv);
}

/* d/dt along the motion of an expression in (q, u, t). */
static expr *total_dt(struct pieces *P, expr *e)
{
    expr_ctx *c = P->c;
    struct engine_model *m = P->m;
    int n = P->n, k = P->k, t = 0;
    expr *terms[160];
    for (int i = 0; i < n && t < 150; i++)
        if (expr_depends(e, m->sym_q[i]))
            terms[t++] = expr_mul(c, expr_diff(c, e, m->sym_q[i]), P->K[i]);
    for (int r = 0; r < k && t < 150; r++)
        if (expr_depends(e, m->sym_u[r]))
            terms[t++] = expr_mul(c, expr_diff(c, e, m->sym_u[r]), expr_sym(c, P->acc[r]));
    if (expr_depends(e, m->sym_t))
        terms[t++] = expr_diff(c, e, m->sym_t);
    return expr_sum(c, terms, t);
}

static int pieces_make(struct engine_model *m, struct pieces *P)
{
    expr_ctx *c = m->ctx;
    int n = m->n, k = m->k;
    memset(P, 0, sizeof *P);
    P->m = m, P->c = c, P->n = n, P->k = k, P->ns = expr_sym_count(c);
    P->K = m->red_kin;
    P->acc = calloc(k + 1, sizeof *P->acc);
    for (int r = 0; r < k && P->acc; r++) {
        char name[96];
        snprintf(name, sizeof name, "%s'", m->speeds[r]);
        int a = expr_sym_find(c, name);
        if (a < 0 || expr_sym_get(c, a)->cls != SYM_ACCEL)
            a = expr_sym_add(c, name, SYM_ACCEL, r);
        if (a < 0) {
            /* the name is taken by a velocity (default speeds x' -> x''): a private one */
            snprintf(name, sizeof name, "%s'_", m->speeds[r]);
            a = expr_sym_find(c, name);
            if (a < 0)
                a = expr_sym_add(c, name, SYM_ACCEL, r);
        }
        P->acc[r] = a;
    }
    P->ns = expr_sym_count(c);
    P->sub = calloc(P->ns + 1, sizeof *P->sub);
    P->C = calloc((size_t)n * k + 1, sizeof *P->C);
    P->a0 = calloc(n, sizeof *P->a0);
    P->qdd = calloc(n, sizeof *P->qdd);
    P->p = calloc(n, sizeof *P->p);
    P->M = calloc((size_t)n * n, sizeof *P->M);
    P->h = calloc(n, sizeof *P->h);
    P->Qv = calloc(n, sizeof *P->Qv);
    if (!P->acc || !P->sub || !P->C || !P->a0 || !P->qdd || !P->p || !P->M || !P->h || !P->Qv)
        return -1;
    for (int r = 0; r < k; r++)
        if (P->acc[r] < 0)
            return -1;
    for (int i = 0; i < n; i++)
        P->sub[m->sym_qd[i]] = P->K[i];
    expr *terms[160];
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < k; r++)
            P->C[i * k + r] = simp(c, expr_diff(c, P->K[i], m->sym_u[r]));
        int t = 0;
        for (int kk = 0; kk < n; kk++)
            if (expr_depends(P->K[i], m->sym_q[kk]))
                terms[t++] = expr_mul(c, expr_diff(c, P->K[i], m->sym_q[kk]), P->K[kk]);
        terms[t++] = expr_diff(c, P->K[i], m->sym_t);
        P->a0[i] = expr_sum(c, terms, t);
        t = 0;
        for (int r = 0; r < k; r++)
            terms[t++] = expr_mul(c, P->C[i * k + r], expr_sym(c, P->acc[r]));
        terms[t++] = P->a0[i];
        P->qdd[i] = expr_sum(c, terms, t);
        expr *pi = expr_diff(c, m->T, m->sym_qd[i]);
        P->p[i] = expr_subst(c, pi, P->sub, P->ns);
        for (int l = 0; l < n; l++)
            P->M[i * n + l] = expr_subst(c, expr_diff(c, pi, m->sym_qd[l]), P->sub, P->ns);
        P->h[i] = expr_subst(c, expr_sub(c, expr_diff(c, m->T, m->sym_q[i]), expr_dt(c, pi)), P->sub, P->ns);
        P->Qv[i] = expr_subst(c, expr_sub(c, m->Q[i], expr_diff(c, m->V, m->sym_q[i])), P->sub, P->ns);
    }
    return expr_ctx_overflow(c) ? -1 : 0;
}

/* sum_i C_ir x_i */
static expr *project(struct pieces *P, expr **x, int r)
{
    expr *terms[160];
    int t = 0;
    for (int i = 0; i < P->n; i++)
        if (!expr_is_num(P->C[i * P->k + r], 0.0))
            terms[t++] = expr_mul(P->c, P->C[i * P->k + r], x[i]);
    return expr_sum(P->c, terms, t);
}

/* (M q'' - h)_i: the inertia terms of Lagrange's expression for q_i */
static expr *inertia(struct pieces *P, int i)
{
    expr *terms[160];
    int t = 0, n = P->n;
    for (int l = 0; l < n; l++)
        if (!expr_is_num(P->M[i * n + l], 0.0))
            terms[t++] = expr_mul(P->c, P->M[i * n + l], P->qdd[l]);
    terms[t++] = expr_neg(P->c, P->h[i]);
    return expr_sum(P->c, terms, t);
}

static json_t *by_coord(struct pieces *P, expr **e)
{
    json_t *o = json_object();
    for (int i = 0; i < P->n; i++)
        json_object_set_new(o, P->m->coords[i], exprjson_text(P->c, e[i]));
    return o;
}

static int inapplicable(json_t **problem, const char *why)
{
    *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
    hamel_problem_add(*problem, "form", -1, why);
    return HAMEL_E_BAD_REQUEST;
}

/* The work of one form: the model, its pieces and the document being filled. */
struct form_job {
    struct engine_model *m;
    expr_ctx *c;
    struct pieces *P;
    json_t *d, *eqs;
    expr **res;         /* [k] the residuals */
    const int *vor_col; /* [k] Voronec: the coordinate of each speed */
    int f, n, k;
};

/* Whether form f applies to m; for Voronec, the column of each speed into *vor_col. */
static int form_applies(struct engine_model *m, int f, int **vor_col, json_t **problem)
{
    if (!m->red_kin)
        return inapplicable(problem,
                            m->nlin != m->nc && !m->nl_reduced
                                ? "the model's nonlinear constraints are integrated with multipliers: "
                                  "give n - m speeds for the reduced forms"
                                : "the kinematics q' = K(q, u, t) have no symbolic form for this model "
                                  "(Psi has no exact symbolic inverse, or q' is solved by Newton's "
                                  "method)");
    if (f == 0 && !m->red_phi)
        return inapplicable(problem,
                            "the Boltzmann-Hamel form needs constraints linear in the velocities "
                            "(the Hamel coefficients of nonlinear ones depend on q': POST /v1/hamel)");
    int k = m->k;
    if (m->n > FORMS_MAX_N) {
        *problem = hamel_problem_new(HAMEL_E_LIMIT, NULL);
        hamel_problem_add(*problem, "form", -1, "the classical forms are derived for at most 16 coordinates");
        return HAMEL_E_LIMIT;
    }
    if (f != 4)
        return 0;
    /* Chaplygin-type speeds: each speed one velocity; linear homogeneous constraints */
    if (m->nlin != m->nc || !m->scleronomic)
        return inapplicable(problem, "Voronec's equations need linear scleronomic constraints without a "
                                     "velocity-free part");
    int *col = calloc(k + 1, sizeof *col);
    if (!col)
        return HAMEL_E_INTERNAL;
    for (int r = 0; r < k; r++) {
        const expr *e = m->speed_f[r];
        int ok = e->kind == EXPR_SYM && expr_sym_get(m->ctx, e->sym)->cls == SYM_VELOCITY;
        if (!ok) {
            free(col);
            return inapplicable(problem, "Voronec's equations need speeds that are velocities q_i' "
                                         "(Chaplygin type); this model's are not");
        }
        col[r] = expr_sym_get(m->ctx, e->sym)->index;
    }
    *vor_col = col;
    return 0;
}

/* Boltzmann–Hamel: the coefficients gamma^j_rl (and gamma^j_r) of speed r into gj, and
 * the terms pu_j gamma^j_rl u_l into gsum[*gt]. */
static void hamel_gammas(struct form_job *J, expr **pu, expr **dpsi, expr **phit, int r, json_t *gj,
                         expr **gsum, int *gt)
{
    struct engine_model *m = J->m;
    expr_ctx *c = J->c;
    int n = J->n, k = J->k;
    expr *terms[600];
    for (int j = 0; j < n; j++) {
        /* gamma^j_r l (l a speed) and gamma^j_r */
        for (int l = 0; l <= k; l++) {
            if (l < k && !m->gamma_nz[((size_t)j * n + r) * n + l])
                continue;
            if (l == k && !m->gamma_t_nz[(size_t)j * n + r])
                continue;
            int t = 0;
            for (int i = 0; i < n; i++)
                for (int kk = 0; kk < n; kk++) {
                    expr *A = dpsi[((size_t)j * n + i) * n + kk];
                    if (expr_is_num(A, 0.0) || t >= 590)
                        continue;
                    expr *col = l < k ? m->red_phi[kk * n + l] : phit[kk];
                    terms[t++] = expr_product(c, (expr *[]){A, col, m->red_phi[i * n + r]}, 3);
                }
            if (l == k)
                for (int i = 0; i < n && t < 598; i++) {
                    expr *B = expr_sub(c, expr_diff(c, m->psi[j * n + i], m->sym_t),
                                       expr_diff(c, m->psi_t[j], m->sym_q[i]));
                    if (!expr_is_num(B, 0.0))
                        terms[t++] = expr_mul(c, B, m->red_phi[i * n + r]);
                }
            expr *gm = simp(c, expr_sum(c, terms, t));
            if (expr_is_num(gm, 0.0))
                continue;
            json_array_append_new(gj, json_pack("{s:s, s:s, s:s, s:o}", "j", m->row_names[j], "r",
                                                m->row_names[r], "l", l < k ? m->row_names[l] : "t", "expr",
                                                exprjson_text(c, gm)));
            if (*gt < 398)
                gsum[(*gt)++] = expr_product(
                    c, (expr *[]){pu[j], gm, l < k ? expr_sym(c, m->sym_u[l]) : expr_num(c, 1.0)}, 3);
        }
    }
}

/* Boltzmann–Hamel, Greenwood (5.94): the equation of speed r. */
static void hamel_equation(struct form_job *J, expr **pu, expr **dpsi, expr **phit, int r, json_t *gj)
{
    struct engine_model *m = J->m;
    struct pieces *P = J->P;
    expr_ctx *c = J->c;
    int n = J->n;
    expr *terms[600], *gsum[400];
    int gt = 0;
    hamel_gammas(J, pu, dpsi, phit, r, gj, gsum, &gt);
    /* dTs/dtheta_r = sum_i Phi_ir dTs/dq_i at fixed u, T* = T(q, K, t) */
    expr *tstar = expr_subst(c, m->T, P->sub, P->ns);
    int t = 0;
    for (int i = 0; i < n; i++)
        if (expr_depends(tstar, m->sym_q[i]))
            terms[t++] = expr_mul(c, m->red_phi[i * n + r], expr_diff(c, tstar, m->sym_q[i]));
    expr *dth = expr_sum(c, terms, t);
    t = 0;
    for (int i = 0; i < n; i++)
        terms[t++] = expr_mul(c, m->red_phi[i * n + r], P->Qv[i]);
    expr *rhs = simp(c, expr_sum(c, terms, t));
    expr *lt[3] = {total_dt(P, pu[r]), expr_sum(c, gsum, gt), expr_neg(c, dth)};
    expr *lhs = simp(c, expr_sum(c, lt, 3));
    J->res[r] = expr_sub(c, lhs, rhs);
    json_array_append_new(J->eqs, exprjson_equation(c, lhs, rhs, 0));
}

/* Boltzmann–Hamel, Greenwood (5.94). -1 when out of memory. */
static int form_hamel(struct form_job *J)
{
    struct engine_model *m = J->m;
    struct pieces *P = J->P;
    expr_ctx *c = J->c;
    int n = J->n, k = J->k;
    json_object_set_new(J->d, "source",
                        json_string("Greenwood (5.94): d/dt(dT*/du_r) + sum_j sum_l dT*/du_j "
                                    "gamma^j_rl u_l + sum_j dT*/du_j gamma^j_r - dT*/dtheta_r "
                                    "= Q_r; dT*/du_j = sum_i dT/dq_i' Phi_ij"));
    expr **pu = calloc(n, sizeof *pu), **dpsi = calloc((size_t)n * n * n + 1, sizeof *dpsi);
    if (!pu || !dpsi) {
        free(pu), free(dpsi);
        return -1;
    }
    expr *terms[600];
    json_t *pj = json_object(), *gj = json_array();
    for (int j = 0; j < n; j++) {
        int t = 0;
        for (int i = 0; i < n; i++)
            terms[t++] = expr_mul(c, P->p[i], m->red_phi[i * n + j]);
        pu[j] = simp(c, expr_sum(c, terms, t));
        json_object_set_new(pj, m->row_names[j], exprjson_text(c, pu[j]));
    }
    /* A^j_ik = dPsi_ji/dq_k - dPsi_jk/dq_i */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
            for (int kk = 0; kk < n; kk++)
                dpsi[((size_t)j * n + i) * n + kk] =
                    expr_sub(c, expr_diff(c, m->psi[j * n + i], m->sym_q[kk]),
                             expr_diff(c, m->psi[j * n + kk], m->sym_q[i]));
    expr **phit = calloc(n, sizeof *phit), **zero = calloc(P->ns + 1, sizeof *zero);
    if (!phit || !zero) {
        free(pu), free(dpsi), free(phit), free(zero);
        json_decref(pj), json_decref(gj);
        return -1;
    }
    for (int r = 0; r < k; r++)
        zero[m->sym_u[r]] = expr_num(c, 0.0);
    for (int i = 0; i < n; i++)
        phit[i] = simp(c, expr_subst(c, P->K[i], zero, P->ns));
    for (int r = 0; r < k; r++)
        hamel_equation(J, pu, dpsi, phit, r, gj);
    json_object_set_new(J->d, "quasi_momenta", pj);
    json_object_set_new(J->d, "gamma", gj);
    free(pu), free(dpsi), free(phit), free(zero);
    return 0;
}

/* Gibbs–Appell: the acceleration energy S and dS/du'_r = Pi_r. */
static int form_appell(struct form_job *J)
{
    struct pieces *P = J->P;
    expr_ctx *c = J->c;
    int n = J->n, k = J->k;
    json_object_set_new(J->d, "source",
                        json_string("Appell: S = 1/2 q''.M.q'' - q''.(dT/dq - D dT/dq') (up "
                                    "to terms free of u'), q'' = C u' + dK/dq K + dK/dt; "
                                    "dS/du'_r = Pi_r = sum_i C_ir (Q_i - dV/dq_i)"));
    expr *terms[400];
    int t = 0;
    for (int i = 0; i < n; i++) {
        for (int l = 0; l < n; l++)
            if (!expr_is_num(P->M[i * n + l], 0.0) && t < 390)
                terms[t++] =
                    expr_product(c, (expr *[]){expr_num(c, 0.5), P->qdd[i], P->M[i * n + l], P->qdd[l]}, 4);
        terms[t++] = expr_neg(c, expr_mul(c, P->qdd[i], P->h[i]));
    }
    expr *S = simp(c, expr_sum(c, terms, t));
    json_object_set_new(J->d, "acceleration_energy", exprjson_text(c, S));
    json_t *pij = json_array();
    for (int r = 0; r < k; r++) {
        expr *lhs = simp(c, expr_diff(c, S, P->acc[r]));
        expr *rhs = simp(c, project(P, P->Qv, r));
        json_array_append_new(pij, exprjson_text(c, rhs));
        J->res[r] = expr_sub(c, lhs, rhs);
        json_array_append_new(J->eqs, exprjson_equation(c, lhs, rhs, 0));
    }
    json_object_set_new(J->d, "generalized_forces", pij);
    return 0;
}

/* Kane (f == 2) and Maggi (f == 3): projections of Lagrange's expressions on the
 * partial velocities. -1 when out of memory. */
static int form_kane_maggi(struct form_job *J)
{
    struct engine_model *m = J->m;
    struct pieces *P = J->P;
    expr_ctx *c = J->c;
    int n = J->n, k = J->k, f = J->f;
    json_t *d = J->d;
    json_t *pv = json_object(), *fa = json_array(), *fi = json_array(), *le = json_object();
    expr **E = calloc(n, sizeof *E);
    if (!E) {
        json_decref(pv), json_decref(fa), json_decref(fi), json_decref(le);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        json_t *row = json_array();
        for (int r = 0; r < k; r++)
            json_array_append_new(row, exprjson_text(c, P->C[i * k + r]));
        json_object_set_new(pv, m->coords[i], row);
        E[i] = expr_sub(c, inertia(P, i), P->Qv[i]);
        if (f == 3)
            json_object_set_new(le, m->coords[i], exprjson_text(c, simp(c, E[i])));
    }
    for (int r = 0; r < k; r++) {
        expr *lhs, *rhs;
        if (f == 2) {
            expr *Fr = simp(c, project(P, P->Qv, r));
            expr **in = calloc(n, sizeof *in);
            for (int i = 0; in && i < n; i++)
                in[i] = inertia(P, i);
            expr *Fs = in ? simp(c, expr_neg(c, project(P, in, r))) : expr_num(c, 0.0);
            free(in);
            json_array_append_new(fa, exprjson_text(c, Fr));
            json_array_append_new(fi, exprjson_text(c, Fs));
            lhs = simp(c, expr_add(c, Fr, Fs));
            rhs = expr_num(c, 0.0);
            J->res[r] = lhs;
        } else {
            lhs = simp(c, project(P, E, r));
            rhs = expr_num(c, 0.0);
            J->res[r] = lhs;
        }
        json_array_append_new(J->eqs, exprjson_equation(c, lhs, rhs, 0));
    }
    free(E);
    if (f == 2) {
        json_object_set_new(d, "source",
                            json_string("Kane (Wang & Pao): F_r + F*_r = 0, partial velocities "
                                        "dq_i'/du_r, F_r = sum_i dq_i'/du_r (Q_i - dV/dq_i), "
                                        "F*_r = -sum_i dq_i'/du_r (d/dt dT/dq_i' - dT/dq_i)"));
        json_object_set_new(d, "partial_velocities", pv);
        json_object_set_new(d, "generalized_active_forces", fa);
        json_object_set_new(d, "generalized_inertia_forces", fi);
        json_decref(le);
    } else {
        json_object_set_new(d, "source",
                            json_string("Maggi (Greenwood ch. 4): sum_i C_ir (d/dt dT/dq_i' - "
                                        "dT/dq_i + dV/dq_i - Q_i) = 0 with q' = C u + ..."));
        json_object_set_new(d, "coefficients", pv);
        json_object_set_new(d, "lagrange_expressions", le);
        json_decref(fa), json_decref(fi);
    }
    return 0;
}

/* Voronec: the coefficient b^nu_ij of dependent coordinate nu, speeds r and s. */
static expr *voronec_b(struct form_job *J, const int *dep, int nd, int nu, int r, int s)
{
    struct engine_model *m = J->m;
    struct pieces *P = J->P;
    expr_ctx *c = J->c;
    int k = J->k, i = J->vor_col[r], j = J->vor_col[s];
    expr *ani = P->C[nu * k + r], *anj = P->C[nu * k + s];
    expr *parts[2 + 2 * 64];
    int np = 0;
    parts[np++] = expr_diff(c, ani, m->sym_q[j]);
    parts[np++] = expr_neg(c, expr_diff(c, anj, m->sym_q[i]));
    for (int b = 0; b < nd && np < 2 * 64; b++) {
        int mu = dep[b];
        for (int x = 0; x < k; x++) {
            if (J->vor_col[x] == j)
                parts[np++] = expr_mul(c, expr_diff(c, ani, m->sym_q[mu]), P->C[mu * k + x]);
            if (J->vor_col[x] == i)
                parts[np++] = expr_neg(c, expr_mul(c, expr_diff(c, anj, m->sym_q[mu]), P->C[mu * k + x]));
        }
    }
    return simp(c, expr_sum(c, parts, np));
}

/* Voronec, Lemos (10)-(11): the equation of speed r from the reduced Lagrangian L. */
static void voronec_equation(struct form_job *J, expr *L, const int *dep, int nd, int r)
{
    struct engine_model *m = J->m;
    struct pieces *P = J->P;
    expr_ctx *c = J->c;
    int k = J->k;
    expr *terms[600];
    int i = J->vor_col[r], t = 0;
    expr *dLdu = expr_diff(c, L, m->sym_u[r]);
    terms[t++] = total_dt(P, dLdu);
    terms[t++] = expr_neg(c, expr_diff(c, L, m->sym_q[i]));
    for (int a = 0; a < nd; a++) {
        int nu = dep[a];
        expr *anr = P->C[nu * k + r];
        if (expr_is_num(anr, 0.0))
            continue;
        terms[t++] = expr_neg(c, expr_mul(c, expr_diff(c, L, m->sym_q[nu]), anr));
    }
    for (int a = 0; a < nd && t < 580; a++) {
        int nu = dep[a];
        for (int s = 0; s < k && t < 580; s++) {
            expr *b_ij = voronec_b(J, dep, nd, nu, r, s);
            if (expr_is_num(b_ij, 0.0))
                continue;
            terms[t++] =
                expr_neg(c, expr_product(c, (expr *[]){P->p[nu], b_ij, expr_sym(c, m->sym_u[s])}, 3));
        }
    }
    /* Q~_i = Q_i + sum_nu a_nu,i Q_nu (the potential part is in L~) */
    expr *qt = expr_subst(c, m->Q[i], P->sub, P->ns);
    for (int a = 0; a < nd; a++)
        qt = expr_add(c, qt, expr_mul(c, P->C[dep[a] * k + r], expr_subst(c, m->Q[dep[a]], P->sub, P->ns)));
    expr *lhs = simp(c, expr_sum(c, terms, t));
    expr *rhs = simp(c, qt);
    J->res[r] = expr_sub(c, lhs, rhs);
    json_array_append_new(J->eqs, exprjson_equation(c, lhs, rhs, 0));
}

/* Voronec, Lemos (10)-(11). -1 when out of memory. */
static int form_voronec(struct form_job *J)
{
    struct engine_model *m = J->m;
    struct pieces *P = J->P;
    expr_ctx *c = J->c;
    int n = J->n, k = J->k;
    json_object_set_new(J->d, "source",
                        json_string("Voronec (Lemos (10)-(11)): d/dt(dL~/dq_i') - dL~/dq_i = "
                                    "sum_nu dL~/dq_nu a_nu,i + sum_nu sum_j dL/dq_nu' b^nu_ij "
                                    "q_j' + Q~_i, L~ = L with q_nu' = sum_j a_nu,j q_j'"));
    int *dep = calloc(n, sizeof *dep), *isind = calloc(n, sizeof *isind);
    if (!dep || !isind) {
        free(dep), free(isind);
        return -1;
    }
    for (int r = 0; r < k; r++)
        isind[J->vor_col[r]] = 1;
    int nd = 0;
    for (int i = 0; i < n; i++)
        if (!isind[i])
            dep[nd++] = i;
    /* a_nu,r = dK_nu/du_r; L~ = (T - V)(q, K) */
    expr *L = expr_subst(c, expr_sub(c, m->T, m->V), P->sub, P->ns);
    json_object_set_new(J->d, "reduced_lagrangian", exprjson_text(c, simp(c, L)));
    for (int r = 0; r < k; r++)
        voronec_equation(J, L, dep, nd, r);
    free(dep), free(isind);
    return 0;
}

/* The document's head: model, form, speeds and kinematics. */
static void form_head(struct form_job *J)
{
    struct engine_model *m = J->m;
    json_object_set_new(J->d, "model_id", json_string(m->id));
    json_object_set_new(J->d, "form", json_string(form_names[J->f]));
    json_t *sp = json_array();
    for (int r = 0; r < J->k; r++)
        json_array_append_new(sp, json_string(m->speeds[r]));
    json_object_set_new(J->d, "speeds", sp);
    json_object_set_new(J->d, "kinematics", by_coord(J->P, J->P->K));
}

int forms_build(struct engine_model *m, const char *form, json_t **doc, expr ***residual_out, int **acc_out,
                json_t **problem)
{
    *doc = NULL;
    *problem = NULL;
    int f = forms_index(form);
    if (f < 0)
        return inapplicable(problem, "unknown form: one of hamel, appell, kane, maggi, voronec");
    int *vor_col = NULL;
    int rc = form_applies(m, f, &vor_col, problem);
    if (rc != 0)
        return rc;
    int k = m->k;
    struct pieces P = {0};
    expr_ctx *c = m->ctx;
    expr **res = calloc(k + 1, sizeof *res);
    json_t *d = json_object(), *eqs = json_array();
    rc = HAMEL_E_INTERNAL;
    if (!res || !d || !eqs || pieces_make(m, &P) < 0)
        goto fail;
    struct form_job J = {m, c, &P, d, eqs, res, vor_col, f, m->n, k};
    form_head(&J);
    static int (*const build[FORMS_COUNT])(struct form_job *) = {form_hamel, form_appell, form_kane_maggi,
                                                                 form_kane_maggi, form_voronec};
    if (build[f](&J) < 0)
        goto fail;
    json_object_set_new(d, "equations", eqs);
    eqs = NULL;
    json_t *accs = json_array();
    for (int r = 0; r < k; r++)
        json_array_append_new(accs, json_string(expr_sym_get(c, P.acc[r])->name));
    json_object_set_new(d, "accelerations", accs);
    if (expr_ctx_overflow(c)) {
        rc = HAMEL_E_LIMIT;
        *problem = hamel_problem_new(rc, "the form exceeds the expression node limit");
        goto fail_pieces;
    }
    json_object_set_new(d, "complete", json_true());
    *doc = d;
    if (residual_out)
        *residual_out = res;
    else
        free(res);
    if (acc_out)
        *acc_out = P.acc;
    else
        free(P.acc);
    pieces_free(&P);
    free(vor_col);
    return 0;
fail:
    if (!*problem && expr_ctx_overflow(c)) { /* pieces_make stopped by the node limit or budget */
        rc = HAMEL_E_LIMIT;
        *problem = hamel_problem_new(rc, "the form exceeds the expression node limit");
    } else if (!*problem) {
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory while deriving the form");
    }
fail_pieces:
    pieces_free(&P);
    free(P.acc);
    json_decref(d);
    json_decref(eqs);
    free(res);
    free(vor_col);
    return rc;
}
