#!/usr/bin/env python3
"""gen_models.py — the scaling model families of `make bench` (issue 8, item 6).

Writes case-style files {"description", "model", "simulation"} (API.md §1 and §3;
`build/hamel run FILE` runs them) into OUTDIR (default: this directory):

  disk-chain-N.json    N thin disks (Greenwood 5.3) rolling without slipping on a
                       horizontal plane; the contact points of neighbouring disks are
                       linked by linear springs of stiffness k and rest offset L along x
                       (zero rest length otherwise), V_spring = k/2 ((x_{i+1} - x_i - L)^2
                       + (y_{i+1} - y_i)^2). Per disk 5 coordinates (phi, theta, psi, x,
                       y), 2 no-slip constraints, Greenwood's speeds (wd, thd, Omega):
                       n = 5N, m = 2N, k = 3N. The springs couple only the potential, so
                       the mass matrix is block-diagonal (3x3 blocks). N = 1, 2, 5, 8, 12
                       (n = 5..60; the engine takes at most 200 coordinates); the issue's
                       "n = 25..40" are N = 5..8.
  car-trailers-N.json  a car (rear axle centre (x, y), heading th0, steering angle
                       delta; knife-edge rear and front wheels) pulling N trailers, each
                       hitched at the axle centre of the body ahead (zero hitch offset)
                       and rolling on a knife-edge axle (no lateral slip). n = 4 + N,
                       m = 2 + N, speeds: the forward speed v and the steering rate.
                       The axle velocities are chained definitions, as a user writes them.
                       Steering spring and damper; energy conserved without the damper.
  hostile-product-400.json   T = 1/2 x'^2 (sin(x)+1)(sin(x)+2)...(sin(x)+400) + 1/2 y'^2
  hostile-chain-K.json       d_1 = x, d_i = d_{i-1} + x*d_{i-1} (K = 25, 30), T uses d_K
  hostile-params-100000.json 100,000 parameters (not written unless asked: 1.6 MB)

Only the standard library is used. Usage:
  gen_models.py [--out DIR] [--params]     all families (--params: also the 100,000)
  gen_models.py --out DIR NAME...          only the named files (e.g. disk-chain-40)
"""
import argparse
import json
import os
import sys

DISK_SIZES = (1, 2, 5, 8, 12)  # n = 5N coordinates: 5, 10, 25, 40, 60 (max 64)
CAR_SIZES = tuple(range(1, 11))
CHAIN_SIZES = (25, 30)


def case(name, description, model, initial, t_end=1.0):
    model = dict(model)
    model["name"] = name
    return {
        "description": description,
        "model": model,
        "simulation": {
            "initial": initial,
            "t_end": t_end,
            "output": {"samples": 11},
            "integrator": {"method": "rk8pd", "rtol": 1e-10, "atol": 1e-12, "max_steps": 1000000},
            "formulation": "hamel",
            "hamel": "none",
        },
    }


def disk_chain(n):
    coords, defs, t_terms, v_terms, cons, speeds = [], [], [], [], [], []
    q0, u0 = {}, {}
    for i in range(1, n + 1):
        ph, th, ps, x, y = (f"phi{i}", f"theta{i}", f"psi{i}", f"x{i}", f"y{i}")
        coords += [ph, th, ps, x, y]
        # velocity of the centre (contact point + r times the unit vector to the centre)
        defs += [
            {"name": f"vx{i}", "expr": f"{x}' - r*{ph}'*cos({ph})*cos({th}) + r*{th}'*sin({ph})*sin({th})"},
            {"name": f"vy{i}", "expr": f"{y}' - r*{ph}'*sin({ph})*cos({th}) - r*{th}'*cos({ph})*sin({th})"},
            {"name": f"vz{i}", "expr": f"r*{th}'*cos({th})"},
        ]
        t_terms.append(
            f"1/2*m*(vx{i}^2 + vy{i}^2 + vz{i}^2) + 1/8*m*r^2*({ph}'^2*sin({th})^2 + {th}'^2)"
            f" + 1/4*m*r^2*({ph}'*cos({th}) + {ps}')^2")
        v_terms.append(f"m*g*r*sin({th})")
        if i < n:
            v_terms.append(f"1/2*k*((x{i + 1} - {x} - L)^2 + (y{i + 1} - {y})^2)")
        cons += [{"name": f"slip_x{i}", "expr": f"r*{ps}'*cos({ph}) + {x}'"},
                 {"name": f"slip_y{i}", "expr": f"r*{ps}'*sin({ph}) + {y}'"}]
        speeds += [{"name": f"wd{i}", "expr": f"{ph}'*sin({th})"},
                   {"name": f"thd{i}", "expr": f"{th}'"},
                   {"name": f"Omega{i}", "expr": f"{ph}'*cos({th}) + {ps}'"}]
        q0.update({ph: 0.1 * i, th: 1.2 - 0.01 * (i % 7), ps: 0.0, x: 1.5 * (i - 1), y: 0.02 * (i % 3)})
        u0.update({f"wd{i}": 0.3 + 0.01 * (i % 5), f"thd{i}": 0.0, f"Omega{i}": 4.0 - 0.05 * (i % 4)})
    model = {
        "coordinates": coords,
        "parameters": {"m": 1.0, "r": 0.5, "g": 9.81, "k": 2.0, "L": 1.5},
        "definitions": defs,
        "kinetic_energy": " + ".join(t_terms),
        "potential_energy": " + ".join(v_terms),
        "constraints": cons,
        "speeds": speeds,
    }
    desc = (f"A chain of {n} thin disks (Greenwood 5.3: mass m, radius r) rolling without slipping "
            "on a horizontal plane, the contact points of neighbouring disks linked by linear springs "
            "(stiffness k, rest offset L along x). Per disk: Euler angles phi, theta, psi and contact "
            "point x, y; constraints slip_x, slip_y; speeds wd = phi' sin(theta), thd = theta', "
            f"Omega = phi' cos(theta) + psi'. n = {5 * n}, m = {2 * n}, k = {3 * n}.")
    return case(f"disk-chain-{n}", desc, model, {"t": 0, "q": q0, "speeds": u0})


