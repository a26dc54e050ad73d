// The content-gaps view: GET /v1/gaps (a tenant's key: its own questions; the admin token: every
// tenant's), the groups as a sortable list with a bar per count, each question a link that opens
// the playground with its request. Question and knowledge text is set with textContent only.
"use strict";

const CONTEXT_FIELDS = ["page", "tab", "focus", "date"];
const TOKEN_STORE = "kr-gaps-token"; // this tab only (sessionStorage), never in the URL

const $ = (id) => document.getElementById(id);
let groups = [];

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function fail(title, message) {
  $("status").hidden = true;
  const box = $("error");
  box.replaceChildren(el("strong", null, title), el("span", null, ` ${message}`));
  box.hidden = false;
}

function playgroundLink(question, tenant, context) {
  const params = new URLSearchParams({ q: question });
  if (tenant) params.set("tenant", tenant);
  for (const field of CONTEXT_FIELDS) if (context && context[field]) params.set(field, context[field]);
  return `/?${params}`;
}

async function load() {
  const token = $("token").value.trim();
  try {
    if (token) sessionStorage.setItem(TOKEN_STORE, token);
    else sessionStorage.removeItem(TOKEN_STORE);
  } catch {
    /* no storage: this load only */
  }
  const params = new URLSearchParams();
  for (const name of ["since", "until", "tenant"]) {
    const value = $(name).value.trim();
    if (value) params.set(name, value);
  }
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  $("error").hidden = true;
  $("status").hidden = false;
  $("status").textContent = "Reading the question log…";
  let response;
  let payload;
  try {
    response = await fetch(`/v1/gaps?${params}`, { headers });
    payload = await response.json().catch(() => null);
  } catch (error) {
    fail("The server could not be reached", String(error));
    return;
  }
  if (!response.ok || !payload) {
    const error = (payload && payload.error) || {};
    const hint = response.status === 401
      ? " The question log needs a tenant's API key, or the admin token for every tenant."
      : "";
    fail(`${response.status} ${error.code || "error"}`, `${error.message || response.statusText}${hint}`);
    return;
  }
  groups = payload.groups || [];
  $("status").textContent = `${payload.questions} question(s) from ${payload.since} to ${payload.until} ` +
    `(${payload.scope === "all" ? "every tenant" : `tenant ${payload.scope}`}): ${payload.gaps} unanswered, ` +
    `in ${payload.group_count} group(s).`;
  render();
}

function render() {
  const key = $("sort").value;
  const sorted = [...groups].sort((a, b) => {
    if (key === "count") return b.count - a.count || b.last_seen.localeCompare(a.last_seen);
    if (key === "first_seen") return a.first_seen.localeCompare(b.first_seen);
    return b.last_seen.localeCompare(a.last_seen);
  });
  const most = Math.max(1, ...groups.map((g) => g.count));
  const list = $("groups");
  list.replaceChildren();
  if (sorted.length === 0) list.append(el("li", "note", "No unanswered question in this period."));
  for (const group of sorted) {
    const li = el("li", "bar-row gap");
    li.dataset.id = group.id;
    li.dataset.count = String(group.count);
    const track = el("div", "track");
    const bar = el("div", "bar");
    bar.style.width = `${(group.count / most) * 100}%`;
    track.append(bar);
    const example = el("a", "example", group.example);
    example.href = playgroundLink(group.example, group.tenant, group.example_context);
    const head = el("div", "gap-head");
    head.append(el("span", "count", `${group.count}×`), example);
    li.append(el("span", "name", group.id), track, head);
    const meta = `${group.tenant ? `tenant ${group.tenant}` : "anonymous"} · first ${group.first_seen} · ` +
      `last ${group.last_seen} · ${group.reason}`;
    li.append(el("span", "detail", meta));
    const nearest = el("ul", "nearest");
    for (const near of group.nearest || []) {
      nearest.append(el("li", null, `${near.section_id} (${near.doc_id}) score ${near.score} · ${near.questions} question(s)`));
    }
    if (!(group.nearest || []).length) nearest.append(el("li", null, "no document near it"));
    li.append(nearest);
    const details = el("details", "questions");
    details.append(el("summary", null, `${group.questions.length} question(s)`));
    const questions = el("ol");
    for (const question of group.questions) {
      const item = el("li");
      const text = question.question ?? question.terms.join(" ");
      const link = el("a", "question", text);
      link.href = playgroundLink(text, question.tenant, question.context);
      item.append(link, el("span", "meta", ` #${question.id} · ${question.at} · ${question.outcome} ${question.level} · ${question.gap}`));
      questions.append(item);
    }
    details.append(questions);
    li.append(details);
    list.append(li);
  }
  $("groups-h").textContent = `Groups (${groups.length})`;
  $("groups-panel").hidden = false;
}

function start() {
  try {
    $("token").value = sessionStorage.getItem(TOKEN_STORE) || sessionStorage.getItem("kr-admin-token") ||
      sessionStorage.getItem("kr-playground-key") || "";
  } catch {
    /* no storage */
  }
  $("query").addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });
  $("sort").addEventListener("change", render);
  if ($("token").value) load();
}

start();
