"""hamel.Client: the service's endpoints as Python calls."""

import copy
import json
import os
import urllib.parse
import warnings

import numpy as np

from ._http import Transport
from .errors import HamelError, HamelWarning, warning_text
from .result import Result

DEFAULT_URL = "http://127.0.0.1:8080"
WAIT_S = 30  # ?wait= per request while a job runs
BATCH_FIELDS = ("run", "trajectory", "checks", "stats", "events")


def _load(source):
    """A dict from a dict, a path to a JSON file, or JSON text."""
    if isinstance(source, dict):
        return source
    if isinstance(source, (str, os.PathLike)):
        text = str(source)
        if text.lstrip().startswith("{"):
            return json.loads(text)
        with open(source, "rb") as f:
            return json.load(f)
    raise TypeError("hamel: expected a model, a case or a request (a dict, a path or a model id), got %r"
                    % type(source).__name__)


def _split(model_or_case):
    """({"model": ...} or {"model_id": ...}, the simulation request the argument carries).

    Accepts a model id ("sha256:..."), a model (has "coordinates"), a case file
    ({"model", "simulation"}), a request with "model" or "model_id", or a path to any of
    these."""
    if isinstance(model_or_case, str) and model_or_case.startswith("sha256:"):
        return {"model_id": model_or_case}, {}
    doc = _load(model_or_case)
    if "model" in doc or "model_id" in doc:
        ref = {"model": doc["model"]} if "model" in doc else {"model_id": doc["model_id"]}
        if isinstance(ref.get("model"), str) and ref["model"].startswith("sha256:"):
            ref = {"model_id": ref["model"]}
        if isinstance(doc.get("simulation"), dict):
            base = copy.deepcopy(doc["simulation"])
        else:
            base = {k: copy.deepcopy(v) for k, v in doc.items()
                    if k not in ("model", "model_id", "simulation", "source", "description", "expected",
                                 "reference", "name")}
        return ref, base
    if "coordinates" in doc:
        return {"model": doc}, {}
    raise ValueError("hamel: neither a model (no \"coordinates\") nor a case or request (no \"model\")")


_MERGED = ("initial", "parameters", "integrator", "output")
_OUTPUT_CHOICE = ("samples", "dt", "times")


