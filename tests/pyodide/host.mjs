// The Pyodide test host: the real src/entry.py in Pyodide 314 (npm `pyodide`) in Node ≥ 22, with
// wrangler's local KV/R2/D1 (getPlatformProxy) and local fakes of Vectorize and Workers AI.
//
// Why: `wrangler dev` cannot run a Python Worker offline (workerd downloads its Pyodide bundle),
// so this host rebuilds the part of workerd a Python Worker touches: it unpacks the Worker's
// pure-Python wheels (and pydantic-core's wasm wheel) into Pyodide, stubs the two workerd-only
// modules the SDK imports (`_pyodide_entrypoint_helper`, `_cloudflare_compat_flags`), gives the
// bindings the class names workerd gives them (so the SDK wraps them as in production), creates
// `Default(ctx, env)` per request and calls its `fetch` with a real `Request`.
//
// Usage:  node tests/pyodide/host.mjs '<config JSON>'
//   config: {persistTo, wheels?, src?, configPath?, environment?, mainModule?,
//            vectorize?: {dimensions, metadataIndexes?}, ai?: {embeddingModels?}, vars?: {..},
//            recordCalls?: true (each fetch answer carries the request's binding calls),
//            colo?: "on" (default) | "off" | "broken" (the colo's cache: `caches.default`)}
//   Bindings and compatibility flags are read from the wrangler configuration.
//   persistTo is the folder given to `wrangler ... --local --persist-to` (state under v3/).
//
// Protocol: one JSON object per line on stdin, one JSON answer per line on stdout (everything
// else is written to stderr). First line out: {"ready": true, "timings": {...}, "heap_bytes"}.
//   {"cmd": "fetch", "method", "path", "headers"?, "body"?}
//        → {"status", "headers", "body", "ms", "wait_until", "schedule"? (recordCalls)}
//   {"cmd": "publish", "dir", "activate"?}       → {"version", "vectors", "ms"}   (from Pyodide)
//   {"cmd": "store_unverified", "dir", "version"} → write blobs as-is and activate (no checks)
//   {"cmd": "bulk_store", "dir", "version", "records"?, "keys"?, "concurrency"?}
//        → {"files", "bytes", "records", "ms"}: benchmark-size packages, from JS (below)
//   {"cmd": "scheduled", "cron"?}                 → {"ms", "stdout": [lines the handler printed]}
//   {"cmd": "python", "code"}                     → {"result"}  (code sets `result`; `env` in scope)
//   {"cmd": "stats"}    → {"heap_bytes", "rss_bytes", "timings", "requests", "vectorize", "ai_calls",
//                          "colo": {"entries", "bytes", "calls": {match, hit, put}}}
//   {"cmd": "colo_clear"}                         → {"entries"}: empty the colo's cache (a cold colo)
//   {"cmd": "exit"}
// Errors: {"error": message}. An optional "id" in a command is echoed in its answer.

import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { format } from "node:util";

// stdout carries the protocol only; wrangler and Pyodide print to stderr.
const writeProtocol = process.stdout.write.bind(process.stdout);
const toStderr = (...args) => process.stderr.write(`${format(...args)}\n`);
console.log = console.info = console.debug = console.warn = toStderr;

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");
const config = JSON.parse(process.argv[2] ?? "{}");
const wheelsDir = path.resolve(config.wheels ?? path.join(root, ".cache", "pyodide-wheels"));
const srcDir = path.resolve(config.src ?? path.join(root, "src"));
const configPath = path.resolve(config.configPath ?? path.join(root, "wrangler.toml"));
const persistTo = path.resolve(config.persistTo ?? path.join(root, ".wrangler", "state"));
const mainModule = config.mainModule ?? "entry";
const WORKER_DIR = "/session/metadata"; // where workerd puts the Worker's modules
const HARNESS_DIR = "/session/harness";

const timings = {};
const started = performance.now();
const mark = (name, since) => {
  timings[name] = Math.round((performance.now() - since) * 10) / 10;
};

const { loadPyodide } = await import("pyodide");
const { getPlatformProxy, unstable_readConfig } = await import("wrangler");
const { VectorizeIndexImpl } = await import("./fake_vectorize.mjs");
const { Ai } = await import("./fake_ai.mjs");

// --- bindings -----------------------------------------------------------------------------------

