import type { OrderdClient } from "./client.js";
import type { Load } from "./endpoints.js";
import { OrderdError, WatchError } from "./errors.js";
import type { ProblemCode } from "./errors.js";

/** The part of the WebSocket API a watch uses: the browser's WebSocket and
 * the `ws` package's both have it. */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: ((ev: any) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: any) => void) | null;
  onerror: ((ev: any) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

/** A merchant's load as the websocket sends it. */
export type MerchantLoad = Load & { merchant_id: string };

/** A merchant's public status (the merchant_status message). */
export interface MerchantStatus {
  merchant_id: string;
  /** Placements are taken now (false while paused to refuse). */
  open: boolean;
  paused: boolean;
  pause_mode: "queue" | "refuse" | null;
  paused_until: string | null;
  /** An order paid now would wait in line. */
  busy: boolean;
  /** Orders in line. */
  queued: number;
  /** The estimated wait of an order paid now; 0 when not busy. */
  est_wait_seconds: number;
}

/** connecting: not yet subscribed; live: subscribed, and the server's
 * current state received; reconnecting: the connection was lost and a
 * new one will be made; closed: the watch ended. */
export type WatchState = "connecting" | "live" | "reconnecting" | "closed";

export interface WatchOptions {
  /** Called on every change of the watch's state (for a "live" badge). */
  onState?: (state: WatchState) => void;
  /** Called once when the watch cannot go on (the server refused the
   * subscription or the token); the watch is closed then. Without it the
   * error goes to console.error. */
  onError?: (error: WatchError) => void;
  /** Closes the watch when aborted. */
  signal?: AbortSignal;
}

/** Reconnection delays in milliseconds: the first, doubled per failed
 * attempt up to max, each wait between half and all of that. */
export interface ReconnectOptions {
  first?: number;
  max?: number;
}

/** A running watch. */
export interface Watch {
  /** Ends the watch; the connection closes with the client's last watch. */
  close(): void;
  readonly state: WatchState;
}

/** What a subscription names: the subscribe message's key and its id. */
export interface Target {
  key: "order_id" | "merchant_id" | "merchant_status" | "entry_id" | "drop_id";
  id: string;
}

interface Watcher {
  state: WatchState;
  deliver(m: any): void;
  setState(s: WatchState): void;
  fail(err: WatchError): void;
}

// A subscription on the connection, the watches that share it, and the
// last state it received.
interface Subscription {
  target: Target;
  watchers: Set<Watcher>;
  last?: any;
}

const OPEN = 1;

// answerWithin: a subscribe not answered in this time is taken for a
// broken connection.
const answerWithin = 10_000;

// Codes after which the same subscription on a new connection would work.
const transient = new Set<ProblemCode>(["unavailable", "internal"]);

/** targetOf names the subscription a server message belongs to. */
function targetOf(m: any): string | null {
  switch (m.type) {
    case "order": return "order_id:" + m.order?.id;
    case "merchant_load": return "merchant_id:" + m.merchant_id;
    case "merchant_status": return "merchant_status:" + m.merchant_id;
    case "entry": return "entry_id:" + m.entry?.id;
    case "drop": return "drop_id:" + m.drop?.id;
    default: return null;
  }
}

/** Live is a client's one websocket, shared by all its watches. Each
 * connection opens with a fresh single-use ticket (a ticket works once and
 * for a minute, so none is kept for a reconnection) and subscribes to
 * everything watched again; the server answers each subscription with the
 * current state, so nothing that changed while the connection was down is
 * missed. Subscribes go one at a time, each after the answer to the one
 * before: the server's error messages do not say which subscription they
 * refuse, and so the one waiting is the one refused. */
export class Live {
  private readonly subs = new Map<string, Subscription>();
  private ws: WebSocketLike | null = null;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private failures = 0;
  // opening: a ticket is being fetched for the next connection.
  private opening = false;
  // The subscriptions to send on this connection, and the one sent and
  // not yet answered.
  private queue: string[] = [];
  private waiting: string | null = null;
  private waitTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly events = typeof window !== "undefined" && typeof window.addEventListener === "function" ? window : null;

  constructor(private readonly client: OrderdClient, private readonly reconnect: ReconnectOptions = {}) {}

  watch(target: Target, deliver: (m: any) => void, options: WatchOptions): Watch {
    const live = this;
    const name = target.key + ":" + target.id;
    const w: Watcher = {
      state: "connecting",
      deliver,
      setState(s) {
        if (w.state === s || w.state === "closed") return;
        w.state = s;
        options.onState?.(s);
      },
      fail(err) {
        close();
        if (options.onError) options.onError(err);
        else console.error(err);
      },
    };
    const close = () => {
      if (w.state === "closed") return;
      options.signal?.removeEventListener("abort", close);
      w.setState("closed");
      live.remove(name, w);
    };
    if (options.signal?.aborted) {
      w.state = "closed";
      return { close, get state() { return w.state; } };
    }
    options.signal?.addEventListener("abort", close, { once: true });
    options.onState?.("connecting");
    const sub = this.subs.get(name);
    if (sub) {
      // Watched already: the new watch starts from the last state, and
      // gets what follows with the others.
      sub.watchers.add(w);
      const last = sub.last;
      if (last) {
        queueMicrotask(() => {
          if (w.state === "closed") return;
          if (this.ws?.readyState === OPEN && this.waiting !== name && !this.queue.includes(name)) w.setState("live");
          w.deliver(last);
        });
      }
    } else {
      this.subs.set(name, { target, watchers: new Set([w]) });
      this.enqueue(name);
      this.connect();
    }
    return { close, get state() { return w.state; } };
  }

  private remove(name: string, w: Watcher) {
    const sub = this.subs.get(name);
    if (!sub) return;
    sub.watchers.delete(w);
    if (sub.watchers.size) return;
    this.subs.delete(name);
    this.queue = this.queue.filter((n) => n !== name);
    if (this.ws?.readyState === OPEN) {
      this.ws.send(JSON.stringify({ op: "unsubscribe", [sub.target.key]: sub.target.id }));
    }
    if (!this.subs.size) this.stop();
  }

  // stop closes the connection once nothing is watched.
  private stop() {
    clearTimeout(this.timer);
    this.events?.removeEventListener("online", this.online);
    const sock = this.ws;
    this.ws = null;
    this.queue = [];
    this.answered();
    this.failures = 0;
    sock?.close(1000);
  }

  private enqueue(name: string) {
    if (this.waiting === name || this.queue.includes(name)) return;
    this.queue.push(name);
    this.pump();
  }

  // pump sends the next subscribe once the previous one is answered.
  private pump() {
    const sock = this.ws;
    if (!sock || sock.readyState !== OPEN || this.waiting) return;
    const name = this.queue.shift();
    const sub = name && this.subs.get(name);
    if (!sub) return;
    this.waiting = name;
    this.waitTimer = setTimeout(() => { if (this.ws === sock && this.waiting === name) sock.close(); }, answerWithin);
    sock.send(JSON.stringify({ op: "subscribe", [sub.target.key]: sub.target.id }));
  }

  private answered() {
    this.waiting = null;
    clearTimeout(this.waitTimer);
  }

  private readonly online = () => {
    if (this.subs.size && !this.ws && !this.opening) {
      this.failures = 0;
      clearTimeout(this.timer);
      this.connect();
    }
  };

  private retry() {
    this.ws = null;
    this.answered();
    if (!this.subs.size) return;
    for (const sub of this.subs.values()) for (const w of sub.watchers) if (w.state === "live") w.setState("reconnecting");
    const first = this.reconnect.first ?? 500;
    const max = this.reconnect.max ?? 15_000;
    // Equal jitter: never sooner than half the delay, so a server that
    // is restarting is not hammered, and clients cut off together spread.
    const delay = Math.min(max, first * 2 ** this.failures++);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay / 2 + Math.random() * (delay / 2));
  }

  private failAll(err: WatchError) {
    for (const sub of [...this.subs.values()]) for (const w of [...sub.watchers]) w.fail(err);
  }

  private async connect() {
    if (!this.subs.size || this.ws || this.opening) return;
    this.events?.addEventListener("online", this.online);
    let ticket: string;
    this.opening = true;
    try {
      ticket = (await this.client.issueWebSocketTicket()).ticket;
    } catch (err) {
      this.opening = false;
      if (err instanceof OrderdError && (err.status === 401 || err.status === 403)) {
        this.failAll(new WatchError(err.code, err.detail));
      } else {
        this.retry();
      }
      return;
    }
    this.opening = false;
    if (!this.subs.size) return;
    const WS = this.client.options.WebSocket ?? (globalThis as any).WebSocket;
    if (!WS) {
      this.failAll(new WatchError("internal", "no WebSocket: pass one in the client's options (on Node 20, from the ws package)"));
      return;
    }
    const sock: WebSocketLike = new WS(this.client.baseUrl.replace(/^http/, "ws") + "/v1/ws?ticket=" + encodeURIComponent(ticket));
    this.ws = sock;
    this.queue = [...this.subs.keys()];
    this.answered();
    sock.onopen = () => this.pump();
    sock.onmessage = (e) => {
      if (this.ws !== sock) return;
      let m: any;
      try {
        m = JSON.parse(typeof e.data === "string" ? e.data : new TextDecoder().decode(e.data as ArrayBuffer));
      } catch {
        return;
      }
      if (m.type === "error") this.refused(sock, m);
      else this.received(m);
    };
    sock.onerror = () => {}; // onclose follows
    sock.onclose = () => { if (this.ws === sock) this.retry(); };
  }

  // received hands a state to its subscription's watches; the answer to
  // the subscribe waiting lets the next one go.
  private received(m: any) {
    const name = targetOf(m);
    const sub = name && this.subs.get(name);
    if (!sub) return;
    this.failures = 0;
    sub.last = m;
    for (const w of [...sub.watchers]) {
      w.setState("live");
      w.deliver(m);
    }
    if (name === this.waiting) {
      this.answered();
      this.pump();
    }
  }

  // refused handles an error message: it answers the subscribe waiting.
  private refused(sock: WebSocketLike, m: any) {
    const name = this.waiting;
    if (!name) return;
    clearTimeout(this.waitTimer);
    if (m.code === "rate_limited") {
      setTimeout(() => {
        if (this.ws !== sock || this.waiting !== name) return;
        this.answered();
        this.queue.unshift(name);
        this.pump();
      }, (m.retry_after_seconds ?? 1) * 1000);
      return;
    }
    if (transient.has(m.code)) {
      sock.close(); // onclose reconnects and subscribes again
      return;
    }
    this.answered();
    const sub = this.subs.get(name);
    for (const w of sub ? [...sub.watchers] : []) w.fail(new WatchError(m.code, m.detail));
    this.pump();
  }
}
