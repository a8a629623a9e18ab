/* tangent.c — the tangent (dual-number) tape interpreter (tangent.h). */
#include "tangent.h"

#include <math.h>
#include <string.h>

/* The same binary-exponentiation chain as tape.c's powi, so values agree bit for bit. */
static double tangent_powi(double x, int32_t k)
{
    int neg = k < 0;
    unsigned long e = neg ? -(unsigned long)k : (unsigned long)k;
    double r = 1.0;
    while (e) {
        if (e & 1)
            r *= x;
        x *= x;
        e >>= 1;
    }
    return neg ? 1.0 / r : r;
}

/* ds_i = ca * ds_a + cb * ds_b over the nd directions (b < 0: no second operand). */
static void lincomb(double *di, double ca, const double *da, double cb, const double *db, int nd)
{
    if (db)
        for (int d = 0; d < nd; d++)
            di[d] = ca * da[d] + cb * db[d];
    else
        for (int d = 0; d < nd; d++)
            di[d] = ca * da[d];
}

int tape_eval_tangent(const tape *t, const double *in, const double *din, int nd, double *s, double *ds,
                      double *out, double *dout)
{
    const tape_ins *ins = t->ins;
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *p = &ins[i];
        double *di = ds + (size_t)i * nd;
        const double *da = p->a >= 0 && p->a < i ? ds + (size_t)p->a * nd : NULL;
        const double *db = p->b >= 0 && p->b < i ? ds + (size_t)p->b * nd : NULL;
        double a = da ? s[p->a] : 0.0, b = db ? s[p->b] : 0.0;
        switch ((tape_op)p->op) {
        case TAPE_INPUT:
            s[i] = in[p->a];
            memcpy(di, din + (size_t)p->a * nd, nd * sizeof *di);
            break;
        case TAPE_CONST:
            s[i] = p->c;
            memset(di, 0, nd * sizeof *di);
            break;
        case TAPE_ADD:
            s[i] = a + b;
            lincomb(di, 1.0, da, 1.0, db, nd);
            break;
        case TAPE_SUB:
            s[i] = a - b;
            lincomb(di, 1.0, da, -1.0, db, nd);
            break;
        case TAPE_MUL:
            s[i] = a * b;
            lincomb(di, b, da, a, db, nd);
            break;
        case TAPE_DIV:
            s[i] = a / b;
            /* d(a/b) = (da - (a/b) db) / b */
            for (int d = 0; d < nd; d++)
                di[d] = (da[d] - s[i] * db[d]) / b;
            break;
        case TAPE_NEG:
            s[i] = -a;
            lincomb(di, -1.0, da, 0.0, NULL, nd);
            break;
        case TAPE_POWI:
            s[i] = tangent_powi(a, p->b);
            lincomb(di, p->b == 0 ? 0.0 : (double)p->b * tangent_powi(a, p->b - 1), da, 0.0, NULL, nd);
            break;
        case TAPE_POW: {
            s[i] = pow(a, b);
            /* d a^b = b a^(b-1) da + a^b log(a) db; the log term only where b varies */
            double ca = b == 0.0 ? 0.0 : b * pow(a, b - 1.0);
            int bvaries = 0;
            for (int d = 0; d < nd; d++)
                bvaries |= db[d] != 0.0;
            lincomb(di, ca, da, bvaries ? s[i] * log(a) : 0.0, bvaries ? db : NULL, nd);
            break;
        }
        case TAPE_SQRT:
            s[i] = sqrt(a);
            lincomb(di, 0.5 / s[i], da, 0.0, NULL, nd);
            break;
        case TAPE_EXP:
            s[i] = exp(a);
            lincomb(di, s[i], da, 0.0, NULL, nd);
            break;
        case TAPE_LOG:
            s[i] = log(a);
            lincomb(di, 1.0 / a, da, 0.0, NULL, nd);
            break;
        case TAPE_SIN:
            s[i] = sin(a);
            lincomb(di, cos(a), da, 0.0, NULL, nd);
            break;
        case TAPE_COS:
            s[i] = cos(a);
            lincomb(di, -sin(a), da, 0.0, NULL, nd);
            break;
        case TAPE_TAN:
            s[i] = tan(a);
            lincomb(di, 1.0 + s[i] * s[i], da, 0.0, NULL, nd);
            break;
        case TAPE_ASIN:
            s[i] = asin(a);
            lincomb(di, 1.0 / sqrt(1.0 - a * a), da, 0.0, NULL, nd);
            break;
        case TAPE_ACOS:
            s[i] = acos(a);
            lincomb(di, -1.0 / sqrt(1.0 - a * a), da, 0.0, NULL, nd);
            break;
        case TAPE_ATAN:
            s[i] = atan(a);
            lincomb(di, 1.0 / (1.0 + a * a), da, 0.0, NULL, nd);
            break;
        case TAPE_ATAN2: {
            /* atan2(y = a, x = b): (x dy - y dx) / (x^2 + y^2) */
            s[i] = atan2(a, b);
            double r2 = a * a + b * b;
            lincomb(di, b / r2, da, -a / r2, db, nd);
            break;
        }
        case TAPE_SINH:
            s[i] = sinh(a);
            lincomb(di, cosh(a), da, 0.0, NULL, nd);
            break;
        case TAPE_COSH:
            s[i] = cosh(a);
            lincomb(di, sinh(a), da, 0.0, NULL, nd);
            break;
        case TAPE_TANH:
            s[i] = tanh(a);
            lincomb(di, 1.0 - s[i] * s[i], da, 0.0, NULL, nd);
            break;
        case TAPE_ABS:
            s[i] = fabs(a);
            lincomb(di, a > 0.0 ? 1.0 : a < 0.0 ? -1.0 : 0.0, da, 0.0, NULL, nd);
            break;
        case TAPE_SIGN:
            s[i] = a > 0.0 ? 1.0 : a < 0.0 ? -1.0 : a;
            lincomb(di, 0.0, da, 0.0, NULL, nd);
            break;
        default: return -1;
        }
    }
    for (int k = 0; k < t->n_outputs; k++) {
        out[k] = s[t->outputs[k]];
        memcpy(dout + (size_t)k * nd, ds + (size_t)t->outputs[k] * nd, nd * sizeof *dout);
    }
    return 0;
}
