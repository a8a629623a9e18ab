/* test_events.c — events of the integration driver (integ.h): crossing times against
 * closed forms, direction filtering, record against stop, and the last sample at a stop.
 * Real GSL throughout. */
#include <criterion/criterion.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_sf_ellint.h>
#include <math.h>
#include <string.h>

#include "engine.h"
#include "error.h"
#include "integ.h"
#include "support.h"

#define HITS_MAX 64

/* What the event functions saw: every hit, and which events stop the run. */
typedef struct hits {
    int n;
    int index[HITS_MAX];
    double t[HITS_MAX];
    double y[HITS_MAX][2];
    int stop[4]; /* stop[i]: event i ends the run */
    int samples; /* samples delivered */
    double t_last, y_last[2];
} hits;

static int hit_record(int index, double t, const double *y, void *ctx)
{
    hits *h = ctx;
    cr_assert_lt(h->n, HITS_MAX, "too many hits");
    h->index[h->n] = index;
    h->t[h->n] = t;
    memcpy(h->y[h->n], y, 2 * sizeof *y);
    h->n++;
    return h->stop[index] ? INTEG_EVENT_STOP : 0;
}

static int sample(double t, const double *y, void *ctx)
{
    hits *h = ctx;
    h->samples++;
    h->t_last = t;
    memcpy(h->y_last, y, 2 * sizeof *y);
    return 0;
}

static void setup(void) { gsl_set_error_handler_off(); }

TestSuite(events, .init = setup, .timeout = 60);

/* x'' = -x as y = (x, v): x = cos t from (1, 0). */
static int osc_rhs(double t, const double *y, double *dydt, void *params)
{
    (void)t;
    (void)params;
    dydt[0] = y[1];
    dydt[1] = -y[0];
    return GSL_SUCCESS;
}

/* g0 = x (zero at pi/2 + j pi), g1 = v (zero at j pi). */
static int osc_events(double t, const double *y, double *g, void *ctx)
{
    (void)t;
    (void)ctx;
    g[0] = y[0];
    g[1] = y[1];
    return 0;
}

/* g0 = x alone. */
static int osc_x_event(double t, const double *y, double *g, void *ctx)
{
    (void)t;
    (void)ctx;
    g[0] = y[0];
    return 0;
}

/* A particle falling from height 10 under g = 9.81 (y = (height, velocity)). */
static int fall_rhs(double t, const double *y, double *dydt, void *params)
{
    (void)t;
    (void)params;
    dydt[0] = y[1];
    dydt[1] = -9.81;
    return GSL_SUCCESS;
}

static int fall_events(double t, const double *y, double *g, void *ctx)
{
    (void)t;
    (void)ctx;
    g[0] = y[0];
    return 0;
}

static integ_options event_opts(const char *method, double rtol, int n, const int *dir, integ_event_fn ev,
                                hits *h)
{
    integ_options o = integ_default_options;
    o.method = method;
    o.rtol = rtol;
    o.atol = rtol * 1e-2;
    o.n_events = n;
    o.event_dir = dir;
    o.event = ev;
    o.event_hit = hit_record;
    o.event_ctx = h;
    return o;
}

static void expect_rel(const char *what, double got, double want, double rel)
{
    cr_expect(fabs(got - want) <= rel * fabs(want), "%s: %.17g, expected %.17g (relative error %.3g > %g)",
              what, got, want, fabs(got - want) / fabs(want), rel);
}

