/* test_routes.c — the route table (server/routes.c) against the real hamel-server.
 *
 * One table drives dispatch, the 405 answer's Allow header and CORS preflight; these
 * cases pin what it derives: the methods a path allows (HEAD wherever GET, OPTIONS
 * always), 404 for a /v1 path no row matches (an {id} that is empty, decodes to '/', or
 * is followed by an unknown segment), the static front end for any other path, and the
 * preflight of an unknown /v1 path. The answers are main's before the table replaced
 * the if-chain (217 method x path pairs compared by hand; these are a sample).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

static harness_server srv;

static void setup(void) { cr_assert_eq(harness_start(&srv, NULL), 0, "the server did not start"); }

static void teardown(void) { harness_stop(&srv); }

TestSuite(routes, .init = setup, .fini = teardown, .timeout = 120);

typedef struct route_case {
    const char *method, *path;
    long status;
    const char *allow; /* the Allow header, or NULL when there must be none */
} route_case;

static const route_case cases[] = {
    {"GET", "/v1/models", 405, "POST, OPTIONS"},
    {"PATCH", "/v1/simulations", 405, "POST, OPTIONS"},
    {"DELETE", "/v1/health", 405, "GET, HEAD, OPTIONS"},
    {"POST", "/livez", 405, "GET, HEAD, OPTIONS"},
    {"DELETE", "/v1/models/abc", 405, "GET, HEAD, OPTIONS"},
    {"POST", "/v1/models/abc/equations", 405, "GET, HEAD, OPTIONS"},
    {"PUT", "/v1/jobs/x", 405, "GET, HEAD, DELETE, OPTIONS"},
    {"POST", "/index.html", 405, "GET, HEAD, OPTIONS"},
    {"OPTIONS", "/v1/models", 204, "POST, OPTIONS"},
    {"OPTIONS", "/v1/jobs/x", 204, "GET, HEAD, DELETE, OPTIONS"},
    {"OPTIONS", "/v1/batches/x", 204, "GET, HEAD, DELETE, OPTIONS"},
    {"OPTIONS", "/v1/nope", 204, "GET, POST, DELETE, OPTIONS"},
    {"OPTIONS", "/x/y.js", 204, "GET, HEAD, OPTIONS"},
    {"GET", "/v1", 404, NULL},
    {"GET", "/v1/jobs/", 404, NULL},
    {"GET", "/v1/jobs/x/y", 404, NULL},
    {"GET", "/v1/models/abc/x", 404, NULL},
    {"GET", "/v1/models/a%2Fb", 404, NULL},
    {"GET", "/v1/models//equations", 404, NULL},
    {"DELETE", "/v1/health/", 404, NULL},
    {"GET", "/metrics/", 404, NULL},
    {"GET", "/livez", 200, NULL},
    {"HEAD", "/readyz", 200, NULL},
    {"GET", "/v1/models/abc", 404, NULL},
    {"GET", "/v1/models/abc/equations", 404, NULL},
    {"GET", "/", 200, NULL},
};

Test(routes, methods_allow_and_preflight_come_from_one_table)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const route_case *k = &cases[i];
        harness_resp r;
        cr_assert_eq(harness_request(&srv, k->method, k->path, NULL, NULL, &r), CURLE_OK, "%s %s", k->method,
                     k->path);
        char allow[128], methods[128];
        const char *a = harness_header(&r, "Allow", allow, sizeof allow);
        cr_expect_eq(r.status, k->status, "%s %s: %ld, expected %ld", k->method, k->path, r.status,
                     k->status);
        if (k->allow) {
            cr_expect(a && !strcmp(a, k->allow), "%s %s: Allow %s, expected %s", k->method, k->path,
                      a ? a : "(none)", k->allow);
        } else {
            cr_expect(!a, "%s %s: Allow %s, expected none", k->method, k->path, a);
        }
        if (!strcmp(k->method, "OPTIONS")) {
            const char *m = harness_header(&r, "Access-Control-Allow-Methods", methods, sizeof methods);
            cr_expect(m && !strcmp(m, k->allow), "%s %s: Access-Control-Allow-Methods %s", k->method, k->path,
                      m ? m : "(none)");
        }
        harness_resp_free(&r);
    }
}

Test(routes, an_id_segment_reaches_its_handler_decoded_once)
{
    /* "%61bc" decodes to "abc": the jobs handler sees the decoded id (no such job). */
    harness_resp r;
    cr_assert_eq(harness_request(&srv, "GET", "/v1/jobs/%61bc", NULL, NULL, &r), CURLE_OK);
    cr_assert_eq(r.status, 404);
    const char *detail = json_string_value(json_object_get(r.json, "detail"));
    cr_assert(detail && strstr(detail, "no job"), "the jobs handler answered: %s", r.body);
    harness_resp_free(&r);
    /* decoded once, by libmicrohttpd: "a%252Fb" is the id "a%2Fb" (decoded twice it was
     * "a/b", a path no row matches, and "%2561bc" was "abc") */
    cr_assert_eq(harness_request(&srv, "GET", "/v1/jobs/a%252Fb", NULL, NULL, &r), CURLE_OK);
    cr_assert_eq(r.status, 404);
    detail = json_string_value(json_object_get(r.json, "detail"));
    cr_assert(detail && strstr(detail, "no job"), "the jobs handler answered: %s", r.body);
    harness_resp_free(&r);
    cr_assert_eq(harness_request(&srv, "GET", "/v1/batches/abc", NULL, NULL, &r), CURLE_OK);
    cr_assert_eq(r.status, 404);
    detail = json_string_value(json_object_get(r.json, "detail"));
    cr_assert(detail && strstr(detail, "no batch"), "the batches handler answered: %s", r.body);
    harness_resp_free(&r);
}
