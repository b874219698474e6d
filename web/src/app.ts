// Totem's web client. One page: the project's sessions on the left (search, new, rename, fork,
// delete), the open session's chat in the middle (Markdown streaming live, reasoning folded, tool
// calls one line each and expandable, permission questions with their diff side by side and the
// four answers), the prompt box with the mode, model and reasoning pickers, undo and redo, the
// session's changes as a file list with per-file diffs, and the context and cost meter.
//
// The chat model is the VS Code extension's (`Transcript`, built from the same session events);
// everything another client does arrives as events and shows at once.

import "./app.css";

import { SessionsState, Transcript, type Block, type Session } from "../../editors/vscode/src/state";
import { displayable, el, markdown, sideBySide } from "./render";
import { type Event, Rpc, RpcError } from "./rpc";
import { type Run, Timeline } from "./runs";
import { Terminals, admitXtermStyles } from "./terminals";

admitXtermStyles();

// ---- the page's skeleton ----

const root = el("div", "app");
const header = el("header", "top");
const menuButton = el("button", "menu", "☰");
menuButton.title = "Sessions";
menuButton.setAttribute("aria-label", "Sessions");
const projectSelect = el("select", "project");
projectSelect.setAttribute("aria-label", "Project");
const titleLine = el("span", "title", "Totem");
const meter = el("span", "meter");
const connection = el("span", "conn", "connecting…");
header.append(menuButton, projectSelect, titleLine, meter, connection);

const side = el("aside", "side");
const search = el("input", "search");
search.type = "search";
search.placeholder = "Search sessions";
const newButton = el("button", "new", "New session");
const sessionList = el("ul", "sessions");
side.append(newButton, search, sessionList);

const main = el("main", "main");
const toolbar = el("div", "toolbar");
const renameButton = el("button", undefined, "Rename");
const forkButton = el("button", undefined, "Fork");
const deleteButton = el("button", undefined, "Delete");
const undoButton = el("button", "undo", "Undo");
const redoButton = el("button", "redo", "Redo");
const changesButton = el("button", "changes-toggle", "Changes");
const terminalsButton = el("button", "terminals-toggle", "Terminals");
const runsButton = el("button", "runs-toggle", "Runs");
toolbar.append(undoButton, redoButton, changesButton, terminalsButton, runsButton, renameButton, forkButton, deleteButton);
const log = el("div", "log");
log.setAttribute("role", "log");
const changesPanel = el("section", "changes hidden");
const terminals = new Terminals(() => rpc);
terminals.onCount = (n) => (terminalsButton.textContent = n > 0 ? `Terminals (${n})` : "Terminals");
terminals.onError = (e) => failed(e);
const timeline = new Timeline(() => rpc);
const composer = el("form", "composer");
const prompt = el("textarea", "prompt");
prompt.placeholder = "Ask Totem… (Enter sends, Shift+Enter for a new line)";
prompt.rows = 2;
const pickers = el("div", "pickers");
const modeSelect = el("select", "mode");
modeSelect.setAttribute("aria-label", "Mode");
for (const m of ["build", "plan"]) {
  modeSelect.append(new Option(m, m));
}
const modelSelect = el("select", "model");
modelSelect.setAttribute("aria-label", "Model");
modelSelect.append(new Option("default model", ""));
const reasoningSelect = el("select", "reasoning");
reasoningSelect.setAttribute("aria-label", "Reasoning");
for (const r of ["", "off", "low", "medium", "high"]) {
  reasoningSelect.append(new Option(r === "" ? "reasoning: default" : `reasoning: ${r}`, r));
}
const sendButton = el("button", "send", "Send");
sendButton.type = "submit";
const stopButton = el("button", "stop", "Stop");
stopButton.type = "button";
pickers.append(modeSelect, modelSelect, reasoningSelect, stopButton, sendButton);
composer.append(prompt, pickers);
const toast = el("div", "toast hidden");
toast.setAttribute("role", "status");
main.append(toolbar, log, changesPanel, terminals.panel, timeline.panel, composer);
root.append(header, side, main, toast);

// ---- state ----

let rpc: Rpc;
let projects: { id: string; name: string; path: string }[] = [];
let sessions: SessionsState | undefined;
let daemonSub: string | undefined;

interface Open {
  id: string;
  title: string;
  transcript: Transcript;
  sub?: string;
  seenParts: Set<string>;
  seenMessages: Set<string>;
  seenQuestions: Set<string>;
  questions: Map<string, any>;
  tools: Map<string, { tool: string; input: unknown; output?: string }>;
  rendered: ({ el: HTMLElement; sig: string } | undefined)[];
  /** Measured heights of drawn blocks (px, with the gap under them), by index. */
  heights: Map<number, number>;
  heightSum: number;
  /** The session's runs, oldest first (from the messages, then from run events). */
  runIds: string[];
  /** Live events while the older messages load (replayed on the rebuilt chat model). */
  live?: Event[];
  /** The blocks drawn, [from, to): those near the screen; the others are spacers. */
  from: number;
  to: number;
  /** The blocks there were when the window was last fitted (the window follows new ones if it
   * reached the end). */
  total: number;
  activity: string;
}
let open: Open | undefined;
let openToken = 0;
/** The session being opened, until it is open (its messages and questions still on their way). */
let openingSession: Promise<void> | undefined;

