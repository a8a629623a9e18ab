// chart.js — small SVG line and bar charts: linear or log axes, "nice" ticks, a
// legend, equal aspect for paths in the plane, and a hover read-out. No library:
// the plots here are a few hundred points each and SVG keeps them crisp in
// screenshots and selectable in tests.

const SVG = "http://www.w3.org/2000/svg";

// Okabe–Ito, readable by colour-blind readers; yellow dropped (too pale on white).
export const PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#8C564B"];

function svg(tag, attrs, parent) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
  if (parent) parent.append(n);
  return n;
}

function text(parent, x, y, s, attrs = {}) {
  const t = svg("text", { x, y, ...attrs }, parent);
  t.textContent = s;
  return t;
}

/** Linear ticks at 1, 2, 5 × 10^k covering [lo, hi]. */
export function niceTicks(lo, hi, count = 6) {
  if (!(hi > lo)) { const d = Math.abs(lo) || 1; lo -= d / 2; hi += d / 2; }
  const raw = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= raw) || 10 * mag;
  const ticks = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  }
  return { ticks, step, lo: Math.min(lo, ticks[0] ?? lo), hi: Math.max(hi, ticks[ticks.length - 1] ?? hi) };
}

/** A number formatted for an axis: few digits, exponent when tiny or huge. */
export function fmt(v, digits = 3) {
  if (v === 0) return "0";
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(Math.max(0, digits - 1)).replace("e+", "e");
  return String(Number(v.toPrecision(digits)));
}

/** Labels for the ticks of one axis: as few digits as fmt gives, more while two ticks
 *  would read the same (1.005 and 1.01 are not both "1.01", 1 and 1.005 not both "1"). */
export function tickLabels(ticks) {
  for (let d = 3; d <= 15; d++) {
    const l = ticks.map((v) => fmt(v, d));
    if (new Set(l).size === l.length) return l;
  }
  return ticks.map((v) => fmt(v, 15));
}

function logLabel(p) {
  return "10" + String(p).replace("-", "⁻").replace(/\d/g, (d) => "⁰¹²³⁴⁵⁶⁷⁸⁹"[d]);
}

let measureCtx = null;
function measure(s) {
  if (!measureCtx) {
    measureCtx = document.createElement("canvas").getContext("2d");
    measureCtx.font = `12.5px ${getComputedStyle(document.body).fontFamily}`;
  }
  return measureCtx.measureText(s).width;
}

function hostWidth(host) {
  return Math.max(360, Math.round(host.clientWidth || 640));
}

function extent(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) if (Number.isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; }
  return [lo, hi];
}

/**
 * Draws a line chart into `host` (emptied first).
 * opts: {title, xLabel, yLabel, series: [{name, x: [], y: [], color?, dash?}],
 *        logY?, equalAspect?, height?, markers?: [{x, y, label}],
 *        vlines?: [{x, label?, color?, dash?}]}
 * Returns the <svg> element.
 */
