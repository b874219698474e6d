// The session's run timeline: one column per run, oldest on the left — how long it took (top
// bars), how many tokens it used (bottom bars) and, when the model has prices, what it cost — as a
// small SVG chart drawn here (a chart library would outweigh the rest of the page), with the
// same figures in a table under it. Runs come from `run.get` for the run ids the session's
// messages name, then live from the session's `run.*` events.

import { el } from "./render";
import type { Rpc } from "./rpc";

export interface Run {
  id: string;
  status: string;
  startedAt: number;
  endedAt?: number;
  model?: string;
  mode?: string;
  error?: string;
  usage?: {
    inputTokens: number;
    outputTokens: number;
    cacheReadTokens?: number;
    cacheWriteTokens?: number;
    costUsd?: number;
  };
}

/** Runs the chart shows at most (the newest). */
const SHOWN = 40;
const SVG = "http://www.w3.org/2000/svg";

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    node.setAttribute(k, String(v));
  }
  return node;
}

export function tokensOf(run: Run): number {
  const u = run.usage;
  return u ? u.inputTokens + (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0) + u.outputTokens : 0;
}

function seconds(run: Run, now: number): number {
  return Math.max(0, ((run.endedAt ?? now) - run.startedAt) / 1000);
}

function duration(s: number): string {
  return s < 60 ? `${s.toFixed(s < 10 ? 1 : 0)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

function count(n: number): string {
  return n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n);
}

function cost(run: Run): string {
  const c = run.usage?.costUsd;
  return typeof c === "number" ? `$${c.toFixed(c < 1 ? 4 : 2)}` : "—";
}

/** The timeline panel of the open session. */
export class Timeline {
  readonly panel = el("section", "runs hidden");
  private ids: string[] = [];
  private runs = new Map<string, Run>();
  private sessionId?: string;
  private timer = 0;

  constructor(private readonly rpc: () => Rpc) {}

  get shown(): boolean {
    return !this.panel.classList.contains("hidden");
  }

  reset(sessionId: string | undefined, ids: string[]): void {
    this.sessionId = sessionId;
    this.ids = [...new Set(ids)];
    this.runs.clear();
    this.hide();
  }

  /** The session's run ids once its whole history is in. */
  setIds(ids: string[]): void {
    const known = new Set(ids);
    this.ids = [...known, ...this.ids.filter((id) => !known.has(id))];
    if (this.shown) {
      void this.show();
    }
  }

  hide(): void {
    this.panel.classList.add("hidden");
    window.clearInterval(this.timer);
  }

  /** A run event of the open session (`run.started`, `run.done`, …). */
  update(run: Run): void {
    if (!this.ids.includes(run.id)) {
      this.ids.push(run.id);
    }
    this.runs.set(run.id, run);
    if (this.shown) {
      this.draw();
    }
  }

  async show(): Promise<void> {
    const id = this.sessionId;
    this.panel.classList.remove("hidden");
    const wanted = this.ids.slice(-SHOWN).filter((r) => !this.runs.has(r) || this.runs.get(r)?.endedAt === undefined);
    const got = await Promise.all(
      wanted.map((runId) =>
        this.rpc()
          .call<{ run: Run }>("run.get", { runId })
          .then((o) => o.run)
          .catch(() => undefined),
      ),
    );
    if (id !== this.sessionId) {
      return;
    }
    for (const run of got) {
      if (run) {
        this.runs.set(run.id, run);
      }
    }
    this.draw();
    // A run still going grows on the chart.
    window.clearInterval(this.timer);
    this.timer = window.setInterval(() => {
      if (this.shown && [...this.runs.values()].some((r) => r.endedAt === undefined && r.status === "running")) {
        this.draw();
      }
    }, 1000);
  }

  draw(): void {
    const now = Date.now();
    const runs = this.ids
      .slice(-SHOWN)
      .map((id) => this.runs.get(id))
      .filter((r): r is Run => r !== undefined);
    if (runs.length === 0) {
      this.panel.replaceChildren(el("div", "empty", "No runs in this session yet."));
      return;
    }
    const W = 600;
    const H = 150;
    const mid = 72;
    const slot = W / Math.max(runs.length, 10);
    const maxS = Math.max(...runs.map((r) => seconds(r, now)), 0.001);
    const maxT = Math.max(...runs.map(tokensOf), 1);
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "timeline", role: "img", preserveAspectRatio: "xMinYMin meet" });
    chart.setAttribute("aria-label", `${runs.length} runs: time above, tokens below`);
    chart.append(svg("line", { x1: 0, x2: W, y1: mid, y2: mid, class: "axis" }));
    runs.forEach((run, i) => {
      const x = i * slot + slot * 0.15;
      const w = slot * 0.7;
      const s = seconds(run, now);
      const t = tokensOf(run);
      const hs = Math.max(1, (s / maxS) * (mid - 4));
      const ht = t > 0 ? Math.max(1, (t / maxT) * (H - mid - 4)) : 0;
      const group = svg("g", { class: `run ${run.status}` });
      const title = svg("title", {});
      title.textContent = `Run ${i + 1} (${run.status}): ${duration(s)}, ${count(t)} tokens, ${cost(run)}`;
      group.append(title, svg("rect", { x, y: mid - hs, width: w, height: hs, class: "time" }));
      if (ht > 0) {
        group.append(svg("rect", { x, y: mid + 1, width: w, height: ht, class: "tokens" }));
      }
      chart.append(group);
    });
    const label = (y: number, text: string) => {
      const t = svg("text", { x: W - 4, y, class: "label", "text-anchor": "end" });
      t.textContent = text;
      return t;
    };
    chart.append(label(12, `time, longest ${duration(maxS)}`), label(H - 4, `tokens, most ${count(maxT)}`));

    const table = el("table", "run-table");
    const head = el("tr");
    for (const h of ["#", "started", "time", "tokens in / out", "cost", "how"]) {
      head.append(el("th", undefined, h));
    }
    table.append(head);
    const first = this.ids.length - runs.length;
    [...runs].reverse().forEach((run, j) => {
      const row = el("tr", `run-row ${run.status}`);
      const u = run.usage;
      const input = u ? u.inputTokens + (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0) : 0;
      row.append(
        el("td", undefined, String(first + runs.length - j)),
        el("td", undefined, new Date(run.startedAt).toLocaleTimeString()),
        el("td", undefined, duration(seconds(run, now))),
        el("td", undefined, u ? `${count(input)} / ${count(u.outputTokens)}` : "—"),
        el("td", undefined, cost(run)),
        el("td", undefined, run.error ? `${run.status}: ${run.error}` : run.status),
      );
      table.append(row);
    });
    const total = runs.reduce((sum, r) => sum + (r.usage?.costUsd ?? 0), 0);
    const totalTokens = runs.reduce((sum, r) => sum + tokensOf(r), 0);
    const summary = el(
      "div",
      "run-summary",
      `${runs.length} run${runs.length === 1 ? "" : "s"}${this.ids.length > runs.length ? ` (the newest ${runs.length} of ${this.ids.length})` : ""}: ${count(totalTokens)} tokens${total > 0 ? `, $${total.toFixed(total < 1 ? 4 : 2)}` : ""}`,
    );
    const scroll = el("div", "run-scroll");
    scroll.append(table);
    this.panel.replaceChildren(summary, chart, scroll);
  }
}
