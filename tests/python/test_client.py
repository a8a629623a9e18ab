"""The Python client (clients/python) against a real hamel-server.

Run by tests/python/run.sh, which starts the server, makes the virtual environment and
pip-installs the package; it passes HAMEL_TEST_URL, HAMEL_TEST_CLI (build/hamel) and
HAMEL_TEST_CASES (../shared/cases).
"""

import copy
import json
import math
import os
import signal
import subprocess
import threading
import time
import urllib.request
import warnings

import numpy as np
import pytest

import hamel

URL = os.environ["HAMEL_TEST_URL"]
CLI = os.environ["HAMEL_TEST_CLI"]
CASES = os.environ["HAMEL_TEST_CASES"]
DISK = os.path.join(CASES, "greenwood-5.3-rolling-disk.json")


@pytest.fixture(scope="module")
def client():
    with hamel.Client(URL) as c:
        yield c


@pytest.fixture(scope="module")
def case():
    with open(DISK) as f:
        return json.load(f)


def server_json(path):
    """The server's own answer to GET path, numbers kept as their text."""
    with urllib.request.urlopen(URL + path) as r:
        return json.loads(r.read(), parse_float=str, parse_int=str)


def exact(arr, texts, what):
    """Each element of arr is the double of the server's text, to the last digit."""
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float64, what
    assert len(arr) == len(texts), what
    for i, (a, s) in enumerate(zip(arr, texts)):
        assert a == float(s), "%s[%d]: %r != %s" % (what, i, a, s)


def test_simulate_equals_the_servers_json_to_the_last_digit(client, case):
    r = client.simulate(case)
    assert r.ok and r.model_id.startswith("sha256:") and r.job_id
    doc = server_json("/v1/jobs/" + r.job_id)
    tr = doc["trajectory"]
    exact(r.t, tr["t"], "t")
    for group in ("q", "speeds", "qdot"):
        series = getattr(r, group)
        assert list(series) == list(tr[group]), group
        for name, texts in tr[group].items():
            exact(series[name], texts, "%s.%s" % (group, name))
    assert r.checks["energy"]["conserved_expected"] is True
    assert r.checks["constraints"]["max_abs_residual"] < 1e-9
    assert len(r.t) == case["simulation"]["output"]["samples"]


def test_simulate_equals_hamel_run_within_1e_12(client, case, tmp_path):
    r = client.simulate(DISK)  # a path works as well as the dict
    out = subprocess.run([CLI, "run", DISK], check=True, capture_output=True).stdout
    local = json.loads(out)["trajectory"]
    np.testing.assert_allclose(r.t, local["t"], rtol=0, atol=1e-12)
    for group in ("q", "speeds", "qdot"):
        for name, values in local[group].items():
            np.testing.assert_allclose(getattr(r, group)[name], values, rtol=1e-12, atol=1e-12,
                                       err_msg="%s.%s" % (group, name))


def test_request_keywords_merge_over_the_case(client, case):
    r = client.simulate(case, t_end=1, output={"samples": 5}, initial={"speeds": {"Omega": 3}})
    assert list(r.t) == [0, 0.25, 0.5, 0.75, 1]
    assert r.speeds["Omega"][0] == 3
    assert r.q["theta"][0] == case["simulation"]["initial"]["q"]["theta"]  # kept from the case


def test_bad_model_raises_hamel_error_naming_the_path(client, case):
    bad = copy.deepcopy(case)
    bad["model"]["potential_energy"] = "m*g*r*sin(theta) + theta'"
    with pytest.raises(hamel.HamelError) as info:
        client.simulate(bad)
    e = info.value
    assert e.status == 422
    assert e.type.endswith("/invalid-model"), e.type
    paths = [x.get("path") for x in e.errors]
    assert "model.potential_energy" in paths, paths
    assert "model.potential_energy" in str(e)


