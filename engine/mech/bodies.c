/* bodies.c — frames, points, rigid bodies, particles, gravity and rolling disks
 * (bodies.h): parses the bodies keys of a model and builds T, V and the rolling
 * constraints symbolically in the model's expression context. */
#include "bodies.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "exprjson.h"

#define BODIES_MAX_ITEMS 256 /* frames, points, bodies, particles, disks: each list */
#define BODIES_NAME_MAX 64

const char *const bodies_keys[] = {"frames",  "points",        "bodies", "particles",
                                   "gravity", "rolling_disks", NULL};

struct frame {
    char name[BODIES_NAME_MAX + 1];
    int parent, depth; /* N: -1, 0 */
    expr *E[9];        /* relative rotation: parent components = E * own components */
    expr *R[9];        /* row-major: columns are this frame's unit vectors in N components */
    expr *w[3];        /* angular velocity in this frame's components */
    expr *w_par[3];    /* the same in the parent's components (no own angle in it) */
    int spin_axis;     /* 0..2: the frame is its parent turned about this own axis alone */
};

struct point {
    char name[BODIES_NAME_MAX + 1];
    int parent, frame; /* O: -1, 0 */
    expr *p[3];        /* position from the parent point, components in `frame` */
    expr *r[3];        /* position from O, N components */
    expr *v[3];        /* velocity in N, components in `frame` (NULL until needed) */
};

struct bctx {
    expr_ctx *c;
    size_t max_chars;
    json_t *problem;
    double *vals; /* [symbols] values for numeric checks: parameters, else 0.5 */
    struct frame *frames;
    int nf;
    struct point *points;
    int npt;
    int errors;
    bodies_result *out;
};

static void err(struct bctx *b, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void err(struct bctx *b, const char *path, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    hamel_problem_add(b->problem, path, -1, buf);
    b->errors++;
}

/* One expression: a string in the model's language or a number. Velocities are
 * not allowed (positions, angles, masses, inertias, radii are configuration or
 * parameter quantities). */
static expr *parse_expr(struct bctx *b, const json_t *v, const char *path)
{
    char numbuf[64];
    const char *text = exprjson_source(v, numbuf, sizeof numbuf);
    if (!text) {
        err(b, path, v ? "must be an expression string or a number" : "required: an expression");
        return NULL;
    }
    expr_parse_opts o = {1, 1, b->max_chars, path};
    expr_error e;
    expr *x = expr_parse(b->c, text, &o, &e);
    if (!x) {
        hamel_problem_add(b->problem, path, e.column, e.message);
        b->errors++;
        return NULL;
    }
    if (json_is_string(v)) { /* the canonical copy gets the canonical print */
        char *canon = expr_print(b->c, x);
        if (canon)
            json_string_set((json_t *)v, canon);
        free(canon);
    }
    if (expr_depends_class(b->c, x, SYM_VELOCITY)) {
        err(b, path, "must not contain velocities (it is a position-level quantity)");
        return NULL;
    }
    return x;
}

/* A 3-vector [e1, e2, e3]. */
static int parse_vec3(struct bctx *b, const json_t *v, const char *path, expr *out[3])
{
    if (!json_is_array(v) || json_array_size(v) != 3) {
        err(b, path, "must be an array of 3 components [x, y, z]");
        return -1;
    }
    int ok = 0;
    for (int i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s[%d]", path, i);
        out[i] = parse_expr(b, json_array_get(v, i), p);
        if (!out[i])
            ok = -1;
    }
    return ok;
}

static double num_value(struct bctx *b, expr *e) { return expr_eval(b->c, e, b->vals); }

/* Is e zero at 4 pseudo-random configurations with every coordinate, velocity and t
 * in [0.35, 1.35] and the parameters at their values? The contact geometry has
 * sqrt((n x a)^2) = |n x a| in it, so the sign-symmetric test of expr_is_zero would
 * call a condition that holds on the physical branch (disk above its contact)
 * non-trivial. */
static int zero_on_branch(struct bctx *b, expr *e)
{
    int ns = expr_sym_count(b->c);
    double *v = malloc((ns + 1) * sizeof *v);
    if (!v)
        return 0;
    uint64_t x = 0x2545F4914F6CDD1Dull;
    int zero = 1;
    for (int k = 0; k < 4 && zero; k++) {
        for (int s = 0; s < ns; s++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            const expr_symbol *sym = expr_sym_get(b->c, s);
            v[s] = sym->cls == SYM_PARAM ? b->vals[s] : 0.35 + (double)(x >> 11) / 9007199254740992.0;
        }
        double val = expr_eval(b->c, e, v);
        zero = isfinite(val) && fabs(val) <= 1e-12 && expr_trusted_at(b->c, &e, 1, v);
    }
    free(v);
    return zero;
}

static int find_frame(struct bctx *b, const char *name)
{
    for (int i = 0; i < b->nf; i++)
        if (strcmp(b->frames[i].name, name) == 0)
            return i;
    return -1;
}

static int find_point(struct bctx *b, const char *name)
{
    for (int i = 0; i < b->npt; i++)
        if (strcmp(b->points[i].name, name) == 0)
            return i;
    return -1;
}

/* The frame named by member `key` of obj (default `dflt` when absent and dflt is not
 * NULL), or -1 with an error. */
static int ref_frame(struct bctx *b, const json_t *obj, const char *key, const char *dflt, const char *path)
{
    const json_t *v = json_object_get(obj, key);
    char p[160];
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (!v && dflt)
        return find_frame(b, dflt);
    if (!json_is_string(v)) {
        err(b, p, "required: the name of a frame");
        return -1;
    }
    int f = find_frame(b, json_string_value(v));
    if (f < 0)
        err(b, p, "unknown frame '%.64s' (frames are N and those defined earlier in model.frames)",
            json_string_value(v));
    return f;
}

static int ref_point(struct bctx *b, const json_t *obj, const char *key, const char *path)
{
    const json_t *v = json_object_get(obj, key);
    char p[160];
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (!json_is_string(v)) {
        err(b, p, "required: the name of a point");
        return -1;
    }
    int f = find_point(b, json_string_value(v));
    if (f < 0)
        err(b, p, "unknown point '%.64s' (points are O and those defined earlier in model.points)",
            json_string_value(v));
    return f;
}

/* A name for a new frame or point: an identifier not used yet in its list. */
static int new_name(struct bctx *b, const json_t *obj, const char *path, int is_frame)
{
    const json_t *v = json_object_get(obj, "name");
    char p[160];
    snprintf(p, sizeof p, "%s.name", path);
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    int ok = s && *s && strlen(s) <= BODIES_NAME_MAX;
    for (const char *q = s; ok && *q; q++)
        ok = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '_' ||
             (q > s && *q >= '0' && *q <= '9');
    if (!ok) {
        err(b, p, "required: an identifier (letters, digits, _; at most %d)", BODIES_NAME_MAX);
        return -1;
    }
    if (is_frame ? find_frame(b, s) >= 0 : find_point(b, s) >= 0) {
        err(b, p, "%s '%s' is already defined", is_frame ? "frame" : "point", s);
        return -1;
    }
    return 0;
}

/* ---- small vector algebra on expressions ---- */

static expr *dot3(expr_ctx *c, expr *const a[3], expr *const b[3])
{
    expr *t[3] = {expr_mul(c, a[0], b[0]), expr_mul(c, a[1], b[1]), expr_mul(c, a[2], b[2])};
    return expr_sum(c, t, 3);
}

/* out = R v (R row-major 3x3) */
static void matvec(expr_ctx *c, expr *const R[9], expr *const v[3], expr *out[3])
{
    for (int i = 0; i < 3; i++) {
        expr *row[3] = {R[3 * i], R[3 * i + 1], R[3 * i + 2]};
        out[i] = dot3(c, row, v);
    }
}

/* out = R^T v */
static void matTvec(expr_ctx *c, expr *const R[9], expr *const v[3], expr *out[3])
{
    for (int i = 0; i < 3; i++) {
        expr *col[3] = {R[i], R[3 + i], R[6 + i]};
        out[i] = dot3(c, col, v);
    }
}

static void matmul(expr_ctx *c, expr *const A[9], expr *const B[9], expr *out[9])
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            expr *row[3] = {A[3 * i], A[3 * i + 1], A[3 * i + 2]};
            expr *col[3] = {B[j], B[3 + j], B[6 + j]};
            out[3 * i + j] = dot3(c, row, col);
        }
}

