// The playground: asks POST /v1/query exactly as a browser app would (JSON body, the API key as
// a Bearer credential) and shows why each passage won: per-source scores, the fused score, the
// stages that ran with their time and reads, the confidence and any abstention.
// Everything the API returns is shown with textContent, never as HTML: knowledge text is data.
"use strict";

const SOURCES = ["exact", "keyword", "bm25", "graph", "vector", "rerank", "context"];
const CONTEXT_FIELDS = ["tenant", "page", "tab", "focus", "date"];
const KEY_STORE = "kr-playground-key"; // this tab only (sessionStorage), never in the URL
const ERROR_TITLES = {
  400: "Bad request", 401: "Not authenticated", 403: "Not allowed", 404: "Not found",
  413: "Request too large", 422: "Invalid request", 429: "Too many requests",
  500: "Server error", 503: "No knowledge available",
};
const ERROR_HINTS = {
  401: "Check the API key (kr keys create --tenant T prints one), or leave it empty where anonymous access is on.",
  403: "The tenant field must be the key's own tenant, or empty.",
  422: "The request does not match the API's schema.",
  503: "No knowledge version is active: run kr build knowledge.",
};

const $ = (id) => document.getElementById(id);
let inflight = null; // {controller, id} of the request on screen
let sequence = 0; // the id of the latest request: older answers are dropped

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function badge(text, extra) {
  return el("span", extra ? `badge ${extra}` : "badge", text);
}

function fmt(value, digits = 3) {
  return typeof value === "number" ? String(Number(value.toFixed(digits))) : "—";
}