def test_bad_request_names_the_field(client, case):
    with pytest.raises(hamel.HamelError) as info:
        client.simulate(case, initial={"speeds": {"spin": 1}})
    assert info.value.status == 422
    assert any("spin" in (x.get("path") or "") for x in info.value.errors), info.value.errors


def test_to_pandas_has_the_cli_csv_columns(client, case):
    pd = pytest.importorskip("pandas")
    r = client.simulate(case)
    df = r.to_pandas()
    assert isinstance(df, pd.DataFrame)
    csv = subprocess.run([CLI, "run", "--csv", DISK], capture_output=True, text=True)
    if csv.returncode == 0:  # the local --csv of the CLI
        assert list(df.columns) == csv.stdout.splitlines()[0].split(",")
    assert list(df.columns)[:6] == ["t", "phi", "theta", "psi", "x", "y"]
    assert "phi'" in df.columns and df.shape == (len(r.t), 1 + 5 + 3 + 5)
    assert (df["theta"].to_numpy() == r.q["theta"]).all()


def test_batch_yields_results_as_lines_arrive(client, case):
    runs = [{"initial": {"speeds": {"Omega": w}}} for w in (2, 3, 4, 5)]
    runs.append({"integrator": {"max_steps": 3}})
    seen = {}
    for r in client.batch(case, runs):
        seen[r.index] = r
    assert sorted(seen) == [0, 1, 2, 3, 4]
    for i, w in enumerate((2, 3, 4, 5)):
        assert seen[i].ok and seen[i].speeds["Omega"][0] == w and len(seen[i].t) == 11
    failed = seen[4]
    assert failed.status == "failed" and isinstance(failed.error, hamel.HamelError)
    assert failed.error.code == "step-limit"
    # the same run as a single simulation: the same numbers
    single = client.simulate(case, initial={"speeds": {"Omega": 3}})
    assert (single.q["x"] == seen[1].q["x"]).all()


def test_events_come_through_single_and_batch(client, case):
    ev = [{"name": "low", "expr": "theta - 1", "direction": "falling", "action": "stop"}]
    r = client.simulate(case, events=ev)
    assert r.stopped_by == "low" and [e["name"] for e in r.events] == ["low"]
    assert r.t[-1] == r.events[0]["t"] and abs(r.q["theta"][-1] - 1) < 1e-12
    runs = [{"initial": {"speeds": {"Omega": w}}, "events": ev} for w in (3, 4)]
    for b in client.batch(case, runs):
        assert b.ok and b.stopped_by == "low" and b.events[0]["name"] == "low"
    plain = client.simulate(case)
    assert plain.events == [] and plain.stopped_by is None and plain.contacts == {}


def test_batch_with_an_invalid_run_raises(client, case):
    with pytest.raises(hamel.HamelError) as info:
        list(client.batch(case, [{"initial": {"q": {"thet": 1}}}]))
    assert any("runs[0]" in (x.get("path") or "") for x in info.value.errors), info.value.errors


def test_hamel_evaluate_linearize_equations_models(client, case):
    g = client.hamel(case, q={"theta": 0.7})
    assert g["order"] == ["wd", "thd", "Omega", "slip_x", "slip_y"]
    assert g["points"][0]["q"]["theta"] == 0.7 and g["points"][0]["gamma"]
    ev = client.evaluate(case["model"], states=[case["simulation"]["initial"]])
    assert "speeds_dot" in ev["states"][0]
    lin = client.linearize(case["model"], q={"phi": 0, "theta": math.pi / 2, "psi": 0, "x": 0, "y": 0},
                           speeds={"wd": 0, "thd": 0, "Omega": 4})
    p = lin["points"][0]
    assert p["A"].shape == (8, 8) and p["eigenvalues"].dtype == np.complex128
    assert abs(p["A"][6][1] - 15.696) < 1e-12  # (4/5) g/r at upright
    eq = client.equations(case)
    assert eq["model_id"].startswith("sha256:") and "mass_matrix" in eq
    kane = client.equations(eq["model_id"], form="kane")
    assert kane != eq
    summary = client.models.get(eq["model_id"])
    assert summary["n"] == 5 and summary["dof"] == 3


