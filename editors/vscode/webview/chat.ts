// The chat's page (the webview of `src/chat.ts`). The extension posts the whole state after each
// change (at most every 30 ms); the page keeps one element per block of the log and touches only
// the blocks that changed, and in a streaming answer only its last paragraphs: an opened
// reasoning stays open, selected text stays selected and can be copied while a run streams.
// Model, project and daemon text is untrusted: it goes in as text nodes, or as Markdown through
// markdown-it with raw HTML off (markdown.ts).

import { markdownHtml } from "./markdown.js";

declare function acquireVsCodeApi(): { postMessage(message: unknown): void };

type Block = { runId?: string; undone?: boolean } & (
  | { kind: "user"; text: string; attachments: string[] }
  | { kind: "text"; text: string; streaming: boolean }
  | { kind: "reasoning"; text: string; streaming: boolean }
  | { kind: "tool"; line: string; result?: string; error?: boolean }
  | { kind: "question"; id: string; line: string; diff?: string; truncated?: boolean; answer?: string }
  | { kind: "notice"; text: string }
  | { kind: "changes"; verb: "undid" | "redid"; files: string[] }
  | { kind: "end"; status: string; error?: string }
);

interface State {
  daemon: "up" | "starting" | "down" | "reconnecting";
  daemonError?: string;
  session?: { id: string; title: string };
  activity: string;
  blocks: Block[];
  open: string[];
  attachments: string[];
  mode: string;
  modes: string[];
  model: string;
  reasoning: string;
  models: string[];
  defaultModel: string;
  /** What a picker's choice does not do (reasoning on a model that cannot think), or "". */
  hint: string;
  /** Reasoning levels say "no effect" when the model of the next prompt cannot think. */
  thinks: boolean;
  cannotThink: string[];
  /** The run whose failure can be retried (the last run, when it failed). */
  retry?: string;
}

const vscode = acquireVsCodeApi();
const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const log = $("log");
const prompt = $<HTMLTextAreaElement>("prompt");
let state: State | undefined;
let sessionId: string | undefined;
/** The log's elements, one per block, with what each was drawn from. */
let drawn: { key: string; el: HTMLElement }[] = [];
/** Questions already brought into view once. */
const shown = new Set<string>();
/** Until then the log follows its end whatever the scroll position (set by sending). */
let followUntil = 0;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function icon(name: string, extra = ""): HTMLElement {
  const i = el("i", `codicon codicon-${name}${extra ? " " + extra : ""}`);
  i.setAttribute("aria-hidden", "true");
  return i;
}

function button(label: string, iconName: string | undefined, data: Record<string, string>, secondary = false): HTMLButtonElement {
  const b = el("button", secondary ? "secondary" : "");
  if (iconName) b.append(icon(iconName));
  b.append(el("span", "", label));
  for (const [k, v] of Object.entries(data)) b.dataset[k] = v;
  return b;
}

/** Replaces the children of `into` by those of `html`, keeping each child that did not change
 * (the paragraphs of a streaming answer already written, and any selection in them). */
function morph(into: HTMLElement, html: string): void {
  const next = document.createElement("div");
  next.innerHTML = html;
  const fresh = Array.from(next.children);
  const old = Array.from(into.children);
  for (let i = 0; i < Math.max(fresh.length, old.length); i++) {
    const a = old[i];
    const b = fresh[i];
    if (!b) a.remove();
    else if (!a) into.append(b);
    else if (a.outerHTML !== b.outerHTML) a.replaceWith(b);
  }
}

function diffElement(diff: string): HTMLElement {
  const pre = el("pre", "diff");
  for (const line of diff.replace(/\n$/, "").split("\n")) {
    const cls = line.startsWith("+++") || line.startsWith("---") ? "" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
    pre.append(el("span", cls, line + "\n"));
  }
  return pre;
}

const ANSWERED: Record<string, string> = {
  once: "Allowed once",
  alwaysSession: "Allowed for this session",
  alwaysProject: "Allowed for the project",
  deny: "Denied",
  aborted: "Withdrawn: the run stopped",
  interrupted: "Withdrawn: totemd stopped",
  withdrawn: "Withdrawn",
};

const ENDS: Record<string, [string, string]> = {
  done: ["check", "Done"],
  failed: ["error", "Failed"],
  aborted: ["debug-stop", "Stopped"],
  interrupted: ["debug-stop", "Interrupted: totemd stopped during the run"],
};

