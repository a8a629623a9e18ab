/* identity.c — the engine's build identity (identity.h). */
#include "identity.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_types.h"

static pthread_once_t identity_once = PTHREAD_ONCE_INIT;
static char identity_version[IDENTITY_VERSION_MAX];
static char identity_text[IDENTITY_VERSION_MAX + 16];

/* The test hook's version if it is on and well formed, else NULL. */
static const char *identity__override(void)
{
    const char *faults = getenv("HAMEL_TEST_FAULTS");
    const char *v = getenv("HAMEL_TEST_ENGINE_VERSION");
    if (!faults || strcmp(faults, "1") != 0 || !v || !v[0] || strlen(v) >= IDENTITY_VERSION_MAX)
        return NULL;
    if (strspn(v, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-") != strlen(v))
        return NULL;
    return v;
}

static void identity__init(void)
{
    const char *v = identity__override();
    snprintf(identity_version, sizeof identity_version, "%s", v ? v : ENGINE_VERSION);
    snprintf(identity_text, sizeof identity_text, "%s+n%d", identity_version, ENGINE_NUMERICS);
}

const char *engine_version(void)
{
    pthread_once(&identity_once, identity__init);
    return identity_version;
}

int engine_numerics(void) { return ENGINE_NUMERICS; }

const char *engine_identity(void)
{
    pthread_once(&identity_once, identity__init);
    return identity_text;
}
