/* test_outside.c — issue 18 checked from outside, on models none of the other tests
 * use (review of round 3): each number below comes from a closed form or from an
 * independent reference, never from the engine.
 *
 * - A coin written with heading h about z, lean b about the new y and spin s about the
 *   new x, its center (x, y, z) free (z the dependent coordinate of its contact), a spin
 *   damping torque -c Omega along its axis. Reference: Newton–Euler for the coin with the
 *   contact force as unknown (SymPy, scipy solve_ivp DOP853 at rtol 1e-13, its event
 *   location): lift-off and slip times. An event on normal_coin that stops the run at the
 *   lift-off leaves lift_off reported (it was null: the stop came first).
 * - Its upright steady motion: stable for Omega^2 > m g r I_d / (I_a (I_a + m r^2)) (the
 *   b-h block of the linearization, lambda^2 (I_d + m r^2) = m g r - Omega^2 I_a (I_a +
 *   m r^2) / I_d); for a ring-like coin (I_a = m r^2, I_d = m r^2 / 2) gsl_eigen_nonsymmv
 *   did not converge on A at one speed, so /v1/linearize failed there and the steady
 *   branch silently lost its stability change.
 * - A fold: a branch that turns back says so (it was limit-exceeded "more steps").
 * - Hopf and pitchfork on one-degree-of-freedom systems; events against closed forms
 *   (particle under gravity, pendulum by elliptic integrals, Chaplygin sleigh heading
 *   and constraint force).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "support.h"

static void setup(void) { engine_init(); }

TestSuite(outside, .init = setup, .timeout = 120);

#define COIN_M 1.5
#define COIN_R 0.3
#define COIN_G 9.81

/* The coin with axial and diametral inertias ia, id (expressions), spin damping c and
 * friction mu. */
static engine_model *coin_forces(const char *ia, const char *id, double c, double mu, const char *forces)
{
    char text[4096];
    snprintf(
        text, sizeof text,
        "{\"name\": \"coin-zyx\", \"coordinates\": [\"h\", \"b\", \"s\", \"x\", \"y\", \"z\"],"
        " \"parameters\": {\"m\": %.17g, \"r\": %.17g, \"g\": %.17g, \"c\": %.17g},"
        " \"frames\": [{\"name\": \"A\", \"parent\": \"N\", \"rotations\": [{\"axis\": \"z\", \"angle\": "
        "\"h\"}]},"
        "  {\"name\": \"B\", \"parent\": \"A\", \"rotations\": [{\"axis\": \"y\", \"angle\": \"b\"}]},"
        "  {\"name\": \"D\", \"parent\": \"B\", \"rotations\": [{\"axis\": \"x\", \"angle\": \"s\"}]}],"
        " \"points\": [{\"name\": \"G\", \"parent\": \"O\", \"frame\": \"N\", \"position\": [\"x\", \"y\", "
        "\"z\"]}],"
        " \"bodies\": [{\"name\": \"coin\", \"mass\": \"m\", \"mass_center\": \"G\", \"frame\": \"D\","
        "  \"inertia\": [[\"%s\", 0, 0], [0, \"%s\", 0], [0, 0, \"%s\"]]}],"
        " \"gravity\": {\"frame\": \"N\", \"vector\": [0, 0, \"-g\"]},"
        " \"generalized_forces\": %s,"
        " \"speeds\": [{\"name\": \"hd\", \"expr\": \"h'\"}, {\"name\": \"bd\", \"expr\": \"b'\"},"
        "  {\"name\": \"sd\", \"expr\": \"s'\"}],"
        " \"rolling_disks\": [{\"name\": \"coin\", \"frame\": \"D\", \"axis\": \"x\", \"center\": \"G\","
        "  \"radius\": \"r\", \"dependent\": \"z\", \"friction\": %.17g}]}",
        COIN_M, COIN_R, COIN_G, c, ia, id, id, forces, mu);
    return support_compile_text(text);
}

/* The coin with a damping torque -c Omega a on its spin only. */
static engine_model *coin(const char *ia, const char *id, double c, double mu)
{
    return coin_forces(ia, id, c, mu, "{\"h\": \"c*(s'-h'*sin(b))*sin(b)\", \"s\": \"-c*(s'-h'*sin(b))\"}");
}

static const json_t *coin_contact(const json_t *r)
{
    return json_object_get(json_object_get(json_object_get(r, "checks"), "contacts"), "coin");
}

static double last_of(const json_t *a)
{
    return json_number_value(json_array_get(a, json_array_size(a) - 1));
}

static int warned(const json_t *r, const char *code, double value)
{
    const json_t *w = json_object_get(r, "warnings");
    for (size_t i = 0; i < json_array_size(w); i++) {
        const json_t *e = json_array_get(w, i);
        if (!strcmp(json_string_value(json_object_get(e, "code")), code) &&
            json_number_value(json_object_get(e, "value")) == value)
            return 1;
    }
    return 0;
}

static void expect_rel(double got, double ref, double tol, const char *what)
{
    cr_expect(fabs(got - ref) <= tol * fabs(ref), "%s: %.17g, reference %.17g (rel %.2e)", what, got, ref,
              fabs(got - ref) / fabs(ref));
}

/* Released leaning 0.3 rad with no spin, the coin falls: it slips (mu 0.6) at 0.35798234242398
 * and leaves the ground at 0.39302410938732 (Newton–Euler). An event on normal_coin
 * stops there; lift_off is that time, and the warning says so. Both formulations. */