export function lineChart(host, opts) {
  host.replaceChildren();
  // drawn at the host's real width so text keeps its size; redrawn on resize
  const W = hostWidth(host), H = opts.height || Math.round(Math.min(420, Math.max(260, W * 0.6)));
  const M = { l: 68, r: 16, t: 34, b: 46 };
  // legend entries laid out in rows under the title before the plot area is fixed
  const entries = [];
  {
    let lx = M.l, row = 0;
    opts.series.forEach((s, k) => {
      if (!s.name || s.noLegend) return;
      const w = 24 + measure(s.name) + 18;
      if (lx + w > W - M.r && lx > M.l) { row++; lx = M.l; }
      entries.push({ s, k, x: lx, y: 36 + 18 * row });
      lx += w;
    });
    if (entries.length) M.t = 54 + 18 * row;
  }
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": opts.title || "chart" }, host);
  if (opts.title) text(root, M.l, 20, opts.title, { class: "chart-title" });

  const xs = opts.series.flatMap((s) => s.x);
  let ys = opts.series.flatMap((s) => s.y);
  if (opts.logY) ys = ys.filter((v) => v > 0);
  let [x0, x1] = extent(xs);
  let [y0, y1] = extent(ys);
  if (!Number.isFinite(x0)) { x0 = 0; x1 = 1; }
  if (!Number.isFinite(y0)) { y0 = opts.logY ? 1e-16 : 0; y1 = opts.logY ? 1e-12 : 1; }
  // a zoomed or panned view (set by the tools below): exact ranges, ticks inside them
  const view = opts.view || null;
  if (view && view.x) [x0, x1] = view.x;
  if (view && view.y && !opts.logY && !opts.equalAspect) [y0, y1] = view.y;
  const exact = (t, lo, hi) => { t.lo = lo; t.hi = hi; t.ticks = t.ticks.filter((v) => v >= lo - 1e-12 * Math.abs(hi - lo) && v <= hi + 1e-12 * Math.abs(hi - lo)); return t; };

  let pw = W - M.l - M.r;
  const ph = H - M.t - M.b;
  let xt, yt, X, Y;
  if (opts.logY) {
    let p0 = Math.floor(Math.log10(y0)), p1 = Math.ceil(Math.log10(y1));
    if (p1 === p0) { p0 -= 1; p1 += 1; }
    const every = Math.max(1, Math.ceil((p1 - p0) / 7));
    yt = [];
    for (let p = p0; p <= p1; p += every) yt.push(p);
    Y = (v) => M.t + ph - ((Math.log10(v) - p0) / (p1 - p0)) * ph;
    xt = niceTicks(x0, x1);
    if (view && view.x) exact(xt, x0, x1);
    X = (v) => M.l + ((v - xt.lo) / (xt.hi - xt.lo)) * pw;
  } else {
    if (opts.equalAspect) {
      // same units per pixel on both axes: grow the narrower range about its centre
      const pad = 0.06;
      let dx = (x1 - x0) || 1, dy = (y1 - y0) || 1;
      dx *= 1 + pad; dy *= 1 + pad;
      const scale = Math.max(dx / pw, dy / ph);
      const cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
      x0 = cx - (scale * pw) / 2; x1 = cx + (scale * pw) / 2;
      y0 = cy - (scale * ph) / 2; y1 = cy + (scale * ph) / 2;
      xt = niceTicks(x0, x1, 8); yt = niceTicks(y0, y1, 5);
      xt.lo = x0; xt.hi = x1; yt.lo = y0; yt.hi = y1;
      xt.ticks = xt.ticks.filter((v) => v >= x0 && v <= x1);
      yt.ticks = yt.ticks.filter((v) => v >= y0 && v <= y1);
    } else {
      xt = niceTicks(x0, x1);
      const pad = (y1 - y0) * 0.04;
      yt = niceTicks(y0 - pad, y1 + pad, 5);
      if (view && view.x) exact(xt, x0, x1);
      if (view && view.y) exact(yt, y0, y1);
      // room for the widest tick label beside the axis's own label
      const widest = Math.max(0, ...tickLabels(yt.ticks).map(measure));
      if (28 + widest + 8 > M.l) { M.l = Math.ceil(28 + widest + 8); pw = W - M.l - M.r; }
    }
    X = (v) => M.l + ((v - xt.lo) / (xt.hi - xt.lo)) * pw;
    Y = (v) => M.t + ph - ((v - yt.lo) / (yt.hi - yt.lo)) * ph;
  }

  // grid and axes
  const grid = svg("g", { class: "grid" }, root);
  const axes = svg("g", { class: "axis" }, root);
  const xLabels = tickLabels(xt.ticks);
  xt.ticks.forEach((v, k) => {
    const x = X(v);
    svg("line", { x1: x, x2: x, y1: M.t, y2: M.t + ph }, grid);
    text(axes, x, M.t + ph + 16, xLabels[k], { "text-anchor": "middle" });
  });
  if (opts.logY) {
    for (const p of yt) {
      const y = Y(Math.pow(10, p));
      svg("line", { x1: M.l, x2: M.l + pw, y1: y, y2: y }, grid);
      text(axes, M.l - 8, y + 4, logLabel(p), { "text-anchor": "end" });
    }
  } else {
    const yLabels = tickLabels(yt.ticks);
    yt.ticks.forEach((v, k) => {
      const y = Y(v);
      svg("line", { x1: M.l, x2: M.l + pw, y1: y, y2: y, class: v === 0 ? "zero" : "" }, grid);
      text(axes, M.l - 8, y + 4, yLabels[k], { "text-anchor": "end" });
    });
  }
  svg("rect", { x: M.l, y: M.t, width: pw, height: ph, class: "frame" }, root);
  if (opts.xLabel) text(axes, M.l + pw / 2, H - 8, opts.xLabel, { "text-anchor": "middle", class: "label" });
  if (opts.yLabel) {
    text(axes, 14, M.t + ph / 2, opts.yLabel, { "text-anchor": "middle", class: "label", transform: `rotate(-90 14 ${M.t + ph / 2})` });
  }

  // series
  const clip = "clip" + Math.random().toString(36).slice(2);
  const defs = svg("defs", null, root);
  svg("rect", { x: M.l, y: M.t, width: pw, height: ph }, svg("clipPath", { id: clip }, defs));
  const plot = svg("g", { "clip-path": `url(#${clip})` }, root);
  opts.series.forEach((s, k) => {
    const color = s.color || PALETTE[k % PALETTE.length];
    let d = "", pen = false;
    for (let i = 0; i < s.x.length; i++) {
      const ok = Number.isFinite(s.x[i]) && Number.isFinite(s.y[i]) && (!opts.logY || s.y[i] > 0);
      if (!ok) { pen = false; continue; }
      d += (pen ? "L" : "M") + X(s.x[i]).toFixed(2) + "," + Y(s.y[i]).toFixed(2);
      pen = true;
    }
    if (s.dots) {
      const g = svg("g", { class: "dots", fill: color, "data-series": s.name }, plot);
      for (let i = 0; i < s.x.length; i++) {
        if (Number.isFinite(s.y[i]) && (!opts.logY || s.y[i] > 0)) svg("circle", { cx: X(s.x[i]).toFixed(1), cy: Y(s.y[i]).toFixed(1), r: 1.7 }, g);
      }
      return;
    }
    svg("path", { d, class: "series", stroke: color, "data-series": s.name, ...(s.dash ? { "stroke-dasharray": s.dash } : {}), ...(s.width ? { style: `stroke-width:${s.width}` } : {}) }, plot);
    if (s.points) {
      for (let i = 0; i < s.x.length; i++) {
        if (Number.isFinite(s.y[i]) && (!opts.logY || s.y[i] > 0)) svg("circle", { cx: X(s.x[i]), cy: Y(s.y[i]), r: 2.5, fill: color }, plot);
      }
    }
  });
  // vertical markers (events, lift-off, slip, stability changes): a dashed line across
  // the plot at x, its label at the top, staggered so neighbours stay readable
  (opts.vlines || []).forEach((v, k) => {
    if (!Number.isFinite(v.x)) return;
    const x = X(v.x);
    svg("line", { x1: x.toFixed(2), x2: x.toFixed(2), y1: M.t, y2: M.t + ph, class: "vline", stroke: v.color || "#555", "stroke-dasharray": v.dash || "4 3", "data-x": String(v.x), "data-label": v.label || "" }, plot);
    // near the right edge the label goes to the line's left
    const left = x > M.l + 0.8 * pw;
    if (v.label) text(plot, left ? x - 4 : x + 4, M.t + 13 + 14 * (k % 3), v.label, { class: "vline-label", fill: v.color || "#555", "text-anchor": left ? "end" : "start" });
  });
  for (const mk of opts.markers || []) {
    svg("circle", { cx: X(mk.x), cy: Y(mk.y), r: 4.5, class: "marker", fill: mk.color || "#222" }, plot);
    if (mk.label) text(root, X(mk.x) + 7, Y(mk.y) - 7, mk.label, { class: "marker-label" });
  }

  // legend
  const legend = svg("g", { class: "legend" }, root);
  for (const { s, k, x, y } of entries) {
    const color = s.color || PALETTE[k % PALETTE.length];
    if (s.dots) {
      for (const dx of [2, 7, 12]) svg("circle", { cx: x + dx, cy: y + 3, r: 1.8, fill: color }, legend);
      svg("line", { x1: x, x2: x + 18, y1: y - 3, y2: y - 3, stroke: color, "stroke-width": 2, "stroke-dasharray": "4 2" }, legend);
    }
    else svg("line", { x1: x, x2: x + 18, y1: y, y2: y, stroke: color, "stroke-width": s.dash ? 2 : 3, ...(s.dash ? { "stroke-dasharray": s.dash } : {}) }, legend);
    text(legend, x + 24, y + 4, s.name);
  }

  hover(root, opts, X, Y, M, pw, ph);
  const range = { x: [xt.lo, xt.hi], y: opts.logY ? null : [yt.lo, yt.hi] };
  root.dataset.x0 = String(range.x[0]);
  root.dataset.x1 = String(range.x[1]);
  tools(host, root, opts, range, { M, pw, ph });
  return root;
}

