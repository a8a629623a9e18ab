/* request.c — simulation requests (API.md §3), the validation half of sim.h: a request's
 * JSON checked against its model and the engine's limits (every problem named by its
 * path) and turned into a sim_request — parameters, the initial state (positions
 * solved onto the position constraints, velocities onto the velocity constraints, a
 * root of q' chosen for nonlinear ones), the integrator, the output, events and
 * invariants as tapes. sim.c runs what this returns. */
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contact.h"
#include "geom.h"
#include "hamel.h"
#include "holo.h"
#include "watch.h"

#define SIM_DEFAULT_SAMPLES 101
#define SIM_DEFAULT_MAX_STEPS 1000000L
#define SIM_DEFAULT_POS_TOL 1e-9  /* position_tolerance */
#define SIM_INITIAL_POS_TOL 1e-10 /* the initial solve must reach at least this */
#define SIM_MAX_GAMMA_WORK 5e8    /* samples * n^4 for "hamel": "samples" (as ENGINE_MAX_GAMMA_WORK) */
#define SIM_MAX_EVENTS 64         /* event functions of one request */

/* Every problem of a simulation request is a bad request. */
#define bad(problem, ...) hamel_problem_addf((problem), HAMEL_E_BAD_REQUEST, __VA_ARGS__)

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* A JSON integer, or a real with a whole value (JSON, like JavaScript, does not tell
 * 1001 from 1001.0), into *out. Returns 0 for anything else. */
static int whole_number(const json_t *v, long *out)
{
    if (json_is_integer(v)) {
        *out = (long)json_integer_value(v);
        return 1;
    }
    double d = json_is_real(v) ? json_real_value(v) : 0.5;
    if (d != floor(d) || fabs(d) > 9.0e15)
        return 0;
    *out = (long)d;
    return 1;
}

void sim_request_free(sim_request *r)
{
    free(r->params);
    free(r->q0);
    free(r->u0);
    free(r->qd0);
    free(r->times);
    free(r->pos_dep);
    free(r->q_guess);
    for (int i = 0; i < r->n_inv; i++)
        free(r->inv_names[i]);
    free(r->inv_names);
    tape_free(r->inv_tape);
    expr_ctx_free(r->inv_ctx);
    for (int i = 0; i < r->n_ev; i++)
        free(r->ev_names[i]);
    free(r->ev_names);
    free(r->ev_dir);
    free(r->ev_stop);
    tape_free(r->ev_tape);
    expr_ctx_free(r->ev_ctx);
    free(r->ev_lam_sym);
    free(r->con);
    memset(r, 0, sizeof *r);
}

static int get_number(const json_t *obj, const char *key, double *out, const char *path, json_t **problem)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v))) {
        bad(problem, path, "must be a finite number");
        return -1;
    }
    *out = json_number_value(v);
    return 1;
}

static int parse_invariants(const struct engine_model *m, const json_t *inv, sim_request *r,
                            const engine_limits *lim, json_t **problem)
{
    if (!inv)
        return 0;
    if (!json_is_array(inv)) {
        bad(problem, "invariants", "must be an array of {\"name\", \"expr\"}");
        return -1;
    }
    int n = (int)json_array_size(inv);
    if (n > 64) {
        bad(problem, "invariants", "at most 64 invariants");
        return -1;
    }
    if (!n)
        return 0;
    r->inv_ctx = model_fresh_ctx(m);
    r->inv_names = calloc(n, sizeof *r->inv_names);
    expr **roots = calloc(n, sizeof *roots);
    if (!r->inv_ctx || !r->inv_names || !roots) {
        free(roots);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const json_t *it = json_array_get(inv, i);
        char path[64];
        snprintf(path, sizeof path, "invariants[%d]", i);
        const json_t *name = json_object_get(it, "name"), *ex = json_object_get(it, "expr");
        static const char *const inv_keys[] = {"name", "expr", NULL};
        if (json_is_object(it))
            hamel_problem_unknown_members(problem, it, path, inv_keys);
        if (!json_is_object(it) || !json_is_string(ex)) {
            bad(problem, path, "must be an object {\"name\", \"expr\"}");
            continue;
        }
        char defname[32];
        snprintf(defname, sizeof defname, "I%d", i + 1);
        snprintf(path, sizeof path, "invariants[%d].name", i);
        if (name && (!json_is_string(name) || json_string_length(name) == 0 || json_string_length(name) > 80))
            bad(problem, path, "must be a name of 1 to 80 characters");
        const char *nm = json_is_string(name) ? json_string_value(name) : defname;
        /* checks.invariants is keyed by name: a second invariant of one name would
         * silently replace the first */
        for (int j = 0; j < r->n_inv; j++)
            if (strcmp(r->inv_names[j], nm) == 0)
                bad(problem, path, "\"%s\" is the name of an earlier invariant too: names must differ", nm);
        r->inv_names[r->n_inv] = strdup(nm);
        if (!r->inv_names[r->n_inv]) {
            free(roots);
            return -1;
        }
        r->n_inv++;
        snprintf(path, sizeof path, "invariants[%d].expr", i);
        expr_parse_opts o = {1, 1, lim->max_expr_chars, path};
        expr_error err;
        roots[i] = expr_parse(r->inv_ctx, json_string_value(ex), &o, &err);
        if (!roots[i]) {
            if (!*problem)
                *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
            hamel_problem_add(*problem, path, err.column, err.message);
        }
    }
    if (!*problem)
        r->inv_tape = model_tape(m, r->inv_ctx, roots, n);
    free(roots);
    return *problem ? -1 : 0;
}

/* One of the words of an enumerated member (events[i].direction): its index in
 * words[], the default when absent, or -1 with a problem naming path. */
