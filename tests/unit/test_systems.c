/* test_systems.c — systems outside ../shared/cases, against independent derivations.
 *
 * 1. A rheonomic knife edge: a particle in the plane on a spring, whose velocity must
 *    point along the direction (cos wt, sin wt) turning at a prescribed rate w.
 *    By hand: with u = x' cos wt + y' sin wt, m u' = -k (x cos wt + y sin wt),
 *    x' = u cos wt, y' = u sin wt; the Hamel coefficients are gamma^c_u = w,
 *    gamma^u_c = -w (rheonomic, Greenwood 5.58) and no gamma^j_rl. The hand-written
 *    right-hand side below is integrated by the same driver and compared.
 * 2. Appell's nonlinear constraint (Hussain, §4.2): a particle under gravity with
 *    z' = a sqrt(x'^2 + y'^2). With Chetaev's virtual displacements the horizontal
 *    speed falls linearly, v = v0 - g a t / (1 + a^2), the direction of motion is
 *    fixed, and T + V is conserved (the constraint is homogeneous in the velocities).
 * 3. The symbolic reduction and the numeric inversion of Psi give the same
 *    right-hand side at random states, for every shared case.
 * 4. The systems in tests/golden/systems: both formulations agree and (5.94) holds.
 * 5. A sphere on a turntable (a moving constraint, angular velocities as speeds): its
 *    centre circles at 2/7 of the table's rate, in closed form, in both formulations.
 * 6. A particle held at constant speed under gravity (nonlinear, Chetaev): heading,
 *    position and constraint force in closed form (the Gudermannian).
 * 7. The Chaplygin sleigh in the blade's speed and turning rate: tanh / sech in closed
 *    form, and its two Hamel coefficients by hand.
 */
#include <criterion/criterion.h>
#include <gsl/gsl_errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "hamel.h"
#include "integ.h"
#include "model.h"
#include "support.h"

static void setup(void) { engine_init(); }

/* ---- 1. the rheonomic knife edge ---- */

static const char *const knife_model =
    "{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"m\": 1.5, \"k\": 2.0, \"w\": 0.7},"
    " \"kinetic_energy\": \"m/2*(x'^2 + y'^2)\", \"potential_energy\": \"k/2*(x^2 + y^2)\","
    " \"constraints\": [{\"name\": \"c\", \"expr\": \"x'*sin(w*t) - y'*cos(w*t)\"}],"
    " \"speeds\": [{\"name\": \"u\", \"expr\": \"x'*cos(w*t) + y'*sin(w*t)\"}]}";

struct knife {
    double m, k, w;
};

static int knife_rhs(double t, const double *y, double *dy, void *params)
{
    const struct knife *p = params;
    double c = cos(p->w * t), s = sin(p->w * t);
    dy[0] = y[2] * c;
    dy[1] = y[2] * s;
    dy[2] = -p->k / p->m * (y[0] * c + y[1] * s);
    return GSL_SUCCESS;
}

struct samples {
    double y[64][3];
    int n;
};

static int keep(double t, const double *y, void *ctx)
{
    (void)t;
    struct samples *s = ctx;
    memcpy(s->y[s->n++], y, 3 * sizeof *y);
    return 0;
}