/* The falling particle stops at sqrt(2 h / g); the last sample is there, at height 0. */
Test(events, falling_particle_stops_at_the_closed_form_time)
{
    const char *methods[] = {"rk8pd", "rkf45", "rkck", "msadams", "bsimp"};
    for (size_t m = 0; m < sizeof methods / sizeof *methods; m++) {
        hits h = {.stop = {1}};
        integ_system sys = {2, fall_rhs, NULL};
        integ_options o = event_opts(methods[m], 1e-12, 1, NULL, fall_events, &h);
        double times[] = {0, 0.5, 1, 1.5, 2, 5}, y0[2] = {10, 0};
        integ_stats st;
        int rc = integ_run(&sys, &o, 0, y0, times, 6, sample, &h, &st);
        cr_assert_eq(rc, HAMEL_OK, "%s: code %d: %s", methods[m], rc, st.reason);
        const double want = sqrt(2 * 10 / 9.81);
        cr_assert_eq(h.n, 1, "%s: %d hits", methods[m], h.n);
        expect_rel(methods[m], h.t[0], want, 1e-9);
        cr_expect_eq(st.stopped_by, 1, "%s: stopped_by %d", methods[m], st.stopped_by);
        cr_expect_eq(h.samples, 4, "%s: samples 0, 0.5, 1 and the stop (%d)", methods[m], h.samples);
        cr_expect_eq(h.t_last, h.t[0], "%s: the last sample is at the event", methods[m]);
        cr_expect(fabs(h.y_last[0]) < 1e-12, "%s: height %g at the stop", methods[m], h.y_last[0]);
        cr_expect(st.event_rhs_evals > 0 && st.event_rhs_evals <= st.rhs_evals, "%s: %ld of %ld", methods[m],
                  st.event_rhs_evals, st.rhs_evals);
    }
}

/* x = cos t: the stop at the first zero of x is pi/2 to 1e-9 relative at rtol 1e-12
 * (the measured error is near 1e-15), far better than the step (about 0.3). */
Test(events, oscillator_stop_time_against_the_closed_form)
{
    hits h = {.stop = {1, 0}};
    integ_system sys = {2, osc_rhs, NULL};
    integ_options o = event_opts("rk8pd", 1e-12, 1, NULL, osc_x_event, &h);
    double times[] = {0, 10}, y0[2] = {1, 0};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 2, sample, &h, &st);
    cr_assert_eq(rc, HAMEL_OK, "code %d: %s", rc, st.reason);
    cr_assert_eq(h.n, 1);
    expect_rel("t", h.t[0], M_PI / 2, 1e-9);
    expect_rel("v at the stop", h.y_last[1], -1.0, 1e-9);
    cr_expect_lt(st.steps, 20, "%ld steps: the root is not found by small steps", st.steps);
}

/* Direction: x falls through zero at pi/2 + 2j pi and rises at 3pi/2 + 2j pi; v falls at
 * 2j pi (j >= 1 ... t = 0 is its start, not a crossing) and rises at pi + 2j pi. */
Test(events, direction_filters_crossings)
{
    const int dirs[][2] = {{INTEG_EVENT_FALLING, INTEG_EVENT_RISING},
                           {INTEG_EVENT_RISING, INTEG_EVENT_BOTH},
                           {INTEG_EVENT_BOTH, INTEG_EVENT_FALLING}};
    for (int c = 0; c < 3; c++) {
        hits h = {0};
        integ_system sys = {2, osc_rhs, NULL};
        integ_options o = event_opts("rk8pd", 1e-12, 2, dirs[c], osc_events, &h);
        double times[] = {0, 4 * M_PI + 0.1}, y0[2] = {1, 0};
        integ_stats st;
        int rc = integ_run(&sys, &o, 0, y0, times, 2, sample, &h, &st);
        cr_assert_eq(rc, HAMEL_OK, "code %d: %s", rc, st.reason);
        cr_expect_eq(st.stopped_by, 0);
        cr_expect_eq(h.samples, 2, "record events add no samples");
        /* the expected crossings of each event, merged in time order */
        double want[16];
        int wi[16], nw = 0;
        for (int j = 0; j < 8; j++) {
            double tx = M_PI / 2 + j * M_PI, tv = (j + 1) * M_PI;
            int x_dir = j % 2 == 0 ? INTEG_EVENT_FALLING : INTEG_EVENT_RISING;
            int v_dir = j % 2 == 0 ? INTEG_EVENT_RISING : INTEG_EVENT_FALLING;
            if (tx < times[1] && (dirs[c][0] == 0 || dirs[c][0] == x_dir)) {
                want[nw] = tx;
                wi[nw++] = 0;
            }
            if (tv < times[1] && (dirs[c][1] == 0 || dirs[c][1] == v_dir)) {
                want[nw] = tv;
                wi[nw++] = 1;
            }
        }
        cr_assert_eq(h.n, nw, "case %d: %d hits, expected %d", c, h.n, nw);
        for (int k = 0; k < nw; k++) {
            cr_expect_eq(h.index[k], wi[k], "case %d hit %d: event %d, expected %d", c, k, h.index[k], wi[k]);
            expect_rel("crossing", h.t[k], want[k], 1e-9);
            cr_expect(k == 0 || h.t[k] > h.t[k - 1], "hits in time order");
        }
    }
}

