/* model.c — engine_model_compile: validates a model (API.md §1), parses its
 * expressions, builds Psi and Psi_t, derives the pieces of the equations of motion
 * symbolically and compiles them to tapes, decides what should be conserved, finds
 * the Hamel coefficients that are not identically zero, and names the model by the
 * SHA-256 of its canonical form. */
#include "model.h"
#include "trust.h"
#include "model_build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bodies.h"
#include "budget.h"
#include "equations.h"
#include "exprjson.h"
#include "geom.h"
#include "hamel.h"
#include "sha256.h"
#include "sparsity.h"
#include <time.h>
#include "native.h"
#include "linalg.h"

#define MODEL_NAME_MAX 128
#define MODEL_TEST_POINTS 3

/* ---- small helpers ---- */

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

static int valid_identifier(const char *s)
{
    if (!s || !*s || strlen(s) > 64)
        return 0;
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    for (const char *p = s + 1; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    return 1;
}

static int count_errors(json_t *problem) { return (int)json_array_size(json_object_get(problem, "errors")); }

static void add_error(json_t *problem, const char *path, int column, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#include <stdarg.h>
static void add_error(json_t *problem, const char *path, int column, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    hamel_problem_add(problem, path, column, buf);
}

int model_coord_index(const struct engine_model *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->coords[i], name) == 0)
            return i;
    return -1;
}

int model_speed_index(const struct engine_model *m, const char *name)
{
    for (int i = 0; i < m->k; i++)
        if (strcmp(m->speeds[i], name) == 0)
            return i;
    return -1;
}

static int cmp_str(const void *a, const void *b);

int model_param_index(const struct engine_model *m, const char *name)
{
    /* m->params is sorted by name (parse_model): a binary search, not a scan */
    char *const *hit = m->np ? bsearch(&name, m->params, m->np, sizeof *m->params, cmp_str) : NULL;
    return hit ? (int)(hit - m->params) : -1;
}

/* ---- freeing ---- */

static void model_free(struct engine_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n; i++)
        free(m->coords[i]);
    free(m->coords);
    for (int i = 0; i < m->k && m->speeds; i++)
        free(m->speeds[i]);
    free(m->speeds);
    free(m->speed_f);
    for (int i = 0; i < m->nc; i++)
        free(m->cons[i].name);
    free(m->cons);
    for (int i = 0; i < m->np; i++)
        free(m->params[i]);
    free(m->params);
    free(m->param_values);
    for (int i = 0; i < m->ndefs; i++) {
        free(m->def_names[i]);
        free(m->def_texts[i]);
    }
    free(m->def_names);
    free(m->def_texts);
    free(m->sym_q);
    free(m->sym_qd);
    free(m->sym_p);
    free(m->sym_u);
    free(m->Q);
    free(m->psi);
    free(m->psi_t);
    free(m->row_names);
    tape_free(m->tape_psi);
    tape_free(m->tape_dyn);
    tape_free(m->tape_obs);
    geom_free(m);
    tape_free(m->tape_mult);
    tape_free(m->tape_dpsi);
    free(m->dpsi_at);
    free(m->dpsi_pair_ptr);
    free(m->dpsi_pair);
    tape_free(m->tape_fast);
    native_release(m->native);
    tape_free(m->tape_pos);
    free(m->pos_con);
    json_decref(m->bodies_js);
    json_decref(m->units_js);
    json_decref(m->contacts_js);
    tape_free(m->tape_det);
    tape_free(m->tape_mass);
    free(m->u_slot);
    free(m->gamma_nz);
    hamel_sparse_free(m->sparse);
    free(m->gamma_t_nz);
    json_decref(m->summary);
    free(m->equations);
    equations_pending_free(m);
    free(m->red_kin);
    free(m->red_phi);
    for (int i = 0; i < 5; i++)
        free(m->forms[i]);
    pthread_mutex_destroy(&m->forms_lock);
    free(m->canonical);
    free(m->name);
    expr_ctx_free(m->ctx);
    free(m);
}

engine_model *engine_model_retain(engine_model *m)
{
    if (m)
        atomic_fetch_add(&m->refs, 1);
    return m;
}

void engine_model_release(engine_model *m)
{
    if (m && atomic_fetch_sub(&m->refs, 1) == 1)
        model_free(m);
}

const char *engine_model_id(const engine_model *m) { return m->id; }
const char *engine_model_canonical(const engine_model *m) { return m->canonical; }
size_t engine_model_bytes(const engine_model *m) { return m->bytes; }
json_t *engine_model_summary(const engine_model *m) { return json_deep_copy(m->summary); }

engine_model *engine_model_shell(const char *id, const char *canonical, json_t *summary, size_t bytes)
{
    struct engine_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    atomic_init(&m->refs, 1);
    pthread_mutex_init(&m->forms_lock, NULL);
    snprintf(m->id, sizeof m->id, "%s", id);
    m->canonical = strdup(canonical);
    m->summary = json_incref(summary);
    m->bytes = bytes;
    m->shell = 1;
    if (!m->canonical || !m->summary) {
        model_free(m);
        return NULL;
    }
    return m;
}

int engine_model_is_shell(const engine_model *m) { return m->shell; }

/* ---- parsing the JSON ---- */

struct src_expr {
    const char *text;
    char path[96];
};

