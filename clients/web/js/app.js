// app.js — the hamel web front end: pick or edit a model, run it on hamel-server,
// watch the job's progress, and read the trajectory, the checks, the Hamel
// coefficients and the derived equations.

import { Api, ApiError } from "./api.js";
import { Editor } from "./editor.js";
import { parseWithPositions, pathSegments, locate, lineColOf } from "./jsonpos.js";
import { lineChart, logBarChart, fmt, PALETTE } from "./chart.js";
import { exprToMath, mathOf, ml } from "./expr.js";
import { setupLinearize } from "./linearize.js";
import { setupSweep } from "./sweep.js";
import { setupAnim, planarPairs } from "./anim.js";
import { setupEvents, renderEvents, eventMarks, contactsOf } from "./events.js";
import { $, h } from "./dom.js";

// Columns in problem documents count from 1 (the first character of an expression
// is column 1), as compilers and editors do.
const COLUMN_BASE = 1;
const POLL_MS = 120;
const DEFAULT_SAMPLES = 1001;

let connectedResolve;
const state = {
  api: null,
  connected: new Promise((r) => { connectedResolve = r; }),
  connectedResolve: () => connectedResolve(),
  examples: [],
  example: null,   // the loaded example {title, source, description, model, simulation}
  bound: null,     // the coordinates the initial state and invariants were written for
  paramDefaults: {}, // the model's own parameter values (overrides are the differences)
  request: null,   // the last simulation request sent (for the share link and "run again")
  jobId: null,
  cancelled: false,
  running: false,
  result: null,
  summary: null,
  equations: null,
};

const modelEditor = new Editor($("model-editor"), { rows: 22, label: "model (JSON)" });
const initialEditor = new Editor($("initial-editor"), { rows: 9, label: "initial state (JSON)" });
const invariantsEditor = new Editor($("invariants-editor"), { rows: 3, label: "invariants (JSON)" });
const linearize = setupLinearize({ getApi: () => state.api, getModel: () => parseEditor(modelEditor, "model"), getParams: () => readParams().overrides });
/** Fills the linearization card for a model (an example's preset, else its initial state)
 *  and remembers whose coordinates it holds. */
function loadLinearize(ws, file) {
  state.linBound = coordsOf(ws && ws.model);
  return linearize.load(ws, file);
}
const anim = setupAnim();
const events = setupEvents(() => sweep.setEvents(events.read().events.map((e) => e.name)));
const sweep = setupSweep({ getApi: () => state.api, prepare: () => prepare(), chart: (...a) => chartIn(...a) });

// ---- server connection ----------------------------------------------------------

function initialBase() {
  const q = new URLSearchParams(location.search).get("api");
  if (q !== null) return q;
  const saved = localStorage.getItem("hamel.base");
  if (saved !== null) return saved;
  return location.protocol === "file:" ? "http://127.0.0.1:8080" : "";
}

async function connect(base) {
  const token = $("token").value.trim();
  state.api = new Api(base, token);
  $("base").value = base;
  localStorage.setItem("hamel.base", base);
  if (token) sessionStorage.setItem("hamel.token", token);
  const pill = $("health");
  pill.className = "pill";
  pill.textContent = "connecting…";
  try {
    const { body } = await state.api.health();
    pill.className = "pill ok";
    pill.textContent = `connected · ${body && body.version ? "v" + body.version : "ok"}`;
    pill.title = state.api.base || location.origin;
    $("token").hidden = !token;
    state.connectedResolve();
  } catch (e) {
    pill.className = "pill bad";
    if (e instanceof ApiError && e.status === 401) {
      // a server started with HAMEL_TOKEN: ask for the token
      $("token").hidden = false;
      $("token").focus();
      pill.textContent = token ? "token refused" : "token required";
      if (token) sessionStorage.removeItem("hamel.token");
    } else {
      pill.textContent = "unreachable";
    }
    pill.title = e.message;
  }
}

$("server-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  connect($("base").value.trim());
});

// ---- examples -------------------------------------------------------------------

/** The shipped examples; a list that cannot be fetched (the server gone, the tab
 *  navigating away mid-request) leaves the page usable without them and says so. */
async function loadExamples() {
  try {
    const res = await fetch("examples/index.json");
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    state.examples = await res.json();
  } catch (e) {
    state.examples = [];
    $("example").replaceChildren(h("option", { value: "" }, "—"));
    $("example-desc").replaceChildren(h("span", { class: "hint-inline" }, `The examples could not be loaded (${e.message}); write a model, or press New model.`));
    return;
  }
  const sel = $("example");
  sel.replaceChildren(...state.examples.map((e, i) => h("option", { value: String(i) }, prettyTitle(e.title))));
  const want = new URLSearchParams(location.search).get("example") || "rolling-disk";
  let idx = state.examples.findIndex((e) => e.file.replace(/\.json$/, "") === want);
  if (idx < 0) idx = state.examples.findIndex((e) => e.file.includes(want));
  sel.value = String(Math.max(0, idx));
  await loadExample(Math.max(0, idx));
}

function prettyTitle(t) {
  const m = /^(greenwood)-(\d+\.\d+)-(.*)$/.exec(t);
  const words = (s) => s.replace(/-/g, " ").replace(/^./, (c) => c.toUpperCase());
  if (m) return `${words(m[3])} — Greenwood ex. ${m[2]}`;
  const n = /^([a-z]+(?:-[a-z]+)?)-(.*)$/.exec(t);
  if (n && (t.startsWith("lemos") || t.startsWith("wang-pao"))) {
    const who = t.startsWith("lemos") ? "Lemos" : "Wang & Pao";
    return `${words(t.replace(/^(lemos|wang-pao)-/, ""))} — ${who}`;
  }
  return words(t);
}

async function loadExample(i) {
  const meta = state.examples[i];
  if (!meta) return;
  let ex;
  try {
    const res = await fetch("examples/" + meta.file);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    ex = await res.json();
  } catch (e) {
    $("example-desc").replaceChildren(h("span", { class: "hint-inline" }, `The example ${meta.file} could not be loaded (${e.message}).`));
    return;
  }
  state.example = ex;
  applyWorkspace(ex, { example: true });
  $("example-desc").replaceChildren(h("span", { class: "source" }, ex.source || ""));
  if (ex.description) $("example-desc").append(h("span", {}, " — " + ex.description));
  await loadLinearize(ex, meta.file);
}

/** Fills every editor and field from {model, simulation}: the example files, a saved
 *  JSON file, a shared link. Nothing of it stays hidden: what is sent is what is shown. */
function applyWorkspace(ws, { example = false } = {}) {
  const sim = ws.simulation || {};
  const model = ws.model || {};
  modelEditor.value = JSON.stringify(model, null, 2);
  const initial = sim.initial || initialFor(model, null, null);
  initialEditor.value = JSON.stringify(initial, null, 2);
  invariantsEditor.value = sim.invariants && sim.invariants.length ? JSON.stringify(sim.invariants, null, 2) : "[]";
  // the invariants name this model's symbols; edited by hand they are the user's own
  state.invariantsBound = coordsOf(model);
  events.set(sim.events || [], coordsOf(model));
  sweep.setEvents((sim.events || []).map((e) => e && e.name));
  state.bound = coordsOf(model);
  $("t_end").value = sim.t_end ?? 10;
  // an example's few reference samples are raised to a smooth curve; a saved file's or
  // a shared link's number is the run's own and is kept as it was
  const samples = sim.output && sim.output.samples;
  $("samples").value = example ? Math.max(samples || 0, DEFAULT_SAMPLES) : (samples || DEFAULT_SAMPLES);
  const integ = sim.integrator || {};
  $("method").value = integ.method || "rk8pd";
  $("rtol").value = integ.rtol ?? 1e-10;
  $("atol").value = integ.atol ?? "";
  $("max_steps").value = integ.max_steps ?? "";
  $("h0").value = integ.h0 ?? "";
  const out = sim.output || {};
  $("dt").value = out.dt ?? "";
  $("times").value = Array.isArray(out.times) ? out.times.join(", ") : "";
  $("position_tolerance").value = sim.position_tolerance ?? "";
  $("projection").value = typeof sim.projection === "boolean" ? String(sim.projection) : "";
  $("formulation").value = sim.formulation || "";
  $("hamel-at").value = sim.hamel || "initial";
  $("initial-note").textContent = "";
  renderParams(model, sim.parameters || {});
  clearProblem();
  sweep.refresh(null, model, initial);
}

/** The model and the run as one document (the format of the example files). */
function readWorkspace() {
  const model = parseEditor(modelEditor, "model");
  const out = { title: (model.value && model.value.name) || "model", model: model.value ?? null };
  try { out.simulation = buildRequest(parseEditor(initialEditor, "initial state").value, parseEditor(invariantsEditor, "invariants").value).req; } catch { /* settings half typed */ }
  return out;
}

const coordsOf = (model) => JSON.stringify((model && Array.isArray(model.coordinates)) ? model.coordinates : []);

/** An initial state for a model's coordinates and speeds, keeping the values `old`
 *  gives for names that are still there and 0 for the rest. */
