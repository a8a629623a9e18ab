// Checks that api/openapi.yaml, api/schemas and api/examples stay true to the service.
//
// Static part: the document parses as YAML (duplicate keys are errors) and is a valid
// OpenAPI 3.1 document (@seriousme/openapi-schema-validator); every schema compiles (JSON Schema 2020-12, ajv strict); every $ref resolves;
// every endpoint of API.md is documented; every example file is referenced by the
// document and validates against the schema of the request or response that names
// it; every exchange recorded in api/examples/transcript.txt has a documented status
// and the headers the document marks required; the problem types, integrator methods
// and defaults agree with engine/error.h, engine/integ.{c,h} and engine/sim.c.
//
// Live part (HAMEL_BASE and HAMEL_TOKEN_BASE, servers started by check.sh): every
// documented operation is called — the example request, an unknown id, a body that is
// not JSON, the wrong Content-Type, the wrong method, no token — and each answer must
// have a documented status, a documented Content-Type, a body valid against the
// documented schema and the required headers; `Allow` must list exactly the documented
// methods. Operations marked `x-status: planned` must answer 404 until they land.
//
// Prints one line per check and ends with "N passed, N failed".
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import Ajv2020Module from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { Validator as OpenApiValidator } from '@seriousme/openapi-schema-validator';

const Ajv2020 = Ajv2020Module.default || Ajv2020Module;
const addFormats = addFormatsModule.default || addFormatsModule;

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');
const apiDir = path.join(repo, 'api');
const exDir = path.join(apiDir, 'examples');
const ID_BASE = 'https://hamel.dev/';
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

let passed = 0;
let failed = 0;
function check(name, ok, why = '') {
  if (ok) {
    passed++;
    console.log(`ok   ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name}${why ? `: ${why}` : ''}`);
  }
  return ok;
}

