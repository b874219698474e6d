// The page's connection to totemd: JSON-RPC 2.0 over the WebSocket at /rpc, which totemd relays
// to a socket connection of its own, so the methods, events and errors are the protocol's own
// (protocol/README.md). On a drop it connects again and the app resubscribes.

export const PROTOCOL_VERSION = 1;

export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

type Pending = { resolve: (v: unknown) => void; reject: (e: RpcError) => void };

export interface Event {
  type: string;
  seq?: number;
  at: number;
  sessionId?: string;
  [field: string]: unknown;
}

export class Rpc {
  private ws: WebSocket | undefined;
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private handlers = new Map<string, (e: Event) => void>();
  private early = new Map<string, Event[]>();
  onState: (state: "open" | "closed") => void = () => {};

  constructor(private readonly url: string) {}

  async open(): Promise<void> {
    const ws = new WebSocket(this.url);
    this.ws = ws;
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new RpcError(-1, "cannot reach totemd"));
    });
    ws.onmessage = (m) => this.receive(String(m.data));
    ws.onclose = () => {
      for (const p of this.pending.values()) {
        p.reject(new RpcError(-1, "the connection to totemd closed"));
      }
      this.pending.clear();
      this.handlers.clear();
      this.onState("closed");
    };
    await this.call("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      client: { name: "totem-web", version: "0.1.0" },
      capabilities: { permissions: true },
    });
    this.onState("open");
  }

  call<T = any>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new RpcError(-1, "not connected to totemd"));
    }
    const id = this.nextId++;
    ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
    });
  }

  /** Subscribes (`session.subscribe`, `daemon.subscribe`); events go to `handler`. */
  async subscribe(method: string, params: Record<string, unknown>, handler: (e: Event) => void): Promise<string> {
    const id = await this.call<string>(method, params);
    this.handlers.set(id, handler);
    for (const e of this.early.get(id) ?? []) {
      handler(e);
    }
    this.early.delete(id);
    return id;
  }

  async unsubscribe(method: string, id: string): Promise<void> {
    this.handlers.delete(id);
    await this.call(method, { subscription: id }).catch(() => undefined);
  }

  private receive(text: string): void {
    let msg: any;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof msg.id === "number" && this.pending.has(msg.id)) {
      const p = this.pending.get(msg.id)!;
      this.pending.delete(msg.id);
      if (msg.error) {
        p.reject(new RpcError(msg.error.code, msg.error.message, msg.error.data));
      } else {
        p.resolve(msg.result);
      }
      return;
    }
    if (msg.method && msg.params && typeof msg.params.subscription === "string") {
      const sub = msg.params.subscription as string;
      const event = msg.params.result as Event;
      const handler = this.handlers.get(sub);
      if (handler) {
        handler(event);
      } else {
        // Events can arrive before the subscribe call's answer has been read.
        const list = this.early.get(sub) ?? [];
        list.push(event);
        this.early.set(sub, list);
      }
    }
  }
}
