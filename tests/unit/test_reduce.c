/* test_reduce.c — the structure-aware symbolic reduction (reduce.c) on models larger
 * than the shared cases: chains of rolling disks (Psi block-diagonal, one expression
 * pivot sin(theta_i) per disk) and cars with trailers (Psi block-triangular, one
 * expression pivot per axle) must stay on the symbolic path, and its right-hand side
 * must agree with the numeric inversion of Psi at random states. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "hamel.h"
#include "linalg.h"
#include "model.h"
#include "support.h"

static void setup(void) { engine_init(); }

static engine_model *load_model(const char *file)
{
    char path[600];
    snprintf(path, sizeof path, "bench/models/%s", file);
    json_error_t err;
    json_t *js = json_load_file(path, 0, &err);
    cr_assert_not_null(js, "%s: %s", path, err.text);
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(json_object_get(js, "model") ? json_object_get(js, "model") : js, NULL, &m,
                                  &problem);
    char *p = problem ? json_dumps(problem, 0) : NULL;
    cr_assert_eq(rc, 0, "%s: %s", file, p ? p : "");
    free(p);
    json_decref(problem);
    json_decref(js);
    return m;
}

/* The symbolic and the numeric right-hand sides agree at random states. */
static void expect_symbolic_matches_numeric(engine_model *m, const char *file)
{
    cr_assert_not_null(m->tape_fast, "%s: expected an exact symbolic reduction", file);
    hamel_ws *sym = hamel_ws_new(m, m->param_values), *num = hamel_ws_new(m, m->param_values);
    cr_assert(sym && num);
    hamel_ws_set_numeric(num, 1);
    double *in = calloc(m->n_in, sizeof *in), *y = calloc(m->n + m->k, sizeof *y);
    double *d1 = calloc(m->n + m->k, sizeof *d1), *d2 = calloc(m->n + m->k, sizeof *d2);
    int compared = 0;
    for (int trial = 0; trial < 10; trial++) {
        model_test_point(m, 300 + trial, in);
        for (int i = 0; i < m->n; i++)
            y[i] = 3.0 * in[model_input_q(m) + i] - 1.5;
        for (int r = 0; r < m->k; r++)
            y[m->n + r] = 4.0 * in[model_input_qd(m) + r % m->n] - 2.5;
        double t = in[model_input_t(m)];
        if (hamel_rhs(t, y, d1, sym) || hamel_rhs(t, y, d2, num))
            continue;
        compared++;
        for (int i = 0; i < m->n + m->k; i++)
            cr_assert_float_eq(d1[i], d2[i], 1e-9 * (1 + fabs(d2[i])),
                               "%s: component %d at trial %d: %g vs %g", file, i, trial, d1[i], d2[i]);
    }
    cr_expect_geq(compared, 8, "%s: most random states are regular", file);
    free(in);
    free(y);
    free(d1);
    free(d2);
    hamel_ws_free(sym);
    hamel_ws_free(num);
}

Test(reduce, disk_chain_stays_symbolic, .init = setup)
{
    static const char *const files[] = {"disk-chain-5.json", "disk-chain-8.json"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        engine_model *m = load_model(files[f]);
        expect_symbolic_matches_numeric(m, files[f]);
        json_t *s = engine_model_summary(m);
        cr_expect_str_eq(json_string_value(json_object_get(s, "reduction")), "symbolic");
        json_decref(s);
        engine_model_release(m);
    }
}

Test(reduce, car_with_trailers_stays_symbolic, .init = setup)
{
    static const char *const files[] = {"car-trailers-1.json", "car-trailers-3.json", "car-trailers-5.json"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        engine_model *m = load_model(files[f]);
        expect_symbolic_matches_numeric(m, files[f]);
        engine_model_release(m);
    }
}

/* The Whipple bicycle written with bodies (position constraint, dependent pitch) and
 * the smallest model found from it that showed the bug: their reduced forcing was a
 * DAG whose no-cancellation magnitude is 1e9..1e21 times its value, and the zero test
 * took F_phid and F_deltad for 0 (speeds_dot 0 at a leaning state); the compiler's
 * check against the numeric path then dropped the reduction. Now it is kept and agrees
 * with the numeric path. */