static void cross3(expr_ctx *c, expr *const a[3], expr *const b[3], expr *out[3])
{
    out[0] = expr_sub(c, expr_mul(c, a[1], b[2]), expr_mul(c, a[2], b[1]));
    out[1] = expr_sub(c, expr_mul(c, a[2], b[0]), expr_mul(c, a[0], b[2]));
    out[2] = expr_sub(c, expr_mul(c, a[0], b[1]), expr_mul(c, a[1], b[0]));
}

/* "x", "y", "z" (with an optional leading '-') -> 0..2 and the sign; -1 otherwise. */
static int axis_letter(const char *s, int *sign)
{
    *sign = 1;
    if (s[0] == '-' || s[0] == '+') {
        *sign = s[0] == '-' ? -1 : 1;
        s++;
    }
    if (s[0] && !s[1] && s[0] >= 'x' && s[0] <= 'z')
        return s[0] - 'x';
    return -1;
}

/* A rotation axis: "x" | "y" | "z" (optionally signed) or a unit vector [a, b, c] of
 * constants (numbers or parameter expressions). */
static int parse_axis(struct bctx *b, const json_t *v, const char *path, expr *k[3])
{
    expr_ctx *c = b->c;
    if (json_is_string(v)) {
        int sign, i = axis_letter(json_string_value(v), &sign);
        if (i < 0) {
            err(b, path, "'%.20s' is not an axis: give \"x\", \"y\", \"z\" or a unit vector [a, b, c]",
                json_string_value(v));
            return -1;
        }
        for (int j = 0; j < 3; j++)
            k[j] = expr_num(c, j == i ? sign : 0.0);
        return 0;
    }
    if (!json_is_array(v)) {
        err(b, path, "required: \"x\", \"y\", \"z\" or a unit vector [a, b, c]");
        return -1;
    }
    if (parse_vec3(b, v, path, k) < 0)
        return -1;
    for (int j = 0; j < 3; j++)
        if (expr_depends_class(c, k[j], SYM_COORD) || expr_depends_class(c, k[j], SYM_TIME)) {
            err(b, path, "an axis given as a vector must be constant (numbers and parameters)");
            return -1;
        }
    double x = num_value(b, k[0]), y = num_value(b, k[1]), z = num_value(b, k[2]);
    double norm = sqrt(x * x + y * y + z * z);
    if (!(fabs(norm - 1.0) <= 1e-9)) {
        err(b, path, "must be a unit vector: its length is %.17g at the parameter values", norm);
        return -1;
    }
    return 0;
}

/* The rotation by angle a about the unit axis k: R = cos a I + sin a [k]x + (1 - cos a) k k^T,
 * whose columns are the rotated unit vectors in the parent's components. */