static int parse_word(const json_t *v, const char *const *words, int dflt, const char *path, json_t **problem)
{
    if (!v)
        return dflt;
    for (int i = 0; words[i] && json_is_string(v); i++)
        if (strcmp(json_string_value(v), words[i]) == 0)
            return i;
    char list[128] = "";
    for (int i = 0, used = 0; words[i] && used < (int)sizeof list; i++)
        used += snprintf(list + used, sizeof list - used, "%s\"%s\"", i ? ", " : "", words[i]);
    bad(problem, path, "must be one of %s", list);
    return -1;
}

/* The tape of the user's events: the model's inputs, then the multipliers lambda_j at
 * n_in + j (symbols of class SYM_PARAM with index np + j in the events' context). */
static tape *events_tape(const struct engine_model *m, const expr_ctx *c, expr **roots, int n_roots)
{
    int ns = expr_sym_count(c);
    int *slot = malloc((ns + 1) * sizeof *slot);
    if (!slot)
        return NULL;
    for (int s = 0; s < ns; s++) {
        const expr_symbol *sym = expr_sym_get(c, s);
        switch (sym->cls) {
        case SYM_PARAM: slot[s] = sym->index < m->np ? sym->index : m->n_in + sym->index - m->np; break;
        case SYM_TIME: slot[s] = model_input_t(m); break;
        case SYM_COORD: slot[s] = model_input_q(m) + sym->index; break;
        case SYM_VELOCITY: slot[s] = model_input_qd(m) + sym->index; break;
        default: slot[s] = -1; break;
        }
    }
    tape *t = tape_build(c, roots, n_roots, slot, m->n_in + m->nc);
    free(slot);
    return t;
}

/* The names an event expression may use besides the model's own: the speeds as
 * definitions u_r(q, q', t) (where the trajectory reports speeds; default speeds are
 * velocities q' already), the multipliers lambda_<constraint> and, for each contact,
 * normal_<disk> and tangential_<disk> (contact.h). A name the model already uses keeps
 * its meaning. */
static int events_names(const struct engine_model *m, sim_request *r)
{
    expr_parse_opts o = {1, 1, 0, "a name of the events"};
    expr_error err;
    r->ev_k = m->nlin == m->nc || m->nl_reduced ? m->k : 0;
    for (int s = 0; s < r->ev_k; s++) {
        if (expr_sym_find(r->ev_ctx, m->speeds[s]) >= 0)
            continue;
        pthread_mutex_lock((pthread_mutex_t *)&m->forms_lock); /* forms may add nodes to m->ctx */
        char *text = expr_print(m->ctx, m->speed_f[s]);
        pthread_mutex_unlock((pthread_mutex_t *)&m->forms_lock);
        expr *u = text ? expr_parse(r->ev_ctx, text, &o, &err) : NULL;
        free(text);
        if (!u || expr_def_add(r->ev_ctx, m->speeds[s], u) < 0)
            return -1;
    }
    for (int j = 0; j < m->nc; j++) {
        char name[160];
        snprintf(name, sizeof name, "lambda_%s", m->cons[j].name);
        r->ev_lam_sym[j] =
            expr_sym_find(r->ev_ctx, name) < 0 ? expr_sym_add(r->ev_ctx, name, SYM_PARAM, m->np + j) : -1;
    }
    for (int c = 0; c < r->n_con; c++) {
        const contact_spec *cs = &r->con[c];
        char name[96], text[400];
        for (int kind = 0; kind < 2; kind++) {
            int a = kind ? cs->tang[0] : cs->normal, b = kind ? cs->tang[1] : -1;
            if (kind == 0 && a < 0)
                continue; /* no normal force */
            snprintf(name, sizeof name, "%s_%s", kind ? "tangential" : "normal", cs->name);
            if (expr_sym_find(r->ev_ctx, name) >= 0)
                continue;
            if (kind == 0)
                snprintf(text, sizeof text, "lambda_%s", m->cons[a].name);
            else if (a >= 0 && b >= 0)
                snprintf(text, sizeof text, "sqrt(lambda_%s^2 + lambda_%s^2)", m->cons[a].name,
                         m->cons[b].name);
            else if (a >= 0 || b >= 0)
                snprintf(text, sizeof text, "sqrt(lambda_%s^2)", m->cons[a >= 0 ? a : b].name);
            else
                snprintf(text, sizeof text, "0");
            expr *e = expr_parse(r->ev_ctx, text, &o, &err);
            if (!e || expr_def_add(r->ev_ctx, name, e) < 0)
                return -1;
        }
    }
    return 0;
}

/* The reason of a parse error of an event: normal_<contact> of a contact whose model
 * gives no normal force says so (not just "unknown identifier"). */
static const char *event_unknown_reason(const sim_request *r, const expr_error *err, char *buf, size_t size)
{
    for (int c = 0; c < r->n_con; c++) {
        char quoted[96];
        snprintf(quoted, sizeof quoted, "unknown identifier 'normal_%s'", r->con[c].name);
        if (r->con[c].normal < 0 && strcmp(err->message, quoted) == 0) {
            snprintf(buf, size,
                     "%.100s: contact %.60s has no normal force (no constraint of the model holds its "
                     "height, e.g. a coordinate eliminated by hand: checks.contacts.%.60s.reason says why)",
                     err->message, r->con[c].name, r->con[c].name);
            return buf;
        }
    }
    return err->message;
}

/* Every member of event i is one we know. */
static void check_event_keys(const json_t *it, int i, json_t **problem)
{
    static const char *const keys[] = {"name", "expr", "direction", "action", NULL};
    char prefix[32];
    snprintf(prefix, sizeof prefix, "events[%d]", i);
    hamel_problem_unknown_members(problem, it, prefix, keys);
}

