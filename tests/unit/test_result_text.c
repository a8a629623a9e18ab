/* test_result_text.c — engine_simulate_text (results written straight to text, with
 * series written from the run's arrays) against engine_simulate: for every shared case
 * the text parses to the same document (numbers equal to the last bit: shortest
 * round-trip formatting) with the head members first, and is byte for byte what the
 * value-at-a-time writer (jsonout_dumps) makes of the parsed document; a failed run's
 * partial result has real arrays, not series markers.
 */
#include <criterion/criterion.h>

#include <glob.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "jsonout.h"

static const char *rt_cases_dir(void)
{
    const char *d = getenv("HAMEL_CASES");
    return d && *d ? d : "../shared/cases";
}

/* No string in j starts with the marker byte. */
static int rt_no_markers(const json_t *j)
{
    if (json_is_string(j))
        return json_string_length(j) == 0 || json_string_value(j)[0] != 1;
    if (json_is_object(j)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)j, k, v) if (!rt_no_markers(v)) return 0;
    }
    if (json_is_array(j))
        for (size_t i = 0; i < json_array_size(j); i++)
            if (!rt_no_markers(json_array_get(j, i)))
                return 0;
    return 1;
}

Test(result_text, same_document_as_engine_simulate)
{
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/*.json", rt_cases_dir());
    glob_t g;
    cr_assert_eq(glob(pattern, 0, NULL, &g), 0, "no cases under %s", rt_cases_dir());
    for (size_t f = 0; f < g.gl_pathc; f++) {
        json_t *c = json_load_file(g.gl_pathv[f], 0, NULL);
        cr_assert_not_null(c);
        engine_model *m = NULL;
        json_t *problem = NULL, *res = NULL;
        cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0, "%s",
                     g.gl_pathv[f]);
        json_t *req = json_object_get(c, "simulation");
        cr_assert_eq(engine_simulate(m, req, NULL, NULL, &res, &problem), 0, "%s", g.gl_pathv[f]);
        json_t *head =
            json_pack("{s:s, s:s, s:s}", "job_id", "j1", "status", "done", "model_id", "overridden");
        char *text = NULL;
        size_t len = 0;
        cr_assert_eq(engine_simulate_text(m, req, NULL, NULL, head, &text, &len, &problem), 0);
        cr_assert_eq(len, strlen(text));
        cr_assert_eq(strncmp(text, "{\"job_id\":\"j1\",\"status\":\"done\",\"model_id\":\"overridden\",", 55),
                     0, "head members first: %.80s", text);
        json_error_t err;
        json_t *back = json_loads(text, JSON_REJECT_DUPLICATES, &err);
        cr_assert_not_null(back, "%s: %s", g.gl_pathv[f], err.text);
        /* byte for byte what the value-at-a-time writer makes of the same document (the
         * series are written in blocks by dtoa_join: same text as jsonout_double each) */
        size_t again_len = 0;
        char *again = jsonout_dumps(back, &again_len);
        cr_assert_not_null(again);
        cr_expect(again_len == len && memcmp(again, text, len) == 0, "%s: the series text differs",
                  g.gl_pathv[f]);
        free(again);
        /* the same document apart from the head and the timings */
        json_object_set_new(res, "job_id", json_string("j1"));
        json_object_set_new(res, "status", json_string("done"));
        json_object_set_new(res, "model_id", json_string("overridden"));
        const char *timings[] = {"compile_ms", "integrate_ms", "checks_ms"};
        for (int i = 0; i < 3; i++) {
            json_object_del(json_object_get(res, "stats"), timings[i]);
            json_object_del(json_object_get(back, "stats"), timings[i]);
        }
        cr_expect(json_equal(res, back), "%s: text and tree differ", g.gl_pathv[f]);
        free(text);
        json_decref(back);
        json_decref(head);
        json_decref(res);
        engine_model_release(m);
        json_decref(c);
    }
    globfree(&g);
}

