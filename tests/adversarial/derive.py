#!/usr/bin/python3
"""derive.py — independent SymPy derivation of the adversarial cases (models.py) and
their check against the engine; writes the validation cases tests/adversarial/cases/*.json
that tests/unit/test_cases.c runs (suite "adversarial").

For each case, from the model's T, V, Q and constraints f (parsed by SymPy, not by the
engine), two routes give the accelerations:
  KKT:   [M  -A^T; A 0] [q''; lam] = [F0; -b]   (Lagrange with multipliers; A = df/dq',
         Chetaev's virtual displacements for a nonlinear f; b = df/dq q' + df/dt),
         u' = dS/dq' q'' + dS/dq q' + dS/dt (S: the speeds' expressions);
  Maggi: [Phi^T M; A] q'' = [Phi^T F0; -b], Phi the first k columns of [S'; A]^-1;
and, where models.py gives one, a closed form written by hand from Newton-Euler.
The Hamel coefficients come from the Lie brackets of the columns X_r of Phi:
gamma^j_rl = Psi_j . [X_r, X_l] (equal to the transpositional-relation sum of API.md 4),
with dPhi = -Phi dPsi Phi, evaluated in 30-digit mpmath.

Checks against build/hamel (exit status 1 on any disagreement):
  evaluate at 6 random states: q', u', q'' within 1e-10 relative (to the vector's scale);
  gamma at 3 random configurations: the same non-zero set, values within 1e-10;
  run: samples of q, speeds, q' against solve_ivp DOP853 (rtol 1e-12, atol 1e-14) on
  the KKT route, to 1e-8; the energy values and the conserved flag; the invariants.

usage: /usr/bin/python3 tests/adversarial/derive.py [--hamel build/hamel] [--write] [--only NAME]
--write (re)writes tests/adversarial/cases/NAME.json with the reference values.
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
import zlib

import mpmath
import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import CASES  # noqa: E402

mpmath.mp.dps = 30
HERE = os.path.dirname(os.path.abspath(__file__))

FUNCS = {"sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "exp": sp.exp, "log": sp.log, "sqrt": sp.sqrt,
         "abs": sp.Abs, "sign": sp.sign, "asin": sp.asin, "acos": sp.acos, "atan": sp.atan, "atan2": sp.atan2,
         "sinh": sp.sinh, "cosh": sp.cosh, "tanh": sp.tanh, "pi": sp.pi, "sec": sp.sec, "csc": sp.csc,
         "cot": sp.cot}


class Sys:
    """The SymPy side of one model."""

    def __init__(self, model):
        self.model = model
        self.names = model["coordinates"]
        n = self.n = len(self.names)
        self.t = sp.Symbol("t")
        self.q = [sp.Symbol("q_" + s) for s in self.names]
        self.qd = [sp.Symbol("qd_" + s) for s in self.names]
        self.par = {k: sp.Float(v, 30) for k, v in (model.get("parameters") or {}).items()}
        self.psym = {k: sp.Symbol("p_" + k) for k in self.par}
        loc = dict(FUNCS)
        loc.update({s: self.q[i] for i, s in enumerate(self.names)})
        loc.update({s + "__d": self.qd[i] for i, s in enumerate(self.names)})
        loc.update(self.psym)
        loc["t"] = self.t
        self.loc = loc
        for d in model.get("definitions") or []:
            loc[d["name"]] = self.parse(d["expr"])
        self.T = self.parse(model["kinetic_energy"])
        self.V = self.parse(model.get("potential_energy", "0"))
        Qd = model.get("generalized_forces") or {}
        self.Q = [self.parse(Qd.get(s, "0")) for s in self.names]
        cons = [c["expr"] if isinstance(c, dict) else c for c in model.get("constraints") or []]
        self.cnames = [c["name"] if isinstance(c, dict) else "c%d" % (i + 1)
                       for i, c in enumerate(model.get("constraints") or [])]
        self.f = [self.parse(c) for c in cons]
        self.S = [self.parse(s["expr"]) for s in model.get("speeds") or []]
        self.snames = [s["name"] for s in model.get("speeds") or []]
        self.k = len(self.S)
        qd, q, t = self.qd, self.q, self.t
        self.linear = [all(sp.diff(f, a, b) == 0 for a in qd for b in qd) for f in self.f]
        M = sp.Matrix(n, n, lambda i, j: sp.diff(self.T, qd[i], qd[j]))
        p = [sp.diff(self.T, v) for v in qd]
        F0 = [self.Q[i] + sp.diff(self.T, q[i]) - sp.diff(self.V, q[i])
              - sum(sp.diff(p[i], q[j]) * qd[j] for j in range(n)) - sp.diff(p[i], t) for i in range(n)]
        A = sp.Matrix([[sp.diff(f, v) for v in qd] for f in self.f]) if self.f else sp.zeros(0, n)
        b = sp.Matrix([sum(sp.diff(f, q[j]) * qd[j] for j in range(n)) + sp.diff(f, t) for f in self.f]) \
            if self.f else sp.zeros(0, 1)
        Sm = sp.Matrix([[sp.diff(s, v) for v in qd] for s in self.S]) if self.S else sp.zeros(0, n)
        sb = sp.Matrix([sum(sp.diff(s, q[j]) * qd[j] for j in range(n)) + sp.diff(s, t) for s in self.S]) \
            if self.S else sp.zeros(0, 1)
        args = q + qd + [t] + list(self.psym.values())
        self.args = args
        self.exprs = dict(M=M, F0=sp.Matrix(F0), A=A, b=b, S=Sm, sb=sb, s=sp.Matrix(self.S),
                          f=sp.Matrix(self.f), E=sp.Matrix([self.T + self.V]))
        self.mp = {k: sp.lambdify(args, v, modules="mpmath") for k, v in self.exprs.items()}
        self.np = {k: sp.lambdify(args, v, modules="numpy") for k, v in self.exprs.items()}
        # Psi for the Hamel coefficients: speeds then linear constraints (velocity-free parts
        # dropped); its derivatives in q.
        if all(self.linear):
            rows = self.S + self.f
            Psi = sp.Matrix([[sp.diff(r, v) for v in qd] for r in rows])
            Psit = sp.Matrix([r.subs({v: 0 for v in qd}) for r in rows])
            self.Psi_f = sp.lambdify(args, Psi, modules="mpmath")
            self.Psit_f = sp.lambdify(args, Psit, modules="mpmath")
            self.dPsi_f = [sp.lambdify(args, Psi.diff(qq), modules="mpmath") for qq in q]
            self.dPsit_f = [sp.lambdify(args, Psit.diff(qq), modules="mpmath") for qq in q]
            self.tPsi_f = sp.lambdify(args, Psi.diff(t), modules="mpmath")
            self.tPsit_f = sp.lambdify(args, Psit.diff(t), modules="mpmath")

    def parse(self, text):
        s = re.sub(r"([A-Za-z_][A-Za-z0-9_]*)'", r"\1__d", str(text)).replace("^", "**")
        return sp.sympify(s, locals=self.loc, rational=False)

    def pvals(self, over=None, kind="mp"):
        d = dict(self.par)
        if over:
            d.update({k: sp.Float(v, 30) for k, v in over.items()})
        return [mpmath.mpf(str(d[k])) if kind == "mp" else float(d[k]) for k in self.psym]

    def call(self, name, q, qd, t, kind="mp"):
        f = (self.mp if kind == "mp" else self.np)[name]
        r = f(*(list(q) + list(qd) + [t] + self.pvals(kind=kind)))
        if kind == "mp":
            return mpmath.matrix(r.tolist()) if hasattr(r, "tolist") else mpmath.matrix(r)
        return np.array(r, dtype=float)

    # ---- accelerations, two routes
    def kkt(self, q, qd, t, kind="mp"):
        n, m = self.n, len(self.f)
        M = self.call("M", q, qd, t, kind)
        F0 = self.call("F0", q, qd, t, kind)
        if kind == "mp":
            K = mpmath.zeros(n + m, n + m)
            r = mpmath.zeros(n + m, 1)
        else:
            K = np.zeros((n + m, n + m))
            r = np.zeros(n + m)
        for i in range(n):
            for j in range(n):
                K[i, j] = M[i, j]
            r[i] = F0[i, 0] if kind == "np" else F0[i]
        if m:
            A = self.call("A", q, qd, t, kind)
            b = self.call("b", q, qd, t, kind)
            for a in range(m):
                for j in range(n):
                    K[j, n + a] = -A[a, j]
                    K[n + a, j] = A[a, j]
                r[n + a] = -(b[a, 0] if kind == "np" else b[a])
        sol = mpmath.lu_solve(K, r) if kind == "mp" else np.linalg.solve(K, r)
        return [sol[i] for i in range(n)], [sol[n + a] for a in range(m)]

    def maggi(self, q, qd, t):
        n, m, k = self.n, len(self.f), self.k
        M = self.call("M", q, qd, t)
        F0 = self.call("F0", q, qd, t)
        S = self.call("S", q, qd, t)
        J = mpmath.matrix(n, n)
        A = self.call("A", q, qd, t) if m else None
        b = self.call("b", q, qd, t) if m else None
        for i in range(n):
            for j in range(n):
                J[i, j] = S[i, j] if i < k else A[i - k, j]
        Ji = J ** -1
        Phi = mpmath.matrix(n, k)
        for i in range(n):
            for j in range(k):
                Phi[i, j] = Ji[i, j]
        top = Phi.T * M
        rt = Phi.T * F0
        K = mpmath.matrix(n, n)
        r = mpmath.matrix(n, 1)
        for i in range(n):
            for j in range(n):
                K[i, j] = top[i, j] if i < k else A[i - k, j]
            r[i] = rt[i] if i < k else -b[i - k]
        sol = mpmath.lu_solve(K, r)
        return [sol[i] for i in range(n)]

    def udot(self, q, qd, qdd, t, kind="mp"):
        S = self.call("S", q, qd, t, kind)
        sb = self.call("sb", q, qd, t, kind)
        out = []
        for r in range(self.k):
            v = sum(S[r, j] * qdd[j] for j in range(self.n))
            out.append(v + (sb[r, 0] if kind == "np" else sb[r]))
        return out

    def qdot_linear(self, q, u, t, kind="mp"):
        """q' from the speeds and the (linear) constraints."""
        n, k = self.n, self.k
        z = [0] * n
        S = self.call("S", q, z, t, kind)
        s0 = self.call("s", q, z, t, kind)
        A = self.call("A", q, z, t, kind) if self.f else None
        f0 = self.call("f", q, z, t, kind) if self.f else None
        if kind == "mp":
            J = mpmath.matrix(n, n)
            r = mpmath.matrix(n, 1)
        else:
            J = np.zeros((n, n))
            r = np.zeros(n)
        for i in range(n):
            for j in range(n):
                J[i, j] = S[i, j] if i < k else A[i - k, j]
            if kind == "np":
                r[i] = (u[i] - s0[i, 0]) if i < k else -f0[i - k, 0]
            else:
                r[i] = (u[i] - s0[i]) if i < k else -f0[i - k]
        sol = mpmath.lu_solve(J, r) if kind == "mp" else np.linalg.solve(J, r)
        return [sol[i] for i in range(n)]

    # ---- Hamel coefficients: gamma^j_rl = Psi_j . [X_r, X_l]; gamma^j_r = Psi_j . [X_r, X_0]
    def gammas(self, q, t):
        n = self.n
        a = list(q) + [0] * n + [t] + self.pvals()
        Psi = mpmath.matrix(self.Psi_f(*a).tolist())
        Phi = Psi ** -1
        Psit = mpmath.matrix(self.Psit_f(*a).tolist())
        Phit = -Phi * Psit
        dPhi = [-Phi * mpmath.matrix(f(*a).tolist()) * Phi for f in self.dPsi_f]
        # d/dq_k of Phi_t = -Phi Psi_t: -dPhi_k... = -(dPhi_k Psit + Phi dPsit_k)
        dPhit = [-(dPhi[kk] * Psit + Phi * mpmath.matrix(self.dPsit_f[kk](*a).tolist())) for kk in range(n)]
        tPhi = -Phi * mpmath.matrix(self.tPsi_f(*a).tolist()) * Phi
        tPhit = -(tPhi * Psit + Phi * mpmath.matrix(self.tPsit_f(*a).tolist()))
        order = self.snames + self.cnames
        g = {}
        for r in range(n):
            for l in range(n):
                br = [sum(Phi[kk, r] * dPhi[kk][i, l] - Phi[kk, l] * dPhi[kk][i, r] for kk in range(n))
                      for i in range(n)]
                for j in range(n):
                    g[(order[j], order[r], order[l])] = sum(Psi[j, i] * br[i] for i in range(n))
        gt = {}
        for r in range(n):
            # [X_r, X_0], X_0 = d/dt + Phi_t . d/dq
            br = [sum(Phi[kk, r] * dPhit[kk][i, 0] - Phit[kk, 0] * dPhi[kk][i, r] for kk in range(n))
                  - tPhi[i, r] for i in range(n)]
            for j in range(n):
                gt[(order[j], order[r])] = sum(Psi[j, i] * br[i] for i in range(n))
        return g, gt


