/* test_watch.c — the singularity watch of sim.c (issue 10, part 3).
 *
 * A knife edge (T = m/2 (x'^2 + y'^2) + I/2 phi'^2, x' sin phi - y' cos phi = 0)
 * turning at a constant rate w with speed v along the blade has the closed form
 *   phi = phi0 + w t,  x = (v/w)(sin phi - sin phi0),  y = -(v/w)(cos phi - cos phi0).
 * Without speeds the engine picks (x', phi'), singular at phi = pi/2 (mod pi). The
 * watch must re-choose the speeds so that the run through three such crossings
 * matches the closed form to 1e-9; with the same speeds given by the user the run
 * must fail at the first crossing, naming the time and the configuration.
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

#define KNIFE_MODEL(SPEEDS)                                                                                  \
    "{\"name\": \"knife\", \"coordinates\": [\"x\", \"y\", \"phi\"], \"parameters\": {\"m\": 2, \"I\": "     \
    "0.5},"                                                                                                  \
    " \"kinetic_energy\": \"1/2*m*(x'^2 + y'^2) + 1/2*I*phi'^2\","                                           \
    " \"constraints\": [{\"name\": \"knife\", \"expr\": \"x'*sin(phi) - y'*cos(phi)\"}]" SPEEDS "}"

static const double V = 0.8, W = 1.0, PHI0 = 0.3;

static int simulate(engine_model *m, json_t **result, json_t **problem)
{
    char req[1024];
    snprintf(
        req, sizeof req,
        "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"phi\": %.17g}, \"qdot\": {\"x\": %.17g, \"y\": %.17g, "
        "\"phi\": %.17g}}, \"t_end\": 10, \"output\": {\"samples\": 201}, \"integrator\": {\"rtol\": 1e-12, "
        "\"atol\": 1e-14}}",
        PHI0, V * cos(PHI0), V * sin(PHI0), W);
    json_t *js = json_loads(req, 0, NULL);
    cr_assert_not_null(js);
    int rc = engine_simulate(m, js, NULL, NULL, result, problem);
    json_decref(js);
    return rc;
}

Test(watch, default_speeds_rechosen_through_singularity, .init = setup)
{
    engine_model *m = support_compile_text(KNIFE_MODEL(""));
    json_t *result = NULL, *problem = NULL;
    int rc = simulate(m, &result, &problem);
    if (rc)
        cr_assert_fail("the run failed: %s", json_dumps(problem, 0));
    const json_t *tr = json_object_get(result, "trajectory");
    const json_t *ts = json_object_get(tr, "t");
    cr_assert_eq(json_array_size(ts), 201);
    double err = 0.0, errv = 0.0;
    for (size_t i = 0; i < json_array_size(ts); i++) {
        double t = json_number_value(json_array_get(ts, i)), phi = PHI0 + W * t;
        double x = V / W * (sin(phi) - sin(PHI0)), y = -V / W * (cos(phi) - cos(PHI0));
        err = fmax(err, fabs(support_traj_at(tr, "q", "x", i) - x));
        err = fmax(err, fabs(support_traj_at(tr, "q", "y", i) - y));
        err = fmax(err, fabs(support_traj_at(tr, "q", "phi", i) - phi));
        /* the speeds reported are the model's own (x', phi'), also past the switches */
        errv = fmax(errv, fabs(support_traj_at(tr, "speeds", "x'", i) - V * cos(phi)));
        errv = fmax(errv, fabs(support_traj_at(tr, "qdot", "y", i) - V * sin(phi)));
    }
    cr_expect_lt(err, 1e-9, "positions against the closed form through phi = pi/2: %.3g", err);
    cr_expect_lt(errv, 1e-9, "velocities against the closed form: %.3g", errv);
    json_int_t sw = json_integer_value(json_object_get(json_object_get(result, "stats"), "speed_switches"));
    /* phi runs from 0.3 to 10.3: pi/2, 3pi/2, 5pi/2 are crossed, each in and out */
    cr_expect_geq(sw, 3, "the speeds were re-chosen at each crossing (%lld switches)", (long long)sw);
    json_decref(result);
    engine_model_release(m);
}

