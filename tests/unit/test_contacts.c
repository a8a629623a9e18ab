/* test_contacts.c — contact validity (contact.h, issue 18 item 2): the normal and
 * tangential forces of a rolling disk with friction against Newton–Euler on its own
 * motion, and the lift-off and slip times against bisections of that reference.
 *
 * The disk (api/examples/model-bodies.json) is given a free center (x, y, z), with z the
 * dependent coordinate of its contact condition, so that the model has a constraint
 * for the height and its multiplier is the normal force. Its mass center is the center,
 * so Newton's law for the whole disk reads N - m g = m z'' and F_t = m (x'', y''): the
 * reference takes x'', y'', z'' by a five-point difference of the velocities the run
 * reports at t - 2h .. t + 2h (h = 1e-3: error ~ h^4), independent of the multipliers.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "support.h"

#define DISK_M 1.0
#define DISK_G 9.81
#define FD_H 1e-3

static void setup(void) { engine_init(); }

TestSuite(contacts, .init = setup, .timeout = 120);

/* The disk with a free height and the given friction (a JSON value as text). */
static engine_model *free_disk(const char *friction, int free_height)
{
    json_t *m = support_load_file("api/examples/model-bodies.json");
    json_t *disk = json_array_get(json_object_get(m, "rolling_disks"), 0);
    if (friction)
        json_object_set_new(disk, "friction", json_real(atof(friction)));
    if (free_height) {
        json_array_append_new(json_object_get(m, "coordinates"), json_string("z"));
        json_object_set_new(
            m, "points",
            support_loads("[{\"name\": \"G\", \"parent\": \"O\", \"frame\": \"N\", \"position\": "
                          "[\"x\", \"y\", \"z\"]}]"));
        json_object_set_new(disk, "dependent", json_string("z"));
    }
    engine_model *em = support_compile_json(m);
    json_decref(m);
    return em;
}

/* A request from theta0 with tilt rate thd and spin Omega; `extra` is more members. */
static json_t *run(engine_model *m, double thd, double omega, double t_end, const char *output,
                   const char *extra)
{
    char req[2048];
    snprintf(req, sizeof req,
             "{\"initial\": {\"q\": {\"phi\": 0, \"theta\": %s, \"psi\": 0, \"x\": 0, \"y\": 0, \"z\": 0.5},"
             " \"speeds\": {\"wd\": %s, \"thd\": %.17g, \"Omega\": %.17g}}, \"t_end\": %.17g, \"output\": %s,"
             " \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}, \"hamel\": \"none\"%s}",
             thd == 0 ? "1.2" : "1.5", thd == 0 ? "0.3" : "0", thd, omega, t_end, output, extra ? extra : "");
    return support_run(m, req);
}

static const json_t *contact(const json_t *r)
{
    return json_object_get(json_object_get(json_object_get(r, "checks"), "contacts"), "disk");
}

static double last(const json_t *a) { return json_number_value(json_array_get(a, json_array_size(a) - 1)); }

/* Newton–Euler at t: *n = m (g + z''), *ft = m |(x'', y'')|, from a run landing on
 * t - 2h .. t + 2h. Also the engine's N and |F_t| at t into *en, *eft. */
static void newton_euler(engine_model *m, double thd, double omega, double t, double *n, double *ft,
                         double *en, double *eft)
{
    char out[256];
    snprintf(out, sizeof out, "{\"times\": [%.17g, %.17g, %.17g, %.17g, %.17g]}", t - 2 * FD_H, t - FD_H, t,
             t + FD_H, t + 2 * FD_H);
    json_t *r = run(m, thd, omega, t + 2 * FD_H, out, NULL);
    double acc[3];
    const char *names[3] = {"x", "y", "z"};
    for (int c = 0; c < 3; c++) {
        double v[5];
        for (int i = 0; i < 5; i++)
            v[i] = support_at(r, "qdot", names[c], i);
        acc[c] = (-v[4] + 8 * v[3] - 8 * v[1] + v[0]) / (12 * FD_H);
    }
    *n = DISK_M * (DISK_G + acc[2]);
    *ft = DISK_M * hypot(acc[0], acc[1]);
    *en = json_number_value(json_array_get(json_object_get(contact(r), "normal"), 2));
    *eft = json_number_value(json_array_get(json_object_get(contact(r), "tangential"), 2));
    json_decref(r);
}