Test(outside, coin_lift_off_and_slip_against_newton_euler)
{
    const double t_lift = 0.3930241093873213, t_slip = 0.35798234242398019;
    const double n_ref[3] = {13.134404701042037, 11.002509042442966, 6.0746810543406102};
    const double ft_ref[3] = {3.5989281917783118, 4.0715087237972156, 2.7246622402756251};
    engine_model *m = coin("m*r^2/2", "m*r^2/4", 0.05, 0.6);
    const char *forms[2] = {"hamel", "multipliers"};
    for (int f = 0; f < 2; f++) {
        char req[1024];
        snprintf(req, sizeof req,
                 "{\"initial\": {\"q\": {\"h\": 0, \"b\": 0.3, \"s\": 0, \"x\": 0, \"y\": 0, \"z\": 0.3},"
                 " \"speeds\": {\"hd\": 0, \"bd\": 0, \"sd\": 0}}, \"t_end\": 3,"
                 " \"output\": {\"times\": [0, 0.1, 0.2, 0.3, 1, 2]}, \"formulation\": \"%s\","
                 " \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}, \"hamel\": \"none\","
                 " \"events\": [{\"name\": \"lift\", \"expr\": \"normal_coin\", \"direction\": \"falling\","
                 " \"action\": \"stop\"}]}",
                 forms[f]);
        json_t *r = support_run(m, req);
        const json_t *c = coin_contact(r);
        cr_assert_str_eq(json_string_value(json_object_get(r, "stopped_by")), "lift", "%s", forms[f]);
        double t_stop = last_of(json_object_get(json_object_get(r, "trajectory"), "t"));
        expect_rel(t_stop, t_lift, 1e-9, "stop at lift-off");
        const json_t *lift = json_object_get(c, "lift_off");
        cr_assert(json_is_object(lift), "%s: the run stopped at the lift-off, so lift_off is that time: %s",
                  forms[f], json_dumps(c, 0));
        cr_expect(fabs(json_number_value(json_object_get(lift, "t")) - t_stop) <= 1e-12 * t_stop,
                  "lift_off %.17g, stop %.17g", json_number_value(json_object_get(lift, "t")), t_stop);
        cr_expect(warned(r, "contact-lift-off", json_number_value(json_object_get(lift, "t"))),
                  "a contact-lift-off warning: %s", json_dumps(json_object_get(r, "warnings"), 0));
        expect_rel(json_number_value(json_object_get(json_object_get(c, "slip"), "t")), t_slip, 1e-9, "slip");
        for (int i = 0; i < 3; i++) {
            expect_rel(json_number_value(json_array_get(json_object_get(c, "normal"), (size_t)i + 1)),
                       n_ref[i], 1e-9, "N");
            expect_rel(json_number_value(json_array_get(json_object_get(c, "tangential"), (size_t)i + 1)),
                       ft_ref[i], 1e-9, "|F_t|");
        }
        json_decref(r);
    }
    /* spun at 3 rad/s it stays up but slips at 0.40502837690379 */
    json_t *r =
        support_run(m, "{\"initial\": {\"q\": {\"h\": 0, \"b\": 0.3, \"s\": 0, \"x\": 0, \"y\": 0, \"z\": "
                       "0.3}, \"speeds\": {\"hd\": 0, \"bd\": 0, \"sd\": 3}}, \"t_end\": 2,"
                       " \"output\": {\"samples\": 21}, \"integrator\": {\"rtol\": 1e-12, \"atol\": "
                       "1e-14}, \"hamel\": \"none\"}");
    cr_expect(json_is_null(json_object_get(coin_contact(r), "lift_off")), "no lift-off: %s",
              json_dumps(coin_contact(r), 0));
    expect_rel(json_number_value(json_object_get(json_object_get(coin_contact(r), "slip"), "t")),
               0.40502837690378674, 1e-9, "slip of the spinning coin");
    json_decref(r);
    engine_model_release(m);
}

static json_t *steady(engine_model *m, const char *request, int expect_rc, json_t **problem)
{
    return support_steady(m, support_loads(request), expect_rc, problem);
}

/* The upright coin rolling straight on: stable from Omega^2 = m g r I_d / (I_a (I_a +
 * m r^2)) on, to 1e-10, however many steps the branch takes; for the ring-like coin the
 * linearization at sd = 2.8532986111111112 (a bisection's midpoint) converges and has
 * the growing mode of the closed form. */
