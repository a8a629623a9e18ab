/* merge.c — a batch run merged over its base (merge.h). */
#include "merge.h"

#include <string.h>

/* The members of a run merged key by key over the base's (one level deep). */
static const char *const merge__members[] = {"initial", "parameters", "integrator", "output"};

json_t *merge_run(const json_t *base, const json_t *run)
{
    json_t *out = json_deep_copy(base);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)run, k, v)
    {
        json_t *old = json_object_get(out, k);
        int mergeable = 0;
        for (size_t i = 0; i < sizeof merge__members / sizeof merge__members[0]; i++)
            mergeable |= !strcmp(k, merge__members[i]);
        if (!mergeable || !json_is_object(v) || !json_is_object(old)) {
            json_object_set_new(out, k, json_deep_copy(v));
            continue;
        }
        int initial = !strcmp(k, "initial");
        if (!strcmp(k, "output") &&
            (json_object_get(v, "samples") || json_object_get(v, "dt") || json_object_get(v, "times"))) {
            json_object_del(old, "samples");
            json_object_del(old, "dt");
            json_object_del(old, "times");
        }
        if (initial && json_object_get(v, "qdot"))
            json_object_del(old, "speeds");
        if (initial && json_object_get(v, "speeds"))
            json_object_del(old, "qdot");
        const char *k2;
        json_t *v2;
        json_object_foreach(v, k2, v2)
        {
            json_t *old2 = json_object_get(old, k2);
            int deep = initial && (!strcmp(k2, "q") || !strcmp(k2, "speeds") || !strcmp(k2, "qdot"));
            if (deep && json_is_object(v2) && json_is_object(old2)) {
                const char *k3;
                json_t *v3;
                json_object_foreach(v2, k3, v3) { json_object_set_new(old2, k3, json_deep_copy(v3)); }
            } else {
                json_object_set_new(old, k2, json_deep_copy(v2));
            }
        }
    }
    return out;
}