/* N and |F_t| against Newton–Euler along a nutating run, in both formulations: the
 * multipliers of the contact's constraints are the contact forces. */
Test(contacts, forces_against_newton_euler)
{
    engine_model *m = free_disk("0.3", 1);
    const double times[] = {0.1, 0.5, 0.77, 1.3};
    for (size_t i = 0; i < sizeof times / sizeof *times; i++) {
        double n, ft, en, eft;
        newton_euler(m, 0, 4, times[i], &n, &ft, &en, &eft);
        cr_expect(fabs(en - n) <= 1e-7 * fabs(n), "t = %g: N %.12g, Newton-Euler %.12g", times[i], en, n);
        cr_expect(fabs(eft - ft) <= 1e-7 * fabs(ft), "t = %g: |F_t| %.12g, Newton-Euler %.12g", times[i], eft,
                  ft);
        cr_expect(n > 5 && ft > 1, "a real check: N %g, F_t %g", n, ft);
    }
    json_t *h = run(m, 0, 4, 2, "{\"samples\": 21}", NULL);
    json_t *mu = run(m, 0, 4, 2, "{\"samples\": 21}", ", \"formulation\": \"multipliers\"");
    const json_t *hn = json_object_get(contact(h), "normal"), *mn = json_object_get(contact(mu), "normal");
    cr_assert_eq(json_array_size(hn), 21);
    for (size_t i = 0; i < 21; i++) {
        double a = json_number_value(json_array_get(hn, i)), b = json_number_value(json_array_get(mn, i));
        cr_expect(fabs(a - b) <= 1e-8 * fabs(a), "sample %zu: hamel %.15g, multipliers %.15g", i, a, b);
    }
    cr_expect_eq(json_number_value(json_object_get(contact(h), "friction")), 0.3);
    /* |F_t| / N = 0.314 > 0.3 at the start: it slips from t = 0, whatever crosses later */
    cr_expect_eq(json_number_value(json_object_get(json_object_get(contact(h), "slip"), "t")), 0.0, "%s",
                 json_dumps(json_object_get(contact(h), "slip"), 0));
    json_decref(h);
    json_decref(mu);
    engine_model_release(m);
}

/* Bisection of f(t) = (Newton–Euler N(t) or mu N - |F_t|) over [lo, hi] (f(lo) > 0). */
static double ne_bisect(engine_model *m, double thd, double omega, double mu, double lo, double hi)
{
    for (int it = 0; it < 50 && hi - lo > 1e-12; it++) {
        double mid = 0.5 * (lo + hi), n, ft, en, eft;
        newton_euler(m, thd, omega, mid, &n, &ft, &en, &eft);
        double f = mu > 0 ? mu * n - ft : n;
        if (f > 0)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* A disk falling fast from near upright leaves the ground: the normal force turns
 * negative. The lift-off time agrees with the bisection of Newton–Euler's N to 1e-8
 * relative; an event on normal_disk stops there, the last sample at it. */
Test(contacts, lift_off_against_newton_euler)
{
    engine_model *m = free_disk("0.8", 1);
    json_t *r = run(m, -3, 0.5, 0.5, "{\"samples\": 51}", NULL);
    const json_t *lift = json_object_get(contact(r), "lift_off");
    cr_assert(json_is_object(lift), "the disk lifts off: %s", json_dumps(contact(r), 0));
    double tl = json_number_value(json_object_get(lift, "t"));
    /* bracket from the samples: the first negative normal force */
    const json_t *ns = json_object_get(contact(r), "normal"),
                 *ts = json_object_get(json_object_get(r, "trajectory"), "t");
    size_t i = 1;
    while (i < json_array_size(ns) && json_number_value(json_array_get(ns, i)) >= 0)
        i++;
    cr_assert_lt(i, json_array_size(ns));
    double ref = ne_bisect(m, -3, 0.5, 0, json_number_value(json_array_get(ts, i - 1)),
                           json_number_value(json_array_get(ts, i)));
    cr_expect(fabs(tl - ref) <= 1e-8 * ref, "lift-off at %.15g, Newton-Euler %.15g", tl, ref);
    json_decref(r);

    r = run(
        m, -3, 0.5, 0.5, "{\"samples\": 51}",
        ", \"events\": [{\"name\": \"up\", \"expr\": \"normal_disk\", \"direction\": \"falling\", "
        "\"action\": "
        "\"stop\"}, {\"name\": \"lam\", \"expr\": \"lambda_disk_contact - 1\", \"direction\": \"falling\"}]");
    cr_expect_str_eq(json_string_value(json_object_get(r, "stopped_by")), "up");
    double ts_stop = last(json_object_get(json_object_get(r, "trajectory"), "t"));
    cr_expect(fabs(ts_stop - tl) <= 1e-12 * tl, "stopped at %.17g, lift-off at %.17g", ts_stop, tl);
    cr_expect(fabs(last(json_object_get(contact(r), "normal"))) < 1e-8, "N %g at the stop",
              last(json_object_get(contact(r), "normal")));
    json_t *ev = json_object_get(r, "events");
    cr_assert_eq(json_array_size(ev), 2,
                 "lambda_disk_contact = 1 (N by the multiplier's name), then the stop");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(ev, 0), "name")), "lam");
    cr_expect_lt(json_number_value(json_object_get(json_array_get(ev, 0), "t")), tl);
    json_decref(r);
    engine_model_release(m);
}