/* Record against stop: the same event recorded goes on to t_end; as a stop it ends the
 * run at its first crossing, and the record events before it are still reported. */
Test(events, record_goes_on_and_stop_ends_the_run)
{
    const int dirs[2] = {INTEG_EVENT_BOTH, INTEG_EVENT_FALLING};
    hits rec = {0}, stop = {.stop = {0, 1}};
    integ_system sys = {2, osc_rhs, NULL};
    double times[] = {0, 1, 2, 3, 4, 5, 6, 7, 8}, y0[2] = {1, 0};
    integ_stats st;
    integ_options o = event_opts("rk8pd", 1e-12, 2, dirs, osc_events, &rec);
    cr_assert_eq(integ_run(&sys, &o, 0, y0, times, 9, sample, &rec, &st), HAMEL_OK, "%s", st.reason);
    cr_expect_eq(rec.samples, 9);
    cr_expect_eq(rec.t_last, 8.0);
    cr_expect_eq(rec.n, 4, "x at pi/2, 3pi/2, 5pi/2 and v falling at 2pi: %d", rec.n);

    o = event_opts("rk8pd", 1e-12, 2, dirs, osc_events, &stop);
    cr_assert_eq(integ_run(&sys, &o, 0, y0, times, 9, sample, &stop, &st), HAMEL_OK, "%s", st.reason);
    cr_expect_eq(st.stopped_by, 2);
    cr_expect_eq(stop.n, 3, "x twice, then the stop: %d", stop.n);
    cr_expect_eq(stop.index[2], 1);
    expect_rel("stop", stop.t[2], 2 * M_PI, 1e-9);
    cr_expect_eq(stop.samples, 8, "t = 0..6 and the stop: %d", stop.samples);
    cr_expect_eq(stop.t_last, stop.t[2]);
    expect_rel("x at the stop", stop.y_last[0], 1.0, 1e-9);
}

/* A failing event function fails the run with a reason; a hit that returns an engine
 * error ends it with that code. */
static int bad_events(double t, const double *y, double *g, void *ctx)
{
    (void)y;
    (void)ctx;
    g[0] = t > 1 ? NAN : 1.0;
    return 0;
}

Test(events, a_bad_event_function_fails_the_run)
{
    hits h = {0};
    integ_system sys = {2, osc_rhs, NULL};
    integ_options o = event_opts("rk8pd", 1e-10, 1, NULL, bad_events, &h);
    double times[] = {0, 3}, y0[2] = {1, 0};
    integ_stats st;
    int rc = integ_run(&sys, &o, 0, y0, times, 2, sample, &h, &st);
    cr_expect_eq(rc, HAMEL_E_NUMERIC, "code %d", rc);
    cr_expect(strstr(st.reason, "event 0 is not finite") != NULL, "reason: %s", st.reason);
}

/* ---- events of a simulation request (sim.c) ---- */

static void engine_setup(void)
{
    gsl_set_error_handler_off();
    engine_init();
}

TestSuite(sim_events, .init = engine_setup, .timeout = 120);

#define OSC_MODEL                                                                                            \
    "{\"name\": \"osc\", \"coordinates\": [\"x\"], \"parameters\": {\"m\": 2, \"k\": 8, \"h\": 0.25},"       \
    " \"kinetic_energy\": \"1/2*m*x'^2\", \"potential_energy\": \"1/2*k*x^2\"}"

/* The event of a result: events[i].<key> as a number, or the whole entry. */
static double event_t(const json_t *result, size_t i)
{
    return json_number_value(json_object_get(json_array_get(json_object_get(result, "events"), i), "t"));
}

