/* heads.c — the deadline of request heads and who gives way at capacity (heads.h). */
#include "heads.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#define HEADS_RESERVE_SHARE 64 /* at capacity, keep max/64 + 1 slots free for new clients */
#define HEADS_MIN_NAP 0.01     /* the timer thread sleeps at least this long (seconds) */

typedef struct heads_entry heads_entry;

/* Connections in the order their wait began, oldest first. */
typedef struct heads_list {
    heads_entry *first, *last;
} heads_list;

struct heads_entry {
    int fd;
    heads_list *listed; /* the list it is in (waiting for a head, or for a body), or NULL */
    int shut;           /* shut down, not yet closed by libmicrohttpd */
    double since;
    heads_entry *prev, *next;
};

struct heads {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* the timer thread's sleep; signalled to stop it */
    pthread_t timer;
    int stop;
    double secs;
    int keep_live; /* live (not shut) connections allowed before the oldest waiting give way */
    int n_conns, n_shut;
    heads_list heads;  /* waiting for a head (it has a deadline) */
    heads_list bodies; /* head in, waiting for the rest of the body (only gives way) */
};

static double heads__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void heads__unlink(heads_entry *e)
{
    heads_list *l = e->listed;
    if (!l)
        return;
    if (e->prev)
        e->prev->next = e->next;
    else
        l->first = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        l->last = e->prev;
    e->prev = e->next = NULL;
    e->listed = NULL;
}

static void heads__append(heads_list *l, heads_entry *e, double now)
{
    heads__unlink(e);
    e->since = now;
    e->prev = l->last;
    e->next = NULL;
    if (l->last)
        l->last->next = e;
    else
        l->first = e;
    l->last = e;
    e->listed = l;
}

/* Ends e's connection: libmicrohttpd reads the end of stream and closes it. Under mu. */
static void heads__shut(heads *h, heads_entry *e)
{
    heads__unlink(e);
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
        while (h->heads.first && now - h->heads.first->since >= h->secs)
            heads__shut(h, h->heads.first);
        double nap = h->heads.first ? h->heads.first->since + h->secs - now : h->secs;
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
    heads_list *lists[] = {&h->heads, &h->bodies};
    for (int i = 0; i < 2; i++)
        while (lists[i]->first) { /* none after MHD_stop_daemon; freed in case */
            heads_entry *e = lists[i]->first;
            heads__unlink(e);
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
        heads__unlink(e);
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
    heads__append(&h->heads, e, heads__now());
    /* the connections that have waited longest for a request (head or body) give way */
    while (h->n_conns - h->n_shut > h->keep_live) {
        heads_entry *a = h->heads.first != e ? h->heads.first : NULL, *b = h->bodies.first;
        heads_entry *oldest = a && (!b || a->since <= b->since) ? a : b;
        if (!oldest)
            break;
        heads__shut(h, oldest);
    }
    pthread_mutex_unlock(&h->mu);
}

static heads_entry *heads__entry(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

void heads_arrived(heads *h, struct MHD_Connection *conn, int body)
{
    heads_entry *e = heads__entry(conn);
    if (!e)
        return;
    pthread_mutex_lock(&h->mu);
    if (body && !e->shut)
        heads__append(&h->bodies, e, heads__now());
    else
        heads__unlink(e);
    pthread_mutex_unlock(&h->mu);
}

void heads_body_done(heads *h, struct MHD_Connection *conn)
{
    heads_entry *e = heads__entry(conn);
    if (!e)
        return;
    pthread_mutex_lock(&h->mu);
    if (e->listed == &h->bodies)
        heads__unlink(e);
    pthread_mutex_unlock(&h->mu);
}

void heads_waiting(heads *h, struct MHD_Connection *conn)
{
    heads_entry *e = heads__entry(conn);
    if (!e)
        return;
    pthread_mutex_lock(&h->mu);
    if (!e->shut)
        heads__append(&h->heads, e, heads__now());
    pthread_mutex_unlock(&h->mu);
}