Test(outside, upright_coin_stability_against_closed_form)
{
    struct {
        const char *ia, *id;
        double ia_v, id_v;
    } coins[2] = {{"m*r^2/2", "m*r^2/4", 0.5, 0.25}, {"m*r^2", "m*r^2/2", 1.0, 0.5}};
    const double mr2 = COIN_M * COIN_R * COIN_R;
    for (int k = 0; k < 2; k++) {
        engine_model *m = coin(coins[k].ia, coins[k].id, 0.0, 0.6);
        double ia = coins[k].ia_v * mr2, id = coins[k].id_v * mr2;
        double crit = sqrt(COIN_M * COIN_G * COIN_R * id / (ia * (ia + mr2)));
        const int steps[4] = {9, 10, 20, 3};
        for (int j = 0; j < 4; j++) {
            char req[1024];
            snprintf(req, sizeof req,
                     "{\"state\": {\"q\": {\"h\": 0, \"b\": 0, \"s\": 0, \"x\": 0, \"y\": 0, \"z\": 0.3},"
                     " \"speeds\": {\"hd\": 0, \"bd\": 0, \"sd\": 1}}, \"unknowns\": [\"hd\"],"
                     " \"continuation\": {\"vary\": \"sd\", \"to\": 8, \"steps\": %d}}",
                     steps[j]);
            json_t *res = steady(m, req, 0, NULL);
            const json_t *ch = json_object_get(res, "stability_changes");
            cr_assert_eq(json_array_size(ch), 1, "I_a = %s, %d steps: one change, at %.15g: %s", coins[k].ia,
                         steps[j], crit, json_dumps(ch, 0));
            const json_t *c0 = json_array_get(ch, 0);
            expect_rel(json_number_value(json_object_get(c0, "value")), crit, 1e-10, coins[k].ia);
            cr_expect_str_eq(json_string_value(json_object_get(c0, "kind")), "real");
            cr_expect_str_eq(json_string_value(json_object_get(c0, "direction")), "gains stability");
            /* the branch ends at `to` exactly, without a point a few ulps before it */
            const json_t *pts = json_object_get(res, "points");
            size_t np = json_array_size(pts);
            double v_last = json_number_value(
                       json_object_get(json_object_get(json_array_get(pts, np - 1), "values"), "sd")),
                   v_before = json_number_value(
                       json_object_get(json_object_get(json_array_get(pts, np - 2), "values"), "sd"));
            cr_expect_eq(v_last, 8.0);
            cr_expect_gt(v_last - v_before, 1e-6, "%d steps: last points at %.17g and %.17g", steps[j],
                         v_before, v_last);
            json_decref(res);
        }
        if (k == 1) {
            const double W = 2.8532986111111112;
            json_t *req =
                support_loads("{\"t\": 0, \"q\": {\"h\": 0, \"b\": 0, \"s\": 0, \"x\": 0, \"y\": 0, "
                              "\"z\": 0.3}, \"speeds\": {\"hd\": 0, \"bd\": 0, \"sd\": 2.8532986111111112}}");
            json_t *res = NULL, *p = NULL;
            int rc = engine_linearize(m, req, NULL, NULL, &res, &p);
            char *txt = p ? json_dumps(p, 0) : NULL;
            cr_assert_eq(rc, 0, "linearize at sd = %.17g: %s", W, txt ? txt : "");
            free(txt);
            const json_t *ev =
                json_object_get(json_array_get(json_object_get(res, "points"), 0), "eigenvalues");
            double grow = sqrt((COIN_M * COIN_G * COIN_R - W * W * ia * (ia + mr2) / id) / (id + mr2));
            expect_rel(json_number_value(json_object_get(json_array_get(ev, 0), "re")), grow, 1e-9,
                       "the growing mode");
            json_decref(res);
            json_decref(req);
        }
        engine_model_release(m);
    }
}

/* x'' = c - x^2 - 0.2 x': the branch x = sqrt(c) ends at the fold c = 0. Followed past
 * it, it turns back (onto x = -sqrt(c)): the problem says so and where, not "more
 * steps". Varying x instead, the fold is a real eigenvalue crossing zero at x = 0. */
Test(outside, fold_is_said)
{
    engine_model *m =
        support_compile_text("{\"name\": \"fold\", \"coordinates\": [\"x\"], \"parameters\": {\"c\": 1},"
                             " \"kinetic_energy\": \"1/2*x'^2\", \"potential_energy\": \"x^3/3-c*x\","
                             " \"generalized_forces\": {\"x\": \"-0.2*x'\"}}");
    json_t *p = NULL;
    json_t *res = steady(m,
                         "{\"state\": {\"q\": {\"x\": 0.9}, \"speeds\": {\"x'\": 0}}, \"unknowns\": [\"x\"],"
                         " \"continuation\": {\"vary\": \"c\", \"to\": -1, \"steps\": 6}}",
                         HAMEL_E_NUMERIC, &p);
    cr_assert_null(res);
    const char *detail = json_string_value(json_object_get(p, "detail"));
    cr_expect(detail && strstr(detail, "fold") && strstr(detail, "c = "), "names the fold: %s",
              detail ? detail : "");
    const json_t *e0 = json_array_get(json_object_get(p, "errors"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(e0, "path")), "continuation.to");
    json_decref(p);
    /* before the fold: fine, and the last point is at `to` */
    res = steady(m,
                 "{\"state\": {\"q\": {\"x\": 0.9}, \"speeds\": {\"x'\": 0}}, \"unknowns\": [\"x\"],"
                 " \"continuation\": {\"vary\": \"c\", \"to\": 0.01, \"steps\": 6}}",
                 0, NULL);
    const json_t *pts = json_object_get(res, "points");
    const json_t *lastp = json_object_get(json_array_get(pts, json_array_size(pts) - 1), "values");
    cr_expect_eq(json_number_value(json_object_get(lastp, "c")), 0.01);
    expect_rel(json_number_value(json_object_get(lastp, "x")), 0.1, 1e-12, "x = sqrt(c)");
    json_decref(res);
    /* in x, through the fold: one real crossing at x = 0 */
    res = steady(m,
                 "{\"state\": {\"q\": {\"x\": 0.9}, \"speeds\": {\"x'\": 0}}, \"unknowns\": [\"c\"],"
                 " \"continuation\": {\"vary\": \"x\", \"to\": -2, \"steps\": 6}}",
                 0, NULL);
    const json_t *ch = json_object_get(res, "stability_changes");
    cr_assert_eq(json_array_size(ch), 1, "%s", json_dumps(ch, 0));
    cr_expect(fabs(json_number_value(json_object_get(json_array_get(ch, 0), "value"))) <= 1e-10,
              "at x = 0: %s", json_dumps(ch, 0));
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(ch, 0), "kind")), "real");
    json_decref(res);
    engine_model_release(m);
}

/* x'' = -k (x - c) + (a - x^2) x': equilibrium x = c, a Hopf bifurcation at c = sqrt(a);
 * a bead on a hoop spinning at W: the bottom loses stability at W = sqrt(g / R), the
 * branch off it is cos th = g / (R W^2). */
