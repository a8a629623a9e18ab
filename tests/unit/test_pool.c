/* test_pool.c — engine/base/pool.c, the thread pool of the offload lanes and the native
 * tier's builds: every accepted task is run and then done(arg, 1); up to `threads` run at
 * once, started only as tasks arrive; past the queue's room submit refuses (POOL_FULL)
 * and calls nothing; shutdown drops what is queued with done(arg, 0) on its own thread,
 * lets the running task finish, refuses later tasks (POOL_STOPPING) and joins. Each task's
 * argument is allocated and freed by its done, and a live count checks that none is left
 * (the ASan build checks the same for leaks). Waits are polls with generous bounds. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "pool.h"

static atomic_int live;     /* task arguments allocated and not yet released by done */
static atomic_int runs;     /* run calls */
static atomic_int done_ran; /* done(arg, 1) calls */
static atomic_int dropped;  /* done(arg, 0) calls */
static atomic_int gate;     /* 0: gated tasks wait in run */
static atomic_int inside;   /* gated tasks inside run now */

typedef struct task {
    int gated;
    int runs, dones; /* this task's calls */
    pthread_t done_thread;
} task;

static void tp_reset(void)
{
    atomic_store(&live, 0);
    atomic_store(&runs, 0);
    atomic_store(&done_ran, 0);
    atomic_store(&dropped, 0);
    atomic_store(&gate, 0);
    atomic_store(&inside, 0);
}

static void tp_sleep(void) { nanosleep(&(struct timespec){0, 1000000}, NULL); }

/* Waits up to 20 s for *v to reach want; returns whether it did. */
static int tp_wait(atomic_int *v, int want)
{
    for (int i = 0; i < 20000 && atomic_load(v) != want; i++)
        tp_sleep();
    return atomic_load(v) == want;
}

static void tp_run(void *arg)
{
    task *t = arg;
    t->runs++;
    atomic_fetch_add(&runs, 1);
    if (t->gated) {
        atomic_fetch_add(&inside, 1);
        while (!atomic_load(&gate))
            tp_sleep();
        atomic_fetch_sub(&inside, 1);
    }
}

static void tp_done(void *arg, int ran)
{
    task *t = arg;
    t->dones++;
    t->done_thread = pthread_self();
    atomic_fetch_add(ran ? &done_ran : &dropped, 1);
}

static task *tp_new(int gated)
{
    task *t = calloc(1, sizeof *t);
    cr_assert_not_null(t);
    t->gated = gated;
    atomic_fetch_add(&live, 1);
    return t;
}

static void tp_free(task *t)
{
    free(t);
    atomic_fetch_sub(&live, 1);
}

/* A done that owns its argument: releases it. */
static void tp_done_free(void *arg, int ran)
{
    tp_done(arg, ran);
    tp_free(arg);
}

Test(pool, runs_every_task_then_done)
{
    tp_reset();
    atomic_store(&gate, 1);
    pool *p = pool_new(3, 100, 0);
    cr_assert_not_null(p);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(pool_submit(p, tp_run, tp_done_free, tp_new(0)), POOL_OK, "task %d refused", i);
    cr_expect(tp_wait(&done_ran, 100), "%d of 100 tasks done", atomic_load(&done_ran));
    pool_free(p);
    cr_expect_eq(atomic_load(&runs), 100);
    cr_expect_eq(atomic_load(&dropped), 0);
    cr_expect_eq(atomic_load(&live), 0, "every argument released by its done");
}

/* Threads start as tasks arrive, never more than asked: 3 tasks that block run at once on
 * a pool of 3, a fourth waits in the queue. A pool never used starts none. */
Test(pool, threads_start_as_needed_up_to_the_limit)
{
    tp_reset();
    pool_free(pool_new(4, 4, 0)); /* nothing to join */
    pool *p = pool_new(3, 8, 0);
    cr_assert_not_null(p);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pool_submit(p, tp_run, tp_done_free, tp_new(1)), POOL_OK);
    cr_expect(tp_wait(&inside, 3), "%d tasks running at once, not 3", atomic_load(&inside));
    size_t queued = 0, running = 0;
    pool_counts(p, &queued, &running);
    cr_expect_eq(running, 3);
    cr_expect_eq(queued, 1);
    atomic_store(&gate, 1);
    cr_expect(tp_wait(&done_ran, 4));
    pool_counts(p, &queued, &running);
    cr_expect_eq(queued + running, 0);
    pool_free(p);
    cr_expect_eq(atomic_load(&live), 0);
}

/* Past the queue's room a task is refused and neither of its functions is called: the
 * argument is still the caller's. */
