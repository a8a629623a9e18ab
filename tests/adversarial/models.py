"""models.py — the adversarial mechanical cases (tests/adversarial), each written from
the physics (positions of mass centres, contact points, inertias), not from any
engine output. derive.py derives their equations independently in SymPy.

Each case: name, description, model (API.md 1), simulation (API.md 3, without
"model"), optional "hand" (a closed-form right-hand side u' = f(q, u, t) written out
by hand from Newton-Euler, a third route beside the two SymPy ones), optional
"qdot" (for models with a nonlinear constraint: q' from q and the speeds, by hand),
"invariants" (expressions in q, q', t known to be constant, with why).
"""
import math

CASES = []


def case(**kw):
    CASES.append(kw)
    return kw


# 1. Chaplygin sleigh on an inclined plane: mass centre (x, y), heading th, knife
#    edge a distance b BEHIND the mass centre along the heading; gravity's component
#    g sin(alpha) pulls along -x. Contact point P = (x - b cos th, y - b sin th);
#    its velocity normal to the blade vanishes.
#    Newton-Euler by hand (e along the blade, n normal, v = e.r', w = th'):
#      r' = v e + b w n  (from the constraint),
#      m (v' - b w^2) = -m g sa cos th,     I w' = -b lam,
#      m (v w + b w') = lam + m g sa sin th
#    =>  v' = b w^2 - g sa cos th,  w' = m b (g sa sin th - v w) / (I + m b^2).
def _sleigh_hand(q, u, t, p):
    x, y, th = q
    v, w = u
    sa = math.sin(p["alpha"])
    return [p["b"] * w * w - p["g"] * sa * math.cos(th),
            p["m"] * p["b"] * (p["g"] * sa * math.sin(th) - v * w) / (p["I"] + p["m"] * p["b"] ** 2)]


case(name="chaplygin-sleigh-incline",
     description="Chaplygin sleigh (knife edge a distance b behind the mass centre) on a plane inclined at alpha: "
                 "coordinates are the mass centre and heading, speeds the forward speed of the mass centre and the "
                 "turning rate. Scleronomic, conservative: E = T + V is a first integral.",
     model={"coordinates": ["x", "y", "th"],
            "parameters": {"m": 2.3, "I": 0.41, "b": 0.37, "g": 9.81, "alpha": 0.2},
            "kinetic_energy": "m/2*(x'^2 + y'^2) + I/2*th'^2",
            "potential_energy": "m*g*sin(alpha)*x",
            "constraints": [{"name": "knife", "expr": "-sin(th)*x' + cos(th)*y' - b*th'"}],
            "speeds": [{"name": "v", "expr": "cos(th)*x' + sin(th)*y'"}, {"name": "w", "expr": "th'"}]},
     simulation={"initial": {"t": 0, "q": {"x": 0, "y": 0, "th": 0.4}, "speeds": {"v": 1.1, "w": -0.8}},
                 "t_end": 5, "output": {"samples": 11}},
     hand=_sleigh_hand, energy_conserved=True)


# 2. Suslov's problem: a rigid body about a fixed point (3-1-3 Euler angles ph, th, ps),
#    full inertia tensor J in body axes, whose body-fixed angular velocity component
#    along e3 is held at zero; its mass centre is on the body e3 axis at l, under gravity.
#    Body rates: w1 = ph' sin th sin ps + th' cos ps, w2 = ph' sin th cos ps - th' sin ps,
#    w3 = ph' cos th + ps'. Height of the mass centre: l cos th.
#    By hand (Euler with the constraint torque lam e3): J w' + w x J w = tau_g + lam e3,
#    w3 = 0: the first two rows with w3' = 0 give w1', w2'.
def _suslov_hand(q, u, t, p):
    import numpy as np
    ph, th, ps = q
    w1, w2 = u
    J = np.array([[p["J11"], p["J12"], p["J13"]], [p["J12"], p["J22"], p["J23"]], [p["J13"], p["J23"], p["J33"]]])
    w = np.array([w1, w2, 0.0])
    # gravity torque about the fixed point in body axes: r_cm x F, r_cm = l e3,
    # F = -m g k where k (space vertical) in body axes for 3-1-3 is
    # (sin th sin ps, sin th cos ps, cos th)
    k = np.array([math.sin(th) * math.sin(ps), math.sin(th) * math.cos(ps), math.cos(th)])
    tau = np.cross(np.array([0, 0, p["l"]]), -p["M"] * p["g"] * k)
    rhs = tau - np.cross(w, J @ w)
    # rows 1, 2 of J [w1', w2', 0] = rhs (row 3 fixes lam)
    A = J[:2, :2]
    return list(np.linalg.solve(A, rhs[:2]))


