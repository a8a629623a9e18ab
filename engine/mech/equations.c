/* equations.c — the derived equations of API.md §5 as JSON: the kinematics, the
 * mass matrix and forcing of M*(q,t) u' = F(q,u,t) on the independent speeds, the
 * equations written out (M* u' = F, one per speed), the gamma^j_rl that are not
 * identically zero (Greenwood 5.57), and T* — all from reduce.h's reduction, as
 * expressions of the input language and as LaTeX. */
#include "equations.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exprjson.h"

#define EQ_MAX_TERMS 64
#define EQ_GAMMA_MAX_SECONDS 0.2 /* CPU seconds; the gamma expressions stop here ("complete": false) */

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* not the load: the output must not depend on it */
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Printing walks an expression as a tree, and a DAG of shared sub-expressions can be
 * exponentially larger as a tree than as a graph: each expression's tree size is
 * counted first (expr_tree_size, linear in the DAG). One larger than
 * EQ_MAX_PRINT_NODES, or past EQ_MAX_PRINTED_NODES printed in all, is shown as null
 * with "complete": false, so that the equations of a large model cost a bounded part
 * of its compilation. */
#define EQ_MAX_PRINT_NODES 20000
#define EQ_MAX_PRINTED_NODES 50000
#define EQ_EXPAND_TREE 400 /* larger expressions (as trees) are not expanded */

struct printer {
    expr_ctx *c;
    size_t left; /* tree nodes that may still be printed */
    int too_big; /* an expression was left out */
};

static int printable(struct printer *p, const expr *e)
{
    size_t size = expr_tree_size(p->c, e);
    if (size <= EQ_MAX_PRINT_NODES && size <= p->left) {
        p->left -= size;
        return 1;
    }
    p->too_big = 1;
    return 0;
}

static json_t *str(struct printer *p, const expr *e)
{
    return printable(p, e) ? exprjson_text(p->c, e) : json_null();
}

static json_t *latex(struct printer *p, const expr *e)
{
    return printable(p, e) ? exprjson_latex(p->c, e) : json_null();
}

static expr *simp(expr_ctx *c, expr *e)
{
    if (expr_tree_size(c, e) <= EQ_EXPAND_TREE)
        e = expr_expand(c, e, EQ_MAX_TERMS);
    return expr_is_zero(c, e) ? expr_num(c, 0.0) : e;
}

json_t *equations_head(const struct engine_model *m, const char *formulation)
{
    json_t *eq = json_object();
    json_object_set_new(eq, "model_id", json_string(m->id));
    json_object_set_new(eq, "formulation", json_string(formulation));
    json_t *order = json_array();
    for (int j = 0; j < m->n; j++)
        json_array_append_new(order, json_string(m->row_names[j]));
    json_object_set_new(eq, "order", order);
    json_object_set_new(eq, "speeds", json_deep_copy(json_object_get(m->summary, "speed_definitions")));
    return eq;
}

int equations_store(struct engine_model *m, json_t *eq)
{
    free(m->equations);
    m->equations = json_dumps(eq, JSON_COMPACT);
    json_decref(eq);
    return m->equations ? 0 : -1;
}

expr *equations_mass_lhs(struct engine_model *m, expr *const *mass_row)
{
    expr_ctx *c = m->ctx;
    int k = m->k;
    expr **terms = calloc(k + 1, sizeof *terms);
    if (!terms)
        return NULL;
    for (int s = 0; s < k; s++) {
        /* the acceleration symbol u_s' */
        char name[96];
        snprintf(name, sizeof name, "%s'", m->speeds[s]);
        int acc = expr_sym_find(c, name);
        if (acc < 0 || expr_sym_get(c, acc)->cls != SYM_ACCEL)
            acc = expr_sym_add(c, name, SYM_ACCEL, s);
        terms[s] = acc >= 0 ? expr_mul(c, mass_row[s], expr_sym(c, acc)) : expr_num(c, 0.0);
    }
    expr *lhs = expr_sum(c, terms, k);
    free(terms);
    return lhs;
}