// ---- zoom, pan and export ---------------------------------------------------------------

/** Buttons over a chart (zoom in and out, reset, PNG, SVG), drag to pan, Ctrl + wheel
 *  to zoom at the pointer, double-click to reset. The view lives in opts.view, so a
 *  redraw on resize keeps it. */
function tools(host, root, opts, range, { M, pw, ph }) {
  host.style.position = "relative";
  const redraw = () => lineChart(host, opts);
  const zoom = (f, cx, cy) => {
    const [a, b] = range.x;
    const px = cx ?? (a + b) / 2;
    const v = { x: [px - (px - a) * f, px + (b - px) * f] };
    if (range.y && !opts.equalAspect) {
      const [c, d] = range.y;
      const py = cy ?? (c + d) / 2;
      v.y = [py - (py - c) * f, py + (d - py) * f];
    }
    opts.view = v;
    redraw();
  };
  const bar = document.createElement("div");
  bar.className = "chart-tools";
  const button = (label, title, fn, testid) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.title = title;
    if (testid) b.dataset.testid = testid;
    b.addEventListener("click", fn);
    bar.append(b);
  };
  button("+", "zoom in (or Ctrl + wheel over the plot; drag to pan)", () => zoom(0.5), "zoom-in");
  button("−", "zoom out", () => zoom(2), "zoom-out");
  if (opts.view) button("⟲", "back to the whole plot (or double-click)", () => { opts.view = null; redraw(); }, "zoom-reset");
  button("PNG", "save as PNG", () => exportChart(root, opts, "png"), "export-png");
  button("SVG", "save as SVG", () => exportChart(root, opts, "svg"), "export-svg");
  host.append(bar);

  const toData = (ev) => {
    const pt = root.createSVGPoint();
    pt.x = ev.clientX; pt.y = ev.clientY;
    const p = pt.matrixTransform(root.getScreenCTM().inverse());
    const [a, b] = range.x;
    const x = a + ((p.x - M.l) / pw) * (b - a);
    const y = range.y ? range.y[0] + ((M.t + ph - p.y) / ph) * (range.y[1] - range.y[0]) : null;
    return { x, y, px: p.x, py: p.y };
  };
  root.addEventListener("wheel", (ev) => {
    if (!ev.ctrlKey && !ev.metaKey) return;
    ev.preventDefault();
    const d = toData(ev);
    zoom(Math.exp(ev.deltaY * 0.002), d.x, d.y);
  }, { passive: false });
  root.addEventListener("dblclick", () => { if (opts.view) { opts.view = null; redraw(); } });
  let drag = null;
  root.addEventListener("pointerdown", (ev) => {
    const d = toData(ev);
    if (d.px < M.l || d.px > M.l + pw || d.py < M.t || d.py > M.t + ph) return;
    drag = { start: d, id: ev.pointerId };
    root.setPointerCapture(ev.pointerId);
    root.classList.add("panning");
  });
  root.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const d = toData(ev);
    const g = root.querySelector("g[clip-path]");
    if (g) g.setAttribute("transform", `translate(${d.px - drag.start.px} ${opts.equalAspect || !range.y ? 0 : d.py - drag.start.py})`);
  });
  root.addEventListener("pointerup", (ev) => {
    if (!drag) return;
    const d = toData(ev);
    const moved = Math.hypot(d.px - drag.start.px, d.py - drag.start.py);
    root.classList.remove("panning");
    const s0 = drag.start;
    drag = null;
    if (moved < 3) return;
    const dx = d.x - s0.x;
    const v = { x: [range.x[0] - dx, range.x[1] - dx] };
    if (range.y && !opts.equalAspect) { const dy = d.y - s0.y; v.y = [range.y[0] - dy, range.y[1] - dy]; }
    opts.view = v;
    redraw();
  });
}

