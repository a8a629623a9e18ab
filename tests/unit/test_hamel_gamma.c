/* test_hamel_gamma.c — which Hamel coefficients gamma^j_rl are listed as not identically
 * zero (hamel_structure): an entry made of rounding noise is left out, a real one is
 * kept however small against its terms, and tape_eval_err's running error bound holds.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "support.h"
#include "tape.h"

/* The gamma list of engine_hamel at q (JSON text) of m (caller frees the result). */
static json_t *gamma_at(engine_model *m, const char *q, json_t **res)
{
    json_t *req = support_loads(q), *problem = NULL;
    *res = NULL;
    int rc = engine_hamel(m, req, NULL, res, &problem);
    cr_assert_eq(rc, 0, "engine_hamel: %s", problem ? json_dumps(problem, 0) : "");
    json_decref(req);
    return json_object_get(json_array_get(json_object_get(*res, "points"), 0), "gamma");
}

/* The value of gamma^j_rl in a list, or NAN when it is not listed. */
static double listed(const json_t *g, const char *j, const char *r, const char *l)
{
    size_t i;
    json_t *e;
    json_array_foreach(g, i, e)
    {
        if (!strcmp(json_string_value(json_object_get(e, "j")), j) &&
            !strcmp(json_string_value(json_object_get(e, "r")), r) &&
            !strcmp(json_string_value(json_object_get(e, "l")), l))
            return json_number_value(json_object_get(e, "value"));
    }
    return NAN;
}

/* The hand-written Whipple bicycle (bench/models/whipple-hand.json): its front-contact
 * pitch constraint is a differentiated holonomic one, so dPsi of its row is a Hessian,
 * symmetric in exact arithmetic; its two halves are different expressions of ~100
 * operations with cancellation, and their rounding (1e-16..1e-22 after Phi) was listed
 * as 34 coefficients. SymPy's derivation (Lie brackets of Phi's columns, 30 digits, at
 * three random configurations) has 154 non-zero ones. */
Test(hamel_gamma, whipple_bicycle_lists_exactly_the_nonzero_coefficients)
{
    engine_init();
    json_t *doc = support_load_file("bench/models/whipple-hand.json");
    engine_model *m = support_compile_json(json_object_get(doc, "model"));
    json_t *res;
    json_t *g = gamma_at(m,
                         "{\"q\": {\"x\": 0, \"y\": 0, \"yaw\": 0, \"roll\": 0.05, \"pitch\": "
                         "-0.00047996129468583877, \"steer\": 0.1, \"rw\": 0, \"fw\": 0}}",
                         &res);
    cr_expect_eq(json_array_size(g), 154, "154 coefficients (SymPy), %zu listed", json_array_size(g));
    /* noise that was listed: the pitch row's Hessian halves */
    cr_expect(isnan(listed(g, "front_pitch", "roll_rate", "rear_lat")),
              "gamma^front_pitch_roll_rate,rear_lat");
    cr_expect(isnan(listed(g, "front_pitch", "steer_rate", "rear_wheel_rate")),
              "gamma^front_pitch_steer_rate,rear_wheel_rate");
    cr_expect(isnan(listed(g, "front_long", "front_lat", "front_long")),
              "gamma^front_long_front_lat,front_long");
    /* real ones stay, small ones too */
    cr_expect_float_eq(listed(g, "rear_long", "roll_rate", "rear_lat"), -0.0003612472869687127, 1e-15,
                       "gamma^rear_long_roll_rate,rear_lat");
    cr_expect_float_eq(listed(g, "rear_long", "steer_rate", "rear_lat"), -0.07265480833050916, 1e-14,
                       "gamma^rear_long_steer_rate,rear_lat");
    json_decref(res);
    engine_model_release(m);
    json_decref(doc);
}

/* A knife edge whose speed w = th' + (1 + a) y x' + x y' has dPsi_w,x/dy - dPsi_w,y/dx
 * = a: gamma^w_{v,knife} = -a and its mirror, exactly (Phi's columns v, knife have the
 * unit determinant in x, y). With a = 1e-7 the coefficient is 5e-8 of its terms
 * (1 + a and 1): real, and listed. */