Test(systems, rheonomic_knife_edge, .init = setup)
{
    engine_model *m = support_compile_text(knife_model);
    json_t *sum = engine_model_summary(m);
    json_t *c0 = json_array_get(json_object_get(sum, "constraints"), 0);
    cr_expect(json_is_true(json_object_get(c0, "rheonomic")), "the turning knife edge is rheonomic");
    cr_expect(json_is_false(json_object_get(c0, "holonomic")), "and not integrable");
    cr_expect(json_is_false(json_object_get(sum, "scleronomic")));
    cr_expect(json_is_false(json_object_get(sum, "energy_conserved")), "energy is not a first integral here");
    json_decref(sum);

    json_t *r = support_run(
        m, "{\"initial\": {\"t\": 0.3, \"q\": {\"x\": 0.4, \"y\": -0.2}, \"speeds\": {\"u\": 1.1}},"
           " \"t_end\": 8.3, \"output\": {\"samples\": 41},"
           " \"integrator\": {\"rtol\": 1e-11, \"atol\": 1e-13}}");
    struct knife p = {1.5, 2.0, 0.7};
    integ_system sys = {3, knife_rhs, &p};
    integ_options opt = integ_default_options;
    opt.rtol = 1e-11;
    opt.atol = 1e-13;
    double times[41], y0[3] = {0.4, -0.2, 1.1};
    for (int i = 0; i < 41; i++)
        times[i] = 0.3 + 8.0 * i / 40.0;
    times[40] = 8.3;
    struct samples s = {.n = 0};
    integ_stats st;
    cr_assert_eq(integ_run(&sys, &opt, 0.3, y0, times, 41, keep, &s, &st), 0, "hand-written run: %s",
                 st.reason);
    json_t *traj = json_object_get(r, "trajectory");
    for (int i = 0; i < 41; i++) {
        cr_assert_float_eq(support_traj_at(traj, "q", "x", i), s.y[i][0], 1e-8, "x at sample %d", i);
        cr_assert_float_eq(support_traj_at(traj, "q", "y", i), s.y[i][1], 1e-8, "y at sample %d", i);
        cr_assert_float_eq(support_traj_at(traj, "speeds", "u", i), s.y[i][2], 1e-8, "u at sample %d", i);
    }
    double res = support_max_residual(r);
    cr_expect_leq(res, 1e-12, "constraint residual %g", res);

    /* gamma^c_u = w, gamma^u_c = -w, at any point, and no gamma^j_rl */
    json_t *pt = json_array_get(json_object_get(json_object_get(r, "hamel"), "points"), 0);
    cr_expect_eq(json_array_size(json_object_get(pt, "gamma")), 0, "no gamma^j_rl for a constant Psi in q");
    json_t *gt = json_object_get(pt, "gamma_t");
    cr_assert_eq(json_array_size(gt), 2, "two rheonomic coefficients, got %zu", json_array_size(gt));
    for (size_t i = 0; i < 2; i++) {
        json_t *g = json_array_get(gt, i);
        const char *j = json_string_value(json_object_get(g, "j"));
        double v = json_number_value(json_object_get(g, "value"));
        if (strcmp(j, "c") == 0)
            cr_expect_float_eq(v, 0.7, 1e-14, "gamma^c_u = w");
        else
            cr_expect_float_eq(v, -0.7, 1e-14, "gamma^u_c = -w");
    }
    json_decref(r);

    /* A formulation check on a rheonomic system: multipliers agree with Hamel. */
    json_t *h = support_run(
        m, "{\"initial\": {\"t\": 0.3, \"q\": {\"x\": 0.4, \"y\": -0.2}, \"speeds\": {\"u\": 1.1}},"
           " \"t_end\": 8.3, \"output\": {\"samples\": 5}, \"formulation\": \"multipliers\","
           " \"integrator\": {\"rtol\": 1e-11, \"atol\": 1e-13}}");
    json_t *ht = json_object_get(h, "trajectory");
    cr_expect_float_eq(support_traj_at(ht, "q", "x", 4), s.y[40][0], 1e-7, "multipliers x(t_end)");
    cr_expect_float_eq(support_traj_at(ht, "q", "y", 4), s.y[40][1], 1e-7, "multipliers y(t_end)");
    json_decref(h);
    engine_model_release(m);
}

/* ---- 2. Appell's nonlinear constraint ---- */

