/* hangup.c — the watcher of hung-up clients (hangup.h): one thread that polls the
 * watched sockets for POLLRDHUP every HANGUP_POLL_MS and sets the flags of those
 * whose peer went away.
 *
 * Lock order: h->mu is a leaf. The thread snapshots the fds under it, polls without
 * it, and acts on a result only for entries still watched (checked under it again):
 * a watched entry's socket stays open (its connection is suspended), so a ready fd of
 * a still-watched entry is that entry's socket.
 */
#include "hangup.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>

#define HANGUP_POLL_MS 50
#define HANGUP_MAX_POLL 256 /* sockets polled per round (more are polled in later rounds) */

struct hangup {
    pthread_mutex_t mu;
    pthread_cond_t more; /* an entry was added, or stopping */
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

/* Whether fd's peer hung up, asked again now. The round's answer may be about an entry
 * forgotten during the poll and watched again since (the next request's connection,
 * allocated where the last one was, often with the same fd number, while the last
 * client's close is what woke the poll): it fired on a live client now and then. */
static int hangup__gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void hangup__fire(hangup_entry *e, int why)
{
    atomic_store(&e->why, why);
    atomic_store(e->flag, 1);
}

static void *hangup__thread(void *arg)
{
    hangup *h = arg;
    struct pollfd fds[HANGUP_MAX_POLL];
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
            who[n++] = e;
        }
        pthread_mutex_unlock(&h->mu);
        int ready = poll(fds, (nfds_t)n, HANGUP_POLL_MS);
        pthread_mutex_lock(&h->mu);
        for (int i = 0; i < n && ready > 0; i++)
            if ((fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) && hangup__watched(h, who[i]) &&
                atomic_load(&who[i]->why) == HANGUP_NONE && hangup__gone(who[i]->fd))
                hangup__fire(who[i], HANGUP_CLIENT_GONE);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

hangup *hangup_new(void)
{
    hangup *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->more, NULL);
    if (pthread_create(&h->thread, NULL, hangup__thread, h) != 0) {
        pthread_cond_destroy(&h->more);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return NULL;
    }
    return h;
}

void hangup_watch(hangup *h, hangup_entry *e, int fd, atomic_int *flag)
{
    e->fd = fd;
    e->flag = flag;
    atomic_store(&e->why, HANGUP_NONE);
    pthread_mutex_lock(&h->mu);
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
    pthread_cond_destroy(&h->more);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