/* Event i (it): its name, direction and action appended to r's events, its expression
 * parsed into roots[i]. -1 when out of memory. */
static int parse_event(const json_t *it, int i, sim_request *r, const engine_limits *lim, expr **roots,
                       json_t **problem)
{
    static const char *const dirs[] = {"both", "rising", "falling", NULL};
    static const int dir_code[] = {INTEG_EVENT_BOTH, INTEG_EVENT_RISING, INTEG_EVENT_FALLING};
    static const char *const actions[] = {"record", "stop", NULL};
    char path[64];
    snprintf(path, sizeof path, "events[%d]", i);
    if (!json_is_object(it)) {
        bad(problem, path, "must be an object {\"name\", \"expr\", \"direction\", \"action\"}");
        return 0;
    }
    check_event_keys(it, i, problem);
    const json_t *name = json_object_get(it, "name"), *ex = json_object_get(it, "expr");
    char defname[32];
    snprintf(defname, sizeof defname, "E%d", i + 1);
    snprintf(path, sizeof path, "events[%d].name", i);
    if (name && (!json_is_string(name) || json_string_length(name) == 0 || json_string_length(name) > 80))
        bad(problem, path, "must be a name of 1 to 80 characters");
    const char *nm = json_is_string(name) ? json_string_value(name) : defname;
    for (int j = 0; j < r->n_ev; j++)
        if (strcmp(r->ev_names[j], nm) == 0)
            bad(problem, path, "\"%s\" is the name of events[%d] too: names must differ", nm, j);
    r->ev_names[r->n_ev] = strdup(nm);
    if (!r->ev_names[r->n_ev])
        return -1;
    snprintf(path, sizeof path, "events[%d].direction", i);
    int d = parse_word(json_object_get(it, "direction"), dirs, 0, path, problem);
    r->ev_dir[r->n_ev] = d >= 0 ? dir_code[d] : 0;
    snprintf(path, sizeof path, "events[%d].action", i);
    r->ev_stop[r->n_ev] = parse_word(json_object_get(it, "action"), actions, 0, path, problem) == 1;
    r->n_ev++;
    snprintf(path, sizeof path, "events[%d].expr", i);
    if (!json_is_string(ex)) {
        bad(problem, path, "required: an expression whose zero crossings are the event");
        return 0;
    }
    expr_parse_opts o = {1, 1, lim->max_expr_chars, path};
    expr_error err;
    roots[i] = expr_parse(r->ev_ctx, json_string_value(ex), &o, &err);
    if (!roots[i]) {
        if (!*problem)
            *problem = hamel_problem_new(HAMEL_E_BAD_REQUEST, NULL);
        char why[512];
        hamel_problem_add(*problem, path, err.column, event_unknown_reason(r, &err, why, sizeof why));
    }
    return 0;
}

/* The two internal events of each contact (lift-off and slip, falling) after the
 * user's. -1 when out of memory. */
static int contact_events(sim_request *r, const json_t *problem)
{
    for (int c = 0; c < r->n_con && !problem; c++)
        for (int kind = 0; kind < 2; kind++) {
            char name[CONTACT_NAME_MAX + 16];
            snprintf(name, sizeof name, "%s.%s", r->con[c].name, kind ? "slip" : "lift_off");
            r->ev_names[r->n_ev] = strdup(name);
            if (!r->ev_names[r->n_ev])
                return -1;
            r->ev_dir[r->n_ev++] = INTEG_EVENT_FALLING;
        }
    return 0;
}

/* "events": [{"name", "expr", "direction", "action"}]: expressions in t, the
 * coordinates, their velocities q', the speeds (when the model reports them), the
 * multipliers and contact forces, parameters and definitions. After the user's events
 * come two internal ones per contact (contact.h): the normal force and friction * N -
 * |F_t|, falling (lift-off and slip), computed in code and not listed. */
static int parse_events(const struct engine_model *m, const json_t *evs, sim_request *r,
                        const engine_limits *lim, json_t **problem)
{
    if (evs && !json_is_array(evs)) {
        bad(problem, "events", "must be an array of {\"name\", \"expr\", \"direction\", \"action\"}");
        return -1;
    }
    int n = (int)json_array_size(evs);
    if (n > SIM_MAX_EVENTS) {
        bad(problem, "events", "at most %d events", SIM_MAX_EVENTS);
        return -1;
    }
    r->n_con = contact_list(m, &r->con);
    if (r->n_con < 0) {
        r->n_con = 0;
        return -1;
    }
    int total = n + 2 * r->n_con;
    if (!total)
        return 0;
    r->ev_names = calloc(total, sizeof *r->ev_names);
    r->ev_dir = calloc(total, sizeof *r->ev_dir);
    r->ev_stop = calloc(total, 1);
    if (!r->ev_names || !r->ev_dir || !r->ev_stop)
        return -1;
    if (n > 0) {
        r->ev_ctx = model_fresh_ctx(m);
        r->ev_lam_sym = malloc((m->nc + 1) * sizeof *r->ev_lam_sym);
        if (!r->ev_ctx || !r->ev_lam_sym || events_names(m, r) < 0)
            return -1;
    }
    expr **roots = calloc(n + 1, sizeof *roots);
    if (!roots)
        return -1;
    for (int i = 0; i < n; i++)
        if (parse_event(json_array_get(evs, i), i, r, lim, roots, problem) < 0) {
            free(roots);
            return -1;
        }
    if (!*problem && n > 0) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < m->nc && !r->ev_lam; j++)
                r->ev_lam = r->ev_lam_sym[j] >= 0 && expr_depends(roots[i], r->ev_lam_sym[j]);
        r->ev_tape = events_tape(m, r->ev_ctx, roots, n);
        if (!r->ev_tape) {
            free(roots);
            return -1;
        }
    }
    free(roots);
    r->n_ev_user = r->n_ev;
    if (contact_events(r, *problem) < 0)
        return -1;
    return *problem ? -1 : 0;
}

