// The session's terminals, live in xterm.js: the programs the model started with its `terminal`
// tool (and any a client opened), each drawn from the daemon's own screen (`terminal.subscribe`:
// a `redraw` first, then raw output). Watching is read-only; "Take over" lets the person type
// into it (`terminal.write`, as the REPL's `/terminal N` does) until "Give back". What anyone
// else types shows here too, since every watcher sees the same output.

import { Terminal } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";

import { displayable, el } from "./render";
import type { Event, Rpc } from "./rpc";

export interface TerminalInfo {
  id: string;
  sessionId: string;
  name: string;
  command: string;
  cols: number;
  rows: number;
  running: boolean;
  ended?: string;
  openedBy: string;
  shared: boolean;
}

/** xterm.js writes its own `<style>` elements; the page's Content-Security-Policy admits a
 * `<style>` only with the nonce totemd put in the page (a `<meta>` the server fills in). */
export function admitXtermStyles(): void {
  const nonce = document.querySelector<HTMLMetaElement>('meta[name="totem-style-nonce"]')?.content;
  if (!nonce) {
    return;
  }
  const create = document.createElement.bind(document);
  document.createElement = ((tag: string, options?: ElementCreationOptions) => {
    const made = create(tag, options);
    if (tag.toLowerCase() === "style") {
      made.setAttribute("nonce", nonce);
    }
    return made;
  }) as typeof document.createElement;
}

/** One terminal on screen: its xterm, its subscription, and whether this page types into it. */
class View {
  readonly box = el("div", "term-view");
  readonly term: Terminal;
  sub?: string;
  typing = false;
  private queue = "";
  private sending = false;

  constructor(
    private readonly rpc: Rpc,
    readonly info: TerminalInfo,
  ) {
    this.term = new Terminal({
      cols: info.cols,
      rows: info.rows,
      disableStdin: true,
      scrollback: 1000,
      fontSize: 13,
      fontFamily: 'ui-monospace, "SF Mono", Menlo, Consolas, monospace',
      cursorBlink: false,
    });
    this.term.onData((data) => {
      if (this.typing) {
        this.queue += data;
        void this.flush();
      }
    });
  }

  /** Typed keys go one write at a time: the daemon answers `conflict` to a write sent before
   * the program read the one before it, so what piles up meanwhile goes in the next write. */
  private async flush(): Promise<void> {
    if (this.sending || !this.queue) {
      return;
    }
    this.sending = true;
    try {
      let tries = 0;
      while (this.queue) {
        const data = this.queue;
        this.queue = "";
        try {
          await this.rpc.call("terminal.write", { id: this.info.id, data });
        } catch (e) {
          // The program had not read the last keys yet: try again a moment later.
          if ((e as { code?: number }).code === -32009 && this.info.running && ++tries < 50) {
            this.queue = data + this.queue;
            await new Promise((r) => setTimeout(r, 100));
            continue;
          }
          throw e;
        }
      }
    } finally {
      this.sending = false;
    }
  }

  onEvent(e: Event): void {
    switch (e.type) {
      case "output":
        this.term.write(String(e.data ?? ""));
        break;
      case "redraw":
        this.term.reset();
        this.term.resize(Number(e.cols) || this.info.cols, Number(e.rows) || this.info.rows);
        this.term.write(String(e.data ?? ""));
        break;
      case "resized":
        this.term.resize(Number(e.cols) || this.info.cols, Number(e.rows) || this.info.rows);
        break;
      case "exited":
        this.info.running = false;
        this.info.ended = String(e.how ?? "ended");
        break;
      case "closed":
        this.info.running = false;
        this.info.ended = `closed (${String(e.reason ?? "closed")})`;
        break;
    }
  }
}

/** The terminals panel of the open session. */
export class Terminals {
  readonly panel = el("section", "terminals hidden");
  private readonly tabs = el("div", "term-tabs");
  private readonly state = el("div", "term-state");
  private readonly takeButton = el("button", "take-over", "Take over");
  private readonly stage = el("div", "term-stage");
  private sessionId?: string;
  private list: TerminalInfo[] = [];
  private current?: View;
  /** Told how many terminals the session has (the toolbar's count). */
  onCount: (n: number) => void = () => {};
  onError: (e: unknown) => void = () => {};

