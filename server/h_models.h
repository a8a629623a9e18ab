/* h_models.h — the per-request state of GET /v1/models/{id}/equations?form=, owned by
 * h_models.c.
 *
 * It is http_conn's `form` member (one of the per-route states, http_conn.h). The
 * derivation's inputs and outputs are the offloaded work's (http_conn.work); this is
 * only what makes it one derivation per (model, form, limits).
 */
#ifndef HAMEL_SERVER_H_MODELS_H
#define HAMEL_SERVER_H_MODELS_H

#include "once.h"

typedef struct http_form_state {
    char key[ONCE_KEY_MAX + 1]; /* the request's key in http_server.forms */
} http_form_state;

#endif
