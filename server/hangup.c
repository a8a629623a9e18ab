/* hangup.c — the watcher of hung-up clients (hangup.h): one thread that polls the
 * watched sockets for POLLRDHUP every poll_ms (HAMEL_HANGUP_POLL_MS) and sets the flags of those
 * whose peer went away.
 *
 * Lock order: h->mu is a leaf. The thread snapshots the fds under it (marking those
 * entries `polled`), polls without it, and acts on a result only for entries still
 * watched (checked under it again): a watched entry's socket stays open (its connection
 * is suspended), so a ready fd of a still-watched entry is that entry's socket.
 * hangup_forget of a polled entry wakes the poll through an eventfd (a poll() holds its
 * own reference to every socket it polls, so a socket that libmicrohttpd closes meanwhile
 * would stay open, no FIN to the client, until the poll timed out — that made every
 * compiled request's client wait ~50 ms for the end of a `Connection: close` answer) but
 * does not wait for the round to end: the request goes on at once (a wait there was a
 * round trip of two threads' wake-ups, ~0.05 ms of every new model's request). The
 * entry's memory is only written by the round (its `polled` mark) until the round ends;
 * hangup_settle, before the memory is freed or watched again, waits for that — by then
 * the woken round has long ended.
 */
#include "hangup.h"

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define HANGUP_MAX_POLL 256 /* sockets polled per round (more are polled in later rounds) */

struct hangup {
    pthread_mutex_t mu;
    pthread_cond_t more;  /* an entry was added, or stopping */
    pthread_cond_t round; /* a poll round ended (its entries are no longer polled) */
    int wake;             /* eventfd: ends a poll round early */
    int poll_ms;
    pthread_t thread;
    hangup_entry *head;
    int shutdown, stopping;
    size_t rotate; /* where the next round starts when more than HANGUP_MAX_POLL watch */
};

static int hangup__watched(const hangup *h, const hangup_entry *e)
{
    for (const hangup_entry *x = h->head; x; x = x->next)
        if (x == e)
            return 1;
    return 0;
}

static void hangup__fire(hangup_entry *e, int why)
{
    atomic_store(&e->why, why);
    atomic_store(e->flag, 1);
}

static void *hangup__thread(void *arg)
{
    hangup *h = arg;
    struct pollfd fds[HANGUP_MAX_POLL + 1];
    hangup_entry *who[HANGUP_MAX_POLL];
    pthread_mutex_lock(&h->mu);
    while (!h->stopping) {
        if (!h->head) {
            pthread_cond_wait(&h->more, &h->mu);
            continue;
        }
        size_t count = 0, skip = 0;
        for (hangup_entry *e = h->head; e; e = e->next)
            count++;
        h->rotate = count > HANGUP_MAX_POLL ? (h->rotate + HANGUP_MAX_POLL) % count : 0;
        int n = 0;
        for (hangup_entry *e = h->head; e && n < HANGUP_MAX_POLL; e = e->next) {
            if (skip++ < h->rotate)
                continue;
            if (atomic_load(&e->why) != HANGUP_NONE)
                continue;
            fds[n] = (struct pollfd){.fd = e->fd, .events = POLLRDHUP};
            e->polled = 1;
            who[n++] = e;
        }
        fds[n] = (struct pollfd){.fd = h->wake, .events = POLLIN};
        pthread_mutex_unlock(&h->mu);
        int ready = poll(fds, (nfds_t)n + 1, h->poll_ms);
        pthread_mutex_lock(&h->mu);
        if (ready > 0 && (fds[n].revents & POLLIN)) {
            uint64_t v;
            if (read(h->wake, &v, sizeof v) < 0) { /* nonblocking: already drained */
            }
        }
        /* forgotten entries are not in the list any more, but were not freed: their
         * owners wait on h->round for this */
        for (int i = 0; i < n; i++) {
            if (ready > 0 && (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) &&
                hangup__watched(h, who[i]) && atomic_load(&who[i]->why) == HANGUP_NONE)
                hangup__fire(who[i], HANGUP_CLIENT_GONE);
            who[i]->polled = 0;
        }
        pthread_cond_broadcast(&h->round);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

hangup *hangup_new(int poll_ms)
{
    hangup *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->poll_ms = poll_ms > 0 ? poll_ms : 50;
    h->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (h->wake < 0) {
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->more, NULL);
    pthread_cond_init(&h->round, NULL);
    if (pthread_create(&h->thread, NULL, hangup__thread, h) != 0) {
        pthread_cond_destroy(&h->round);
        pthread_cond_destroy(&h->more);
        pthread_mutex_destroy(&h->mu);
        close(h->wake);
        free(h);
        return NULL;
    }
    return h;
}

/* Under h->mu: until the round that polled e (forgotten since) has ended. */
static void hangup__settle_locked(hangup *h, hangup_entry *e)
{
    while (e->polled)
        pthread_cond_wait(&h->round, &h->mu);
}

void hangup_watch(hangup *h, hangup_entry *e, int fd, atomic_int *flag)
{
    pthread_mutex_lock(&h->mu);
    hangup__settle_locked(h, e); /* watched before: a round may still mark it */
    e->fd = fd;
    e->flag = flag;
    atomic_store(&e->why, HANGUP_NONE);
    e->prev = NULL;
    e->next = h->head;
    if (h->head)
        h->head->prev = e;
    h->head = e;
    if (h->shutdown)
        hangup__fire(e, HANGUP_SHUTDOWN);
    pthread_cond_signal(&h->more);
    pthread_mutex_unlock(&h->mu);
}

void hangup_forget(hangup *h, hangup_entry *e)
{
    pthread_mutex_lock(&h->mu);
    if (hangup__watched(h, e)) {
        if (e->prev)
            e->prev->next = e->next;
        else
            h->head = e->next;
        if (e->next)
            e->next->prev = e->prev;
        e->prev = e->next = NULL;
    }
    if (e->polled) { /* end the round now: its poll() holds the socket */
        uint64_t one = 1;
        if (write(h->wake, &one, sizeof one) < 0) { /* the counter is already nonzero */
        }
    }
    pthread_mutex_unlock(&h->mu);
}

void hangup_settle(hangup *h, hangup_entry *e)
{
    pthread_mutex_lock(&h->mu);
    hangup__settle_locked(h, e);
    pthread_mutex_unlock(&h->mu);
}

void hangup_shutdown(hangup *h)
{
    pthread_mutex_lock(&h->mu);
    h->shutdown = 1;
    for (hangup_entry *e = h->head; e; e = e->next)
        if (atomic_load(&e->why) == HANGUP_NONE)
            hangup__fire(e, HANGUP_SHUTDOWN);
    pthread_mutex_unlock(&h->mu);
}

void hangup_free(hangup *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stopping = 1;
    pthread_cond_broadcast(&h->more);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->thread, NULL);
    close(h->wake);
    pthread_cond_destroy(&h->round);
    pthread_cond_destroy(&h->more);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
