// The VS Code extension's connection to totemd (protocol version 1, NDJSON JSON-RPC over the Unix
// socket). Node's `net` and `child_process` only, no `vscode` import, so that it runs (and is
// tested) outside VS Code. It finds the socket as `totem` does, starts the daemon with
// `totem daemon start` when none answers, and when the daemon goes away it connects again and
// resubscribes: a session's events from the last `seq` it delivered, so none is lost or repeated.

import { spawn } from "node:child_process";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

export const PROTOCOL_VERSION = 1;

/** The socket: `configured`, else `$TOTEM_HOME/run/totemd.sock`, else
 * `$XDG_RUNTIME_DIR/totem/totemd.sock`, else `~/.totem/run/totemd.sock`. */
export function socketPath(configured?: string, env: NodeJS.ProcessEnv = process.env): string {
  if (configured) {
    return configured.startsWith("~/") ? path.join(os.homedir(), configured.slice(2)) : configured;
  }
  if (env.TOTEM_HOME) {
    return path.join(env.TOTEM_HOME, "run", "totemd.sock");
  }
  if (env.XDG_RUNTIME_DIR) {
    return path.join(env.XDG_RUNTIME_DIR, "totem", "totemd.sock");
  }
  return path.join(env.HOME ?? os.homedir(), ".totem", "run", "totemd.sock");
}

/** An error totemd answered with (or -1: the connection failed). */
export class TotemError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export interface ClientOptions {
  /** totemd's socket; default: [socketPath]. */
  socket?: string;
  /** The `totem` command, run as `totem daemon start` when no daemon answers; a function is asked
   * each time the daemon is started (a changed setting is used without a reload). */
  totem?: string | (() => string);
  /** Start the daemon when none answers (default true). */
  startDaemon?: boolean;
  client?: { name: string; version: string };
  /** Receives every line sent and received (the output channel at `debug`). */
  log?: (line: string) => void;
  /** How long to keep trying to connect again after the daemon went away (default 10 s). */
  reconnectMs?: number;
}

export type ConnectionState = "connected" | "reconnecting" | "closed";

/** A session event as totemd sends it (`protocol/README.md`, Session events). */
export interface SessionEvent {
  sessionId: string;
  seq: number;
  at: number;
  type: string;
  [field: string]: unknown;
}

/** A daemon event (`daemon.subscribe`). */
export interface DaemonEvent {
  at: number;
  type: string;
  [field: string]: unknown;
}

type Pending = { resolve: (value: unknown) => void; reject: (error: TotemError) => void };

/** A subscription that outlives reconnections. */
export class Subscription<E> {
  /** The id on the current connection. */
  id: string | undefined;
  ended = false;

  constructor(
    readonly method: "session.subscribe" | "daemon.subscribe",
    readonly params: () => Record<string, unknown>,
    readonly handler: (event: E) => void,
  ) {}
}

const DISCONNECTED = -1;
/** The daemon could not be started (the `totem` command is missing or failed). */
export const CANNOT_START = -2;

export class TotemClient {
  private socket: net.Socket | undefined;
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private handlers = new Map<string, (event: unknown) => void>();
  private early = new Map<string, unknown[]>();
  private partial = "";
  private subscriptions = new Set<Subscription<never>>();
  private listeners = new Set<(state: ConnectionState) => void>();
  private reconnected = new Set<() => void>();
  private closing = false;
  /** The answer to `initialize` on the current connection. */
  server: { protocolVersion: number; server: { name: string; version: string }; capabilities: { methods: string[] }; notices?: string[] } | undefined;
  state: ConnectionState = "closed";
  /** Why the last reconnection gave up. */
  lastError: string | undefined;

  private constructor(private readonly options: ClientOptions) {}

  /** Connects (starting the daemon when none answers) and says `initialize`. */
  static async connect(options: ClientOptions = {}): Promise<TotemClient> {
    const client = new TotemClient(options);
    await client.open(options.startDaemon ?? true);
    return client;
  }

  get socketPath(): string {
    return socketPath(this.options.socket);
  }

