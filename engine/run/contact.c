/* contact.c — rolling contacts and their forces (contact.h). */
#include "contact.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The index of the constraint named `name` (may be NULL), or -1. */
static int contact__index(const struct engine_model *m, const char *name)
{
    for (int j = 0; name && j < m->nc; j++)
        if (strcmp(m->cons[j].name, name) == 0)
            return j;
    return -1;
}

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
    n += (int)json_array_size(m->contacts_js);
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
    json_array_foreach(m->contacts_js, i, d)
    {
        snprintf(c[k].name, sizeof c[k].name, "%s", json_string_value(json_object_get(d, "name")));
        c[k].mu = json_number_value(json_object_get(d, "friction"));
        c[k].normal = contact__index(m, json_string_value(json_object_get(d, "normal")));
        const json_t *tg = json_object_get(d, "tangential");
        c[k].tang[0] = contact__index(m, json_string_value(json_array_get(tg, 0)));
        c[k].tang[1] = contact__index(m, json_string_value(json_array_get(tg, 1)));
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