function say(text: string): void {
  toast.textContent = displayable(text);
  toast.classList.remove("hidden");
  window.clearTimeout((toast as any).timer);
  (toast as any).timer = window.setTimeout(() => toast.classList.add("hidden"), 5000);
}

function failed(e: unknown): void {
  say(e instanceof Error ? e.message : String(e));
}

// ---- connection ----

async function connect(): Promise<void> {
  const url = `ws://${location.host}/rpc`;
  rpc = new Rpc(url);
  rpc.onState = (state) => {
    connection.textContent = state === "open" ? "" : "disconnected: reconnecting…";
    document.body.classList.toggle("offline", state !== "open");
    if (state === "closed") {
      window.setTimeout(() => void reconnect(), 1000);
    }
  };
  await rpc.open();
  // A session named in the address opens at once, beside the lists below (first paint).
  const wantedSession = new URLSearchParams(location.hash.slice(1)).get("session");
  const opening = wantedSession ? openSession(wantedSession) : undefined;
  const list = await rpc.call<{ items: typeof projects }>("project.list", { limit: 500 });
  projects = list.items;
  projectSelect.replaceChildren(...projects.map((p) => new Option(p.name || p.path, p.id)));
  const wanted = localStorage.getItem("totem.project");
  const project = projects.find((p) => p.id === wanted) ?? projects[projects.length - 1];
  if (project) {
    projectSelect.value = project.id;
  }
  void loadModels();
  daemonSub = await rpc.subscribe("daemon.subscribe", {}, onDaemon);
  await loadSessions();
  if (opening) {
    await opening;
  } else if (sessions && sessions.sorted()[0]) {
    await openSession(sessions.sorted()[0].id);
  }
}

async function reconnect(): Promise<void> {
  try {
    const current = open?.id;
    open = undefined;
    await connect();
    if (current && current !== (open as Open | undefined)?.id) {
      await openSession(current);
    }
  } catch {
    connection.textContent = "totemd does not answer: run `totem web` again";
    window.setTimeout(() => void reconnect(), 3000);
  }
}

async function loadModels(): Promise<void> {
  try {
    const list = await rpc.call<{ models: { name: string }[]; defaultModel?: string }>("model.list", {});
    const chosen = modelSelect.value;
    modelSelect.replaceChildren(new Option(list.defaultModel ? `default (${list.defaultModel})` : "default model", ""));
    for (const m of list.models) {
      modelSelect.append(new Option(m.name, m.name));
    }
    modelSelect.value = chosen;
  } catch {
    // No provider answers: the default stays.
  }
}

// ---- sessions ----

function projectId(): string | undefined {
  return projectSelect.value || undefined;
}

async function loadSessions(): Promise<void> {
  const pid = projectId();
  if (!pid) {
    sessionList.replaceChildren(el("li", "empty", "No project yet: run `totem` in a folder, then reload."));
    return;
  }
  const query = search.value.trim();
  const page = await rpc.call<{ items: Session[] }>("session.list", {
    projectId: pid,
    limit: 200,
    ...(query ? { search: query } : {}),
  });
  const state = new SessionsState(pid);
  const before = sessions;
  state.load(page.items);
  if (before && before.projectId === pid) {
    for (const item of state.sorted()) {
      const old = before.get(item.id);
      if (old) {
        item.activity = old.activity;
        item.questions = old.questions;
      }
    }
  }
  sessions = state;
  drawSessions();
}

function drawSessions(): void {
  if (!sessions) {
    return;
  }
  const items = sessions.sorted().map((s) => {
    const li = el("li", `session ${s.activity}${open?.id === s.id ? " current" : ""}`);
    const title = el("span", "stitle", s.title || "(untitled)");
    li.append(title);
    if (s.questions.length > 0) {
      li.append(el("span", "badge", String(s.questions.length)));
    } else if (s.activity === "running") {
      li.append(el("span", "dot", "●"));
    }
    li.dataset.id = s.id;
    li.tabIndex = 0;
    li.onclick = () => void openSession(s.id).catch(failed);
    li.onkeydown = (e) => {
      if (e.key === "Enter") {
        void openSession(s.id).catch(failed);
      }
    };
    return li;
  });
  sessionList.replaceChildren(...(items.length ? items : [el("li", "empty", search.value ? "No session matches." : "No session yet.")]));
}

function onDaemon(event: Event): void {
  if (event.type === "lagged") {
    void rpc.subscribe("daemon.subscribe", {}, onDaemon).then((id) => (daemonSub = id));
    return;
  }
  if (sessions?.apply(event as any)) {
    drawSessions();
  }
  if (event.type === "session.updated" && open && (event.session as Session).id === open.id) {
    open.title = (event.session as Session).title;
    titleLine.textContent = displayable(open.title);
  }
  if (event.type === "session.status" && open && event.sessionId === open.id) {
    open.activity = event.status as string;
    document.body.dataset.activity = open.activity;
    // This comes on the daemon's channel, apart from the session's events: the run's end may
    // have been drawn already, so the buttons follow the activity here too.
    followActivity(open.activity);
  }
  if (document.hidden) {
    if (event.type === "permission.asked") {
      const q = event.question as { tool: string; target: string; sessionId: string };
      notify("Totem asks", `${q.tool} wants to ${q.target}`, q.sessionId);
    } else if (event.type === "run.ended") {
      const run = event.run as { status: string; sessionId: string };
      notify("Totem", `The run ${run.status === "done" ? "finished" : run.status}.`, run.sessionId);
    }
  }
}

