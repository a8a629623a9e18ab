/* tangent.h — forward-mode derivatives of tapes (a tangent interpreter).
 *
 * tape_eval_tangent runs a tape (tape.h) on dual numbers with nd directions at once:
 * every slot carries its value and nd tangents, propagated through each instruction
 * by its derivative rule (product, quotient, chain rules). The values are exactly
 * those of tape_eval (the same IEEE operations in the same order), so derivatives
 * are taken through the very equations that are integrated, exact to rounding: no
 * finite differences, no symbolic re-derivation.
 *
 * Tangent layout: direction d of input i is din[i * nd + d]; of output k, dout[k * nd
 * + d]; of slot s, ds[s * nd + d].
 */
#ifndef HAMEL_TANGENT_H
#define HAMEL_TANGENT_H

#include "tape.h"

/* Evaluates t at in[n_inputs] with the input tangents din[n_inputs * nd]: out and
 * dout[n_outputs * nd] receive values and tangents. s must hold n_ins doubles and
 * ds n_ins * nd. Returns 0, or -1 if the tape has an instruction without a tangent
 * rule (then out and dout are undefined). */
int tape_eval_tangent(const tape *t, const double *in, const double *din, int nd, double *s, double *ds,
                      double *out, double *dout);

#endif