Test(reduce, bicycle_with_bodies_stays_symbolic, .init = setup, .timeout = 120)
{
    static const char *const files[] = {"whipple-front-frame.json",
                                        "../../api/examples/whipple-bicycle.json"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        engine_model *m = load_model(files[f]);
        json_t *s = engine_model_summary(m);
        cr_expect_null(json_object_get(s, "reduction_rejected"), "%s: the reduction agrees", files[f]);
        const char *how = json_string_value(json_object_get(s, "reduction"));
        if (!m->tape_fast) { /* rejected (asserted above), or past its time budget (valgrind) */
            cr_log_warn("%s: reduction \"%s\": nothing to compare", files[f], how);
            json_decref(s);
            engine_model_release(m);
            continue;
        }
        cr_expect_str_eq(how, "symbolic", "%s", files[f]);
        json_decref(s);
        /* states of a bicycle on the ground: angles within +-0.9 rad (past |phi| = pi/2
         * the models' sqrt(1 - sin(phi)^2) is |cos(phi)|, which the zero test, drawing
         * |symbols| < 1.35, does not tell from cos(phi)) */
        hamel_ws *sym = hamel_ws_new(m, m->param_values), *num = hamel_ws_new(m, m->param_values);
        cr_assert(sym && num);
        hamel_ws_set_numeric(num, 1);
        double in[256], y[16], d1[16], d2[16];
        cr_assert(m->n_in <= 256 && m->n + m->k <= 16);
        for (int trial = 0; trial < 10; trial++) {
            model_test_point(m, 300 + trial, in);
            for (int i = 0; i < m->n; i++)
                y[i] = 1.8 * (in[model_input_q(m) + i] - 0.85);
            for (int r = 0; r < m->k; r++)
                y[m->n + r] = 4.0 * in[model_input_qd(m) + r] - 3.4;
            cr_assert_eq(hamel_rhs(0.0, y, d2, num), 0);
            cr_assert_eq(hamel_rhs(0.0, y, d1, sym), 0);
            for (int i = 0; i < m->n + m->k; i++)
                cr_expect_float_eq(d1[i], d2[i], 1e-9 * (1 + fabs(d2[i])),
                                   "%s: component %d at trial %d: %g vs %g", files[f], i, trial, d1[i],
                                   d2[i]);
        }
        if (f == 1) { /* the holonomy analysis is complete: only the front contact integrates */
            json_t *hs = engine_model_summary(m), *ho = json_object_get(hs, "holonomy");
            const char *why = json_string_value(json_object_get(ho, "reason"));
            if (why && strstr(why, "takes longer")) { /* its wall-clock share, on a slow build */
                cr_log_warn("bicycle: %s", why);
            } else {
                cr_expect(json_is_true(json_object_get(ho, "complete")), "bicycle: holonomy complete");
                cr_expect_eq(json_integer_value(json_object_get(ho, "closure_rank")), 7);
                cr_expect_eq(json_integer_value(json_object_get(ho, "bracket_order")), 3);
                cr_expect_eq(json_integer_value(json_object_get(ho, "integrable_combinations")), 1);
                const json_t *co =
                    json_object_get(json_array_get(json_object_get(ho, "combinations"), 0), "coefficients");
                cr_expect_float_eq(json_number_value(json_object_get(co, "front_contact")), 1.0, 1e-12);
                cr_expect_eq(json_object_size(co), 1);
            }
            json_decref(hs);
        }
        if (f == 1) { /* the state of the report: upright but for phi = 0.01, v = 5 m/s */
            for (int i = 0; i < m->n + m->k; i++)
                y[i] = 0.0;
            y[model_coord_index(m, "phi")] = 0.01;
            y[m->n + model_speed_index(m, "thetaRd")] = -5.0 / 0.3;
            cr_assert_eq(hamel_rhs(0.0, y, d1, sym), 0);
            cr_assert_eq(hamel_rhs(0.0, y, d2, num), 0);
            int phid = m->n + model_speed_index(m, "phid"), deltad = m->n + model_speed_index(m, "deltad");
            cr_expect_float_eq(d2[phid], 0.09489616284656924, 1e-9, "numeric phid' %.17g", d2[phid]);
            cr_expect_float_eq(d2[deltad], 0.11719281548325346, 1e-9, "numeric deltad' %.17g", d2[deltad]);
            cr_expect_float_eq(d1[phid], d2[phid], 1e-12, "symbolic phid' %.17g", d1[phid]);
            cr_expect_float_eq(d1[deltad], d2[deltad], 1e-12, "symbolic deltad' %.17g", d1[deltad]);
        }
        hamel_ws_free(sym);
        hamel_ws_free(num);
        engine_model_release(m);
    }
}