static void rotation(expr_ctx *c, expr *const k[3], expr *a, expr *R[9])
{
    expr *co = expr_fun(c, FN_COS, a), *si = expr_fun(c, FN_SIN, a);
    expr *one_c = expr_sub(c, expr_num(c, 1.0), co);
    expr *K[9] = {expr_num(c, 0.0),
                  expr_neg(c, k[2]),
                  k[1],
                  k[2],
                  expr_num(c, 0.0),
                  expr_neg(c, k[0]),
                  expr_neg(c, k[1]),
                  k[0],
                  expr_num(c, 0.0)};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            expr *t = expr_add(c, expr_mul(c, si, K[3 * i + j]), expr_mul(c, one_c, expr_mul(c, k[i], k[j])));
            R[3 * i + j] = i == j ? expr_add(c, co, t) : t;
        }
}

/* ---- the model keys ---- */

static int parse_frames(struct bctx *b, const json_t *arr)
{
    expr_ctx *c = b->c;
    if (!arr)
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) > BODIES_MAX_ITEMS) {
        err(b, "model.frames", "must be an array of at most %d {\"name\", \"parent\", \"rotations\"}",
            BODIES_MAX_ITEMS);
        return -1;
    }
    for (size_t fi = 0; fi < json_array_size(arr); fi++) {
        const json_t *f = json_array_get(arr, fi);
        char path[96];
        snprintf(path, sizeof path, "model.frames[%zu]", fi);
        if (!json_is_object(f)) {
            err(b, path, "must be an object {\"name\", \"parent\", \"rotations\"}");
            continue;
        }
        if (new_name(b, f, path, 1) < 0)
            continue;
        int parent = ref_frame(b, f, "parent", "N", path);
        if (parent < 0)
            continue;
        const json_t *rots = json_object_get(f, "rotations");
        char rpath[128];
        snprintf(rpath, sizeof rpath, "%s.rotations", path);
        if (!json_is_array(rots) || json_array_size(rots) > 16) {
            err(b, rpath, "required: an array of at most 16 simple rotations {\"axis\", \"angle\"}");
            continue;
        }
        struct frame fr;
        snprintf(fr.name, sizeof fr.name, "%s", json_string_value(json_object_get(f, "name")));
        fr.parent = parent;
        fr.depth = b->frames[parent].depth + 1;
        fr.spin_axis = -1;
        memcpy(fr.w_par, b->frames[parent].w, sizeof fr.w_par);
        for (int i = 0; i < 9; i++)
            fr.E[i] = expr_num(c, i % 4 == 0 ? 1.0 : 0.0);
        memcpy(fr.R, b->frames[parent].R, sizeof fr.R);
        memcpy(fr.w, b->frames[parent].w, sizeof fr.w);
        int ok = 1;
        for (size_t ri = 0; ri < json_array_size(rots); ri++) {
            const json_t *r = json_array_get(rots, ri);
            char p[160], pa[176];
            snprintf(p, sizeof p, "%s[%zu]", rpath, ri);
            if (!json_is_object(r)) {
                err(b, p, "must be an object {\"axis\": \"x\"|\"y\"|\"z\"|[a, b, c], \"angle\": expression}");
                ok = 0;
                continue;
            }
            expr *k[3], *a;
            snprintf(pa, sizeof pa, "%s.axis", p);
            if (parse_axis(b, json_object_get(r, "axis"), pa, k) < 0) {
                ok = 0;
                continue;
            }
            snprintf(pa, sizeof pa, "%s.angle", p);
            a = parse_expr(b, json_object_get(r, "angle"), pa);
            if (!a) {
                ok = 0;
                continue;
            }
            expr *E[9], *R[9], *w[3], *Erel[9], *Ek[3], *ad = expr_dt(c, a);
            /* in the parent's components the rotation adds (E_before k) a' (E k = k) */
            matvec(c, fr.E, k, Ek);
            rotation(c, k, a, E);
            matmul(c, fr.R, E, R);
            matmul(c, fr.E, E, Erel);
            memcpy(fr.E, Erel, sizeof Erel);
            matTvec(c, E, fr.w, w);
            for (int i = 0; i < 3; i++)
                fr.w[i] = expr_add(c, w[i], expr_mul(c, k[i], ad));
            for (int i = 0; i < 3; i++)
                fr.w_par[i] = expr_add(c, fr.w_par[i], expr_mul(c, Ek[i], ad));
            int sign_unused;
            const json_t *axj = json_object_get(r, "axis");
            fr.spin_axis = json_array_size(rots) == 1 && json_is_string(axj)
                               ? axis_letter(json_string_value(axj), &sign_unused)
                               : -1;
            memcpy(fr.R, R, sizeof R);
        }
        if (ok)
            b->frames[b->nf++] = fr;
    }
    return 0;
}

static int parse_points(struct bctx *b, const json_t *arr)
{
    expr_ctx *c = b->c;
    if (!arr)
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) > BODIES_MAX_ITEMS) {
        err(b, "model.points",
            "must be an array of at most %d {\"name\", \"parent\", \"frame\", \"position\"}",
            BODIES_MAX_ITEMS);
        return -1;
    }
    for (size_t pi = 0; pi < json_array_size(arr); pi++) {
        const json_t *p = json_array_get(arr, pi);
        char path[96], vp[128];
        snprintf(path, sizeof path, "model.points[%zu]", pi);
        if (!json_is_object(p)) {
            err(b, path, "must be an object {\"name\", \"parent\", \"frame\", \"position\"}");
            continue;
        }
        if (new_name(b, p, path, 0) < 0)
            continue;
        int parent = 0;
        if (json_object_get(p, "parent"))
            parent = ref_point(b, p, "parent", path);
        int f = ref_frame(b, p, "frame", "N", path);
        expr *x[3];
        snprintf(vp, sizeof vp, "%s.position", path);
        if (parse_vec3(b, json_object_get(p, "position"), vp, x) < 0 || parent < 0 || f < 0)
            continue;
        struct point pt = {0};
        snprintf(pt.name, sizeof pt.name, "%s", json_string_value(json_object_get(p, "name")));
        pt.parent = parent;
        pt.frame = f;
        memcpy(pt.p, x, sizeof x);
        expr *xn[3];
        matvec(c, b->frames[f].R, x, xn);
        for (int i = 0; i < 3; i++)
            pt.r[i] = expr_add(c, b->points[parent].r[i], xn[i]);
        b->points[b->npt++] = pt;
    }
    return 0;
}