Test(result_text, failed_run_partial_has_arrays)
{
    char path[600];
    snprintf(path, sizeof path, "%s/greenwood-5.3-rolling-disk.json", rt_cases_dir());
    json_t *c = json_load_file(path, 0, NULL);
    cr_assert_not_null(c);
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    json_t *req = json_deep_copy(json_object_get(c, "simulation"));
    json_object_set_new(req, "integrator", json_pack("{s:i}", "max_steps", 20));
    char *text = NULL;
    size_t len = 0;
    int rc = engine_simulate_text(m, req, NULL, NULL, NULL, &text, &len, &problem);
    cr_assert_neq(rc, 0, "20 steps are not enough");
    cr_assert_null(text);
    json_t *partial = json_object_get(problem, "partial");
    cr_assert_not_null(partial);
    cr_expect(rt_no_markers(partial), "no series marker left in the partial result");
    const json_t *t = json_object_get(json_object_get(partial, "trajectory"), "t");
    cr_assert(json_is_array(t), "trajectory.t is an array");
    cr_expect_gt(json_array_size(t), 0u);
    json_decref(problem);
    json_decref(req);
    engine_model_release(m);
    json_decref(c);
}

/* The rolling disk at 1001 samples (the issue-8 benchmark: 16,000 numbers in series
 * longer than the writer's blocks): byte for byte the value-at-a-time writer's text. */
Test(result_text, long_series_same_bytes)
{
    char path[600];
    snprintf(path, sizeof path, "%s/greenwood-5.3-rolling-disk.json", rt_cases_dir());
    json_t *c = json_load_file(path, 0, NULL);
    cr_assert_not_null(c);
    engine_model *m = NULL;
    json_t *problem = NULL;
    cr_assert_eq(engine_model_compile(json_object_get(c, "model"), NULL, &m, &problem), 0);
    json_t *req = json_deep_copy(json_object_get(c, "simulation"));
    json_object_set_new(req, "t_end", json_real(10.0));
    json_object_set_new(req, "output", json_pack("{s:i}", "samples", 1001));
    json_t *head = json_pack("{s:s}", "job_id", "j2");
    char *text = NULL;
    size_t len = 0;
    cr_assert_eq(engine_simulate_text(m, req, NULL, NULL, head, &text, &len, &problem), 0);
    json_error_t err;
    json_t *back = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    cr_assert_not_null(back, "%s", err.text);
    cr_assert_eq(json_array_size(json_object_get(json_object_get(back, "trajectory"), "t")), 1001u);
    size_t again_len = 0;
    char *again = jsonout_dumps(back, &again_len);
    cr_assert_not_null(again);
    cr_expect_eq(again_len, len);
    cr_expect(again_len == len && memcmp(again, text, len) == 0, "the series text differs");
    free(again);
    free(text);
    json_decref(back);
    json_decref(head);
    json_decref(req);
    engine_model_release(m);
    json_decref(c);
}

/* The text jsonout_finish returns holds little more than its length, however much was
 * reserved from an estimate: result caches count a result by its length (an 8 KB block
 * for a 4.5 KB result made the server's RSS 1.8 times what its caches held). */
Test(result_text, finished_text_gives_back_its_reserve)
{
    for (size_t reserve = 64; reserve <= ((size_t)1 << 20); reserve *= 4) {
        jsonout o;
        cr_assert_eq(jsonout_init(&o, reserve), 0);
        json_t *doc = json_pack("{s:s, s:[f, f, f]}", "status", "done", "values", 1.5, 2.25, 3.125);
        jsonout_value(&o, doc);
        json_decref(doc);
        size_t len = 0;
        char *text = jsonout_finish(&o, &len);
        cr_assert_not_null(text);
        cr_assert_eq(len, strlen(text));
        cr_assert_leq(malloc_usable_size(text), len + 1 + 64 + 2 * sizeof(void *),
                      "reserve %zu: %zu bytes held for %zu", reserve, malloc_usable_size(text), len);
        free(text);
    }
}

/* The Hamel points are written as text too (no jansson node per coefficient): with
 * "hamel": "samples" on a rheonomic model (gamma_t entries) and on the rolling disk
 * (gamma entries), the text is the compact form of engine_simulate's document (same
 * members, numbers to the last bit), and a failed run's partial has no marker left. */
