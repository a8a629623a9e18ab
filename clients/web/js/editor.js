// editor.js — a plain <textarea> with line numbers and marks drawn behind the text
// (the backdrop technique: a <div> with the same text and metrics sits under a
// transparent textarea), so an error can be highlighted at its exact column.

export class Editor {
  /** Builds the editor inside `host`. opts: {rows, label, spellcheck} */
  constructor(host, opts = {}) {
    this.host = host;
    host.classList.add("editor");
    this.gutter = document.createElement("div");
    this.gutter.className = "gutter";
    this.gutter.setAttribute("aria-hidden", "true");
    const body = document.createElement("div");
    body.className = "editor-body";
    this.backdrop = document.createElement("div");
    this.backdrop.className = "backdrop";
    this.backdrop.setAttribute("aria-hidden", "true");
    this.layer = document.createElement("div");
    this.layer.className = "backdrop-layer";
    this.backdrop.append(this.layer);
    this.ta = document.createElement("textarea");
    this.ta.wrap = "off";
    this.ta.spellcheck = false;
    this.ta.autocapitalize = "off";
    this.ta.autocomplete = "off";
    if (opts.label) this.ta.setAttribute("aria-label", opts.label);
    if (opts.rows) host.style.setProperty("--rows", opts.rows);
    body.append(this.backdrop, this.ta);
    host.append(this.gutter, body);
    this.marks = [];
    this.ta.addEventListener("input", () => {
      if (this.marks.length) this.marks = [];
      this.render();
      this.onchange?.();
    });
    this.ta.addEventListener("scroll", () => this.sync());
    this.ta.addEventListener("keydown", (ev) => {
      if (ev.key === "Tab" && !ev.shiftKey && !ev.ctrlKey && !ev.altKey) {
        ev.preventDefault();
        document.execCommand("insertText", false, "  ");
      }
    });
    this.render();
  }

  get value() { return this.ta.value; }
  set value(v) { this.ta.value = v; this.marks = []; this.render(); this.ta.scrollTop = 0; this.ta.scrollLeft = 0; this.sync(); }

  /** marks: [{start, end, cls, title?}] as offsets into the text. */
  setMarks(marks) {
    this.marks = marks.slice().sort((a, b) => a.start - b.start);
    this.render();
  }

  render() {
    const text = this.ta.value;
    const lines = text.split("\n").length;
    const errLines = new Set();
    for (const m of this.marks) if (m.cls.includes("point")) errLines.add(lineOf(text, m.start));
    const frag = document.createDocumentFragment();
    for (let i = 1; i <= lines; i++) {
      const d = document.createElement("div");
      d.textContent = i;
      if (errLines.has(i)) d.className = "err";
      frag.append(d);
    }
    this.gutter.replaceChildren(frag);

    // backdrop: the same text with <mark>s; marks may nest (a span and a point in it)
    const bounds = new Set([0, text.length]);
    for (const m of this.marks) { bounds.add(Math.max(0, m.start)); bounds.add(Math.min(text.length, m.end)); }
    const cuts = [...bounds].sort((a, b) => a - b);
    const out = document.createDocumentFragment();
    for (let k = 0; k + 1 < cuts.length; k++) {
      const a = cuts[k], b = cuts[k + 1];
      const piece = text.slice(a, b);
      const covering = this.marks.filter((m) => m.start <= a && m.end >= b);
      if (!covering.length) { out.append(piece); continue; }
      const mk = document.createElement("mark");
      mk.className = covering.map((m) => m.cls).join(" ");
      mk.textContent = piece;
      out.append(mk);
    }
    out.append("\n");
    this.layer.replaceChildren(out);
    this.sync();
  }

  sync() {
    this.gutter.scrollTop = this.ta.scrollTop;
    this.layer.style.transform = `translate(${-this.ta.scrollLeft}px, ${-this.ta.scrollTop}px)`;
  }

  /** Selects [start, end) and scrolls it into view. */
  reveal(start, end = start + 1) {
    const text = this.ta.value;
    const line = lineOf(text, start);
    const lh = parseFloat(getComputedStyle(this.ta).lineHeight) || 20;
    this.ta.focus({ preventScroll: true });
    this.ta.setSelectionRange(start, end);
    this.ta.scrollTop = Math.max(0, (line - 3) * lh);
    const col = start - text.lastIndexOf("\n", start - 1) - 1;
    this.ta.scrollLeft = Math.max(0, col * charWidth(this.ta) - this.ta.clientWidth / 2);
    this.sync();
  }
}

function charWidth(ta) {
  const ctx = document.createElement("canvas").getContext("2d");
  const cs = getComputedStyle(ta);
  ctx.font = `${cs.fontSize} ${cs.fontFamily}`;
  return ctx.measureText("0000000000").width / 10;
}

function lineOf(text, offset) {
  let n = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text[i] === "\n") n++;
  return n;
}
