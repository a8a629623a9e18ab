/* test_tiers.c — the optimizing code tier through the real server: a model's first runs
 * report stats.code_tier "interp" or "tcc" (tcc's code is made in the background); once it is hot (its second
 * run) the server builds native code in the background under HAMEL_DATA/native, and a later run reports
 * "native" with the same trajectory (to 1e-12) while the server keeps answering.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static harness_resp tiers_post(const harness_server *s, json_t *req)
{
    char *body = json_dumps(req, JSON_COMPACT);
    harness_resp r = {0};
    cr_assert_eq(harness_request(s, "POST", "/v1/simulations?wait=60", body, NULL, &r), CURLE_OK);
    free(body);
    cr_assert_eq(r.status, 200, "%s", r.body);
    return r;
}

static const char *tiers_tier(const harness_resp *r)
{
    return json_string_value(json_object_get(json_object_get(r->json, "stats"), "code_tier"));
}

static json_t *tiers_request(const json_t *c, double wd)
{
    json_t *req = json_deep_copy(json_object_get(c, "simulation"));
    json_object_set(req, "model", json_object_get(c, "model"));
    json_object_set_new(json_object_get(json_object_get(req, "initial"), "speeds"), "wd", json_real(wd));
    json_object_set_new(req, "output", json_pack("{s:i}", "samples", 101));
    return req;
}

static int tiers_so_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.' && strstr(e->d_name, ".so"))
            n++;
    if (d)
        closedir(d);
    return n;
}

Test(tiers, hot_model_moves_to_native, .timeout = 180)
{
    harness_server s;
    static const char *const env[] = {"HAMEL_MAX_WALL=30", NULL};
    cr_assert_eq(harness_start(&s, env), 0, "the server did not start");
    char path[1024];
    json_error_t err;
    json_t *c = harness_case_load("greenwood-5.3-rolling-disk.json", path, sizeof path, &err);
    cr_assert_not_null(c, "%s: %s", path, err.text);

    json_t *req = tiers_request(c, 0.3);
    harness_resp first = tiers_post(&s, req);
    const char *t1 = tiers_tier(&first);
    cr_expect(t1 && (!strcmp(t1, "tcc") || !strcmp(t1, "interp")), "a new model runs on interp/tcc, not %s",
              t1);
    json_decref(req);

    harness_resp last = {0};
    const char *tier = "";
    double t0 = harness_now();
    for (int i = 1; harness_now() - t0 < 120; i++) {
        harness_resp_free(&last);
        req = tiers_request(c, 0.3 + 1e-9 * i); /* a new request each time: not from the cache */
        last = tiers_post(&s, req);
        json_decref(req);
        tier = tiers_tier(&last);
        if (tier && !strcmp(tier, "native"))
            break;
        harness_nap(50);
    }
    cr_assert_str_eq(tier, "native", "the hot model ran on native code within 120 s");
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/native", s.data);
    cr_expect_eq(tiers_so_files(dir), 1, "one shared object in %s", dir);

    /* same numbers as tcc, for the same request */
    req = tiers_request(c, 0.3);
    json_object_set_new(req, "t_end", json_real(5.0 + 1e-12)); /* not the cached key */
    harness_resp again = tiers_post(&s, req);
    cr_expect_str_eq(tiers_tier(&again), "native");
    const json_t *a = json_object_get(json_object_get(first.json, "trajectory"), "q");
    const json_t *b = json_object_get(json_object_get(again.json, "trajectory"), "q");
    const char *key;
    const json_t *sa;
    double worst = 0;
    json_object_foreach((json_t *)a, key, sa)
    {
        const json_t *sb = json_object_get(b, key);
        cr_assert_eq(json_array_size(sa), json_array_size(sb));
        /* both end at t = 5 (to 1e-12): compare all but the last sample */
        for (size_t i = 0; i + 1 < json_array_size(sa); i++) {
            double d =
                fabs(json_number_value(json_array_get(sa, i)) - json_number_value(json_array_get(sb, i)));
            if (!(d <= worst))
                worst = d;
        }
    }
    cr_expect_leq(worst, 1e-9, "native and tcc trajectories differ by %g", worst);
    json_decref(req);
    harness_resp_free(&again);
    harness_resp_free(&last);
    harness_resp_free(&first);
    json_decref(c);
    int status = 0;
    cr_expect(harness_stop_checked(&s, &status), "the server exits cleanly");
    harness_stop(&s);
}