// The SDK's _EnvWrapper wraps a binding in _BindingWrapper (argument/result conversion) only when
// its JS class name is one workerd uses; wrangler's proxies are anonymous, so give them the name.
function asBinding(className, inner, name) {
  const cls = { [className]: class {} }[className];
  return new Proxy(new cls(), {
    get(_target, prop) {
      if (prop === "constructor") return cls;
      if (prop === "then") return undefined;
      const value = inHost(() => inner[prop]);
      if (typeof value !== "function") return value;
      return recordCalls ? recorded(name, className, prop, value.bind(inner)) : value.bind(inner);
    },
    has(_target, prop) {
      return prop === "constructor" || prop in inner;
    },
  });
}

// --- the call recorder (config.recordCalls; bench/edge_model.py) -------------------------------
//
// Per request, every binding call: its binding, class, operation, key (an R2/KV key, the SQL of a
// D1 statement), when it was issued and when its promise settled (ms since the request began),
// the bytes it returned, and the main thread's CPU time (µs) at each of those moments, so the
// CPU the isolate spent between two of them is known. R2 bodies read after a `get`
// (`arrayBuffer`, `text`, `json`) are recorded as "body" calls of their own. Nothing is recorded
// (and the bindings behave as before) without recordCalls.

const recordCalls = Boolean(config.recordCalls);
let schedule = null; // {events: [...]} while a request is being recorded
let nextCall = 0;
const rawStatement = new WeakMap(); // a wrapped D1 statement → wrangler's own (for batch)

// The main thread's CPU (Node ≥ 23.9): the isolate's work and the JS around it, not wrangler's
// worker threads or the garbage collector's helpers (process.cpuUsage counts those too).
function cpuMicros() {
  const usage = process.threadCpuUsage?.() ?? process.cpuUsage();
  return usage.user + usage.system;
}

// CPU spent inside wrangler's local proxies (a property read or a prepare/bind is a synchronous
// round trip to workerd there; an issue serializes the call): the host's, not the isolate's.
function inHost(run) {
  if (!schedule) return run();
  const before = cpuMicros();
  try {
    return run();
  } finally {
    if (schedule) schedule.host_us += cpuMicros() - before;
  }
}

function note(event) {
  if (!schedule) return;
  event.t = performance.now() - schedule.began;
  event.cpu = cpuMicros() - schedule.cpu0;
  event.host = schedule.host_us;
  if (schedule.ended) event.after_response = true;
  schedule.events.push(event);
}

function sizeOf(value) {
  if (value === null || value === undefined) return 0;
  if (value instanceof Response) return Number(value.headers.get("content-length") ?? 0);
  if (typeof value === "string") return Buffer.byteLength(value);
  if (value instanceof ArrayBuffer) return value.byteLength;
  if (ArrayBuffer.isView(value)) return value.byteLength;
  if (typeof value === "object" && typeof value.arrayBuffer === "function" && "size" in value) return 0;
  try {
    return Buffer.byteLength(JSON.stringify(value) ?? "");
  } catch {
    return 0;
  }
}

function keyOf(op, args) {
  const first = args[0];
  if (typeof first === "string") return first.slice(0, 300);
  if (op === "batch" && Array.isArray(first)) return `batch of ${first.length}`;
  if (first && typeof first === "object" && typeof first.prefix === "string") return first.prefix;
  return null;
}

// A result worth following: an R2 object with a body, or a D1 statement (prepare/bind).
function follow(name, className, value, key) {
  if (!value || typeof value !== "object") return value;
  if (typeof value.arrayBuffer === "function" && "size" in value) {
    return followBody(name, className, value, key);
  }
  if (typeof value.bind === "function" && typeof value.all === "function") {
    const wrapped = new Proxy(value, {
      get(target, prop) {
        const member = inHost(() => target[prop]);
        if (typeof member !== "function" || prop === "constructor") return member;
        const bound = member.bind(target);
        if (prop === "bind") return (...args) => follow(name, className, inHost(() => bound(...args)), key);
        return recorded(name, className, prop, bound, key);
      },
    });
    rawStatement.set(wrapped, rawStatement.get(value) ?? value);
    return wrapped;
  }
  return value;
}