def car_trailers(n):
    coords = ["x", "y", "th0", "delta"] + [f"th{i}" for i in range(1, n + 1)]
    defs = [
        # front axle centre, at distance b ahead of the rear axle centre (x, y)
        {"name": "vfx", "expr": "x' - b*sin(th0)*th0'"},
        {"name": "vfy", "expr": "y' + b*cos(th0)*th0'"},
        # car's centre of mass, at distance a ahead of the rear axle centre
        {"name": "vcx", "expr": "x' - a*sin(th0)*th0'"},
        {"name": "vcy", "expr": "y' + a*cos(th0)*th0'"},
        {"name": "vx0", "expr": "x'"},
        {"name": "vy0", "expr": "y'"},
    ]
    t_terms = ["1/2*m0*(vcx^2 + vcy^2) + 1/2*I0*th0'^2 + 1/2*Js*(th0' + delta')^2"]
    cons = [
        {"name": "rear", "expr": "-sin(th0)*x' + cos(th0)*y'"},
        {"name": "front", "expr": "-sin(th0 + delta)*vfx + cos(th0 + delta)*vfy"},
    ]
    for i in range(1, n + 1):
        defs += [
            # trailer i's axle centre: hitch (axle centre of body i-1) - L (cos th_i, sin th_i)
            {"name": f"vx{i}", "expr": f"vx{i - 1} + L*sin(th{i})*th{i}'"},
            {"name": f"vy{i}", "expr": f"vy{i - 1} - L*cos(th{i})*th{i}'"},
            # its centre of mass, half way along the drawbar
            {"name": f"wx{i}", "expr": f"vx{i - 1} + 1/2*L*sin(th{i})*th{i}'"},
            {"name": f"wy{i}", "expr": f"vy{i - 1} - 1/2*L*cos(th{i})*th{i}'"},
        ]
        t_terms.append(f"1/2*mt*(wx{i}^2 + wy{i}^2) + 1/2*It*th{i}'^2")
        cons.append({"name": f"axle{i}", "expr": f"-sin(th{i})*vx{i} + cos(th{i})*vy{i}"})
    model = {
        "coordinates": coords,
        "parameters": {"m0": 1.0, "I0": 0.5, "a": 0.6, "b": 1.2, "Js": 0.05, "mt": 0.8, "It": 0.3,
                       "L": 1.0, "ks": 2.0, "cs": 0.1},
        "definitions": defs,
        "kinetic_energy": " + ".join(t_terms),
        "potential_energy": "1/2*ks*delta^2",
        "generalized_forces": {"delta": "-cs*delta'"},
        "constraints": cons,
        "speeds": [{"name": "v", "expr": "cos(th0)*x' + sin(th0)*y'"},
                   {"name": "ws", "expr": "delta'"}],
    }
    q0 = {"x": 0.0, "y": 0.0, "th0": 0.0, "delta": 0.2}
    q0.update({f"th{i}": 0.05 * i * (-1) ** i for i in range(1, n + 1)})
    desc = (f"A car pulling {n} trailer(s) on a plane: rear axle centre (x, y), heading th0, "
            "steering angle delta (steering spring ks, damper cs); knife-edge rear and front wheels "
            "(constraints rear, front); trailer i hitched at the axle centre of the body ahead "
            "(drawbar L, zero hitch offset), heading th_i, rolling on a knife-edge axle (constraint "
            "axle_i). Speeds: forward speed v and steering rate ws. "
            f"n = {4 + n}, m = {2 + n}.")
    return case(f"car-trailers-{n}", desc, model, {"t": 0, "q": q0, "speeds": {"v": 1.0, "ws": 0.0}})


