/* budget.c — the compile budget (budget.h): the CPU-time budget and its wall-clock
 * backstop, the memory cap and cancel flag checks, the soft deadline of an optional stage, and the problem
 * document of a compilation that ran out of budget. */
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

/* The calling thread's CPU time, in seconds. */
static double budget__cpu_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0; /* no such clock: the wall-clock backstop alone bounds the work */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Adds the CPU time the working thread spent since the last check. A check from
 * another thread starts counting that thread's clock from now. */
static void budget__account(budget *b)
{
    double c = budget__cpu_now();
    pthread_t self = pthread_self();
    if (pthread_equal(self, b->thread)) {
        if (c > b->cpu_last)
            b->cpu += c - b->cpu_last;
    } else {
        b->thread = self;
    }
    b->cpu_last = c;
}

void budget_init(budget *b, double seconds, size_t max_bytes, atomic_int *cancel)
{
    memset(b, 0, sizeof *b);
    b->start = budget__now();
    b->thread = pthread_self();
    b->cpu_last = budget__cpu_now();
    b->seconds = seconds > 0 ? seconds : 0;
    b->wall_limit = b->seconds * BUDGET_WALL_FACTOR;
    b->wall_deadline = b->seconds > 0 ? b->start + b->wall_limit : 0;
    b->max_bytes = max_bytes;
    b->cancel = cancel;
    b->stage = "validation";
}

void budget_cap_wall(budget *b, double wall_seconds)
{
    if (!b || !(wall_seconds > 0) || (b->wall_deadline > 0 && wall_seconds >= b->wall_limit))
        return;
    b->wall_limit = wall_seconds;
    b->wall_deadline = b->start + wall_seconds;
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
    b->at_cpu = b->cpu;
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
    budget__account(b);
    size_t bytes = b->extra_bytes + (b->ctx ? expr__held_bytes(b->ctx) : 0);
    int stop = BUDGET_OK;
    if (b->cancel && atomic_load_explicit(b->cancel, memory_order_relaxed)) {
        stop = BUDGET_CANCELLED;
    } else if (b->seconds > 0 && b->cpu > b->seconds) {
        stop = BUDGET_TIME;
        b->by_wall = 0;
        b->limit = "max_compile_seconds";
        b->limit_value = b->seconds;
        b->reached = b->cpu;
    } else if (b->wall_deadline > 0 && now > b->wall_deadline) {
        stop = BUDGET_TIME;
        b->by_wall = 1;
        b->limit = "max_compile_seconds";
        b->limit_value = b->wall_limit;
        b->reached = now - b->start;
    } else if (b->max_bytes && bytes > b->max_bytes) {
        stop = BUDGET_BYTES;
        b->limit = "max_compile_bytes";
        b->limit_value = (double)b->max_bytes;
        b->reached = (double)bytes;
    } else if ((b->soft_cpu > 0 && b->cpu > b->soft_cpu) || (b->soft_wall > 0 && now > b->soft_wall)) {
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
    budget__account(b);
    b->soft_cpu = b->cpu + seconds;
    if (b->seconds > 0 && b->soft_cpu > b->seconds)
        b->soft_cpu = b->seconds;
    b->soft_wall = budget__now() + seconds * BUDGET_WALL_FACTOR;
    if (b->wall_deadline > 0 && b->soft_wall > b->wall_deadline)
        b->soft_wall = b->wall_deadline;
}

int budget_soft_end(budget *b)
{
    if (!b)
        return 0;
    b->soft_cpu = 0;
    b->soft_wall = 0;
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
    budget__account(b);
    budget__stop(b, BUDGET_COUNT, budget__now() - b->start, 0);
}

void budget_time_text(const budget *b, char *out, size_t n)
{
    if (!b->by_wall)
        snprintf(out, n, "%.3f s of CPU time (max_compile_seconds = %g s of CPU time; %.3f s wall-clock)",
                 b->at_cpu, b->seconds, b->at_seconds);
    else if (b->seconds > 0 && b->wall_limit == b->seconds * BUDGET_WALL_FACTOR)
        snprintf(out, n,
                 "%.3f s of wall-clock time (the wall-clock backstop, %d x max_compile_seconds = %g s; only "
                 "%.3f s of CPU time used: the machine is overloaded or the work stalled)",
                 b->at_seconds, BUDGET_WALL_FACTOR, b->wall_limit, b->at_cpu);
    else
        snprintf(out, n,
                 "%.3f s of wall-clock time (the caller's wall-clock limit of %g s; %.3f s of CPU time)",
                 b->at_seconds, b->wall_limit, b->at_cpu);
}

int budget_error(const budget *b)
{
    return b && b->stop == BUDGET_CANCELLED ? HAMEL_E_CANCELLED : HAMEL_E_COMPILE_LIMIT;
}

json_t *budget_problem(const budget *b)
{
    char detail[640];
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
        else {
            char when[240];
            budget_time_text(b, when, sizeof when);
            snprintf(detail, sizeof detail,
                     "compiling the model takes longer than max_compile_seconds allows: stopped after %s, "
                     "with %zu bytes held, in the %s of %s",
                     when, b->at_bytes, b->stage, what);
        }
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
