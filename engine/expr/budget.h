/* budget.h — the compile budget: a deadline, a memory cap and a cancel flag that
 * every stage of a model compilation checks from inside its loops.
 *
 * A budget is attached to an expression context (expr_ctx_set_budget). The node
 * constructors tick it on every node they intern, and the long loops of expansion,
 * differentiation, substitution, printing and tape building tick it too; every
 * BUDGET_TICK_EVERY ticks the clock, the bytes the context holds and the cancel flag
 * are read. Once a budget has stopped it stays stopped: the constructors return the
 * context's NaN node at once (and set its overflow flag), loops see budget_tick() != 0
 * and unwind, and the compilation, which checks budget_stopped() after each stage,
 * fails with HAMEL_E_COMPILE_LIMIT (or HAMEL_E_CANCELLED) and a problem naming the
 * stage and the expression that was being worked on (budget_stage).
 *
 * Time is the CPU time of the thread doing the work (CLOCK_THREAD_CPUTIME_ID), so that
 * a model gets the same answer however loaded the machine is: other threads and
 * processes, a sleep or a wait do not spend it. A wall-clock backstop, BUDGET_WALL_FACTOR
 * times the budget (or a smaller wall limit, budget_cap_wall), still ends a compilation
 * that is starved or stalled. A stop by either is BUDGET_TIME with the limit
 * "max_compile_seconds"; by_wall says which clock it was.
 *
 * A budget is owned by one compilation and used by one thread; only the cancel flag it
 * points to is written by others. (Should the work move to another thread, the CPU time
 * is counted from its first check there on.)
 */
#ifndef HAMEL_BUDGET_H
#define HAMEL_BUDGET_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#define BUDGET_TICK_EVERY 4096u /* ticks between two reads of the clock (a power of 2) */
#define BUDGET_WALL_FACTOR 4    /* the wall-clock backstop: this many times the CPU budget */

typedef enum budget_stop {
    BUDGET_OK = 0,
    BUDGET_TIME,      /* past the CPU budget or the wall-clock backstop (by_wall) */
    BUDGET_BYTES,     /* past the memory cap */
    BUDGET_CANCELLED, /* the cancel flag was set */
    BUDGET_SOFT,      /* past the soft deadline of an optional stage (budget_soft_begin) */
    BUDGET_COUNT,     /* a counted limit (parameters, definitions): budget_exceed */
} budget_stop;

struct expr_ctx;

typedef struct budget {
    double start;         /* CLOCK_MONOTONIC seconds */
    double wall_deadline; /* CLOCK_MONOTONIC seconds: the backstop; 0: none */
    double wall_limit;    /* wall_deadline - start, for messages */
    double seconds;       /* the CPU time limit; 0: none */
    double cpu;           /* CPU seconds spent so far (as of the last check) */
    double cpu_last;      /* the working thread's CPU clock at the last check */
    pthread_t thread;     /* that thread */
    double soft_cpu;      /* CPU seconds: the soft deadline of the optional stage; 0: none */
    double soft_wall;     /* CLOCK_MONOTONIC seconds: its wall-clock backstop; 0: none */
    size_t max_bytes;     /* 0: none */
    size_t extra_bytes;   /* held outside the expression context (tapes, printed text) */
    atomic_int *cancel;   /* may be NULL */
    struct expr_ctx *ctx; /* whose bytes count (and overflow flag is set on a stop) */
    unsigned ticks;
    int stop;          /* a budget_stop */
    double at_seconds; /* when it stopped: elapsed (wall-clock) seconds */
    double at_cpu;     /* ... CPU seconds spent */
    int by_wall;       /* a BUDGET_TIME stop by the wall-clock backstop, not the CPU budget */
    size_t at_bytes;   /* ... and bytes held */
    const char *limit; /* the limit that stopped it ("max_compile_seconds", ...) */
    double limit_value, reached;
    const char *stage; /* what the compilation is doing (static string) */
    char what[128];    /* on which expression (a model path), may be empty */
} budget;

/* Starts a budget now, in the calling thread: `seconds` of its CPU time, with a
 * wall-clock backstop of BUDGET_WALL_FACTOR * seconds; seconds <= 0 and max_bytes == 0
 * mean no limit; cancel may be NULL. */
void budget_init(budget *b, double seconds, size_t max_bytes, atomic_int *cancel);

/* Lowers the wall-clock backstop to `wall_seconds` from the start (a caller's own wall
 * limit, engine_control.max_wall_seconds) when that is > 0 and smaller. */
void budget_cap_wall(budget *b, double wall_seconds);

/* "CPU time" or "wall-clock time (the backstop, ...)": which clock stopped a BUDGET_TIME
 * budget, and at what, as text for a problem's detail ("2.001 s of CPU time"). */
void budget_time_text(const budget *b, char *out, size_t n);

/* Names the stage ("differentiation") and the expression ("model.kinetic_energy", may
 * be NULL) that the following work is for; a stop is reported with these. Accepts a
 * NULL budget. */
void budget_stage(budget *b, const char *stage, const char *what);

/* Reads the clock, the bytes and the cancel flag now. Returns the budget_stop (0: go
 * on). Accepts a NULL budget. */
int budget_check(budget *b);

/* Counts one unit of work; every BUDGET_TICK_EVERY units, budget_check. Returns
 * nonzero once the budget has stopped. Cheap enough for inner loops. */
static inline int budget_tick(budget *b)
{
    if (!b)
        return 0;
    if (b->stop)
        return b->stop;
    if (++b->ticks & (BUDGET_TICK_EVERY - 1))
        return 0;
    return budget_check(b);
}

/* Counts n units of work at once (a sort of n operands), checking as budget_tick does
 * whenever a multiple of BUDGET_TICK_EVERY is passed. */
static inline int budget_tick_n(budget *b, unsigned n)
{
    if (!b)
        return 0;
    if (b->stop)
        return b->stop;
    unsigned before = b->ticks;
    b->ticks += n;
    if (before / BUDGET_TICK_EVERY == b->ticks / BUDGET_TICK_EVERY)
        return 0;
    return budget_check(b);
}

/* Nonzero (the budget_stop) once the budget has stopped. Accepts NULL. */
static inline int budget_stopped(const budget *b) { return b ? b->stop : 0; }

/* Starts an optional stage (the symbolic reduction) that must end within `seconds`
 * (and within the deadline): past it the budget stops with BUDGET_SOFT, which
 * budget_soft_end clears so that the compilation goes on without the stage's results. */
void budget_soft_begin(budget *b, double seconds);

/* Ends the optional stage. Returns 1 if it was stopped by its soft deadline (the stop is
 * cleared, and so is the context's overflow flag: the caller discards what the stage
 * made), else 0. */
int budget_soft_end(budget *b);

/* Stops the budget for a counted limit: `what` (a model path) has `reached` items where
 * `limit` allows `limit_value`. */
void budget_exceed(budget *b, const char *what, const char *limit, double limit_value, double reached);

/* Adds (or with a negative delta removes) bytes held outside the context. */
void budget_hold(budget *b, long delta);

/* The engine error of a stopped budget: HAMEL_E_COMPILE_LIMIT or HAMEL_E_CANCELLED. */
int budget_error(const budget *b);

/* A new problem document for a stopped budget: the stage, the expression, the limit
 * and the figure reached, as members "stage", "limit", "limit_value", "reached" and one
 * entry of "errors" at the expression's path. Caller owns it. */
json_t *budget_problem(const budget *b);

#endif