function notify(title: string, body: string, sessionId?: string): void {
  if (!("Notification" in window) || Notification.permission !== "granted") {
    return;
  }
  const n = new Notification(title, { body: displayable(body.slice(0, 200)), tag: sessionId });
  n.onclick = () => {
    window.focus();
    if (sessionId) {
      void openSession(sessionId).catch(failed);
    }
  };
}

// ---- the open session ----

/** Messages fetched when a session opens: the newest, drawn at once; the older ones follow in the
 * background and the chat is rebuilt with them (the reader scrolls up into them). */
const FIRST_PAGE = 300;

function openSession(id: string): Promise<void> {
  const opened = openSessionNow(id);
  openingSession = opened;
  const done = (): void => {
    if (openingSession === opened) {
      openingSession = undefined;
    }
  };
  opened.then(done, done);
  return opened;
}

async function openSessionNow(id: string): Promise<void> {
  const token = ++openToken;
  if (open?.sub) {
    void rpc.unsubscribe("session.unsubscribe", open.sub);
  }
  side.classList.remove("shown");
  delete document.body.dataset.history;
  const session = await rpc.call<Session & { lastSeq: number; usage?: any; status: string }>("session.get", { sessionId: id });
  const state: Open = {
    id,
    title: session.title,
    transcript: new Transcript(),
    seenParts: new Set(),
    seenMessages: new Set(),
    seenQuestions: new Set(),
    questions: new Map(),
    tools: new Map(),
    rendered: [],
    heights: new Map(),
    heightSum: 0,
    runIds: [],
    from: 0,
    to: 0,
    total: 0,
    activity: session.status === "running" ? "running" : "idle",
  };
  // The newest messages (read after session.get, so nothing between them and the live events
  // from its lastSeq is missed; anything in both is skipped) and the open questions, together.
  const [page, waiting] = await Promise.all([
    rpc.call<{ messages: any[] }>("session.messages", { sessionId: id, newest: true, limit: FIRST_PAGE }),
    rpc.call<{ questions: any[] }>("permission.list", { sessionId: id }),
  ]);
  if (token !== openToken) {
    return;
  }
  const newest = page.messages;
  const firstSeq = newest.length === FIRST_PAGE ? newest[0]?.seq : undefined;
  build(state, [], newest, waiting.questions);
  if (firstSeq !== undefined) {
    state.live = [];
  }
  open = state;
  location.hash = `session=${encodeURIComponent(id)}`;
  titleLine.textContent = displayable(session.title);
  document.body.dataset.activity = state.activity;
  showUsage(session.usage);
  log.replaceChildren();
  changesPanel.classList.add("hidden");
  terminals.reset(id);
  timeline.reset(id, state.runIds);
  draw(true);
  drawSessions();
  let lastSeq = session.lastSeq;
  const handler = (e: Event): void => {
    if (open !== state) {
      return;
    }
    if (e.type === "lagged") {
      // Fell behind: subscribe again from the last event seen; nothing is lost.
      void rpc.subscribe("session.subscribe", { sessionId: id, afterSeq: lastSeq }, handler).then((sub) => (state.sub = sub));
      return;
    }
    if (typeof e.seq === "number") {
      lastSeq = Math.max(lastSeq, e.seq);
    }
    state.live?.push(e);
    apply(state, e);
    schedule();
  };
  state.sub = await rpc.subscribe("session.subscribe", { sessionId: id, afterSeq: session.lastSeq }, handler);
  if (firstSeq === undefined) {
    document.body.dataset.history = "complete";
  } else {
    void loadOlder(state, firstSeq, newest, waiting.questions).catch(failed);
  }
}

/** The chat model from stored messages (older, then newest) and the open questions. */
function build(state: Open, older: any[], newest: any[], questions: any[]): void {
  const undoneRuns = new Set<string>();
  for (const list of [older, newest]) {
    for (const message of list) {
      ingestMessage(state, message);
      if (message.undone && message.runId) {
        undoneRuns.add(message.runId);
      }
    }
  }
  for (const block of state.transcript.blocks) {
    if (block.runId && undoneRuns.has(block.runId)) {
      block.undone = true;
    }
  }
  for (const question of questions) {
    apply(state, { type: "permission.asked", at: Date.now(), sessionId: state.id, question });
  }
}

/** The messages before the first page, in pages of 1,000 from the oldest; then the chat is
 * rebuilt from all of them, with the live events that came meanwhile, and drawn again where the
 * reader is. */
async function loadOlder(state: Open, firstSeq: number, newest: any[], questions: any[]): Promise<void> {
  const older: any[] = [];
  let afterSeq = 0;
  for (;;) {
    const page = await rpc.call<{ messages: any[]; nextAfterSeq?: number }>("session.messages", {
      sessionId: state.id,
      afterSeq,
      limit: 1000,
    });
    if (open !== state) {
      return;
    }
    const before = page.messages.filter((m) => m.seq < firstSeq);
    older.push(...before);
    if (before.length < page.messages.length || page.nextAfterSeq === undefined || page.messages.length === 0) {
      break;
    }
    afterSeq = page.nextAfterSeq;
  }
  const live = state.live ?? [];
  state.live = undefined;
  state.transcript = new Transcript();
  state.seenParts = new Set();
  state.seenMessages = new Set();
  state.seenQuestions = new Set();
  state.questions = new Map();
  state.tools = new Map();
  state.runIds = [];
  build(state, older, newest, questions);
  for (const e of live) {
    apply(state, e);
  }
  timeline.setIds(state.runIds);
  const fromBottom = log.scrollHeight - log.scrollTop;
  const atBottom = fromBottom - log.clientHeight < 80;
  state.rendered = [];
  draw(true);
  if (!atBottom) {
    log.scrollTop = log.scrollHeight - fromBottom;
  }
  document.body.dataset.history = "complete";
}