Test(watch, user_speeds_singular_mid_run_fail, .init = setup)
{
    engine_model *m = support_compile_text(KNIFE_MODEL(
        ", \"speeds\": [{\"name\": \"vx\", \"expr\": \"x'\"}, {\"name\": \"w\", \"expr\": \"phi'\"}]"));
    json_t *result = NULL, *problem = NULL;
    int rc = simulate(m, &result, &problem);
    cr_assert_neq(rc, 0, "a user's Psi going singular mid-run is a failure, not done");
    cr_expect_eq(rc, HAMEL_E_SINGULAR);
    const char *detail = json_string_value(json_object_get(problem, "detail"));
    cr_assert_not_null(detail);
    cr_expect_not_null(strstr(detail, "t = 1.27"), "names the time of the crossing: %s", detail);
    cr_expect_not_null(strstr(detail, "phi = 1.57"), "names the configuration: %s", detail);
    cr_expect_not_null(json_object_get(problem, "partial"), "keeps the partial trajectory");
    json_decref(problem);
    json_decref(result);
    engine_model_release(m);
}

/* The condition number on Psi's block structure (hamel.c: psi_condition_sparse, issue 19
 * item 6) is the dense one: at pseudo-random configurations of a chain of 5 rolling
 * disks (n = 25, block-diagonal Psi) and of a knife edge whose speed u = x' + phi' puts
 * an entry off Psi's diagonal blocks, cond and det agree with the dense LU's to 1e-9,
 * and a configuration where a disk stands flat (theta = 0: its row of Psi vanishes) is
 * singular for both. */
static void expect_condition_matches_dense(engine_model *m, const char *what, int flat_q)
{
    cr_assert_not_null(m->sparse, "%s: Psi has a block structure", what);
    int n = m->n;
    hamel_ws *sp = hamel_ws_new(m, m->param_values), *dn = hamel_ws_new(m, m->param_values);
    cr_assert(sp && dn);
    hamel_ws_set_numeric(dn, 2);
    double q[ENGINE_COORDINATES_CEILING];
    unsigned s = 12345u;
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            q[i] = ((s >> 8) % 20001) / 10000.0 - 1.0 + 0.3 * (i % 5);
        }
        double cs, ds, cd, dd;
        int rs = hamel_psi_condition(sp, 0.1, q, &cs, &ds), rd = hamel_psi_condition(dn, 0.1, q, &cd, &dd);
        cr_assert_eq(rs, rd, "%s, trial %d: regular on both paths (%d, %d)", what, trial, rs, rd);
        if (rd < 0)
            continue;
        cr_expect_leq(fabs(cs - cd), 1e-9 * cd, "%s, trial %d: cond %.17g (blocks) vs %.17g (dense)", what,
                      trial, cs, cd);
        cr_expect_leq(fabs(ds - dd), 1e-9 * fabs(dd), "%s, trial %d: det %.17g (blocks) vs %.17g (dense)",
                      what, trial, ds, dd);
    }
    if (flat_q >= 0) {
        q[flat_q] = 0.0;
        double cs, ds, cd, dd;
        cr_expect_lt(hamel_psi_condition(sp, 0.1, q, &cs, &ds), 0, "%s: singular where a disk is flat", what);
        cr_expect_lt(hamel_psi_condition(dn, 0.1, q, &cd, &dd), 0, "%s: (dense) singular there", what);
        cr_expect(isinf(cs), "%s: cond is infinite there", what);
    }
    hamel_ws_free(sp);
    hamel_ws_free(dn);
}