function initialFor(model, summary, old) {
  const coords = (summary && summary.coordinates) || (Array.isArray(model.coordinates) ? model.coordinates : []);
  const speeds = (summary && summary.speeds) || namesOf(model.speeds);
  const oq = (old && old.q) || {};
  const byQdot = old && old.qdot && !old.speeds;
  const ov = (old && (byQdot ? old.qdot : old.speeds)) || {};
  const init = { t: (old && typeof old.t === "number") ? old.t : 0, q: {} };
  for (const c of coords) init.q[c] = typeof oq[c] === "number" ? oq[c] : 0;
  const names = byQdot ? coords : speeds;
  const v = {};
  for (const n of names) v[n] = typeof ov[n] === "number" ? ov[n] : 0;
  if (names.length) init[byQdot ? "qdot" : "speeds"] = v;
  return init;
}

// ---- parameters: the model's values, overridable per run, with what-if sliders -------

let autoRunTimer = null;
function renderParams(model, overrides) {
  const params = (model && typeof model.parameters === "object" && model.parameters) || {};
  state.paramDefaults = {};
  const rows = [];
  for (const [name, v0] of Object.entries(params)) {
    const def = typeof v0 === "number" ? v0 : (v0 && typeof v0.value === "number" ? v0.value : NaN);
    if (!Number.isFinite(def)) continue;
    state.paramDefaults[name] = def;
    const value = typeof overrides[name] === "number" ? overrides[name] : def;
    const span = def === 0 ? 1 : Math.abs(def);
    const lo = def - span, hi = def + span;
    const num = h("input", { type: "number", step: "any", value: String(value), "data-param": name, "aria-label": name });
    const slider = h("input", { type: "range", min: String(lo), max: String(hi), step: String((hi - lo) / 200), value: String(value), "aria-label": name + " slider" });
    const unit = unitOf(model, name);
    const reset = h("button", { type: "button", class: "reset", title: `back to ${def}` }, "↺");
    const row = h("div", { class: "param" + (value !== def ? " changed" : "") },
      h("span", { class: "pname", title: name }, mathOf(ml.nameML(name)), unit ? h("span", { class: "unit" }, unit) : null), num, slider, reset);
    const changed = (from) => {
      const v = Number(from.value);
      if (from === slider) num.value = String(Number(v.toPrecision(6)));
      else if (Number.isFinite(v)) slider.value = String(v);
      row.classList.toggle("changed", Number(num.value) !== def);
      if ($("auto-run").checked) {
        clearTimeout(autoRunTimer);
        autoRunTimer = setTimeout(() => run(), 250);
      }
    };
    num.addEventListener("input", () => changed(num));
    slider.addEventListener("input", () => changed(slider));
    reset.addEventListener("click", () => { num.value = String(def); changed(num); });
    rows.push(row);
  }
  $("params").replaceChildren(...(rows.length ? rows : [h("p", { class: "hint" }, "The model declares no parameters.")]));
}

/** A parameter's unit: the model's "units" map, or {value, unit}. */
function unitOf(model, name) {
  const p = model && model.parameters && model.parameters[name];
  if (p && typeof p === "object" && typeof p.unit === "string") return p.unit;
  return (model && model.units && typeof model.units[name] === "string") ? model.units[name] : "";
}

function readParams() {
  const out = {};
  const bad = [];
  for (const el of $("params").querySelectorAll("input[data-param]")) {
    const name = el.dataset.param;
    const v = Number(el.value);
    if (el.value.trim() === "" || !Number.isFinite(v)) { bad.push({ field: null, el, reason: `parameter ${name} must be a number` }); continue; }
    if (v !== state.paramDefaults[name]) out[name] = v;
  }
  return { overrides: out, bad };
}

// The parameter panel follows the model as it is edited.
let modelTimer = null;
invariantsEditor.onchange = () => { state.invariantsBound = ""; };
modelEditor.onchange = () => {
  clearTimeout(modelTimer);
  modelTimer = setTimeout(() => {
    const m = parseEditor(modelEditor, "model");
    if (m.error || !m.value || typeof m.value !== "object") return;
    const keep = readParams().overrides;
    const now = JSON.stringify(Object.keys(m.value.parameters || {}));
    if (now !== JSON.stringify(Object.keys(state.paramDefaults)) || JSON.stringify(Object.entries(m.value.parameters || {}).map(([k, v]) => [k, typeof v === "object" ? v.value : v])) !== JSON.stringify(Object.entries(state.paramDefaults))) {
      renderParams(m.value, keep);
    }
    // the sweep card offers this model's names, not the previous one's
    const init = parseEditor(initialEditor, "initial state");
    sweep.refresh(null, m.value, init.error ? null : init.value);
  }, 300);
};

$("example").addEventListener("change", (ev) => loadExample(Number(ev.target.value)));
$("fmt").addEventListener("click", (ev) => {
  ev.preventDefault();
  const m = parseEditor(modelEditor, "model");
  if (m.error) return showProblem({ title: "The text is not valid JSON", errors: [m.error] }, "local");
  modelEditor.value = JSON.stringify(m.value, null, 2);
});

// ---- problems: errors pointed at line and column ------------------------------------

function clearProblem() {
  $("problem").hidden = true;
  $("problem").replaceChildren();
  modelEditor.setMarks([]);
  initialEditor.setMarks([]);
  invariantsEditor.setMarks([]);
  events.clear();
  for (const el of document.querySelectorAll(".setup .invalid")) el.classList.remove("invalid");
}

const SETTING_OF = {
  t_end: "t_end", output: "samples", samples: "samples", integrator: "rtol", rtol: "rtol", atol: "atol",
  max_steps: "max_steps", method: "method", formulation: "formulation", hamel: "hamel-at",
  h0: "h0", dt: "dt", times: "times", position_tolerance: "position_tolerance", projection: "projection",
};

/** Where an error's path points: {editor, segs} or {field} or null. `scope` is the
 *  request the problem answered: "model" (POST /v1/models) or "simulation". */
function targetOf(path, scope, column) {
  const segs = pathSegments(path);
  if (scope === "model") {
    if (segs[0] === "model") return { editor: modelEditor, name: "model", segs: segs.slice(1) };
    return { editor: modelEditor, name: "model", segs };
  }
  if (segs[0] === "model") return { editor: modelEditor, name: "model", segs: segs.slice(1) };
  if (segs[0] === "initial") return { editor: initialEditor, name: "initial state", segs: segs.slice(1) };
  if (segs[0] === "invariants") return { editor: invariantsEditor, name: "invariants", segs: segs.slice(1) };
  if (segs[0] === "events" && segs.length > 1) {
    const m = events.mark(segs, column);
    if (m) return m;
  }
  if (segs[0] === "parameters" && segs[1]) {
    const el = $("params").querySelector(`input[data-param="${CSS.escape(String(segs[1]))}"]`);
    if (el) return { el, field: "parameter " + segs[1] };
  }
  // the innermost member the page has a field for (output.times[2] is the times field)
  const f = segs.slice().reverse().map((s) => SETTING_OF[s]).find(Boolean);
  if (f) return { field: f };
  return null;
}

/** Token under an offset: an identifier or number is marked whole, else one char. */
function tokenEnd(text, at) {
  const m = /^[A-Za-z_][A-Za-z0-9_]*'*|^\d+\.?\d*([eE][+-]?\d+)?/.exec(text.slice(at));
  return at + (m && m[0].length ? m[0].length : 1);
}

function showProblem(problem, scope) {
  clearProblem();
  const box = $("problem");
  box.hidden = false;
  const list = h("ul", { class: "errors" });
  const marks = new Map([[modelEditor, []], [initialEditor, []], [invariantsEditor, []]]);
  let first = null;
  const errors = Array.isArray(problem.errors) ? problem.errors : [];
  for (const e of errors) {
    const item = h("li", { "data-testid": "error" });
    let where = null;
    if (e.editor) {
      // a JSON syntax error found in the page itself
      const text = e.editor.value;
      const lc = lineColOf(text, e.offset);
      where = { editor: e.editor, name: e.name, start: e.offset, at: e.offset, end: e.offset + 1, ...lc };
    } else {
      const tgt = targetOf(e.path, scope, Number.isInteger(e.column) ? e.column : null);
      if (tgt && tgt.editor) {
        const text = tgt.editor.value;
        let spans = null;
        try { spans = parseWithPositions(text).spans; } catch { spans = null; }
        const loc = spans && locate(text, spans, tgt.segs, Number.isInteger(e.column) ? e.column : null, COLUMN_BASE);
        if (loc) {
          const lc = lineColOf(text, loc.at);
          where = { editor: tgt.editor, name: tgt.name, start: loc.start, end: loc.end, at: loc.at, ...lc, point: e.column != null };
        }
      } else if (tgt && tgt.field) {
        (tgt.el || $(tgt.field)).classList.add("invalid");
        where = { field: tgt.field };
      }
    }
    if (where && where.editor) {
      const text = where.editor.value;
      const m = marks.get(where.editor);
      m.push({ start: where.start, end: where.end, cls: "span" });
      const pointEnd = where.point === false ? where.end : Math.min(tokenEnd(text, where.at), where.end);
      m.push({ start: where.at, end: Math.max(pointEnd, where.at + 1), cls: "point" });
      item.append(
        h("button", {
          class: "loc", type: "button", "data-testid": "error-location", "data-line": String(where.line), "data-col": String(where.col),
          onclick: () => where.editor.reveal(where.at, pointEnd),
        }, `${where.name}, line ${where.line}, column ${where.col}`),
      );
      first = first || { where, pointEnd };
    } else if (where && where.field) {
      item.append(h("span", { class: "loc" }, `setting ${where.field}`));
    }
    item.append(h("span", { class: "reason" }, e.reason || e.message || ""));
    if (e.path) item.append(h("code", { class: "path" }, e.path + (e.column != null ? ` @ column ${e.column}` : "")));
    list.append(item);
  }
  box.append(...[
    h("div", { class: "problem-title" }, problem.title || "Error", problem.status ? h("span", { class: "status" }, ` ${problem.status}`) : null),
    problem.detail && !errors.length ? h("p", { class: "detail" }, problem.detail) : null,
    errors.length ? list : null,
    problem.type ? h("div", { class: "type" }, problem.type) : null,
  ].filter(Boolean));
  for (const [ed, m] of marks) ed.setMarks(m);
  if (first) first.where.editor.reveal(first.where.at, first.pointEnd);
}

