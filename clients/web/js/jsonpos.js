// jsonpos.js — a JSON parser that remembers where every value sits in the text, so
// a problem document's errors[].path (and, for expressions, column) can be turned
// into a line and column of the editor.

/** Parses JSON text. Returns {value, spans} where spans maps a JSON pointer
 *  ("/constraints/0/expr") to {start, end, keyStart} offsets into the text.
 *  Throws {message, offset} on a syntax error. */
export function parseWithPositions(text) {
  let i = 0;
  const spans = new Map();
  const fail = (msg) => { throw { message: msg, offset: Math.min(i, text.length) }; };
  const ws = () => { while (i < text.length && " \t\r\n".includes(text[i])) i++; };

  function value(ptr, keyStart) {
    ws();
    const start = i;
    let v;
    const c = text[i];
    if (c === "{") v = object(ptr);
    else if (c === "[") v = array(ptr);
    else if (c === '"') v = string();
    else if (c === "-" || (c >= "0" && c <= "9")) v = number();
    else if (text.startsWith("true", i)) { i += 4; v = true; }
    else if (text.startsWith("false", i)) { i += 5; v = false; }
    else if (text.startsWith("null", i)) { i += 4; v = null; }
    else fail(i >= text.length ? "unexpected end of JSON" : `unexpected '${c}'`);
    spans.set(ptr, { start, end: i, keyStart: keyStart ?? start });
    return v;
  }
  function object(ptr) {
    i++;
    const o = {};
    ws();
    if (text[i] === "}") { i++; return o; }
    for (;;) {
      ws();
      if (text[i] !== '"') fail("expected a quoted key");
      const keyStart = i;
      const k = string();
      ws();
      if (text[i] !== ":") fail("expected ':' after a key");
      i++;
      o[k] = value(ptr + "/" + escapePointer(k), keyStart);
      ws();
      if (text[i] === ",") { i++; continue; }
      if (text[i] === "}") { i++; return o; }
      fail("expected ',' or '}'");
    }
  }
  function array(ptr) {
    i++;
    const a = [];
    ws();
    if (text[i] === "]") { i++; return a; }
    for (;;) {
      a.push(value(ptr + "/" + a.length));
      ws();
      if (text[i] === ",") { i++; continue; }
      if (text[i] === "]") { i++; return a; }
      fail("expected ',' or ']'");
    }
  }
  function string() {
    const start = i;
    i++;
    while (i < text.length && text[i] !== '"') {
      if (text[i] === "\\") i++;
      if (text[i] === "\n") fail("unterminated string");
      i++;
    }
    if (i >= text.length) { i = start; fail("unterminated string"); }
    i++;
    try { return JSON.parse(text.slice(start, i)); } catch { i = start; fail("bad string escape"); }
  }
  function number() {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m) fail("bad number");
    i += m[0].length;
    return Number(m[0]);
  }
  const v = value("");
  ws();
  if (i < text.length) fail("unexpected text after the JSON value");
  return { value: v, spans };
}

function escapePointer(k) {
  return k.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** Turns the path forms a server may use — JSON pointer "/a/0/b", dotted
 *  "a[0].b" or "$.a.0.b" — into a list of segments. */
export function pathSegments(path) {
  if (path == null) return [];
  let p = String(path).trim();
  if (p.startsWith("#")) p = p.slice(1);
  if (p.startsWith("/")) return p.split("/").slice(1).map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (p.startsWith("$")) p = p.slice(1);
  const segs = [];
  for (const part of p.split(".")) {
    if (part === "") continue;
    const m = /^([^[\]]*)((\[[^\]]*\])*)$/.exec(part);
    if (!m) { segs.push(part); continue; }
    if (m[1]) segs.push(m[1]);
    for (const b of m[2].matchAll(/\[([^\]]*)\]/g)) segs.push(b[1].replace(/^["']|["']$/g, ""));
  }
  return segs;
}

export function pointerOf(segs) {
  return segs.map((s) => "/" + escapePointer(String(s))).join("");
}

/** The 1-based line and column of an offset in text. */
export function lineColOf(text, offset) {
  let line = 1, last = -1;
  for (let k = 0; k < offset && k < text.length; k++) {
    if (text[k] === "\n") { line++; last = k; }
  }
  return { line, col: offset - last };
}

/** The text offset of the character at (0-based) index `charIndex` of the decoded
 *  string whose opening quote is at `quoteAt`. */
export function offsetInString(text, quoteAt, charIndex) {
  let k = quoteAt + 1;
  for (let n = 0; n < charIndex && k < text.length && text[k] !== '"'; n++) {
    if (text[k] === "\\") k += text[k + 1] === "u" ? 6 : 2;
    else k++;
  }
  return k;
}

/** Locates an error in the editor text: the span of the value at `segs` (or the
 *  nearest existing ancestor), and, if `column` is given and the value is a string
 *  (or an object with an "expr" string), the offset of that column in it.
 *  `columnBase` is 1 when columns count from 1. Returns {start, end, at, exact}. */
export function locate(text, spans, segs, column, columnBase = 1) {
  let s = segs.slice();
  let span = spans.get(pointerOf(s));
  while (!span && s.length) { s = s.slice(0, -1); span = spans.get(pointerOf(s)); }
  if (!span) return null;
  const exact = s.length === segs.length;
  if (exact && column != null && text[span.start] === "{") {
    const inner = spans.get(pointerOf([...s, "expr"]));
    if (inner) span = inner;
  }
  if (exact && column != null && text[span.start] === '"') {
    const at = offsetInString(text, span.start, Math.max(0, column - columnBase));
    return { start: span.start, end: span.end, at: Math.min(at, span.end - 1), exact };
  }
  return { start: span.keyStart, end: span.end, at: span.keyStart, exact };
}
