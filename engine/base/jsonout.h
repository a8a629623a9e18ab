/* jsonout.h — the JSON writer for result documents.
 *
 * Serialises jansson values compactly (members in insertion order, as json_dumps
 * with JSON_COMPACT) into one growable buffer, with reals written by dtoa_shortest
 * (shortest round-trip form) instead of printf("%.17g"): on a 1001-sample result
 * most of the text is numbers. The buffer has a hard cap; once an append fails the
 * writer stays failed and jsonout_finish returns NULL.
 *
 * Strings are escaped as jansson does by default: '"', '\\' and control characters
 * (as \b \f \n \r \t or \u00XX); UTF-8 is copied as is (jansson only holds valid UTF-8).
 */
#ifndef HAMEL_JSONOUT_H
#define HAMEL_JSONOUT_H

#include <jansson.h>
#include <stddef.h>

/* The largest document jsonout will build (1 GiB). */
#define JSONOUT_MAX ((size_t)1 << 30)

typedef struct jsonout {
    char *p;
    size_t len, cap;
    int err;    /* nonzero once an allocation failed or the cap was hit */
    int indent; /* 0: compact; n: newlines and n spaces a level, ": " (json_dumps JSON_INDENT(n)) */
    int depth;
    /* Optional: called for every string value that starts with byte 0x01; returning 1
     * means it wrote something in the string's place (sim.c writes a series of numbers
     * there without a jansson node per number), 0 writes the string. */
    int (*hook)(struct jsonout *o, const char *s, size_t len, void *ctx);
    void *hook_ctx;
} jsonout;

/* An empty writer with `reserve` bytes preallocated (0: a default). Returns 0, or -1
 * when out of memory (then o->err is set and later calls do nothing). */
int jsonout_init(jsonout *o, size_t reserve);

/* Appends len raw bytes / a double (null if non-finite) / a quoted, escaped string /
 * the compact form of a jansson value (borrowed). */
void jsonout_raw(jsonout *o, const char *s, size_t len);
void jsonout_double(jsonout *o, double v);
void jsonout_string(jsonout *o, const char *s, size_t len);
void jsonout_value(jsonout *o, const json_t *j);

/* Appends the array [v[0],..,v[count-1]] (each as jsonout_double writes it). */
void jsonout_doubles(jsonout *o, const double *v, size_t count);

/* Ends the text with a NUL and hands the malloc'd buffer to the caller (who frees
 * it), with its length (without the NUL) in *len when len is not NULL. Returns NULL
 * (and frees everything) if the writer failed. The writer is empty afterwards. */
char *jsonout_finish(jsonout *o, size_t *len);

/* The text of j indented as json_dumps(j, JSON_INDENT(indent)) lays it out, for people
 * (the CLI). Same ownership as jsonout_dumps. */
char *jsonout_dumps_indent(const json_t *j, int indent, size_t *len);

/* Frees what the writer holds. Accepts a writer already finished. */
void jsonout_free(jsonout *o);

/* The compact text of j (a drop-in for json_dumps(j, JSON_COMPACT)): malloc'd, caller
 * frees; NULL when out of memory or j is NULL. */
char *jsonout_dumps(const json_t *j, size_t *len);

#endif
