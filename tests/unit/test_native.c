/* test_native.c — the optimizing code tier (engine/native.h): a model compiled with a
 * code cache gets native code in the background, later runs use it (stats.code_tier
 * "native") and agree with the tcc tier; a run with other parameters stays on tcc; a
 * second compile of the same model loads the cached object; a failing compiler leaves
 * the model on tcc; a planted object (or a link) under a cached name is never loaded, and
 * a cache directory others can write turns the tier off. Each test uses its own fresh
 * cache directory.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "engine.h"
#include "hamel.h"
#include "model.h"
#include "native.h"
#include "support.h"

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
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.key'", nt_dir, nt_dir);
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
    json_t *c = support_load_case("greenwood-5.3-rolling-disk.json");
    json_t *req = json_object_get(c, "simulation");
    /* first without the tier: the reference on tcc */
    engine_model *m0 = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m0, &problem), 0);
    json_t *ref = nt_run(m0, req, "tcc");

    nt_fresh_dir();
    engine_model *m = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    /* at once: on the interpreter, switching to tcc's code when it arrives — the same
     * numbers to the bit either way */
    json_t *early = nt_run(m, req, NULL);
    cr_expect_eq(nt_diff(ref, early), 0.0, "a run that starts before tcc's code differs from one on tcc");
    json_decref(early);
    cr_expect_eq(atomic_load(&m->native_state), NATIVE_NONE, "one short run does not make a model hot");
    cr_assert(native_wait_jit(m, 30), "tcc's code arrives from the background");
    json_decref(nt_run(m, req, "tcc")); /* the second run does */
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

/* Builds m's native code in a fresh cache with HAMEL_CC a wrapper that notes what the
 * compiler got: *parts when a source has parts, *units the most sources of one run. */
static void nt_build_noting(engine_model *m, int *parts, int *units)
{
    nt_fresh_dir();
    char wrap[400], note[400];
    snprintf(wrap, sizeof wrap, "%s.cc.sh", nt_dir);
    snprintf(note, sizeof note, "%s.note", nt_dir);
    FILE *fp = fopen(wrap, "w");
    cr_assert_not_null(fp);
    fprintf(fp,
            "#!/bin/sh\nn=0; p=0\nfor a; do case \"$a\" in *.c) n=$((n + 1)); grep -q 'void fy_1(' \"$a\" && "
            "p=1;; esac; done\necho \"$p $n\" >> '%s'\nexec cc \"$@\"\n",
            note);
    cr_assert_eq(fclose(fp), 0);
    cr_assert_eq(chmod(wrap, 0700), 0);
    setenv("HAMEL_CC", wrap, 1);
    native_schedule(m);
    cr_assert_eq(native_wait(m, 150), NATIVE_READY, "the native build finished");
    fp = fopen(note, "r");
    cr_assert_not_null(fp, "the compiler ran");
    cr_assert_eq(fscanf(fp, "%d %d", parts, units), 2);
    fclose(fp);
    unlink(note);
    unlink(wrap);
}

/* m's right-hand side on the native tier agrees with the first tier's (m has native code). */
static void nt_expect_rhs_agree(engine_model *m, hamel_ws *w1)
{
    hamel_ws *w2 = hamel_ws_new(m, m->param_values);
    cr_assert_not_null(w2);
    cr_assert_str_eq(hamel_ws_tier(w2), "native");
    int dim = m->n + m->k;
    double y[64], a[64], b[64];
    cr_assert_leq(dim, 64);
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < dim; i++)
            y[i] = 0.1 + 0.05 * i + 0.3 * s;
        cr_assert_eq(hamel_rhs(0.0, y, a, w1), 0);
        cr_assert_eq(hamel_rhs(0.0, y, b, w2), 0);
        for (int i = 0; i < dim; i++)
            cr_expect_leq(fabs(a[i] - b[i]), 1e-12 * (fabs(a[i]) > 1 ? fabs(a[i]) : 1),
                          "state %d, dydt[%d]: %.17g != %.17g", s, i, a[i], b[i]);
    }
    hamel_ws_free(w2);
}

/* m's right-hand side on the native tier and on w1 (the first tier) are the same to the
 * bit at three states; returns how many of them the native code's own solve refused
 * (native_code.solve's *fail: the caller then takes the tape's path). */
