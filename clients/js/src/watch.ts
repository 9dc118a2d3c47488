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

/** connecting: the first connection is being made; live: subscribed and
 * the server's current state received; reconnecting: the connection was
 * lost and a new one will be made; closed: the watch ended. */
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
  /** Reconnection delays in milliseconds: the first, doubled per failed
   * attempt up to max, each with jitter. Defaults 500 and 15 000. */
  reconnect?: { first?: number; max?: number };
}

/** A running watch. */
export interface Watch {
  /** Ends the watch and its connection. */
  close(): void;
  readonly state: WatchState;
}

const OPEN = 1;

// Codes after which the same subscription on a new connection would work.
const transient = new Set<ProblemCode>(["unavailable", "internal"]);

/** watch keeps one websocket subscribed to sub, through every lost
 * connection, until closed. Each connection opens with a fresh single-use
 * ticket (a ticket works once and for a minute, so none is kept for a
 * reconnection) and subscribes again; the server answers a subscription
 * with the current state, so nothing that changed while the connection was
 * down is missed. */
export function watch(
  client: OrderdClient,
  sub: Record<string, string>,
  onMessage: (m: any) => void,
  options: WatchOptions,
): Watch {
  const first = options.reconnect?.first ?? 500;
  const max = options.reconnect?.max ?? 15_000;
  const subscribe = JSON.stringify({ op: "subscribe", ...sub });
  let state: WatchState = "connecting";
  let ws: WebSocketLike | null = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let failures = 0;
  let stopped = false;
  // opening: a ticket is being fetched for the next connection.
  let opening = false;

  const setState = (s: WatchState) => {
    if (state === s) return;
    state = s;
    options.onState?.(s);
  };

  const retry = () => {
    ws = null;
    if (stopped) return;
    setState("reconnecting");
    // Equal jitter: never sooner than half the delay, so a server that
    // is restarting is not hammered, and clients cut off together spread.
    const delay = Math.min(max, first * 2 ** failures++);
    clearTimeout(timer);
    timer = setTimeout(connect, delay / 2 + Math.random() * (delay / 2));
  };

  const fail = (err: WatchError) => {
    close();
    if (options.onError) options.onError(err);
    else console.error(err);
  };

  const connect = async () => {
    if (stopped || ws || opening) return;
    let ticket: string;
    opening = true;
    try {
      ticket = (await client.issueWebSocketTicket()).ticket;
    } catch (err) {
      opening = false;
      if (err instanceof OrderdError && (err.status === 401 || err.status === 403)) {
        fail(new WatchError(err.code, err.detail));
      } else {
        retry();
      }
      return;
    }
    opening = false;
    if (stopped) return;
    const WS = client.options.WebSocket ?? (globalThis as any).WebSocket;
    if (!WS) {
      fail(new WatchError("internal", "no WebSocket: pass one in the client's options (on Node 20, from the ws package)"));
      return;
    }
    const sock: WebSocketLike = new WS(client.baseUrl.replace(/^http/, "ws") + "/v1/ws?ticket=" + encodeURIComponent(ticket));
    ws = sock;
    sock.onopen = () => sock.send(subscribe);
    sock.onmessage = (e) => {
      if (ws !== sock) return;
      let m: any;
      try {
        m = JSON.parse(typeof e.data === "string" ? e.data : new TextDecoder().decode(e.data as ArrayBuffer));
      } catch {
        return;
      }
      if (m.type === "error") {
        if (m.code === "rate_limited") {
          setTimeout(() => { if (ws === sock && sock.readyState === OPEN) sock.send(subscribe); },
            (m.retry_after_seconds ?? 1) * 1000);
        } else if (transient.has(m.code)) {
          sock.close(); // onclose reconnects
        } else {
          fail(new WatchError(m.code, m.detail));
        }
        return;
      }
      failures = 0;
      setState("live");
      onMessage(m);
    };
    sock.onerror = () => {}; // onclose follows
    sock.onclose = () => { if (ws === sock) retry(); };
  };

  // A browser that comes back online reconnects at once, not after the
  // rest of its backoff.
  const online = () => {
    if (!stopped && !ws && !opening) {
      failures = 0;
      clearTimeout(timer);
      connect();
    }
  };
  const events = typeof window !== "undefined" && typeof window.addEventListener === "function" ? window : null;
  events?.addEventListener("online", online);

  const close = () => {
    if (stopped) return;
    stopped = true;
    clearTimeout(timer);
    events?.removeEventListener("online", online);
    options.signal?.removeEventListener("abort", close);
    const sock = ws;
    ws = null;
    sock?.close(1000);
    setState("closed");
  };
  options.signal?.addEventListener("abort", close, { once: true });
  if (options.signal?.aborted) close();
  else {
    options.onState?.("connecting");
    connect();
  }

  return {
    close,
    get state() { return state; },
  };
}