function questionButtons(id: string, hasDiff: boolean): HTMLElement {
  const row = el("div", "buttons");
  row.append(button("Allow", "check", { answer: "once", id }));
  row.append(button("Always…", undefined, { always: id }, true));
  row.append(button("Deny", undefined, { deny: id }, true));
  if (hasDiff) row.append(button("Diff", "diff", { diff: id }, true));
  return row;
}

/** The element of one block (made, or brought up to date in place). */
function render(b: Block, old: HTMLElement | undefined, open: boolean, retry: boolean): HTMLElement {
  let e: HTMLElement;
  switch (b.kind) {
    case "user": {
      e = el("div", "block user");
      e.append(el("div", "utext", b.text));
      if (b.undone) e.append(el("div", "mark", "(undone)"));
      for (const a of b.attachments) {
        const att = el("div", "att");
        att.append(icon("file"), el("span", "", a));
        e.append(att);
      }
      break;
    }
    case "text": {
      e = old?.classList.contains("text") ? old : el("div", "block text md");
      morph(e, markdownHtml(b.text));
      e.classList.toggle("streaming", b.streaming);
      return e;
    }
    case "reasoning": {
      // The same <details> as long as it is drawn: opening it survives every token.
      const d = old?.tagName === "DETAILS" ? old : el("details", "block reasoning");
      let summary = d.querySelector("summary");
      if (!summary) {
        summary = el("summary");
        d.append(summary, el("div", "md"));
      }
      const label = b.streaming ? "Thinking…" : "Thought";
      if (summary.textContent !== label) {
        summary.replaceChildren(icon("lightbulb"), el("span", "", label));
      }
      morph(d.querySelector(".md") as HTMLElement, markdownHtml(b.text));
      return d;
    }
    case "tool": {
      e = el("div", "block tool" + (b.error ? " error" : ""));
      e.append(icon(b.error ? "error" : "tools"), el("span", "", b.line + (b.result !== undefined ? " → " + b.result : "")));
      e.title = b.line + (b.result !== undefined ? "\n" + b.result : "");
      break;
    }
    case "question": {
      e = el("div", "block question" + (open ? " open" : ""));
      e.dataset.question = b.id;
      const head = el("div", "qline");
      head.append(icon("question"), el("span", "", b.line));
      e.append(head);
      if (b.diff) e.append(diffElement(b.diff));
      if (b.truncated) e.append(el("div", "notice", "The rest is too long to show here; Diff opens all of it."));
      if (open) e.append(questionButtons(b.id, !!b.diff));
      if (b.answer) {
        const a = el("div", "answer");
        const iconName = b.answer === "deny" ? "close" : ["once", "alwaysSession", "alwaysProject"].includes(b.answer) ? "check" : "circle-slash";
        a.append(icon(iconName), el("span", "", ANSWERED[b.answer] ?? b.answer));
        e.append(a);
      }
      break;
    }
    case "notice": {
      e = el("div", "block notice");
      e.append(icon("info"), el("span", "", b.text));
      break;
    }
    case "changes": {
      e = el("div", "block changes");
      e.append(icon(b.verb === "undid" ? "discard" : "redo"), el("span", "", `${b.verb === "undid" ? "Undid" : "Redid"} ${b.files.join(", ") || "the run (no file changed)"}`));
      break;
    }
    case "end": {
      const [name, label] = ENDS[b.status] ?? ["info", b.status];
      e = el("div", `block end ${b.status}`);
      e.append(icon(name), el("span", "", label + (b.error ? ": " + b.error : "")));
      if (retry && b.runId) e.append(button("Retry", "refresh", { retry: b.runId }, true));
      break;
    }
  }
  return e;
}

function options(select: HTMLSelectElement, values: [string, string][], current: string): void {
  select.replaceChildren(
    ...values.map(([value, label]) => {
      const o = el("option", "", label);
      o.value = value;
      return o;
    }),
  );
  select.value = current;
}