case(name="suslov-heavy",
     description="Suslov's problem: a rigid body with a general (non-diagonal) inertia tensor about a fixed point, "
                 "whose body-fixed angular velocity along e3 is zero, with its mass centre on e3 under gravity. "
                 "3-1-3 Euler angles; the speeds are the body rates w1, w2.",
     model={"coordinates": ["ph", "th", "ps"],
            "parameters": {"J11": 2.0, "J22": 3.0, "J33": 4.5, "J12": 0.3, "J13": 0.7, "J23": -0.45,
                           "M": 1.7, "g": 9.81, "l": 0.25},
            "definitions": [{"name": "w1", "expr": "ph'*sin(th)*sin(ps) + th'*cos(ps)"},
                            {"name": "w2", "expr": "ph'*sin(th)*cos(ps) - th'*sin(ps)"},
                            {"name": "w3", "expr": "ph'*cos(th) + ps'"}],
            "kinetic_energy": "1/2*(J11*w1^2 + J22*w2^2 + J33*w3^2) + J12*w1*w2 + J13*w1*w3 + J23*w2*w3",
            "potential_energy": "M*g*l*cos(th)",
            "constraints": [{"name": "suslov", "expr": "ph'*cos(th) + ps'"}],
            "speeds": [{"name": "u1", "expr": "ph'*sin(th)*sin(ps) + th'*cos(ps)"},
                       {"name": "u2", "expr": "ph'*sin(th)*cos(ps) - th'*sin(ps)"}]},
     simulation={"initial": {"t": 0, "q": {"ph": 0.3, "th": 1.1, "ps": -0.5}, "speeds": {"u1": 0.9, "u2": -0.6}},
                 "t_end": 4, "output": {"samples": 9}},
     hand=_suslov_hand, energy_conserved=True)


# 3. A sphere (radius a, mass m, moment of inertia I = k m a^2 about any diameter, not
#    the homogeneous 2/5) rolling on a table turning at the constant rate W about the
#    vertical through the origin. Centre (x, y); Z-X-Z angles ph, th, ps; space-frame
#    angular velocity (wx, wy, wz). The contact point moves with the table:
#    x' - a wy = -W y, y' + a wx = W x. Affine constraints: T + V is NOT conserved;
#    the Jacobi-like integral h = E - W Lz (Lz: angular momentum about the table's
#    axis, m (x y' - y x') + I wz) is, as are wz and, with kappa = I/(I + m a^2),
#    x' + kappa W y and y' - kappa W x (r'' = kappa W e_z x r').
case(name="sphere-on-turntable",
     description="A sphere with I = k m a^2 (k = 0.3) rolling without slipping on a table turning at a constant rate "
                 "W. Affine (rheonomic in Greenwood's sense) constraints: energy is not conserved, the Jacobi-like "
                 "integral E - W Lz is, and the centre circles at kappa W, kappa = I/(I + m a^2).",
     model={"coordinates": ["x", "y", "ph", "th", "ps"],
            "parameters": {"m": 1.3, "a": 0.5, "k": 0.3, "W": 0.9},
            "definitions": [{"name": "I", "expr": "k*m*a^2"}],
            "kinetic_energy": "m/2*(x'^2 + y'^2) + I/2*(ph'^2 + th'^2 + ps'^2 + 2*cos(th)*ph'*ps')",
            "speeds": [{"name": "wx", "expr": "th'*cos(ph) + ps'*sin(th)*sin(ph)"},
                       {"name": "wy", "expr": "th'*sin(ph) - ps'*sin(th)*cos(ph)"},
                       {"name": "wz", "expr": "ph' + ps'*cos(th)"}],
            "constraints": [{"name": "roll_x", "expr": "x' - a*(th'*sin(ph) - ps'*sin(th)*cos(ph)) + W*y"},
                            {"name": "roll_y", "expr": "y' + a*(th'*cos(ph) + ps'*sin(th)*sin(ph)) - W*x"}]},
     simulation={"initial": {"t": 0, "q": {"x": 0.7, "y": -0.2, "ph": 0.1, "th": 1.2, "ps": 0.3},
                             "speeds": {"wx": 0.4, "wy": -1.1, "wz": 0.6}},
                 "t_end": 6, "output": {"samples": 13},
                 "invariants": [
                     {"name": "jacobi", "expr": "m/2*(x'^2 + y'^2) + k*m*a^2/2*(ph'^2 + th'^2 + ps'^2 + 2*cos(th)*ph'*ps') - W*(m*(x*y' - y*x') + k*m*a^2*(ph' + ps'*cos(th)))"},
                     {"name": "spin", "expr": "ph' + ps'*cos(th)"},
                     {"name": "cx", "expr": "x' + k/(k + 1)*W*y"},
                     {"name": "cy", "expr": "y' - k/(k + 1)*W*x"}]},
     energy_conserved=False)