/* v (components in frame `from`) into components in frame `to`: up the tree from
 * `from` to the common ancestor (parent = E own), then down to `to` (own = E^T parent).
 * Only the relative rotations along the path appear, so a velocity expressed in a
 * yawed and rolled frame carries no yaw. */
static void express(struct bctx *b, expr *const v[3], int from, int to, expr *out[3])
{
    expr_ctx *c = b->c;
    expr *cur[3] = {v[0], v[1], v[2]}, *tmp[3];
    int down[BODIES_MAX_ITEMS + 1], nd = 0;
    int a = from, t = to;
    while (b->frames[t].depth > b->frames[a].depth) {
        down[nd++] = t;
        t = b->frames[t].parent;
    }
    while (a != t) {
        if (b->frames[a].depth >= b->frames[t].depth) {
            matvec(c, b->frames[a].E, cur, tmp);
            memcpy(cur, tmp, sizeof tmp);
            a = b->frames[a].parent;
        } else {
            down[nd++] = t;
            t = b->frames[t].parent;
        }
    }
    while (nd > 0) {
        matTvec(c, b->frames[down[--nd]].E, cur, tmp);
        memcpy(cur, tmp, sizeof tmp);
    }
    memcpy(out, cur, sizeof cur);
}

/* The velocity of point p in N, in the components of the frame its position is
 * given in: v_P = v_parent + d/dt(p) + w_F x p, with p the components in frame F of
 * the position from the parent point, d/dt their total time derivative (through q'
 * and t) and w_F the angular velocity of F. This is the time derivative of the
 * position vector r_P = r_parent + p_F differentiated in F (the transport theorem),
 * so it equals the derivative of the inertial components of r_P exactly, with
 * smaller expressions. */
static expr **velocity(struct bctx *b, int p)
{
    struct point *pt = &b->points[p];
    expr_ctx *c = b->c;
    if (pt->v[0])
        return pt->v;
    int f = pt->frame;
    expr **vp = velocity(b, pt->parent), *vpf[3], *wxp[3];
    express(b, vp, b->points[pt->parent].frame, f, vpf);
    cross3(c, b->frames[f].w, pt->p, wxp);
    for (int i = 0; i < 3; i++)
        pt->v[i] = expr_add(c, vpf[i], expr_add(c, expr_dt(c, pt->p[i]), wxp[i]));
    return pt->v;
}

/* Keeps a quantity that depends on parameters for the checks of a request that
 * overrides them (bodies_geom). Out of memory: the quantity is not kept. */
static void note_geom(struct bctx *b, int kind, expr *const *e, int n, const char *path)
{
    int dep = 0;
    for (int i = 0; i < n; i++)
        dep |= expr_depends_class(b->c, e[i], SYM_PARAM);
    if (!dep)
        return;
    bodies_geom *g = realloc(b->out->geom, (size_t)(b->out->n_geom + 1) * sizeof *g);
    if (!g)
        return;
    b->out->geom = g;
    g += b->out->n_geom++;
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->n_roots = n;
    for (int i = 0; i < n; i++)
        g->e[i] = e[i];
    snprintf(g->path, sizeof g->path, "%s", path);
}

/* A positive mass: an expression that is positive at the parameter values. */
static expr *parse_mass(struct bctx *b, const json_t *obj, const char *path)
{
    char p[128];
    snprintf(p, sizeof p, "%s.mass", path);
    const json_t *v = json_object_get(obj, "mass");
    if (!v) {
        err(b, p, "required: the mass (a positive number or parameter expression)");
        return NULL;
    }
    expr *m = parse_expr(b, v, p);
    if (!m)
        return NULL;
    if (expr_depends_class(b->c, m, SYM_COORD) || expr_depends_class(b->c, m, SYM_TIME)) {
        err(b, p, "must be constant (numbers and parameters)");
        return NULL;
    }
    double mv = num_value(b, m);
    if (!(mv > 0) || !isfinite(mv)) {
        err(b, p, "must be positive: it is %.17g at the parameter values", mv);
        return NULL;
    }
    note_geom(b, BODIES_GEOM_MASS, &m, 1, p);
    return m;
}

/* A length that must be positive (a radius): an expression of numbers and parameters
 * that is positive and finite at the parameter values (`what` names it in the message).
 * One that depends on the configuration or time is taken as given. Returns e, or NULL
 * with an error. */
static expr *positive_length(struct bctx *b, expr *e, const char *path, const char *what)
{
    if (!e || expr_depends_class(b->c, e, SYM_COORD) || expr_depends_class(b->c, e, SYM_TIME))
        return e;
    double v = num_value(b, e);
    if (!(v > 0) || !isfinite(v)) {
        err(b, path, "%s must be positive: it is %.17g at the parameter values", what, v);
        return NULL;
    }
    note_geom(b, BODIES_GEOM_LENGTH, &e, 1, path);
    return e;
}

/* The inertia tensor about the mass center in body axes: [[Ixx, Ixy, Ixz], [Ixy, Iyy,
 * Iyz], [Ixz, Iyz, Izz]], symmetric and positive semi-definite satisfying the triangle
 * inequalities (checked at the parameter values). */