/* Slip: the first time |F_t| > mu N, against the bisection of Newton–Euler's mu N -
 * |F_t|; before it every sample holds |F_t| <= mu N. */
Test(contacts, slip_against_newton_euler)
{
    engine_model *m = free_disk("0.3", 1);
    json_t *r = run(m, -1, 0.5, 0.6, "{\"samples\": 61}", NULL);
    const json_t *slip = json_object_get(contact(r), "slip");
    cr_assert(json_is_object(slip), "the disk slips: %s", json_dumps(contact(r), 0));
    double t_s = json_number_value(json_object_get(slip, "t"));
    const json_t *ns = json_object_get(contact(r), "normal"), *fs = json_object_get(contact(r), "tangential");
    const json_t *ts = json_object_get(json_object_get(r, "trajectory"), "t");
    size_t i = 0;
    while (i < json_array_size(ts) && json_number_value(json_array_get(ts, i)) < t_s) {
        double n = json_number_value(json_array_get(ns, i)), f = json_number_value(json_array_get(fs, i));
        cr_expect_leq(f, 0.3 * n, "sample %zu before the slip: |F_t| %g > mu N %g", i, f, 0.3 * n);
        i++;
    }
    cr_assert(i > 1 && i < json_array_size(ts), "slip inside the run (%g)", t_s);
    double ref = ne_bisect(m, -1, 0.5, 0.3, json_number_value(json_array_get(ts, i - 1)),
                           json_number_value(json_array_get(ts, i)));
    cr_expect(fabs(t_s - ref) <= 1e-8 * ref, "slip at %.15g, Newton-Euler %.15g", t_s, ref);
    cr_expect_null(json_object_get(r, "events"), "the contacts' own events are not listed");
    const json_t *w = json_object_get(r, "warnings");
    int said = 0;
    for (size_t k = 0; k < json_array_size(w); k++)
        said |= !strcmp(json_string_value(json_object_get(json_array_get(w, k), "code")), "contact-slip") &&
                json_number_value(json_object_get(json_array_get(w, k), "value")) == t_s;
    cr_expect(said, "a contact-slip warning at the slip time: %s", json_dumps(w, 0));
    json_decref(r);
    engine_model_release(m);
}

/* The example's disk has its height fixed by the coordinates: no normal force, and the
 * result says so; the tangential force is still reported. A bad friction is a 422. */
