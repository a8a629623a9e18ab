#!/usr/bin/env python3
"""gen_whipple.py — whipple-hand.json: the Whipple bicycle written the way a user would.

The benchmark bicycle of Meijaard, Papadopoulos, Ruina and Schwab (2007), Table 1
parameters, derived with sympy.physics.mechanics and emitted as an API.md §1 model:
the unconstrained kinetic energy T(q, q') of the four bodies (rear wheel R, rear frame
B, front frame H, front wheel F), the potential m g h, and five velocity constraints,
with the common subexpressions of T and the constraints (sympy.cse) as "definitions".

Coordinates (8): x, y (rear contact point), yaw, roll, pitch (rear frame), steer,
rw (rear wheel angle), fw (front wheel angle). Axes as in the benchmark: x forward,
z down; yaw about N.z, roll about the yawed x, pitch about the rolled y; the steer
axis is the pitched frame's z tilted by lambda about y; the wheels spin about their
frames' y. Constraints (5): the rear wheel's contact material point has no horizontal
velocity (2, along the yawed x and y), the front wheel's contact material point has
no velocity (3: the horizontal ones are the no-slip conditions, the vertical one is the
holonomic pitch constraint — front contact on the ground — differentiated to the
velocity level). Speeds (3): roll', steer', rw'. The initial pitch is solved from the
holonomic constraint (at roll = steer = 0 it is 0).

Needs python3-sympy. Usage: gen_whipple.py [OUT] (default: whipple-hand.json here).
"""
import json
import os
import sys

import sympy as sm
import sympy.physics.mechanics as me

PARAMS = {  # Meijaard et al. 2007, Table 1
    "w": 1.02, "c": 0.08, "lam": sm.pi / 10, "g": 9.81,
    "rR": 0.3, "mR": 2.0, "IRxx": 0.0603, "IRyy": 0.12,
    "xB": 0.3, "zB": -0.9, "mB": 85.0, "IBxx": 9.2, "IByy": 11.0, "IBzz": 2.8, "IBxz": 2.4,
    "xH": 0.9, "zH": -0.7, "mH": 4.0, "IHxx": 0.05892, "IHyy": 0.06, "IHzz": 0.00708, "IHxz": -0.00756,
    "rF": 0.35, "mF": 3.0, "IFxx": 0.1405, "IFyy": 0.28,
}
COORDS = ["x", "y", "yaw", "roll", "pitch", "steer", "rw", "fw"]


def derive():
    """T, V and the five constraint expressions in plain symbols q and q' (named "q'")."""
    p = {k: sm.Symbol(k) for k in PARAMS}
    q = me.dynamicsymbols(" ".join(COORDS))
    x, y, yaw, roll, pitch, steer, rw, fw = q
    N, A, L, B, E, H, R, F = sm.symbols("N A L B E H R F", cls=me.ReferenceFrame)
    A.orient_axis(N, N.z, yaw)
    L.orient_axis(A, A.x, roll)
    B.orient_axis(L, L.y, pitch)
    E.orient_axis(B, B.y, p["lam"])  # E.z: the steer axis (downward)
    H.orient_axis(E, E.z, steer)
    R.orient_axis(B, B.y, rw)
    F.orient_axis(H, H.y, fw)

    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", x * N.x + y * N.y)           # rear contact
    Rc = P.locatenew("Rc", -p["rR"] * L.z)             # rear hub
    Bo = Rc.locatenew("Bo", p["xB"] * B.x + (p["zB"] + p["rR"]) * B.z)
    # S: the steer axis at the ground in the reference configuration, fixed in B and H
    S = Rc.locatenew("S", (p["w"] + p["c"]) * B.x + p["rR"] * B.z)

    def in_h(vec_b):  # a vector given in B at the reference, fixed in H
        return vec_b.dot(E.x) * H.x + vec_b.dot(E.y) * H.y + vec_b.dot(E.z) * H.z

    Fc = S.locatenew("Fc", in_h(-p["c"] * B.x - p["rF"] * B.z))
    Ho = S.locatenew("Ho", in_h((p["xH"] - p["w"] - p["c"]) * B.x + p["zH"] * B.z))
    # front contact: from the hub, rF along the steepest downward line of the wheel plane
    down = N.z - N.z.dot(H.y) * H.y
    Fp = Fc.locatenew("Fp", p["rF"] * down / sm.sqrt(1 - N.z.dot(H.y) ** 2))

    # inertia dyadics: B's and H's given on the benchmark axes at the reference
    IB = me.inertia(B, p["IBxx"], p["IByy"], p["IBzz"], 0, 0, p["IBxz"])
    bx, by, bz = (sm.cos(p["lam"]) * H.x + sm.sin(p["lam"]) * H.z, H.y,
                  -sm.sin(p["lam"]) * H.x + sm.cos(p["lam"]) * H.z)
    IH = (p["IHxx"] * (bx | bx) + p["IHyy"] * (by | by) + p["IHzz"] * (bz | bz)
          + p["IHxz"] * ((bx | bz) + (bz | bx)))
    IR = me.inertia(B, p["IRxx"], p["IRyy"], p["IRxx"])  # axisymmetric about B.y
    IF = me.inertia(H, p["IFxx"], p["IFyy"], p["IFxx"])

    def vel(pt):
        return pt.pos_from(O).dt(N)

    def ke(m, pt, I, frame):
        v, w = vel(pt), frame.ang_vel_in(N)
        return m * v.dot(v) / 2 + w.dot(I.dot(w)) / 2

    T = (ke(p["mR"], Rc, IR, R) + ke(p["mB"], Bo, IB, B) + ke(p["mH"], Ho, IH, H)
         + ke(p["mF"], Fc, IF, F))
    V = -p["g"] * sum(m * pt.pos_from(O).dot(N.z)
                      for m, pt in ((p["mR"], Rc), (p["mB"], Bo), (p["mH"], Ho), (p["mF"], Fc)))
    # velocities of the wheels' contact material points
    vr = vel(Rc) + R.ang_vel_in(N).cross(P.pos_from(Rc))
    vf = vel(Fc) + F.ang_vel_in(N).cross(Fp.pos_from(Fc))
    cons = [vr.dot(A.x), vr.dot(A.y), vf.dot(A.x), vf.dot(A.y), vf.dot(N.z)]
    height = Fp.pos_from(O).dot(N.z)  # the holonomic constraint: = 0

    qs = [sm.Symbol(n) for n in COORDS]
    qds = [sm.Symbol(n + "'") for n in COORDS]
    t = me.dynamicsymbols._t
    sub = {qi.diff(t): qd for qi, qd in zip(q, qds)}
    sub.update(dict(zip(q, qs)))

    def plain(e):
        return e.xreplace(sub) if hasattr(e, "xreplace") else e

    return p, qs, qds, plain(T), plain(V), [plain(c) for c in cons], plain(height)


