/* negotiate.h — what a request accepts: q-values of Accept and Accept-Encoding, and
 * If-None-Match against an entity tag (RFC 9110 §12.4, §12.5, §13.1.2).
 *
 * Pure functions of header text (borrowed), no allocation: the HTTP face asks them which
 * media type and content coding to answer with and whether a 304 will do.
 */
#ifndef HAMEL_SERVER_NEGOTIATE_H
#define HAMEL_SERVER_NEGOTIATE_H

#define NEGOTIATE_ETAG_MAX 160 /* longest entity tag built by the server, quotes included */

/* How a media type was matched by an Accept header (negotiate_accept). */
typedef enum negotiate_match {
    NEGOTIATE_NONE,     /* no media range matches it */
    NEGOTIATE_ANY,      /* matched by * / * */
    NEGOTIATE_SUBTYPES, /* matched by type/ * */
    NEGOTIATE_EXACT,    /* named */
} negotiate_match;

/* The q-value (0..1) the Accept header `accept` gives the media type `type` ("a/b"):
 * that of the most specific media range matching it (a named type before type/ * before
 * * / *; parameters other than q are ignored). An absent header (NULL) accepts every type
 * with q 1; a header naming no range that matches gives 0. *how (may be NULL) says how it
 * was matched. */
double negotiate_accept(const char *accept, const char *type, negotiate_match *how);

/* The q-value the Accept-Encoding header `ae` gives the content coding `coding` ("gzip"):
 * its own entry's (x-gzip counts as gzip), else that of "*", else 0. NULL gives 0 (a
 * request without Accept-Encoding gets the identity coding). */
double negotiate_coding(const char *ae, const char *coding);

/* Whether If-None-Match `inm` (may be NULL: no) matches the representation whose entity
 * tag is `etag` (a quoted strong tag, "\"...\""): "*", or a comma list of tags one of
 * which equals etag under the weak comparison (a W/ prefix ignored on either side), as
 * RFC 9110 asks of GET and HEAD. A malformed list matches what was read before the
 * malformed part. */
int negotiate_none_match(const char *inm, const char *etag);

#endif