def frozen_model(sy, model, qd0):
    """model with each nonlinear constraint f replaced by df/dq'(q, qd0) . q'."""
    m = json.loads(json.dumps(model))
    sub = {v: sp.Float(x, 30) for v, x in zip(sy.qd, qd0)}
    for i, (f, lin) in enumerate(zip(sy.f, sy.linear)):
        if lin:
            continue
        terms = []
        for v, nm in zip(sy.qd, sy.names):
            a = sp.diff(f, v).subs(sub)
            a = sp.N(a, 30)
            if a != 0:
                terms.append("(%s)*%s'" % (sp.sstr(a).replace("**", "^"), nm))
        expr = " + ".join(terms) if terms else "0"
        if isinstance(m["constraints"][i], dict):
            m["constraints"][i]["expr"] = expr
        else:
            m["constraints"][i] = expr
    return m


# ---------------------------------------------------------------- the engine


def hamel(exe, cmd, doc, *extra):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(doc, fh)
        path = fh.name
    try:
        p = subprocess.run([exe, cmd, path] + list(extra), capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(path)
    if p.returncode != 0:
        raise RuntimeError("hamel %s exited %d: %s" % (cmd, p.returncode, p.stderr[-800:]))
    return json.loads(p.stdout)


def rel_err(eng, ref):
    """max |e - r| / max(1, max |r|) over a vector given as dicts."""
    scale = max([1.0] + [abs(float(v)) for v in ref.values()])
    return max(abs(float(eng[k]) - float(v)) for k, v in ref.items()) / scale


# ---------------------------------------------------------------- per case


def initial_state(sy, c):
    ini = c["simulation"]["initial"]
    q = [float(ini["q"][s]) for s in sy.names]
    t0 = float(ini.get("t", 0))
    if "speeds" in ini:
        u = [float(ini["speeds"][s]) for s in sy.snames]
        qd = [float(v) for v in sy.qdot_linear(q, u, t0)]
    else:
        qd = [float(ini["qdot"][s]) for s in sy.names]
    return q, qd, t0


def random_states(sy, c, rng, count):
    out = []
    for _ in range(count):
        q = {s: rng.uniform(-1.2, 1.2) for s in sy.names}
        for s in ("th",):  # keep the Euler angle of Suslov away from its singularity
            if s in q and c["name"].startswith("suslov"):
                q[s] = rng.uniform(0.4, 2.6)
        if c["name"] == "sphere-on-turntable":
            q["th"] = rng.uniform(0.4, 2.6)
        u = {s: rng.uniform(-1.5, 1.5) for s in sy.snames}
        out.append({"t": rng.uniform(0, 3), "q": q, "speeds": u})
    return out


def check(exe, c, write, log):
    name = c["name"]
    sy = Sys(c["model"])
    nonlinear = not all(sy.linear)
    rng = random.Random(zlib.crc32(name.encode()))
    bad = []
    report = {}

    # ---- pointwise: evaluate
    if not nonlinear:
        states = random_states(sy, c, rng, 6)
        ev = hamel(exe, "evaluate", {"model": c["model"], "evaluate": {"states": states}})
        worst = {"qdot": 0, "speeds_dot": 0, "qddot": 0, "kkt_vs_maggi": 0, "hand": 0}
        for st, es in zip(states, ev["states"]):
            q = [mpmath.mpf(st["q"][s]) for s in sy.names]
            u = [mpmath.mpf(st["speeds"][s]) for s in sy.snames]
            t = mpmath.mpf(st["t"])
            qd = sy.qdot_linear(q, u, t)
            qdd, _ = sy.kkt(q, qd, t)
            qdd2 = sy.maggi(q, qd, t)
            ud = sy.udot(q, qd, qdd, t)
            ud2 = sy.udot(q, qd, qdd2, t)
            worst["kkt_vs_maggi"] = max(worst["kkt_vs_maggi"], rel_err(dict(enumerate(ud2)), dict(enumerate(ud))))
            if c.get("hand"):
                h = c["hand"]([float(x) for x in q], [float(x) for x in u], float(t), c["model"]["parameters"])
                worst["hand"] = max(worst["hand"], rel_err(dict(enumerate(h)), dict(enumerate(ud))))
            worst["qdot"] = max(worst["qdot"], rel_err(es["qdot"], dict(zip(sy.names, qd))))
            worst["speeds_dot"] = max(worst["speeds_dot"], rel_err(es["speeds_dot"], dict(zip(sy.snames, ud))))
            worst["qddot"] = max(worst["qddot"], rel_err(es["qddot"], dict(zip(sy.names, qdd))))
        report["evaluate"] = worst
        for k in ("qdot", "speeds_dot", "qddot", "kkt_vs_maggi"):
            if worst[k] > 1e-10:
                bad.append("evaluate %s: %.3g" % (k, worst[k]))
        if c.get("hand") and worst["hand"] > 1e-12:
            bad.append("hand-written right-hand side vs SymPy: %.3g" % worst["hand"])
    else:
        # nonlinear: states from the hand-written q'; compare q'' and the speeds' rates
        states = []
        for _ in range(6):
            q = [rng.uniform(-1.2, 1.2) for _ in sy.names]
            u = [rng.uniform(-1.5, 1.5) for _ in sy.snames]
            t = rng.uniform(0, 3)
            qd = c["qdot"](q, u, t, c["model"]["parameters"])
            states.append({"t": t, "q": dict(zip(sy.names, q)), "qdot": dict(zip(sy.names, qd))})
        ev = hamel(exe, "evaluate", {"model": c["model"], "evaluate": {"states": states}})
        worst = {"qddot": 0, "constraint_at_state": 0, "kkt_vs_maggi": 0}
        for st, es in zip(states, ev["states"]):
            q = [mpmath.mpf(st["q"][s]) for s in sy.names]
            qd = [mpmath.mpf(st["qdot"][s]) for s in sy.names]
            t = mpmath.mpf(st["t"])
            worst["constraint_at_state"] = max(worst["constraint_at_state"],
                                               max(abs(x) for x in sy.call("f", q, qd, t)))
            qdd, _ = sy.kkt(q, qd, t)
            qdd2 = sy.maggi(q, qd, t)
            worst["kkt_vs_maggi"] = max(worst["kkt_vs_maggi"], rel_err(dict(enumerate(qdd2)), dict(enumerate(qdd))))
            worst["qddot"] = max(worst["qddot"], rel_err(es["qddot"], dict(zip(sy.names, qdd))))
        report["evaluate"] = {k: float(v) for k, v in worst.items()}
        if worst["qddot"] > 1e-10 or worst["kkt_vs_maggi"] > 1e-12:
            bad.append("evaluate (nonlinear): %s" % report["evaluate"])

    # ---- gamma at 3 random configurations. A nonlinear constraint's row of Psi is
    # df/dq' (Chetaev), taken at the initial state's q' (what the engine reports for a
    # model whose speeds are given): SymPy's Psi gets that row frozen as a linear one.
    nonzero = set()
    gsys = sy
    if nonlinear:
        q0_, qd0_, _ = initial_state(sy, c)
        gsys = Sys(frozen_model(sy, c["model"], qd0_))
    listed = set()
    if True:
        gw = 0.0
        for trial in range(3):
            q = {s: round(rng.uniform(-1.2, 1.2), 6) for s in sy.names}
            if "th" in q and (name.startswith("suslov") or name == "sphere-on-turntable"):
                q["th"] = round(rng.uniform(0.4, 2.6), 6)
            t = round(rng.uniform(0, 3), 6)
            doc = {"model": c["model"], "simulation": dict(c["simulation"])}
            extra = []
            if nonlinear:
                # the speeds leave two roots for q' at another q (the initial q' is off its
                # constraints there: the engine refuses it naming them); --qdot chooses
                # models.py's root, at any heading
                q["th"] = round(rng.uniform(-math.pi, math.pi), 6)
                u0 = [float(x) for x in sy.call("s", q0_, qd0_, 0, "np").flatten()]
                qdq = c["qdot"]([q[s] for s in sy.names], u0, t, c["model"]["parameters"])
                gsys = Sys(frozen_model(sy, c["model"], qdq))
                extra = ["--qdot", ",".join("%s=%r" % (s, v) for s, v in zip(sy.names, qdq))]
            eg = hamel(exe, "gamma", doc, "--q", ",".join("%s=%r" % kv for kv in q.items()), "--t", repr(t),
                       *extra)
            pt = eg["points"][0]
            g, gt = gsys.gammas([mpmath.mpf(q[s]) for s in sy.names], mpmath.mpf(t))
            eng = {(e["j"], e["r"], e["l"]): e["value"] for e in pt["gamma"]}
            listed |= set(eng)
            engt = {(e["j"], e["r"]): e["value"] for e in pt.get("gamma_t", [])}
            for key, val in g.items():
                ev_ = eng.get(key, 0.0)
                gw = max(gw, abs(ev_ - float(val)))
                if abs(val) > 1e-20:
                    nonzero.add(key)
            for key in eng:
                if key not in g:
                    bad.append("gamma: unknown entry %s" % (key,))
            for key, val in gt.items():
                gw = max(gw, abs(engt.get(key, 0.0) - float(val)))
        report["gamma_max_abs_diff"] = gw
        if listed != nonzero:  # API.md 4: exactly the entries not identically zero
            bad.append("gamma entries listed but identically zero: %s; not listed: %s"
                       % (sorted(listed - nonzero), sorted(nonzero - listed)))
        if gw > 1e-10:
            bad.append("gamma differs by %.3g" % gw)

    # ---- trajectory: solve_ivp DOP853 on the KKT route, state (q, q')
    q0, qd0, t0 = initial_state(sy, c)
    sim = c["simulation"]
    t_end = float(sim["t_end"])
    ns = sim["output"]["samples"]
    times = [t0 + (t_end - t0) * i / (ns - 1) for i in range(ns)]
    n = sy.n

    def rhs(t, y):
        qdd, _ = sy.kkt(y[:n], y[n:], t, kind="np")
        return np.concatenate([y[n:], qdd])

    sol = solve_ivp(rhs, (t0, t_end), np.array(q0 + qd0), method="DOP853", rtol=1e-12, atol=1e-14,
                    t_eval=times, dense_output=False)
    if sol.status != 0:
        bad.append("solve_ivp: %s" % sol.message)
        return bad, report
    req = json.loads(json.dumps(sim))
    req.setdefault("integrator", {}).update({"method": "rk8pd", "rtol": 1e-12, "atol": 1e-14})
    req["hamel"] = "initial"
    res = hamel(exe, "run", {"model": c["model"], "simulation": req})
    tr = res["trajectory"]
    samples = []
    dq = dqd = du = 0.0
    energies = []
    cons_res = 0.0
    for i, t in enumerate(times):
        y = sol.y[:, i]
        q, qd = list(y[:n]), list(y[n:])
        s_vals = sy.call("s", q, qd, t, "np").flatten() if sy.k else []
        fr = sy.call("f", q, qd, t, "np").flatten() if sy.f else [0.0]
        cons_res = max(cons_res, max(abs(x) for x in fr))
        energies.append(float(sy.call("E", q, qd, t, "np")[0, 0]))
        smp = {"t": t, "q": dict(zip(sy.names, q)), "qdot": dict(zip(sy.names, qd))}
        if sy.k and "speeds" in tr:
            smp["speeds"] = dict(zip(sy.snames, [float(x) for x in s_vals]))
        samples.append(smp)
        dq = max(dq, max(abs(tr["q"][s][i] - smp["q"][s]) for s in sy.names))
        dqd = max(dqd, max(abs(tr["qdot"][s][i] - smp["qdot"][s]) for s in sy.names))
        if "speeds" in smp:
            du = max(du, max(abs(tr["speeds"][s][i] - smp["speeds"][s]) for s in sy.snames))
    e_eng = res["checks"]["energy"]
    de = max(abs(a - b) for a, b in zip(e_eng["values"], energies))
    e_drift = max(abs(e - energies[0]) for e in energies)
    conserved = e_drift <= 1e-9 * max(1.0, abs(energies[0]))
    report["trajectory"] = {"max_abs_q": dq, "max_abs_qdot": dqd, "max_abs_speeds": du, "energy": de,
                            "reference_constraint_residual": cons_res, "reference_energy_drift": e_drift}
    if max(dq, dqd, du, de) > 1e-8:
        bad.append("trajectory differs: %s" % report["trajectory"])
    if conserved != c["energy_conserved"]:
        bad.append("reference energy conservation %s, models.py says %s" % (conserved, c["energy_conserved"]))
    if bool(e_eng["conserved_expected"]) != c["energy_conserved"]:
        bad.append("engine conserved_expected = %s (%s)" % (e_eng["conserved_expected"], e_eng.get("reason")))
    # invariants: constant along the reference, and the engine reports the same initial value
    inv_exp = {}
    for inv in sim.get("invariants", []):
        ex = sy.parse(inv["expr"])
        fn = sp.lambdify(sy.args, ex, modules="numpy")
        vals = [float(fn(*(list(sol.y[:n, i]) + list(sol.y[n:, i]) + [times[i]] + sy.pvals(kind="np"))))
                for i in range(len(times))]
        drift = max(abs(v - vals[0]) for v in vals)
        gi = res["checks"]["invariants"][inv["name"]]
        report.setdefault("invariants", {})[inv["name"]] = {"value": vals[0], "reference_drift": drift,
                                                            "engine_drift": gi["max_abs_drift"]}
        if drift > 1e-9 or abs(gi["initial"] - vals[0]) > 1e-12 or gi["max_abs_drift"] > 1e-9:
            bad.append("invariant %s: %s" % (inv["name"], report["invariants"][inv["name"]]))
        inv_exp[inv["name"]] = {"value": vals[0]}

    # ---- holonomy (Frobenius on the speeds) and scleronomy, from SymPy
    hol = {}
    if not nonlinear:
        order = sy.snames + sy.cnames
        for jn in sy.cnames:
            hol[jn] = not any(k_[0] == jn and k_[1] in sy.snames and k_[2] in sy.snames for k_ in nonzero)
    else:
        for jn, lin in zip(sy.cnames, sy.linear):
            hol[jn] = False
    report["holonomic"] = hol
    summ = hamel(exe, "check", c["model"], "--json")
    for ci in summ["constraints"]:
        if ci["holonomic"] != hol[ci["name"]]:
            bad.append("holonomic(%s): engine %s, SymPy %s" % (ci["name"], ci["holonomic"], hol[ci["name"]]))
    tz = {sy.t: 0}
    scl = all(sp.diff(e, sy.t) == 0 for e in sy.f) and all(
        sp.simplify(e.subs({v: 0 for v in sy.qd})) == 0 for e, lin in zip(sy.f, sy.linear) if lin)
    report["scleronomic"] = scl
    if summ["scleronomic"] != scl:
        bad.append("scleronomic: engine %s, SymPy %s" % (summ["scleronomic"], scl))
    log("%s: %s" % (name, json.dumps(report, default=float)))

    if write and not bad:
        hat = []
        if True:
            if nonlinear:
                gsys = Sys(frozen_model(sy, c["model"], qd0))
            q = [mpmath.mpf(q0[i]) for i in range(n)]
            g, _ = gsys.gammas(q, mpmath.mpf(t0))
            for key in sorted(nonzero):
                hat.append({"j": key[0], "r": key[1], "l": key[2], "value": float(g[key])})
        out = {
            "source": "tests/adversarial/models.py, derived by tests/adversarial/derive.py (SymPy, independent of "
                      "the engine)",
            "description": c["description"],
            "model": dict(c["model"], name=name),
            "simulation": dict(req, hamel="initial"),
            "expected": {
                "samples": samples,
                "energy": {"conserved": c["energy_conserved"], "values_at_samples": energies},
                "invariants": inv_exp,
                "hamel_at_initial": hat,
                "holonomic": hol,
                "scleronomic": scl,
                "tolerance": {"abs": 1e-8, "rel": 1e-8,
                              "comment": "the reference is solve_ivp DOP853 at rtol 1e-12, atol 1e-14 on the "
                                         "Lagrange-multiplier equations"},
                "agreement_when_written": report,
            },
        }
        with open(os.path.join(HERE, "cases", name + ".json"), "w") as fh:
            json.dump(out, fh, indent=1, default=float)
            fh.write("\n")
    return bad, report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hamel", default="build/hamel")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    passed = failed = 0
    for c in CASES:
        if a.only and c["name"] != a.only:
            continue
        try:
            bad, _ = check(a.hamel, c, a.write, print)
        except Exception as e:  # the harness failing is a failure
            import traceback
            traceback.print_exc()
            bad = ["harness: %s: %s" % (type(e).__name__, e)]
        if bad:
            failed += 1
            print("FAIL %s: %s" % (c["name"], "; ".join(bad)), flush=True)
        else:
            passed += 1
            print("ok   %s" % c["name"], flush=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