/* Parses one expression field; on error adds it to the problem and returns NULL. */
static expr *parse_field(struct engine_model *m, const json_t *v, const char *path, int allow_velocity,
                         const engine_limits *lim, json_t *problem)
{
    char numbuf[64];
    const char *text = exprjson_source(v, numbuf, sizeof numbuf);
    if (!text) {
        add_error(problem, path, -1, "must be an expression string");
        return NULL;
    }
    budget_stage(expr_ctx_budget(m->ctx), "parsing", path);
    expr_parse_opts o = {allow_velocity, 1, lim->max_expr_chars, path};
    expr_error err;
    expr *e = expr_parse(m->ctx, text, &o, &err);
    if (!e)
        add_error(problem, path, err.column, "%s", err.message);
    return e;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Is `name` free for a new symbol (not reserved, not taken)? Adds an error if not. */
static int name_free(struct engine_model *m, const char *name, const char *path, json_t *problem)
{
    if (!valid_identifier(name)) {
        add_error(problem, path, -1, "'%s' is not an identifier (letters, digits, _; at most 64)", name);
        return 0;
    }
    if (expr_name_reserved(name)) {
        add_error(problem, path, -1, "'%s' is reserved (a function, t or pi)", name);
        return 0;
    }
    int taken = expr_sym_find(m->ctx, name);
    if (taken >= 0) {
        /* say what it is: parameters are declared first, so a parameter named like a
         * coordinate is reported at the coordinate */
        sym_class cls = expr_sym_get(m->ctx, taken)->cls;
        const char *as = cls == SYM_PARAM   ? " (a parameter)"
                         : cls == SYM_COORD ? " (a coordinate)"
                         : cls == SYM_DEF   ? " (a definition)"
                         : cls == SYM_SPEED ? " (a speed)"
                                            : "";
        add_error(problem, path, -1, "'%s' is already defined%s", name, as);
        return 0;
    }
    return 1;
}

/* Appends one generated constraint; returns it, or NULL when memory ran out. */
static model_constraint *append_constraint(struct engine_model *m, const char *name)
{
    model_constraint *nc = realloc(m->cons, (m->nc + 2) * sizeof *nc);
    if (!nc)
        return NULL;
    m->cons = nc;
    model_constraint *mc = &m->cons[m->nc++];
    memset(mc, 0, sizeof *mc);
    mc->row = -1;
    mc->pos_dep = -1;
    mc->generated = 1;
    mc->name = strdup(name);
    return mc->name ? mc : NULL;
}

/* A position-level constraint pos(q, t) = 0: checked free of velocities and of
 * constant value, and appended as its time derivative (a linear velocity constraint). */
static int add_position(struct engine_model *m, const char *name, expr *pos, const char *dep, int from_bodies,
                        const char *path, const char *dep_path, json_t *problem)
{
    expr_ctx *c = m->ctx;
    if (expr_depends_class(c, pos, SYM_VELOCITY)) {
        add_error(problem, path, -1,
                  "a position-level constraint f(q, t) = 0 must not contain velocities; give velocity "
                  "constraints in model.constraints");
        return 0;
    }
    expr *f = expr_dt(c, pos);
    if (expr_is_zero(c, f)) {
        add_error(problem, path, -1, "constraint %s does not depend on the coordinates", name);
        return 0;
    }
    int di = -1;
    if (dep) {
        di = model_coord_index(m, dep);
        if (di < 0) {
            add_error(problem, dep_path, -1, "'%s' is not a coordinate", dep);
            return 0;
        }
        if (!expr_depends(pos, m->sym_q[di]) || expr_is_zero(c, expr_diff(c, pos, m->sym_q[di]))) {
            add_error(problem, dep_path, -1,
                      "constraint %s does not depend on %s: it cannot be solved for it", name, dep);
            return 0;
        }
    }
    model_constraint *mc = append_constraint(m, name);
    if (!mc)
        return -1;
    mc->f = f;
    mc->pos = pos;
    mc->pos_dep = di;
    mc->from_bodies = from_bodies;
    return 0;
}

/* The constraints made by the bodies (rolling disks) and the model's
 * "position_constraints": [{"name", "expr", "dependent"?}] (or expression strings). */
static int add_generated(struct engine_model *m, const json_t *js, const bodies_result *br,
                         const engine_limits *lim, json_t *problem)
{
    for (int i = 0; i < br->n_vel; i++) {
        model_constraint *mc = append_constraint(m, br->vel[i].name);
        if (!mc)
            return -1;
        mc->f = br->vel[i].f;
        mc->from_bodies = 1;
    }
    for (int i = 0; i < br->n_pos; i++) {
        char dpath[128];
        snprintf(dpath, sizeof dpath, "%s.dependent", br->pos[i].path);
        if (add_position(m, br->pos[i].name, br->pos[i].f,
                         br->pos[i].dependent[0] ? br->pos[i].dependent : NULL, 1, br->pos[i].path, dpath,
                         problem) < 0)
            return -1;
    }
    const json_t *pc = json_object_get(js, "position_constraints");
    if (pc && !json_is_array(pc)) {
        add_error(problem, "model.position_constraints", -1,
                  "must be an array of {\"name\", \"expr\", \"dependent\"} with expr f(q, t) = 0");
        return 0;
    }
    for (size_t j = 0; pc && j < json_array_size(pc); j++) {
        const json_t *it = json_array_get(pc, j), *ex = it;
        char path[96], epath[112], name[80];
        snprintf(path, sizeof path, "model.position_constraints[%zu]", j);
        snprintf(name, sizeof name, "h%zu", j + 1);
        const char *dep = NULL;
        snprintf(epath, sizeof epath, "%s", path);
        if (json_is_object(it)) {
            const json_t *cn = json_object_get(it, "name"), *dj = json_object_get(it, "dependent");
            if (cn && (!json_is_string(cn) || !valid_identifier(json_string_value(cn)))) {
                add_error(problem, path, -1, "name must be an identifier");
                continue;
            }
            if (cn)
                snprintf(name, sizeof name, "%s", json_string_value(cn));
            if (dj && !json_is_string(dj)) {
                snprintf(epath, sizeof epath, "%s.dependent", path);
                add_error(problem, epath, -1, "must be the name of a coordinate");
                continue;
            }
            dep = dj ? json_string_value(dj) : NULL;
            ex = json_object_get(it, "expr");
            snprintf(epath, sizeof epath, "%s.expr", path);
        }
        if (!ex) {
            add_error(problem, epath, -1, "required: the constraint f(q, t) (= 0)");
            continue;
        }
        char dpath[112];
        snprintf(dpath, sizeof dpath, "%s.dependent", path);
        expr *pos = parse_field(m, ex, epath, 1, lim, problem);
        if (pos && add_position(m, name, pos, dep, 0, epath, dpath, problem) < 0)
            return -1;
    }
    return 0;
}

/* The index of the constraint named `name`, or -1. */
static int constraint_index(const struct engine_model *m, const char *name)
{
    for (int j = 0; name && j < m->nc; j++)
        if (m->cons[j].name && strcmp(m->cons[j].name, name) == 0)
            return j;
    return -1;
}

/* "contacts": [{"name", "normal"?, "tangential"?: [at most 2], "friction"}]: constraints
 * marked as a contact whose validity a run checks (engine/run/contact.h): the multiplier
 * of "normal" is the normal force, those of "tangential" the tangential force's
 * components. Names of constraints (model.constraints, position_constraints, or
 * generated: <disk>_contact ...); "normal" absent says the model has none. */
static void parse_contacts(struct engine_model *m, const json_t *js, json_t *problem)
{
    const json_t *cs = json_object_get(js, "contacts");
    char path[160];
    if (!cs)
        return;
    if (!json_is_array(cs) || json_array_size(cs) > 64) {
        add_error(problem, "model.contacts", -1,
                  "must be an array of at most 64 {\"name\", \"normal\", \"tangential\", \"friction\"}");
        return;
    }
    size_t i;
    const json_t *c;
    json_array_foreach(cs, i, c)
    {
        snprintf(path, sizeof path, "model.contacts[%zu]", i);
        const json_t *nm = json_object_get(c, "name"), *fr = json_object_get(c, "friction");
        const json_t *nr = json_object_get(c, "normal"), *tg = json_object_get(c, "tangential");
        if (!json_is_object(c)) {
            add_error(problem, path, -1,
                      "must be an object {\"name\", \"normal\", \"tangential\", \"friction\"}");
            continue;
        }
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)c, key, val)
        {
            if (strcmp(key, "name") && strcmp(key, "normal") && strcmp(key, "tangential") &&
                strcmp(key, "friction")) {
                snprintf(path, sizeof path, "model.contacts[%zu].%.80s", i, key);
                add_error(problem, path, -1, "unknown member (expected name, normal, tangential, friction)");
            }
        }
        snprintf(path, sizeof path, "model.contacts[%zu].name", i);
        if (!json_is_string(nm) || !valid_identifier(json_string_value(nm)) || json_string_length(nm) > 40)
            add_error(problem, path, -1, "required: an identifier of at most 40 characters");
        for (size_t k = 0; k < i && json_is_string(nm); k++)
            if (json_equal(json_object_get(json_array_get(cs, k), "name"), nm))
                add_error(problem, path, -1, "'%s' is the name of model.contacts[%zu] too",
                          json_string_value(nm), k);
        snprintf(path, sizeof path, "model.contacts[%zu].friction", i);
        if (!(json_is_number(fr) && json_number_value(fr) >= 0 && isfinite(json_number_value(fr))))
            add_error(problem, path, -1, "required: the coefficient of friction, a number >= 0");
        snprintf(path, sizeof path, "model.contacts[%zu].normal", i);
        if (nr && (!json_is_string(nr) || constraint_index(m, json_string_value(nr)) < 0))
            add_error(problem, path, -1,
                      "must name a constraint of the model (its multiplier is the normal force)");
        snprintf(path, sizeof path, "model.contacts[%zu].tangential", i);
        if (tg && (!json_is_array(tg) || json_array_size(tg) > 2))
            add_error(problem, path, -1, "must be an array of at most 2 constraint names");
        size_t k;
        const json_t *t;
        json_array_foreach(tg, k, t)
        {
            snprintf(path, sizeof path, "model.contacts[%zu].tangential[%zu]", i, k);
            if (!json_is_string(t) || constraint_index(m, json_string_value(t)) < 0)
                add_error(problem, path, -1, "must name a constraint of the model");
            else if (json_equal(t, nr))
                add_error(problem, path, -1,
                          "'%s' is the contact's normal: a tangential constraint must be another one",
                          json_string_value(t));
            else if (k > 0 && json_equal(t, json_array_get(tg, 0)))
                add_error(problem, path, -1,
                          "'%s' is tangential[0] too: each tangential constraint counts once in |F_t|",
                          json_string_value(t));
        }
    }
    if (!count_errors(problem))
        m->contacts_js = json_deep_copy(cs);
}

/* "units": {symbol: unit}, a label for display only (nothing is converted): each key a
 * parameter, a coordinate, a speed named in "speeds", or "t"; each value a non-empty
 * string of at most UNIT_MAX bytes. Kept in the canonical form and the summary. */
#define UNIT_MAX 32
static void parse_units(struct engine_model *m, const json_t *js, json_t *problem)
{
    const json_t *units = json_object_get(js, "units");
    if (!units)
        return;
    if (!json_is_object(units)) {
        add_error(problem, "model.units", -1, "must be an object of symbol: unit (such as \"kg\")");
        return;
    }
    const json_t *speeds = json_object_get(js, "speeds");
    const char *key;
    const json_t *val;
    int bad = 0;
    json_object_foreach((json_t *)units, key, val)
    {
        char path[160];
        snprintf(path, sizeof path, "model.units.%.100s", key);
        int known = strcmp(key, "t") == 0;
        for (int i = 0; !known && i < m->np; i++)
            known = strcmp(m->params[i], key) == 0;
        for (int i = 0; !known && i < m->n; i++)
            known = strcmp(m->coords[i], key) == 0;
        for (size_t i = 0; !known && json_is_array(speeds) && i < json_array_size(speeds); i++) {
            const json_t *sn = json_object_get(json_array_get(speeds, i), "name");
            known = json_is_string(sn) && strcmp(json_string_value(sn), key) == 0;
        }
        if (!known) {
            add_error(problem, path, -1,
                      "unknown symbol: units are for parameters, coordinates, speeds and t");
            bad = 1;
        } else if (!json_is_string(val) || json_string_length(val) == 0 ||
                   json_string_length(val) > UNIT_MAX) {
            add_error(problem, path, -1, "must be a non-empty string of at most %d bytes", UNIT_MAX);
            bad = 1;
        }
    }
    if (!bad)
        m->units_js = json_deep_copy(units);
}

/* model.coordinates: their names (symbols come later). -1 when missing, too many or
 * out of memory. */
static int parse_coordinates(struct engine_model *m, const json_t *js, const engine_limits *lim,
                             json_t *problem)
{
    char path[96];
    const json_t *coords = json_object_get(js, "coordinates");
    if (!json_is_array(coords) || json_array_size(coords) == 0) {
        add_error(problem, "model.coordinates", -1, "required: a non-empty array of coordinate names");
        return -1;
    }
    int max_n =
        lim->max_coordinates < ENGINE_COORDINATES_CEILING ? lim->max_coordinates : ENGINE_COORDINATES_CEILING;
    if ((int)json_array_size(coords) > max_n) {
        add_error(problem, "model.coordinates", -1, "at most %d coordinates", max_n);
        return -1;
    }
    m->n = (int)json_array_size(coords);
    int n = m->n;
    m->coords = calloc(n, sizeof *m->coords);
    m->sym_q = calloc(n, sizeof *m->sym_q);
    m->sym_qd = calloc(n, sizeof *m->sym_qd);
    m->Q = calloc(n, sizeof *m->Q);
    if (!m->coords || !m->sym_q || !m->sym_qd || !m->Q)
        return -1;
    for (int i = 0; i < n; i++) {
        const json_t *c = json_array_get(coords, i);
        snprintf(path, sizeof path, "model.coordinates[%d]", i);
        if (!json_is_string(c)) {
            add_error(problem, path, -1, "must be a string");
            m->coords[i] = strdup("?");
            continue;
        }
        m->coords[i] = strdup(json_string_value(c));
    }
    return 0;
}

