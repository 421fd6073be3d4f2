// toolhost's run timeline and approvals. Everything a run, a model or a
// tool wrote is shown as text (textContent), never parsed as HTML; the
// bearer token travels in a header on every request, never in a URL, and
// nothing is kept in a cookie. Bidi controls in that text are shown as
// ⟨U+202E⟩, so a name cannot read as another (`visible`).
"use strict";

const state = { token: "", run: null, stream: null, timers: [], lanes: new Map(), results: new Map(), aliases: new Map(), sources: new Map() };

// The characters that reorder text as it is shown: the Arabic letter mark,
// the LRM/RLM marks, the embeddings and overrides, and the isolates.
const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;

// Text from a run as a person should read it: each bidi control replaced
// by a visible ⟨U+XXXX⟩ rather than obeyed.
function visible(text) {
  return String(text).replace(BIDI, (c) => "⟨U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "⟩");
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(visible(child)) : child);
  }
  return node;
}

function say(text) {
  document.getElementById("status").textContent = visible(text);
}

function headers(extra) {
  const all = Object.assign({ Accept: "application/json" }, extra || {});
  if (state.token) all.Authorization = "Bearer " + state.token;
  return all;
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({}, options, { headers: headers(options && options.headers) }));
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = text; }
  if (!response.ok) {
    const message = body && body.message ? body.code + ": " + body.message : response.status + " " + response.statusText;
    throw new Error(message);
  }
  return body;
}

function age(iso) {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (seconds < 120) return seconds + " s";
  if (seconds < 7200) return Math.round(seconds / 60) + " min";
  return Math.round(seconds / 3600) + " h";
}

function stopTimers() {
  // What an opening of a run still has to start, it no longer starts.
  state.opened = (state.opened || 0) + 1;
  state.timers.forEach(clearInterval);
  state.timers = [];
  if (state.stream) state.stream.abort();
  state.stream = null;
}

// ---- The runs ----

async function loadRuns() {
  try {
    const list = await api("/v1/runs");
    const body = document.querySelector("#runs tbody");
    // Drawn again every 2 s: a keyboard user's focus stays on its run.
    const focused = document.activeElement && document.activeElement.closest("#runs tr");
    const focusedRun = focused ? focused.dataset.run : null;
    body.replaceChildren(...list.runs.map((run) => {
      return el("tr", { "data-run": run.id },
        el("td", {}, el("button", { type: "button", class: "open-run", onclick: () => openRun(run.id) }, run.id)),
        el("td", { class: "status-" + run.status }, run.status),
        el("td", {}, run.profile),
        el("td", {}, age(run.createdAt)),
        el("td", {}, String(run.totalRounds)),
        el("td", {}, String(run.toolCalls)),
        el("td", {}, String(run.commits)),
        el("td", {}, run.pendingApprovals ? String(run.pendingApprovals) : ""));
    }));
    if (focusedRun) {
      const again = [...body.querySelectorAll("tr")].find((row) => row.dataset.run === focusedRun);
      if (again) again.querySelector("button").focus();
    }
    say(list.runs.length + " run(s)");
  } catch (error) {
    say("runs: " + error.message);
  }
}

function showRuns() {
  stopTimers();
  state.run = null;
  document.getElementById("run-view").hidden = true;
  document.getElementById("runs-view").hidden = false;
  loadRuns();
  state.timers.push(setInterval(loadRuns, 2000));
}

// ---- One run ----

function lane(invocation) {
  let entry = state.lanes.get(invocation);
  if (!entry) {
    const list = el("div", { class: "entries" });
    const box = el("section", { class: "lane", id: "lane-" + invocation, tabindex: "-1", "aria-label": "invocation " + invocation },
      el("h4", {}, invocation), list);
    document.getElementById("lanes").append(box);
    entry = { box, list };
    state.lanes.set(invocation, entry);
  }
  return entry;
}

function showDetail(title, text) {
  document.getElementById("detail-title").textContent = visible(title);
  document.getElementById("detail").textContent = visible(text);
  const box = document.getElementById("detail-box");
  box.hidden = false;
  document.getElementById("detail-close").focus();
}