Test(systems, appell_nonlinear_constraint, .init = setup)
{
    engine_model *m = support_compile_text(
        "{\"coordinates\": [\"x\", \"y\", \"z\"], \"parameters\": {\"m\": 2.0, \"g\": 9.81, \"a\": 0.3},"
        " \"kinetic_energy\": \"m/2*(x'^2 + y'^2 + z'^2)\", \"potential_energy\": \"m*g*z\","
        " \"constraints\": [{\"name\": \"appell\", \"expr\": \"z' - a*sqrt(x'^2 + y'^2)\"}]}");
    json_t *sum = engine_model_summary(m);
    json_t *c0 = json_array_get(json_object_get(sum, "constraints"), 0);
    cr_expect(json_is_false(json_object_get(c0, "linear")), "Appell's constraint is nonlinear");
    cr_expect_str_eq(json_string_value(json_object_get(sum, "default_formulation")), "multipliers");
    cr_expect(json_is_true(json_object_get(sum, "energy_conserved")),
              "homogeneous constraint: T + V conserved");
    json_decref(sum);

    /* v0 = 3, direction (0.6, 0.8); it stops at t = v0 (1 + a^2) / (g a) = 1.1111... */
    const double v0 = 3.0, g = 9.81, a = 0.3, z0 = v0 * a;
    char req[512];
    snprintf(req, sizeof req,
             "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"z\": 1}, \"qdot\": {\"x\": %.17g, \"y\": %.17g, "
             "\"z\": %.17g}}, \"t_end\": 0.9, \"output\": {\"samples\": 10},"
             " \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}}",
             0.6 * v0, 0.8 * v0, z0);
    json_t *r = support_run(m, req);
    cr_expect_str_eq(json_string_value(json_object_get(r, "formulation")), "multipliers");
    json_t *traj = json_object_get(r, "trajectory");
    for (size_t i = 0; i < 10; i++) {
        double t = json_number_value(json_array_get(json_object_get(traj, "t"), i));
        double xd = support_traj_at(traj, "qdot", "x", i), yd = support_traj_at(traj, "qdot", "y", i),
               zd = support_traj_at(traj, "qdot", "z", i);
        double v = v0 - g * a * t / (1 + a * a);
        cr_assert_float_eq(hypot(xd, yd), v, 1e-8, "horizontal speed at t=%g: %.12g, analytic %.12g", t,
                           hypot(xd, yd), v);
        cr_assert_float_eq(zd, a * v, 1e-8, "z' = a v at t=%g", t);
        cr_assert_float_eq(yd * 0.6 - xd * 0.8, 0.0, 1e-10, "the direction of motion stays fixed");
        /* x(t) = 0.6 (v0 t - g a t^2 / (2 (1 + a^2))) */
        double s = v0 * t - g * a * t * t / (2 * (1 + a * a));
        cr_assert_float_eq(support_traj_at(traj, "q", "x", i), 0.6 * s, 1e-8, "x at t=%g", t);
    }
    json_t *energy = json_object_get(json_object_get(r, "checks"), "energy");
    cr_expect_leq(json_number_value(json_object_get(energy, "max_rel_drift")), 1e-9, "T + V drifts by %g",
                  json_number_value(json_object_get(energy, "max_rel_drift")));
    cr_expect_not_null(json_object_get(json_object_get(traj, "multipliers"), "appell"),
                       "the multiplier is reported");
    json_decref(r);

    /* Asking for the Boltzmann–Hamel formulation is refused with the reason. */
    json_error_t err;
    json_t *bad =
        json_loads("{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"z\": 0}, \"qdot\": {\"x\": 1, \"y\": 0,"
                   " \"z\": 0.3}}, \"t_end\": 1, \"formulation\": \"hamel\"}",
                   0, &err);
    json_t *result = NULL, *problem = NULL;
    int rc = engine_simulate(m, bad, NULL, NULL, &result, &problem);
    cr_expect_eq(rc, HAMEL_E_FORMULATION, "hamel on a nonlinear constraint: %d", rc);
    cr_expect_neq(hamel_problem_code(problem), HAMEL_E_INTERNAL);
    char *text = json_dumps(problem, 0);
    cr_expect(text && strstr(text, "nonlinear"), "the problem explains why: %s", text ? text : "(none)");
    free(text);
    json_decref(problem);
    json_decref(bad);
    engine_model_release(m);
}

/* ---- 3. symbolic reduction == numeric inversion ---- */

Test(systems, reduction_matches_numeric_inverse, .init = setup)
{
    static const char *const files[] = {
        "greenwood-5.1-knife-edge-body.json", "greenwood-5.2-dumbbell-hamel.json",
        "greenwood-5.3-rolling-disk.json",    "greenwood-5.5-rolling-disk-suslov.json",
        "lemos-rolling-sphere.json",          "wang-pao-axle-incline.json"};
    const char *dir = getenv("HAMEL_CASES") ? getenv("HAMEL_CASES") : "../shared/cases";
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        json_error_t err;
        json_t *c = json_load_file(path, 0, &err);
        cr_assert_not_null(c, "%s: %s", path, err.text);
        engine_model *m = NULL;
        json_t *problem = NULL;
        cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
        cr_assert_not_null(m->tape_fast, "%s: expected an exact symbolic reduction", files[f]);
        hamel_ws *sym = hamel_ws_new(m, m->param_values), *num = hamel_ws_new(m, m->param_values);
        hamel_ws_set_numeric(num, 1);
        double in[256], y[128], d1[128], d2[128];
        for (int trial = 0; trial < 20; trial++) {
            model_test_point(m, 200 + trial, in);
            for (int i = 0; i < m->n; i++)
                y[i] = 3.0 * in[model_input_q(m) + i] - 1.5;
            for (int r = 0; r < m->k; r++)
                y[m->n + r] = 4.0 * in[model_input_qd(m) + r] - 2.5;
            double t = in[model_input_t(m)];
            int r1 = hamel_rhs(t, y, d1, sym), r2 = hamel_rhs(t, y, d2, num);
            if (r1 || r2)
                continue; /* a singular configuration for both */
            for (int i = 0; i < m->n + m->k; i++)
                cr_assert_float_eq(d1[i], d2[i], 1e-9 * (1 + fabs(d2[i])), "%s: component %d at trial %d",
                                   files[f], i, trial);
        }
        hamel_ws_free(sym);
        hamel_ws_free(num);
        engine_model_release(m);
        json_decref(c);
    }
}