/* model.parameters, sorted by name so the canonical form does not depend on key order,
 * and their values. -1 when too many or out of memory. */
static int parse_parameters(struct engine_model *m, const json_t *js, const engine_limits *lim,
                            json_t *problem)
{
    char path[96];
    const json_t *params = json_object_get(js, "parameters");
    if (params && !json_is_object(params))
        add_error(problem, "model.parameters", -1, "must be an object of name: number");
    m->np = params && json_is_object(params) ? (int)json_object_size(params) : 0;
    if (lim->max_parameters > 0 && m->np > lim->max_parameters) {
        budget_exceed(expr_ctx_budget(m->ctx), "model.parameters", "max_parameters", lim->max_parameters,
                      m->np);
        m->np = 0;
        return -1;
    }
    m->params = calloc(m->np + 1, sizeof *m->params);
    m->param_values = calloc(m->np + 1, sizeof *m->param_values);
    m->sym_p = calloc(m->np + 1, sizeof *m->sym_p);
    if (!m->params || !m->param_values || !m->sym_p)
        return -1;
    int i = 0;
    const char *key;
    const json_t *val;
    if (m->np)
        json_object_foreach((json_t *)params, key, val) { m->params[i++] = strdup(key); }
    qsort(m->params, m->np, sizeof *m->params, cmp_str);
    for (i = 0; i < m->np; i++) {
        const json_t *pv = json_object_get(params, m->params[i]);
        snprintf(path, sizeof path, "model.parameters.%s", m->params[i]);
        if (!json_is_number(pv) || !isfinite(json_number_value(pv)))
            add_error(problem, path, -1, "must be a finite number");
        else
            m->param_values[i] = json_number_value(pv);
    }
    return 0;
}

/* The symbols of the parameters, t, the coordinates and their velocities (and the
 * units of any of them). -1 when the budget stops it or a name is taken. */
static int declare_symbols(struct engine_model *m, const json_t *js, json_t *problem)
{
    char path[96];
    for (int i = 0; i < m->np; i++) {
        if (budget_tick(expr_ctx_budget(m->ctx)))
            return -1;
        snprintf(path, sizeof path, "model.parameters.%s", m->params[i]);
        if (name_free(m, m->params[i], path, problem))
            m->sym_p[i] = expr_sym_add(m->ctx, m->params[i], SYM_PARAM, i);
    }
    m->sym_t = expr_sym_add(m->ctx, "t", SYM_TIME, 0);
    parse_units(m, js, problem);
    for (int i = 0; i < m->n; i++) {
        snprintf(path, sizeof path, "model.coordinates[%d]", i);
        if (!name_free(m, m->coords[i], path, problem))
            continue;
        m->sym_q[i] = expr_sym_add(m->ctx, m->coords[i], SYM_COORD, i);
        char vname[80];
        snprintf(vname, sizeof vname, "%s'", m->coords[i]);
        m->sym_qd[i] = expr_sym_add(m->ctx, vname, SYM_VELOCITY, i);
    }
    return count_errors(problem) ? -1 : 0;
}

/* Definition i (d at path): parsed, declared and kept with its print. */
static void parse_definition(struct engine_model *m, const json_t *d, const char *path,
                             const engine_limits *lim, json_t *problem)
{
    const json_t *dn = json_object_get(d, "name");
    if (!json_is_object(d) || !json_is_string(dn)) {
        add_error(problem, path, -1, "must be an object {\"name\", \"expr\"}");
        return;
    }
    char epath[112];
    snprintf(epath, sizeof epath, "%s.expr", path);
    expr *e = parse_field(m, json_object_get(d, "expr"), epath, 1, lim, problem);
    char npath[112];
    snprintf(npath, sizeof npath, "%s.name", path);
    if (!e || !name_free(m, json_string_value(dn), npath, problem))
        return;
    expr_def_add(m->ctx, json_string_value(dn), e);
    char **dnames = realloc(m->def_names, (m->ndefs + 1) * sizeof *dnames);
    if (dnames)
        m->def_names = dnames;
    char **dtexts = realloc(m->def_texts, (m->ndefs + 1) * sizeof *dtexts);
    if (dtexts)
        m->def_texts = dtexts;
    if (dnames && dtexts) {
        budget_stage(expr_ctx_budget(m->ctx), "printing", epath);
        m->def_names[m->ndefs] = strdup(json_string_value(dn));
        m->def_texts[m->ndefs] = expr_print(m->ctx, e);
        m->ndefs++;
    }
}

/* When error e of definitions[i] is an unknown identifier that a later definition
 * defines, says so in its reason: "unknown identifier 'b'" alone, with b defined in the
 * model, reads as a bug. */
static void later_definition_hint(const json_t *defs, size_t i, json_t *problem, size_t k)
{
    json_t *e = json_array_get(json_object_get(problem, "errors"), k);
    const char *reason = json_string_value(json_object_get(e, "reason"));
    static const char prefix[] = "unknown identifier '";
    if (!reason || strncmp(reason, prefix, sizeof prefix - 1) != 0)
        return;
    const char *name = reason + sizeof prefix - 1;
    size_t len = strcspn(name, "'");
    for (size_t j = i; j < json_array_size(defs); j++) {
        const char *dn = json_string_value(json_object_get(json_array_get(defs, j), "name"));
        if (dn && strlen(dn) == len && !strncmp(dn, name, len)) {
            char buf[512];
            if (j == i)
                snprintf(buf, sizeof buf, "%s: a definition cannot use itself", reason);
            else
                snprintf(buf, sizeof buf,
                         "%s: it is definitions[%zu], and a definition may use only those before it", reason,
                         j);
            json_object_set_new(e, "reason", json_string(buf));
            if (k == 0) { /* the detail was written from it */
                const json_t *col = json_object_get(e, "column");
                char detail[640];
                snprintf(detail, sizeof detail, "%s: column %d: %s",
                         json_string_value(json_object_get(e, "path")), (int)json_integer_value(col), buf);
                if (col)
                    json_object_set_new(problem, "detail", json_string(detail));
            }
            return;
        }
    }
}

/* model.definitions, each may use the earlier ones. -1 when there are too many. */
static int parse_definitions(struct engine_model *m, const json_t *js, const engine_limits *lim,
                             json_t *problem)
{
    const json_t *defs = json_object_get(js, "definitions");
    if (defs && !json_is_array(defs))
        add_error(problem, "model.definitions", -1, "must be an array of {\"name\", \"expr\"}");
    if (json_is_array(defs) && lim->max_definitions > 0 &&
        (int)json_array_size(defs) > lim->max_definitions) {
        budget_exceed(expr_ctx_budget(m->ctx), "model.definitions", "max_definitions", lim->max_definitions,
                      (double)json_array_size(defs));
        return -1;
    }
    for (size_t i = 0; defs && json_is_array(defs) && i < json_array_size(defs); i++) {
        char path[96];
        snprintf(path, sizeof path, "model.definitions[%zu]", i);
        size_t before = json_array_size(json_object_get(problem, "errors"));
        parse_definition(m, json_array_get(defs, i), path, lim, problem);
        if (json_array_size(json_object_get(problem, "errors")) > before)
            later_definition_hint(defs, i, problem, before);
    }
    return 0;
}

/* T and V: the hand-written energies plus those of the bodies (br, built here). */
static void parse_energies(struct engine_model *m, const json_t *js, const engine_limits *lim,
                           json_t *problem, bodies_result *br)
{
    if (bodies_build(m->ctx, js, lim->max_expr_chars, m->sym_p, m->param_values, m->np, problem, br) < 0 &&
        !count_errors(problem))
        add_error(problem, "model", -1, "out of memory while building the bodies");
    const json_t *v = json_object_get(js, "kinetic_energy");
    if (!v && !br->present)
        add_error(problem, "model.kinetic_energy", -1,
                  "required: T(q, q', t) of the unconstrained system (or bodies and particles)");
    else
        m->T_hand = v ? parse_field(m, v, "model.kinetic_energy", 1, lim, problem) : expr_num(m->ctx, 0.0);
    v = json_object_get(js, "potential_energy");
    m->V_hand = v ? parse_field(m, v, "model.potential_energy", 0, lim, problem) : expr_num(m->ctx, 0.0);
    if (m->T_hand)
        m->T = expr_add(m->ctx, m->T_hand, br->T);
    if (m->V_hand)
        m->V = expr_add(m->ctx, m->V_hand, br->V);
    if (br->present)
        m->bodies_js = json_incref(br->canonical);
}

/* model.generalized_forces: Q by coordinate, zero where not given. */
static void parse_forces(struct engine_model *m, const json_t *js, const engine_limits *lim, json_t *problem)
{
    for (int i = 0; i < m->n; i++)
        m->Q[i] = expr_num(m->ctx, 0.0);
    const json_t *forces = json_object_get(js, "generalized_forces");
    if (forces && !json_is_object(forces))
        add_error(problem, "model.generalized_forces", -1, "must be an object of coordinate: expression");
    if (!forces || !json_is_object(forces))
        return;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)forces, key, val)
    {
        char path[96];
        snprintf(path, sizeof path, "model.generalized_forces.%s", key);
        int i = model_coord_index(m, key);
        if (i < 0) {
            add_error(problem, path, -1, "'%s' is not a coordinate", key);
            continue;
        }
        expr *e = parse_field(m, val, path, 1, lim, problem);
        if (e)
            m->Q[i] = e;
    }
}

