/* compile_warm.c — the model compile of a case in a warm process, as the server does it
 * for a new model (issue 19, item 3: `compile_ms` of a one-shot `hamel run` within 2x
 * this figure): the case's model compiled RUNS + 1 times in one process; prints the
 * first compile's stats.compile_ms and the median of the others (wall ms, as the
 * engine reports it), with the load average.
 *
 * Usage: bench-compile_warm CASE [RUNS]   (RUNS default 50)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine.h"

#define WARM_MAX_RUNS 1000

static int warm_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* stats.compile_ms of one compile of `model`, or -1. */
static double warm_compile(const json_t *model)
{
    engine_model *m = NULL;
    json_t *problem = NULL;
    if (engine_model_compile(model, NULL, &m, &problem)) {
        json_decref(problem);
        return -1;
    }
    json_t *s = engine_model_summary(m);
    double ms = json_number_value(json_object_get(s, "compile_ms"));
    json_decref(s);
    engine_model_release(m);
    return ms;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench-compile_warm CASE [RUNS]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 50;
    runs = runs < 1 ? 1 : (runs > WARM_MAX_RUNS ? WARM_MAX_RUNS : runs);
    engine_init();
    json_error_t err;
    json_t *doc = json_load_file(argv[1], 0, &err);
    json_t *model = json_object_get(doc, "model");
    if (!model) {
        fprintf(stderr, "bench-compile_warm: %s: no model (%s)\n", argv[1], err.text);
        json_decref(doc);
        return 2;
    }
    static double ms[WARM_MAX_RUNS];
    double first = warm_compile(model);
    int n = 0;
    for (int i = 0; i < runs; i++) {
        double t = warm_compile(model);
        if (t >= 0)
            ms[n++] = t;
    }
    json_decref(doc);
    if (first < 0 || n == 0) {
        fprintf(stderr, "bench-compile_warm: the model does not compile\n");
        return 2;
    }
    qsort(ms, (size_t)n, sizeof *ms, warm_cmp);
    double med = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    printf("compile in a warm process (as the server), median of %d: %.3f ms (quartiles %.3f-%.3f; the "
           "process's first: %.3f)\n",
           n, med, ms[n / 4], ms[(3 * n) / 4], first);
    return 0;
}
