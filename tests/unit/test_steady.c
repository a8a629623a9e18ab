/* test_steady.c — steady motions (engine_steady, POST /v1/steady): Newton on the exact
 * Jacobian and pseudo-arclength continuation. The benchmark bicycle's upright branch,
 * followed in thetaR' = -v / rR, changes stability where the paper's weave and capsize
 * speeds are (Meijaard et al. 2007: 4.29238253634111 and 6.02426201538837 m/s, to 1e-9);
 * the rolling disk's steady circular motions are the closed form of Greenwood (5.194)
 * (thd' = 0: wd^2 / (4 tan theta) - 3/2 wd Omega - g/r cos theta = 0) at every point of a
 * branch in Omega; its upright branch becomes stable at Omega^2 = g / (3 r); a count of
 * unknowns the equations cannot determine is a 422 saying how many. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "support.h"

#define BIKE_FILE "api/examples/whipple-bicycle.json"

static int has_error_at(const json_t *p, const char *path)
{
    const json_t *errs = json_object_get(p, "errors");
    for (size_t i = 0; i < json_array_size(errs); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(errs, i), "path")), path))
            return 1;
    return 0;
}

Test(steady, bicycle_upright_branch_weave_and_capsize)
{
    json_t *doc = support_load_file(BIKE_FILE);
    cr_assert_not_null(doc, "cannot load %s", BIKE_FILE);
    engine_model *m = support_compile_json(json_object_get(doc, "model"));
    double rR = 0.3;
    json_t *req = json_pack("{s:{s:f, s:O, s:{s:f, s:f, s:f}}, s:[s, s], s:{s:s, s:f, s:i}}", "state", "t",
                            0.0, "q", json_object_get(json_object_get(doc, "linearize"), "q"), "speeds",
                            "phid", 0.0, "deltad", 0.0, "thetaRd", -3.0 / rR, "unknowns", "phi", "delta",
                            "continuation", "vary", "thetaRd", "to", -7.0 / rR, "steps", 20);
    json_t *res = support_steady(m, req, 0, NULL);
    const json_t *ch = json_object_get(res, "stability_changes");
    cr_assert_eq(json_array_size(ch), 2, "two changes: %s", json_dumps(ch, 0));
    const char *kinds[2] = {"complex", "real"};
    const double v[2] = {4.29238253634111, 6.02426201538837};
    for (int i = 0; i < 2; i++) {
        const json_t *c = json_array_get(ch, (size_t)i);
        double speed = -rR * json_number_value(json_object_get(c, "value"));
        cr_assert(fabs(speed - v[i]) < 1e-9, "%s change at v = %.15g, paper %.15g", kinds[i], speed, v[i]);
        cr_assert_str_eq(json_string_value(json_object_get(c, "kind")), kinds[i]);
    }
    /* the branch: ends exactly at `to`, stable between weave and capsize only */
    const json_t *pts = json_object_get(res, "points");
    cr_assert_geq(json_array_size(pts), 21);
    const json_t *last = json_array_get(pts, json_array_size(pts) - 1);
    cr_assert_eq(json_number_value(json_object_get(json_object_get(last, "values"), "thetaRd")), -7.0 / rR,
                 "the last point is at `to` exactly");
    for (size_t i = 0; i < json_array_size(pts); i++) {
        const json_t *pt = json_array_get(pts, i);
        double speed = -rR * json_number_value(json_object_get(json_object_get(pt, "values"), "thetaRd"));
        int stable = json_is_true(json_object_get(pt, "stable"));
        cr_assert_eq(stable, speed > v[0] && speed < v[1], "v = %g: stable %d", speed, stable);
        cr_assert_eq(json_array_size(json_object_get(pt, "eigenvalues")), 4,
                     "roll, steer and their rates: the rest does not enter");
    }
    json_decref(res);
    engine_model_release(m);
    json_decref(doc);
}