# 4. Roller racer driven by a time-dependent joint torque: front body (mass m1, inertia
#    I1 about its centre (x, y), heading th) with its wheel pair at its centre; a joint d1
#    behind it; rear body (m2, I2), heading th + ph, centre d2 behind the joint, wheels at
#    its centre. Neither wheel pair slips sideways. The rider applies tau0 sin(nu t) at the
#    joint (virtual work tau dph) and the joint has viscous damping c. With d2 > d1 the
#    speeds chart (v, ph') is regular everywhere (it is singular where d1 cos ph + d2 = 0).
case(name="roller-racer-driven",
     description="Roller racer: two bodies joined by a vertical hinge, each on a wheel pair that cannot slip "
                 "sideways, driven by a joint torque tau0 sin(nu t) with joint damping. Time-dependent forcing: "
                 "energy is not conserved.",
     model={"coordinates": ["x", "y", "th", "ph"],
            "parameters": {"m1": 3.0, "I1": 0.6, "m2": 1.4, "I2": 0.25, "d1": 0.3, "d2": 0.45,
                           "tau0": 0.8, "nu": 2.2, "c": 0.05},
            "definitions": [
                {"name": "x2d", "expr": "x' + d1*sin(th)*th' + d2*sin(th + ph)*(th' + ph')"},
                {"name": "y2d", "expr": "y' - d1*cos(th)*th' - d2*cos(th + ph)*(th' + ph')"}],
            "kinetic_energy": "m1/2*(x'^2 + y'^2) + I1/2*th'^2 + m2/2*(x2d^2 + y2d^2) + I2/2*(th' + ph')^2",
            "generalized_forces": {"ph": "tau0*sin(nu*t) - c*ph'"},
            "constraints": [{"name": "front", "expr": "-sin(th)*x' + cos(th)*y'"},
                            {"name": "rear", "expr": "-sin(th + ph)*x2d + cos(th + ph)*y2d"}],
            "speeds": [{"name": "v", "expr": "cos(th)*x' + sin(th)*y'"}, {"name": "phd", "expr": "ph'"}]},
     simulation={"initial": {"t": 0.3, "q": {"x": 0, "y": 0, "th": 0.2, "ph": 0.5},
                             "speeds": {"v": 0.4, "phd": -0.3}},
                 "t_end": 5.3, "output": {"samples": 11}},
     energy_conserved=False)


# 5. A wheel (vertical disk of radius r, spin ph, moment C about its axle) whose frame
#    carries a mass centre a distance b ahead of the contact point (x, y), heading th,
#    on a plane inclined at alpha; it rolls without lateral slip and a governor holds the
#    contact point's speed at vv: x'^2 + y'^2 = vv^2, a Chetaev (nonlinear) constraint.
#    Not homogeneous in the velocities: T + V is not conserved.
def _chetaev_qdot(q, u, t, p):
    x, y, th, ph = q
    (w,) = u
    vv = p["vv"]
    return [vv * math.cos(th), vv * math.sin(th), w, vv / p["r"]]


