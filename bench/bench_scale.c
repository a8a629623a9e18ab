/* bench_scale.c — one model of the scaling families (issue 8, item 6): compile time and
 * right-hand side cost, against SymPy-generated C when one is given.
 *
 * Usage: bench-bench_scale [options] CASE.json
 *   --sympy FILE.so         a shared object with int sympy_rhs(double t, const double *y,
 *                           double *dydt) on the engine's state layout [q (n), u (k)]
 *                           (bench/models/gen_sympy_c.py, compiled with gcc -O2)
 *   --compile-target MS     the compile budget for this model (0: none)
 *   --ratio-target R        the ns/RHS budget as hamel / SymPy C (0: none)
 *   --answer-target S       a hostile model: any answer (compiled or 422) within S
 *   --label TEXT            the row label (default: the model name)
 *   --header                print the table header first
 *
 * It compiles the case's model with the default limits (engine_default_limits) once,
 * then again while the total stays under a second (at most 21 times), and reports the
 * first and median compile times. With a model, it evaluates hamel_rhs (the integrator's
 * right-hand side, engine/hamel.h) at the case's initial state and at a random state
 * near it; with --sympy, it checks that both right-hand sides agree to 1e-9 relative
 * (max-norm) at both states before timing, then times each as the best of 5 loops of
 * about 0.1 s, the loops of the two interleaved. One row is printed; the exit status is
 * 0, 1 when a target is missed, 2 on bad input, 3 when the right-hand sides disagree (or
 * the SymPy C does not load, or the case has no initial state).
 *
 * BENCH_SCALE_DEBUG=1 prints both right-hand sides when they disagree.
 *
 * Timeouts are the caller's (scripts/bench.sh runs each model under timeout(1)).
 */
#include <dlfcn.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "hamel.h"
#include "model.h"

#define SCALE_MAX_COMPILES 21
#define SCALE_COMPILE_SECONDS 1.0 /* repeat compiles while under this */
#define SCALE_LOOP_SECONDS 0.1    /* one timing loop */
#define SCALE_ROUNDS 5
#define SCALE_AGREE_REL 1e-9

typedef int (*rhs_fn)(double t, const double *y, double *dydt, void *ctx);
typedef int (*sympy_fn)(double t, const double *y, double *dydt);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int sympy_adapter(double t, const double *y, double *dydt, void *ctx)
{
    sympy_fn f = *(sympy_fn *)ctx;
    return f(t, y, dydt);
}

/* One timed loop of iters calls of f from state y0: ns per call. */
static double loop_ns(rhs_fn f, void *ctx, const double *y0, double *y, double *dydt, int dim, long iters)
{
    double start = now_s();
    memcpy(y, y0, (size_t)dim * sizeof *y);
    for (long i = 0; i < iters; i++) {
        f(0.0, y, dydt, ctx);
        y[0] = y0[0] + 1e-15 * dydt[dim - 1]; /* a data dependence, so no call is skipped */
    }
    return (now_s() - start) * 1e9 / (double)iters;
}

/* Calls of f that take about SCALE_LOOP_SECONDS. */
static long loop_iters(rhs_fn f, void *ctx, const double *y0, double *y, double *dydt, int dim)
{
    long iters = 16;
    for (;;) {
        double ns = loop_ns(f, ctx, y0, y, dydt, dim, iters);
        if (ns * (double)iters > SCALE_LOOP_SECONDS * 0.25e9 || iters > (1L << 30))
            return (long)(SCALE_LOOP_SECONDS * 1e9 / ns) + 1;
        iters *= 4;
    }
}

/* ns per call of f (and of g when g is not NULL) at state y0: the best of SCALE_ROUNDS
 * loops of about SCALE_LOOP_SECONDS each, the two interleaved so that other load on the
 * machine falls on both alike. */
static void time_rhs(rhs_fn f, void *fctx, rhs_fn g, void *gctx, const double *y0, int dim, double *f_ns,
                     double *g_ns)
{
    double *y = malloc((size_t)dim * sizeof *y), *dydt = malloc((size_t)dim * sizeof *dydt);
    long fi = loop_iters(f, fctx, y0, y, dydt, dim), gi = g ? loop_iters(g, gctx, y0, y, dydt, dim) : 0;

    *f_ns = *g_ns = INFINITY;
    for (int rep = 0; rep < SCALE_ROUNDS; rep++) {
        double ns = loop_ns(f, fctx, y0, y, dydt, dim, fi);
        if (ns < *f_ns)
            *f_ns = ns;
        if (g != NULL) {
            ns = loop_ns(g, gctx, y0, y, dydt, dim, gi);
            if (ns < *g_ns)
                *g_ns = ns;
        }
    }
    free(y);
    free(dydt);
}

