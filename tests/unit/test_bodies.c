/* test_bodies.c — the bodies model language (engine/bodies.h) and position-level
 * constraints (engine/holo.h, sim.c).
 *
 * Each model written with frames, points, bodies and particles must give the
 * trajectory of the same system with a hand-written T (tests/golden/bodies/, and the
 * rolling disk of ../shared/cases) to 1e-10; mixed hand-written and body T add up; the
 * benchmark bicycle (api/examples/whipple-bicycle.json) has the mass matrix of Meijaard
 * et al. (2007) on its roll and steer rates; a Cartesian pendulum with its rod as a
 * position-level constraint follows the polar pendulum, starts from a solved initial
 * y, and projects drift away; bad input is a 422 naming the JSON path.
 *
 * Paths are relative to the repository root (where the test runner starts).
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

static json_t *load_file(const char *path)
{
    json_error_t jerr;
    json_t *js = json_load_file(path, 0, &jerr);
    cr_assert_not_null(js, "%s does not load: line %d: %s", path, jerr.line, jerr.text);
    return js;
}

static engine_model *compile_js(const json_t *model)
{
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(model, NULL, &m, &problem);
    char *p = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
    cr_assert_eq(rc, 0, "compile failed (%d): %s", rc, p ? p : "");
    free(p);
    return m;
}

/* Runs the file's "simulation" (or `sim` when not NULL) on its model; returns the result. */
static json_t *run_file(const char *path, const json_t *sim)
{
    json_t *f = load_file(path);
    engine_model *m = compile_js(json_object_get(f, "model"));
    json_t *res = NULL, *problem = NULL;
    int rc = engine_simulate(m, sim ? sim : json_object_get(f, "simulation"), NULL, NULL, &res, &problem);
    char *p = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
    cr_assert_eq(rc, 0, "%s: simulation failed (%d): %s", path, rc, p ? p : "");
    free(p);
    engine_model_release(m);
    json_decref(f);
    return res;
}

/* max |a - b| over every series of trajectory.<group> present in both. */
static double max_diff(const json_t *ra, const json_t *rb, const char *group)
{
    const json_t *ga = json_object_get(json_object_get(ra, "trajectory"), group);
    const json_t *gb = json_object_get(json_object_get(rb, "trajectory"), group);
    cr_assert(json_object_size(ga) > 0, "trajectory.%s is empty", group);
    double mx = 0.0;
    const char *key;
    const json_t *sa;
    json_object_foreach((json_t *)ga, key, sa)
    {
        const json_t *sb = json_object_get(gb, key);
        cr_assert_not_null(sb, "trajectory.%s.%s missing in the reference", group, key);
        cr_assert_eq(json_array_size(sa), json_array_size(sb));
        for (size_t i = 0; i < json_array_size(sa); i++) {
            double d =
                fabs(json_number_value(json_array_get(sa, i)) - json_number_value(json_array_get(sb, i)));
            if (!(d <= mx))
                mx = d;
        }
    }
    return mx;
}

static void same_trajectory(const char *a, const char *b, const char *q_only_group)
{
    json_t *ra = run_file(a, NULL), *rb = run_file(b, NULL);
    double dq = max_diff(ra, rb, "q");
    cr_expect(dq <= 1e-10, "%s vs %s: q differ by %.3g", a, b, dq);
    if (!q_only_group) {
        double du = max_diff(ra, rb, "speeds");
        cr_expect(du <= 1e-10, "%s vs %s: speeds differ by %.3g", a, b, du);
    }
    json_decref(ra);
    json_decref(rb);
}

/* ---- bodies give the hand-written systems ---------------------------------- */

Test(bodies, rolling_disk_body_is_greenwood_5_3)
{
    json_t *c = load_file("../shared/cases/greenwood-5.3-rolling-disk.json");
    engine_model *m = compile_js(json_object_get(c, "model"));
    json_t *ref = NULL, *problem = NULL;
    cr_assert_eq(engine_simulate(m, json_object_get(c, "simulation"), NULL, NULL, &ref, &problem), 0);
    const char *files[] = {"tests/golden/bodies/rolling-disk-body.json",
                           "tests/golden/bodies/rolling-disk-primitive.json"};
    for (int f = 0; f < 2; f++) {
        json_t *r = run_file(files[f], json_object_get(c, "simulation"));
        double dq = max_diff(r, ref, "q"), du = max_diff(r, ref, "speeds");
        cr_expect(dq <= 1e-10 && du <= 1e-10, "%s: q differ by %.3g, speeds by %.3g from the case", files[f],
                  dq, du);
        double res = support_max_residual(r);
        cr_expect(res <= 1e-12, "%s: constraint residual %.3g", files[f], res);
        json_decref(r);
    }
    json_decref(ref);
    engine_model_release(m);
    json_decref(c);
}