/* ---- 4. more systems (tests/golden/systems): formulations agree ---- */

#include <criterion/parameterized.h>
#include <glob.h>

struct system_param {
    char file[512];
};

static struct system_param system_params[32];

ParameterizedTestParameters(systems, golden)
{
    glob_t g;
    int n = 0;
    if (glob("tests/golden/systems/*.json", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && n < 32; i++)
            snprintf(system_params[n++].file, sizeof system_params[0].file, "%s", g.gl_pathv[i]);
        globfree(&g);
    }
    return cr_make_param_array(struct system_param, system_params, n);
}

/* Each system runs in both formulations (they must agree at t_end to 1e-7), keeps its
 * constraints, conserves its energy when it should, and satisfies (5.94). */
ParameterizedTest(struct system_param *p, systems, golden, .init = setup)
{
    json_error_t err;
    json_t *c = json_load_file(p->file, 0, &err);
    cr_assert_not_null(c, "%s: %s", p->file, err.text);
    engine_model *m = NULL;
    json_t *problem = NULL, *r[2] = {NULL, NULL};
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0, "%s", p->file);
    static const char *const forms[2] = {"hamel", "multipliers"};
    for (int f = 0; f < 2; f++) {
        json_t *req = json_deep_copy(json_object_get(c, "simulation"));
        json_object_set_new(req, "formulation", json_string(forms[f]));
        int rc = engine_simulate(m, req, NULL, NULL, &r[f], &problem);
        if (rc)
            cr_assert_fail("%s (%s): %s", p->file, forms[f], json_dumps(problem, 0));
        json_decref(req);
        json_t *checks = json_object_get(r[f], "checks");
        double res = support_max_residual(r[f]);
        cr_expect_leq(res, f == 0 ? 1e-12 : 1e-9, "%s (%s): constraint residual %g", p->file, forms[f], res);
        json_t *energy = json_object_get(checks, "energy");
        if (json_is_true(json_object_get(energy, "conserved_expected")))
            cr_expect_leq(json_number_value(json_object_get(energy, "max_rel_drift")), 1e-9,
                          "%s (%s): energy drift", p->file, forms[f]);
    }
    struct engine_model *mm = m;
    for (int i = 0; i < mm->n; i++) {
        const char *name = mm->coords[i];
        json_t *a = json_object_get(json_object_get(json_object_get(r[0], "trajectory"), "q"), name);
        json_t *b = json_object_get(json_object_get(json_object_get(r[1], "trajectory"), "q"), name);
        double qa = json_number_value(json_array_get(a, json_array_size(a) - 1));
        double qb = json_number_value(json_array_get(b, json_array_size(b) - 1));
        cr_expect_leq(fabs(qa - qb), 1e-7, "%s: %s at t_end: hamel %.15g, multipliers %.15g", p->file, name,
                      qa, qb);
    }
    /* (5.94) with the gammas, at random states */
    hamel_ws *w = hamel_ws_new(m, mm->param_values);
    double in[256], y[128], dy[128], res[64];
    for (int trial = 0; trial < 5; trial++) {
        model_test_point(mm, 400 + trial, in);
        memcpy(y, in + model_input_q(mm), mm->n * sizeof *y);
        for (int k = 0; k < mm->k; k++)
            y[mm->n + k] = 2.0 * in[model_input_qd(mm) + k] - 1.0;
        double t = in[model_input_t(mm)];
        if (hamel_rhs(t, y, dy, w))
            continue;
        cr_assert_eq(hamel_bh_residual(w, t, y, dy + mm->n, res), 0);
        double scale = 1.0;
        for (int k = 0; k < mm->k; k++)
            scale = fmax(scale, fabs(dy[mm->n + k]));
        for (int k = 0; k < mm->k; k++)
            cr_expect_leq(fabs(res[k]), 1e-9 * scale, "%s: (5.94) residual %g", p->file, res[k]);
    }
    hamel_ws_free(w);
    json_decref(r[0]);
    json_decref(r[1]);
    engine_model_release(m);
    json_decref(c);
}