const STYLE_PROPS = ["fill", "fill-opacity", "stroke", "stroke-width", "stroke-dasharray", "stroke-opacity", "opacity",
  "font-family", "font-size", "font-weight", "font-style", "text-anchor", "visibility"];

/** The chart as a standalone SVG document: the page's CSS copied onto each element. */
export function chartSVG(root) {
  const clone = root.cloneNode(true);
  const src = root.querySelectorAll("*"), dst = clone.querySelectorAll("*");
  src.forEach((n, i) => {
    const cs = getComputedStyle(n);
    dst[i].setAttribute("style", STYLE_PROPS.map((p) => `${p}:${cs.getPropertyValue(p)}`).join(";"));
  });
  for (const n of clone.querySelectorAll(".hover")) n.remove();
  clone.setAttribute("xmlns", SVG);
  const [, , w, h] = root.getAttribute("viewBox").split(" ").map(Number);
  clone.setAttribute("width", String(w));
  clone.setAttribute("height", String(h));
  clone.insertBefore(Object.assign(document.createElementNS(SVG, "rect"), {}), clone.firstChild).setAttribute("style", "fill:#ffffff");
  const bg = clone.firstChild;
  bg.setAttribute("width", "100%");
  bg.setAttribute("height", "100%");
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(clone);
}