Test(result_text, hamel_points_as_text)
{
    static const char *const knife =
        "{\"coordinates\": [\"x\", \"y\"], \"parameters\": {\"m\": 1.5, \"k\": 2.0, \"w\": 0.7},"
        " \"kinetic_energy\": \"m/2*(x'^2 + y'^2)\", \"potential_energy\": \"k/2*(x^2 + y^2)\","
        " \"constraints\": [{\"name\": \"c\", \"expr\": \"x'*sin(w*t) - y'*cos(w*t)\"}],"
        " \"speeds\": [{\"name\": \"u\", \"expr\": \"x'*cos(w*t) + y'*sin(w*t)\"}]}";
    char path[600];
    snprintf(path, sizeof path, "%s/greenwood-5.3-rolling-disk.json", rt_cases_dir());
    json_t *disk = json_load_file(path, 0, NULL);
    cr_assert_not_null(disk);
    json_t *models[2] = {json_loads(knife, 0, NULL), json_incref(json_object_get(disk, "model"))};
    json_t *reqs[2] = {json_pack("{s:{s:f, s:{s:f, s:f}, s:{s:f}}, s:f, s:{s:i}, s:s}", "initial", "t", 0.3,
                                 "q", "x", 0.4, "y", -0.2, "speeds", "u", 1.1, "t_end", 8.3, "output",
                                 "samples", 9, "hamel", "samples"),
                       json_deep_copy(json_object_get(disk, "simulation"))};
    json_object_set_new(reqs[1], "hamel", json_string("samples"));
    const char *member[2] = {"gamma_t", "gamma"};
    for (int k = 0; k < 2; k++) {
        engine_model *m = NULL;
        json_t *problem = NULL, *res = NULL;
        cr_assert_eq(engine_model_compile(models[k], NULL, &m, &problem), 0, "model %d", k);
        cr_assert_eq(engine_simulate(m, reqs[k], NULL, NULL, &res, &problem), 0, "model %d", k);
        char *text = NULL;
        size_t len = 0;
        cr_assert_eq(engine_simulate_text(m, reqs[k], NULL, NULL, NULL, &text, &len, &problem), 0);
        json_error_t err;
        json_t *back = json_loads(text, JSON_REJECT_DUPLICATES, &err);
        cr_assert_not_null(back, "model %d: %s", k, err.text);
        size_t again_len = 0;
        char *again = jsonout_dumps(back, &again_len);
        cr_expect(again_len == len && memcmp(again, text, len) == 0, "model %d: not the compact form", k);
        free(again);
        json_t *pts = json_object_get(json_object_get(back, "hamel"), "points");
        cr_assert_eq(json_array_size(pts),
                     json_array_size(json_object_get(json_object_get(back, "trajectory"), "t")),
                     "model %d: a point per sample", k);
        cr_expect_gt(json_array_size(json_object_get(json_array_get(pts, 1), member[k])), 0u,
                     "model %d: %s has entries", k, member[k]);
        const char *timings[] = {"compile_ms", "integrate_ms", "checks_ms"};
        for (int i = 0; i < 3; i++) {
            json_object_del(json_object_get(res, "stats"), timings[i]);
            json_object_del(json_object_get(back, "stats"), timings[i]);
        }
        cr_expect(json_equal(res, back), "model %d: text and tree differ", k);
        free(text);
        json_decref(back);
        json_decref(res);
        /* a failed run: its partial result is all real values */
        json_object_set_new(reqs[k], "integrator", json_pack("{s:i}", "max_steps", 3));
        text = NULL;
        cr_assert_neq(engine_simulate_text(m, reqs[k], NULL, NULL, NULL, &text, &len, &problem), 0);
        cr_assert_null(text);
        json_t *partial = json_object_get(problem, "partial");
        cr_assert_not_null(partial, "model %d: a partial result", k);
        cr_expect(rt_no_markers(partial), "model %d: a marker left in the partial", k);
        json_t *ppts = json_object_get(json_object_get(partial, "hamel"), "points");
        cr_expect(json_is_array(ppts) && json_array_size(ppts) > 0, "model %d: the partial's points", k);
        json_decref(problem);
        engine_model_release(m);
        json_decref(models[k]);
        json_decref(reqs[k]);
    }
    json_decref(disk);
}
