/* warnings.c — the checks of a run that failed, in words (warnings.h). */
#include "warnings.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define WARN_TOL_FLOOR 1e-6   /* never stricter: rounding accumulates over a long run */
#define WARN_TOL_CEILING 1e-2 /* never looser: a 1 % error is wrong whatever was asked */
#define WARN_TOL_FACTOR 1e3   /* the error a run may accumulate over its rtol */

double warn_tolerance(double rtol)
{
    double t = WARN_TOL_FACTOR * rtol;
    if (!(t <= WARN_TOL_CEILING))
        t = WARN_TOL_CEILING;
    return t < WARN_TOL_FLOOR ? WARN_TOL_FLOOR : t;
}

/* A number of a check; NAN when it is absent or null (a NaN is written as null). */
static double warn__num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void warn__add(json_t *out, const char *code, const char *check, double value, double threshold,
                      const char *message)
{
    json_t *w = json_pack("{s:s, s:s, s:s}", "code", code, "message", message, "check", check);
    if (!w)
        return;
    json_object_set_new(w, "value", isfinite(value) ? json_real(value) : json_null());
    json_object_set_new(w, "threshold", json_real(threshold));
    json_array_append_new(out, w);
}

static void warn__energy(json_t *out, const json_t *energy, double tol, double atol)
{
    if (!json_is_true(json_object_get(energy, "conserved_expected")))
        return;
    double rel = warn__num(energy, "max_rel_drift"), e0 = warn__num(energy, "initial");
    char msg[400];
    if (!isfinite(e0)) { /* a drift "from nan by up to nan" says nothing */
        snprintf(msg, sizeof msg,
                 "the energy T + V is %g at the initial state: T or V is not defined there (the "
                 "logarithm or square root of a negative number, a division by zero, an overflow), so "
                 "its conservation cannot be checked",
                 e0);
        warn__add(out, "energy-drift", "checks.energy.initial", e0, tol, msg);
        return;
    }
    /* an energy that is zero up to rounding (E0 = 1e-17) drifts "relatively" by its
     * rounding: below the absolute floor nothing is said */
    double floor = WARN_TOL_FACTOR * atol < WARN_TOL_FLOOR ? WARN_TOL_FACTOR * atol : WARN_TOL_FLOOR;
    if (rel <= tol || warn__num(energy, "max_abs_drift") <= floor)
        return;
    snprintf(msg, sizeof msg,
             "the energy should be conserved but moved from its initial %.6g by up to %.3g (%.3g "
             "relative), more than %.3g relative: the trajectory is not trustworthy (tighten "
             "integrator.rtol, or the model's equations are wrong)",
             warn__num(energy, "initial"), warn__num(energy, "max_abs_drift"), rel, tol);
    warn__add(out, "energy-drift", "checks.energy.max_rel_drift", rel, tol, msg);
}

/* The scale of constraint `name`'s coefficients (warn_scale.cons_scale), 1 when unknown. */
static double warn__cons_scale(const warn_scale *sc, const char *name)
{
    for (int j = 0; j < sc->nc && sc->cons_name && sc->cons_scale; j++)
        if (sc->cons_name[j] && !strcmp(sc->cons_name[j], name))
            return sc->cons_scale[j] > 0.0 && isfinite(sc->cons_scale[j]) ? sc->cons_scale[j] : 1.0;
    return 1.0;
}

static void warn__velocity(json_t *out, const json_t *cons, double tol, double scale, const warn_scale *sc)
{
    const json_t *per = json_object_get(cons, "per_constraint");
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)per, name, v)
    {
        double r = json_is_number(v) ? json_number_value(v) : NAN;
        double limit = tol * scale * warn__cons_scale(sc, name);
        if (r <= limit)
            continue;
        char check[300], msg[500];
        snprintf(check, sizeof check, "checks.constraints.per_constraint.%s", name);
        snprintf(msg, sizeof msg,
                 "the constraint %s is violated by up to %.3g along the run, more than %.3g (%.3g times "
                 "the largest |q'| and its largest coefficient): the trajectory does not keep it",
                 name, r, limit, tol);
        warn__add(out, "constraint-residual", check, r, limit, msg);
    }
}