Test(steady, rolling_disk_circles_are_the_closed_form)
{
    json_t *cs = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(cs, "model"));
    const double g = 9.81, r = 0.5, th = 1.2;
    json_t *req = json_pack("{s:{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}, s:[s], s:{s:s, s:f, s:i}}",
                            "state", "q", "phi", 0.0, "theta", th, "psi", 0.0, "x", 0.0, "y", 0.0, "speeds",
                            "wd", 0.3, "thd", 0.0, "Omega", 4.0, "unknowns", "wd", "continuation", "vary",
                            "Omega", "to", 8.0, "steps", 8);
    json_t *res = support_steady(m, req, 0, NULL);
    const json_t *pts = json_object_get(res, "points");
    cr_assert_geq(json_array_size(pts), 9);
    for (size_t i = 0; i < json_array_size(pts); i++) {
        const json_t *val = json_object_get(json_array_get(pts, i), "values");
        double W = json_number_value(json_object_get(val, "Omega")),
               wd = json_number_value(json_object_get(val, "wd"));
        /* the root of a wd^2 + b wd + c = 0 the branch follows (the guess picks it) */
        double a = 0.25 / tan(th), b = -1.5 * W, c = -g / r * cos(th);
        double root = (-b - sqrt(b * b - 4 * a * c)) / (2 * a);
        cr_assert(fabs(wd - root) <= 1e-12 * fmax(1.0, fabs(root)), "Omega = %g: wd %.17g, closed form %.17g",
                  W, wd, root);
    }
    cr_assert_eq(json_array_size(json_object_get(res, "stability_changes")), 0, "a circle stays stable");
    json_decref(res);

    /* the upright disk: stable for Omega^2 > g / (3 r) (a real pair meets at zero) */
    req = json_pack("{s:{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}, s:[s], s:{s:s, s:f, s:i}}", "state",
                    "q", "phi", 0.0, "theta", M_PI / 2, "psi", 0.0, "x", 0.0, "y", 0.0, "speeds", "wd", 0.0,
                    "thd", 0.0, "Omega", 1.0, "unknowns", "thd", "continuation", "vary", "Omega", "to", 4.0,
                    "steps", 6);
    res = support_steady(m, req, 0, NULL);
    const json_t *ch = json_object_get(res, "stability_changes");
    cr_assert_eq(json_array_size(ch), 1, "%s", json_dumps(ch, 0));
    double crit = sqrt(g / (3 * r)), at = json_number_value(json_object_get(json_array_get(ch, 0), "value"));
    cr_assert(fabs(at - crit) <= 1e-10 * crit, "upright disk: stable from %.17g, closed form %.17g", at,
              crit);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(ch, 0), "kind")), "real");
    json_decref(res);

    /* too many unknowns: the speed derivatives depend on wd and Omega only through thd' */
    json_t *p = NULL;
    req = json_pack("{s:{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}, s:[s, s]}", "state", "q", "phi",
                    0.0, "theta", th, "psi", 0.0, "x", 0.0, "y", 0.0, "speeds", "wd", 0.3, "thd", 0.0,
                    "Omega", 4.0, "unknowns", "wd", "Omega");
    res = support_steady(m, req, HAMEL_E_BAD_REQUEST, &p);
    cr_assert(has_error_at(p, "unknowns"), "names unknowns");
    const char *why =
        json_string_value(json_object_get(json_array_get(json_object_get(p, "errors"), 0), "reason"));
    cr_assert(why && strstr(why, "only 1 of these 2"), "says how many: %s", why ? why : "");
    json_decref(p);
    /* a bad name */
    req = json_pack("{s:{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}, s:[s]}", "state", "q", "phi", 0.0,
                    "theta", th, "psi", 0.0, "x", 0.0, "y", 0.0, "speeds", "wd", 0.3, "thd", 0.0, "Omega",
                    4.0, "unknowns", "nope");
    res = support_steady(m, req, HAMEL_E_BAD_REQUEST, &p);
    cr_assert(has_error_at(p, "unknowns[0]"));
    json_decref(p);
    engine_model_release(m);
    json_decref(cs);
}

