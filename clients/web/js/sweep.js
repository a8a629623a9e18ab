// sweep.js — the sweep card: vary one or two parameters or initial values over a
// range, run every combination through POST /v1/batches, read the NDJSON stream as
// the runs finish (live progress), overlay the trajectories and plot a chosen final
// quantity against the swept value (one curve per value of the second variable).

import { ApiError } from "./api.js";
import { lineChart, fmt } from "./chart.js";
import { $, h } from "./dom.js";
import { compileExpr } from "./expr.js";

// Colour of run k of n: a perceptual ramp (viridis, sampled), first value dark blue.
const RAMP = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];
export function rampColor(f) {
  const x = Math.max(0, Math.min(1, f)) * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(x));
  const a = RAMP[i], b = RAMP[i + 1], u = x - i;
  const c = (s, o) => parseInt(s.slice(o, o + 2), 16);
  const mix = (o) => Math.round(c(a, o) + (c(b, o) - c(a, o)) * u).toString(16).padStart(2, "0");
  return "#" + mix(1) + mix(3) + mix(5);
}

const MAX_RUNS = 400;
const SWEEP_SAMPLES = 301; // per run: enough to draw, light enough for 400 runs

export function setupSweep({ getApi, prepare, chart, unitOf }) {
  let lines = [];        // the batch's lines by run index
  let plan = null;       // {vars: [{key, values}], runs: [{index, a, b}]}
  let abort = null;
  let batchId = null;
  let redrawTimer = null;
  let lastModel = null, lastInitial = null;
  let eventNames = []; // the request's events: summary quantities "t of the first NAME"

  /** The names one can vary: parameters, initial coordinates and speeds. */
  function refresh(summary, model, initial) {
    const opts = [];
    // before the model is validated (no summary) its own names, not those of the initial
    // state, which may still be the previous model's
    const names = (list) => (Array.isArray(list) ? list.map((x) => (typeof x === "string" ? x : x && x.name)).filter(Boolean) : null);
    const coords = (summary && summary.coordinates) || names(model && model.coordinates) || Object.keys((initial && initial.q) || {});
    for (const p of Object.keys((model && model.parameters) || {})) opts.push([`parameters.${p}`, `parameter ${p}`]);
    for (const q of coords) opts.push([`initial.q.${q}`, `initial ${q}`]);
    const byQdot = initial && initial.qdot && !initial.speeds;
    const vnames = byQdot ? ((summary && summary.coordinates) || names(model && model.coordinates) || Object.keys(initial.qdot))
      : ((summary && summary.speeds) || names(model && model.speeds) || Object.keys((initial && initial.speeds) || {}));
    for (const u of vnames) opts.push([`initial.${byQdot ? "qdot" : "speeds"}.${u}`, `initial ${u}${byQdot ? "'" : ""}`]);
    const fill = (sel, none) => {
      const was = sel.value;
      sel.replaceChildren(...(none ? [h("option", { value: "" }, "— none —")] : []), ...opts.map(([v, l]) => h("option", { value: v }, l)));
      if (opts.some(([v]) => v === was)) sel.value = was;
    };
    const varWas = $("sw-var").value;
    fill($("sw-var"), false);
    if (!varWas) { const sp = opts.find(([v]) => v.startsWith("initial.speeds.") || v.startsWith("initial.qdot.")); if (sp) $("sw-var").value = sp[0]; }
    fill($("sw-var2"), true);
    const quantities = [];
    for (const q of coords) quantities.push([`q.${q}`, q]);
    for (const u of (summary && summary.speeds) || names(model && model.speeds) || Object.keys((initial && initial.speeds) || {})) quantities.push([`speeds.${u}`, u]);
    const qsel = $("sw-quantity"), fsel = $("sw-final");
    const qwas = qsel.value, fwas = fsel.value;
    qsel.replaceChildren(...quantities.map(([v, l]) => h("option", { value: v }, `${l}(t)`)));
    fsel.replaceChildren(...quantities.map(([v, l]) => h("option", { value: "final." + v }, `final ${l}`)),
      h("option", { value: "energy" }, "max |E − E₀|"), h("option", { value: "residual" }, "max constraint residual"),
      h("option", { value: "expr" }, "an expression of the final state…"));
    setEvents(eventNames);
    if (quantities.some(([v]) => v === qwas)) qsel.value = qwas;
    if ([...fsel.options].some((o) => o.value === fwas)) fsel.value = fwas;
    const c = ((summary && summary.coordinates) || []).find((n) => /^x/.test(n));
    if (!qwas && c) qsel.value = `q.${c}`;
    if (!fwas && c) fsel.value = `final.q.${c}`;
    if ($("sw-var").value !== varWas || !$("sw-from").value) defaults($("sw-var"), $("sw-from"), $("sw-to"), model, initial);
    lastModel = model; lastInitial = initial;
    $("sw-card").dataset.ready = "1";
  }

  /** The request's events as summary quantities: the time of each one's first crossing
   *  (a lift-off time, a fall time against the swept value). */
  function setEvents(names) {
    eventNames = [...new Set((names || []).filter(Boolean))];
    const fsel = $("sw-final");
    const was = fsel.value;
    for (const o of [...fsel.options]) if (o.value.startsWith("event.")) o.remove();
    const energy = fsel.querySelector('option[value="energy"]');
    for (const n of eventNames) fsel.insertBefore(h("option", { value: "event." + n }, `time of ${n} (first)`), energy);
    if ([...fsel.options].some((o) => o.value === was)) fsel.value = was;
  }

  function currentValue(key, model, initial) {
    const [g, a, b] = key.split(".");
    if (g === "parameters") { const v = model && model.parameters && model.parameters[a]; return typeof v === "object" && v ? v.value : v; }
    return initial && initial[a] && initial[a][b];
  }

  function defaults(sel, from, to, model, initial) {
    const v = Number(currentValue(sel.value, model, initial));
    if (!Number.isFinite(v) || v === 0) { from.value = -1; to.value = 1; return; }
    from.value = Number((v * 0.5).toPrecision(6));
    to.value = Number((v * 1.5).toPrecision(6));
  }

  function range(from, to, n) {
    const a = Number(from), b = Number(to), k = Math.round(Number(n));
    if (!Number.isFinite(a) || !Number.isFinite(b) || !(k >= 1)) return null;
    return Array.from({ length: k }, (_, i) => (k === 1 ? a : a + ((b - a) * i) / (k - 1)));
  }

  /** A run's partial request setting `key` to v (merged over the base by the server). */
  function setKey(run, key, v) {
    const [g, a, b] = key.split(".");
    if (g === "parameters") { run.parameters = { ...(run.parameters || {}), [a]: v }; return run; }
    run.initial = run.initial || {};
    run.initial[a] = { ...(run.initial[a] || {}), [b]: v };
    return run;
  }

  function problem(p) {
    const box = $("sw-problem");
    box.hidden = !p;
    if (!p) return box.replaceChildren();
    const errs = Array.isArray(p.errors) ? p.errors : [];
    box.replaceChildren(h("div", { class: "problem-title" }, p.title || "Error"),
      p.detail ? h("p", { class: "detail" }, p.detail) : null,
      errs.length ? h("ul", { class: "errors" }, errs.map((e) => h("li", {}, h("span", { class: "reason" }, e.reason || ""), e.path ? h("code", { class: "path" }, e.path) : null))) : null);
  }

  /** The problem shown when runs of a sweep failed: how many, and for the first few the
   *  swept values and the run's own problem (its title and detail). */
  function failures(total, failed) {
    const errors = [];
    for (const r of plan.runs) {
      const line = lines[r.index];
      if (!line || line.status === "done" || errors.length >= 5) continue;
      const p = line.problem || {};
      const at = plan.vars.map((v, k) => `${label(v.key)} = ${fmt(k === 0 ? r.a : r.b, 6)}`).join(", ");
      errors.push({ reason: `${at}: ${p.title || line.status}${p.detail ? ` (${p.detail})` : ""}`, path: `runs[${r.index}]` });
    }
    return { title: `${failed} of ${total} runs failed`, detail: "Their curves and points are left out.", errors };
  }

  function progress(done, total, label) {
    $("sw-bar").style.width = `${total ? (100 * done) / total : 0}%`;
    $("sw-progress-text").textContent = label || `${done} of ${total} runs`;
  }

  async function run() {
    if (abort) return;
    problem(null);
    const v1 = $("sw-var").value, v2 = $("sw-var2").value;
    const a = range($("sw-from").value, $("sw-to").value, $("sw-n").value);
    const b = v2 ? range($("sw-from2").value, $("sw-to2").value, $("sw-n2").value) : [null];
    if (!v1 || !a || !b) return problem({ title: "Check the sweep", detail: "Choose what to vary; from and to must be numbers, runs a whole number of at least 1." });
    if (v2 === v1) return problem({ title: "Check the sweep", detail: "The second variable must differ from the first." });
    if (a.length * b.length > MAX_RUNS) return problem({ title: "Too many runs", detail: `${a.length * b.length} runs; the page sweeps at most ${MAX_RUNS} at once.` });
    const ctx = await prepare();
    if (!ctx) return; // the model or the settings have a problem, shown beside them
    // the model validated: its names; a variable chosen for another model is not sent
    refresh(ctx.summary, { parameters: ctx.summary.parameters || ctx.params || {} }, ctx.request.initial);
    const known = new Set([...$("sw-var").options].map((o) => o.value));
    const stale = [v1, v2].filter((v) => v && !known.has(v));
    if (stale.length) {
      return problem({ title: "Check the sweep", detail: `${stale.join(" and ")} is not a parameter, coordinate or speed of this model: choose what to vary again.` });
    }
    setEvents((ctx.request.events || []).map((e) => e.name));
    const base = { ...ctx.request };
    delete base.model_id;
    base.output = { samples: Math.min(SWEEP_SAMPLES, (base.output && base.output.samples) || SWEEP_SAMPLES) };
    base.hamel = "none";
    const runs = [];
    plan = { vars: [{ key: v1, values: a }, ...(v2 ? [{ key: v2, values: b }] : [])], runs: [], summary: ctx.summary, unitOf: ctx.unitOf,
      params: { ...(ctx.params || {}), ...(base.parameters || {}) } };
    for (let j = 0; j < b.length; j++) {
      for (let i = 0; i < a.length; i++) {
        let r = setKey({}, v1, a[i]);
        if (v2) r = setKey(r, v2, b[j]);
        plan.runs.push({ index: runs.length, a: a[i], b: b[j], i, j });
        runs.push(r);
      }
    }
    lines = new Array(runs.length);
    batchId = null;
    abort = new AbortController();
    $("sw-run").disabled = true;
    $("sw-cancel").disabled = false;
    $("sw-card").dataset.state = "running";
    let done = 0, failed = 0;
    progress(0, runs.length, `0 of ${runs.length} runs · starting`);
    const t0 = performance.now();
    try {
      const res = await getApi().batchStream({ model_id: ctx.request.model_id, base, runs, fields: ["final", "checks", "trajectory", "events"] }, (line) => {
        if (line.done) return;
        lines[line.index] = line;
        done++;
        if (line.status !== "done") failed++;
        progress(done, runs.length, `${done} of ${runs.length} runs${failed ? ` · ${failed} failed` : ""} · ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        clearTimeout(redrawTimer);
        redrawTimer = setTimeout(draw, 150);
      }, abort.signal, (id) => { batchId = id; });
      batchId = res.batchId || batchId;
      $("sw-card").dataset.state = "done";
      $("sw-card").dataset.runs = String(done);
      if (failed) problem(failures(runs.length, failed));
    } catch (e) {
      if (e && e.name === "AbortError") {
        progress(done, runs.length, `cancelled after ${done} of ${runs.length} runs`);
        $("sw-card").dataset.state = "cancelled";
      } else {
        $("sw-card").dataset.state = "failed";
        problem(e instanceof ApiError ? e.problem : { title: "The sweep failed", detail: String(e && e.message || e) });
      }
    } finally {
      abort = null;
      $("sw-run").disabled = false;
      $("sw-cancel").disabled = true;
      clearTimeout(redrawTimer);
      draw();
    }
  }

  const label = (key) => {
    const parts = key.split(".");
    const name = parts[parts.length - 1];
    const u = plan && plan.unitOf ? plan.unitOf(name) : "";
    return (parts[0] === "parameters" ? name : `${name}(0)`) + (u ? ` [${u}]` : "");
  };

  function valueOf(line, what) {
    if (!line || line.status !== "done") return NaN;
    if (what === "expr") {
      const f = line.final || {};
      const env = { ...(plan.params || {}), ...((line.run && line.run.parameters) || {}), t: f.t };
      for (const g of ["q", "speeds"]) Object.assign(env, f[g] || {});
      for (const [k, v] of Object.entries(f.qdot || {})) env[k + "'"] = v;
      const r = plan.runs[line.index];
      for (const v of plan.vars) {
        const [g, a] = v.key.split(".");
        if (g === "parameters") env[a] = v === plan.vars[0] ? r.a : r.b;
      }
      try { return exprFn()(env); } catch { return NaN; }
    }
    if (what.startsWith("event.")) {
      const name = what.slice(6);
      const e = (Array.isArray(line.events) ? line.events : []).find((x) => x.name === name);
      return e ? e.t : NaN; // a run without the crossing has no point
    }
    if (what === "energy") return line.checks && line.checks.energy ? line.checks.energy.max_abs_drift : NaN;
    if (what === "residual") return line.checks && line.checks.constraints ? line.checks.constraints.max_abs_residual : NaN;
    const [, g, n] = what.split(".");
    const v = line.final && line.final[g] && line.final[g][n];
    return typeof v === "number" ? v : NaN;
  }

  function draw() {
    if (!plan) return;
    const [g, n] = $("sw-quantity").value.split(".");
    const total = plan.runs.length;
    const series = [];
    for (const r of plan.runs) {
      const line = lines[r.index];
      const tr = line && line.trajectory;
      if (!tr || !tr[g] || !tr[g][n]) continue;
      const f = plan.vars.length > 1 ? (r.j + r.i / plan.vars[0].values.length) / plan.vars[1].values.length : (total > 1 ? r.i / (total - 1) : 0);
      series.push({ name: "", x: tr.t, y: tr[g][n], color: rampColor(f), noLegend: true, width: 1.4, "data-run": r.index });
    }
    const varDesc = plan.vars.map((v) => `${label(v.key)} from ${fmt(v.values[0], 4)} to ${fmt(v.values[v.values.length - 1], 4)}`).join("; ");
    // the units the model declares go on the axes, as in the run's own plots
    const withUnit = (name) => { const u = plan.unitOf ? plan.unitOf(name) : ""; return u ? `${name} [${u}]` : name; };
    chart("plot-sweep", "line", { title: `${n}(t), ${series.length} runs`, xLabel: withUnit("t"), yLabel: withUnit(n), series },
      `One curve per run, coloured by ${varDesc} (dark → light).`);
    const what = $("sw-final").value;
    const whatLabel = what === "expr" ? ($("sw-expr").value.trim() || "expression") : $("sw-final").selectedOptions[0] ? $("sw-final").selectedOptions[0].textContent : what;
    const v0 = plan.vars[0];
    const sum = [];
    const bvals = plan.vars.length > 1 ? plan.vars[1].values : [null];
    bvals.forEach((bv, j) => {
      const xs = [], ys = [];
      for (const r of plan.runs.filter((x) => x.j === j)) { xs.push(r.a); ys.push(valueOf(lines[r.index], what)); }
      sum.push({ name: bv == null ? whatLabel : `${label(plan.vars[1].key)} = ${fmt(bv, 4)}`, x: xs, y: ys, points: true, color: bvals.length > 1 ? rampColor(bvals.length > 1 ? j / (bvals.length - 1) : 0) : "#0072B2", noLegend: bvals.length === 1 || bvals.length > 8 });
    });
    const logY = what === "energy" || what === "residual";
    const lastY = sum[0] && sum[0].y.length ? sum[0].y[sum[0].y.length - 1] : NaN;
    $("plot-sweep-summary").dataset.lastY = String(lastY);
    const fu = what.startsWith("final.") && plan.unitOf ? plan.unitOf(what.split(".")[2]) : what.startsWith("event.") && plan.unitOf ? plan.unitOf("t") : "";
    chart("plot-sweep-summary", "line", { title: `${whatLabel} against ${label(v0.key)}`, xLabel: label(v0.key), yLabel: fu ? `${whatLabel} [${fu}]` : whatLabel, series: sum, logY },
      plan.vars.length > 1 ? "One curve per value of the second variable." : "One point per run.");
  }

  $("sw-run").addEventListener("click", run);
  $("sw-cancel").addEventListener("click", async () => {
    if (!abort) return;
    abort.abort();
    if (batchId) try { await getApi().cancelBatch(batchId); } catch { /* finished */ }
  });
  // a sweep still running when the tab leaves (reload, another page, closed) is cancelled
  // on the server: its lines had nowhere to go, and the runs would hold the workers. A
  // keepalive request outlives the page.
  window.addEventListener("pagehide", () => {
    if (!abort || !batchId) return;
    const api = getApi();
    const headers = api.token ? { Authorization: `Bearer ${api.token}` } : {};
    try {
      fetch(api.url(`/v1/batches/${encodeURIComponent(batchId)}`), { method: "DELETE", headers, keepalive: true }).catch(() => {});
    } catch { /* the page is going: nothing to tell */ }
  });
  $("sw-quantity").addEventListener("change", draw);
  $("sw-var").addEventListener("change", () => defaults($("sw-var"), $("sw-from"), $("sw-to"), lastModel, lastInitial));
  $("sw-var2").addEventListener("change", () => { if ($("sw-var2").value) defaults($("sw-var2"), $("sw-from2"), $("sw-to2"), lastModel, lastInitial); });
  let exprCache = null;
  function exprFn() {
    const src = $("sw-expr").value.trim();
    if (!exprCache || exprCache.src !== src) {
      let f;
      try { f = compileExpr(src || "0"); $("sw-expr").classList.remove("invalid"); } catch { f = () => NaN; $("sw-expr").classList.add("invalid"); }
      exprCache = { src, f };
    }
    return exprCache.f;
  }
  $("sw-final").addEventListener("change", () => { $("sw-expr-field").hidden = $("sw-final").value !== "expr"; draw(); });
  $("sw-expr").addEventListener("change", draw);
  return { refresh, run, setEvents, defaults: () => null };
}
