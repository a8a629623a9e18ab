/* bodies.h — the model language of rigid bodies (API.md §1, "bodies"): reference
 * frames by rotation sequences chained from the inertial frame N, points by position
 * vectors chained from the inertial origin O, rigid bodies, particles, gravity and
 * rolling disks. From them bodies_build derives, symbolically and once per model,
 * the kinetic energy T = sum 1/2 m v.v + 1/2 w.I.w, the gravitational potential
 * V = -sum m g.r, and the constraints of the rolling disks.
 *
 * Angular velocities come from the rotation sequences (w_child = R_elem^T w_parent +
 * axis * angle', in child components); velocities are total time derivatives of the
 * inertial components of position vectors (through q' and t). All expressions are
 * built in the model's expression context, so shared sub-expressions (rotation matrix
 * entries, positions of parent points) are shared nodes of one DAG: nothing is
 * expanded.
 */
#ifndef HAMEL_BODIES_H
#define HAMEL_BODIES_H

#include <jansson.h>

#include "expr.h"

/* One constraint derived from the bodies (or given at position level). */
typedef struct bodies_constraint {
    char name[80];
    expr *f;            /* velocity level f(q, q', t) (rolling) or position level f(q, t) */
    char dependent[80]; /* position level: the coordinate to solve for, "" to choose */
    char path[96];      /* JSON path of what generated it */
} bodies_constraint;

/* A quantity of the bodies whose range is checked again when a request overrides the
 * parameters it depends on (geom.h): a mass or a length must be positive, an inertia
 * tensor symmetric and positive semi-definite. Only quantities that depend on
 * parameters are kept; the expressions live in the model's context. */
enum { BODIES_GEOM_MASS, BODIES_GEOM_LENGTH, BODIES_GEOM_INERTIA };
typedef struct bodies_geom {
    int kind;
    int n_roots; /* 1, or 9 for an inertia (row-major) */
    expr *e[9];
    char path[128]; /* the model field, e.g. model.rolling_disks[0].tube_radius */
} bodies_geom;

typedef struct bodies_result {
    int present; /* the model has at least one of the bodies keys */
    expr *T, *V; /* contributions (the number 0 when absent) */
    int n_vel, n_pos;
    bodies_constraint *vel; /* [n_vel] no-slip constraints, linear in q' */
    bodies_constraint *pos; /* [n_pos] holonomic contact conditions f(q, t) = 0 */
    int n_geom;
    bodies_geom *geom; /* [n_geom] parameter-dependent masses, lengths, inertias (owned) */
    json_t *canonical; /* the bodies keys with every expression printed canonically and
                        * every number a real (owned; NULL without bodies) */
} bodies_result;

/* The JSON keys this module reads from a model (NULL-terminated). */
extern const char *const bodies_keys[];

/* Reads the bodies keys of `model` (borrowed; expressions are parsed from a copy,
 * out->canonical) and builds T, V and the rolling
 * constraints in context c, which must already hold the model's parameters, t,
 * coordinates, velocities and definitions. `param_values[i]` is the value of the
 * parameter with symbol index sym_p[i] (np of them), used only to check masses and
 * inertias numerically. Errors go to `problem` with their JSON paths; returns 0, or -1
 * if any was added (or memory ran out). The caller frees *out with bodies_result_free. */
int bodies_build(expr_ctx *c, const json_t *model, size_t max_expr_chars, const int *sym_p,
                 const double *param_values, int np, json_t *problem, bodies_result *out);

/* Frees what bodies_build allocated. Accepts a zeroed result. */
void bodies_result_free(bodies_result *r);

#endif
