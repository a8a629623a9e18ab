/* linalg.c — small dense LU and Cholesky (see linalg.h). */
#include "linalg.h"

#include <math.h>
#include <stdlib.h>

int linalg_lu(int n, double *a, int *piv)
{
    /* each row's largest entry before the elimination, swapped along with its row */
    double local[64], *rmax = n <= 64 ? local : malloc((size_t)n * sizeof *rmax);
    if (!rmax)
        return -1;
    for (int i = 0; i < n; i++) {
        rmax[i] = 0.0;
        for (int j = 0; j < n; j++)
            rmax[i] = fmax(rmax[i], fabs(a[i * n + j]));
    }
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        int p = k;
        double best = fabs(a[k * n + k]);
        for (int i = k + 1; i < n; i++) {
            double v = fabs(a[i * n + k]);
            if (v > best) {
                best = v;
                p = i;
            }
        }
        piv[k] = p;
        if (!(best > 0.0) || !isfinite(best)) {
            rc = -1;
            break;
        }
        if (p != k) {
            for (int j = 0; j < n; j++) {
                double t = a[k * n + j];
                a[k * n + j] = a[p * n + j];
                a[p * n + j] = t;
            }
            double t = rmax[k];
            rmax[k] = rmax[p];
            rmax[p] = t;
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
    /* A pivot tiny against its own row (the row's largest entry before the elimination or
     * after it) means singular. Against the largest entry of the whole matrix, a row
     * scaled by 1e-14 (a constraint or a speed written times a small parameter, an inertia
     * of 1e-9 beside a mass of 1e6) read as singular though nothing was. */
    for (int k = 0; k < n && rc == 0; k++) {
        double scale = rmax[k];
        for (int j = k; j < n; j++)
            scale = fmax(scale, fabs(a[k * n + j]));
        if (fabs(a[k * n + k]) <= 1e-13 * scale)
            rc = -1;
    }
    if (rmax != local)
        free(rmax);
    return rc;
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
