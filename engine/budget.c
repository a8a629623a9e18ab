/* budget.c — the compile budget (budget.h): the deadline, memory cap and cancel flag
 * checks, and the problem document of a compilation that ran out of budget. */
#include "budget.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "expr_internal.h"

static double budget__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void budget_init(budget *b, double seconds, size_t max_bytes, atomic_int *cancel)
{
    memset(b, 0, sizeof *b);
    b->start = budget__now();
    b->seconds = seconds > 0 ? seconds : 0;
    b->deadline = seconds > 0 ? b->start + seconds : 0;
    b->max_bytes = max_bytes;
    b->cancel = cancel;
    b->stage = "validation";
}

void budget_stage(budget *b, const char *stage, const char *what)
{
    if (!b || b->stop)
        return; /* keep the culprit of the stop */
    b->stage = stage;
    snprintf(b->what, sizeof b->what, "%s", what ? what : "");
}

void budget_hold(budget *b, long delta)
{
    if (!b)
        return;
    if (delta < 0 && (size_t)-delta > b->extra_bytes)
        b->extra_bytes = 0;
    else
        b->extra_bytes += (size_t)delta;
}

int budget_check(budget *b)
{
    if (!b)
        return 0;
    if (b->stop)
        return b->stop;
    double now = budget__now();
    size_t bytes = b->extra_bytes + (b->ctx ? expr__held_bytes(b->ctx) : 0);
    int stop = BUDGET_OK;
    if (b->cancel && atomic_load_explicit(b->cancel, memory_order_relaxed))
        stop = BUDGET_CANCELLED;
    else if (b->deadline > 0 && now > b->deadline)
        stop = BUDGET_TIME;
    else if (b->max_bytes && bytes > b->max_bytes)
        stop = BUDGET_BYTES;
    if (stop) {
        b->stop = stop;
        b->at_seconds = now - b->start;
        b->at_bytes = bytes;
    }
    return stop;
}

int budget_error(const budget *b)
{
    return b && b->stop == BUDGET_CANCELLED ? HAMEL_E_CANCELLED : HAMEL_E_COMPILE_LIMIT;
}

json_t *budget_problem(const budget *b)
{
    char detail[400];
    const char *what = b->what[0] ? b->what : "model";
    if (b->stop == BUDGET_CANCELLED) {
        snprintf(detail, sizeof detail, "the compilation was cancelled after %.3f s (stage: %s, at %s)",
                 b->at_seconds, b->stage, what);
        json_t *p = hamel_problem_new(HAMEL_E_CANCELLED, detail);
        json_object_set_new(p, "stage", json_string(b->stage));
        return p;
    }
    const char *limit = b->stop == BUDGET_BYTES ? "max_compile_bytes" : "max_compile_seconds";
    if (b->stop == BUDGET_BYTES)
        snprintf(detail, sizeof detail,
                 "compiling the model needs more than %zu bytes (max_compile_bytes): %zu bytes held "
                 "after %.3f s, in the %s of %s",
                 b->max_bytes, b->at_bytes, b->at_seconds, b->stage, what);
    else
        snprintf(detail, sizeof detail,
                 "compiling the model takes longer than %g s (max_compile_seconds): stopped at %.3f s "
                 "with %zu bytes held, in the %s of %s",
                 b->seconds, b->at_seconds, b->at_bytes, b->stage, what);
    json_t *p = hamel_problem_new(HAMEL_E_COMPILE_LIMIT, detail);
    json_object_set_new(p, "stage", json_string(b->stage));
    json_object_set_new(p, "limit", json_string(limit));
    if (b->stop == BUDGET_BYTES) {
        json_object_set_new(p, "limit_value", json_integer((json_int_t)b->max_bytes));
        json_object_set_new(p, "reached", json_integer((json_int_t)b->at_bytes));
    } else {
        json_object_set_new(p, "limit_value", json_real(b->seconds));
        json_object_set_new(p, "reached", json_real(b->at_seconds));
    }
    char reason[200];
    snprintf(reason, sizeof reason, "too large to compile: the %s of this expression exceeds %s", b->stage,
             limit);
    hamel_problem_add(p, what, -1, reason);
    return p;
}