static size_t n_events(const json_t *result) { return json_array_size(json_object_get(result, "events")); }

/* x = cos(2t) (m = 2, k = 8): a stop where x falls through h = 0.25 ends the
 * trajectory at acos(h)/2 to 1e-9 relative at rtol 1e-12, with the last sample there;
 * the record event on x' (zero at pi/2 first) comes after it and is not listed. */
Test(sim_events, oscillator_stop_time_and_last_sample)
{
    engine_model *m = support_compile_text(OSC_MODEL);
    json_t *r =
        support_run(m, "{\"initial\": {\"q\": {\"x\": 1}, \"qdot\": {\"x\": 0}}, \"t_end\": 10,"
                       " \"output\": {\"samples\": 101}, \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14},"
                       " \"events\": [{\"name\": \"low\", \"expr\": \"x - h\", \"direction\": \"falling\","
                       " \"action\": \"stop\"}, {\"name\": \"turn\", \"expr\": \"x'\"}]}");
    const double want = acos(0.25) / 2;
    cr_assert_eq(n_events(r), 1, "only the stop before t = %g: %zu", want, n_events(r));
    expect_rel("stop time", event_t(r, 0), want, 1e-9);
    cr_expect_str_eq(json_string_value(json_object_get(r, "stopped_by")), "low");
    const json_t *ts = json_object_get(json_object_get(r, "trajectory"), "t");
    size_t ns = json_array_size(ts);
    cr_expect_eq(ns, 8, "samples 0, 0.1, ..., 0.6 and the stop: %zu", ns);
    cr_expect_eq(json_number_value(json_array_get(ts, ns - 1)), event_t(r, 0),
                 "the last sample is the event");
    cr_expect(fabs(support_at(r, "q", "x", ns - 1) - 0.25) < 1e-12, "x = %.17g at the stop",
              support_at(r, "q", "x", ns - 1));
    const json_t *e = json_array_get(json_object_get(r, "events"), 0);
    cr_expect(fabs(json_number_value(json_object_get(json_object_get(e, "q"), "x")) - 0.25) < 1e-12);
    expect_rel("x' at the stop", json_number_value(json_object_get(json_object_get(e, "speeds"), "x'")),
               -2 * sin(2 * want), 1e-9);
    json_decref(r);

    /* as a record event: four crossings of x = h in [0, 6], both ways, and no stop */
    r = support_run(m, "{\"initial\": {\"q\": {\"x\": 1}, \"qdot\": {\"x\": 0}}, \"t_end\": 6,"
                       " \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14},"
                       " \"events\": [{\"name\": \"low\", \"expr\": \"x - h\"}]}");
    cr_assert_eq(n_events(r), 4, "%zu crossings", n_events(r));
    const double a = acos(0.25) / 2, p = M_PI;
    const double times[4] = {a, p - a, p + a, 2 * p - a};
    for (int i = 0; i < 4; i++)
        expect_rel("crossing", event_t(r, i), times[i], 1e-9);
    cr_expect_null(json_object_get(r, "stopped_by"));
    cr_expect_eq(json_array_size(json_object_get(json_object_get(r, "trajectory"), "t")), 101);
    json_decref(r);
    engine_model_release(m);
}

/* A particle falling from h = 10 stops at the ground at sqrt(2 h / g), in both
 * formulations' sense of the request (no constraints: Hamel). */
Test(sim_events, falling_particle_against_the_closed_form)
{
    engine_model *m = support_compile_text(
        "{\"name\": \"fall\", \"coordinates\": [\"z\"], \"parameters\": {\"m\": 1.5, \"g\": 9.81},"
        " \"kinetic_energy\": \"1/2*m*z'^2\", \"potential_energy\": \"m*g*z\"}");
    json_t *r =
        support_run(m, "{\"initial\": {\"q\": {\"z\": 10}, \"qdot\": {\"z\": 0}}, \"t_end\": 5,"
                       " \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14},"
                       " \"events\": [{\"name\": \"ground\", \"expr\": \"z\", \"action\": \"stop\"}]}");
    expect_rel("ground", event_t(r, 0), sqrt(2 * 10 / 9.81), 1e-9);
    cr_expect_str_eq(json_string_value(json_object_get(r, "stopped_by")), "ground");
    json_decref(r);
    engine_model_release(m);
}

