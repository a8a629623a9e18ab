/* exprjson.c — expressions as JSON strings: text, LaTeX, "lhs = rhs"; the source text
 * of an expression field (exprjson.h). */
#include "exprjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *take(char *s)
{
    json_t *j = json_string(s ? s : "");
    free(s);
    return j;
}

json_t *exprjson_text(const expr_ctx *c, const expr *e) { return take(expr_print(c, e)); }

json_t *exprjson_latex(const expr_ctx *c, const expr *e) { return take(expr_print_latex(c, e)); }

json_t *exprjson_equation(const expr_ctx *c, const expr *lhs, const expr *rhs, int latex)
{
    char *l = latex ? expr_print_latex(c, lhs) : expr_print(c, lhs);
    char *r = latex ? expr_print_latex(c, rhs) : expr_print(c, rhs);
    size_t len = (l ? strlen(l) : 0) + (r ? strlen(r) : 0) + 4;
    char *line = malloc(len);
    if (line)
        snprintf(line, len, "%s = %s", l ? l : "", r ? r : "");
    free(l);
    free(r);
    return take(line);
}

const char *exprjson_source(const json_t *v, char *buf, size_t size)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (!json_is_number(v))
        return NULL;
    snprintf(buf, size, "%.17g", json_number_value(v));
    return buf;
}