/* A branch on which the unknown changes much faster than `vary` (the disk's spin
 * Omega on circles of fixed tilt and precession as its radius shrinks: dOmega/dr of
 * -7 to -50) reaches `to` in about `steps` steps: a step's arclength counts every
 * variable, so the cap |to - from| / steps moved r by a fraction of that and the branch
 * ran out of its 4 x steps + 20 points (limit-exceeded even for to = 0.49 from 0.5). */
Test(steady, a_steep_branch_reaches_to_within_its_steps)
{
    json_t *cs = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(cs, "model"));
    const double g = 9.81, th = 1.2, wd = -1.5;
    const double tos[] = {0.49, 0.2, 0.05};
    for (int c = 0; c < 3; c++) {
        json_t *req = json_pack(
            "{s:{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}, s:[s], s:{s:s, s:f, s:i}}", "state", "q",
            "phi", 0.0, "theta", th, "psi", 0.0, "x", 0.0, "y", 0.0, "speeds", "wd", wd, "thd", 0.0, "Omega",
            4.0, "unknowns", "Omega", "continuation", "vary", "r", "to", tos[c], "steps", 10);
        json_t *res = support_steady(m, req, 0, NULL);
        const json_t *pts = json_object_get(res, "points");
        cr_assert_leq(json_array_size(pts), 4 * 10 + 20);
        double last_r = 0.0;
        for (size_t i = 0; i < json_array_size(pts); i++) {
            const json_t *val = json_object_get(json_array_get(pts, i), "values");
            double r = json_number_value(json_object_get(val, "r")),
                   W = json_number_value(json_object_get(val, "Omega"));
            /* a wd^2 + b wd + c = 0 with a = 1/(4 tan th), b = -3/2 Omega, c = -g/r cos th */
            double ref = (0.25 / tan(th) * wd * wd - g / r * cos(th)) / (1.5 * wd);
            cr_assert(fabs(W - ref) <= 1e-12 * fabs(ref), "r = %g: Omega %.17g, closed form %.17g", r, W,
                      ref);
            last_r = r;
        }
        cr_assert_eq(last_r, tos[c], "the branch ends at to exactly");
        json_decref(res);
    }
    engine_model_release(m);
    json_decref(cs);
}

/* The request of the rolling disk's upright branch (theta = pi/2, rolling straight):
 * from spin Omega0, solving for `unknown`, Omega to `to` in `steps` steps. */
static json_t *upright_disk_branch(double omega0, const char *unknown, double to, int steps)
{
    return json_pack("{s:{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}, s:[s], s:{s:s, s:f, s:i}}",
                     "state", "q", "phi", 0.0, "theta", M_PI / 2, "psi", 0.0, "x", 0.0, "y", 0.0, "speeds",
                     "wd", 0.0, "thd", 0.0, "Omega", omega0, "unknowns", unknown, "continuation", "vary",
                     "Omega", "to", to, "steps", steps);
}

/* A branch that starts exactly at a stability change: the upright disk from Omega =
 * sqrt(g / 3 r), where the crossing pair and the branch's persistent zero meet in a
 * triple zero that the eigenvalue solver splits into three of about 1e-7. The persistent
 * zeros were counted as the fewest near zero at any point, so that point made them none,
 * and the change was located on a persistent zero: at 2.5573439529, 6e-7 from the
 * critical 2.5573423705. The count is now the one most points of the branch have (with
 * only two points, a tie, the fewer as before). */