static int parse_output(const json_t *out, sim_request *r, const engine_limits *lim, json_t **problem,
                        int have_t_end)
{
    const json_t *samples = json_object_get(out, "samples");
    const json_t *dt = json_object_get(out, "dt");
    const json_t *times = json_object_get(out, "times");
    if (out && !json_is_object(out)) {
        bad(problem, "output", "must be an object with samples, dt or times");
        return -1;
    }
    static const char *const keys[] = {"samples", "dt", "times", NULL};
    if (out)
        hamel_problem_unknown_members(problem, out, "output", keys);
    if (!!samples + !!dt + !!times > 1) {
        bad(problem, "output", "give one of samples, dt, times");
        return -1;
    }
    if (times) {
        if (!json_is_array(times) || json_array_size(times) == 0) {
            bad(problem, "output.times", "must be a non-empty array of times");
            return -1;
        }
        size_t n = json_array_size(times);
        if ((long)n > lim->max_samples) {
            bad(problem, "output.times", "at most %d times", lim->max_samples);
            return -1;
        }
        r->times = calloc(n + 1, sizeof *r->times);
        if (!r->times)
            return -1;
        double prev = r->t0;
        for (size_t i = 0; i < n; i++) {
            const json_t *v = json_array_get(times, i);
            char path[48];
            snprintf(path, sizeof path, "output.times[%zu]", i);
            if (!json_is_number(v) || !isfinite(json_number_value(v))) {
                bad(problem, path, "must be a finite number");
                return -1;
            }
            double t = json_number_value(v);
            if (t < prev || (i > 0 && t == prev)) {
                bad(problem, path, "times must increase from initial.t (%g); got %g after %g", r->t0, t,
                    prev);
                return -1;
            }
            if (have_t_end && t > r->t_end) {
                bad(problem, path, "%g is after t_end (%g)", t, r->t_end);
                return -1;
            }
            r->times[i] = prev = t;
        }
        r->n_times = (int)n;
        if (!have_t_end)
            r->t_end = r->times[n - 1];
        if (r->times[n - 1] < r->t_end)
            r->times[r->n_times++] = r->t_end;
        return 0;
    }
    if (!have_t_end) {
        bad(problem, "t_end", "required (or give output.times)");
        return -1;
    }
    long count = SIM_DEFAULT_SAMPLES;
    if (samples) {
        if (!whole_number(samples, &count) || count < 2) {
            bad(problem, "output.samples", "must be an integer >= 2");
            return -1;
        }
        if (count > lim->max_samples) {
            bad(problem, "output.samples", "at most %d samples", lim->max_samples);
            return -1;
        }
    } else if (dt) {
        double h = json_is_number(dt) ? json_number_value(dt) : -1;
        if (!(h > 0) || !isfinite(h)) {
            bad(problem, "output.dt", "must be a positive number");
            return -1;
        }
        double steps = (r->t_end - r->t0) / h;
        if (steps + 1 > lim->max_samples) {
            bad(problem, "output.dt", "gives %.4g samples; at most %d", steps + 1, lim->max_samples);
            return -1;
        }
        long whole = (long)floor(steps + 1e-9);
        r->times = calloc(whole + 2, sizeof *r->times);
        if (!r->times)
            return -1;
        int n = 0;
        for (long i = 0; i <= whole; i++)
            r->times[n++] = r->t0 + (double)i * h;
        if (r->times[n - 1] > r->t_end)
            r->times[n - 1] = r->t_end;
        if (r->t_end - r->times[n - 1] > 1e-9 * h)
            r->times[n++] = r->t_end;
        r->n_times = n;
        return 0;
    }
    if (!isfinite((r->t_end - r->t0) * (double)(count - 1))) { /* t_end = 1e308: the times overflow */
        bad(problem, "t_end", "is too far from initial.t (%g) for %ld samples: the sample times overflow",
            r->t0, count);
        return -1;
    }
    r->times = calloc(count, sizeof *r->times);
    if (!r->times)
        return -1;
    for (long i = 0; i < count; i++)
        r->times[i] = r->t0 + (r->t_end - r->t0) * (double)i / (double)(count - 1);
    r->times[count - 1] = r->t_end;
    r->n_times = (int)count;
    return 0;
}

void sim_parse_parameters(const struct engine_model *m, const json_t *params, double *values,
                          json_t **problem)
{
    if (m->np)
        memcpy(values, m->param_values, m->np * sizeof *values);
    if (params && !json_is_object(params))
        bad(problem, "parameters", "must be an object of name: number");
    if (!params || !json_is_object(params))
        return;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)params, key, val)
    {
        char path[96];
        snprintf(path, sizeof path, "parameters.%.80s", key);
        int i = model_param_index(m, key);
        if (i < 0)
            bad(problem, path, "'%s' is not a parameter of the model", key);
        else if (!json_is_number(val) || !isfinite(json_number_value(val)))
            bad(problem, path, "must be a finite number");
        else
            values[i] = json_number_value(val);
    }
    geom_check(m, values, problem); /* a mass or radius these values make negative */
}

#define SIM_ROOTS_SHOWN 4

int sim_nl_velocity(const struct engine_model *m, hamel_ws *w, double t, const double *q, const double *u,
                    double *qd, const char *path, json_t **problem)
{
    return sim_nl_velocity_why(m, w, t, q, u, qd, path, "these speeds",
                               "give qdot instead of the speeds (the solution nearest to it is taken)",
                               problem);
}

/* "(x' = 1, y' = 2) and (...)" of the first roots into text[size]; their list as
 * [{coordinate: q'}] (caller owns). */
