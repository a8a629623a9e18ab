/* sim.c — simulation requests (API.md §3): the integration run, the checks along the
 * trajectory and the result document (the requests' validation is request.c's). */
#include "sim.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "geom.h"
#include "hamel.h"
#include "holo.h"
#include "identity.h"
#include "integ.h"
#include "jit.h"
#include "jsonout.h"
#include "contact.h"
#include "mult.h"
#include "native.h"
#include "warnings.h"
#include "watch.h"

#define SIM_PROJECT 2            /* on_sample: stop, the state was projected: restart */
#define SIM_MAX_EVENT_HITS 10000 /* crossings listed in one result; later ones are counted */

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* ---- Hamel coefficients as JSON ---- */

json_t *sim_gamma_order(const struct engine_model *m)
{
    json_t *order = json_array();
    for (int j = 0; j < m->n; j++)
        json_array_append_new(order, json_string(m->row_names[j]));
    return order;
}

json_t *sim_gamma_point(const struct engine_model *m, double t, const double *q, const double *gamma,
                        const double *gamma_t, unsigned char mask)
{
    int n = m->n;
    json_t *qo = json_object();
    for (int i = 0; i < n; i++)
        json_object_set_new(qo, m->coords[i], num(q[i]));
    json_t *g = json_array(), *gt = json_array();
    for (int j = 0; j < n; j++)
        for (int r = 0; r < n; r++) {
            for (int l = 0; l < n; l++) {
                size_t idx = ((size_t)j * n + r) * n + l;
                if (m->gamma_nz[idx] & mask)
                    json_array_append_new(g, json_pack("{s:s, s:s, s:s, s:o}", "j", m->row_names[j], "r",
                                                       m->row_names[r], "l", m->row_names[l], "value",
                                                       num(gamma[idx])));
            }
            if (m->gamma_t_nz[(size_t)j * n + r] & mask)
                json_array_append_new(gt,
                                      json_pack("{s:s, s:s, s:o}", "j", m->row_names[j], "r", m->row_names[r],
                                                "value", num(gamma_t[(size_t)j * n + r])));
        }
    return json_pack("{s:o, s:o, s:o, s:o}", "t", num(t), "q", qo, "gamma", g, "gamma_t", gt);
}

/* One entry of a point's "gamma" (names j, r, l) or "gamma_t" (j, r) list as compact
 * text, after a comma unless it is the first. */
static void sim_gamma_entry_text(jsonout *o, int first, const char *const *names, int count, double value)
{
    static const char *const keys[3] = {"{\"j\":", ",\"r\":", ",\"l\":"};
    if (!first)
        jsonout_raw(o, ",", 1);
    for (int i = 0; i < count; i++) {
        jsonout_raw(o, keys[i], strlen(keys[i]));
        jsonout_string(o, names[i], strlen(names[i]));
    }
    jsonout_raw(o, ",\"value\":", 9);
    jsonout_double(o, value);
    jsonout_raw(o, "}", 1);
}

/* The compact text of sim_gamma_point(m, t, q, gamma, gamma_t) (as jsonout_value writes
 * it), appended to o: a text-mode run writes its points so, with no jansson node. */
static void sim_gamma_point_text(jsonout *o, const struct engine_model *m, double t, const double *q,
                                 const double *gamma, const double *gamma_t, unsigned char mask)
{
    int n = m->n;
    jsonout_raw(o, "{\"t\":", 5);
    jsonout_double(o, t);
    jsonout_raw(o, ",\"q\":{", 6);
    for (int i = 0; i < n; i++) {
        jsonout_raw(o, ",", i > 0);
        jsonout_string(o, m->coords[i], strlen(m->coords[i]));
        jsonout_raw(o, ":", 1);
        jsonout_double(o, q[i]);
    }
    jsonout_raw(o, "},\"gamma\":[", 11);
    int first = 1;
    for (size_t idx = 0; idx < (size_t)n * n * n; idx++) {
        if (!(m->gamma_nz[idx] & mask))
            continue;
        const char *names[3] = {m->row_names[idx / ((size_t)n * n)], m->row_names[idx / n % n],
                                m->row_names[idx % n]};
        sim_gamma_entry_text(o, first, names, 3, gamma[idx]);
        first = 0;
    }
    jsonout_raw(o, "],\"gamma_t\":[", 13);
    first = 1;
    for (size_t idx = 0; idx < (size_t)n * n; idx++) {
        if (!(m->gamma_t_nz[idx] & mask))
            continue;
        const char *names[2] = {m->row_names[idx / n], m->row_names[idx % n]};
        sim_gamma_entry_text(o, first, names, 2, gamma_t[idx]);
        first = 0;
    }
    jsonout_raw(o, "]}", 2);
}

/* ---- the run ---- */

struct run {
    const struct engine_model *m;
    const sim_request *req;
    hamel_ws *w;
    mult_ws *mw;
    int n, k, nc;
    int ns;     /* samples stored */
    double *t;  /* [n_times] */
    double *q;  /* [n_times * n] */
    double *u;  /* [n_times * k] */
    double *qd; /* [n_times * n] */
    double *energy;
    double *res; /* [n_times * nc] */
    double *lam; /* [n_times * nc] (multipliers) */
    double *inv; /* [n_times * n_inv] */
    double *inv_in, *inv_work;
    double *obs;
    json_t *hamel_points;
    struct sim_text *text; /* sim_run_text's registry (the run is in text mode), or NULL */
    jsonout points;        /* text mode: the Hamel points' text, comma-separated */
    int n_points;
    double *gamma, *gamma_t;
    unsigned char *have_qd; /* [n_times] qd stored at the sample (speeds re-chosen) */
    sim_watch *wt;          /* the singularity watch (hamel formulation), or NULL */
    holo_ws *hw;            /* position-level constraints (NULL without them) */
    double *pres;           /* [n_times * npos] max |f| before any projection at each sample */
    double *yproj;          /* [2n] the projected state to restart from */
    double *qtmp;           /* [n] */
    int projections, projection_failures;
    /* events (req->n_ev > 0) */
    double *ev_in, *ev_work;            /* [n_in + ev_k] the event tape's inputs, its scratch */
    int ev_n, ev_cap;                   /* crossings listed, room */
    int *ev_which;                      /* [ev_cap] the event of each crossing */
    double *ev_t, *ev_q, *ev_u, *ev_qd; /* [ev_cap], [ev_cap * n], [ev_cap * k], [ev_cap * n] */
    long ev_dropped;                    /* crossings past SIM_MAX_EVENT_HITS */
    double *ev_speeds, *ev_y2;          /* [k + 1], [2n]: scratch of the event functions */
    double *con_n, *con_t;              /* [n_times * n_con] normal, tangential force at the samples */
    double *con_lift, *con_slip;        /* [n_con] first lift-off and slip times, or NaN */
    int stopped_by;                     /* 1 + the event that ended the run, else 0 */
    char **names;                       /* [2n] the state's components for the integrator's messages */
};

/* At a sample: the position-level residuals, and past the tolerance the projection of
 * q back onto f = 0 (Newton on the dependent coordinates). Returns SIM_PROJECT when the
 * state changed and the integration must restart from R->yproj. */
