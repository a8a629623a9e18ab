#!/usr/bin/python3
"""difftest.py — differential testing of hamel's symbolic core against SymPy (issue 15).

Random models (sin, cos, exp, log, sqrt, powers up to x^83905, coefficients from 1e-12
to 1e12, Gaussian bumps, logistic walls and other features placed far from the origin,
linear and nonlinear constraints, planar rigid bodies, damping forces) are given to
`hamel equations` (the reduced mass matrix M* and forcing F*, M* u' = F*) and
`hamel evaluate` (q', u', q'' at random states near the features); SymPy derives the
same from the Lagrangian with multipliers (ideal/Chetaev constraints) and mpmath
evaluates it to 30 digits. A value agrees when
    |engine - sympy| <= 1e-7 * (1 + |sympy|) + 1e-9 * (largest |sympy| of that vector)
(the outside check's 1e-7 absolute plus relative, plus rounding of the vector's scale).

Corpus files (tests/difftest/corpus/*.json) hold models that once fooled the engine:
{"model": ..., "states": [...], "expect": {...}, "why": "..."}; each is compared with
SymPy the same way, and "expect" adds checks: "forcing_nonzero": [indices] (the printed
forcing entry must not be "0"), "mass_nonzero": [[i, j], ...].

Must run under Debian's /usr/bin/python3 (python3-sympy).

usage: difftest.py --hamel build/hamel [--seeds A:B] [--corpus DIR] [--jobs N] [--quiet]
Exit status 0 when nothing disagreed. The last line reads "N passed, N failed".
"""
import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time

import mpmath
import sympy as sp

mpmath.mp.dps = 30

# ---------------------------------------------------------------- the generator


def coef(rng, lo=-12, hi=12):
    """A coefficient of either sign, 10^u with u uniform in [lo, hi]."""
    v = 10.0 ** rng.uniform(lo, hi)
    v = float("%.6g" % v)
    return -v if rng.random() < 0.5 else v


def num(v):
    return repr(float(v))


def feature_centre(rng):
    r = rng.random()
    if r < 0.3:
        return 0.0
    if r < 0.65:
        return float("%.4g" % rng.uniform(-4, 4))
    return float("%.4g" % ((1 if rng.random() < 0.5 else -1) * 10.0 ** rng.uniform(1, 4)))


class Coord:
    def __init__(self, name, centre, width):
        self.name = name
        self.centre = centre
        self.width = width  # the states lie within a few widths of the centre
        self.lower = None   # a domain bound (log, sqrt): states stay above it


def shifted(c):
    if c.centre == 0:
        return c.name
    return "(%s - %s)" % (c.name, num(c.centre)) if c.centre > 0 else "(%s + %s)" % (c.name, num(-c.centre))


def potential_term(rng, c):
    """A term of V in coordinate c, with its features near c.centre."""
    kind = rng.choice(["gauss", "gauss", "logistic", "poly", "bigpow", "trig", "log", "sqrt", "cancel", "tiny"])
    s = shifted(c)
    A = coef(rng, -3, 6)
    if kind == "gauss":
        k = float("%.4g" % 10.0 ** rng.uniform(-1, 3))
        c.width = min(c.width, 1.5 / math.sqrt(k))
        return "%s*exp(-%s*%s^2)" % (num(A), num(k), s)
    if kind == "logistic":
        k = float("%.4g" % 10.0 ** rng.uniform(0, 3))
        c.width = min(c.width, 3.0 / k)
        return "%s - %s/(1 + exp(%s*%s))" % (num(abs(A)), num(abs(A)), num(k), s)
    if kind == "poly":
        return "%s*%s^%d" % (num(coef(rng)), s, rng.choice([2, 3, 4, 6]))
    if kind == "bigpow":
        N = rng.choice([7, 31, 257, 4099, 83905])
        if c.centre == 0:
            c.centre = float("%.4g" % rng.uniform(0.5, 3))
        c.width = min(c.width, abs(c.centre) / N)
        return "%s*(%s/%s)^%d" % (num(A), c.name, num(c.centre), N)
    if kind == "trig":
        return "%s*cos(%s*%s)" % (num(A), num(float("%.3g" % rng.uniform(0.2, 5))), s)
    if kind == "log":
        d = float("%.3g" % 10.0 ** rng.uniform(-2, 1))
        c.lower = max(c.lower if c.lower is not None else -math.inf, c.centre - d)
        return "%s*log(%s + %s)" % (num(A), s, num(d))
    if kind == "sqrt":
        d = float("%.3g" % 10.0 ** rng.uniform(-3, 2))
        return "%s*sqrt(%s^2 + %s)" % (num(A), s, num(d))
    if kind == "cancel":
        B = float("%.0e" % 10.0 ** rng.uniform(4, 8))
        return "((%s + %s) - %s - %s + 1)*%s*%s^2" % (c.name, num(B), c.name, num(B), num(A), s)
    return "%s*%s^2" % (num(coef(rng, -12, -6)), s)