function ingestMessage(state: Open, message: any): void {
  state.seenMessages.add(message.id);
  noteRun(state, message.runId);
  const base = { at: message.createdAt, sessionId: message.sessionId, seq: message.seq };
  state.transcript.apply({ ...base, type: "message.created", message } as any);
  if (message.role !== "assistant") {
    return;
  }
  message.parts.forEach((part: any, index: number) => {
    state.seenParts.add(`${message.id}:${index}`);
    noteTool(state, part);
    state.transcript.apply({ ...base, type: "part.done", messageId: message.id, runId: message.runId, index, part } as any);
  });
}

function noteRun(state: Open, runId: unknown): void {
  if (typeof runId === "string" && state.runIds[state.runIds.length - 1] !== runId && !state.runIds.includes(runId)) {
    state.runIds.push(runId);
  }
}

/** A `terminal` tool call may have started a terminal: list them again (once per burst). */
let terminalsTimer = 0;
function terminalsChanged(): void {
  window.clearTimeout(terminalsTimer);
  terminalsTimer = window.setTimeout(() => void terminals.refresh().catch(() => undefined), 300);
}

function noteTool(state: Open, part: any): void {
  if (part.type === "toolCall") {
    state.tools.set(part.callId, { tool: part.tool, input: part.input });
  } else if (part.type === "toolResult") {
    const t = state.tools.get(part.callId);
    if (t) {
      t.output = part.output;
    }
  }
}

/** One live event into the open session (duplicates of the history skipped). */
function apply(state: Open, e: Event): void {
  switch (e.type) {
    case "message.created": {
      const id = (e.message as { id: string }).id;
      if (state.seenMessages.has(id)) {
        return;
      }
      state.seenMessages.add(id);
      noteRun(state, (e.message as { runId?: string }).runId);
      break;
    }
    case "part.started":
    case "part.delta":
    case "part.done":
      if (state.seenParts.has(`${e.messageId as string}:${e.index as number}`)) {
        return;
      }
      if (e.type === "part.done") {
        noteTool(state, e.part);
        const part = e.part as { type?: string; tool?: string };
        if (open === state && (part.type === "toolResult" || part.type === "toolCall") && state.tools.get((e.part as any).callId)?.tool === "terminal") {
          terminalsChanged();
        }
      }
      break;
    case "run.started":
    case "run.done":
    case "run.failed":
    case "run.aborted":
    case "run.interrupted": {
      const run = e.run as Run;
      noteRun(state, run.id);
      if (open === state) {
        timeline.update(run);
        if (e.type !== "run.started") {
          terminalsChanged();
        }
      }
      break;
    }
    case "permission.asked": {
      const q = e.question as { id: string };
      if (state.seenQuestions.has(q.id)) {
        return;
      }
      state.seenQuestions.add(q.id);
      state.questions.set(q.id, q);
      break;
    }
    case "usage":
      showUsage(e.session, e.contextTokens as number | undefined, e.contextWindow as number | undefined);
      break;
    case "session.deleted":
      say("This session was deleted.");
      break;
    default:
      break;
  }
  state.transcript.apply(e as any);
}

function showUsage(usage: any, context?: number, window_?: number): void {
  if (!usage) {
    meter.textContent = "";
    return;
  }
  const tokens = (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0);
  const parts = [`${compact(tokens)} tokens`];
  if (typeof usage.costUsd === "number") {
    parts.push(`$${usage.costUsd.toFixed(usage.costUsd < 1 ? 4 : 2)}`);
  }
  if (context && window_) {
    parts.unshift(`context ${Math.round((100 * context) / window_)}%`);
  }
  meter.textContent = parts.join(" · ");
}

function compact(n: number): string {
  return n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n);
}

// ---- drawing the chat ----

let scheduled = false;
function schedule(): void {
  if (!scheduled) {
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      draw(false);
    });
  }
}

function signature(state: Open, b: Block): string {
  switch (b.kind) {
    case "text":
    case "reasoning":
      return `${b.kind}|${b.text.length}|${b.streaming}|${b.undone}`;
    case "tool":
      return `tool|${b.result ?? ""}|${b.error}|${b.undone}`;
    case "question":
      return `q|${b.answer ?? ""}|${b.undone}`;
    default:
      return `${b.kind}|${b.undone}`;
  }
}

/** Markdown is drawn when a block first comes near the screen (a long session opens fast). Its
 * height changes then, so what the reader looks at is kept in place. */
const lazy = new IntersectionObserver(
  (entries) => {
    keepPlace(() => {
      for (const entry of entries) {
        if (entry.isIntersecting) {
          const target = entry.target as HTMLElement & { pending?: string };
          if (target.pending !== undefined) {
            markdown(target, target.pending);
            target.pending = undefined;
          }
          lazy.unobserve(target);
        }
      }
    });
  },
  { root: log, rootMargin: "800px 0px" },
);

