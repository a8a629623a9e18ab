/* tape.c — the tape interpreter (see tape.h). */
#include "tape.h"

#include <math.h>
#include <stdlib.h>

void jit_release(void *jit);

void tape_free(tape *t)
{
    if (!t)
        return;
    if (t->jit)
        jit_release(t->jit);
    free(t->ins);
    free(t->outputs);
    free(t->yin);
    free(t);
}

static double powi(double x, int32_t k)
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

void tape_eval(const tape *t, const double *in, double *s, double *out)
{
    const tape_ins *ins = t->ins;
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *p = &ins[i];
        switch ((tape_op)p->op) {
        case TAPE_INPUT: s[i] = in[p->a]; break;
        case TAPE_CONST: s[i] = p->c; break;
        case TAPE_ADD: s[i] = s[p->a] + s[p->b]; break;
        case TAPE_SUB: s[i] = s[p->a] - s[p->b]; break;
        case TAPE_MUL: s[i] = s[p->a] * s[p->b]; break;
        case TAPE_DIV: s[i] = s[p->a] / s[p->b]; break;
        case TAPE_NEG: s[i] = -s[p->a]; break;
        case TAPE_POWI: s[i] = powi(s[p->a], p->b); break;
        case TAPE_POW: s[i] = pow(s[p->a], s[p->b]); break;
        case TAPE_SQRT: s[i] = sqrt(s[p->a]); break;
        case TAPE_EXP: s[i] = exp(s[p->a]); break;
        case TAPE_LOG: s[i] = log(s[p->a]); break;
        case TAPE_SIN: s[i] = sin(s[p->a]); break;
        case TAPE_COS: s[i] = cos(s[p->a]); break;
        case TAPE_TAN: s[i] = tan(s[p->a]); break;
        case TAPE_ASIN: s[i] = asin(s[p->a]); break;
        case TAPE_ACOS: s[i] = acos(s[p->a]); break;
        case TAPE_ATAN: s[i] = atan(s[p->a]); break;
        case TAPE_ATAN2: s[i] = atan2(s[p->a], s[p->b]); break;
        case TAPE_SINH: s[i] = sinh(s[p->a]); break;
        case TAPE_COSH: s[i] = cosh(s[p->a]); break;
        case TAPE_TANH: s[i] = tanh(s[p->a]); break;
        case TAPE_ABS: s[i] = fabs(s[p->a]); break;
        case TAPE_OP_COUNT: s[i] = NAN; break;
        }
    }
    for (int k = 0; k < t->n_outputs; k++)
        out[k] = s[t->outputs[k]];
}

const char *tape_op_libm_name(tape_op op)
{
    switch (op) {
    case TAPE_SQRT: return "sqrt";
    case TAPE_EXP: return "exp";
    case TAPE_LOG: return "log";
    case TAPE_SIN: return "sin";
    case TAPE_COS: return "cos";
    case TAPE_TAN: return "tan";
    case TAPE_ASIN: return "asin";
    case TAPE_ACOS: return "acos";
    case TAPE_ATAN: return "atan";
    case TAPE_SINH: return "sinh";
    case TAPE_COSH: return "cosh";
    case TAPE_TANH: return "tanh";
    case TAPE_ABS: return "fabs";
    default: return NULL;
    }
}
