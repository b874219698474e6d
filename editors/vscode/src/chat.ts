// The chat view: a webview in Totem's side bar that shows the open session as it streams
// (markdown, reasoning folded, tool calls as compact lines, questions with their diff and answer
// buttons) and a prompt box with the mode, model and reasoning pickers. The extension sends it the
// whole state after each change; the page draws it and keeps the end in view while it grows.

import * as vscode from "vscode";

import type { Block } from "./state.js";
import { displayableJson } from "./display.js";

export interface ChatState {
  connection: string;
  session?: { id: string; title: string };
  activity: string;
  blocks: Block[];
  /** Ids of the questions of this session that wait for an answer. */
  open: string[];
  attachments: string[];
  mode: string;
  model: string;
  reasoning: string;
  models: string[];
  defaultModel: string;
}

export class ChatView implements vscode.WebviewViewProvider {
  private view: vscode.WebviewView | undefined;
  private last: ChatState | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly onMessage: (message: { type: string; [field: string]: unknown }) => void,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    view.webview.options = { enableScripts: true, localResourceRoots: [this.extensionUri] };
    view.webview.html = page(nonce());
    view.webview.onDidReceiveMessage((m) => this.onMessage(m));
    if (this.last) {
      void view.webview.postMessage({ type: "state", state: this.last });
    }
  }

  /** Every string of the state is made displayable (see display.ts) before the webview gets it. */
  show(state: ChatState): void {
    state = displayableJson(state);
    this.last = state;
    if (this.view) {
      void this.view.webview.postMessage({ type: "state", state });
    }
  }

  /** Puts a prompt that was not taken back (or an undone run's) into the box, when it is empty. */
  restorePrompt(text: string): void {
    void this.view?.webview.postMessage({ type: "restore", text });
  }

  /** Empties the box if it still holds `text` as [restorePrompt] put it (after a redo). */
  unrestorePrompt(text: string): void {
    void this.view?.webview.postMessage({ type: "unrestore", text });
  }
}

function nonce(): string {
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let out = "";
  for (let i = 0; i < 32; i++) {
    out += chars[Math.floor(Math.random() * chars.length)];
  }
  return out;
}