function drawLog(s: State): void {
  if (s.session?.id !== sessionId) {
    sessionId = s.session?.id;
    drawn = [];
    log.replaceChildren();
  }
  const follow = Date.now() < followUntil || log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  const empty = log.querySelector(":scope > .empty");
  if (s.blocks.length === 0) {
    if (!empty && s.daemon === "up") {
      log.append(el("div", "empty", s.session ? "Ask anything about this project." : "No session yet: your first prompt starts one."));
    }
  } else {
    empty?.remove();
  }
  s.blocks.forEach((b, i) => {
    const open = b.kind === "question" && s.open.includes(b.id) && !b.answer;
    const retry = b.kind === "end" && b.runId !== undefined && b.runId === s.retry;
    const key = JSON.stringify(b) + (open ? "!" : "") + (retry ? "r" : "");
    const old = drawn[i];
    if (old?.key === key) return;
    let e = render(b, old?.el, open, retry);
    if (b.undone) {
      e.classList.add("undone");
    } else {
      e.classList.remove("undone");
    }
    if (old && old.el !== e) old.el.replaceWith(e);
    else if (!old) log.append(e);
    drawn[i] = { key, el: e };
  });
  for (const gone of drawn.splice(s.blocks.length)) gone.el.remove();
  // A new question is always brought into view, once the view is on screen (one that came while
  // the chat was hidden is shown when it comes back).
  const fresh = [...log.querySelectorAll<HTMLElement>(".question.open")].find((q) => !shown.has(q.dataset.question ?? ""));
  if (fresh && log.clientHeight > 0 && document.visibilityState === "visible") {
    shown.add(fresh.dataset.question ?? "");
    reveal(fresh);
  } else if (follow) {
    log.scrollTop = log.scrollHeight;
  }
}

/** Scrolls a question into view, its buttons first. */
function reveal(q: HTMLElement): void {
  if (q === log.lastElementChild) log.scrollTop = log.scrollHeight;
  else q.scrollIntoView({ block: "end" });
  if (q.getBoundingClientRect().top < log.getBoundingClientRect().top) q.scrollIntoView({ block: "start" });
}

function drawBanner(s: State): void {
  const banner = $("banner");
  if (s.daemon === "up") {
    banner.hidden = true;
    banner.replaceChildren();
    return;
  }
  banner.hidden = false;
  const text =
    s.daemon === "down"
      ? "Totem's daemon is not running." + (s.daemonError ? " " + s.daemonError : "")
      : s.daemon === "starting"
        ? "Starting Totem's daemon…"
        : "totemd went away; connecting again…";
  const key = s.daemon + text;
  if (banner.dataset.key === key) return;
  banner.dataset.key = key;
  banner.replaceChildren(icon(s.daemon === "down" ? "warning" : "loading", s.daemon === "down" ? "" : "codicon-modifier-spin"), el("span", "", text));
  if (s.daemon === "down") {
    banner.append(button("Start Totem", "play", { start: "1" }));
    banner.append(el("div", "small", "A prompt typed meanwhile stays in the box."));
  }
}

function draw(): void {
  const s = state;
  if (!s) return;
  $("title").textContent = s.session ? s.session.title : "Totem";
  const activity = $("activity");
  const running = s.activity === "running" || s.activity === "waiting";
  activity.replaceChildren(...(running ? [icon(s.activity === "running" ? "loading" : "bell-dot", s.activity === "running" ? "codicon-modifier-spin" : ""), el("span", "", s.activity === "running" ? "running" : "waiting for you")] : []));
  $("stop").hidden = s.activity === "idle";
  drawBanner(s);
  drawLog(s);
  const attached = $("attached");
  attached.replaceChildren(
    ...s.attachments.map((a, i) => {
      const chip = el("span", "chip");
      chip.append(icon("file"), el("span", "", a));
      const x = el("button", "icon-button");
      x.dataset.unattach = String(i);
      x.title = "Remove";
      x.setAttribute("aria-label", `Remove ${a}`);
      x.append(icon("close"));
      chip.append(x);
      return chip;
    }),
  );
  options($("mode"), s.modes.map((m) => [m, `Mode: ${m}`]), s.mode);
  // With a reasoning level picked, a model that cannot think says that the level does nothing.
  const noThink = (m: string) => (s.reasoning && s.cannotThink.includes(m) ? " (does not think)" : "");
  options(
    $("model"),
    [["", `Model: default (${s.defaultModel || "none"})${noThink(s.defaultModel)}`] as [string, string]].concat(
      s.models.map((m) => [m, `Model: ${m}${noThink(m)}`]),
    ),
    s.model,
  );
  const none = s.thinks ? "" : " (no effect)";
  options(
    $("reasoning"),
    [
      ["", "Reasoning: default"],
      ["off", "Reasoning: off" + none],
      ["low", "Reasoning: low" + none],
      ["medium", "Reasoning: medium" + none],
      ["high", "Reasoning: high" + none],
    ],
    s.reasoning,
  );
  const hint = $("hint");
  hint.hidden = !s.hint;
  hint.replaceChildren(...(s.hint ? [icon("info"), el("span", "", s.hint)] : []));
}