function readJson(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

// ---- the document -------------------------------------------------------------------

let doc = null;
try {
  doc = YAML.parse(fs.readFileSync(path.join(apiDir, 'openapi.yaml'), 'utf8'), {
    uniqueKeys: true,
    prettyErrors: true,
  });
  check('openapi.yaml parses as YAML', true);
} catch (e) {
  check('openapi.yaml parses as YAML', false, e.message.split('\n')[0]);
}
if (!doc) {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(1);
}
{
  // A " #" in an unquoted scalar starts a YAML comment: the rest of the text is lost.
  const lines = fs.readFileSync(path.join(apiDir, 'openapi.yaml'), 'utf8').split('\n');
  const cut = lines.map((l, i) => [i + 1, l]).filter(([, l]) => /^\s*[\w$-]+: [^"'|>{[#].* #/.test(l));
  check('no unquoted text in openapi.yaml is cut short by " #"', cut.length === 0,
    cut.map(([n]) => `line ${n}`).join(', '));
}
check('openapi.yaml is OpenAPI 3.1', /^3\.1\.\d+$/.test(String(doc.openapi)), `openapi: ${doc.openapi}`);
{
  // The document's structure against the OpenAPI 3.1 schema. The validator resolves
  // internal references only: references to schemas/*.json (checked below) stand in as
  // an empty schema here.
  const internal = JSON.parse(JSON.stringify(doc).replace(/"\$ref":"schemas\/[^"]*"/g,
    '"$ref":"#/components/schemas/__external"'));
  internal.components = { ...internal.components, schemas: { ...internal.components?.schemas, __external: {} } };
  const r = await new OpenApiValidator().validate(internal);
  const why = Array.isArray(r.errors)
    ? r.errors.slice(0, 3).map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`).join('; ')
    : String(r.errors || '');
  check('openapi.yaml is a valid OpenAPI 3.1 document (its JSON Schema)', r.valid, why);
}

// ---- schemas ----------------------------------------------------------------------

const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, allowUnionTypes: true });
addFormats(ajv);
const schemaFiles = fs.readdirSync(path.join(apiDir, 'schemas')).filter((f) => f.endsWith('.json')).sort();
const schemaDocs = {};
for (const f of schemaFiles) {
  try {
    const s = readJson(path.join(apiDir, 'schemas', f));
    schemaDocs[f] = s;
    if (s.$id !== `${ID_BASE}schemas/${f}`) throw new Error(`$id is ${s.$id}, expected ${ID_BASE}schemas/${f}`);
    ajv.addSchema(s);
  } catch (e) {
    check(`schema ${f} loads`, false, e.message);
  }
}
for (const f of Object.keys(schemaDocs)) {
  try {
    ajv.getSchema(schemaDocs[f].$id);
    check(`schema ${f} compiles (2020-12, strict)`, true);
  } catch (e) {
    check(`schema ${f} compiles (2020-12, strict)`, false, e.message);
  }
}

// Rewrites the document's $refs into ids ajv knows.
function rewriteRefs(node) {
  if (Array.isArray(node)) return node.map(rewriteRefs);
  if (!node || typeof node !== 'object') return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === '$ref' && typeof v === 'string') {
      if (v.startsWith('schemas/')) out[k] = ID_BASE + v;
      else if (v.startsWith('#/components/schemas/')) out[k] = `${ID_BASE}openapi/components/schemas/${v.slice(21)}`;
      else out[k] = v;
    } else {
      out[k] = rewriteRefs(v);
    }
  }
  return out;
}
for (const [name, s] of Object.entries(doc.components?.schemas || {})) {
  try {
    ajv.addSchema({ $id: `${ID_BASE}openapi/components/schemas/${name}`, ...rewriteRefs(s) });
  } catch (e) {
    check(`components.schemas.${name} loads`, false, e.message);
  }
}
const compiled = new Map();
function validatorFor(schema) {
  const key = JSON.stringify(schema);
  if (!compiled.has(key)) {
    const s = rewriteRefs(schema);
    compiled.set(key, s.$ref && Object.keys(s).length === 1 ? ajv.getSchema(s.$ref) || ajv.compile(s) : ajv.compile(s));
  }
  return compiled.get(key);
}
function validate(schema, value) {
  let v;
  try {
    v = validatorFor(schema);
  } catch (e) {
    return `the schema does not compile: ${e.message}`;
  }
  if (!v) return 'no validator';
  if (v(value)) return '';
  return v.errors.slice(0, 4).map((e) => {
    const extra = e.params?.additionalProperty ?? e.params?.allowedValues ?? e.params?.missingProperty;
    return `${e.instancePath || '/'} ${e.message}${extra !== undefined ? ` (${JSON.stringify(extra)})` : ''}`;
  }).join('; ');
}

// ---- $refs --------------------------------------------------------------------------

function pointer(obj, ptr) {
  if (!ptr || ptr === '/') return obj;
  let cur = obj;
  for (const raw of ptr.replace(/^\//, '').split('/')) {
    const p = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (cur == null || !(p in cur)) return undefined;
    cur = cur[p];
  }
  return cur;
}
function resolveRef(ref) {
  const [file, frag] = ref.split('#');
  if (!file) return pointer(doc, frag);
  const f = path.join(apiDir, file);
  if (!fs.existsSync(f)) return undefined;
  return pointer(readJson(f), frag || '');
}
function deref(node) {
  let n = node;
  for (let i = 0; n && n.$ref && i < 10; i++) n = resolveRef(n.$ref);
  return n;
}
{
  const refs = new Set();
  (function walk(n) {
    if (Array.isArray(n)) n.forEach(walk);
    else if (n && typeof n === 'object')
      for (const [k, v] of Object.entries(n)) {
        if (k === '$ref' && typeof v === 'string') refs.add(v);
        else walk(v);
      }
  })(doc);
  const broken = [...refs].filter((r) => resolveRef(r) === undefined);
  check(`every $ref in openapi.yaml resolves (${refs.size})`, broken.length === 0, broken.join(', '));
}

// ---- operations -----------------------------------------------------------------------

const ops = [];
for (const [p, item] of Object.entries(doc.paths || {})) {
  for (const m of METHODS) if (item[m]) ops.push({ path: p, method: m, op: item[m], item });
}
{
  const ids = ops.filter((o) => o.op.operationId).map((o) => o.op.operationId);
  const bad = ops.filter((o) => !o.op.responses || !Object.keys(o.op.responses).length);
  check('every operation has responses; operationIds are unique',
    bad.length === 0 && new Set(ids).size === ids.length,
    bad.map((o) => `${o.method} ${o.path}`).join(', '));
}
const contract = [
  ['get', '/v1/health'], ['get', '/metrics'], ['post', '/v1/models'], ['get', '/v1/models/{id}'],
  ['get', '/v1/models/{id}/equations'], ['post', '/v1/hamel'], ['post', '/v1/simulations'],
  ['get', '/v1/jobs/{id}'], ['delete', '/v1/jobs/{id}'], ['get', '/livez'], ['get', '/readyz'],
  ['post', '/v1/batches'], ['get', '/v1/batches/{id}'], ['delete', '/v1/batches/{id}'],
];
for (const [m, p] of contract)
  check(`documented: ${m.toUpperCase()} ${p}`, Boolean(doc.paths?.[p]?.[m]));

function opFor(method, urlPath) {
  const clean = urlPath.split('?')[0];
  for (const [p, item] of Object.entries(doc.paths)) {
    const re = new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (re.test(clean)) return { path: p, item, op: item[method.toLowerCase()] };
  }
  return null;
}
function mediaBase(t) {
  return String(t || '').split(';')[0].trim().toLowerCase();
}
function documentedResponse(op, status) {
  return deref(op?.responses?.[String(status)]);
}
function contentFor(resp, ctype) {
  if (!resp?.content) return null;
  for (const [k, v] of Object.entries(resp.content)) if (mediaBase(k) === mediaBase(ctype)) return v;
  return null;
}
function requiredHeaders(resp) {
  return Object.entries(resp?.headers || {})
    .filter(([, h]) => deref(h)?.required)
    .map(([name]) => name.toLowerCase());
}

// NDJSON: every line must validate against the media type's x-ndjson-items schema.
function isNdjson(ctype) {
  return /ndjson/.test(mediaBase(ctype));
}
function validateNdjson(media, text) {
  if (!media?.['x-ndjson-items']) return 'the media type has no x-ndjson-items schema';
  const lines = text.split('\n').filter((l) => l.length);
  if (!lines.length) return 'no lines';
  for (const [i, l] of lines.entries()) {
    let v;
    try {
      v = JSON.parse(l);
    } catch (e) {
      return `line ${i + 1} is not JSON: ${e.message}`;
    }
    const err = validate(media['x-ndjson-items'], v);
    if (err) return `line ${i + 1}: ${err}`;
  }
  return '';
}

// ---- examples -----------------------------------------------------------------------

const referenced = new Set();
function checkExample(where, ex, schema, ctype, media) {
  const ev = deref(ex)?.externalValue;
  if (!ev) return;
  const file = path.join(apiDir, ev);
  referenced.add(path.resolve(file));
  if (!fs.existsSync(file)) return check(`${where}: ${ev} exists`, false);
  if (isNdjson(ctype)) {
    const err = validateNdjson(media, fs.readFileSync(file, 'utf8'));
    return check(`${where}: ${ev} validates line by line`, !err, err);
  }
  if (!/json/.test(mediaBase(ctype))) {
    const text = fs.readFileSync(file, 'utf8');
    return check(`${where}: ${ev} is non-empty text`, text.length > 0);
  }
  let value;
  try {
    value = readJson(file);
  } catch (e) {
    return check(`${where}: ${ev} is JSON`, false, e.message);
  }
  if (!schema) return check(`${where}: ${ev} has a schema to validate against`, false);
  const err = validate(schema, value);
  check(`${where}: ${ev} validates`, !err, err);
}
for (const { path: p, method, op } of ops) {
  const where = `${method.toUpperCase()} ${p}`;
  const rb = deref(op.requestBody);
  for (const [ct, media] of Object.entries(rb?.content || {}))
    for (const ex of Object.values(media.examples || {})) checkExample(`${where} request`, ex, media.schema, ct, media);
  for (const [status, r] of Object.entries(op.responses || {})) {
    const resp = deref(r);
    for (const [ct, media] of Object.entries(resp?.content || {}))
      for (const ex of Object.values(media.examples || {})) checkExample(`${where} ${status}`, ex, media.schema, ct, media);
  }
}
for (const f of fs.readdirSync(exDir).sort()) {
  if (f === 'regenerate.sh' || f === 'transcript.txt') continue;
  check(`example ${f} is referenced by openapi.yaml`, referenced.has(path.resolve(exDir, f)));
}

// ---- the recorded exchanges -----------------------------------------------------------

{
  const text = fs.readFileSync(path.join(exDir, 'transcript.txt'), 'utf8');
  const blocks = text.split(/^### /m).filter((b) => b.trim());
  check('transcript.txt records exchanges', blocks.length > 10, `${blocks.length}`);
  for (const b of blocks) {
    const lines = b.split('\n');
    const name = lines[0].trim();
    const req = lines.find((l) => /^> [A-Z]+ \//.test(l));
    const st = lines.find((l) => /^< HTTP\/\S+ \d{3}/.test(l));
    if (!req || !st) {
      check(`transcript ${name}: request and status lines`, false);
      continue;
    }
    const [, method, url] = req.match(/^> ([A-Z]+) (\S+)/);
    const status = Number(st.match(/^< HTTP\/\S+ (\d{3})/)[1]);
    const headers = Object.fromEntries(
      lines.filter((l) => /^< [^ :]+: /.test(l)).map((l) => {
        const m = l.slice(2).match(/^([^:]+): (.*)$/);
        return [m[1].toLowerCase(), m[2]];
      }));
    const found = opFor(method, url);
    // A method the path does not have: its 405 is documented on the path's operations.
    const op = found?.op || (status === 405 && METHODS.map((m) => found?.item?.[m]).find((o) => o?.responses?.['405']));
    const resp = documentedResponse(op, status);
    if (!check(`transcript ${name}: ${method} ${url.split('?')[0]} ${status} is documented`, Boolean(resp))) continue;
    const missing = requiredHeaders(resp).filter((h) => !(h in headers));
    if (missing.length) check(`transcript ${name}: required headers present`, false, missing.join(', '));
    if (status !== 204 && status !== 304 && resp.content)
      check(`transcript ${name}: Content-Type ${headers['content-type']} is documented`,
        Boolean(contentFor(resp, headers['content-type'])));
  }
}

// ---- agreement with the code --------------------------------------------------------------

function source(rel) {
  try {
    return fs.readFileSync(path.join(repo, rel), 'utf8');
  } catch {
    return '';
  }
}
{
  // Slugs: the engine's list (engine/base/error.h) and the service's (server/problems.h);
  // statuses: the rows of server/problems.c. Every code has a row, every slug is documented.
  const classes = [source('engine/base/error.h'), source('server/problems.h')]
    .flatMap((t) => [...t.matchAll(/X\(\s*(\w+),\s*"([a-z-]+)"/g)].map((m) => [m[1], m[2]]));
  const statusOf = Object.fromEntries([...source('server/problems.c').matchAll(/\{HAMEL_E_(\w+),\s*(\d{3})\b/g)]
    .map((m) => [m[1], m[2]]));
  const slugs = classes.map(([, slug]) => slug).sort();
  const documented = (schemaDocs['problem.json']?.properties?.type?.enum || [])
    .map((t) => t.replace('/problems/', '')).sort();
  check('problem types agree with the code (HAMEL_ERROR_MAP, PROBLEMS_SERVER_MAP)', slugs.length > 0 && JSON.stringify(slugs) === JSON.stringify(documented),
    `code: ${slugs.join(' ')} / problem.json: ${documented.join(' ')}`);
  const rowless = classes.filter(([name]) => !statusOf[name]).map(([name]) => name);
  check('every error code has a row (status) in server/problems.c', rowless.length === 0, rowless.join(', '));
  const desc = schemaDocs['problem.json']?.properties?.type?.description || '';
  const wrong = classes.filter(([name, slug]) => {
    const m = desc.match(new RegExp(`(?<![\\w-])${slug}(?![\\w-])[^;]*?\\b(\\d{3})\\b`));
    return !m || m[1] !== statusOf[name];
  }).map(([name, slug]) => `${slug} ${statusOf[name]}`);
  check('problem type → status table agrees with server/problems.c', wrong.length === 0, wrong.join(', '));
}
{
  const req = schemaDocs['simulation-request.json'] || {};
  const integC = source('engine/run/integ.c');
  const integH = source('engine/run/integ.h');
  const simC = source('engine/run/request.c'); // the request's defaults: validation
  const names = (integC.match(/#define INTEG_METHOD_NAMES "([^"]+)"/) || [])[1]?.split(' ').sort() || [];
  const documented = [...(req.properties?.integrator?.properties?.method?.enum || [])].sort();
  check('integrator methods agree with engine/run/integ.c', names.length > 0 && JSON.stringify(names) === JSON.stringify(documented),
    `integ.c: ${names.join(' ')} / schema: ${documented.join(' ')}`);
  const def = (re, text) => (text.match(re) || [])[1];
  const integ = req.properties?.integrator?.properties || {};
  const pairs = [
    ['default method', def(/INTEG_DEFAULT_METHOD "(\w+)"/, integH), integ.method?.default],
    ['default rtol', Number(def(/INTEG_DEFAULT_RTOL ([0-9.e+-]+)/, integH)), integ.rtol?.default],
    ['default atol', Number(def(/INTEG_DEFAULT_ATOL ([0-9.e+-]+)/, integH)), integ.atol?.default],
    ['default max_steps', Number(def(/SIM_DEFAULT_MAX_STEPS (\d+)/, simC)), integ.max_steps?.default],
    ['default samples', Number(def(/SIM_DEFAULT_SAMPLES (\d+)/, simC)), req.properties?.output?.properties?.samples?.default],
  ];
  for (const [what, code, schema] of pairs)
    check(`simulation request ${what} agrees with the engine`, code !== undefined && code === schema, `code ${code}, schema ${schema}`);
}
{
  const metricsDesc = doc.paths['/metrics']?.get?.description || '';
  const text = fs.existsSync(path.join(exDir, 'metrics.txt')) ? fs.readFileSync(path.join(exDir, 'metrics.txt'), 'utf8') : '';
  // `name{label,...}` names labels; `pre_{a,b}_post` stands for several names.
  const families = [...metricsDesc.matchAll(/`(hamel_[a-z_{},]+)`/g)].flatMap(([, f]) => {
    const name = f.replace(/\{[a-z_,]*\}$/, '');
    const m = name.match(/^(hamel_[a-z_]*)\{([a-z_,]+)\}([a-z_]*)$/);
    return m ? m[2].split(',').map((x) => m[1] + x + m[3]) : [name];
  });
  const missing = families.filter((f) => !new RegExp(`^${f}(_bucket|_sum|_count)?[ {]`, 'm').test(text));
  check(`metrics families in the document appear in examples/metrics.txt (${families.length})`,
    families.length > 5 && missing.length === 0, missing.join(', '));
}

// ---- the live server ----------------------------------------------------------------------

const base = process.env.HAMEL_BASE;
const tokenBase = process.env.HAMEL_TOKEN_BASE;

async function call(b, method, url, { body, ctype = 'application/json', headers = {} } = {}) {
  const h = { ...headers };
  if (body !== undefined && ctype) h['Content-Type'] = ctype;
  const res = await fetch(b + url, { method, headers: h, body });
  const text = await res.text();
  const hdrs = {};
  res.headers.forEach((v, k) => { hdrs[k] = v; });
  return { status: res.status, headers: hdrs, text };
}

// Checks one live answer against the document: status, Content-Type, body, headers.
function conforms(label, method, url, r) {
  const found = opFor(method, url);
  const resp = documentedResponse(found?.op, r.status);
  if (!check(`${label}: ${method} ${url} → ${r.status} is documented`, Boolean(resp),
    r.text.slice(0, 200))) return false;
  const missing = requiredHeaders(resp).filter((h) => !(h in r.headers));
  if (missing.length) check(`${label}: required headers`, false, missing.join(', '));
  if (!resp.content || method === 'HEAD' || r.status === 204 || r.status === 304) return true;
  const media = contentFor(resp, r.headers['content-type']);
  if (!check(`${label}: Content-Type ${r.headers['content-type']} is documented`, Boolean(media))) return false;
  if (isNdjson(r.headers['content-type'])) {
    const err = validateNdjson(media, r.text);
    return check(`${label}: every NDJSON line validates against the documented schema`, !err, err);
  }
  if (!/json/.test(mediaBase(r.headers['content-type'])) || !media.schema) return true;
  let body;
  try {
    body = JSON.parse(r.text);
  } catch (e) {
    return check(`${label}: body is JSON`, false, e.message);
  }
  const err = validate(media.schema, body);
  return check(`${label}: body validates against the documented schema`, !err, err);
}

function exampleBody(op) {
  const media = deref(op.requestBody)?.content?.['application/json'];
  const first = Object.values(media?.examples || {})[0];
  const ex = deref(first);
  if (ex?.externalValue) return readJson(path.join(apiDir, ex.externalValue));
  return ex?.value;
}

async function live() {
  // A model, a finished job.
  const modelOp = doc.paths['/v1/models'].post;
  let r = await call(base, 'POST', '/v1/models', { body: JSON.stringify(exampleBody(modelOp)) });
  conforms('example model', 'POST', '/v1/models', r);
  const modelId = JSON.parse(r.text).model_id;
  const simOp = doc.paths['/v1/simulations'].post;
  const simReq = exampleBody(simOp);
  r = await call(base, 'POST', '/v1/simulations', { body: JSON.stringify(simReq) });
  conforms('example simulation', 'POST', '/v1/simulations', r);
  const jobId = JSON.parse(r.text).job_id;
  r = await call(base, 'GET', `/v1/jobs/${jobId}?wait=60`);
  conforms('job, waited for', 'GET', `/v1/jobs/${jobId}?wait=60`, r);
  check('the job finished', JSON.parse(r.text).status === 'done', r.text.slice(0, 200));
  r = await call(base, 'POST', '/v1/simulations?wait=60', { body: JSON.stringify(simReq) });
  conforms('repeated simulation', 'POST', '/v1/simulations?wait=60', r);
  check('a repeated simulation is a cache hit', r.status === 200 && JSON.parse(r.text).cached === true);

  // The documented defaults, observed: a request with only what is required.
  {
    const req = schemaDocs['simulation-request.json']?.properties || {};
    const minimal = { model_id: modelId, initial: simReq.initial, t_end: 0.5 };
    const d = await call(base, 'POST', '/v1/simulations?wait=60', { body: JSON.stringify(minimal) });
    conforms('minimal simulation', 'POST', '/v1/simulations?wait=60', d);
    const res = d.status === 200 ? JSON.parse(d.text) : {};
    const summary = JSON.parse((await call(base, 'GET', `/v1/models/${modelId}`)).text);
    check('default output: output.samples.default samples',
      res.trajectory?.t?.length === req.output?.properties?.samples?.default, `${res.trajectory?.t?.length}`);
    check('default integrator method is the documented one',
      res.stats?.method === req.integrator?.properties?.method?.default, res.stats?.method);
    check('default formulation is the summary\'s default_formulation',
      res.formulation === summary.default_formulation, `${res.formulation} / ${summary.default_formulation}`);
    check(`default hamel ("${req.hamel?.default}") reports the initial state only`,
      req.hamel?.default === 'initial' && res.hamel?.points?.length === 1 && res.hamel.points[0].t === simReq.initial.t,
      JSON.stringify(res.hamel?.points?.map((pt) => pt.t)));
  }

  // Every problem type resolves, relative to the URL that answered it, to its page.
  {
    const enumTypes = schemaDocs['problem.json']?.properties?.type?.enum || [];
    const bad = [];
    for (const t of enumTypes) {
      const pg = await call(base, 'GET', t);
      if (pg.status !== 200 || !String(pg.headers['content-type']).startsWith('text/html') || !pg.text.includes(t))
        bad.push(`${t} ${pg.status}`);
    }
    check(`every problem type has its page (${enumTypes.length})`, enumTypes.length > 0 && bad.length === 0, bad.join(', '));
    const nf = await call(base, 'GET', `/v1/jobs/${'0'.repeat(32)}`);
    const type = JSON.parse(nf.text).type;
    const pg = await call(base, 'GET', new URL(type, `${base}/v1/jobs/x`).pathname);
    check('a problem\'s type resolves against the request URL to a page with its status',
      type === '/problems/not-found' && pg.status === 200 && pg.text.includes('HTTP status 404'), `${type} ${pg.status}`);
  }

  // A finished batch, and the same streamed.
  let batchId = null;
  const batchOp = doc.paths['/v1/batches']?.post;
  if (batchOp && !batchOp['x-status']) {
    const breq = exampleBody(batchOp);
    breq.model_id = modelId;
    r = await call(base, 'POST', '/v1/batches?wait=60', { body: JSON.stringify(breq) });
    conforms('example batch, waited for', 'POST', '/v1/batches?wait=60', r);
    const bdoc = r.status === 200 ? JSON.parse(r.text) : {};
    batchId = bdoc.batch_id;
    check('the batch finished with a line per run, in index order',
      bdoc.status === 'done' && bdoc.results?.length === breq.runs.length
      && bdoc.results.every((l, i) => l.index === i), r.text.slice(0, 200));
    r = await call(base, 'POST', '/v1/batches?summary=1', {
      body: JSON.stringify(breq), headers: { Accept: 'application/x-ndjson' },
    });
    conforms('example batch, streamed', 'POST', '/v1/batches?summary=1', r);
    const lines = r.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    check('the stream has one line per run and the summary line last',
      lines.length === breq.runs.length + 1 && lines[lines.length - 1].done === true
      && new Set(lines.slice(0, -1).map((l) => l.index)).size === breq.runs.length, `${lines.length} lines`);
  }

  const ids = {
    '/v1/models/{id}': modelId, '/v1/models/{id}/equations': modelId, '/v1/models/{id}/code': modelId,
    '/v1/jobs/{id}': jobId,
    '/v1/batches/{id}': batchId, '/v1/quarantine/{id}': `sha256:${'0'.repeat(64)}`,
    '/problems/{slug}': 'compile-limit',
  };
  const unknown = {
    '/v1/models/{id}': `sha256:${'0'.repeat(64)}`,
    '/v1/models/{id}/equations': `sha256:${'0'.repeat(64)}`,
    '/v1/models/{id}/code': `sha256:${'0'.repeat(64)}`,
    '/v1/jobs/{id}': '0'.repeat(32),
    '/v1/batches/{id}': '0'.repeat(32),
    '/v1/quarantine/{id}': `sha256:${'0'.repeat(64)}`,
    '/problems/{slug}': 'no-such-problem',
  };
  const fill = (p, table) => p.replace(/\{(id|slug)\}/, () => table[p]);

  for (const { path: p, method, op, item } of ops) {
    const M = method.toUpperCase();
    const url = fill(p, ids);
    const label = `${M} ${p}`;
    if (op['x-status'] === 'planned') {
      const pr = await call(base, M, url, { body: JSON.stringify({}) });
      if (pr.status === 404) check(`${label} (planned): not served yet, 404`, true);
      else conforms(`${label} (planned, now served: rewrite its section from the code)`, M, url, pr);
      continue;
    }
    if (M === 'OPTIONS') {
      const pre = await call(base, 'OPTIONS', url, {
        headers: { Origin: 'https://lab.example', 'Access-Control-Request-Method': 'POST' },
      });
      conforms(label, 'OPTIONS', url, pre);
      const documented = METHODS.filter((m) => item[m] && !item[m]['x-status']).map((m) => m.toUpperCase());
      if (documented.includes('GET')) documented.push('HEAD');
      const allow = (pre.headers.allow || '').split(',').map((s) => s.trim()).filter(Boolean);
      check(`${p}: Allow (${allow.join(', ')}) lists exactly the documented methods`,
        JSON.stringify([...allow].sort()) === JSON.stringify([...documented].sort()), `documented: ${documented.join(', ')}`);
      check(`${p}: CORS headers on the preflight`,
        Boolean(pre.headers['access-control-allow-origin'] && pre.headers['access-control-max-age']));
      continue;
    }
    if (p.startsWith('/v1/quarantine/')) { // nothing is quarantined here (tests/server/test_isolate.c)
      const res = await call(base, M, url);
      conforms(`${label}, a model not quarantined`, M, url, res);
      check(`${label}, a model not quarantined: 404`, res.status === 404, `${res.status}`);
      if (tokenBase) {
        const nt = await call(tokenBase, M, url);
        conforms(`${label} without a token`, M, url, nt);
        check(`${label} without a token is 401`, nt.status === 401, `${nt.status}`);
      }
      continue;
    }
    let body;
    if (M === 'POST') {
      const ex = exampleBody(op);
      if (ex && ex.model_id) ex.model_id = modelId;
      body = JSON.stringify(ex ?? {});
    }
    // The documented call.
    if (!(M === 'DELETE')) {
      const res = await call(base, M, url, { body });
      conforms(label, M, url, res);
      check(`${label}: succeeds with the example`, res.status < 300, `${res.status} ${res.text.slice(0, 160)}`);
      if (M === 'GET') {
        const head = await call(base, 'HEAD', url);
        check(`HEAD ${p} answers like GET`, head.status === res.status && head.text === '', `${head.status}`);
      }
    } else {
      const res = await call(base, M, url);
      conforms(`${label} on a finished one`, M, url, res);
      check(`${label} on a finished one is 409`, res.status === 409);
    }
    // An unknown id.
    if (p.includes('{id}') || p.includes('{slug}')) {
      const u = fill(p, unknown);
      conforms(`${label}, unknown id`, M, u, await call(base, M, u));
    }
    if (M === 'POST') {
      conforms(`${label}, body not JSON`, M, url, await call(base, M, url, { body: '{"a": ' }));
      conforms(`${label}, body not an object`, M, url, await call(base, M, url, { body: '[1, 2]' }));
      conforms(`${label}, text/plain`, M, url, await call(base, M, url, { body: '{}', ctype: 'text/plain' }));
      conforms(`${label}, empty object`, M, url, await call(base, M, url, { body: '{}' }));
    }
    if ((p.includes('/jobs/') || p.includes('/batches/')) && M === 'GET')
      conforms(`${label}, ?wait=abc`, M, `${url}?wait=abc`, await call(base, M, `${url}?wait=abc`));
    // The wrong method.
    const wrong = await call(base, 'PATCH', url);
    const documents405 = METHODS.some((m) => item[m]?.responses?.['405']);
    check(`PATCH ${p} is 405 with Allow, and 405 is documented for the path`,
      wrong.status === 405 && Boolean(wrong.headers.allow) && documents405
      && !validate({ $ref: 'schemas/problem.json' }, JSON.parse(wrong.text)), `${wrong.status}`);
    // No token.
    if (tokenBase) {
      const nt = await call(tokenBase, M, fill(p, unknown), { body });
      const open = Array.isArray(op.security) && op.security.length === 0;
      if (open) check(`${label} needs no token`, nt.status !== 401, `${nt.status}`);
      else {
        conforms(`${label} without a token`, M, url, nt);
        check(`${label} without a token is 401 with WWW-Authenticate`,
          nt.status === 401 && /Bearer/.test(nt.headers['www-authenticate'] || ''), `${nt.status}`);
      }
    }
  }
  // An unknown /v1 path.
  const nf = await call(base, 'GET', '/v1/no-such-thing');
  check('an unknown /v1 path is a 404 problem document',
    nf.status === 404 && mediaBase(nf.headers['content-type']) === 'application/problem+json'
    && !validate({ $ref: 'schemas/problem.json' }, JSON.parse(nf.text)));
}

if (base) {
  try {
    await live();
  } catch (e) {
    check('live checks ran to the end', false, e.stack);
  }
} else {
  check('live checks (HAMEL_BASE is set by check.sh)', false, 'HAMEL_BASE is not set');
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
