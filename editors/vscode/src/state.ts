// What the extension's views show, built from totemd's events with no `vscode` import (tested
// under Node): the project's sessions with their status and a badge for the questions waiting,
// and a session's chat as blocks — prompts with their attachments, answers streaming, reasoning
// folded, tool calls as one line each, questions open or answered, how each run ended.

import type { DaemonEvent, SessionEvent } from "./client.js";

export type Activity = "idle" | "running" | "waiting";

/** A session as `session.list` and the daemon's events describe it. */
export interface Session {
  id: string;
  projectId: string;
  title: string;
  updatedAt: number;
  messageCount?: number;
}

export interface SessionItem extends Session {
  activity: Activity;
  /** Ids of the permission questions that wait for a person. */
  questions: string[];
}

/** The sessions of one project, kept current by `daemon.subscribe`. */
export class SessionsState {
  private items = new Map<string, SessionItem>();
  private projectOf = new Map<string, string>();

  constructor(readonly projectId: string) {}

  /** Takes the page `session.list` returned (after connecting, and again after a reconnection). */
  load(sessions: Session[]): void {
    const before = this.items;
    this.items = new Map();
    for (const s of sessions) {
      this.put(s, before.get(s.id));
    }
  }

  /** Applies one daemon event; true when the view should be drawn again. */
  apply(event: DaemonEvent): boolean {
    switch (event.type) {
      case "session.created":
      case "session.updated": {
        const session = event.session as Session;
        this.projectOf.set(session.id, session.projectId);
        if (session.projectId !== this.projectId) {
          return false;
        }
        this.put(session, this.items.get(session.id));
        return true;
      }
      case "session.deleted":
        return this.items.delete(event.sessionId as string);
      case "session.status": {
        const item = this.items.get(event.sessionId as string);
        if (!item) {
          return false;
        }
        item.activity = event.status as Activity;
        return true;
      }
      case "permission.asked": {
        const question = event.question as { id: string; sessionId: string };
        const item = this.items.get(question.sessionId);
        if (!item || item.questions.includes(question.id)) {
          return false;
        }
        item.questions.push(question.id);
        return true;
      }
      case "permission.resolved": {
        const item = this.items.get(event.sessionId as string);
        if (!item) {
          return false;
        }
        const before = item.questions.length;
        item.questions = item.questions.filter((id) => id !== event.questionId);
        return item.questions.length !== before;
      }
      default:
        return false;
    }
  }

  /** Newest activity first. */
  sorted(): SessionItem[] {
    return [...this.items.values()].sort((a, b) => b.updatedAt - a.updatedAt);
  }

  get(id: string): SessionItem | undefined {
    return this.items.get(id);
  }

  /** How many questions wait for a person, across the project's sessions (the view's badge). */
  badge(): number {
    let n = 0;
    for (const item of this.items.values()) {
      n += item.questions.length;
    }
    return n;
  }

  private put(session: Session, before: SessionItem | undefined): void {
    this.items.set(session.id, {
      ...session,
      activity: before?.activity ?? "idle",
      questions: before?.questions ?? [],
    });
  }
}

/** A block of the chat; `runId` is the run it belongs to, `undone` set while `session.undo` has
 * taken that run back (the chat dims it). */
export type Block = BlockBody & { runId?: string; undone?: boolean };

type BlockBody =
  | { kind: "user"; text: string; attachments: string[]; sent?: { path: string; range?: { startLine: number; endLine: number } }[] }
  | { kind: "text"; text: string; streaming: boolean }
  | { kind: "reasoning"; text: string; streaming: boolean; folded: boolean }
  | { kind: "tool"; callId: string; line: string; result?: string; error?: boolean }
  | { kind: "question"; id: string; line: string; diff?: string; truncated?: boolean; answer?: string }
  | { kind: "notice"; text: string }
  | { kind: "changes"; verb: "undid" | "redid"; runId: string; files: string[] }
  | { kind: "end"; status: string; error?: string };