function send(): void {
  const text = prompt.value.trim();
  if (!text) return;
  // The box is emptied when the prompt is taken ("sent"): one typed while totemd is away stays.
  followUntil = Date.now() + 3000;
  log.scrollTop = log.scrollHeight;
  vscode.postMessage({ type: "send", text });
}

window.addEventListener("message", (e: MessageEvent) => {
  const m = e.data as { type: string; state?: State; text?: string };
  if (m.type === "state" && m.state) {
    state = m.state;
    draw();
  }
  if (m.type === "restore" && !prompt.value) prompt.value = m.text ?? "";
  if ((m.type === "unrestore" || m.type === "sent") && prompt.value.trim() === m.text) prompt.value = "";
  if (m.type === "reveal") {
    const q = [...log.querySelectorAll<HTMLElement>(".question.open")].pop();
    if (q) reveal(q);
  }
});
// Back on screen: a question that came meanwhile is brought into view.
document.addEventListener("visibilitychange", draw);
window.addEventListener("resize", () => {
  if (state && log.clientHeight > 0) drawLog(state);
});
prompt.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
$("send").addEventListener("click", send);
$("stop").addEventListener("click", () => vscode.postMessage({ type: "abort" }));
for (const name of ["mode", "model", "reasoning"]) {
  $(name).addEventListener("change", (e) => vscode.postMessage({ type: name, value: (e.target as HTMLSelectElement).value }));
}

/** The answer row of a question replaced by a second step (Always…'s scope, Deny's note). */
function step(row: HTMLElement, ...items: HTMLElement[]): void {
  row.replaceChildren(...items);
}

document.addEventListener("click", (e) => {
  const target = e.target as HTMLElement;
  const link = target.closest("a");
  if (link && link.closest(".md")) {
    e.preventDefault();
    const href = link.getAttribute("href");
    if (href) vscode.postMessage({ type: "open", href });
    return;
  }
  const b = target.closest("button") as HTMLButtonElement | null;
  if (!b) return;
  const d = b.dataset;
  const question = b.closest(".question") as HTMLElement | null;
  const row = b.closest(".buttons") as HTMLElement | null;
  if (d.answer) {
    const reply: { type: string; note?: string } = { type: d.answer };
    if (d.answer === "deny") {
      const note = (row?.querySelector("input") as HTMLInputElement | null)?.value.trim();
      if (note) reply.note = note;
    }
    vscode.postMessage({ type: "answer", id: d.id, reply });
  } else if (d.always && row) {
    step(row, button("For this session", "check-all", { answer: "alwaysSession", id: d.always }), button("For this project", "check-all", { answer: "alwaysProject", id: d.always }, true), button("Back", undefined, { back: d.always }, true));
  } else if (d.deny && row) {
    const note = el("input", "note");
    note.placeholder = "A note for the model (optional)";
    note.setAttribute("aria-label", "A note for the model");
    note.addEventListener("keydown", (k) => {
      if (k.key === "Enter") (row.querySelector('button[data-answer="deny"]') as HTMLButtonElement | null)?.click();
      if (k.key === "Escape") (row.querySelector("button[data-back]") as HTMLButtonElement | null)?.click();
    });
    step(row, note, button("Deny", "close", { answer: "deny", id: d.deny }), button("Back", undefined, { back: d.deny }, true));
    note.focus();
  } else if (d.back && row && question) {
    row.replaceWith(questionButtons(d.back, !!question.querySelector(".diff")));
  } else if (d.diff) {
    vscode.postMessage({ type: "showDiff", id: d.diff });
  } else if (d.unattach) {
    vscode.postMessage({ type: "unattach", index: Number(d.unattach) });
  } else if (d.retry) {
    vscode.postMessage({ type: "retry", runId: d.retry });
  } else if (d.start) {
    vscode.postMessage({ type: "startDaemon" });
  } else if (b.classList.contains("copy")) {
    const code = b.closest(".code")?.querySelector("pre code")?.textContent ?? "";
    vscode.postMessage({ type: "copy", text: code });
    const label = b.querySelector("span");
    if (label) {
      label.textContent = "Copied";
      setTimeout(() => (label.textContent = "Copy"), 1500);
    }
  }
});
vscode.postMessage({ type: "ready" });