Test(outside, hopf_and_pitchfork_against_closed_form)
{
    engine_model *m =
        support_compile_text("{\"name\": \"vdp-shift\", \"coordinates\": [\"x\"], \"parameters\": {\"a\": "
                             "0.64, \"c\": 0.2, \"k\": 3},"
                             " \"kinetic_energy\": \"1/2*x'^2\", \"potential_energy\": \"1/2*k*(x-c)^2\","
                             " \"generalized_forces\": {\"x\": \"(a-x^2)*x'\"}}");
    json_t *res = steady(m,
                         "{\"state\": {\"q\": {\"x\": 0.1}, \"speeds\": {\"x'\": 0}}, \"unknowns\": [\"x\"],"
                         " \"continuation\": {\"vary\": \"c\", \"to\": 1.5, \"steps\": 7}}",
                         0, NULL);
    const json_t *ch = json_object_get(res, "stability_changes");
    cr_assert_eq(json_array_size(ch), 1, "%s", json_dumps(ch, 0));
    expect_rel(json_number_value(json_object_get(json_array_get(ch, 0), "value")), 0.8, 1e-10, "Hopf");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(ch, 0), "kind")), "complex");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(ch, 0), "direction")),
                     "gains stability");
    json_decref(res);
    engine_model_release(m);

    const double g = 9.81, R = 0.5;
    m = support_compile_text(
        "{\"name\": \"hoop\", \"coordinates\": [\"th\"], \"parameters\": {\"m\": 1, \"R\": 0.5, "
        "\"g\": 9.81, \"W\": 1, \"cd\": 0.1},"
        " \"kinetic_energy\": \"1/2*m*R^2*(th'^2+W^2*sin(th)^2)\","
        " \"potential_energy\": \"-m*g*R*cos(th)\", \"generalized_forces\": {\"th\": "
        "\"-cd*th'\"}}");
    res = steady(m,
                 "{\"state\": {\"q\": {\"th\": 0}, \"speeds\": {\"th'\": 0}}, \"unknowns\": [\"th\"],"
                 " \"continuation\": {\"vary\": \"W\", \"to\": 6, \"steps\": 5}}",
                 0, NULL);
    ch = json_object_get(res, "stability_changes");
    cr_assert_eq(json_array_size(ch), 1, "%s", json_dumps(ch, 0));
    expect_rel(json_number_value(json_object_get(json_array_get(ch, 0), "value")), sqrt(g / R), 1e-10,
               "pitchfork");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(ch, 0), "kind")), "real");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(ch, 0), "direction")),
                     "loses stability");
    json_decref(res);
    res = steady(m,
                 "{\"parameters\": {\"W\": 6}, \"state\": {\"q\": {\"th\": 1}, \"speeds\": {\"th'\": 0}},"
                 " \"unknowns\": [\"th\"], \"continuation\": {\"vary\": \"W\", \"to\": 4.6, \"steps\": 6}}",
                 0, NULL);
    const json_t *pts = json_object_get(res, "points");
    cr_assert_geq(json_array_size(pts), 7);
    for (size_t i = 0; i < json_array_size(pts); i++) {
        const json_t *v = json_object_get(json_array_get(pts, i), "values");
        double W = json_number_value(json_object_get(v, "W")),
               th = json_number_value(json_object_get(v, "th"));
        cr_expect(fabs(th - acos(g / (R * W * W))) <= 1e-12, "W = %.17g: th %.17g, closed form %.17g", W, th,
                  acos(g / (R * W * W)));
        cr_expect(json_is_true(json_object_get(json_array_get(pts, i), "stable")));
    }
    cr_expect_eq(json_array_size(json_object_get(res, "stability_changes")), 0);
    json_decref(res);
    engine_model_release(m);
}

static double event_t(const json_t *r, const char *name, int nth)
{
    const json_t *ev = json_object_get(r, "events");
    for (size_t i = 0; i < json_array_size(ev); i++) {
        const json_t *e = json_array_get(ev, i);
        if (!strcmp(json_string_value(json_object_get(e, "name")), name) && nth-- == 0)
            return json_number_value(json_object_get(e, "t"));
    }
    cr_assert_fail("no event %s (%d more) in %s", name, nth, json_dumps(ev, 0));
    return NAN;
}

/* Event times against closed forms at rtol 1e-12, to 1e-9 relative; stop events end
 * the run with a last sample at the event. */