CHETAEV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "adversarial", "cases",
                       "governed-wheel-chetaev.json")


def test_hamel_of_a_chetaev_constraint_takes_qdot_to_choose_a_root(client):
    # the case's initial q' (at th = 0.7) at th = 3.9 leaves two roots: a 422 naming them
    with pytest.raises(hamel.HamelError) as info:
        client.hamel(CHETAEV, q={"th": 3.9})
    assert info.value.status == 422 and info.value.code == "invalid-initial-state", info.value
    roots = info.value.problem["roots"]
    assert len(roots) == 2 and info.value.errors[0]["path"] == "qdot", info.value.problem
    forward = [r for r in roots if r["ph"] > 0][0]
    g = client.hamel(CHETAEV, q={"th": 3.9}, qdot=forward)
    p = g["points"][0]
    assert p["qdot"]["ph"] > 0
    lateral = [c["value"] for c in p["gamma"] if (c["j"], c["r"], c["l"]) == ("lateral", "w", "speed")]
    assert lateral and lateral[0] > 0.41, p["gamma"]
    # the other root: the backward motion, another q' (and the bare model takes qdot too)
    backward = [r for r in roots if r["ph"] < 0][0]
    with open(CHETAEV) as f:
        doc = json.load(f)
    q = dict(doc["simulation"]["initial"]["q"], th=3.9)
    b = client.hamel(doc["model"], q=q, qdot=backward)["points"][0]
    assert b["qdot"]["ph"] < 0 and b["gamma"] != p["gamma"]
    # a name that is not a coordinate is named; a qdot that is not a dict is a TypeError
    with pytest.raises(hamel.HamelError) as info:
        client.hamel(doc["model"], q=q, qdot=dict(backward, thet=1.0))
    assert any("qdot.thet" in (e.get("path") or "") for e in info.value.errors), info.value.errors
    with pytest.raises(TypeError):
        client.hamel(doc["model"], q=q, qdot=[1, 2, 3, 4])


def test_unknown_model_id_is_404(client):
    with pytest.raises(hamel.HamelError) as info:
        client.models.get("sha256:" + "0" * 64)
    assert info.value.status == 404


