/* support.h — shared helpers of the unit tests (tests/unit/support.c).
 *
 * Owns what the test files used to copy between them: parsing test JSON, compiling a
 * model, running a simulation, reading a trajectory sample or the constraint residual
 * of a result, and finding the shared cases (../shared/cases or $HAMEL_CASES). Every
 * helper fails the current Criterion test with a message saying what went wrong, so
 * callers need not check what they get back.
 */
#ifndef HAMEL_TESTS_UNIT_SUPPORT_H
#define HAMEL_TESTS_UNIT_SUPPORT_H

#include <stddef.h>

#include "engine.h"

#define SUPPORT_MAX_CASES 64

/* One shared case file: the parameter of the tests run over every case. */
struct support_case {
    char file[512];
};

/* Parses test JSON text; fails the test when it does not parse. Caller frees. */
json_t *support_loads(const char *text);

/* Loads a JSON file; fails the test naming the file when it does not load. Caller frees. */
json_t *support_load_file(const char *path);

/* Compiles a model document (borrowed); fails the test with the problem document.
 * Caller releases the model. */
engine_model *support_compile_json(const json_t *model);

/* support_compile_json on JSON text. */
engine_model *support_compile_text(const char *text);

/* Simulates `req` (borrowed) on `m`; fails the test with the problem document, prefixed
 * by `what` (the case file, say) when not NULL. Caller frees the result. */
json_t *support_simulate(engine_model *m, const json_t *req, const char *what);

/* support_simulate on a request given as JSON text. */
json_t *support_run(engine_model *m, const char *request);

/* engine_steady of `req` (taken) on m; fails the test unless it returns expect_rc, naming
 * the problem. *problem (when not NULL) gets the problem document; caller frees both. */
json_t *support_steady(engine_model *m, json_t *req, int expect_rc, json_t **problem);

/* The i-th sample of trajectory.<group>.<name> of a result (0 when absent). */
double support_at(const json_t *result, const char *group, const char *name, size_t i);

/* The same, given the trajectory object itself. */
double support_traj_at(const json_t *traj, const char *group, const char *name, size_t i);

/* The largest constraint residual a result reports (checks.constraints.max_abs_residual). */
double support_max_residual(const json_t *result);

/* The directory of the shared cases: $HAMEL_CASES, or ../shared/cases. */
const char *support_cases_dir(void);

/* Loads the shared case <file> (a name in support_cases_dir()); fails the test naming
 * the path when it does not load. Caller frees. */
json_t *support_load_case(const char *file);

/* Fills out[0..max) with the case files in support_cases_dir(); returns how many. */
int support_list_cases(struct support_case *out, int max);

/* Fills out[0..max) with the *.json files in dir (sorted); returns how many. */
int support_list_dir(const char *dir, struct support_case *out, int max);

#endif
