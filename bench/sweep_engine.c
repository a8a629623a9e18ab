/* sweep_engine.c — the runs of a batch sweep through the engine alone, in one process
 * (issue 19, item 1): where the service's CPU per run goes, without HTTP, the job pool,
 * the engine worker processes or the store.
 *
 * RUNS runs of the case file's simulation with initial speed Omega = OMEGA0 + i * STEP,
 * each through engine_simulate_text (the result's JSON text, as an engine worker writes
 * it for the service), on the native tier (a code cache directory of its own; the bench
 * waits, untimed, until the model runs natively, as a long sweep does after its first
 * runs). Prints the process's CPU seconds for the runs (user + system) and the sum of the
 * runs' stats.integrate_ms in seconds. scripts/bench-sweep.sh runs it beside the hand
 * loop (bench/hand_sweep.c) and the service.
 *
 * Usage: bench-sweep_engine CASE.json RUNS OMEGA0 STEP
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "engine.h"
#include "native.h"
#include "timing.h"

#define SWEEP_NATIVE_WAIT_MS 120000.0

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

/* Runs req with Omega = omega; adds its integrate_ms to *integ. Returns its tier ("" on
 * failure) in tier[16]. */
static int run_one(const engine_model *m, json_t *req, const json_t *head, double omega, double *integ,
                   char tier[16])
{
    json_object_set_new(json_object_get(json_object_get(req, "initial"), "speeds"), "Omega",
                        json_real(omega));
    char *text = NULL;
    size_t len = 0;
    json_t *problem = NULL;
    int rc = engine_simulate_text(m, req, NULL, NULL, head, &text, &len, &problem);
    tier[0] = '\0';
    if (rc == 0) { /* read from the text: parsing it would cost more than a run */
        const char *im = strstr(text, "\"integrate_ms\":"), *ct = strstr(text, "\"code_tier\":\"");
        if (im)
            *integ += strtod(im + 15, NULL) * 1e-3;
        if (ct)
            snprintf(tier, 16, "%.*s", (int)strcspn(ct + 13, "\""), ct + 13);
    }
    free(text);
    json_decref(problem);
    return rc;
}

int main(int argc, char **argv)
{
    json_error_t err;
    json_t *c = argc == 5 ? json_load_file(argv[1], 0, &err) : NULL;
    if (!c) {
        fprintf(stderr, "usage: bench-sweep_engine CASE.json RUNS OMEGA0 STEP (%s)\n",
                argc == 5 ? err.text : "arguments");
        return 2;
    }
    long runs = atol(argv[2]);
    double omega0 = atof(argv[3]), step = atof(argv[4]);
    char cache[] = "/tmp/hamel-bench-sweep-XXXXXX";
    if (!mkdtemp(cache) || runs < 1) {
        fprintf(stderr, "bench-sweep_engine: no cache directory, or no runs\n");
        return 2;
    }
    engine_init();
    engine_code_cache(cache);
    engine_model *m = NULL;
    json_t *problem = NULL;
    if (engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem) != 0) {
        fprintf(stderr, "bench-sweep_engine: the model does not compile\n");
        return 2;
    }
    json_t *req = json_deep_copy(json_object_get(c, "simulation"));
    json_t *head = json_pack("{s:s, s:s, s:s, s:f}", "job_id", "00000000000000000000000000000000", "status",
                             "done", "model_id", engine_model_id(m), "progress", 1.0);
    /* untimed: until the model runs on the native tier */
    char tier[16] = "";
    double integ = 0, a = now_ms();
    while (strcmp(tier, "native") != 0 && now_ms() - a < SWEEP_NATIVE_WAIT_MS) {
        if (run_one(m, req, head, omega0, &integ, tier) != 0) {
            fprintf(stderr, "bench-sweep_engine: a run failed\n");
            return 1;
        }
        usleep(2000);
    }
    integ = 0;
    double c0 = cpu_seconds();
    int failed = 0;
    for (long i = 0; i < runs; i++)
        failed |= run_one(m, req, head, omega0 + (double)i * step, &integ, tier) != 0;
    double cpu = cpu_seconds() - c0;
    printf("%.6f %.6f %s\n", cpu, integ, tier);
    json_decref(req);
    json_decref(head);
    json_decref(c);
    engine_model_release(m);
    engine_shutdown();
    char cmd[sizeof cache + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache);
    if (system(cmd) != 0)
        fprintf(stderr, "bench-sweep_engine: %s was not removed\n", cache);
    return failed;
}
