/* h_batches.h — the per-request state of the batch routes (POST /v1/batches, GET and
 * DELETE /v1/batches/{id}), owned by h_batches.c.
 *
 * It is http_conn's `batch` member (one of the per-route states, http_conn.h): only
 * these routes' handlers and hooks touch it, and their rows' release hook frees it. A
 * stream's state is not here: its content reader owns it (h_batches.c, http_stream).
 */
#ifndef HAMEL_SERVER_H_BATCHES_H
#define HAMEL_SERVER_H_BATCHES_H

#include "batch.h"

typedef struct http_batch_state {
    batch *b;            /* the batch answered about (a reference) */
    batch_waiter waiter; /* parked on b while suspended (?wait) */
    int created;         /* POST: batch_create ran with the model's compilation (http__batch_work) */
} http_batch_state;

#endif
