// events.js — the request's events (issue 18): an editor of rows {name, expr,
// direction, action} in the run settings, and in the results the located crossings
// (a list with t and the state), `stopped_by`, and the contact checks of
// `checks.contacts` (normal and tangential force, lift-off and slip times).

import { fmt, PALETTE } from "./chart.js";
import { $, h } from "./dom.js";

const DIRECTIONS = ["both", "rising", "falling"];
const ACTIONS = ["record", "stop"];
// the list shows this many crossings (a run may record up to 10,000); markers on the
// plots are fewer still, so a chattering event does not paint the plot over
export const LIST_MAX = 200;
export const MARKS_MAX = 40;

/** setupEvents(onchange) wires the editor in #events; returns
 *  {set(list, bound), dropBound(now), read() -> {events, bad}, clear(), mark(segs, column)}. */
export function setupEvents(onchange) {
  const box = $("events");

  function row(ev) {
    const sel = (field, options, value) => h("select", { "data-field": field, "aria-label": field },
      options.map((o) => h("option", { value: o, selected: o === value ? true : null }, o)));
    const r = h("div", { class: "event-row", "data-testid": "event-row" },
      h("input", { type: "text", "data-field": "name", "aria-label": "event name", placeholder: "name", spellcheck: "false", value: ev.name || "" }),
      h("input", { type: "text", "data-field": "expr", "aria-label": "event expression", placeholder: "expression crossing zero, e.g. theta - 0.2", spellcheck: "false", value: ev.expr || "" }),
      sel("direction", DIRECTIONS, ev.direction || "both"),
      sel("action", ACTIONS, ev.action || "record"),
      h("button", { type: "button", class: "remove", title: "remove this event", "aria-label": "remove event", onclick: () => { r.remove(); note(); onchange(); } }, "×"));
    r.addEventListener("input", () => {
      for (const el of r.querySelectorAll(".invalid")) el.classList.remove("invalid");
      delete r.dataset.bound; // edited by hand: kept when the model changes
      onchange();
    });
    return r;
  }

  function note() {
    const empty = !box.querySelector(".event-row");
    let hint = box.querySelector(".events-empty");
    if (empty && !hint) box.prepend(h("p", { class: "hint-inline events-empty" }, "No events: the run goes to t_end. An event is a zero crossing of its expression (t, coordinates, q', speeds, parameters, lambda_<constraint>, normal_<disk>); stop ends the run there."));
    if (!empty && hint) hint.remove();
  }

  /** Rows for `list`, written for the model whose coordinates are `bound`: another
   *  model drops them (dropBound), while rows added by hand stay. */
  function set(list, bound) {
    const rows = (Array.isArray(list) ? list : []).filter((e) => e && typeof e === "object").map(row);
    for (const r of rows) r.dataset.bound = bound || "";
    box.replaceChildren(...rows);
    note();
  }

  /** Removes the rows set for another model than `now`; true if there were any. */
  function dropBound(now) {
    const gone = [...box.querySelectorAll(".event-row")].filter((r) => r.dataset.bound && r.dataset.bound !== now);
    for (const r of gone) r.remove();
    note();
    return gone.length > 0;
  }

  function add() {
    // the first eventK no row has (after a row was removed, the count may be taken)
    const taken = new Set([...box.querySelectorAll('.event-row [data-field="name"]')].map((el) => el.value.trim()));
    let k = 1;
    while (taken.has(`event${k}`)) k++;
    const r = row({ name: `event${k}`, expr: "", direction: "both", action: "record" });
    box.append(r);
    note();
    r.querySelector('[data-field="expr"]').focus();
  }

  /** The rows as the request's `events`; defaults are left out, so a request without
   *  direction or action is what the page sends for one. */
  function read() {
    const events = [], bad = [];
    for (const r of box.querySelectorAll(".event-row")) {
      const get = (f) => r.querySelector(`[data-field="${f}"]`);
      const name = get("name").value.trim(), expr = get("expr").value.trim();
      if (!name && !expr) continue; // an empty row is not an event
      if (!expr) bad.push({ el: get("expr"), reason: `event ${name || events.length + 1} has no expression` });
      const ev = { name, expr };
      if (get("direction").value !== "both") ev.direction = get("direction").value;
      if (get("action").value !== "record") ev.action = get("action").value;
      events.push(ev);
    }
    return { events, bad };
  }

  /** The field an error path events[i].field points at: marked, its column selected. */
  function mark(segs, column) {
    const rows = [...box.querySelectorAll(".event-row")].filter((r) => {
      const g = (f) => r.querySelector(`[data-field="${f}"]`).value.trim();
      return g("name") || g("expr");
    });
    const r = rows[Number(segs[1])];
    if (!r) return null;
    const field = ["name", "expr", "direction", "action"].includes(segs[2]) ? segs[2] : "expr";
    const el = r.querySelector(`[data-field="${field}"]`);
    el.classList.add("invalid");
    if (Number.isInteger(column) && el.setSelectionRange) {
      const at = Math.max(0, column - 1);
      const m = /^[A-Za-z_][A-Za-z0-9_]*'*/.exec(el.value.slice(at));
      el.dataset.column = String(column);
      el.focus();
      el.setSelectionRange(at, Math.min(el.value.length, at + (m ? m[0].length : 1)));
    }
    return { el, field: `events[${segs[1]}].${field}` };
  }

  function clear() {
    for (const el of box.querySelectorAll(".invalid")) el.classList.remove("invalid");
  }

  $("ev-add").addEventListener("click", add);
  set([]);
  return { set, dropBound, read, mark, clear };
}

