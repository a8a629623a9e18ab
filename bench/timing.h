/* timing.h — the clock and the median every benchmark program uses (header only: each
 * bench/ program is built from its one source file). */
#ifndef HAMEL_BENCH_TIMING_H
#define HAMEL_BENCH_TIMING_H

#include <stdlib.h>
#include <time.h>

/* CLOCK_MONOTONIC in milliseconds. */
static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* qsort order of doubles, ascending. */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[n]; sorts v. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