static int parse_inertia(struct bctx *b, const json_t *obj, const char *path, expr *I[9])
{
    char p[128];
    snprintf(p, sizeof p, "%s.inertia", path);
    const json_t *v = json_object_get(obj, "inertia");
    if (!json_is_array(v) || json_array_size(v) != 3) {
        err(b, p, "required: a symmetric 3x3 array [[Ixx, Ixy, Ixz], [Ixy, Iyy, Iyz], [Ixz, Iyz, Izz]]");
        return -1;
    }
    int ok = 0;
    for (int i = 0; i < 3; i++) {
        char rp[160];
        snprintf(rp, sizeof rp, "%s[%d]", p, i);
        expr *row[3];
        if (parse_vec3(b, json_array_get(v, i), rp, row) < 0) {
            ok = -1;
            continue;
        }
        for (int j = 0; j < 3; j++)
            I[3 * i + j] = row[j];
    }
    if (ok < 0)
        return -1;
    double a[9];
    for (int i = 0; i < 9; i++) {
        if (expr_depends_class(b->c, I[i], SYM_COORD) || expr_depends_class(b->c, I[i], SYM_TIME)) {
            err(b, p, "must be constant (numbers and parameters): body axes are fixed in the body");
            return -1;
        }
        a[i] = num_value(b, I[i]);
    }
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (!(fabs(a[3 * i + j] - a[3 * j + i]) <= 1e-12 * (fabs(a[3 * i + j]) + fabs(a[3 * j + i])) ||
                  I[3 * i + j] == I[3 * j + i])) {
                err(b, p, "must be symmetric: [%d][%d] = %.17g but [%d][%d] = %.17g", i, j, a[3 * i + j], j,
                    i, a[3 * j + i]);
                return -1;
            }
    /* positive semi-definite: the leading minors of I + eps*trace (Sylvester, with a
     * rounding margin) */
    double tr = a[0] + a[4] + a[8], eps = 1e-12 * fabs(tr);
    double m1 = a[0] + eps, m2 = (a[0] + eps) * (a[4] + eps) - a[1] * a[3];
    double m3 = (a[0] + eps) * ((a[4] + eps) * (a[8] + eps) - a[5] * a[7]) -
                a[1] * (a[3] * (a[8] + eps) - a[5] * a[6]) + a[2] * (a[3] * a[7] - (a[4] + eps) * a[6]);
    if (!(tr > 0) || !(m1 >= 0) || !(m2 >= 0) || !(m3 >= 0) || a[4] + eps < 0 || a[8] + eps < 0) {
        err(b, p,
            "must be positive (semi-)definite: diagonal %.6g, %.6g, %.6g; leading minors %.6g, %.6g, %.6g",
            a[0], a[4], a[8], m1, m2, m3);
        return -1;
    }
    note_geom(b, BODIES_GEOM_INERTIA, I, 9, p);
    return 0;
}

/* Every JSON integer in v becomes a real (0 and 0.0 print alike in the canonical form). */
static void reals(json_t *v)
{
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *it = json_array_get(v, i);
            if (json_is_integer(it))
                json_array_set_new(v, i, json_real((double)json_integer_value(it)));
            else
                reals(it);
        }
    } else if (json_is_object(v)) {
        const char *key;
        json_t *it;
        json_object_foreach(v, key, it)
        {
            if (json_is_integer(it))
                json_object_set_new(v, key, json_real((double)json_integer_value(it)));
            else
                reals(it);
        }
    }
}

/* h = |n x a| = sqrt(1 - (n.a)^2). When n.a is +-cos(u) or +-sin(u) (a disk tilted
 * by one angle), h is sin(u) or cos(u) on the branch where that is positive, which
 * is the branch of a disk above its contact (checked at the test configurations of
 * zero_on_branch); the equations then keep their trigonometric form instead of
 * sqrt(sin(u)^2). */
static expr *contact_h(struct bctx *b, expr *na)
{
    expr_ctx *c = b->c;
    expr *h = expr_fun(c, FN_SQRT, expr_sub(c, expr_num(c, 1.0), expr_powi(c, na, 2)));
    expr *rest = NULL;
    double k = expr_split_coeff(c, na, &rest);
    if (fabs(k) != 1.0 || !rest || rest->kind != EXPR_FUN || (rest->fn != FN_SIN && rest->fn != FN_COS))
        return h;
    expr *alt = expr_fun(c, rest->fn == FN_SIN ? FN_COS : FN_SIN, rest->args[0]);
    /* the same value as the sqrt, and positive, at the branch's test points */
    if (!zero_on_branch(b, expr_sub(c, h, alt)))
        return h;
    return alt;
}

/* The sums that become T and V. */
struct energy {
    expr **Tt, **Vt;
    int nT, nV;
};

/* The root frame N and the origin O. */
static void bodies_roots(struct bctx *b)
{
    expr_ctx *c = b->c;
    struct frame *N = &b->frames[b->nf++];
    strcpy(N->name, "N");
    N->parent = -1;
    for (int i = 0; i < 9; i++)
        N->R[i] = N->E[i] = expr_num(c, i % 4 == 0 ? 1.0 : 0.0);
    for (int i = 0; i < 3; i++)
        N->w[i] = expr_num(c, 0.0);
    struct point *O = &b->points[b->npt++];
    strcpy(O->name, "O");
    O->parent = -1;
    for (int i = 0; i < 3; i++)
        O->p[i] = O->r[i] = O->v[i] = expr_num(c, 0.0);
}

/* gravity: {"frame", "vector"}, into g in N's components (zero when absent). */
static void parse_gravity(struct bctx *b, const json_t *gj, expr *g[3])
{
    expr_ctx *c = b->c;
    if (!gj)
        return;
    expr *gv[3];
    int f = json_is_object(gj) ? ref_frame(b, gj, "frame", "N", "model.gravity") : -1;
    if (!json_is_object(gj))
        err(b, "model.gravity", "must be an object {\"frame\", \"vector\": [gx, gy, gz]}");
    else if (parse_vec3(b, json_object_get(gj, "vector"), "model.gravity.vector", gv) == 0 && f >= 0) {
        matvec(c, b->frames[f].R, gv, g);
        for (int i = 0; i < 3; i++)
            if (expr_depends_class(c, g[i], SYM_COORD) || expr_depends_class(c, g[i], SYM_TIME)) {
                err(b, "model.gravity", "must be constant in N: give it in N or in a frame fixed in N");
                break;
            }
    }
}