Test(steady, a_branch_from_its_critical_point_locates_the_change_there)
{
    json_t *cs = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(cs, "model"));
    const double g = 9.81, r = 0.5, crit = sqrt(g / (3 * r));
    json_t *req = upright_disk_branch(crit, "wd", 5.0, 10);
    json_t *res = support_steady(m, req, 0, NULL);
    const json_t *ch = json_object_get(res, "stability_changes");
    cr_assert_leq(json_array_size(ch), 1, "%s", json_dumps(ch, 0));
    for (size_t i = 0; i < json_array_size(ch); i++) {
        double at = json_number_value(json_object_get(json_array_get(ch, i), "value"));
        cr_assert(fabs(at - crit) <= 1e-10 * crit, "a change at %.17g: the critical speed is %.17g", at,
                  crit);
    }
    const json_t *pts = json_object_get(res, "points");
    for (size_t i = 1; i < json_array_size(pts); i++)
        cr_assert(json_is_true(json_object_get(json_array_get(pts, i), "stable")), "point %zu: stable", i);
    cr_assert_eq(json_integer_value(json_object_get(res, "persistent_zero_eigenvalues")), 1);
    json_decref(res);
    engine_model_release(m);
    json_decref(cs);
}

/* The upright disk's branch from spin 0 (the web page's preset: theta solved for, Omega
 * from 0 to 6 in 60 steps): one change, where it stands up at sqrt(g/(3r)). At spin 0 the
 * reduced spectrum is the real pair +-sqrt(4g/(5r)) alone, every other point has a zero
 * beside it; a persistent-zero count taken from most points then dropped one of the pair
 * at spin 0 and reported "loses stability" at 0.0376 as well. */
Test(steady, a_point_with_fewer_zeros_than_the_branch_keeps_its_eigenvalues)
{
    json_t *cs = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(cs, "model"));
    const double g = 9.81, r = 0.5, crit = sqrt(g / (3 * r));
    json_t *req = upright_disk_branch(0.0, "theta", 6.0, 60);
    json_t *res = support_steady(m, req, 0, NULL);
    const json_t *ch = json_object_get(res, "stability_changes");
    cr_assert_eq(json_array_size(ch), 1, "one change: %s", json_dumps(ch, 0));
    double at = json_number_value(json_object_get(json_array_get(ch, 0), "value"));
    cr_assert(fabs(at - crit) <= 1e-9 * crit, "the change at %.17g: the critical speed is %.17g", at, crit);
    const json_t *p0 = json_array_get(json_object_get(res, "points"), 0);
    cr_assert(json_is_false(json_object_get(p0, "stable")), "spin 0: unstable (the real pair +-3.96)");
    json_decref(res);
    engine_model_release(m);
    json_decref(cs);
}

/* Two stability changes between two points of the branch (the bicycle from 3 to 7 m/s in
 * one step: weave and capsize): each is found and located. The number of growing modes
 * went from 2 (the weave pair) to 1 (capsize), and only the weave was reported. */
Test(steady, two_changes_between_two_points_are_both_found)
{
    json_t *doc = support_load_file(BIKE_FILE);
    engine_model *m = support_compile_json(json_object_get(doc, "model"));
    const double rR = 0.3, v[2] = {4.29238253634111, 6.02426201538837};
    const char *kinds[2] = {"complex", "real"}, *dirs[2] = {"gains stability", "loses stability"};
    for (int steps = 1; steps <= 2; steps++) {
        json_t *req = json_pack("{s:{s:f, s:O, s:{s:f, s:f, s:f}}, s:[s, s], s:{s:s, s:f, s:i}}", "state",
                                "t", 0.0, "q", json_object_get(json_object_get(doc, "linearize"), "q"),
                                "speeds", "phid", 0.0, "deltad", 0.0, "thetaRd", -3.0 / rR, "unknowns", "phi",
                                "delta", "continuation", "vary", "thetaRd", "to", -7.0 / rR, "steps", steps);
        json_t *res = support_steady(m, req, 0, NULL);
        const json_t *ch = json_object_get(res, "stability_changes");
        cr_assert_eq(json_array_size(ch), 2, "steps %d: two changes: %s", steps, json_dumps(ch, 0));
        for (int i = 0; i < 2; i++) {
            const json_t *c = json_array_get(ch, (size_t)i);
            double speed = -rR * json_number_value(json_object_get(c, "value"));
            cr_assert(fabs(speed - v[i]) < 1e-9, "steps %d: %s change at v = %.15g, paper %.15g", steps,
                      kinds[i], speed, v[i]);
            cr_assert_str_eq(json_string_value(json_object_get(c, "kind")), kinds[i]);
            cr_assert_str_eq(json_string_value(json_object_get(c, "direction")), dirs[i]);
        }
        json_decref(res);
    }
    engine_model_release(m);
    json_decref(doc);
}

