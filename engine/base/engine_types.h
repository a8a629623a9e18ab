/* engine_types.h — what the engine's callers and its layers share: the engine's
 * version, the opaque compiled model and its reference counting, the caps on what a request may make
 * the engine do (engine_limits) and the control a caller keeps while it runs
 * (engine_control). Part of the public face (engine.h includes it); kept in the base
 * layer so that the layers below the facade can name these types without including
 * the facade.
 */
#ifndef HAMEL_ENGINE_TYPES_H
#define HAMEL_ENGINE_TYPES_H

#include <stdatomic.h>
#include <stddef.h>

/* The engine's build identity is ENGINE_VERSION and ENGINE_NUMERICS together (identity.h,
 * engine/DESIGN.md "Build identity"): it is part of every result key and of the native code
 * cache's names, so results of an older engine are recomputed, never served. Bump
 * ENGINE_NUMERICS with every change that may alter a number the engine computes (a zero
 * decision, a derivation, an integrator, a check, code generation); bump ENGINE_VERSION
 * for a release, and then reset nothing: the pair only ever moves forward. */
#define ENGINE_VERSION "0.3.0"
#define ENGINE_NUMERICS                                                                                      \
    19 /* 2: nonlinear roots (item 6); 3: sound zero decisions (issue 15); 4: numbers folded only when       \
         nothing is lost in products and quotients too; 5: a Hamel coefficient made of Phi's rounding        \
         noise only is zero; 6: and of dPsi's and Psi's evaluation error (running bounds); 7: sums shifted   \
         by a parameter kept whole, d tanh = cosh^-2; 8: M* singular per speed, energy kept                  \
         by forces that do no work; 9: constraint rows scaled in the multipliers' KKT matrix and             \
         projection, constraint checks relative to the constraint's coefficients; 10: default speeds         \
         chosen on rows scaled to 1; 11: zero decisions' resolution 1e-13 of the own terms;                  \
         12: d abs = sign, d sqrt(a)^x = x/2 sqrt(a)^(x-2) da; 13: d abs(a)^x = x a abs(a)^(x-2) da (x >=    \
         2); 14: the gamma structure at other parameter values too; 15: Frobenius test 1e-12; 16: the        \
         multipliers' KKT columns scaled by M's diagonal; 17: qdot checks without a floor of 1;              \
         18: logistic and softplus derivatives overflow-safe; 19: the gamma structure's resolution 1e-11 */

typedef struct engine_model engine_model;

/* The most coordinates any engine_limits.max_coordinates may allow: a few per-call
 * buffers of the facade and the running layer are this long (engine.c's speeds of a
 * point, run/sim.c's roots and state, run/watch.c's charts), so a model past it is
 * refused when compiled (model.coordinates), never cut short or skipped there. */
#define ENGINE_COORDINATES_CEILING 256

/* Caps on what one request may make the engine do. Every growable thing has one. */
/* The compile budget (max_compile_seconds) counts the CPU time of the thread doing the
 * work; a compilation, derivation or request that is starved or stalled still stops at
 * this many times the budget of wall-clock time. */
#define ENGINE_COMPILE_WALL_FACTOR 4
/* The steady-motion search (engine_steady): this many compile budgets in all. */
#define ENGINE_STEADY_BUDGET_FACTOR 5

typedef struct engine_limits {
    size_t max_expr_chars;      /* length of one expression string */
    size_t max_nodes;           /* expression nodes in a model after differentiation */
    int max_coordinates;        /* n (at most ENGINE_COORDINATES_CEILING) */
    int max_samples;            /* output samples of one simulation */
    long max_steps;             /* integrator steps of one simulation (upper bound) */
    double max_wall_seconds;    /* wall time of one simulation (upper bound) */
    int max_points;             /* points of one /v1/hamel request */
    double max_compile_seconds; /* CPU time (of the working thread) of one model compilation;
                                 * wall-clock backstop ENGINE_COMPILE_WALL_FACTOR times it */
    size_t max_compile_bytes;   /* memory one model compilation may hold */
    int max_states;             /* states of one /v1/evaluate, points of one /v1/linearize */
    int max_parameters;         /* entries of model.parameters */
    int max_definitions;        /* entries of model.definitions */
    size_t max_output_values;   /* samples x series of one simulation's result (0: no cap) */
} engine_limits;

/* The defaults used when a caller passes NULL limits. */
extern const engine_limits engine_default_limits;

/* What a running simulation shares with whoever started it. The caller owns it and
 * keeps it alive for the duration of engine_simulate. */
typedef struct engine_control {
    atomic_int cancel;       /* set nonzero to stop between integrator steps */
    _Atomic double progress; /* written by the engine: t reached / t_end, 0..1 */
    long max_steps;          /* 0: the request's own budget (capped by limits) */
    double max_wall_seconds; /* 0: the limits' budget */
} engine_control;

/* Adds a reference. */
engine_model *engine_model_retain(engine_model *m);

/* Drops a reference; the last one frees the model. Accepts NULL. */
void engine_model_release(engine_model *m);

#endif
