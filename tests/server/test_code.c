/* test_code.c — generated code over HTTP against the real hamel-server (harness.h):
 * POST /v1/code answers the C file of a simulation request (text/x-c), which compiles
 * with `cc -O2 -DHAMEL_MAIN file.c -lgsl -lgslcblas -lm` and prints the trajectory the
 * server's own run of the request gives (1e-9); "lang": "python" answers the module
 * (text/x-python); GET /v1/models/{id}/code?lang= answers the model's file without a
 * baked state or a main; an unknown language, id or formulation is a problem. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static harness_server csrv;
static json_t *disk; /* greenwood-5.3 case */

static void code_setup(void)
{
    cr_assert_eq(harness_start(&csrv, NULL), 0, "the server did not start (log above)");
    char path[PATH_MAX];
    json_error_t err;
    disk = harness_case_load("greenwood-5.3-rolling-disk.json", path, sizeof path, &err);
    cr_assert_not_null(disk, "cannot load %s: %s", path, err.text);
}

static void code_teardown(void)
{
    harness_stop(&csrv);
    json_decref(disk);
    disk = NULL;
}

static harness_resp post(const char *path, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    harness_resp r;
    CURLcode rc = harness_request(&csrv, "POST", path, text, NULL, &r);
    free(text);
    json_decref(body);
    cr_assert_eq(rc, CURLE_OK, "POST %s: %s", path, curl_easy_strerror(rc));
    return r;
}

static harness_resp get(const char *path)
{
    harness_resp r;
    CURLcode rc = harness_request(&csrv, "GET", path, NULL, NULL, &r);
    cr_assert_eq(rc, CURLE_OK, "GET %s: %s", path, curl_easy_strerror(rc));
    return r;
}

static int has_error_at(const harness_resp *r, const char *path)
{
    const json_t *errs = json_object_get(r->json, "errors");
    for (size_t i = 0; i < json_array_size(errs); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(errs, i), "path")), path))
            return 1;
    return 0;
}

/* The simulation request of the case with its model, and `extra` members (stolen). */
static json_t *request(json_t *extra)
{
    json_t *req = json_deep_copy(json_object_get(disk, "simulation"));
    json_object_set(req, "model", json_object_get(disk, "model"));
    json_object_update(req, extra);
    json_decref(extra);
    return req;
}

TestSuite(server_code, .init = code_setup, .fini = code_teardown, .timeout = 180);