/* ---- 5. a sphere rolling on a turntable (moving constraint, body-rate speeds) ----
 *
 * A homogeneous sphere (radius a, I = 2/5 m a^2) rolls without slipping on a table
 * turning at W about z. Speeds: the space-frame angular velocity (wx, wy, wz) through
 * ZXZ Euler angles. The contact point moves with the table:
 *   x' - a wy = -W y,   y' + a wx = W x      (velocity-free terms: rheonomic).
 * By hand: m r'' = F, I w' = (-a e_z) x F; differentiating the constraints,
 *   x'' (1 + m a^2 / I) = -W y',   y'' (1 + m a^2 / I) = W x',
 * so the centre's velocity turns at k = W / (1 + 5/2) = 2W/7 and wz is constant:
 *   z(t) = z0 + z0' (e^{ikt} - 1) / (ik),  z = x + iy.  */

static const char *const turntable_model =
    "{\"coordinates\": [\"x\", \"y\", \"phi\", \"theta\", \"psi\"],"
    " \"parameters\": {\"m\": 1.3, \"a\": 0.5, \"W\": 0.9},"
    " \"definitions\": [{\"name\": \"I\", \"expr\": \"2/5*m*a^2\"}],"
    " \"kinetic_energy\": \"m/2*(x'^2 + y'^2) + I/2*(phi'^2 + theta'^2 + psi'^2 + 2*cos(theta)*phi'*psi')\","
    " \"speeds\": [{\"name\": \"wx\", \"expr\": \"theta'*cos(phi) + psi'*sin(theta)*sin(phi)\"},"
    "  {\"name\": \"wy\", \"expr\": \"theta'*sin(phi) - psi'*sin(theta)*cos(phi)\"},"
    "  {\"name\": \"wz\", \"expr\": \"phi' + psi'*cos(theta)\"}],"
    " \"constraints\": ["
    "  {\"name\": \"slip_x\", \"expr\": \"x' - a*(theta'*sin(phi) - psi'*sin(theta)*cos(phi)) + W*y\"},"
    "  {\"name\": \"slip_y\", \"expr\": \"y' + a*(theta'*cos(phi) + psi'*sin(theta)*sin(phi)) - W*x\"}]}";

Test(systems, sphere_on_a_turntable, .init = setup)
{
    engine_model *m = support_compile_text(turntable_model);
    json_t *sum = engine_model_summary(m);
    for (size_t j = 0; j < 2; j++) {
        json_t *c = json_array_get(json_object_get(sum, "constraints"), j);
        cr_expect(json_is_true(json_object_get(c, "rheonomic")), "the table moves: constraint %zu", j);
        cr_expect(json_is_false(json_object_get(c, "holonomic")), "rolling is not integrable: %zu", j);
    }
    cr_expect(json_is_false(json_object_get(sum, "energy_conserved")), "the table does work");
    json_decref(sum);

    const double a = 0.5, W = 0.9, k = 2 * W / 7, x0 = 0.3, y0 = -0.2, wx = 0.4, wy = -0.7, wz = 1.3;
    const double vx = a * wy - W * y0, vy = -a * wx + W * x0;
    static const char *const formulations[] = {"hamel", "multipliers"};
    for (int f = 0; f < 2; f++) {
        char req[512];
        snprintf(req, sizeof req,
                 "{\"initial\": {\"q\": {\"x\": %g, \"y\": %g, \"phi\": 0.1, \"theta\": 1.5707963267948966,"
                 " \"psi\": 0}, \"speeds\": {\"wx\": %g, \"wy\": %g, \"wz\": %g}}, \"t_end\": 6,"
                 " \"output\": {\"samples\": 13}, \"formulation\": \"%s\","
                 " \"integrator\": {\"rtol\": 1e-11, \"atol\": 1e-13}}",
                 x0, y0, wx, wy, wz, formulations[f]);
        json_t *r = support_run(m, req);
        json_t *traj = json_object_get(r, "trajectory");
        cr_assert_eq(json_array_size(json_object_get(traj, "t")), 13);
        for (size_t i = 0; i < 13; i++) {
            double t = json_number_value(json_array_get(json_object_get(traj, "t"), i));
            double c = cos(k * t), s = sin(k * t);
            /* (vx + i vy)(e^{ikt} - 1)/(ik) */
            double x = x0 + (vx * s - vy * (1 - c)) / k, y = y0 + (vy * s + vx * (1 - c)) / k;
            cr_assert_float_eq(support_traj_at(traj, "q", "x", i), x, 1e-8, "%s: x at t=%g", formulations[f],
                               t);
            cr_assert_float_eq(support_traj_at(traj, "q", "y", i), y, 1e-8, "%s: y at t=%g", formulations[f],
                               t);
            if (f == 0)
                cr_assert_float_eq(support_traj_at(traj, "speeds", "wz", i), wz, 1e-9,
                                   "wz is constant (t=%g)", t);
            else
                cr_assert_float_eq(support_traj_at(traj, "qdot", "x", i), vx * c - vy * s, 1e-8, "x' at t=%g",
                                   t);
        }
        double res = support_max_residual(r);
        cr_expect_leq(res, 1e-9, "%s: constraint residual %g", formulations[f], res);
        json_decref(r);
    }
    engine_model_release(m);
}

