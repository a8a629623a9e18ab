/* model.h — a compiled model: what engine_model_compile derives from the JSON of
 * API.md §1, shared (read-only) by the formulations, the Hamel coefficients, the
 * checks and the derived equations.
 *
 * Quasi-velocities are ordered speeds first (u_1..u_k, k = n - m) then the linear
 * constraints (u_{k+1}..u_n = 0): together they define the n x n matrix Psi and the
 * vector Psi_t of u = Psi(q,t) q' + Psi_t(q,t). Nonlinear constraints are kept apart.
 *
 * Every tape reads one input vector laid out as [parameters, t, q_1..q_n,
 * q_1'..q_n'] (model_input_* give the offsets); tapes that do not use the velocities
 * ignore that part.
 */
#ifndef HAMEL_MODEL_H
#define HAMEL_MODEL_H

#include <pthread.h>
#include <stdatomic.h>

#include <jansson.h>

#include "error.h"
#include "engine_types.h"
#include "expr.h"
#include "tape.h"

typedef struct model_constraint {
    char *name;
    expr *f;         /* f(q, q', t) = 0 */
    int linear;      /* linear in q' */
    int rheonomic;   /* depends on t, or has a velocity-free part */
    int holonomic;   /* integrable by itself: omega ^ d omega = 0 (holonomy.h) */
    int gamma_free;  /* its Hamel coefficients on the speeds vanish (first order only) */
    int row;         /* row of Psi (linear ones), else -1 */
    expr *pos;       /* a position-level constraint pos(q, t) = 0 whose time derivative is f,
                      * else NULL */
    int generated;   /* made by the engine (rolling disks, position constraints): not
                      * part of the canonical "constraints" */
    int from_bodies; /* made from the bodies keys (bodies.h) */
    int pos_dep;     /* position level: the coordinate the model names to solve for, or -1 */
} model_constraint;

/* The bits of engine_model.gamma_nz and gamma_t_nz. */
#define GAMMA_NZ_MODEL 1  /* not zero at the model's parameter values */
#define GAMMA_NZ_PARAMS 2 /* not zero at other parameter values */

/* The bits of gamma_nz that say "listed" for a request with these parameter values:
 * GAMMA_NZ_MODEL at the model's own, both at any others. */
unsigned char model_gamma_mask(const struct engine_model *m, const double *params);

struct engine_model {
    atomic_int refs;
    char id[80];
    char *canonical;
    char *name;
    expr_ctx *ctx;

    int n;                              /* coordinates */
    int k;                              /* independent speeds = n - (linear constraints) */
    int nc;                             /* constraints, linear or not */
    int nlin;                           /* linear constraints */
    int np;                             /* parameters */
    char **coords;                      /* [n] */
    char **speeds;                      /* [k] */
    expr **speed_f;                     /* [k] u_r(q, q', t) */
    model_constraint *cons;             /* [nc] */
    char **params;                      /* [np], sorted by name */
    double *param_values;               /* [np] */
    int *sym_q, *sym_qd, *sym_p, sym_t; /* symbol indices */
    int *sym_u;                         /* [k] speed symbols (for printed equations) */
    int default_speeds;                 /* speeds were chosen by the engine */
    int nl_reduced; /* nonlinear constraints with n - m speeds (m: all constraints): Psi's last
                     * rows are their gradients df/dq'(q, q', t), q' is solved from (q, u) by
                     * Newton's method and the Boltzmann–Hamel (Poincare–Chetaev) equations
                     * are integrated on (q, u) (hamel.h) */
    int ndefs;
    char **def_names, **def_texts; /* [ndefs], to re-parse in a fresh context */
    double compile_ms;

    expr *T, *V;
    expr *T_hand, *V_hand; /* the hand-written parts (T = T_hand + T of the bodies) */
    json_t *bodies_js;     /* the bodies keys of the model as given (for the canonical form) */
    json_t *units_js;      /* "units": {symbol: unit text} as given, validated; NULL if absent */
    json_t *contacts_js;   /* "contacts": [{name, normal?, tangential?, friction}] as given, validated
                            * (names of constraints; contact.h reads it); NULL if absent */
    int npos;              /* position-level constraints */
    int *pos_con;          /* [npos] their index in cons */
    tape *tape_pos;        /* -> pos_j [npos], d pos_j / d q_i [npos * n] (row-major) */
    expr **Q;              /* [n] generalized forces (0 where absent) */
    expr **psi;            /* [n*n] row-major; rows = speeds then linear constraints */
    expr **psi_t;          /* [n] */
    char **row_names;      /* [n] speeds then linear constraints */

    int scleronomic;
    int energy_conserved;
    int energy_is_jacobi; /* the energy check uses p.q' - T + V, not T + V */
    char energy_reason[320];

