// expr.js — the model expression language (API.md §1) parsed into a tree and
// rendered as MathML, so the derived equations read like a textbook.
//
// Grammar (the same one the server accepts):
//   sum     := product (("+" | "-") product)*
//   product := unary (("*" | "/") unary)*
//   unary   := "-" unary | "+" unary | power
//   power   := postfix (("^" | "**") unary)?          right associative
//   postfix := primary "'"*
//   primary := number | ident | ident "(" sum ("," sum)* ")" | "(" sum ")"

const MATHML = "http://www.w3.org/1998/Math/MathML";

const GREEK = {
  alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", zeta: "ζ", eta: "η",
  theta: "θ", iota: "ι", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν", xi: "ξ",
  rho: "ρ", sigma: "σ", tau: "τ", upsilon: "υ", phi: "φ", chi: "χ", psi: "ψ",
  omega: "ω", Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ", Xi: "Ξ", Pi: "Π",
  Sigma: "Σ", Phi: "Φ", Psi: "Ψ", Omega: "Ω", pi: "π",
};

const FUNCS = new Set([
  "sin", "cos", "tan", "sec", "csc", "cot", "asin", "acos", "atan", "atan2",
  "sinh", "cosh", "tanh", "exp", "log", "sqrt", "abs", "sign", "pow",
]);

/** Splits an expression into tokens {k, v, at}; throws {message, offset}. */
function tokenize(src) {
  const out = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (/\s/.test(c)) { i++; continue; }
    const num = /^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/.exec(src.slice(i));
    if (num) { out.push({ k: "num", v: num[0], at: i }); i += num[0].length; continue; }
    const id = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i));
    if (id) { out.push({ k: "id", v: id[0], at: i }); i += id[0].length; continue; }
    if (src.startsWith("**", i)) { out.push({ k: "op", v: "^", at: i }); i += 2; continue; }
    if ("+-*/^(),'".includes(c)) { out.push({ k: "op", v: c, at: i }); i++; continue; }
    throw { message: `unexpected character '${c}'`, offset: i };
  }
  out.push({ k: "end", v: "", at: src.length });
  return out;
}

/** Parses an expression into a tree; throws {message, offset} on bad input. */
export function parseExpr(src) {
  const toks = tokenize(src);
  let p = 0;
  const peek = () => toks[p];
  const isOp = (v) => toks[p].k === "op" && toks[p].v === v;
  const expect = (v) => {
    if (!isOp(v)) throw { message: `expected '${v}'`, offset: toks[p].at };
    p++;
  };
  function sum() {
    let a = product();
    while (isOp("+") || isOp("-")) {
      const op = toks[p++].v;
      a = { t: op === "+" ? "add" : "sub", a, b: product() };
    }
    return a;
  }
  function product() {
    let a = unary();
    while (isOp("*") || isOp("/")) {
      const op = toks[p++].v;
      a = { t: op === "*" ? "mul" : "div", a, b: unary() };
    }
    return a;
  }
  function unary() {
    if (isOp("-")) { p++; return { t: "neg", a: unary() }; }
    if (isOp("+")) { p++; return unary(); }
    return power();
  }
  function power() {
    const a = postfix();
    if (isOp("^")) { p++; return { t: "pow", a, b: unary() }; }
    return a;
  }
  function postfix() {
    let a = primary();
    while (isOp("'")) { p++; a = { t: "dot", a }; }
    return a;
  }
  function primary() {
    const tk = peek();
    if (tk.k === "num") { p++; return { t: "num", v: tk.v }; }
    if (tk.k === "id") {
      p++;
      if (isOp("(")) {
        p++;
        const args = [sum()];
        while (isOp(",")) { p++; args.push(sum()); }
        expect(")");
        return { t: "call", f: tk.v, args };
      }
      return { t: "id", v: tk.v };
    }
    if (isOp("(")) { p++; const e = sum(); expect(")"); return e; }
    throw { message: tk.k === "end" ? "unexpected end of expression" : `unexpected '${tk.v}'`, offset: tk.at };
  }
  const e = sum();
  if (peek().k !== "end") throw { message: `unexpected '${peek().v}'`, offset: peek().at };
  return e;
}