def test_result_warnings_become_python_warnings():
    doc = {"status": "done", "trajectory": {"t": [0, 1], "q": {"x": [0, 1]}}, "warnings": [
        {"code": "step-size", "message": "tiny steps near t = 0.5"}, "plain text"]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = hamel.client._warn(hamel.Result(doc))
    assert [str(w.message) for w in caught] == ["step-size: tiny steps near t = 0.5", "plain text"]
    assert all(issubclass(w.category, hamel.HamelWarning) for w in caught)
    assert r.warnings == doc["warnings"] and list(r.q["x"]) == [0.0, 1.0]


def test_a_real_results_warnings_are_python_warnings(client, case):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = client.simulate(case, t_end=200, integrator={"method": "rk2", "rtol": 1e-3, "atol": 1e-3})
    assert r.warnings and r.warnings[0]["code"] == "energy-drift"
    assert any(issubclass(w.category, hamel.HamelWarning) and str(w.message).startswith("energy-drift: ")
               for w in caught), [str(w.message) for w in caught]


def test_a_server_with_a_token(case):
    url, token = os.environ["HAMEL_TEST_TOKEN_URL"], os.environ["HAMEL_TEST_TOKEN"]
    with pytest.raises(hamel.HamelError) as info:
        hamel.Client(url).simulate(case)
    assert info.value.status == 401
    r = hamel.Client(url, token=token).simulate(case)
    assert r.ok and len(r.t) == 11


def test_quarantine_lists_a_crashed_model_and_clear_quarantine_clears_it(client, case):
    bad = dict(copy.deepcopy(case["model"]), name="__fault_segv__")  # the server's HAMEL_TEST_FAULTS hook
    with pytest.raises(hamel.HamelError) as info:
        client.models.create(bad)
    assert info.value.status == 500 and info.value.code == "engine-fault", info.value.problem
    mid = info.value.problem["model_id"]
    listed = [q for q in client.quarantine() if q["model_id"] == mid]
    assert len(listed) == 1, client.quarantine()
    assert listed[0]["model_name"] == "__fault_segv__" and listed[0]["signal"] == "SIGSEGV"
    assert listed[0]["quarantined_at"] < listed[0]["quarantined_until"]
    client.clear_quarantine(mid)
    assert all(q["model_id"] != mid for q in client.quarantine())
    with pytest.raises(hamel.HamelError) as info:
        client.clear_quarantine(mid)
    assert info.value.status == 404


def test_no_server_is_a_hamel_error():
    with pytest.raises(hamel.HamelError) as info:
        hamel.Client("http://127.0.0.1:9", timeout=2).health()
    assert info.value.status == 0


def test_example_notebook_is_valid_and_runs(monkeypatch, capsys):
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "clients", "python", "examples", "rolling_disk.ipynb")
    with open(path) as f:
        nb = json.load(f)
    assert nb["nbformat"] == 4 and isinstance(nb["cells"], list) and nb["cells"]
    for c in nb["cells"]:
        assert c["cell_type"] in ("markdown", "code") and isinstance(c["source"], list)
        if c["cell_type"] == "code":
            assert c["outputs"] == [] and "execution_count" in c
    monkeypatch.setenv("HAMEL_URL", URL)
    monkeypatch.setenv("HAMEL_CASES", CASES)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(os.path.dirname(path))
    ns = {}
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            exec(compile("".join(c["source"]), path, "exec"), ns)
    out = capsys.readouterr().out
    assert "Omega =  6.0: tilt oscillates" in out
    assert "422 invalid-model" in out and "potential_energy" in out
    assert ns["df"].shape == (1001, 14)


def test_the_client_gets_gzip_from_the_server_and_decodes_it(client, case, monkeypatch):
    """The server compresses (Accept-Encoding: gzip) and the client decodes: a result and
    a streamed batch (one gzip member, decoded line by line) equal the identity answers."""
    from hamel import _http
    codings, streams = [], []
    real_decode, real_decompressobj = _http._decode, _http.zlib.decompressobj

    def decode(raw, headers):
        codings.append(headers.get("content-encoding"))
        return real_decode(raw, headers)

    def decompressobj(*args, **kw):
        if args == (31,):  # the client's stream decoder (gzip.decompress makes its own)
            streams.append(args)
        return real_decompressobj(*args, **kw)

    monkeypatch.setattr(_http, "_decode", decode)
    monkeypatch.setattr(_http.zlib, "decompressobj", decompressobj)
    sim = copy.deepcopy(case["simulation"])
    sim["output"] = {"samples": 1001}
    r = client.simulate(case["model"], **sim)
    assert "gzip" in codings, codings
    doc = server_json("/v1/jobs/" + r.job_id)  # urllib asks for no coding: identity
    exact(r.t, doc["trajectory"]["t"], "t")
    for name, texts in doc["trajectory"]["q"].items():
        exact(r.q[name], texts, "q." + name)
    runs = [{"initial": {"speeds": {"Omega": 1 + 0.1 * k}}} for k in range(4)]
    got = sorted(x.index for x in client.batch(case, runs, base={"t_end": 0.5}))
    assert got == [0, 1, 2, 3]
    assert streams, "the NDJSON stream came gzip-coded"