def merge_request(base, over):
    """`over` merged over `base` the way POST /v1/batches merges a run over its base:
    initial, parameters, integrator and output key by key (a new output.samples|dt|times
    replaces the old choice, a new initial.speeds|qdot the other one), initial.q,
    .speeds and .qdot name by name; every other member replaces. Returns a new dict."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if key in _MERGED and isinstance(value, dict) and isinstance(out.get(key), dict):
            dst = out[key]
            if key == "output" and any(k in value for k in _OUTPUT_CHOICE):
                for k in _OUTPUT_CHOICE:
                    dst.pop(k, None)
            if key == "initial":
                if "speeds" in value:
                    dst.pop("qdot", None)
                if "qdot" in value:
                    dst.pop("speeds", None)
            for k, v in value.items():
                if key == "initial" and k in ("q", "speeds", "qdot") and isinstance(v, dict) \
                        and isinstance(dst.get(k), dict):
                    dst[k].update(copy.deepcopy(v))
                else:
                    dst[k] = copy.deepcopy(v)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _warn(result):
    for w in result.warnings:
        warnings.warn(HamelWarning(warning_text(w)), stacklevel=3)
    return result


class Models:
    """Client.models: the model resources."""

    def __init__(self, client):
        self._c = client

    def get(self, model_id, source=False):
        """GET /v1/models/{id}: the model's summary (a dict); with source=True also the
        model itself under "source" where the server offers it."""
        path = "/v1/models/" + urllib.parse.quote(model_id, safe=":")
        if source:
            path += "?source=1"
        return self._c._t.request("GET", path)[2]

    def create(self, model):
        """POST /v1/models: validates and compiles a model (a dict, a case or a path);
        returns its summary (with "model_id"). An invalid model raises HamelError."""
        ref, _ = _split(model)
        if "model_id" in ref:
            return self.get(ref["model_id"])
        return self._c._t.request("POST", "/v1/models", ref["model"])[2]


class Client:
    """A client of the hamel service at `url` (default $HAMEL_URL, else
    http://127.0.0.1:8080), sending `token` (default $HAMEL_TOKEN) as a bearer token.

    Every call raises HamelError when the service answers with a problem document, with
    .status, .type, .errors (each naming the JSON path). One Client is used by one
    thread at a time.
    """

    def __init__(self, url=None, token=None, timeout=60.0):
        url = url or os.environ.get("HAMEL_URL") or DEFAULT_URL
        if token is None:
            token = os.environ.get("HAMEL_TOKEN") or None
        self._t = Transport(url, token, timeout)
        self.models = Models(self)

    @property
    def url(self):
        return self._t.url

    def close(self):
        """Closes the kept-alive connection (the next call opens another)."""
        self._t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def health(self):
        """GET /v1/health."""
        return self._t.request("GET", "/v1/health")[2]

    # ---- simulations ---------------------------------------------------------------

    def simulate(self, model_or_case, **request):
        """Runs one simulation and waits for it; returns a Result.

        `model_or_case` is a model, a case file ({"model", "simulation"}), a simulation
        request with "model" or "model_id", a model id, or a path to a JSON file of any
        of these. The keyword arguments are members of the request (parameters, initial,
        t_end, output, integrator, formulation, invariants, hamel), merged over the
        case's as a batch merges a run (see merge_request). A failed job raises
        HamelError (its .partial holds the samples reached). An interrupt (Ctrl-C) while
        it waits cancels the job on the server."""
        ref, base = _split(model_or_case)
        body = merge_request(base, request)
        body.pop("model", None)
        body.pop("model_id", None)
        body.update(ref)
        # submitted without waiting, so that the job's id is known before the wait: an
        # interrupt (Ctrl-C, a notebook's stop) cancels it instead of leaving it running
        status, _, doc = self._t.request("POST", "/v1/simulations", body)
        job_id = doc.get("job_id") if isinstance(doc, dict) else None
        try:
            while status == 202 or (isinstance(doc, dict) and doc.get("status") in ("queued", "running")):
                status, doc = self._job_doc(doc["job_id"], WAIT_S)
        except KeyboardInterrupt:
            self._cancel("/v1/jobs/", job_id)
            raise
        return _warn(self._result_of(doc))

    def _cancel(self, prefix, ident):
        """Best effort: DELETE prefix+ident after an interrupt (the kept-alive connection
        may be mid-answer: a fresh one). Errors are dropped; the interrupt goes on."""
        if not ident:
            return
        self._t.close()
        try:
            self._t.request("DELETE", prefix + urllib.parse.quote(str(ident), safe=""), timeout=5)
        except (HamelError, OSError, ValueError):
            pass

    def job(self, job_id, wait=0):
        """GET /v1/jobs/{id}[?wait=]: a done job's Result; a failed or cancelled job
        raises HamelError; a job still queued or running returns its status dict."""
        _, doc = self._job_doc(job_id, wait)
        if doc.get("status") in ("queued", "running"):
            return doc
        return _warn(self._result_of(doc))

    def _job_doc(self, job_id, wait):
        path = "/v1/jobs/" + urllib.parse.quote(job_id, safe="")
        if wait:
            path += "?wait=%d" % wait
        status, _, doc = self._t.request("GET", path, timeout=self._t.timeout + wait)
        return status, doc

    @staticmethod
    def _result_of(doc):
        if not isinstance(doc, dict):
            raise HamelError(0, None, "hamel: the answer is not a result")
        if doc.get("status") in ("failed", "cancelled"):
            problem = doc.get("problem") if isinstance(doc.get("problem"), dict) else {}
            problem = dict(problem, job_id=doc.get("job_id"), job_status=doc.get("status"))
            raise HamelError(problem.get("status", 0), problem)
        return Result(doc)

    def batch(self, model, runs, base=None, fields=BATCH_FIELDS):
        """POST /v1/batches streamed as NDJSON: yields one Result per run as its line
        arrives (completion order; each carries .index, its place in `runs`). A failed
        run is yielded too, with .status "failed" and .error a HamelError. `model` is as
        simulate's first argument (a case's simulation becomes the base); `base` is
        merged over it; `fields` are the line's fields (default run, trajectory,
        checks, stats, events; ["final"] for just the last sample). An invalid run refuses the
        whole batch: HamelError naming runs[i]... before the first result. Leaving the loop
        early (break), an interrupt (Ctrl-C) or a stream that breaks off (HamelError, status
        0: the connection lost) cancels the runs not finished yet. The lines are waited for
        however long the runs take (the client's timeout bounds the answer's start)."""
        ref, case_base = _split(model)
        body = dict(ref)
        merged = merge_request(case_base, base or {})
        merged.pop("model", None)
        merged.pop("model_id", None)
        if merged:
            body["base"] = merged
        body["runs"] = list(runs)
        if fields is not None:
            body["fields"] = list(fields)
        head = {}
        finished = False
        try:
            for line in self._t.stream_lines("POST", "/v1/batches", body, on_headers=head.update):
                if isinstance(line, dict) and line.get("done") is True:
                    finished = True
                if not isinstance(line, dict) or line.get("done") is True:
                    continue
                yield _warn(Result(line))
            finished = True
        except (KeyboardInterrupt, GeneratorExit, HamelError):
            # interrupted, the loop left early (break), or the stream cut off (a read
            # timeout while long runs go on, the connection lost): what is left is
            # cancelled, so that no run goes on with no one to read it
            if not finished:
                self._cancel("/v1/batches/", head.get("x-batch-id"))
            raise

    # ---- synchronous computations ------------------------------------------------------

    def _post(self, path, model, request):
        ref, base = _split(model)
        body = {k: v for k, v in request.items() if v is not None}
        body.update(ref)
        return self._t.request("POST", path, body)[2]

    def hamel(self, model, qdot=None, **request):
        """POST /v1/hamel: the Hamel coefficients at `q` (and `t`, `parameters`) or at
        `points`; returns the response dict (order, points[].gamma, .gamma_t). Given a
        case or a simulation request without points, `q` is merged over its initial q
        (name by name), and its t and parameters are the defaults.

        With a constraint nonlinear in q' the coefficients depend on q': `qdot` (a dict,
        name: value) is sent with the configuration, merged over the case's initial qdot
        (name by name; without either, the case's initial speeds are sent unless `speeds`
        is given). Where the speeds, or a qdot off the constraints there (the initial q'
        at another heading), leave several q', the service refuses with a 422 naming them:
        the HamelError's ``.problem["roots"]``; pass one of them as `qdot` to choose it.
        Models without such constraints ignore `qdot`."""
        _, base = _split(model)
        init = base.get("initial") if isinstance(base.get("initial"), dict) else {}
        if qdot is not None:
            if not isinstance(qdot, dict):
                raise TypeError("hamel: qdot must be a dict (coordinate name: value), got %r"
                                % type(qdot).__name__)
            request["qdot"] = qdot
        if "points" not in request and isinstance(init.get("q"), dict):
            request = dict(request, q=dict(init["q"], **(request.get("q") or {})))
            if "t" in init and "t" not in request:
                request["t"] = init["t"]
            if isinstance(base.get("parameters"), dict) and "parameters" not in request:
                request["parameters"] = base["parameters"]
            if "speeds" not in request:
                if isinstance(init.get("qdot"), dict):
                    request["qdot"] = dict(init["qdot"], **(request.get("qdot") or {}))
                elif "qdot" not in request and isinstance(init.get("speeds"), dict):
                    request["speeds"] = init["speeds"]
        return self._post("/v1/hamel", model, request)

    def evaluate(self, model, **request):
        """POST /v1/evaluate: q', u', q'' and the multipliers at `states`; returns the
        response dict."""
        return self._post("/v1/evaluate", model, request)

    def linearize(self, model, **request):
        """POST /v1/linearize about one operating point (t, q, speeds|qdot) or `points`;
        returns the response dict with each point's A and B (and its `selected` block's)
        as numpy arrays and its eigenvalues as a numpy complex array."""
        doc = self._post("/v1/linearize", model, request)
        for p in doc.get("points", []) if isinstance(doc, dict) else []:
            for holder in (p, p.get("selected")):
                if not isinstance(holder, dict):
                    continue
                for k in ("A", "B"):
                    if isinstance(holder.get(k), list):
                        holder[k] = np.asarray(holder[k], dtype=np.float64)
                ev = holder.get("eigenvalues")
                if isinstance(ev, list):
                    holder["eigenvalues"] = np.asarray([complex(e.get("re", 0.0), e.get("im", 0.0))
                                                        for e in ev], dtype=np.complex128)
        return doc

    def code(self, model_or_case, lang="c", **request):
        """Generated source code of the model (issue 18): one standalone file as a str.

        With a simulation request — the case's, merged with the keyword arguments as
        simulate merges them (parameters, initial, t_end, output, integrator, ...) —
        POST /v1/code bakes it in: the C file compiled with -DHAMEL_MAIN integrates it
        and prints CSV; the Python module defines rhs, jacobian, STATE, PARAMETERS and
        initial_state(). Without one (a bare model or id, no keywords) it is
        GET /v1/models/{id}/code: no baked state, no main. `lang` is "c" or "python";
        another is a HamelError naming `lang`."""
        ref, base = _split(model_or_case)
        body = merge_request(base, request)
        body.pop("model", None)
        body.pop("model_id", None)
        accept = "text/x-python, application/problem+json" if lang == "python" else \
            "text/x-c, text/x-python, application/problem+json"
        if not body:
            model_id = ref.get("model_id") or self.models.create(ref["model"])["model_id"]
            path = "/v1/models/%s/code?lang=%s" % (urllib.parse.quote(model_id, safe=":"),
                                                   urllib.parse.quote(str(lang), safe=""))
            raw = self._t.request_raw("GET", path, accept=accept)[2]
        else:
            body.update(ref)
            body["lang"] = lang
            raw = self._t.request_raw("POST", "/v1/code", body, accept=accept)[2]
        return raw.decode("utf-8")

    def steady(self, model, state=None, unknowns=(), continuation=None, **request):
        """POST /v1/steady: the steady motion found from the guess `state` ({t, q,
        speeds}; default the case's initial state) over `unknowns` (coordinates, speeds,
        parameters), and with continuation={"vary", "to", "steps"} the branch. Returns
        the response dict: "steady" and each of "points" with "eigenvalues" as a numpy
        complex array (states that do not enter left out), "values" and "stable";
        "stability_changes" [{"value", "kind", "direction"}]. Other keywords
        (parameters) are members of the request."""
        _, base = _split(model)
        if state is None:
            init = base.get("initial") if isinstance(base.get("initial"), dict) else {}
            state = {k: init[k] for k in ("t", "q", "speeds") if k in init}
            if "parameters" not in request and isinstance(base.get("parameters"), dict):
                request["parameters"] = base["parameters"]
        request = dict(request, state=state, unknowns=list(unknowns))
        if continuation is not None:
            request["continuation"] = continuation
        doc = self._post("/v1/steady", model, request)
        holders = [doc.get("steady")] + list(doc.get("points") or []) if isinstance(doc, dict) else []
        for p in holders:
            if isinstance(p, dict) and isinstance(p.get("eigenvalues"), list):
                p["eigenvalues"] = np.asarray([complex(e.get("re", 0.0), e.get("im", 0.0))
                                               for e in p["eigenvalues"]], dtype=np.complex128)
        return doc

    def equations(self, model, form=None):
        """GET /v1/models/{id}/equations[?form=]: the derived equations (form one of
        hamel, appell, kane, maggi, voronec). A model that is not an id is posted
        first."""
        ref, _ = _split(model)
        model_id = ref.get("model_id") or self.models.create(ref["model"])["model_id"]
        path = "/v1/models/" + urllib.parse.quote(model_id, safe=":") + "/equations"
        if form:
            path += "?form=" + urllib.parse.quote(form)
        return self._t.request("GET", path)[2]

    # ---- the quarantine --------------------------------------------------------------

    def quarantine(self):
        """GET /v1/quarantine: the models quarantined after their engine work crashed, the
        latest to expire first, as a list of dicts (model_id, and where the record has
        them model_name, signal, operation, detail, quarantined_at, quarantined_until).
        The service lists at most 1000; when there are more, a HamelWarning says so."""
        doc = self._t.request("GET", "/v1/quarantine")[2]
        if not isinstance(doc, dict) or not isinstance(doc.get("quarantined"), list):
            raise HamelError(0, None, "hamel: the answer is not a quarantine listing")
        if doc.get("truncated"):
            warnings.warn(HamelWarning("more models are quarantined than the %d listed"
                                       % len(doc["quarantined"])), stacklevel=2)
        return doc["quarantined"]

    def clear_quarantine(self, model_id):
        """DELETE /v1/quarantine/{id}: clears a model's quarantine (it is compiled and run
        again on its next request). A model that is not quarantined raises HamelError
        (404)."""
        self._t.request("DELETE", "/v1/quarantine/" + urllib.parse.quote(model_id, safe=":"))