/** Blocks drawn when a session opens (its newest). */
const WINDOW = 150;
/** Blocks are drawn this far (px) beyond the screen each way, and dropped beyond KEEP: the page
 * holds a bounded window of blocks whatever the session's length. */
const MARGIN = 1200;
const KEEP = 2800;
/** The space under each block (`.block` margin in app.css). */
const GAP = 10;

/** Spacers standing for the blocks not drawn, above and below the drawn ones, with their
 * measured (or, never drawn, estimated) heights. */
const earlier = el("div", "earlier");
const later = el("div", "later");

function estimate(state: Open, i: number): number {
  return state.heights.get(i) ?? (state.heights.size ? state.heightSum / state.heights.size : 60);
}

function measure(state: Open, i: number, node: HTMLElement): void {
  noteHeight(state, i, node.offsetHeight + GAP);
}

function span(state: Open, from: number, to: number): number {
  let sum = 0;
  for (let i = from; i < to; i++) {
    sum += estimate(state, i);
  }
  return sum;
}

function setSpacers(state: Open): void {
  earlier.style.height = `${span(state, 0, state.from)}px`;
  later.style.height = `${span(state, state.to, state.transcript.blocks.length)}px`;
}

/** Top of a node in the log's scrolled content. */
function topOf(node: Element, logTop: number): number {
  return node.getBoundingClientRect().top - logTop + log.scrollTop;
}

/** Runs a change and scrolls so that the first drawn block on screen stays where it was. */
function keepPlace(change: () => void): void {
  const state = open;
  let anchor: HTMLElement | undefined;
  let before = 0;
  if (state) {
    const view = log.getBoundingClientRect();
    for (let i = state.from; i < state.to; i++) {
      const node = state.rendered[i]?.el;
      if (node && node.isConnected) {
        const r = node.getBoundingClientRect();
        if (r.bottom > view.top) {
          anchor = node;
          before = r.top;
          break;
        }
      }
    }
  }
  change();
  if (anchor?.isConnected) {
    const moved = anchor.getBoundingClientRect().top - before;
    if (moved !== 0) {
      log.scrollTop += moved;
    }
  }
}

/** Takes a drawn block out of the page (its height measured before). */
function drop(state: Open, i: number): void {
  const known = state.rendered[i];
  if (known) {
    lazy.unobserve(known.el);
    known.el.remove();
    state.rendered[i] = undefined;
  }
}

function noteHeight(state: Open, i: number, h: number): void {
  if (h <= GAP) {
    return; // not laid out (the log hidden)
  }
  state.heightSum += h - (state.heights.get(i) ?? 0);
  state.heights.set(i, h);
}

function drawAt(state: Open, i: number, eager: boolean): HTMLElement {
  const block = state.transcript.blocks[i];
  const node = drawBlock(state, block, eager);
  state.rendered[i] = { el: node, sig: signature(state, block) };
  return node;
}

/** Draws the blocks near the screen and drops those far from it, keeping the reader's place.
 * Layout is read in one pass, then the page is changed, then the new blocks are measured, so a
 * frame forces only a few layouts whatever the number of blocks changed. */
function fitWindow(): void {
  const state = open;
  if (!state) {
    return;
  }
  if (log.clientHeight === 0) {
    return;
  }
  const length = state.transcript.blocks.length;
  const top = log.scrollTop;
  const bottom = top + log.clientHeight;
  const logTop = log.getBoundingClientRect().top;
  const start = topOf(earlier, logTop);
  let drawnBottom = topOf(later, logTop);
  const firstNode = state.from < state.to ? state.rendered[state.from]?.el : undefined;
  let drawnTop = firstNode ? topOf(firstNode, logTop) : drawnBottom;
  if (drawnBottom < top - MARGIN || drawnTop > bottom + MARGIN || state.from === state.to) {
    // A jump (a dragged scrollbar, Home, End): draw from the block the estimates put there.
    for (let i = state.from; i < state.to; i++) {
      const node = state.rendered[i]?.el;
      if (node) {
        noteHeight(state, i, node.offsetHeight + GAP);
      }
    }
    for (let i = state.from; i < state.to; i++) {
      drop(state, i);
    }
    let at = 0;
    let y = start;
    while (at < length - 1 && y + estimate(state, at) < top) {
      y += estimate(state, at);
      at++;
    }
    state.from = at;
    state.to = at;
    drawnTop = y;
    drawnBottom = y;
  }
  // Blocks far above and far below the screen (read only).
  let dropTop = 0;
  while (state.from + dropTop < state.to - 1) {
    const node = state.rendered[state.from + dropTop]?.el;
    const h = node ? node.offsetHeight + GAP : 0;
    if (!node || drawnTop + h > top - KEEP) {
      break;
    }
    noteHeight(state, state.from + dropTop, h);
    drawnTop += h;
    dropTop++;
  }
  let dropBottom = 0;
  while (state.to - dropBottom - 1 > state.from + dropTop) {
    const node = state.rendered[state.to - dropBottom - 1]?.el;
    const h = node ? node.offsetHeight + GAP : 0;
    if (!node || drawnBottom - h < bottom + KEEP) {
      break;
    }
    noteHeight(state, state.to - dropBottom - 1, h);
    drawnBottom -= h;
    dropBottom++;
  }
  // Blocks to draw, by their estimated heights, up to MARGIN beyond the screen.
  let from = state.from + dropTop;
  for (let need = drawnTop - (top - MARGIN); need > 0 && from > 0; ) {
    from--;
    need -= estimate(state, from);
  }
  let to = state.to - dropBottom;
  for (let need = bottom + MARGIN - drawnBottom; need > 0 && to < length; ) {
    need -= estimate(state, to);
    to++;
  }
  if (dropTop === 0 && dropBottom === 0 && from === state.from && to === state.to && state.total === length) {
    return;
  }
  keepPlace(() => {
    for (let i = state.from; i < state.from + dropTop; i++) {
      drop(state, i);
    }
    for (let i = state.to - dropBottom; i < state.to; i++) {
      drop(state, i);
    }
    const keptFrom = state.from + dropTop;
    const keptTo = Math.max(keptFrom, state.to - dropBottom);
    const added: number[] = [];
    // Markdown at once for the blocks (by the estimates) on screen, when they come near it for
    // the others: a block drawn as plain text grows when its Markdown is drawn.
    const onScreen = (y: number, i: number) => y < bottom && y + estimate(state, i) > top;
    const above = document.createDocumentFragment();
    let y = drawnTop - span(state, from, keptFrom);
    for (let i = from; i < keptFrom; i++) {
      above.append(drawAt(state, i, onScreen(y, i)));
      y += estimate(state, i);
      added.push(i);
    }
    earlier.after(above);
    const below = document.createDocumentFragment();
    y = drawnBottom;
    for (let i = keptTo; i < to; i++) {
      below.append(drawAt(state, i, onScreen(y, i)));
      y += estimate(state, i);
      added.push(i);
    }
    later.before(below);
    state.from = from;
    state.to = to;
    state.total = length;
    for (const i of added) {
      const node = state.rendered[i]?.el;
      if (node) {
        noteHeight(state, i, node.offsetHeight + GAP);
      }
    }
    setSpacers(state);
  });
}