def mass_function(rng, cs):
    """A positive coefficient of a velocity square: 1e-3..1e3 plus a positive feature."""
    m0 = float("%.4g" % 10.0 ** rng.uniform(-1, 2))
    if rng.random() < 0.5:
        return num(m0)
    c = rng.choice(cs)
    s = shifted(c)
    kind = rng.choice(["gauss", "sq", "cos"])
    if kind == "gauss":
        k = float("%.4g" % 10.0 ** rng.uniform(-1, 2))
        c.width = min(c.width, 1.5 / math.sqrt(k))
        return "(%s + %s*exp(-%s*%s^2))" % (num(m0), num(abs(coef(rng, -2, 2))), num(k), s)
    if kind == "sq":
        return "(%s + %s*%s^2)" % (num(m0), num(abs(coef(rng, -3, 0))), s)
    return "(%s + %s*cos(%s)^2)" % (num(m0), num(float("%.3g" % rng.uniform(0.1, 2))), c.name)


def constraint_coef(rng, cs):
    c = rng.choice(cs)
    s = shifted(c)
    kind = rng.choice(["const", "sin", "gauss", "exp"])
    if kind == "const":
        return num(coef(rng, -2, 2))
    if kind == "sin":
        return "%s*sin(%s)" % (num(coef(rng, -1, 1)), c.name)
    if kind == "gauss":
        k = float("%.4g" % 10.0 ** rng.uniform(-1, 3))
        c.width = min(c.width, 1.5 / math.sqrt(k))
        return "%s*exp(-%s*%s^2)" % (num(coef(rng, -1, 2)), num(k), s)
    return "%s*exp(%s/%s)" % (num(coef(rng, -1, 1)), s, num(float("%.3g" % 10.0 ** rng.uniform(0, 3))))


