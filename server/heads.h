/* heads.h — the deadline of request heads and who gives way at capacity.
 *
 * libmicrohttpd's connection timeout is an idle timeout: a client that sends one header
 * line every few seconds keeps its connection for ever, and 1,080 such connections from
 * 9 addresses (each under the per-address limit) took every slot; so did 1,200 that sent
 * a whole head and then a body one byte every few seconds. heads keeps every connection
 * that is waiting for its request — for a head (a new connection, or a keep-alive one
 * after its last answer), or, its head in, for the rest of its body — in arrival order,
 * and
 *   - closes one whose head has not arrived as a whole within head_seconds of the wait's
 *     start (a timer thread; a body keeps the idle timeout: a large one on a slow link
 *     may take long), and
 *   - when a new connection brings the count near max_connections, closes the connections
 *     that have waited longest (for a head or for a body) so that a few slots stay free
 *     for the next client.
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

/* The head of conn's request has arrived (the access handler's first call); body: the
 * request has a body still to come (it waits for it, heads_body_done, giving way at
 * capacity). */
void heads_arrived(heads *h, struct MHD_Connection *conn, int body);

/* conn's request body has arrived whole (or there was none). */
void heads_body_done(heads *h, struct MHD_Connection *conn);

/* conn's request was answered and the connection stays open: it waits for a new head. */
void heads_waiting(heads *h, struct MHD_Connection *conn);

#endif
