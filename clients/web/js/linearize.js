// linearize.js — the Linearization card: an operating point (JSON editor), a value of
// it to sweep (a speed or a coordinate), POST /v1/linearize at every swept point, and
// the eigenvalues of A drawn against the swept value — real parts (growth rates) and
// imaginary parts (frequencies) — with the range where no mode grows.

import { lineChart, fmt, PALETTE } from "./chart.js";
import { Editor } from "./editor.js";
import { parseWithPositions } from "./jsonpos.js";
import { ApiError } from "./api.js";
import { $, h } from "./dom.js";
import { compileExpr } from "./expr.js";

// An eigenvalue this small against the largest one is one of the zeros that ignorable
// coordinates (a heading, a position, a wheel angle) contribute: not drawn.
const ZERO_REL = 1e-6;
// A real part at most this (times the largest |lambda|) counts as not growing.
const STABLE_REL = 1e-9;

/** setupLinearize({getApi, getModel, getParams}) wires the card; returns {load(example, file)}.
 *  getParams(): the page's parameter overrides (the what-if values), sent with every request. */
export function setupLinearize({ getApi, getModel, getParams = () => ({}) }) {
  const editor = new Editor($("lin-point-editor"), { rows: 7, label: "operating point (JSON)" });
  let presets = {};
  let axis = { label: "", factor: 1 };
  let presetAxis = null; // the preset's swept value: {key, label, factor}
  /** The x axis for the value swept now: the preset's (its label and factor, such as
   *  v = -r theta') while that value is chosen, else the value itself, unscaled. */
  function axisNow() {
    const key = $("lin-sweep").value;
    if (presetAxis && presetAxis.key === key) return presetAxis;
    const [group, ...rest] = key.split(".");
    const name = rest.join(".");
    return { key, label: group === "qdot" ? name + "'" : name, factor: 1 };
  }
  /** The axis with its factor a number: a preset may give it as an expression of the
   *  parameters ("-r": v = -r theta'), taken at the values the page sends. */
  function axisAt(model, params) {
    const a = axisNow();
    if (typeof a.factor === "number") return a;
    const env = {};
    for (const [k, v] of Object.entries((model && model.parameters) || {})) env[k] = typeof v === "number" ? v : v && v.value;
    Object.assign(env, params);
    let f = NaN;
    try { f = compileExpr(String(a.factor))(env); } catch { f = NaN; }
    return { ...a, factor: Number.isFinite(f) ? f : 1 };
  }
  /** The request's parameter overrides, if any. */
  const withParams = (req, params) => (Object.keys(params).length ? { ...req, parameters: params } : req);
  let select = null; // state names whose block of A is analysed instead of all of A
  const ready = fetch("linearize-presets.json").then((r) => (r.ok ? r.json() : {})).then((p) => { presets = p; }).catch(() => {});

  function sweepOptions(point, model) {
    const sel = $("lin-sweep");
    const names = [
      ...Object.keys(point.speeds || {}).map((n) => ["speeds", n]),
      ...Object.keys(point.qdot || {}).map((n) => ["qdot", n]),
      ...Object.keys(point.q || {}).map((n) => ["q", n]),
      ...Object.keys((model && typeof model.parameters === "object" && model.parameters) || {}).map((n) => ["parameters", n]),
    ];
    const label = { speeds: (n) => `speed ${n}`, qdot: (n) => `velocity ${n}'`, q: (n) => `coordinate ${n}`, parameters: (n) => `parameter ${n}` };
    sel.replaceChildren(...names.map(([g, n]) => h("option", { value: `${g}.${n}` }, label[g](n))));
  }

  async function load(example, file) {
    await ready;
    const preset = example.linearize
      ? { point: example.linearize, sweep: example.linearize_sweep, select: example.linearize_select, unknowns: example.linearize_unknowns }
      : presets[file];
    $("lin-unknowns").value = ((preset && preset.unknowns) || []).join(", ");
    select = (preset && preset.select) || null;
    const init = (example.simulation && example.simulation.initial) || {};
    // an initial state given by its velocities (qdot) is linearized as it is given
    const point = preset ? preset.point
      : init.qdot && !init.speeds ? { t: init.t || 0, q: init.q || {}, qdot: init.qdot } : { t: init.t || 0, q: init.q || {}, speeds: init.speeds || {} };
    const p = {};
    for (const k of ["t", "q", "speeds", "qdot"]) if (point[k] !== undefined) p[k] = point[k];
    editor.value = JSON.stringify(p, null, 2);
    sweepOptions(p, example.model);
    const sw = (preset && preset.sweep) || {};
    const first = Object.keys(p.speeds || p.qdot || {})[0];
    const name = sw.name || first || Object.keys(p.q || {})[0];
    const group = p.speeds && name in p.speeds ? "speeds" : p.qdot && name in p.qdot ? "qdot" : "q";
    $("lin-sweep").value = `${group}.${name}`;
    const v0 = Number((p[group] || {})[name]) || 0;
    $("lin-from").value = sw.from ?? 0;
    $("lin-to").value = sw.to ?? (v0 ? 2 * v0 : 1);
    $("lin-n").value = sw.points ?? 41;
    $("lin-steady").checked = !!preset; // an initial state is seldom steady
    presetAxis = { key: `${group}.${name}`, label: sw.label || (group === "qdot" ? name + "'" : name), factor: sw.factor ?? 1 };
    axis = presetAxis;
    $("lin-hint").textContent = preset
      ? (sw.note || "A steady motion of this system; press Linearize to sweep it.")
      : "This example has no preset steady motion: the initial state is linearized as it is (not checked for steadiness).";
    $("lin-problem").hidden = true;
    for (const id of ["plot-eig-re", "plot-eig-im", "plot-branch"]) { $(id).hidden = true; $(id).replaceChildren(); }
    delete $("linearize").dataset.changes;
    $("lin-summary").textContent = "";
  }

  function problem(title, errors) {
    const box = $("lin-problem");
    box.hidden = false;
    box.replaceChildren(
      h("div", { class: "problem-title" }, title),
      h("ul", { class: "errors" }, errors.map((e) => h("li", { "data-testid": "lin-error" },
        h("span", { class: "reason" }, e.reason || e.message || ""), e.path ? h("code", { class: "path" }, e.path) : null))));
  }

  /** Shows the problem document of an ApiError (its errors, else its detail). */
  function apiProblem(e) {
    return problem(e.problem.title || "Error", e.problem.errors && e.problem.errors.length ? e.problem.errors : [{ reason: e.problem.detail || e.message }]);
  }

  /** Runs work() with the card busy; an ApiError's problem is shown and null returned. */
  async function linearizing(work) {
    $("lin-run").disabled = true;
    $("lin-summary").textContent = "linearizing…";
    try {
      return await work();
    } catch (e) {
      $("lin-summary").textContent = "";
      if (e instanceof ApiError) {
        apiProblem(e);
        return null;
      }
      throw e;
    } finally {
      $("lin-run").disabled = false;
    }
  }

  async function run() {
    $("lin-problem").hidden = true;
    const model = getModel();
    if (model.error) return problem("The model is not valid JSON", [model.error]);
    const params = getParams();
    axis = axisAt(model.value, params);
    let point;
    try { point = parseWithPositions(editor.value).value; } catch (e) { return problem("The operating point is not valid JSON", [{ reason: e.message }]); }
    const [group, ...rest] = $("lin-sweep").value.split(".");
    const name = rest.join(".");
    const from = Number($("lin-from").value), to = Number($("lin-to").value), n = Math.round(Number($("lin-n").value));
    if (!Number.isFinite(from) || !Number.isFinite(to) || !(n >= 2 && n <= 2000)) {
      return problem("Check the sweep", [{ reason: "from and to must be numbers and points an integer from 2 to 2000" }]);
    }
    const values = Array.from({ length: n }, (_, i) => from + ((to - from) * i) / (n - 1));
    if (group === "parameters") return runOverParameter(model, point, params, name, values);
    const points = values.map((v) => {
      const p = JSON.parse(JSON.stringify(point));
      p[group] = { ...(p[group] || {}), [name]: v };
      return p;
    });
    const req = withParams({ model: model.value, points, steady: $("lin-steady").checked }, params);
    if (select) req.select = select;
    const res = await linearizing(async () => (await getApi().call("POST", "/v1/linearize", req)).body);
    if (res) draw(res, values.map((v) => v * axis.factor));
  }

  /** Linearize with a parameter swept: /v1/linearize takes one set of parameters, so one
   *  request per value (8 at a time), the point the same in each. */
  async function runOverParameter(model, point, params, name, values) {
    const out = await linearizing(async () => {
      const got = new Array(values.length);
      for (let i = 0; i < values.length; i += 8) {
        await Promise.all(values.slice(i, i + 8).map(async (v, k) => {
          const req = { model: model.value, points: [point], steady: $("lin-steady").checked, parameters: { ...params, [name]: v } };
          if (select) req.select = select;
          got[i + k] = (await getApi().call("POST", "/v1/linearize", req)).body.points[0];
        }));
      }
      return got;
    });
    if (out) draw({ points: out }, values.map((v) => v * axis.factor));
  }

  /** `vlines`: markers across both plots (the branch's stability changes). */
  function draw(res, xs, vlines = []) {
    // with "select", the eigenvalues of that block of A (e.g. a bicycle's roll and steer)
    const eigs = res.points.map((p) => (p.selected ? p.selected.eigenvalues : p.eigenvalues));
    const N = Math.max(...eigs.map((list) => list.length)); // a branch may leave out more states at some points
    let big = 0;
    for (const list of eigs) for (const e of list) big = Math.max(big, Math.hypot(e.re, e.im));
    const zero = ZERO_REL * Math.max(1, big);
    // eigenvalue k of each point (sorted by real part, as the API gives them)
    const re = [], im = [];
    let drawn = 0, maxIm = 0;
    for (let k = 0; k < N; k++) {
      const r = [], i = [];
      let any = false;
      eigs.forEach((list) => {
        const e = list[k];
        const show = e && Math.hypot(e.re, e.im) > zero;
        // a real part within rounding of zero (the same bound as the verdict below) is
        // drawn at zero: scattered at 1e-15 it reads as growth and decay that are not there
        r.push(show ? (Math.abs(e.re) <= STABLE_REL * Math.max(1, big) ? 0 : e.re) : NaN);
        i.push(show ? e.im : NaN);
        if (show) { any = true; drawn++; maxIm = Math.max(maxIm, Math.abs(e.im)); }
      });
      if (!any) continue;
      re.push({ name: `λ${k + 1}`, x: xs, y: r, dots: true, noLegend: true, color: PALETTE[0] });
      im.push({ name: `λ${k + 1}`, x: xs, y: i, dots: true, noLegend: true, color: PALETTE[1] });
    }
    // where no mode grows: among the eigenvalues drawn (the zeros left out above are
    // rounding-sized, about 1e-9 either way, and must not decide it)
    const stable = eigs.map((list) => Math.max(-Infinity, ...list.filter((e) => Math.hypot(e.re, e.im) > zero).map((e) => e.re)) <= STABLE_REL * Math.max(1, big));
    const runs = [];
    stable.forEach((s, j) => {
      if (!s) return;
      if (runs.length && runs[runs.length - 1][1] === j - 1) runs[runs.length - 1][1] = j;
      else runs.push([j, j]);
    });
    const card = $("linearize");
    card.dataset.points = String(res.points.length);
    card.dataset.drawn = String(drawn);
    card.dataset.stableFrom = runs.length ? String(xs[runs[0][0]]) : "";
    card.dataset.stableTo = runs.length ? String(xs[runs[0][1]]) : "";
    const zeroLine = { name: "0", x: [xs[0], xs[xs.length - 1]], y: [0, 0], color: "#999", dash: "3 3", noLegend: true };
    for (const [id, series, title, ylab] of [
      ["plot-eig-re", re, "Eigenvalues: real parts (growth rates)", "Re λ  (1/s)"],
      ["plot-eig-im", im, "Eigenvalues: imaginary parts (frequencies)", "Im λ  (rad/s)"],
    ]) {
      const f = $(id);
      f.hidden = false;
      const host = h("div", { class: "chart-host" });
      f.replaceChildren(host);
      f.append(h("figcaption", {}, `${res.points.length} operating points; every nonzero eigenvalue of ${select ? "the block of A on " + select.join(", ") : "A"} at each is a dot. ` +
        `Zero eigenvalues (|λ| below ${ZERO_REL} of the largest: coordinates that do not enter the equations, such as a heading or a position) are not drawn.`));
      lineChart(host, { title, xLabel: axis.label, yLabel: ylab, series: [zeroLine, ...series], height: 300, vlines });
    }
    $("plot-eig-im").dataset.maxIm = String(maxIm);
    const fmtRun = ([a, b]) => (a === b ? `${axis.label} = ${fmt(xs[a], 4)}` : `${axis.label} from ${fmt(xs[a], 4)} to ${fmt(xs[b], 4)}`);
    $("lin-summary").textContent = runs.length
      ? `No mode grows (every Re λ ≤ 0) for ${runs.map(fmtRun).join(" and ")}.`
      : "A mode grows (some Re λ > 0) at every swept point.";
  }

  // The steady branch (POST /v1/steady): the operating point solved as a steady motion
  // over the unknowns at `from`, followed by continuation to `to`; the unknowns drawn
  // against the swept value, solid where no mode grows and dashed where one does, the
  // eigenvalues as for a sweep, and the stability changes the service located.
  async function branch() {
    $("lin-problem").hidden = true;
    const model = getModel();
    if (model.error) return problem("The model is not valid JSON", [model.error]);
    const params = getParams();
    axis = axisAt(model.value, params);
    let point;
    try { point = parseWithPositions(editor.value).value; } catch (e) { return problem("The operating point is not valid JSON", [{ reason: e.message }]); }
    let [group, ...rest] = $("lin-sweep").value.split(".");
    let name = rest.join(".");
    const from = Number($("lin-from").value), to = Number($("lin-to").value), n = Math.round(Number($("lin-n").value));
    const unknowns = $("lin-unknowns").value.split(/[\s,]+/).filter(Boolean);
    if (!unknowns.length) return problem("Name the unknowns", [{ reason: "the coordinates, speeds or parameters the steady motion is solved for (e.g. phi, delta)" }]);
    if (!Number.isFinite(from) || !Number.isFinite(to) || from === to || !(n >= 2 && n <= 2001)) {
      return problem("Check the sweep", [{ reason: "from and to must be different numbers and points an integer from 2 to 2001" }]);
    }
    const state = { t: point.t || 0, q: { ...(point.q || {}) }, speeds: { ...(point.speeds || {}) } };
    if (point.qdot && !point.speeds) {
      // POST /v1/steady takes the speeds: a point given by its velocities gets them from
      // POST /v1/evaluate (the speeds of that state), the swept velocity set first
      const at = { t: state.t, q: state.q, qdot: { ...point.qdot } };
      if (group === "qdot") at.qdot[name] = from;
      try {
        state.speeds = (await getApi().call("POST", "/v1/evaluate", withParams({ model: model.value, states: [at] }, params))).body.states[0].speeds;
      } catch (e) {
        if (e instanceof ApiError) return apiProblem(e);
        throw e;
      }
      // a velocity that is itself a speed (the engine's default speeds are named x', theta')
      if (group === "qdot" && (name + "'") in state.speeds) { group = "speeds"; name += "'"; }
      if (group === "qdot") return problem("Sweep a speed or a coordinate", [{ reason: `a steady branch follows a coordinate, a speed or a parameter; ${name}' is a velocity: give the point's speeds (${Object.keys(state.speeds).join(", ")}) to sweep one of them` }]);
    }
    // a parameter swept starts at `from` (an override); a state value is set in the state
    if (group === "parameters") params[name] = from;
    else state[group] = { ...state[group], [name]: from };
    const req = withParams({ model: model.value, state, unknowns, continuation: { vary: name, to, steps: n - 1 } }, params);
    $("lin-branch").disabled = true;
    $("lin-summary").textContent = "following the branch…";
    let res;
    try {
      res = (await getApi().call("POST", "/v1/steady", req)).body;
    } catch (e) {
      $("lin-summary").textContent = "";
      if (e instanceof ApiError) return apiProblem(e);
      throw e;
    } finally {
      $("lin-branch").disabled = false;
    }
    const xs = res.points.map((p) => p.values[name] * axis.factor);
    // each stability change a marker on the branch and the eigenvalue plots, labelled
    // with its kind (a complex pair or a real eigenvalue crossing) and its direction
    const changes = (res.stability_changes || []).map((c) => ({ ...c, at: c.value * axis.factor }));
    const vlines = changes.map((c) => ({
      x: c.at, color: c.direction === "gains stability" ? "#2a7d3f" : "#b3261e", dash: "5 3",
      label: `${c.direction === "gains stability" ? "stable" : c.direction === "loses stability" ? "unstable" : "changes"} from ${fmt(c.at, 5)} (${c.kind === "complex" ? "complex pair" : "real"})`,
    }));
    draw({ points: res.points.map((p) => ({ eigenvalues: p.eigenvalues })) }, xs, vlines);
    const series = [];
    unknowns.forEach((u, k) => {
      const ys = res.points.map((p) => p.values[u]);
      const color = PALETTE[k % PALETTE.length];
      // each part keeps its end points, so that the two parts meet
      const part = (stable) => res.points.map((p, j) => {
        const here = p.stable === stable, next = res.points[j + 1], prev = res.points[j - 1];
        return here || (next && next.stable === stable) || (prev && prev.stable === stable) ? ys[j] : NaN;
      });
      series.push({ name: `${u} (stable)`, x: xs, y: part(true), color, width: 3 });
      series.push({ name: `${u} (unstable)`, x: xs, y: part(false), color, dash: "6 4" });
    });
    const f = $("plot-branch");
    f.hidden = false;
    const host = h("div", { class: "chart-host" });
    f.replaceChildren(host);
    f.append(h("figcaption", {}, `The steady branch: ${res.points.length} points from ${axis.label} = ${fmt(xs[0], 4)} to ${fmt(xs[xs.length - 1], 4)}; ` +
      "solid where no mode grows, dashed where one does. Zero eigenvalues of states that do not enter are left out."));
    lineChart(host, { title: "Steady branch: the unknowns", xLabel: axis.label, yLabel: unknowns.join(", "), series, height: 260, vlines });
    $("linearize").dataset.changes = JSON.stringify(changes.map((c) => c.at));
    $("lin-summary").textContent = changes.length
      ? "Stability changes on the branch: " + changes.map((c) => `${axis.label} = ${c.at.toPrecision(12)} (${c.kind}, ${c.direction || ""})`).join("; ") + "."
      : "The branch keeps its stability: " + (res.points[0].stable ? "stable" : "unstable") + " throughout.";
  }

  $("lin-run").addEventListener("click", () => run());
  $("lin-branch").addEventListener("click", () => branch());
  return { load };
}
