/* sim.h — simulation requests: the parsed form of API.md §3's request, the run that
 * integrates it (Boltzmann–Hamel or multipliers formulation), and the result JSON
 * with trajectory, checks, Hamel coefficients and stats. */
#ifndef HAMEL_SIM_H
#define HAMEL_SIM_H

#include <jansson.h>

#include "error.h"
#include "engine_types.h"
#include "hamel.h"
#include "model.h"

enum sim_formulation { SIM_HAMEL, SIM_MULTIPLIERS };
enum sim_hamel_mode { SIM_HAMEL_NONE, SIM_HAMEL_INITIAL, SIM_HAMEL_SAMPLES };

typedef struct sim_request {
    double *params; /* [np] model values with the request's overrides */
    double t0, t_end;
    double *q0;  /* [n] */
    double *u0;  /* [k] independent speeds (hamel) */
    double *qd0; /* [n] velocities (both formulations; derived from u0 if absent) */
    int have_qd0;
    double *times; /* [n_times] output times, increasing, last = t_end */
    int n_times;
    char method[16];
    double rtol, atol, h0;
    long max_steps;
    int formulation;   /* enum sim_formulation */
    int hamel_mode;    /* enum sim_hamel_mode */
    int *pos_dep;      /* [npos] coordinates solved for by the position-level constraints */
    double pos_tol;    /* past this max |f| a sample is projected back (position_tolerance) */
    int pos_project;   /* "projection": project drift (default true) */
    int pos_iters;     /* Newton iterations of the initial solve */
    double pos_resid0; /* max |f| after the initial solve */
    double *q_guess;   /* [n] the initial q as given */
    int n_inv;
    char **inv_names;
    expr_ctx *inv_ctx;
    tape *inv_tape;
    int n_ev;               /* "events" */
    char **ev_names;        /* [n_ev] */
    int *ev_dir;            /* [n_ev] enum integ_event_dir */
    unsigned char *ev_stop; /* [n_ev] action "stop" */
    expr_ctx *ev_ctx;
    int n_ev_user;   /* the user's events (listed); the rest are the contacts' (2 each) */
    tape *ev_tape;   /* -> g [n_ev_user] on the model's inputs [n_in] then the multipliers [nc]
                      * (speeds and contact forces are definitions) */
    int ev_k;        /* the model's k when the trajectory reports speeds, else 0 */
    int *ev_lam_sym; /* [nc] symbol of lambda_<constraint> in ev_ctx, or -1 */
    int ev_lam;      /* the user's events read the multipliers */
    int n_con;       /* contacts (contact.h): rolling disks with a friction */
    struct contact_spec *con;
} sim_request;

/* Parses and validates a request against the model. On success returns 0 and fills
 * *req (free with sim_request_free); else returns an error code with *problem. */
int sim_request_parse(const struct engine_model *m, const json_t *js, const engine_limits *lim,
                      sim_request *req, json_t **problem);

/* Nonlinear constraints in the reduced form: q' from the speeds u at (t, q) when they
 * determine it. Returns 0 with qd[n] (and the guess of w at it), or an error with
 * *problem at `path` (the speeds' JSON path): no q' satisfies the constraints, or more
 * than one does (the problem names the roots, also as "roots": [{coordinate: q'}], and
 * asks for qdot, of which the nearest root is taken). */
int sim_nl_velocity(const struct engine_model *m, hamel_ws *w, double t, const double *q, const double *u,
                    double *qd, const char *path, json_t **problem);

/* sim_nl_velocity with its words: `lead` names what gave the speeds ("these speeds"),
 * `advice` says how to choose among several roots. */
int sim_nl_velocity_why(const struct engine_model *m, hamel_ws *w, double t, const double *q, const double *u,
                        double *qd, const char *path, const char *lead, const char *advice, json_t **problem);

/* Fills values[np] with the model's parameter values overridden by the request's
 * "parameters" object (may be NULL); adds an error to *problem (creating it) for an
 * unknown name or a value that is not a finite number. */
void sim_parse_parameters(const struct engine_model *m, const json_t *params, double *values,
                          json_t **problem);

/* Frees what sim_request_parse allocated inside req. Accepts a zeroed req. */
void sim_request_free(sim_request *req);

/* Runs a parsed request. Same contract as engine_simulate. */
int sim_run(const struct engine_model *m, const sim_request *req, const engine_limits *lim,
            engine_control *ctl, json_t **result, json_t **problem);

/* sim_run with the result written as JSON text (engine_simulate_text): `head` members
 * first (may be NULL; borrowed), then the result's members not in head. */
int sim_run_text(const struct engine_model *m, const sim_request *req, const engine_limits *lim,
                 engine_control *ctl, const json_t *head, char **text, size_t *len, json_t **problem);

/* The /v1/hamel point object {t, q, gamma: [...], gamma_t: [...]} from the values
 * gamma [n^3] and gamma_t [n^2], listing the entries not identically zero: those of
 * engine_model.gamma_nz with a bit of mask (model_gamma_mask of the request's parameters). */
json_t *sim_gamma_point(const struct engine_model *m, double t, const double *q, const double *gamma,
                        const double *gamma_t, unsigned char mask);

/* The "order" array: speed names then linear constraint names. */
json_t *sim_gamma_order(const struct engine_model *m);

#endif