function followBody(name, className, object, key) {
  return new Proxy(object, {
    get(target, prop) {
      const member = inHost(() => target[prop]);
      if (typeof member !== "function" || prop === "constructor") return member;
      if (!["arrayBuffer", "text", "json", "blob", "bytes"].includes(prop)) return member.bind(target);
      return (...args) => {
        const id = nextCall++;
        note({ kind: "issue", id, binding: name, cls: className, op: `body.${prop}`, key, body: true });
        return Promise.resolve(inHost(() => member.apply(target, args))).then(
          (result) => {
            note({ kind: "settle", id, bytes: sizeOf(result) });
            return result;
          },
          (error) => {
            note({ kind: "settle", id, bytes: 0, error: true });
            throw error;
          },
        );
      };
    },
  });
}

function recorded(name, className, op, call, statementKey = null) {
  return (...args) => {
    if (op === "batch" && Array.isArray(args[0])) {
      args = [args[0].map((statement) => rawStatement.get(statement) ?? statement), ...args.slice(1)];
    }
    if (!schedule) return follow(name, className, call(...args), statementKey);
    const key = statementKey ?? keyOf(op, args);
    if (op === "prepare") return follow(name, className, inHost(() => call(...args)), key);
    const id = nextCall++;
    const options = args[1];
    const range = Boolean(
      options && typeof options === "object" && (options instanceof Map ? options.has("range") : "range" in options),
    );
    note({ kind: "issue", id, binding: name, cls: className, op, key, ...(range ? { range } : {}) });
    let result;
    try {
      result = inHost(() => call(...args));
    } catch (error) {
      note({ kind: "settle", id, bytes: 0, error: true });
      throw error;
    }
    if (!result || typeof result.then !== "function") {
      note({ kind: "settle", id, bytes: sizeOf(result), sync: true });
      return follow(name, className, result, key);
    }
    return result.then(
      (value) => {
        // an R2 object: the headers have arrived, its body is read by a "body" call
        const headersOnly = Boolean(value && typeof value === "object" && "size" in value && typeof value.arrayBuffer === "function");
        const bytes = headersOnly ? Number(value.size) : sizeOf(value);
        note({ kind: "settle", id, bytes, ...(headersOnly ? { headers_only: true } : {}) });
        return follow(name, className, value, key);
      },
      (error) => {
        note({ kind: "settle", id, bytes: 0, error: true });
        throw error;
      },
    );
  };
}

// Vectorize and Workers AI are local fakes with their own classes: record their calls too.
function recordedFake(name, className, instance) {
  if (!recordCalls) return instance;
  return new Proxy(instance, {
    get(target, prop) {
      const member = target[prop];
      if (typeof member !== "function" || prop === "constructor") return member;
      return recorded(name, className, prop, member.bind(target));
    },
  });
}

// --- the colo's cache (caches.default) ----------------------------------------------------------
//
// getPlatformProxy's `caches` is a no-op (match always misses, put stores nothing), so the host
// gives the Worker a cache that behaves like one colo's: an in-memory Map keyed by URL, shared
// by every request of this host, holding each put's body; a match returns a new Response over
// the stored bytes (with its content-length, so the recorder knows its size). "broken": every
// match and put rejects (the Worker must answer from R2); "off": no `caches` global at all.

class ColoCache {
  constructor(mode) {
    this.mode = mode;
    this.entries = new Map();
    this.calls = { match: 0, hit: 0, put: 0 };
  }
  async match(request) {
    this.calls.match++;
    if (this.mode === "broken") throw new Error("colo cache unavailable");
    const body = this.entries.get(typeof request === "string" ? request : request.url);
    if (body === undefined) return undefined;
    this.calls.hit++;
    return new Response(body.slice(0), { headers: { "content-length": String(body.byteLength) } });
  }
  async put(request, response) {
    this.calls.put++;
    if (this.mode === "broken") throw new Error("colo cache unavailable");
    this.entries.set(typeof request === "string" ? request : request.url, await response.arrayBuffer());
  }
  async delete(request) {
    return this.entries.delete(typeof request === "string" ? request : request.url);
  }
  stats() {
    let bytes = 0;
    for (const body of this.entries.values()) bytes += body.byteLength;
    return { mode: this.mode, entries: this.entries.size, bytes, calls: { ...this.calls } };
  }
}
const colo = new ColoCache(config.colo ?? "on");
if (colo.mode !== "off") {
  globalThis.caches = { default: recordedFake("caches.default", "Cache", colo) };
}

let t = performance.now();
const proxy = await getPlatformProxy({
  configPath,
  environment: config.environment,
  persist: { path: path.join(persistTo, "v3") },
  remoteBindings: false,
});
mark("platform_proxy_ms", t);

