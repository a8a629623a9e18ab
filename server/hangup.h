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
 * `e` and `flag` are borrowed until then. */
void hangup_watch(hangup *h, hangup_entry *e, int fd, atomic_int *flag);

/* Stops watching e (a no-op if it is not watched). After it returns the watcher no
 * longer touches e or its flag, and holds no reference to its socket: a poll() in
 * progress on it is woken and has returned (a socket closed while another thread polls
 * it stays open, unseen, until that poll returns: the client would wait for the
 * server's FIN up to a poll period). */
void hangup_forget(hangup *h, hangup_entry *e);

/* Sets the flag of every watched entry, and of every entry watched from now on, with
 * HANGUP_SHUTDOWN. */
void hangup_shutdown(hangup *h);

/* Stops the thread and frees. Accepts NULL. Nothing may be watched any more. */
void hangup_free(hangup *h);

#endif