/* Definitions that each use the previous one twice make expressions whose tree is
 * exponentially larger than their DAG: the model compiles (the tapes share the
 * sub-expressions), and the equations show what is too large to print as null with
 * "complete": false instead of printing 2^14-node trees. */
Test(reduce, equations_of_a_deep_dag_are_bounded, .init = setup)
{
    json_t *defs = json_array();
    json_array_append_new(defs, json_pack("{s:s, s:s}", "name", "d0", "expr", "1 + x^2"));
    for (int i = 1; i <= 14; i++) {
        char name[16], ex[64];
        snprintf(name, sizeof name, "d%d", i);
        snprintf(ex, sizeof ex, "d%d + x*sin(d%d)", i - 1, i - 1);
        json_array_append_new(defs, json_pack("{s:s, s:s}", "name", name, "expr", ex));
    }
    json_t *js = json_pack("{s:[s,s], s:{s:f}, s:o, s:s, s:s}", "coordinates", "x", "y", "parameters", "m",
                           1.0, "definitions", defs, "kinetic_energy", "1/2*m*(x'^2 + y'^2)",
                           "potential_energy", "d14*y^2");
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(js, NULL, &m, &problem);
    char *p = problem ? json_dumps(problem, 0) : NULL;
    cr_assert_eq(rc, 0, "%s", p ? p : "");
    free(p);
    cr_expect_not_null(m->tape_fast);
    json_t *eq = NULL;
    cr_assert_eq(engine_equations(m, &eq, &problem), 0);
    cr_expect(json_is_false(json_object_get(eq, "complete")), "too large to print: complete is false");
    json_t *forcing = json_object_get(eq, "forcing");
    cr_expect(json_is_null(json_array_get(forcing, 0)) || json_is_null(json_array_get(forcing, 1)),
              "a forcing term too large to print is null");
    cr_expect_str_eq(
        json_string_value(json_array_get(json_array_get(json_object_get(eq, "mass_matrix"), 0), 0)), "m",
        "small entries are still printed");
    json_decref(eq);
    engine_model_release(m);
    json_decref(js);
}

/* The numeric path on Psi's block structure and M's pattern (hamel.c rhs_sparse)
 * agrees with the dense one (numeric 2: LU of the whole Psi, dense products) and with
 * the symbolic reduction, on the bench families, the bicycle and the shared cases. */