  /** Called with every change of the connection's state. */
  onState(listener: (state: ConnectionState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Called after a reconnection, once `initialize` is answered and every subscription follows
   * again: the moment to reload what is not replayed (session lists, open questions). */
  onReconnected(listener: () => void): () => void {
    this.reconnected.add(listener);
    return () => this.reconnected.delete(listener);
  }

  /** One JSON-RPC call; rejects with a [TotemError]. */
  request<T = unknown>(method: string, params: object = {}): Promise<T> {
    const socket = this.socket;
    if (!socket || this.state !== "connected") {
      return Promise.reject(new TotemError(DISCONNECTED, "not connected to totemd"));
    }
    const id = this.nextId++;
    const line = JSON.stringify({ jsonrpc: "2.0", id, method, params });
    this.options.log?.(`→ ${line}`);
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      socket.write(line + "\n");
    });
  }

  /** Follows a session from `afterSeq` (0: its whole history); after a reconnection it goes on
   * from the last event delivered. A `lagged` event is handled here the same way. */
  async subscribeSession(
    sessionId: string,
    afterSeq: number,
    handler: (event: SessionEvent) => void,
  ): Promise<Subscription<SessionEvent>> {
    let last = afterSeq;
    const sub: Subscription<SessionEvent> = new Subscription(
      "session.subscribe",
      () => ({ sessionId, afterSeq: last }),
      (event: SessionEvent) => {
        if (event.type === "lagged") {
          void this.resubscribe(sub as Subscription<never>);
          return;
        }
        if (typeof event.seq === "number") {
          if (event.seq <= last) {
            return;
          }
          last = Math.max(last, event.seq);
        }
        handler(event);
      },
    );
    await this.start(sub as Subscription<never>);
    return sub;
  }

  /** Events across sessions (created, renamed, deleted, status, questions, runs ended). */
  async subscribeDaemon(handler: (event: DaemonEvent) => void): Promise<Subscription<DaemonEvent>> {
    const sub: Subscription<DaemonEvent> = new Subscription("daemon.subscribe", () => ({}), (event) => {
      if (event.type === "lagged") {
        void this.resubscribe(sub as Subscription<never>);
        return;
      }
      handler(event);
    });
    await this.start(sub as Subscription<never>);
    return sub;
  }

  async unsubscribe<E>(sub: Subscription<E>): Promise<void> {
    sub.ended = true;
    this.subscriptions.delete(sub as Subscription<never>);
    if (sub.id) {
      this.handlers.delete(sub.id);
      const method = sub.method === "session.subscribe" ? "session.unsubscribe" : "daemon.unsubscribe";
      await this.request(method, { subscription: sub.id }).catch(() => undefined);
    }
  }

  /** Closes the connection for good. */
  close(): void {
    this.closing = true;
    this.socket?.destroy();
    this.setState("closed");
  }

  private setState(state: ConnectionState): void {
    if (this.state !== state) {
      this.state = state;
      for (const listener of this.listeners) {
        listener(state);
      }
    }
  }

  private async start(sub: Subscription<never>): Promise<void> {
    this.subscriptions.add(sub);
    await this.attach(sub);
  }

  private async attach(sub: Subscription<never>): Promise<void> {
    const id = String(await this.request(sub.method, sub.params()));
    sub.id = id;
    const handler = sub.handler as (event: unknown) => void;
    this.handlers.set(id, handler);
    for (const event of this.early.get(id) ?? []) {
      handler(event);
    }
    this.early.delete(id);
  }

  private async resubscribe(sub: Subscription<never>): Promise<void> {
    if (sub.id) {
      this.handlers.delete(sub.id);
    }
    if (!sub.ended && this.state === "connected") {
      await this.attach(sub).catch((e: unknown) => this.options.log?.(`cannot follow again: ${String(e)}`));
    }
  }