let fitting = false;
log.addEventListener(
  "scroll",
  () => {
    if (!fitting) {
      fitting = true;
      requestAnimationFrame(() => {
        fitting = false;
        fitWindow();
      });
    }
  },
  { passive: true },
);

function draw(first: boolean): void {
  const state = open;
  if (!state) {
    return;
  }
  const stick = first || log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  const blocks = state.transcript.blocks;
  if (first) {
    state.from = Math.max(0, blocks.length - WINDOW);
    state.to = state.from;
    state.rendered = [];
    state.heights = new Map();
    state.heightSum = 0;
    log.replaceChildren(earlier, later);
  }
  // New blocks at the end are drawn when the drawn window reaches the end (the reader follows
  // the run); otherwise they join the spacer below.
  const following = first || state.to >= state.total;
  const end = following ? blocks.length : state.to;
  const fragment = document.createDocumentFragment();
  for (let i = state.from; i < end; i++) {
    const block = blocks[i];
    const sig = signature(state, block);
    const known = state.rendered[i];
    if (known && known.sig === sig) {
      continue;
    }
    const node = drawBlock(state, block, !first);
    if (known) {
      known.el.replaceWith(node);
      known.el = node;
      known.sig = sig;
    } else {
      state.rendered[i] = { el: node, sig };
      fragment.append(node);
    }
  }
  later.before(fragment);
  state.to = end;
  for (let i = Math.max(state.from, end - 40); i < end; i++) {
    const node = state.rendered[i]?.el;
    if (node) {
      measure(state, i, node);
    }
  }
  state.total = blocks.length;
  setSpacers(state);
  if (stick) {
    log.scrollTop = log.scrollHeight;
  }
  followActivity(state.activity);
  if (first) {
    // Measure what was drawn at once, so the estimates for the rest start from real heights.
    for (let i = state.from; i < end; i++) {
      const node = state.rendered[i]?.el;
      if (node) {
        measure(state, i, node);
      }
    }
    setSpacers(state);
    if (stick) {
      log.scrollTop = log.scrollHeight;
    }
  }
}

/** Undo and redo only while the session is idle. */
function followActivity(activity: string): void {
  undoButton.disabled = activity !== "idle";
  redoButton.disabled = activity !== "idle";
}

function drawBlock(state: Open, b: Block, eager: boolean): HTMLElement {
  const box = el("div", `block ${b.kind}${b.undone ? " undone" : ""}`);
  switch (b.kind) {
    case "user": {
      box.append(el("div", "who", "You"), el("div", "plain", b.text));
      for (const a of b.attachments) {
        box.append(el("div", "attachment", `📎 ${a}`));
      }
      break;
    }
    case "text": {
      const body = el("div", "md") as HTMLElement & { pending?: string };
      if (b.streaming || eager) {
        markdown(body, b.text);
      } else {
        body.textContent = displayable(b.text);
        body.pending = b.text;
        lazy.observe(body);
      }
      if (b.streaming) {
        box.classList.add("streaming");
      }
      box.append(body);
      break;
    }
    case "reasoning": {
      const details = el("details");
      details.append(el("summary", undefined, b.streaming ? "Thinking…" : "Reasoning"), el("div", "plain", b.text));
      box.append(details);
      break;
    }
    case "tool": {
      const details = el("details");
      const summary = el("summary", b.error ? "failed" : undefined, b.line);
      if (b.result !== undefined) {
        summary.append(el("span", "result", ` → ${b.result}`));
      }
      details.append(summary);
      details.ontoggle = () => {
        if (details.open && details.childElementCount === 1) {
          const t = state.tools.get(b.callId);
          details.append(el("pre", "io", JSON.stringify(t?.input ?? {}, null, 2)));
          if (t?.output !== undefined) {
            details.append(el("pre", "io", t.output));
          }
        }
      };
      box.append(details);
      break;
    }
    case "question":
      box.append(drawQuestion(state, b));
      break;
    case "notice":
      box.append(el("div", "plain", b.text));
      break;
    case "changes":
      box.append(el("div", "plain", `${b.verb === "undid" ? "Undid" : "Redid"} ${b.files.length} file(s): ${b.files.join(", ")}`));
      break;
    case "end":
      box.append(el("div", "plain", b.status === "done" ? "Run finished." : `Run ${b.status}${b.error ? `: ${b.error}` : ""}`));
      break;
  }
  return box;
}