static int nt_expect_rhs_bit_identical(engine_model *m, hamel_ws *w1)
{
    hamel_ws *w2 = hamel_ws_new(m, m->param_values);
    cr_assert_not_null(w2);
    cr_assert_str_eq(hamel_ws_tier(w2), "native");
    native_code *c = native_acquire(m, m->param_values);
    cr_assert_not_null(c);
    cr_assert_not_null(c->solve, "M* is not constant: the object solves it (h)");
    cr_assert_null(c->rhs, "no folded M*^-1 (g) for a mass matrix that changes");
    int dim = m->n + m->k, refused = 0;
    double y[64], a[64], b[64], d[64];
    cr_assert_leq(dim, 64);
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < dim; i++)
            y[i] = 0.1 + 0.05 * i + 0.3 * s;
        cr_assert_eq(hamel_rhs(0.0, y, a, w1), 0);
        cr_assert_eq(hamel_rhs(0.0, y, b, w2), 0);
        cr_expect_eq(memcmp(a, b, (size_t)dim * sizeof *a), 0, "state %d: native differs from the first tier",
                     s);
        int fail = 0;
        c->solve(0.0, y, d, &fail);
        refused += fail;
        if (!fail)
            cr_expect_eq(memcmp(a, d, (size_t)dim * sizeof *a), 0, "state %d: h differs", s);
    }
    native_release(c);
    hamel_ws_free(w2);
    return refused;
}

/* A mass matrix that depends on the state (a car with two trailers: M* of the forward
 * speed and the steering rate changes with the trailers' angles): the object solves M*
 * itself (h, Cholesky unrolled as hamel.c's), to the bit what the first tier gives; with
 * an indefinite M* (a negative steering inertia Js) the Cholesky fails, h says so and
 * hamel.c's path (its LU) answers, the same as on the first tier. */
Test(native, state_dependent_mass_is_solved_in_the_code, .timeout = 180)
{
    json_t *c = support_load_file("bench/models/car-trailers-2.json");
    for (int neg = 0; neg < 2; neg++) {
        json_t *model = json_deep_copy(json_object_get(c, "model"));
        if (neg)
            json_object_set_new(json_object_get(model, "parameters"), "Js", json_real(-0.05));
        engine_model *m = NULL;
        json_t *problem = NULL;
        cr_assert_eq(engine_model_compile(model, NULL, &m, &problem), 0);
        cr_assert(m->tape_fast && !m->fast_mass_const, "M* depends on the state");
        hamel_ws *w1 = hamel_ws_new(m, m->param_values);
        cr_assert_not_null(w1);
        nt_fresh_dir();
        native_schedule(m);
        cr_assert_eq(native_wait(m, 150), NATIVE_READY, "the native build finished");
        int refused = nt_expect_rhs_bit_identical(m, w1);
        cr_expect_eq(refused, neg ? 3 : 0, "h refuses exactly the indefinite M* (%d of 3)", refused);
        hamel_ws_free(w1);
        engine_model_release(m);
        json_decref(model);
        nt_cleanup();
    }
    json_decref(c);
}

/* A tape past the size written as one function (the bicycle's, 6,593 slots) is built as
 * parts (the source the compiler gets has them), loads, and its right-hand side agrees
 * with the first tier's; with parts of 40 slots (HAMEL_NATIVE_PART) they come in several
 * translation units, compiled together. */
Test(native, long_tape_is_built_in_parts, .timeout = 240)
{
    json_t *c = support_load_file("bench/models/whipple-hand.json");
    engine_model *m = NULL, *m2 = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    cr_assert(m->tape_fast && m->tape_fast->n_ins > 4000, "a long tape");
    hamel_ws *w1 = hamel_ws_new(m, m->param_values);
    cr_assert_not_null(w1);
    cr_assert_str_neq(hamel_ws_tier(w1), "native");
    int parts = 0, units = 0;
    nt_build_noting(m, &parts, &units);
    cr_expect(parts == 1 && units == 1, "parts in one unit (parts %d, units %d)", parts, units);
    nt_expect_rhs_agree(m, w1);
    nt_cleanup();

    setenv("HAMEL_NATIVE_PART", "40", 1);
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m2, &problem), 0);
    nt_build_noting(m2, &parts, &units);
    unsetenv("HAMEL_NATIVE_PART");
    cr_expect(parts == 1 && units >= 5, "parts of 40 slots in several units (%d)", units);
    nt_expect_rhs_agree(m2, w1);
    hamel_ws_free(w1);
    engine_model_release(m2);
    engine_model_release(m);
    json_decref(c);
    nt_cleanup();
}