/* The angular velocity to pair with inertia I of a body in frame f: a body symmetric
 * about the one axis its frame turns about (a wheel) has the same inertia tensor in
 * its parent's axes, so w is taken there, free of the spin angle. */
static expr **body_omega(struct bctx *b, int f, expr *const I[9])
{
    int k = b->frames[f].spin_axis;
    if (k < 0)
        return b->frames[f].w;
    int i1 = (k + 1) % 3, i2 = (k + 2) % 3;
    int sym = I[3 * i1 + i1] == I[3 * i2 + i2];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            if (i != j && !expr_is_num(I[3 * i + j], 0.0))
                sym = 0;
    return sym ? b->frames[f].w_par : b->frames[f].w;
}

/* model.bodies: each body's kinetic and potential energy into E. */
static void parse_bodies(struct bctx *b, const json_t *bodies, expr *const g[3], struct energy *E)
{
    expr_ctx *c = b->c;
    if (bodies && (!json_is_array(bodies) || json_array_size(bodies) > BODIES_MAX_ITEMS)) {
        err(b, "model.bodies",
            "must be an array of at most %d {\"name\", \"mass\", \"mass_center\", \"frame\", \"inertia\"}",
            BODIES_MAX_ITEMS);
        return;
    }
    for (size_t bi = 0; bi < json_array_size(bodies); bi++) {
        const json_t *bj = json_array_get(bodies, bi);
        char path[96];
        snprintf(path, sizeof path, "model.bodies[%zu]", bi);
        if (!json_is_object(bj)) {
            err(b, path, "must be an object {\"name\", \"mass\", \"mass_center\", \"frame\", \"inertia\"}");
            continue;
        }
        expr *m = parse_mass(b, bj, path);
        int p = ref_point(b, bj, "mass_center", path);
        int f = ref_frame(b, bj, "frame", NULL, path);
        expr *I[9];
        if (parse_inertia(b, bj, path, I) < 0 || !m || p < 0 || f < 0)
            continue;
        expr **v = velocity(b, p), **w = body_omega(b, f, I);
        expr *Iw[3];
        matvec(c, I, w, Iw);
        expr *half = expr_num(c, 0.5);
        E->Tt[E->nT++] = expr_mul(c, expr_mul(c, half, m), dot3(c, v, v));
        E->Tt[E->nT++] = expr_mul(c, half, dot3(c, w, Iw));
        E->Vt[E->nV++] = expr_neg(c, expr_mul(c, m, dot3(c, g, b->points[p].r)));
    }
}

/* model.particles: each particle's kinetic and potential energy into E. */
static void parse_particles(struct bctx *b, const json_t *parts, expr *const g[3], struct energy *E)
{
    expr_ctx *c = b->c;
    if (parts && (!json_is_array(parts) || json_array_size(parts) > BODIES_MAX_ITEMS)) {
        err(b, "model.particles", "must be an array of at most %d {\"name\", \"mass\", \"point\"}",
            BODIES_MAX_ITEMS);
        return;
    }
    for (size_t pi = 0; pi < json_array_size(parts); pi++) {
        const json_t *pj = json_array_get(parts, pi);
        char path[96];
        snprintf(path, sizeof path, "model.particles[%zu]", pi);
        if (!json_is_object(pj)) {
            err(b, path, "must be an object {\"name\", \"mass\", \"point\"}");
            continue;
        }
        expr *m = parse_mass(b, pj, path);
        int p = ref_point(b, pj, "point", path);
        if (!m || p < 0)
            continue;
        expr **v = velocity(b, p);
        E->Tt[E->nT++] = expr_mul(c, expr_mul(c, expr_num(c, 0.5), m), dot3(c, v, v));
        E->Vt[E->nV++] = expr_neg(c, expr_mul(c, m, dot3(c, g, b->points[p].r)));
    }
}

/* One rolling disk as read: its frame, center, axes, radii and names. */
struct disk {
    char path[96], p[128]; /* p: the last field's path, for the error after the contact */
    const char *name;
    const json_t *dep;
    int f, cp, sign, axis, nsign, nk;
    expr *r, *rho;
};