def gen_model(seed):
    rng = random.Random(seed)
    kind = rng.choice(["plain", "plain", "linear", "linear", "nonlinear", "body"])
    model = {"name": "difftest-%d" % seed}
    if kind == "body":
        names = ["x", "y", "th"]
    else:
        names = ["x", "y", "z"][: rng.choice([1, 2, 3] if kind == "plain" else [2, 3])]
    cs = [Coord(nm, feature_centre(rng), 2.0) for nm in names]
    cs_by = {c.name: c for c in cs}
    model["coordinates"] = names
    T = []
    if kind == "body":
        m = float("%.3g" % 10.0 ** rng.uniform(-1, 1))
        inertia = float("%.3g" % 10.0 ** rng.uniform(-2, 0))
        l = float("%.3g" % rng.uniform(0.1, 2))
        g = 9.81
        model["frames"] = [{"name": "A", "rotations": [{"axis": "z", "angle": "th"}]}]
        model["points"] = [{"name": "P", "position": ["x", "y", 0]}, {"name": "G", "parent": "P", "frame": "A", "position": [num(l), 0, 0]}]
        model["bodies"] = [{"name": "b", "mass": num(m), "mass_center": "G", "frame": "A",
                            "inertia": [[inertia, 0, 0], [0, inertia, 0], [0, 0, inertia]]}]
        model["gravity"] = {"vector": [0, -g, 0]}
        # what SymPy is told: T and V of the body written out
        body_T = "1/2*%s*((x' - %s*sin(th)*th')^2 + (y' + %s*cos(th)*th')^2) + 1/2*%s*th'^2" % (num(m), num(l), num(l), num(inertia))
        body_V = "%s*%s*(y + %s*sin(th))" % (num(m), num(g), num(l))
        if rng.random() < 0.7:
            model["constraints"] = [{"name": "knife", "expr": "sin(th)*x' - cos(th)*y'"}]
    else:
        body_T = body_V = None
        for c in cs:
            T.append("1/2*%s*%s'^2" % (mass_function(rng, cs), c.name))
        if len(cs) >= 2 and rng.random() < 0.4:
            a, b = rng.sample(cs, 2)
            T.append("%s*%s'*%s'" % (num(float("%.3g" % rng.uniform(-0.3, 0.3))), a.name, b.name))
    V = [potential_term(rng, rng.choice(cs)) for _ in range(rng.choice([1, 2, 3]))]
    if T:
        model["kinetic_energy"] = " + ".join(T)
    elif rng.random() < 0.5:
        model["kinetic_energy"] = "1/2*%s*th'^2" % num(float("%.3g" % rng.uniform(0.1, 1)))
    model["potential_energy"] = " + ".join(V)
    if rng.random() < 0.3:
        c = rng.choice(cs)
        model["generalized_forces"] = {c.name: "-%s*%s'" % (num(abs(coef(rng, -3, 2))), c.name)}
    speeds = None
    if kind == "linear":
        a, b = rng.sample(cs, 2)
        expr = "%s' - %s*%s'" % (a.name, constraint_coef(rng, cs), b.name)
        if rng.random() < 0.3:
            expr += " + %s*sin(t)" % num(coef(rng, -2, 0))
        model["constraints"] = [{"name": "lin", "expr": expr}]
        speeds = [c.name for c in cs if c is not a]
    elif kind == "nonlinear":
        a, b = rng.sample(cs, 2)
        expr = "%s' + %s*%s'^3 - %s*%s'" % (a.name, num(coef(rng, -2, 0)), b.name, constraint_coef(rng, cs), b.name)
        model["constraints"] = [{"name": "nl", "expr": expr}]
        speeds = [c.name for c in cs if c is not a]
    elif kind == "body":
        speeds = ["x", "y", "th"]
        if "constraints" in model:
            # the knife edge: speeds th' and the velocity along the blade
            model["speeds"] = [{"name": "w", "expr": "th'"}, {"name": "v", "expr": "cos(th)*x' + sin(th)*y'"}]
    if speeds is not None and "speeds" not in model:
        model["speeds"] = [{"name": "u_" + s, "expr": s + "'"} for s in speeds]
    if "speeds" not in model:
        model["speeds"] = [{"name": "u_" + c.name, "expr": c.name + "'"} for c in cs]
    states = []
    for _ in range(3):
        q = {}
        for c in cs:
            v = c.centre + c.width * rng.uniform(-1.5, 1.5)
            if c.lower is not None and v <= c.lower + 1e-3 * c.width:
                v = c.lower + c.width * rng.uniform(0.05, 1.5)
            q[c.name] = float("%.12g" % v)
        sp_ = {s["name"]: float("%.6g" % (rng.choice([-1, 1]) * 10.0 ** rng.uniform(-1, 0.5))) for s in model["speeds"]}
        states.append({"t": float("%.3g" % rng.uniform(0, 2)), "q": q, "speeds": sp_})
    hand = {"T": model.get("kinetic_energy"), "V": model["potential_energy"], "body_T": body_T, "body_V": body_V}
    return {"model": model, "states": states, "hand": hand, "kind": kind}


# ---------------------------------------------------------------- SymPy's side

FUNCS = {"sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "exp": sp.exp, "log": sp.log, "sqrt": sp.sqrt,
         "abs": sp.Abs, "sign": sp.sign, "asin": sp.asin, "acos": sp.acos, "atan": sp.atan, "atan2": sp.atan2,
         "sinh": sp.sinh, "cosh": sp.cosh, "tanh": sp.tanh, "pi": sp.pi}


def to_sympy(text, syms):
    """The engine's expression syntax (x' velocities, ^ powers) as SymPy."""
    s = re.sub(r"([A-Za-z_][A-Za-z0-9_]*)'", r"\1__d", str(text)).replace("^", "**")
    loc = dict(FUNCS)
    loc.update(syms)
    return sp.sympify(s, locals=loc, rational=False)


def mpf(x):
    return mpmath.mpf(x)


