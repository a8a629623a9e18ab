/* heads.h — the deadline of request heads and who gives way at capacity.
 *
 * libmicrohttpd's connection timeout is an idle timeout: a client that sends one header
 * line every few seconds keeps its connection for ever, and 1,080 such connections from
 * 9 addresses (each under the per-address limit) took every slot. heads keeps every
 * connection that is waiting for a request head (a new connection, or a keep-alive one
 * after its last answer) in arrival order, and
 *   - closes one whose head has not arrived as a whole within head_seconds of the wait's
 *     start (a timer thread), and
 *   - when a new connection brings the count near max_connections, closes the oldest
 *     waiting connections so that a few slots stay free for the next client.
 * "Closes" is shutdown(2) of the socket: libmicrohttpd then reads the end of stream and
 * closes the connection itself (there is no call to close one from outside).
 *
 * Lock: heads->mu is a leaf. libmicrohttpd calls heads_notify before it closes a
 * connection's socket, and the socket is shut down only under mu while its entry is
 * listed, so a descriptor is never shut down after it was closed (and perhaps reused).
 */
#ifndef HAMEL_SERVER_HEADS_H
#define HAMEL_SERVER_HEADS_H

#include <microhttpd.h>

typedef struct heads heads;

/* A new tracker with its timer thread, or NULL. max_connections is the daemon's limit. */
heads *heads_new(double head_seconds, int max_connections);

/* Stops the timer thread and frees the tracker (entries still listed are freed).
 * Accepts NULL. Call after MHD_stop_daemon. */
void heads_free(heads *h);

/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback; cls is the tracker. */
void heads_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                  enum MHD_ConnectionNotificationCode code);

/* The head of conn's request has arrived (the access handler's first call). */
void heads_arrived(heads *h, struct MHD_Connection *conn);

/* conn's request was answered and the connection stays open: it waits for a new head. */
void heads_waiting(heads *h, struct MHD_Connection *conn);

#endif