function saveBlob(blob, name) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

function exportChart(root, opts, kind) {
  const name = (opts.title || "chart").replace(/[^\w.-]+/g, "_").replace(/^_+|_+$/g, "") || "chart";
  const text = chartSVG(root);
  if (kind === "svg") return saveBlob(new Blob([text], { type: "image/svg+xml" }), name + ".svg");
  const [, , w, h] = root.getAttribute("viewBox").split(" ").map(Number);
  const img = new Image();
  img.onload = () => {
    const c = document.createElement("canvas");
    c.width = 2 * w; c.height = 2 * h;
    const g = c.getContext("2d");
    g.scale(2, 2);
    g.drawImage(img, 0, 0, w, h);
    c.toBlob((b) => saveBlob(b, name + ".png"), "image/png");
  };
  img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
}

// A vertical rule and the values of every series at the nearest sample.
function hover(root, opts, X, Y, M, pw, ph) {
  if (opts.equalAspect || !opts.series.length || opts.series.length > 12) return;
  const s0 = opts.series[0];
  const g = svg("g", { class: "hover", visibility: "hidden" }, root);
  const rule = svg("line", { y1: M.t, y2: M.t + ph }, g);
  const box = svg("rect", { rx: 4, height: 16 + 15 * opts.series.length, width: 150 }, g);
  const lines = [text(g, 0, 0, "")].concat(opts.series.map(() => text(g, 0, 0, "")));
  root.addEventListener("mousemove", (ev) => {
    const pt = root.createSVGPoint();
    pt.x = ev.clientX; pt.y = ev.clientY;
    const p = pt.matrixTransform(root.getScreenCTM().inverse());
    if (p.x < M.l || p.x > M.l + pw) { g.setAttribute("visibility", "hidden"); return; }
    let best = 0, bd = Infinity;
    for (let i = 0; i < s0.x.length; i++) {
      const d = Math.abs(X(s0.x[i]) - p.x);
      if (d < bd) { bd = d; best = i; }
    }
    const x = X(s0.x[best]);
    rule.setAttribute("x1", x); rule.setAttribute("x2", x);
    const bx = x + 160 > M.l + pw ? x - 158 : x + 8;
    box.setAttribute("x", bx); box.setAttribute("y", M.t + 4);
    lines[0].setAttribute("x", bx + 6); lines[0].setAttribute("y", M.t + 17);
    lines[0].textContent = `${opts.xLabel || "x"} = ${fmt(s0.x[best], 4)}`;
    opts.series.forEach((s, k) => {
      const t = lines[k + 1];
      t.setAttribute("x", bx + 6); t.setAttribute("y", M.t + 32 + 15 * k);
      t.setAttribute("fill", s.color || PALETTE[k % PALETTE.length]);
      t.textContent = `${s.name} = ${fmt(s.y[best], 4)}`;
    });
    g.setAttribute("visibility", "visible");
  });
  root.addEventListener("mouseleave", () => g.setAttribute("visibility", "hidden"));
}

