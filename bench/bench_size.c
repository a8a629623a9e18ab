/* bench_size.c — one model past 64 coordinates (issue 19, item 6): what its compile and
 * its run cost, for scripts/bench-scale.sh to set side by side as n grows.
 *
 * Usage: bench-bench_size [--runs R] [--budget S] CASE.json
 *
 * Compiles the case's model once with the default limits (engine_default_limits, whose
 * 2 s compile budget the issue asks to hold at n = 200), without a code cache (the first
 * tier is made during the compile, as in the CLI), and measures the compile's process
 * CPU time and wall time and the process's peak resident set afterwards (getrusage: the
 * compile's peak, as nothing else of size has run; glibc's mmap threshold is fixed, so
 * that the figure does not depend on what the allocator keeps). Then it runs the case's simulation
 * (engine_simulate) R times (default 3) and keeps the best run by this thread's CPU time
 * (other load on the shared machine takes the CPU away without being counted), divided
 * by the run's accepted steps and by its right-hand side evaluations. One line of
 * key=value pairs is printed:
 *   n=200 compile_cpu_ms=... compile_wall_ms=... rss_mb=... steps=... evals=...
 *   run_cpu_ms=... us_per_step=... us_per_eval=...
 * --budget S widens the compile's time budget (max_compile_seconds) to S seconds, to
 * measure a compile that the default budget stops on a loaded machine.
 * Exit status 0; 2 on bad input; 3 when the compile or the run fails (the problem
 * document on stderr: a compile past the budget says so).
 */
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine.h"
#include "model.h"
#include "timing.h"

static double clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* The problem document of a failed call on stderr, then exit status 3. */
static int fail(const char *what, const char *file, json_t *problem)
{
    char *p = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
    fprintf(stderr, "bench_size: %s: %s failed: %.600s\n", file, what, p ? p : "(no problem document)");
    free(p);
    json_decref(problem);
    return 3;
}

int main(int argc, char **argv)
{
    const char *file = NULL;
    int runs = 3;
    double budget = 0.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--budget") == 0 && i + 1 < argc)
            budget = atof(argv[++i]);
        else if (argv[i][0] != '-' && !file)
            file = argv[i];
        else
            file = NULL, i = argc;
    }
    if (!file || runs < 1) {
        fprintf(stderr, "usage: bench-bench_size [--runs R] [--budget S] CASE.json\n");
        return 2;
    }
    json_error_t err;
    json_t *cj = json_load_file(file, 0, &err);
    if (!cj || !json_is_object(json_object_get(cj, "model")) ||
        !json_is_object(json_object_get(cj, "simulation"))) {
        fprintf(stderr, "bench_size: %s: not a case with \"model\" and \"simulation\" (%s)\n", file,
                cj ? "" : err.text);
        json_decref(cj);
        return 2;
    }
    /* blocks of 128 KB and more straight from mmap and back at free: glibc's threshold
     * otherwise grows after the first such free, and the heap keeps what the next ones
     * leave (at n = 150 the peak read 43 MB with it, 27 MB without; 36 and 37 at 200) */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    engine_init();
    engine_limits lim = engine_default_limits;
    if (budget > 0)
        lim.max_compile_seconds = budget;
    engine_model *m = NULL;
    json_t *problem = NULL;
    double c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID), w0 = now_ms();
    int rc = engine_model_compile(json_object_get(cj, "model"), &lim, &m, &problem);
    double compile_cpu = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0, compile_wall = now_ms() - w0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (rc != 0) {
        json_decref(cj);
        return fail("the compile", file, problem);
    }
    double best = -1.0;
    long steps = 0, evals = 0;
    for (int r = 0; r < runs; r++) {
        json_t *res = NULL;
        double t0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
        rc = engine_simulate(m, json_object_get(cj, "simulation"), &lim, NULL, &res, &problem);
        double cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID) - t0;
        if (rc != 0) {
            json_decref(res);
            engine_model_release(m);
            json_decref(cj);
            return fail("the run", file, problem);
        }
        const json_t *st = json_object_get(res, "stats");
        if (best < 0 || cpu < best) {
            best = cpu;
            steps = (long)json_integer_value(json_object_get(st, "steps"));
            evals = (long)json_integer_value(json_object_get(st, "rhs_evals"));
        }
        json_decref(res);
    }
    printf("n=%d compile_cpu_ms=%.1f compile_wall_ms=%.1f rss_mb=%.1f steps=%ld evals=%ld run_cpu_ms=%.2f "
           "us_per_step=%.1f us_per_eval=%.2f\n",
           m->n, compile_cpu, compile_wall, ru.ru_maxrss / 1024.0, steps, evals, best,
           steps ? best * 1e3 / (double)steps : 0.0, evals ? best * 1e3 / (double)evals : 0.0);
    engine_model_release(m);
    json_decref(cj);
    return 0;
}