Test(pool, full_queue_refuses)
{
    tp_reset();
    pool *p = pool_new(1, 2, 0);
    cr_assert_not_null(p);
    task *a = tp_new(1), *b = tp_new(0), *c = tp_new(0), *d = tp_new(0);
    cr_assert_eq(pool_submit(p, tp_run, tp_done, a), POOL_OK);
    cr_assert(tp_wait(&inside, 1), "the first task never started");
    cr_expect_eq(pool_submit(p, tp_run, tp_done, b), POOL_OK);
    cr_expect_eq(pool_submit(p, tp_run, tp_done, c), POOL_OK);
    cr_expect_eq(pool_submit(p, tp_run, tp_done, d), POOL_FULL, "a third waiting task is refused");
    atomic_store(&gate, 1);
    cr_expect(tp_wait(&done_ran, 3));
    cr_expect_eq(d->runs + d->dones, 0, "nothing called for a refused task");
    cr_expect_eq(pool_submit(p, tp_run, tp_done, d), POOL_OK, "room again once the queue has drained");
    cr_expect(tp_wait(&done_ran, 4));
    pool_free(p);
    task *all[] = {a, b, c, d};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(all[i]->runs, 1, "task %d", i);
        cr_expect_eq(all[i]->dones, 1, "task %d", i);
        tp_free(all[i]);
    }
    cr_expect_eq(atomic_load(&live), 0);
}

static void *tp_shutdown(void *arg)
{
    pool_shutdown(arg);
    return NULL;
}

/* Shutdown drops the queued tasks at once (done(arg, 0) on the shutting-down thread, run
 * never), refuses new ones, waits for the running one and joins; pool_free afterwards
 * and a second shutdown are harmless. */
Test(pool, shutdown_drops_queued_with_done_ran_0)
{
    tp_reset();
    pool *p = pool_new(1, 4, 0);
    cr_assert_not_null(p);
    task *a = tp_new(1), *q[3];
    cr_assert_eq(pool_submit(p, tp_run, tp_done, a), POOL_OK);
    cr_assert(tp_wait(&inside, 1));
    for (int i = 0; i < 3; i++) {
        q[i] = tp_new(0);
        cr_assert_eq(pool_submit(p, tp_run, tp_done, q[i]), POOL_OK);
    }
    pthread_t stopper;
    cr_assert_eq(pthread_create(&stopper, NULL, tp_shutdown, p), 0);
    cr_expect(tp_wait(&dropped, 3), "the queued tasks were dropped while one still runs");
    cr_expect_eq(atomic_load(&done_ran), 0, "the running task has not finished");
    task *late = tp_new(0);
    cr_expect_eq(pool_submit(p, tp_run, tp_done, late), POOL_STOPPING);
    atomic_store(&gate, 1);
    pthread_join(stopper, NULL);
    cr_expect_eq(atomic_load(&done_ran), 1, "the running task finished before shutdown returned");
    pool_shutdown(p);
    pool_free(p);
    cr_expect_eq(a->runs, 1);
    cr_expect_eq(a->dones, 1);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(q[i]->runs, 0, "a dropped task is not run");
        cr_expect_eq(q[i]->dones, 1, "a dropped task's done is called once");
        cr_expect(pthread_equal(q[i]->done_thread, stopper), "dropped on the shutting-down thread");
        tp_free(q[i]);
    }
    cr_expect_eq(late->runs + late->dones, 0);
    tp_free(late);
    tp_free(a);
    cr_expect_eq(atomic_load(&live), 0);
}

/* The owner releases in done: after pool_free with tasks still queued, every argument
 * has been freed (no leak under ASan), each exactly once. */
Test(pool, free_with_queued_tasks_releases_them)
{
    tp_reset();
    pool *p = pool_new(2, 50, 0);
    cr_assert_not_null(p);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pool_submit(p, tp_run, tp_done_free, tp_new(1)), POOL_OK);
    cr_assert(tp_wait(&inside, 2));
    for (int i = 0; i < 50; i++)
        cr_assert_eq(pool_submit(p, tp_run, tp_done_free, tp_new(0)), POOL_OK);
    atomic_store(&gate, 1); /* the two running finish; the queue may drain a little first */
    pool_free(p);
    cr_expect_eq(atomic_load(&done_ran) + atomic_load(&dropped), 52);
    cr_expect_eq(atomic_load(&runs), atomic_load(&done_ran));
    cr_expect_eq(atomic_load(&live), 0);
}

/* A done may submit again; during shutdown that is refused, and it may be NULL. */
static pool *resubmit_pool;
static atomic_int resubmit_rc;

static void tp_done_resubmit(void *arg, int ran)
{
    tp_done_free(arg, ran);
    atomic_store(&resubmit_rc, pool_submit(resubmit_pool, tp_run, NULL, &resubmit_rc));
}

Test(pool, done_may_submit_again)
{
    tp_reset();
    resubmit_pool = pool_new(1, 4, (size_t)1 << 20);
    cr_assert_not_null(resubmit_pool);
    cr_assert_eq(pool_submit(resubmit_pool, tp_run, tp_done_free, tp_new(1)), POOL_OK);
    cr_assert(tp_wait(&inside, 1));
    cr_assert_eq(pool_submit(resubmit_pool, tp_run, tp_done_resubmit, tp_new(0)), POOL_OK);
    atomic_store(&resubmit_rc, 1);
    pthread_t stopper;
    cr_assert_eq(pthread_create(&stopper, NULL, tp_shutdown, resubmit_pool), 0);
    cr_expect(tp_wait(&dropped, 1));
    atomic_store(&gate, 1);
    pthread_join(stopper, NULL);
    cr_expect_eq(atomic_load(&resubmit_rc), POOL_STOPPING,
                 "a submission from a dropped task's done is refused");
    pool_free(resubmit_pool);
    cr_expect_eq(atomic_load(&live), 0);
}
