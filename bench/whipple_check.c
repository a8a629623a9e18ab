/* whipple_check.c — checks bench/models/whipple-hand.json against the published
 * benchmark: Meijaard, Papadopoulos, Ruina, Schwab (2007), "Linearized dynamics
 * equations for the balance and steer of a bicycle: a benchmark and review", Proc. R.
 * Soc. A 463, 1955-1982 (its Table 1 parameters are the model's).
 *
 * The engine compiles the model (generous compile limits: on a slow compiler this is
 * the point, not the speed), then the right-hand side the integrator uses (hamel_rhs)
 * is linearised by central differences about upright straight running at forward speed
 * v (rear wheel rate -v/rR, everything else 0) in the states (lean, steer, lean rate,
 * steer rate); by the bicycle's left-right symmetry the pitch, yaw and wheel states
 * do not enter at first order. Checked, to 1e-5 relative:
 *   the 4x4 matrix A(v), v = 0..6 m/s, against the benchmark's as tabulated in SymPy's
 *   own test of its bicycle (sympy/physics/mechanics/tests/test_kane3.py), up to the
 *   sign conventions of lean and steer;
 *   v = 0: eigenvalues +-3.13164324790210 and +-5.53094371765393 (the paper, section 4);
 *   the weave and capsize speeds (bisection on the largest real part) against the same
 *   speeds of the reference matrix (the paper: 4.292 and 6.024 m/s).
 * Prints the figures and exits 0 when each agrees, 1 otherwise, 2 when the model does
 * not compile.
 *
 * Usage: bench-whipple_check [bench/models/whipple-hand.json]
 */
#include <gsl/gsl_eigen.h>
#include <gsl/gsl_matrix.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "hamel.h"
#include "model.h"

#define WC_TOL 1e-5
#define WC_H 1e-6

typedef struct wc {
    engine_model *m;
    hamel_ws *ws;
    int roll, steer, rw, u_roll, u_steer, u_rw; /* state indices */
    double rR;
} wc;

/* The eigenvalues of a 4x4 matrix into re[4], im[4]. Returns 0 or -1. */
static int wc_eigs(double M[4][4], double re[4], double im[4])
{
    gsl_matrix_view A = gsl_matrix_view_array(&M[0][0], 4, 4);
    gsl_vector_complex *ev = gsl_vector_complex_alloc(4);
    gsl_eigen_nonsymm_workspace *ew = gsl_eigen_nonsymm_alloc(4);
    int rc = gsl_eigen_nonsymm(&A.matrix, ev, ew) == 0 ? 0 : -1;

    for (int i = 0; i < 4 && rc == 0; i++) {
        re[i] = GSL_REAL(gsl_vector_complex_get(ev, (size_t)i));
        im[i] = GSL_IMAG(gsl_vector_complex_get(ev, (size_t)i));
    }
    gsl_eigen_nonsymm_free(ew);
    gsl_vector_complex_free(ev);
    return rc;
}

/* The Jacobian J of (roll', steer', roll_rate', steer_rate') with respect to (roll,
 * steer, roll_rate, steer_rate) at speed v by central differences of hamel_rhs.
 * Returns 0, or nonzero where the right-hand side fails. */
static int wc_jacobian(const wc *w, double v, double J[4][4])
{
    const int dim = w->m->n + w->m->k;
    const int idx[4] = {w->roll, w->steer, w->u_roll, w->u_steer};
    double y[64], fp[64], fm[64];
    int rc = 0;

    for (int c = 0; c < 4 && rc == 0; c++) {
        for (int i = 0; i < dim; i++)
            y[i] = 0;
        y[w->u_rw] = -v / w->rR;
        y[idx[c]] = WC_H;
        rc |= hamel_rhs(0, y, fp, w->ws);
        y[idx[c]] = -WC_H;
        rc |= hamel_rhs(0, y, fm, w->ws);
        for (int r = 0; r < 4; r++)
            J[r][c] = (fp[idx[r]] - fm[idx[r]]) / (2 * WC_H);
    }
    return rc;
}

/* The reference: the linearised benchmark bicycle in (lean, steer, lean rate, steer
 * rate) at speed v, as tabulated in SymPy's test of its own bicycle model
 * (sympy/physics/mechanics/tests/test_kane3.py, checked there against the paper's
 * eigenvalues to 1e-12). */
static void wc_reference(double v, double R[4][4])
{
    const double ref[4][4] = {
        {0, 0, 1, 0},
        {0, 0, 0, 1},
        {9.48977444677355, -0.891197738059089 * v * v - 0.571523173729245, -0.105522449805691 * v,
         -0.330515398992311 * v},
        {11.7194768719633, -1.97171508499972 * v * v + 30.9087533932407, 3.67680523332152 * v,
         -3.08486552743311 * v},
    };
    memcpy(R, ref, sizeof ref);
}

/* The largest real part of the eigenvalues at speed v: of the model (w) or, with
 * w == NULL, of the reference. */
static double wc_max_re(const wc *w, double v)
{
    double M[4][4], re[4], im[4], mx = -INFINITY;
    if (w != NULL) {
        if (wc_jacobian(w, v, M) != 0)
            return NAN;
    } else
        wc_reference(v, M);
    if (wc_eigs(M, re, im) != 0)
        return NAN;
    for (int i = 0; i < 4; i++)
        if (re[i] > mx)
            mx = re[i];
    return mx;
}

