/* model_build.h — the steps that build a compiled model from its JSON: each is one
 * stage of the table in engine/compile.c, which runs them in order with the reduction,
 * the Boltzmann–Hamel structure, the holonomy analysis and the code tiers between.
 *
 * A step works on one struct model_build, which the compilation owns: begin makes the
 * model, the problem document and the warnings; end (ok or not) frees what the steps
 * kept and, on failure, the model. A step returns MB_OK, MB_FAIL (the problem says
 * why: errors added, `code` set), MB_OOM, or MB_OVER (the budget stopped it).
 */
#ifndef HAMEL_MODEL_BUILD_H
#define HAMEL_MODEL_BUILD_H

#include <jansson.h>

#include "budget.h"
#include "engine_types.h"
#include "model.h"

enum { MB_OK = 0, MB_FAIL = -1, MB_OOM = -2, MB_OVER = -3 };

struct model_build {
    const json_t *js;         /* the model, borrowed */
    const engine_limits *lim; /* borrowed */
    budget *bud;              /* the compilation's budget, borrowed */
    struct engine_model *m;   /* made by begin; freed by end unless ok */
    json_t *prob;             /* the problem document the steps add errors to */
    json_t *warnings;         /* the summary's warnings */
    const json_t *speeds_js;  /* model.speeds, when given */
    expr **cgrad;             /* the constraints' velocity gradients, [nc x n] */
    int code;                 /* the error code of a failure */
};

int model_build_begin(struct model_build *b); /* the model, its context, unknown fields */
int model_build_parse(struct model_build *b); /* coordinates, parameters, T, V, Q, constraints, bodies */
int model_build_constraints(struct model_build *b); /* linear or not, gradients; the speeds */
int model_build_psi(struct model_build *b);         /* Psi, Psi_t, their tape; invertible somewhere */
int model_build_dynamics(struct model_build *b);    /* M, g, b; observables; multipliers' J */
int model_build_dpsi(struct model_build *b);        /* dPsi/dq, dPsi/dt, dPsi_t/dq */
int model_build_positions(struct model_build *b);   /* position constraints; the node limit */
int model_build_energy(struct model_build *b);      /* is E = T + V conserved? */
int model_build_canonical(struct model_build *b);   /* canonical text and id */
int model_build_summary(struct model_build *b);     /* the summary document */

/* A tape of `roots` over the model's inputs, growing the model's work length. */
tape *model_build_tape(struct engine_model *m, expr **roots, int n_roots);

/* Frees what the steps kept; when !ok also the model (b->m = NULL). On ok, sets the
 * model's byte count and frees the problem document. */
void model_build_end(struct model_build *b, int ok);

#endif