Test(contacts, no_normal_force_is_said_and_bad_friction_refused)
{
    engine_model *m = free_disk("0.5", 0);
    json_t *r =
        support_run(m, "{\"initial\": {\"q\": {\"phi\": 0, \"theta\": 1.2, \"psi\": 0, \"x\": 0, \"y\": 0},"
                       " \"speeds\": {\"wd\": 0.3, \"thd\": 0, \"Omega\": 4}}, \"t_end\": 1}");
    const json_t *c = contact(r);
    cr_assert(json_is_object(c), "%s", json_dumps(json_object_get(r, "checks"), 0));
    cr_expect(json_is_null(json_object_get(c, "normal")));
    cr_expect(strstr(json_string_value(json_object_get(c, "reason")), "no way to the normal force") != NULL);
    cr_expect_eq(json_array_size(json_object_get(c, "tangential")), 101);
    cr_expect_null(json_object_get(c, "lift_off"));
    json_decref(r);
    engine_model_release(m);

    json_t *bad = support_load_file("api/examples/model-bodies.json");
    json_object_set_new(json_array_get(json_object_get(bad, "rolling_disks"), 0), "friction",
                        json_real(-0.1));
    engine_model *none = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(bad, NULL, &none, &problem);
    cr_expect_neq(rc, 0);
    const json_t *err = json_array_get(json_object_get(problem, "errors"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(err, "path")), "model.rolling_disks[0].friction", "%s",
                     json_dumps(problem, 0));
    json_decref(problem);
    json_decref(bad);
}

/* A model's own contact: a knife edge (mass m, inertia I about the vertical) on the
 * ground z = 0 (a position constraint, the normal), sliding along its blade at speed v
 * while a torque tau turns it (phi' = w0 + tau t / I) and a force c t lifts it. Closed
 * forms: N = m g - c t, |F_t| = m v phi' (the lateral force that turns the velocity), so
 * lift-off at m g / c and slip where m v (w0 + tau t / I) = mu (m g - c t). */
#define KNIFE_CONTACT_MODEL(CONTACTS)                                                                        \
    "{\"name\": \"knife-contact\", \"coordinates\": [\"x\", \"y\", \"z\", \"phi\"],"                         \
    " \"parameters\": {\"m\": 2, \"I\": 0.5, \"g\": 9.81, \"tau\": 0.3, \"c\": 4},"                          \
    " \"kinetic_energy\": \"1/2*m*(x'^2 + y'^2 + z'^2) + 1/2*I*phi'^2\", \"potential_energy\": \"m*g*z\","   \
    " \"generalized_forces\": {\"phi\": \"tau\", \"z\": \"c*t\"},"                                           \
    " \"constraints\": [{\"name\": \"knife\", \"expr\": \"x'*sin(phi) - y'*cos(phi)\"}],"                    \
    " \"position_constraints\": [{\"name\": \"ground\", \"expr\": \"z\", \"dependent\": \"z\"}]" CONTACTS    \
    "}"