static json_t *roots_text(const struct engine_model *m, const double *roots, int found, char *text,
                          size_t size)
{
    int n = m->n, used = 0;
    json_t *list = json_array();
    text[0] = '\0';
    for (int r = 0; r < found && r < SIM_ROOTS_SHOWN; r++) {
        json_t *one = json_object();
        used += snprintf(text + used, size - (size_t)used, "%s(", r ? " and " : "");
        for (int i = 0; i < n; i++) {
            double v = roots[(size_t)r * n + i];
            json_object_set_new(one, m->coords[i], num(v));
            if (used < (int)size - 80)
                used += snprintf(text + used, size - (size_t)used, "%s%s' = %.10g", i ? ", " : "",
                                 m->coords[i], v);
        }
        if (used < (int)size - 4)
            used += snprintf(text + used, size - (size_t)used, ")");
        json_array_append_new(list, one);
    }
    return list;
}

int sim_nl_velocity_why(const struct engine_model *m, hamel_ws *w, double t, const double *q, const double *u,
                        double *qd, const char *path, const char *lead, const char *advice, json_t **problem)
{
    int n = m->n;
    double roots[SIM_ROOTS_SHOWN * ENGINE_COORDINATES_CEILING];
    int found = n <= ENGINE_COORDINATES_CEILING ? hamel_qdot_roots(w, t, q, u, roots, SIM_ROOTS_SHOWN) : 0;
    if (found == 1) {
        memcpy(qd, roots, n * sizeof *qd);
        return 0;
    }
    if (found == 0) {
        char msg[600];
        snprintf(msg, sizeof msg,
                 "Newton's method found no q' with %s on the nonlinear constraints: give qdot", lead);
        if (!*problem)
            *problem = hamel_problem_new(HAMEL_E_BAD_INITIAL,
                                         "no velocities satisfy the constraints with these speeds");
        hamel_problem_add(*problem, path, -1, msg);
        return HAMEL_E_BAD_INITIAL;
    }
    char text[900], msg[1700];
    json_t *list = roots_text(m, roots, found, text, sizeof text);
    snprintf(msg, sizeof msg, "%s leave %d%s solutions for q' on the nonlinear constraints: %s; %s", lead,
             found, found > SIM_ROOTS_SHOWN ? " or more" : "", text, advice);
    int created = !*problem;
    if (created)
        *problem = hamel_problem_new(HAMEL_E_BAD_INITIAL, msg);
    hamel_problem_add(*problem, path, -1, msg);
    if (created)
        json_object_set_new(*problem, "roots", list);
    else
        json_decref(list);
    return HAMEL_E_BAD_INITIAL;
}

static const char *const known_request_keys[] = {
    "model",  "model_id",    "parameters",         "initial",    "t_end",
    "output", "integrator",  "formulation",        "invariants", "hamel",
    "name",   "description", "position_tolerance", "projection", "events",
    NULL};

/* Solves the position-level constraints for their dependent coordinates at the
 * initial time, from r->q0 as a guess. Returns 0, -1 (out of memory) or an error with
 * *problem naming the coordinates, the guess and the residual. */
static int initial_position(const struct engine_model *m, sim_request *r, json_t **problem)
{
    int h = m->npos, n = m->n;
    holo_ws *w = holo_ws_new(m, r->params);
    r->pos_dep = calloc(h, sizeof *r->pos_dep);
    r->q_guess = malloc(n * sizeof *r->q_guess);
    double *f = calloc(h, sizeof *f);
    if (!w || !r->pos_dep || !r->q_guess || !f) {
        holo_ws_free(w);
        free(f);
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
        return HAMEL_E_INTERNAL;
    }
    memcpy(r->q_guess, r->q0, n * sizeof *r->q0);
    int rc = 0;
    char names[256] = "", guess[512] = "";
    if (holo_choose(w, r->t0, r->q0, r->pos_dep) < 0) {
        *problem =
            hamel_problem_new(HAMEL_E_BAD_INITIAL, "the position-level constraints are dependent here");
        hamel_problem_add(*problem, "initial.q", -1,
                          "the gradients of the position-level constraints are linearly dependent at "
                          "this guess: no coordinates can be solved for; start from another guess");
        rc = HAMEL_E_BAD_INITIAL;
        goto done;
    }
    for (int j = 0; j < h; j++) {
        size_t a = strlen(names), b = strlen(guess);
        snprintf(names + a, sizeof names - a, "%s%s", j ? ", " : "", m->coords[r->pos_dep[j]]);
        snprintf(guess + b, sizeof guess - b, "%s%s = %.17g", j ? ", " : "", m->coords[r->pos_dep[j]],
                 r->q0[r->pos_dep[j]]);
    }
    double tol = r->pos_tol < SIM_INITIAL_POS_TOL ? r->pos_tol : SIM_INITIAL_POS_TOL;
    if (holo_solve(w, r->t0, r->q0, r->pos_dep, tol, &r->pos_resid0, &r->pos_iters) < 0) {
        holo_residual(w, r->t0, r->q0, f);
        int worst = 0;
        for (int j = 1; j < h; j++)
            if (!(fabs(f[j]) <= fabs(f[worst])))
                worst = j;
        char path[128], msg[1024];
        snprintf(path, sizeof path, "initial.q.%s", m->coords[r->pos_dep[0]]);
        snprintf(msg, sizeof msg,
                 "Newton's method on %s from the guess %s did not converge: max |f| = %.3g after %d "
                 "iterations (constraint %s; tolerance %.1g); give a better guess",
                 names, guess, r->pos_resid0, r->pos_iters, m->cons[m->pos_con[worst]].name, tol);
        *problem = hamel_problem_new(HAMEL_E_BAD_INITIAL, "the position-level constraints cannot be solved");
        hamel_problem_add(*problem, path, -1, msg);
        rc = HAMEL_E_BAD_INITIAL;
    }
done:
    holo_ws_free(w);
    free(f);
    return rc;
}

