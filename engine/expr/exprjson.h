/* exprjson.h — expressions as JSON strings for the engine's documents (summary,
 * canonical model, derived equations, forms, holonomy): the printed text of the input
 * language, its LaTeX, and an equation "lhs = rhs"; and the other way, the source text
 * of an expression field of a model (a string or a number). One place for what nonlin.c,
 * forms.c, holonomy.c and model.c each used to write for themselves. */
#ifndef HAMEL_EXPRJSON_H
#define HAMEL_EXPRJSON_H

#include <jansson.h>

#include "expr.h"

/* The printed form of e as a new JSON string ("" when printing fails). Caller owns it. */
json_t *exprjson_text(const expr_ctx *c, const expr *e);

/* The LaTeX form of e as a new JSON string ("" when printing fails). Caller owns it. */
json_t *exprjson_latex(const expr_ctx *c, const expr *e);

/* "lhs = rhs" as a new JSON string, as text (latex == 0) or LaTeX. Caller owns it. */
json_t *exprjson_equation(const expr_ctx *c, const expr *lhs, const expr *rhs, int latex);

/* The source text of an expression field: the string itself, or a number printed
 * with %.17g into buf[size]; NULL when v is neither (or NULL). Borrows v. */
const char *exprjson_source(const json_t *v, char *buf, size_t size);

#endif
