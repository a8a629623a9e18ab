/* hand_disk.c — the hand-written C process that `hamel run` of the rolling disk is
 * measured against (issue 19, item 3): reads the case file with jansson (initial state,
 * t_end, samples, tolerances), integrates the hand-written right-hand side of
 * bench/baseline.c through the engine's GSL driver, and prints t, q and the speeds of
 * every sample as JSON with 17 significant digits — the work of a one-shot run without
 * the model's compilation.
 *
 * Usage: hand_disk CASE.json   (built by scripts/bench-cli.sh with gsl and jansson only)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "baseline.h"

#define HAND_MAX_SAMPLES 100000

int main(int argc, char **argv)
{
    const baseline_system *sys = &baseline_rolling_disk;
    json_error_t jerr;
    json_t *doc = argc == 2 ? json_load_file(argv[1], 0, &jerr) : NULL;
    if (doc == NULL) {
        fprintf(stderr, "usage: hand_disk CASE.json (%s)\n", argc == 2 ? jerr.text : "no file");
        return 2;
    }
    json_t *sim = json_object_get(doc, "simulation");
    json_t *init = json_object_get(sim, "initial");
    double y0[BASELINE_MAX_DIM];
    for (int i = 0; i < sys->nq; i++)
        y0[i] = json_number_value(json_object_get(json_object_get(init, "q"), sys->q_names[i]));
    for (int i = 0; i < sys->nu; i++)
        y0[sys->nq + i] =
            json_number_value(json_object_get(json_object_get(init, "speeds"), sys->u_names[i]));
    double t0 = json_number_value(json_object_get(init, "t"));
    double t_end = json_number_value(json_object_get(sim, "t_end"));
    json_int_t n = json_integer_value(json_object_get(json_object_get(sim, "output"), "samples"));
    json_t *integ = json_object_get(sim, "integrator");
    double rtol = json_number_value(json_object_get(integ, "rtol"));
    double atol = json_number_value(json_object_get(integ, "atol"));
    json_decref(doc);
    if (n < 1 || n > HAND_MAX_SAMPLES) {
        fprintf(stderr, "hand_disk: output.samples out of range\n");
        return 2;
    }
    const int dim = sys->nq + sys->nu;
    double *times = malloc((size_t)n * sizeof *times);
    double *out = malloc((size_t)n * (size_t)dim * sizeof *out);
    baseline_params par;
    baseline_params_default(sys, &par);
    baseline_times(t0, t_end, (int)n, times);
    int rc = times && out ? baseline_run(sys, &par, t0, y0, times, (int)n, rtol, atol, out, NULL) : 1;
    if (rc == 0) {
        printf("{\"t\": [");
        for (json_int_t k = 0; k < n; k++)
            printf("%s%.17g", k ? ", " : "", times[k]);
        printf("]");
        for (int i = 0; i < dim; i++) {
            printf(", \"%s\": [", i < sys->nq ? sys->q_names[i] : sys->u_names[i - sys->nq]);
            for (json_int_t k = 0; k < n; k++)
                printf("%s%.17g", k ? ", " : "", out[k * dim + i]);
            printf("]");
        }
        printf("}\n");
    }
    free(times);
    free(out);
    return rc ? 1 : 0;
}