Test(native, failing_compiler_keeps_tcc, .timeout = 60)
{
    nt_fresh_dir();
    setenv("HAMEL_CC", "false", 1);
    json_t *c = support_load_case("greenwood-5.2-dumbbell-hamel.json");
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    native_schedule(m);
    cr_assert_eq(native_wait(m, 30), NATIVE_FAILED);
    cr_assert(native_wait_jit(m, 30));
    json_decref(nt_run(m, json_object_get(c, "simulation"), "tcc"));
    cr_expect_eq(nt_count_so(), 0, "nothing left in the cache");
    setenv("HAMEL_CC", "/nonexistent/cc", 1);
    engine_model *m2 = NULL;
    json_t *c2 = support_load_case("greenwood-5.1-knife-edge-body.json");
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
    json_t *c = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    json_decref(nt_run(m, json_object_get(c, "simulation"), "tcc"));
    json_decref(nt_run(m, json_object_get(c, "simulation"), "tcc"));
    cr_expect_eq(atomic_load(&m->native_state), NATIVE_NONE, "no cache directory, no build");
    engine_model_release(m);
    json_decref(c);
}

Test(native, cache_directory_is_pruned, .timeout = 120)
{
    nt_fresh_dir();
    /* 1100 old objects and a temporary file a killed process left two hours ago */
    struct utimbuf old = {time(NULL) - 7200, time(NULL) - 7200};
    for (int i = 0; i < 1100; i++) {
        char path[400];
        snprintf(path, sizeof path, "%s/old%04d.so", nt_dir, i);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fclose(f);
        utime(path, &old);
    }
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s/.tmp-1-1.c", nt_dir);
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fclose(f);
    utime(tmp, &old);
    json_t *c = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    native_schedule(m);
    cr_assert_eq(native_wait(m, 90), NATIVE_READY);
    int n = nt_count_so();
    cr_expect_leq(n, NATIVE_MAX_FILES, "the directory is kept within its cap (%d files)", n);
    cr_expect_geq(n, 1);
    cr_expect_neq(access(tmp, F_OK), 0, "the stale temporary file is gone");
    json_decref(nt_run(m, json_object_get(c, "simulation"), "native"));
    engine_model_release(m);
    json_decref(c);
    nt_cleanup();
}

Test(native, shutdown_kills_a_running_build, .timeout = 60)
{
    nt_fresh_dir();
    char script[400];
    snprintf(script, sizeof script, "%s/slow-cc.sh", nt_dir);
    FILE *f = fopen(script, "w");
    cr_assert_not_null(f);
    fputs("#!/bin/sh\nexec sleep 30\n", f);
    fclose(f);
    chmod(script, 0755);
    setenv("HAMEL_CC", script, 1);
    json_t *c = support_load_case("greenwood-5.3-rolling-disk.json");
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    native_schedule(m);
    usleep(300000); /* the compiler is running */
    cr_expect_eq(native_wait(m, 0), NATIVE_QUEUED);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    engine_shutdown();
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    cr_expect_lt(s, 2.0, "shutdown took %.2f s", s);
    cr_expect_eq(atomic_load(&m->native_state), NATIVE_FAILED);
    cr_expect_eq(atomic_load(&m->refs), 1, "the workers' references were dropped");
    cr_expect(native_wait_jit(m, 0), "the first tier was finished at shutdown");
    json_decref(nt_run(m, json_object_get(c, "simulation"), "tcc"));
    engine_model_release(m);
    json_decref(c);
    nt_cleanup();
}

/* Folding keeps the IEEE operations (no FMA contraction, no reassociation, the constant
 * M*^-1 by its bits, a zero entry only where it adds +-0): on every shared case the
 * native trajectory is the tcc one to the bit, so a result does not depend on the tier
 * it ran on (the batch tests compare runs bit for bit). */