Test(server_code, the_c_file_compiles_and_runs_the_request_as_the_server_does)
{
    harness_resp r = post("/v1/code", request(json_pack("{s:s}", "lang", "c")));
    cr_assert_eq(r.status, 200, "%.400s", r.body);
    char ct[128];
    cr_assert_str_eq(harness_header(&r, "Content-Type", ct, sizeof ct), "text/x-c");
    cr_assert(strstr(r.body, "int hamel_rhs(") && strstr(r.body, "int hamel_jacobian(") &&
                  strstr(r.body, "int main(void)"),
              "rhs, Jacobian and main");
    char dir[] = "/tmp/hamel-code-test.XXXXXX", src[64], bin[64], cmd[1024], csv[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(src, sizeof src, "%s/gen.c", dir);
    snprintf(bin, sizeof bin, "%s/gen", dir);
    snprintf(csv, sizeof csv, "%s/out.csv", dir);
    FILE *f = fopen(src, "w");
    cr_assert_not_null(f);
    fwrite(r.body, 1, r.len, f);
    fclose(f);
    harness_resp_free(&r);
    snprintf(cmd, sizeof cmd, "cc -O2 -DHAMEL_MAIN %s -o %s -lgsl -lgslcblas -lm && %s > %s", src, bin, bin,
             csv);
    cr_assert_eq(system(cmd), 0, "compile and run: %s", cmd);

    /* the server's run of the same request */
    r = post("/v1/simulations?wait=120", request(json_object()));
    cr_assert_eq(r.status, 200, "%.400s", r.body);
    const json_t *tr = json_object_get(r.json, "trajectory");
    const json_t *ts = json_object_get(tr, "t");
    f = fopen(csv, "r");
    cr_assert_not_null(f);
    char line[4096];
    cr_assert_not_null(fgets(line, sizeof line, f));
    cr_assert_str_eq(line, "t,phi,theta,psi,x,y,wd,thd,Omega\n");
    size_t row = 0;
    const char *names[] = {"phi", "theta", "psi", "x", "y", "wd", "thd", "Omega"};
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        double t = strtod(p, &p);
        cr_assert(row < json_array_size(ts), "more rows than samples");
        cr_assert_eq(t, json_number_value(json_array_get(ts, row)), "sample time %zu", row);
        for (int i = 0; i < 8; i++) {
            cr_assert_eq(*p, ',');
            double v = strtod(p + 1, &p);
            const json_t *series = json_object_get(json_object_get(tr, i < 5 ? "q" : "speeds"), names[i]);
            double ref = json_number_value(json_array_get(series, row));
            cr_assert(fabs(v - ref) <= 1e-9 * fmax(1.0, fabs(ref)), "%s at t = %g: %.17g vs %.17g", names[i],
                      t, v, ref);
        }
        row++;
    }
    fclose(f);
    cr_assert_eq(row, json_array_size(ts), "one row per sample");
    harness_resp_free(&r);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(server_code, python_and_the_model_file_without_a_state)
{
    harness_resp r = post("/v1/code", request(json_pack("{s:s}", "lang", "python")));
    cr_assert_eq(r.status, 200, "%.400s", r.body);
    char ct[128];
    cr_assert_str_eq(harness_header(&r, "Content-Type", ct, sizeof ct), "text/x-python");
    cr_assert(strstr(r.body, "\ndef rhs(t, y, p=None):") && strstr(r.body, "\ndef jacobian(t, y, p=None):") &&
                  strstr(r.body, "\nSTATE = [") && strstr(r.body, "\nPARAMETERS = {") &&
                  strstr(r.body, "\ndef initial_state():") && strstr(r.body, "\ndef main():"),
              "rhs, jacobian, STATE, PARAMETERS, initial_state, main");
    harness_resp_free(&r);

    /* the model by id: no baked state, no main */
    r = post("/v1/models", json_incref(json_object_get(disk, "model")));
    cr_assert(r.status == 201 || r.status == 200, "%.400s", r.body);
    char path[256];
    snprintf(path, sizeof path, "/v1/models/%s/code?lang=python",
             json_string_value(json_object_get(r.json, "model_id")));
    harness_resp_free(&r);
    r = get(path);
    cr_assert_eq(r.status, 200, "%.400s", r.body);
    cr_assert(strstr(r.body, "\ndef rhs(") && strstr(r.body, "\ndef initial_state(q, speeds):") &&
                  !strstr(r.body, "def main(") && !strstr(r.body, "TIMES"),
              "the model's module without a state");
    harness_resp_free(&r);
    char *q = strchr(path, '?');
    snprintf(q, sizeof path - (size_t)(q - path), "?lang=c");
    r = get(path);
    cr_assert_eq(r.status, 200, "%.400s", r.body);
    cr_assert(strstr(r.body, "int hamel_rhs(") && !strstr(r.body, "HAMEL_MAIN"), "C without a main");
    harness_resp_free(&r);
    snprintf(q, sizeof path - (size_t)(q - path), "?lang=fortran");
    r = get(path);
    cr_assert_eq(r.status, 422, "%.400s", r.body);
    cr_assert(has_error_at(&r, "lang"), "%s", r.body);
    harness_resp_free(&r);
}

Test(server_code, problems_name_the_field)
{
    harness_resp r =
        get("/v1/models/sha256:0000000000000000000000000000000000000000000000000000000000000000/code");
    cr_assert_eq(r.status, 404, "%.400s", r.body);
    harness_resp_free(&r);
    r = post("/v1/code", request(json_pack("{s:s}", "formulation", "multipliers")));
    cr_assert_eq(r.status, 422, "%.400s", r.body);
    cr_assert(has_error_at(&r, "formulation"), "%s", r.body);
    harness_resp_free(&r);
    r = post("/v1/code", request(json_pack("{s:i}", "lang", 3)));
    cr_assert_eq(r.status, 422, "%.400s", r.body);
    cr_assert(has_error_at(&r, "lang"), "%s", r.body);
    harness_resp_free(&r);
    r = post("/v1/code", request(json_pack("{s:s, s:s}", "lang", "c", "t_end", "soon")));
    cr_assert_eq(r.status, 422, "%.400s", r.body);
    cr_assert(has_error_at(&r, "t_end"), "%s", r.body);
    harness_resp_free(&r);
}
