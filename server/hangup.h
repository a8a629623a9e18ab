/* hangup.h — notices clients that hang up while their request's work runs elsewhere.
 *
 * libmicrohttpd does not watch a suspended connection, so a client that closes its
 * socket while its model compiles on the offload pool would go unnoticed until the
 * compilation ends (seconds, for a model near the compile budget). This module polls
 * the sockets of such requests from one thread (POLLRDHUP: the peer closed or reset)
 * and sets the request's cancel flag, which the engine reads inside its loops
 * (engine_model_compile_ctl). On shutdown every watched flag is set at once and so is
 * the flag of any request watched later.
 *
 * Lock order: the module's mutex is a leaf; flags are atomics written under it.
 */
#ifndef HAMEL_SERVER_HANGUP_H
#define HAMEL_SERVER_HANGUP_H

#include <stdatomic.h>

typedef enum hangup_why {
    HANGUP_NONE = 0,
    HANGUP_CLIENT_GONE, /* the peer closed or reset the connection */
    HANGUP_SHUTDOWN,    /* hangup_shutdown: the server is stopping */
} hangup_why;

/* One watched socket; owned by the caller (embedded in its request), linked while
 * watched. */
typedef struct hangup_entry {
    int fd;
    atomic_int *flag;
    atomic_int why; /* a hangup_why, set with the flag */
    int polled;     /* in the watcher's current poll() (under the module's mutex) */
    struct hangup_entry *prev, *next;
} hangup_entry;

typedef struct hangup hangup;

/* Starts the watcher thread, which checks the watched sockets every poll_ms
 * milliseconds (a hang-up is noticed within that). Returns NULL on failure. */
hangup *hangup_new(int poll_ms);

/* Watches fd until hangup_forget(e): when its peer hangs up, sets e->why and *flag to 1.
 * `e` and `flag` are borrowed until then (`e` until hangup_settle). `e` is zeroed before
 * its first watch. */
void hangup_watch(hangup *h, hangup_entry *e, int fd, atomic_int *flag);

/* Stops watching e (a no-op if it is not watched): after it returns the watcher never
 * sets e's flag, and a poll() in progress on its socket is woken (a socket closed while
 * another thread polls it stays open, unseen, until that poll returns: the client would
 * wait for the server's FIN up to a poll period). It does not wait for that poll's round
 * to end, which still marks e: call hangup_settle before e's memory is freed. */
void hangup_forget(hangup *h, hangup_entry *e);

/* Waits until no poll round marks e any more (at once unless a round that polled e is
 * still ending). Call before e's memory is freed; hangup_watch does it itself. An entry
 * never watched (zeroed) needs none. */
void hangup_settle(hangup *h, hangup_entry *e);

/* Sets the flag of every watched entry, and of every entry watched from now on, with
 * HANGUP_SHUTDOWN. */
void hangup_shutdown(hangup *h);

/* Stops the thread and frees. Accepts NULL. Nothing may be watched any more. */
void hangup_free(hangup *h);

#endif
