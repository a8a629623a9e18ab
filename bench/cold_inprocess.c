/* cold_inprocess.c — the in-process side of issue 19's cold-request goal (a new model's
 * simulation over HTTP within 1.5x of the same compile and run in process): the requests
 * bench/http_cold.c sends (the rolling disk with a distinct mass each, so each compiles;
 * t_end 10, 1001 samples, "hamel": "none"), each compiled and run here with
 * engine_model_compile and engine_simulate_text (the result as the text the server
 * sends), in one warm process. Prints the median, 10th and 90th percentiles of compile +
 * run + result text per request.
 *
 * Usage: bench-cold_inprocess [N]   (N default 200; HAMEL_CASES_DIR as for the others)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine.h"
#include "timing.h"

/* compile + run of one request (its model inside), in ms; -1 on a failure. */
static double cold_one(json_t *req)
{
    double t0 = now_ms();
    engine_model *m = NULL;
    json_t *problem = NULL;
    if (engine_model_compile(json_object_get(req, "model"), NULL, &m, &problem)) {
        json_decref(problem);
        return -1;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = engine_simulate_text(m, req, NULL, NULL, NULL, &text, &len, &problem);
    double ms = now_ms() - t0;
    free(text);
    json_decref(problem);
    engine_model_release(m);
    return rc ? -1 : ms;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    const char *dir = getenv("HAMEL_CASES_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/greenwood-5.3-rolling-disk.json", dir && *dir ? dir : "../shared/cases");
    json_t *c = json_load_file(path, 0, NULL);
    if (!c || n < 1 || n > 100000) {
        fprintf(stderr, "cold_inprocess: cannot load %s\n", path);
        return 2;
    }
    engine_init();
    double *ms = calloc((size_t)n, sizeof *ms);
    unsigned seed = (unsigned)time(NULL);
    for (int i = -3; i < n; i++) { /* three first ones warm the process, not counted */
        json_t *req = json_deep_copy(json_object_get(c, "simulation"));
        json_t *model = json_deep_copy(json_object_get(c, "model"));
        double salt = (double)(seed % 100000) * 1e-7 + (i + 3) * 1e-9;
        json_object_set_new(json_object_get(model, "parameters"), "m", json_real(1.0 + salt));
        json_object_set_new(req, "model", model);
        json_object_set_new(req, "t_end", json_real(10.0));
        json_object_set_new(req, "output", json_pack("{s:i}", "samples", 1001));
        json_object_set_new(req, "hamel", json_string("none"));
        double t = cold_one(req);
        json_decref(req);
        if (t < 0) {
            fprintf(stderr, "cold_inprocess: request %d failed\n", i);
            return 1;
        }
        if (i >= 0)
            ms[i] = t;
    }
    double med = median(ms, n);
    printf(
        "%d cold compiles + runs in process (distinct models), 1001 samples: median %.2f ms, p10 %.2f, p90 "
        "%.2f\n",
        n, med, ms[n / 10], ms[n * 9 / 10]);
    free(ms);
    json_decref(c);
    return 0;
}
