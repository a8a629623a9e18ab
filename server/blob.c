/* blob.c — immutable, reference-counted byte strings. */
#include "blob.h"

#include <stdlib.h>
#include <string.h>

blob *blob_new(const char *data, size_t len)
{
    blob *b = malloc(sizeof *b + len + 1);
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    atomic_init(&b->gz, NULL);
    b->aux = 0;
    b->len = len;
    b->data = (char *)(b + 1);
    memcpy(b->data, data, len);
    b->data[len] = '\0';
    return b;
}

blob *blob_take_len(char *s, size_t len)
{
    if (!s)
        return NULL;
    blob *b = malloc(sizeof *b);
    if (!b) {
        free(s);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    atomic_init(&b->gz, NULL);
    b->aux = 0;
    b->len = len;
    b->data = s;
    return b;
}

blob *blob_take(char *s) { return s ? blob_take_len(s, strlen(s)) : NULL; }

blob *blob_retain(blob *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void blob_release(blob *b)
{
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        blob_release(atomic_load_explicit(&b->gz, memory_order_acquire));
        if (b->data != (char *)(b + 1))
            free(b->data);
        free(b);
    }
}
