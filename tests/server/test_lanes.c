/* test_lanes.c — work that hit a limit is not redone for every asker, and it never holds
 * up a new model (issue 15, item 5), against the real hamel-server.
 *
 * Eight clients ask again and again for Kane's form of the benchmark bicycle
 * (api/examples/whipple-bicycle.json), which does not fit a compile budget of one second
 * (HAMEL_MAX_COMPILE_SECONDS=1): the first eight, asking at once, share one derivation (all
 * answered about when it ends, not one after another as two threads work through eight),
 * later ones get the remembered 422 at once, and meanwhile trivial new models compile on
 * the other lane (timed; the bound is only a sanity bound on a loaded machine).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define LANES_CLIENTS 8
#define LANES_SECONDS 6.0         /* how long the clients keep asking */
#define LANES_SHARED_BOUND 3.0    /* the first answers all arrive within this (8 derivations: >= 4 s) */
#define LANES_REMEMBER_BOUND 1.0  /* a remembered answer takes less than this */
#define LANES_NAP_MS 20           /* between one client's requests */
#define LANES_NEW_MODEL_BOUND 3.0 /* sanity bound of a trivial compile beside them */

static harness_server srv;

static void teardown(void) { harness_stop(&srv); }

typedef struct lanes_client {
    char path[256];
    double t0;
    double first;       /* seconds until the first answer */
    double later_worst; /* slowest answer after the first */
    int answers, wrong; /* answers, and those not a 422 compile-limit */
    char last_wrong[256];
} lanes_client;

static void *lanes_ask(void *arg)
{
    lanes_client *k = arg;
    for (int i = 0; harness_now() - k->t0 < LANES_SECONDS; i++) {
        double t = harness_now();
        harness_resp r;
        char path[300];
        snprintf(path, sizeof path, "%s&n=%d", k->path, i); /* not a cached response */
        CURLcode rc = harness_request(&srv, "GET", path, NULL, NULL, &r);
        double took = harness_now() - t;
        const char *type = r.json ? json_string_value(json_object_get(r.json, "type")) : NULL;
        if (rc != CURLE_OK || r.status != 422 || !type || !strstr(type, "compile-limit")) {
            k->wrong++;
            snprintf(k->last_wrong, sizeof k->last_wrong, "%ld %.200s", r.status, r.body ? r.body : "");
        }
        if (i == 0)
            k->first = harness_now() - k->t0;
        else if (took > k->later_worst)
            k->later_worst = took;
        k->answers++;
        harness_resp_free(&r);
        harness_nap(LANES_NAP_MS);
    }
    return NULL;
}

TestSuite(lanes, .fini = teardown, .timeout = 120);

Test(lanes, a_form_past_the_limit_is_derived_once_and_never_holds_up_a_new_model)
{
    static const char *const env[] = {"HAMEL_MAX_COMPILE_SECONDS=1", "HAMEL_HTTP_THREADS=2",
                                      "HAMEL_ACCESS_LOG=0", NULL};
    cr_assert_eq(harness_start(&srv, env), 0, "the server did not start (log above)");
    json_error_t err;
    json_t *bike = json_load_file("api/examples/whipple-bicycle.json", 0, &err);
    cr_assert(bike, "api/examples/whipple-bicycle.json: %s", err.text);
    char *text = json_dumps(bike, JSON_COMPACT);
    json_decref(bike);
    harness_resp r;
    cr_assert_eq(harness_request(&srv, "POST", "/v1/models", text, NULL, &r), CURLE_OK);
    free(text);
    cr_assert_eq(r.status, 201, "the bicycle compiles: %ld %s", r.status, r.body);
    char id[128];
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(r.json, "model_id")));
    harness_resp_free(&r);

    lanes_client k[LANES_CLIENTS];
    pthread_t th[LANES_CLIENTS];
    double t0 = harness_now();
    for (int i = 0; i < LANES_CLIENTS; i++) {
        memset(&k[i], 0, sizeof k[i]);
        snprintf(k[i].path, sizeof k[i].path, "/v1/models/%s/equations?form=kane&client=%d", id, i);
        k[i].t0 = t0;
        cr_assert_eq(pthread_create(&th[i], NULL, lanes_ask, &k[i]), 0);
    }
    harness_nap(300);
    double worst_new = 0;
    for (int i = 0; i < 5; i++) {
        char model[256];
        snprintf(model, sizeof model,
                 "{\"name\":\"probe-%d-%d\",\"coordinates\":[\"x\"],\"kinetic_energy\":\"1/2*x'^2\"}", i,
                 (int)getpid());
        double t = harness_now();
        CURLcode crc = harness_request(&srv, "POST", "/v1/models", model, NULL, &r);
        cr_assert_eq(crc, CURLE_OK, "a new model beside the forms: %s", curl_easy_strerror(crc));
        double took = harness_now() - t;
        cr_assert_eq(r.status, 201, "a new model beside the forms: %ld %s", r.status, r.body);
        harness_resp_free(&r);
        if (took > worst_new)
            worst_new = took;
        harness_nap(800);
    }
    double first_worst = 0, later_worst = 0;
    int answers = 0;
    for (int i = 0; i < LANES_CLIENTS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(k[i].wrong, 0, "client %d got an answer other than 422 compile-limit: %s", i,
                     k[i].last_wrong);
        if (k[i].first > first_worst)
            first_worst = k[i].first;
        if (k[i].later_worst > later_worst)
            later_worst = k[i].later_worst;
        answers += k[i].answers;
    }
    fprintf(
        stderr,
        "lanes: %d answers to %d clients in %.0f s; first answers within %.3f s, later ones within %.3f s; "
        "a new model compiled in at most %.3f s beside them\n",
        answers, LANES_CLIENTS, LANES_SECONDS, first_worst, later_worst, worst_new);
    cr_assert_lt(first_worst, LANES_SHARED_BOUND, "the first answers took up to %.2f s: not one derivation",
                 first_worst);
    cr_assert_lt(later_worst, LANES_REMEMBER_BOUND, "a later answer took %.2f s: not remembered",
                 later_worst);
    cr_assert_lt(worst_new, LANES_NEW_MODEL_BOUND, "a new model waited %.2f s behind the forms", worst_new);
    int status;
    cr_assert(harness_stop_checked(&srv, &status), "exit status %#x", status);
}