// Whatever happens from here on, stop wrangler's local runtime before exiting.
async function shutdown(code) {
  try {
    await proxy.dispose();
  } finally {
    process.exit(code);
  }
}
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => shutdown(130));
process.on("uncaughtException", (error) => {
  toStderr("host failed:", error);
  shutdown(1);
});

// Binding names and kinds come from the wrangler configuration (the same file deploy reads).
const wranglerConfig = unstable_readConfig({ config: configPath, env: config.environment });
const env = { ...proxy.env };
for (const { binding } of wranglerConfig.kv_namespaces ?? []) env[binding] = asBinding("KvNamespace", proxy.env[binding], binding);
for (const { binding } of wranglerConfig.r2_buckets ?? []) env[binding] = asBinding("R2Bucket", proxy.env[binding], binding);
for (const { binding } of wranglerConfig.d1_databases ?? []) env[binding] = asBinding("D1Database", proxy.env[binding], binding);
// Vectorize and Workers AI are remote-only in wrangler: each such binding gets a local fake.
const vectorizes = {};
for (const { binding } of wranglerConfig.vectorize ?? []) {
  vectorizes[binding] = new VectorizeIndexImpl({
    dimensions: config.vectorize?.dimensions ?? 384,
    metadataIndexes: config.vectorize?.metadataIndexes ?? null,
  });
  env[binding] = recordedFake(binding, "VectorizeIndexImpl", vectorizes[binding]);
}
const ai = new Ai(config.ai ?? {});
if (wranglerConfig.ai?.binding) env[wranglerConfig.ai.binding] = recordedFake(wranglerConfig.ai.binding, "Ai", ai);
// Test-only variables on top of the configuration's [vars] (e.g. KR_ACTIVE_VERSION_TTL_S).
Object.assign(env, config.vars ?? {});

// --- Pyodide ------------------------------------------------------------------------------------

t = performance.now();
// Python's stdout goes to stderr, and to `captured` while a command collects it (the cron
// handler's report is a printed JSON line, as in the Worker's logs).
let captured = null;
const pythonStdout = (line) => {
  if (captured) captured.push(line);
  toStderr(line);
};
const pyodide = await loadPyodide({ stdout: pythonStdout, stderr: toStderr });
mark("pyodide_boot_ms", t);

t = performance.now();
const wheels = fs.existsSync(wheelsDir) ? fs.readdirSync(wheelsDir).filter((f) => f.endsWith(".whl")) : [];
if (wheels.length === 0) {
  throw new Error(`no wheels in ${wheelsDir}: run scripts/dev.sh test (or tests/pyodide/fetch_wheels.py)`);
}
for (const wheel of wheels.sort()) {
  pyodide.unpackArchive(new Uint8Array(fs.readFileSync(path.join(wheelsDir, wheel))), "wheel");
}
mark("wheels_unpack_ms", t);

// The Worker's files, as wrangler uploads them (no caches, no packaging metadata).
function copyTree(from, to) {
  pyodide.FS.mkdirTree(to);
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    if (entry.name === "__pycache__" || entry.name.endsWith(".egg-info") || entry.name.endsWith(".pyc")) continue;
    const source = path.join(from, entry.name);
    if (entry.isDirectory()) copyTree(source, `${to}/${entry.name}`);
    else pyodide.FS.writeFile(`${to}/${entry.name}`, new Uint8Array(fs.readFileSync(source)));
  }
}
copyTree(srcDir, WORKER_DIR);
pyodide.FS.mkdirTree(HARNESS_DIR);
pyodide.FS.writeFile(`${HARNESS_DIR}/kr_pyodide_harness.py`, new Uint8Array(fs.readFileSync(path.join(here, "harness.py"))));

// The two workerd-only modules the SDK imports.
let currentPending = null;
const flags = Object.fromEntries((wranglerConfig.compatibility_flags ?? []).map((flag) => [flag, true]));
pyodide.registerJsModule("_cloudflare_compat_flags", {
  python_workflows_implicit_dependencies: false,
  python_request_headers_preserve_commas: false,
  ...flags,
});
pyodide.registerJsModule("_pyodide_entrypoint_helper", {
  cloudflareWorkersModule: {
    env,
    waitUntil: (promise) => keepUntilDone(currentPending, promise),
  },
  cloudflareSocketsModule: {},
  doAnImport: (name) => import(name),
  patchWaitUntil: () => {},
});