static int project_sample(struct run *R, double t, const double *y)
{
    const struct engine_model *m = R->m;
    int n = R->n, h = m->npos, i = R->ns;
    double *f = R->pres + (size_t)i * h;
    holo_residual(R->hw, t, y, f);
    double worst = 0.0;
    for (int j = 0; j < h; j++)
        if (!(fabs(f[j]) <= worst))
            worst = fabs(f[j]);
    if (!R->req->pos_project || worst <= R->req->pos_tol)
        return 0;
    memcpy(R->qtmp, y, n * sizeof *y);
    double resid;
    int iters;
    int dep_ok = holo_solve(R->hw, t, R->qtmp, R->req->pos_dep, R->req->pos_tol, &resid, &iters) == 0;
    if (!dep_ok) { /* the initial choice may have become singular: choose again here */
        int *dep = malloc(h * sizeof *dep);
        memcpy(R->qtmp, y, n * sizeof *y);
        dep_ok = dep && holo_choose(R->hw, t, y, dep) == 0 &&
                 holo_solve(R->hw, t, R->qtmp, dep, R->req->pos_tol, &resid, &iters) == 0;
        free(dep);
    }
    if (!dep_ok) {
        R->projection_failures++;
        return 0;
    }
    R->projections++;
    size_t dim = R->req->formulation == SIM_HAMEL ? (size_t)(n + R->k) : (size_t)(2 * n);
    memcpy(R->yproj, y, dim * sizeof *y);
    memcpy(R->yproj, R->qtmp, n * sizeof *y);
    if (R->req->formulation == SIM_MULTIPLIERS)
        mult_project(R->mw, t, R->yproj);
    return SIM_PROJECT;
}

/* q' and the model's own speeds u at the integration state y, as on_sample keeps them. */
static int state_velocities(struct run *R, double t, const double *y, double *qd, double *u)
{
    int n = R->n;
    const struct engine_model *m = R->m;
    if (R->req->formulation == SIM_HAMEL) {
        if (hamel_qdot(R->w, t, y, y + n, qd) < 0)
            return -1;
        int rechosen = (watch_selected(R->wt) || m->nl_reduced) && watch_movable(R->wt);
        for (int r = 0; r < R->k; r++)
            u[r] = rechosen ? qd[watch_own_columns(R->wt)[r]] : y[n + r];
        return 0;
    }
    memcpy(qd, y + n, n * sizeof *y);
    if (R->req->ev_k > 0 && hamel_speeds(R->w, t, y, qd, u) < 0)
        return -1;
    return 0;
}

/* The event functions for integ (integ_event_fn): g on (params, t, q, q', u). */
static int sim_events(double t, const double *y, double *g, void *ctx)
{
    struct run *R = ctx;
    const struct engine_model *m = R->m;
    const sim_request *req = R->req;
    int n = R->n;
    double *in = R->ev_in, *qd = in + model_input_qd(m), *lam = in + m->n_in;
    memcpy(in, req->params, m->np * sizeof *in);
    in[model_input_t(m)] = t;
    memcpy(in + model_input_q(m), y, n * sizeof *y);
    if (state_velocities(R, t, y, qd, R->ev_speeds) < 0)
        return -1;
    int open = 0; /* contacts whose lift-off or slip is still to be found */
    for (int c = 0; c < req->n_con; c++)
        open |= isnan(R->con_lift[c]) || isnan(R->con_slip[c]);
    if (req->ev_lam || open) { /* the multipliers at (q, q') (mult.h) */
        memcpy(R->ev_y2, y, n * sizeof *y);
        memcpy(R->ev_y2 + n, qd, n * sizeof *qd);
        if (mult_lambda(R->mw, t, R->ev_y2, lam) < 0)
            return -1;
    }
    if (req->ev_tape)
        tape_eval(req->ev_tape, in, R->ev_work, g);
    for (int c = 0; c < req->n_con; c++) {
        double nf, tf;
        contact_forces(&req->con[c], lam, &nf, &tf);
        /* once found, a first time is not looked for again (a constant: no falling crossing) */
        g[req->n_ev_user + 2 * c] = isnan(nf) || !isnan(R->con_lift[c]) ? 1.0 : nf;
        g[req->n_ev_user + 2 * c + 1] = isnan(nf) || !isnan(R->con_slip[c]) ? 1.0 : req->con[c].mu * nf - tf;
    }
    return 0;
}

/* A located crossing (integ_hit_fn): listed with q, q' and the speeds there; a stop
 * event ends the run. */
static int sim_event_hit(int index, double t, const double *y, void *ctx)
{
    struct run *R = ctx;
    int n = R->n, k = R->req->ev_k;
    if (index >= R->req->n_ev_user) { /* a contact's lift-off or slip: its first time */
        int c = (index - R->req->n_ev_user) / 2;
        double *first = (index - R->req->n_ev_user) % 2 ? R->con_slip : R->con_lift;
        if (isnan(first[c]))
            first[c] = t;
        return 0;
    }
    if (R->ev_n == R->ev_cap && R->ev_cap < SIM_MAX_EVENT_HITS) {
        int cap = R->ev_cap ? 2 * R->ev_cap : 16;
        if (cap > SIM_MAX_EVENT_HITS)
            cap = SIM_MAX_EVENT_HITS;
        int *w = realloc(R->ev_which, cap * sizeof *w);
        if (w)
            R->ev_which = w;
        double *tt = realloc(R->ev_t, cap * sizeof *tt);
        if (tt)
            R->ev_t = tt;
        double *q = realloc(R->ev_q, (size_t)cap * n * sizeof *q);
        if (q)
            R->ev_q = q;
        double *qd = realloc(R->ev_qd, (size_t)cap * n * sizeof *qd);
        if (qd)
            R->ev_qd = qd;
        double *u = realloc(R->ev_u, ((size_t)cap * k + 1) * sizeof *u);
        if (u)
            R->ev_u = u;
        if (!w || !tt || !q || !qd || !u)
            return HAMEL_E_INTERNAL;
        R->ev_cap = cap;
    }
    if (R->ev_n < R->ev_cap) {
        int i = R->ev_n;
        if (state_velocities(R, t, y, R->ev_qd + (size_t)i * n, R->ev_u + (size_t)i * k) < 0)
            return HAMEL_E_NUMERIC;
        R->ev_which[i] = index;
        R->ev_t[i] = t;
        memcpy(R->ev_q + (size_t)i * n, y, n * sizeof *y);
        R->ev_n++;
    } else {
        R->ev_dropped++;
    }
    if (!R->req->ev_stop[index])
        return 0;
    R->stopped_by = index + 1;
    return INTEG_EVENT_STOP;
}

/* Called by the integrator at each output time: keeps the state. Everything derived
 * from it (q', energy, residuals, invariants, multipliers, gammas) is computed after
 * the integration, so that integrate_ms measures the integration alone. */