Test(reduce, sparse_numeric_path_matches_dense, .init = setup)
{
    static const char *const files[] = {"disk-chain-5.json",
                                        "car-trailers-3.json",
                                        "whipple-hand.json",
                                        "../../../shared/cases/greenwood-5.3-rolling-disk.json",
                                        "../../../shared/cases/lemos-rolling-sphere.json",
                                        "../../../shared/cases/greenwood-5.1-knife-edge-body.json"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        engine_model *m = load_model(files[f]);
        cr_assert_not_null(m->sparse, "%s: Psi's structure was found", files[f]);
        hamel_ws *sparse = hamel_ws_new(m, m->param_values), *dense = hamel_ws_new(m, m->param_values);
        hamel_ws_set_numeric(sparse, 1);
        hamel_ws_set_numeric(dense, 2);
        int N = m->n + m->k, compared = 0;
        double *in = calloc(m->n_in, sizeof *in), *y = calloc(N, sizeof *y);
        double *d1 = calloc(N, sizeof *d1), *d2 = calloc(N, sizeof *d2);
        for (int trial = 0; trial < 10; trial++) {
            model_test_point(m, 400 + trial, in);
            for (int i = 0; i < m->n; i++)
                y[i] = 3.0 * in[model_input_q(m) + i] - 1.5;
            for (int r = 0; r < m->k; r++)
                y[m->n + r] = 4.0 * in[model_input_qd(m) + r % m->n] - 2.5;
            double t = in[model_input_t(m)];
            int r1 = hamel_rhs(t, y, d1, sparse), r2 = hamel_rhs(t, y, d2, dense);
            cr_expect_eq(r1, r2, "%s: both paths see the same regularity at trial %d", files[f], trial);
            if (r1 || r2)
                continue;
            compared++;
            for (int i = 0; i < N; i++)
                cr_assert_float_eq(d1[i], d2[i], 1e-9 * (1 + fabs(d2[i])),
                                   "%s: component %d at trial %d: %g vs %g", files[f], i, trial, d1[i],
                                   d2[i]);
            /* the output samples' q' (hamel_qdot) on the block structure too */
            cr_assert_eq(hamel_qdot(sparse, t, y, y + m->n, d1), 0);
            cr_assert_eq(hamel_qdot(dense, t, y, y + m->n, d2), 0);
            for (int i = 0; i < m->n; i++)
                cr_assert_float_eq(d1[i], d2[i], 1e-9 * (1 + fabs(d2[i])), "%s: q'[%d] at trial %d", files[f],
                                   i, trial);
        }
        cr_expect_geq(compared, 8, "%s", files[f]);
        free(in);
        free(y);
        free(d1);
        free(d2);
        hamel_ws_free(sparse);
        hamel_ws_free(dense);
        engine_model_release(m);
    }
}

/* expr_factor_sums pulls shared factors out of sums (multivariate Horner) and keeps
 * the value: a*b + a*c + a*d*e becomes a*(b + c + d*e); an expanded polynomial in
 * sines evaluates to the same numbers with fewer multiplications on its tape. */
Test(reduce, factor_sums_keeps_values, .init = setup)
{
    expr_ctx *c = expr_ctx_new(0);
    const char *names[] = {"a", "b", "cc", "d", "e", "x", "y", "z"};
    for (int i = 0; i < 8; i++)
        expr_sym_add(c, names[i], SYM_PARAM, i);
    expr_parse_opts o = {0, 0, 0, "test"};
    expr_error err;
    expr *e = expr_parse(c, "a*b + a*cc + a*d*e", &o, &err);
    cr_assert_not_null(e);
    expr *roots[2] = {e, NULL};
    expr_factor_sums(c, roots, 1);
    char *s = expr_print(c, roots[0]);
    cr_expect_str_eq(s, "a*(b + cc + d*e)");
    free(s);
    expr *p = expr_parse(c, "(x + y*sin(z) + a*cos(x))^4*(1 + b*x) - 3*x*y*sin(z)^2", &o, &err);
    cr_assert_not_null(p);
    roots[0] = expr_expand(c, p, 4000);
    roots[1] = roots[0];
    expr_factor_sums(c, roots + 1, 1);
    cr_expect_neq(roots[0], roots[1], "something was factored");
    double vals[16];
    for (int trial = 0; trial < 5; trial++) {
        for (int i = 0; i < 8; i++)
            vals[i] = 0.3 + 0.17 * i + 0.41 * trial;
        double v0 = expr_eval(c, roots[0], vals), v1 = expr_eval(c, roots[1], vals);
        cr_expect_float_eq(v0, v1, 1e-12 * (1 + fabs(v0)), "trial %d: %g vs %g", trial, v0, v1);
    }
    int sym[8];
    for (int i = 0; i < 8; i++)
        sym[i] = i;
    tape *t0 = tape_build(c, roots, 1, sym, 8), *t1 = tape_build(c, roots + 1, 1, sym, 8);
    cr_assert(t0 && t1);
    cr_expect_lt(t1->n_ins, t0->n_ins, "fewer instructions: %d vs %d", t1->n_ins, t0->n_ins);
    tape_free(t0);
    tape_free(t1);
    expr_ctx_free(c);
}

/* M* (the reduced mass matrix) solved on its connected components (hamel.c:
 * invert_mass_components, solve_mass_components; issue 19 item 6) is bit for bit the
 * dense Cholesky solve: for a chain of 5 disks (M* constant, 5 components of 3) the
 * inverse the workspace keeps equals the dense one in every bit, and for the rolling disk
 * with a Suslov constraint (M* on q, 2 components) u' from hamel_rhs equals the dense
 * solve of the tape's own M* and F at random states. */
