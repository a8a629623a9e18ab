/* test_native.c — the optimizing code tier (engine/native.h): a model compiled with a
 * code cache gets native code in the background, later runs use it (stats.code_tier
 * "native") and agree with the tcc tier; a run with other parameters stays on tcc; a
 * second compile of the same model loads the cached object; a failing compiler leaves
 * the model on tcc. Each test uses its own fresh cache directory.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "model.h"
#include "native.h"

static const char *nt_cases_dir(void)
{
    const char *d = getenv("HAMEL_CASES");
    return d && *d ? d : "../shared/cases";
}

static json_t *nt_case(const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", nt_cases_dir(), file);
    json_error_t err;
    json_t *c = json_load_file(path, 0, &err);
    cr_assert_not_null(c, "%s: %s", path, err.text);
    return c;
}

static char nt_dir[256];

static void nt_fresh_dir(void)
{
    snprintf(nt_dir, sizeof nt_dir, "/tmp/hamel-native-test-%ld-XXXXXX", (long)getpid());
    cr_assert_not_null(mkdtemp(nt_dir));
    cr_assert_eq(engine_code_cache(nt_dir), 0);
}

static int nt_count_so(void)
{
    DIR *d = opendir(nt_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".so") && e->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return n;
}

static void nt_cleanup(void)
{
    engine_code_cache(NULL);
    unsetenv("HAMEL_CC");
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", nt_dir);
    cr_expect_eq(system(cmd), 0);
}

static json_t *nt_run(engine_model *m, const json_t *req, const char *tier)
{
    json_t *res = NULL, *problem = NULL;
    int rc = engine_simulate(m, req, NULL, NULL, &res, &problem);
    cr_assert_eq(rc, 0, "simulate: %s", problem ? json_dumps(problem, 0) : "");
    const char *got = json_string_value(json_object_get(json_object_get(res, "stats"), "code_tier"));
    cr_assert_not_null(got, "stats.code_tier is reported");
    if (tier)
        cr_assert_str_eq(got, tier);
    return res;
}

/* Largest relative difference of the q and speeds series of two results. */
static double nt_diff(const json_t *a, const json_t *b)
{
    double worst = 0;
    const char *groups[] = {"q", "speeds"};
    for (int g = 0; g < 2; g++) {
        const json_t *ga = json_object_get(json_object_get(a, "trajectory"), groups[g]);
        const json_t *gb = json_object_get(json_object_get(b, "trajectory"), groups[g]);
        const char *key;
        const json_t *sa;
        json_object_foreach((json_t *)ga, key, sa)
        {
            const json_t *sb = json_object_get(gb, key);
            cr_assert_eq(json_array_size(sa), json_array_size(sb));
            for (size_t i = 0; i < json_array_size(sa); i++) {
                double x = json_number_value(json_array_get(sa, i)),
                       y = json_number_value(json_array_get(sb, i));
                double d = fabs(x - y) / (fabs(x) > 1 ? fabs(x) : 1);
                if (!(d <= worst))
                    worst = d;
            }
        }
    }
    return worst;
}

Test(native, disk_runs_native_and_agrees_with_tcc, .timeout = 120)
{
    json_t *c = nt_case("greenwood-5.3-rolling-disk.json");
    json_t *req = json_object_get(c, "simulation");
    /* first without the tier: the reference on tcc */
    engine_model *m0 = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m0, &problem), 0);
    json_t *ref = nt_run(m0, req, "tcc");

    nt_fresh_dir();
    engine_model *m = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    json_decref(nt_run(m, req, "tcc"));
    cr_expect_eq(atomic_load(&m->native_state), NATIVE_NONE, "one short run does not make a model hot");
    json_decref(nt_run(m, req, NULL)); /* the second run does */
    cr_assert_eq(native_wait(m, 90), NATIVE_READY, "the native build finished");
    cr_assert_eq(nt_count_so(), 1, "one shared object in the cache");
    json_t *res = nt_run(m, req, "native");
    double d = nt_diff(ref, res);
    cr_expect_leq(d, 1e-12, "native and tcc trajectories differ by %g", d);

    /* other parameters: the folded code does not apply */
    json_t *req2 = json_deep_copy(req);
    json_object_set_new(req2, "parameters", json_pack("{s:f}", "r", 0.31));
    json_t *res2 = nt_run(m, req2, "tcc");

    /* a second compile of the same model loads the cached object (no second file) */
    engine_model *m2 = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m2, &problem), 0);
    native_schedule(m2);
    cr_assert_eq(native_wait(m2, 30), NATIVE_READY);
    cr_expect_eq(nt_count_so(), 1);
    json_t *res3 = nt_run(m2, req, "native");
    cr_expect_leq(nt_diff(res, res3), 0.0, "the cached code gives the same numbers");

    /* a workspace keeps its code after the model's other users are gone */
    json_decref(res3);
    json_decref(res2);
    json_decref(req2);
    json_decref(res);
    json_decref(ref);
    engine_model_release(m2);
    engine_model_release(m);
    engine_model_release(m0);
    json_decref(c);
    nt_cleanup();
}

Test(native, failing_compiler_keeps_tcc, .timeout = 60)
{
    nt_fresh_dir();
    setenv("HAMEL_CC", "false", 1);
    json_t *c = nt_case("greenwood-5.2-dumbbell-hamel.json");
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    native_schedule(m);
    cr_assert_eq(native_wait(m, 30), NATIVE_FAILED);
    json_decref(nt_run(m, json_object_get(c, "simulation"), "tcc"));
    cr_expect_eq(nt_count_so(), 0, "nothing left in the cache");
    setenv("HAMEL_CC", "/nonexistent/cc", 1);
    engine_model *m2 = NULL;
    json_t *c2 = nt_case("greenwood-5.1-knife-edge-body.json");
    cr_assert_eq(engine_model_compile(json_object_get(c2, "model"), NULL, &m2, &problem), 0);
    native_schedule(m2);
    int s = native_wait(m2, 30);
    cr_expect(s == NATIVE_FAILED || s == NATIVE_NONE, "no compiler: state %d", s);
    engine_model_release(m2);
    engine_model_release(m);
    json_decref(c2);
    json_decref(c);
    nt_cleanup();
}

Test(native, off_without_cache_dir)
{
    engine_code_cache(NULL);
    json_t *c = nt_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    json_decref(nt_run(m, json_object_get(c, "simulation"), "tcc"));
    json_decref(nt_run(m, json_object_get(c, "simulation"), "tcc"));
    cr_expect_eq(atomic_load(&m->native_state), NATIVE_NONE, "no cache directory, no build");
    engine_model_release(m);
    json_decref(c);
}