async function showFile(title, path, pick) {
  try {
    const response = await fetch("/v1/runs/" + encodeURIComponent(state.run) + "/files/" + path.split("/").map(encodeURIComponent).join("/"), { headers: headers() });
    const text = await response.text();
    if (!response.ok) throw new Error(response.status + " " + text);
    showDetail(title, pick ? pick(text) : text);
  } catch (error) {
    say(title + ": " + error.message);
  }
}

function modelRead(text) {
  // What the model read: the stored result's content.
  try { return JSON.parse(text).result.content; } catch (_) { return text; }
}

// ---- Which tool a call is ----

// The catalog's sources by tool id (an MCP server's name, an extension's
// id), read once per opened run; a tool gone from the catalog since shows
// the kind its id says.
async function loadSources() {
  try {
    const list = await api("/v1/tools");
    state.sources = new Map(list.tools.map((tool) => [tool.id, tool.source.kind + " " + tool.source.name]));
  } catch (_) {
    state.sources = new Map();
  }
}

function sourceOf(toolId) {
  const known = state.sources.get(toolId);
  if (known) return known;
  if (toolId.startsWith("builtin:")) return "builtin";
  if (toolId.startsWith("mcp/")) return "mcp server " + toolId.slice(4).split(":")[0];
  if (toolId.startsWith("ext/")) return "extension " + toolId.slice(4).split(":")[0];
  return "unknown source";
}

// A call as the model named it (its alias in this invocation's snapshot)
// and as the host knows it (the canonical id, and where it comes from):
// two servers' `search` differ here.
function callName(invocation, toolId, name) {
  const alias = state.aliases.get(invocation + " " + toolId) || name;
  return alias + " · " + toolId + " · " + sourceOf(toolId);
}

// How long a call took, from its end event.
function duration(p) {
  if (typeof p.elapsedUs === "number") return p.elapsedUs < 10000 ? (p.elapsedUs / 1000).toFixed(1) + " ms" : Math.round(p.elapsedUs / 1000) + " ms";
  if (typeof p.elapsedMs === "number") return p.elapsedMs + " ms";
  return "";
}

// A tool's side effects as its annotations state them (builtins say
// `readOnly`, MCP servers `readOnlyHint`…). An MCP tool that states
// nothing gets the MCP defaults — may change things, destructive, open
// world — marked as such.
function sideEffects(toolId, annotations) {
  const a = annotations && typeof annotations === "object" ? annotations : {};
  const mcp = toolId.startsWith("mcp/");
  const stated = (plain, hint) => (typeof a[plain] === "boolean" ? a[plain] : typeof a[hint] === "boolean" ? a[hint] : undefined);
  const readOnly = stated("readOnly", "readOnlyHint");
  let destructive = stated("destructive", "destructiveHint");
  if (destructive === undefined && readOnly === true) destructive = false;
  const openWorld = stated("openWorld", "openWorldHint");
  const say = (value, fallback) => value === true ? "yes" : value === false ? "no" : mcp ? fallback + " (MCP default)" : "not stated";
  const parts = [
    "read-only: " + say(readOnly, "no"),
    "destructive: " + say(mcp && readOnly === true ? false : destructive, "yes"),
    "open world: " + say(openWorld, "yes"),
  ];
  if (typeof a.mutating === "boolean") parts.push("changes state: " + (a.mutating ? "yes" : "no"));
  return "Side effects: " + parts.join(" · ");
}

function entry(invocation, className, ...parts) {
  const item = el("div", { class: "entry " + className }, ...parts);
  lane(invocation).list.append(item);
  return item;
}