int equations_derive(struct engine_model *m, const reduce_result *red)
{
    expr_ctx *c = m->ctx;
    int n = m->n, k = m->k;
    struct printer pr = {c, EQ_MAX_PRINTED_NODES, 0};
    json_t *eq = equations_head(m, m->nlin == m->nc ? "hamel" : "multipliers");
    if (!red->have_phi) {
        json_object_set_new(eq, "complete", json_false());
        json_object_set_new(
            eq, "reason",
            json_string(m->nlin != m->nc ? "the model has constraints nonlinear in the velocities: it is "
                                           "integrated with Lagrange multipliers (formulation "
                                           "\"multipliers\"); there are no Boltzmann–Hamel equations to show"
                                         : red->why));
        goto store;
    }
    json_t *kj = json_object(), *kl = json_object();
    for (int i = 0; i < n; i++) {
        json_object_set_new(kj, m->coords[i], str(&pr, red->kin[i]));
        json_object_set_new(kl, m->coords[i], latex(&pr, red->kin[i]));
    }
    json_object_set_new(eq, "kinematics", kj);
    json_object_set_new(eq, "kinematics_latex", kl);
    json_t *mm = json_array(), *ml = json_array(), *fj = json_array(), *fl = json_array();
    json_t *eqs = json_array(), *eql = json_array();
    for (int r = 0; r < k; r++) {
        json_t *row = json_array(), *rowl = json_array();
        for (int s = 0; s < k; s++) {
            json_array_append_new(row, str(&pr, red->mass[r * k + s]));
            json_array_append_new(rowl, latex(&pr, red->mass[r * k + s]));
        }
        expr *lhs = equations_mass_lhs(m, red->mass + (size_t)r * k);
        if (!lhs)
            goto fail;
        json_array_append_new(mm, row);
        json_array_append_new(ml, rowl);
        json_array_append_new(fj, str(&pr, red->forcing[r]));
        json_array_append_new(fl, latex(&pr, red->forcing[r]));
        int whole = printable(&pr, lhs) && printable(&pr, red->forcing[r]);
        json_array_append_new(eqs, whole ? exprjson_equation(c, lhs, red->forcing[r], 0) : json_null());
        json_array_append_new(eql, whole ? exprjson_equation(c, lhs, red->forcing[r], 1) : json_null());
    }
    json_object_set_new(eq, "mass_matrix", mm);
    json_object_set_new(eq, "mass_matrix_latex", ml);
    json_object_set_new(eq, "forcing", fj);
    json_object_set_new(eq, "forcing_latex", fl);
    json_object_set_new(eq, "equations", eqs);
    json_object_set_new(eq, "equations_latex", eql);
    json_object_set_new(eq, "kinetic_energy_in_speeds", str(&pr, red->tstar));
    json_object_set_new(eq, "kinetic_energy_in_speeds_latex", latex(&pr, red->tstar));

    json_t *gj = json_array();
    size_t nn = (size_t)n * n;
    expr **terms = calloc(nn + 1, sizeof *terms);
    if (!terms)
        goto fail;
    double deadline = seconds() + EQ_GAMMA_MAX_SECONDS;
    int cut = 0;
    for (int j = 0; j < n && !cut; j++)
        for (int r = 0; r < n && !cut; r++)
            for (int l = 0; l < n && !cut; l++) {
                if (!m->gamma_nz[((size_t)j * n + r) * n + l])
                    continue;
                if (seconds() > deadline || pr.left == 0) {
                    cut = 1;
                    break;
                }
                int t = 0;
                for (int i = 0; i < n; i++)
                    for (int kk = 0; kk < n; kk++) {
                        expr *A = expr_sub(c, expr_diff(c, m->psi[j * n + i], m->sym_q[kk]),
                                           expr_diff(c, m->psi[j * n + kk], m->sym_q[i]));
                        if (expr_is_num(A, 0.0))
                            continue;
                        terms[t++] =
                            expr_product(c, (expr *[]){A, red->phi[kk * n + l], red->phi[i * n + r]}, 3);
                    }
                expr *gm = simp(c, expr_sum(c, terms, t));
                json_array_append_new(gj, json_pack("{s:s, s:s, s:s, s:o, s:o}", "j", m->row_names[j], "r",
                                                    m->row_names[r], "l", m->row_names[l], "expr",
                                                    str(&pr, gm), "latex", latex(&pr, gm)));
            }
    free(terms);
    json_object_set_new(eq, "gamma", gj);
    json_object_set_new(eq, "complete", json_boolean(!expr_ctx_overflow(c) && !cut && !pr.too_big));
    if (pr.too_big)
        json_object_set_new(eq, "reason",
                            json_string("expressions larger than the print limit are shown as null "
                                        "(the integrator evaluates them as shared sub-expressions)"));
    else if (cut)
        json_object_set_new(eq, "reason",
                            json_string("the gamma expressions were cut short by the time budget; "
                                        "POST /v1/hamel gives every value"));
    if (!red->exact)
        json_object_set_new(eq, "note",
                            json_string("Phi has expression pivots that may vanish where Psi is "
                                        "regular; the integrator inverts Psi numerically"));
store:
    return equations_store(m, eq);
fail:
    json_decref(eq);
    return -1;
}

void equations_accel_symbols(struct engine_model *m)
{
    expr_ctx *c = m->ctx;
    for (int s = 0; s < m->k; s++) {
        char name[96];
        snprintf(name, sizeof name, "%s'", m->speeds[s]);
        int acc = expr_sym_find(c, name);
        if (acc < 0 || expr_sym_get(c, acc)->cls != SYM_ACCEL)
            expr_sym_add(c, name, SYM_ACCEL, s); /* as equations_mass_lhs would */
    }
}

int equations_defer(struct engine_model *m, reduce_result *red)
{
    reduce_result *p = malloc(sizeof *p);
    if (!p)
        return -1;
    *p = *red;
    if (!p->kin)
        p->kin = m->red_kin; /* moved to the model: borrowed */
    if (!p->phi)
        p->phi = m->red_phi;
    red->phi = red->kin = red->mass = red->forcing = NULL;
    equations_pending_free(m);
    free(m->equations);
    m->equations = NULL;
    m->eq_pending = p;
    return 0;
}

void equations_pending_free(struct engine_model *m)
{
    reduce_result *p = m->eq_pending;
    if (!p)
        return;
    if (p->kin == m->red_kin)
        p->kin = NULL;
    if (p->phi == m->red_phi)
        p->phi = NULL;
    reduce_result_free(p);
    free(p);
    m->eq_pending = NULL;
}

int equations_ensure(struct engine_model *m)
{
    if (!m->eq_pending)
        return 0;
    int rc = equations_derive(m, m->eq_pending);
    equations_pending_free(m);
    return rc;
}
