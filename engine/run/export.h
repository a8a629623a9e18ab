/* export.h — generated code: a model's equations as one standalone C or Python file.
 *
 * export_source writes the right-hand side f(t, y, p) of the state y = [q (n), u (k)]
 * that `hamel run` integrates (the Boltzmann–Hamel formulation), its exact Jacobian
 * (forward-mode: each tape printed twice, once for values and once for its tangents,
 * by tangent.c's rules), the kinematics q' = K(t, q, u, p) and the parameters with
 * their values. The tapes (tape.h) are printed as straight-line code, one statement
 * per slot; where the right-hand side needs a linear solve per evaluation (a mass
 * matrix M* that depends on the state, or the numeric path through Psi) the file
 * carries its own small dense Gaussian elimination with partial pivoting (C) or uses
 * numpy (Python).
 *
 * With a parsed simulation request the file also holds its initial state, parameter
 * values, sample times, tolerances and method, and (C, compiled with -DHAMEL_MAIN; Python,
 * run as a script) a main that integrates it (GSL's stepper of the request, rk8pd by
 * default; scipy's DOP853) and prints CSV: t, every coordinate, every speed.
 *
 * The model's names and texts are the user's: they reach the file only as identifiers
 * made of [A-Za-z0-9_] with an index (never two alike), as string literals in which
 * every other byte is an escape, and as comments of printable ASCII in which a comment
 * cannot end ("*" "/" is broken up). No other user text is written.
 */
#ifndef HAMEL_EXPORT_H
#define HAMEL_EXPORT_H

#include <jansson.h>
#include <stddef.h>

#include "model.h"
#include "sim.h"

enum export_lang { EXPORT_C, EXPORT_PYTHON };

/* The largest generated file, bytes: past it 422 limit-exceeded. */
#define EXPORT_MAX_BYTES ((size_t)64 << 20)

/* Writes the source for m in `lang`. req (may be NULL: no baked state, no main) is a
 * parsed request of the Boltzmann–Hamel formulation; name and description (may be
 * NULL) go into the header comment. On success returns 0 with *text (malloc'd,
 * NUL-terminated; caller frees) and *len; else an engine error code with *problem
 * (the model has no formulation the file can carry, or the file would be too large). */
int export_source(const struct engine_model *m, const sim_request *req, int lang, const char *name,
                  const char *description, char **text, size_t *len, json_t **problem);

#endif
