/* geom.h — the range of a model's geometry under a request's parameters.
 *
 * The bodies' masses, radii and inertias are checked when the model compiles, at the
 * model's parameter values (bodies.c). A request may override parameters ("parameters"
 * of a simulation, /v1/hamel, /v1/evaluate, /v1/linearize): those that a mass, a length
 * or an inertia depends on are checked again at the request's values, so that a
 * negative mass or radius is a 422 naming the parameter and the field, not a run of
 * something that is no rigid body.
 */
#ifndef HAMEL_GEOM_H
#define HAMEL_GEOM_H

#include <jansson.h>

#include "bodies.h"
#include "model.h"

/* Takes the parameter-dependent quantities of a bodies result (br->geom, which is left
 * empty) into the model. */
void geom_take(struct engine_model *m, bodies_result *br);

/* Builds the model's geometry tape (after the model's input layout is known). Returns 0,
 * or -1 when out of memory. A model without such quantities needs none. */
int geom_compile(struct engine_model *m);

/* Checks the model's geometry at params[np]: 0, or -1 with one error per failing
 * quantity added to *problem (created when NULL) under "parameters.<name>" for each
 * parameter of the request that the quantity depends on and that differs from the
 * model's value. */
int geom_check(const struct engine_model *m, const double *params, json_t **problem);

/* Frees what geom_take and geom_compile put in the model. */
void geom_free(struct engine_model *m);

#endif