function drawQuestion(state: Open, b: Extract<Block, { kind: "question" }>): HTMLElement {
  const q = state.questions.get(b.id) ?? {};
  const box = el("div", "question-body");
  box.append(el("div", "qline", b.line));
  if (q.explanation) {
    box.append(el("div", "explain", q.explanation));
  }
  if (b.diff) {
    box.append(sideBySide(b.diff));
    if (b.truncated) {
      box.append(el("div", "explain", "The diff is cut short."));
    }
  } else if (q.kind === "execute" && q.target) {
    box.append(el("pre", "command", q.target));
  }
  if (b.answer) {
    box.append(el("div", "answered", `Answered: ${b.answer}`));
    return box;
  }
  const buttons = el("div", "answers");
  const reply = (r: Record<string, unknown>) =>
    void rpc.call("permission.reply", { sessionId: state.id, questionId: b.id, reply: r }).catch(failed);
  const once = el("button", "once", "Allow once");
  once.onclick = () => reply({ type: "once" });
  const session = el("button", "always-session", "Always in this session");
  session.onclick = () => reply({ type: "alwaysSession" });
  const project = el("button", "always-project", "Always in this project");
  project.onclick = () => reply({ type: "alwaysProject" });
  const remembers = alwaysText(q.always);
  if (remembers) {
    session.title = project.title = displayable(`Remembers: ${remembers}`);
  }
  const note = el("input", "note");
  note.placeholder = "Why not? (told to the model)";
  const deny = el("button", "deny", "Deny");
  deny.onclick = () => reply(note.value.trim() ? { type: "deny", note: note.value.trim() } : { type: "deny" });
  buttons.append(once, session, project, note, deny);
  box.append(buttons);
  return box;
}

/** What an "always" answer stores (rule key → pattern → action), as `bash(sed -n 1p a.txt)`. */
function alwaysText(always: unknown): string {
  if (!always || typeof always !== "object") {
    return "";
  }
  return Object.entries(always as Record<string, unknown>)
    .flatMap(([key, patterns]) =>
      patterns && typeof patterns === "object"
        ? Object.keys(patterns as Record<string, unknown>).map((p) => `${key}(${p})`)
        : [key],
    )
    .join(", ");
}

// ---- changes ----

async function showChanges(): Promise<void> {
  if (!open) {
    return;
  }
  if (!changesPanel.classList.contains("hidden")) {
    changesPanel.classList.add("hidden");
    return;
  }
  terminals.hide();
  timeline.hide();
  const diff = await rpc.call<{ files: { path: string; status: string; diff?: string; binary?: boolean }[] }>("session.diff", {
    sessionId: open.id,
  });
  const tree = el("ul", "tree");
  const view = el("div", "file-diff");
  if (diff.files.length === 0) {
    tree.append(el("li", "empty", "No changes in this session."));
  }
  // A tree: each folder once, above its files (a click folds it), files by their own name.
  const files = [...diff.files].sort((x, y) => x.path.localeCompare(y.path));
  const folders = new Map<string, HTMLElement>();
  for (const file of files) {
    const parts = file.path.split("/");
    for (let depth = 1; depth < parts.length; depth++) {
      const folder = parts.slice(0, depth).join("/");
      if (!folders.has(folder)) {
        const row = el("li", "folder", `${parts[depth - 1]}/`);
        row.style.paddingLeft = `${depth - 1}em`;
        row.dataset.folder = folder;
        row.onclick = () => {
          const folded = row.classList.toggle("folded");
          for (const item of tree.querySelectorAll<HTMLElement>("li[data-path]")) {
            if (item.dataset.path?.startsWith(`${folder}/`)) {
              item.classList.toggle("hidden", folded || [...folders.entries()].some(([f, r]) => r !== row && r.classList.contains("folded") && item.dataset.path!.startsWith(`${f}/`)));
            }
          }
        };
        folders.set(folder, row);
        tree.append(row);
      }
    }
    const item = el("li", `file ${file.status}`);
    item.dataset.path = file.path;
    item.style.paddingLeft = `${parts.length - 1}em`;
    item.title = displayable(file.path);
    item.append(el("span", "status", file.status[0].toUpperCase()), el("span", "path", parts[parts.length - 1]));
    item.onclick = () => {
      for (const other of tree.querySelectorAll(".file.current")) {
        other.classList.remove("current");
      }
      item.classList.add("current");
      view.replaceChildren(file.binary ? el("div", "plain", "A binary file.") : sideBySide(file.diff ?? ""));
    };
    tree.append(item);
  }
  changesPanel.replaceChildren(tree, view);
  changesPanel.classList.remove("hidden");
}

// ---- actions ----

