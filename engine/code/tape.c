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
        case TAPE_SIGN: s[i] = s[p->a] > 0.0 ? 1.0 : s[p->a] < 0.0 ? -1.0 : s[p->a]; break;
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
    case TAPE_SIGN: return "hamel_sign"; /* defined in the generated code's prelude */
    default: return NULL;
    }
}

/* The error bound of one instruction (tape_eval_err): |v| for the rounding of its own
 * result plus its operands' bounds ea, eb times the partial derivatives. */
static double ins_err(const tape_ins *p, double v, double a, double b, double ea, double eb)
{
    double av = fabs(v);
    switch ((tape_op)p->op) {
    case TAPE_INPUT: return 0.0;
    case TAPE_CONST: return av; /* a decimal constant was rounded once */
    case TAPE_ADD:
    case TAPE_SUB: return ea + eb + av;
    case TAPE_MUL: return fabs(b) * ea + fabs(a) * eb + av;
    case TAPE_DIV: return (ea + av * eb) / fabs(b) + av;
    case TAPE_NEG:
    case TAPE_ABS: return ea;
    case TAPE_POWI: {
        /* |k| |a|^(k-1) ea, and one rounding per multiplication (2 log2 |k| at most) */
        double k = fabs((double)p->b), d = ea == 0.0 ? 0.0 : k * fabs(powi(a, p->b - 1)) * ea;
        return d + (2.0 * log2(k + 1.0) + 1.0) * av;
    }
    case TAPE_POW: {
        double d = ea == 0.0 ? 0.0 : fabs(b * pow(a, b - 1.0)) * ea;
        double e = eb == 0.0 ? 0.0 : av * fabs(log(fabs(a))) * eb;
        return d + e + av;
    }
    case TAPE_SQRT: return (ea == 0.0 ? 0.0 : ea / (2.0 * av)) + av;
    case TAPE_EXP: return av * ea + av;
    case TAPE_LOG: return (ea == 0.0 ? 0.0 : ea / fabs(a)) + av;
    case TAPE_SIN: return fabs(cos(a)) * ea + av;
    case TAPE_COS: return fabs(sin(a)) * ea + av;
    case TAPE_TAN: return (1.0 + v * v) * ea + av;
    case TAPE_ASIN:
    case TAPE_ACOS: return (ea == 0.0 ? 0.0 : ea / sqrt(fabs(1.0 - a * a))) + av;
    case TAPE_ATAN: return ea / (1.0 + a * a) + av;
    case TAPE_ATAN2: {
        double r2 = a * a + b * b;
        return (ea == 0.0 && eb == 0.0 ? 0.0 : (fabs(b) * ea + fabs(a) * eb) / r2) + av;
    }
    case TAPE_SINH: return cosh(a) * ea + av;
    case TAPE_COSH: return fabs(sinh(a)) * ea + av;
    case TAPE_TANH: return fabs(1.0 - v * v) * ea + av;
    case TAPE_SIGN: return fabs(a) <= ea ? 1.0 : 0.0; /* exact unless the operand's error may flip it */
    case TAPE_OP_COUNT: break;
    }
    return NAN;
}

void tape_eval_err(const tape *t, const double *in, double *s, double *e, double *out, double *out_err)
{
    tape_eval(t, in, s, out ? out : out_err);
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *p = &t->ins[i];
        int binary = p->op == TAPE_ADD || p->op == TAPE_SUB || p->op == TAPE_MUL || p->op == TAPE_DIV ||
                     p->op == TAPE_POW || p->op == TAPE_ATAN2;
        int unary = p->op != TAPE_INPUT && p->op != TAPE_CONST;
        double a = unary ? s[p->a] : 0.0, ea = unary ? e[p->a] : 0.0;
        double b = binary ? s[p->b] : 0.0, eb = binary ? e[p->b] : 0.0;
        e[i] = ins_err(p, s[i], a, b, ea, eb);
    }
    for (int k = 0; k < t->n_outputs; k++)
        out_err[k] = e[t->outputs[k]];
}