/* ---- 6. a particle held at constant speed (nonlinear, Chetaev) ----
 *
 * x'^2 + y'^2 = v^2 under gravity. Chetaev's virtual displacements (df/dq'.dq = 0) put
 * the constraint force along the velocity: m q'' = -m g e_y + 2 lambda q'. Differentiating
 * f, lambda = m g y' / (2 v^2), and the heading th obeys v th' = -g cos th, so with
 * s = gd^-1(th0) - g t / v:  th = gd(s), x' = v sech s, y' = v tanh s,
 *   x = x0 - v^2/g (th - th0),  y = y0 - v^2/g ln(cosh s / cosh s0),
 *   lambda = m g tanh(s) / (2 v).
 * The constraint is not homogeneous in q', so T + V is not conserved (T is, V is not). */

Test(systems, constant_speed_particle, .init = setup)
{
    engine_model *m = support_compile_text(
        "{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"m\": 2.0, \"g\": 9.81, \"v\": 3.0},"
        " \"kinetic_energy\": \"m/2*(x'^2 + y'^2)\", \"potential_energy\": \"m*g*y\","
        " \"constraints\": [{\"name\": \"speed\", \"expr\": \"x'^2 + y'^2 - v^2\"}]}");
    json_t *sum = engine_model_summary(m);
    cr_expect_str_eq(json_string_value(json_object_get(sum, "default_formulation")), "multipliers");
    cr_expect(json_is_false(json_object_get(sum, "energy_conserved")), "the constraint force does work");
    json_decref(sum);

    const double mass = 2.0, g = 9.81, v = 3.0, x0 = 0.5, y0 = 1.0;
    const double th0 = atan2(1.8, 2.4), s0 = asinh(tan(th0));
    json_t *r =
        support_run(m, "{\"initial\": {\"q\": {\"x\": 0.5, \"y\": 1.0}, \"qdot\": {\"x\": 2.4, \"y\": 1.8}},"
                       " \"t_end\": 2, \"output\": {\"samples\": 21},"
                       " \"integrator\": {\"rtol\": 1e-11, \"atol\": 1e-13}}");
    cr_expect_str_eq(json_string_value(json_object_get(r, "formulation")), "multipliers");
    json_t *traj = json_object_get(r, "trajectory");
    for (size_t i = 0; i < 21; i++) {
        double t = json_number_value(json_array_get(json_object_get(traj, "t"), i));
        double s = s0 - g * t / v, th = 2 * atan(tanh(s / 2));
        double x = x0 - v * v / g * (th - th0), y = y0 - v * v / g * log(cosh(s) / cosh(s0));
        cr_assert_float_eq(support_traj_at(traj, "q", "x", i), x, 1e-9, "x at t=%g", t);
        cr_assert_float_eq(support_traj_at(traj, "q", "y", i), y, 1e-9, "y at t=%g", t);
        cr_assert_float_eq(support_traj_at(traj, "qdot", "x", i), v / cosh(s), 1e-9, "x' at t=%g", t);
        cr_assert_float_eq(support_traj_at(traj, "qdot", "y", i), v * tanh(s), 1e-9, "y' at t=%g", t);
        cr_assert_float_eq(support_traj_at(traj, "multipliers", "speed", i), mass * g * tanh(s) / (2 * v),
                           1e-8, "the constraint force at t=%g", t);
    }
    json_t *checks = json_object_get(r, "checks");
    json_t *energy = json_object_get(checks, "energy");
    cr_expect(json_is_false(json_object_get(energy, "conserved_expected")));
    cr_expect_not_null(strstr(json_string_value(json_object_get(energy, "reason")), "not homogeneous"),
                       "reason: %s", json_string_value(json_object_get(energy, "reason")));
    double res = support_max_residual(r);
    cr_expect_leq(res, 1e-9, "constraint residual %g", res);
    json_decref(r);
    engine_model_release(m);
}