def test_code_bakes_the_request_and_the_python_rhs_is_the_servers(client, case):
    src = client.code(case, lang="python", parameters={"m": 2.0})
    assert isinstance(src, str) and "def rhs(t, y, p" in src and "def jacobian(" in src
    ns = {}
    exec(compile(src, "generated.py", "exec"), ns)  # numpy only at import
    assert ns["PARAMETERS"] == {"g": 9.81, "m": 2.0, "r": 0.5}
    y0 = np.asarray(ns["initial_state"](), dtype=float)
    init = case["simulation"]["initial"]
    assert ns["STATE"] == list(init["q"]) + list(init["speeds"])
    assert list(y0) == list(init["q"].values()) + list(init["speeds"].values())
    # the generated right-hand side at the initial state is the server's evaluate
    ev = client.evaluate(case, states=[init], parameters={"m": 2.0})["states"][0]
    want = [ev["qdot"][n] for n in init["q"]] + [ev["speeds_dot"][n] for n in init["speeds"]]
    np.testing.assert_allclose(ns["rhs"](0.0, y0, ns["PARAMETERS"]), want, rtol=1e-12, atol=1e-12)
    c = client.code(case, t_end=1.0)
    assert "int main(" in c and "hamel_rhs(" in c
    assert '{"g", "m", "r", 0}' in c and "{9.81, 1.0, 0.5, 0.0}" in c


def test_code_of_a_bare_model_has_no_main_and_a_bad_lang_is_named(client, case):
    c = client.code(case["model"])  # GET /v1/models/{id}/code: no baked state
    assert "hamel_rhs(" in c and "HAMEL_MAIN" not in c
    with pytest.raises(hamel.HamelError) as info:
        client.code(case, lang="fortran")
    assert info.value.status == 422 and any(e.get("path") == "lang" for e in info.value.errors)


def test_steady_circles_of_the_rolling_disk_and_the_upright_disk_standing_up(client, case):
    g, r, th = 9.81, 0.5, 1.2
    state = {"t": 0, "q": {"phi": 0, "theta": th, "psi": 0, "x": 0, "y": 0},
             "speeds": {"wd": 0.3, "thd": 0, "Omega": 4}}
    res = client.steady(case, state=state, unknowns=["wd"],
                        continuation={"vary": "Omega", "to": 8, "steps": 8})
    assert len(res["points"]) >= 9 and res["stability_changes"] == []
    for p in res["points"]:
        w, wd = p["values"]["Omega"], p["values"]["wd"]
        a, b, c = 0.25 / math.tan(th), -1.5 * w, -g / r * math.cos(th)
        assert abs(wd - (-b - math.sqrt(b * b - 4 * a * c)) / (2 * a)) < 1e-12
        assert isinstance(p["eigenvalues"], np.ndarray) and p["eigenvalues"].dtype == np.complex128
    assert res["points"][-1]["values"]["Omega"] == 8
    upright = {"t": 0, "q": dict(state["q"], theta=math.pi / 2), "speeds": {"wd": 0, "thd": 0, "Omega": 1}}
    res = client.steady(case, state=upright, unknowns=["thd"],
                        continuation={"vary": "Omega", "to": 4, "steps": 6})
    (change,) = res["stability_changes"]
    assert change["kind"] == "real"
    assert abs(change["value"] - math.sqrt(g / (3 * r))) < 1e-10 * math.sqrt(g / (3 * r))
    with pytest.raises(hamel.HamelError) as info:
        client.steady(case, state=state, unknowns=["wd", "Omega"])
    assert info.value.status == 422 and any(e.get("path") == "unknowns" for e in info.value.errors)


# A model that is not among the shared cases: the Chaplygin sleigh (knife edge at a
# distance a behind the mass center), as an outside user would write it.
SLEIGH = {
    "model": {
        "name": "sleigh-ünï",
        "coordinates": ["x", "y", "th"],
        "parameters": {"m": 1.0, "I": 0.2, "a": 0.3},
        "kinetic_energy": "1/2*m*((x' - a*th'*sin(th))^2 + (y' + a*th'*cos(th))^2) + 1/2*I*th'^2",
        "constraints": [{"name": "knife", "expr": "-sin(th)*x' + cos(th)*y'"}],
        "speeds": [{"name": "v", "expr": "cos(th)*x' + sin(th)*y'"}, {"name": "w", "expr": "th'"}],
    },
    "simulation": {"initial": {"q": {"x": 0, "y": 0, "th": 0}, "speeds": {"v": 1, "w": 0.5}},
                   "t_end": 3, "output": {"samples": 7}},
}


