/* test_keys.c — results are keyed by the engine's build identity (issue 15 item 7): a
 * result stored by an older engine is recomputed after an upgrade, not served as
 * "cached": true; every result says which engine computed it ("provenance") and a check
 * that failed is a top-level "warnings" entry.
 *
 * The older engine is the real server started with HAMEL_TEST_FAULTS=1 and
 * HAMEL_TEST_ENGINE_VERSION=0.2.0 (identity.h); the upgrade is a second server on the
 * same data directory without the override.
 */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_types.h"
#include "harness.h"

/* A particle at x = 4 moving towards a Gaussian barrier of height 100 with energy 0.5
 * (../shared/repros/barrier.json); the request is small and quick. */
static const char keys_request[] = "{\"model\": {\"coordinates\": [\"x\"], \"kinetic_energy\": \"x'^2/2\","
                                   " \"potential_energy\": \"100*exp(-100*(x-5)^2)\"},"
                                   " \"initial\": {\"q\": {\"x\": 4}, \"qdot\": {\"x\": 1}}, \"t_end\": 2,"
                                   " \"output\": {\"samples\": 21}}";

/* A free particle: nothing can fail. */
static const char keys_free[] =
    "{\"model\": {\"coordinates\": [\"x\", \"y\"], \"kinetic_energy\": \"x'^2/2 + y'^2/2\"},"
    " \"initial\": {\"q\": {\"x\": 0, \"y\": 0}, \"qdot\": {\"x\": 1, \"y\": 0.5}}, \"t_end\": 2}";

static harness_resp keys_post(const harness_server *s, const char *body)
{
    harness_resp r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(harness_request(s, "POST", "/v1/simulations?wait=60", body, NULL, &r), CURLE_OK);
    cr_assert_eq(r.status, 200, "the simulation answers 200: %ld %s", r.status, r.body);
    cr_assert_not_null(r.json);
    return r;
}

static const char *keys_str(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(json_object_get(o, a), b);
    return json_is_string(v) ? json_string_value(v) : "";
}

static void keys_start(harness_server *s, const char *data, const char *version)
{
    char setting[PATH_MAX + 16], over[64];
    snprintf(setting, sizeof setting, "HAMEL_DATA=%s", data);
    snprintf(over, sizeof over, "HAMEL_TEST_ENGINE_VERSION=%s", version ? version : "");
    const char *const old_env[] = {setting, "HAMEL_TEST_FAULTS=1", over, NULL};
    const char *const new_env[] = {setting, NULL};
    cr_assert_eq(harness_start(s, version ? old_env : new_env), 0, "a server on %s", data);
}

Test(keys, an_older_engines_result_is_recomputed_not_served, .timeout = 240)
{
    char data[] = "/tmp/hamel-keys-XXXXXX";
    cr_assert_not_null(mkdtemp(data));
    harness_server old, cur;

    keys_start(&old, data, "0.2.0");
    harness_resp h;
    memset(&h, 0, sizeof h);
    cr_assert_eq(harness_request(&old, "GET", "/v1/health", NULL, NULL, &h), CURLE_OK);
    cr_assert_str_eq(json_string_value(json_object_get(h.json, "version")), "0.2.0", "%s", h.body);
    char build[64];
    snprintf(build, sizeof build, "0.2.0+n%d", ENGINE_NUMERICS);
    cr_assert_str_eq(json_string_value(json_object_get(h.json, "build")), build, "health names the build: %s",
                     h.body);
    harness_resp_free(&h);
    harness_resp a = keys_post(&old, keys_request);
    cr_assert(json_is_false(json_object_get(a.json, "cached")), "the first answer is computed");
    cr_assert_str_eq(keys_str(a.json, "provenance", "engine_version"), "0.2.0",
                     "the override plays the older engine: %s", a.body);
    harness_resp b = keys_post(&old, keys_request);
    cr_assert(json_is_true(json_object_get(b.json, "cached")), "the same engine serves its own result");
    harness_resp_free(&b);
    harness_stop(&old);

    /* the upgrade: the same data directory, the engine's own version */
    keys_start(&cur, data, NULL);
    harness_resp c = keys_post(&cur, keys_request);
    cr_assert(json_is_false(json_object_get(c.json, "cached")),
              "the older engine's stored result is not served after the upgrade: %.300s", c.body);
    cr_assert_str_eq(keys_str(c.json, "provenance", "engine_version"), ENGINE_VERSION);
    const json_t *num = json_object_get(json_object_get(c.json, "provenance"), "numerics");
    cr_assert(json_is_integer(num) && json_integer_value(num) == ENGINE_NUMERICS, "provenance.numerics");
    cr_assert_str_neq(keys_str(c.json, "provenance", "code_tier"), "", "provenance.code_tier");
    cr_assert_str_eq(keys_str(c.json, "provenance", "method"), "rk8pd", "provenance.method");
    harness_resp d = keys_post(&cur, keys_request);
    cr_assert(json_is_true(json_object_get(d.json, "cached")), "then its own result is served");
    cr_assert(json_equal(json_object_get(d.json, "provenance"), json_object_get(c.json, "provenance")),
              "the cached answer carries the provenance of the run that made it");
    harness_resp_free(&d);

    /* the model id is a content address: the same under both engines */
    cr_assert_str_eq(json_string_value(json_object_get(a.json, "model_id")),
                     json_string_value(json_object_get(c.json, "model_id")));

    /* a free particle: provenance, and an empty warnings array */
    harness_resp f = keys_post(&cur, keys_free);
    const json_t *w = json_object_get(f.json, "warnings");
    cr_assert(json_is_array(w) && json_array_size(w) == 0, "no warnings for a sound run: %.300s", f.body);
    cr_assert_str_eq(keys_str(f.json, "provenance", "formulation"), "hamel");
    harness_resp_free(&f);

    harness_stop(&cur);
    harness_resp_free(&a);
    harness_resp_free(&c);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", data);
    cr_assert_eq(system(cmd), 0);
}
