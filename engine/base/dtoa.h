/* dtoa.h — shortest round-trip formatting of doubles.
 *
 * dtoa_shortest writes the shortest decimal string that strtod reads back to the same
 * double (of the shortest candidates, the one closest to the value; ties to even
 * digits). It implements Giulietti's Schubfach algorithm ("The Schubfach way to render
 * doubles", 2020) from the paper's description: the value's rounding interval is
 * scaled by a 126-bit approximation of a power of ten, rounded to odd, and the decimal
 * candidates in it are read off directly. The power-of-ten table is a constant generated
 * once, offline (scripts/gen-dtoa-table.py, exact integers: engine/dtoa_table.h).
 *
 * Output format (valid JSON numbers, like %.17g but shortest): fixed notation when the
 * decimal exponent x is in [-5, 17) ("0.001", "1.5", "123.0" — a whole number keeps
 * ".0", as jansson writes reals), else scientific ("1e-07" style without padding:
 * "1e-7", "1.7976931348623157e308", "5e-324"). -0.0 is "-0.0". A non-finite value is
 * written as "null" (API.md: non-finite results are null).
 */
#ifndef HAMEL_DTOA_H
#define HAMEL_DTOA_H

#include <stddef.h>

/* Bytes dtoa_shortest may write (as scratch past the text too), including the NUL. */
#define DTOA_MAX 48
/* The longest text: "-1.2345678901234567e-308". */
#define DTOA_LEN 24

/* Writes v into buf (at least DTOA_MAX bytes), NUL-terminated; returns the length. */
int dtoa_shortest(double v, char *buf);

/* Writes the texts of v[0..count) separated by commas ("1.5,0.1,null") at out, which
 * must have count * (DTOA_LEN + 1) + DTOA_MAX bytes (used as scratch past the text);
 * no NUL. Returns the length. The series writer of result documents (jsonout). */
size_t dtoa_join(const double *v, size_t count, char *out);

/* The decimal form: v = digits * 10^exp10 with digits having no trailing zeros (for
 * v != 0). Returns 0, or -1 for a non-finite v. *neg is the sign bit. For tests. */
int dtoa_decimal(double v, unsigned long long *digits, int *exp10, int *neg);

#endif
