/* bench_engine.c — the engine against the hand-written baseline (issue 2, item 8).
 *
 * For the rolling disk (Greenwood 5.3) and the knife-edge dumbbell (Greenwood 5.2),
 * integrated with rk8pd, rtol 1e-10, atol 1e-12 over t in [0, 10]: model compile time,
 * integrate time per run (median of BENCH_RUNS runs), steps, right-hand side
 * evaluations and ns per evaluation, for the engine (public API of engine.h) and for
 * the baseline of baseline.h driven the same way, and their ratio. Each case is run at
 * 1001 output samples and at the case's natural 11, since GSL's driver takes at least
 * one step per output interval.
 *
 * Environment: HAMEL_CASES_DIR (default ../shared/cases), BENCH_RUNS (default 21,
 * at least 5), BENCH_SAMPLES (default 1001), BENCH_STRICT=1 to exit 1 when a budget of
 * issue 2 (integrate <= 3x baseline for the rolling disk, compile <= 5 ms) is missed.
 * Built with -DBENCH_BASELINE_ONLY it measures the baseline alone and says the engine
 * is not available.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baseline.c" /* see baseline.h: compiled into each program that uses it */

#ifndef BENCH_BASELINE_ONLY
#include "engine.h"
#include "timing.h"
#endif

#define BENCH_T_END 10.0
#define BENCH_RTOL 1e-10
#define BENCH_ATOL 1e-12
#define BENCH_NATURAL_SAMPLES 11
#define BENCH_MAX_SAMPLES 100001
#define BENCH_MAX_RUNS 1001
#define BENCH_RATIO_BUDGET 3.0    /* issue 2: integrate <= 3x baseline (rolling disk) */
#define BENCH_COMPILE_BUDGET_MS 5 /* issue 2: model compile <= 5 ms */
#define BENCH_RHS_LOOP 1000000    /* evaluations in the bare right-hand side timing */

typedef struct bench_case {
    const char *label; /* short name for the table */
    const baseline_system *sys;
    int budgeted; /* the ratio budget applies */
} bench_case;

static const bench_case bench_cases[] = {
    {"rolling-disk", &baseline_rolling_disk, 1},
    {"dumbbell", &baseline_dumbbell, 0},
};

/* The figures of one implementation at one sample count. */
typedef struct bench_row {
    int ok;
    double integrate_ms; /* median */
    double wall_ms;      /* median, whole call */
    double compile_ms;   /* median; < 0: not applicable */
    double compile_first_ms;
    long steps, rhs_evals;
    double max_diff;      /* engine only: max |engine - baseline| over all samples */
    const char *rhs_kind; /* engine only: stats.jit true "jit", false "tape", else "?" */
    char note[256];
} bench_row;

static int bench_runs = 21;

static int env_int(const char *name, int dflt, int lo, int hi)
{
    const char *s = getenv(name);
    char *end;
    long v;

    if (s == NULL || s[0] == '\0')
        return dflt;
    v = strtol(s, &end, 10);
    if (*end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "bench: %s=%s ignored (want %d..%d)\n", name, s, lo, hi);
        return dflt;
    }
    return (int)v;
}

static json_t *load_case(const char *file)
{
    const char *dir = getenv("HAMEL_CASES_DIR");
    char path[4096];
    json_error_t err;
    json_t *c;

    if (dir == NULL || dir[0] == '\0')
        dir = "../shared/cases";
    snprintf(path, sizeof path, "%s/%s", dir, file);
    c = json_load_file(path, 0, &err);
    if (c == NULL)
        fprintf(stderr, "bench: cannot load %s: %s (set HAMEL_CASES_DIR)\n", path, err.text);
    return c;
}

