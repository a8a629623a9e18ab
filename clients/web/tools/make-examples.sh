#!/usr/bin/env bash
# Copies the "model" and "simulation" blocks of the shared cases into
# clients/web/examples/<case>.json, plus examples/index.json listing them, so the
# web front end's examples stay in step with the cases. Examples written by hand in that
# folder (the closed-form systems of tests/unit/test_systems.c) are kept and listed
# after the cases. Uses node (jq is not assumed).
# Usage: clients/web/tools/make-examples.sh [cases-dir]   (default: ../shared/cases)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/../.." && pwd)
cases=${1:-${HAMEL_CASES:-$repo/../shared/cases}}
[ -d "$cases" ] || { echo "make-examples: no cases directory at $cases" >&2; exit 1; }
node - "$cases" "$here/examples" <<'JS'
const fs = require("fs"), path = require("path");
const [cases, out] = process.argv.slice(2);
fs.mkdirSync(out, { recursive: true });
const index = [];
for (const f of fs.readdirSync(cases).filter((f) => f.endsWith(".json")).sort()) {
  const c = JSON.parse(fs.readFileSync(path.join(cases, f), "utf8"));
  if (!c.model || !c.simulation) continue;
  const ex = {
    title: c.model.name || path.basename(f, ".json"),
    source: c.source || "",
    description: c.description || "",
    model: c.model,
    simulation: c.simulation,
  };
  fs.writeFileSync(path.join(out, f), JSON.stringify(ex, null, 2) + "\n");
  index.push({ file: f, title: ex.title, source: ex.source });
}
const fromCases = new Set(index.map((e) => e.file));
for (const f of fs.readdirSync(out).filter((f) => f.endsWith(".json") && f !== "index.json" && !fromCases.has(f)).sort()) {
  const ex = JSON.parse(fs.readFileSync(path.join(out, f), "utf8"));
  index.push({ file: f, title: ex.title, source: ex.source || "" });
}
fs.writeFileSync(path.join(out, "index.json"), JSON.stringify(index, null, 2) + "\n");
console.log(`make-examples: ${index.length} examples written to ${out}`);
JS