Test(outside, events_against_closed_forms)
{
    /* a particle thrown up at 3 m/s from z = 1 */
    engine_model *m =
        support_compile_text("{\"name\": \"fall\", \"coordinates\": [\"z\"], \"parameters\": {\"m\": 2, "
                             "\"g\": 9.81}, \"kinetic_energy\": \"1/2*m*z'^2\", "
                             "\"potential_energy\": \"m*g*z\"}");
    json_t *r = support_run(
        m, "{\"initial\": {\"t\": 0, \"q\": {\"z\": 1}, \"qdot\": {\"z\": 3}}, \"t_end\": 5, \"output\": "
           "{\"samples\": 11}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}, \"events\": ["
           "{\"name\": \"top\", \"expr\": \"z'\", \"direction\": \"falling\"},"
           "{\"name\": \"up\", \"expr\": \"z - 1.2\", \"direction\": \"rising\"},"
           "{\"name\": \"down\", \"expr\": \"z - 1.2\", \"direction\": \"falling\"},"
           "{\"name\": \"ground\", \"expr\": \"z\", \"direction\": \"falling\", \"action\": \"stop\"}]}");
    const double g = 9.81, v = 3, d = sqrt(v * v - 2 * g * 0.2);
    expect_rel(event_t(r, "top", 0), v / g, 1e-9, "top");
    expect_rel(event_t(r, "up", 0), (v - d) / g, 1e-9, "up");
    expect_rel(event_t(r, "down", 0), (v + d) / g, 1e-9, "down");
    double tg = (v + sqrt(v * v + 2 * g)) / g;
    expect_rel(event_t(r, "ground", 0), tg, 1e-9, "ground");
    cr_expect_str_eq(json_string_value(json_object_get(r, "stopped_by")), "ground");
    cr_expect_eq(last_of(json_object_get(json_object_get(r, "trajectory"), "t")), event_t(r, "ground", 0));
    json_decref(r);
    engine_model_release(m);

    /* a pendulum released at 2.5 rad: th = -1.1 at K - F(asin(sin(-0.55)/k) | k^2)
     * over w and again half a period later mirrored (mpmath, 30 digits) */
    m = support_compile_text(
        "{\"name\": \"pend\", \"coordinates\": [\"th\"], \"parameters\": {\"m\": 1.3, \"g\": "
        "9.81, \"L\": 0.7}, \"kinetic_energy\": \"1/2*m*L^2*th'^2\", "
        "\"potential_energy\": \"-m*g*L*cos(th)\"}");
    const char *methods[3] = {"rk8pd", "rkf45", "bsimp"};
    for (int k = 0; k < 3; k++) {
        char req[1024];
        snprintf(
            req, sizeof req,
            "{\"initial\": {\"t\": 0, \"q\": {\"th\": 2.5}, \"qdot\": {\"th\": 0}}, \"t_end\": 2.5, "
            "\"output\": {\"samples\": 7}, \"integrator\": {\"method\": \"%s\", \"rtol\": 1e-12, \"atol\": "
            "1e-14}, \"events\": [{\"name\": \"cross\", \"expr\": \"th + 1.1\"}, {\"name\": \"zero\", "
            "\"expr\": \"sin(th/2)\"}, {\"name\": \"back\", \"expr\": \"th + 1.1\", \"direction\": "
            "\"rising\", \"action\": \"stop\"}]}",
            methods[k]);
        r = support_run(m, req);
        expect_rel(event_t(r, "zero", 0), 0.689393690206172300381933512998, 1e-9, methods[k]);
        expect_rel(event_t(r, "cross", 0), 0.853764776697229634239154599812, 1e-9, methods[k]);
        expect_rel(event_t(r, "back", 0), 1.90380998412745956728857945218, 1e-9, methods[k]);
        cr_expect_str_eq(json_string_value(json_object_get(r, "stopped_by")), "back");
        const json_t *tr = json_object_get(r, "trajectory");
        cr_expect_eq(last_of(json_object_get(tr, "t")), event_t(r, "back", 0));
        cr_expect(fabs(last_of(json_object_get(json_object_get(tr, "q"), "th")) + 1.1) <= 1e-12);
        json_decref(r);
    }
    engine_model_release(m);

    /* the Chaplygin sleigh, mass center a ahead of the blade: v = c tanh(s), w = w0
     * cosh(s0) / cosh(s), s = a m c t / J + s0; the heading reaches 1.5 at
     * 1.8417324143660840668668339; the blade's force lambda_knife = m w v I / J (the
     * constraint written as the blade's lateral velocity) is 1 at 0.0133964256379802042
     * and 0.6729051822940800641. Both formulations. */
    m = support_compile_text(
        "{\"name\": \"sleigh\", \"coordinates\": [\"x\", \"y\", \"phi\"], \"parameters\": {\"m\": 2, \"I\": "
        "0.3, "
        "\"a\": 0.4}, \"kinetic_energy\": \"1/2*m*(x'^2+y'^2)+1/2*I*phi'^2\", \"constraints\": [{\"name\": "
        "\"knife\", \"expr\": \"-x'*sin(phi)+y'*cos(phi)-a*phi'\"}], \"speeds\": [{\"name\": \"v\", "
        "\"expr\": "
        "\"x'*cos(phi)+y'*sin(phi)\"}, {\"name\": \"w\", \"expr\": \"phi'\"}]}");
    const char *forms[2] = {"hamel", "multipliers"};
    for (int f = 0; f < 2; f++) {
        char req[1024];
        snprintf(
            req, sizeof req,
            "{\"initial\": {\"t\": 0, \"q\": {\"x\": 0, \"y\": 0, \"phi\": 0}, \"speeds\": {\"v\": 0.5, "
            "\"w\": 2}}, \"t_end\": 10, \"output\": {\"samples\": 5}, \"formulation\": \"%s\", "
            "\"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}, \"events\": [{\"name\": \"lam\", \"expr\": "
            "\"lambda_knife - 1\"}, {\"name\": \"head\", \"expr\": \"phi - 1.5\", \"direction\": "
            "\"rising\", \"action\": \"stop\"}]}",
            forms[f]);
        r = support_run(m, req);
        expect_rel(event_t(r, "lam", 0), 0.0133964256379802042, 1e-9, "lambda rises through 1");
        expect_rel(event_t(r, "lam", 1), 0.6729051822940800641, 1e-9, "lambda falls through 1");
        expect_rel(event_t(r, "head", 0), 1.8417324143660840668668339, 1e-9, "heading 1.5");
        cr_expect_str_eq(json_string_value(json_object_get(r, "stopped_by")), "head");
        json_decref(r);
    }
    engine_model_release(m);
}

/* Contacts of models written with T and constraints. A bead released at rest 0.05 rad
 * from the top of a dome (sqrt(x^2 + z^2) - R = 0: its multiplier is the normal force)
 * leaves it where cos th = 2 cos th0 / 3, at t = integral of dth / th' (mpmath:
 * 1.00854311748832417617); a lambda_dome event at the same crossing is listed too. A
 * puck carried by a turntable that a torque spins up at alpha = tau / (J + m r^2) slips
 * where m r sqrt(alpha^4 t^4 + alpha^2) = mu m g. Both formulations. */
