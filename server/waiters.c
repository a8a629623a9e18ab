/* waiters.c — parked waiters and their lists (waiters.h). */
#include "waiters.h"

#include <stddef.h>

void waiters_add(waiter **head, waiter *w)
{
    w->prev = NULL;
    w->next = *head;
    if (*head)
        (*head)->prev = w;
    *head = w;
    w->armed = 1;
}

void waiters_remove(waiter **head, waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        *head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
    w->armed = 0;
}

void waiters_detach(waiter **head, waiter *w, waiter **fired)
{
    waiters_remove(head, w);
    w->next = *fired;
    *fired = w;
}

void waiters_detach_on(waiter **head, const void *on, waiter **fired)
{
    waiter *w = *head;
    while (w) {
        waiter *next = w->next;
        if (w->on == on)
            waiters_detach(head, w, fired);
        w = next;
    }
}

void waiters_detach_all(waiter **head, waiter **fired)
{
    while (*head)
        waiters_detach(head, *head, fired);
}

double waiters_expire(waiter **head, double now, waiter **fired)
{
    double next = 0;
    waiter *w = *head;
    while (w) {
        waiter *n = w->next;
        if (w->deadline > 0 && w->deadline <= now)
            waiters_detach(head, w, fired);
        else if (w->deadline > 0 && (next == 0 || w->deadline < next))
            next = w->deadline;
        w = n;
    }
    return next;
}

void waiters_fire(waiter *fired)
{
    while (fired) {
        waiter *next = fired->next; /* read before waking: the waiter may be freed after */
        fired->wake(fired->arg);
        fired = next;
    }
}
