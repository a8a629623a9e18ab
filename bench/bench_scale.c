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
 *   --native DIR            also build the optimizing tier (engine/native.h: the generated
 *                           C compiled by cc -O2 into DIR) synchronously after the compiles,
 *                           and time its right-hand side beside tcc's; the --ratio-target
 *                           is then judged on the native tier (the one later runs use)
 *   --build-target MS       the native build's compiler CPU time budget (user + system
 *                           of the compiler processes, cc_cpu_ms; needs --native)
 *   --sympy-random-state    check the SymPy C at the random state only and time every
 *                           right-hand side there (whipple-hand: the SymPy C's symbolic
 *                           pivot sin(yaw) vanishes at the case's yaw = 0, see
 *                           gen_sympy_c.py; the engine is still checked at both states
 *                           against tcc)
 *   --label TEXT            the row label (default: the model name)
 *   --header                print the table header first
 *
 * It compiles the case's model with the default limits (engine_default_limits) once,
 * then again while the total stays under a second (at most 21 times), and reports the
 * first and median compile times. With a model, it evaluates hamel_rhs (the integrator's
 * right-hand side, engine/hamel.h) at the case's initial state and at a random state
 * near it; with --sympy, it checks that both right-hand sides agree to 1e-9 relative
 * (max-norm) at both states before timing (the native tier's too), then times each as
 * the best of 5 loops of about 0.1 s of this thread's CPU time (so that other load on the
 * shared machine, which takes the CPU away, is not counted), the loops of all interleaved. The compiles run
 * without a code cache, so the first tier (tcc) is made synchronously as in the CLI;
 * with --native the cache directory is set afterwards and the model queued for the
 * native build (native_schedule) and waited for (native_wait), the wall time of which
 * is the build_ms column. One row is printed; the exit status is
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
#include <sys/resource.h>
#include <time.h>

#include "engine.h"
#include "hamel.h"
#include "model.h"
#include "native.h"
#include "timing.h"

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