def hostile_product(k=400):
    factors = "*".join(f"(sin(x)+{i})" for i in range(1, k + 1))
    model = {
        "coordinates": ["x", "y"],
        "parameters": {"m": 1.0},
        "kinetic_energy": f"1/2*m*x'^2*{factors} + 1/2*m*y'^2",
    }
    desc = (f"Hostile: a kinetic energy with the product of {k} factors (sin(x)+i), i = 1..{k} "
            "(expanded into monomials it has 400! size terms). The service must answer within its "
            "compile deadline (a 422 compile-limit or a compiled model), never hang.")
    return case(f"hostile-product-{k}", desc, model,
                {"t": 0, "q": {"x": 0.1, "y": 0.0}, "qdot": {"x": 0.0, "y": 1.0}})


def hostile_chain(k):
    defs = [{"name": "d1", "expr": "x"}]
    defs += [{"name": f"d{i}", "expr": f"d{i - 1} + x*d{i - 1}"} for i in range(2, k + 1)]
    model = {
        "coordinates": ["x", "y"],
        "parameters": {"m": 1.0},
        "definitions": defs,
        "kinetic_energy": f"1/2*m*(1 + d{k}^2)*x'^2 + 1/2*m*y'^2",
    }
    desc = (f"Hostile: {k} chained definitions d_i = d_(i-1) + x*d_(i-1) (d_{k} = x (1+x)^{k - 1}: "
            "each definition doubles the tree if shared subexpressions are not kept). The service "
            "must answer within its compile deadline.")
    return case(f"hostile-chain-{k}", desc, model,
                {"t": 0, "q": {"x": 0.1, "y": 0.0}, "qdot": {"x": 0.0, "y": 1.0}})


def hostile_params(k=100000):
    params = {f"p{i}": (i % 100) / 100 for i in range(k)}
    params["m"] = 1.0
    model = {
        "coordinates": ["x", "y"],
        "parameters": params,
        "kinetic_energy": "1/2*m*(x'^2 + y'^2) + 1/2*p1*x'^2",
        "potential_energy": "p2*y",
    }
    desc = (f"Hostile: {k} parameters (plus m), of which two are used. The service must answer "
            "within its compile deadline (a 422 naming the parameter count, or a compiled model) "
            "in time linear in the count.")
    return case(f"hostile-params-{k}", desc, model,
                {"t": 0, "q": {"x": 0.1, "y": 0.0}, "qdot": {"x": 0.0, "y": 1.0}})


def families(with_params):
    for n in DISK_SIZES:
        yield f"disk-chain-{n}", lambda n=n: disk_chain(n)
    for n in CAR_SIZES:
        yield f"car-trailers-{n}", lambda n=n: car_trailers(n)
    yield "hostile-product-400", hostile_product
    for k in CHAIN_SIZES:
        yield f"hostile-chain-{k}", lambda k=k: hostile_chain(k)
    if with_params:
        yield "hostile-params-100000", hostile_params


def by_name(name):
    """The generator of one named file, e.g. disk-chain-7 (any size), or None."""
    for prefix, fn in (("disk-chain-", disk_chain), ("car-trailers-", car_trailers),
                       ("hostile-product-", hostile_product), ("hostile-chain-", hostile_chain),
                       ("hostile-params-", hostile_params)):
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            return lambda: fn(int(name[len(prefix):]))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--params", action="store_true", help="also write hostile-params-100000")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.names:
        todo = []
        for name in a.names:
            fn = by_name(name)
            if fn is None:
                sys.exit(f"gen_models: unknown model {name!r}")
            todo.append((name, fn))
    else:
        todo = list(families(a.params))
    for name, fn in todo:
        path = os.path.join(a.out, name + ".json")
        with open(path, "w") as f:
            data = fn()
            # the 100,000-parameter file compact (1.6 MB, under the 4 MiB body limit)
            json.dump(data, f, indent=None if len(data["model"]["parameters"]) > 1000 else 1)
            f.write("\n")


if __name__ == "__main__":
    main()