static int on_sample(double t, const double *y, void *ctx)
{
    struct run *R = ctx;
    int n = R->n, i = R->ns;
    int projected = R->hw ? project_sample(R, t, y) : 0;
    if (projected)
        y = R->yproj;
    R->t[i] = t;
    memcpy(R->q + (size_t)i * n, y, n * sizeof *y);
    if (R->req->formulation == SIM_HAMEL && (watch_selected(R->wt) || R->m->nl_reduced)) {
        /* speeds re-chosen: keep q' now, report the model's own speeds */
        double *qd = R->qd + (size_t)i * n;
        if (hamel_qdot(R->w, t, y, y + n, qd) < 0)
            return HAMEL_E_NUMERIC;
        for (int r = 0; r < R->k; r++)
            R->u[(size_t)i * R->k + r] = watch_movable(R->wt) ? qd[watch_own_columns(R->wt)[r]] : y[n + r];
        R->have_qd[i] = 1;
    } else if (R->req->formulation == SIM_HAMEL)
        memcpy(R->u + (size_t)i * R->k, y + n, R->k * sizeof *y);
    else
        memcpy(R->qd + (size_t)i * n, y + n, n * sizeof *y);
    R->ns++;
    return projected && R->ns < R->req->n_times && !R->stopped_by ? SIM_PROJECT : 0;
}

static int post_sample(struct run *R, int i)
{
    const struct engine_model *m = R->m;
    int n = R->n, k = R->k;
    double t = R->t[i];
    double *q = R->q + (size_t)i * n, *qd = R->qd + (size_t)i * n, *u = R->u + (size_t)i * k;
    if (R->req->formulation == SIM_HAMEL) {
        if (!R->have_qd[i] && hamel_qdot(R->w, t, q, u, qd) < 0)
            return HAMEL_E_NUMERIC;
    } else {
        double y[2 * ENGINE_COORDINATES_CEILING]; /* q, q' */
        memcpy(y, q, n * sizeof *y);
        memcpy(y + n, qd, n * sizeof *y);
        if (m->nlin == m->nc || m->nl_reduced)
            hamel_speeds(R->w, t, q, qd, u);
        mult_lambda(R->mw, t, y, R->lam + (size_t)i * R->nc);
    }
    if (R->req->n_con > 0) {
        /* the contact forces from the multipliers at the sample (the formulation's own
         * in the multipliers formulation) */
        double *lam =
            R->req->formulation == SIM_MULTIPLIERS ? R->lam + (size_t)i * R->nc : R->ev_in + m->n_in;
        if (R->req->formulation == SIM_HAMEL) {
            memcpy(R->ev_y2, q, n * sizeof *q);
            memcpy(R->ev_y2 + n, qd, n * sizeof *qd);
            if (mult_lambda(R->mw, t, R->ev_y2, lam) < 0)
                for (int j = 0; j < R->nc; j++)
                    lam[j] = NAN;
        }
        for (int c = 0; c < R->req->n_con; c++) {
            size_t at = (size_t)i * R->req->n_con + c;
            contact_forces(&R->req->con[c], lam, &R->con_n[at], &R->con_t[at]);
            if (i == 0 && R->con_n[at] < 0)
                R->con_lift[c] = t; /* the run starts off the ground: that is the first time */
            if (i == 0 && R->con_t[at] > R->req->con[c].mu * R->con_n[at])
                R->con_slip[c] = t;
        }
    }
    hamel_observe(R->w, t, q, qd, R->obs);
    R->energy[i] = R->obs[0];
    memcpy(R->res + (size_t)i * R->nc, R->obs + 1, R->nc * sizeof *R->obs);
    if (R->req->n_inv) {
        memcpy(R->inv_in, R->req->params, m->np * sizeof *R->inv_in);
        R->inv_in[model_input_t(m)] = t;
        memcpy(R->inv_in + model_input_q(m), q, n * sizeof *q);
        memcpy(R->inv_in + model_input_qd(m), qd, n * sizeof *qd);
        tape_eval(R->req->inv_tape, R->inv_in, R->inv_work, R->inv + (size_t)i * R->req->n_inv);
    }
    if (R->req->hamel_mode == SIM_HAMEL_SAMPLES || (R->req->hamel_mode == SIM_HAMEL_INITIAL && i == 0)) {
        if (hamel_gamma(R->w, t, q, R->gamma, R->gamma_t) == 0) {
            if (R->text) {
                jsonout_raw(&R->points, ",", R->n_points++ > 0);
                sim_gamma_point_text(&R->points, m, t, q, R->gamma, R->gamma_t,
                                     model_gamma_mask(m, R->req->params));
            } else {
                json_array_append_new(R->hamel_points, sim_gamma_point(m, t, q, R->gamma, R->gamma_t,
                                                                       model_gamma_mask(m, R->req->params)));
            }
        }
    }
    return 0;
}

static void run_free(struct run *R)
{
    for (int i = 0; R->names && i < 2 * R->n; i++)
        free(R->names[i]);
    free(R->names);
    hamel_ws_free(R->w);
    mult_ws_free(R->mw);
    free(R->t);
    free(R->q);
    free(R->u);
    free(R->qd);
    free(R->energy);
    free(R->res);
    free(R->lam);
    free(R->inv);
    free(R->inv_in);
    free(R->inv_work);
    free(R->obs);
    free(R->gamma);
    free(R->gamma_t);
    free(R->have_qd);
    watch_free(R->wt);
    holo_ws_free(R->hw);
    free(R->pres);
    free(R->yproj);
    free(R->qtmp);
    json_decref(R->hamel_points);
    jsonout_free(&R->points);
    free(R->ev_in);
    free(R->ev_work);
    free(R->ev_speeds);
    free(R->ev_y2);
    free(R->con_n);
    free(R->con_t);
    free(R->con_lift);
    free(R->con_slip);
    free(R->ev_which);
    free(R->ev_t);
    free(R->ev_q);
    free(R->ev_u);
    free(R->ev_qd);
}

static json_t *series(const double *v, int count, int stride, int offset);

/* checks.contacts: per contact its friction, the normal and tangential force at every
 * sample and the first lift-off (N < 0) and slip (|F_t| > friction * N) times, located
 * as events; or why the model gives no normal force. */
static json_t *contacts_json(const struct run *R)
{
    json_t *out = json_object();
    int nk = R->req->n_con;
    for (int c = 0; c < nk; c++) {
        const contact_spec *cs = &R->req->con[c];
        json_t *o = json_object();
        json_object_set_new(o, "friction", json_real(cs->mu));
        if (cs->normal >= 0) {
            json_object_set_new(o, "normal", series(R->con_n, R->ns, nk, c));
            json_object_set_new(o, "tangential", series(R->con_t, R->ns, nk, c));
            json_object_set_new(
                o, "lift_off", isnan(R->con_lift[c]) ? json_null() : json_pack("{s:f}", "t", R->con_lift[c]));
            json_object_set_new(
                o, "slip", isnan(R->con_slip[c]) ? json_null() : json_pack("{s:f}", "t", R->con_slip[c]));
        } else {
            json_object_set_new(o, "normal", json_null());
            json_object_set_new(o, "tangential", series(R->con_t, R->ns, nk, c));
            json_object_set_new(o, "reason", json_string(CONTACT_NO_NORMAL));
        }
        json_object_set_new(out, cs->name, o);
    }
    return out;
}