// ---- running ----------------------------------------------------------------------

function setProgress(frac, label, cls = "") {
  const bar = $("progress-bar");
  bar.style.width = `${Math.round(Math.max(0, Math.min(1, frac)) * 1000) / 10}%`;
  $("progress").className = "progress " + cls;
  $("progress").setAttribute("aria-valuenow", String(Math.round(frac * 100)));
  $("progress-text").textContent = label;
}

/** The simulation request from what the page shows. Throws nothing; `bad` lists
 *  fields that are not numbers. */
function buildRequest(initial, invariants) {
  const bad = [];
  const t_end = Number($("t_end").value);
  const samples = Math.round(Number($("samples").value));
  const rtol = Number($("rtol").value);
  const atolText = $("atol").value.trim(), stepsText = $("max_steps").value.trim();
  const atol = Number(atolText), max_steps = Number(stepsText);
  if (!(t_end > 0)) bad.push({ field: "t_end", reason: "t_end must be a positive number" });
  if (!(samples >= 2)) bad.push({ field: "samples", reason: "samples must be at least 2" });
  if (!(rtol > 0)) bad.push({ field: "rtol", reason: "rtol must be a positive number such as 1e-10" });
  if (atolText && !(atol > 0)) bad.push({ field: "atol", reason: "atol must be a positive number (or empty for the default)" });
  if (stepsText && !(Number.isInteger(max_steps) && max_steps > 0)) bad.push({ field: "max_steps", reason: "max_steps must be a positive integer (or empty for the default)" });
  const h0Text = $("h0").value.trim(), dtText = $("dt").value.trim(), timesText = $("times").value.trim(), tolText = $("position_tolerance").value.trim();
  const h0 = Number(h0Text), dt = Number(dtText), tol = Number(tolText);
  const times = timesText ? timesText.split(/[\s,;]+/).filter(Boolean).map(Number) : null;
  if (h0Text && !(h0 > 0)) bad.push({ field: "h0", reason: "h0 must be a positive number (or empty for the driver's choice)" });
  if (dtText && !(dt > 0)) bad.push({ field: "dt", reason: "dt must be a positive number (or empty to use samples)" });
  if (times && !times.every(Number.isFinite)) bad.push({ field: "times", reason: "times must be numbers separated by commas (or empty to use samples)" });
  if (dtText && timesText) bad.push({ field: "times", reason: "give dt or times, not both" });
  if (tolText && !(tol > 0)) bad.push({ field: "position_tolerance", reason: "position tolerance must be a positive number (or empty for the default)" });
  const params = readParams();
  for (const b of params.bad) bad.push(b);
  const evs = events.read();
  for (const b of evs.bad) bad.push(b);
  const integrator = { method: $("method").value, rtol };
  if (atolText) integrator.atol = atol;
  if (stepsText) integrator.max_steps = max_steps;
  if (h0Text) integrator.h0 = h0;
  // at most one of samples, dt, times: dt or times when given, else samples
  const output = times ? { times } : dtText ? { dt } : { samples };
  const req = { initial, t_end, output, integrator, hamel: $("hamel-at").value };
  if (tolText) req.position_tolerance = tol;
  if ($("projection").value) req.projection = $("projection").value === "true";
  const f = $("formulation").value;
  if (f) req.formulation = f;
  if (Object.keys(params.overrides).length) req.parameters = params.overrides;
  if (Array.isArray(invariants) && invariants.length) req.invariants = invariants;
  if (evs.events.length) req.events = evs.events;
  return { req, bad };
}

function parseEditor(editor, name) {
  try {
    return { value: parseWithPositions(editor.value).value };
  } catch (e) {
    return { error: { editor, name, offset: e.offset ?? 0, reason: `${name} is not valid JSON: ${e.message}` } };
  }
}