def reference(case, params=None):
    """SymPy's q', u', q'', M*, F* at each state of case (linear solve with multipliers)."""
    model = case["model"]
    names = model["coordinates"]
    t = sp.Symbol("t")
    q = [sp.Symbol(n) for n in names]
    qd = [sp.Symbol(n + "__d") for n in names]
    syms = {n: s for n, s in zip(names, q)}
    syms.update({n + "__d": s for n, s in zip(names, qd)})
    syms["t"] = t
    for p, v in (model.get("parameters") or {}).items():
        syms[p] = sp.Float(v)
    hand = case.get("hand") or {}
    T = to_sympy(model["kinetic_energy"], syms) if model.get("kinetic_energy") else sp.Integer(0)
    if hand.get("body_T"):
        T += to_sympy(hand["body_T"], syms)
    V = to_sympy(model.get("potential_energy", "0"), syms)
    if hand.get("body_V"):
        V += to_sympy(hand["body_V"], syms)
    elif "bodies" in model and not hand.get("body_T"):
        raise ValueError("a corpus model with bodies needs hand.body_T/body_V")
    n = len(q)
    Q = [to_sympy((model.get("generalized_forces") or {}).get(nm, "0"), syms) for nm in names]
    cons = []
    for c in model.get("constraints") or []:
        cons.append(to_sympy(c["expr"] if isinstance(c, dict) else c, syms))
    spd = [to_sympy(s["expr"], syms) for s in model["speeds"]]
    spd_names = [s["name"] for s in model["speeds"]]
    M = sp.Matrix(n, n, lambda i, j: sp.diff(T, qd[i], qd[j]))
    dTdqd = [sp.diff(T, v) for v in qd]
    F0 = [Q[i] + sp.diff(T, q[i]) - sp.diff(V, q[i]) - sum(sp.diff(dTdqd[i], q[j]) * qd[j] for j in range(n))
          - sp.diff(dTdqd[i], t) for i in range(n)]
    A = [[sp.diff(f, v) for v in qd] for f in cons]
    b = [sum(sp.diff(f, q[j]) * qd[j] for j in range(n)) + sp.diff(f, t) for f in cons]
    S = [[sp.diff(s, v) for v in qd] for s in spd]
    sb = [sum(sp.diff(s, q[j]) * qd[j] for j in range(n)) + sp.diff(s, t) for s in spd]
    linear = all(sp.diff(f, v1, v2) == 0 for f in cons for v1 in qd for v2 in qd)
    allsyms = q + qd + [t]
    lam = lambda e: sp.lambdify(allsyms, e, modules="mpmath")
    fM = lam(M)
    fF0 = lam(sp.Matrix(F0))
    fA = lam(sp.Matrix(A)) if cons else None
    fb = lam(sp.Matrix(b)) if cons else None
    fS = lam(sp.Matrix(S))
    fsb = lam(sp.Matrix(sb))
    fs = lam(sp.Matrix(spd))
    fc = lam(sp.Matrix(cons)) if cons else None
    out = []
    for st in case["states"]:
        qv = [mpf(st["q"][nm]) for nm in names]
        tv = mpf(st.get("t", 0))
        uv = [mpf(st["speeds"][nm]) for nm in spd_names]

        def resid(*x):
            args = qv + list(x) + [tv]
            r = list(fs(*args) if len(spd) else []) 
            r = [r[i] - uv[i] for i in range(len(spd))]
            if cons:
                r += list(fc(*args))
            return r

        if linear:
            zero = [mpf(0)] * n
            J = mpmath.matrix([list(r) for r in (list(fS(*(qv + zero + [tv])).tolist()) + (list(fA(*(qv + zero + [tv])).tolist()) if cons else []))])
            rhs = mpmath.matrix([-x for x in resid(*zero)])
            qdv = list(mpmath.lu_solve(J, rhs))
        else:
            x0 = [mpf(st["qdot_guess"][nm]) for nm in names]
            qdv = list(mpmath.findroot(resid, x0)) if n > 1 else [mpmath.findroot(lambda x: resid(x)[0], x0[0])]
        args = qv + qdv + [tv]
        Mv = mpmath.matrix(fM(*args).tolist())
        F0v = mpmath.matrix(fF0(*args).tolist())
        m = len(cons)
        K = mpmath.zeros(n + m, n + m)
        r = mpmath.zeros(n + m, 1)
        for i in range(n):
            for j in range(n):
                K[i, j] = Mv[i, j]
            r[i] = F0v[i]
        if cons:
            Av = fA(*args).tolist()
            bv = fb(*args).tolist()
            for a in range(m):
                for j in range(n):
                    K[j, n + a] = -Av[a][j]
                    K[n + a, j] = Av[a][j]
                r[n + a] = -bv[a][0]
        sol = mpmath.lu_solve(K, r)
        qdd = [sol[i] for i in range(n)]
        Sv = fS(*args).tolist()
        sbv = fsb(*args).tolist()
        ud = [sum(Sv[i][j] * qdd[j] for j in range(n)) + sbv[i][0] for i in range(len(spd))]
        # Phi: the columns of [S; A]^-1 for the speeds; M* = Phi^T M Phi, F* = M* u'
        J = mpmath.matrix(Sv + (fA(*args).tolist() if cons else []))
        Ji = J ** -1
        k = len(spd)
        Phi = mpmath.matrix(n, k)
        for i in range(n):
            for j in range(k):
                Phi[i, j] = Ji[i, j]
        Ms = Phi.T * Mv * Phi
        Fs = Ms * mpmath.matrix(ud)
        out.append({"qdot": dict(zip(names, qdv)), "qddot": dict(zip(names, qdd)),
                    "speeds_dot": dict(zip(spd_names, ud)),
                    "M": [[Ms[i, j] for j in range(k)] for i in range(k)], "F": [Fs[i] for i in range(k)],
                    "linear": linear})
    return out