  constructor(private readonly rpc: () => Rpc) {
    const bar = el("div", "term-bar");
    bar.append(this.tabs, this.state, this.takeButton);
    this.panel.append(bar, this.stage);
    this.takeButton.onclick = () => this.toggleTyping();
  }

  get shown(): boolean {
    return !this.panel.classList.contains("hidden");
  }

  /** Another session opened (or none): drop the view of the last one. */
  reset(sessionId: string | undefined): void {
    this.close();
    this.sessionId = sessionId;
    this.list = [];
    this.onCount(0);
    this.panel.classList.add("hidden");
    if (sessionId) {
      void this.refresh().catch(() => undefined);
    }
  }

  hide(): void {
    this.panel.classList.add("hidden");
  }

  async show(): Promise<void> {
    this.panel.classList.remove("hidden");
    await this.refresh();
  }

  /** Lists the session's terminals again (a `terminal` tool call may have started one). */
  async refresh(): Promise<void> {
    const id = this.sessionId;
    if (!id) {
      return;
    }
    const answer = await this.rpc().call<{ terminals: TerminalInfo[] }>("terminal.list", { sessionId: id });
    if (id !== this.sessionId) {
      return;
    }
    this.list = answer.terminals;
    this.onCount(this.list.length);
    this.drawTabs();
    if (this.shown) {
      const keep = this.current && this.list.find((t) => t.id === this.current?.info.id);
      if (!keep && this.list.length > 0) {
        await this.watch(this.list[this.list.length - 1]);
      } else if (!keep) {
        this.close();
        this.stage.replaceChildren(el("div", "empty", "No terminals in this session. The model starts them with its terminal tool."));
      }
    }
    this.drawState();
  }

  private drawTabs(): void {
    this.tabs.replaceChildren(
      ...this.list.map((t) => {
        const tab = el("button", `term-tab${t.id === this.current?.info.id ? " current" : ""}`, t.name);
        tab.title = displayable(t.command);
        tab.onclick = () => void this.watch(t).catch(this.onError);
        return tab;
      }),
    );
  }

  private drawState(): void {
    const view = this.current;
    this.takeButton.classList.toggle("hidden", !view);
    if (!view) {
      this.state.textContent = "";
      return;
    }
    const how = view.info.running ? "running" : (view.info.ended ?? "ended");
    this.state.textContent = `${displayable(view.info.command)} · ${how}${view.typing ? " · you are typing" : " · watching"}`;
    this.takeButton.textContent = view.typing ? "Give back" : "Take over";
    this.takeButton.disabled = !view.info.running && !view.typing;
  }

  private async watch(info: TerminalInfo): Promise<void> {
    if (this.current?.info.id === info.id) {
      return;
    }
    this.close();
    const view = new View(this.rpc(), { ...info });
    this.current = view;
    this.stage.replaceChildren(view.box);
    view.term.open(view.box);
    view.sub = await this.rpc().subscribe("terminal.subscribe", { id: info.id }, (e) => {
      view.onEvent(e);
      if (e.type === "exited" || e.type === "closed") {
        if (view.typing) {
          this.setTyping(view, false);
        }
        this.drawState();
      }
    });
    if (this.current !== view) {
      void this.rpc().unsubscribe("terminal.unsubscribe", view.sub);
      return;
    }
    this.drawTabs();
    this.drawState();
  }

  private close(): void {
    const view = this.current;
    this.current = undefined;
    if (!view) {
      return;
    }
    if (view.sub) {
      void this.rpc().unsubscribe("terminal.unsubscribe", view.sub);
    }
    view.term.dispose();
    view.box.remove();
  }

  private toggleTyping(): void {
    const view = this.current;
    if (view) {
      this.setTyping(view, !view.typing);
      this.drawState();
    }
  }

  private setTyping(view: View, on: boolean): void {
    view.typing = on;
    view.term.options.disableStdin = !on;
    view.box.classList.toggle("typing", on);
    if (on) {
      view.term.focus();
    } else {
      view.term.blur();
    }
  }
}