/** Colour of an event name, the same on every plot and in the list. */
export function eventColors(events) {
  const names = [...new Set((events || []).map((e) => e.name))];
  return new Map(names.map((n, k) => [n, PALETTE[(k + 3) % PALETTE.length]]));
}

/** Vertical markers for a chart's `vlines` from the result's events (and the contact
 *  checks' first lift-off and slip). */
export function eventMarks(r) {
  const colors = eventColors(r.events);
  return (Array.isArray(r.events) ? r.events : []).slice(0, MARKS_MAX).map((e) => ({ x: e.t, label: e.name, color: colors.get(e.name) }));
}

/** The events card: stopped_by, then one row per crossing with t and the state. */
export function renderEvents(r, summary) {
  const card = $("events-card");
  const evs = Array.isArray(r.events) ? r.events : [];
  if (!evs.length && !r.stopped_by) { card.hidden = true; card.replaceChildren(); return; }
  card.hidden = false;
  const colors = eventColors(evs);
  const coords = (summary && summary.coordinates && summary.coordinates.length ? summary.coordinates : Object.keys((evs[0] && evs[0].q) || {}));
  const speeds = (summary && summary.speeds && summary.speeds.length ? summary.speeds : Object.keys((evs[0] && evs[0].speeds) || {}));
  const cols = [...coords.map((n) => ["q", n]), ...speeds.map((n) => ["speeds", n])].filter(([g, n]) => evs.some((e) => e[g] && n in e[g]));
  const head = h("tr", {}, h("th", {}, "event"), h("th", { class: "num" }, "t"), cols.map(([, n]) => h("th", { class: "num" }, n)));
  const rows = evs.slice(0, LIST_MAX).map((e) => h("tr", { "data-testid": "event-hit", "data-name": e.name, "data-t": String(e.t) },
    h("td", {}, h("span", { class: "swatch", style: `background:${colors.get(e.name)}` }), e.name),
    h("td", { class: "num" }, fmt(e.t, 10)),
    cols.map(([g, n]) => h("td", { class: "num" }, e[g] && typeof e[g][n] === "number" ? fmt(e[g][n], 6) : "—"))));
  const more = evs.length > LIST_MAX ? evs.length - LIST_MAX : 0;
  const dropped = typeof r.events_dropped === "number" && r.events_dropped > 0 ? r.events_dropped : 0;
  const last = evs[evs.length - 1];
  card.replaceChildren(...[
    h("h2", {}, "Events"),
    r.stopped_by
      ? h("p", { class: "stopped", "data-testid": "stopped-by", "data-name": r.stopped_by, "data-t": last ? String(last.t) : "" },
        "Stopped by ", h("b", {}, r.stopped_by), last ? ` at t = ${fmt(last.t, 12)}` : "", ": the trajectory ends there, its last sample at the event.")
      : h("p", { class: "hint" }, `${evs.length} crossing${evs.length === 1 ? "" : "s"} recorded; the run went on to t_end.`),
    evs.length ? h("div", { class: "table-wrap" }, h("table", { class: "events-table", "data-testid": "events-list" }, h("thead", {}, head), h("tbody", {}, rows))) : null,
    more || dropped ? h("p", { class: "hint-inline" }, [more ? `${more} more crossing${more === 1 ? "" : "s"} in the result (⤓ JSON).` : "", dropped ? ` ${dropped} more not listed by the server (events_dropped).` : ""].join("")) : null,
  ].filter(Boolean));
}

