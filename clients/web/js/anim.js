// anim.js — the motion card: the trajectory played back and scrubbable, as a top view
// (path, heading, body outline) for systems moving in a plane, and as a 3-D scene for
// models with bodies (rolling disks as tori, other bodies as their inertia ellipsoids,
// frames as axes) drawn with three.js (vendored in vendor/three, loaded only when a
// model with bodies is shown).

import { compileExpr } from "./expr.js";
import { $, h } from "./dom.js";

const HEADING_NAMES = ["psi", "phi", "theta", "yaw", "heading", "th"];

/** The planar positions among the coordinates: x<s> with y<s>, or X<s> with Y<s>
 *  (x, y; x1, y1; x_c, y_c; X, Y), as [xname, yname] pairs. */
export function planarPairs(coords, has) {
  const pairs = [];
  for (const c of coords) {
    const m = /^([xX])(.*)$/.exec(c);
    const y = m && (m[1] === "x" ? "y" : "Y") + m[2];
    if (m && has(y)) pairs.push([c, y]);
  }
  return pairs;
}

/** The value of parameter p: a number or {value, unit}. */
const paramValue = (p) => (typeof p === "number" ? p : p && typeof p.value === "number" ? p.value : NaN);

export function setupAnim() {
  const card = $("anim-card");
  const top = $("anim-top");
  const host3d = $("anim-3d");
  const slider = $("anim-t");
  let data = null;      // {t, q, pairs, heading, model, env0}
  let index = 0;
  let playing = false;
  let last = 0;
  let tSim = 0;
  let raf = 0;
  let scene = null;     // the 3-D scene, when the model has bodies
  let view = "top";

  function clear() {
    stop();
    data = null;
    card.hidden = true;
    if (scene) { scene.dispose(); scene = null; }
  }

  /** Shows a result's trajectory. model: the model spec; params: the run's overrides. */
  async function show(result, model, summary, params) {
    clear();
    const tr = result && result.trajectory;
    if (!tr || !tr.t || tr.t.length < 2 || !tr.q) return;
    const coords = (summary && summary.coordinates) || Object.keys(tr.q);
    const pairs = planarPairs(coords, (n) => !!tr.q[n]);
    const hasBodies = model && ((Array.isArray(model.bodies) && model.bodies.length) || (Array.isArray(model.particles) && model.particles.length)) &&
      (Array.isArray(model.frames) || Array.isArray(model.points));
    if (!pairs.length && !hasBodies) return;
    const env0 = {};
    for (const [k, v] of Object.entries((model && model.parameters) || {})) env0[k] = paramValue(v);
    Object.assign(env0, params || {});
    const used = new Set(pairs.flat());
    const headingSel = $("anim-heading");
    const candidates = coords.filter((c) => !used.has(c));
    headingSel.replaceChildren(h("option", { value: "" }, "none"), ...candidates.map((c) => h("option", { value: c }, c)));
    // a usual name for the heading, else the one coordinate left besides the position
    headingSel.value = HEADING_NAMES.find((n) => candidates.includes(n)) || (pairs.length === 1 && candidates.length === 1 ? candidates[0] : "");
    data = { t: tr.t, q: tr.q, pairs, model, env0 };
    card.hidden = false;
    slider.max = String(tr.t.length - 1);
    slider.value = "0";
    index = 0;
    tSim = tr.t[0];
    $("anim-view-3d").disabled = !hasBodies;
    view = hasBodies ? "3d" : "top";
    if (hasBodies) {
      try {
        const { makeScene } = await import("./anim3d.js");
        scene = makeScene(host3d, model, env0, tr);
        card.dataset.sceneSize = String(scene.size); // the length the scene is scaled by
      } catch (e) {
        scene = null;
        view = "top";
        $("anim-view-3d").disabled = true;
        $("anim-note").textContent = `3-D view unavailable: ${e.message || e}`;
      }
    }
    if (!pairs.length && view === "top") { card.hidden = true; return; }
    $("anim-view-top").disabled = !pairs.length;
    setView(view);
    draw();
  }

  function setView(v) {
    view = v;
    top.hidden = v !== "top";
    host3d.hidden = v !== "3d";
    $("anim-heading-field").hidden = v !== "top";
    $("anim-view-top").classList.toggle("on", v === "top");
    $("anim-view-3d").classList.toggle("on", v === "3d");
    card.dataset.view = v;
    if (scene && v === "3d") scene.resize();
    draw();
  }

  function draw() {
    if (!data) return;
    const i = index;
    card.dataset.index = String(i);
    card.dataset.t = String(data.t[i]);
    $("anim-time").textContent = `t = ${data.t[i].toFixed(3)}`;
    if (view === "3d") {
      if (scene) scene.draw(i);
      // where the wheels reach down to (for a reader of the page's state; not while playing)
      if (scene && !playing && scene.wheelsLowest) card.dataset.wheelsLowest = String(scene.wheelsLowest());
    }
    else if (data.pairs.length) drawTop(i);
  }

  function drawTop(i) {
    const { q, pairs } = data;
    const dpr = window.devicePixelRatio || 1;
    const W = Math.max(280, top.clientWidth || 600), H = Math.round(Math.min(460, Math.max(260, W * 0.62)));
    if (top.width !== Math.round(W * dpr) || top.height !== Math.round(H * dpr)) {
      top.width = Math.round(W * dpr);
      top.height = Math.round(H * dpr);
      top.style.height = H + "px";
    }
    const g = top.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    // equal scales: the extent of every path with a margin for the outline
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const [xn, yn] of pairs) for (let k = 0; k < q[xn].length; k++) {
      x0 = Math.min(x0, q[xn][k]); x1 = Math.max(x1, q[xn][k]); y0 = Math.min(y0, q[yn][k]); y1 = Math.max(y1, q[yn][k]);
    }
    const span = Math.max(x1 - x0, y1 - y0, 1e-9);
    const size = 0.07 * span + 1e-9; // the outline's half-length
    x0 -= 2 * size; x1 += 2 * size; y0 -= 2 * size; y1 += 2 * size;
    const s = Math.min((W - 20) / (x1 - x0), (H - 20) / (y1 - y0));
    const ox = (W - s * (x1 + x0)) / 2, oy = (H + s * (y1 + y0)) / 2;
    const X = (x) => ox + s * x, Y = (y) => oy - s * y;
    // grid
    g.strokeStyle = "#e8ecf0";
    g.lineWidth = 1;
    const step = Math.pow(10, Math.floor(Math.log10(span / 2)));
    for (let v = Math.ceil(x0 / step) * step; v <= x1; v += step) { g.beginPath(); g.moveTo(X(v), 0); g.lineTo(X(v), H); g.stroke(); }
    for (let v = Math.ceil(y0 / step) * step; v <= y1; v += step) { g.beginPath(); g.moveTo(0, Y(v)); g.lineTo(W, Y(v)); g.stroke(); }
    const colors = ["#0072B2", "#D55E00", "#009E73", "#CC79A7"];
    pairs.forEach(([xn, yn], k) => {
      const c = colors[k % colors.length];
      // the whole path faint, the part travelled solid
      g.strokeStyle = c + "40";
      g.lineWidth = 1.5;
      g.beginPath();
      q[xn].forEach((x, j) => (j ? g.lineTo(X(x), Y(q[yn][j])) : g.moveTo(X(x), Y(q[yn][j]))));
      g.stroke();
      g.strokeStyle = c;
      g.lineWidth = 2.2;
      g.beginPath();
      for (let j = 0; j <= i; j++) (j ? g.lineTo(X(q[xn][j]), Y(q[yn][j])) : g.moveTo(X(q[xn][j]), Y(q[yn][j])));
      g.stroke();
    });
    const hn = $("anim-heading").value;
    if (pairs.length > 1) {
      // several points: the body is the polygon through them
      g.strokeStyle = "#1d2733";
      g.lineWidth = 3;
      g.beginPath();
      pairs.forEach(([xn, yn], k) => (k ? g.lineTo(X(q[xn][i]), Y(q[yn][i])) : g.moveTo(X(q[xn][i]), Y(q[yn][i]))));
      g.stroke();
      for (const [xn, yn] of pairs) { g.fillStyle = "#1d2733"; g.beginPath(); g.arc(X(q[xn][i]), Y(q[yn][i]), 5, 0, 2 * Math.PI); g.fill(); }
    }
    const [xn, yn] = pairs[0];
    const cx = X(q[xn][i]), cy = Y(q[yn][i]);
    if (hn && q[hn]) {
      // the body outline: a hull pointing along the heading
      const a = q[hn][i];
      const L = s * size;
      g.save();
      g.translate(cx, cy);
      g.rotate(-a);
      g.fillStyle = "rgba(31, 95, 168, 0.25)";
      g.strokeStyle = "#1f5fa8";
      g.lineWidth = 2;
      g.beginPath();
      g.moveTo(L, 0); g.lineTo(-0.7 * L, 0.45 * L); g.lineTo(-0.45 * L, 0); g.lineTo(-0.7 * L, -0.45 * L); g.closePath();
      g.fill(); g.stroke();
      g.restore();
    } else if (pairs.length === 1) {
      g.fillStyle = "#1f5fa8";
      g.beginPath(); g.arc(cx, cy, 6, 0, 2 * Math.PI); g.fill();
    }
  }

  function frame(now) {
    if (!playing || !data) return;
    const dt = Math.min(0.1, (now - last) / 1000);
    last = now;
    const speed = Number($("anim-speed").value) || 1;
    const t = data.t;
    tSim += dt * speed;
    if (tSim > t[t.length - 1]) tSim = t[0];
    let k = index;
    if (t[k] > tSim) k = 0;
    while (k < t.length - 1 && t[k + 1] <= tSim) k++;
    index = k;
    slider.value = String(k);
    draw();
    raf = requestAnimationFrame(frame);
  }

  function play() {
    if (!data) return;
    playing = true;
    $("anim-play").textContent = "Pause";
    last = performance.now();
    tSim = data.t[index];
    raf = requestAnimationFrame(frame);
  }
  function stop() {
    playing = false;
    cancelAnimationFrame(raf);
    $("anim-play").textContent = "Play";
  }

  $("anim-play").addEventListener("click", () => (playing ? stop() : play()));
  slider.addEventListener("input", () => { index = Number(slider.value); if (data) tSim = data.t[index]; draw(); });
  $("anim-heading").addEventListener("change", draw);
  $("anim-view-top").addEventListener("click", () => setView("top"));
  $("anim-view-3d").addEventListener("click", () => setView("3d"));
  new ResizeObserver(() => { if (data) { if (scene) scene.resize(); draw(); } }).observe(card);
  return { show, clear, seek: (i) => { index = i; slider.value = String(i); draw(); } };
}
