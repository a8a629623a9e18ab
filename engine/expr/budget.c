/* budget.c — the compile budget (budget.h): the deadline, memory cap and cancel flag
 * checks, the soft deadline of an optional stage, and the problem document of a
 * compilation that ran out of budget. */
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

static void budget__stop(budget *b, int stop, double elapsed, size_t bytes)
{
    b->stop = stop;
    b->at_seconds = elapsed;
    b->at_bytes = bytes;
    if (b->ctx)
        b->ctx->overflow = 1; /* constructors and phase checks see it at once */
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
    if (b->cancel && atomic_load_explicit(b->cancel, memory_order_relaxed)) {
        stop = BUDGET_CANCELLED;
    } else if (b->deadline > 0 && now > b->deadline) {
        stop = BUDGET_TIME;
        b->limit = "max_compile_seconds";
        b->limit_value = b->seconds;
        b->reached = now - b->start;
    } else if (b->max_bytes && bytes > b->max_bytes) {
        stop = BUDGET_BYTES;
        b->limit = "max_compile_bytes";
        b->limit_value = (double)b->max_bytes;
        b->reached = (double)bytes;
    } else if (b->soft_deadline > 0 && now > b->soft_deadline) {
        stop = BUDGET_SOFT;
    }
    if (stop)
        budget__stop(b, stop, now - b->start, bytes);
    return stop;
}

void budget_soft_begin(budget *b, double seconds)
{
    if (!b || seconds <= 0)
        return;
    b->soft_deadline = budget__now() + seconds;
    if (b->deadline > 0 && b->soft_deadline > b->deadline)
        b->soft_deadline = b->deadline;
}

int budget_soft_end(budget *b)
{
    if (!b)
        return 0;
    b->soft_deadline = 0;
    if (b->stop != BUDGET_SOFT)
        return 0;
    b->stop = BUDGET_OK;
    if (b->ctx)
        b->ctx->overflow = 0;
    return 1;
}

void budget_exceed(budget *b, const char *what, const char *limit, double limit_value, double reached)
{
    if (!b || b->stop)
        return;
    b->stage = "validation";
    snprintf(b->what, sizeof b->what, "%s", what);
    b->limit = limit;
    b->limit_value = limit_value;
    b->reached = reached;
    budget__stop(b, BUDGET_COUNT, budget__now() - b->start, 0);
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
    const char *limit = b->limit ? b->limit : "max_compile_seconds";
    char reason[200];
    if (b->stop == BUDGET_COUNT) {
        snprintf(detail, sizeof detail, "%s has %.0f entries; %s allows at most %.0f", what, b->reached,
                 limit, b->limit_value);
        snprintf(reason, sizeof reason, "at most %.0f (%s)", b->limit_value, limit);
    } else {
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
        snprintf(reason, sizeof reason, "too large to compile: the %s of this expression exceeds %s",
                 b->stage, limit);
    }
    json_t *p = hamel_problem_new(HAMEL_E_COMPILE_LIMIT, detail);
    json_object_set_new(p, "stage", json_string(b->stage));
    json_object_set_new(p, "limit", json_string(limit));
    if (b->stop == BUDGET_TIME) {
        json_object_set_new(p, "limit_value", json_real(b->limit_value));
        json_object_set_new(p, "reached", json_real(b->reached));
    } else {
        json_object_set_new(p, "limit_value", json_integer((json_int_t)b->limit_value));
        json_object_set_new(p, "reached", json_integer((json_int_t)b->reached));
    }
    hamel_problem_add(p, what, -1, reason);
    return p;
}
