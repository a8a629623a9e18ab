/* hand_sweep.c — the hand-written C loop a batch sweep is measured against (issue 19,
 * item 1): RUNS runs of the shared rolling-disk case (its initial state, t_end, samples
 * and tolerances read with jansson), run i starting with Omega = OMEGA0 + i * STEP, each
 * integrated with the hand-written right-hand side of bench/baseline.c through the
 * engine's GSL driver, split over PROCS forked processes (run i in process i % PROCS).
 * Prints the wall time of the whole sweep (fork to the last child's exit) in seconds, the
 * CPU time of the processes (user + system, seconds) and a checksum of the final states
 * (the sum of every run's last state vector).
 *
 * Usage: hand_sweep CASE.json RUNS PROCS OMEGA0 STEP
 * (built by scripts/bench-sweep.sh with gsl and jansson only)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "baseline.h"

#define HAND_MAX_SAMPLES 100000

static double hand__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const baseline_system *sys = &baseline_rolling_disk;
    json_error_t jerr;
    json_t *doc = argc == 6 ? json_load_file(argv[1], 0, &jerr) : NULL;
    if (doc == NULL) {
        fprintf(stderr, "usage: hand_sweep CASE.json RUNS PROCS OMEGA0 STEP (%s)\n",
                argc == 6 ? jerr.text : "arguments");
        return 2;
    }
    long runs = atol(argv[2]), procs = atol(argv[3]);
    double omega0 = atof(argv[4]), step = atof(argv[5]);
    json_t *sim = json_object_get(doc, "simulation");
    json_t *init = json_object_get(sim, "initial");
    double y0[BASELINE_MAX_DIM];
    int omega = -1;
    for (int i = 0; i < sys->nq; i++)
        y0[i] = json_number_value(json_object_get(json_object_get(init, "q"), sys->q_names[i]));
    for (int i = 0; i < sys->nu; i++) {
        y0[sys->nq + i] =
            json_number_value(json_object_get(json_object_get(init, "speeds"), sys->u_names[i]));
        if (!strcmp(sys->u_names[i], "Omega"))
            omega = sys->nq + i;
    }
    double t0 = json_number_value(json_object_get(init, "t"));
    double t_end = json_number_value(json_object_get(sim, "t_end"));
    json_int_t n = json_integer_value(json_object_get(json_object_get(sim, "output"), "samples"));
    json_t *integ = json_object_get(sim, "integrator");
    double rtol = json_number_value(json_object_get(integ, "rtol"));
    double atol = json_number_value(json_object_get(integ, "atol"));
    json_decref(doc);
    if (n < 1 || n > HAND_MAX_SAMPLES || runs < 1 || procs < 1 || omega < 0) {
        fprintf(stderr, "hand_sweep: bad samples, runs or processes\n");
        return 2;
    }
    const int dim = sys->nq + sys->nu;
    double *times = malloc((size_t)n * sizeof *times);
    double *out = malloc((size_t)n * (size_t)dim * sizeof *out);
    if (!times || !out)
        return 1;
    baseline_params par;
    baseline_params_default(sys, &par);
    baseline_times(t0, t_end, (int)n, times);
    int fds[2];
    if (pipe(fds) != 0)
        return 1;
    double start = hand__now();
    for (long p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid > 0)
            continue;
        close(fds[0]);
        double sum = 0;
        int rc = 0;
        for (long i = p; i < runs && rc == 0; i += procs) {
            double y[BASELINE_MAX_DIM];
            memcpy(y, y0, sizeof y);
            y[omega] = omega0 + step * (double)i;
            rc = baseline_run(sys, &par, t0, y, times, (int)n, rtol, atol, out, NULL);
            for (int k = 0; k < dim; k++)
                sum += out[(n - 1) * dim + k];
        }
        if (write(fds[1], &sum, sizeof sum) != (ssize_t)sizeof sum)
            rc = 1;
        _exit(rc ? 1 : 0);
    }
    close(fds[1]);
    int failed = 0;
    for (long p = 0; p < procs; p++) {
        int status = 0;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = 1;
    }
    double seconds = hand__now() - start;
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                 (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    double total = 0, part;
    while (read(fds[0], &part, sizeof part) == (ssize_t)sizeof part)
        total += part;
    printf("%.6f %.6f %.17g\n", seconds, cpu, total);
    free(times);
    free(out);
    return failed;
}