/* ---- 7. the Chaplygin sleigh (the blade's speed and the turning rate as speeds) ----
 *
 * A body of mass m and inertia I about its centre, which sits a distance a ahead of a
 * knife edge at (x, y) pointing along th. Speeds v = x' cos th + y' sin th, w = th'.
 * By hand (J = I + m a^2): v' = a w^2, w' = -(m a / J) v w, and the energy
 * (m v^2 + J w^2)/2 is conserved, so with C = v^2 + (J/m) w^2, k = a m sqrt(C) / J:
 *   v = sqrt(C) tanh(k t + s0),  w = sqrt(m C / J) sech(k t + s0),  s0 = atanh(v0/sqrt C),
 *   th = th0 + sqrt(m C / J) (gd(k t + s0) - gd(s0)) / k.  */

Test(systems, chaplygin_sleigh, .init = setup)
{
    engine_model *m = support_compile_text(
        "{\"coordinates\": [\"x\", \"y\", \"th\"], \"parameters\": {\"m\": 2.0, \"I\": 0.3, \"a\": 0.4},"
        " \"kinetic_energy\": \"m/2*((x' - a*th'*sin(th))^2 + (y' + a*th'*cos(th))^2) + I/2*th'^2\","
        " \"constraints\": [{\"name\": \"blade\", \"expr\": \"-x'*sin(th) + y'*cos(th)\"}],"
        " \"speeds\": [{\"name\": \"v\", \"expr\": \"x'*cos(th) + y'*sin(th)\"}, {\"name\": \"w\", \"expr\": "
        "\"th'\"}]}");
    const double mass = 2.0, I = 0.3, a = 0.4, J = I + mass * a * a, v0 = -0.5, w0 = 1.2, th0 = 0.3;
    const double C = v0 * v0 + J / mass * w0 * w0, k = a * mass * sqrt(C) / J, s0 = atanh(v0 / sqrt(C));
    json_t *r =
        support_run(m, "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"th\": 0.3}, \"speeds\": {\"v\": -0.5, "
                       "\"w\": 1.2}}, \"t_end\": 8, \"output\": {\"samples\": 17},"
                       " \"integrator\": {\"rtol\": 1e-11, \"atol\": 1e-13}}");
    json_t *traj = json_object_get(r, "trajectory");
    for (size_t i = 0; i < 17; i++) {
        double t = json_number_value(json_array_get(json_object_get(traj, "t"), i)), s = k * t + s0;
        double gd = 2 * atan(tanh(s / 2)), gd0 = 2 * atan(tanh(s0 / 2));
        cr_assert_float_eq(support_traj_at(traj, "speeds", "v", i), sqrt(C) * tanh(s), 1e-9, "v at t=%g", t);
        cr_assert_float_eq(support_traj_at(traj, "speeds", "w", i), sqrt(mass * C / J) / cosh(s), 1e-9,
                           "w at t=%g", t);
        cr_assert_float_eq(support_traj_at(traj, "q", "th", i), th0 + sqrt(mass * C / J) * (gd - gd0) / k,
                           1e-9, "th at t=%g", t);
    }
    json_t *energy = json_object_get(json_object_get(r, "checks"), "energy");
    cr_expect(json_is_true(json_object_get(energy, "conserved_expected")));
    cr_expect_leq(json_number_value(json_object_get(energy, "max_rel_drift")), 1e-10);
    /* By hand, with Phi's columns v: (cos th, sin th, 0), w: (0, 0, 1), blade: (-sin th,
     * cos th, 0): gamma^blade_vw = -1 and gamma^v_w,blade = -1, with their mirrors. */
    static const struct {
        const char *j, *r, *l;
        double value;
    } want[] = {
        {"blade", "v", "w", -1}, {"blade", "w", "v", 1}, {"v", "w", "blade", -1}, {"v", "blade", "w", 1}};
    json_t *g =
        json_object_get(json_array_get(json_object_get(json_object_get(r, "hamel"), "points"), 0), "gamma");
    cr_assert_eq(json_array_size(g), 4, "four coefficients: %s", json_dumps(g, JSON_COMPACT));
    for (size_t w = 0; w < 4; w++) {
        int found = 0;
        for (size_t i = 0; i < 4; i++) {
            json_t *e = json_array_get(g, i);
            if (!strcmp(json_string_value(json_object_get(e, "j")), want[w].j) &&
                !strcmp(json_string_value(json_object_get(e, "r")), want[w].r) &&
                !strcmp(json_string_value(json_object_get(e, "l")), want[w].l)) {
                found = 1;
                cr_expect_float_eq(json_number_value(json_object_get(e, "value")), want[w].value, 1e-14,
                                   "gamma^%s_%s,%s", want[w].j, want[w].r, want[w].l);
            }
        }
        cr_expect(found, "gamma^%s_%s,%s is listed", want[w].j, want[w].r, want[w].l);
    }
    json_decref(r);
    engine_model_release(m);
}

