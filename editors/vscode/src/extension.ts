// Totem in VS Code: the project's sessions in the side bar, a chat that streams the selected
// session, prompts with the selection or files attached, permission questions as notifications
// with VS Code's diff editor on the proposed change, the session's changes as a tree, undo and
// redo, a status bar item. Everything goes through totemd's socket (`client.ts`); what the views
// show is built by `state.ts` from the daemon's events.

import * as fs from "node:fs";
import * as path from "node:path";
import * as vscode from "vscode";

import { ChatView, type ChatState, type DaemonState } from "./chat.js";
import { type DaemonEvent, type SessionEvent, type Subscription, TotemClient, TotemError } from "./client.js";
import { displayable } from "./display.js";
import { applyBackward, applyForward } from "./patch.js";
import { type Session, type SessionItem, SessionsState, Transcript, attachmentLabel, questionSentence } from "./state.js";

const VERSION = "0.1.0";
const CONFLICT = -32009;

export interface Question {
  id: string;
  sessionId: string;
  runId: string;
  tool: string;
  kind: string;
  target: string;
  explanation?: string;
  diff?: string;
  truncated?: boolean;
  subcommand?: string;
}

export interface Attachment {
  path: string;
  range?: { startLine: number; endLine: number };
  text?: string;
}

interface ChangedFile {
  path: string;
  status: "added" | "modified" | "deleted";
  diff?: string;
  binary?: boolean;
  notKept?: boolean;
}

type Reply = { type: "once" | "alwaysSession" | "alwaysProject" } | { type: "deny"; note?: string };

interface ModelInfo {
  name: string;
  capabilities?: { thinking?: boolean };
}

let totem: Totem | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  totem = new Totem(context);
  await totem.start();
}

export function deactivate(): void {
  totem?.dispose();
  totem = undefined;
}

/** Texts shown by the diff editor under the `totem` scheme (proposed and earlier versions). */
class Texts implements vscode.TextDocumentContentProvider {
  private texts = new Map<string, string>();
  private changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  put(key: string, name: string, text: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: "totem", path: `/${name}`, query: key });
    this.texts.set(uri.toString(), text);
    this.changed.fire(uri);
    return uri;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }
}

class SessionsTree implements vscode.TreeDataProvider<SessionItem> {
  private changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;

  constructor(private readonly totem: Totem) {}

  refresh(): void {
    this.changed.fire();
  }

  getChildren(): SessionItem[] {
    // Empty while the daemon is away, so that the view's welcome says so and offers to start it.
    return this.totem.daemon === "up" || this.totem.daemon === "reconnecting" ? (this.totem.sessions?.sorted() ?? []) : [];
  }

  getTreeItem(s: SessionItem): vscode.TreeItem {
    const item = new vscode.TreeItem(displayable(s.title, true));
    const open = this.totem.current?.id === s.id;
    const waiting = s.questions.length > 0 ? ` · ${s.questions.length} waiting` : "";
    item.description = `${open ? "open · " : ""}${s.activity}${waiting}`;
    item.iconPath = new vscode.ThemeIcon(
      s.questions.length > 0 ? "bell-dot" : s.activity === "running" ? "sync~spin" : "comment-discussion",
    );
    item.tooltip = `${displayable(s.title, true)}\n${s.activity}, ${s.messageCount ?? 0} messages, ${new Date(s.updatedAt).toLocaleString()}`;
    item.contextValue = "session";
    item.id = s.id;
    item.command = { command: "totem.openSession", title: "Open", arguments: [s.id] };
    return item;
  }
}

class ChangesTree implements vscode.TreeDataProvider<ChangedFile> {
  private changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;
  files: ChangedFile[] = [];

  constructor(private readonly totem: Totem) {}

  async refresh(): Promise<void> {
    const session = this.totem.current?.id;
    const client = this.totem.client;
    this.files = [];
    if (session && client?.state === "connected") {
      const result = await client
        .request<{ files: ChangedFile[] }>("session.diff", { sessionId: session })
        .catch(() => ({ files: [] }));
      this.files = result.files;
    }
    this.changed.fire();
  }

  getChildren(): ChangedFile[] {
    return this.files;
  }

  getTreeItem(file: ChangedFile): vscode.TreeItem {
    const item = new vscode.TreeItem(path.basename(file.path));
    item.description = `${path.dirname(file.path) === "." ? "" : path.dirname(file.path) + " · "}${file.status}`;
    item.resourceUri = this.totem.uri(file.path);
    item.iconPath = new vscode.ThemeIcon(
      file.status === "added" ? "diff-added" : file.status === "deleted" ? "diff-removed" : "diff-modified",
    );
    item.command = { command: "totem.showChange", title: "Show Change", arguments: [file] };
    return item;
  }
}