function kib(bytes) {
  return bytes >= 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${bytes} B`;
}

function requestBody() {
  const body = { query: $("query").value };
  for (const field of CONTEXT_FIELDS) {
    const value = $(field).value.trim();
    if (value) body[field] = value;
  }
  if ($("deprecated").checked) body.include_deprecated = true;
  return body;
}

function setBusy(busy, text) {
  $("cancel").disabled = !busy;
  $("output").setAttribute("aria-busy", busy ? "true" : "false");
  const status = $("status");
  status.replaceChildren();
  if (busy) status.append(el("span", "spinner"), el("span", null, text || "Asking…"));
  else if (text) status.append(el("span", null, text));
}

function showError(status, payload) {
  const box = $("error");
  const error = (payload && payload.error) || {};
  const title = status ? `${status} ${ERROR_TITLES[status] || "Error"}` : "Request failed";
  box.replaceChildren(el("strong", null, title));
  box.append(el("span", "message", error.message || "No message."));
  if (error.code) box.append(" ", el("code", null, error.code));
  if (ERROR_HINTS[status]) box.append(el("span", "note", ` ${ERROR_HINTS[status]}`));
  box.hidden = false;
}

async function readJson(response) {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    return { error: { code: "not_json", message: text.slice(0, 300) || response.statusText } };
  }
}

function rememberKey(key) {
  try {
    if (key) sessionStorage.setItem(KEY_STORE, key);
    else sessionStorage.removeItem(KEY_STORE);
  } catch {
    /* storage may be off: the field still works */
  }
}

function showInUrl(body) {
  const params = new URLSearchParams({ q: body.query });
  for (const field of CONTEXT_FIELDS) if (body[field]) params.set(field, body[field]);
  if (body.include_deprecated) params.set("deprecated", "1");
  history.replaceState(null, "", `/?${params}`);
}

async function ask() {
  if (inflight) inflight.controller.abort(); // a new question abandons the one in flight
  const controller = new AbortController();
  const id = ++sequence;
  inflight = { controller, id };
  $("error").hidden = true;
  setBusy(true);
  const key = $("key").value.trim();
  rememberKey(key);
  const headers = { "Content-Type": "application/json", Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  const body = requestBody();
  showInUrl(body);
  let status = "";
  try {
    const response = await fetch("/v1/query", {
      method: "POST", headers, body: JSON.stringify(body), signal: controller.signal,
    });
    const payload = await readJson(response);
    if (id !== sequence) return;
    if (!response.ok) {
      $("output").hidden = true;
      showError(response.status, payload);
      status = `Failed (${response.status}).`;
      return;
    }
    render(payload);
    status = `Answered in ${fmt(payload.metadata && payload.metadata.latency_ms, 1)} ms.`;
  } catch (error) {
    if (id !== sequence) return; // replaced by a newer question: nothing to show
    if (error && error.name === "AbortError") {
      status = "Cancelled.";
    } else {
      showError(0, { error: { code: "network", message: `The server could not be reached (${error}).` } });
      status = "Failed.";
    }
  } finally {
    if (id === sequence) {
      inflight = null;
      setBusy(false, status);
    }
  }
}

function cancel() {
  if (inflight) inflight.controller.abort();
}

// --- rendering -----------------------------------------------------------------------------------

function render(r) {
  renderBadges(r);
  const reason = $("abstention");
  reason.hidden = !r.abstained;
  reason.textContent = r.abstained ? `Declined: ${r.abstention_reason || "no reason given"}` : "";
  renderInline($("answer"), r.answer || "(no answer)");
  const fact = $("fact");
  fact.hidden = !r.fact;
  fact.textContent = r.fact
    ? `fact ${r.fact.address} = ${r.fact.value}${r.fact.section_id ? ` · ${r.fact.section_id}` : ""}`
    : "";
  const citations = $("citations");
  citations.replaceChildren();
  for (const c of r.citations || []) {
    const li = el("li");
    li.append(el("span", "mono", `${c.section_id} · ${fmt(c.score)}`));
    const passage = el("span", "passage");
    renderInline(passage, c.passage);
    li.append(passage);
    citations.append(li);
  }
  renderResults(r);
  renderStages(r.trace || {});
  const cache = r.metadata && r.metadata.cache;
  if (cache === "memory" || cache === "kv") {
    $("io").textContent = `Served from the ${cache} cache: the stages below are those of the run ` +
      `that cached this answer. ${$("io").textContent}`;
  }
  $("output").hidden = false;
}

// Inline Markdown (**bold**, *emphasis*, `code`) as elements whose text is set with textContent:
// an LLM's answer may carry Markdown, and knowledge text is never parsed as HTML.
const INLINE_MARKDOWN = /(\*\*[^*]+\*\*|\*[^*\s][^*]*\*|`[^`]+`)/;

function renderInline(node, text) {
  node.replaceChildren();
  for (const part of String(text).split(INLINE_MARKDOWN)) {
    if (!part) continue;
    if (part.startsWith("**") && part.endsWith("**") && part.length > 4) {
      node.append(el("strong", "", part.slice(2, -2)));
    } else if (part.startsWith("`") && part.endsWith("`") && part.length > 2) {
      node.append(el("code", "", part.slice(1, -1)));
    } else if (part.startsWith("*") && part.endsWith("*") && part.length > 2) {
      node.append(el("em", "", part.slice(1, -1)));
    } else {
      node.append(document.createTextNode(part));
    }
  }
}

function renderBadges(r) {
  const box = $("badges");
  const level = r.confidence_level;
  const meta = r.metadata || {};
  const version = badge(`knowledge ${r.knowledge_version}`);
  version.id = "version";
  box.replaceChildren(
    badge(`confidence ${level} ${fmt(r.confidence, 2)}`, level),
    outcomeBadge(r),
    badge(`strategy ${r.strategy_used}`),
    version,
    badge(`cache ${meta.cache}`),
    badge(`${fmt(meta.latency_ms, 1)} ms`),
  );
  if (meta.fallback_triggered) box.append(badge("vector fallback"));
  for (const item of meta.budget_exceeded || []) box.append(badge(`over budget: ${item}`, "flag"));
}

// The three outcomes (docs/adr/0022): an answer; declined with evidence for the agent (LOW,
// results flagged low_evidence); declined with nothing found (NONE, no results).
function outcomeBadge(r) {
  const item = !r.abstained
    ? badge("answered", "")
    : r.results && r.results.length
      ? badge("declined: evidence only", "LOW")
      : badge("declined: nothing found", "NONE");
  item.id = "outcome";
  return item;
}

function renderResults(r) {
  const list = $("results");
  list.replaceChildren();
  const visibility = (r.trace && r.trace.visibility) || {};
  $("visibility").textContent =
    `Seen as ${visibility.tenant ? `tenant ${visibility.tenant}` : "no tenant (shared knowledge only)"}` +
    `, valid on ${visibility.date || "today"}. Documents out of validity on that date, other ` +
    "tenants' documents and deprecated ones (unless included) are filtered out before ranking.";
  if (!r.results || r.results.length === 0) {
    list.append(el("li", "note", "No results."));
    return;
  }
  r.results.forEach((result, index) => {
    const li = el("li", "result");
    li.dataset.docId = result.doc_id;
    li.dataset.tenant = result.tenant;
    const head = el("header");
    head.append(el("span", "rank", `#${index + 1}`), el("span", "title", result.title));
    if (result.heading && result.heading !== result.title) head.append(el("span", null, `› ${result.heading}`));
    head.append(el("span", "ids mono",
      `${result.doc_id} · ${result.section_id} · v${result.version} · tenant ${result.tenant} · trust ${result.trust}`));
    li.append(head);
    const flags = el("div", "badges");
    if (result.trust === "deprecated") flags.append(badge("deprecated", "flag"));
    for (const flag of result.flags || []) flags.append(badge(flag, "flag"));
    if (flags.children.length) li.append(flags);
    li.append(scoreGrid(result));
    list.append(li);
  });
}

function scoreGrid(result) {
  const grid = el("dl", "scores");
  const scores = result.scores || {};
  const names = [...SOURCES, ...Object.keys(scores).filter((s) => !SOURCES.includes(s))];
  for (const name of names) {
    const present = typeof scores[name] === "number";
    const cell = el("div", present ? "score" : "score absent");
    cell.dataset.source = name;
    cell.append(el("dt", null, name), el("dd", null, present ? fmt(scores[name]) : "—"));
    grid.append(cell);
  }
  const fused = el("div", "fused");
  fused.dataset.source = "fused";
  fused.append(el("dt", null, "fused"), el("dd", null, fmt(result.final_score, 6)));
  grid.append(fused);
  return grid;
}

function renderStages(trace) {
  const list = $("stages");
  list.replaceChildren();
  const stages = Object.entries(trace.stages || {});
  const slowest = Math.max(0.001, ...stages.map(([, s]) => (typeof s.ms === "number" ? s.ms : 0)));
  let bytes = 0;
  let trips = 0;
  let chunks = 0;
  for (const [name, stage] of stages) {
    const skipped = "skipped" in stage;
    const li = el("li", skipped ? "stage skipped" : "stage ran");
    li.dataset.stage = name;
    li.dataset.ms = String(stage.ms ?? 0);
    const track = el("div", "track");
    const bar = el("div", "bar");
    bar.style.width = skipped ? "0" : `${Math.min(100, (100 * (stage.ms || 0)) / slowest)}%`;
    track.append(bar);
    track.title = `${stage.ms} ms`;
    const details = [`${fmt(stage.ms, 3)} ms`];
    if (skipped) details.push(`skipped: ${stage.skipped}`);
    if (typeof stage.chunks_fetched === "number") details.push(`${stage.chunks_fetched} chunks`);
    if (typeof stage.shards_fetched === "number") details.push(`${stage.shards_fetched} shards`);
    if (typeof stage.bytes_fetched === "number") details.push(kib(stage.bytes_fetched));
    if (typeof stage.round_trips === "number") details.push(`${stage.round_trips} round trips`);
    if (stage.budget_exceeded) details.push("stopped: latency budget");
    bytes += stage.bytes_fetched || 0;
    trips += stage.round_trips || 0;
    chunks += stage.chunks_fetched || 0;
    li.append(el("span", "name", name), track, el("span", "detail", details.join(" · ")));
    list.append(li);
  }
  const ran = stages.filter(([, s]) => !("skipped" in s)).map(([n]) => n);
  const parts = [`${ran.length} of ${stages.length} stages ran`];
  parts.push(`${kib(bytes)} read in ${chunks} chunks, ${trips} round trips`);
  const load = trace.package_load;
  if (load) parts.push(`package loaded in ${fmt(load.ms, 1)} ms (${kib(load.bytes || 0)}, ${load.partitions} partitions)`);
  const budget = trace.budget;
  if (budget) parts.push(`budget ${budget.max_latency_ms} ms${budget.exceeded && budget.exceeded.length ? `, exceeded: ${budget.exceeded.join(", ")}` : ""}`);
  $("io").textContent = `${parts.join("; ")}.`;
}

// --- start ---------------------------------------------------------------------------------------

function start() {
  try {
    $("key").value = sessionStorage.getItem(KEY_STORE) || "";
  } catch {
    /* no storage */
  }
  const params = new URLSearchParams(location.search);
  for (const field of CONTEXT_FIELDS) if (params.has(field)) $(field).value = params.get(field);
  $("deprecated").checked = params.get("deprecated") === "1";
  $("ask").addEventListener("submit", (event) => {
    event.preventDefault();
    ask();
  });
  $("cancel").addEventListener("click", cancel);
  $("query").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      $("ask").requestSubmit();
    }
  });
  if (params.get("q")) {
    $("query").value = params.get("q");
    ask();
  }
}

start();