/**
 * Horizontal bars on a log axis, for quantities of which only the maximum is known.
 * items: [{label, value, color?}]
 */
export function logBarChart(host, opts) {
  host.replaceChildren();
  const items = opts.items;
  const W = hostWidth(host), rowH = 30;
  const M = { l: 190, r: 90, t: 34, b: 40 };
  const H = M.t + M.b + rowH * Math.max(1, items.length);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": opts.title || "chart" }, host);
  if (opts.title) text(root, 16, 20, opts.title, { class: "chart-title" });
  const pos = items.map((d) => d.value).filter((v) => v > 0);
  let p0 = pos.length ? Math.floor(Math.log10(Math.min(...pos))) - 1 : -17;
  let p1 = pos.length ? Math.ceil(Math.log10(Math.max(...pos))) : -10;
  p0 = Math.min(p0, -16);
  if (p1 <= p0) p1 = p0 + 1;
  const pw = W - M.l - M.r;
  const X = (v) => M.l + ((Math.log10(v) - p0) / (p1 - p0)) * pw;
  const grid = svg("g", { class: "grid" }, root);
  const axes = svg("g", { class: "axis" }, root);
  const every = Math.max(1, Math.ceil((p1 - p0) / 8));
  for (let p = p0; p <= p1; p += every) {
    const x = X(Math.pow(10, p));
    svg("line", { x1: x, x2: x, y1: M.t, y2: H - M.b }, grid);
    text(axes, x, H - M.b + 16, logLabel(p), { "text-anchor": "middle" });
  }
  if (opts.xLabel) text(axes, M.l + pw / 2, H - 6, opts.xLabel, { "text-anchor": "middle", class: "label" });
  items.forEach((d, k) => {
    const y = M.t + k * rowH + 5;
    text(axes, M.l - 10, y + 15, d.label, { "text-anchor": "end", class: "bar-label" });
    const color = d.color || PALETTE[k % PALETTE.length];
    if (d.value > 0) {
      svg("rect", { x: M.l, y, width: Math.max(1, X(d.value) - M.l), height: rowH - 10, fill: color, class: "bar", "data-value": String(d.value) }, root);
      text(root, X(d.value) + 6, y + 15, fmt(d.value, 3), { class: "bar-value" });
    } else {
      text(root, M.l + 6, y + 15, d.value === 0 ? "exactly 0" : "—", { class: "bar-value" });
    }
  });
  svg("line", { x1: M.l, x2: M.l, y1: M.t, y2: H - M.b, class: "baseline" }, root);
  return root;
}