/* model.constraints: strings or {name, expr}. -1 when out of memory. */
static int parse_constraints(struct engine_model *m, const json_t *js, const engine_limits *lim,
                             json_t *problem)
{
    char path[96];
    const json_t *cons = json_object_get(js, "constraints");
    if (cons && !json_is_array(cons))
        add_error(problem, "model.constraints", -1, "must be an array");
    m->nc = cons && json_is_array(cons) ? (int)json_array_size(cons) : 0;
    m->cons = calloc(m->nc + 1, sizeof *m->cons);
    if (!m->cons)
        return -1;
    for (int j = 0; j < m->nc; j++) {
        const json_t *c = json_array_get(cons, j);
        model_constraint *mc = &m->cons[j];
        mc->row = -1;
        char name[80];
        snprintf(name, sizeof name, "c%d", j + 1);
        const json_t *ex = c;
        snprintf(path, sizeof path, "model.constraints[%d]", j);
        if (json_is_object(c)) {
            const json_t *cn = json_object_get(c, "name");
            if (cn && !json_is_string(cn))
                add_error(problem, path, -1, "name must be a string");
            else if (cn && !valid_identifier(json_string_value(cn)))
                add_error(problem, path, -1, "name '%s' is not an identifier", json_string_value(cn));
            else if (cn)
                snprintf(name, sizeof name, "%s", json_string_value(cn));
            ex = json_object_get(c, "expr");
            snprintf(path, sizeof path, "model.constraints[%d].expr", j);
        }
        mc->name = strdup(name);
        if (!ex) {
            add_error(problem, path, -1, "required: the constraint expression");
            continue;
        }
        mc->f = parse_field(m, ex, path, 1, lim, problem);
    }
    return 0;
}

static int parse_model(struct engine_model *m, const json_t *js, const engine_limits *lim, json_t *problem,
                       const json_t **speeds_js)
{
    const json_t *v = json_object_get(js, "name");
    if (v && !json_is_string(v))
        add_error(problem, "model.name", -1, "must be a string");
    m->name = xstrdup(v && json_is_string(v) ? json_string_value(v) : "model");
    if (strlen(m->name) > MODEL_NAME_MAX) {
        /* cut before a whole character: a cut inside one is not UTF-8, and jansson then
         * drops the name from the summary and the canonical form (two names, one id) */
        size_t cut = MODEL_NAME_MAX;
        while (cut > 0 && ((unsigned char)m->name[cut] & 0xC0) == 0x80)
            cut--;
        m->name[cut] = '\0';
    }
    if (parse_coordinates(m, js, lim, problem) < 0 || parse_parameters(m, js, lim, problem) < 0 ||
        declare_symbols(m, js, problem) < 0 || parse_definitions(m, js, lim, problem) < 0)
        return -1;
    bodies_result br;
    parse_energies(m, js, lim, problem, &br);
    parse_forces(m, js, lim, problem);
    if (parse_constraints(m, js, lim, problem) < 0) {
        bodies_result_free(&br);
        return -1;
    }
    if (add_generated(m, js, &br, lim, problem) < 0)
        add_error(problem, "model", -1, "out of memory while adding the generated constraints");
    parse_contacts(m, js, problem);
    geom_take(m, &br); /* masses, radii, inertias a request's parameters may change */
    bodies_result_free(&br);

    *speeds_js = json_object_get(js, "speeds");
    if (*speeds_js && !json_is_array(*speeds_js)) {
        add_error(problem, "model.speeds", -1, "must be an array of {\"name\", \"expr\"}");
        *speeds_js = NULL;
    }
    if (expr_ctx_overflow(m->ctx))
        add_error(problem, "model", -1, "the model's expressions exceed the node limit (%zu)",
                  lim->max_nodes);
    return count_errors(problem) ? -1 : 0;
}

/* ---- linearity and Psi ---- */

/* Fills grad[i] = df/dq_i' and returns 1 if f is linear in the velocities. When it is
 * not, *bad_i, *bad_l name a pair with a nonzero second derivative. */
static int velocity_gradient(struct engine_model *m, expr *f, expr **grad, int *bad_i, int *bad_l)
{
    int linear = 1;
    for (int i = 0; i < m->n; i++)
        grad[i] = expr_diff(m->ctx, f, m->sym_qd[i]);
    for (int i = 0; i < m->n && linear; i++)
        for (int l = i; l < m->n && linear; l++)
            if (expr_depends(grad[i], m->sym_qd[l]) &&
                !expr_is_zero(m->ctx, expr_diff(m->ctx, grad[i], m->sym_qd[l]))) {
                linear = 0;
                *bad_i = i;
                *bad_l = l;
            }
    return linear;
}

/* The velocity-free part of f: f with every q' set to 0. */
static expr *velocity_free(struct engine_model *m, expr *f)
{
    int ns = expr_sym_count(m->ctx);
    expr **sub = calloc(ns, sizeof *sub);
    if (!sub)
        return f;
    for (int i = 0; i < m->n; i++)
        sub[m->sym_qd[i]] = expr_num(m->ctx, 0.0);
    expr *r = expr_subst(m->ctx, f, sub, ns);
    free(sub);
    return r;
}

/* Pseudo-random test configurations: q and t in [0.35, 1.35], parameters at their
 * values. */
unsigned char model_gamma_mask(const struct engine_model *m, const double *params)
{
    for (int i = 0; i < m->np; i++)
        if (params[i] != m->param_values[i])
            return GAMMA_NZ_MODEL | GAMMA_NZ_PARAMS;
    return GAMMA_NZ_MODEL;
}

void model_test_point(const struct engine_model *m, int k, double *in)
{
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(k + 7);
    for (int i = 0; i < m->n_in; i++) {
        x ^= x >> 33;
        x *= 0xFF51AFD7ED558CCDull;
        x ^= x >> 33;
        in[i] = 0.35 + (double)(x >> 11) / 9007199254740992.0;
    }
    for (int i = 0; i < m->np; i++)
        in[i] = m->param_values[i];
}

tape *model_tape(const struct engine_model *m, const expr_ctx *c, expr **roots, int n_roots)
{
    int ns = expr_sym_count(c);
    int *slot = malloc((ns + 1) * sizeof *slot);
    if (!slot)
        return NULL;
    for (int s = 0; s < ns; s++) {
        const expr_symbol *sym = expr_sym_get(c, s);
        switch (sym->cls) {
        case SYM_PARAM: slot[s] = sym->index; break;
        case SYM_TIME: slot[s] = model_input_t(m); break;
        case SYM_COORD: slot[s] = model_input_q(m) + sym->index; break;
        case SYM_VELOCITY: slot[s] = model_input_qd(m) + sym->index; break;
        case SYM_SPEED: slot[s] = model_input_qd(m) + sym->index; break;
        default: slot[s] = -1; break;
        }
    }
    tape *t = tape_build(c, roots, n_roots, slot, m->n_in);
    free(slot);
    return t;
}

static tape *build_tape(struct engine_model *m, expr **roots, int n_roots)
{
    tape *t = model_tape(m, m->ctx, roots, n_roots);
    if (t && t->n_ins > m->work_len)
        m->work_len = t->n_ins;
    return t;
}

expr_ctx *model_fresh_ctx(const struct engine_model *m)
{
    expr_ctx *c = expr_ctx_new(engine_default_limits.max_nodes);
    if (!c)
        return NULL;
    for (int i = 0; i < m->np; i++)
        expr_sym_add(c, m->params[i], SYM_PARAM, i);
    expr_sym_add(c, "t", SYM_TIME, 0);
    for (int i = 0; i < m->n; i++) {
        char vname[80];
        expr_sym_add(c, m->coords[i], SYM_COORD, i);
        snprintf(vname, sizeof vname, "%s'", m->coords[i]);
        expr_sym_add(c, vname, SYM_VELOCITY, i);
    }
    expr_parse_opts o = {1, 1, 0, "definition"};
    for (int d = 0; d < m->ndefs; d++) {
        expr_error err;
        expr *e = expr_parse(c, m->def_texts[d], &o, &err);
        if (!e) {
            expr_ctx_free(c);
            return NULL;
        }
        expr_def_add(c, m->def_names[d], e);
    }
    return c;
}

/* Chooses default speeds: the constraint rows decide which velocities are dependent,
 * taken from the last coordinate backwards (the usual convention: x, y of a contact
 * point last); the rest are the independent speeds u_r = q_r'. */
static int choose_speeds(struct engine_model *m, expr **cgrad, int *independent)
{
    int n = m->n, r = m->nlin;
    double *a = calloc((size_t)r * n + 1, sizeof *a), *in = calloc(m->n_in, sizeof *in);
    double *work = NULL;
    int *dep = calloc(n, sizeof *dep);
    int ok = -1;
    if (!a || !in || !dep)
        goto done;
    tape *t = build_tape(m, cgrad, r * n);
    if (!t)
        goto done;
    work = malloc(t->n_ins * sizeof *work);
    model_test_point(m, 0, in);
    if (work)
        tape_eval(t, in, work, a);
    tape_free(t);
    /* Each constraint's row scaled to a largest |entry| of 1 first: a constraint times any
     * factor is the same constraint, and the squares below overflowed at 1e200
     * (1e400: every column "dependent") and underflowed at 1e-200. */
    for (int i = 0; i < r; i++) {
        double mx = 0.0;
        for (int c = 0; c < n; c++)
            mx = fmax(mx, fabs(a[i * n + c]));
        for (int c = 0; c < n && mx > 0.0 && isfinite(mx); c++)
            a[i * n + c] /= mx;
    }
    /* Greedy column selection by Gram–Schmidt on the columns of a (r rows). */
    double *basis = calloc((size_t)r * r + 1, sizeof *basis), *v = calloc((size_t)r + 1, sizeof *v);
    int nb = 0;
    for (int c = n - 1; c >= 0 && nb < r && basis && v; c--) {
        double norm0 = 0;
        for (int i = 0; i < r; i++) {
            v[i] = a[i * n + c];
            norm0 += v[i] * v[i];
        }
        for (int b = 0; b < nb; b++) {
            double d = 0;
            for (int i = 0; i < r; i++)
                d += basis[b * r + i] * v[i];
            for (int i = 0; i < r; i++)
                v[i] -= d * basis[b * r + i];
        }
        double norm = 0;
        for (int i = 0; i < r; i++)
            norm += v[i] * v[i];
        if (norm > 1e-16 * (norm0 > 0 ? norm0 : 1) && norm > 0) {
            norm = sqrt(norm);
            for (int i = 0; i < r; i++)
                basis[nb * r + i] = v[i] / norm;
            nb++;
            dep[c] = 1;
        }
    }
    free(basis);
    free(v);
    if (nb == r) {
        int j = 0;
        for (int c = 0; c < n; c++)
            if (!dep[c])
                independent[j++] = c;
        ok = 0;
    }
done:
    free(a);
    free(in);
    free(work);
    free(dep);
    return ok;
}

