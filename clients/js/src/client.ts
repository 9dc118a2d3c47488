import { Endpoints, operations } from "./endpoints.js";
import type { Order } from "./endpoints.js";
import { OrderdError } from "./errors.js";
import type { Answer, CallOptions, Input, OperationId } from "./types.js";
import { Live } from "./watch.js";
import type { MerchantLoad, MerchantStatus, ReconnectOptions, Watch, WatchOptions, WebSocketLike } from "./watch.js";

/** A token, or a function that returns the current one (called before
 * every request, so a refreshed token is used at once). */
export type TokenSource = string | null | undefined | (() => string | null | undefined | Promise<string | null | undefined>);

export interface ClientOptions {
  /** The server, such as `https://orders.example.com`. In a browser it
   * defaults to the page's origin. */
  baseUrl?: string;
  /** The bearer token (a JWT), or a function returning it. */
  token?: TokenSource;
  /** The fetch to use; the global one by default. */
  fetch?: typeof fetch;
  /** The WebSocket class for watches; the global one by default (browsers,
   * Node 22 and later). On Node 20 pass `WebSocket` from the `ws` package. */
  WebSocket?: new (url: string) => WebSocketLike;
  /** Retries of a refusal that wrote nothing (429, 503) or of a lost
   * connection on a request that is safe to repeat. Default 2. */
  retries?: number;
  /** The longest wait before a retry, in milliseconds: a Retry-After
   * longer than this is thrown to the caller instead. Default 10 000. */
  maxRetryDelay?: number;
  /** Waits between reconnections of the websocket, in milliseconds:
   * the first (500), doubled per failed attempt up to max (15 000), each
   * wait between half and all of that. */
  reconnect?: ReconnectOptions;
}

/** orderd's client: one typed method per endpoint (named after its
 * operationId in the OpenAPI document), and live watches of orders and
 * merchants over one websocket that all the client's watches share. */
export class OrderdClient extends Endpoints {
  readonly baseUrl: string;
  readonly options: Readonly<ClientOptions>;
  private live?: Live;

  constructor(options: ClientOptions = {}) {
    super();
    const base = options.baseUrl ?? (typeof location !== "undefined" ? location.origin : undefined);
    if (!base) throw new TypeError("OrderdClient: baseUrl is required outside a browser");
    this.baseUrl = base.replace(/\/+$/, "");
    this.options = options;
  }

  /** Watches an order: onUpdate gets the order at once, on every change of
   * its status, place in line or estimate, and again after every
   * reconnection (never a state older than one it already had). */
  watchOrder(id: string, onUpdate: (order: Order) => void, options: WatchOptions = {}): Watch {
    let version = -1;
    return this.connection().watch({ key: "order_id", id }, (m) => {
      const order = m.order as Order;
      if (order.version < version) return;
      version = order.version;
      onUpdate(order);
    }, options);
  }

  /** Watches a merchant's load, as its kitchen sees it (the merchant
   * itself or an admin): onUpdate gets it at once, on every change, and
   * after every reconnection. */
  watchMerchantLoad(id: string, onUpdate: (load: MerchantLoad) => void, options: WatchOptions = {}): Watch {
    return this.connection().watch({ key: "merchant_id", id }, (m) => onUpdate(m as MerchantLoad), options);
  }

  /** Watches a merchant's public status, as any signed-in customer may:
   * open, paused (with the mode and end), busy, and the line's length and
   * estimated wait. onUpdate gets it at once, when it opens, pauses or
   * gets busy, as the line's numbers move by enough to notice, and after
   * every reconnection. */
  watchMerchant(id: string, onUpdate: (status: MerchantStatus) => void, options: WatchOptions = {}): Watch {
    return this.connection().watch({ key: "merchant_status", id }, (m) => onUpdate(m as MerchantStatus), options);
  }

  private connection(): Live {
    this.live ??= new Live(this, this.options.reconnect);
    return this.live;
  }

  /** The current bearer token, if any. */
  async token(): Promise<string | undefined> {
    const t = this.options.token;
    return (typeof t === "function" ? await t() : t) || undefined;
  }

  protected async call<K extends OperationId>(op: K, input: Input, options: CallOptions = {}): Promise<Answer<K>> {
    const spec = operations[op];
    const url = this.url(spec.path, input);
    const write = spec.method !== "GET";
    // One key per call, whatever the retries: a retry of a placement whose
    // answer was lost is answered with the order it made.
    const key = write ? options.idempotencyKey ?? newKey() : undefined;
    const retries = options.retries ?? this.options.retries ?? 2;
    const doFetch = this.options.fetch ?? globalThis.fetch.bind(globalThis);
    for (let attempt = 0; ; attempt++) {
      const headers: Record<string, string> = { Accept: "application/json", ...options.headers };
      if (spec.auth) {
        const token = await this.token();
        if (token) headers.Authorization = "Bearer " + token;
      }
      if (key) headers["Idempotency-Key"] = key;
      if (input.body !== undefined) headers["Content-Type"] = "application/json";
      let res: Response;
      try {
        res = await doFetch(url, {
          method: spec.method,
          headers,
          body: input.body === undefined ? undefined : JSON.stringify(input.body),
          signal: options.signal,
        });
      } catch (err) {
        // A lost connection may have lost the answer of a request that was
        // done: only requests that are safe to repeat are sent again.
        if (options.signal?.aborted || attempt >= retries || (write && !spec.idempotent)) throw err;
        await sleep(backoff(attempt), options.signal);
        continue;
      }
      if (res.ok) {
        const text = await res.text();
        return (text ? JSON.parse(text) : undefined) as Answer<K>;
      }
      const retryAfter = parseRetryAfter(res.headers.get("Retry-After"));
      const problem = await res.json().catch(() => null);
      const error = new OrderdError(res.status, problem, retryAfter);
      // 429 and 503 say the request was refused before anything was
      // written, so any request may be sent again after the wait.
      if ((res.status === 429 || res.status === 503) && attempt < retries) {
        const wait = retryAfter !== undefined ? retryAfter * 1000 * (1 + Math.random() * 0.1) : backoff(attempt);
        if (wait <= (this.options.maxRetryDelay ?? 10_000)) {
          await sleep(wait, options.signal);
          continue;
        }
      }
      throw error;
    }
  }

  private url(template: string, input: Input): string {
    const path = template.replace(/\{([^}]+)\}/g, (_, name: string) => {
      const v = input.path?.[name];
      if (v === undefined || v === "") throw new TypeError(`missing path parameter ${name}`);
      return encodeURIComponent(v);
    });
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(input.query ?? {})) {
      if (v !== undefined && v !== null) q.append(k, String(v));
    }
    const qs = q.toString();
    return this.baseUrl + path + (qs ? "?" + qs : "");
  }
}

/** A fresh Idempotency-Key: a random UUID. crypto.randomUUID exists only in
 * secure contexts, so a page served over plain HTTP builds one itself. */
export function newKey(): string {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** backoff is the wait before retry n (from 0): doubling from 250 ms up to
 * 8 s, with full jitter so that clients refused together do not return
 * together. */
export function backoff(n: number, first = 250, max = 8000): number {
  return Math.random() * Math.min(max, first * 2 ** n);
}

function parseRetryAfter(v: string | null): number | undefined {
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim());
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(signal!.reason); };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