    int n_in;            /* tape inputs: np + 1 + 2n */
    tape *tape_psi;      /* -> psi [n*n], psi_t [n] */
    tape *tape_dyn;      /* -> M upper [n(n+1)/2], g [n], b [n] */
    tape *tape_obs;      /* -> energy, f_j for every constraint [nc], p_i = dT/dq_i' [n] */
    tape *tape_mult;     /* -> J [nc*n], Df [nc] (the multipliers formulation) */
    tape *tape_dpsi;     /* -> the entries of dPsi that are not the number 0, one output each
                          * (model_run_dpsi places them: dpsi_at) */
    int32_t *dpsi_at;    /* [tape_dpsi->n_outputs] their places in the dense layout
                          * dPsi_ji/dq_k [n^3], dPsi_ji/dt [n^2], dPsi_jt/dq_i [n^2] */
    int *dpsi_pair_ptr;  /* [n+1]: for each row j of Psi, at dpsi_pair[ptr[j] .. ptr[j+1]) */
    int *dpsi_pair;      /* the pairs i*n + k, increasing, where dPsi_ji/dq_k or dPsi_jk/dq_i is
                          * not identically 0 (hamel.c's Hamel coefficients visit these only) */
    tape *tape_fast;     /* -> q' [n], M* upper [k(k+1)/2] (not when fast_mass_const),
                          * F [k] on (q, u, t): the symbolically reduced equations
                          * (reduce.h), or NULL */
    tape *tape_mass;     /* -> M* upper [k(k+1)/2] when fast_mass_const, else NULL */
    int *u_slot;         /* [k] input slot of speed u_r for tape_fast */
    int fast_mass_const; /* M* depends on the parameters only: factor it once per run */
    tape *tape_det;      /* -> det Psi up to a nonzero number (one expression pivot), or NULL */
    int psi_det_const;   /* det Psi is a nonzero number (every pivot of the symbolic inverse
                          * was one): Psi is never singular, the run needs no watch */
    int work_len;        /* doubles of scratch the largest tape needs */

    struct hamel_sparse *sparse; /* Psi's block-triangular structure, M's pattern (hamel.c) */

    unsigned char *gamma_nz;   /* [n^3] gamma^j_rl not identically zero, index (j*n+r)*n+l: bit
                                * GAMMA_NZ_MODEL at the model's parameter values, GAMMA_NZ_PARAMS
                                * at others only (model_gamma_mask; the derived equations list
                                * either) */
    unsigned char *gamma_t_nz; /* [n^2] gamma^j_r not identically zero (the same bits) */
    size_t gamma_values;       /* numbers of one point's coefficients in a result: t, q and 4 for
                                * each gamma^j_rl listed ({j, r, l, value}), 3 for each gamma^j_r */

    struct native_code *_Atomic native; /* the optimizing tier once built (native.h), or NULL */
    atomic_int native_state;            /* NATIVE_NONE / _QUEUED / _READY / _FAILED */
    atomic_int native_runs;             /* runs so far (hotness, native_note_run) */
    atomic_int jit_done;                /* the first tier's libtcc work finished (native_jit) */
    atomic_long native_evals;           /* right-hand side evaluations in them */

    struct bodies_geom *geom; /* [n_geom] masses, radii, inertias that depend on parameters (geom.h) */
    int n_geom;
    unsigned char *geom_deps; /* [n_geom*np] which parameters each depends on */
    tape *tape_geom;          /* -> their values, or NULL */

    json_t *summary;
    char *equations;                  /* API.md §5 JSON text, made on first request (equations_ensure) */
    struct reduce_result *eq_pending; /* what equations_derive prints, until it has (under forms_lock) */
    expr **red_kin;                   /* [n] q' = K(q, u, t) when symbolic (reduce.h, nonlin.h), else NULL */
    expr **red_phi;                   /* [n*n] Phi = Psi^-1 when symbolic (linear constraints), else NULL */
    pthread_mutex_t forms_lock;       /* held while a form (forms.h) adds nodes to ctx */
    char *forms[5];                   /* the forms' JSON text, made on first request */
    size_t bytes;
    int shell; /* engine_model_shell: id, canonical, summary and bytes only */
};

static inline int model_input_t(const struct engine_model *m) { return m->np; }
static inline int model_input_q(const struct engine_model *m) { return m->np + 1; }
static inline int model_input_qd(const struct engine_model *m) { return m->np + 1 + m->n; }

/* Index of a coordinate / speed / parameter / row name, or -1. */
int model_coord_index(const struct engine_model *m, const char *name);
int model_speed_index(const struct engine_model *m, const char *name);
int model_param_index(const struct engine_model *m, const char *name);

/* A new expression context with the model's symbols (same indices as m->ctx for
 * parameters, t, coordinates and velocities) and definitions, for parsing request
 * expressions (invariants) without touching the shared context. Caller frees. */
expr_ctx *model_fresh_ctx(const struct engine_model *m);

/* Builds a tape over the model's input layout from roots of a context made by
 * model_fresh_ctx (or m->ctx at compile time). Caller frees. */
tape *model_tape(const struct engine_model *m, const expr_ctx *c, expr **roots, int n_roots);

/* Fills in[n_in] with the k-th pseudo-random test configuration: q, q' and t in
 * [0.35, 1.35], parameters at their values. */
void model_test_point(const struct engine_model *m, int k, double *in);

/* dPsi at the tape inputs in, written into its dense layout dense[n^3 + 2 n^2] (model.h:
 * dpsi_at) at the entries that are not identically 0 only: the caller clears dense once
 * (calloc) and the zeros stay. work: m->work_len doubles; scratch: tape_dpsi->n_outputs
 * doubles (model_dpsi_count). At n = 200 a chain of rolling disks has 160 such entries
 * of 8 million. */
void model_run_dpsi(const struct engine_model *m, const double *in, double *work, double *scratch,
                    double *dense);

/* The outputs of tape_dpsi (0 before it is built). */
int model_dpsi_count(const struct engine_model *m);

#endif