/* A branch through a branch point: the upright disk's spin Omega from -5 to 5 in 20 steps
 * lands on Omega = 0, where the upright disk pivoting at any wd is steady too (a second
 * branch crosses). The tangent there (a null vector of a Jacobian of rank 0) was any
 * direction, the branch turned onto the other one and never came back ("more steps");
 * it now goes straight on, and both changes at |Omega| = sqrt(g / 3 r) are found. */
Test(steady, a_branch_goes_straight_through_a_branch_point)
{
    json_t *cs = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(cs, "model"));
    const double g = 9.81, r = 0.5, crit = sqrt(g / (3 * r));
    json_t *req = json_pack("{s:{s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}, s:[s], s:{s:s, s:f, s:i}}",
                            "state", "q", "phi", 0.0, "theta", M_PI / 2, "psi", 0.0, "x", 0.0, "y", 0.0,
                            "speeds", "wd", 0.0, "thd", 0.0, "Omega", -5.0, "unknowns", "wd", "continuation",
                            "vary", "Omega", "to", 5.0, "steps", 20);
    json_t *res = support_steady(m, req, 0, NULL);
    const json_t *ch = json_object_get(res, "stability_changes");
    cr_assert_eq(json_array_size(ch), 2, "%s", json_dumps(ch, 0));
    for (size_t i = 0; i < 2; i++) {
        double at = json_number_value(json_object_get(json_array_get(ch, i), "value"));
        double want = i == 0 ? -crit : crit;
        cr_assert(fabs(at - want) <= 1e-10 * crit, "a change at %.17g, closed form %.17g", at, want);
    }
    const json_t *pts = json_object_get(res, "points");
    for (size_t i = 0; i < json_array_size(pts); i++) {
        double wd =
            json_number_value(json_object_get(json_object_get(json_array_get(pts, i), "values"), "wd"));
        cr_assert(fabs(wd) < 1e-12, "point %zu: wd = %g, off the upright branch", i, wd);
    }
    json_decref(res);
    engine_model_release(m);
    json_decref(cs);
}

/* A guess exactly at a stability change of the real kind (the bicycle at its capsize
 * speed, where a real eigenvalue is zero, so du'/d(phi, delta) is singular) is refused
 * naming unknowns, and the reason says that a stability change lowers the rank too
 * (it said only "give 1 unknowns, or a guess where they enter" of two unknowns that do
 * enter everywhere else). */
Test(steady, a_guess_at_a_real_stability_change_says_so)
{
    json_t *doc = support_load_file(BIKE_FILE);
    engine_model *m = support_compile_json(json_object_get(doc, "model"));
    const double rR = 0.3;
    json_t *p = NULL;
    json_t *req = json_pack("{s:{s:f, s:O, s:{s:f, s:f, s:f}}, s:[s, s], s:{s:s, s:f, s:i}}", "state", "t",
                            0.0, "q", json_object_get(json_object_get(doc, "linearize"), "q"), "speeds",
                            "phid", 0.0, "deltad", 0.0, "thetaRd", -6.02426201538837 / rR, "unknowns", "phi",
                            "delta", "continuation", "vary", "thetaRd", "to", -8.0 / rR, "steps", 4);
    json_t *res = support_steady(m, req, HAMEL_E_BAD_REQUEST, &p);
    cr_assert(has_error_at(p, "unknowns"), "names unknowns");
    const char *why =
        json_string_value(json_object_get(json_array_get(json_object_get(p, "errors"), 0), "reason"));
    cr_assert(why && strstr(why, "stability change"), "says a stability change lowers the rank: %s",
              why ? why : "");
    json_decref(p);
    json_decref(res);
    engine_model_release(m);
    json_decref(doc);
}