Test(bodies, rolling_primitive_constraints)
{
    /* two no-slip constraints, no contact condition (it holds identically) */
    json_t *f = load_file("tests/golden/bodies/rolling-disk-primitive.json");
    engine_model *m = compile_js(json_object_get(f, "model"));
    cr_expect_eq(m->nc, 2, "constraints: %d", m->nc);
    cr_expect_eq(m->npos, 0);
    cr_expect_str_eq(m->cons[0].name, "disk_rolling");
    cr_expect_str_eq(m->cons[1].name, "disk_lateral");
    json_t *summary = engine_model_summary(m);
    cr_expect_str_eq(json_string_value(json_object_get(summary, "reduction")), "symbolic");
    json_decref(summary);
    engine_model_release(m);
    json_decref(f);
}

/* A torus (tube_radius): the primitive's constraints against the velocity of the
 * contact material point derived by hand (SymPy); its contact condition holds
 * identically with the center at r sin(theta) + rho. */
Test(bodies, rolling_torus_primitive)
{
    same_trajectory("tests/golden/bodies/rolling-torus-primitive.json",
                    "tests/golden/bodies/rolling-torus-hand.json", NULL);
    json_t *f = load_file("tests/golden/bodies/rolling-torus-primitive.json");
    engine_model *m = compile_js(json_object_get(f, "model"));
    cr_expect_eq(m->nc, 2);
    cr_expect_eq(m->npos, 0, "the contact condition holds identically");
    engine_model_release(m);
    json_decref(f);
}

Test(bodies, physical_pendulum)
{
    same_trajectory("tests/golden/bodies/physical-pendulum-body.json",
                    "tests/golden/bodies/physical-pendulum-hand.json", NULL);
}

Test(bodies, spherical_pendulum_particle)
{
    same_trajectory("tests/golden/bodies/spherical-pendulum-particle.json",
                    "tests/golden/bodies/spherical-pendulum-hand.json", NULL);
}

Test(bodies, hand_and_body_energies_add)
{
    same_trajectory("tests/golden/bodies/mixed-body.json", "tests/golden/bodies/mixed-hand.json", NULL);
}

/* The canonical form of a bodies model recompiles to the same id (the bodies keys are
 * kept as given; the generated constraints are not repeated). */
Test(bodies, canonical_recompiles)
{
    json_t *f = load_file("tests/golden/bodies/rolling-disk-primitive.json");
    engine_model *m = compile_js(json_object_get(f, "model"));
    json_t *canon = json_loads(engine_model_canonical(m), 0, NULL);
    cr_assert_not_null(canon);
    engine_model *m2 = compile_js(canon);
    cr_expect_str_eq(engine_model_id(m2), engine_model_id(m));
    cr_expect_eq(m2->nc, m->nc);
    engine_model_release(m);
    engine_model_release(m2);
    json_decref(canon);
    json_decref(f);
}

/* Formatting inside the bodies keys does not change the model id: expressions are
 * canonicalised and 0 is 0.0. */
Test(bodies, id_ignores_formatting)
{
    json_t *f = load_file("tests/golden/bodies/rolling-disk-primitive.json");
    json_t *model = json_object_get(f, "model");
    engine_model *m = compile_js(model);
    json_t *I =
        json_array_get(json_object_get(json_array_get(json_object_get(model, "bodies"), 0), "inertia"), 0);
    json_array_set_new(I, 0, json_string("m * r ^ 2 / 4"));
    json_array_set_new(I, 1, json_real(0.0));
    engine_model *m2 = compile_js(model);
    cr_expect_str_eq(engine_model_id(m2), engine_model_id(m));
    json_array_set_new(I, 0, json_string("m*r^2/5"));
    engine_model *m3 = compile_js(model);
    cr_expect_str_neq(engine_model_id(m3), engine_model_id(m));
    engine_model_release(m);
    engine_model_release(m2);
    engine_model_release(m3);
    json_decref(f);
}