/* "events": every crossing listed, in time order. */
static json_t *events_json(const struct run *R)
{
    const struct engine_model *m = R->m;
    int n = R->n, k = R->req->ev_k;
    json_t *a = json_array();
    for (int i = 0; i < R->ev_n; i++) {
        json_t *q = json_object(), *qd = json_object();
        for (int c = 0; c < n; c++) {
            json_object_set_new(q, m->coords[c], num(R->ev_q[(size_t)i * n + c]));
            json_object_set_new(qd, m->coords[c], num(R->ev_qd[(size_t)i * n + c]));
        }
        json_t *e = json_pack("{s:s, s:o, s:o}", "name", R->req->ev_names[R->ev_which[i]], "t",
                              num(R->ev_t[i]), "q", q);
        if (k > 0) {
            json_t *u = json_object();
            for (int r = 0; r < k; r++)
                json_object_set_new(u, m->speeds[r], num(R->ev_u[(size_t)i * k + r]));
            json_object_set_new(e, "speeds", u);
        }
        json_object_set_new(e, "qdot", qd);
        json_array_append_new(a, e);
    }
    return a;
}

/* Text mode (sim_run_text): a series is copied out of the run and stands in the
 * document as a marker string "\x01<index>", which the writer replaces with the numbers,
 * so that no jansson node is made (and freed) per number. The registry is per thread:
 * one run at a time on a thread. */
typedef struct sim_text {
    double **v;
    char **raw; /* or a text to write as is (JSON, count bytes) where v is NULL */
    int *count;
    int n, cap;
} sim_text;

static _Thread_local sim_text *sim_text_mode;

/* Registers the series v (or the text raw) of count numbers (bytes) under a new marker,
 * which it returns; NULL when out of memory (v and raw stay the caller's then). */