/* The speed in [lo, hi] where the largest real part changes sign. */
static double wc_bisect(const wc *w, double lo, double hi)
{
    double flo = wc_max_re(w, lo);
    for (int it = 0; it < 60; it++) {
        double mid = 0.5 * (lo + hi), fm = wc_max_re(w, mid);
        if ((fm > 0) == (flo > 0)) {
            lo = mid;
            flo = fm;
        } else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

static int cmp_abs(const void *a, const void *b)
{
    double x = fabs(*(const double *)a), y = fabs(*(const double *)b);
    return (x > y) - (x < y);
}

static int check(const char *what, double got, double want)
{
    double rel = fabs(got - want) / fabs(want);
    int ok = rel <= WC_TOL;
    printf("  %-28s %.10f  benchmark %.10f  rel %.1e  %s\n", what, got, want, rel, ok ? "ok" : "MISMATCH");
    return ok;
}

int main(int argc, char **argv)
{
    const char *file = argc > 1 ? argv[1] : "bench/models/whipple-hand.json";
    json_error_t jerr;
    json_t *cj = json_load_file(file, 0, &jerr), *problem = NULL;
    engine_limits lim = engine_default_limits;
    wc w = {0};
    struct timespec t0, t1;

    if (cj == NULL) {
        fprintf(stderr, "whipple_check: %s: %s\n", file, jerr.text);
        return 2;
    }
    engine_init();
    lim.max_compile_seconds = 600;
    lim.max_compile_bytes = (size_t)4 << 30;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = engine_model_compile(json_object_get(cj, "model"), &lim, &w.m, &problem);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc != 0) {
        printf("whipple check: the model does not compile: %s\n",
               json_string_value(json_object_get(problem, "detail")));
        json_decref(problem);
        json_decref(cj);
        return 2;
    }
    w.ws = hamel_ws_new(w.m, w.m->param_values);
    w.roll = model_coord_index(w.m, "roll");
    w.steer = model_coord_index(w.m, "steer");
    w.u_roll = w.m->n + model_speed_index(w.m, "roll_rate");
    w.u_steer = w.m->n + model_speed_index(w.m, "steer_rate");
    w.u_rw = w.m->n + model_speed_index(w.m, "rear_wheel_rate");
    w.rR = w.m->param_values[model_param_index(w.m, "rR")];
    printf("whipple check (Meijaard et al. 2007), model compiled in %.0f ms:\n",
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6);

    /* the model's Jacobian against the reference at v = 0..6 m/s, up to the sign
     * conventions of lean and steer (a diagonal similarity, which the eigenvalues
     * do not see): the best of the four sign choices */
    double worst[4] = {0, 0, 0, 0}, scale = 0, re[4], im[4], J[4][4], R[4][4];
    int ok = 1;
    for (int v = 0; v <= 6 && ok; v++) {
        ok = wc_jacobian(&w, v, J) == 0;
        wc_reference(v, R);
        for (int sg = 0; sg < 4 && ok; sg++) {
            const double s[4] = {sg & 1 ? -1 : 1, sg & 2 ? -1 : 1, sg & 1 ? -1 : 1, sg & 2 ? -1 : 1};
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) {
                    double d = fabs(J[r][c] - s[r] * s[c] * R[r][c]);
                    if (!(d <= worst[sg]))
                        worst[sg] = d;
                    if (fabs(R[r][c]) > scale)
                        scale = fabs(R[r][c]);
                }
        }
    }
    if (!ok) {
        printf("  the right-hand side failed at upright running\n");
        return 1;
    }
    int best = 0;
    for (int sg = 1; sg < 4; sg++)
        if (worst[sg] < worst[best])
            best = sg;
    double rel = worst[best] / scale;
    printf("  linearised A(v), v = 0..6 m/s, vs the reference (lean sign %+d, steer sign %+d): max |diff| "
           "%.1e relative  %s\n",
           best & 1 ? -1 : 1, best & 2 ? -1 : 1, rel, rel <= WC_TOL ? "ok" : "MISMATCH");
    ok &= rel <= WC_TOL;
    wc_reference(0, R);
    ok &= wc_eigs(R, re, im) == 0;
    wc_jacobian(&w, 0, J);
    ok &= wc_eigs(J, re, im) == 0;
    qsort(re, 4, sizeof re[0], cmp_abs);
    ok &= check("v=0 eigenvalue |lambda_1|", fabs(re[0]), 3.13164324790210);
    ok &= check("v=0 eigenvalue |lambda_2|", fabs(re[2]), 5.53094371765393);
    ok &= check("weave speed v_w (m/s)", wc_bisect(&w, 3.5, 5.0), wc_bisect(NULL, 3.5, 5.0));
    ok &= check("capsize speed v_c (m/s)", wc_bisect(&w, 5.0, 7.0), wc_bisect(NULL, 5.0, 7.0));
    hamel_ws_free(w.ws);
    engine_model_release(w.m);
    json_decref(cj);
    return ok ? 0 : 1;
}