function keepUntilDone(pending, promise) {
  let p = promise;
  if (p && typeof p.copy === "function") p = p.copy(); // a PyProxy argument dies with the call
  const settled = Promise.resolve(p)
    .catch((error) => toStderr("waitUntil task failed:", error))
    .finally(() => p?.destroy?.());
  (pending ?? []).push(settled);
}

class ExecutionContext {
  constructor(pending) {
    this.props = {};
    this.waitUntil = (promise) => keepUntilDone(pending, promise);
    this.passThroughOnException = () => {};
  }
}

class ScheduledController {
  constructor(cron) {
    this.cron = cron;
    this.scheduledTime = Date.now();
  }
  noRetry() {}
}

t = performance.now();
pyodide.runPython(`import sys; sys.path.insert(0, ${JSON.stringify(HARNESS_DIR)})`);
const harness = pyodide.pyimport("kr_pyodide_harness");
harness.patch_runtime();
mark("harness_ms", t);
timings.entry_import_ms = Math.round(harness.load_entry(WORKER_DIR, mainModule) * 10) / 10;
mark("ready_ms", started);

// --- commands -----------------------------------------------------------------------------------

let requests = 0;

async function withContext(run) {
  const pending = [];
  const ctx = new ExecutionContext(pending);
  currentPending = pending;
  try {
    return await run(ctx, pending);
  } finally {
    currentPending = null;
  }
}

async function doFetch(msg) {
  const url = new URL(msg.path ?? "/", msg.origin ?? "https://knowledge-router.test");
  const init = { method: msg.method ?? "GET", headers: msg.headers ?? {} };
  if (msg.body !== undefined && msg.body !== null) {
    init.body = typeof msg.body === "string" ? msg.body : JSON.stringify(msg.body);
  }
  return withContext(async (ctx, pending) => {
    const request = new Request(url, init);
    const began = performance.now();
    const recording = recordCalls ? { began, cpu0: cpuMicros(), host_us: 0, events: [], ended: false } : null;
    schedule = recording;
    const instance = harness.new_instance(ctx, env);
    let response;
    try {
      response = await harness.call(instance, "fetch", request);
    } finally {
      instance.destroy();
    }
    const body = await response.text();
    const ms = performance.now() - began;
    if (recording) {
      recording.end_ms = ms;
      recording.end_cpu_us = cpuMicros() - recording.cpu0;
      recording.end_host_us = recording.host_us;
      recording.ended = true;
    }
    const waited = pending.length;
    await Promise.allSettled(pending);
    schedule = null;
    requests++;
    const answer = {
      status: response.status,
      headers: Object.fromEntries(response.headers),
      body,
      ms,
      wait_until: waited,
    };
    if (recording) {
      answer.schedule = {
        events: recording.events,
        end_ms: recording.end_ms,
        end_cpu_us: recording.end_cpu_us,
        end_host_us: recording.end_host_us,
      };
    }
    return answer;
  });
}

async function doScheduled(msg) {
  return withContext(async (ctx, pending) => {
    const began = performance.now();
    const instance = harness.new_instance(ctx, env);
    const printed = [];
    captured = printed;
    try {
      try {
        await harness.call(instance, "scheduled", new ScheduledController(msg.cron ?? "*/15 * * * *"), env, ctx);
      } finally {
        instance.destroy();
      }
      await Promise.allSettled(pending);
    } finally {
      captured = null;
    }
    return { ms: performance.now() - began, stdout: printed };
  });
}

function writePackageIntoFs(dir) {
  const target = `/tmp/packages/${path.basename(dir)}-${Date.now()}`;
  pyodide.FS.mkdirTree(target);
  for (const name of fs.readdirSync(dir)) {
    const source = path.join(dir, name);
    if (fs.statSync(source).isFile()) {
      pyodide.FS.writeFile(`${target}/${name}`, new Uint8Array(fs.readFileSync(source)));
    }
  }
  return target;
}

