"""A simulation result as numpy arrays."""

import numpy as np

from .errors import HamelError


def _array(values):
    """A float64 array of a JSON list; null (a non-finite value) becomes NaN."""
    if not isinstance(values, list):
        return np.asarray([], dtype=np.float64)
    if any(v is None for v in values):
        values = [np.nan if v is None else v for v in values]
    return np.asarray(values, dtype=np.float64)


def _series(group):
    """{name: array} of a trajectory group, in the service's order."""
    if not isinstance(group, dict):
        return {}
    return {name: _array(values) for name, values in group.items()}


class Result:
    """The result of one simulation (or one run of a batch).

    The numbers are the service's own: each array element is the double the service
    wrote (JSON text read with ``float``, which rounds correctly), so they equal the
    server's JSON for the job to the last digit.

    Attributes:
        t: sample times (numpy float64 array).
        q, speeds, qdot, multipliers: ``{name: array}`` per coordinate / independent speed /
            coordinate rate / constraint multiplier (the last for the multipliers
            formulation only), in the model's order.
        checks: the energy, constraint and invariant checks (a dict, as the service sent it).
        warnings: the result's ``warnings`` list (empty when the service sent none).
        events: the located crossings of the request's ``events``, in time order: a list of
            dicts ``{"name", "t", "q", "speeds", "qdot"}`` (empty without events).
        stopped_by: the name of the stop event that ended the trajectory, or None.
        contacts: ``checks["contacts"]``: per contact its friction, ``normal`` and
            ``tangential`` force arrays and ``lift_off`` / ``slip`` ({"t"} or None).
        stats: steps, right-hand side evaluations, compile and integrate times.
        hamel: the Hamel coefficients the request asked for (``"hamel"``), or None.
        model_id, job_id, cached, status: as in the result document.
        raw: the whole result document (a dict).
    In a batch also: index (the run's place in ``runs``), run (the run as given),
    final (its last sample), and error (a HamelError when the run failed, else None).
    A line with only ``final`` (``fields=["final"]``) gives t, q, speeds and qdot of that
    one sample, so ``r.q["x"][-1]`` reads the same either way.
    """

    def __init__(self, doc):
        self.raw = doc
        tr = doc.get("trajectory") or {}
        final = doc.get("final")
        if not tr and isinstance(final, dict):  # a batch line with fields=["final"]: one sample
            tr = {"t": [final.get("t")]}
            for group in ("q", "speeds", "qdot", "multipliers"):
                if isinstance(final.get(group), dict):
                    tr[group] = {name: [v] for name, v in final[group].items()}
        self.t = _array(tr.get("t"))
        self.q = _series(tr.get("q"))
        self.speeds = _series(tr.get("speeds"))
        self.qdot = _series(tr.get("qdot"))
        self.multipliers = _series(tr.get("multipliers"))
        self.checks = doc.get("checks") or {}
        w = doc.get("warnings")
        self.warnings = list(w) if isinstance(w, list) else []
        ev = doc.get("events")
        self.events = list(ev) if isinstance(ev, list) else []
        self.stopped_by = doc.get("stopped_by")
        self.contacts = {}
        for name, c in (self.checks.get("contacts") or {}).items():
            c = dict(c)
            for key in ("normal", "tangential"):
                if isinstance(c.get(key), list):
                    c[key] = _array(c[key])
            self.contacts[name] = c
        self.stats = doc.get("stats") or {}
        self.hamel = doc.get("hamel")
        self.model_id = doc.get("model_id")
        self.job_id = doc.get("job_id")
        self.cached = doc.get("cached")
        self.status = doc.get("status", "done")
        self.index = doc.get("index")
        self.run = doc.get("run")
        self.final = doc.get("final")
        problem = doc.get("problem")
        self.error = HamelError(0, problem) if isinstance(problem, dict) else None

    @property
    def ok(self):
        """True when the run finished (status "done")."""
        return self.status == "done"

    def columns(self):
        """The column names of to_pandas() and of `hamel run --csv`: t, the coordinates,
        the independent speeds, then each coordinate's rate as ``name'`` (and, for the
        multipliers formulation, each constraint's multiplier as ``lambda_<name>``)."""
        return (["t"] + list(self.q) + list(self.speeds) + [n + "'" for n in self.qdot]
                + ["lambda_" + n for n in self.multipliers])

    def to_numpy(self):
        """The samples as one 2-D array, one row per sample, columns as columns()."""
        cols = [self.t] + list(self.q.values()) + list(self.speeds.values()) + list(self.qdot.values()) \
            + list(self.multipliers.values())
        return np.column_stack(cols) if len(self.t) else np.empty((0, len(cols)))

    def to_pandas(self):
        """The samples as a pandas DataFrame with the columns of columns() (pandas is
        optional: imported only here)."""
        import pandas as pd  # noqa: PLC0415 (optional dependency)

        data = {"t": self.t}
        data.update(self.q)
        data.update(self.speeds)
        data.update({n + "'": v for n, v in self.qdot.items()})
        data.update({"lambda_" + n: v for n, v in self.multipliers.items()})
        return pd.DataFrame(data, columns=self.columns())

    def __repr__(self):
        return "<hamel.Result %s job %s: %d samples, t in [%s, %s]>" % (
            self.status,
            self.job_id,
            len(self.t),
            self.t[0] if len(self.t) else "-",
            self.t[-1] if len(self.t) else "-",
        )