type Part =
  | { type: "text"; text: string }
  | { type: "reasoning"; text: string }
  | { type: "toolCall"; callId: string; tool: string; input: Record<string, unknown> }
  | { type: "toolResult"; callId: string; tool: string; output: string; isError: boolean }
  | { type: "attachment"; path: string; range?: { startLine: number; endLine: number }; unsaved?: boolean };

/** The one line a tool call is shown as: its name and its most telling argument. */
export function toolLine(tool: string, input: Record<string, unknown>): string {
  for (const key of ["path", "command", "pattern", "url", "query"]) {
    const value = input[key];
    if (typeof value === "string" && value !== "") {
      return `${tool} ${value.split("\n")[0]}`;
    }
  }
  return tool;
}

/** A permission question as one plain sentence (no rule trace, no markup): what Totem wants to do. */
export function questionSentence(q: { tool: string; kind: string; target: string; diff?: string }): string {
  const target = q.target.split("\n")[0] + (q.target.includes("\n") ? " …" : "");
  switch (q.kind) {
    case "read":
      return `Totem wants to read ${target}.`;
    case "write":
      return q.diff && /^--- \/dev\/null/m.test(q.diff) ? `Totem wants to create ${target}.` : `Totem wants to change ${target}.`;
    case "execute":
      return `Totem wants to run ${target}`;
    case "mcp":
      return `Totem wants to use the MCP tool ${q.tool} (${target}).`;
    case "mcpServer":
      return `Totem wants to start the MCP server ${target}.`;
    default:
      return `Totem wants to use ${q.tool} on ${target}.`;
  }
}

/** How an attachment is named under its prompt. */
export function attachmentLabel(part: { path: string; range?: { startLine: number; endLine: number }; unsaved?: boolean }): string {
  const lines = part.range ? ` (lines ${part.range.startLine}–${part.range.endLine})` : "";
  return `${part.path}${lines}${part.unsaved ? ", unsaved" : ""}`;
}

/** A session's chat, built event by event (the replay from `afterSeq` 0, then live ones). */
export class Transcript {
  readonly blocks: Block[] = [];
  private streaming = new Map<string, number>();
  private tools = new Map<string, number>();
  private questions = new Map<string, number>();
  /** The run of each message seen (parts name their message, not their run). */
  private runs = new Map<string, string>();
  /** The run going (started, not ended). */
  private going: string | undefined;