/* ---- the benchmark bicycle ----------------------------------------------------- */

/* The mass matrix on the speeds at (t, q) by polarisation of T*(u) = E(u) - V. */
static void reduced_mass(engine_model *m, const double *q, double *M)
{
    int n = m->n, k = m->k;
    hamel_ws *w = hamel_ws_new(m, m->param_values);
    double *u = calloc(k, sizeof *u), *qd = calloc(n, sizeof *qd), *obs = calloc(1 + m->nc, sizeof *obs);
    double *T = calloc((size_t)k * k, sizeof *T);
    cr_assert(w && u && qd && obs && T);
    hamel_qdot(w, 0, q, u, qd);
    hamel_observe(w, 0, q, qd, obs);
    double V = obs[0];
    for (int r = 0; r < k; r++)
        for (int s = 0; s < k; s++) {
            memset(u, 0, k * sizeof *u);
            u[r] += 1;
            u[s] += 1;
            cr_assert_eq(hamel_qdot(w, 0, q, u, qd), 0);
            hamel_observe(w, 0, q, qd, obs);
            T[r * k + s] = obs[0] - V; /* 1/2 (e_r + e_s)^T M (e_r + e_s) */
        }
    for (int r = 0; r < k; r++)
        for (int s = 0; s < k; s++)
            M[r * k + s] = r == s ? T[r * k + r] / 2 : T[r * k + s] - T[r * k + r] / 4 - T[s * k + s] / 4;
    free(u);
    free(qd);
    free(obs);
    free(T);
    hamel_ws_free(w);
}

Test(bodies, whipple_bicycle_mass_matrix, .timeout = 120)
{
    json_t *f = load_file("api/examples/whipple-bicycle.json");
    engine_model *m = compile_js(json_object_get(f, "model"));
    cr_assert_eq(m->n, 8);
    cr_assert_eq(m->k, 3);
    cr_assert_eq(m->npos, 1, "the front contact condition");
    double q[8] = {0}, M[9];
    reduced_mass(m, q, M);
    /* Meijaard, Papadopoulos, Ruina, Schwab 2007, eq. (A 19): M on (roll, steer) */
    const double ref[4] = {80.81722, 2.31941332208709, 2.31941332208709, 0.29784188199686};
    const double got[4] = {M[0], M[1], M[3], M[4]};
    for (int i = 0; i < 4; i++)
        cr_expect(fabs(got[i] - ref[i]) <= 1e-10 * fabs(ref[i]) + 1e-12, "M[%d] = %.17g, paper %.17g", i,
                  got[i], ref[i]);
    cr_expect(fabs(M[2]) < 1e-12 && fabs(M[5]) < 1e-12, "roll/steer decouple from the wheel rate upright");
    engine_model_release(m);
    json_decref(f);
}

/* ---- position-level constraints ---------------------------------------------- */

Test(holonomic, cartesian_pendulum_follows_polar)
{
    json_t *rx = run_file("tests/golden/bodies/pendulum-xy.json", NULL);
    json_t *rp = run_file("tests/golden/bodies/pendulum-polar.json", NULL);
    const json_t *x = json_object_get(json_object_get(json_object_get(rx, "trajectory"), "q"), "x");
    const json_t *y = json_object_get(json_object_get(json_object_get(rx, "trajectory"), "q"), "y");
    const json_t *th = json_object_get(json_object_get(json_object_get(rp, "trajectory"), "q"), "th");
    cr_assert_eq(json_array_size(x), json_array_size(th));
    for (size_t i = 0; i < json_array_size(th); i++) {
        double t = json_number_value(json_array_get(th, i));
        double dx = fabs(json_number_value(json_array_get(x, i)) - sin(t));
        double dy = fabs(json_number_value(json_array_get(y, i)) + cos(t));
        cr_expect(dx <= 1e-10 && dy <= 1e-10, "sample %zu: x, y off the polar pendulum by %.3g, %.3g", i, dx,
                  dy);
    }
    const json_t *pos =
        json_object_get(json_object_get(json_object_get(rx, "checks"), "constraints"), "position");
    cr_assert_not_null(pos, "checks.constraints.position");
    cr_expect(json_number_value(json_object_get(pos, "max_abs_residual")) <= 1e-12);
    const json_t *init = json_object_get(pos, "initial");
    cr_expect_str_eq(json_string_value(json_array_get(json_object_get(init, "solved_for"), 0)), "y");
    cr_expect(json_number_value(json_object_get(json_object_get(init, "guess"), "y")) == -0.5);
    cr_expect(fabs(json_number_value(json_array_get(y, 0)) + 0.8) <= 1e-15, "y0 solved to -0.8");
    json_decref(rx);
    json_decref(rp);
}

