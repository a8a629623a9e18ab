/* hameltext.h — the text forms of the service's documents that `hamel` (local) and
 * `hamel-remote` print alike: a result's trajectory as CSV (the column names the web
 * page uses too), a model summary as lines, a problem document as lines with a caret
 * under the column of the offending expression. Needs jansson only (no libcurl), so the
 * local CLI links it without the client library.
 *
 * Every function borrows its arguments and writes to the FILE it is given.
 */
#ifndef HAMELTEXT_H
#define HAMELTEXT_H

#include <jansson.h>
#include <stdio.h>

/* Writes `v` after `sep` with the fewest significant digits (15 to 17) that read back as
 * the same double. */
void hameltext_put_double(FILE *f, const char *sep, double v);

/* The names of a list of strings or {"name": ...} objects (a model's "speeds", say) as a
 * new array of strings (caller frees). */
json_t *hameltext_names(const json_t *list);

/* Writes the trajectory of `result` as CSV: a header t, the coordinates, the speeds,
 * then each coordinate's rate as name' (and, for the multipliers formulation, each
 * constraint's multiplier as lambda_<name>), and one row per sample. The model (may be NULL)
 * gives the column order. Returns 0, or -1 (with a message on stderr) when the result
 * has no trajectory. */
int hameltext_csv(FILE *f, const json_t *result, const json_t *model);

/* Writes a model summary (API.md §2) for FILE as lines: "FILE: valid, <id>" (with
 * " (new)" or " (known)" when `created` is 1 or 0; -1 says nothing), n, m, dof, the
 * coordinates, the speeds and each constraint's kind. */
void hameltext_summary(FILE *f, const char *file, const json_t *summary, int created);

/* Writes a problem document for FILE: "FILE: <title> (HTTP status)" when `status` > 0,
 * else "FILE: <title>", then one line per entry of "errors" (path, column, reason) and,
 * when the path leads to an expression of `model` (may be NULL; paths are rooted at
 * "model"), the expression with a caret under the column. */
void hameltext_problem(FILE *f, const char *file, const json_t *problem, const json_t *model, int status);

/* Writes each entry of the "warnings" of `result` (a result or a batch line) as one line
 * "PROG: warning: <code>: <message>" to f (standard error, for a run). Returns how many. */
int hameltext_warnings(FILE *f, const char *prog, const json_t *result);

/* For a FILE of the form {"model", WHICH: {request}} (WHICH linearize, evaluate or
 * steady): the first top-level member of `doc` that is a member of such a request
 * ("parameters", "q", "states", ...) and so would be silently left out, sitting beside
 * WHICH instead of inside it; NULL when there is none (or `doc` has no WHICH object).
 * Other members (a case file's "simulation", "title", "description") are not requests'
 * and are let be. Borrowed. */
const char *hameltext_stray_member(const json_t *doc, const char *which);

#endif