/* Every key of the request is one we know. */
static void check_request_keys(const json_t *js, json_t **problem)
{
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)js, key, val)
    {
        int known = 0;
        for (int i = 0; known_request_keys[i]; i++)
            known |= strcmp(key, known_request_keys[i]) == 0;
        if (!known)
            bad(problem, key,
                "unknown field (expected one of model, model_id, parameters, "
                "initial, t_end, output, integrator, formulation, invariants, hamel, "
                "position_tolerance, projection, events)");
    }
}

/* One value per name of names[count] from object obj (at initial.<part>) into out;
 * speeds: the names are the model's speeds (else its coordinates); missing: the
 * message for a name without a value. */
static void parse_named(const struct engine_model *m, const json_t *obj, const char *part, int speeds,
                        const char *missing, double *out, json_t **problem)
{
    char *const *names = speeds ? m->speeds : m->coords;
    int count = speeds ? m->k : m->n;
    for (int i = 0; i < count; i++) {
        char path[96];
        snprintf(path, sizeof path, "initial.%s.%s", part, names[i]);
        if (!json_object_get(obj, names[i]))
            bad(problem, path, "%s", missing);
        else
            get_number(obj, names[i], &out[i], path, problem);
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        if ((speeds ? model_speed_index(m, key) : model_coord_index(m, key)) < 0) {
            char path[96];
            snprintf(path, sizeof path, "initial.%s.%.80s", part, key);
            bad(problem, path, speeds ? "'%s' is not a speed of the model" : "'%s' is not a coordinate", key);
        }
    }
}

/* initial: {"t", "q", "speeds" or "qdot"}. -1 when it is not an object. */
static int parse_initial(const struct engine_model *m, const json_t *init, sim_request *r, int all_linear,
                         json_t **problem)
{
    if (!json_is_object(init)) {
        bad(problem, "initial", "required: {\"t\", \"q\": {...}, \"speeds\": {...} or \"qdot\": {...}}");
        return -1;
    }
    static const char *const keys[] = {"t", "q", "speeds", "qdot", NULL};
    hamel_problem_unknown_members(problem, init, "initial", keys);
    r->t0 = 0.0;
    get_number(init, "t", &r->t0, "initial.t", problem);
    const json_t *q = json_object_get(init, "q");
    if (!json_is_object(q))
        bad(problem, "initial.q", "required: an object with a value for every coordinate");
    else
        parse_named(m, q, "q", 0, "missing: every coordinate needs an initial value", r->q0, problem);
    const json_t *sp = json_object_get(init, "speeds"), *qd = json_object_get(init, "qdot");
    if (sp && qd) {
        bad(problem, "initial", "give speeds or qdot, not both");
    } else if (sp) {
        if (!all_linear)
            bad(problem, "initial.speeds", "this model has nonlinear constraints: give initial.qdot");
        else if (!json_is_object(sp))
            bad(problem, "initial.speeds", "must be an object with a value for every speed");
        else
            parse_named(m, sp, "speeds", 1, "missing: every independent speed needs an initial value", r->u0,
                        problem);
    } else if (qd) {
        if (!json_is_object(qd)) {
            bad(problem, "initial.qdot", "must be an object with a value for every coordinate");
        } else {
            parse_named(m, qd, "qdot", 0, "missing: every coordinate needs an initial velocity", r->qd0,
                        problem);
            r->have_qd0 = 1;
        }
    } else {
        bad(problem, "initial", all_linear ? "give initial.speeds (or initial.qdot)" : "give initial.qdot");
    }
    return 0;
}

/* integrator: {"method", "rtol", "atol", "h0", "max_steps"} over the defaults. */
static void parse_integrator(const json_t *integ, sim_request *r, const engine_limits *lim, json_t **problem)
{
    snprintf(r->method, sizeof r->method, "%s", INTEG_DEFAULT_METHOD);
    r->rtol = INTEG_DEFAULT_RTOL;
    r->atol = INTEG_DEFAULT_ATOL;
    r->max_steps = SIM_DEFAULT_MAX_STEPS;
    if (integ && !json_is_object(integ))
        bad(problem, "integrator", "must be an object");
    if (!integ || !json_is_object(integ))
        return;
    static const char *const keys[] = {"method", "rtol", "atol", "h0", "max_steps", NULL};
    hamel_problem_unknown_members(problem, integ, "integrator", keys);
    const json_t *meth = json_object_get(integ, "method");
    if (meth && (!json_is_string(meth) || !integ_method_known(json_string_value(meth))))
        bad(problem, "integrator.method",
            "unknown method; one of rk8pd, rkf45, rkck, rk4, rk2, rk1imp, rk2imp, rk4imp, bsimp, "
            "msadams, msbdf");
    else if (meth)
        snprintf(r->method, sizeof r->method, "%s", json_string_value(meth));
    if (get_number(integ, "rtol", &r->rtol, "integrator.rtol", problem) == 1 &&
        !(r->rtol >= 0 && r->rtol < 1))
        bad(problem, "integrator.rtol", "must be in [0, 1)");
    if (get_number(integ, "atol", &r->atol, "integrator.atol", problem) == 1 && !(r->atol >= 0))
        bad(problem, "integrator.atol", "must be >= 0");
    if (r->rtol == 0 && r->atol == 0)
        bad(problem, "integrator", "rtol and atol cannot both be 0");
    get_number(integ, "h0", &r->h0, "integrator.h0", problem);
    const json_t *ms = json_object_get(integ, "max_steps");
    long steps = 0;
    if (json_is_real(ms) && json_real_value(ms) > 9.0e15 && json_real_value(ms) == floor(json_real_value(ms)))
        r->max_steps = lim->max_steps; /* 1e18 is a whole number too: the limit, as for a large integer */
    else if (ms && (!whole_number(ms, &steps) || steps < 1))
        bad(problem, "integrator.max_steps", "must be a positive integer");
    else if (ms)
        r->max_steps = steps;
    if (r->max_steps > lim->max_steps)
        r->max_steps = lim->max_steps;
}

