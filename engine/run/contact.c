/* contact.c — rolling contacts and their forces (contact.h). */
#include "contact.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The index of constraint "<disk>_<suffix>", or -1. */
static int contact__constraint(const struct engine_model *m, const char *disk, const char *suffix)
{
    char name[CONTACT_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s_%s", disk, suffix);
    for (int j = 0; j < m->nc; j++)
        if (strcmp(m->cons[j].name, name) == 0)
            return j;
    return -1;
}

int contact_list(const struct engine_model *m, contact_spec **out)
{
    *out = NULL;
    const json_t *disks = m->bodies_js ? json_object_get(m->bodies_js, "rolling_disks") : NULL;
    size_t i;
    const json_t *d;
    int n = 0;
    json_array_foreach(disks, i, d) n += json_is_number(json_object_get(d, "friction"));
    if (!n)
        return 0;
    contact_spec *c = calloc(n, sizeof *c);
    if (!c)
        return -1;
    int k = 0;
    json_array_foreach(disks, i, d)
    {
        const json_t *mu = json_object_get(d, "friction");
        const char *name = json_string_value(json_object_get(d, "name"));
        if (!json_is_number(mu) || !name)
            continue;
        snprintf(c[k].name, sizeof c[k].name, "%s", name);
        c[k].mu = json_number_value(mu);
        c[k].normal = contact__constraint(m, name, "contact");
        c[k].tang[0] = contact__constraint(m, name, "rolling");
        c[k].tang[1] = contact__constraint(m, name, "lateral");
        k++;
    }
    *out = c;
    return k;
}

void contact_forces(const contact_spec *c, const double *lam, double *normal, double *tangential)
{
    *normal = c->normal >= 0 ? lam[c->normal] : NAN;
    double a = c->tang[0] >= 0 ? lam[c->tang[0]] : 0.0, b = c->tang[1] >= 0 ? lam[c->tang[1]] : 0.0;
    *tangential = hypot(a, b);
}