static json_t *text_marker(sim_text *T, double *v, char *raw, int count)
{
    if (T->n == T->cap) {
        int cap = T->cap ? 2 * T->cap : 32;
        double **nv = realloc(T->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return NULL;
        T->v = nv;
        char **nr = realloc(T->raw, (size_t)cap * sizeof *nr);
        if (!nr)
            return NULL;
        T->raw = nr;
        int *nc = realloc(T->count, (size_t)cap * sizeof *nc);
        if (!nc)
            return NULL;
        T->count = nc;
        T->cap = cap;
    }
    char mark[16], *e = mark + sizeof mark; /* "\x01<n>", written without printf (per series) */
    unsigned k = (unsigned)T->n;
    do
        *--e = (char)('0' + k % 10);
    while ((k /= 10) > 0);
    *--e = '\x01';
    json_t *s = json_stringn_nocheck(e, (size_t)(mark + sizeof mark - e));
    if (!s)
        return NULL;
    T->v[T->n] = v;
    T->raw[T->n] = raw;
    T->count[T->n++] = count;
    return s;
}

static json_t *series_marker(sim_text *T, const double *v, int count, int stride, int offset)
{
    double *copy = malloc((size_t)(count > 0 ? count : 1) * sizeof *copy);
    if (!copy)
        return NULL;
    for (int i = 0; i < count; i++)
        copy[i] = v[(size_t)i * stride + offset];
    json_t *s = text_marker(T, copy, NULL, count);
    if (!s)
        free(copy);
    return s;
}

static json_t *series(const double *v, int count, int stride, int offset)
{
    if (sim_text_mode) {
        json_t *s = series_marker(sim_text_mode, v, count, stride, offset);
        if (s)
            return s;
    } /* out of memory for the marker: a real array */
    json_t *a = json_array();
    for (int i = 0; i < count; i++)
        json_array_append_new(a, num(v[(size_t)i * stride + offset]));
    return a;
}

static json_t *trajectory_json(const struct run *R)
{
    const struct engine_model *m = R->m;
    json_t *tr = json_object();
    json_object_set_new(tr, "t", series(R->t, R->ns, 1, 0));
    json_t *q = json_object(), *qd = json_object(), *u = json_object();
    for (int i = 0; i < R->n; i++) {
        json_object_set_new(q, m->coords[i], series(R->q, R->ns, R->n, i));
        json_object_set_new(qd, m->coords[i], series(R->qd, R->ns, R->n, i));
    }
    json_object_set_new(tr, "q", q);
    if (m->nlin == m->nc || m->nl_reduced) {
        for (int r = 0; r < R->k; r++)
            json_object_set_new(u, m->speeds[r], series(R->u, R->ns, R->k, r));
        json_object_set_new(tr, "speeds", u);
    } else {
        json_decref(u);
    }
    json_object_set_new(tr, "qdot", qd);
    if (R->req->formulation == SIM_MULTIPLIERS) {
        json_t *lam = json_object();
        for (int j = 0; j < R->nc; j++)
            json_object_set_new(lam, m->cons[j].name, series(R->lam, R->ns, R->nc, j));
        json_object_set_new(tr, "multipliers", lam);
    }
    return tr;
}

/* checks.constraints.position: the position-level residuals along the run (before
 * projection), the initial solve and the projections. */
static json_t *position_json(const struct run *R)
{
    const struct engine_model *m = R->m;
    int h = m->npos;
    json_t *pos = json_object(), *per = json_object(), *solved = json_array();
    double *series_max = calloc(R->ns + 1, sizeof *series_max), worst = 0.0;
    for (int j = 0; j < h; j++) {
        double mx = 0.0;
        for (int i = 0; i < R->ns; i++) {
            double v = fabs(R->pres[(size_t)i * h + j]);
            if (!(v <= mx))
                mx = v;
            if (series_max && !(v <= series_max[i]))
                series_max[i] = v;
        }
        json_object_set_new(per, m->cons[m->pos_con[j]].name, num(mx));
        if (!(mx <= worst))
            worst = mx;
    }
    for (int j = 0; j < h; j++)
        json_array_append_new(solved, json_string(m->coords[R->req->pos_dep[j]]));
    json_object_set_new(pos, "max_abs_residual", num(worst));
    json_object_set_new(pos, "per_constraint", per);
    if (series_max)
        json_object_set_new(pos, "max_abs_series", series(series_max, R->ns, 1, 0));
    free(series_max);
    json_object_set_new(pos, "tolerance", num(R->req->pos_tol));
    json_object_set_new(pos, "projection", json_boolean(R->req->pos_project));
    json_object_set_new(pos, "projections", json_integer(R->projections));
    if (R->projection_failures)
        json_object_set_new(pos, "projection_failures", json_integer(R->projection_failures));
    json_t *init = json_object();
    json_object_set_new(init, "solved_for", solved);
    json_object_set_new(init, "iterations", json_integer(R->req->pos_iters));
    json_object_set_new(init, "residual", num(R->req->pos_resid0));
    json_t *guess = json_object();
    for (int j = 0; j < h; j++) {
        int c = R->req->pos_dep[j];
        json_object_set_new(guess, m->coords[c], num(R->req->q_guess[c]));
    }
    json_object_set_new(init, "guess", guess);
    json_object_set_new(pos, "initial", init);
    return pos;
}

static json_t *checks_json(const struct run *R)
{
    const struct engine_model *m = R->m;
    double e0 = R->ns ? R->energy[0] : NAN, maxabs = 0.0;
    for (int i = 0; i < R->ns; i++) {
        double d = fabs(R->energy[i] - e0);
        if (d > maxabs || isnan(d))
            maxabs = d;
    }
    json_t *energy = json_object();
    json_object_set_new(energy, "conserved_expected", json_boolean(m->energy_conserved));
    json_object_set_new(energy, "reason", json_string(m->energy_reason));
    json_object_set_new(energy, "expression", json_string(m->energy_is_jacobi ? "p.q' - T + V" : "T + V"));
    json_object_set_new(energy, "initial", num(e0));
    json_object_set_new(energy, "final", num(R->ns ? R->energy[R->ns - 1] : NAN));
    json_object_set_new(energy, "max_abs_drift", num(maxabs));
    json_object_set_new(energy, "max_rel_drift", num(e0 != 0.0 ? maxabs / fabs(e0) : maxabs));
    json_object_set_new(energy, "values", series(R->energy, R->ns, 1, 0));

    json_t *cons = json_object(), *per = json_object();
    double worst = 0.0;
    double *per_sample = calloc(R->ns + 1, sizeof *per_sample);
    for (int j = 0; j < R->nc; j++) {
        double mx = 0.0;
        for (int i = 0; i < R->ns; i++) {
            double v = fabs(R->res[(size_t)i * R->nc + j]);
            if (v > mx || isnan(v))
                mx = v;
            if (per_sample && (v > per_sample[i] || isnan(v)))
                per_sample[i] = v;
        }
        json_object_set_new(per, m->cons[j].name, num(mx));
        if (mx > worst || isnan(mx))
            worst = mx;
    }
    json_object_set_new(cons, "max_abs_residual", num(worst));
    json_object_set_new(cons, "per_constraint", per);
    if (per_sample)
        json_object_set_new(cons, "max_abs_series", series(per_sample, R->ns, 1, 0));
    free(per_sample);

    if (m->npos > 0 && R->pres)
        json_object_set_new(cons, "position", position_json(R));
    json_t *checks = json_object(); /* not json_pack: a run's members are set directly (per run) */
    json_object_set_new_nocheck(checks, "energy", energy);
    json_object_set_new_nocheck(checks, "constraints", cons);
    if (R->req->n_inv) {
        json_t *inv = json_object();
        int ni = R->req->n_inv;
        for (int v = 0; v < ni; v++) {
            double i0 = R->ns ? R->inv[v] : NAN, mx = 0.0;
            for (int i = 0; i < R->ns; i++) {
                double d = fabs(R->inv[(size_t)i * ni + v] - i0);
                if (d > mx || isnan(d))
                    mx = d;
            }
            json_object_set_new(inv, R->req->inv_names[v],
                                json_pack("{s:o, s:o, s:o, s:o}", "initial", num(i0), "final",
                                          num(R->ns ? R->inv[(size_t)(R->ns - 1) * ni + v] : NAN),
                                          "max_abs_drift", num(mx), "values", series(R->inv, R->ns, ni, v)));
        }
        json_object_set_new(checks, "invariants", inv);
    }
    return checks;
}

/* The result's "warnings": the checks that failed (warnings.h). */
static json_t *run_warnings(const struct run *R, const json_t *checks)
{
    const struct engine_model *m = R->m;
    warn_scale sc = {R->req->rtol, R->req->atol, 0.0, 0, 0, NULL, NULL};
    if (R->ns > 0)
        sc.mass_indefinite = hamel_mass_semidefinite(R->w, R->t[0], R->q, R->qd) == 0;
    for (size_t i = 0; i < (size_t)R->ns * R->n; i++)
        if (fabs(R->qd[i]) > sc.qdot_max)
            sc.qdot_max = fabs(R->qd[i]);
    /* each constraint's coefficients where it misses most (at most nc evaluations a run) */
    double *cs = R->ns > 0 && R->nc > 0 && R->w ? calloc(2 * (size_t)R->nc, sizeof *cs) : NULL;
    const char **names = cs ? calloc(R->nc, sizeof *names) : NULL;
    if (names) {
        for (int j = 0; j < R->nc; j++) {
            int at = 0;
            for (int i = 1; i < R->ns; i++)
                if (fabs(R->res[(size_t)i * R->nc + j]) > fabs(R->res[(size_t)at * R->nc + j]))
                    at = i;
            hamel_constraint_scales(R->w, R->t[at], R->q + (size_t)at * R->n, R->qd + (size_t)at * R->n,
                                    cs + R->nc);
            cs[j] = cs[R->nc + j];
            names[j] = m->cons[j].name;
        }
        sc.nc = R->nc;
        sc.cons_name = names;
        sc.cons_scale = cs;
    }
    json_t *w = warn_from_checks(checks, &sc);
    free(names);
    free(cs);
    return w ? w : json_array();
}

/* The result's "provenance": which engine computed it, with which code and method. */
static json_t *run_provenance(const sim_request *req, const char *tier)
{
    json_t *p = json_object();
    json_object_set_new_nocheck(p, "engine_version", json_string(engine_version()));
    json_object_set_new_nocheck(p, "numerics", json_integer(engine_numerics()));
    json_object_set_new_nocheck(p, "build", json_string(engine_identity()));
    json_object_set_new_nocheck(p, "code_tier", json_string(tier));
    json_object_set_new_nocheck(p, "method", json_string(req->method));
    json_object_set_new_nocheck(p, "formulation",
                                json_string(req->formulation == SIM_HAMEL ? "hamel" : "multipliers"));
    return p;
}

/* The buffers of the run's samples and checks; -1 when one is missing. */
static int run_alloc(struct run *R)
{
    const struct engine_model *m = R->m;
    const sim_request *req = R->req;
    int n = m->n, nt = req->n_times;
    R->w = hamel_ws_new(m, req->params);
    R->t = calloc(nt, sizeof *R->t);
    R->q = calloc((size_t)nt * n, sizeof *R->q);
    R->u = calloc((size_t)nt * (R->k + 1), sizeof *R->u);
    R->qd = calloc((size_t)nt * n, sizeof *R->qd);
    R->energy = calloc(nt, sizeof *R->energy);
    R->res = calloc((size_t)nt * (R->nc + 1), sizeof *R->res);
    R->lam = calloc((size_t)nt * (R->nc + 1), sizeof *R->lam);
    R->inv = calloc((size_t)nt * (req->n_inv + 1), sizeof *R->inv);
    R->inv_in = calloc(m->n_in, sizeof *R->inv_in);
    R->inv_work = calloc(req->inv_tape ? req->inv_tape->n_ins : 1, sizeof *R->inv_work);
    R->obs = calloc(1 + m->nc, sizeof *R->obs);
    R->gamma = calloc((size_t)n * n * n, sizeof *R->gamma);
    R->gamma_t = calloc((size_t)n * n, sizeof *R->gamma_t);
    R->hamel_points = json_array();
    R->text = sim_text_mode;
    if (R->text)
        jsonout_raw(&R->points, "[", 1);
    R->have_qd = calloc(nt, 1);
    return !R->w || !R->t || !R->q || !R->u || !R->qd || !R->energy || !R->res || !R->lam || !R->inv ||
                   !R->inv_in || !R->inv_work || !R->obs || !R->gamma || !R->gamma_t || !R->hamel_points ||
                   R->points.err || !R->have_qd
               ? -1
               : 0;
}

/* The buffers of the events and contacts (and the multipliers of the Hamel states when
 * an event or a contact reads them); -1 when one is missing. */
static int run_alloc_events(struct run *R)
{
    const struct engine_model *m = R->m;
    const sim_request *req = R->req;
    int n = m->n, nt = req->n_times;
    R->ev_in = calloc(m->n_in + m->nc, sizeof *R->ev_in);
    R->ev_work = calloc(req->ev_tape ? req->ev_tape->n_ins : 1, sizeof *R->ev_work);
    R->ev_speeds = calloc(m->k + 1, sizeof *R->ev_speeds);
    R->ev_y2 = calloc(2 * n, sizeof *R->ev_y2);
    R->con_n = calloc((size_t)nt * req->n_con + 1, sizeof *R->con_n);
    R->con_t = calloc((size_t)nt * req->n_con + 1, sizeof *R->con_t);
    R->con_lift = malloc((req->n_con + 1) * sizeof *R->con_lift);
    R->con_slip = malloc((req->n_con + 1) * sizeof *R->con_slip);
    int need_mw = (req->ev_lam || req->n_con) && req->formulation == SIM_HAMEL;
    if (need_mw)
        R->mw = mult_ws_new(m, req->params); /* the multipliers of the Hamel states */
    if (!R->ev_in || !R->ev_work || !R->ev_speeds || !R->ev_y2 || !R->con_n || !R->con_t || !R->con_lift ||
        !R->con_slip || (need_mw && !R->mw))
        return -1;
    for (int c = 0; c < req->n_con; c++)
        R->con_lift[c] = R->con_slip[c] = NAN;
    return 0;
}

/* The buffers of the projection on the position-level constraints; -1 when one is missing. */
static int run_alloc_position(struct run *R)
{
    const struct engine_model *m = R->m;
    int n = m->n;
    R->hw = holo_ws_new(m, R->req->params);
    R->pres = calloc((size_t)R->req->n_times * m->npos, sizeof *R->pres);
    R->yproj = calloc(2 * n, sizeof *R->yproj);
    R->qtmp = calloc(n, sizeof *R->qtmp);
    return !R->hw || !R->pres || !R->yproj || !R->qtmp || !R->req->pos_dep ? -1 : 0;
}

/* The system integrated and its initial state y0: (q, u) with the Hamel formulation,
 * (q, q') projected with the multipliers. -1 when out of memory. */
static int run_system(struct run *R, double *y0, integ_system *sys)
{
    const struct engine_model *m = R->m;
    const sim_request *req = R->req;
    int n = m->n;
    hamel_ws_set_guess(R->w, req->qd0);
    memcpy(y0, req->q0, n * sizeof *y0);
    if (req->formulation == SIM_HAMEL) {
        memcpy(y0 + n, req->u0, R->k * sizeof *y0);
        *sys = (integ_system){(size_t)(n + R->k), hamel_rhs, R->w};
        return 0;
    }
    R->mw = mult_ws_new(m, req->params);
    if (!R->mw)
        return -1;
    memcpy(y0 + n, req->qd0, n * sizeof *y0);
    mult_project(R->mw, req->t0, y0);
    *sys = (integ_system){(size_t)(2 * n), mult_rhs, R->mw};
    return 0;
}

/* The integrator's options: the request's, within the limits and the control's. */
static integ_options run_options(struct run *R, const engine_limits *lim, engine_control *ctl)
{
    const sim_request *req = R->req;
    integ_options opt = integ_default_options;
    opt.method = req->method;
    opt.rtol = req->rtol;
    opt.atol = req->atol;
    opt.h0 = req->h0;
    opt.max_steps = req->max_steps;
    if (ctl && ctl->max_steps > 0 && ctl->max_steps < opt.max_steps)
        opt.max_steps = ctl->max_steps;
    opt.max_wall_seconds = lim->max_wall_seconds;
    if (ctl && ctl->max_wall_seconds > 0 && ctl->max_wall_seconds < opt.max_wall_seconds)
        opt.max_wall_seconds = ctl->max_wall_seconds;
    /* one budget for the whole simulation: each restart (a projection at a sample, a new
     * chart of speeds) makes a new driver, whose own clock would start again */
    if (opt.max_wall_seconds > 0)
        opt.deadline = integ_now() + opt.max_wall_seconds;
    if (ctl) {
        opt.cancel = &ctl->cancel;
        opt.progress = &ctl->progress;
    }
    /* the state's names, for a message about a component that is not finite: (q, u) in
     * the hamel formulation, (q, q') in the multipliers one */
    int dim = req->formulation == SIM_HAMEL ? R->n + R->k : 2 * R->n;
    R->names = calloc(2 * (size_t)R->n + 1, sizeof *R->names);
    for (int i = 0; R->names && i < dim; i++) {
        const char *base = i < R->n                        ? R->m->coords[i]
                           : req->formulation == SIM_HAMEL ? R->m->speeds[i - R->n]
                                                           : NULL;
        if (base) {
            R->names[i] = strdup(base);
        } else if ((R->names[i] = malloc(strlen(R->m->coords[i - R->n]) + 2)) != NULL) {
            strcpy(R->names[i], R->m->coords[i - R->n]);
            strcat(R->names[i], "'");
        }
    }
    opt.state_names = (const char *const *)R->names;
    if (req->n_ev > 0) {
        opt.n_events = req->n_ev;
        opt.event_names = (const char *const *)req->ev_names;
        opt.event_dir = req->ev_dir;
        opt.event = sim_events;
        opt.event_hit = sim_event_hit;
        opt.event_ctx = R;
        opt.n_probe_events = req->n_ev_user; /* the contacts' own first times: ends only */
    }
    return opt;
}

/* Adds the counts of one part of the integration to st. */
static void stats_add(integ_stats *st, const integ_stats *part)
{
    st->steps += part->steps;
    st->failed_steps += part->failed_steps;
    st->rhs_evals += part->rhs_evals;
    st->jac_evals += part->jac_evals;
    st->jac_rhs_evals += part->jac_rhs_evals;
    st->event_rhs_evals += part->event_rhs_evals;
    st->samples += part->samples;
    st->t = part->t;
    st->h = part->h;
    st->wall_ms += part->wall_ms;
    memcpy(st->reason, part->reason, sizeof st->reason);
}

/* Integrates from y0 over the request's times; a projected sample (position-level
 * constraints) restarts the integration from the projected state. */
static int run_integrate(struct run *R, integ_system *sys, integ_options *opt, double *y0, integ_stats *st,
                         char *reason, size_t reason_len)
{
    const struct engine_model *m = R->m;
    const sim_request *req = R->req;
    int n = m->n;
    int rc = watch_integrate(R->wt, m, sys, opt, req->t0, y0, req->u0, req->times, req->n_times, &R->ns,
                             on_sample, R, st, reason, reason_len);
    double *u_restart = rc == SIM_PROJECT ? malloc(sys->dim * sizeof *u_restart) : NULL;
    while (rc == SIM_PROJECT) {
        integ_stats part;
        memset(&part, 0, sizeof part);
        if (!u_restart) {
            rc = HAMEL_E_INTERNAL;
            break;
        }
        memcpy(y0, R->yproj, sys->dim * sizeof *y0);
        memcpy(u_restart, y0 + n, (sys->dim - n) * sizeof *y0);
        rc = watch_integrate(R->wt, m, sys, opt, R->t[R->ns - 1], y0, u_restart, req->times, req->n_times,
                             &R->ns, on_sample, R, &part, reason, reason_len);
        stats_add(st, &part);
    }
    free(u_restart);
    return rc;
}

/* The checks of every sample, bounded like the integration (cancel flag); the first
 * failure into rc. Their time in *checks_ms. */
static int run_checks(struct run *R, engine_control *ctl, int rc, double *checks_ms)
{
    struct timespec c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &c0);
    for (int i = 0; i < R->ns; i++) {
        /* the checks are bounded like the integration: cancel flag and deadline */
        if (ctl && atomic_load(&ctl->cancel)) {
            if (!rc)
                rc = HAMEL_E_CANCELLED;
            R->ns = i;
            break;
        }
        int prc = post_sample(R, i);
        if (prc && !rc)
            rc = prc;
    }
    clock_gettime(CLOCK_MONOTONIC, &c1);
    *checks_ms = (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6;
    return rc;
}

/* The run's stats: counts, times, method, code tier and reduction. */
static json_t *run_stats(const struct run *R, const integ_stats *st, double checks_ms, const char *tier)
{
    const struct engine_model *m = R->m;
    const sim_request *req = R->req;
    json_t *stats = json_object();
    json_object_set_new_nocheck(stats, "steps", json_integer((json_int_t)st->steps));
    json_object_set_new_nocheck(stats, "rhs_evals", json_integer((json_int_t)st->rhs_evals));
    json_object_set_new_nocheck(stats, "failed_steps", json_integer((json_int_t)st->failed_steps));
    json_object_set_new_nocheck(stats, "samples", json_integer((json_int_t)R->ns));
    json_object_set_new_nocheck(stats, "compile_ms", json_real(m->compile_ms));
    json_object_set_new_nocheck(stats, "integrate_ms", json_real(st->wall_ms));
    json_object_set_new_nocheck(stats, "method", json_string(req->method));
    json_object_set_new_nocheck(stats, "formulation",
                                json_string(req->formulation == SIM_HAMEL ? "hamel" : "multipliers"));
    json_object_set_new(stats, "checks_ms", json_real(checks_ms));
    if (R->wt)
        json_object_set_new(stats, "speed_switches", json_integer(watch_switches(R->wt)));
    json_object_set_new(stats, "jit", json_boolean(m->tape_dyn->fn != NULL));
    json_object_set_new(stats, "code_tier", json_string(tier));
    json_object_set_new(stats, "reduction",
                        json_string(req->formulation == SIM_MULTIPLIERS ? "none"
                                    : m->tape_fast                      ? "symbolic"
                                                                        : "numeric"));
    if (req->formulation == SIM_MULTIPLIERS)
        json_object_set_new(stats, "baumgarte_alpha", json_real(MULT_BAUMGARTE_ALPHA));
    if (req->n_ev > 0)
        json_object_set_new(stats, "event_rhs_evals", json_integer(st->event_rhs_evals));
    return stats;
}

/* The result's body: trajectory, checks, events, warnings, provenance, Hamel
 * coefficients and stats (taken). */
/* The Hamel points of the result (a new reference): the array, or in text mode the
 * marker of their text (taken from R->points). */
static json_t *run_points(struct run *R)
{
    if (!R->text)
        return json_incref(R->hamel_points);
    jsonout_raw(&R->points, "]", 1);
    if (R->points.err || R->points.len > INT_MAX)
        return NULL;
    json_t *s = text_marker(R->text, NULL, R->points.p, (int)R->points.len);
    if (s) /* the registry has the text now */
        R->points.p = NULL;
    return s ? s : json_loadb(R->points.p, R->points.len, 0, NULL);
}

static json_t *run_body(struct run *R, const char *tier, json_t *stats)
{
    const struct engine_model *m = R->m;
    const sim_request *req = R->req;
    json_t *body = json_object();
    json_object_set_new(body, "model_id", json_string(m->id));
    json_object_set_new(body, "formulation",
                        json_string(req->formulation == SIM_HAMEL ? "hamel" : "multipliers"));
    json_object_set_new(body, "trajectory", trajectory_json(R));
    json_t *checks = checks_json(R);
    json_object_set_new(body, "checks", checks);
    if (req->n_con > 0)
        json_object_set_new(checks, "contacts", contacts_json(R));
    if (req->n_ev_user > 0) {
        json_object_set_new(body, "events", events_json(R));
        if (R->ev_dropped)
            json_object_set_new(body, "events_dropped", json_integer(R->ev_dropped));
        if (R->stopped_by)
            json_object_set_new(body, "stopped_by", json_string(req->ev_names[R->stopped_by - 1]));
    }
    json_object_set_new(body, "warnings", run_warnings(R, checks));
    json_object_set_new(body, "provenance", run_provenance(req, tier));
    if (req->hamel_mode != SIM_HAMEL_NONE) {
        json_t *h = json_object();
        json_object_set_new_nocheck(h, "model_id", json_string(m->id));
        json_object_set_new_nocheck(h, "order", sim_gamma_order(m));
        json_object_set_new_nocheck(h, "points", run_points(R));
        json_object_set_new(body, "hamel", h);
    }
    json_object_set_new(body, "stats", stats);
    return body;
}

/* A run that failed otherwise (the integrator, the step limit, the right-hand side not
 * finite: rc) while Psi's condition grew by orders of magnitude since the start (or Psi
 * turned singular, watch_failure): why, then that, into out[size], and the figures as
 * {t0, initial, t, last} (last null: singular). NULL when Psi is not the likely cause. */
static json_t *run_failure_condition(struct run *R, int rc, const char *why, char *out, size_t size)
{
    struct watch_failure_info f;
    if ((rc != HAMEL_E_NUMERIC && rc != HAMEL_E_STEP_LIMIT && rc != HAMEL_E_INTEGRATOR) ||
        watch_reason(R->wt) || !watch_failure(R->wt, &f))
        return NULL;
    char last[64];
    if (isfinite(f.cond_last))
        snprintf(last, sizeof last, "%.3g at t = %.10g", f.cond_last, f.t_last);
    else
        snprintf(last, sizeof last, "infinity (Psi singular) at t = %.10g", f.t_last);
    snprintf(out, size,
             "%s; the speeds stop determining q' near t = %.10g: cond(Psi) grew from %.3g at t = %.10g to %s "
             "(the speeds and the linear constraints become dependent: choose speeds regular along the "
             "motion, or leave them to the engine)",
             why, f.t_last, f.cond_first, f.t_first, last);
    return json_pack("{s:o, s:o, s:o, s:o}", "t0", num(f.t_first), "initial", num(f.cond_first), "t",
                     num(f.t_last), "last", num(f.cond_last));
}

int sim_run(const struct engine_model *m, const sim_request *req, const engine_limits *lim,
            engine_control *ctl, json_t **result, json_t **problem)
{
    *result = NULL;
    *problem = NULL;
    if (!lim)
        lim = &engine_default_limits;
    struct run R = {0};
    R.m = m;
    R.req = req;
    R.n = m->n;
    R.k = m->k;
    R.nc = m->nc;
    int n = m->n;
    int ok = run_alloc(&R) == 0;
    double *y0 = calloc(2 * n + 1, sizeof *y0);
    int rc = HAMEL_E_INTERNAL;
    if ((req->n_ev > 0 && run_alloc_events(&R) < 0) || (m->npos > 0 && run_alloc_position(&R) < 0) || !ok ||
        !y0) {
        *problem = hamel_problem_new(rc, "out of memory");
        goto done;
    }
    integ_system sys;
    if (run_system(&R, y0, &sys) < 0) {
        *problem = hamel_problem_new(rc, "out of memory");
        goto done;
    }
    integ_options opt = run_options(&R, lim, ctl);
    char reason[INTEG_REASON_MAX] = "";
    integ_stats st;
    memset(&st, 0, sizeof st);
    if (req->formulation == SIM_HAMEL && !m->psi_det_const) {
        R.wt = watch_new(m, R.w);
        if (!R.wt) {
            *problem = hamel_problem_new(rc, "out of memory");
            goto done;
        }
        opt.step_check = watch_step;
        opt.step_ctx = R.wt;
    }
    rc = run_integrate(&R, &sys, &opt, y0, &st, reason, sizeof reason);
    if (R.wt)
        hamel_ws_select(R.w, NULL); /* the checks use the model's own speeds */
    double checks_ms;
    rc = run_checks(&R, ctl, rc, &checks_ms);
    if (ctl && rc == 0)
        ctl->progress = 1.0;
    if (req->formulation == SIM_HAMEL)
        native_note_run(m, st.rhs_evals); /* a hot model gets the optimizing tier */
    const char *tier = req->formulation == SIM_HAMEL ? hamel_ws_tier(R.w)
                       : m->tape_dyn->fn             ? "tcc"
                                                     : "interp";
    json_t *body = run_body(&R, tier, run_stats(&R, &st, checks_ms, tier));
    if (rc == 0) {
        *result = body;
    } else {
        const char *why = watch_reason(R.wt) ? watch_reason(R.wt)
                          : st.reason[0]     ? st.reason
                          : reason[0]        ? reason
                                             : hamel_error_title(rc);
        /* the equations fail before the first step: say why at the initial state (a
         * speed without inertia, Psi singular, a NaN in T, V or Q) */
        char explained[INTEG_REASON_MAX + 400], clause[320];
        if (rc == HAMEL_E_NUMERIC && !watch_reason(R.wt) && req->formulation == SIM_HAMEL &&
            (R.ns == 0 || R.t[R.ns - 1] == req->t0) &&
            hamel_explain(R.w, req->t0, req->q0, req->u0, clause, sizeof clause)) {
            snprintf(explained, sizeof explained, "%s: at the initial state, %s", why, clause);
            why = explained;
        }
        char grew[INTEG_REASON_MAX + 800];
        json_t *cond = run_failure_condition(&R, rc, why, grew, sizeof grew);
        if (cond)
            why = grew;
        *problem = hamel_problem_new(rc, why);
        json_object_set_new(*problem, "reason", json_string(why));
        json_object_set_new(*problem, "t_reached", num(R.ns ? R.t[R.ns - 1] : req->t0));
        if (cond)
            json_object_set_new(*problem, "psi_condition", cond);
        json_object_set_new(*problem, "partial", body);
    }
done:
    free(y0);
    run_free(&R);
    return rc;
}

/* ---- the result as text ---- */

/* The series of marker string s (NULL if s is not one). */
static int sim__marker(const sim_text *T, const char *s, size_t len)
{
    if (len < 2 || s[0] != '\x01')
        return -1;
    int i = atoi(s + 1);
    return i >= 0 && i < T->n ? i : -1;
}

/* jsonout's hook: writes the numbers of a marker. */
static int sim__write_series(jsonout *o, const char *s, size_t len, void *ctx)
{
    const sim_text *T = ctx;
    int i = sim__marker(T, s, len);
    if (i < 0)
        return 0;
    if (T->raw[i])
        jsonout_raw(o, T->raw[i], (size_t)T->count[i]);
    else
        jsonout_doubles(o, T->v[i], (size_t)T->count[i]);
    return 1;
}

/* The value of marker i as a jansson value. */
static json_t *sim__unmark(const sim_text *T, int i)
{
    if (T->raw[i])
        return json_loadb(T->raw[i], (size_t)T->count[i], 0, NULL);
    return series(T->v[i], T->count[i], 1, 0);
}

/* Replaces every marker in j by its array (for a failed run's partial document). */
static void sim__materialize(json_t *j, const sim_text *T)
{
    if (json_is_object(j)) {
        const char *key;
        json_t *v;
        json_object_foreach(j, key, v)
        {
            if (json_is_string(v)) {
                int i = sim__marker(T, json_string_value(v), json_string_length(v));
                if (i >= 0)
                    json_object_set_new(j, key, sim__unmark(T, i));
            } else {
                sim__materialize(v, T);
            }
        }
    } else if (json_is_array(j)) {
        for (size_t k = 0; k < json_array_size(j); k++) {
            json_t *v = json_array_get(j, k);
            int i = json_is_string(v) ? sim__marker(T, json_string_value(v), json_string_length(v)) : -1;
            if (i >= 0)
                json_array_set_new(j, k, sim__unmark(T, i));
            else
                sim__materialize(v, T);
        }
    }
}

int sim_run_text(const struct engine_model *m, const sim_request *req, const engine_limits *lim,
                 engine_control *ctl, const json_t *head, char **text, size_t *len, json_t **problem)
{
    *text = NULL;
    *len = 0;
    sim_text T = {0};
    json_t *body = NULL;
    sim_text_mode = &T;
    int rc = sim_run(m, req, lim, ctl, &body, problem);
    sim_text_mode = NULL;
    if (rc == 0) {
        jsonout o;
        /* numbers are most of it: ~20 bytes each */
        size_t guess = 4096;
        for (int i = 0; i < T.n; i++)
            guess += (size_t)T.count[i] * (T.raw[i] ? 1 : 20);
        if (jsonout_init(&o, guess) == 0) {
            o.hook = sim__write_series;
            o.hook_ctx = &T;
            jsonout_raw(&o, "{", 1);
            int first = 1;
            const char *key;
            json_t *v;
            json_object_foreach((json_t *)head, key, v)
            {
                jsonout_raw(&o, ",", first ? 0 : 1);
                first = 0;
                jsonout_string(&o, key, strlen(key));
                jsonout_raw(&o, ":", 1);
                jsonout_value(&o, v);
            }
            json_object_foreach(body, key, v)
            {
                if (head && json_object_get(head, key))
                    continue;
                jsonout_raw(&o, ",", first ? 0 : 1);
                first = 0;
                jsonout_string(&o, key, strlen(key));
                jsonout_raw(&o, ":", 1);
                jsonout_value(&o, v);
            }
            jsonout_raw(&o, "}", 1);
            *text = jsonout_finish(&o, len);
        }
        if (!*text) {
            rc = HAMEL_E_INTERNAL;
            *problem = hamel_problem_new(rc, "out of memory writing the result");
        }
    } else if (*problem) {
        json_t *partial = json_object_get(*problem, "partial");
        if (partial)
            sim__materialize(partial, &T);
    }
    json_decref(body);
    for (int i = 0; i < T.n; i++) {
        free(T.v[i]);
        free(T.raw[i]);
    }
    free(T.v);
    free(T.raw);
    free(T.count);
    return rc;
}