/* This thread's CPU time, seconds: the right-hand side loops. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int sympy_adapter(double t, const double *y, double *dydt, void *ctx)
{
    sympy_fn f = *(sympy_fn *)ctx;
    return f(t, y, dydt);
}

/* One timed loop of iters calls of f from state y0: ns per call. */
static double loop_ns(rhs_fn f, void *ctx, const double *y0, double *y, double *dydt, int dim, long iters)
{
    double start = cpu_s();
    memcpy(y, y0, (size_t)dim * sizeof *y);
    for (long i = 0; i < iters; i++) {
        f(0.0, y, dydt, ctx);
        y[0] = y0[0] + 1e-15 * dydt[dim - 1]; /* a data dependence, so no call is skipped */
    }
    return (cpu_s() - start) * 1e9 / (double)iters;
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

/* ns per call of each of the nf functions f[i] (ctx[i]) at state y0: the best of
 * SCALE_ROUNDS loops of about SCALE_LOOP_SECONDS each, the loops of all interleaved so
 * that other load on the machine falls on each alike. */
static void time_rhs(int nf, rhs_fn *f, void **ctx, const double *y0, int dim, double *ns_out)
{
    double *y = malloc((size_t)dim * sizeof *y), *dydt = malloc((size_t)dim * sizeof *dydt);
    long iters[4];
    for (int i = 0; i < nf; i++) {
        iters[i] = loop_iters(f[i], ctx[i], y0, y, dydt, dim);
        ns_out[i] = INFINITY;
    }
    for (int rep = 0; rep < SCALE_ROUNDS; rep++)
        for (int i = 0; i < nf; i++) {
            double ns = loop_ns(f[i], ctx[i], y0, y, dydt, dim, iters[i]);
            if (ns < ns_out[i])
                ns_out[i] = ns;
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
    const char *sympy_so = NULL, *file = NULL, *label = NULL, *native_dir = NULL;
    double compile_target = 0, ratio_target = 0, answer_target = 0, build_target = 0;
    int header = 0, missed = 0, broken = 0, sympy_random = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sympy") == 0 && i + 1 < argc)
            sympy_so = argv[++i];
        else if (strcmp(argv[i], "--compile-target") == 0 && i + 1 < argc)
            compile_target = atof(argv[++i]);
        else if (strcmp(argv[i], "--ratio-target") == 0 && i + 1 < argc)
            ratio_target = atof(argv[++i]);
        else if (strcmp(argv[i], "--build-target") == 0 && i + 1 < argc)
            build_target = atof(argv[++i]);
        else if (strcmp(argv[i], "--answer-target") == 0 && i + 1 < argc)
            answer_target = atof(argv[++i]);
        else if (strcmp(argv[i], "--native") == 0 && i + 1 < argc)
            native_dir = argv[++i];
        else if (strcmp(argv[i], "--sympy-random-state") == 0)
            sympy_random = 1;
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
        printf("%-22s %4s %4s %4s %19s %8s %9s %9s %12s %9s %7s %7s %-9s %s\n", "model", "n", "m", "k",
               "compile_ms first/med", "tcc_ns", "native_ns", "build_ms", "cc_cpu_ms/MB", "sympyC_ns",
               "tcc/C", "nat/C", "reduction", "target");
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

    /* the first tier's workspace, made before the native code exists (a workspace takes
     * the native code when the model has it, native_acquire) */
    hamel_ws *ws = hamel_ws_new(model, model->param_values);

    /* ---- the optimizing tier, built now (the server builds it once a model is hot) ---- */
    double build_ms = NAN, cc_cpu_ms = NAN, cc_mb = NAN;
    int native_state = NATIVE_NONE;
    if (native_dir != NULL && model->tape_fast != NULL) {
        if (engine_code_cache(native_dir) != 0) {
            fprintf(stderr, "bench_scale: cannot use %s as the code cache\n", native_dir);
            return 2;
        }
        /* the compiler's CPU time: the children this process waited for (only the build's) */
        struct rusage r0, r1;
        getrusage(RUSAGE_CHILDREN, &r0);
        double start = now_s();
        native_schedule(model);
        native_state = native_wait(model, NATIVE_MAX_SECONDS + 5);
        build_ms = (now_s() - start) * 1e3;
        getrusage(RUSAGE_CHILDREN, &r1);
        cc_cpu_ms = ((double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
                     (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
                     1e-6 * (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec -
                                     r0.ru_stime.tv_usec)) *
                    1e3;
        cc_mb = (double)r1.ru_maxrss / 1024.0; /* the largest child's peak (KB on Linux) */
    }

    /* ---- right-hand sides ---- */
    const int dim = model->n + model->k;
    double *y0 = calloc((size_t)dim, sizeof *y0), *yr = calloc((size_t)dim, sizeof *yr);
    double *a = calloc((size_t)dim, sizeof *a), *b = calloc((size_t)dim, sizeof *b);
    hamel_ws *wn = native_state == NATIVE_READY ? hamel_ws_new(model, model->param_values) : NULL;
    if (wn != NULL && strcmp(hamel_ws_tier(wn), "native") != 0) {
        hamel_ws_free(wn); /* built, but not taken (cannot happen with the default parameters) */
        wn = NULL;
    }
    char tcc_ns[24] = "-", native_ns[24] = "-", build_s[24] = "-", cc_s[32] = "-", sympy_ns[24] = "-",
         tratio_s[24] = "-", nratio_s[24] = "-", target[240] = "";
    double tratio = NAN, nratio = NAN;
    int state_ok = initial_state(model, cj, y0) == 0;
    if (native_dir != NULL && model->tape_fast != NULL) {
        snprintf(build_s, sizeof build_s, "%s%.0f", wn ? "" : "fail ", build_ms);
        snprintf(cc_s, sizeof cc_s, "%.0f/%.0f", cc_cpu_ms, cc_mb);
    } else if (native_dir != NULL)
        snprintf(build_s, sizeof build_s, "n/a"); /* numeric path: no tier to build */

    if (ws != NULL && strcmp(hamel_ws_tier(ws), "native") == 0) {
        fprintf(stderr, "bench_scale: the first tier's workspace runs native code\n");
        return 2;
    }
    if (!state_ok && ws != NULL && answer_target > 0) {
        /* a hostile model that compiled: its answer is what is judged */
        snprintf(target, sizeof target, "compiled (no initial state: right-hand side not timed)");
    } else if (!state_ok || ws == NULL) {
        snprintf(target, sizeof target, "no initial state [q, speeds] in the case");
        broken = 1;
    } else {
        srand(12345);
        for (int i = 0; i < dim; i++)
            yr[i] = y0[i] + 0.2 * ((double)rand() / RAND_MAX - 0.5);
        sympy_fn sf = NULL;
        if (sympy_so != NULL) {
            void *dl = dlopen(sympy_so, RTLD_NOW | RTLD_LOCAL);
            sf = dl ? (sympy_fn)(uintptr_t)dlsym(dl, "sympy_rhs") : NULL;
            if (sf == NULL) {
                snprintf(target, sizeof target, "cannot load %s: %s; ", sympy_so, dlerror());
                broken = 1;
            }
        }
        /* every right-hand side against the reference (SymPy C, else tcc's) at both states */
        double worst_n = 0, worst_s = 0;
        for (int s = 0; s < 2; s++) {
            const double *y = s == 0 ? y0 : yr;
            int r1 = hamel_rhs(0.0, y, a, ws);
            if (sf != NULL && !(sympy_random && s == 0)) {
                int r2 = sf(0.0, y, b);
                double d = (r1 == 0 && r2 == 0) ? rel_diff(a, b, dim) : INFINITY;
                if (!(d <= SCALE_AGREE_REL) && getenv("BENCH_SCALE_DEBUG") != NULL)
                    for (int i = 0; i < dim; i++)
                        fprintf(stderr, "state %d: y[%d] = %.17g  hamel %.17g  sympy %.17g\n", s, i, y[i],
                                a[i], b[i]);
                if (!(d <= worst_s))
                    worst_s = d;
            } else {
                memcpy(b, a, (size_t)dim * sizeof *b);
            }
            if (wn != NULL) {
                double d = hamel_rhs(0.0, y, a, wn) == 0 ? rel_diff(a, b, dim) : INFINITY;
                if (!(d <= worst_n))
                    worst_n = d;
            }
        }
        size_t tl = strlen(target);
        if (!(worst_s <= SCALE_AGREE_REL)) {
            snprintf(target + tl, sizeof target - tl, "RHS DISAGREE: tcc vs SymPy C %.1e relative; ",
                     worst_s);
            broken = 1;
            sf = NULL;
        }
        tl = strlen(target);
        if (!(worst_n <= SCALE_AGREE_REL)) {
            snprintf(target + tl, sizeof target - tl, "RHS DISAGREE: native vs %s %.1e relative; ",
                     sf ? "SymPy C" : "tcc", worst_n);
            broken = 1;
            hamel_ws_free(wn);
            wn = NULL;
        }
        rhs_fn fns[3] = {hamel_rhs};
        void *ctxs[3] = {ws};
        double ns[3];
        int nf = 1, in = -1, is = -1;
        if (wn != NULL) {
            in = nf;
            fns[nf] = hamel_rhs;
            ctxs[nf++] = wn;
        }
        if (sf != NULL) {
            is = nf;
            fns[nf] = sympy_adapter;
            ctxs[nf++] = &sf;
        }
        time_rhs(nf, fns, ctxs, sympy_random ? yr : y0, dim, ns);
        snprintf(tcc_ns, sizeof tcc_ns, "%.0f", ns[0]);
        if (in >= 0)
            snprintf(native_ns, sizeof native_ns, "%.0f", ns[in]);
        if (is >= 0) {
            tratio = ns[0] / ns[is];
            snprintf(sympy_ns, sizeof sympy_ns, "%.0f", ns[is]);
            snprintf(tratio_s, sizeof tratio_s, "%.2f", tratio);
            if (in >= 0) {
                nratio = ns[in] / ns[is];
                snprintf(nratio_s, sizeof nratio_s, "%.2f", nratio);
            }
        }
    }
    size_t tl = strlen(target);
    if (compile_target > 0) {
        int ok = med * 1e3 <= compile_target;
        tl += (size_t)snprintf(target + tl, sizeof target - tl, "%scompile <= %g ms: %s", tl ? "; " : "",
                               compile_target, ok ? "ok" : "MISSED");
        missed |= !ok;
    }
    if (ratio_target > 0 && !(isnan(tratio) && isnan(nratio))) {
        /* judged on the tier later runs use: native when it was built */
        double r = isnan(nratio) ? tratio : nratio;
        int ok = r <= ratio_target;
        tl += (size_t)snprintf(target + tl, sizeof target - tl, "%s%s/C <= %g: %s", tl ? "; " : "",
                               isnan(nratio) ? "tcc" : "native", ratio_target, ok ? "ok" : "MISSED");
        missed |= !ok;
    }
    if (build_target > 0 && !isnan(cc_cpu_ms)) {
        int ok = cc_cpu_ms <= build_target && wn != NULL;
        tl += (size_t)snprintf(target + tl, sizeof target - tl, "%snative build cc CPU <= %g ms: %s",
                               tl ? "; " : "", build_target, ok ? "ok" : "MISSED");
        missed |= !ok;
    }
    if (answer_target > 0) {
        int ok = first <= answer_target;
        snprintf(target + tl, sizeof target - tl, "%sanswered <= %g s: %s", tl ? "; " : "", answer_target,
                 ok ? "ok" : "MISSED");
        missed |= !ok;
    }
    printf("%-22s %4d %4d %4d %19s %8s %9s %9s %12s %9s %7s %7s %-9s %s\n", label, model->n,
           model->n - model->k, model->k, compile, tcc_ns, native_ns, build_s, cc_s, sympy_ns, tratio_s,
           nratio_s, model->tape_fast ? "symbolic" : "numeric", target);
    hamel_ws_free(wn);
    hamel_ws_free(ws);
    free(y0);
    free(yr);
    free(a);
    free(b);
    engine_model_release(model);
    engine_shutdown();
    json_decref(cj);
    return broken ? 3 : missed ? 1 : 0;
}