/* Reads the case's parameters and initial state into par and y0. */
static int case_initial(const baseline_system *sys, const json_t *c, baseline_params *par, double *t0,
                        double y0[])
{
    const json_t *params = json_object_get(json_object_get(c, "model"), "parameters");
    const json_t *init = json_object_get(json_object_get(c, "simulation"), "initial");
    const json_t *q = json_object_get(init, "q"), *u = json_object_get(init, "speeds");
    const json_t *v;

    baseline_params_default(sys, par);
    for (int k = 0; k < sys->nparams; k++) {
        v = json_object_get(params, sys->param_names[k]);
        if (json_is_number(v))
            par->p[k] = json_number_value(v);
    }
    for (int k = 0; k < sys->nq + sys->nu; k++) {
        v = k < sys->nq ? json_object_get(q, sys->q_names[k]) : json_object_get(u, sys->u_names[k - sys->nq]);
        if (!json_is_number(v)) {
            fprintf(stderr, "bench: %s: no initial value for state %d\n", sys->file, k);
            return -1;
        }
        y0[k] = json_number_value(v);
    }
    v = json_object_get(init, "t");
    *t0 = json_is_number(v) ? json_number_value(v) : 0.0;
    return 0;
}

/* The baseline at n samples: median integrate time; the trajectory of the last run
 * stays in out. */
static void bench_baseline(const baseline_system *sys, baseline_params *par, double t0, const double y0[],
                           const double *times, int n, double *out, bench_row *row)
{
    double ms[BENCH_MAX_RUNS];
    baseline_stats st;

    memset(row, 0, sizeof *row);
    row->compile_ms = row->compile_first_ms = -1;
    for (int i = 0; i <= bench_runs; i++) { /* run 0 warms the caches */
        int status = baseline_run(sys, par, t0, y0, times, n, BENCH_RTOL, BENCH_ATOL, out, &st);
        if (status != 0) {
            snprintf(row->note, sizeof row->note, "baseline failed (%d): %.200s", status, st.reason);
            return;
        }
        if (i > 0)
            ms[i - 1] = st.integrate_ms;
    }
    row->ok = 1;
    row->integrate_ms = row->wall_ms = median(ms, bench_runs);
    row->steps = st.steps;
    row->rhs_evals = st.rhs_evals;
}

/* ns per call of the bare baseline right-hand side at the initial state. */
static double bench_rhs_only(const baseline_system *sys, baseline_params *par, const double y0[])
{
    double y[BASELINE_MAX_DIM], dydt[BASELINE_MAX_DIM], best = INFINITY;
    volatile double sink = 0;
    const int dim = sys->nq + sys->nu;

    memcpy(y, y0, (size_t)dim * sizeof y[0]);
    for (int rep = 0; rep < 5; rep++) {
        double start = now_ms();
        for (int i = 0; i < BENCH_RHS_LOOP; i++) {
            sys->rhs(i * 1e-7, y, dydt, par);
            y[0] += 1e-12 * dydt[0]; /* a data dependence, so no call can be skipped */
        }
        double ns = (now_ms() - start) * 1e6 / BENCH_RHS_LOOP;
        if (ns < best)
            best = ns;
        sink += dydt[dim - 1];
    }
    (void)sink;
    return best;
}