static void warn__position(json_t *out, const json_t *pos, double floor)
{
    double tol = warn__num(pos, "tolerance");
    const json_t *fail = json_object_get(pos, "projection_failures");
    if (json_is_integer(fail) && json_integer_value(fail) > 0) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "%lld projection(s) back onto the position constraints failed: the trajectory drifts "
                 "off them",
                 (long long)json_integer_value(fail));
        warn__add(out, "projection-failed", "checks.constraints.position.projection_failures",
                  (double)json_integer_value(fail), 0.0, msg);
    }
    if (json_is_true(json_object_get(pos, "projection")))
        return; /* the residuals before projection may exceed the tolerance: that is why it projects */
    if (!(tol >= floor))
        tol = floor;
    const json_t *per = json_object_get(pos, "per_constraint");
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)per, name, v)
    {
        double r = json_is_number(v) ? json_number_value(v) : NAN;
        if (r <= tol)
            continue;
        char check[300], msg[500];
        snprintf(check, sizeof check, "checks.constraints.position.per_constraint.%s", name);
        snprintf(msg, sizeof msg, "the position constraint %s drifted to %.3g, past %.3g (projection is off)",
                 name, r, tol);
        warn__add(out, "position-drift", check, r, tol, msg);
    }
}

/* checks.contacts (contact.h): a contact that lifts off or slips is no longer a rolling
 * contact from then on, so the trajectory after it is not the physical one. */
static void warn__contacts(json_t *out, const json_t *contacts)
{
    const char *name;
    const json_t *c;
    json_object_foreach((json_t *)contacts, name, c)
    {
        static const char *const kinds[2] = {"lift_off", "slip"};
        for (int k = 0; k < 2; k++) {
            double t = warn__num(json_object_get(c, kinds[k]), "t");
            if (isnan(t))
                continue;
            char check[300], msg[500];
            snprintf(check, sizeof check, "checks.contacts.%s.%s.t", name, kinds[k]);
            if (k == 0)
                snprintf(msg, sizeof msg,
                         "the normal force of contact %s turns negative at t = %.10g: the disk would leave "
                         "the ground there, and the rolling model is not valid after it",
                         name, t);
            else
                snprintf(msg, sizeof msg,
                         "the tangential force of contact %s exceeds friction %.3g times the normal force "
                         "at t = %.10g: the disk would slip there, and rolling without slipping is not "
                         "valid after it",
                         name, warn__num(c, "friction"), t);
            warn__add(out, k == 0 ? "contact-lift-off" : "contact-slip", check, t,
                      k == 0 ? 0.0 : warn__num(c, "friction"), msg);
        }
    }
}

json_t *warn_from_checks(const json_t *checks, const warn_scale *scale)
{
    json_t *out = json_array();
    if (!out)
        return NULL;
    double tol = warn_tolerance(scale->rtol);
    double q = scale->qdot_max;
    warn__energy(out, json_object_get(checks, "energy"), tol, scale->atol);
    const json_t *cons = json_object_get(checks, "constraints");
    warn__velocity(out, cons, tol, q > 1.0 ? q : 1.0, scale);
    const json_t *pos = json_object_get(cons, "position");
    if (pos)
        warn__position(out, pos, tol);
    if (scale->mass_indefinite)
        warn__add(out, "mass-indefinite", "model.kinetic_energy", NAN, 0.0,
                  "the kinetic energy is not positive semi-definite at the initial state (its mass matrix "
                  "d2T/dq'dq' has a negative eigenvalue): a mass or an inertia is out of range, in "
                  "kinetic_energy or through the parameters");
    warn__contacts(out, json_object_get(checks, "contacts"));
    return out;
}