Test(hamel_gamma, a_real_coefficient_small_against_its_terms_is_kept)
{
    engine_init();
    engine_model *m = support_compile_text(
        "{\"name\": \"knife-tilted-speed\", \"coordinates\": [\"x\", \"y\", \"th\"],"
        " \"parameters\": {\"a\": 1e-7},"
        " \"kinetic_energy\": \"(x'^2 + y'^2 + th'^2)/2\","
        " \"constraints\": [{\"name\": \"knife\", \"expr\": \"-sin(th)*x' + cos(th)*y'\"}],"
        " \"speeds\": [{\"name\": \"v\", \"expr\": \"cos(th)*x' + sin(th)*y'\"},"
        "              {\"name\": \"w\", \"expr\": \"th' + (1 + a)*y*x' + x*y'\"}]}");
    json_t *res;
    json_t *g = gamma_at(m, "{\"q\": {\"x\": 0.3, \"y\": -0.7, \"th\": 0.4}}", &res);
    double a = listed(g, "w", "v", "knife"), b = listed(g, "w", "knife", "v");
    cr_expect(!isnan(a) && !isnan(b), "gamma^w_{v,knife} and gamma^w_{knife,v} are listed: %s",
              json_dumps(g, JSON_COMPACT));
    cr_expect_float_eq(fabs(a), 1e-7, 1e-15, "|gamma^w_{v,knife}| = a: %g", a);
    cr_expect_float_eq(a, -b, 1e-20, "antisymmetric in r, l");
    json_decref(res);
    engine_model_release(m);
}

/* tape_eval_err: (x + 1e8) - 1e8 at x = 0.1 loses 8 digits; the bound covers the error
 * actually made and is not far above it. sin of it carries the error through cos. */
Test(hamel_gamma, running_error_bound_covers_cancellation)
{
    tape_ins ins[] = {
        {TAPE_INPUT, 0, 0, 0.0}, {TAPE_CONST, 0, 0, 1e8}, {TAPE_ADD, 0, 1, 0.0},
        {TAPE_SUB, 2, 1, 0.0},   {TAPE_SIN, 3, 0, 0.0},   {TAPE_MUL, 3, 3, 0.0},
    };
    int32_t outs[] = {3, 4, 5, 0};
    tape t = {.n_inputs = 1, .n_ins = 6, .ins = ins, .n_outputs = 4, .outputs = outs};
    double in[1] = {0.1}, work[6], err[6], out[4], oe[4];
    tape_eval_err(&t, in, work, err, out, oe);
    const double u = ldexp(1.0, -53);
    double made = fabs(out[0] - 0.1) / u;
    cr_assert_gt(made, 1e6, "the subtraction lost digits (%g u)", made);
    cr_expect_geq(oe[0], made, "bound %g u covers the error %g u", oe[0], made);
    cr_expect_leq(oe[0], 1e9, "and is of its order: %g u", oe[0]);
    cr_expect_geq(oe[1], fabs(sin(out[0]) - sin(0.1)) / u, "sin's bound covers its error");
    cr_expect_geq(oe[2], fabs(out[2] - 0.01) / u, "the square's bound covers its error");
    cr_expect_eq(oe[3], 0.0, "an input is exact");
}

/* Where a speed's row of Psi vanishes (the rolling disk lying flat, theta = pi: wd =
 * phi' sin(theta) is 1.2e-16 phi'), Psi is singular and the Hamel coefficients do not
 * exist: a 422, not coefficients of 8e15. A pivot judged against its own row instead
 * of the whole matrix (tried in review round 3 so that a constraint written times 1e-14
 * would not read as singular) made this row "regular"; the rows' scale is not known
 * from one point. */
Test(hamel_gamma, a_vanishing_row_of_psi_is_singular)
{
    engine_init();
    json_t *c = support_load_file("../shared/cases/greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    json_t *req = support_loads("{\"q\": {\"phi\": 0.3, \"theta\": 3.141592653589793, \"psi\": 0, \"x\": 0, "
                                "\"y\": 0}}"),
           *res = NULL, *problem = NULL;
    int rc = engine_hamel(m, req, NULL, &res, &problem);
    cr_expect_neq(rc, 0, "gamma at theta = pi: %s", res ? json_dumps(res, JSON_COMPACT) : "");
    const char *detail = json_string_value(json_object_get(problem, "detail"));
    cr_expect(detail && strstr(detail, "singular"), "the problem says Psi is singular: %s",
              detail ? detail : "");
    json_decref(res);
    json_decref(problem);
    json_decref(req);
    json_decref(c);
    engine_model_release(m);
}