Test(outside, contacts_of_models_written_with_constraints)
{
    engine_model *dome = support_compile_text(
        "{\"name\": \"bead-on-dome\", \"coordinates\": [\"x\", \"z\"], \"parameters\": {\"m\": 0.7, \"g\": "
        "9.81, "
        "\"R\": 0.8}, \"kinetic_energy\": \"1/2*m*(x'^2+z'^2)\", \"potential_energy\": \"m*g*z\", "
        "\"position_constraints\": [{\"name\": \"dome\", \"expr\": \"sqrt(x^2+z^2)-R\", \"dependent\": "
        "\"z\"}], "
        "\"contacts\": [{\"name\": \"top\", \"normal\": \"dome\", \"friction\": 0}]}");
    const double m = 0.4, g = 9.81, r0 = 0.25, J = 0.3, tau = 0.5, mu = 0.5;
    const double al = tau / (J + m * r0 * r0);
    const double t_slip = pow((pow(mu * g / r0, 2) - al * al) / pow(al, 4), 0.25);
    char text[1024];
    snprintf(
        text, sizeof text,
        "{\"name\": \"puck\", \"coordinates\": [\"a\", \"x\", \"y\", \"z\"], \"parameters\": {\"m\": %.17g, "
        "\"g\": %.17g, \"J\": %.17g, \"tau\": %.17g}, \"kinetic_energy\": "
        "\"1/2*m*(x'^2+y'^2+z'^2)+1/2*J*a'^2\", \"potential_energy\": \"m*g*z\", \"generalized_forces\": "
        "{\"a\": \"tau\"}, \"constraints\": [{\"name\": \"sx\", \"expr\": \"x' + a'*y\"}, {\"name\": \"sy\", "
        "\"expr\": \"y' - a'*x\"}], \"position_constraints\": [{\"name\": \"floor\", \"expr\": \"z\", "
        "\"dependent\": \"z\"}], \"contacts\": [{\"name\": \"pad\", \"normal\": \"floor\", \"tangential\": "
        "[\"sx\", \"sy\"], \"friction\": %.17g}]}",
        m, g, J, tau, mu);
    engine_model *puck = support_compile_text(text);
    const char *forms[2] = {"hamel", "multipliers"};
    for (int f = 0; f < 2; f++) {
        char req[1024];
        snprintf(
            req, sizeof req,
            "{\"initial\": {\"t\": 0, \"q\": {\"x\": %.17g, \"z\": %.17g}, \"qdot\": {\"x\": 0, \"z\": 0}}, "
            "\"t_end\": 3, \"output\": {\"samples\": 11}, \"formulation\": \"%s\", \"integrator\": "
            "{\"rtol\": 1e-12, \"atol\": 1e-14}, \"events\": [{\"name\": \"off\", \"expr\": \"normal_top\", "
            "\"direction\": \"falling\", \"action\": \"stop\"}, {\"name\": \"lam\", \"expr\": "
            "\"lambda_dome\", \"direction\": \"falling\"}]}",
            0.8 * sin(0.05), 0.8 * cos(0.05), forms[f]);
        json_t *r = support_run(dome, req);
        const json_t *c = json_object_get(json_object_get(json_object_get(r, "checks"), "contacts"), "top");
        expect_rel(json_number_value(json_array_get(json_object_get(c, "normal"), 0)), 0.7 * 9.81 * cos(0.05),
                   1e-12, "N at the start");
        expect_rel(json_number_value(json_object_get(json_object_get(c, "lift_off"), "t")),
                   1.00854311748832417617, 1e-9, "bead leaves the dome");
        expect_rel(event_t(r, "off", 0), 1.00854311748832417617, 1e-9, "stop");
        cr_expect_eq(event_t(r, "lam", 0), event_t(r, "off", 0), "the same crossing, listed");
        cr_expect_str_eq(json_string_value(json_object_get(r, "stopped_by")), "off");
        json_decref(r);

        snprintf(
            req, sizeof req,
            "{\"initial\": {\"t\": 0, \"q\": {\"a\": 0, \"x\": %.17g, \"y\": 0, \"z\": 0}, \"qdot\": {\"a\": "
            "0, \"x\": 0, \"y\": 0, \"z\": 0}}, \"t_end\": 4, \"output\": {\"samples\": 9}, \"formulation\": "
            "\"%s\", \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}}",
            r0, forms[f]);
        r = support_run(puck, req);
        c = json_object_get(json_object_get(json_object_get(r, "checks"), "contacts"), "pad");
        expect_rel(json_number_value(json_object_get(json_object_get(c, "slip"), "t")), t_slip, 1e-9,
                   "the puck slips");
        cr_expect(json_is_null(json_object_get(c, "lift_off")));
        const json_t *ts = json_object_get(json_object_get(r, "trajectory"), "t");
        for (size_t i = 0; i < json_array_size(ts); i++) {
            double t = json_number_value(json_array_get(ts, i));
            expect_rel(json_number_value(json_array_get(json_object_get(c, "tangential"), i)),
                       m * r0 * sqrt(pow(al, 4) * pow(t, 4) + al * al), 1e-9, "|F_t|");
            expect_rel(json_number_value(json_array_get(json_object_get(c, "normal"), i)), m * g, 1e-12, "N");
        }
        json_decref(r);
    }
    engine_model_release(dome);
    engine_model_release(puck);
}

static const char *first_reason(const json_t *p)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(p, "errors"), 0), "reason"));
}