/* max_i |a_i - b_i| / max(max_i |b_i|, tiny); NaN anywhere gives INFINITY. */
static double rel_diff(const double *a, const double *b, int dim)
{
    double d = 0, s = 0;
    for (int i = 0; i < dim; i++) {
        double e = fabs(a[i] - b[i]);
        if (!(e <= d))
            d = e;
        if (fabs(b[i]) > s)
            s = fabs(b[i]);
    }
    if (isnan(d))
        return INFINITY;
    return d / (s > 1e-300 ? s : 1e-300);
}

/* y = [q, u] from the case's simulation.initial (q by coordinate, speeds by name). */
static int initial_state(const engine_model *m, const json_t *cj, double *y)
{
    const json_t *init = json_object_get(json_object_get(cj, "simulation"), "initial");
    const json_t *q = json_object_get(init, "q"), *u = json_object_get(init, "speeds");
    for (int i = 0; i < m->n; i++) {
        const json_t *v = json_object_get(q, m->coords[i]);
        if (!json_is_number(v))
            return -1;
        y[i] = json_number_value(v);
    }
    for (int r = 0; r < m->k; r++) {
        const json_t *v = json_object_get(u, m->speeds[r]);
        if (!json_is_number(v))
            return -1;
        y[m->n + r] = json_number_value(v);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *sympy_so = NULL, *file = NULL, *label = NULL;
    double compile_target = 0, ratio_target = 0, answer_target = 0;
    int header = 0, missed = 0, broken = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sympy") == 0 && i + 1 < argc)
            sympy_so = argv[++i];
        else if (strcmp(argv[i], "--compile-target") == 0 && i + 1 < argc)
            compile_target = atof(argv[++i]);
        else if (strcmp(argv[i], "--ratio-target") == 0 && i + 1 < argc)
            ratio_target = atof(argv[++i]);
        else if (strcmp(argv[i], "--answer-target") == 0 && i + 1 < argc)
            answer_target = atof(argv[++i]);
        else if (strcmp(argv[i], "--label") == 0 && i + 1 < argc)
            label = argv[++i];
        else if (strcmp(argv[i], "--header") == 0)
            header = 1;
        else if (argv[i][0] != '-' && file == NULL)
            file = argv[i];
        else {
            fprintf(stderr, "bench_scale: bad argument %s (see the header of bench/bench_scale.c)\n",
                    argv[i]);
            return 2;
        }
    }
    if (header) {
        printf("%-22s %4s %4s %4s %19s %10s %10s %7s %-10s %s\n", "model", "n", "m", "k",
               "compile_ms first/med", "hamel_ns", "sympyC_ns", "ratio", "reduction", "target");
        fflush(stdout);
    }
    if (file == NULL)
        return header ? 0 : 2;

    json_error_t jerr;
    json_t *cj = json_load_file(file, 0, &jerr);
    if (cj == NULL) {
        fprintf(stderr, "bench_scale: %s: %s\n", file, jerr.text);
        return 2;
    }
    const json_t *mj = json_object_get(cj, "model");
    if (label == NULL)
        label = json_string_value(json_object_get(mj, "name"));
    if (label == NULL)
        label = file;
    engine_init();

    /* ---- compile ---- */
    double times[SCALE_MAX_COMPILES], first = 0, spent = 0;
    int ntimes = 0;
    engine_model *model = NULL;
    json_t *problem = NULL;
    for (int i = 0; i < SCALE_MAX_COMPILES; i++) {
        engine_model *m = NULL;
        double start = now_s();
        int rc = engine_model_compile(mj, NULL, &m, &problem);
        double el = now_s() - start;
        spent += el;
        if (rc != 0) {
            const char *type = json_string_value(json_object_get(problem, "type"));
            const char *detail = json_string_value(json_object_get(problem, "detail"));
            const char *slash = type ? strrchr(type, '/') : NULL;
            int ok = answer_target > 0 && el <= answer_target;
            printf("%-22s %4s %4s %4s %19.2f  answered %s (%.120s)%s\n", label, "-", "-", "-", el * 1e3,
                   slash ? slash + 1 : "error", detail ? detail : "",
                   answer_target > 0 ? (ok ? "  [ok: answered in time]" : "  [MISSED: answer too slow]")
                                     : "  [compile failed]");
            json_decref(problem);
            json_decref(cj);
            engine_model_release(model);
            return ok ? 0 : 1;
        }
        if (i == 0)
            first = el;
        else
            times[ntimes++] = el;
        engine_model_release(model);
        model = m;
        if (spent > SCALE_COMPILE_SECONDS)
            break;
    }
    qsort(times, (size_t)ntimes, sizeof times[0], cmp_double);
    double med = ntimes ? times[ntimes / 2] : first;
    char compile[40];
    snprintf(compile, sizeof compile, "%.2f/%.2f", first * 1e3, med * 1e3);

    /* ---- right-hand sides ---- */
    const int dim = model->n + model->k;
    double *y0 = calloc((size_t)dim, sizeof *y0), *yr = calloc((size_t)dim, sizeof *yr);
    double *a = calloc((size_t)dim, sizeof *a), *b = calloc((size_t)dim, sizeof *b);
    hamel_ws *ws = hamel_ws_new(model, model->param_values);
    char hamel_ns[24] = "-", sympy_ns[24] = "-", ratio_s[24] = "-", target[200] = "";
    double ratio = NAN;
    int state_ok = initial_state(model, cj, y0) == 0;

    if (!state_ok || ws == NULL) {
        snprintf(target, sizeof target, "no initial state [q, speeds] in the case");
        broken = 1;
    } else {
        srand(12345);
        for (int i = 0; i < dim; i++)
            yr[i] = y0[i] + 0.2 * ((double)rand() / RAND_MAX - 0.5);
        double hns = NAN, sns = NAN;
        int compare = 0;
        sympy_fn sf = NULL;
        if (sympy_so != NULL) {
            void *dl = dlopen(sympy_so, RTLD_NOW | RTLD_LOCAL);
            sf = dl ? (sympy_fn)(uintptr_t)dlsym(dl, "sympy_rhs") : NULL;
            if (sf == NULL) {
                snprintf(target, sizeof target, "cannot load %s: %s", sympy_so, dlerror());
                broken = 1;
            } else {
                double worst = 0;
                for (int s = 0; s < 2; s++) {
                    const double *y = s == 0 ? y0 : yr;
                    int r1 = hamel_rhs(0.0, y, a, ws), r2 = sf(0.0, y, b);
                    double d = (r1 == 0 && r2 == 0) ? rel_diff(a, b, dim) : INFINITY;
                    if (!(d <= SCALE_AGREE_REL) && getenv("BENCH_SCALE_DEBUG") != NULL)
                        for (int i = 0; i < dim; i++)
                            fprintf(stderr, "state %d: y[%d] = %.17g  hamel %.17g  sympy %.17g\n", s, i, y[i],
                                    a[i], b[i]);
                    if (!(d <= worst))
                        worst = d;
                }
                if (!(worst <= SCALE_AGREE_REL)) {
                    snprintf(target, sizeof target, "RHS DISAGREE: hamel vs SymPy C %.1e relative", worst);
                    broken = 1;
                } else {
                    compare = 1;
                }
            }
        }
        time_rhs(hamel_rhs, ws, compare ? sympy_adapter : NULL, &sf, y0, dim, &hns, &sns);
        snprintf(hamel_ns, sizeof hamel_ns, "%.0f", hns);
        if (compare) {
            ratio = hns / sns;
            snprintf(sympy_ns, sizeof sympy_ns, "%.0f", sns);
            snprintf(ratio_s, sizeof ratio_s, "%.2f", ratio);
        }
    }
    size_t tl = strlen(target);
    if (compile_target > 0) {
        int ok = med * 1e3 <= compile_target;
        tl += (size_t)snprintf(target + tl, sizeof target - tl, "%scompile <= %g ms: %s", tl ? "; " : "",
                               compile_target, ok ? "ok" : "MISSED");
        missed |= !ok;
    }
    if (ratio_target > 0 && !isnan(ratio)) {
        int ok = ratio <= ratio_target;
        tl += (size_t)snprintf(target + tl, sizeof target - tl, "%sratio <= %g: %s", tl ? "; " : "",
                               ratio_target, ok ? "ok" : "MISSED");
        missed |= !ok;
    }
    if (answer_target > 0) {
        int ok = first <= answer_target;
        snprintf(target + tl, sizeof target - tl, "%sanswered <= %g s: %s", tl ? "; " : "", answer_target,
                 ok ? "ok" : "MISSED");
        missed |= !ok;
    }
    printf("%-22s %4d %4d %4d %19s %10s %10s %7s %-10s %s\n", label, model->n, model->n - model->k, model->k,
           compile, hamel_ns, sympy_ns, ratio_s, model->tape_fast ? "symbolic" : "numeric", target);
    hamel_ws_free(ws);
    free(y0);
    free(yr);
    free(a);
    free(b);
    engine_model_release(model);
    json_decref(cj);
    return broken ? 3 : missed ? 1 : 0;
}
