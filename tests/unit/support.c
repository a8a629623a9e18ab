/* support.c — shared helpers of the unit tests: JSON, compiling, simulating, reading
 * results, finding the shared cases (see support.h). */
#include "support.h"

#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>

json_t *support_loads(const char *text)
{
    json_error_t err;
    json_t *js = json_loads(text, 0, &err);
    cr_assert_not_null(js, "test JSON does not parse: line %d: %s", err.line, err.text);
    return js;
}

json_t *support_load_file(const char *path)
{
    json_error_t err;
    json_t *js = json_load_file(path, 0, &err);
    cr_assert_not_null(js, "%s does not load: line %d: %s", path, err.line, err.text);
    return js;
}

engine_model *support_compile_json(const json_t *model)
{
    engine_model *m = NULL;
    json_t *problem = NULL;
    int rc = engine_model_compile(model, NULL, &m, &problem);
    if (rc)
        cr_assert_fail("model did not compile (%d): %s", rc, json_dumps(problem, 0));
    return m;
}

engine_model *support_compile_text(const char *text)
{
    json_t *js = support_loads(text);
    engine_model *m = support_compile_json(js);
    json_decref(js);
    return m;
}

json_t *support_simulate(engine_model *m, const json_t *req, const char *what)
{
    json_t *result = NULL, *problem = NULL;
    int rc = engine_simulate(m, req, NULL, NULL, &result, &problem);
    if (rc)
        cr_assert_fail("%s%ssimulation failed (%d): %.2000s", what ? what : "", what ? ": " : "", rc,
                       json_dumps(problem, 0));
    return result;
}

json_t *support_run(engine_model *m, const char *request)
{
    json_t *req = support_loads(request);
    json_t *result = support_simulate(m, req, NULL);
    json_decref(req);
    return result;
}

double support_traj_at(const json_t *traj, const char *group, const char *name, size_t i)
{
    return json_number_value(json_array_get(json_object_get(json_object_get(traj, group), name), i));
}

double support_at(const json_t *result, const char *group, const char *name, size_t i)
{
    return support_traj_at(json_object_get(result, "trajectory"), group, name, i);
}

double support_max_residual(const json_t *result)
{
    return json_number_value(json_object_get(
        json_object_get(json_object_get(result, "checks"), "constraints"), "max_abs_residual"));
}

const char *support_cases_dir(void)
{
    const char *d = getenv("HAMEL_CASES");
    return d && *d ? d : "../shared/cases";
}

json_t *support_load_case(const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", support_cases_dir(), file);
    return support_load_file(path);
}

int support_list_cases(struct support_case *out, int max)
{
    return support_list_dir(support_cases_dir(), out, max);
}

int support_list_dir(const char *dir, struct support_case *out, int max)
{
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/*.json", dir);
    glob_t g;
    int n = 0;
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && n < max; i++)
            snprintf(out[n++].file, sizeof out[0].file, "%s", g.gl_pathv[i]);
        globfree(&g);
    }
    return n;
}

json_t *support_steady(engine_model *m, json_t *req, int expect_rc, json_t **problem)
{
    json_t *res = NULL, *p = NULL;
    int rc = engine_steady(m, req, NULL, NULL, &res, &p);
    json_decref(req);
    char *txt = p ? json_dumps(p, 0) : NULL;
    cr_assert_eq(rc, expect_rc, "engine_steady: %d (%s)", rc, txt ? txt : "");
    free(txt);
    if (problem)
        *problem = p;
    else
        json_decref(p);
    return res;
}