  private async open(startDaemon: boolean): Promise<void> {
    let socket: net.Socket;
    try {
      socket = await dial(this.socketPath);
    } catch (first) {
      if (!startDaemon) {
        throw new TotemError(DISCONNECTED, `totemd does not answer on ${this.socketPath}: ${String(first)}`);
      }
      await this.startDaemon();
      socket = await dial(this.socketPath);
    }
    this.socket = socket;
    this.partial = "";
    socket.setEncoding("utf8");
    socket.on("data", (data: string) => this.feed(data));
    socket.on("close", () => this.lost(socket));
    socket.on("error", () => undefined);
    this.setState("connected");
    this.server = await this.request("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      client: this.options.client ?? { name: "totem-vscode", version: "0.1.0" },
      capabilities: { permissions: true },
    });
  }

  private startDaemon(): Promise<void> {
    const option = this.options.totem ?? "totem";
    const totem = typeof option === "function" ? option() : option;
    return new Promise((resolve, reject) => {
      const child = spawn(totem, ["daemon", "start"], { stdio: ["ignore", "ignore", "pipe"] });
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      child.on("error", (e) => reject(new TotemError(CANNOT_START, `cannot run ${totem}: ${e.message}`)));
      child.on("exit", (code) =>
        code === 0
          ? resolve()
          : reject(new TotemError(CANNOT_START, `${totem} daemon start failed: ${stderr.trim()}`)),
      );
    });
  }

  private feed(data: string): void {
    const text = this.partial + data;
    const lines = text.split("\n");
    this.partial = lines.pop() ?? "";
    for (const line of lines) {
      if (line !== "") {
        this.line(line);
      }
    }
  }

  private line(line: string): void {
    this.options.log?.(`← ${line}`);
    let msg: { id?: number; method?: string; params?: { subscription?: unknown; result?: unknown }; result?: unknown; error?: { code: number; message: string; data?: unknown } };
    try {
      msg = JSON.parse(line);
    } catch {
      return;
    }
    if (msg.method) {
      const sub = msg.params?.subscription;
      if (sub === undefined) {
        return;
      }
      const id = String(sub);
      const handler = this.handlers.get(id);
      if (handler) {
        handler(msg.params?.result);
      } else {
        this.early.set(id, [...(this.early.get(id) ?? []), msg.params?.result]);
      }
      return;
    }
    const pending = msg.id === undefined ? undefined : this.pending.get(msg.id);
    if (!pending || msg.id === undefined) {
      return;
    }
    this.pending.delete(msg.id);
    if (msg.error) {
      pending.reject(new TotemError(msg.error.code, msg.error.message, msg.error.data));
    } else {
      pending.resolve(msg.result);
    }
  }

  /** The connection closed: fail what waits, then connect again and follow everything again. */
  private lost(socket: net.Socket): void {
    if (this.socket !== socket) {
      return;
    }
    this.socket = undefined;
    const pending = this.pending;
    this.pending = new Map();
    for (const p of pending.values()) {
      p.reject(new TotemError(DISCONNECTED, "the connection to totemd closed"));
    }
    this.handlers.clear();
    this.early.clear();
    if (this.closing) {
      this.setState("closed");
      return;
    }
    this.setState("reconnecting");
    void this.reconnect();
  }

  private async reconnect(): Promise<void> {
    const deadline = Date.now() + (this.options.reconnectMs ?? 10_000);
    let tries = 0;
    while (!this.closing) {
      try {
        // Give a restarting daemon a moment before starting one ourselves.
        await this.open((this.options.startDaemon ?? true) && tries >= 3);
        for (const sub of this.subscriptions) {
          await this.attach(sub);
        }
        for (const listener of this.reconnected) {
          listener();
        }
        return;
      } catch (e) {
        this.socket?.destroy();
        this.socket = undefined;
        // A daemon that cannot be started will not come by waiting: say so at once.
        if (Date.now() > deadline || (e instanceof TotemError && e.code === CANNOT_START)) {
          this.lastError = e instanceof Error ? e.message : String(e);
          this.options.log?.(`gave up connecting again: ${String(e)}`);
          this.setState("closed");
          return;
        }
        this.setState("reconnecting");
        tries += 1;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }
}

function dial(socketPath: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    socket.once("connect", () => {
      socket.removeAllListeners("error");
      resolve(socket);
    });
    socket.once("error", (e) => reject(e));
  });
}