static int setup_speeds(struct engine_model *m, const json_t *speeds_js, const engine_limits *lim,
                        json_t *problem, expr **cgrad)
{
    char path[96];
    m->speeds = calloc(m->k + 1, sizeof *m->speeds);
    m->speed_f = calloc(m->k + 1, sizeof *m->speed_f);
    m->sym_u = calloc(m->k + 1, sizeof *m->sym_u);
    if (!m->speeds || !m->speed_f || !m->sym_u)
        return -1;
    if (!speeds_js) {
        int *ind = calloc(m->n, sizeof *ind);
        if (!ind)
            return -1;
        if (choose_speeds(m, cgrad, ind) < 0) {
            free(ind);
            add_error(problem, "model.constraints", -1,
                      "the linear constraints are dependent: no %d velocities can be solved for", m->nlin);
            return -1;
        }
        for (int r = 0; r < m->k; r++) {
            char name[80];
            snprintf(name, sizeof name, "%s'", m->coords[ind[r]]);
            m->speeds[r] = strdup(name);
            m->speed_f[r] = expr_sym(m->ctx, m->sym_qd[ind[r]]);
            m->sym_u[r] = m->sym_qd[ind[r]];
        }
        m->default_speeds = 1;
        free(ind);
        return 0;
    }
    int count = (int)json_array_size(speeds_js);
    if (count != m->k) {
        if (m->nlin != m->nc)
            add_error(problem, "model.speeds", -1,
                      "expected n - m = %d - %d = %d speeds (m counting every constraint: the reduced "
                      "nonlinear form), or %d - %d = %d (the linear constraints only: multipliers), got %d",
                      m->n, m->nc, m->n - m->nc, m->n, m->nlin, m->k, count);
        else
            add_error(problem, "model.speeds", -1,
                      "expected n - m = %d - %d = %d speeds (one per degree of freedom), got %d", m->n,
                      m->nlin, m->k, count);
        return -1;
    }
    for (int r = 0; r < m->k; r++) {
        const json_t *s = json_array_get(speeds_js, r);
        snprintf(path, sizeof path, "model.speeds[%d]", r);
        char name[80];
        snprintf(name, sizeof name, "u%d", r + 1);
        const json_t *ex = s;
        if (json_is_object(s)) {
            const json_t *sn = json_object_get(s, "name");
            if (sn && json_is_string(sn))
                snprintf(name, sizeof name, "%s", json_string_value(sn));
            else if (sn)
                add_error(problem, path, -1, "name must be a string");
            ex = json_object_get(s, "expr");
            snprintf(path, sizeof path, "model.speeds[%d].expr", r);
        }
        m->speeds[r] = strdup(name);
        char npath[112];
        snprintf(npath, sizeof npath, "model.speeds[%d].name", r);
        if (name_free(m, name, npath, problem))
            m->sym_u[r] = expr_sym_add(m->ctx, name, SYM_SPEED, r);
        if (!ex) {
            add_error(problem, path, -1, "required: the speed expression");
            continue;
        }
        m->speed_f[r] = parse_field(m, ex, path, 1, lim, problem);
    }
    return count_errors(problem) ? -1 : 0;
}

/* ---- energy ---- */

static int all_zero(struct engine_model *m, expr **e, int count)
{
    for (int i = 0; i < count; i++)
        if (!expr_is_zero(m->ctx, e[i]))
            return 0;
    return 1;
}

static expr *energy_expr(struct engine_model *m, expr **p)
{
    /* p.q' - 2T == 0 iff T is a homogeneous quadratic form in q' (Euler). */
    expr_ctx *c = m->ctx;
    int n = m->n;
    expr **terms = calloc(n + 1, sizeof *terms);
    if (!terms)
        return expr_add(c, m->T, m->V);
    for (int i = 0; i < n; i++)
        terms[i] = expr_mul(c, p[i], expr_sym(c, m->sym_qd[i]));
    expr *pq = expr_sum(c, terms, n);
    free(terms);
    m->energy_is_jacobi = !expr_is_zero(c, expr_sub(c, pq, expr_mul(c, expr_num(c, 2.0), m->T)));
    if (m->energy_is_jacobi)
        return expr_add(c, expr_sub(c, pq, m->T), m->V);
    return expr_add(c, m->T, m->V);
}

static void decide_energy(struct engine_model *m)
{
    expr_ctx *c = m->ctx;
    char *why = m->energy_reason;
    size_t len = sizeof m->energy_reason;
    int ok = 1;
    why[0] = '\0';
    const char *sep = "";
#define WHY(...)                                                                                             \
    do {                                                                                                     \
        size_t used = strlen(why);                                                                           \
        snprintf(why + used, len - used, "%s", sep);                                                         \
        used = strlen(why);                                                                                  \
        snprintf(why + used, len - used, __VA_ARGS__);                                                       \
        sep = "; ";                                                                                          \
        ok = 0;                                                                                              \
    } while (0)
    for (int j = 0; j < m->nc; j++)
        if (m->cons[j].rheonomic)
            WHY("constraint %s is rheonomic (%s)", m->cons[j].name,
                expr_depends(m->cons[j].f, m->sym_t)
                    ? "it depends on t"
                    : "it has a term free of velocities: the constraint moves");
    if (!expr_is_zero(c, expr_diff(c, m->T, m->sym_t)))
        WHY("T depends explicitly on t");
    if (!expr_is_zero(c, expr_diff(c, m->V, m->sym_t)))
        WHY("V depends explicitly on t");
    /* Forces that do no work (gyroscopic: Q = B q' with B skew, a magnetic field's
     * Lorentz force) keep the energy: their power Q.q' is identically zero. */
    int powerless = 0;
    if (!all_zero(m, m->Q, m->n)) {
        expr **terms = calloc(m->n + 1, sizeof *terms);
        if (terms) {
            for (int i = 0; i < m->n; i++)
                terms[i] = expr_mul(c, m->Q[i], expr_sym(c, m->sym_qd[i]));
            powerless = expr_is_zero(c, expr_sum(c, terms, m->n));
            free(terms);
        }
        if (!powerless)
            WHY("non-potential generalized forces act");
    }
    for (int j = 0; j < m->nc; j++) {
        if (m->cons[j].linear)
            continue;
        /* A nonlinear constraint keeps the energy if the actual velocity is a virtual
         * displacement (Chetaev): sum q_i' df/dq_i' must vanish where f does, as it
         * does for f homogeneous in q' (Euler: = d f). */
        expr **terms = calloc(m->n + 1, sizeof *terms);
        if (!terms)
            continue;
        for (int i = 0; i < m->n; i++)
            terms[i] = expr_mul(c, expr_diff(c, m->cons[j].f, m->sym_qd[i]), expr_sym(c, m->sym_qd[i]));
        expr *euler = expr_sum(c, terms, m->n);
        free(terms);
        int homogeneous = 0;
        for (int d = 1; d <= 3 && !homogeneous; d++)
            homogeneous = expr_is_zero(c, expr_sub(c, euler, expr_mul(c, expr_num(c, d), m->cons[j].f)));
        if (!homogeneous)
            WHY("nonlinear constraint %s is not homogeneous in the velocities", m->cons[j].name);
    }
#undef WHY
    m->energy_conserved = ok;
    if (ok)
        snprintf(why, len,
                 "scleronomic constraints, T and V independent of t, %s: %s is "
                 "a first integral",
                 powerless ? "the generalized forces do no work (Q.q' = 0 identically)"
                           : "no non-potential forces",
                 m->energy_is_jacobi ? "the Jacobi integral p.q' - T + V" : "E = T + V");
}

/* ---- canonical form and id ---- */