// ---- MathML output -------------------------------------------------------------

function el(tag, attrs, ...kids) {
  const n = document.createElementNS(MATHML, tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
  for (const k of kids) n.append(k);
  return n;
}
const mo = (s, attrs) => el("mo", attrs, s);
const mrow = (...k) => el("mrow", null, ...k);
const paren = (x) => mrow(mo("("), x, mo(")"));

// Short forms people write for Greek letters, besides the full names.
const GREEK_ALIAS = { lam: "λ", lamda: "λ", Lam: "Λ", eps: "ε", vareps: "ε", varphi: "φ", vartheta: "ϑ", om: "ω", Om: "Ω" };
const GREEK_PREFIX = Object.keys(GREEK).concat(Object.keys(GREEK_ALIAS)).sort((a, b) => b.length - a.length);
const greekOf = (s) => GREEK[s] || GREEK_ALIAS[s] || null;

/** How a name is typeset: {base, sub} — a Greek name as its letter (theta → θ,
 *  lam → λ); a subscript after "_" (omega_z), trailing digits (x1, theta2), or a
 *  capital or short tail after a Greek name or a single letter (thetaR → θ_R,
 *  phid → φ_d, rR → r_R, IRxx → I_Rxx). Anything else stays a word (thd, wd). */
export function splitName(name) {
  let m = /^([A-Za-z]+)_([A-Za-z0-9_]+)$/.exec(name);
  if (m) return { base: m[1], sub: m[2] };
  m = /^([A-Za-z]+?)(\d+)$/.exec(name);
  if (m) return { base: m[1], sub: m[2] };
  if (greekOf(name)) return { base: name, sub: null };
  for (const g of GREEK_PREFIX) {
    if (name.length > g.length && name.startsWith(g)) {
      const rest = name.slice(g.length);
      if (/^[A-Z0-9]/.test(rest) || /^[a-z]$/.test(rest)) return { base: g, sub: rest };
    }
  }
  m = /^([A-Za-z])([A-Z][A-Za-z0-9]*)$/.exec(name);
  if (m) return { base: m[1], sub: m[2] };
  return { base: name, sub: null };
}

function baseML(base) {
  const g = greekOf(base);
  if (g) return el("mi", null, g);
  if (base.length === 1) return el("mi", null, base);
  return el("mi", { mathvariant: "italic" }, base);
}

/** A name as MathML (see splitName); `dots` time derivatives sit over the base
 *  letter, not over the middle of the whole name (θ̇_R, not a dot over "thetaR"). */
export function nameML(name, dots = 0) {
  // a speed the engine names after a velocity ("alpha'", when the model gives no
  // speeds) is that velocity: its primes are dots too
  const primed = /^([A-Za-z_][A-Za-z0-9_]*)('+)$/.exec(String(name));
  if (primed) return nameML(primed[1], dots + primed[2].length);
  const { base, sub } = splitName(String(name));
  let b = baseML(base);
  // a letter with an ascender (ψ, θ, δ, b, d, …) would hide an accent dot drawn tight
  // over it: the dot goes above it instead
  const tall = /[ψφθδβλξζϑbdfhklt\dA-Z]/.test(greekOf(base) || base);
  if (dots) b = el("mover", { accent: tall ? "false" : "true" }, b, mo(dots === 1 ? "˙" : dots === 2 ? "¨" : "⃛"));
  if (!sub) return b;
  const subML = /^\d+$/.test(sub) ? el("mn", null, sub) : nameML(sub);
  return el("msub", null, b, subML);
}

const PREC = { add: 1, sub: 1, mul: 2, div: 3, neg: 2, pow: 4, dot: 5, num: 6, id: 6, call: 6 };

function funcName(f) {
  return el("mi", { mathvariant: "normal" }, f);
}

function toML(n, ctx = 0) {
  switch (n.t) {
    case "num": {
      // 0.25 → ¼, 0.3333333333333333 → ⅓: the printer's decimals read as the book's fractions
      const fr = smallFraction(Number(n.v));
      if (fr && ctx <= 2.5) return el("mfrac", null, el("mn", null, String(fr[0])), el("mn", null, String(fr[1])));
      return el("mn", null, n.v);
    }
    case "id": return nameML(n.v);
    case "dot": {
      // q' → q̇ (dots stack for higher derivatives), over the base letter of a name
      let dots = 1;
      let a = n.a;
      while (a.t === "dot") { dots++; a = a.a; }
      if (a.t === "id") return nameML(a.v, dots);
      return el("mover", null, toML(a, 5), mo(dots === 1 ? "˙" : "¨"));
    }
    case "add":
    case "sub": {
      const r = mrow(toML(n.a, 1), mo(n.t === "add" ? "+" : "−"), toML(n.b, 2));
      return ctx > 1 ? paren(r) : r;
    }
    case "mul": {
      // -a*b*c reads as −abc, not (−a)bc
      if (leadingNeg(n)) {
        const r = mrow(mo("−"), toML(stripNeg(n), 2));
        return ctx > 1 ? paren(r) : r;
      }
      const left = toML(n.a, 2);
      const right = toML(n.b, 2.5);
      const r = mrow(left, timesBetween(rightmost(n.a), leftmost(n.b)), right);
      return ctx > 2.5 ? paren(r) : r;
    }
    case "div": {
      const r = el("mfrac", null, toML(n.a, 0), toML(n.b, 0));
      return ctx > 4 ? paren(r) : r;
    }
    case "neg": {
      const r = mrow(mo("−"), toML(n.a, 2.5));
      return ctx > 1 ? paren(r) : r;
    }
    case "pow": {
      // sin(x)^2 → sin²(x), the way books write it
      if (n.a.t === "call" && n.a.args.length === 1 && n.a.f !== "sqrt" && n.a.f !== "abs" && n.a.f !== "exp") {
        const arg = toML(n.a.args[0], 0);
        return mrow(el("msup", null, funcName(n.a.f), toML(n.b, 0)), mo("\u2061"), bare(n.a.args[0]) ? mrow(thin(), arg) : paren(arg));
      }
      const base = toML(n.a, 5);
      return el("msup", null, base, toML(n.b, 0));
    }
    case "call": {
      const args = n.args.map((a) => toML(a, 0));
      if (n.f === "sqrt" && args.length === 1) return el("msqrt", null, args[0]);
      if (n.f === "abs" && args.length === 1) return mrow(mo("|"), args[0], mo("|"));
      if (n.f === "exp" && args.length === 1) return el("msup", null, el("mi", { mathvariant: "normal" }, "e"), args[0]);
      if (n.f === "pow" && args.length === 2) return el("msup", null, ctxParen(n.args[0], args[0]), args[1]);
      if (args.length === 1 && bare(n.args[0])) return mrow(funcName(n.f), mo("\u2061"), thin(), args[0]);
      const list = mrow();
      args.forEach((a, i) => { if (i) list.append(mo(",")); list.append(a); });
      return mrow(funcName(n.f), mo("\u2061"), paren(list));
    }
  }
  return el("mi", null, "?");
}

// How two factors are joined: a centred dot before a number, a little space
// around multi-letter names and functions (so "wd thd" does not read "wdthd"),
// else nothing (invisible times).
function timesBetween(a, b) {
  if (b.t === "num") return mo("·");
  const wide = (n) => (n.t === "id" && splitName(n.v).base.length > 1 && !greekOf(splitName(n.v).base)) || n.t === "call";
  if (wide(a) || wide(b)) return mrow(mo("\u2062"), el("mspace", { width: "0.22em" }));
  return mo("\u2062");
}

function rightmost(n) {
  while (n.t === "mul") n = n.b;
  if (n.t === "dot" || n.t === "pow") return rightmost(n.a);
  return n;
}

function ctxParen(node, ml) {
  return PREC[node.t] < 5 ? paren(ml) : ml;
}

const thin = () => el("mspace", { width: "0.17em" });

/** [p, q] if v is p/q (q ≤ 16, not an integer) to double precision, else null. */
function smallFraction(v) {
  if (!Number.isFinite(v) || Number.isInteger(v)) return null;
  for (let q = 2; q <= 16; q++) {
    const p = Math.round(v * q);
    if (p !== 0 && Math.abs(v - p / q) <= 4 * Number.EPSILON * Math.abs(v)) return [p, q];
  }
  return null;
}

// sin θ rather than sin(θ) when the argument is a single symbol
function bare(n) {
  return n.t === "id" || (n.t === "num" && !n.v.includes("e"));
}

// The first factor a product starts with; sums and negations are parenthesised
// when they are factors, so the search stops there.
function leftmost(n) {
  while (n.t === "mul" || n.t === "pow" || n.t === "dot") n = n.a;
  return n;
}

function leadingNeg(n) {
  while (n.t === "mul") n = n.a;
  return n.t === "neg";
}

function stripNeg(n) {
  if (n.t === "neg") return n.a;
  return { ...n, a: stripNeg(n.a) };
}

/** Renders an expression string as a <math> element; a string that does not parse
 *  comes back as a <code> element so nothing is lost. */
export function exprToMath(src, display = false) {
  try {
    const tree = parseExpr(String(src));
    return el("math", display ? { display: "block" } : null, toML(tree));
  } catch (e) {
    const c = document.createElement("code");
    c.textContent = String(src);
    return c;
  }
}

/** A <math> element built from already-made MathML parts. */
export function mathOf(...parts) {
  return el("math", null, ...parts);
}

/** The top-level terms of a sum as [{sign: "+"|"−", ml}], so a long equation can wrap
 *  between its terms (MathML does not break lines itself). Throws on bad input. */
export function termsML(src) {
  const out = [];
  const walk = (n, sign) => {
    if (n.t === "add") { walk(n.a, sign); walk(n.b, sign); return; }
    if (n.t === "sub") { walk(n.a, sign); walk(n.b, -sign); return; }
    if (n.t === "neg") { walk(n.a, -sign); return; }
    if (n.t === "mul" && leadingNeg(n)) { walk(stripNeg(n), -sign); return; }
    out.push({ sign: sign > 0 ? "+" : "−", ml: toML(n, 1) });
  };
  walk(parseExpr(String(src)), 1);
  return out;
}

export const ml = { el, mo, mrow, nameML, paren, toML: (src) => toML(parseExpr(src)), termsML };
export { FUNCS };

const FN = {
  sin: Math.sin, cos: Math.cos, tan: Math.tan, sec: (x) => 1 / Math.cos(x), csc: (x) => 1 / Math.sin(x), cot: (x) => 1 / Math.tan(x),
  asin: Math.asin, acos: Math.acos, atan: Math.atan, atan2: Math.atan2, sinh: Math.sinh, cosh: Math.cosh, tanh: Math.tanh,
  exp: Math.exp, log: Math.log, sqrt: Math.sqrt, abs: Math.abs, sign: Math.sign, pow: Math.pow,
};

/** An expression of the model language as a function of a name → value lookup
 *  (`pi` is π; q' is looked up as "q'"; an unknown name is NaN). Numbers pass through. */
export function compileExpr(src) {
  if (typeof src === "number") return () => src;
  const tree = parseExpr(String(src));
  const ev = (n, env) => {
    switch (n.t) {
      case "num": return Number(n.v);
      case "id": return n.v in env ? env[n.v] : n.v === "pi" ? Math.PI : NaN;
      case "add": return ev(n.a, env) + ev(n.b, env);
      case "sub": return ev(n.a, env) - ev(n.b, env);
      case "mul": return ev(n.a, env) * ev(n.b, env);
      case "div": return ev(n.a, env) / ev(n.b, env);
      case "neg": return -ev(n.a, env);
      case "pow": return Math.pow(ev(n.a, env), ev(n.b, env));
      case "dot": return n.a.t === "id" && (n.a.v + "'") in env ? env[n.a.v + "'"] : NaN;
      case "call": { const f = FN[n.f]; return f ? f(...n.args.map((a) => ev(a, env))) : NaN; }
      default: return NaN;
    }
  };
  return (env) => ev(tree, env);
}
