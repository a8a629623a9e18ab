/* linalg.c — small dense LU and Cholesky (see linalg.h). */
#include "linalg.h"

#include <math.h>

int linalg_lu(int n, double *a, int *piv)
{
    for (int k = 0; k < n; k++) {
        int p = k;
        double best = fabs(a[k * n + k]), colmax = best;
        for (int i = k + 1; i < n; i++) {
            double v = fabs(a[i * n + k]);
            if (v > best) {
                best = v;
                p = i;
            }
            if (v > colmax)
                colmax = v;
        }
        piv[k] = p;
        if (!(best > 0.0) || !isfinite(best))
            return -1;
        if (p != k)
            for (int j = 0; j < n; j++) {
                double t = a[k * n + j];
                a[k * n + j] = a[p * n + j];
                a[p * n + j] = t;
            }
        double inv = 1.0 / a[k * n + k];
        for (int i = k + 1; i < n; i++) {
            double f = a[i * n + k] * inv;
            a[i * n + k] = f;
            if (f != 0.0)
                for (int j = k + 1; j < n; j++)
                    a[i * n + j] -= f * a[k * n + j];
        }
    }
    /* A pivot tiny against the largest entry of the matrix means singular. */
    double amax = 0.0, pmin = INFINITY;
    for (int k = 0; k < n; k++) {
        double v = fabs(a[k * n + k]);
        if (v < pmin)
            pmin = v;
        for (int j = k; j < n; j++)
            if (fabs(a[k * n + j]) > amax)
                amax = fabs(a[k * n + j]);
    }
    return pmin <= 1e-13 * amax ? -1 : 0;
}

void linalg_lu_solve(int n, const double *a, const int *piv, double *b)
{
    for (int k = 0; k < n; k++)
        if (piv[k] != k) {
            double t = b[k];
            b[k] = b[piv[k]];
            b[piv[k]] = t;
        }
    for (int i = 1; i < n; i++) {
        double s = b[i];
        for (int j = 0; j < i; j++)
            s -= a[i * n + j] * b[j];
        b[i] = s;
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = b[i];
        for (int j = i + 1; j < n; j++)
            s -= a[i * n + j] * b[j];
        b[i] = s / a[i * n + i];
    }
}

int linalg_chol(int n, double *a)
{
    for (int j = 0; j < n; j++) {
        double d = a[j * n + j];
        for (int k = 0; k < j; k++)
            d -= a[j * n + k] * a[j * n + k];
        if (!(d > 0.0) || !isfinite(d))
            return -1;
        d = sqrt(d);
        a[j * n + j] = d;
        double inv = 1.0 / d;
        for (int i = j + 1; i < n; i++) {
            double s = a[i * n + j];
            for (int k = 0; k < j; k++)
                s -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = s * inv;
        }
    }
    return 0;
}

void linalg_chol_solve(int n, const double *a, double *b)
{
    for (int i = 0; i < n; i++) {
        double s = b[i];
        for (int k = 0; k < i; k++)
            s -= a[i * n + k] * b[k];
        b[i] = s / a[i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = b[i];
        for (int k = i + 1; k < n; k++)
            s -= a[k * n + i] * b[k];
        b[i] = s / a[i * n + i];
    }
}
