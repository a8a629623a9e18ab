/* native.h — the optimizing code tier: generated C compiled by the system compiler.
 *
 * Tiers (engine/DESIGN.md "Code tiers"): a model runs at once on the tape interpreter
 * or on libtcc's code (jit.h, made during engine_model_compile); when a cache
 * directory is configured (engine_code_cache) and the model is hot (its second run,
 * or NATIVE_HOT_EVALS right-hand side evaluations in its runs so far), it is queued
 * for this tier, so that one-off models cost no compiler time. A background thread generates C for the
 * reduced equations (tape_fast) with the model's parameter values folded in as constants and, when M* depends
 * on the parameters only, its inverse folded too (the whole right-hand side becomes one function; else, up to
 * 24 speeds, M*'s Cholesky solve written out for its size), compiles it with `cc -O2 -shared -fPIC` into
 * <dir>/<model id hex>-<source hash>.so (written under a temporary name and renamed, so a file that exists is
 * complete; a later process with the same model loads it instead of compiling), dlopens it and publishes it
 * on the model with one atomic store.
 *
 * Trust: the cache directory must belong to this user and be writable by no one else
 * (else the tier stays off), and an object is loaded only when its record, <name>.mac
 * beside it, is the HMAC-SHA256 of its file name and bytes under a secret key kept
 * outside the directory (HAMEL_NATIVE_KEY_FILE, default <dir>.key, made 0600 with 32
 * random bytes on first use). The object is read through one O_NOFOLLOW descriptor (a
 * link is refused), verified in memory, and dlopen reads those same bytes from a sealed
 * memfd, so no file swapped in after the check can run. Anything that does not verify
 * is deleted and built again. Runs that start afterwards with
 * the default parameters use it (stats.code_tier "native"); runs in flight keep the code they started with,
 * and the loaded object is reference counted (the model holds one reference, each workspace using it
 * another), so it is unloaded only when the last user is gone. A failed build (no compiler, compiler error,
 * time limit) leaves the model on its first tier.
 *
 * The build never blocks a caller: a run only enqueues (a bounded queue of
 * NATIVE_MAX_QUEUE, a pool of one thread: engine/base/pool.h; a full queue skips the
 * model). One build runs at a time, at nice 10 (the worker thread and the compiler it
 * starts), so it yields the CPU to requests.
 *
 * Environment: HAMEL_NO_NATIVE (anything but "" or "0") disables the tier; HAMEL_CC
 * names the compiler (default "cc"); HAMEL_NATIVE_PART (measurements only) sets the tape
 * slots per function of the generated C (0: one function; see native.c);
 * HAMEL_NATIVE_ISA=0 (measurements only) leaves out -mavx, which is added where the CPU
 * has AVX (native__isa: the same results, fewer instructions).
 *
 * Threads: everything here may be called from any thread. Lock order: native_lock (the
 * directory, the key, the two pools) is never held while calling out of this file, but
 * for pool_submit, whose lock is a leaf.
 */
#ifndef HAMEL_NATIVE_H
#define HAMEL_NATIVE_H

#include <stdatomic.h>

#include "tape.h"

struct engine_model;

/* The right-hand side of the reduced Boltzmann–Hamel system, y = (q, u). */
typedef void (*native_rhs_fn)(double t, const double *y, double *dydt);
/* The same with M* solved in the code (not constant; Cholesky as hamel.c's): sets *fail
 * when a pivot is not positive and finite, and the caller then takes the tape's path. */
typedef void (*native_solve_fn)(double t, const double *y, double *dydt, int *fail);

typedef struct native_code {
    atomic_int refs;
    void *dl;              /* dlopen handle */
    int fd;                /* the sealed memfd it was loaded from, closed after dlclose */
    tape_fn fast;          /* tape_fast's outputs, parameters folded (reads the same in[]) */
    native_rhs_fn rhs;     /* dydt directly (constant M*^-1 folded), or NULL */
    native_solve_fn solve; /* dydt directly (M* not constant, solved in the code), or NULL */
} native_code;

enum { NATIVE_NONE, NATIVE_QUEUED, NATIVE_READY, NATIVE_FAILED };

/* Longest a compiler run may take before it is killed, seconds. */
#define NATIVE_MAX_SECONDS 60
/* Largest tape (instructions) sent to the compiler; bigger ones stay on tcc (or the
 * interpreter). A long tape is written as functions of at most 500 slots in translation
 * units of 32 of them, each compiled on its own (native.c), so the compiler's memory is
 * bounded by a unit's (130 MB measured at a car with 24 trailers, GCC 12), not by the
 * tape, and its time grows about linearly: about 70 us of CPU per slot, so about 28 s at
 * this bound, within NATIVE_MAX_SECONDS. The source is about 40 bytes a slot. */
#define NATIVE_MAX_INS 400000
/* Right-hand side evaluations after which a model is hot even in its first run. */
#define NATIVE_HOT_EVALS 100000
/* Most shared objects kept in the cache directory: past it the least recently
 * modified are deleted (down to three quarters) after a build. */
#define NATIVE_MAX_FILES 1024
/* Most models waiting for a build. */
#define NATIVE_MAX_QUEUE 64
/* The key that signs the cache: random bytes made on first use, at most this many read. */
#define NATIVE_KEY_BYTES 32
#define NATIVE_KEY_MAX 64
#define NATIVE_MAC_BYTES 32 /* HMAC-SHA256 */
/* Largest shared object loaded from the cache. */
#define NATIVE_MAX_OBJECT_BYTES ((size_t)64 << 20)

/* Sets the cache directory (created if missing; NULL or "" turns the tier off).
 * Returns 0, or -1 if the directory cannot be created. */
int native_configure(const char *dir);

/* The first tier's machine code (libtcc, jit_compile_many on m's tapes): when a cache
 * directory is configured, compiled on a background thread of its own, so that m's
 * first runs start at once on the interpreter and switch to tcc's code when it is
 * published (tape.h); otherwise, as in the CLI, compiled here and now. Sets
 * m->jit_done when finished. Called by the model compiler. */
void native_jit(struct engine_model *m);

/* Waits up to `seconds` for native_jit's work on m; returns 1 when it is done. */
int native_wait_jit(const struct engine_model *m, double seconds);

/* Queues m for a native build if the tier is on, m has reduced equations and was not
 * queued before. */
void native_schedule(struct engine_model *m);

/* Notes a finished run of m with `rhs_evals` evaluations; schedules m once it is hot. */
void native_note_run(const struct engine_model *m, long rhs_evals);

/* The model's native code, with a new reference, when it is ready and `params`
 * (np values) are the model's own; else NULL. Release with native_release. */
native_code *native_acquire(const struct engine_model *m, const double *params);

/* Drops a reference; the last unloads the code. Accepts NULL. */
void native_release(native_code *c);

/* Stops the tier for good: queued builds are dropped (their models released), a running
 * compiler is killed and the worker thread joined. For a clean exit (no model left
 * referenced by the queue). engine_shutdown calls it. */
void native_shutdown(void);

/* Waits up to `seconds` for m's build to finish; returns its NATIVE_* state. */
int native_wait(const struct engine_model *m, double seconds);

#endif