export class Totem {
  readonly log = vscode.window.createOutputChannel("Totem", { log: true });
  client: TotemClient | undefined;
  project: { id: string; path: string } | undefined;
  sessions: SessionsState | undefined;
  current: { id: string; title: string; transcript: Transcript; sub?: Subscription<SessionEvent> } | undefined;
  private questions = new Map<string, Question>();
  /** The notification of each question, withdrawn by calling it (answered here or elsewhere). */
  private notices = new Map<string, () => void>();
  private pending: Attachment[] = [];
  private models: ModelInfo[] = [];
  daemon: DaemonState = "starting";
  private daemonError: string | undefined;
  private defaultModel: string | undefined;
  private lastModel: string | undefined;
  private undonePrompt: string | undefined;
  private readonly status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  private readonly sessionsTree = new SessionsTree(this);
  private readonly changesTree = new ChangesTree(this);
  private readonly texts = new Texts();
  private readonly chat: ChatView;
  private sessionsView: vscode.TreeView<SessionItem>;
  private disposables: vscode.Disposable[] = [];
  private connecting: Promise<TotemClient | undefined> | undefined;
  private drawTimer: NodeJS.Timeout | undefined;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.chat = new ChatView(context.extensionUri, (message) => this.fromChat(message));
    this.sessionsView = vscode.window.createTreeView("totem.sessions", { treeDataProvider: this.sessionsTree });
    const d = this.disposables;
    d.push(
      this.log,
      this.status,
      this.sessionsView,
      vscode.window.createTreeView("totem.changes", { treeDataProvider: this.changesTree }),
      vscode.window.registerWebviewViewProvider("totem.chat", this.chat, {
        webviewOptions: { retainContextWhenHidden: true },
      }),
      vscode.workspace.registerTextDocumentContentProvider("totem", this.texts),
    );
    const command = (name: string, fn: (...args: never[]) => unknown) =>
      d.push(
        vscode.commands.registerCommand(name, async (...args: never[]) => {
          try {
            await fn(...args);
          } catch (e) {
            void showError(`Totem: ${message(e)}`);
          }
        }),
      );
    command("totem.openChat", () => this.openChat());
    command("totem.startDaemon", () => this.startDaemon());
    command("totem.reply", (id: string, action: string) => this.reply(id, action));
    command("totem.newSession", () => this.newSession());
    command("totem.openSession", (id: string) => this.openSession(id));
    command("totem.renameSession", (item?: SessionItem) => this.rename(item));
    command("totem.deleteSession", (item?: SessionItem) => this.remove(item));
    command("totem.askSelection", () => this.askSelection());
    command("totem.addFile", (uri?: vscode.Uri) => this.addFile(uri));
    command("totem.abort", () => this.abort());
    command("totem.undo", () => this.changes("session.undo"));
    command("totem.redo", () => this.changes("session.redo"));
    command("totem.showQuestion", () => this.showQuestion());
    command("totem.pickModel", () => this.pickModel());
    command("totem.pickMode", () => this.pickMode());
    command("totem.pickReasoning", () => this.pickReasoning());
    command("totem.showChange", (file: ChangedFile) => this.showChange(file));
    command("totem.refreshChanges", () => this.changesTree.refresh());
    command("totem.showLog", () => this.log.show());
    d.push(
      vscode.workspace.onDidChangeConfiguration(async (e) => {
        // A changed default wins over what was picked before it.
        if (e.affectsConfiguration("totem.defaultMode")) {
          await this.context.workspaceState.update("pickedMode", undefined);
        }
        if (e.affectsConfiguration("totem.defaultModel")) {
          await this.context.workspaceState.update("pickedModel", undefined);
        }
        if (e.affectsConfiguration("totem")) {
          this.drawStatus();
          this.draw();
        }
      }),
    );
    this.status.command = "totem.openChat";
    this.status.name = "Totem";
    this.status.show();
    this.drawStatus();
    this.setDaemon("starting");
  }

  dispose(): void {
    this.client?.close();
    for (const d of this.disposables) {
      d.dispose();
    }
  }

  private get config(): vscode.WorkspaceConfiguration {
    return vscode.workspace.getConfiguration("totem");
  }

  // A mode or model picked in the chat holds until its setting changes: each pick remembers the
  // setting it was made under, and a changed setting wins again.

  get mode(): string {
    const setting = this.config.get<string>("defaultMode") || "build";
    const picked = this.context.workspaceState.get<{ value: string; setting: string }>("pickedMode");
    return picked && picked.setting === setting ? picked.value : setting;
  }

  get model(): string | undefined {
    const setting = this.config.get<string>("defaultModel") || "";
    const picked = this.context.workspaceState.get<{ value: string; setting: string }>("pickedModel");
    return (picked && picked.setting === setting ? picked.value : setting) || undefined;
  }

  private async pick(what: "mode" | "model", value: string): Promise<void> {
    const setting = this.config.get<string>(what === "mode" ? "defaultMode" : "defaultModel") || (what === "mode" ? "build" : "");
    const key = what === "mode" ? "pickedMode" : "pickedModel";
    await this.context.workspaceState.update(key, value === setting ? undefined : { value, setting });
  }

  /** The model the next prompt goes to, as far as known. */
  private get nextModel(): string | undefined {
    return this.model ?? this.defaultModel;
  }

  /** Whether `model` can think (unknown models are taken to). */
  private thinks(model: string | undefined): boolean {
    return this.models.find((m) => m.name === model)?.capabilities?.thinking ?? true;
  }

  get reasoning(): string | undefined {
    return this.context.workspaceState.get<string>("reasoning");
  }

  /** A project file's URI. */
  uri(relative: string): vscode.Uri {
    return vscode.Uri.file(path.join(this.project?.path ?? this.root() ?? "/", relative));
  }

  private root(): string | undefined {
    return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  }

  async start(): Promise<void> {
    await this.connect();
  }

  /** The connection (made, and the daemon started, when there is none). */
  async connect(): Promise<TotemClient | undefined> {
    if (this.client && this.client.state !== "closed") {
      return this.client;
    }
    this.connecting ??= this.dial().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /** The daemon's state as the views show it (the `totem.daemon` context key picks the welcome). */
  private setDaemon(state: DaemonState, error?: string): void {
    this.daemon = state;
    this.daemonError = state === "down" ? error : undefined;
    void vscode.commands.executeCommand("setContext", "totem.daemon", state);
    this.sessionsTree.refresh();
    void this.changesTree.refresh();
    this.drawStatus();
    this.draw();
  }

  /** "Start Totem" in the views: connects, starting the daemon with the current `totem.command`. */
  private async startDaemon(): Promise<void> {
    if (!(await this.connect())) {
      void showError(`Totem: the daemon could not be started. ${this.daemonError ?? ""}`);
    }
  }

  private async dial(): Promise<TotemClient | undefined> {
    const root = this.root();
    if (!root) {
      this.drawStatus("Totem: open a folder");
      return undefined;
    }
    let client: TotemClient;
    this.setDaemon("starting");
    try {
      client = await TotemClient.connect({
        socket: this.config.get<string>("socketPath") || undefined,
        // Read each time the daemon is started: a changed setting needs no reload.
        totem: () => this.config.get<string>("command") || "totem",
        client: { name: "totem-vscode", version: VERSION },
        log: (line) => this.log.debug(line),
        reconnectMs: 60_000,
      });
    } catch (e) {
      this.log.warn(`cannot reach totemd: ${message(e)}`);
      this.setDaemon("down", `${sentence(message(e))} Check the Totem: Command setting (totem.command).`);
      return undefined;
    }
    this.client = client;
    this.log.info(`connected to totemd ${client.server?.server.version ?? ""} on ${client.socketPath}`);
    for (const notice of client.server?.notices ?? []) {
      void showWarning(`Totem: ${notice}`);
    }
    client.onState((state) => {
      this.log.info(`connection ${state}`);
      if (this.client !== client) {
        return;
      }
      if (state === "closed") {
        for (const id of [...this.notices.keys()]) {
          this.withdraw(id);
        }
        const why = client.lastError ? ` ${sentence(client.lastError)}` : "";
        this.setDaemon("down", `It stopped and could not be started again.${why}`);
      } else {
        this.setDaemon(state === "connected" ? "up" : "reconnecting");
      }
    });
    client.onReconnected(() => {
      void showInfo("Totem: reconnected to totemd");
      void this.afterConnect(client, true);
    });
    await this.afterConnect(client, false);
    await client.subscribeDaemon((event) => this.onDaemon(event));
    this.setDaemon("up");
    // A new connection (the daemon started again from the views): the open session is followed
    // again, from its start, by a new transcript.
    const open = this.current?.id;
    this.current = undefined;
    if (open && this.sessions?.get(open)) {
      await this.openSession(open);
    }
    await this.openLatest();
    return client;
  }

  /** What is not replayed by the subscriptions: the project, its sessions, the models. */
  private async afterConnect(client: TotemClient, again: boolean): Promise<void> {
    this.project = await client.request<{ id: string; path: string }>("project.open", { path: this.root() });
    const page = await client.request<{ items: Session[] }>("session.list", { projectId: this.project.id, limit: 500 });
    this.sessions ??= new SessionsState(this.project.id);
    if (again) {
      this.questions.clear();
      for (const id of [...this.notices.keys()]) {
        this.withdraw(id);
      }
    }
    this.sessions.load(page.items);
    const models = await client
      .request<{ models: ModelInfo[]; defaultModel?: string }>("model.list", {})
      .catch(() => ({ models: [], defaultModel: undefined }));
    this.models = models.models;
    this.defaultModel = models.defaultModel;
    this.redraw();
    void this.changesTree.refresh();
  }

  private async openLatest(): Promise<void> {
    const latest = this.sessions?.sorted()[0];
    if (latest && !this.current) {
      await this.openSession(latest.id);
    }
  }

  private redraw(): void {
    this.sessionsTree.refresh();
    const n = this.sessions?.badge() ?? 0;
    this.sessionsView.badge = n > 0 ? { value: n, tooltip: n > 1 ? `${n} questions wait for you` : "1 question waits for you" } : undefined;
    this.drawStatus();
    this.draw();
  }

  private onDaemon(event: DaemonEvent): void {
    const changed = this.sessions?.apply(event) ?? false;
    switch (event.type) {
      case "permission.asked": {
        const q = event.question as Question;
        if (this.sessions?.get(q.sessionId) && !this.questions.has(q.id)) {
          this.questions.set(q.id, q);
          this.notify(q);
        }
        break;
      }
      case "permission.resolved":
        // Answered here, in another client, or withdrawn: its notification goes too.
        this.questions.delete(event.questionId as string);
        this.withdraw(event.questionId as string);
        break;
      case "session.deleted":
        if (this.current?.id === event.sessionId) {
          void this.closeSession();
        }
        break;
      case "run.ended": {
        const run = event.run as { sessionId: string; status: string; model?: string; error?: string };
        const session = this.sessions?.get(run.sessionId);
        if (!session) {
          break;
        }
        this.lastModel = run.model ?? this.lastModel;
        if (run.sessionId === this.current?.id) {
          void this.changesTree.refresh();
        }
        if (!vscode.window.state.focused && this.config.get<boolean>("notifyWhenUnfocused")) {
          const how = run.status === "failed" ? `failed: ${run.error ?? "no reason given"}` : run.status;
          void showInfo(`Totem: the run in "${session.title}" ${how}.`);
        }
        break;
      }
    }
    if (changed || event.type.startsWith("permission.") || event.type === "run.ended") {
      this.redraw();
    }
  }

  // The chat ---------------------------------------------------------------------------------

  async openChat(): Promise<void> {
    await this.connect();
    await vscode.commands.executeCommand("totem.chat.focus");
  }

  async openSession(id: string): Promise<void> {
    const client = await this.connect();
    if (!client) {
      return;
    }
    if (this.current?.id === id) {
      return;
    }
    await this.closeSession();
    const session = this.sessions?.get(id) ?? (await client.request<Session>("session.get", { sessionId: id }));
    const current: NonNullable<Totem["current"]> = { id, title: session.title, transcript: new Transcript() };
    this.current = current;
    current.sub = await client.subscribeSession(id, 0, (event) => this.onSession(current, event));
    this.redraw();
    void this.changesTree.refresh();
  }

  private async closeSession(): Promise<void> {
    const current = this.current;
    this.current = undefined;
    if (current?.sub) {
      await this.client?.unsubscribe(current.sub);
    }
    this.redraw();
    void this.changesTree.refresh();
  }

  private onSession(current: NonNullable<Totem["current"]>, event: SessionEvent): void {
    if (this.current !== current) {
      return;
    }
    current.transcript.apply(event);
    switch (event.type) {
      case "files.changed":
        this.filesChanged(event.paths as string[]);
        void this.changesTree.refresh();
        break;
      case "changes.undone":
      case "changes.redone":
        void this.changesTree.refresh();
        break;
      case "session.updated":
        current.title = (event.session as Session).title;
        break;
    }
    this.draw();
  }

  /** VS Code reloads open files that have no unsaved changes when they change on disk; one that
   * has unsaved changes is left as it is, and the person is told. */
  private filesChanged(paths: string[]): void {
    for (const p of paths) {
      const uri = this.uri(p);
      const doc = vscode.workspace.textDocuments.find((d) => d.uri.fsPath === uri.fsPath);
      if (doc?.isDirty) {
        void showWarning(
          `Totem changed ${p} on disk, but it has unsaved changes here; it was not reloaded.`,
        );
      }
    }
  }

  /** Draws the chat soon (streamed text comes in many small events). */
  private draw(): void {
    if (this.drawTimer) {
      return;
    }
    this.drawTimer = setTimeout(() => {
      this.drawTimer = undefined;
      this.chat.show(this.chatState());
    }, 30);
  }

  private chatState(): ChatState {
    const item = this.current ? this.sessions?.get(this.current.id) : undefined;
    const blocks = this.current?.transcript.blocks ?? [];
    const lastEnd = [...blocks].reverse().find((b) => b.kind === "end");
    const next = this.nextModel;
    const thinks = this.thinks(next);
    const reasoning = this.reasoning ?? "";
    const setting = this.config.get<string>("defaultMode") || "build";
    return {
      daemon: this.daemon,
      daemonError: this.daemonError,
      session: this.current ? { id: this.current.id, title: item?.title ?? this.current.title } : undefined,
      activity: item?.activity ?? "idle",
      blocks,
      open: [...this.questions.values()].filter((q) => q.sessionId === this.current?.id).map((q) => q.id),
      attachments: this.pending.map((a) => attachmentLabel(a)),
      mode: this.mode,
      modes: [...new Set(["build", "plan", setting, this.mode])],
      model: this.model ?? "",
      reasoning,
      models: this.models.map((m) => m.name),
      defaultModel: this.defaultModel ?? "",
      hint: reasoning && !thinks ? `Reasoning has no effect: ${next ?? "this model"} does not think.` : "",
      thinks,
      cannotThink: this.models.filter((m) => m.capabilities?.thinking === false).map((m) => m.name),
      retry: lastEnd?.kind === "end" && lastEnd.status === "failed" && item?.activity === "idle" ? lastEnd.runId : undefined,
    };
  }

  private async fromChat(m: { type: string; [field: string]: unknown }): Promise<void> {
    try {
      switch (m.type) {
        case "ready":
          this.draw();
          return;
        case "send":
          return await this.send(m.text as string, this.takePending(), true);
        case "retry":
          return await this.retry(m.runId as string);
        case "startDaemon":
          return await this.startDaemon();
        case "open":
          return await this.openLink(String(m.href));
        case "copy":
          await vscode.env.clipboard.writeText(String(m.text));
          return;
        case "answer":
          return await this.answer(m.id as string, m.reply as Reply);
        case "showDiff": {
          const q = this.questions.get(m.id as string);
          return q ? await this.showProposed(q) : undefined;
        }
        case "mode":
          await this.pick("mode", String(m.value || ""));
          break;
        case "model":
          await this.pick("model", String(m.value || ""));
          break;
        case "reasoning":
          await this.context.workspaceState.update("reasoning", m.value || undefined);
          break;
        case "unattach":
          this.pending.splice(m.index as number, 1);
          break;
        case "abort":
          return await this.abort();
        case "newSession":
          return await this.newSession();
      }
      this.drawStatus();
      this.draw();
    } catch (e) {
      void showError(`Totem: ${message(e)}`);
    }
  }

  private takePending(): Attachment[] {
    const taken = this.pending;
    this.pending = [];
    return taken;
  }

  async newSession(): Promise<void> {
    const client = await this.connect();
    if (!client || !this.project) {
      return;
    }
    const session = await client.request<Session>("session.create", { projectId: this.project.id });
    this.sessions?.apply({ at: Date.now(), type: "session.created", session });
    await this.openSession(session.id);
    await vscode.commands.executeCommand("totem.chat.focus");
  }

  /** Sends a prompt to the open session (a new one when none is open). The chat's box is emptied
   * once it is taken; while the daemon cannot be reached the prompt stays there. */
  async send(text: string, attachments: Attachment[], fromChat = false): Promise<void> {
    const client = await this.connect();
    const current = client ? (this.current ?? (await this.newSession(), this.current)) : undefined;
    if (!client || !current) {
      // Kept for later: the chat's banner says the daemon is not running and offers to start it.
      this.pending = [...attachments, ...this.pending];
      this.chat.restorePrompt(text);
      this.draw();
      if (!fromChat) {
        void showWarning("Totem's daemon is not running: your prompt waits in the chat's box.");
      }
      return;
    }
    try {
      await client.request("session.prompt", {
        sessionId: current.id,
        text,
        mode: this.mode,
        ...(this.model ? { model: this.model } : {}),
        ...(this.reasoning ? { reasoning: this.reasoning } : {}),
        ...(attachments.length > 0 ? { attachments } : {}),
      });
    } catch (e) {
      this.pending = [...attachments, ...this.pending];
      this.chat.restorePrompt(text);
      throw e;
    }
    this.chat.sent(text);
  }

  /** Retry beside a failed run: its prompt (and attachments) sent again. */
  private async retry(runId: string): Promise<void> {
    const prompt = this.current?.transcript.blocks.find((b) => b.kind === "user" && b.runId === runId);
    if (prompt?.kind !== "user") {
      void showInfo("Totem: that run's prompt is no longer in the chat.");
      return;
    }
    await this.send(prompt.text, prompt.sent ?? [], true);
  }

  /** A link of an answer: web pages open in the browser, a path opens the project's file (at its
   * `#L12` line). Anything else (`command:`, `file:` outside the project) is not opened. */
  private async openLink(href: string): Promise<void> {
    if (/^(https?|mailto):/i.test(href)) {
      await vscode.env.openExternal(vscode.Uri.parse(href));
      return;
    }
    if (/^[a-z][a-z0-9+.-]*:/i.test(href) || !this.project) {
      return;
    }
    const [rel, fragment] = href.split("#");
    let name = rel;
    try {
      name = decodeURIComponent(rel);
    } catch {
      // shown as written
    }
    const file = path.resolve(this.project.path, name);
    if (!file.startsWith(this.project.path + path.sep) || !fs.existsSync(file)) {
      void showInfo(`Totem: ${name} is not a file of this project.`);
      return;
    }
    const line = Number(/^L(\d+)/.exec(fragment ?? "")?.[1] ?? 0);
    const pos = new vscode.Position(Math.max(line - 1, 0), 0);
    await vscode.window.showTextDocument(vscode.Uri.file(file), { selection: new vscode.Range(pos, pos), preview: true });
  }

  private async rename(item?: SessionItem): Promise<void> {
    const id = item?.id ?? this.current?.id;
    const client = await this.connect();
    if (!id || !client) {
      return;
    }
    const title = await vscode.window.showInputBox({
      prompt: "The session's new title",
      value: item?.title ?? this.current?.title,
    });
    if (title?.trim()) {
      await client.request("session.rename", { sessionId: id, title: title.trim() });
    }
  }

  private async remove(item?: SessionItem): Promise<void> {
    const id = item?.id ?? this.current?.id;
    const client = await this.connect();
    if (!id || !client) {
      return;
    }
    const title = this.sessions?.get(id)?.title ?? id;
    const sure = await showWarning(`Delete the session "${title}"?`, { modal: true }, "Delete");
    if (sure === "Delete") {
      await client.request("session.delete", { sessionId: id });
    }
  }

  // Attachments ------------------------------------------------------------------------------

  /** The selection (or the whole file) of an editor as an attachment. */
  private attachment(editor: vscode.TextEditor, whole = false): Attachment | undefined {
    const doc = editor.document;
    if (doc.uri.scheme !== "file" && doc.uri.scheme !== "untitled") {
      void showWarning("Totem can attach files of the project only.");
      return undefined;
    }
    const rel = this.project ? path.relative(this.project.path, doc.uri.fsPath) : doc.uri.fsPath;
    const item: Attachment = { path: rel };
    const sel = editor.selection;
    if (!whole && !sel.isEmpty) {
      const last = sel.end.character === 0 && sel.end.line > sel.start.line ? sel.end.line - 1 : sel.end.line;
      item.range = { startLine: sel.start.line + 1, endLine: last + 1 };
      if (doc.isDirty) {
        item.text = doc.getText(new vscode.Range(sel.start.line, 0, last + 1, 0));
      }
    } else if (doc.isDirty) {
      item.text = doc.getText();
    }
    return item;
  }

  private async askSelection(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void showWarning("Open a file and select what to ask about.");
      return;
    }
    await this.connect();
    const item = this.attachment(editor);
    if (!item) {
      return;
    }
    const text = await vscode.window.showInputBox({
      prompt: `Ask Totem about ${attachmentLabel(item)}`,
      placeHolder: "What should Totem do with it?",
    });
    if (!text?.trim()) {
      return;
    }
    await this.send(text.trim(), [...this.takePending(), item]);
    await vscode.commands.executeCommand("totem.chat.focus");
  }

  private async addFile(uri?: vscode.Uri): Promise<void> {
    await this.connect();
    let item: Attachment | undefined;
    const editor = vscode.window.activeTextEditor;
    if (uri && (!editor || editor.document.uri.toString() !== uri.toString())) {
      const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
      item = { path: this.project ? path.relative(this.project.path, uri.fsPath) : uri.fsPath };
      if (open?.isDirty) {
        item.text = open.getText();
      }
    } else if (editor) {
      item = this.attachment(editor);
    }
    if (!item) {
      void showWarning("Open a file (or pick one in the explorer) to add it to the prompt.");
      return;
    }
    this.pending.push(item);
    this.draw();
    void showInfo(`Totem: attached ${attachmentLabel(item)} to the next prompt.`);
  }

  // Questions --------------------------------------------------------------------------------

  /** A question as a notification: one sentence and four short actions (Allow, Always…, Deny,
   * Diff). It is a progress notification, the one kind an extension can take back: it goes as
   * soon as the question is answered, here, in the chat or in another client. Its actions are
   * links, as a progress notification takes no buttons from an extension; a message with buttons
   * (showInformationMessage) cannot be taken back, hides itself after some seconds while the
   * question still waits, and would leave buttons for answered questions in the notification
   * centre (see the README, "Questions as notifications"). */
  private notify(q: Question): void {
    if (this.notices.has(q.id)) {
      return;
    }
    const title = this.sessions?.get(q.sessionId)?.title;
    const action = (label: string, what: string) =>
      `[${label}](command:totem.reply?${encodeURIComponent(JSON.stringify([q.id, what]))})`;
    const actions = [action("Allow", "once"), action("Always…", "always"), action("Deny", "deny")];
    if (q.diff) {
      actions.push(action("Diff", "diff"));
    }
    // Project and model text cannot make a link of its own ("](" is what starts one).
    const other = q.sessionId !== this.current?.id && title ? `In "${title}": ` : "";
    const said = `${other}${questionSentence(q)}`.replace(/\]\(/g, "] (");
    const text = `${displayable(said, true)} ${actions.join(" · ")}`;
    let withdraw: () => void = () => undefined;
    const gone = new Promise<void>((resolve) => (withdraw = resolve));
    this.notices.set(q.id, withdraw);
    // Reported at 0 % so that it shows no running bar: it waits for the person, nothing is working.
    void vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: text }, (progress) => {
      progress.report({ increment: 0 });
      return gone;
    });
  }

  private withdraw(id: string): void {
    this.notices.get(id)?.();
    this.notices.delete(id);
  }

  /** An action of a question's notification: "once", "always" (asks for how far), "deny" (asks
   * for a note) or "diff" (opens the proposed change; the notification stays). */
  private async reply(id: string, action: string): Promise<void> {
    const q = this.questions.get(id);
    if (!q) {
      this.withdraw(id);
      void showInfo("Totem: that question was already answered.");
      return;
    }
    if (action === "diff") {
      return await this.showProposed(q);
    }
    if (action === "always") {
      const choice = await vscode.window.showQuickPick(
        [
          { label: "For this session", value: "alwaysSession" as const },
          { label: "For this project", value: "alwaysProject" as const, description: "remembered in the project's settings" },
        ],
        { placeHolder: `Always allow: ${questionSentence(q)}` },
      );
      return choice ? await this.answer(id, { type: choice.value }) : undefined;
    }
    if (action === "deny") {
      const note = await vscode.window.showInputBox({
        prompt: "Deny. A note for the model (optional): what to do instead",
      });
      if (note === undefined) {
        return;
      }
      return await this.answer(id, note.trim() ? { type: "deny", note: note.trim() } : { type: "deny" });
    }
    return await this.answer(id, { type: "once" });
  }

  private async answer(id: string, reply: Reply): Promise<void> {
    const q = this.questions.get(id);
    const client = this.client;
    if (!q || !client) {
      void showInfo("Totem: that question was already answered.");
      return;
    }
    try {
      await client.request("permission.reply", { sessionId: q.sessionId, questionId: q.id, reply });
    } catch (e) {
      if (e instanceof TotemError && e.code === CONFLICT) {
        void showInfo("Totem: that question was already answered elsewhere.");
      } else {
        throw e;
      }
    }
    this.questions.delete(id);
    this.withdraw(id);
    this.redraw();
  }

  /** The status bar's "waiting for you": the chat, at the question. */
  private async showQuestion(): Promise<void> {
    const q = [...this.questions.values()][0];
    if (!q) {
      void showInfo("Totem: no question waits for you.");
      return;
    }
    if (this.sessions?.get(q.sessionId) && this.current?.id !== q.sessionId) {
      await this.openSession(q.sessionId);
    }
    await vscode.commands.executeCommand("totem.chat.focus");
    this.draw();
    setTimeout(() => this.chat.revealQuestion(), 100);
    this.notify(q);
  }

  /** VS Code's diff editor: the file as it is, and as the question proposes it. */
  private async showProposed(q: Question): Promise<void> {
    if (!q.diff) {
      return;
    }
    const uri = this.uri(q.target);
    const open = vscode.workspace.textDocuments.find((d) => d.uri.fsPath === uri.fsPath);
    const exists = fs.existsSync(uri.fsPath);
    const before = open ? open.getText() : exists ? fs.readFileSync(uri.fsPath, "utf8") : "";
    const after = applyForward(before, q.diff);
    const name = path.basename(q.target);
    if (after === undefined || q.truncated) {
      const doc = await vscode.workspace.openTextDocument({ content: q.diff, language: "diff" });
      await vscode.window.showTextDocument(doc, { preview: true });
      return;
    }
    const left = exists ? uri : this.texts.put(`empty-${q.id}`, name, "");
    const right = this.texts.put(`proposed-${q.id}`, name, after);
    await vscode.commands.executeCommand("vscode.diff", left, right, `${name} ↔ proposed by Totem`, { preview: true });
  }

  // Changes ----------------------------------------------------------------------------------

  private async showChange(file: ChangedFile): Promise<void> {
    const uri = this.uri(file.path);
    const name = path.basename(file.path);
    if (file.binary || file.notKept || !file.diff) {
      void showInfo(`Totem: no text diff for ${file.path} (binary or too large).`);
      return;
    }
    const now = file.status === "deleted" ? "" : fs.existsSync(uri.fsPath) ? fs.readFileSync(uri.fsPath, "utf8") : "";
    const before = file.status === "added" ? "" : applyBackward(now, file.diff);
    if (before === undefined) {
      const doc = await vscode.workspace.openTextDocument({ content: file.diff, language: "diff" });
      await vscode.window.showTextDocument(doc, { preview: true });
      return;
    }
    const left = this.texts.put(`before-${file.path}-${Date.now()}`, name, before);
    const right = file.status === "deleted" ? this.texts.put(`deleted-${file.path}`, name, "") : uri;
    await vscode.commands.executeCommand("vscode.diff", left, right, `${name} (before Totem ↔ now)`, { preview: true });
  }

  private async changes(method: "session.undo" | "session.redo"): Promise<void> {
    const client = await this.connect();
    const session = this.current?.id;
    if (!client || !session) {
      void showWarning("Totem: open a session first.");
      return;
    }
    type Result = { runId: string; files: string[]; prompt?: string };
    let result: Result;
    try {
      result = await client.request<Result>(method, { sessionId: session });
    } catch (e) {
      const files = e instanceof TotemError && e.code === CONFLICT ? (e.data as { files?: string[] })?.files : undefined;
      if (!files) {
        throw e;
      }
      const sure = await showWarning(
        `These files changed since: ${files.join(", ")}. Overwrite them?`,
        { modal: true },
        "Overwrite",
      );
      if (sure !== "Overwrite") {
        return;
      }
      result = await client.request<Result>(method, { sessionId: session, force: true });
    }
    const undo = method === "session.undo";
    const what = result.files.length > 0 ? `the changes to ${result.files.join(", ")}` : "the last run (it changed no file)";
    // The undone run's prompt goes back in the chat's box, to send again or edit; a redo takes it out.
    const back = undo && result.prompt ? "; its prompt is back in the chat's box" : "";
    if (undo && result.prompt) {
      this.undonePrompt = result.prompt;
      this.chat.restorePrompt(result.prompt);
    } else if (!undo && this.undonePrompt) {
      this.chat.unrestorePrompt(this.undonePrompt);
      this.undonePrompt = undefined;
    }
    void showInfo(`Totem: ${undo ? "Undid" : "Redid"} ${what}${back}.`);
    void this.changesTree.refresh();
  }

  private async abort(): Promise<void> {
    const client = await this.connect();
    const session = this.current?.id;
    if (!client || !session) {
      return;
    }
    const result = await client.request<{ runId?: string }>("session.abort", { sessionId: session });
    if (!result.runId) {
      void showInfo("Totem: no run is going in this session.");
    }
  }

  // Pickers ----------------------------------------------------------------------------------

  private async pickModel(): Promise<void> {
    await this.connect();
    // A model that cannot think says that the reasoning picked has no effect on it.
    const note = (name: string | undefined) =>
      this.reasoning && !this.thinks(name) ? `does not think: reasoning ${this.reasoning} has no effect` : "";
    const items = [{ label: "Default", description: [this.defaultModel ?? "", note(this.defaultModel)].filter(Boolean).join(" · "), value: "" }].concat(
      this.models.map((m) => ({ label: m.name, description: note(m.name), value: m.name })),
    );
    const choice = await vscode.window.showQuickPick(items, { placeHolder: `Model (now ${this.model ?? "the default"})` });
    if (choice) {
      await this.pick("model", choice.value);
      this.drawStatus();
      this.draw();
    }
  }

  private async pickMode(): Promise<void> {
    const choice = await vscode.window.showQuickPick(
      [
        { label: "build", description: "all tools" },
        { label: "plan", description: "reads and plans, changes nothing" },
      ],
      { placeHolder: `Mode (now ${this.mode}); an agent of settings.json can be typed in the chat` },
    );
    if (choice) {
      await this.pick("mode", choice.label);
      this.draw();
    }
  }

  private async pickReasoning(): Promise<void> {
    const model = this.nextModel;
    const none = this.thinks(model) ? "" : `no effect: ${model} does not think`;
    const choice = await vscode.window.showQuickPick(
      ["default", "off", "low", "medium", "high"].map((label) => ({ label, description: label === "default" ? "" : none })),
      { placeHolder: `Reasoning (now ${this.reasoning ?? "default"})` },
    );
    if (choice) {
      await this.context.workspaceState.update("reasoning", choice.label === "default" ? undefined : choice.label);
      this.draw();
    }
  }

  // Status bar -------------------------------------------------------------------------------

  private drawStatus(override?: string): void {
    const s = this.status;
    s.backgroundColor = undefined;
    s.command = "totem.openChat";
    const model = (this.model ?? this.lastModel ?? this.defaultModel ?? "no model").replace(/^[^/]*\//, "");
    const items = this.sessions?.sorted() ?? [];
    if (override) {
      s.text = `$(circle-slash) ${override}`;
      s.tooltip = "Totem: not connected to totemd";
    } else if (this.daemon === "starting") {
      s.text = "$(sync~spin) Totem: starting…";
      s.tooltip = "Totem: starting the daemon";
    } else if (!this.client || this.client.state === "closed") {
      s.text = "$(circle-slash) Totem: not running";
      s.tooltip = "Totem's daemon is not running; click to start it";
      s.command = "totem.startDaemon";
    } else if (this.client.state === "reconnecting") {
      s.text = "$(sync~spin) Totem: reconnecting…";
      s.tooltip = "Totem: totemd went away; connecting again";
    } else if (this.questions.size > 0 || items.some((i) => i.activity === "waiting")) {
      s.text = "$(bell-dot) Totem: waiting for you";
      s.tooltip = "A question waits for your answer; click to see it";
      s.backgroundColor = new vscode.ThemeColor("statusBarItem.warningBackground");
      s.command = "totem.showQuestion";
    } else if (items.some((i) => i.activity === "running")) {
      s.text = `$(sync~spin) Totem: ${model} · running`;
      s.tooltip = "Totem: a run is going";
    } else {
      s.text = `$(hubot) Totem: ${model}`;
      s.tooltip = "Totem: open the chat";
    }
  }
}

// Notifications show daemon, model and project text: made displayable first (see display.ts).
type Show = (text: string, ...rest: unknown[]) => Thenable<string | undefined>;
function showError(text: string, ...rest: unknown[]): Thenable<string | undefined> {
  return (vscode.window.showErrorMessage as Show)(displayable(text), ...rest);
}
function showWarning(text: string, ...rest: unknown[]): Thenable<string | undefined> {
  return (vscode.window.showWarningMessage as Show)(displayable(text), ...rest);
}
function showInfo(text: string, ...rest: unknown[]): Thenable<string | undefined> {
  return (vscode.window.showInformationMessage as Show)(displayable(text), ...rest);
}

/** A message as a sentence: capital first, full stop last. */
function sentence(text: string): string {
  const t = text.trim();
  return t.charAt(0).toUpperCase() + t.slice(1) + (/[.!?]$/.test(t) ? "" : ".");
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
