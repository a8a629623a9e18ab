/* h_problems.c — GET /problems/ and /problems/{slug}: what each problem type means.
 *
 * Every problem document's "type" is the relative URI /problems/<slug> (engine/base/
 * error.h); these pages, generated from the table of server/problems.c, are what it
 * resolves to: the index of every type, and one page per type with its title, HTTP
 * status, what it means and what to do. Public, as documentation is (no token).
 */
#include <string.h>

#include "http_conn.h"

enum MHD_Result http__problems(http_conn *c)
{
    int index = !strcmp(c->url, "/problems") || !strcmp(c->url, "/problems/");
    size_t len = 0;
    char *html = problems_page(index ? NULL : c->id, &len);
    if (!html)
        return index ? MHD_NO : http__error(c, HAMEL_E_NOT_FOUND, "no such problem type");
    struct MHD_Response *r = http__text_response(html, len);
    if (!r)
        return MHD_NO;
    return http__send(c, 200, r, "text/html; charset=utf-8", len);
}