#define DISK_REQUEST(EVENTS, OUTPUT, T_END)                                                                  \
    "{\"initial\": {\"q\": {\"phi\": 0, \"theta\": 1.2, \"psi\": 0, \"x\": 0, \"y\": 0},"                    \
    " \"speeds\": {\"wd\": 0.3, \"thd\": 0, \"Omega\": 4}}, \"t_end\": " T_END ", \"output\": " OUTPUT ","   \
    " \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}, \"hamel\": \"none\"" EVENTS "}"

static engine_model *disk_model(void)
{
    json_t *c = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    json_decref(c);
    return m;
}

/* theta at time t, by a run that lands on t (its last output time). */
static double disk_theta_at(engine_model *m, double t)
{
    char req[1024], out[64];
    snprintf(out, sizeof out, "{\"times\": [%.17g]}", t);
    snprintf(req, sizeof req, DISK_REQUEST("", "%s", "%.17g"), t, out);
    json_t *r = support_run(m, req);
    double th = support_at(r, "q", "theta", 0);
    json_decref(r);
    return th;
}

/* The rolling disk: theta crosses 1.0 both ways as it nutates. Every crossing the
 * event lists (and only those) is found again by bisection on runs that land on the
 * trial times, bracketed by a run with 401 samples: the times agree to 1e-9 relative.
 * Falling only keeps every other one; speeds at the event are the model's. */
Test(sim_events, rolling_disk_theta_crossings_against_bisection)
{
    engine_model *m = disk_model();
    json_t *ev = support_run(m, DISK_REQUEST(", \"events\": [{\"name\": \"cross\", \"expr\": \"theta - 1\"}]",
                                             "{\"samples\": 3}", "2"));
    json_t *fine = support_run(m, DISK_REQUEST("", "{\"samples\": 401}", "2"));
    size_t ne = n_events(ev), found = 0;
    cr_assert_geq(ne, 4, "the disk nutates through theta = 1 several times in 2 s: %zu", ne);
    for (size_t i = 0; i + 1 < 401; i++) {
        double a = support_at(fine, "q", "theta", i) - 1, b = support_at(fine, "q", "theta", i + 1) - 1;
        if ((a > 0) == (b > 0))
            continue;
        double lo =
            json_number_value(json_array_get(json_object_get(json_object_get(fine, "trajectory"), "t"), i));
        double hi = json_number_value(
            json_array_get(json_object_get(json_object_get(fine, "trajectory"), "t"), i + 1));
        for (int it = 0; it < 60 && hi - lo > 1e-13; it++) {
            double mid = 0.5 * (lo + hi), f = disk_theta_at(m, mid) - 1;
            if ((f > 0) == (a > 0))
                lo = mid;
            else
                hi = mid;
        }
        cr_assert_lt(found, ne, "bisection found more crossings than the events (%zu)", ne);
        expect_rel("crossing", event_t(ev, found), 0.5 * (lo + hi), 1e-9);
        found++;
    }
    cr_expect_eq(found, ne, "%zu crossings by bisection, %zu events", found, ne);

    json_t *falling = support_run(
        m, DISK_REQUEST(
               ", \"events\": [{\"name\": \"cross\", \"expr\": \"theta - 1\", \"direction\": \"falling\"}]",
               "{\"samples\": 3}", "2"));
    json_t *rising = support_run(
        m, DISK_REQUEST(
               ", \"events\": [{\"name\": \"cross\", \"expr\": \"theta - 1\", \"direction\": \"rising\"}]",
               "{\"samples\": 3}", "2"));
    cr_expect_eq(n_events(falling) + n_events(rising), ne);
    for (size_t i = 0; i < n_events(falling); i++) {
        expect_rel("falling", event_t(falling, i), event_t(ev, 2 * i), 1e-12);
        const json_t *e = json_array_get(json_object_get(falling, "events"), i);
        cr_expect_lt(json_number_value(json_object_get(json_object_get(e, "speeds"), "thd")), 0,
                     "thd < 0 falling");
    }
    for (size_t i = 0; i < n_events(rising); i++)
        expect_rel("rising", event_t(rising, i), event_t(ev, 2 * i + 1), 1e-12);
    json_decref(ev);
    json_decref(fine);
    json_decref(falling);
    json_decref(rising);
    engine_model_release(m);
}