/* Unknowns that cannot make every speed derivative zero are a 422 invalid-request at
 * `unknowns` saying how many to give: one unknown for two independent equations (it was
 * numerical-failure after 40 Newton iterations, "may not be able to"); a coordinate
 * fixed by the contact condition (it said "give 0 unknowns"). */
Test(outside, unknowns_that_cannot_solve_are_said)
{
    engine_model *m = support_compile_text(
        "{\"name\": \"p2\", \"coordinates\": [\"x\", \"y\"], \"parameters\": {\"k\": 2}, \"kinetic_energy\": "
        "\"1/2*(x'^2+y'^2)\", \"potential_energy\": \"k*((x-1)^2+(y-2)^2 + x*y/4)\"}");
    json_t *p = NULL;
    json_t *res = steady(m,
                         "{\"state\": {\"q\": {\"x\": 0, \"y\": 0}, \"speeds\": {\"x'\": 0, \"y'\": 0}}, "
                         "\"unknowns\": [\"x\"]}",
                         HAMEL_E_BAD_REQUEST, &p);
    cr_assert_null(res);
    const char *why = first_reason(p);
    cr_expect(why && strstr(why, "give 2 unknowns") && strstr(why, "y''") && strstr(why, ": y)"),
              "says how many and which: %s", why ? why : "");
    cr_expect_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(p, "errors"), 0), "path")),
        "unknowns");
    json_decref(p);
    /* both: the closed form x = 16/21, y = 40/21 */
    res = steady(m,
                 "{\"state\": {\"q\": {\"x\": 0, \"y\": 0}, \"speeds\": {\"x'\": 0, \"y'\": 0}}, "
                 "\"unknowns\": [\"x\", \"y\"]}",
                 0, NULL);
    const json_t *v = json_object_get(json_object_get(res, "steady"), "values");
    expect_rel(json_number_value(json_object_get(v, "x")), 16.0 / 21, 1e-14, "x");
    expect_rel(json_number_value(json_object_get(v, "y")), 40.0 / 21, 1e-14, "y");
    json_decref(res);
    engine_model_release(m);

    m = coin("m*r^2/2", "m*r^2/4", 0.0, 0.6);
    res = steady(
        m,
        "{\"state\": {\"q\": {\"h\": 0, \"b\": 0.4, \"s\": 0, \"x\": 0, \"y\": 0, \"z\": 0.3}, \"speeds\": "
        "{\"hd\": 0.5, \"bd\": 0, \"sd\": 4}}, \"unknowns\": [\"z\"]}",
        HAMEL_E_BAD_REQUEST, &p);
    why = first_reason(p);
    cr_expect(why && strstr(why, "do not depend on this unknown") && !strstr(why, "give 0"), "%s",
              why ? why : "");
    json_decref(p);
    engine_model_release(m);
}

/* A free rotor th = 0.1 + t: its solution is a polynomial, so the steps grow to seconds
 * (8 steps over 20 s) and sin(th) crosses zero and comes back within one step. Probes
 * inside each step find all six crossings, at k pi - 0.1 (4 of them were missed). */
Test(outside, crossings_within_one_step_are_found)
{
    engine_model *m = support_compile_text(
        "{\"name\": \"rotor\", \"coordinates\": [\"th\"], \"kinetic_energy\": \"1/2*th'^2\"}");
    json_t *r = support_run(
        m, "{\"initial\": {\"t\": 0, \"q\": {\"th\": 0.1}, \"qdot\": {\"th\": 1}}, \"t_end\": 20, "
           "\"output\": {\"samples\": 3}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}, "
           "\"events\": [{\"name\": \"s\", \"expr\": \"sin(th)\"}, {\"name\": \"up\", \"expr\": "
           "\"sin(th)\", \"direction\": \"rising\"}]}");
    const json_t *ev = json_object_get(r, "events");
    int ns = 0, nup = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        const json_t *e = json_array_get(ev, i);
        double t = json_number_value(json_object_get(e, "t"));
        int k = (int)lround((t + 0.1) / M_PI);
        expect_rel(t, k * M_PI - 0.1, 1e-12, json_string_value(json_object_get(e, "name")));
        if (!strcmp(json_string_value(json_object_get(e, "name")), "s"))
            cr_expect_eq(k, ++ns, "crossing %d of sin(th) at %.17g", ns, t);
        else {
            cr_expect_eq(k % 2, 0, "rising: even k (%d)", k);
            nup++;
        }
    }
    cr_expect_eq(ns, 6, "six crossings of sin(th) in 20 s: %s", json_dumps(ev, 0));
    cr_expect_eq(nup, 3, "three of them rising");
    json_decref(r);
    engine_model_release(m);
}

/* Spun down until it falls: a damping torque -c omega on the whole rotation (Q_h = -c (h' -
 * s' sin b), Q_b = -c b', Q_s = -c (s' - h' sin b)) lets the coin sink towards flat while
 * it precesses ever faster (an Euler's disk); N stays positive, and even with mu = 5 it
 * slips at 5.44953550002398 (Newton-Euler, its forces at t = 1..5 below). */