# ---------------------------------------------------------------- the engine's side


def run_hamel(hamel, cmd, doc, timeout=60):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(doc, f)
        path = f.name
    try:
        p = subprocess.run([hamel, cmd, path], capture_output=True, text=True, timeout=timeout)
    finally:
        os.unlink(path)
    try:
        return p.returncode, json.loads(p.stdout)
    except ValueError:
        return p.returncode, {"raw": p.stdout[-400:], "stderr": p.stderr[-400:]}


def close(a, b, scale):
    a = mpf(a)
    return abs(a - b) <= mpf("1e-7") * (1 + abs(b)) + mpf("1e-9") * scale


def compare_vec(label, eng, ref, errs):
    scale = max([abs(v) for v in ref.values()] + [mpf(0)])
    for key, rv in ref.items():
        ev = eng.get(key)
        if ev is None or not isinstance(ev, (int, float)) or not close(ev, rv, scale):
            errs.append("%s[%s]: engine %s, sympy %s" % (label, key, ev, mpmath.nstr(rv, 12)))


def check_case(hamel, case):
    """Returns a list of disagreements (empty: agrees)."""
    errs = []
    model = case["model"]
    rc, ev = run_hamel(hamel, "evaluate", {"model": model, "evaluate": {"states": [
        {k: v for k, v in st.items() if k in ("t", "q", "speeds")} for st in case["states"]]}})
    if rc != 0 or "states" not in ev:
        return ["evaluate failed (exit %d): %s" % (rc, json.dumps(ev)[:300])]
    for st, es in zip(case["states"], ev["states"]):
        st["qdot_guess"] = es.get("qdot", {})
    try:
        ref = reference(case)
    except (ZeroDivisionError, ValueError, TypeError, ZeroDivisionError) as e:
        return ["sympy could not derive the reference: %s" % e]
    rc, eq = run_hamel(hamel, "equations", model)
    if rc != 0 or ("mass_matrix" not in eq and eq.get("complete") is not False):
        return ["equations failed (exit %d): %s" % (rc, json.dumps(eq)[:300])]
    if "mass_matrix" not in eq:
        eq = dict(eq, mass_matrix=None)  # no symbolic equations: evaluate is compared alone
    expect = case.get("expect") or {}
    for i in expect.get("forcing_nonzero", []) if eq.get("forcing") else []:
        if eq["forcing"][i].strip() == "0":
            errs.append("forcing[%d] printed as 0 (expected nonzero)" % i)
    for i, j in expect.get("mass_nonzero", []):
        if eq["mass_matrix"][i][j].strip() == "0":
            errs.append("mass_matrix[%d][%d] printed as 0 (expected nonzero)" % (i, j))
    names = model["coordinates"]
    syms = {nm: sp.Symbol(nm) for nm in names}
    syms.update({nm + "__d": sp.Symbol(nm + "__d") for nm in names})
    syms["t"] = sp.Symbol("t")
    for p, v in (model.get("parameters") or {}).items():
        syms[p] = sp.Float(v)
    spd_order = [s["name"] for s in eq["speeds"]]
    for s in spd_order:
        syms[s.replace("'", "__d")] = sp.Symbol("spd_" + s.replace("'", "__d"))
    try:
        if eq["mass_matrix"] is None:
            raise LookupError
        Me = [[to_sympy(x, syms) for x in row] for row in eq["mass_matrix"]]
        Fe = [to_sympy(x, syms) for x in eq["forcing"]]
    except LookupError:
        Me = Fe = None
    except (sp.SympifyError, SyntaxError, TypeError) as e:
        return ["the engine's equations do not parse: %s" % e]
    mine = [s["name"] for s in model["speeds"]]
    perm = [mine.index(s) for s in spd_order] if sorted(spd_order) == sorted(mine) else None
    for si, (st, es, rf) in enumerate(zip(case["states"], ev["states"], ref)):
        compare_vec("state %d qdot" % si, es.get("qdot", {}), rf["qdot"], errs)
        compare_vec("state %d speeds_dot" % si, es.get("speeds_dot", {}), rf["speeds_dot"], errs)
        compare_vec("state %d qddot" % si, es.get("qddot", {}), rf["qddot"], errs)
        if perm is None or not rf["linear"] or Me is None:
            continue  # the reduced form of a nonlinear model has other speeds
        sub = {syms[nm]: sp.Float(st["q"][nm], 30) for nm in names}
        sub[syms["t"]] = sp.Float(st.get("t", 0), 30)
        for s in spd_order:
            sub[syms[s.replace("'", "__d")]] = sp.Float(st["speeds"][s], 30)
        k = len(spd_order)
        Mref = {"%d,%d" % (i, j): rf["M"][perm[i]][perm[j]] for i in range(k) for j in range(k)}
        Fref = {str(i): rf["F"][perm[i]] for i in range(k)}
        try:
            Mv = {"%d,%d" % (i, j): float(sp.N(Me[i][j].subs(sub), 30)) for i in range(k) for j in range(k)}
            Fv = {str(i): float(sp.N(Fe[i].subs(sub), 30)) for i in range(k)}
        except (TypeError, ValueError) as e:
            errs.append("state %d: the engine's equations do not evaluate: %s" % (si, e))
            continue
        compare_vec("state %d mass_matrix" % si, Mv, Mref, errs)
        compare_vec("state %d forcing" % si, Fv, Fref, errs)
    return errs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hamel", default="build/hamel")
    ap.add_argument("--seeds", default="1:21", help="A:B, the seeds A..B-1")
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--save", default=None, help="write each disagreeing generated model there")
    ap.add_argument("--show", type=int, default=None, help="print the model of this seed and exit")
    args = ap.parse_args()
    if args.show is not None:
        c = gen_model(args.show)
        print(json.dumps({"model": c["model"], "states": c["states"], "hand": c["hand"]}, indent=1))
        return 0
    t0 = time.time()
    passed = failed = 0
    jobs = []
    if args.corpus:
        for fn in sorted(os.listdir(args.corpus)):
            if fn.endswith(".json"):
                with open(os.path.join(args.corpus, fn)) as f:
                    jobs.append(("corpus/" + fn, json.load(f)))
    a, b = (int(x) for x in args.seeds.split(":"))
    for seed in range(a, b):
        jobs.append(("seed %d" % seed, None))
    for label, case in jobs:
        if case is None:
            case = gen_model(int(label.split()[1]))
        try:
            errs = check_case(args.hamel, case)
        except Exception as e:  # a failure of the harness is a failure too
            errs = ["harness: %s: %s" % (type(e).__name__, e)]
        if errs:
            failed += 1
            print("FAIL %s (%s): %s" % (label, case.get("kind", case.get("why", "")), "; ".join(errs[:6])), flush=True)
            if args.save and label.startswith("seed"):
                os.makedirs(args.save, exist_ok=True)
                with open(os.path.join(args.save, "seed-%s.json" % label.split()[1]), "w") as f:
                    json.dump({k: case[k] for k in ("model", "states", "hand")}, f, indent=1)
        else:
            passed += 1
            print("ok   %s" % label, flush=True)
    print("difftest: %d models in %.1f s" % (passed + failed, time.time() - t0))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