case(name="governed-wheel-chetaev",
     description="A vertical wheel rolling on an inclined plane (no lateral slip, rolling), its frame's mass centre "
                 "b ahead of the contact point, with a governor holding the contact point's speed constant: "
                 "x'^2 + y'^2 = vv^2 (Chetaev). One speed, the heading rate.",
     model={"coordinates": ["x", "y", "th", "ph"],
            "parameters": {"m": 1.6, "I": 0.2, "C": 0.05, "b": 0.3, "r": 0.35, "g": 9.81, "alpha": 0.25,
                           "vv": 1.2},
            "kinetic_energy": "m/2*((x' - b*sin(th)*th')^2 + (y' + b*cos(th)*th')^2) + I/2*th'^2 + C/2*ph'^2",
            "potential_energy": "m*g*sin(alpha)*(x + b*cos(th))",
            "constraints": [{"name": "lateral", "expr": "-sin(th)*x' + cos(th)*y'"},
                            {"name": "rolling", "expr": "cos(th)*x' + sin(th)*y' - r*ph'"},
                            {"name": "speed", "expr": "x'^2 + y'^2 - vv^2"}],
            "speeds": [{"name": "w", "expr": "th'"}]},
     simulation={"initial": {"t": 0, "q": {"x": 0, "y": 0, "th": 0.7, "ph": 0},
                             "qdot": {"x": 1.2 * math.cos(0.7), "y": 1.2 * math.sin(0.7), "th": -0.5,
                                      "ph": 1.2 / 0.35}},
                 "t_end": 4, "output": {"samples": 9}},
     qdot=_chetaev_qdot, energy_conserved=False)


# 6. A knife edge (contact at the mass centre) on an inclined plane, with quasi-velocities
#    that are the blade speed s = cos th x' + sin th y' and the scaled turning rate L th'
#    rotated by a configuration-dependent angle beta(q) = 0.4 x y + 0.3 sin th:
#      u1 = cos(beta) s - sin(beta) L th',   u2 = sin(beta) s + cos(beta) L th'.
case(name="knife-incline-rotated-speeds",
     description="Knife edge on an inclined plane with quasi-velocities rotated by a configuration-dependent angle "
                 "beta = 0.4 x y + 0.3 sin th from (blade speed, L th'): many non-zero Hamel coefficients.",
     model={"coordinates": ["x", "y", "th"],
            "parameters": {"m": 1.2, "I": 0.3, "L": 0.8, "g": 9.81, "alpha": 0.35},
            "definitions": [{"name": "beta", "expr": "0.4*x*y + 0.3*sin(th)"},
                            {"name": "s", "expr": "cos(th)*x' + sin(th)*y'"}],
            "kinetic_energy": "m/2*(x'^2 + y'^2) + I/2*th'^2",
            "potential_energy": "m*g*sin(alpha)*x",
            "constraints": [{"name": "knife", "expr": "sin(th)*x' - cos(th)*y'"}],
            "speeds": [{"name": "u1", "expr": "cos(beta)*s - sin(beta)*L*th'"},
                       {"name": "u2", "expr": "sin(beta)*s + cos(beta)*L*th'"}]},
     simulation={"initial": {"t": 0, "q": {"x": 0.5, "y": -0.4, "th": 0.9}, "speeds": {"u1": 0.7, "u2": 1.3}},
                 "t_end": 3, "output": {"samples": 7}},
     energy_conserved=True)


# 7. Two Chaplygin sleighs (mass centres (x1, y1), (x2, y2), headings th1, th2, knife
#    edges b1, b2 behind them) joined by a linear spring of rest length L0 between their
#    mass centres and a torsion spring between their headings: the potential mixes the
#    coordinates of both bodies.
case(name="coupled-sleighs-spring",
     description="Two Chaplygin sleighs joined by a linear spring between their mass centres and a torsion spring "
                 "between their headings; the potential mixes both bodies' coordinates. Conservative.",
     model={"coordinates": ["x1", "y1", "th1", "x2", "y2", "th2"],
            "parameters": {"m1": 1.0, "I1": 0.12, "b1": 0.2, "m2": 2.5, "I2": 0.4, "b2": 0.35,
                           "k": 7.0, "L0": 0.8, "kt": 0.6},
            "definitions": [{"name": "dist", "expr": "sqrt((x1 - x2)^2 + (y1 - y2)^2)"}],
            "kinetic_energy": "m1/2*(x1'^2 + y1'^2) + I1/2*th1'^2 + m2/2*(x2'^2 + y2'^2) + I2/2*th2'^2",
            "potential_energy": "k/2*(dist - L0)^2 + kt/2*(th1 - th2)^2",
            "constraints": [{"name": "knife1", "expr": "-sin(th1)*x1' + cos(th1)*y1' - b1*th1'"},
                            {"name": "knife2", "expr": "-sin(th2)*x2' + cos(th2)*y2' - b2*th2'"}],
            "speeds": [{"name": "v1", "expr": "cos(th1)*x1' + sin(th1)*y1'"}, {"name": "w1", "expr": "th1'"},
                       {"name": "v2", "expr": "cos(th2)*x2' + sin(th2)*y2'"}, {"name": "w2", "expr": "th2'"}]},
     simulation={"initial": {"t": 0, "q": {"x1": 0, "y1": 0, "th1": 0.1, "x2": -1.1, "y2": 0.3, "th2": -0.4},
                             "speeds": {"v1": 0.5, "w1": 0.9, "v2": -0.2, "w2": 0.1}},
                 "t_end": 4, "output": {"samples": 9}},
     energy_conserved=True)


