#!/usr/bin/env python3
"""gen_sympy_c.py — the SymPy-generated C right-hand side of a model, as a SymPy user
would write it, for `make bench` to compare the engine against (issue 8, item 6).

Reads a case file (API.md §1 model with scleronomic linear constraints and linear
speeds u = S(q) q'), derives the equations of motion independently of the engine and
writes a C file with

    int sympy_rhs(double t, const double *y, double *dydt);

on the engine's state layout y = [q (n), u (k)], dydt = [q' (n), u' (k)], parameters
folded in at the model's values. The derivation (Maggi's form of the Lagrange
equations with multipliers):
  q' = Phi_S u, Phi_S the first k columns of [S; A]^-1 (symbolic, block by block of the
       sparsity pattern), A the constraint matrix;
  (Phi_S^T M Phi_S) u' = Phi_S^T (Q - dV/dq + dT/dq - (d2T/dq'dq) q' - M a),
       M = d2T/dq'dq', a = (d(Phi_S u)/dq) q' the velocity part of q''.
The C code computes q' (cse), then M* and F (cse, M and the derivatives taken sparse),
then u' by solving M* symbolically per diagonal block of up to 3x3 (gcc -O2 sees
straight-line code), else by an in-place Gaussian elimination with partial pivoting.

Limits: the symbolic pivots are tested at generic points only, so at a special state
where a chosen pivot vanishes (e.g. sin(yaw) at yaw = 0) the C loses accuracy; the
bench checks agreement with the engine at two states before it times anything. On
whipple-hand.json it takes 3 minutes and disagrees at the case's initial state (yaw =
0) while agreeing at a random one; the engine there matches an mpmath KKT solve and the
benchmark, so whipple is not given a SymPy C baseline in the bench.

Needs python3-sympy. Usage: gen_sympy_c.py CASE.json OUT.c
"""
import json
import random
import re
import sys

import sympy as sm

FUNCS = {"sin": sm.sin, "cos": sm.cos, "tan": sm.tan, "sec": sm.sec, "csc": sm.csc, "cot": sm.cot,
         "asin": sm.asin, "acos": sm.acos, "atan": sm.atan, "atan2": sm.atan2, "sinh": sm.sinh,
         "cosh": sm.cosh, "tanh": sm.tanh, "exp": sm.exp, "log": sm.log, "sqrt": sm.sqrt,
         "abs": sm.Abs, "pow": sm.Pow, "pi": sm.pi}


def parser(model):
    """A function text -> sympy expression, with parameters folded to their values and
    definitions expanded in place (cse finds them again); plus the q, q' symbols."""
    coords = model["coordinates"]
    q = [sm.Symbol(f"q_{c}") for c in coords]
    qd = [sm.Symbol(f"qd_{c}") for c in coords]
    env = dict(FUNCS)
    env.update({f"q_{c}": s for c, s in zip(coords, q)})
    env.update({f"qd_{c}": s for c, s in zip(coords, qd)})
    env["t"] = sm.Symbol("t")
    for k, v in model.get("parameters", {}).items():
        env[f"q_{k}"] = sm.Float(v, 17) if float(v) != int(v) else sm.Integer(int(v))

    def parse(text):
        s = re.sub(r"([A-Za-z_][A-Za-z0-9_]*)'", r"qd_\1", text)
        s = re.sub(r"(?<![A-Za-z0-9_.])([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_])",
                   lambda m: m.group(1) if (m.group(1) in FUNCS or m.group(1) == "t"
                                            or m.group(1).startswith("qd_")) else "q_" + m.group(1), s)
        s = s.replace("^", "**")
        return sm.sympify(s, locals=env, rational=True)

    for d in model.get("definitions", []):
        env["q_" + d["name"]] = parse(d["expr"])
    return parse, q, qd


def blocks(pattern, n_rows, n_cols):
    """Connected components of a sparsity pattern {(i, j)}: lists of (rows, cols)."""
    parent = list(range(n_rows + n_cols))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for i, j in pattern:
        parent[find(i)] = find(n_rows + j)
    comp = {}
    for i in range(n_rows):
        comp.setdefault(find(i), ([], []))[0].append(i)
    for j in range(n_cols):
        comp.setdefault(find(n_rows + j), ([], []))[1].append(j)
    return list(comp.values())