function render(event) {
  const p = event.payload || {};
  const invocation = (p.eventScope && p.eventScope.invocationId) || p.invocationId || "run";
  switch (event.type) {
    case "run_started":
      entry(invocation, "", "Run started, profile " + (p.profileId || ""));
      break;
    case "context_assembled": {
      // The tools this invocation offers (each alias by id), and the ones
      // its profile allows that were left out, with why.
      const tools = (p.snapshot && p.snapshot.tools) || [];
      for (const tool of tools) state.aliases.set(invocation + " " + tool.toolId, tool.alias);
      const omitted = p.diagnostics || [];
      entry(invocation, "", "Tools offered: " + tools.length + (omitted.length ? ", " + omitted.length + " left out" : ""));
      // What of the chat app's prompt the first request carries.
      const prompt = p.prompt;
      if (prompt && prompt.source !== "none") {
        entry(invocation, "", "Prompt from the " + prompt.source + ": " + prompt.messages + " messages, " +
          prompt.historyKept + " of " + prompt.historyTotal + " chat messages, " + prompt.chars + " characters");
      }
      for (const diagnostic of omitted) {
        entry(invocation, "omitted", "Left out: " + diagnostic.toolId + " (" + diagnostic.reason + "): " + diagnostic.message);
      }
      break;
    }
    case "model_request_created":
      entry(invocation, "round", "Round " + p.round);
      break;
    case "context_trimmed": {
      // The request was cut to fit the model's window: old results became
      // one-line stubs, old chat history and rounds were left out.
      const count = (n) => Number(n || 0).toLocaleString("en-US");
      entry(invocation, "", "Context trimmed: " + count((p.stubbedCalls || []).length) + " results stubbed, "
        + count(p.droppedHistory) + " history messages and " + count(p.droppedRounds) + " rounds dropped, "
        + count(p.charsBefore) + " → " + count(p.charsAfter) + " chars (budget " + count(p.budget) + ")");
      break;
    }
    case "model_completed":
      entry(invocation, "", "Model replied: " + p.toolCallCount + " tool call(s)" + (p.hasAssistantText ? ", " + p.assistantTextChars + " characters of text" : "") + " ",
        el("button", { type: "button", onclick: () => showFile("Model reply, round " + p.round, p.modelResponsePath) }, "Reply"));
      break;
    case "tool_call_requested":
      entry(invocation, "call", "→ " + callName(invocation, p.toolId, p.name) + " (" + p.callId + ") ",
        el("button", { type: "button", onclick: () => showFile("Arguments of " + p.callId, p.argumentsRef) }, "Arguments"));
      break;
    case "tool_call_approval_requested":
      entry(invocation, "approval", "Waits for approval: " + p.name + ", " + p.reason);
      break;
    case "tool_call_approval_decided":
      entry(invocation, p.decision.startsWith("approved") ? "approval" : "approval error", "Approval " + p.decision + " by " + p.by + (p.note ? ": " + p.note : ""));
      break;
    case "tool_result_stored":
      state.results.set(p.callId, p.path);
      break;
    case "tool_call_completed":
    case "tool_call_failed": {
      // A tool's error the model reads is `tool_call_failed` at warn
      // level; at error level the call ended the run.
      const endsRun = event.type === "tool_call_failed" && event.level === "error";
      const failed = event.type === "tool_call_failed" || p.isError;
      const path = state.results.get(p.callId);
      const buttons = path ? [
        el("button", { type: "button", onclick: () => showFile("What the model read from " + p.callId, path, modelRead) }, "Result text"),
        " ",
        el("button", { type: "button", onclick: () => showFile("Audit record of " + p.callId, path) }, "Audit JSON"),
      ] : [];
      const code = p.code || p.errorCode || "";
      const name = p.toolId ? callName(invocation, p.toolId, p.name) : p.name;
      const elapsed = duration(p);
      const took = elapsed ? " (" + elapsed + ")" : "";
      const head = endsRun ? "✗ " + name + took + " failed the run: " + code + " " + (p.message || "")
        : failed ? "✗ " + name + took + ": " + code + " " + (p.message || "")
        : "✓ " + name + took;
      entry(invocation, failed ? "error" : "", head + " ", ...buttons);
      break;
    }
    case "tool_call_unknown":
      // A name the model invented (warn level, so the default case would
      // drop it): nothing ran, the model read an error listing its tools,
      // and the call was charged to the invocation's total.
      entry(invocation, "error unknown", "✗ " + p.name + " (not a tool of this request): " + p.code
        + ", calls used " + p.totalUsed + " of " + p.totalLimit + (p.charged ? "" : " (not charged: the total was spent)"));
      break;
    case "agent_delegate_started": {
      const child = p.childInvocationId;
      lane(child);
      entry(invocation, "", "Delegated task " + p.taskId + " to " + p.targetProfileId + " ",
        el("button", { type: "button", onclick: () => lane(child).box.focus() }, "Go to " + child));
      break;
    }
    case "agent_await_completed":
      entry(invocation, "", "Awaited delegated tasks");
      break;
    case "agent_handoff_accepted":
      entry(invocation, "", "Handed the run off to " + (p.targetProfileId || p.toInvocationId || ""));
      break;
    case "chat_commit_requested":
      // A host commit: the chat app saves the reply, then answers.
      if (typeof p.text === "string") {
        entry(invocation, "approval", "Waiting for the chat app to save the reply (" + p.commitId + ", " +
          p.chars + " characters" + (p.runMessage == null ? ", a new message" : ", rewriting message " + p.runMessage) + ")");
      }
      break;
    case "chat_commit_completed":
      entry(invocation, "commit", "Committed " + p.path + " to the chat (message " + p.messageIndex + ")");
      break;
    case "chat_commit_failed":
      entry(invocation, "error", "The commit was not saved: " + p.code + " " + (p.message || ""));
      break;
    case "run_completed":
    case "run_failed":
    case "run_partial_success":
    case "run_cancelled":
      entry(invocation, event.type === "run_completed" ? "commit" : "error",
        event.type.replace("run_", "Run ").replace("_", " ") + (p.code ? ": " + p.code + " " + (p.message || "") : ""));
      document.getElementById("run-status").textContent = visible(event.type);
      break;
    default:
      if (event.level === "error") entry(invocation, "error", event.type + ": " + (p.message || p.code || ""));
  }
}