/** The contact checks as {series, vlines, caption, cells} for a plot and the summary,
 *  or null when the result has none. */
export function contactsOf(r) {
  const cs = r.checks && r.checks.contacts;
  if (!cs || typeof cs !== "object" || !Object.keys(cs).length) return null;
  const t = (r.trajectory && r.trajectory.t) || [];
  const series = [], vlines = [], words = [], cells = [];
  Object.entries(cs).forEach(([name, c], k) => {
    const tag = Object.keys(cs).length > 1 ? ` (${name})` : "";
    const color = PALETTE[(2 * k) % PALETTE.length], color2 = PALETTE[(2 * k + 1) % PALETTE.length];
    const mu = typeof c.friction === "number" ? c.friction : null;
    if (Array.isArray(c.normal) && c.normal.length === t.length) {
      series.push({ name: "N, normal" + tag, x: t, y: c.normal, color });
      if (mu != null) series.push({ name: `μN, μ = ${fmt(mu, 4)}` + tag, x: t, y: c.normal.map((v) => mu * v), color, dash: "6 4" });
    }
    if (Array.isArray(c.tangential) && c.tangential.length === t.length) series.push({ name: "|F_t|, tangential" + tag, x: t, y: c.tangential, color: color2 });
    const at = (x) => (x && typeof x.t === "number" ? x.t : null);
    const lift = at(c.lift_off), slip = at(c.slip);
    if (lift != null) vlines.push({ x: lift, label: "lift-off" + tag, color: "#b3261e" });
    if (slip != null) vlines.push({ x: slip, label: "slip" + tag, color: "#8a5a00" });
    const says = c.normal == null
      ? `${name}: no normal force — ${c.reason || "the model gives no way to it"}`
      : `${name}: ${lift != null ? `lifts off at t = ${fmt(lift, 10)}` : "no lift-off"}, ${slip != null ? `slips at t = ${fmt(slip, 10)}` : "no slip"} (μ = ${mu})`;
    words.push(says);
    cells.push(h("div", { class: "check", "data-testid": "contact-check", "data-name": name, "data-lift-off": lift == null ? "" : String(lift), "data-slip": slip == null ? "" : String(slip) },
      h("div", { class: "check-value small" }, c.normal == null ? "N unknown" : lift == null && slip == null ? "holds" : lift != null && (slip == null || lift <= slip) ? `lift-off t = ${fmt(lift, 5)}` : `slip t = ${fmt(slip, 5)}`),
      h("div", { class: "check-label" }, `contact ${name}`),
      h("div", { class: "check-sub" }, c.normal == null ? (c.reason || "") : [lift != null ? `lift-off at ${fmt(lift, 8)}` : "no lift-off", slip != null ? `slip at ${fmt(slip, 8)}` : "no slip", `μ = ${mu}`].join(" · "))));
  });
  return { series, vlines, caption: "Contact forces from the constraint multipliers: N pushes the body off the ground; rolling holds while N > 0 and |F_t| ≤ μN. " + words.join("; ") + ".", cells };
}