Test(watch, condition_on_block_structure_matches_dense, .init = setup)
{
    json_error_t err;
    json_t *js = json_load_file("bench/models/disk-chain-5.json", 0, &err);
    cr_assert_not_null(js, "bench/models/disk-chain-5.json: %s", err.text);
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(js, "model"), NULL, &m, &problem), 0);
    json_decref(js);
    cr_assert_eq(m->n, 25);
    expect_condition_matches_dense(m, "disk-chain-5", 1); /* q[1] = theta1 */
    engine_model_release(m);
    m = support_compile_text(KNIFE_MODEL(
        ", \"speeds\": [{\"name\": \"u\", \"expr\": \"x' + phi'\"}, {\"name\": \"w\", \"expr\": \"phi'\"}]"));
    expect_condition_matches_dense(m, "knife, u = x' + phi'", -1);
    engine_model_release(m);
}

/* The same failure as user_speeds_singular_mid_run_fail where the watch cannot take det
 * Psi from one expression pivot (w = phi' (2 + cos phi): two of them) and takes the
 * condition number on Psi's block structure instead. */
Test(watch, user_speeds_singular_on_block_structure_fail, .init = setup)
{
    engine_model *m = support_compile_text(
        KNIFE_MODEL(", \"speeds\": [{\"name\": \"vx\", \"expr\": \"x'\"}, {\"name\": \"w\", \"expr\": "
                    "\"phi'*(2 + cos(phi))\"}]"));
    cr_assert_not_null(m->sparse);
    cr_assert_null(m->tape_det, "no single expression pivot: the condition number is watched");
    json_t *result = NULL, *problem = NULL;
    int rc = simulate(m, &result, &problem);
    cr_assert_eq(rc, HAMEL_E_SINGULAR, "a user's Psi going singular mid-run is a failure (%d)", rc);
    const char *detail = json_string_value(json_object_get(problem, "detail"));
    cr_assert_not_null(detail);
    cr_expect_not_null(strstr(detail, "t = 1.27"), "names the time of the crossing: %s", detail);
    cr_expect_not_null(strstr(detail, "phi = 1.57"), "names the configuration: %s", detail);
    json_decref(problem);
    json_decref(result);
    engine_model_release(m);
}

/* A run that fails for another reason while Psi goes singular says so (the watch fires
 * only past 1e8-fold growth). The roller racer of tests/adversarial with d1 > d2 (front
 * body's joint 0.6 behind its wheels, the rear wheels 0.3 behind the joint): its speeds
 * (v, ph') are singular where d1 cos ph + d2 = 0, ph = 2.094; from ph = 1.6 turning at
 * ph' = 0.8 the right-hand side fails near t = 0.855, where cond(Psi) has grown from 10
 * to 1.6e8. The problem names that and gives the figures; a step-limit failure of the
 * same model far from it does not. */
#define ROLLER_RACER                                                                                         \
    "{\"name\": \"roller-racer-long-joint\", \"coordinates\": [\"x\", \"y\", \"th\", \"ph\"],"               \
    " \"parameters\": {\"m1\": 3.0, \"I1\": 0.6, \"m2\": 1.4, \"I2\": 0.25, \"d1\": 0.6, \"d2\": 0.3,"       \
    " \"tau0\": 0.8, \"nu\": 2.2, \"c\": 0.05},"                                                             \
    " \"definitions\": [{\"name\": \"x2d\", \"expr\": \"x' + d1*sin(th)*th' + d2*sin(th + ph)*(th' + "       \
    "ph')\"},"                                                                                               \
    " {\"name\": \"y2d\", \"expr\": \"y' - d1*cos(th)*th' - d2*cos(th + ph)*(th' + ph')\"}],"                \
    " \"kinetic_energy\": \"m1/2*(x'^2 + y'^2) + I1/2*th'^2 + m2/2*(x2d^2 + y2d^2) + I2/2*(th' + ph')^2\","  \
    " \"generalized_forces\": {\"ph\": \"tau0*sin(nu*t) - c*ph'\"},"                                         \
    " \"constraints\": [{\"name\": \"front\", \"expr\": \"-sin(th)*x' + cos(th)*y'\"},"                      \
    " {\"name\": \"rear\", \"expr\": \"-sin(th + ph)*x2d + cos(th + ph)*y2d\"}],"                            \
    " \"speeds\": [{\"name\": \"v\", \"expr\": \"cos(th)*x' + sin(th)*y'\"}, {\"name\": \"phd\","            \
    " \"expr\": \"ph'\"}]}"