  apply(event: SessionEvent): void {
    switch (event.type) {
      case "run.queued": {
        // Behind the run going: its prompt is drawn when it starts, after that run's answer.
        if (this.going !== undefined) {
          const message = event.message as { parts: Part[] };
          const text = message.parts.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("\n");
          const run = event.run as { id: string };
          this.blocks.push({ kind: "notice", text: `queued: ${text.split("\n")[0]}`, runId: run.id });
        }
        return;
      }
      case "run.started":
        this.going = (event.run as { id: string }).id;
        return;
      case "message.created": {
        const message = event.message as { id: string; role: string; runId?: string; parts: Part[] };
        if (message.runId) {
          this.runs.set(message.id, message.runId);
        }
        if (message.role !== "user") {
          return;
        }
        const text = message.parts.flatMap((p) => (p.type === "text" ? [p.text] : [])).join("\n");
        const attachments = message.parts.flatMap((p) => (p.type === "attachment" ? [attachmentLabel(p)] : []));
        const sent = message.parts.flatMap((p) => (p.type === "attachment" ? [{ path: p.path, ...(p.range ? { range: p.range } : {}) }] : []));
        this.blocks.push({ kind: "user", text, attachments, sent, runId: message.runId });
        return;
      }
      case "part.started": {
        const kind = event.partType === "reasoning" ? "reasoning" : event.partType === "text" ? "text" : undefined;
        if (kind) {
          this.streamed(event, kind);
        }
        return;
      }
      case "part.delta": {
        const block = this.blocks[this.streamed(event, "text")];
        if (block.kind === "text" || block.kind === "reasoning") {
          block.text += event.text as string;
        }
        return;
      }
      case "part.done":
        return this.partDone(event, event.part as Part);
      case "permission.asked": {
        const q = event.question as {
          id: string;
          runId?: string;
          tool: string;
          kind: string;
          target: string;
          diff?: string;
          truncated?: boolean;
        };
        this.questions.set(q.id, this.blocks.length);
        this.blocks.push({
          kind: "question",
          id: q.id,
          line: questionSentence(q),
          diff: q.diff,
          truncated: q.truncated,
          runId: q.runId,
        });
        return;
      }
      case "permission.resolved": {
        const block = this.blocks[this.questions.get(event.questionId as string) ?? -1];
        if (block?.kind === "question") {
          const reply = event.reply as { type: string } | undefined;
          block.answer = reply?.type ?? (event.reason as string | undefined) ?? "withdrawn";
        }
        return;
      }
      case "notice":
        this.blocks.push({ kind: "notice", text: event.text as string });
        return;
      case "changes.undone":
      case "changes.redone":
        for (const block of this.blocks) {
          if (block.kind !== "changes" && block.runId !== undefined && block.runId === event.runId) {
            block.undone = event.type === "changes.undone";
          }
        }
        this.blocks.push({
          kind: "changes",
          verb: event.type === "changes.undone" ? "undid" : "redid",
          runId: event.runId as string,
          files: event.files as string[],
        });
        return;
      case "run.done":
      case "run.failed":
      case "run.aborted":
      case "run.interrupted": {
        const run = event.run as { id: string; status: string; error?: string };
        if (this.going === run.id) {
          this.going = undefined;
        }
        this.endStreams();
        this.blocks.push({ kind: "end", status: run.status, error: run.error, runId: run.id });
        return;
      }
      default:
        return;
    }
  }

  /** The block of a streaming part, made when its start was missed. */
  private streamed(event: SessionEvent, kind: "text" | "reasoning"): number {
    const key = `${event.messageId as string}:${event.index as number}`;
    const known = this.streaming.get(key);
    if (known !== undefined) {
      return known;
    }
    const runId = this.runOf(event);
    this.blocks.push(
      kind === "text"
        ? { kind, text: "", streaming: true, runId }
        : { kind, text: "", streaming: true, folded: true, runId },
    );
    this.streaming.set(key, this.blocks.length - 1);
    return this.blocks.length - 1;
  }

  private partDone(event: SessionEvent, part: Part): void {
    switch (part.type) {
      case "text":
      case "reasoning": {
        const block = this.blocks[this.streamed(event, part.type)];
        if (block.kind === "text" || block.kind === "reasoning") {
          block.text = part.text;
          block.streaming = false;
        }
        this.streaming.delete(`${event.messageId as string}:${event.index as number}`);
        return;
      }
      case "toolCall":
        this.tools.set(part.callId, this.blocks.length);
        this.blocks.push({
          kind: "tool",
          callId: part.callId,
          line: toolLine(part.tool, part.input),
          runId: this.runOf(event),
        });
        return;
      case "toolResult": {
        const block = this.blocks[this.tools.get(part.callId) ?? -1];
        if (block?.kind === "tool") {
          block.result = part.output.split("\n")[0];
          block.error = part.isError;
        }
        return;
      }
      default:
        return;
    }
  }

  /** The run of a part's event: named in it, else that of its message. */
  private runOf(event: SessionEvent): string | undefined {
    return (event.runId as string | undefined) ?? this.runs.get(event.messageId as string);
  }

  private endStreams(): void {
    for (const i of this.streaming.values()) {
      const block = this.blocks[i];
      if (block.kind === "text" || block.kind === "reasoning") {
        block.streaming = false;
      }
    }
    this.streaming.clear();
  }
}