/* The same stop in the multipliers formulation (q, q' integrated, Baumgarte-stabilized)
 * and in Boltzmann-Hamel agree to 1e-9; a speed may be named in the expression. */
Test(sim_events, formulations_agree_and_speeds_can_be_named)
{
    engine_model *m = disk_model();
    const char *events =
        ", \"events\": [{\"name\": \"spin\", \"expr\": \"Omega - 4.3\", \"action\": \"stop\"}]";
    char req[2048];
    snprintf(req, sizeof req, DISK_REQUEST("%s", "{\"samples\": 11}", "3"), events);
    json_t *h = support_run(m, req);
    snprintf(req, sizeof req, DISK_REQUEST("%s, \"formulation\": \"multipliers\"", "{\"samples\": 11}", "3"),
             events);
    json_t *mu = support_run(m, req);
    cr_assert_eq(n_events(h), 1);
    cr_assert_eq(n_events(mu), 1);
    expect_rel("multipliers against hamel", event_t(mu, 0), event_t(h, 0), 1e-9);
    const json_t *e = json_array_get(json_object_get(h, "events"), 0);
    cr_expect(fabs(json_number_value(json_object_get(json_object_get(e, "speeds"), "Omega")) - 4.3) < 1e-12);
    json_decref(h);
    json_decref(mu);
    engine_model_release(m);
}