Test(native, shared_cases_bit_identical_to_tcc, .timeout = 180)
{
    glob_t g;
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/*.json", support_cases_dir());
    cr_assert_eq(glob(pattern, 0, NULL, &g), 0);
    for (size_t f = 0; f < g.gl_pathc; f++) {
        json_t *c = json_load_file(g.gl_pathv[f], 0, NULL);
        cr_assert_not_null(c);
        json_t *req = json_object_get(c, "simulation"), *problem = NULL;
        engine_code_cache(NULL);
        engine_model *m0 = NULL;
        cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m0, &problem), 0);
        json_t *r0 = nt_run(m0, req, NULL);
        if (f == 0)
            nt_fresh_dir();
        else
            engine_code_cache(nt_dir);
        engine_model *m = NULL;
        cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
        native_schedule(m);
        if (native_wait(m, 90) == NATIVE_READY) {
            json_t *r1 = nt_run(m, req, "native");
            cr_expect(json_equal(json_object_get(r0, "trajectory"), json_object_get(r1, "trajectory")),
                      "%s: the native trajectory differs from tcc's", g.gl_pathv[f]);
            json_decref(r1);
        } else {
            cr_expect(m->tape_fast == NULL, "%s: a reduced model got no native code", g.gl_pathv[f]);
        }
        json_decref(r0);
        engine_model_release(m);
        engine_model_release(m0);
        json_decref(c);
    }
    globfree(&g);
    nt_cleanup();
}

/* The first tier (libtcc) compiles the observables tape too (energy and constraint
 * residuals at every sample: the checks), and the checks it gives are the
 * interpreter's, bit for bit. */
Test(native, first_tier_compiles_the_checks_bit_identical)
{
    char path[600];
    snprintf(path, sizeof path, "%s/greenwood-5.3-rolling-disk.json", support_cases_dir());
    json_t *c = json_load_file(path, 0, NULL);
    cr_assert_not_null(c);
    json_t *req = json_deep_copy(json_object_get(c, "simulation"));
    json_object_set_new(req, "output", json_pack("{s:i}", "samples", 201));
    engine_model *jit = NULL, *interp = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &jit, &problem), 0);
    cr_assert_not_null(jit->tape_obs);
    cr_expect_not_null(jit->tape_obs->fn, "the observables tape is compiled by the first tier");
    setenv("HAMEL_NO_JIT", "1", 1);
    int rc = engine_model_compile(json_object_get(c, "model"), NULL, &interp, &problem);
    unsetenv("HAMEL_NO_JIT");
    cr_assert_eq(rc, 0);
    cr_assert_null(interp->tape_obs->fn);
    json_t *a = nt_run(jit, req, "tcc"), *b = nt_run(interp, req, "interp");
    const char *groups[] = {"energy", "constraints"};
    for (int g = 0; g < 2; g++)
        cr_expect(json_equal(json_object_get(json_object_get(a, "checks"), groups[g]),
                             json_object_get(json_object_get(b, "checks"), groups[g])),
                  "checks.%s differ between the tiers", groups[g]);
    json_decref(a);
    json_decref(b);
    engine_model_release(jit);
    engine_model_release(interp);
    json_decref(req);
    json_decref(c);
}

/* The name of the one shared object in the cache, into path[cap]. */
static void nt_the_so(char *path, size_t cap)
{
    char pattern[400];
    snprintf(pattern, sizeof pattern, "%s/*.so", nt_dir);
    glob_t g;
    cr_assert_eq(glob(pattern, 0, NULL, &g), 0, "no object in %s", nt_dir);
    cr_assert_eq(g.gl_pathc, 1);
    snprintf(path, cap, "%s", g.gl_pathv[0]);
    globfree(&g);
}

/* A compile of c's model with the cache, scheduled for the tier; its state after the wait. */
static engine_model *nt_compile_native(const json_t *c, int *state)
{
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    native_schedule(m);
    *state = native_wait(m, 90);
    return m;
}

/* issue 15: a shared object planted under a cached name, or a link there, ran its
 * constructor inside the server. Only an object whose record (HMAC of its name and bytes
 * under the key outside the directory) verifies is loaded; the model still runs. */
