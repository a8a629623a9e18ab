/* example.c — libhamelclient from start to end: a simulation, a batch (a sweep of the
 * initial spin), a linearization and an evaluation of the rolling disk, against a running
 * hamel-server. Built by `make` as build/hamelclient-example; see clients/c/README.md.
 *
 *   build/hamelclient-example [URL] [CASE]
 *
 * URL defaults to $HAMEL_URL, else http://127.0.0.1:8080 ($HAMEL_TOKEN is sent when set);
 * CASE to ../shared/cases/greenwood-5.3-rolling-disk.json (a file with "model" and
 * "simulation"). Exits 0, 1 when the service refused something, 2 on bad arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hamelclient.h"

#define EXAMPLE_CASE "../shared/cases/greenwood-5.3-rolling-disk.json"
#define EXAMPLE_RUNS 3 /* runs of the sweep */

/* Prints a failed call and returns 1. */
static int fail(const char *what, const hamelclient_error *err)
{
    char line[HAMELCLIENT_TEXT_MAX * 2];
    fprintf(stderr, "example: %s: %s\n", what, hamelclient_error_string(err, line, sizeof line));
    return 1;
}

/* Progress of a simulation or a batch, on standard error. */
static int on_progress(void *user, const char *id, const char *status, double progress)
{
    fprintf(stderr, "  %s %s %s %3.0f%%\n", (const char *)user, id, status, 100 * progress);
    return 0; /* go on waiting */
}

/* The last value of trajectory.<group>.<name> of a result. */
static double last(const json_t *result, const char *group, const char *name)
{
    json_t *series = json_object_get(json_object_get(json_object_get(result, "trajectory"), group), name);
    return json_number_value(json_array_get(series, json_array_size(series) - 1));
}

/* 1. One simulation: the case's request with its model inline. */
static int simulate(hamelclient *c, const json_t *cs, char model_id[HAMELCLIENT_MAX_ID + 1])
{
    hamelclient_error err;
    json_t *req = json_deep_copy(json_object_get(cs, "simulation"));
    json_object_set(req, "model", json_object_get(cs, "model"));
    json_t *result = NULL;
    int rc = hamelclient_simulate(c, req, on_progress, "simulation", &result, &err);
    json_decref(req);
    if (rc != HAMELCLIENT_OK)
        return fail("simulate", &err);
    snprintf(model_id, HAMELCLIENT_MAX_ID + 1, "%s", json_string_value(json_object_get(result, "model_id")));
    json_t *t = json_object_get(json_object_get(result, "trajectory"), "t");
    printf("simulate: %s, %zu samples to t = %g, x = %.6f, y = %.6f, energy drift %.2e\n",
           json_string_value(json_object_get(result, "status")), json_array_size(t),
           json_number_value(json_array_get(t, json_array_size(t) - 1)), last(result, "q", "x"),
           last(result, "q", "y"),
           json_number_value(json_object_get(json_object_get(json_object_get(result, "checks"), "energy"),
                                             "max_rel_drift")));
    hamelclient_warning w[4];
    size_t nw = hamelclient_warnings(result, w, 4);
    for (size_t i = 0; i < nw && i < 4; i++)
        printf("  warning: %s: %s\n", w[i].code, w[i].message);
    json_decref(result);
    return 0;
}

/* 2. A batch: the same model (by id now) with EXAMPLE_RUNS initial spins. */
static int batch(hamelclient *c, const json_t *cs, const char *model_id)
{
    hamelclient_error err;
    json_t *runs = json_array();
    for (int k = 0; k < EXAMPLE_RUNS; k++)
        json_array_append_new(runs, json_pack("{s:{s:{s:f}}}", "initial", "speeds", "Omega", 2.0 + k));
    json_t *req = json_pack("{s:s, s:O, s:o}", "model_id", model_id, "base",
                            json_object_get(cs, "simulation"), "runs", runs);
    json_t *out = NULL;
    int rc = hamelclient_batch(c, req, on_progress, "batch", &out, &err);
    json_decref(req);
    if (rc != HAMELCLIENT_OK)
        return fail("batch", &err);
    json_t *results = json_object_get(out, "results");
    printf("batch: %s, %zu runs\n", json_string_value(json_object_get(out, "status")),
           json_array_size(results));
    size_t i;
    json_t *line;
    json_array_foreach(results, i, line)
    {
        json_t *fin = json_object_get(line, "final");
        printf("  run %zu: %s, final x = %.6f, Omega = %.6f\n", i,
               json_string_value(json_object_get(line, "status")),
               json_number_value(json_object_get(json_object_get(fin, "q"), "x")),
               json_number_value(json_object_get(json_object_get(fin, "speeds"), "Omega")));
    }
    json_decref(out);
    return 0;
}