static json_t *pendulum_sim(const char *method, double rtol, int projection)
{
    json_t *f = load_file("tests/golden/bodies/pendulum-xy.json");
    json_t *sim = json_deep_copy(json_object_get(f, "simulation"));
    json_object_set_new(sim, "integrator",
                        json_pack("{s:s, s:f, s:f}", "method", method, "rtol", rtol, "atol", rtol * 1e-2));
    json_object_set_new(sim, "output", json_pack("{s:i}", "samples", 31));
    json_object_set_new(sim, "projection", json_boolean(projection));
    json_t *r = run_file("tests/golden/bodies/pendulum-xy.json", sim);
    json_decref(sim);
    json_decref(f);
    return r;
}

static double final_rod(const json_t *r)
{
    const json_t *q = json_object_get(json_object_get(r, "trajectory"), "q");
    const json_t *x = json_object_get(q, "x"), *y = json_object_get(q, "y");
    double xv = json_number_value(json_array_get(x, json_array_size(x) - 1));
    double yv = json_number_value(json_array_get(y, json_array_size(y) - 1));
    return fabs(xv * xv + yv * yv - 1.0);
}

Test(holonomic, projection_removes_drift)
{
    json_t *free_run = pendulum_sim("rkf45", 1e-5, 0), *projected = pendulum_sim("rkf45", 1e-5, 1);
    const json_t *pf =
        json_object_get(json_object_get(json_object_get(free_run, "checks"), "constraints"), "position");
    const json_t *pp =
        json_object_get(json_object_get(json_object_get(projected, "checks"), "constraints"), "position");
    cr_expect(final_rod(free_run) > 1e-7, "a loose integration drifts (%.3g)", final_rod(free_run));
    cr_expect_eq(json_integer_value(json_object_get(pf, "projections")), 0);
    cr_expect(json_integer_value(json_object_get(pp, "projections")) > 0);
    cr_expect(final_rod(projected) <= 1e-9, "projected back: %.3g", final_rod(projected));
    cr_expect(json_number_value(json_object_get(pp, "max_abs_residual")) <
                  json_number_value(json_object_get(pf, "max_abs_residual")) / 10,
              "drift between projections is smaller");
    json_decref(free_run);
    json_decref(projected);
}

/* ---- bad input -------------------------------------------------------------- */

/* Compiles the pendulum body model with one member replaced (a JSON text at a
 * dotted path of the model), expecting a 422 whose first error is at `path`. */
static void body_fails(const char *member, const char *value, const char *path, const char *reason)
{
    json_t *f = load_file("tests/golden/bodies/physical-pendulum-body.json");
    json_t *model = json_object_get(f, "model");
    json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
    cr_assert_not_null(v, "test value %s", value);
    json_object_set_new(model, member, v);
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(model, NULL, &m, &problem);
    cr_assert_lt(rc, 0, "compiled with %s = %s", member, value);
    char *dump = json_dumps(problem, JSON_COMPACT);
    cr_expect(rc != HAMEL_OK && rc != HAMEL_E_INTERNAL, "%s", dump);
    json_t *e0 = json_array_get(json_object_get(problem, "errors"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(e0, "path")), path, "%s", dump);
    const char *why = json_string_value(json_object_get(e0, "reason"));
    cr_expect(why && strstr(why, reason), "reason lacks \"%s\": %s", reason, dump);
    free(dump);
    json_decref(problem);
    json_decref(f);
}