static void dense_solve(int k, const double *up, const double *F, double *x)
{
    double *a = calloc((size_t)k * k, sizeof *a);
    cr_assert_not_null(a);
    for (int r = 0, o = 0; r < k; r++)
        for (int s = r; s < k; s++, o++)
            a[r * k + s] = a[s * k + r] = up[o];
    memcpy(x, F, k * sizeof *x);
    cr_assert_eq(linalg_chol(k, a), 0, "M* positive definite");
    linalg_chol_solve(k, a, x);
    free(a);
}

Test(reduce, mass_on_components_is_the_dense_solve_bit_for_bit, .init = setup)
{
    engine_model *m = load_model("disk-chain-5.json");
    int k = m->k;
    cr_assert(m->tape_fast && m->fast_mass_const && m->tape_mass, "disk-chain-5: a constant M*");
    double *minv = calloc((size_t)k * k, sizeof *minv), *in = calloc(m->n_in + 1, sizeof *in);
    double *work = calloc(m->work_len + 1, sizeof *work), *up = calloc((size_t)k * k, sizeof *up);
    double *e = calloc(k, sizeof *e), *x = calloc(k, sizeof *x);
    cr_assert(minv && in && work && up && e && x);
    cr_assert_eq(hamel_const_mass_inverse(m, m->param_values, minv), 0);
    memcpy(in, m->param_values, m->np * sizeof *in);
    tape_run(m->tape_mass, in, work, up);
    int offdiag = 0;
    for (int c = 0; c < k; c++) {
        memset(e, 0, k * sizeof *e);
        e[c] = 1.0;
        dense_solve(k, up, e, x);
        for (int r = 0; r < k; r++) {
            cr_assert(memcmp(&x[r], &minv[r * k + c], sizeof x[r]) == 0,
                      "M*^-1[%d][%d]: %.17g (components) vs %.17g (dense)", r, c, minv[r * k + c], x[r]);
            offdiag += x[r] == 0.0;
        }
    }
    cr_expect_gt(offdiag, 0, "M*^-1 has zeros between the disks");
    free(minv), free(in), free(work), free(up), free(e), free(x);
    engine_model_release(m);

    json_t *cs = support_load_case("greenwood-5.5-rolling-disk-suslov.json");
    m = support_compile_json(json_object_get(cs, "model"));
    json_decref(cs);
    int n = m->n;
    k = m->k;
    cr_assert(m->tape_fast && !m->fast_mass_const, "the Suslov disk: M* on q");
    hamel_ws *w = hamel_ws_new(m, m->param_values);
    in = calloc(m->n_in + 1, sizeof *in);
    work = calloc(m->work_len + 1, sizeof *work);
    double *out = calloc(m->tape_fast->n_outputs + 1, sizeof *out), *y = calloc(n + k, sizeof *y);
    double *dy = calloc(n + k, sizeof *dy);
    x = calloc(k, sizeof *x);
    cr_assert(w && in && work && out && y && dy && x);
    for (int trial = 0; trial < 10; trial++) {
        model_test_point(m, 400 + trial, in);
        for (int i = 0; i < n; i++)
            y[i] = 3.0 * in[model_input_q(m) + i] - 1.5;
        for (int r = 0; r < k; r++)
            y[n + r] = 4.0 * in[model_input_qd(m) + r % n] - 2.5;
        for (int r = 0; r < k; r++)
            in[m->u_slot[r]] = y[n + r];
        memcpy(in + model_input_q(m), y, n * sizeof *y);
        double t = in[model_input_t(m)];
        tape_run(m->tape_fast, in, work, out);
        cr_assert_eq(hamel_rhs(t, y, dy, w), 0);
        dense_solve(k, out + n, out + n + k * (k + 1) / 2, x);
        cr_assert(memcmp(x, dy + n, k * sizeof *x) == 0,
                  "trial %d: u' on the components equals the dense solve", trial);
    }
    free(in), free(work), free(out), free(y), free(dy), free(x);
    hamel_ws_free(w);
    engine_model_release(m);
}