Test(outside, coin_spun_down_until_it_slips)
{
    engine_model *m =
        coin_forces("m*r^2/2", "m*r^2/4", 0.05, 5.0,
                    "{\"h\": \"-c*(h'-s'*sin(b))\", \"b\": \"-c*b'\", \"s\": \"-c*(s'-h'*sin(b))\"}");
    json_t *r =
        support_run(m, "{\"initial\": {\"q\": {\"h\": 0, \"b\": 0.2, \"s\": 0, \"x\": 0, \"y\": 0, \"z\": "
                       "0.3}, \"speeds\": {\"hd\": 0, \"bd\": 0, \"sd\": 6}}, \"t_end\": 5.6, \"output\": "
                       "{\"times\": [0, 1, 2, 3, 4, 5, 5.6]}, \"integrator\": {\"rtol\": 1e-12, \"atol\": "
                       "1e-14}, \"hamel\": \"none\"}");
    const double n_ref[5] = {14.3160047397544, 15.2904887393093, 15.3598857286479, 14.915269230571,
                             13.9077412774514};
    const double ft_ref[5] = {5.64457171184389, 13.5554529245918, 25.2412000096944, 41.543424923141,
                              59.151331582672};
    const double b_ref[5] = {0.553021174366844, 1.01241961602206, 1.30616742537314, 1.46134122856422,
                             1.52785079275307};
    const json_t *c = coin_contact(r);
    for (int i = 0; i < 5; i++) {
        expect_rel(json_number_value(json_array_get(json_object_get(c, "normal"), (size_t)i + 1)), n_ref[i],
                   1e-9, "N");
        expect_rel(json_number_value(json_array_get(json_object_get(c, "tangential"), (size_t)i + 1)),
                   ft_ref[i], 1e-9, "|F_t|");
        expect_rel(support_at(r, "q", "b", (size_t)i + 1), b_ref[i], 1e-9, "lean");
    }
    cr_expect(json_is_null(json_object_get(c, "lift_off")), "N stays positive");
    expect_rel(json_number_value(json_object_get(json_object_get(c, "slip"), "t")), 5.4495355000239849, 1e-9,
               "slip");
    json_decref(r);
    engine_model_release(m);
}

/* The coin (spin damping 0.05) with its height eliminated by hand (the center at r cos b):
 * no normal force, and the result says why; the tangential force is the free-height
 * coin's (|F_t| at t = 0.5: 22.3829..., checked against Newton-Euler with the rest of
 * that run); an event on normal_coin is refused saying the contact has none. */
Test(outside, no_normal_force_is_said_in_events_too)
{
    char text[4096];
    snprintf(
        text, sizeof text,
        "{\"name\": \"coin-flat\", \"coordinates\": [\"h\", \"b\", \"s\", \"x\", \"y\"],"
        " \"parameters\": {\"m\": %.17g, \"r\": %.17g, \"g\": %.17g, \"c\": 0.05},"
        " \"generalized_forces\": {\"h\": \"c*(s'-h'*sin(b))*sin(b)\", \"s\": \"-c*(s'-h'*sin(b))\"},"
        " \"frames\": [{\"name\": \"A\", \"parent\": \"N\", \"rotations\": [{\"axis\": \"z\", \"angle\": "
        "\"h\"}]}, {\"name\": \"B\", \"parent\": \"A\", \"rotations\": [{\"axis\": \"y\", \"angle\": "
        "\"b\"}]},"
        " {\"name\": \"D\", \"parent\": \"B\", \"rotations\": [{\"axis\": \"x\", \"angle\": \"s\"}]}],"
        " \"points\": [{\"name\": \"G\", \"parent\": \"O\", \"frame\": \"N\", \"position\": [\"x\", \"y\", "
        "\"r*cos(b)\"]}],"
        " \"bodies\": [{\"name\": \"coin\", \"mass\": \"m\", \"mass_center\": \"G\", \"frame\": \"D\","
        " \"inertia\": [[\"m*r^2/2\", 0, 0], [0, \"m*r^2/4\", 0], [0, 0, \"m*r^2/4\"]]}],"
        " \"gravity\": {\"frame\": \"N\", \"vector\": [0, 0, \"-g\"]},"
        " \"speeds\": [{\"name\": \"hd\", \"expr\": \"h'\"}, {\"name\": \"bd\", \"expr\": \"b'\"},"
        " {\"name\": \"sd\", \"expr\": \"s'\"}],"
        " \"rolling_disks\": [{\"name\": \"coin\", \"frame\": \"D\", \"axis\": \"x\", \"center\": \"G\","
        " \"radius\": \"r\", \"friction\": 0.6}]}",
        COIN_M, COIN_R, COIN_G);
    engine_model *m = support_compile_text(text);
    json_t *r = support_run(m, "{\"initial\": {\"q\": {\"h\": 0, \"b\": 0.3, \"s\": 0, \"x\": 0, \"y\": 0}, "
                               "\"speeds\": {\"hd\": 0, \"bd\": 0, \"sd\": 3}}, \"t_end\": 1, \"output\": "
                               "{\"samples\": 3}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}}");
    const json_t *c = coin_contact(r);
    cr_expect(json_is_null(json_object_get(c, "normal")), "%s", json_dumps(c, 0));
    const char *reason = json_string_value(json_object_get(c, "reason"));
    cr_expect(reason && strstr(reason, "no way to the normal force"), "%s", reason ? reason : "");
    expect_rel(json_number_value(json_array_get(json_object_get(c, "tangential"), 1)), 22.382890429811294,
               1e-9, "|F_t| at t = 0.5");
    json_decref(r);
    json_t *req = support_loads("{\"initial\": {\"q\": {\"h\": 0, \"b\": 0.3, \"s\": 0, \"x\": 0, \"y\": 0}, "
                                "\"speeds\": {\"hd\": 0, \"bd\": 0, \"sd\": 3}}, \"t_end\": 1, \"events\": "
                                "[{\"name\": \"n\", \"expr\": \"normal_coin\"}]}");
    json_t *res = NULL, *p = NULL;
    int rc = engine_simulate(m, req, NULL, NULL, &res, &p);
    cr_assert_eq(rc, HAMEL_E_BAD_REQUEST);
    const char *why = first_reason(p);
    cr_expect(why && strstr(why, "contact coin has no normal force"), "%s", why ? why : "");
    json_decref(p);
    json_decref(res);
    json_decref(req);
    engine_model_release(m);
}