/** Names from a list of strings or of {name, ...} objects. */
function namesOf(a) {
  return Array.isArray(a) ? a.map((x) => (typeof x === "string" ? x : x && x.name)).filter(Boolean) : [];
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** After the model is validated: if it is not the model the initial state and the
 *  invariants were written for (another was pasted or opened), the initial state is
 *  rebuilt for its coordinates and speeds (values kept by name) and the invariants,
 *  which name the old model's symbols, are cleared — visibly, with a note. */
function reconcile(model, summary, initial) {
  const now = coordsOf(model);
  let init = initial;
  const notes = [];
  // another model than the example's: the picker and its description no longer apply
  if (state.example && (state.bound !== now || (state.example.model && model && state.example.model.name !== model.name))) markCustom();
  if (state.bound !== now) {
    // cleared only when they came with another model (an example, a file, a link), not
    // when they were written by hand, perhaps for this very model
    if (state.invariantsBound && state.invariantsBound !== now && invariantsEditor.value.trim() !== "[]" && invariantsEditor.value.trim() !== "") {
      invariantsEditor.value = "[]";
      notes.push("invariants cleared (they named the previous model's symbols)");
    }
    if (events.dropBound(now)) notes.push("the example's events cleared");
    state.bound = now;
  }
  const haveQ = Object.keys((init && init.q) || {}).sort().join(",");
  const wantQ = summary.coordinates.slice().sort().join(",");
  const v = init && (init.speeds || init.qdot);
  const haveV = Object.keys(v || {}).sort().join(",");
  const wantV = (init && init.qdot && !init.speeds ? summary.coordinates : summary.speeds).slice().sort().join(",");
  if (!init || typeof init !== "object" || haveQ !== wantQ || haveV !== wantV) {
    init = initialFor(model, summary, init && typeof init === "object" ? init : null);
    initialEditor.value = JSON.stringify(init, null, 2);
    notes.push("initial state fitted to the model's coordinates and speeds");
  }
  $("initial-note").textContent = notes.join("; ");
  // the linearization card holds another model's point (an example's preset, with its
  // block selection and axis): it starts again from this model's initial state
  if (state.linBound !== now) loadLinearize({ model, simulation: { initial: init } }, null);
  return init;
}

/** The model validated and the request built from the page, for the sweep card:
 *  {request, summary, unitOf}, or null with the problem shown beside the editors. */
async function prepare() {
  clearProblem();
  const model = parseEditor(modelEditor, "model");
  const initial = parseEditor(initialEditor, "initial state");
  const invariants = parseEditor(invariantsEditor, "invariants");
  const errs = [model.error, initial.error, invariants.error].filter(Boolean);
  if (errs.length) { showProblem({ title: "The text is not valid JSON", errors: errs }, "local"); return null; }
  let summary;
  try {
    summary = (await state.api.postModel(model.value)).body;
  } catch (e) {
    showProblem(e instanceof ApiError ? e.problem : { title: String(e) }, "model");
    return null;
  }
  summary.coordinates = namesOf(summary.coordinates);
  summary.speeds = namesOf(summary.speeds);
  const built = buildRequest(reconcile(model.value, summary, initial.value), parseEditor(invariantsEditor, "invariants").value);
  if (built.bad.length) {
    for (const b of built.bad) (b.el || $(b.field)).classList.add("invalid");
    $("problem").hidden = false;
    $("problem").replaceChildren(h("div", { class: "problem-title" }, "Check the run settings"), h("ul", { class: "errors" }, built.bad.map((b) => h("li", {}, b.reason))));
    return null;
  }
  return { request: { ...built.req, model_id: summary.model_id }, summary, unitOf: (n) => unitOf(model.value, n), params: { ...state.paramDefaults } };
}

async function run() {
  if (state.running) return;
  clearProblem();
  const model = parseEditor(modelEditor, "model");
  const initial = parseEditor(initialEditor, "initial state");
  const invariants = parseEditor(invariantsEditor, "invariants");
  const errs = [model.error, initial.error, invariants.error].filter(Boolean);
  if (errs.length) return showProblem({ title: "The text is not valid JSON", errors: errs }, "local");
  const built = buildRequest(initial.value, invariants.value);
  if (built.bad.length) {
    for (const b of built.bad) (b.el || $(b.field)).classList.add("invalid");
    $("problem").hidden = false;
    $("problem").replaceChildren(h("div", { class: "problem-title" }, "Check the run settings"), h("ul", { class: "errors" }, built.bad.map((b) => h("li", {}, b.reason))));
    return;
  }
  state.running = true;
  state.cancelled = false;
  $("run").disabled = true;
  $("cancel").disabled = false;
  document.body.classList.add("busy");
  clearResults();
  try {
    setProgress(0, "validating the model…");
    let summary;
    try {
      summary = (await state.api.postModel(model.value)).body;
    } catch (e) {
      if (e instanceof ApiError) { setProgress(0, "the model has errors", "failed"); return showProblem(e.problem, "model"); }
      throw e;
    }
    summary.coordinates = namesOf(summary.coordinates);
    summary.speeds = namesOf(summary.speeds);
    state.summary = summary;
    state.modelSpec = model.value;
    rememberModel(summary.model_id, model.value);
    renderSummary(summary, null);
    loadEquations(summary.model_id);

    const req = { ...buildRequest(reconcile(model.value, summary, initial.value), parseEditor(invariantsEditor, "invariants").value).req, model_id: summary.model_id };
    state.request = req;
    rememberRun(summary.model_id, req);
    sweep.refresh(summary, model.value, req.initial);
    setPermalink(summary.model_id, null);
    await submitAndFollow(req, model.value);
  } catch (e) {
    setProgress(0, "failed", "failed");
    showProblem(e instanceof ApiError ? e.problem : { title: "Something went wrong", detail: String(e && e.stack || e) }, "simulation");
  } finally {
    state.running = false;
    $("run").disabled = false;
    $("cancel").disabled = true;
    document.body.classList.remove("busy");
  }
}

/** POST /v1/simulations, then polls the job to its end and shows what it left. */
async function submitAndFollow(req, modelSpec) {
  setProgress(0, "submitting…");
  let resp;
  try {
    resp = await state.api.simulate(req);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404 && modelSpec) {
      // the server forgot the model (restart, eviction): send it inline
      const inline = { ...req, model: modelSpec };
      delete inline.model_id;
      resp = await state.api.simulate(inline);
    } else if (e instanceof ApiError && e.problem && e.problem.partial) {
      // failed within the request: the problem carries the samples reached
      showFailure({ status: "failed", problem: e.problem, progress: 0 });
      return;
    } else throw e;
  }
  let job = resp.body;
  state.jobId = job.job_id || null;
  $("job-id").textContent = state.jobId ? `job ${state.jobId}` : "";
  if (state.jobId) setPermalink(req.model_id || job.model_id, state.jobId);
  const t0 = performance.now();
  while (job.status !== "done") {
    if (job.status === "failed" || job.status === "cancelled" || job.status === "error") {
      showFailure(job);
      return;
    }
    const pr = typeof job.progress === "number" ? job.progress : 0;
    setProgress(pr, `${job.status || "running"} · ${Math.round(pr * 100)}% · ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    await sleep(POLL_MS);
    job = (await state.api.job(state.jobId)).body;
  }
  state.result = job;
  setProgress(1, `done${job.cached ? " (cached)" : ""} · ${((performance.now() - t0) / 1000).toFixed(2)} s`, "done");
  renderResult(job);
}

/** A failed or cancelled job: the problem, and the trajectory up to where it stopped
 *  (the problem's `partial`) drawn in place of the previous run's plots. */
function showFailure(job) {
  const p = job.problem || job.error || { title: `The job ${job.status}`, detail: job.detail };
  setProgress(job.progress || 0, job.status === "cancelled" ? "cancelled" : "failed", "failed");
  if (job.status !== "cancelled" || !state.cancelled) showProblem(p, "simulation");
  const partial = p && p.partial;
  if (partial && partial.trajectory && (partial.trajectory.t || []).length) {
    state.result = null;
    renderResult({ ...partial, partial: true, t_reached: p.t_reached });
  }
}

/** Hides the previous run's plots, so nothing stale stays beside a new run's answer. */
function clearResults() {
  forgetCharts();
  for (const f of document.querySelectorAll("#results > .plots > figure")) { f.hidden = true; f.replaceChildren(); }
  state.result = null;
  $("results").classList.add("stale");
  $("events-card").hidden = true;
  anim.clear();
}

$("run").addEventListener("click", run);
$("cancel").addEventListener("click", async () => {
  if (!state.jobId) return;
  state.cancelled = true;
  try { await state.api.cancel(state.jobId); } catch { /* it may have just finished */ }
});
document.addEventListener("keydown", (ev) => {
  if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") { ev.preventDefault(); run(); }
});

// ---- save and share: permalinks, recent models, JSON files ---------------------------

const b64url = (s) => btoa(String.fromCharCode(...new TextEncoder().encode(s))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const unb64url = (s) => new TextDecoder().decode(Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0)));

/** Puts the model (and the run) into the address bar: /?model=sha256:…&job=…&run=…,
 *  `run` being the request's settings so the run can be made again once its result
 *  has expired. The server address (?api=) is kept; a token never goes in. */
function setPermalink(modelId, jobId) {
  const cur = new URLSearchParams(location.search);
  const q = [];
  if (cur.get("api")) q.push("api=" + encodeURIComponent(cur.get("api")));
  q.push("model=" + encodeURIComponent(modelId).replace(/%3A/gi, ":"));
  if (jobId) {
    q.push("job=" + encodeURIComponent(jobId));
    if (state.request) {
      const { model_id: _m, model: _s, ...settings } = state.request;
      q.push("run=" + b64url(JSON.stringify(settings)));
    }
  }
  history.replaceState(null, "", location.pathname + "?" + q.join("&"));
  $("share").disabled = false;
}

$("share").addEventListener("click", async () => {
  const link = location.href;
  try { await navigator.clipboard.writeText(link); flash($("share"), "copied"); } catch { prompt("Copy this link", link); }
});

function flash(btn, text) {
  const was = btn.textContent;
  btn.textContent = text;
  setTimeout(() => { btn.textContent = was; }, 1200);
}

const RECENT_KEY = "hamel.recent";
const RECENT_MAX = 15;
function recentList() {
  try { const a = JSON.parse(localStorage.getItem(RECENT_KEY) || "[]"); return Array.isArray(a) ? a : []; } catch { return []; }
}
function rememberModel(id, model) {
  const list = recentList().filter((e) => e.id !== id);
  const text = JSON.stringify(model);
  list.unshift({ id, name: (model && model.name) || id.slice(7, 19), at: Date.now(), model: text.length < 200000 ? model : null });
  try { localStorage.setItem(RECENT_KEY, JSON.stringify(list.slice(0, RECENT_MAX))); } catch { /* full: not kept */ }
  renderRecent();
}
function rememberRun(id, request) {
  const list = recentList();
  const e = list.find((x) => x.id === id);
  if (!e) return;
  const { model_id: _m, model: _s, ...settings } = request;
  e.simulation = settings;
  try { localStorage.setItem(RECENT_KEY, JSON.stringify(list)); } catch { /* full */ }
}
function renderRecent() {
  const list = recentList();
  $("recent").replaceChildren(h("option", { value: "" }, list.length ? `— ${list.length} kept in this browser —` : "— none yet —"),
    ...list.map((e) => h("option", { value: e.id }, `${e.name} · ${new Date(e.at).toLocaleString()}`)));
}
$("recent").addEventListener("change", async (ev) => {
  const id = ev.target.value;
  if (!id) return;
  const e = recentList().find((x) => x.id === id);
  ev.target.value = "";
  await openModel(id, e && e.model, e && e.simulation, null);
});

function markCustom() {
  const sel = $("example");
  if (!sel.querySelector('option[value="custom"]')) sel.prepend(h("option", { value: "custom" }, "(your model)"));
  sel.value = "custom";
  state.example = null;
  $("example-desc").replaceChildren();
}

const NEW_MODEL = {
  name: "my-model",
  coordinates: ["x", "y", "theta"],
  parameters: { m: 1, I: 0.1 },
  kinetic_energy: "1/2*m*(x'^2 + y'^2) + 1/2*I*theta'^2",
  potential_energy: "0",
  constraints: [{ name: "knife_edge", expr: "-x'*sin(theta) + y'*cos(theta)" }],
};
$("new-model").addEventListener("click", () => {
  markCustom();
  applyWorkspace({ model: NEW_MODEL, simulation: { initial: { t: 0, q: { x: 0, y: 0, theta: 0 }, speeds: {} }, t_end: 10 } });
  const initial = { t: 0, q: { x: 0, y: 0, theta: 0 }, qdot: { x: 1, y: 0, theta: 0.5 } };
  initialEditor.value = JSON.stringify(initial, null, 2);
  loadLinearize({ model: NEW_MODEL, simulation: { initial } }, null);
  history.replaceState(null, "", location.pathname + (new URLSearchParams(location.search).get("api") ? "?api=" + encodeURIComponent(new URLSearchParams(location.search).get("api")) : ""));
  clearResults();
  $("results").classList.add("empty");
  modelEditor.ta.focus();
});

$("save-json").addEventListener("click", () => {
  const ws = readWorkspace();
  saveText(JSON.stringify(ws, null, 2) + "\n", (ws.title || "model") + ".json", "application/json");
});
$("open-json").addEventListener("change", async (ev) => {
  const file = ev.target.files && ev.target.files[0];
  ev.target.value = "";
  if (!file) return;
  let doc;
  try { doc = JSON.parse(await file.text()); } catch (e) {
    return showProblem({ title: `${file.name} is not JSON`, detail: String(e.message) }, "local");
  }
  markCustom();
  if (doc && doc.model && typeof doc.model === "object") {
    // a saved workspace {model, simulation} or a simulation request {model, initial, ...}
    const { model, simulation, title: _t, source: _s, description: _d, ...rest } = doc;
    applyWorkspace({ model, simulation: simulation || rest });
    // an operating point the file carries ("linearize", as the examples have) is kept
    loadLinearize({ ...doc, simulation: simulation || rest }, null);
  } else if (doc && Array.isArray(doc.coordinates)) {
    applyWorkspace({ model: doc, simulation: {} });
    loadLinearize({ model: doc, simulation: {} }, null);
  } else {
    showProblem({ title: `${file.name} holds no model`, detail: "Expected a model (with coordinates), or {\"model\": …, \"simulation\": …} as ⤓ JSON saves it." }, "local");
  }
});

/** "⤓ C code", "⤓ Python code": the model and the run as the page shows them (the
 *  request a run would send) through POST /v1/code, saved as one source file. */
async function exportCode(lang, btn) {
  const ctx = await prepare();
  if (!ctx) return;
  const was = btn.textContent;
  btn.disabled = true;
  btn.textContent = "generating…";
  try {
    let res;
    try {
      res = await state.api.code({ ...ctx.request, lang });
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
      // the server forgot the model: send it inline
      const { model_id: _m, ...rest } = ctx.request;
      res = await state.api.code({ ...rest, model: parseEditor(modelEditor, "model").value, lang });
    }
    const stem = (modelNameOf() || "hamel_model").replace(/[^A-Za-z0-9_]+/g, "_").replace(/^(\d)/, "_$1");
    saveText(res.text, `${stem}.${lang === "python" ? "py" : "c"}`, res.type.split(";")[0]);
  } catch (e) {
    showProblem(e instanceof ApiError ? e.problem : { title: "Something went wrong", detail: String(e) }, "simulation");
  } finally {
    btn.disabled = false;
    btn.textContent = was;
  }
}
$("export-c").addEventListener("click", (ev) => exportCode("c", ev.currentTarget));
$("export-py").addEventListener("click", (ev) => exportCode("python", ev.currentTarget));

function saveText(text, name, type) {
  const a = h("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

// The canonical form sorts keys; people read a model name first, coordinates next.
const KEY_ORDER = ["name", "description", "coordinates", "parameters", "units", "definitions", "frames", "points", "bodies",
  "rolling_disks", "gravity", "kinetic_energy", "potential_energy", "generalized_forces", "constraints", "speeds"];
function readableOrder(m) {
  const out = {};
  for (const k of KEY_ORDER) if (k in m) out[k] = m[k];
  for (const k of Object.keys(m)) if (!(k in out)) out[k] = m[k];
  // and each entry of a list its name first ({"name", "expr"}, as models are written)
  const nameFirst = (e) => (e && typeof e === "object" && !Array.isArray(e) && "name" in e ? { name: e.name, ...e } : e);
  for (const k of Object.keys(out)) if (Array.isArray(out[k])) out[k] = out[k].map(nameFirst);
  return out;
}

/** Opens a model by id: its source from the server (GET ?source=1), else the copy kept
 *  in this browser; then the run `jobId` if given (done, failed, running, or expired). */
async function openModel(id, localCopy, simulation, jobId) {
  clearProblem();
  clearResults();
  let summary = null, source = null;
  try {
    const r = await state.api.modelSource(id);
    summary = r.body;
    source = r.body.source || null;
  } catch (e) {
    if (!localCopy) {
      showProblem(e instanceof ApiError && e.status === 404
        ? { title: "This server does not know the model", detail: `No model ${id} here (another server, or its store was reset).`, status: 404 }
        : (e.problem || { title: String(e) }), "simulation");
      return false;
    }
  }
  markCustom();
  if (source) source = readableOrder(source);
  applyWorkspace({ model: source || localCopy, simulation: simulation || {} });
  if (summary) {
    summary.coordinates = namesOf(summary.coordinates);
    summary.speeds = namesOf(summary.speeds);
    if (!simulation || !simulation.initial) {
      initialEditor.value = JSON.stringify(initialFor(source || localCopy, summary, null), null, 2);
    }
    state.summary = summary;
    state.modelSpec = source || localCopy;
    if (source) rememberModel(id, source);
    sweep.refresh(summary, source || localCopy, JSON.parse(initialEditor.value));
    renderSummary(summary, null);
    $("results").classList.remove("empty");
    loadEquations(id);
  }
  await loadLinearize({ model: source || localCopy, simulation: simulation || {} }, null);
  if (simulation && simulation.initial) state.request = { ...simulation, model_id: id };
  setPermalink(id, null);
  if (jobId) await openJob(id, jobId);
  return true;
}

async function openJob(modelId, jobId) {
  state.jobId = jobId;
  $("job-id").textContent = `job ${jobId}`;
  try {
    let job = (await state.api.job(jobId)).body;
    setPermalink(modelId, jobId);
    while (job.status === "queued" || job.status === "running") {
      setProgress(job.progress || 0, `${job.status} · ${Math.round((job.progress || 0) * 100)}%`);
      await sleep(POLL_MS);
      job = (await state.api.job(jobId)).body;
    }
    if (job.status === "done") {
      state.result = job;
      setProgress(1, "done (opened from a link)", "done");
      renderResult(job);
    } else {
      showFailure(job);
    }
  } catch (e) {
    if (e instanceof ApiError && (e.status === 410 || e.status === 404)) {
      setProgress(0, e.status === 410 ? "result expired" : "run not found", "failed");
      showProblem({
        ...e.problem,
        title: e.status === 410 ? "This run's result is no longer kept" : "This server does not know this run",
        detail: (e.status === 410 ? "The server dropped the result to stay within its store limit. " : "") +
          "The model and the run's settings are filled in: run it again to compute it.",
      }, "simulation");
      $("problem").append(h("button", { type: "button", class: "primary again", "data-testid": "run-again", onclick: () => run() }, "Run again"));
    } else {
      showProblem(e.problem || { title: String(e) }, "simulation");
    }
  }
}

// ---- results ------------------------------------------------------------------------

function badge(text, cls, title) {
  return h("span", { class: "badge " + (cls || ""), title }, text);
}

// The holonomy analysis: rank of the involutive closure and the integrable combinations.
// The combinations can be enormous (the bicycle's run to 21,000 characters): they are
// folded, each shown as math when short and cut with its length when long.
const COMBO_SHOWN = 240;
function holonomyFact(hol) {
  if (!hol) return null;
  if (!hol.complete) return fact("integrable combinations", "?", hol.reason || "analysis incomplete");
  const list = (hol.combinations || []).map((c) => {
    const text = c.expr ? c.expr + " = 0" + (c.integral ? "  ⇒  " + c.integral + " = const" : "") : (c.note || "");
    const body = c.expr && c.expr.length <= COMBO_SHOWN
      ? [exprToMath(c.expr), " = 0", c.integral && c.integral.length <= COMBO_SHOWN ? h("span", {}, " ⇒ ", exprToMath(c.integral), " = const") : null]
      : [text.length > COMBO_SHOWN ? text.slice(0, COMBO_SHOWN) + "…" : text,
        text.length > COMBO_SHOWN ? h("span", { class: "hint-inline" }, ` (${text.length.toLocaleString()} characters; all of it in the model summary, holonomy.combinations)`) : null];
    return h("li", {}, ...body);
  });
  const sub = h("div", {}, "closure of the constraint distribution: rank " + hol.closure_rank + " of " + (hol.space || []).length +
    " (brackets to order " + hol.bracket_order + ")");
  if (list.length) sub.append(h("details", { "data-testid": "combinations" }, h("summary", {}, `${list.length} combination${list.length > 1 ? "s" : ""}`), h("ul", { class: "combos" }, list)));
  return fact("integrable combinations", String(hol.integrable_combinations), sub);
}

function renderSummary(s, result) {
  const box = $("summary");
  const cons = (s.constraints || []).map((c) =>
    h("li", {},
      h("b", {}, c.name), " ",
      badge(c.holonomic ? "holonomic" : (c.linear ? "not integrable alone" : "nonholonomic"), c.holonomic ? "muted" : "accent", "Frobenius test on the constraint's own form: omega ^ d omega = 0"),
      badge(c.linear ? "linear in q̇" : "nonlinear (Chetaev)", "muted"),
      badge(c.rheonomic ? "rheonomic" : "scleronomic", "muted")));
  const facts = h("div", { class: "facts" },
    fact("coordinates", String(s.n), (s.coordinates || []).join(", ")),
    fact("constraints", String(s.m), ""),
    fact("degrees of freedom", String(s.dof), (s.speeds || []).join(", ")),
    fact("energy", s.energy_conserved ? "conserved" : "not conserved", s.energy_reason || (s.scleronomic ? "scleronomic system" : "rheonomic system")),
    holonomyFact(s.holonomy));
  const checks = result ? renderChecks(result) : h("p", { class: "hint" }, "Run the simulation to see the trajectory and its checks.");
  box.replaceChildren(
    h("div", { class: "summary-head" },
      h("h2", {}, modelNameOf() ? prettyTitle(modelNameOf()) : "Model"),
      h("div", { class: "head-right" },
        result ? h("button", { type: "button", class: "dl", onclick: () => download(result, "csv") }, "⤓ CSV") : null,
        result ? h("button", { type: "button", class: "dl", onclick: () => download(result, "json") }, "⤓ JSON") : null,
        result && !result.partial ? h("button", {
          type: "button", class: "dl", "data-testid": "pin", title: "keep this run drawn (dashed) under the next runs, to compare them",
          onclick: () => { state.pinned = state.pinned && state.pinned.result === result ? null : { result, label: `job ${(result.job_id || "").slice(0, 8)}` }; renderResult(result); },
        }, state.pinned && state.pinned.result === result ? "Unpin" : "Pin to compare") : null,
        h("code", { class: "model-id", title: s.model_id }, (s.model_id || "").slice(0, 19) + "…"))),
    facts,
    ...(cons.length ? [h("ul", { class: "constraints" }, cons)] : []),
    checks);
}

/** Saves the trajectory as CSV or the whole result as JSON. The CSV columns are the
 *  CLI's (`hamel run --csv`, `hamel remote run --csv`): t, the coordinates, the speeds,
 *  then q' of each coordinate as name'; the multipliers formulation adds lambda_<name>. */
function download(r, kind) {
  const name = (modelNameOf() || "hamel") + (kind === "csv" ? ".csv" : ".json");
  if (kind === "json") return saveText(JSON.stringify(r, null, 1), name, "application/json");
  saveText(csvOf(r, state.summary), name, "text/csv");
}

function csvOf(r, summary) {
  const tr = r.trajectory || {};
  const ordered = (obj, names) => {
    const keys = Object.keys(obj || {});
    const first = (names || []).filter((n) => keys.includes(n));
    return first.concat(keys.filter((k) => !first.includes(k)));
  };
  const cols = [["t", tr.t]];
  for (const n of ordered(tr.q, summary && summary.coordinates)) cols.push([n, tr.q[n]]);
  for (const n of ordered(tr.speeds, summary && summary.speeds)) cols.push([n, tr.speeds[n]]);
  for (const n of ordered(tr.qdot, summary && summary.coordinates)) cols.push([n + "'", tr.qdot[n]]);
  for (const n of ordered(tr.multipliers, null)) cols.push(["lambda_" + n, tr.multipliers[n]]);
  const lines = [cols.map((c) => c[0]).join(",")];
  for (let i = 0; i < (tr.t || []).length; i++) lines.push(cols.map((c) => (c[1][i] == null ? "" : c[1][i])).join(","));
  return lines.join("\n") + "\n";
}

function modelNameOf() {
  try { return JSON.parse(modelEditor.value).name || null; } catch { return null; }
}

function fact(label, value, sub) {
  return h("div", { class: "fact" }, h("div", { class: "fact-value" }, value), h("div", { class: "fact-label" }, label), sub ? h("div", { class: "fact-sub" }, sub) : null);
}

function renderChecks(r) {
  const c = r.checks || {};
  const e = c.energy || {};
  const k = c.constraints || {};
  const st = r.stats || {};
  const cells = [];
  if (typeof e.max_abs_drift === "number") {
    cells.push(h("div", { class: "check" },
      h("div", { class: "check-value", "data-testid": "energy-drift", "data-value": String(e.max_abs_drift) }, e.max_abs_drift.toExponential(3)),
      h("div", { class: "check-label" }, "max |E(t) − E₀|"),
      h("div", { class: "check-sub" }, `E₀ = ${fmt(e.initial, 10)}` + (typeof e.max_rel_drift === "number" ? ` · relative ${e.max_rel_drift.toExponential(2)}` : ""),
        e.conserved_expected === false ? " · not expected to be conserved" : "")));
  }
  if (typeof k.max_abs_residual === "number") {
    cells.push(h("div", { class: "check" },
      h("div", { class: "check-value", "data-testid": "constraint-residual", "data-value": String(k.max_abs_residual) }, k.max_abs_residual.toExponential(3)),
      h("div", { class: "check-label" }, "max constraint residual"),
      h("div", { class: "check-sub" }, Object.entries(k.per_constraint || {}).map(([n, v]) => `${n} ${Number(v).toExponential(1)}`).join(" · "))));
  }
  for (const [name, inv] of Object.entries(c.invariants || {})) {
    if (typeof inv.max_abs_drift !== "number") continue;
    cells.push(h("div", { class: "check" },
      h("div", { class: "check-value" }, inv.max_abs_drift.toExponential(3)),
      h("div", { class: "check-label" }, `max |${name}(t) − ${name}₀|`),
      h("div", { class: "check-sub" }, typeof inv.initial === "number" ? `${name}₀ = ${fmt(inv.initial, 8)}` : "")));
  }
  if (r.stopped_by) {
    const evs = Array.isArray(r.events) ? r.events : [];
    const last = evs[evs.length - 1];
    cells.push(h("div", { class: "check" },
      h("div", { class: "check-value small" }, last ? `t = ${fmt(last.t, 8)}` : "—"),
      h("div", { class: "check-label" }, "stopped by ", h("b", {}, r.stopped_by)),
      h("div", { class: "check-sub" }, "a stop event ended the run before t_end")));
  }
  const contacts = contactsOf(r);
  if (contacts) cells.push(...contacts.cells);
  cells.push(h("div", { class: "check" },
    h("div", { class: "check-value small" }, `${st.steps ?? "—"} steps`),
    h("div", { class: "check-label" }, "integrator"),
    h("div", { class: "check-sub" }, [
      st.rhs_evals != null ? `${st.rhs_evals} rhs evaluations` : null,
      st.integrate_ms != null ? `${fmt(st.integrate_ms, 3)} ms` : null,
      r.cached ? "from cache" : null,
      r.provenance ? `engine ${r.provenance.engine_version} (${r.provenance.build}), ${r.provenance.code_tier}` : null,
    ].filter(Boolean).join(" · "))));
  return h("div", {}, renderWarnings(r), h("div", { class: "checks" }, cells));
}

/** The result's `warnings` (checks that failed: energy expected conserved but drifting,
 *  a constraint not kept) as a box above the checks; null when there are none. */
function renderWarnings(r) {
  const ws = Array.isArray(r.warnings) ? r.warnings : [];
  if (!ws.length) return null;
  return h("div", { class: "warnings", role: "alert", "data-testid": "warnings" },
    h("div", { class: "warnings-title" }, ws.length === 1 ? "A check failed: do not trust this trajectory" : `${ws.length} checks failed: do not trust this trajectory`),
    h("ul", {}, ws.map((w) => h("li", { "data-code": w.code || "" }, h("b", {}, w.code || "warning"), " ", w.message || ""))));
}

function xyPairs(coords) {
  return planarPairs(coords, (n) => coords.includes(n));
}

function seriesOf(obj, t, names) {
  return (names || Object.keys(obj || {})).filter((n) => obj && obj[n]).map((n, k) => ({ name: n, x: t, y: obj[n], color: PALETTE[k % PALETTE.length] }));
}

/** |E(t) − E₀| per sample if the result carries E(t) (`checks.energy.values`, or a
 *  `series` of energies or drifts), else null. */
function energyDriftSeries(e, n) {
  if (!e) return null;
  let s = e.values || e.series;
  if (s && !Array.isArray(s)) s = s.abs_drift || s.drift || s.values || s.E || null;
  if (!Array.isArray(s) || s.length !== n) return null;
  const E0 = typeof e.initial === "number" ? e.initial : s[0];
  const looksLikeEnergy = Math.abs(s[0] - E0) <= 1e-9 * Math.max(1, Math.abs(E0)) && Math.abs(E0) > 0;
  return looksLikeEnergy || e.values ? s.map((v) => Math.abs(v - E0)) : s.map(Math.abs);
}

function runningMax(y) {
  let m = 0;
  return y.map((v) => (m = Math.max(m, Number.isFinite(v) ? v : 0)));
}

/** Constraint residual per sample (`checks.constraints.max_abs_series`, or `series`:
 *  one array, or one per constraint). */
function residualSeries(k, t) {
  const s = k && (k.max_abs_series || k.series);
  if (!s) return [];
  if (Array.isArray(s)) return s.length === t.length ? [{ name: "max constraint residual", x: t, y: s.map(Math.abs) }] : [];
  return Object.entries(s).filter(([, v]) => Array.isArray(v) && v.length === t.length).map(([n, v]) => ({ name: `residual ${n}`, x: t, y: v.map(Math.abs) }));
}

// Charts are drawn at their host's real width (crisp text at any size) and redrawn
// when that width changes.
const charts = new Map();
const drawChart = (c) => { c.w = c.host.clientWidth; (c.kind === "bar" ? logBarChart : lineChart)(c.host, c.opts); };
const resizer = new ResizeObserver((entries) => {
  for (const en of entries) {
    const c = charts.get(en.target);
    if (c && Math.abs(en.target.clientWidth - c.w) > 2) drawChart(c);
  }
});
function forgetCharts() {
  for (const host of [...charts.keys()]) if (!host.isConnected) { resizer.unobserve(host); charts.delete(host); }
}
function chartIn(id, kind, opts, caption) {
  forgetCharts();
  chart(figure(id, caption), kind, opts);
}
function chart(host, kind, opts) {
  const c = { host, kind, opts, w: 0 };
  charts.set(host, c);
  resizer.observe(host);
  drawChart(c);
}

function figure(id, caption) {
  const f = $(id);
  f.hidden = false;
  const host = h("div", { class: "chart-host" });
  f.replaceChildren(host);
  if (caption) f.append(h("figcaption", {}, caption));
  return host;
}

function renderResult(r) {
  forgetCharts();
  if (state.summary) renderSummary(state.summary, r);
  $("results").classList.remove("empty");
  $("results").classList.remove("stale");
  const tr = r.trajectory || {};
  const t = tr.t || [];
  const coords = (state.summary && state.summary.coordinates) || Object.keys(tr.q || {});
  const part = r.partial ? ` — partial, up to t = ${fmt(t[t.length - 1], 6)}` : "";
  // units the model declares ("units": {symbol: unit}) go on the axes
  const units = (state.summary && state.summary.units) || ((state.modelSpec || {}).units) || {};
  const withUnit = (n) => (units[n] ? `${n} [${units[n]}]` : n);
  const axisOf = (sym, names) => {
    const us = new Set(names.map((n) => units[n] || ""));
    return us.size === 1 && [...us][0] ? `${sym} [${[...us][0]}]` : sym;
  };
  const unitNames = (series, names) => {
    const us = new Set(names.map((n) => units[n] || ""));
    if (us.size > 1) for (const s0 of series) s0.name = withUnit(s0.name);
    return series;
  };
  const tLabel = withUnit("t");
  // a pinned run is drawn dashed under this one, in the same colours
  const pin = state.pinned && state.pinned.result !== r ? state.pinned : null;
  const withPinned = (series, group) => {
    if (!pin) return series;
    const ptr = pin.result.trajectory || {};
    const extra = series.filter((s0) => ptr[group] && ptr[group][s0.name]).map((s0) => ({ name: "", x: ptr.t, y: ptr[group][s0.name], color: s0.color, dash: "6 4", noLegend: true, pinned: true }));
    if (extra.length) extra.push({ name: `${pin.label} (pinned, dashed)`, x: [], y: [], color: "#7a8796", dash: "6 4" });
    return extra.length ? [...series, ...extra] : series;
  };
  const vlines = eventMarks(r);
  const contacts = contactsOf(r);
  if (contacts) vlines.push(...contacts.vlines);
  const stopNote = r.stopped_by ? `Stopped by the event ${r.stopped_by}: the last sample is at its time.` : null;
  chart(figure("plot-q", r.partial ? "The run failed: the samples it reached before it stopped." : stopNote), "line", { title: "Coordinates q(t)" + part, xLabel: tLabel, yLabel: axisOf("q", coords), series: unitNames(withPinned(seriesOf(tr.q, t, coords), "q"), coords), vlines });
  if (tr.speeds && Object.keys(tr.speeds).length) {
    const speedNames = (state.summary && state.summary.speeds && state.summary.speeds.length ? state.summary.speeds : Object.keys(tr.speeds));
    chart(figure("plot-speeds"), "line", { title: "Independent speeds u(t)", xLabel: tLabel, yLabel: axisOf("u", speedNames), series: unitNames(withPinned(seriesOf(tr.speeds, t, speedNames), "speeds"), speedNames), vlines });
  } else {
    $("plot-speeds").hidden = true; // the multipliers formulation integrates q and q' directly
  }
  if (tr.multipliers && Object.keys(tr.multipliers).length) {
    chart(figure("plot-multipliers", "Generalized constraint forces of the multipliers formulation, one per constraint: compare them with friction limits to check no-slip."), "line", {
      title: "Constraint forces λ(t)", xLabel: tLabel, yLabel: "λ", series: seriesOf(tr.multipliers, t, Object.keys(tr.multipliers)),
    });
  } else {
    $("plot-multipliers").hidden = true;
  }

  const pairs = xyPairs(coords).filter(([x, y]) => tr.q && tr.q[x] && tr.q[y]);
  if (pairs.length) {
    const series = pairs.map(([x, y], k) => ({ name: pairs.length > 1 ? `(${x}, ${y})` : "path", x: tr.q[x], y: tr.q[y], color: PALETTE[k % PALETTE.length] }));
    const markers = pairs.flatMap(([x, y], k) => [
      { x: tr.q[x][0], y: tr.q[y][0], label: k === 0 ? "start" : "", color: "#2a9d3f" },
      { x: tr.q[x][t.length - 1], y: tr.q[y][t.length - 1], label: k === 0 ? "end" : "", color: "#b3261e" },
    ]);
    chart(figure("plot-path", "Path in the plane, equal scales on both axes."), "line", {
      title: "Path in the x–y plane", xLabel: pairs.length > 1 ? axisOf("x", pairs.map((p) => p[0])) : withUnit(pairs[0][0]), yLabel: pairs.length > 1 ? axisOf("y", pairs.map((p) => p[1])) : withUnit(pairs[0][1]), series, markers, equalAspect: true,
    });
  } else {
    $("plot-path").hidden = true;
  }

  const c = r.checks || {};
  const drift = energyDriftSeries(c.energy, t.length);
  const resid = residualSeries(c.constraints, t);
  if (drift || resid.length) {
    const series = [];
    const zero = [];
    // each quantity as dots per sample (round-off scatters them) and a line for the
    // largest value so far, which ends at the maximum the checks report
    const add = (name, y, color) => {
      series.push({ name, x: t, y, color, dots: true });
      series.push({ name: `${name}, max so far`, x: t, y: runningMax(y), color, dash: "5 3", noLegend: true });
    };
    if (drift) add("|E(t) − E₀|", drift, PALETTE[0]);
    resid.forEach((s, k) => {
      if (s.y.every((v) => v === 0)) zero.push(s.name);
      else add(s.name, s.y, PALETTE[(k + 1) % PALETTE.length]);
    });
    const notes = ["Log scale. Dots: each sample; dashed: the largest value so far. Exact zeros (such as E at t = 0) cannot be drawn on a log scale."];
    if (zero.length) notes.push(`The ${zero.join(", ")} is exactly 0 at every sample: the speeds are integrated and q̇ = Φu satisfies the constraints by construction.`);
    if (c.energy && c.energy.conserved_expected === false) notes.push(`Energy is not expected to be conserved here${c.energy.reason ? " (" + c.energy.reason + ")" : ""}.`);
    chart(figure("plot-checks", notes.join(" ")), "line", {
      title: "Energy drift and constraint residual", xLabel: tLabel, yLabel: "absolute error", logY: true, series,
    });
  } else {
    const items = [];
    if (c.energy && typeof c.energy.max_abs_drift === "number") items.push({ label: "energy  max |E − E₀|", value: c.energy.max_abs_drift, color: PALETTE[0] });
    if (c.constraints && typeof c.constraints.max_abs_residual === "number") items.push({ label: "constraints  max |f|", value: c.constraints.max_abs_residual, color: PALETTE[1] });
    Object.entries((c.constraints && c.constraints.per_constraint) || {}).forEach(([n, v], k) => items.push({ label: n, value: Number(v), color: PALETTE[(k + 2) % PALETTE.length] }));
    Object.entries(c.invariants || {}).forEach(([n, v]) => items.push({ label: `${n}  max drift`, value: v.max_abs_drift, color: PALETTE[5] }));
    chart(figure("plot-checks", "The server reports only the maxima over the run, so they are shown as bars (log scale)."), "bar", {
      title: "Energy drift and constraint residual (maxima)", xLabel: "absolute error, log scale", items,
    });
  }
  if (contacts && contacts.series.length) {
    chart(figure("plot-contacts", contacts.caption), "line", { title: "Contact forces", xLabel: tLabel, yLabel: "force", series: contacts.series, vlines });
  } else if (contacts) {
    const f = $("plot-contacts");
    f.hidden = false;
    f.replaceChildren(h("h3", {}, "Contact forces"), h("p", { class: "hint" }, contacts.caption));
  }
  renderEvents(r, state.summary);
  renderHamel(r);
  anim.show(r, state.modelSpec || parseEditor(modelEditor, "model").value, state.summary, (state.request && state.request.parameters) || {});
}

// ---- Hamel coefficients ------------------------------------------------------------

function gammaSymbol(j, r, l) {
  const { el, nameML, mrow } = ml;
  const sub = l == null ? nameML(r) : mrow(nameML(r), el("mo", { separator: "true" }, ","), nameML(l));
  return mathOf(el("msubsup", null, el("mi", null, "γ"), sub, nameML(j)));
}

function antisymmetry() {
  const { el, mo, mrow } = ml;
  const g = (a, b) => el("msubsup", null, el("mi", null, "γ"), mrow(el("mi", null, a), el("mi", null, b)), el("mi", null, "j"));
  return mathOf(mrow(g("r", "l"), mo("="), mo("−"), g("l", "r")));
}

async function renderHamel(r) {
  const box = $("hamel");
  let hamel = r.hamel;
  if (!hamel || !hamel.points) {
    try {
      const init = parseWithPositions(initialEditor.value).value;
      const req = { model_id: r.model_id || state.summary.model_id, t: init.t || 0, q: init.q };
      // a constraint nonlinear in q': the coefficients depend on q', so the initial qdot
      // (it chooses the root) or else the initial speeds go with the configuration
      const nonlinear = ((state.summary && state.summary.constraints) || []).some((c) => c.linear === false);
      if (nonlinear && init.qdot && typeof init.qdot === "object") req.qdot = init.qdot;
      else if (nonlinear && init.speeds && typeof init.speeds === "object") req.speeds = init.speeds;
      hamel = (await state.api.hamel(req)).body;
    } catch (e) {
      box.replaceChildren(h("h2", {}, "Hamel coefficients"), h("p", { class: "hint" }, "Not available: " + e.message));
      return;
    }
  }
  const p = hamel.points[0] || { gamma: [], gamma_t: [] };
  const order = hamel.order || [];
  const idx = (n) => { const i = order.indexOf(n); return i < 0 ? 1e9 : i; };
  const constraintNames = new Set(((state.summary && state.summary.constraints) || []).map((c) => c.name));
  const exprOf = new Map(((state.equations && state.equations.gamma) || []).map((g) => [`${g.j}|${g.r}|${g.l ?? ""}`, g.expr]));
  const rows = (p.gamma || []).filter((g) => idx(g.r) < idx(g.l))
    .sort((a, b) => idx(a.j) - idx(b.j) || idx(a.r) - idx(b.r) || idx(a.l) - idx(b.l));
  const rowsT = (p.gamma_t || []).slice().sort((a, b) => idx(a.j) - idx(b.j) || idx(a.r) - idx(b.r));
  const tr = (g, l) => {
    const ex = exprOf.get(`${g.j}|${g.r}|${l ?? ""}`);
    return h("tr", { class: constraintNames.has(g.j) ? "is-constraint" : "" },
      h("td", { class: "sym" }, gammaSymbol(g.j, g.r, l)),
      h("td", {}, constraintNames.has(g.j) ? badge("constraint", "accent") : badge("speed", "muted")),
      h("td", { class: "expr" }, ex ? exprToMath(ex) : h("span", { class: "hint" }, "—")),
      h("td", { class: "num" }, fmt(g.value, 6)));
  };
  const table = h("table", { class: "hamel-table", "data-testid": "hamel-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "coefficient"), h("th", {}, "j is a"), h("th", {}, "expression"), h("th", { class: "num" }, `value at t = ${fmt(p.t ?? 0)}`))),
    h("tbody", {}, rows.map((g) => tr(g, g.l)), rowsT.map((g) => tr(g, null))));
  box.replaceChildren(
    h("h2", {}, "Hamel coefficients"),
    h("p", { class: "hint" },
      "Every coefficient that is not identically zero, evaluated at the initial configuration. They are antisymmetric, ",
      antisymmetry(), ", so each pair is listed once. Quasi-velocities in order: ", h("b", {}, order.join(", ")), "."),
    rows.length + rowsT.length ? h("div", { class: "hamel-table-wrap" }, table) : h("p", {}, "All Hamel coefficients vanish identically: the speeds are true (holonomic) velocities."));
}

// ---- derived equations -------------------------------------------------------------

async function loadEquations(id) {
  const box = $("equations");
  box.replaceChildren(h("h2", {}, "Derived equations"), h("p", { class: "hint" }, "deriving…"));
  try {
    state.equations = (await state.api.equations(id)).body;
    renderEquations(state.equations);
    if (state.result) renderHamel(state.result);
  } catch (e) {
    box.replaceChildren(h("h2", {}, "Derived equations"), h("p", { class: "hint" }, "Not available: " + e.message));
  }
}

// Expressions longer than this are named in the equation (f_wd, M_wd,thd) and shown
// in full in a fold-out under it, so each equation of motion stays on one line.
const LONG_EXPR = 160;

function renderEquations(eq) {
  const { el, mo, mrow, nameML, toML } = ml;
  const box = $("equations");
  const speeds = namesOf(eq.speeds).length ? namesOf(eq.speeds) : (state.summary && state.summary.speeds) || [];
  const rows = [];
  const safe = (s) => { try { return toML(String(s)); } catch { return el("mtext", null, String(s)); } };
  const eqn = (lhs, rhs, cls = "eq") => h("div", { class: cls }, el("math", null, mrow(lhs, mo("="), rhs)));
  // a long expression = 0 wraps between its terms, each term a piece of its own
  const wrapped = (expr, rhs) => {
    let terms;
    try { terms = ml.termsML(String(expr)); } catch { return eqn(safe(expr), rhs, "eq wide"); }
    const pieces = terms.map((t, i) => h("span", { class: "term" }, el("math", null, i === 0 && t.sign === "+" ? t.ml : mrow(mo(t.sign), t.ml))));
    pieces.push(h("span", { class: "term" }, el("math", null, mrow(mo("="), rhs))));
    return h("div", { class: "eq wide wrap" }, pieces);
  };
  const dotted = (name) => nameML(name, 1);
  const sym = (base, ...subs) => el("msub", null, el("mi", null, base), subs.length === 1 ? nameML(subs[0]) : mrow(...subs.flatMap((x, i) => (i ? [mo(","), nameML(x)] : [nameML(x)]))));
  // mk() makes the left-hand side afresh: a DOM node can only be in one place
  const omitted = () => el("mtext", null, "(too large to print)");
  const fold = (mk, expr) => h("details", { class: "long" },
    h("summary", {}, el("math", null, mk()), ` — ${String(expr).length.toLocaleString()} characters, click to show`),
    eqn(mk(), safe(expr)));

  const s = state.summary || {};
  const speedDefs = (Array.isArray(s.speed_definitions) ? s.speed_definitions : Array.isArray(eq.speeds) ? eq.speeds : [])
    .filter((d) => d && typeof d === "object" && d.name && d.expr);
  if (speedDefs.length) {
    rows.push(h("h3", {}, "Quasi-velocities  u = Ψ(q) q̇, and the constraints"));
    const defs = speedDefs.map((d) => eqn(nameML(d.name), safe(d.expr), String(d.expr).length > 60 ? "eq wide" : "eq"));
    const cons = (s.constraints || []).filter((c) => c.expr).map((c) => String(c.expr).length > 60 ? wrapped(c.expr, el("mn", null, "0")) : eqn(safe(c.expr), el("mn", null, "0")));
    rows.push(h("div", { class: "eq-grid" }, defs, cons));
  }
  const kin = Object.entries(eq.kinematics || {});
  if (kin.length) {
    rows.push(h("h3", {}, "Kinematics  q̇ = Φ u + Φₜ"));
    rows.push(h("div", { class: "eq-grid" }, kin.map(([q, e]) => e == null ? eqn(dotted(q), omitted())
      : String(e).length > LONG_EXPR ? fold(() => dotted(q), e) : eqn(dotted(q), safe(e)))));
  }
  const M = eq.mass_matrix || [];
  const F = eq.forcing || [];
  if (M.length) {
    rows.push(h("h3", {}, "Equations of motion  M(q) u̇ = f"));
    M.forEach((row, r) => {
      const rname = speeds[r] || `u${r + 1}`;
      const folds = [];
      const lhs = mrow();
      let first = true;
      row.forEach((m, c) => {
        if (m == null) { // too large to print: named, not shown
          if (!first) lhs.append(mo("+"));
          first = false;
          lhs.append(mrow(sym("M", rname, speeds[c] || `u${c + 1}`), mo("\u2062"), dotted(speeds[c] || `u${c + 1}`)));
          return;
        }
        const ms = String(m).trim();
        if (ms === "0") return;
        if (!first) lhs.append(mo("+"));
        first = false;
        const ud = dotted(speeds[c] || `u${c + 1}`);
        if (ms === "1") { lhs.append(ud); return; }
        if (ms.length > LONG_EXPR) {
          folds.push(fold(() => sym("M", rname, speeds[c] || `u${c + 1}`), ms));
          lhs.append(mrow(sym("M", rname, speeds[c] || `u${c + 1}`), mo("\u2062"), ud));
          return;
        }
        const coeff = safe(ms);
        const needParen = /[+-]/.test(ms.replace(/^-/, ""));
        lhs.append(needParen ? mrow(mo("("), coeff, mo(")"), mo("\u2062"), ud) : mrow(coeff, mo("\u2062"), ud));
      });
      if (first) lhs.append(el("mn", null, "0"));
      const f = F[r] != null ? String(F[r]) : null;
      if (f == null) {
        rows.push(eqn(lhs, sym("f", rname)));
      } else if (f.length > LONG_EXPR) {
        rows.push(eqn(lhs, sym("f", rname)));
        folds.push(fold(() => sym("f", rname), f));
      } else {
        rows.push(eqn(lhs, safe(f)));
      }
      if (folds.length) rows.push(h("div", { class: "folds" }, folds));
    });
  }
  if (eq.kinetic_energy_in_speeds) {
    rows.push(h("h3", {}, "Kinetic energy in the speeds, constraints applied"));
    const T = () => el("msup", null, el("mi", null, "T"), mo("*"));
    rows.push(String(eq.kinetic_energy_in_speeds).length > 3 * LONG_EXPR ? fold(T, eq.kinetic_energy_in_speeds) : eqn(T(), safe(eq.kinetic_energy_in_speeds)));
  }
  if (eq.complete === false)
    rows.push(h("p", { class: "note" }, "Some expressions are too large to print and are named instead of shown; the integrator evaluates every one of them."));
  box.replaceChildren(
    h("h2", {}, "Derived equations ", eq.formulation ? badge(eq.formulation, "accent") : null),
    ...rows);
}

// ---- start ---------------------------------------------------------------------------

{
  // the token is kept for the tab only (sessionStorage), never read from the URL: a
  // link with ?token= would leak it into history, logs and referrers
  const t = sessionStorage.getItem("hamel.token");
  if (t) { $("token").value = t; $("token").hidden = false; }
}
renderRecent();
await connect(initialBase());
await loadExamples();
{
  const params = new URLSearchParams(location.search);
  const id = params.get("model");
  if (id) {
    // a shared link: wait for the server (a token may be asked for first), then open it
    if (!$("token").hidden && $("health").classList.contains("bad")) $("health").textContent += " — enter it to open the shared model";
    await state.connected;
    let simulation = null;
    try { simulation = params.get("run") ? JSON.parse(unb64url(params.get("run"))) : null; } catch { simulation = null; }
    const local = recentList().find((e) => e.id === id);
    await openModel(id, local && local.model, simulation || (local && local.simulation), params.get("job"));
  }
}
document.body.dataset.ready = "1";