/* 3. The linearization about the upright disk spinning at Omega = 4: its eigenvalues. */
static int linearize(hamelclient *c, const char *model_id)
{
    hamelclient_error err;
    json_t *req = json_pack("{s:s, s:{s:f, s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}}", "model_id", model_id,
                            "q", "phi", 0.0, "theta", 1.5707963267948966, "psi", 0.0, "x", 0.0, "y", 0.0,
                            "speeds", "wd", 0.0, "thd", 0.0, "Omega", 4.0);
    json_t *out = NULL;
    int rc = hamelclient_linearize(c, req, &out, &err);
    json_decref(req);
    if (rc != HAMELCLIENT_OK)
        return fail("linearize", &err);
    json_t *point = json_array_get(json_object_get(out, "points"), 0);
    json_t *eig = json_object_get(point ? point : out, "eigenvalues");
    printf("linearize: %zu eigenvalues:", json_array_size(eig));
    size_t i;
    json_t *e;
    json_array_foreach(eig, i, e)
    {
        printf(" %.6g%+.6gi", json_number_value(json_object_get(e, "re")),
               json_number_value(json_object_get(e, "im")));
    }
    printf("\n");
    json_decref(out);
    return 0;
}

/* 4. The accelerations and constraint forces at the case's initial state. */
static int evaluate(hamelclient *c, const json_t *cs, const char *model_id)
{
    hamelclient_error err;
    json_t *state = json_object_get(json_object_get(cs, "simulation"), "initial");
    json_t *req = json_pack("{s:s, s:[O]}", "model_id", model_id, "states", state);
    json_t *out = NULL;
    int rc = hamelclient_evaluate(c, req, &out, &err);
    json_decref(req);
    if (rc != HAMELCLIENT_OK)
        return fail("evaluate", &err);
    json_t *s = json_array_get(json_object_get(out, "states"), 0);
    printf("evaluate: thd' = %.6f, multipliers:",
           json_number_value(json_object_get(json_object_get(s, "speeds_dot"), "thd")));
    const char *name;
    json_t *v;
    json_object_foreach(json_object_get(s, "multipliers"), name, v)
    {
        printf(" %s = %.6f", name, json_number_value(v));
    }
    printf("\n");
    json_decref(out);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 3 || (argc > 1 && !strcmp(argv[1], "--help"))) {
        fprintf(stderr, "usage: %s [URL] [CASE]\n", argv[0]);
        return 2;
    }
    const char *path = argc > 2 ? argv[2] : EXAMPLE_CASE;
    json_error_t jerr;
    json_t *cs = json_load_file(path, 0, &jerr);
    if (!json_is_object(json_object_get(cs, "model")) || !json_is_object(json_object_get(cs, "simulation"))) {
        fprintf(stderr, "example: %s: not a case file with \"model\" and \"simulation\" (%s)\n", path,
                jerr.text);
        json_decref(cs);
        return 2;
    }
    hamelclient *c = NULL;
    if (hamelclient_new(argc > 1 ? argv[1] : NULL, NULL, &c) != HAMELCLIENT_OK) {
        fprintf(stderr, "example: cannot make a client\n");
        json_decref(cs);
        return 2;
    }
    printf("service: %s\n", hamelclient_url(c));
    char model_id[HAMELCLIENT_MAX_ID + 1] = "";
    int rc = simulate(c, cs, model_id);
    if (rc == 0)
        rc = batch(c, cs, model_id);
    if (rc == 0)
        rc = linearize(c, model_id);
    if (rc == 0)
        rc = evaluate(c, cs, model_id);
    hamelclient_free(c);
    json_decref(cs);
    return rc;
}