function page(n: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'nonce-${n}'; script-src 'nonce-${n}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<style nonce="${n}">
  body { padding: 0; margin: 0; font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); display: flex; flex-direction: column; height: 100vh; }
  #head { padding: 4px 8px; border-bottom: 1px solid var(--vscode-panel-border); display: flex; gap: 6px; align-items: center; }
  #title { font-weight: bold; flex: 1; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  #log { flex: 1; overflow-y: auto; padding: 4px 8px; }
  .user { margin-top: 10px; padding: 4px 8px; background: var(--vscode-input-background); border-radius: 4px; white-space: pre-wrap; }
  .att { font-size: 90%; opacity: .8; }
  .undone { opacity: .5; }
  .mark { font-size: 90%; font-style: italic; }
  .text { margin: 6px 0; }
  .text p { margin: 4px 0; }
  .text pre, .diff { background: var(--vscode-textCodeBlock-background); padding: 4px; overflow-x: auto; }
  .tool { font-family: var(--vscode-editor-font-family); font-size: 90%; opacity: .85; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
  .tool.error { color: var(--vscode-errorForeground); }
  details.reasoning { opacity: .75; margin: 4px 0; }
  .question { border: 1px solid var(--vscode-inputValidation-warningBorder); padding: 4px 6px; margin: 6px 0; border-radius: 4px; }
  .question .buttons { display: flex; flex-wrap: wrap; gap: 4px; margin-top: 4px; }
  .add { color: var(--vscode-gitDecoration-addedResourceForeground); }
  .del { color: var(--vscode-gitDecoration-deletedResourceForeground); }
  .notice, .end, .changes { font-size: 90%; opacity: .85; margin: 4px 0; }
  .end.failed { color: var(--vscode-errorForeground); }
  #foot { border-top: 1px solid var(--vscode-panel-border); padding: 6px 8px; display: flex; flex-direction: column; gap: 4px; }
  #prompt { width: 100%; box-sizing: border-box; min-height: 54px; resize: vertical; background: var(--vscode-input-background); color: var(--vscode-input-foreground); border: 1px solid var(--vscode-input-border, transparent); font-family: inherit; }
  #pickers { display: flex; gap: 4px; flex-wrap: wrap; align-items: center; }
  select, input.mode { background: var(--vscode-dropdown-background); color: var(--vscode-dropdown-foreground); border: 1px solid var(--vscode-dropdown-border); max-width: 40%; }
  button { background: var(--vscode-button-background); color: var(--vscode-button-foreground); border: none; padding: 2px 8px; cursor: pointer; }
  button.secondary { background: var(--vscode-button-secondaryBackground); color: var(--vscode-button-secondaryForeground); }
  #attached span { margin-right: 6px; font-size: 90%; }
  #attached a { cursor: pointer; }
  code { font-family: var(--vscode-editor-font-family); }
</style>
</head>
<body>
<div id="head"><span id="title">Totem</span><span id="activity"></span><button id="new" class="secondary" title="New session">New</button><button id="stop" class="secondary" title="Stop the run">Stop</button></div>
<div id="log" role="log" aria-live="polite"></div>
<div id="foot">
  <div id="attached"></div>
  <textarea id="prompt" placeholder="Ask Totem… (Enter sends, Shift+Enter for a new line)" aria-label="Prompt"></textarea>
  <div id="pickers">
    <select id="mode" title="Mode"><option value="build">build</option><option value="plan">plan</option></select>
    <select id="model" title="Model"></select>
    <select id="reasoning" title="Reasoning"><option value="">reasoning: default</option><option value="off">off</option><option value="low">low</option><option value="medium">medium</option><option value="high">high</option></select>
    <button id="send">Send</button>
  </div>
</div>
<script nonce="${n}">
const vscode = acquireVsCodeApi();
const $ = (id) => document.getElementById(id);
const log = $("log");
let state;

function esc(s) { return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]); }
function inline(s) {
  return esc(s)
    .replace(/\`([^\`]+)\`/g, "<code>$1</code>")
    .replace(/\\*\\*([^*]+)\\*\\*/g, "<strong>$1</strong>")
    .replace(/(^|[^*])\\*([^*\\s][^*]*)\\*/g, "$1<em>$2</em>")
    .replace(/\\[([^\\]]+)\\]\\(([^)\\s]+)\\)/g, "$1 (<code>$2</code>)");
}
// A small markdown: fenced code, headings, lists, paragraphs, inline code, bold, italics, links.
function markdown(text) {
  const out = [];
  const lines = text.split("\\n");
  let para = [], list = null, code = null;
  const flush = () => {
    if (para.length) { out.push("<p>" + para.map(inline).join("<br>") + "</p>"); para = []; }
    if (list) { out.push("<" + list.tag + ">" + list.items.map((i) => "<li>" + inline(i) + "</li>").join("") + "</" + list.tag + ">"); list = null; }
  };
  for (const line of lines) {
    if (code) {
      if (/^\`\`\`/.test(line)) { out.push("<pre><code>" + esc(code.join("\\n")) + "</code></pre>"); code = null; }
      else code.push(line);
      continue;
    }
    let m;
    if (/^\`\`\`/.test(line)) { flush(); code = []; }
    else if ((m = /^(#{1,6})\\s+(.*)$/.exec(line))) { flush(); out.push("<h4>" + inline(m[2]) + "</h4>"); }
    else if ((m = /^\\s*[-*]\\s+(.*)$/.exec(line))) { if (para.length || (list && list.tag !== "ul")) flush(); list = list || { tag: "ul", items: [] }; list.items.push(m[1]); }
    else if ((m = /^\\s*\\d+[.)]\\s+(.*)$/.exec(line))) { if (para.length || (list && list.tag !== "ol")) flush(); list = list || { tag: "ol", items: [] }; list.items.push(m[1]); }
    else if (line.trim() === "") flush();
    else { if (list) flush(); para.push(line); }
  }
  if (code) out.push("<pre><code>" + esc(code.join("\\n")) + "</code></pre>");
  flush();
  return out.join("");
}
function diffHtml(diff) {
  return '<pre class="diff">' + diff.split("\\n").map((l) => {
    const cls = l.startsWith("+++") || l.startsWith("---") ? "" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : "";
    return cls ? '<span class="' + cls + '">' + esc(l) + "</span>" : esc(l);
  }).join("\\n") + "</pre>";
}
const ANSWERED = { once: "allowed once", alwaysSession: "allowed for this session", alwaysProject: "allowed for the project", deny: "denied", aborted: "withdrawn (the run stopped)", interrupted: "withdrawn (totemd stopped)", withdrawn: "withdrawn" };
function block(b) {
  switch (b.kind) {
    case "user": return '<div class="user">' + esc(b.text) + (b.undone ? ' <span class="mark">(undone)</span>' : "") + b.attachments.map((a) => '<div class="att">📎 ' + esc(a) + "</div>").join("") + "</div>";
    case "text": return '<div class="text">' + markdown(b.text) + (b.streaming ? " ▍" : "") + "</div>";
    case "reasoning": return '<details class="reasoning"><summary>💭 ' + (b.streaming ? "thinking…" : "thought") + "</summary>" + markdown(b.text) + "</details>";
    case "tool": return '<div class="tool' + (b.error ? " error" : "") + '">⚙ ' + esc(b.line) + (b.result !== undefined ? " → " + esc(b.result) : "") + "</div>";
    case "question": {
      const open = state.open.includes(b.id) && !b.answer;
      const buttons = open ? '<div class="buttons">' +
        '<button data-answer="once" data-id="' + b.id + '">Allow once</button>' +
        '<button data-answer="alwaysSession" data-id="' + b.id + '" class="secondary">Always for this session</button>' +
        '<button data-answer="alwaysProject" data-id="' + b.id + '" class="secondary">Always for project</button>' +
        '<button data-answer="deny" data-id="' + b.id + '" class="secondary">Deny</button>' +
        (b.diff ? '<button data-diff="' + b.id + '" class="secondary">Show diff</button>' : "") + "</div>" : "";
      const answer = b.answer ? '<div class="notice">· ' + esc(ANSWERED[b.answer] || b.answer) + "</div>" : "";
      return '<div class="question">? ' + esc(b.line) + (b.diff ? diffHtml(b.diff) : "") + (b.truncated ? "<div>… the rest is too long to show</div>" : "") + buttons + answer + "</div>";
    }
    case "notice": return '<div class="notice">⚠ ' + esc(b.text) + "</div>";
    case "changes": return '<div class="changes">' + (b.verb === "undid" ? "↶ undid " : "↷ redid ") + esc(b.files.join(", ")) + "</div>";
    case "end": {
      const label = { done: "✓ done", failed: "✗ failed", aborted: "■ stopped", interrupted: "■ interrupted: totemd stopped during the run" }[b.status] || b.status;
      return '<div class="end ' + esc(b.status) + '">' + label + (b.error ? ": " + esc(b.error) : "") + "</div>";
    }
  }
  return "";
}
function options(select, values, current, first) {
  const html = (first ? ['<option value="">' + esc(first) + "</option>"] : []).concat(values.map((v) => '<option value="' + esc(v) + '"' + (v === current ? " selected" : "") + ">" + esc(v) + "</option>"));
  select.innerHTML = html.join("");
  select.value = current;
}
function draw() {
  const follow = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  $("title").textContent = state.session ? state.session.title : "Totem";
  $("activity").textContent = state.connection !== "connected" ? state.connection : state.activity === "idle" ? "" : state.activity;
  log.innerHTML = state.blocks.length ? state.blocks.map((b) => b.undone ? '<div class="undone">' + block(b) + "</div>" : block(b)).join("") : '<div class="notice">' + (state.session ? "Ask anything about this project." : "No session yet: your first prompt starts one.") + "</div>";
  $("attached").innerHTML = state.attachments.map((a, i) => "<span>📎 " + esc(a) + ' <a data-unattach="' + i + '" title="Remove">✕</a></span>').join("");
  const modes = ["build", "plan"].concat(state.mode && !["build", "plan"].includes(state.mode) ? [state.mode] : []);
  options($("mode"), modes, state.mode);
  options($("model"), state.models, state.model, "model: " + (state.defaultModel || "default"));
  $("reasoning").value = state.reasoning;
  if (follow) log.scrollTop = log.scrollHeight;
}
function send() {
  const text = $("prompt").value.trim();
  if (!text) return;
  $("prompt").value = "";
  vscode.postMessage({ type: "send", text });
}
window.addEventListener("message", (e) => {
  if (e.data.type === "state") { state = e.data.state; draw(); }
  if (e.data.type === "restore" && !$("prompt").value) $("prompt").value = e.data.text;
  if (e.data.type === "unrestore" && $("prompt").value === e.data.text) $("prompt").value = "";
});
$("prompt").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); } });
$("send").addEventListener("click", send);
$("stop").addEventListener("click", () => vscode.postMessage({ type: "abort" }));
$("new").addEventListener("click", () => vscode.postMessage({ type: "newSession" }));
$("mode").addEventListener("change", (e) => vscode.postMessage({ type: "mode", value: e.target.value }));
$("model").addEventListener("change", (e) => vscode.postMessage({ type: "model", value: e.target.value }));
$("reasoning").addEventListener("change", (e) => vscode.postMessage({ type: "reasoning", value: e.target.value }));
document.addEventListener("click", (e) => {
  const t = e.target;
  if (t.dataset.answer) vscode.postMessage({ type: "answer", id: t.dataset.id, reply: { type: t.dataset.answer } });
  if (t.dataset.diff) vscode.postMessage({ type: "showDiff", id: t.dataset.diff });
  if (t.dataset.unattach) vscode.postMessage({ type: "unattach", index: Number(t.dataset.unattach) });
});
vscode.postMessage({ type: "ready" });
</script>
</body>
</html>`;
}