async function follow(id) {
  const controller = new AbortController();
  state.stream = controller;
  try {
    const response = await fetch("/v1/runs/" + encodeURIComponent(id) + "/events", { headers: headers({ Accept: "text/event-stream" }), signal: controller.signal });
    if (!response.ok) throw new Error(response.status + " " + (await response.text()));
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trimStart()).join("\n");
        if (!data) continue;
        try { render(JSON.parse(data)); } catch (error) { say("an event does not read: " + error.message); }
      }
    }
  } catch (error) {
    if (error.name !== "AbortError") say("events: " + error.message);
  }
}

// A waiting call's arguments as the run summarized them when it asked: the
// fields that decide the effect (path, URL, host…) first and marked, long
// values cut with their size. A run recorded before the summary had fields
// shows its one line.
function argumentsShown(call) {
  const shown = call.argumentsShown || { fields: [], omitted: 0 };
  if (!shown.fields.length) return el("div", { class: "text" }, "Arguments: " + call.argumentsSummary);
  const rows = shown.fields.map((field) => el("li", { class: field.deciding ? "arg deciding" : "arg" },
    el("span", { class: "name" }, field.name + ": "),
    el("span", { class: "value" }, field.value),
    field.size ? el("span", { class: "size" }, " (" + field.size + ")") : null));
  if (shown.omitted) rows.push(el("li", { class: "arg" }, "… and " + shown.omitted + " more not shown"));
  return el("ul", { class: "arguments", "aria-label": "arguments" }, ...rows);
}