static int make_canonical(struct engine_model *m)
{
    expr_ctx *c = m->ctx;
    json_t *js = json_object();
    json_object_set_new(js, "name", json_string(m->name));
    json_t *coords = json_array();
    for (int i = 0; i < m->n; i++)
        json_array_append_new(coords, json_string(m->coords[i]));
    json_object_set_new(js, "coordinates", coords);
    json_t *params = json_object();
    for (int i = 0; i < m->np; i++)
        json_object_set_new(params, m->params[i], json_real(m->param_values[i]));
    json_object_set_new(js, "parameters", params);
    budget *bg = expr_ctx_budget(c);
    budget_stage(bg, "printing", "model.kinetic_energy");
    json_object_set_new(js, "kinetic_energy", exprjson_text(c, m->T_hand));
    budget_stage(bg, "printing", "model.potential_energy");
    json_object_set_new(js, "potential_energy", exprjson_text(c, m->V_hand));
    budget_stage(bg, "printing", "model");
    if (m->bodies_js)
        json_object_update(js, m->bodies_js);
    if (m->units_js)
        json_object_set(js, "units", m->units_js);
    if (m->contacts_js)
        json_object_set(js, "contacts", m->contacts_js);
    json_t *forces = json_object();
    for (int i = 0; i < m->n; i++)
        if (!expr_is_num(m->Q[i], 0.0))
            json_object_set_new(forces, m->coords[i], exprjson_text(c, m->Q[i]));
    json_object_set_new(js, "generalized_forces", forces);
    json_t *cons = json_array(), *pcons = json_array();
    for (int j = 0; j < m->nc; j++) {
        const model_constraint *mc = &m->cons[j];
        if (!mc->generated)
            json_array_append_new(cons,
                                  json_pack("{s:s, s:o}", "name", mc->name, "expr", exprjson_text(c, mc->f)));
        else if (mc->pos && !mc->from_bodies) {
            json_t *pc = json_pack("{s:s, s:o}", "name", mc->name, "expr", exprjson_text(c, mc->pos));
            if (mc->pos_dep >= 0)
                json_object_set_new(pc, "dependent", json_string(m->coords[mc->pos_dep]));
            json_array_append_new(pcons, pc);
        }
    }
    json_object_set_new(js, "constraints", cons);
    if (json_array_size(pcons))
        json_object_set_new(js, "position_constraints", pcons);
    else
        json_decref(pcons);
    /* Speeds the engine chose are left out: the canonical form then compiles to the
     * same choice and the same id. */
    if (!m->default_speeds) {
        json_t *speeds = json_array();
        for (int r = 0; r < m->k; r++)
            json_array_append_new(speeds, json_pack("{s:s, s:o}", "name", m->speeds[r], "expr",
                                                    exprjson_text(c, m->speed_f[r])));
        json_object_set_new(js, "speeds", speeds);
    }
    m->canonical = json_dumps(js, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(js);
    if (!m->canonical)
        return -1;
    unsigned char md[SHA256_BYTES];
    sha256(m->canonical, strlen(m->canonical), md);
    strcpy(m->id, "sha256:");
    for (unsigned i = 0; i < SHA256_BYTES; i++)
        sprintf(m->id + 7 + 2 * i, "%02x", md[i]);
    return 0;
}

/* A nonlinear model integrated with multipliers has n - m degrees of freedom but
 * n - (linear constraints) speeds in its Psi: the summary lists the speeds left when
 * each nonlinear constraint takes one it determines (the last speed that shares a
 * velocity with it), so that "dof" is the number of "speeds" listed. keep[k]. */
static void summary_speeds(const struct engine_model *m, unsigned char *keep)
{
    int n = m->n, k = m->k;
    memset(keep, 1, (size_t)k);
    if (m->nlin == m->nc || m->nl_reduced)
        return;
    for (int j = 0; j < m->nc; j++) {
        if (m->cons[j].linear)
            continue;
        int drop = -1;
        for (int r = k - 1; r >= 0 && drop < 0; r--)
            for (int i = 0; i < n && keep[r] && drop < 0; i++)
                if (m->psi && m->psi[r * n + i] && !expr_is_num(m->psi[r * n + i], 0.0) &&
                    expr_depends(m->cons[j].f, m->sym_qd[i]))
                    drop = r;
        for (int r = k - 1; r >= 0 && drop < 0; r--)
            if (keep[r])
                drop = r;
        if (drop >= 0)
            keep[drop] = 0;
    }
}

static void make_summary(struct engine_model *m, json_t *warnings)
{
    json_t *s = json_object();
    json_object_set_new(s, "model_id", json_string(m->id));
    json_object_set_new(s, "name", json_string(m->name));
    if (m->units_js)
        json_object_set_new(s, "units", json_deep_copy(m->units_js));
    json_object_set_new(s, "n", json_integer(m->n));
    json_object_set_new(s, "m", json_integer(m->nc));
    unsigned char *keep = malloc((size_t)m->k + 1);
    if (keep)
        summary_speeds(m, keep);
    json_t *coords = json_array();
    for (int i = 0; i < m->n; i++)
        json_array_append_new(coords, json_string(m->coords[i]));
    json_object_set_new(s, "coordinates", coords);
    json_t *speeds = json_array(), *sexpr = json_array();
    for (int r = 0; r < m->k; r++) {
        if (keep && !keep[r])
            continue;
        json_array_append_new(speeds, json_string(m->speeds[r]));
        json_array_append_new(sexpr, json_pack("{s:s, s:o}", "name", m->speeds[r], "expr",
                                               exprjson_text(m->ctx, m->speed_f[r])));
    }
    free(keep);
    /* the degrees of freedom are the speeds listed: n - m (m counting every constraint) */
    json_object_set_new(s, "dof", json_integer((json_int_t)json_array_size(speeds)));
    json_object_set_new(s, "speeds", speeds);
    json_object_set_new(s, "speed_definitions", sexpr);
    json_object_set_new(s, "default_speeds", json_boolean(m->default_speeds));
    json_t *cons = json_array();
    for (int j = 0; j < m->nc; j++) {
        const model_constraint *mc = &m->cons[j];
        json_array_append_new(cons, json_pack("{s:s, s:o, s:b, s:b, s:b, s:b}", "name", mc->name, "expr",
                                              exprjson_text(m->ctx, mc->f), "linear", mc->linear, "rheonomic",
                                              mc->rheonomic, "holonomic", mc->holonomic, "gamma_free",
                                              mc->gamma_free));
    }
    json_object_set_new(s, "constraints", cons);
    json_object_set_new(s, "scleronomic", json_boolean(m->scleronomic));
    json_object_set_new(s, "energy_conserved", json_boolean(m->energy_conserved));
    json_object_set_new(s, "energy_reason", json_string(m->energy_reason));
    json_object_set_new(s, "energy_expression", json_string(m->energy_is_jacobi ? "p.q' - T + V" : "T + V"));
    json_t *params = json_object();
    for (int i = 0; i < m->np; i++)
        json_object_set_new(params, m->params[i], json_real(m->param_values[i]));
    json_object_set_new(s, "parameters", params);
    int all_linear = m->nlin == m->nc || m->nl_reduced;
    json_object_set_new(s, "formulations",
                        all_linear ? json_pack("[s, s]", "hamel", "multipliers")
                                   : json_pack("[s]", "multipliers"));
    json_object_set_new(s, "default_formulation", json_string(all_linear ? "hamel" : "multipliers"));
    if (json_array_size(warnings))
        json_object_set(s, "warnings", warnings);
    m->summary = s;
}

/* ---- the steps of the compilation (model_build.h; engine/compile.c runs them) ---- */

static const char *const known_keys[] = {"name",
                                         "coordinates",
                                         "parameters",
                                         "definitions",
                                         "kinetic_energy",
                                         "potential_energy",
                                         "generalized_forces",
                                         "constraints",
                                         "speeds",
                                         "position_constraints",
                                         "frames",
                                         "points",
                                         "bodies",
                                         "particles",
                                         "gravity",
                                         "rolling_disks",
                                         "description",
                                         "units",
                                         "contacts",
                                         "notes",
                                         "source",
                                         NULL};

/* Unknown members warned about one by one; the rest in one line. */
#define MODEL_WARNINGS_MAX 64

json_t *engine_model_unknown_members(const json_t *spec)
{
    json_t *warnings = json_array();
    const char *key;
    const json_t *val;
    size_t unknown = 0;
    json_object_foreach((json_t *)spec, key, val)
    {
        int known = 0;
        for (int i = 0; known_keys[i]; i++)
            known |= strcmp(known_keys[i], key) == 0;
        unknown += !known;
        if (!known && warnings && unknown <= MODEL_WARNINGS_MAX) {
            char w[160];
            size_t n = strlen(key);
            if (n > 100) /* cut before a whole character (UTF-8), or json_string refuses it */
                for (n = 100; n > 0 && ((unsigned char)key[n] & 0xC0) == 0x80;)
                    n--;
            snprintf(w, sizeof w, "unknown field model.%.*s ignored", (int)n, key);
            json_array_append_new(warnings, json_string(w));
        }
    }
    if (warnings && unknown > MODEL_WARNINGS_MAX) {
        /* one line for the rest: a body of 250,000 unknown members answered 9.4 MB of them */
        char w[96];
        snprintf(w, sizeof w, "and %zu more unknown fields ignored", unknown - MODEL_WARNINGS_MAX);
        json_array_append_new(warnings, json_string(w));
    }
    return warnings;
}

int model_build_begin(struct model_build *b)
{
    b->prob = hamel_problem_new(HAMEL_E_INVALID_MODEL, NULL);
    b->warnings = json_array();
    b->code = HAMEL_E_INVALID_MODEL;
    struct engine_model *m = b->m = calloc(1, sizeof *m);
    if (!m || !b->prob || !b->warnings)
        return MB_OOM;
    atomic_init(&m->refs, 1);
    pthread_mutex_init(&m->forms_lock, NULL);
    m->ctx = expr_ctx_new(b->lim->max_nodes);
    if (!m->ctx)
        return MB_OOM;
    expr_ctx_set_budget(m->ctx, b->bud);
    json_t *unknown = engine_model_unknown_members(b->js);
    if (!unknown)
        return MB_OOM;
    json_array_extend(b->warnings, unknown);
    json_decref(unknown);
    return MB_OK;
}

int model_build_parse(struct model_build *b)
{
    struct engine_model *m = b->m;
    int parsed = parse_model(m, b->js, b->lim, b->prob, &b->speeds_js);
    if (budget_check(b->bud))
        return MB_OVER;
    if (parsed < 0)
        return MB_FAIL;
    m->n_in = m->np + 1 + 2 * m->n;
    return MB_OK;
}

/* Constraints: linear or not, and their velocity gradients; then the speeds. */
int model_build_constraints(struct model_build *b)
{
    struct engine_model *m = b->m;
    expr_ctx *c = m->ctx;
    json_t *prob = b->prob;
    int n = m->n;
    b->cgrad = calloc((size_t)(m->nc + 1) * n, sizeof *b->cgrad);
    expr **cgrad = b->cgrad;
    expr **lin_grad = calloc((size_t)(m->nc + 1) * n, sizeof *lin_grad);
    if (!cgrad || !lin_grad) {
        free(lin_grad);
        return MB_OOM;
    }
    for (int j = 0; j < m->nc; j++) {
        model_constraint *mc = &m->cons[j];
        int bi = 0, bl = 0;
        char path[96];
        snprintf(path, sizeof path, "model.constraints[%d]", j);
        if (!expr_depends_class(c, mc->f, SYM_VELOCITY)) {
            add_error(prob, path, -1,
                      "constraint %s has no velocities: write a holonomic constraint f(q) = 0 as its "
                      "time derivative, or remove a coordinate",
                      mc->name);
            continue;
        }
        budget_stage(b->bud, "differentiation", path);
        mc->linear = velocity_gradient(m, mc->f, cgrad + (size_t)j * n, &bi, &bl);
        if (mc->linear) {
            for (int i = 0; i < n; i++)
                lin_grad[(size_t)m->nlin * n + i] = cgrad[(size_t)j * n + i];
            mc->row = m->nlin++; /* provisional: rows are renumbered after the speeds */
        }
        mc->rheonomic =
            expr_depends(mc->f, m->sym_t) || (mc->linear && !expr_is_zero(c, velocity_free(m, mc->f)));
    }
    if (budget_check(b->bud) || count_errors(prob)) {
        free(lin_grad);
        if (budget_stopped(b->bud))
            return MB_OVER;
        return MB_FAIL;
    }
    for (int j = 0; j < m->nc; j++)
        if (m->cons[j].linear)
            for (int i = 0; i < m->nc; i++)
                if (i != j && strcmp(m->cons[i].name, m->cons[j].name) == 0) {
                    char path[96];
                    snprintf(path, sizeof path, "model.constraints[%d].name", j);
                    add_error(prob, path, -1, "constraint name '%s' is used twice", m->cons[j].name);
                    break;
                }
    m->k = n - m->nlin;
    if (b->speeds_js && m->nlin != m->nc && (int)json_array_size(b->speeds_js) == n - m->nc &&
        n - m->nc >= 1) {
        /* n - m speeds with m counting every constraint: the reduced nonlinear form */
        m->nl_reduced = 1;
        m->k = n - m->nc;
    }
    if (m->k < 1) {
        add_error(prob, "model.constraints", -1,
                  "%d linear constraints leave no degree of freedom among %d coordinates", m->nlin, n);
        free(lin_grad);
        return MB_FAIL;
    }
    budget_stage(b->bud, "choice of speeds", "model.constraints");
    if (setup_speeds(m, b->speeds_js, b->lim, prob, lin_grad) < 0) {
        free(lin_grad);
        if (budget_stopped(b->bud))
            return MB_OVER;
        return MB_FAIL;
    }
    free(lin_grad);
    if (budget_check(b->bud))
        return MB_OVER;
    for (int j = 0; j < m->nc; j++)
        for (int r = 0; r < m->k; r++)
            if (strcmp(m->cons[j].name, m->speeds[r]) == 0) {
                char path[96];
                snprintf(path, sizeof path, "model.constraints[%d].name", j);
                add_error(prob, path, -1, "'%s' names a speed too", m->speeds[r]);
            }
    if (count_errors(prob))
        return MB_FAIL;
    return MB_OK;
}

/* Psi: speeds then linear constraints (then, in the reduced nonlinear form, the
 * nonlinear constraints' velocity gradients); its tape, and a check that it is
 * invertible somewhere. */
int model_build_psi(struct model_build *b)
{
    struct engine_model *m = b->m;
    expr_ctx *c = m->ctx;
    json_t *prob = b->prob;
    expr **cgrad = b->cgrad;
    int n = m->n;
    m->psi = calloc((size_t)n * n, sizeof *m->psi);
    m->psi_t = calloc(n, sizeof *m->psi_t);
    m->row_names = calloc(n, sizeof *m->row_names);
    expr **sgrad = calloc(n, sizeof *sgrad);
    if (!m->psi || !m->psi_t || !m->row_names || !sgrad) {
        free(sgrad);
        return MB_OOM;
    }
    for (int r = 0; r < m->k; r++) {
        int bi = 0, bl = 0;
        char spath[96];
        snprintf(spath, sizeof spath, "model.speeds[%d].expr", r);
        budget_stage(b->bud, "differentiation", spath);
        if (!velocity_gradient(m, m->speed_f[r], sgrad, &bi, &bl)) {
            char path[96];
            snprintf(path, sizeof path, "model.speeds[%d].expr", r);
            add_error(prob, path, -1, "speed %s is not linear in the velocities (it has a %s'*%s' term)",
                      m->speeds[r], m->coords[bi], m->coords[bl]);
            b->code = HAMEL_E_NONLINEAR_SPEED;
            continue;
        }
        for (int i = 0; i < n; i++)
            m->psi[r * n + i] = velocity_free(m, sgrad[i]);
        m->psi_t[r] = velocity_free(m, m->speed_f[r]);
        m->row_names[r] = m->speeds[r];
    }
    free(sgrad);
    if (budget_check(b->bud))
        return MB_OVER;
    if (count_errors(prob))
        return MB_FAIL;
    {
        int row = m->k;
        for (int j = 0; j < m->nc; j++) {
            model_constraint *mc = &m->cons[j];
            if (!mc->linear)
                continue;
            mc->row = row;
            for (int i = 0; i < n; i++)
                m->psi[row * n + i] = velocity_free(m, cgrad[(size_t)j * n + i]);
            m->psi_t[row] = velocity_free(m, mc->f);
            m->row_names[row] = mc->name;
            row++;
        }
        for (int j = 0; j < m->nc && m->nl_reduced; j++) {
            /* nonlinear constraints: their velocity gradient, a row depending on q' */
            model_constraint *mc = &m->cons[j];
            if (mc->linear)
                continue;
            mc->row = row;
            for (int i = 0; i < n; i++)
                m->psi[row * n + i] = cgrad[(size_t)j * n + i];
            m->psi_t[row] = expr_num(c, 0.0);
            m->row_names[row] = mc->name;
            row++;
        }
    }
    m->scleronomic = 1;
    for (int j = 0; j < m->nc; j++)
        if (m->cons[j].rheonomic)
            m->scleronomic = 0;

    expr **roots = calloc((size_t)n * n + n, sizeof *roots);
    if (!roots)
        return MB_OOM;
    memcpy(roots, m->psi, (size_t)n * n * sizeof *roots);
    memcpy(roots + n * n, m->psi_t, n * sizeof *roots);
    budget_stage(b->bud, "code generation", m->default_speeds ? "model.constraints" : "model.speeds");
    m->tape_psi = build_tape(m, roots, n * n + n);
    free(roots);
    if (budget_check(b->bud))
        return MB_OVER;
    if (!m->tape_psi) {
        add_error(prob, "model", -1, "Psi depends on the velocities");
        return MB_FAIL;
    }
    double *in = calloc(m->n_in, sizeof *in), *work = calloc(m->tape_psi->n_ins, sizeof *work);
    double *out = calloc((size_t)n * n + n, sizeof *out);
    int *piv = calloc(n, sizeof *piv);
    int regular = 0, singular = 0;
    for (int k = 0; k < MODEL_TEST_POINTS && in && work && out && piv; k++) {
        model_test_point(m, k, in);
        tape_eval(m->tape_psi, in, work, out);
        int verdict = model_psi_verdict(m, in, out); /* issue 15: scaled, trusted */
        if (linalg_lu(n, out, piv) == 0 || verdict > 0)
            regular++;
        else
            singular += verdict < 0;
    }
    if (!regular && !singular)
        regular = 1; /* no trustworthy point: claim nothing (the run watches Psi) */
    free(in);
    free(work);
    free(out);
    free(piv);
    if (!regular) {
        add_error(prob, m->default_speeds || !m->k ? "model.constraints" : "model.speeds", -1,
                  "the speeds and the linear constraints are linearly dependent: Psi (%dx%d) is "
                  "singular at every test configuration",
                  n, n);
        b->code = HAMEL_E_SINGULAR;
        return MB_FAIL;
    }
    return MB_OK;
}

/* Dynamics: M = d2T/dq'dq', g = Q - dV/dq + dT/dq - D(dT/dq'), b = D(Psi q' + Psi_t);
 * the observables (energy, constraints, momenta) and the multipliers' J and Df. */
int model_build_dynamics(struct model_build *b)
{
    struct engine_model *m = b->m;
    expr_ctx *c = m->ctx;
    expr **cgrad = b->cgrad;
    int n = m->n;
    if (geom_compile(m) < 0)
        return MB_OOM;
    int nm = n * (n + 1) / 2;
    expr **roots = calloc((size_t)nm + 2 * n, sizeof *roots);
    expr **p = calloc(n, sizeof *p);
    if (!roots || !p) {
        free(roots);
        free(p);
        return MB_OOM;
    }
    budget_stage(b->bud, "differentiation", "model.kinetic_energy");
    for (int i = 0; i < n; i++)
        p[i] = expr_diff(c, m->T, m->sym_qd[i]);
    int idx = 0;
    for (int i = 0; i < n; i++)
        for (int l = i; l < n; l++)
            roots[idx++] = expr_diff(c, p[i], m->sym_qd[l]);
    for (int i = 0; i < n; i++) {
        budget_stage(b->bud, "differentiation", "model.potential_energy");
        expr *g = expr_sub(c, m->Q[i], expr_diff(c, m->V, m->sym_q[i]));
        budget_stage(b->bud, "differentiation", "model.kinetic_energy");
        g = expr_add(c, g, expr_diff(c, m->T, m->sym_q[i]));
        g = expr_sub(c, g, expr_dt(c, p[i]));
        roots[nm + i] = g;
    }
    budget_stage(b->bud, "differentiation", "model.speeds");
    for (int r = 0; r < m->k; r++)
        roots[nm + n + r] = expr_dt(c, m->speed_f[r]);
    budget_stage(b->bud, "differentiation", "model.constraints");
    for (int j = 0; j < m->nc; j++)
        if (m->cons[j].row >= 0)
            roots[nm + n + m->cons[j].row] = expr_dt(c, m->cons[j].f);
    budget_stage(b->bud, "code generation", "model.kinetic_energy");
    expr_factor_sums(c, roots, nm + 2 * n); /* fewer multiplications per evaluation */
    m->tape_dyn = build_tape(m, roots, nm + 2 * n);

    /* Observables: the energy and every constraint. */
    budget_stage(b->bud, "energy", "model.kinetic_energy");
    expr **obs = calloc(m->nc + 1 + n, sizeof *obs);
    if (obs) {
        obs[0] = energy_expr(m, p);
        for (int j = 0; j < m->nc; j++)
            obs[1 + j] = m->cons[j].f;
        for (int i = 0; i < n; i++)
            obs[1 + m->nc + i] = p[i];
        m->tape_obs = build_tape(m, obs, 1 + m->nc + n);
        free(obs);
    }
    /* Multipliers formulation: J = df/dq', Df = sum df/dq q' + df/dt. */
    budget_stage(b->bud, "differentiation", "model.constraints");
    expr **mult = calloc((size_t)(m->nc + 1) * (n + 1), sizeof *mult);
    if (mult) {
        for (int j = 0; j < m->nc; j++) {
            for (int i = 0; i < n; i++)
                mult[j * n + i] = cgrad[(size_t)j * n + i];
            mult[m->nc * n + j] = expr_dt(c, m->cons[j].f);
        }
        m->tape_mult = build_tape(m, mult, m->nc * (n + 1));
        free(mult);
    }
    free(roots);
    free(p);
    return MB_OK;
}

/* Hamel coefficient pieces: dPsi/dq, dPsi/dt, dPsi_t/dq. */
static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* dpsi_pair_ptr, dpsi_pair (model.h) from dpsi_at; -1 when out of memory. */
static int dpsi_pairs(struct engine_model *m, size_t cnt)
{
    int n = m->n;
    size_t n2 = (size_t)n * n, n3 = n2 * n, t = 0;
    m->dpsi_pair_ptr = calloc(n + 1, sizeof *m->dpsi_pair_ptr);
    m->dpsi_pair = calloc(2 * cnt + 1, sizeof *m->dpsi_pair);
    if (!m->dpsi_pair_ptr || !m->dpsi_pair)
        return -1;
    /* counts by row j, then the pairs (i, k) and (k, i) of each place (j, i, k) */
    for (size_t o = 0; o < cnt; o++)
        if ((size_t)m->dpsi_at[o] < n3)
            m->dpsi_pair_ptr[m->dpsi_at[o] / n2 + 1] += 2;
    for (int j = 0; j < n; j++)
        m->dpsi_pair_ptr[j + 1] += m->dpsi_pair_ptr[j];
    int *fill = calloc(n + 1, sizeof *fill);
    if (!fill)
        return -1;
    for (size_t o = 0; o < cnt; o++) {
        size_t p = (size_t)m->dpsi_at[o];
        if (p >= n3)
            continue;
        int j = (int)(p / n2), i = (int)(p / n % n), k = (int)(p % n);
        int *row = m->dpsi_pair + m->dpsi_pair_ptr[j];
        row[fill[j]++] = i * n + k;
        row[fill[j]++] = k * n + i;
    }
    free(fill);
    /* increasing and distinct, packed */
    for (int j = 0; j < n; j++) {
        int *row = m->dpsi_pair + m->dpsi_pair_ptr[j], len = m->dpsi_pair_ptr[j + 1] - m->dpsi_pair_ptr[j];
        qsort(row, (size_t)len, sizeof *row, cmp_int);
        m->dpsi_pair_ptr[j] = (int)t;
        for (int x = 0; x < len; x++)
            if (x == 0 || row[x] != row[x - 1])
                m->dpsi_pair[t++] = row[x];
    }
    m->dpsi_pair_ptr[n] = (int)t;
    return 0;
}

/* Appends root e at dense place `at` to the entries of dPsi when it is not the number 0
 * (expr_diff's zero); -1 when out of memory. */
static int dpsi_push(expr ***roots, int32_t **at, size_t *cnt, size_t *cap, expr *e, expr *zero, size_t place)
{
    if (e == zero)
        return 0;
    if (*cnt == *cap) {
        size_t nc = *cap ? 2 * *cap : 1024;
        expr **r = realloc(*roots, nc * sizeof *r);
        if (r)
            *roots = r;
        int32_t *a = r ? realloc(*at, nc * sizeof *a) : NULL;
        if (a)
            *at = a;
        if (!r || !a)
            return -1;
        *cap = nc;
    }
    (*roots)[*cnt] = e;
    (*at)[(*cnt)++] = (int32_t)place;
    return 0;
}

int model_build_dpsi(struct model_build *b)
{
    struct engine_model *m = b->m;
    expr_ctx *c = m->ctx;
    int n = m->n;
    size_t n3 = (size_t)n * n * n, n2 = (size_t)n * n, cnt = 0, cap = 0;
    expr **roots = NULL;
    int32_t *at = NULL;
    int oom = 0;
    /* an entry of Psi that depends on no coordinate (most of them: a number) has the
     * derivative expr_diff gives it for each q_k, zero, without n calls; only the
     * entries that are not zero become outputs (dpsi_at), in the order of the calls */
    expr *zero = expr_num(c, 0.0);
    for (int j = 0; j < n && !oom; j++)
        for (int i = 0; i < n && !oom; i++) {
            expr *e = m->psi[j * n + i];
            if (expr_depends_class(c, e, SYM_COORD))
                for (int k = 0; k < n && !oom; k++)
                    oom = dpsi_push(&roots, &at, &cnt, &cap, expr_diff(c, e, m->sym_q[k]), zero,
                                    ((size_t)j * n + i) * n + k) < 0;
            oom = oom || dpsi_push(&roots, &at, &cnt, &cap, expr_diff(c, e, m->sym_t), zero,
                                   n3 + (size_t)j * n + i) < 0;
            oom = oom || dpsi_push(&roots, &at, &cnt, &cap, expr_diff(c, m->psi_t[j], m->sym_q[i]), zero,
                                   n3 + n2 + (size_t)j * n + i) < 0;
        }
    if (oom) {
        free(roots);
        free(at);
        return MB_OOM;
    }
    budget_stage(b->bud, "differentiation", m->default_speeds ? "model.constraints" : "model.speeds");
    m->tape_dpsi = build_tape(m, roots, (int)cnt);
    m->dpsi_at = at;
    free(roots);
    return dpsi_pairs(m, cnt) < 0 ? MB_OOM : MB_OK;
}

int model_dpsi_count(const struct engine_model *m) { return m->tape_dpsi ? m->tape_dpsi->n_outputs : 0; }

void model_run_dpsi(const struct engine_model *m, const double *in, double *work, double *scratch,
                    double *dense)
{
    const tape *t = m->tape_dpsi;
    tape_run(t, in, work, scratch);
    for (int o = 0; o < t->n_outputs; o++)
        dense[m->dpsi_at[o]] = scratch[o];
}

/* Position-level constraints: their values and gradients, for the initial solve, the
 * checks and the projection (sim.c); then whether every tape was made within the
 * node limit. */
int model_build_positions(struct model_build *b)
{
    struct engine_model *m = b->m;
    expr_ctx *c = m->ctx;
    int n = m->n;
    for (int j = 0; j < m->nc; j++)
        m->npos += m->cons[j].pos != NULL;
    if (m->npos) {
        expr **roots = calloc((size_t)m->npos * (n + 1), sizeof *roots);
        m->pos_con = calloc(m->npos, sizeof *m->pos_con);
        if (!roots || !m->pos_con) {
            free(roots);
            return MB_OOM;
        }
        int h = 0;
        for (int j = 0; j < m->nc; j++)
            if (m->cons[j].pos) {
                m->pos_con[h] = j;
                roots[h] = m->cons[j].pos;
                for (int i = 0; i < n; i++)
                    roots[m->npos + h * n + i] = expr_diff(c, m->cons[j].pos, m->sym_q[i]);
                h++;
            }
        m->tape_pos = build_tape(m, roots, m->npos * (n + 1));
        free(roots);
        if (!m->tape_pos)
            return MB_OOM;
    }
    if (expr_ctx_overflow(c) || !m->tape_dyn || !m->tape_obs || !m->tape_mult || !m->tape_dpsi) {
        add_error(b->prob, "model", -1, "the derived equations exceed the expression node limit (%zu nodes)",
                  b->lim->max_nodes);
        b->code = HAMEL_E_LIMIT;
        return MB_FAIL;
    }
    return MB_OK;
}

int model_build_energy(struct model_build *b)
{
    decide_energy(b->m);
    return MB_OK;
}

int model_build_canonical(struct model_build *b)
{
    if (make_canonical(b->m) < 0)
        return budget_check(b->bud) ? MB_OVER : MB_OOM;
    return MB_OK;
}

int model_build_summary(struct model_build *b)
{
    make_summary(b->m, b->warnings);
    return MB_OK;
}

tape *model_build_tape(struct engine_model *m, expr **roots, int n_roots)
{
    return build_tape(m, roots, n_roots);
}

void model_build_end(struct model_build *b, int ok)
{
    free(b->cgrad);
    b->cgrad = NULL;
    json_decref(b->warnings);
    b->warnings = NULL;
    if (ok) {
        struct engine_model *m = b->m;
        m->bytes = sizeof *m + expr_ctx_bytes(m->ctx) + (size_t)m->work_len * 8 * 6 + strlen(m->canonical) +
                   (size_t)m->n * m->n * m->n;
        json_decref(b->prob);
        b->prob = NULL;
    } else {
        model_free(b->m);
        b->m = NULL;
    }
}