def test_numpy_numbers_and_arrays_are_sent_as_json_numbers(client):
    """A researcher's values are numpy's: np.arange, np.float32, arrays as lists."""
    r = client.simulate(SLEIGH, t_end=np.float32(2.0), output={"samples": np.int64(5)},
                        initial={"speeds": {"v": np.float64(1.5), "w": np.int32(0)}})
    assert r.ok and r.t[-1] == 2.0 and len(r.t) == 5 and r.speeds["v"][0] == 1.5
    runs = [{"initial": {"speeds": {"v": v}}} for v in np.arange(1, 4)]
    got = {b.index: b for b in client.batch(SLEIGH, runs, fields=["final"])}
    assert sorted(got) == [0, 1, 2] and all(b.ok for b in got.values())
    ev = client.evaluate(SLEIGH, states=[{"q": dict(zip(("x", "y", "th"), np.zeros(3))),
                                          "speeds": {"v": np.array(1.0), "w": np.float16(0.5)}}])
    assert ev["states"][0]["speeds"] == {"v": 1.0, "w": 0.5}


@pytest.mark.parametrize("bad, path", [
    ({"t_end": float("inf")}, "t_end"),
    ({"parameters": {"m": float("nan")}}, "parameters.m"),
    ({"initial": {"speeds": {"w": np.float64("nan")}}}, "initial.speeds.w"),
])
def test_nan_or_infinity_in_a_request_is_refused_naming_its_path(client, bad, path):
    with pytest.raises(ValueError) as info:
        client.simulate(SLEIGH, **bad)
    assert path in str(info.value) and "NaN or Infinity" in str(info.value), str(info.value)
    with pytest.raises(ValueError) as info:
        list(client.batch(SLEIGH, [{}, bad]))
    assert "runs[1]." + path in str(info.value), str(info.value)
    assert client.simulate(SLEIGH).ok  # the client still works after the refusal


def test_a_model_not_among_the_cases_through_every_call(client):
    r = client.simulate(SLEIGH)
    assert r.ok and list(r.q) == ["x", "y", "th"] and list(r.speeds) == ["v", "w"]
    assert r.to_numpy().shape == (7, 1 + 3 + 2 + 3)
    assert client.models.get(r.model_id)["name"] == "sleigh-ünï"
    g = client.hamel(SLEIGH, q={"th": 0.7})
    assert g["order"] == ["v", "w", "knife"] and g["points"][0]["q"]["th"] == 0.7
    with pytest.raises(hamel.HamelError) as info:
        client.hamel(SLEIGH, q={"thet": 0.7})
    assert [e["path"] for e in info.value.errors] == ["q.thet"]
    lin = client.linearize(SLEIGH, q={"x": 0, "y": 0, "th": 0}, speeds={"v": 1, "w": 0})
    assert lin["points"][0]["A"].shape == (5, 5)
    for form in ("hamel", "appell", "kane", "maggi"):
        assert client.equations(SLEIGH, form=form)["form"] == form
    with pytest.raises(hamel.HamelError) as info:  # the sleigh's speeds are not q_i'
        client.equations(SLEIGH, form="voronec")
    assert info.value.status == 422 and info.value.errors[0]["path"] == "form"