# 8. A particle on a rotating frame's rail? No: a knife edge dragged by a time-dependent
#    potential: a Chaplygin sleigh (as in 1, horizontal) whose mass centre is pulled by a
#    spring towards a point moving on a circle, V(q, t) = k/2 |r - R(cos Om t, sin Om t)|^2,
#    plus a time-dependent torque on the heading. Time enters V and Q, constraints are
#    scleronomic: energy is not conserved.
case(name="sleigh-moving-anchor",
     description="Chaplygin sleigh pulled by a spring towards an anchor moving on a circle (V depends on t) and "
                 "turned by a torque q0 cos(2 t): time-dependent potential and forcing.",
     model={"coordinates": ["x", "y", "th"],
            "parameters": {"m": 1.5, "I": 0.3, "b": 0.25, "k": 3.0, "R": 0.6, "Om": 1.7, "q0": 0.2},
            "kinetic_energy": "m/2*(x'^2 + y'^2) + I/2*th'^2",
            "potential_energy": "k/2*((x - R*cos(Om*t))^2 + (y - R*sin(Om*t))^2)",
            "generalized_forces": {"th": "q0*cos(2*t)"},
            "constraints": [{"name": "knife", "expr": "-sin(th)*x' + cos(th)*y' - b*th'"}],
            "speeds": [{"name": "v", "expr": "cos(th)*x' + sin(th)*y'"}, {"name": "w", "expr": "th'"}]},
     simulation={"initial": {"t": 0, "q": {"x": 0.2, "y": 0.1, "th": 1.0}, "speeds": {"v": 0.3, "w": 0.2}},
                 "t_end": 5, "output": {"samples": 11}},
     energy_conserved=False)


# 9. The sphere of 3 on a table whose rate changes in time, W(t) = W0 + W1 sin(nu t): the
#    constraints depend on t explicitly (rheonomic). The friction force acts at the
#    contact point, a - a e_z from the centre: its torque about the centre is horizontal,
#    so wz stays constant; neither E nor E - W Lz is conserved now.
case(name="sphere-on-varying-turntable",
     description="The sphere of sphere-on-turntable on a table whose rate varies, W(t) = W0 + W1 sin(nu t): "
                 "explicitly time-dependent rolling constraints; the spin about the vertical is the one integral.",
     model={"coordinates": ["x", "y", "ph", "th", "ps"],
            "parameters": {"m": 1.3, "a": 0.5, "k": 0.3, "W0": 0.9, "W1": 0.6, "nu": 1.3},
            "definitions": [{"name": "I", "expr": "k*m*a^2"}, {"name": "W", "expr": "W0 + W1*sin(nu*t)"}],
            "kinetic_energy": "m/2*(x'^2 + y'^2) + I/2*(ph'^2 + th'^2 + ps'^2 + 2*cos(th)*ph'*ps')",
            "speeds": [{"name": "wx", "expr": "th'*cos(ph) + ps'*sin(th)*sin(ph)"},
                       {"name": "wy", "expr": "th'*sin(ph) - ps'*sin(th)*cos(ph)"},
                       {"name": "wz", "expr": "ph' + ps'*cos(th)"}],
            "constraints": [{"name": "roll_x", "expr": "x' - a*(th'*sin(ph) - ps'*sin(th)*cos(ph)) + W*y"},
                            {"name": "roll_y", "expr": "y' + a*(th'*cos(ph) + ps'*sin(th)*sin(ph)) - W*x"}]},
     simulation={"initial": {"t": 0.2, "q": {"x": 0.7, "y": -0.2, "ph": 0.1, "th": 1.2, "ps": 0.3},
                             "speeds": {"wx": 0.4, "wy": -1.1, "wz": 0.6}},
                 "t_end": 5.2, "output": {"samples": 11},
                 "invariants": [{"name": "spin", "expr": "ph' + ps'*cos(th)"}]},
     energy_conserved=False)