/* Reads the fields of rolling disk dj into D; -1 when one is missing or wrong. */
static int disk_read(struct bctx *b, const json_t *dj, struct disk *D)
{
    expr_ctx *c = b->c;
    char *p = D->p;
    const char *path = D->path;
    if (!json_is_object(dj)) {
        err(b, path, "must be an object {\"name\", \"frame\", \"axis\", \"center\", \"radius\"}");
        return -1;
    }
    const json_t *nm = json_object_get(dj, "name");
    snprintf(p, sizeof D->p, "%s.name", path);
    if (!json_is_string(nm) || strlen(json_string_value(nm)) > 40) {
        err(b, p, "required: a name (at most 40 characters) for the generated constraints");
        return -1;
    }
    D->f = ref_frame(b, dj, "frame", NULL, path);
    D->cp = ref_point(b, dj, "center", path);
    D->sign = 1, D->axis = -1, D->nsign = 1, D->nk = 2;
    const json_t *ax = json_object_get(dj, "axis");
    snprintf(p, sizeof D->p, "%s.axis", path);
    if (!json_is_string(ax) || (D->axis = axis_letter(json_string_value(ax), &D->sign)) < 0)
        err(b, p, "required: the disk's symmetry (spin) axis in its frame: \"x\", \"y\" or \"z\"");
    const json_t *gn = json_object_get(dj, "ground_normal");
    snprintf(p, sizeof D->p, "%s.ground_normal", path);
    if (gn && (!json_is_string(gn) || (D->nk = axis_letter(json_string_value(gn), &D->nsign)) < 0))
        err(b, p, "must be an axis of N pointing from the ground to the disk: \"z\", \"-z\", ...");
    snprintf(p, sizeof D->p, "%s.radius", path);
    D->r = positive_length(b, parse_expr(b, json_object_get(dj, "radius"), p), p, "the radius");
    D->rho = expr_num(c, 0.0);
    if (json_object_get(dj, "tube_radius")) {
        snprintf(p, sizeof D->p, "%s.tube_radius", path);
        D->rho = positive_length(b, parse_expr(b, json_object_get(dj, "tube_radius"), p), p,
                                 "the tube radius (omit it for a thin disk)");
    }
    const json_t *fr = json_object_get(dj, "friction");
    snprintf(p, sizeof D->p, "%s.friction", path);
    if (fr && !(json_is_number(fr) && json_number_value(fr) >= 0 && isfinite(json_number_value(fr))))
        err(b, p,
            "must be a number >= 0: the coefficient of friction at the contact (sim.c reports "
            "the contact forces and when |tangential| > friction * normal)");
    const json_t *dep = json_object_get(dj, "dependent");
    snprintf(p, sizeof D->p, "%s.dependent", path);
    if (dep && !json_is_string(dep))
        err(b, p, "must be the name of a coordinate");
    if (D->f < 0 || D->cp < 0 || D->axis < 0 || D->nk < 0 || !D->r || !D->rho ||
        (dep && !json_is_string(dep)))
        return -1;
    D->name = json_string_value(nm);
    D->dep = dep;
    return 0;
}

/* The disk's contact height fpos and the rolling and lateral slip velocities. */
static void disk_slip(struct bctx *b, const struct disk *D, expr **fpos, expr *slip[2])
{
    expr_ctx *c = b->c;
    int f = D->f, cp = D->cp, sign = D->sign, axis = D->axis, nsign = D->nsign, nk = D->nk;
    expr *r = D->r, *rho = D->rho;
    const struct frame *W = &b->frames[f];
    /* a: the spin axis in N; n.a; h = |n x a| = sqrt(1 - (n.a)^2) */
    expr *a[3];
    for (int i = 0; i < 3; i++)
        a[i] = sign > 0 ? W->R[3 * i + axis] : expr_neg(c, W->R[3 * i + axis]);
    expr *na = nsign > 0 ? a[nk] : expr_neg(c, a[nk]);
    expr *h = contact_h(b, na);
    expr *C = nsign > 0 ? b->points[cp].r[nk] : expr_neg(c, b->points[cp].r[nk]);
    *fpos = expr_sub(c, expr_sub(c, C, expr_mul(c, r, h)), rho);
    /* The contact point of the disk's material moves with v_C + w x rc, rc = -r (n -
     * (n.a) a) / h. Its components along the ground's unit directions t1 = (a x n) / h
     * (rolling) and t2 = (a - (n.a) n) / h (lateral) simplify, with (a x n).(w x rc)
     * = -r h (w.a) and t2.(w x rc) = -r w.(n x a), to
     *   t1.v = (a x n).v_C / h - r w.a,   t2.v = (a - (n.a) n).v_C / h - r w.(n x a),
     * where w.a and w.(n x a) are taken in the disk's own components. */
    expr *nN[3], *axn[3], *lat[3], *nW[3], *aW[3], *nxaW[3], *nG[3], *aG[3];
    for (int i = 0; i < 3; i++) {
        nN[i] = expr_num(c, i == nk ? nsign : 0.0);
        aW[i] = expr_num(c, i == axis ? sign : 0.0);
    }
    /* v_C comes in the components of the center's frame G: n and a there too */
    expr **vc = velocity(b, cp);
    int G = b->points[cp].frame;
    express(b, nN, 0, G, nG);
    express(b, aW, f, G, aG);
    /* w.(n x a): in the parent's axes when the disk's frame spins about its axis
     * (then a has the same components there and w has no spin angle in it) */
    int spin = W->spin_axis == axis;
    expr *const *wW = spin ? W->w_par : W->w;
    express(b, nN, 0, spin ? W->parent : f, nW);
    cross3(c, aG, nG, axn);
    for (int i = 0; i < 3; i++)
        lat[i] = expr_sub(c, aG[i], expr_mul(c, na, nG[i]));
    cross3(c, nW, aW, nxaW);
    expr *inv_h = expr_powi(c, h, -1);
    expr *wa = sign > 0 ? W->w[axis] : expr_neg(c, W->w[axis]);
    slip[0] = expr_sub(c, expr_mul(c, dot3(c, axn, vc), inv_h), expr_mul(c, r, wa));
    slip[1] = expr_sub(c, expr_mul(c, dot3(c, lat, vc), inv_h), expr_mul(c, r, dot3(c, wW, nxaW)));
    /* A torus (tube radius rho) touches at rc - rho n: with n x t1 = t2 and n x t2 =
     * -t1, w x (-rho n) adds -rho w.t2 and +rho w.t1, i.e. -rho (w.a - (n.a) w.n) / h
     * and -rho w.(n x a) / h. */
    if (!expr_is_num(rho, 0.0)) {
        expr *wn = dot3(c, wW, nW), *wa2 = dot3(c, wW, aW);
        expr *wt2 = expr_mul(c, expr_sub(c, wa2, expr_mul(c, na, wn)), inv_h);
        expr *wt1 = expr_mul(c, dot3(c, wW, nxaW), inv_h);
        slip[0] = expr_sub(c, slip[0], expr_mul(c, rho, wt2));
        slip[1] = expr_sub(c, slip[1], expr_mul(c, rho, wt1));
    }
}

