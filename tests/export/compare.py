"""tests/export/compare.py — checks for the generated code (tests/export/run.sh).

  compare.py traj RESULT.json OUT.csv TOL      every coordinate and speed of hamel run's
                                               result against the CSV at every sample time
  compare.py jac LINEARIZE.json JAC.txt TOL    A of hamel linearize against a Jacobian
                                               printed as rows of numbers
  compare.py pyjac MODULE.py LINEARIZE.json TOL
                                               the module's jacobian() and rhs() at the
                                               linearization point against A and f
Prints one line; exits 1 on a mismatch. Relative error against max(1, |reference|).
"""
import importlib.util
import json
import sys


def close(a, b, tol):
    return abs(a - b) <= tol * max(1.0, abs(b))


def traj(result_path, csv_path, tol):
    res = json.load(open(result_path))
    tr = res["trajectory"]
    lines = [l.split(",") for l in open(csv_path).read().strip().splitlines()]
    head, rows = lines[0], [[float(x) for x in l] for l in lines[1:]]
    names = list(tr["q"]) + list(tr["speeds"])
    if head != ["t"] + names:
        return "columns %s, expected %s" % (head, ["t"] + names)
    if len(rows) != len(tr["t"]):
        return "%d rows, expected %d" % (len(rows), len(tr["t"]))
    worst = 0.0
    for j, row in enumerate(rows):
        # the last row of a run stopped by an event is at the event's time, located by
        # each program to the integration's accuracy (scipy on its dense output)
        ttol = tol if res.get("stopped_by") and j == len(rows) - 1 else 1e-15
        if not close(row[0], tr["t"][j], ttol):
            return "t[%d] = %r, expected %r" % (j, row[0], tr["t"][j])
        for c, name in enumerate(names):
            ref = (tr["q"][name] if c < len(tr["q"]) else tr["speeds"][name])[j]
            err = abs(row[1 + c] - ref) / max(1.0, abs(ref))
            worst = max(worst, err)
            if err > tol:
                return "%s at t = %r: %r, hamel run %r" % (name, row[0], row[1 + c], ref)
    print("ok: %d samples x %d series, worst relative difference %.3g" % (len(rows), len(names), worst))
    return None


def lin_A(path):
    doc = json.load(open(path))
    pts = doc["points"] if "points" in doc else [doc]
    return pts[0]["A"], pts[0].get("f")


def lin_point(path):
    """The operating point hamel linearize used (position constraints solved)."""
    doc = json.load(open(path))
    return doc["points"][0] if "points" in doc else doc


def state(lin_path, names_json):
    """Prints t and y (in the order of the trajectory's names) of the operating point."""
    pt = lin_point(lin_path)
    tr = json.load(open(names_json))["trajectory"]
    print(pt.get("t", 0.0), *[pt["q"][k] for k in tr["q"]], *[pt["speeds"][k] for k in tr["speeds"]])


def jac(lin_path, jac_path, tol):
    A, _ = lin_A(lin_path)
    J = [[float(x) for x in l.split()] for l in open(jac_path).read().strip().splitlines()]
    return cmp_matrix(A, J, tol)


def cmp_matrix(A, J, tol):
    if len(J) != len(A) or any(len(r) != len(A) for r in J):
        return "Jacobian is %dx%d, A is %dx%d" % (len(J), len(J[0]) if J else 0, len(A), len(A))
    worst = 0.0
    for i in range(len(A)):
        for c in range(len(A)):
            err = abs(J[i][c] - A[i][c]) / max(1.0, abs(A[i][c]))
            worst = max(worst, err)
            if err > tol:
                return "J[%d][%d] = %r, A = %r" % (i, c, J[i][c], A[i][c])
    print("ok: %dx%d Jacobian, worst relative difference %.3g" % (len(A), len(A), worst))
    return None


def pyjac(mod_path, lin_path, tol):
    spec = importlib.util.spec_from_file_location("generated", mod_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    pt = lin_point(lin_path)
    y = [pt["q"][s] for s in mod.STATE[:mod._NQ]] + [pt["speeds"][s] for s in mod.STATE[mod._NQ:]]
    J = mod.jacobian(pt.get("t", 0.0), y, mod.PARAMETERS)
    A, f = lin_A(lin_path)
    return cmp_matrix(A, [list(r) for r in J], tol)


if __name__ == "__main__":
    if sys.argv[1] == "state":
        state(sys.argv[2], sys.argv[3])
        sys.exit(0)
    what, a, b, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    why = {"traj": traj, "jac": jac, "pyjac": pyjac}[what](a, b, tol)
    if why:
        print("FAIL: " + why)
        sys.exit(1)