def numeric_zero(e):
    """A pivot test for symbolic LU: zero when the expression vanishes at three
    pseudo-random points (an identity such as sin^2 + cos^2 - 1 that sympy does not
    see must not become a pivot)."""
    e = sm.sympify(e)
    if e.is_zero:
        return True
    syms = sorted(e.free_symbols, key=str)
    if not syms:
        return abs(complex(e)) < 1e-12
    f = sm.lambdify(syms, e, "math")
    rng = random.Random(7)
    for _ in range(3):
        try:
            if abs(f(*[rng.uniform(0.3, 1.2) for _ in syms])) > 1e-9:
                return False
        except (ZeroDivisionError, ValueError, OverflowError):
            return False
    return True


def lu_solve(A, b):
    """A^-1 b by symbolic LU with numerically tested pivots."""
    L, U, perm = A.LUdecomposition(iszerofunc=numeric_zero)
    pb = b.copy()
    for i, j in perm:
        pb.row_swap(i, j)
    n = A.rows
    y = [None] * n
    for i in range(n):
        y[i] = pb[i] - sm.Add(*[L[i, j] * y[j] for j in range(i) if L[i, j] != 0])
    x = [None] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - sm.Add(*[U[i, j] * x[j] for j in range(i + 1, n) if U[i, j] != 0])) / U[i, i]
    return x


def derive(model):
    parse, q, qd = parser(model)
    n = len(q)
    speeds = [parse(s["expr"]) for s in model["speeds"]]
    cons = [parse(c["expr"] if isinstance(c, dict) else c) for c in model.get("constraints", [])]
    k = len(speeds)
    rows = speeds + cons
    assert len(rows) == n, "speeds + constraints must be n"
    psi = {}
    for i, r in enumerate(rows):
        for j in range(n):
            if r.has(qd[j]):
                psi[(i, j)] = sm.diff(r, qd[j])
        rest = r.xreplace({v: 0 for v in qd})
        assert rest == 0, "scleronomic linear rows only"
    u = [sm.Symbol(f"u{r}") for r in range(k)]
    rhs = u + [sm.Integer(0)] * (n - k)
    # q' = Psi^-1 [u; 0], block by block
    qd_expr = [None] * n
    for brows, bcols in blocks(psi.keys(), n, n):
        assert len(brows) == len(bcols), "Psi singular (structurally)"
        A = sm.Matrix(len(brows), len(bcols), lambda a, b: psi.get((brows[a], bcols[b]), 0))
        b = sm.Matrix([rhs[i] for i in brows])
        x = lu_solve(A, b)
        for a, j in enumerate(bcols):
            qd_expr[j] = x[a]
    phi_s = {}  # (j, r): d qd_j / d u_r
    for j in range(n):
        for r in range(k):
            if qd_expr[j].has(u[r]):
                phi_s[(j, r)] = sm.diff(qd_expr[j], u[r])
    # a_j = sum_l d(qd_j)/dq_l qd_l (qd as symbols)
    a = []
    for j in range(n):
        a.append(sm.Add(*[sm.diff(qd_expr[j], q[l]) * qd[l] for l in range(n) if qd_expr[j].has(q[l])]))
    T = parse(model["kinetic_energy"])
    V = parse(model.get("potential_energy", "0"))
    Q = [sm.Integer(0)] * n
    for name, text in model.get("generalized_forces", {}).items():
        Q[model["coordinates"].index(name)] = parse(text)
    p = [sm.diff(T, qd[i]) for i in range(n)]
    M = {}
    rest = []  # Q - dV/dq + dT/dq - (d2T/dq'dq) q'
    for i in range(n):
        for j in range(n):
            if p[i].has(qd[j]):
                M[(i, j)] = sm.diff(p[i], qd[j])
        r = Q[i] - sm.diff(V, q[i]) + sm.diff(T, q[i])
        r -= sm.Add(*[sm.diff(p[i], q[l]) * qd[l] for l in range(n) if p[i].has(q[l])])
        rest.append(r)
    gen = [rest[i] - sm.Add(*[M[(i, j)] * a[j] for j in range(n) if (i, j) in M]) for i in range(n)]
    cols = {r: [(j, e) for (j, rr), e in phi_s.items() if rr == r] for r in range(k)}
    Fs = [sm.Add(*[e * gen[j] for j, e in cols[r]]) for r in range(k)]
    Ms = {}
    for r in range(k):
        for s in range(r, k):
            acc = sm.Add(*[ei * M[(i, j)] * ej for i, ei in cols[r] for j, ej in cols[s] if (i, j) in M])
            if acc != 0:
                Ms[(r, s)] = Ms[(s, r)] = acc
    return q, qd, u, qd_expr, Ms, Fs