/* The constraints of one disk that do not vanish identically into out->vel and out->pos. */
static void disk_constraints(struct bctx *b, const struct disk *D, expr *fpos, expr *const slip[2])
{
    bodies_result *out = b->out;
    static const char *const dir[2] = {"rolling", "lateral"};
    for (int i = 0; i < 2; i++) {
        if (zero_on_branch(b, slip[i]))
            continue;
        bodies_constraint *bc = &out->vel[out->n_vel++];
        snprintf(bc->name, sizeof bc->name, "%s_%s", D->name, dir[i]);
        bc->f = slip[i];
        snprintf(bc->path, sizeof bc->path, "%s", D->path);
    }
    if (!zero_on_branch(b, fpos)) {
        bodies_constraint *bc = &out->pos[out->n_pos++];
        snprintf(bc->name, sizeof bc->name, "%s_contact", D->name);
        bc->f = fpos;
        snprintf(bc->path, sizeof bc->path, "%s", D->path);
        if (D->dep)
            snprintf(bc->dependent, sizeof bc->dependent, "%s", json_string_value(D->dep));
    } else if (D->dep) {
        err(b, D->p,
            "the contact condition of this disk holds identically (its height is fixed by "
            "the coordinates): nothing to solve for");
    }
}

/* rolling disks: {"name", "frame", "axis", "center", "radius", "ground_normal", "dependent",
 * "friction"} (friction is read by the run: contact.h) */
static void parse_disks(struct bctx *b, const json_t *disks)
{
    if (disks && (!json_is_array(disks) || json_array_size(disks) > BODIES_MAX_ITEMS)) {
        err(b, "model.rolling_disks",
            "must be an array of at most %d {\"name\", \"frame\", \"axis\", \"center\", \"radius\"}",
            BODIES_MAX_ITEMS);
        return;
    }
    for (size_t di = 0; di < json_array_size(disks); di++) {
        struct disk D;
        snprintf(D.path, sizeof D.path, "model.rolling_disks[%zu]", di);
        if (disk_read(b, json_array_get(disks, di), &D) < 0)
            continue;
        expr *fpos, *slip[2];
        disk_slip(b, &D, &fpos, slip);
        disk_constraints(b, &D, fpos, slip);
    }
}

/* A copy of the bodies keys of given, every integer a real: the expressions in it are
 * replaced by their canonical prints as they are parsed (the model's canonical form). */
static json_t *bodies_canonical(const json_t *given)
{
    json_t *canonical = json_object();
    if (!canonical)
        return NULL;
    for (int i = 0; bodies_keys[i]; i++) {
        const json_t *v = json_object_get(given, bodies_keys[i]);
        if (v)
            json_object_set_new(canonical, bodies_keys[i], json_deep_copy(v));
    }
    reals(canonical);
    return canonical;
}

int bodies_build(expr_ctx *c, const json_t *given, size_t max_expr_chars, const int *sym_p,
                 const double *param_values, int np, json_t *problem, bodies_result *out)
{
    memset(out, 0, sizeof *out);
    out->T = expr_num(c, 0.0);
    out->V = expr_num(c, 0.0);
    for (int i = 0; bodies_keys[i]; i++)
        if (json_object_get(given, bodies_keys[i]))
            out->present = 1;
    if (!out->present)
        return 0;
    out->canonical = bodies_canonical(given);
    if (!out->canonical)
        return -1;
    const json_t *model = out->canonical;
    struct bctx b = {0};
    b.c = c;
    b.max_chars = max_expr_chars;
    b.problem = problem;
    b.out = out;
    int ns = expr_sym_count(c);
    b.vals = malloc((ns + 1) * sizeof *b.vals);
    b.frames = calloc(BODIES_MAX_ITEMS + 1, sizeof *b.frames);
    b.points = calloc(BODIES_MAX_ITEMS + 1, sizeof *b.points);
    out->vel = calloc(2 * BODIES_MAX_ITEMS + 1, sizeof *out->vel);
    out->pos = calloc(BODIES_MAX_ITEMS + 1, sizeof *out->pos);
    if (!b.vals || !b.frames || !b.points || !out->vel || !out->pos) {
        free(b.vals);
        free(b.frames);
        free(b.points);
        return -1;
    }
    for (int s = 0; s < ns; s++)
        b.vals[s] = 0.5;
    for (int i = 0; i < np; i++)
        b.vals[sym_p[i]] = param_values[i];

    bodies_roots(&b);
    parse_frames(&b, json_object_get(model, "frames"));
    parse_points(&b, json_object_get(model, "points"));
    expr *g[3] = {expr_num(c, 0.0), expr_num(c, 0.0), expr_num(c, 0.0)};
    parse_gravity(&b, json_object_get(model, "gravity"), g);

    struct energy E = {calloc(4 * BODIES_MAX_ITEMS + 1, sizeof *E.Tt),
                       calloc(2 * BODIES_MAX_ITEMS + 1, sizeof *E.Vt), 0, 0};
    int rc = -1;
    if (E.Tt && E.Vt) {
        parse_bodies(&b, json_object_get(model, "bodies"), g, &E);
        parse_particles(&b, json_object_get(model, "particles"), g, &E);
        parse_disks(&b, json_object_get(model, "rolling_disks"));
        out->T = expr_sum(c, E.Tt, E.nT);
        out->V = expr_sum(c, E.Vt, E.nV);
        rc = b.errors ? -1 : 0;
    }
    free(E.Tt);
    free(E.Vt);
    free(b.vals);
    free(b.frames);
    free(b.points);
    return rc;
}

void bodies_result_free(bodies_result *r)
{
    json_decref(r->canonical);
    free(r->vel);
    free(r->pos);
    free(r->geom);
    memset(r, 0, sizeof *r);
}