async function send(): Promise<void> {
  const text = prompt.value.trim();
  if (!text) {
    return;
  }
  if ("Notification" in window && Notification.permission === "default") {
    void Notification.requestPermission();
  }
  // Sent while the page opens its first session (just loaded, or connected again): the prompt
  // goes to that session once it is open, not to a new one.
  if (!open && openingSession) {
    await openingSession.catch(() => undefined);
  }
  let id = open?.id;
  if (!id) {
    const pid = projectId();
    if (!pid) {
      say("Open a project first: run `totem` in a folder.");
      return;
    }
    const created = await rpc.call<Session>("session.create", { projectId: pid });
    await loadSessions();
    await openSession(created.id);
    id = created.id;
  }
  const params: Record<string, unknown> = { sessionId: id, text, mode: modeSelect.value };
  if (modelSelect.value) {
    params.model = modelSelect.value;
  }
  if (reasoningSelect.value) {
    params.reasoning = reasoningSelect.value;
  }
  await rpc.call("session.prompt", params);
  prompt.value = "";
}

async function undoRedo(method: "session.undo" | "session.redo"): Promise<void> {
  if (!open) {
    return;
  }
  try {
    const r = await rpc.call<{ files: string[]; prompt?: string }>(method, { sessionId: open.id });
    if (method === "session.undo" && r.prompt && !prompt.value) {
      prompt.value = r.prompt;
    }
  } catch (e) {
    if (e instanceof RpcError && e.code !== -1 && Array.isArray((e.data as any)?.files)) {
      const files = (e.data as { files: string[] }).files.join(", ");
      if (window.confirm(`These files changed since the run: ${files}. Overwrite them?`)) {
        await rpc.call(method, { sessionId: open.id, force: true });
      }
      return;
    }
    throw e;
  }
}

composer.onsubmit = (e) => {
  e.preventDefault();
  void send().catch(failed);
};
prompt.onkeydown = (e) => {
  // Safari ends an input method's composition before the keydown of the Enter that confirms it,
  // so that keydown says isComposing false; its keyCode, 229, still tells it apart.
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
    e.preventDefault();
    void send().catch(failed);
  }
};
stopButton.onclick = () => open && void rpc.call("session.abort", { sessionId: open.id }).catch(failed);
undoButton.onclick = () => void undoRedo("session.undo").catch(failed);
redoButton.onclick = () => void undoRedo("session.redo").catch(failed);
changesButton.onclick = () => void showChanges().catch(failed);
terminalsButton.onclick = () => {
  if (!open) {
    return;
  }
  if (terminals.shown) {
    terminals.hide();
    return;
  }
  changesPanel.classList.add("hidden");
  timeline.hide();
  void terminals.show().catch(failed);
};
runsButton.onclick = () => {
  if (!open) {
    return;
  }
  if (timeline.shown) {
    timeline.hide();
    return;
  }
  changesPanel.classList.add("hidden");
  terminals.hide();
  void timeline.show().catch(failed);
};
menuButton.onclick = () => side.classList.toggle("shown");
newButton.onclick = () => {
  const pid = projectId();
  if (!pid) {
    say("Open a project first: run `totem` in a folder.");
    return;
  }
  void rpc
    .call<Session>("session.create", { projectId: pid })
    .then(async (s) => {
      await loadSessions();
      await openSession(s.id);
      prompt.focus();
    })
    .catch(failed);
};
renameButton.onclick = () => {
  if (!open) {
    return;
  }
  const title = window.prompt("New title", open.title);
  if (title && title.trim()) {
    void rpc.call("session.rename", { sessionId: open.id, title: title.trim() }).catch(failed);
  }
};
forkButton.onclick = () => {
  if (!open) {
    return;
  }
  void rpc
    .call<Session>("session.fork", { sessionId: open.id })
    .then(async (s) => {
      await loadSessions();
      await openSession(s.id);
    })
    .catch(failed);
};
deleteButton.onclick = () => {
  if (!open || !window.confirm(`Delete the session “${open.title}”? This cannot be undone.`)) {
    return;
  }
  const id = open.id;
  void rpc
    .call("session.delete", { sessionId: id })
    .then(async () => {
      open = undefined;
      log.replaceChildren();
      titleLine.textContent = "Totem";
      terminals.reset(undefined);
      timeline.reset(undefined, []);
      await loadSessions();
    })
    .catch(failed);
};
let searchTimer = 0;
search.oninput = () => {
  window.clearTimeout(searchTimer);
  searchTimer = window.setTimeout(() => void loadSessions().catch(failed), 200);
};
projectSelect.onchange = () => {
  localStorage.setItem("totem.project", projectSelect.value);
  open = undefined;
  log.replaceChildren();
  terminals.reset(undefined);
  timeline.reset(undefined, []);
  void loadSessions().catch(failed);
};

// Back and forward between sessions, and links to one (`#session=ID`).
window.addEventListener("hashchange", () => {
  const wanted = new URLSearchParams(location.hash.slice(1)).get("session");
  if (rpc && wanted && wanted !== open?.id) {
    void openSession(wanted).catch(failed);
  }
});

// The one-time token has done its work (the cookie replaced it): keep it out of the history.
if (location.search) {
  history.replaceState(null, "", `/${location.hash}`);
}
document.body.append(root);
void connect().catch((e) => {
  connection.textContent = displayable(e instanceof Error ? e.message : String(e));
});