/* ---- 8. a run that cannot start says why ----
 *
 * A Chaplygin sleigh whose body has no moment of inertia (I = 0 given by the run: a model
 * that has none with its own parameters is refused when compiled, test_model.c) and its
 * knife edge at the mass centre: the turning rate w has no inertia (M* = diag(m, 0)),
 * and the problem says so instead of only that the right-hand side could not be
 * evaluated. A 0/0 in V at the initial state is named as the forcing. */
Test(systems, failure_at_the_start_is_explained, .init = setup)
{
    static const char *const models[2] = {
        "{\"coordinates\": [\"x\", \"y\", \"th\"], \"parameters\": {\"m\": 2.3, \"I\": 0.5, \"b\": 0},"
        " \"kinetic_energy\": \"m/2*(x'^2 + y'^2) + I/2*th'^2\","
        " \"constraints\": [\"-sin(th)*x' + cos(th)*y' - b*th'\"],"
        " \"speeds\": [{\"name\": \"v\", \"expr\": \"cos(th)*x' + sin(th)*y'\"}, {\"name\": \"w\", \"expr\": "
        "\"th'\"}]}",
        "{\"coordinates\": [\"x\", \"y\", \"th\"], \"parameters\": {\"m\": 0, \"I\": 0.4, \"b\": 0.3},"
        " \"kinetic_energy\": \"2/2*(x'^2 + y'^2) + I/2*th'^2\", \"potential_energy\": \"x/m\","
        " \"constraints\": [\"-sin(th)*x' + cos(th)*y' - b*th'\"],"
        " \"speeds\": [{\"name\": \"v\", \"expr\": \"cos(th)*x' + sin(th)*y'\"}, {\"name\": \"w\", \"expr\": "
        "\"th'\"}]}"};
    static const char *const want[2] = {"the kinetic energy gives speed w no inertia",
                                        "the forcing is not finite"};
    for (int i = 0; i < 2; i++) {
        engine_model *m = support_compile_text(models[i]);
        json_t *req =
            support_loads(i == 0 ? "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"th\": 0.3}, \"speeds\": "
                                   "{\"v\": 1, \"w\": 0.5}}, \"t_end\": 1, \"output\": {\"samples\": 3},"
                                   " \"parameters\": {\"I\": 0}}"
                                 : "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"th\": 0.3}, \"speeds\": "
                                   "{\"v\": 1, \"w\": 0.5}}, \"t_end\": 1, \"output\": {\"samples\": 3}}");
        json_t *r = NULL, *problem = NULL;
        int rc = engine_simulate(m, req, NULL, NULL, &r, &problem);
        cr_assert_neq(rc, 0, "model %d: the run should fail", i);
        const char *detail = json_string_value(json_object_get(problem, "detail"));
        cr_assert(detail && strstr(detail, "at the initial state") && strstr(detail, want[i]),
                  "model %d: the problem should say '%s' at the initial state: %s", i, want[i],
                  detail ? detail : "(no detail)");
        json_decref(problem);
        json_decref(r);
        json_decref(req);
        engine_model_release(m);
    }
}
