/* bench_linearize.c — the cost of /v1/linearize's pieces: one right-hand side
 * (hamel_rhs, the integrated equations), one Jacobian A = d(q', u')/d(q, u) by tangent
 * tapes (lin_jacobian, n + k directions) and the eigenvalues of A (lin_eigenvalues),
 * each the median of BENCH_RUNS timed loops of BENCH_REPS calls.
 *
 * Models: the rolling disk (Greenwood 5.3, reduced tape) upright at spin 4, and the
 * benchmark bicycle (api/examples/whipple-bicycle.json) upright at 5 m/s.
 * Run from the repository root: make build/bench-bench_linearize && build/bench-bench_linearize
 * Environment: HAMEL_CASES_DIR (default ../shared/cases), BENCH_RUNS (default 7),
 * BENCH_REPS (default 2000).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "hamel.h"
#include "linearize.h"
#include "model.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct bench {
    const engine_model *m;
    hamel_ws *w;
    double *y, *dy, *f, *A, re[128], im[128];
};

/* Median over runs of the microseconds per call of piece `which`. */
static double time_piece(struct bench *b, int which, int runs, int reps)
{
    const engine_model *m = b->m;
    int n = m->n, N = m->n + m->k;
    double t[64];
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        for (int i = 0; i < reps; i++) {
            if (which == 0)
                hamel_rhs(0.0, b->y, b->dy, b->w);
            else if (which == 1)
                lin_jacobian(m, m->param_values, 0.0, b->y, b->y + n, NULL, 0, 0, b->f, b->A, NULL, NULL);
            else
                lin_eigenvalues(N, b->A, b->re, b->im);
        }
        t[r] = 1e6 * (now() - t0) / reps;
    }
    qsort(t, runs, sizeof *t, cmp);
    return t[runs / 2];
}

static int run(const char *label, const char *file, const char *const *names, const double *values, int count,
               int runs, int reps)
{
    json_error_t err;
    json_t *doc = json_load_file(file, 0, &err);
    if (!doc) {
        fprintf(stderr, "%s: %s\n", file, err.text);
        return 1;
    }
    engine_model *m = NULL;
    json_t *problem = NULL;
    double c0 = now();
    if (engine_model_compile(json_object_get(doc, "model"), NULL, &m, &problem)) {
        fprintf(stderr, "%s: the model does not compile\n", file);
        return 1;
    }
    double compile_ms = 1e3 * (now() - c0);
    int N = m->n + m->k;
    struct bench b = {m,
                      hamel_ws_new(m, m->param_values),
                      calloc(N, sizeof(double)),
                      calloc(N, sizeof(double)),
                      calloc(N, sizeof(double)),
                      calloc((size_t)N * N, sizeof(double)),
                      {0},
                      {0}};
    for (int i = 0; i < count; i++) {
        int c = model_coord_index(m, names[i]), s = model_speed_index(m, names[i]);
        if (c >= 0)
            b.y[c] = values[i];
        else if (s >= 0)
            b.y[m->n + s] = values[i];
    }
    lin_jacobian(m, m->param_values, 0.0, b.y, b.y + m->n, NULL, 0, 0, b.f, b.A, NULL, NULL);
    double rhs = time_piece(&b, 0, runs, reps), jac = time_piece(&b, 1, runs, reps),
           eig = time_piece(&b, 2, runs, reps);
    printf("%-14s N = %2d  reduced tape: %-3s  compile %8.1f ms  rhs %7.2f us  A %8.2f us (%5.1f rhs)  "
           "eigenvalues %7.2f us\n",
           label, N, m->tape_fast ? "yes" : "no", compile_ms, rhs, jac, jac / rhs, eig);
    hamel_ws_free(b.w);
    free(b.y);
    free(b.dy);
    free(b.f);
    free(b.A);
    engine_model_release(m);
    json_decref(doc);
    return 0;
}

int main(void)
{
    engine_init();
    const char *cases = getenv("HAMEL_CASES_DIR") ? getenv("HAMEL_CASES_DIR") : "../shared/cases";
    int runs = getenv("BENCH_RUNS") ? atoi(getenv("BENCH_RUNS")) : 7;
    int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 2000;
    if (runs < 1 || runs > 64)
        runs = 7;
    if (reps < 1)
        reps = 2000;
    char disk[600];
    snprintf(disk, sizeof disk, "%s/greenwood-5.3-rolling-disk.json", cases);
    static const char *const dn[] = {"theta", "Omega"};
    static const double dv[] = {1.5707963267948966, 4.0};
    static const char *const bn[] = {"thetaRd"};
    static const double bv[] = {-5.0 / 0.3};
    int rc = run("rolling disk", disk, dn, dv, 2, runs, reps);
    rc |= run("bicycle", "api/examples/whipple-bicycle.json", bn, bv, 1, runs, reps / 10 > 0 ? reps / 10 : 1);
    return rc;
}
