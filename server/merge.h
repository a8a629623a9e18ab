/* merge.h — a batch run merged over the batch's base request.
 *
 * Used where a batch's runs become simulation requests: by the server when it checks
 * them (batch.c) or queues one as a job (batch_feed.c), and by the engine workers, which
 * are sent the base once and each run's own members (isolate.c). Thread-safe (no state).
 */
#ifndef HAMEL_SERVER_MERGE_H
#define HAMEL_SERVER_MERGE_H

#include <jansson.h>

/* Merges run over base: members initial, parameters, integrator and output are merged
 * key by key (the run's keys win; the run's choice of output.samples|dt|times or
 * initial.speeds|qdot replaces the base's; initial.q, .speeds and .qdot are merged key by
 * key too); other members replace. Borrows both. Returns a new object sharing nothing
 * with its inputs, or NULL when out of memory. */
json_t *merge_run(const json_t *base, const json_t *run);

#endif