/* formulation: "hamel" (the default when every constraint is linear) or "multipliers". */
static void parse_formulation(const struct engine_model *m, const json_t *form, sim_request *r,
                              int all_linear, json_t **problem)
{
    r->formulation = all_linear ? SIM_HAMEL : SIM_MULTIPLIERS;
    if (form && !json_is_string(form)) {
        bad(problem, "formulation", "must be \"hamel\" or \"multipliers\"");
        return;
    }
    if (!form)
        return;
    const char *f = json_string_value(form);
    if (strcmp(f, "hamel") == 0) {
        if (!all_linear) {
            if (!*problem)
                *problem = hamel_problem_new(HAMEL_E_FORMULATION, NULL);
            for (int j = 0; j < m->nc; j++)
                if (!m->cons[j].linear) {
                    char path[96];
                    snprintf(path, sizeof path, "model.constraints[%d]", j);
                    hamel_problem_add(*problem, path, -1,
                                      "this constraint is nonlinear in the velocities (Chetaev "
                                      "type); the Boltzmann–Hamel formulation needs linear ones, or "
                                      "n - m speeds in the model (m counting every constraint: the "
                                      "reduced form): use \"formulation\": \"multipliers\"");
                }
        }
        r->formulation = SIM_HAMEL;
    } else if (strcmp(f, "multipliers") == 0) {
        r->formulation = SIM_MULTIPLIERS;
    } else {
        bad(problem, "formulation", "must be \"hamel\" or \"multipliers\", not \"%s\"", f);
    }
}

/* hamel: "none", "initial" (the default) or "samples", within the work one request may do. */
static void parse_hamel_mode(const struct engine_model *m, const json_t *hm, sim_request *r, json_t **problem)
{
    int n = m->n;
    r->hamel_mode = SIM_HAMEL_INITIAL;
    if (hm) {
        const char *h = json_is_string(hm) ? json_string_value(hm) : "";
        if (strcmp(h, "none") == 0)
            r->hamel_mode = SIM_HAMEL_NONE;
        else if (strcmp(h, "initial") == 0)
            r->hamel_mode = SIM_HAMEL_INITIAL;
        else if (strcmp(h, "samples") == 0)
            r->hamel_mode = SIM_HAMEL_SAMPLES;
        else
            bad(problem, "hamel", "must be \"none\", \"initial\" or \"samples\"");
    }
    if (m->nlin != m->nc && !m->nl_reduced)
        r->hamel_mode = SIM_HAMEL_NONE;
    if (r->hamel_mode == SIM_HAMEL_SAMPLES && r->n_times > 0 &&
        (double)r->n_times * n * n * n * n > SIM_MAX_GAMMA_WORK)
        bad(problem, "hamel",
            "\"samples\" asks for %d sets of %d^3 Hamel coefficients, more than one request may "
            "compute; use fewer samples or POST /v1/hamel",
            r->n_times, n);
}

/* The result's size within lim->max_output_values. */
static void check_output_size(const struct engine_model *m, const sim_request *r, const engine_limits *lim,
                              int all_linear, json_t **problem)
{
    if (*problem || lim->max_output_values == 0)
        return;
    /* Every sample carries t, q, qdot, the speeds (linear constraints), the
     * multipliers (that formulation), the energy, the worst constraint residual and
     * each invariant: the result's size is samples x series numbers. */
    long series = 1 + 2L * m->n + (all_linear ? m->k : 0) + (r->formulation == SIM_MULTIPLIERS ? m->nc : 0) +
                  2 + r->n_inv + 2L * r->n_con;
    /* "hamel": "samples" adds each sample's coefficients (t, q, and j, r, l, value of each
     * one listed): 70,000 samples of an 8-speed model were 900 MB of JSON */
    if (r->hamel_mode == SIM_HAMEL_SAMPLES)
        series += (long)m->gamma_values;
    double values = (double)r->n_times * (double)series;
    if (values > (double)lim->max_output_values) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "%d samples x %ld series = %.0f output values; at most %zu values per simulation "
                 "(ask for fewer samples%s)",
                 r->n_times, series, values, lim->max_output_values,
                 r->hamel_mode == SIM_HAMEL_SAMPLES
                     ? ", or \"hamel\": \"initial\": each sample's coefficients count"
                     : "");
        *problem = hamel_problem_new(HAMEL_E_LIMIT, msg);
        hamel_problem_add(*problem, "output", -1, msg);
    }
}

/* position_tolerance and projection over their defaults. */
static void parse_position_options(const json_t *js, sim_request *r, json_t **problem)
{
    r->pos_tol = SIM_DEFAULT_POS_TOL;
    r->pos_project = 1;
    const json_t *pt = json_object_get(js, "position_tolerance"), *pp = json_object_get(js, "projection");
    if (pt && (!json_is_number(pt) || !(json_number_value(pt) > 0) || !isfinite(json_number_value(pt))))
        bad(problem, "position_tolerance", "must be a positive number (max |f(q, t)| before projection)");
    else if (pt)
        r->pos_tol = json_number_value(pt);
    if (pp && !json_is_boolean(pp))
        bad(problem, "projection", "must be true or false");
    else if (pp)
        r->pos_project = json_is_true(pp);
}

