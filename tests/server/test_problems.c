/* test_problems.c — the error codes' statuses and pages (server/problems.c): every code
 * of the engine and of the service has a row with an HTTP status; problem documents carry
 * a relative type that the server answers with a page; the engine alone writes no status. */
#include <criterion/criterion.h>
#include <string.h>

#include "engine.h"
#include "harness.h"
#include "problems.h"

static const int all_codes[] = {
#define CODE(name, slug, title) HAMEL_E_##name,
    HAMEL_ERROR_MAP(CODE) PROBLEMS_SERVER_MAP(CODE)
#undef CODE
};

Test(problems, every_code_has_one_row_with_an_http_status)
{
    size_t n = sizeof all_codes / sizeof all_codes[0];
    cr_assert_eq(problems_count(), n, "%zu rows for %zu codes", problems_count(), n);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (size_t r = 0; r < problems_count(); r++)
            found += problems_code_at(r) == all_codes[i];
        cr_expect_eq(found, 1, "code %s has %d rows", hamel_error_slug(all_codes[i]), found);
        int st = problems_status(all_codes[i]);
        cr_expect(st >= 400 && st <= 599, "%s: status %d", hamel_error_slug(all_codes[i]), st);
    }
    cr_expect_eq(problems_status(HAMEL_E_COMPILE_LIMIT), 422);
    cr_expect_eq(problems_status(HAMEL_E_QUEUE_FULL), 503);
    cr_expect_eq(problems_status(HAMEL_E_NOT_FOUND), 404);
}

/* The engine builds a document with the status only once the service installed it. */
Test(problems, the_status_comes_from_the_service)
{
    hamel_error_use(NULL);
    json_t *bare = hamel_problem_new(HAMEL_E_PARSE, "x");
    cr_expect_null(json_object_get(bare, "status"), "the engine alone writes no status");
    cr_expect_str_eq(json_string_value(json_object_get(bare, "type")), "/problems/expression-syntax");
    problems_init();
    json_t *p = hamel_problem_new(HAMEL_E_PARSE, "x");
    char *text = json_dumps(p, JSON_COMPACT);
    cr_expect_str_eq(
        text,
        "{\"type\":\"/problems/expression-syntax\",\"title\":\"An expression could not be parsed\","
        "\"status\":422,\"errors\":[],\"detail\":\"x\"}",
        "the document's members and order are those clients know");
    free(text);
    json_t *q = hamel_problem_new(HAMEL_E_GONE, NULL);
    cr_expect_str_eq(json_string_value(json_object_get(q, "type")), "/problems/gone");
    cr_expect_eq(json_integer_value(json_object_get(q, "status")), 410);
    cr_expect_eq(hamel_problem_code(q), HAMEL_E_GONE, "the service's slugs map back to their codes");
    json_t *old = json_pack("{s:s}", "type", "https://hamel.dev/problems/queue-full");
    cr_expect_eq(hamel_problem_code(old), HAMEL_E_QUEUE_FULL, "an old absolute type still maps");
    json_decref(old);
    json_decref(q);
    json_decref(p);
    json_decref(bare);
}

Test(problems, each_type_is_served_as_a_page)
{
    harness_server s;
    cr_assert_eq(harness_start(&s, NULL), 0);
    harness_resp r = {0};
    char ctype[128];
    cr_assert_eq(harness_request(&s, "GET", "/problems/", NULL, NULL, &r), CURLE_OK);
    cr_expect_eq(r.status, 200);
    cr_expect(harness_header(&r, "Content-Type", ctype, sizeof ctype) && strstr(ctype, "text/html"), "%s",
              ctype);
    for (size_t i = 0; i < sizeof all_codes / sizeof all_codes[0]; i++) {
        char link[128];
        snprintf(link, sizeof link, "href=\"/problems/%s\"", hamel_error_slug(all_codes[i]));
        cr_expect(strstr(r.body, link) != NULL, "the index links %s", link);
    }
    harness_resp_free(&r);

    /* A real problem: its type resolves (relative to the request) to its page. */
    cr_assert_eq(harness_request(&s, "GET", "/v1/jobs/00000000000000000000000000000000", NULL, NULL, &r),
                 CURLE_OK);
    cr_expect_eq(r.status, 404);
    const char *type = json_string_value(json_object_get(r.json, "type"));
    cr_assert_str_eq(type, "/problems/not-found");
    char path[64];
    snprintf(path, sizeof path, "%s", type);
    harness_resp_free(&r);
    cr_assert_eq(harness_request(&s, "GET", path, NULL, NULL, &r), CURLE_OK);
    cr_expect_eq(r.status, 200);
    cr_expect(strstr(r.body, "<h1>No such resource</h1>") && strstr(r.body, "HTTP status 404") &&
                  strstr(r.body, "What to do"),
              "%s", r.body);
    harness_resp_free(&r);

    cr_assert_eq(harness_request(&s, "GET", "/problems/no-such-thing", NULL, NULL, &r), CURLE_OK);
    cr_expect_eq(r.status, 404);
    cr_expect_str_eq(json_string_value(json_object_get(r.json, "type")), "/problems/not-found");
    harness_resp_free(&r);
    harness_stop(&s);
}