Test(watch, a_failure_where_psi_turns_singular_says_so, .init = setup)
{
    engine_model *m = support_compile_text(ROLLER_RACER);
    json_t *req = support_loads(
        "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"th\": 0.2, \"ph\": 1.6},"
        " \"speeds\": {\"v\": 0.4, \"phd\": 0.8}}, \"t_end\": 5, \"output\": {\"samples\": 11}}");
    json_t *result = NULL, *problem = NULL;
    int rc = engine_simulate(m, req, NULL, NULL, &result, &problem);
    cr_assert_neq(rc, 0, "the run cannot pass d1 cos ph + d2 = 0");
    char *text = json_dumps(problem, JSON_COMPACT);
    const char *reason = json_string_value(json_object_get(problem, "reason"));
    cr_assert_not_null(reason, "%s", text);
    cr_expect_not_null(strstr(reason, "the speeds stop determining q' near t = 0.85"), "%s", reason);
    cr_expect_not_null(strstr(reason, "cond(Psi) grew from 10.2 at t = 0"), "%s", reason);
    const json_t *pc = json_object_get(problem, "psi_condition");
    cr_assert_not_null(pc, "the figures: %s", text);
    double c0 = json_number_value(json_object_get(pc, "initial")),
           c1 = json_number_value(json_object_get(pc, "last"));
    double t1 = json_number_value(json_object_get(pc, "t"));
    cr_expect_gt(c1, 1e6 * c0, "cond grew by orders of magnitude: %g -> %g", c0, c1);
    cr_expect(t1 > 0.8 && t1 < 0.9, "near the singular configuration: t = %g", t1);
    cr_expect_eq(json_number_value(json_object_get(pc, "t0")), 0.0);
    free(text);
    json_decref(problem);
    json_decref(result);
    json_decref(req);
    /* the step limit reached close to it (the steps shrink there): said too */
    req = support_loads(
        "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"th\": 0.2, \"ph\": 1.6},"
        " \"speeds\": {\"v\": 0.4, \"phd\": 0.8}}, \"t_end\": 5, \"integrator\": {\"max_steps\": 60}}");
    problem = result = NULL;
    rc = engine_simulate(m, req, NULL, NULL, &result, &problem);
    cr_expect_eq(rc, HAMEL_E_STEP_LIMIT, "the step limit");
    reason = json_string_value(json_object_get(problem, "reason"));
    cr_expect(reason && strstr(reason, "ran out") && strstr(reason, "the speeds stop determining q'"), "%s",
              reason ? reason : "");
    cr_expect_not_null(json_object_get(problem, "psi_condition"));
    json_decref(problem);
    json_decref(result);
    json_decref(req);
    /* the same model stopped by the step limit well before: nothing said about Psi */
    req = support_loads(
        "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"th\": 0.2, \"ph\": 0.1},"
        " \"speeds\": {\"v\": 0.4, \"phd\": 0.1}}, \"t_end\": 5, \"integrator\": {\"max_steps\": 3}}");
    problem = result = NULL;
    rc = engine_simulate(m, req, NULL, NULL, &result, &problem);
    cr_assert_eq(rc, HAMEL_E_STEP_LIMIT, "the step limit");
    text = json_dumps(problem, JSON_COMPACT);
    cr_expect_null(strstr(text, "stop determining"), "%s", text);
    cr_expect_null(json_object_get(problem, "psi_condition"), "%s", text);
    free(text);
    json_decref(problem);
    json_decref(result);
    json_decref(req);
    engine_model_release(m);
}