/* Given q': the constraints hold (within 1e-8 of its scale, hamel_residual_limits) and,
 * with linear constraints, the speeds from it (Psi must be regular). */
static void check_initial_qdot(const struct engine_model *m, hamel_ws *w, sim_request *r, const double *vals,
                               int all_linear, json_t **problem)
{
    int n = m->n;
    double *limit = calloc(m->nc + 1, sizeof *limit);
    if (!limit)
        return;
    hamel_residual_limits(w, r->t0, r->q0, r->qd0, 1e-8, limit);
    for (int j = 0; j < m->nc; j++)
        if (!(fabs(vals[1 + j]) <= limit[j])) {
            char path[96], msg[256];
            if (!*problem)
                *problem = hamel_problem_new(HAMEL_E_BAD_INITIAL, NULL);
            snprintf(path, sizeof path, "initial.qdot");
            snprintf(msg, sizeof msg, "violates constraint %s by %.3g (tolerance %.1g)", m->cons[j].name,
                     vals[1 + j], limit[j]);
            hamel_problem_add(*problem, path, -1, msg);
        }
    free(limit);
    if (!*problem && all_linear) {
        hamel_speeds(w, r->t0, r->q0, r->qd0, r->u0);
        hamel_ws_set_guess(w, r->qd0);
        double *check = calloc(n, sizeof *check);
        if (check && hamel_qdot(w, r->t0, r->q0, r->u0, check) < 0) {
            *problem = hamel_problem_new(
                HAMEL_E_BAD_INITIAL, "Psi (speeds and constraints) is singular at the initial configuration");
            hamel_problem_add(*problem, "initial.q", -1, "Psi is singular here");
        }
        free(check);
    }
}

/* The initial state must be consistent: q' from the speeds, or the speeds from q' after
 * checking the constraints. -1 when out of memory. */
static int initial_velocities(const struct engine_model *m, sim_request *r, int all_linear, json_t **problem)
{
    hamel_ws *w = hamel_ws_new(m, r->params);
    if (!w)
        return -1;
    double *vals = calloc(1 + m->nc, sizeof *vals);
    if (!vals) {
        hamel_ws_free(w);
        return -1;
    }
    if (!r->have_qd0) {
        if (m->nl_reduced) {
            /* the speeds must determine q': no solution or several are a 422 naming them */
            sim_nl_velocity(m, w, r->t0, r->q0, r->u0, r->qd0, "initial.speeds", problem);
        } else if (hamel_qdot(w, r->t0, r->q0, r->u0, r->qd0) < 0) {
            *problem = hamel_problem_new(
                HAMEL_E_BAD_INITIAL, "Psi (speeds and constraints) is singular at the initial configuration");
            hamel_problem_add(*problem, "initial.q", -1,
                              "Psi is singular here: the speeds do not determine q'");
        }
        r->have_qd0 = 1;
    } else {
        hamel_observe(w, r->t0, r->q0, r->qd0, vals);
        check_initial_qdot(m, w, r, vals, all_linear, problem);
    }
    free(vals);
    hamel_ws_free(w);
    return 0;
}

int sim_request_parse(const struct engine_model *m, const json_t *js, const engine_limits *lim,
                      sim_request *r, json_t **problem)
{
    memset(r, 0, sizeof *r);
    *problem = NULL;
    int n = m->n, k = m->k;
    if (!json_is_object(js)) {
        bad(problem, "", "the request must be a JSON object");
        return HAMEL_E_BAD_REQUEST;
    }
    check_request_keys(js, problem);
    r->params = calloc(m->np + 1, sizeof *r->params);
    r->q0 = calloc(n, sizeof *r->q0);
    r->u0 = calloc(k + 1, sizeof *r->u0);
    r->qd0 = calloc(n, sizeof *r->qd0);
    if (!r->params || !r->q0 || !r->u0 || !r->qd0)
        goto oom;
    sim_parse_parameters(m, json_object_get(js, "parameters"), r->params, problem);
    int all_linear = m->nlin == m->nc || m->nl_reduced; /* speeds and the hamel formulation */
    if (parse_initial(m, json_object_get(js, "initial"), r, all_linear, problem) < 0)
        goto out;

    /* time span and output */
    int have_t_end = get_number(js, "t_end", &r->t_end, "t_end", problem) == 1;
    if (have_t_end && !(r->t_end > r->t0))
        bad(problem, "t_end", "must be after initial.t (%g)", r->t0);
    if (!*problem && parse_output(json_object_get(js, "output"), r, lim, problem, have_t_end) < 0 &&
        !*problem)
        goto oom;

    parse_integrator(json_object_get(js, "integrator"), r, lim, problem);
    parse_formulation(m, json_object_get(js, "formulation"), r, all_linear, problem);
    parse_hamel_mode(m, json_object_get(js, "hamel"), r, problem);
    if (!*problem && parse_invariants(m, json_object_get(js, "invariants"), r, lim, problem) < 0 && !*problem)
        goto oom;
    if (!*problem && parse_events(m, json_object_get(js, "events"), r, lim, problem) < 0 && !*problem)
        goto oom;
    check_output_size(m, r, lim, all_linear, problem);
    if (*problem)
        goto out;

    /* Position-level constraints: the dependent coordinates of the initial q by
     * Newton's method from the values given (a guess), the others held. */
    parse_position_options(js, r, problem);
    if (*problem)
        goto out;
    if (m->npos > 0 && initial_position(m, r, problem) != 0)
        goto out;
    if (initial_velocities(m, r, all_linear, problem) < 0)
        goto oom;
out:
    if (*problem) {
        sim_request_free(r);
        return hamel_problem_code(*problem);
    }
    return 0;
oom:
    sim_request_free(r);
    if (!*problem)
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
    return HAMEL_E_INTERNAL;
}