// A benchmark-size package (tens of thousands of files) stored from JS, many puts at a time:
// publishing through Pyodide (the product's publisher, one put after another, then a read-back)
// took ≈ 10 min for 8,500 files. The blobs go into R2 as they are, the D1 version row and the
// document records (a JSONL file of {partition_key, doc_index, record}) into D1, then the KV
// activation — what `kr publish` leaves behind, minus its checks (the tests cover those).
// `keys` ({file name: blob key}, optional) stores each file where the product's publisher would
// (router.package.version.layout.package_key: lazily read files under packages/_objects/);
// without it every file goes under packages/<version>/ (the layout before shared objects).
async function bulkStore({ dir, version, records, keys, concurrency = 32 }) {
  const started = performance.now();
  const bucket = proxy.env[wranglerConfig.r2_buckets[0].binding];
  const names = fs.readdirSync(dir).filter((name) => fs.statSync(path.join(dir, name)).isFile());
  let next = 0;
  let bytes = 0;
  async function worker() {
    while (next < names.length) {
      const name = names[next++];
      const data = fs.readFileSync(path.join(dir, name));
      bytes += data.length;
      await bucket.put(keys?.[name] ?? `packages/${version}/${name}`, new Uint8Array(data));
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  let rows = 0;
  if (records) {
    const db = proxy.env[wranglerConfig.d1_databases[0].binding];
    const manifest = fs.readFileSync(path.join(dir, "manifest.json"), "utf8");
    await db
      .prepare("INSERT OR REPLACE INTO knowledge_versions (version, format_version, manifest) VALUES (?, ?, ?)")
      .bind(version, JSON.parse(manifest).format_version, manifest)
      .run();
    const insert = db.prepare(
      "INSERT OR REPLACE INTO knowledge_records (version, partition_key, doc_index, record) VALUES (?, ?, ?, ?)",
    );
    let batch = [];
    for (const line of fs.readFileSync(records, "utf8").split("\n")) {
      if (!line) continue;
      const row = JSON.parse(line);
      batch.push(insert.bind(version, row.partition_key, row.doc_index, row.record));
      if (batch.length === 500) {
        await db.batch(batch);
        rows += batch.length;
        batch = [];
      }
    }
    if (batch.length) await db.batch(batch);
    rows += batch.length;
  }
  const kv = proxy.env[wranglerConfig.kv_namespaces[0].binding];
  await kv.put("knowledge:active-version", version);
  return { files: names.length, bytes, records: rows, ms: performance.now() - started };
}

async function stats() {
  return {
    heap_bytes: pyodide._module.HEAP8.length,
    // the allocator's break: the high-water mark of what was allocated (the heap above grows
    // in steps of up to 20 %, so it overstates the need by as much)
    heap_used_bytes: pyodide._module._sbrk(0) >>> 0,
    rss_bytes: process.memoryUsage().rss,
    timings,
    requests,
    vectorize: Object.fromEntries(
      await Promise.all(
        Object.entries(vectorizes).map(async ([name, index]) => [name, { ...(await index.describe()), calls: index.calls }]),
      ),
    ),
    ai_calls: ai.calls,
    colo: colo.stats(),
    pyodide_version: pyodide.version,
  };
}

async function handle(msg) {
  switch (msg.cmd) {
    case "fetch":
      return doFetch(msg);
    case "publish":
      return withContext(async (ctx) =>
        JSON.parse(await harness.publish(ctx, env, writePackageIntoFs(msg.dir), msg.activate ?? true)),
      );
    case "store_unverified":
      return withContext(async (ctx) =>
        JSON.parse(await harness.store_unverified(ctx, env, writePackageIntoFs(msg.dir), msg.version)),
      );
    case "bulk_store":
      return bulkStore(msg);
    case "scheduled":
      return doScheduled(msg);
    case "python":
      return withContext(async (ctx) => ({ result: JSON.parse(await harness.run_code(ctx, env, msg.code)) }));
    case "stats":
      return stats();
    case "colo_clear": {
      const entries = colo.entries.size;
      colo.entries.clear();
      return { entries };
    }
    default:
      throw new Error(`unknown command ${JSON.stringify(msg.cmd)}`);
  }
}

writeProtocol(`${JSON.stringify({ ready: true, timings, heap_bytes: pyodide._module.HEAP8.length })}\n`);

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let msg;
  let answer;
  try {
    msg = JSON.parse(line);
    if (msg.cmd === "exit") break;
    answer = await handle(msg);
  } catch (error) {
    answer = { error: String(error?.message ?? error) };
  }
  if (msg?.id !== undefined) answer.id = msg.id;
  writeProtocol(`${JSON.stringify(answer)}\n`);
}
await shutdown(0);