def to_text(e):
    s = sm.sstr(e, order="none")
    return s.replace("**", "^")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                             "whipple-hand.json")
    p, qs, qds, T, V, cons, height = derive()
    names = ["rear_long", "rear_lat", "front_long", "front_lat", "front_pitch"]
    # the definitions: sympy.cse over T, V and the constraints together
    reps, reduced = sm.cse([T, V] + cons, symbols=sm.numbered_symbols("d"))
    defs = [{"name": str(s), "expr": to_text(e)} for s, e in reps]

    # initial state: roll 0.05, steer 0.1, pitch from the holonomic constraint
    vals = {p[k]: v for k, v in PARAMS.items()}
    q0 = {"x": 0.0, "y": 0.0, "yaw": 0.0, "roll": 0.05, "pitch": 0.0, "steer": 0.1, "rw": 0.0, "fw": 0.0}
    hnum = height.subs(vals).subs({qs[i]: q0[n] for i, n in enumerate(COORDS) if n != "pitch"})
    pitch = sm.Symbol("pitch")
    q0["pitch"] = float(sm.nsolve(hnum, pitch, 0.0))
    model = {
        "name": "whipple-hand",
        "coordinates": COORDS,
        "parameters": {k: float(v) for k, v in PARAMS.items()},
        "definitions": defs,
        "kinetic_energy": to_text(reduced[0]),
        "potential_energy": to_text(reduced[1]),
        "constraints": [{"name": n, "expr": to_text(c)} for n, c in zip(names, reduced[2:])],
        "speeds": [{"name": "roll_rate", "expr": "roll'"}, {"name": "steer_rate", "expr": "steer'"},
                   {"name": "rear_wheel_rate", "expr": "rw'"}],
    }
    case = {
        "description": ("The Whipple bicycle, benchmark parameters of Meijaard et al. (2007) Table 1, "
                        "written as a hand-derived kinetic energy (sympy.physics.mechanics, then "
                        f"sympy.cse: {len(defs)} definitions), 8 coordinates, 5 velocity constraints "
                        "(rear and front no-slip, the front-contact pitch constraint differentiated), "
                        "speeds roll', steer', rw'. Generated by bench/models/gen_whipple.py."),
        "model": model,
        "simulation": {
            "initial": {"t": 0, "q": q0,
                        "speeds": {"roll_rate": 0.0, "steer_rate": 0.0, "rear_wheel_rate": -4.6 / 0.3}},
            "t_end": 1.0,
            "output": {"samples": 11},
            "integrator": {"method": "rk8pd", "rtol": 1e-10, "atol": 1e-12, "max_steps": 1000000},
            "formulation": "hamel",
            "hamel": "none",
        },
    }
    with open(out, "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    print(f"gen_whipple: {out}: {len(defs)} definitions, pitch0 = {q0['pitch']:.6g}", file=sys.stderr)


if __name__ == "__main__":
    main()