def metric(name):
    """A counter or gauge of the main server's /metrics (0 when absent)."""
    with urllib.request.urlopen(URL + "/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
    return 0.0


def until(predicate, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def long_case(case, t_end=400000.0):
    """The rolling disk for far longer than a test waits (minutes of integration)."""
    c = copy.deepcopy(case)
    c["simulation"]["t_end"] = t_end
    c["simulation"]["integrator"]["max_steps"] = 100000000
    return c


def test_ctrl_c_while_simulate_waits_cancels_the_job(client, case):
    """A notebook's stop or Ctrl-C must not leave the job running on the server."""
    cancelled = 'hamel_jobs_total{outcome="cancelled"}'
    before = metric(cancelled)
    # Ctrl-C as a terminal or a notebook delivers it: a process started in the background
    # of a script (a CI runner's `cmd &`) inherits SIGINT ignored, and Python keeps that
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            client.simulate(long_case(case))
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert until(lambda: metric(cancelled) == before + 1), (before, metric(cancelled))
    assert until(lambda: metric("hamel_jobs_running") == 0)
    assert client.simulate(case).ok  # the client works on after the interrupt


def test_leaving_a_batch_loop_early_cancels_the_runs_left(client, case):
    cancelled = 'hamel_batches_total{outcome="cancelled"}'
    before = metric(cancelled)
    runs = [{"t_end": 1}] + [{"initial": {"speeds": {"Omega": w}}} for w in (3.5, 4.5, 5.5)]
    for r in client.batch(long_case(case), runs, fields=["final"]):
        assert r.index == 0 and r.ok
        break
    assert until(lambda: metric(cancelled) == before + 1), (before, metric(cancelled))
    assert until(lambda: metric("hamel_jobs_running") == 0)


def test_to_pandas_of_a_multipliers_run_has_the_cli_csv_columns(client, tmp_path):
    """The constraint forces of a multipliers run are columns lambda_<name> of
    to_pandas() and to_numpy(), as in `hamel run --csv` and the web page's CSV."""
    ex = os.path.join(os.path.dirname(CLI), "..", "clients", "web", "examples", "constant-speed-particle.json")
    r = client.simulate(ex)
    assert list(r.multipliers) == ["speed"]
    out = subprocess.run([CLI, "run", ex, "--csv"], capture_output=True, text=True, check=True).stdout
    header = out.splitlines()[0].split(",")
    assert r.columns() == header == ["t", "x", "y", "x'", "y'", "lambda_speed"]
    assert list(r.to_pandas().columns) == header
    assert r.to_numpy().shape == (len(r.t), len(header))
    assert (r.to_numpy()[:, -1] == r.multipliers["speed"]).all()


def test_a_batch_stream_waits_for_runs_longer_than_the_timeout(case):
    """The client's timeout bounds each wait for the server's answer, not a run: a batch
    stream whose runs take longer than it between lines goes on (it broke off with
    "timed out" after `timeout` seconds, and left the runs going on the server)."""
    impatient = hamel.Client(URL, timeout=0.5)
    runs = [{"initial": {"speeds": {"Omega": w}}} for w in (3.5, 4.5)]
    t0 = time.monotonic()
    t_end = 30000.0 + (time.time_ns() % 1000) / 1000.0  # runs not in the result cache
    got = sorted((r.index, r.ok) for r in impatient.batch(long_case(case, t_end=t_end), runs, fields=["final"]))
    assert got == [(0, True), (1, True)], got
    assert time.monotonic() - t0 > 0.5  # the lines came later than the timeout


def test_a_server_that_dies_mid_stream_is_a_hamel_error(case, tmp_path):
    server = os.path.join(os.path.dirname(CLI), "hamel-server")
    env = dict(os.environ, HAMEL_PORT="0", HAMEL_ADDR="127.0.0.1", HAMEL_DATA=str(tmp_path))
    proc = subprocess.Popen([server], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        assert "listening on " in line, line
        c = hamel.Client(line.split("listening on ")[1].strip())
        runs = [{"t_end": 1}] + [{"initial": {"speeds": {"Omega": w}}} for w in (3.5, 4.5, 5.5)]
        with pytest.raises(hamel.HamelError) as info:
            for r in c.batch(long_case(case), runs, fields=["final"]):
                assert r.index == 0
                proc.kill()
        assert info.value.status == 0 and "broke off" in str(info.value), str(info.value)
    finally:
        proc.kill()
        proc.wait()


def test_the_url_as_users_write_it():
    assert hamel.Client(URL + "/v1").health()["status"] == "ok"  # the root, /v1 dropped
    assert hamel.Client(URL + "/v1/").health()["status"] == "ok"
    for bad in (URL + "/?x=1", URL + "#top", "ftp://127.0.0.1:9", "127.0.0.1:9"):
        with pytest.raises(ValueError) as info:
            hamel.Client(bad)
        assert "http://host[:port]" in str(info.value), str(info.value)
    with pytest.raises(ValueError) as info:
        hamel.Client(URL, token="line\nbreak")
    assert "token" in str(info.value)


def test_the_token_from_hamel_token_and_the_argument(case, monkeypatch):
    url, token = os.environ["HAMEL_TEST_TOKEN_URL"], os.environ["HAMEL_TEST_TOKEN"]
    monkeypatch.setenv("HAMEL_TOKEN", token)
    assert hamel.Client(url).health()["status"] == "ok"  # from the environment
    monkeypatch.setenv("HAMEL_TOKEN", "wrong")
    with pytest.raises(hamel.HamelError) as info:
        hamel.Client(url).health()
    assert info.value.status == 401 and "does not hold" in info.value.detail, info.value.detail
    assert hamel.Client(url, token=token).health()["status"] == "ok"  # the argument wins
    monkeypatch.delenv("HAMEL_TOKEN")
    with pytest.raises(hamel.HamelError) as info:
        hamel.Client(url).simulate(SLEIGH)
    assert info.value.status == 401 and "Authorization: Bearer" in info.value.detail, info.value.detail
    monkeypatch.setenv("HAMEL_URL", url)
    monkeypatch.setenv("HAMEL_TOKEN", token)
    r = hamel.Client().simulate(SLEIGH)  # both from the environment
    assert r.ok and len(r.t) == 7


def test_a_final_only_batch_line_reads_like_a_trajectory_of_one_sample(client, case):
    full = {r.index: r for r in client.batch(case, [{"initial": {"speeds": {"Omega": w}}} for w in (2, 3)])}
    last = {r.index: r for r in client.batch(case, [{"initial": {"speeds": {"Omega": w}}} for w in (2, 3)],
                                              fields=["final"])}
    for i in (0, 1):
        assert len(last[i].t) == 1 and last[i].t[-1] == full[i].t[-1]
        for group in ("q", "speeds", "qdot"):
            for name, values in getattr(full[i], group).items():
                assert getattr(last[i], group)[name][-1] == values[-1], (group, name)
        assert last[i].to_pandas().shape == (1, full[i].to_pandas().shape[1])


def test_a_server_that_is_not_the_service_is_said_to_be_so(tmp_path):
    """An error page that is not a problem document (another server, a proxy) says so."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def _page(self):
            body = b"<html><body>Bad Gateway</body></html>"
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _page

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        c = hamel.Client("http://127.0.0.1:%d" % srv.server_address[1])
        for call in (c.health, lambda: c.simulate(SLEIGH), lambda: list(c.batch(SLEIGH, [{}]))):
            with pytest.raises(hamel.HamelError) as info:
                call()
            assert info.value.status == 502, info.value.status
            assert "not a problem document" in str(info.value) and "text/html" in str(info.value), str(info.value)
            assert "<html>" not in str(info.value)
    finally:
        srv.shutdown()
        srv.server_close()


def test_request_values_are_made_json_as_json_dumps_would_and_numpy_too():
    from hamel._http import plain_json

    assert plain_json({1: np.int64(2), None: (np.float32(1.5), np.arange(2))}) == {"1": 2, "null": [1.5, [0, 1]]}
    with pytest.raises(ValueError) as info:
        plain_json({"runs": [{"t_end": 1}, {"output": {"times": np.array([0.5, np.inf])}}]})
    assert "runs[1].output.times[1]" in str(info.value)
    with pytest.raises(ValueError) as info:
        plain_json({"a": object()})
    assert str(info.value).startswith("hamel: a: object is not JSON")