Test(bodies, bad_input_names_the_path)
{
    body_fails("bodies",
               "[{\"name\": \"b\", \"mass_center\": \"G\", \"frame\": \"A\", \"inertia\": "
               "[[1,0,0],[0,1,0],[0,0,1]]}]",
               "model.bodies[0].mass", "required");
    body_fails("bodies",
               "[{\"mass\": \"-m\", \"mass_center\": \"G\", \"frame\": \"A\", \"inertia\": "
               "[[1,0,0],[0,1,0],[0,0,1]]}]",
               "model.bodies[0].mass", "positive");
    body_fails(
        "bodies",
        "[{\"mass\": 1, \"mass_center\": \"G\", \"frame\": \"A\", \"inertia\": [[1,0.5,0],[0,1,0],[0,0,1]]}]",
        "model.bodies[0].inertia", "symmetric");
    body_fails(
        "bodies",
        "[{\"mass\": 1, \"mass_center\": \"G\", \"frame\": \"A\", \"inertia\": [[1,0,0],[0,-2,0],[0,0,1]]}]",
        "model.bodies[0].inertia", "positive");
    body_fails(
        "bodies",
        "[{\"mass\": 1, \"mass_center\": \"G\", \"frame\": \"Q\", \"inertia\": [[1,0,0],[0,1,0],[0,0,1]]}]",
        "model.bodies[0].frame", "unknown frame 'Q'");
    body_fails(
        "bodies",
        "[{\"mass\": 1, \"mass_center\": \"Z\", \"frame\": \"A\", \"inertia\": [[1,0,0],[0,1,0],[0,0,1]]}]",
        "model.bodies[0].mass_center", "unknown point 'Z'");
    body_fails("frames", "[{\"name\": \"A\", \"rotations\": [{\"axis\": \"w\", \"angle\": \"th\"}]}]",
               "model.frames[0].rotations[0].axis", "not an axis");
    body_fails("frames", "[{\"name\": \"A\", \"rotations\": [{\"axis\": [1, 1, 0], \"angle\": \"th\"}]}]",
               "model.frames[0].rotations[0].axis", "unit vector");
    body_fails(
        "frames",
        "[{\"name\": \"A\", \"parent\": \"B\", \"rotations\": [{\"axis\": \"y\", \"angle\": \"th\"}]}]",
        "model.frames[0].parent", "unknown frame 'B'");
    body_fails("frames", "[{\"name\": \"A\", \"rotations\": [{\"axis\": \"y\", \"angle\": \"th'\"}]}]",
               "model.frames[0].rotations[0].angle", "velocities");
    body_fails("gravity", "{\"frame\": \"A\", \"vector\": [0, 0, \"-g\"]}", "model.gravity", "constant in N");
    body_fails("position_constraints", "[{\"name\": \"h\", \"expr\": \"th' - 1\"}]",
               "model.position_constraints[0].expr", "must not contain velocities");
    body_fails("position_constraints", "[{\"name\": \"h\", \"expr\": \"th - 1\", \"dependent\": \"x\"}]",
               "model.position_constraints[0].dependent", "not a coordinate");
}

Test(holonomic, newton_failure_names_guess_and_residual)
{
    json_t *f = load_file("tests/golden/bodies/pendulum-xy.json");
    json_t *model = json_object_get(f, "model");
    /* x^2 + y^2 + L^2 = 0 has no real solution */
    json_object_set_new(model, "position_constraints",
                        json_pack("[{s:s, s:s}]", "name", "rod", "expr", "x^2 + y^2 + L^2"));
    engine_model *m = compile_js(model);
    json_t *res = NULL, *problem = NULL;
    int rc = engine_simulate(m, json_object_get(f, "simulation"), NULL, NULL, &res, &problem);
    cr_assert_lt(rc, 0);
    char *dump = json_dumps(problem, JSON_COMPACT);
    cr_expect_str_eq(hamel_error_slug(rc), "invalid-initial-state", "%s", dump);
    json_t *e0 = json_array_get(json_object_get(problem, "errors"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(e0, "path")), "initial.q.y", "%s", dump);
    const char *why = json_string_value(json_object_get(e0, "reason"));
    cr_expect(why && strstr(why, "y = -0.5") && strstr(why, "max |f|") && strstr(why, "rod"), "%s", dump);
    free(dump);
    json_decref(problem);
    engine_model_release(m);
    json_decref(f);
}