Test(contacts, a_models_own_contact_against_the_closed_form)
{
    const double m = 2, I = 0.5, g = 9.81, tau = 0.3, c = 4, v = 1.5, w0 = 0.2, mu = 0.4;
    engine_model *k = support_compile_text(
        KNIFE_CONTACT_MODEL(", \"contacts\": [{\"name\": \"edge\", \"normal\": \"ground\", \"tangential\": "
                            "[\"knife\"], \"friction\": 0.4}]"));
    char req[1024];
    snprintf(
        req, sizeof req,
        "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"z\": 0, \"phi\": 0}, \"qdot\": {\"x\": %.17g, \"y\": "
        "0, "
        "\"z\": 0, \"phi\": %.17g}}, \"t_end\": 6, \"output\": {\"samples\": 61}, \"integrator\": {\"rtol\": "
        "1e-12, \"atol\": 1e-14}}",
        v, w0);
    json_t *r = support_run(k, req);
    const json_t *e = json_object_get(json_object_get(json_object_get(r, "checks"), "contacts"), "edge");
    cr_assert(json_is_object(e), "%s", json_dumps(json_object_get(r, "checks"), 0));
    const json_t *ts = json_object_get(json_object_get(r, "trajectory"), "t");
    for (size_t i = 0; i < json_array_size(ts); i++) {
        double t = json_number_value(json_array_get(ts, i));
        double n = json_number_value(json_array_get(json_object_get(e, "normal"), i));
        double f = json_number_value(json_array_get(json_object_get(e, "tangential"), i));
        cr_expect(fabs(n - (m * g - c * t)) <= 1e-9 * m * g, "t = %g: N %.15g, closed form %.15g", t, n,
                  m * g - c * t);
        cr_expect(fabs(f - m * v * (w0 + tau * t / I)) <= 1e-9 * m * g,
                  "t = %g: F_t %.15g, closed form %.15g", t, f, m * v * (w0 + tau * t / I));
    }
    double t_lift = m * g / c, t_slip = (mu * m * g - m * v * w0) / (m * v * tau / I + mu * c);
    double got_lift = json_number_value(json_object_get(json_object_get(e, "lift_off"), "t"));
    double got_slip = json_number_value(json_object_get(json_object_get(e, "slip"), "t"));
    cr_expect(fabs(got_lift - t_lift) <= 1e-9 * t_lift, "lift-off %.15g, closed form %.15g", got_lift,
              t_lift);
    cr_expect(fabs(got_slip - t_slip) <= 1e-9 * t_slip, "slip %.15g, closed form %.15g", got_slip, t_slip);
    json_decref(r);
    engine_model_release(k);

    /* without "normal": said; a contact naming no constraint: a 422 */
    k = support_compile_text(KNIFE_CONTACT_MODEL(
        ", \"contacts\": [{\"name\": \"edge\", \"tangential\": [\"knife\"], \"friction\": 0.4}]"));
    r = support_run(k, req);
    e = json_object_get(json_object_get(json_object_get(r, "checks"), "contacts"), "edge");
    cr_expect(json_is_null(json_object_get(e, "normal")));
    cr_expect(strstr(json_string_value(json_object_get(e, "reason")), "no way to the normal force") != NULL);
    json_decref(r);
    engine_model_release(k);
    json_t *bad =
        support_loads(KNIFE_CONTACT_MODEL(", \"contacts\": [{\"name\": \"edge\", \"normal\": \"floor\", "
                                          "\"tangential\": [\"knife\"], \"friction\": 0.4}]"));
    engine_model *none = NULL;
    json_t *problem = NULL;
    cr_expect_neq(engine_model_compile(bad, NULL, &none, &problem), 0);
    cr_expect_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(problem, "errors"), 0), "path")),
        "model.contacts[0].normal", "%s", json_dumps(problem, 0));
    json_decref(problem);
    json_decref(bad);
}

/* A contact that names one constraint twice (tangential ["knife", "knife"]: |F_t| was
 * sqrt(2) times the force, and slip came early) or its normal among the tangential ones
 * (the normal force counted as friction: slip at t = 0) is a 422 naming it. */
Test(contacts, a_constraint_named_twice_by_a_contact_is_refused)
{
    const char *bad[2] = {
        KNIFE_CONTACT_MODEL(", \"contacts\": [{\"name\": \"edge\", \"normal\": \"ground\", \"tangential\": "
                            "[\"knife\", \"knife\"], \"friction\": 0.4}]"),
        KNIFE_CONTACT_MODEL(", \"contacts\": [{\"name\": \"edge\", \"normal\": \"ground\", \"tangential\": "
                            "[\"ground\"], \"friction\": 0.4}]")};
    const char *path[2] = {"model.contacts[0].tangential[1]", "model.contacts[0].tangential[0]"};
    for (int i = 0; i < 2; i++) {
        json_t *js = support_loads(bad[i]);
        engine_model *none = NULL;
        json_t *problem = NULL;
        cr_expect_neq(engine_model_compile(js, NULL, &none, &problem), 0, "case %d compiled", i);
        cr_expect_str_eq(
            json_string_value(json_object_get(json_array_get(json_object_get(problem, "errors"), 0), "path")),
            path[i], "%s", json_dumps(problem, 0));
        json_decref(problem);
        json_decref(js);
        engine_model_release(none);
    }
}
