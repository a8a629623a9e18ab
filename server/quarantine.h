/* quarantine.h — models whose engine work faulted, answered at once instead of run again.
 *
 * A model whose compilation or run killed an engine worker (isolate.h) is recorded here
 * with the problem it was answered with, under "<engine identity>/<model id>"
 * (engine_identity(): version and numerics; a new engine gets a new chance), until an
 * expiry (HAMEL_QUARANTINE_SECONDS, default one day). The record lives in the store (the
 * SQLite table quarantine, or the Redis key hamel:quarantine:<key> with the same
 * expiry), so it holds after a restart and on every instance of a cluster; this process
 * also holds the records it has seen in memory for a second.
 * An operator lists them with GET /v1/quarantine and clears one with
 * DELETE /v1/quarantine/{model_id} (or it expires). A record says when it was made
 * ("quarantined_at"; records written by earlier versions lack it).
 *
 * A compilation that faults before the model has an id is recorded under the id of its
 * JSON text ("sha256:" of the compact JSON with sorted keys), the id named in its problem.
 *
 * Thread-safe; the module's mutex is a leaf, never held during a store call.
 */
#ifndef HAMEL_SERVER_QUARANTINE_H
#define HAMEL_SERVER_QUARANTINE_H

#include <jansson.h>

#include "store.h"

#define QUARANTINE_DEFAULT_SECONDS 86400.0

/* Sets the store (borrowed; NULL: memory only) and the time a record lasts. A store
 * that is not shared (SQLite: only this process writes it) is read once here: while
 * memory holds every record it has, a check does not ask it. Shared (Redis: another
 * instance may add or clear records), every check not answered by memory asks it. */
void quarantine_start(store *st, double seconds, int shared);

/* Forgets the memory and the store. */
void quarantine_stop(void);

/* Whether the model with this id is quarantined: 1 and *problem (a new reference: the
 * problem it was quarantined with), or 0. Store failures count as not quarantined. */
int quarantine_check(const char *model_id, json_t **problem);

/* Quarantines the model with this id. `problem` is borrowed: "quarantined_until" is
 * added to it (before it is recorded) so that the first answer says so too. */
void quarantine_add(const char *model_id, json_t *problem);

/* Clears the quarantine of a model: 0, 1 when it was not quarantined, -1 when the
 * store failed. */
int quarantine_clear(const char *model_id);

#define QUARANTINE_LIST_MAX 1000 /* records one listing shows */

/* The models quarantined now under this engine identity, the latest to expire first:
 * 0 and *out (a new object {"quarantined": [{model_id, model_name?, signal?,
 * operation?, detail?, quarantined_at?, quarantined_until}], "count", "truncated"}:
 * truncated when more than QUARANTINE_LIST_MAX are, as GET /v1/quarantine answers), or
 * -1 when the store failed. Without a store, the records held in memory. */
int quarantine_list(json_t **out);

#endif
