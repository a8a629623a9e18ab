/* waiters.h — parked waiters: long-polls and streams waiting on a job or a batch.
 *
 * Owns the waiter record and the doubly linked list its owner (jobs.c, batch.c) keeps
 * under its own lock: parking, unparking, detaching the waiters of one target or those
 * past their deadline (for the owner's timer thread) onto a "fired" chain, and firing that
 * chain with no lock held. The list functions do no locking: the caller holds the lock
 * that guards the list; waiters_fire must be called without it (a wake may take locks).
 */
#ifndef HAMEL_SERVER_WAITERS_H
#define HAMEL_SERVER_WAITERS_H

/* A parked waiter; owned by the caller, which keeps it alive until woken (or until its
 * owner unparks it). wake(arg) is called once, with no lock held. */
typedef struct waiter {
    void (*wake)(void *arg);
    void *arg;
    double deadline; /* monotonic seconds (jobs_now); 0 means none */
    void *on;        /* private to the list's owner: what is waited on */
    struct waiter *prev, *next;
    int armed;  /* on a list */
    int stream; /* private to the list's owner (batches: a stream reader) */
} waiter;

/* Puts w at the head of *head and marks it armed. */
void waiters_add(waiter **head, waiter *w);

/* Takes w (armed, on *head) off the list and disarms it. */
void waiters_remove(waiter **head, waiter *w);

/* Takes w off *head and chains it on *fired (through next). */
void waiters_detach(waiter **head, waiter *w, waiter **fired);

/* Detaches every waiter of *head waiting on `on` onto *fired. */
void waiters_detach_on(waiter **head, const void *on, waiter **fired);

/* Detaches every waiter of *head onto *fired. */
void waiters_detach_all(waiter **head, waiter **fired);

/* Detaches the waiters of *head whose deadline has passed at `now` onto *fired; returns
 * the earliest deadline of those left, or 0 if none has one. */
double waiters_expire(waiter **head, double now, waiter **fired);

/* Calls the wake of every waiter chained from fired. No lock held: a wake may free its
 * waiter, so the chain is read before each call. */
void waiters_fire(waiter *fired);

#endif
