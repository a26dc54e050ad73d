// The golden-set view: figures of the last `kr eval` report, read from /eval/report.json (kr serve
// serves reports/golden/metrics.json there, to the operator only: the admin token; the Worker has
// none), per-category bars, and the failing queries, each a link that opens the playground with
// its request and runs it.
"use strict";

const METRICS = ["hit@1", "hit@3", "mrr", "ndcg@10", "recall@10", "abstention_acc", "intent_acc"];
const CONTEXT_FIELDS = ["tenant", "page", "tab", "focus", "date"];
const ADMIN_STORE = "kr-admin-token"; // this tab only (sessionStorage), never in the URL

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function fmt(value, digits = 3) {
  return typeof value === "number" ? String(Number(value.toFixed(digits))) : "—";
}

function fail(title, message) {
  $("status").hidden = true;
  const box = $("error");
  box.replaceChildren(el("strong", null, title), el("span", null, message));
  box.hidden = false;
}

function adminToken() {
  try {
    return sessionStorage.getItem(ADMIN_STORE) || "";
  } catch {
    return ""; /* no storage */
  }
}

function askForToken() {
  const form = $("admin");
  form.hidden = false;
  form.onsubmit = (event) => {
    event.preventDefault();
    const token = $("admin-token").value.trim();
    try {
      if (token) sessionStorage.setItem(ADMIN_STORE, token);
      else sessionStorage.removeItem(ADMIN_STORE);
    } catch {
      /* no storage: this load only */
    }
    form.hidden = true;
    $("error").hidden = true;
    $("status").hidden = false;
    load(token);
  };
}

async function load(token = adminToken()) {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  let payload;
  try {
    response = await fetch("/eval/report.json", { headers });
    payload = await response.json().catch(() => null);
  } catch (error) {
    fail("The server could not be reached", String(error));
    return;
  }
  if (response.status === 404) {
    const message = payload && payload.error && payload.error.code === "no_report"
      ? payload.error.message
      : "This server does not serve an evaluation report. `kr serve` serves the last `kr eval` " +
        "report (reports/golden/metrics.json); the Worker does not publish one, since it names " +
        "every tenant's golden queries and documents.";
    fail("No evaluation report", message);
    return;
  }
  if (!response.ok || !payload) {
    const error = (payload && payload.error) || {};
    const hint = response.status === 401
      ? " The report names every tenant's golden queries: enter the server's admin token."
      : "";
    fail(`${response.status} ${error.code || "error"}`, `${error.message || response.statusText}${hint}`);
    if (response.status === 401) askForToken();
    return;
  }
  render(payload);
}

function render(report) {
  $("status").hidden = true;
  const info = report.info || {};
  const rows = [
    ["set", info.set || report.name],
    ["knowledge version", info.knowledge_version],
    ["asked on", info.asked_on],
    ["section vectors", info.section_vectors],
    ["reranker", info.reranker],
    ["config", info.config],
    ["queries", report.overall && report.overall.n],
  ];
  const dl = $("info");
  dl.replaceChildren();
  for (const [name, value] of rows) {
    if (value === undefined || value === null) continue;
    dl.append(el("dt", null, name), el("dd", null, value));
  }
  const overall = $("overall");
  overall.replaceChildren();
  for (const metric of METRICS) {
    if (report.overall && metric in report.overall) {
      overall.append(el("span", "badge", `${metric} ${fmt(report.overall[metric])}`));
    }
  }
  renderCategories(report);
  renderFailures(report);
}

function renderCategories(report) {
  const categories = report.per_category || {};
  const select = $("metric");
  const available = METRICS.filter((m) => Object.values(categories).some((c) => m in c));
  select.replaceChildren(...available.map((m) => {
    const option = el("option", null, m);
    option.value = m;
    return option;
  }));
  const draw = () => {
    const metric = select.value;
    const list = $("categories");
    list.replaceChildren();
    for (const [name, figures] of Object.entries(categories).sort()) {
      const value = figures[metric];
      const li = el("li", "bar-row");
      li.dataset.category = name;
      const track = el("div", "track");
      if (typeof value === "number") {
        const bar = el("div", "bar");
        bar.style.width = `${Math.max(0, Math.min(1, value)) * 100}%`;
        track.append(bar);
      }
      const judged = figures.judged === undefined ? "" : `, ${figures.judged} judged`;
      const shown = typeof value === "number" ? fmt(value) : "— (not measured here)";
      li.append(el("span", "name", name), track, el("span", "detail", `${metric} ${shown} · ${figures.n} queries${judged}`));
      list.append(li);
    }
  };
  select.onchange = draw;
  draw();
  $("categories-panel").hidden = false;
}

function playgroundLink(failure, context) {
  const params = new URLSearchParams({ q: failure.query });
  for (const field of CONTEXT_FIELDS) if (context && context[field]) params.set(field, context[field]);
  return `/?${params}`;
}

function renderFailures(report) {
  const list = $("failures");
  list.replaceChildren();
  const byId = Object.fromEntries((report.queries || []).map((q) => [q.id, q]));
  const failures = report.failures || [];
  if (failures.length === 0) list.append(el("li", "note", "No failing query."));
  for (const failure of failures) {
    const context = failure.context || (byId[failure.id] && byId[failure.id].context) || null;
    const li = el("li");
    li.dataset.id = failure.id;
    const link = el("a", "failure", failure.query);
    link.href = playgroundLink(failure, context);
    li.append(link);
    const wanted = failure.should_abstain ? "should abstain" : `expected ${(failure.expected || []).join(", ")}`;
    const got = failure.abstained ? "abstained" : `rank ${failure.rank ?? "not found"}; top: ${(failure.got || []).join(", ")}`;
    let meta = `${failure.id} · ${failure.category} · ${wanted} · ${got} · path ${failure.path}`;
    if (context && Object.keys(context).length) {
      meta += ` · ${Object.entries(context).map(([k, v]) => `${k}=${v}`).join(" ")}`;
    } else if (!("context" in failure) && ["tenant", "context", "temporal"].includes(failure.category)) {
      meta += " · (this report has no request context: re-run kr eval)";
    }
    li.append(el("span", "meta", meta));
    list.append(li);
  }
  $("failures-h").textContent = `Failing queries (${failures.length})`;
  $("failures-panel").hidden = false;
}

load();