# 10. The knife edge of 6 with speeds rotated by an angle that also turns in time,
#     beta(q, t) = 0.4 x y + 0.3 sin th + 0.5 t: Psi depends on t (Psi_t = 0), so the
#     rheonomic Hamel coefficients gamma^j_r (Greenwood 5.58) are non-zero; the motion is
#     the knife edge's own (scleronomic, conservative), only its description turns.
case(name="knife-incline-turning-speeds",
     description="Knife edge on an inclined plane with quasi-velocities rotated by beta = 0.4 x y + 0.3 sin th + "
                 "0.5 t: time-dependent speeds of a scleronomic, conservative system (gamma_t non-zero).",
     model={"coordinates": ["x", "y", "th"],
            "parameters": {"m": 1.2, "I": 0.3, "L": 0.8, "g": 9.81, "alpha": 0.35},
            "definitions": [{"name": "beta", "expr": "0.4*x*y + 0.3*sin(th) + 0.5*t"},
                            {"name": "s", "expr": "cos(th)*x' + sin(th)*y'"}],
            "kinetic_energy": "m/2*(x'^2 + y'^2) + I/2*th'^2",
            "potential_energy": "m*g*sin(alpha)*x",
            "constraints": [{"name": "knife", "expr": "sin(th)*x' - cos(th)*y'"}],
            "speeds": [{"name": "u1", "expr": "cos(beta)*s - sin(beta)*L*th'"},
                       {"name": "u2", "expr": "sin(beta)*s + cos(beta)*L*th'"}]},
     simulation={"initial": {"t": 0, "q": {"x": 0.5, "y": -0.4, "th": 0.9}, "speeds": {"u1": 0.7, "u2": 1.3}},
                 "t_end": 3, "output": {"samples": 7}},
     energy_conserved=True)


# 11. Snakeboard (Ostrowski): a board (mass m, centre (x, y), heading th, inertia J about
#     its centre) with a rotor psi (inertia J0) at the centre and two wheel axles a distance
#     l ahead and behind, steered by +ph and -ph (each axle's inertia J1 about the vertical).
#     Neither axle slips sideways. The rider drives the rotor with tau0 sin(nu t); a spring k
#     centres the steering. Constraints (lateral velocity of each axle normal to its heading):
#       front at r + l e(th), heading th + ph;  back at r - l e(th), heading th - ph.
case(name="snakeboard-driven",
     description="Snakeboard: board, rotor driven by tau0 sin(nu t), both axles steered by +-ph with a centring "
                 "spring; no lateral slip of either axle. Time-dependent forcing, three speeds.",
     model={"coordinates": ["x", "y", "th", "psi", "ph"],
            "parameters": {"m": 4.0, "J": 0.35, "J0": 0.12, "J1": 0.02, "l": 0.4, "k": 0.8, "tau0": 0.3,
                           "nu": 1.7},
            "kinetic_energy": "m/2*(x'^2 + y'^2) + J/2*th'^2 + J0/2*(th' + psi')^2 + J1/2*(th' + ph')^2"
                              " + J1/2*(th' - ph')^2",
            "potential_energy": "k/2*ph^2",
            "generalized_forces": {"psi": "tau0*sin(nu*t)"},
            "constraints": [
                {"name": "front", "expr": "-sin(th + ph)*(x' - l*sin(th)*th') + cos(th + ph)*(y' + l*cos(th)*th')"},
                {"name": "back", "expr": "-sin(th - ph)*(x' + l*sin(th)*th') + cos(th - ph)*(y' - l*cos(th)*th')"}],
            "speeds": [{"name": "v", "expr": "cos(th)*x' + sin(th)*y'"}, {"name": "psid", "expr": "psi'"},
                       {"name": "phd", "expr": "ph'"}]},
     simulation={"initial": {"t": 0, "q": {"x": 0, "y": 0, "th": 0.3, "psi": 0, "ph": 0.4},
                             "speeds": {"v": 0.5, "psid": 0.2, "phd": -0.3}},
                 "t_end": 4, "output": {"samples": 9}},
     energy_conserved=False)