def emit(model, out):
    q, qd, u, qd_expr, Ms, Fs = derive(model)
    n, k = len(q), len(u)
    lines = []

    def stage(targets, exprs, prefix):
        reps, red = sm.cse(exprs, symbols=sm.numbered_symbols(prefix))
        for s, e in reps:
            lines.append(f"    const double {s} = {sm.ccode(e)};")
        for tgt, e in zip(targets, red):
            lines.append(f"    {tgt} = {sm.ccode(e)};")

    lines.append("int sympy_rhs(double t, const double *y, double *dydt)")
    lines.append("{")
    lines.append("    (void)t;")
    for i, s in enumerate(q):
        lines.append(f"    const double {s} = y[{i}];")
    for r, s in enumerate(u):
        lines.append(f"    const double {s} = y[{n + r}];")
    lines.append(f"    double {', '.join(str(s) for s in qd)};")
    stage([str(s) for s in qd], qd_expr, "a")
    for i, s in enumerate(qd):
        lines.append(f"    dydt[{i}] = {s};")
    ms_sym = {key: sm.Symbol(f"M_{key[0]}_{key[1]}") for key in Ms if key[0] <= key[1]}
    f_sym = [sm.Symbol(f"F_{r}") for r in range(k)]
    decl = [str(s) for s in ms_sym.values()] + [str(s) for s in f_sym]
    lines.append(f"    double {', '.join(decl)};")
    stage(decl, [Ms[key] for key in ms_sym] + Fs, "b")
    # u' by diagonal blocks of M*
    for brows, _ in blocks([key for key in Ms], k, k):
        if len(brows) <= 3:
            A = sm.Matrix(len(brows), len(brows),
                          lambda a, b: ms_sym[tuple(sorted((brows[a], brows[b])))]
                          if tuple(sorted((brows[a], brows[b]))) in ms_sym else 0)
            x = A.LUsolve(sm.Matrix([f_sym[r] for r in brows]))
            stage([f"dydt[{n + r}]" for r in brows], list(x), f"c{brows[0]}_")
        else:
            m = len(brows)
            lines.append("    {")
            lines.append(f"        double A[{m}][{m + 1}] = {{")
            for a_ in brows:
                row = [str(ms_sym[tuple(sorted((a_, b_)))]) if tuple(sorted((a_, b_))) in ms_sym else "0"
                       for b_ in brows]
                lines.append(f"            {{{', '.join(row)}, {f_sym[a_]}}},")
            lines.append("        };")
            lines.append(f"        static const int map[{m}] = {{{', '.join(str(n + r) for r in brows)}}};")
            lines.append(f"        if (solve_dense({m}, &A[0][0], dydt, map) != 0) return 1;")
            lines.append("    }")
    lines.append("    return 0;")
    lines.append("}")
    with open(out, "w") as f:
        f.write(f"/* Generated by bench/models/gen_sympy_c.py from {model.get('name', '?')}: "
                f"n = {n}, k = {k}. Do not edit. */\n#include <math.h>\n\n")
        f.write(SOLVE)
        f.write("\n".join(lines) + "\n")


SOLVE = r"""
/* Gaussian elimination with partial pivoting on the augmented m x (m+1) matrix A;
 * writes x[i] into out[map[i]]. Returns 1 on a zero pivot. */
static inline int solve_dense(int m, double *A, double *out, const int *map)
{
    const int w = m + 1;
    for (int c = 0; c < m; c++) {
        int p = c;
        for (int r = c + 1; r < m; r++)
            if (fabs(A[r * w + c]) > fabs(A[p * w + c]))
                p = r;
        if (A[p * w + c] == 0)
            return 1;
        if (p != c)
            for (int j = c; j < w; j++) {
                double tmp = A[c * w + j];
                A[c * w + j] = A[p * w + j];
                A[p * w + j] = tmp;
            }
        for (int r = c + 1; r < m; r++) {
            double f = A[r * w + c] / A[c * w + c];
            for (int j = c; j < w; j++)
                A[r * w + j] -= f * A[c * w + j];
        }
    }
    for (int i = m - 1; i >= 0; i--) {
        double s = A[i * w + m];
        for (int j = i + 1; j < m; j++)
            s -= A[i * w + j] * out[map[j]];
        out[map[i]] = s / A[i * w + i];
    }
    return 0;
}

"""


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gen_sympy_c.py CASE.json OUT.c")
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    emit(doc.get("model", doc), sys.argv[2])


if __name__ == "__main__":
    main()
