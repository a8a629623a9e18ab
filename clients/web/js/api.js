// api.js — the calls of API.md §2–5 over fetch. Every non-2xx answer becomes an
// ApiError carrying the RFC 9457 problem document, so the page can point at the
// offending line and column.

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || { title: `HTTP ${status}`, status };
  }
}

// Ids such as "sha256:…" go into paths as they are; anything unusual is escaped.
const seg = (id) => String(id).replace(/[^A-Za-z0-9:._~-]/g, (c) => encodeURIComponent(c));

export class Api {
  /** base: "" for the page's own origin, or e.g. "http://127.0.0.1:8080";
   *  token: the bearer token of a server started with HAMEL_TOKEN, or "". */
  constructor(base, token) {
    this.base = String(base || "").replace(/\/+$/, "");
    this.token = token || "";
  }

  url(path) {
    return this.base + path;
  }

  async call(method, path, body) {
    const init = { method, headers: { Accept: "application/json, application/problem+json" } };
    if (this.token) init.headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    // the body is read inside the try: a connection cut while it arrives (the tab
    // navigating away, the server stopping) is the same ApiError as one never made
    let res, text;
    try {
      res = await fetch(this.url(path), init);
      text = await res.text();
    } catch (e) {
      throw new ApiError(0, {
        title: "The server could not be reached",
        detail: `${method} ${this.url(path)} failed (${e.message}). Is hamel-server running, and does the base URL point at it?`,
      });
    }
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = null; }
    if (!res.ok) throw new ApiError(res.status, json || { title: `HTTP ${res.status}`, detail: text.slice(0, 300) });
    return { status: res.status, body: json, location: res.headers.get("Location") };
  }

  /** A call whose answer is a file (POST /v1/code): {status, text, type}; a problem
   *  document is an ApiError as for call(). */
  async callText(method, path, body) {
    const init = { method, headers: { Accept: "text/x-c, text/x-python, application/problem+json" } };
    if (this.token) init.headers.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res, text;
    try {
      res = await fetch(this.url(path), init);
      text = await res.text();
    } catch (e) {
      throw new ApiError(0, { title: "The server could not be reached", detail: `${method} ${this.url(path)} failed (${e.message}).` });
    }
    if (!res.ok) {
      let json = null;
      try { json = JSON.parse(text); } catch { json = null; }
      throw new ApiError(res.status, json || { title: `HTTP ${res.status}`, detail: text.slice(0, 300) });
    }
    return { status: res.status, text, type: res.headers.get("Content-Type") || "text/plain" };
  }

  health() { return this.call("GET", "/v1/health"); }
  code(req) { return this.callText("POST", "/v1/code", req); }
  postModel(model) { return this.call("POST", "/v1/models", model); }
  modelSource(id) { return this.call("GET", `/v1/models/${seg(id)}?source=1`); }
  equations(id) { return this.call("GET", `/v1/models/${seg(id)}/equations`); }
  hamel(req) { return this.call("POST", "/v1/hamel", req); }
  simulate(req) { return this.call("POST", "/v1/simulations", req); }
  job(id) { return this.call("GET", `/v1/jobs/${seg(id)}`); }
  cancel(id) { return this.call("DELETE", `/v1/jobs/${seg(id)}`); }
  cancelBatch(id) { return this.call("DELETE", `/v1/batches/${seg(id)}`); }

  /** POST /v1/batches streamed as NDJSON: onLine(obj) for each line as it arrives.
   *  Resolves with {batchId} at the end of the stream; `signal` aborts it. */
  async batchStream(body, onLine, signal, onStart) {
    const headers = { Accept: "application/x-ndjson", "Content-Type": "application/json" };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    let res;
    try {
      res = await fetch(this.url("/v1/batches?summary=1"), { method: "POST", headers, body: JSON.stringify(body), signal });
    } catch (e) {
      throw new ApiError(0, { title: "The server could not be reached", detail: String(e.message) });
    }
    if (!res.ok) {
      const text = await res.text();
      let json = null;
      try { json = JSON.parse(text); } catch { json = null; }
      throw new ApiError(res.status, json || { title: `HTTP ${res.status}`, detail: text.slice(0, 300) });
    }
    const batchId = res.headers.get("X-Batch-Id");
    if (onStart) onStart(batchId);
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (value) buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) onLine(JSON.parse(line));
      }
      if (done) break;
    }
    if (buf.trim()) onLine(JSON.parse(buf));
    return { batchId };
  }
}