Test(native, a_planted_object_is_never_loaded, .timeout = 180)
{
    nt_fresh_dir();
    json_t *c = support_load_case("greenwood-5.3-rolling-disk.json");
    json_t *req = json_object_get(c, "simulation");
    int state = 0;
    engine_model *m = nt_compile_native(c, &state);
    cr_assert_eq(state, NATIVE_READY, "the first build");
    engine_model_release(m);
    char so[600], mark[600], evil_c[600], evil_so[600], cmd[2400];
    nt_the_so(so, sizeof so);
    snprintf(mark, sizeof mark, "%s-mark", nt_dir);
    snprintf(evil_c, sizeof evil_c, "%s-evil.c", nt_dir);
    snprintf(evil_so, sizeof evil_so, "%s-evil.so", nt_dir);
    FILE *f = fopen(evil_c, "w");
    cr_assert_not_null(f);
    fputs("#include <stdio.h>\n#include <stdlib.h>\n"
          "__attribute__((constructor)) static void mark(void) { const char *p = getenv(\"NT_PLANT_MARK\");\n"
          "  FILE *f = p ? fopen(p, \"w\") : NULL; if (f) { fputs(\"ran\", f); fclose(f); } }\n"
          "void f(const double *in, double *out) { (void)in; (void)out; }\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s' '%s'", evil_so, evil_c);
    cr_assert_eq(system(cmd), 0, "cannot build the planted object");
    setenv("NT_PLANT_MARK", mark, 1);

    /* 1. the planted bytes under the cached name, beside the genuine record */
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", evil_so, so);
    cr_assert_eq(system(cmd), 0);
    engine_code_cache(nt_dir);
    m = nt_compile_native(c, &state);
    cr_expect_neq(access(mark, F_OK), 0, "the planted object ran");
    cr_expect_eq(state, NATIVE_READY, "the object is built again");
    json_decref(nt_run(m, req, "native"));
    engine_model_release(m);

    /* 2. a link to it, with a record signed under another key */
    unlink(so);
    cr_assert_eq(symlink(evil_so, so), 0);
    char mac[600];
    snprintf(mac, sizeof mac, "%.*s.mac", (int)strlen(so) - 3, so);
    snprintf(cmd, sizeof cmd, "openssl dgst -sha256 -hmac guess -r '%s' | cut -c1-64 > '%s'", evil_so, mac);
    cr_expect_eq(system(cmd), 0);
    m = nt_compile_native(c, &state);
    cr_expect_neq(access(mark, F_OK), 0, "the linked object ran");
    struct stat st;
    cr_expect(lstat(so, &st) == 0 && S_ISREG(st.st_mode), "the link was replaced by a built object");
    json_decref(nt_run(m, req, NULL));
    engine_model_release(m);

    /* 3. a directory others may write: the tier stays off, the model runs on tcc */
    cr_assert_eq(chmod(nt_dir, 0777), 0);
    cr_expect_neq(engine_code_cache(nt_dir), 0, "a cache directory others can write is refused");
    chmod(nt_dir, 0700);
    m = nt_compile_native(c, &state);
    cr_expect_neq(state, NATIVE_READY);
    json_decref(nt_run(m, req, "tcc"));
    engine_model_release(m);

    unsetenv("NT_PLANT_MARK");
    unlink(mark);
    unlink(evil_c);
    unlink(evil_so);
    json_decref(c);
    nt_cleanup();
}

/* abs and sign in every tier: the generated C defines hamel_sign (d abs(a) = sign(a),
 * a generalized force 0.1*sign(x')), and the native build compiles it and agrees with
 * tcc. */
Test(native, abs_and_sign_run_native_as_on_tcc, .timeout = 120)
{
    json_t *c =
        support_loads("{\"name\": \"kinks\", \"coordinates\": [\"x\", \"y\", \"th\"], \"parameters\": "
                      "{\"k\": 2.0, \"c\": 0.7},"
                      " \"kinetic_energy\": \"1/2*(1+abs(x)^1.5)*x'^2 + 1/2*y'^2 + 1/2*(2+x*abs(x))*th'^2\","
                      " \"potential_energy\": \"k*abs(x)^1.5 + sqrt(x^2+y^2)^3 + y*abs(y)\","
                      " \"generalized_forces\": {\"x\": \"-c*x'*abs(x') + 0.1*sign(x')\"},"
                      " \"constraints\": [{\"name\": \"knife\", \"expr\": \"y' - sin(th)*x'\"}]}");
    json_t *req = support_loads(
        "{\"initial\": {\"q\": {\"x\": 0, \"y\": 0, \"th\": 0.3}, \"qdot\": {\"x\": 0.5, \"y\": "
        "0.14776010333066979, \"th\": 0.2}}, \"t_end\": 3, \"output\": {\"samples\": 4},"
        " \"integrator\": {\"rtol\": 1e-12, \"atol\": 1e-14}}");
    engine_model *m0 = NULL, *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(c, NULL, &m0, &problem), 0);
    json_t *ref = nt_run(m0, req, "tcc");
    nt_fresh_dir();
    cr_assert_eq(engine_model_compile(c, NULL, &m, &problem), 0);
    native_schedule(m);
    cr_assert_eq(native_wait(m, 90), NATIVE_READY, "the native build of abs and sign finished");
    json_t *res = nt_run(m, req, "native");
    double d = nt_diff(ref, res);
    cr_expect_leq(d, 1e-12, "native and tcc trajectories differ by %g", d);
    json_decref(res);
    json_decref(ref);
    engine_model_release(m);
    engine_model_release(m0);
    json_decref(req);
    json_decref(c);
    nt_cleanup();
}
