/* heads.c — the deadline of request heads and who gives way at capacity (heads.h). */
#include "heads.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#define HEADS_RESERVE_SHARE 64 /* at capacity, keep max/64 + 1 slots free for new clients */
#define HEADS_MIN_NAP 0.01     /* the timer thread sleeps at least this long (seconds) */

typedef struct heads_entry {
    int fd;
    int listed; /* waiting for a head: in the list below */
    int shut;   /* shut down, not yet closed by libmicrohttpd */
    double since;
    struct heads_entry *prev, *next;
} heads_entry;

struct heads {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the timer thread's sleep; signalled to stop it */
    pthread_t timer;
    int stop;
    double secs;
    int keep_live; /* live (not shut) connections allowed before the oldest waiting give way */
    int n_conns, n_shut;
    heads_entry *first, *last; /* waiting for a head, oldest first */
};

static double heads__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void heads__unlink(heads *h, heads_entry *e)
{
    if (!e->listed)
        return;
    if (e->prev)
        e->prev->next = e->next;
    else
        h->first = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        h->last = e->prev;
    e->prev = e->next = NULL;
    e->listed = 0;
}

static void heads__append(heads *h, heads_entry *e, double now)
{
    heads__unlink(h, e);
    e->since = now;
    e->prev = h->last;
    e->next = NULL;
    if (h->last)
        h->last->next = e;
    else
        h->first = e;
    h->last = e;
    e->listed = 1;
}

/* Ends e's connection: libmicrohttpd reads the end of stream and closes it. Under mu. */
static void heads__shut(heads *h, heads_entry *e)
{
    heads__unlink(h, e);
    if (e->shut)
        return;
    e->shut = 1;
    h->n_shut++;
    shutdown(e->fd, SHUT_RDWR);
}

static void *heads__timer(void *arg)
{
    heads *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        double now = heads__now();
        while (h->first && now - h->first->since >= h->secs)
            heads__shut(h, h->first);
        double nap = h->first ? h->first->since + h->secs - now : h->secs;
        if (nap < HEADS_MIN_NAP)
            nap = HEADS_MIN_NAP;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long ns = until.tv_nsec + (long)((nap - (double)(long)nap) * 1e9);
        until.tv_sec += (time_t)nap + ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&h->cv, &h->mu, &until);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

heads *heads_new(double head_seconds, int max_connections)
{
    heads *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->secs = head_seconds;
    h->keep_live = max_connections - (max_connections / HEADS_RESERVE_SHARE + 1);
    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&h->timer, NULL, heads__timer, h) != 0) {
        pthread_cond_destroy(&h->cv);
        pthread_mutex_destroy(&h->mu);
        free(h);
        return NULL;
    }
    return h;
}

void heads_free(heads *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->timer, NULL);
    while (h->first) { /* none after MHD_stop_daemon; freed in case */
        heads_entry *e = h->first;
        heads__unlink(h, e);
        free(e);
    }
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void heads_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                  enum MHD_ConnectionNotificationCode code)
{
    heads *h = cls;
    heads_entry *e = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (!e)
            return;
        pthread_mutex_lock(&h->mu);
        heads__unlink(h, e);
        h->n_conns--;
        h->n_shut -= e->shut;
        pthread_mutex_unlock(&h->mu);
        free(e);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    e = info ? calloc(1, sizeof *e) : NULL;
    if (!e)
        return; /* untracked: this connection keeps only the idle timeout */
    e->fd = info->connect_fd;
    *socket_context = e;
    pthread_mutex_lock(&h->mu);
    h->n_conns++;
    heads__append(h, e, heads__now());
    while (h->n_conns - h->n_shut > h->keep_live && h->first != e)
        heads__shut(h, h->first); /* the oldest incomplete heads give way */
    pthread_mutex_unlock(&h->mu);
}

static heads_entry *heads__entry(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

void heads_arrived(heads *h, struct MHD_Connection *conn)
{
    heads_entry *e = heads__entry(conn);
    if (!e)
        return;
    pthread_mutex_lock(&h->mu);
    heads__unlink(h, e);
    pthread_mutex_unlock(&h->mu);
}

void heads_waiting(heads *h, struct MHD_Connection *conn)
{
    heads_entry *e = heads__entry(conn);
    if (!e)
        return;
    pthread_mutex_lock(&h->mu);
    if (!e->shut)
        heads__append(h, e, heads__now());
    pthread_mutex_unlock(&h->mu);
}
