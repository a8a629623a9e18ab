/* identity.h — the engine's build identity: which engine computed a result.
 *
 * The identity is "<version>+n<numerics>" (ENGINE_VERSION, ENGINE_NUMERICS in
 * engine_types.h). It goes into every key under which a computed answer is kept (the
 * simulation key, the native code cache), so that an engine whose numbers may differ never
 * serves an older engine's answers, and into every result's provenance. Model ids are
 * content addresses and do not carry it.
 *
 * Test hook: when the process starts with HAMEL_TEST_FAULTS=1, HAMEL_TEST_ENGINE_VERSION
 * (at most IDENTITY_VERSION_MAX - 1 characters of [0-9A-Za-z.-]) stands in for
 * ENGINE_VERSION, so that a test can play an older engine. Otherwise it is ignored.
 */
#ifndef HAMEL_IDENTITY_H
#define HAMEL_IDENTITY_H

#define IDENTITY_VERSION_MAX 32

/* The version in force: ENGINE_VERSION, or the test hook's. Static storage, read-only,
 * computed on first use (thread-safe). */
const char *engine_version(void);

/* ENGINE_NUMERICS. */
int engine_numerics(void);

/* The build identity "<engine_version()>+n<ENGINE_NUMERICS>". Static storage, read-only. */
const char *engine_identity(void);

#endif