/* A bad event is a 422 naming the member (and the column of an expression). */
Test(sim_events, bad_events_name_the_member)
{
    engine_model *m = disk_model();
    struct {
        const char *events, *path;
        int column;
    } bad[] = {
        {"[{\"name\": \"a\", \"expr\": \"theta - nope\"}]", "events[0].expr", 9},
        {"[{\"name\": \"a\", \"expr\": \"theta\", \"direction\": \"down\"}]", "events[0].direction", -1},
        {"[{\"name\": \"a\", \"expr\": \"theta\", \"action\": \"halt\"}]", "events[0].action", -1},
        {"[{\"name\": \"a\", \"expr\": \"theta\"}, {\"name\": \"a\", \"expr\": \"phi\"}]", "events[1].name",
         -1},
        {"[{\"name\": \"a\"}]", "events[0].expr", -1},
        {"[{\"name\": \"a\", \"expr\": \"theta\", \"when\": 1}]", "events[0].when", -1},
        {"{\"name\": \"a\"}", "events", -1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char req[2048];
        snprintf(req, sizeof req, "%s%s}",
                 "{\"initial\": {\"q\": {\"phi\": 0, \"theta\": 1.2, \"psi\": 0, \"x\": 0, \"y\": 0},"
                 " \"speeds\": {\"wd\": 0.3, \"thd\": 0, \"Omega\": 4}}, \"t_end\": 1, \"events\": ",
                 bad[i].events);
        json_t *js = support_loads(req), *result = NULL, *problem = NULL;
        int rc = engine_simulate(m, js, NULL, NULL, &result, &problem);
        cr_expect_neq(rc, 0, "%s was accepted", bad[i].events);
        cr_expect_null(result);
        const json_t *err = json_array_get(json_object_get(problem, "errors"), 0);
        cr_expect_str_eq(json_string_value(json_object_get(err, "path")), bad[i].path, "%s",
                         json_dumps(problem, 0));
        if (bad[i].column > 0)
            cr_expect_eq(json_integer_value(json_object_get(err, "column")), bad[i].column, "%s",
                         json_dumps(problem, 0));
        json_decref(js);
        json_decref(problem);
    }
    engine_model_release(m);
}

/* Through the singularity watch: a knife edge turning at w = 1 with speed 0.8 from phi0
 * = 0.3 (default speeds, re-chosen at every phi = pi/2 + j pi) crosses phi = 1.6 at
 * 1.3 and x = 0 (falling) at pi - 2 phi0 + 2 j pi: the segments between re-choices
 * keep the events exact. */
Test(sim_events, through_the_watchs_speed_switches)
{
    engine_model *m = support_compile_text(
        "{\"name\": \"knife\", \"coordinates\": [\"x\", \"y\", \"phi\"], \"parameters\": {\"m\": 2, \"I\": "
        "0.5},"
        " \"kinetic_energy\": \"1/2*m*(x'^2 + y'^2) + 1/2*I*phi'^2\","
        " \"constraints\": [{\"name\": \"knife\", \"expr\": \"x'*sin(phi) - y'*cos(phi)\"}]}");
    char req[1024];
    snprintf(
        req, sizeof req,
        "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"phi\": 0.3}, \"qdot\": {\"x\": %.17g, \"y\": %.17g,"
        " \"phi\": 1}}, \"t_end\": 10, \"output\": {\"samples\": 11}, \"integrator\": {\"rtol\": 1e-12,"
        " \"atol\": 1e-14}, \"events\": [{\"name\": \"ph\", \"expr\": \"phi - 1.6\"}, {\"name\": \"xz\","
        " \"expr\": \"x\", \"direction\": \"falling\"}]}",
        0.8 * cos(0.3), 0.8 * sin(0.3));
    json_t *r = support_run(m, req);
    cr_expect_gt(json_integer_value(json_object_get(json_object_get(r, "stats"), "speed_switches")), 2);
    cr_assert_eq(n_events(r), 3, "%s", json_dumps(json_object_get(r, "events"), 0));
    expect_rel("phi = 1.6", event_t(r, 0), 1.3, 1e-9);
    expect_rel("x = 0", event_t(r, 1), M_PI - 0.6, 1e-9);
    expect_rel("x = 0 again", event_t(r, 2), 3 * M_PI - 0.6, 1e-9);
    json_decref(r);
    engine_model_release(m);
}

/* With a position constraint: a pendulum in Cartesian coordinates (the rod a
 * position-level constraint, y solved from the guess) crosses x = 0 falling at 1, 5, 9,
 * ... quarter periods K(sin(th0 / 2)) sqrt(L / g) of the closed form, over 15 periods;
 * as a stop event the run ends at the first. */
Test(sim_events, pendulum_with_a_position_constraint)
{
    json_t *c = support_load_file("api/examples/simulation-position-request.json");
    engine_model *m = support_compile_json(json_object_get(c, "model"));
    json_object_del(c, "model");
    json_object_set_new(c, "t_end", json_real(30));
    json_object_set_new(c, "output", json_pack("{s:i}", "samples", 301));
    json_object_set_new(c, "events",
                        support_loads("[{\"name\": \"bottom\", \"expr\": \"x\", \"direction\": "
                                      "\"falling\"}]"));
    json_t *r = support_simulate(m, c, NULL);
    const double th0 = asin(0.6),
                 quarter = gsl_sf_ellint_Kcomp(sin(th0 / 2), GSL_PREC_DOUBLE) * sqrt(1.0 / 9.81);
    cr_assert_eq(n_events(r), 15, "%zu crossings", n_events(r));
    for (size_t i = 0; i < 15; i++)
        expect_rel("x = 0 falling", event_t(r, i), (4.0 * (double)i + 1) * quarter, 1e-9);
    json_decref(r);
    json_object_set_new(c, "events",
                        support_loads("[{\"name\": \"bottom\", \"expr\": \"x\", \"direction\": "
                                      "\"falling\", \"action\": \"stop\"}]"));
    r = support_simulate(m, c, NULL);
    cr_assert_eq(n_events(r), 1);
    expect_rel("stop", event_t(r, 0), quarter, 1e-9);
    cr_expect_str_eq(json_string_value(json_object_get(r, "stopped_by")), "bottom");
    json_decref(r);
    json_decref(c);
    engine_model_release(m);
}