async function loadApprovals() {
  if (!state.run) return;
  const id = state.run;
  try {
    const list = await api("/v1/runs/" + encodeURIComponent(id) + "/approvals");
    const cards = document.getElementById("approval-cards");
    const waiting = list.approvals.filter((call) => !call.decided);
    const shown = new Set([...cards.children].map((card) => card.dataset.call));
    // Keep cards a person may be typing a note into; add the new ones.
    for (const card of [...cards.children]) {
      if (card.dataset.call !== undefined && !waiting.some((call) => call.callId === card.dataset.call)) card.remove();
    }
    for (const call of waiting) {
      if (shown.has(call.callId)) continue;
      const note = el("input", { type: "text", "aria-label": "note for " + call.callId, placeholder: "note (the model reads it when denied)" });
      const decide = (decision) => async () => {
        try {
          await api("/v1/runs/" + encodeURIComponent(id) + "/approvals/" + encodeURIComponent(call.callId), {
            method: "POST",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify(note.value ? { decision, note: note.value } : { decision }),
          });
          say(call.callId + ": " + decision);
          loadApprovals();
        } catch (error) {
          say(call.callId + ": " + error.message);
        }
      };
      cards.append(el("div", { class: "card", "data-call": call.callId, role: "group", "aria-label": "approval of " + call.callId },
        el("strong", {}, (call.title || call.toolId) + " "), el("span", {}, "(" + call.toolId + ", " + (state.sources.get(call.toolId) || call.source) + ")"),
        argumentsShown(call),
        el("div", { class: "effects" }, sideEffects(call.toolId, call.annotations)),
        el("div", {}, "Why: " + call.reason),
        el("div", { class: "actions" },
          note,
          el("button", { type: "button", class: "approve", onclick: decide("approve") }, "Approve"),
          el("button", { type: "button", class: "approve-run", onclick: decide("approve_for_run") }, "Approve for this run"),
          el("button", { type: "button", class: "deny", onclick: decide("deny") }, "Deny"))));
    }
    await loadCommits(id, cards);
    document.getElementById("approvals").hidden = cards.children.length === 0;
  } catch (error) {
    say("approvals: " + error.message);
  }
}

// The commits a host-commit run waits for the chat app to save: shown, not
// answered here — the app that keeps the chat answers them.
async function loadCommits(id, cards) {
  const list = await api("/v1/runs/" + encodeURIComponent(id) + "/commits");
  const waiting = list.commits.filter((commit) => !commit.answered);
  for (const card of [...cards.children]) {
    if (card.dataset.commit !== undefined && !waiting.some((commit) => commit.commitId === card.dataset.commit)) card.remove();
  }
  const shown = new Set([...cards.children].map((card) => card.dataset.commit));
  for (const commit of waiting) {
    if (shown.has(commit.commitId)) continue;
    const where = commit.generationType ? commit.generationType + " of message " + commit.targetIndex
      : commit.runMessage == null ? "a new message" : "rewriting message " + commit.runMessage;
    const preview = commit.text.length > 400 ? commit.text.slice(0, 400) + "… (" + commit.chars + " characters)" : commit.text;
    cards.append(el("div", { class: "card commit", "data-commit": commit.commitId, role: "group", "aria-label": "commit " + commit.commitId },
      el("strong", {}, "Waiting for the chat app to save the reply "), el("span", {}, "(" + commit.commitId + ", " + where + ")"),
      el("div", { class: "text" }, visible(preview))));
  }
}

function openRun(id) {
  stopTimers();
  state.run = id;
  const opened = state.opened;
  state.lanes = new Map();
  state.results = new Map();
  state.aliases = new Map();
  document.getElementById("lanes").replaceChildren();
  document.getElementById("approval-cards").replaceChildren();
  document.getElementById("approvals").hidden = true;
  document.getElementById("detail-box").hidden = true;
  document.getElementById("run-title").textContent = visible(id);
  document.getElementById("run-status").textContent = "";
  document.getElementById("runs-view").hidden = true;
  document.getElementById("run-view").hidden = false;
  document.getElementById("back").focus();
  // The sources first, so the first calls and cards drawn name theirs.
  // Only the opening still shown goes on: a run opened twice is read once.
  loadSources().then(() => {
    if (state.opened !== opened) return;
    follow(id);
    loadApprovals();
    state.timers.push(setInterval(loadApprovals, 1000));
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = document.getElementById("token").value.trim();
    say(state.token ? "token set" : "no token");
    if (state.run) openRun(state.run); else showRuns();
  });
  document.getElementById("refresh").addEventListener("click", loadRuns);
  document.getElementById("back").addEventListener("click", showRuns);
  document.getElementById("detail-close").addEventListener("click", () => {
    document.getElementById("detail-box").hidden = true;
  });
  showRuns();
});