#ifndef BENCH_BASELINE_ONLY
static double stat_number(const json_t *stats, const char *key)
{
    const json_t *v = json_object_get(stats, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void problem_note(json_t *problem, const char *what, int code, bench_row *row)
{
    const char *detail = json_string_value(json_object_get(problem, "detail"));
    const char *title = json_string_value(json_object_get(problem, "title"));
    snprintf(row->note, sizeof row->note, "%s failed (%d): %.200s", what, code,
             detail  ? detail
             : title ? title
                     : "no problem document");
    json_decref(problem);
}

/* Largest |engine - baseline| over every sampled coordinate and speed. */
static double trajectory_diff(const baseline_system *sys, const json_t *result, const double *out, int n)
{
    const json_t *traj = json_object_get(result, "trajectory");
    const int dim = sys->nq + sys->nu;
    double worst = 0;

    for (int k = 0; k < dim; k++) {
        const json_t *arr = k < sys->nq
                                ? json_object_get(json_object_get(traj, "q"), sys->q_names[k])
                                : json_object_get(json_object_get(traj, "speeds"), sys->u_names[k - sys->nq]);
        if (json_array_size(arr) != (size_t)n)
            return INFINITY;
        for (int i = 0; i < n; i++) {
            double d = fabs(json_number_value(json_array_get(arr, (size_t)i)) - out[i * dim + k]);
            if (!(d <= worst))
                worst = d; /* NaN propagates as the worst */
        }
    }
    return worst;
}

/* The case's simulation block with the benchmark's integrator, span and samples. */
static json_t *bench_request(const json_t *c, int n)
{
    json_t *req = json_deep_copy(json_object_get(c, "simulation"));
    json_object_set_new(req, "t_end", json_real(BENCH_T_END));
    json_object_set_new(req, "output", json_pack("{s:i}", "samples", n));
    json_object_set_new(req, "integrator",
                        json_pack("{s:s, s:f, s:f, s:i}", "method", "rk8pd", "rtol", BENCH_RTOL, "atol",
                                  BENCH_ATOL, "max_steps", 10000000));
    json_object_set_new(req, "hamel", json_string("none"));
    return req;
}

/* Model compile time: the first compile, then the median of bench_runs more. Leaves
 * one compiled model in *model. */
static void bench_compile(const json_t *c, engine_model **model, bench_row *row)
{
    const json_t *mj = json_object_get(c, "model");
    double ms[BENCH_MAX_RUNS];
    json_t *problem = NULL;

    *model = NULL;
    for (int i = 0; i <= bench_runs; i++) {
        engine_model *m = NULL;
        double start = now_ms();
        int rc = engine_model_compile(mj, NULL, &m, &problem);
        double t = now_ms() - start;
        if (rc != 0) {
            problem_note(problem, "engine_model_compile", rc, row);
            engine_model_release(*model);
            *model = NULL;
            return;
        }
        if (i == 0)
            row->compile_first_ms = t;
        else
            ms[i - 1] = t;
        engine_model_release(*model);
        *model = m;
    }
    row->compile_ms = median(ms, bench_runs);
}

/* The engine at n samples through engine_simulate; compares with the baseline's out. */
static void bench_engine(const baseline_system *sys, const engine_model *model, const json_t *c, int n,
                         const double *out, bench_row *row)
{
    double ims[BENCH_MAX_RUNS], wms[BENCH_MAX_RUNS];
    json_t *req = bench_request(c, n);

    for (int i = 0; i <= bench_runs; i++) {
        json_t *result = NULL, *problem = NULL;
        double start = now_ms();
        int rc = engine_simulate(model, req, NULL, NULL, &result, &problem);
        double wall = now_ms() - start;
        if (rc != 0) {
            problem_note(problem, "engine_simulate", rc, row);
            json_decref(req);
            return;
        }
        const json_t *stats = json_object_get(result, "stats");
        if (i > 0) {
            ims[i - 1] = stat_number(stats, "integrate_ms");
            wms[i - 1] = wall;
        }
        row->steps = (long)stat_number(stats, "steps");
        row->rhs_evals = (long)stat_number(stats, "rhs_evals");
        const json_t *jit = json_object_get(stats, "jit");
        row->rhs_kind = json_is_boolean(jit) ? (json_is_true(jit) ? "jit" : "tape") : "?";
        if (i == bench_runs)
            row->max_diff = trajectory_diff(sys, result, out, n);
        json_decref(result);
    }
    json_decref(req);
    row->ok = 1;
    row->integrate_ms = median(ims, bench_runs);
    row->wall_ms = median(wms, bench_runs);
}
#endif

static void print_row(const char *label, const char *impl, int n, const bench_row *r)
{
    char compile[32] = "-", diff[32] = "-";
    const char *kind = r->rhs_kind ? r->rhs_kind : "C";

    if (!r->ok) {
        printf("%-13s %-8s %7d  %s\n", label, impl, n, r->note);
        return;
    }
    if (r->compile_ms >= 0)
        snprintf(compile, sizeof compile, "%.3f/%.3f", r->compile_first_ms, r->compile_ms);
    if (strcmp(impl, "engine") == 0)
        snprintf(diff, sizeof diff, "%.1e", r->max_diff);
    printf("%-13s %-8s %7d %13s %12.3f %9.3f %7ld %9ld %8.1f %9s %4s\n", label, impl, n, compile,
           r->integrate_ms, r->wall_ms, r->steps, r->rhs_evals,
           r->rhs_evals > 0 ? r->integrate_ms * 1e6 / r->rhs_evals : NAN, diff, kind);
}

int main(void)
{
    const int ncases = (int)(sizeof bench_cases / sizeof bench_cases[0]);
    const int samples = env_int("BENCH_SAMPLES", 1001, 2, BENCH_MAX_SAMPLES);
    const int strict = env_int("BENCH_STRICT", 0, 0, 1);
    const int counts[2] = {samples, BENCH_NATURAL_SAMPLES};
    static double times[BENCH_MAX_SAMPLES], out[BENCH_MAX_SAMPLES * BASELINE_MAX_DIM];
    bench_row base[2][2], eng[2][2];
    double rhs_ns[2];
    int failed = 0;

    bench_runs = env_int("BENCH_RUNS", 21, 5, BENCH_MAX_RUNS - 1);
#ifndef BENCH_BASELINE_ONLY
    engine_init();
#else
    gsl_set_error_handler_off();
#endif
    printf("hamel bench: rk8pd rtol %g atol %g, t in [0, %g], median of %d runs "
           "(after one warm-up)\n\n",
           BENCH_RTOL, BENCH_ATOL, BENCH_T_END, bench_runs);
    printf("%-13s %-8s %7s %13s %12s %9s %7s %9s %8s %9s %4s\n", "case", "impl", "samples", "compile_ms",
           "integrate_ms", "wall_ms", "steps", "rhs_evals", "ns/rhs", "max|diff|", "rhs");
    printf("%-13s %-8s %7s %13s %12s %9s %7s %9s %8s %9s %4s\n", "", "", "", "first/median", "", "", "", "",
           "", "vs base", "");

    for (int c = 0; c < ncases; c++) {
        const bench_case *bc = &bench_cases[c];
        baseline_params par;
        double t0, y0[BASELINE_MAX_DIM];
        json_t *cj = load_case(bc->sys->file);

        if (cj == NULL || case_initial(bc->sys, cj, &par, &t0, y0) != 0) {
            json_decref(cj);
            return 2;
        }
        rhs_ns[c] = bench_rhs_only(bc->sys, &par, y0);
#ifndef BENCH_BASELINE_ONLY
        engine_model *model = NULL;
        bench_row compile = {0};
        bench_compile(cj, &model, &compile);
#endif
        for (int k = 0; k < 2; k++) {
            baseline_times(t0, BENCH_T_END, counts[k], times);
            bench_baseline(bc->sys, &par, t0, y0, times, counts[k], out, &base[c][k]);
            print_row(bc->label, "baseline", counts[k], &base[c][k]);
#ifndef BENCH_BASELINE_ONLY
            eng[c][k] = compile;
            if (model != NULL)
                bench_engine(bc->sys, model, cj, counts[k], out, &eng[c][k]);
#else
            memset(&eng[c][k], 0, sizeof eng[c][k]);
            snprintf(eng[c][k].note, sizeof eng[c][k].note, "built without the engine library");
#endif
            print_row(bc->label, "engine", counts[k], &eng[c][k]);
        }
#ifndef BENCH_BASELINE_ONLY
        engine_model_release(model);
#endif
        json_decref(cj);
    }

    printf("\nbaseline bare right-hand side:");
    for (int c = 0; c < ncases; c++)
        printf(" %s %.1f ns/eval%s", bench_cases[c].label, rhs_ns[c], c + 1 < ncases ? "," : "");
    printf("\n\n");

    for (int c = 0; c < ncases; c++) {
        for (int k = 0; k < 2; k++) {
            const bench_row *b = &base[c][k], *e = &eng[c][k];
            char label[64];
            snprintf(label, sizeof label, "%s%s", bench_cases[c].label, k == 0 ? "" : " (11 samples)");
            if (!b->ok) {
                printf("%s: %s\n", label, b->note);
                failed = 1;
                continue;
            }
            if (!e->ok) {
                printf("%s: integrate — (baseline %.3f ms); engine not available: %s\n", label,
                       b->integrate_ms, e->note);
                failed = 1;
                continue;
            }
            double ratio = e->integrate_ms / b->integrate_ms;
            int over = (bench_cases[c].budgeted && !(ratio <= BENCH_RATIO_BUDGET)) ||
                       !(e->compile_ms <= BENCH_COMPILE_BUDGET_MS);
            printf("%s: integrate %.3f ms (baseline %.3f ms) ratio %.2f; compile %.3f ms "
                   "(first %.3f ms)%s\n",
                   label, e->integrate_ms, b->integrate_ms, ratio, e->compile_ms, e->compile_first_ms,
                   over ? "  [over budget]" : "");
            if (over)
                failed = 1;
        }
    }
    return strict && failed ? 1 : 0;
}
