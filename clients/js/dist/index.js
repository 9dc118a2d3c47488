// @orderd/client: built by scripts/build.mjs from src/. Do not edit.

// src/endpoints.ts
var operations = {
  audit: { method: "GET", path: "/v1/admin/audit", idempotent: false, auth: true },
  cancelOrder: { method: "POST", path: "/v1/orders/{id}/cancel", idempotent: false, auth: true },
  checkpointConsistency: { method: "GET", path: "/v1/audit/checkpoints/consistency", idempotent: false, auth: true },
  completeOrder: { method: "POST", path: "/v1/orders/{id}/complete", idempotent: false, auth: true },
  createDrop: { method: "POST", path: "/v1/products/{id}/drops", idempotent: false, auth: true },
  createMerchant: { method: "POST", path: "/v1/merchants", idempotent: false, auth: true },
  createProduct: { method: "POST", path: "/v1/merchants/{id}/products", idempotent: false, auth: true },
  getDrop: { method: "GET", path: "/v1/drops/{id}", idempotent: false, auth: true },
  getDropDraw: { method: "GET", path: "/v1/drops/{id}/draw", idempotent: false, auth: true },
  getMerchant: { method: "GET", path: "/v1/merchants/{id}", idempotent: false, auth: true },
  getOrder: { method: "GET", path: "/v1/orders/{id}", idempotent: false, auth: true },
  getProduct: { method: "GET", path: "/v1/products/{id}", idempotent: false, auth: true },
  healthz: { method: "GET", path: "/healthz", idempotent: false, auth: false },
  hideProduct: { method: "DELETE", path: "/v1/merchants/{mid}/products/{pid}", idempotent: false, auth: true },
  issueWebSocketTicket: { method: "POST", path: "/v1/ws/tickets", idempotent: false, auth: true },
  joinDrop: { method: "POST", path: "/v1/drops/{id}/entries", idempotent: false, auth: true },
  latestCheckpoint: { method: "GET", path: "/v1/audit/checkpoints/latest", idempotent: false, auth: true },
  listDeadLetters: { method: "GET", path: "/v1/admin/dead-letters", idempotent: false, auth: true },
  listMerchantOrders: { method: "GET", path: "/v1/merchants/{id}/orders", idempotent: false, auth: true },
  listOwnOrders: { method: "GET", path: "/v1/orders", idempotent: false, auth: true },
  listProducts: { method: "GET", path: "/v1/merchants/{id}/products", idempotent: false, auth: true },
  listSlots: { method: "GET", path: "/v1/merchants/{id}/slots", idempotent: false, auth: true },
  listWebhookAttempts: { method: "GET", path: "/v1/admin/webhook-attempts", idempotent: false, auth: true },
  mintSignInCode: { method: "POST", path: "/v1/admin/sign-in-codes", idempotent: false, auth: true },
  myDropEntry: { method: "GET", path: "/v1/drops/{id}/entries/me", idempotent: false, auth: true },
  openapi: { method: "GET", path: "/openapi.json", idempotent: false, auth: false },
  orderEvents: { method: "GET", path: "/v1/orders/{id}/events", idempotent: false, auth: true },
  orderProof: { method: "GET", path: "/v1/orders/{id}/proof", idempotent: false, auth: true },
  pauseMerchant: { method: "POST", path: "/v1/merchants/{id}/pause", idempotent: false, auth: true },
  payOrder: { method: "POST", path: "/v1/orders/{id}/pay", idempotent: false, auth: true },
  pickUpOrder: { method: "POST", path: "/v1/orders/{id}/picked-up", idempotent: false, auth: true },
  placeOrder: { method: "POST", path: "/v1/orders", idempotent: true, auth: true },
  prioritizeOrder: { method: "POST", path: "/v1/orders/{id}/prioritize", idempotent: false, auth: true },
  readyz: { method: "GET", path: "/readyz", idempotent: false, auth: false },
  reopenOrder: { method: "POST", path: "/v1/orders/{id}/reopen", idempotent: false, auth: true },
  resolveDeadLetter: { method: "POST", path: "/v1/admin/dead-letters/{id}/resolve", idempotent: false, auth: true },
  restockProduct: { method: "POST", path: "/v1/products/{id}/restock", idempotent: false, auth: true },
  resumeMerchant: { method: "POST", path: "/v1/merchants/{id}/resume", idempotent: false, auth: true },
  retryDeadLetter: { method: "POST", path: "/v1/admin/dead-letters/{id}/retry", idempotent: false, auth: true },
  retryMerchantWebhooks: { method: "POST", path: "/v1/admin/dead-letters/retry", idempotent: false, auth: true },
  rotateWebhookSecret: { method: "POST", path: "/v1/merchants/{id}/webhook-secret", idempotent: false, auth: true },
  signIn: { method: "POST", path: "/v1/sign-in", idempotent: false, auth: false },
  startGuestSession: { method: "POST", path: "/v1/merchants/{id}/guest-sessions", idempotent: false, auth: false },
  updateMerchant: { method: "PATCH", path: "/v1/merchants/{id}", idempotent: false, auth: true },
  updateProduct: { method: "PATCH", path: "/v1/merchants/{mid}/products/{pid}", idempotent: false, auth: true }
};
var Endpoints = class {
  /** Run every invariant check (`GET /v1/admin/audit`) */
  audit(options) {
    return this.call("audit", {}, options);
  }
  /** Cancel an order (`POST /v1/orders/{id}/cancel`) */
  cancelOrder(id, body, options) {
    return this.call("cancelOrder", { body, path: { id } }, options);
  }
  /** Proof that the log only grew between two checkpoints (`GET /v1/audit/checkpoints/consistency`) */
  checkpointConsistency(query, options) {
    return this.call("checkpointConsistency", { query }, options);
  }
  /** Complete an accepted order (`POST /v1/orders/{id}/complete`) */
  completeOrder(id, options) {
    return this.call("completeOrder", { path: { id } }, options);
  }
  /** Schedule a drop of a limited product (`POST /v1/products/{id}/drops`) */
  createDrop(id, body, options) {
    return this.call("createDrop", { body, path: { id } }, options);
  }
  /** Create a merchant (`POST /v1/merchants`) */
  createMerchant(body, options) {
    return this.call("createMerchant", { body }, options);
  }
  /** Add a product (`POST /v1/merchants/{id}/products`) */
  createProduct(id, body, options) {
    return this.call("createProduct", { body, path: { id } }, options);
  }
  /** A drop (`GET /v1/drops/{id}`) */
  getDrop(id, options) {
    return this.call("getDrop", { path: { id } }, options);
  }
  /** Everything needed to recompute a drop's ranks (`GET /v1/drops/{id}/draw`) */
  getDropDraw(id, options) {
    return this.call("getDropDraw", { path: { id } }, options);
  }
  /** A merchant and its live load (`GET /v1/merchants/{id}`) */
  getMerchant(id, options) {
    return this.call("getMerchant", { path: { id } }, options);
  }
  /** An order (`GET /v1/orders/{id}`) */
  getOrder(id, options) {
    return this.call("getOrder", { path: { id } }, options);
  }
  /** A product (`GET /v1/products/{id}`) */
  getProduct(id, options) {
    return this.call("getProduct", { path: { id } }, options);
  }
  /** Liveness (`GET /healthz`) */
  healthz(options) {
    return this.call("healthz", {}, options);
  }
  /** Take a product off the menu (`DELETE /v1/merchants/{mid}/products/{pid}`) */
  hideProduct(mid, pid, options) {
    return this.call("hideProduct", { path: { mid, pid } }, options);
  }
  /** Issue a WebSocket ticket (`POST /v1/ws/tickets`) */
  issueWebSocketTicket(options) {
    return this.call("issueWebSocketTicket", {}, options);
  }
  /** Join a drop's line (`POST /v1/drops/{id}/entries`) */
  joinDrop(id, options) {
    return this.call("joinDrop", { path: { id } }, options);
  }
  /** The log's latest signed checkpoint (`GET /v1/audit/checkpoints/latest`) */
  latestCheckpoint(query, options) {
    return this.call("latestCheckpoint", { query }, options);
  }
  /** Dead letters, newest first (`GET /v1/admin/dead-letters`) */
  listDeadLetters(query, options) {
    return this.call("listDeadLetters", { query }, options);
  }
  /** A merchant's orders of one status (`GET /v1/merchants/{id}/orders`) */
  listMerchantOrders(id, query, options) {
    return this.call("listMerchantOrders", { query, path: { id } }, options);
  }
  /** The caller's own orders, newest first (`GET /v1/orders`) */
  listOwnOrders(query, options) {
    return this.call("listOwnOrders", { query }, options);
  }
  /** A merchant's menu (`GET /v1/merchants/{id}/products`) */
  listProducts(id, options) {
    return this.call("listProducts", { path: { id } }, options);
  }
  /** A merchant's pickup slots of a day (`GET /v1/merchants/{id}/slots`) */
  listSlots(id, query, options) {
    return this.call("listSlots", { query, path: { id } }, options);
  }
  /** Webhook attempts, newest first (`GET /v1/admin/webhook-attempts`) */
  listWebhookAttempts(query, options) {
    return this.call("listWebhookAttempts", { query }, options);
  }
  /** Mint a single-use sign-in code (`POST /v1/admin/sign-in-codes`) */
  mintSignInCode(body, options) {
    return this.call("mintSignInCode", { body }, options);
  }
  /** The calling customer's entry in a drop (`GET /v1/drops/{id}/entries/me`) */
  myDropEntry(id, options) {
    return this.call("myDropEntry", { path: { id } }, options);
  }
  /** This document (`GET /openapi.json`) */
  openapi(options) {
    return this.call("openapi", {}, options);
  }
  /** An order's history (`GET /v1/orders/{id}/events`) */
  orderEvents(id, options) {
    return this.call("orderEvents", { path: { id } }, options);
  }
  /** An order's receipt: its events' inclusion in a checkpoint (`GET /v1/orders/{id}/proof`) */
  orderProof(id, query, options) {
    return this.call("orderProof", { query, path: { id } }, options);
  }
  /** Pause a merchant's intake (`POST /v1/merchants/{id}/pause`) */
  pauseMerchant(id, body, options) {
    return this.call("pauseMerchant", { body, path: { id } }, options);
  }
  /** Pay an order (`POST /v1/orders/{id}/pay`) */
  payOrder(id, body, options) {
    return this.call("payOrder", { body, path: { id } }, options);
  }
  /** Mark a completed order picked up (`POST /v1/orders/{id}/picked-up`) */
  pickUpOrder(id, options) {
    return this.call("pickUpOrder", { path: { id } }, options);
  }
  /** Place an order (`POST /v1/orders`) */
  placeOrder(body, options) {
    return this.call("placeOrder", { body }, options);
  }
  /** Move a queued order to the priority lane (`POST /v1/orders/{id}/prioritize`) */
  prioritizeOrder(id, body, options) {
    return this.call("prioritizeOrder", { body, path: { id } }, options);
  }
  /** Readiness (`GET /readyz`) */
  readyz(options) {
    return this.call("readyz", {}, options);
  }
  /** Undo a completion (`POST /v1/orders/{id}/reopen`) */
  reopenOrder(id, options) {
    return this.call("reopenOrder", { path: { id } }, options);
  }
  /** Mark a dead letter handled (`POST /v1/admin/dead-letters/{id}/resolve`) */
  resolveDeadLetter(id, body, options) {
    return this.call("resolveDeadLetter", { body, path: { id } }, options);
  }
  /** Add units to a limited product (`POST /v1/products/{id}/restock`) */
  restockProduct(id, body, options) {
    return this.call("restockProduct", { body, path: { id } }, options);
  }
  /** Resume a paused merchant (`POST /v1/merchants/{id}/resume`) */
  resumeMerchant(id, options) {
    return this.call("resumeMerchant", { path: { id } }, options);
  }
  /** Retry a dead letter (`POST /v1/admin/dead-letters/{id}/retry`) */
  retryDeadLetter(id, options) {
    return this.call("retryDeadLetter", { path: { id } }, options);
  }
  /** Retry every dead webhook of a merchant (`POST /v1/admin/dead-letters/retry`) */
  retryMerchantWebhooks(query, options) {
    return this.call("retryMerchantWebhooks", { query }, options);
  }
  /** Rotate the webhook secret (`POST /v1/merchants/{id}/webhook-secret`) */
  rotateWebhookSecret(id, options) {
    return this.call("rotateWebhookSecret", { path: { id } }, options);
  }
  /** Exchange a sign-in code for a bearer token (`POST /v1/sign-in`) */
  signIn(body, options) {
    return this.call("signIn", { body }, options);
  }
  /** Start a walk-in customer's session (`POST /v1/merchants/{id}/guest-sessions`) */
  startGuestSession(id, options) {
    return this.call("startGuestSession", { path: { id } }, options);
  }
  /** Change a merchant's settings (`PATCH /v1/merchants/{id}`) */
  updateMerchant(id, body, options) {
    return this.call("updateMerchant", { body, path: { id } }, options);
  }
  /** Change a menu item (`PATCH /v1/merchants/{mid}/products/{pid}`) */
  updateProduct(mid, pid, body, options) {
    return this.call("updateProduct", { body, path: { mid, pid } }, options);
  }
};

// src/errors.ts
var codeOfStatus = {
  400: "malformed_json",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  413: "payload_too_large",
  415: "unsupported_media_type",
  422: "validation_failed",
  429: "rate_limited",
  502: "unavailable",
  503: "unavailable",
  504: "unavailable"
};
var OrderdError = class extends Error {
  constructor(status, problem, retryAfter) {
    const code = problem?.code ?? codeOfStatus[status] ?? "internal";
    const detail = problem?.detail || problem?.title || `request failed (${status})`;
    super(detail);
    this.name = "OrderdError";
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.problem = { type: "about:blank", title: detail, ...problem, status, code, detail };
    if (retryAfter !== void 0) this.retryAfter = retryAfter;
  }
};
var WatchError = class extends Error {
  constructor(code, detail) {
    super(detail);
    this.name = "WatchError";
    this.code = code;
  }
};

// src/watch.ts
var OPEN = 1;
var answerWithin = 1e4;
var transient = /* @__PURE__ */ new Set(["unavailable", "internal"]);
function targetOf(m) {
  switch (m.type) {
    case "order":
      return "order_id:" + m.order?.id;
    case "merchant_load":
      return "merchant_id:" + m.merchant_id;
    case "merchant_status":
      return "merchant_status:" + m.merchant_id;
    case "entry":
      return "entry_id:" + m.entry?.id;
    case "drop":
      return "drop_id:" + m.drop?.id;
    default:
      return null;
  }
}
var Live = class {
  constructor(client, reconnect = {}) {
    this.client = client;
    this.reconnect = reconnect;
    this.subs = /* @__PURE__ */ new Map();
    this.ws = null;
    this.failures = 0;
    // opening: a ticket is being fetched for the next connection.
    this.opening = false;
    // The subscriptions to send on this connection, and the one sent and
    // not yet answered.
    this.queue = [];
    this.waiting = null;
    this.events = typeof window !== "undefined" && typeof window.addEventListener === "function" ? window : null;
    this.online = () => {
      if (this.subs.size && !this.ws && !this.opening) {
        this.failures = 0;
        clearTimeout(this.timer);
        this.connect();
      }
    };
  }
  watch(target, deliver, options) {
    const live = this;
    const name = target.key + ":" + target.id;
    const w = {
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
      }
    };
    const close = () => {
      if (w.state === "closed") return;
      options.signal?.removeEventListener("abort", close);
      w.setState("closed");
      live.remove(name, w);
    };
    if (options.signal?.aborted) {
      w.state = "closed";
      return { close, get state() {
        return w.state;
      } };
    }
    options.signal?.addEventListener("abort", close, { once: true });
    options.onState?.("connecting");
    const sub = this.subs.get(name);
    if (sub) {
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
      this.subs.set(name, { target, watchers: /* @__PURE__ */ new Set([w]) });
      this.enqueue(name);
      this.connect();
    }
    return { close, get state() {
      return w.state;
    } };
  }
  remove(name, w) {
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
  stop() {
    clearTimeout(this.timer);
    this.events?.removeEventListener("online", this.online);
    const sock = this.ws;
    this.ws = null;
    this.queue = [];
    this.answered();
    this.failures = 0;
    sock?.close(1e3);
  }
  enqueue(name) {
    if (this.waiting === name || this.queue.includes(name)) return;
    this.queue.push(name);
    this.pump();
  }
  // pump sends the next subscribe once the previous one is answered.
  pump() {
    const sock = this.ws;
    if (!sock || sock.readyState !== OPEN || this.waiting) return;
    const name = this.queue.shift();
    const sub = name && this.subs.get(name);
    if (!sub) return;
    this.waiting = name;
    this.waitTimer = setTimeout(() => {
      if (this.ws === sock && this.waiting === name) sock.close();
    }, answerWithin);
    sock.send(JSON.stringify({ op: "subscribe", [sub.target.key]: sub.target.id }));
  }
  answered() {
    this.waiting = null;
    clearTimeout(this.waitTimer);
  }
  retry() {
    this.ws = null;
    this.answered();
    if (!this.subs.size) return;
    for (const sub of this.subs.values()) for (const w of sub.watchers) if (w.state === "live") w.setState("reconnecting");
    const first = this.reconnect.first ?? 500;
    const max = this.reconnect.max ?? 15e3;
    const delay = Math.min(max, first * 2 ** this.failures++);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay / 2 + Math.random() * (delay / 2));
  }
  failAll(err) {
    for (const sub of [...this.subs.values()]) for (const w of [...sub.watchers]) w.fail(err);
  }
  async connect() {
    if (!this.subs.size || this.ws || this.opening) return;
    this.events?.addEventListener("online", this.online);
    let ticket;
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
    const WS = this.client.options.WebSocket ?? globalThis.WebSocket;
    if (!WS) {
      this.failAll(new WatchError("internal", "no WebSocket: pass one in the client's options (on Node 20, from the ws package)"));
      return;
    }
    const sock = new WS(this.client.baseUrl.replace(/^http/, "ws") + "/v1/ws?ticket=" + encodeURIComponent(ticket));
    this.ws = sock;
    this.queue = [...this.subs.keys()];
    this.answered();
    sock.onopen = () => this.pump();
    sock.onmessage = (e) => {
      if (this.ws !== sock) return;
      let m;
      try {
        m = JSON.parse(typeof e.data === "string" ? e.data : new TextDecoder().decode(e.data));
      } catch {
        return;
      }
      if (m.type === "error") this.refused(sock, m);
      else this.received(m);
    };
    sock.onerror = () => {
    };
    sock.onclose = () => {
      if (this.ws === sock) this.retry();
    };
  }
  // received hands a state to its subscription's watches; the answer to
  // the subscribe waiting lets the next one go.
  received(m) {
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
  refused(sock, m) {
    const name = this.waiting;
    if (!name) return;
    clearTimeout(this.waitTimer);
    if (m.code === "rate_limited") {
      setTimeout(() => {
        if (this.ws !== sock || this.waiting !== name) return;
        this.answered();
        this.queue.unshift(name);
        this.pump();
      }, (m.retry_after_seconds ?? 1) * 1e3);
      return;
    }
    if (transient.has(m.code)) {
      sock.close();
      return;
    }
    this.answered();
    const sub = this.subs.get(name);
    for (const w of sub ? [...sub.watchers] : []) w.fail(new WatchError(m.code, m.detail));
    this.pump();
  }
};

// src/client.ts
var OrderdClient = class extends Endpoints {
  constructor(options = {}) {
    super();
    const base = options.baseUrl ?? (typeof location !== "undefined" ? location.origin : void 0);
    if (!base) throw new TypeError("OrderdClient: baseUrl is required outside a browser");
    this.baseUrl = base.replace(/\/+$/, "");
    this.options = options;
  }
  /** Watches an order: onUpdate gets the order at once, on every change of
   * its status, place in line or estimate, and again after every
   * reconnection (never a state older than one it already had). */
  watchOrder(id, onUpdate, options = {}) {
    let version = -1;
    return this.connection().watch({ key: "order_id", id }, (m) => {
      const order = m.order;
      if (order.version < version) return;
      version = order.version;
      onUpdate(order);
    }, options);
  }
  /** Watches a merchant's load, as its kitchen sees it (the merchant
   * itself or an admin): onUpdate gets it at once, on every change, and
   * after every reconnection. */
  watchMerchantLoad(id, onUpdate, options = {}) {
    return this.connection().watch({ key: "merchant_id", id }, (m) => onUpdate(m), options);
  }
  /** Watches a merchant's public status, as any signed-in customer may:
   * open, paused (with the mode and end), busy, and the line's length and
   * estimated wait. onUpdate gets it at once, when it opens, pauses or
   * gets busy, as the line's numbers move by enough to notice, and after
   * every reconnection. */
  watchMerchant(id, onUpdate, options = {}) {
    return this.connection().watch({ key: "merchant_status", id }, (m) => onUpdate(m), options);
  }
  connection() {
    this.live ?? (this.live = new Live(this, this.options.reconnect));
    return this.live;
  }
  /** The current bearer token, if any. */
  async token() {
    const t = this.options.token;
    return (typeof t === "function" ? await t() : t) || void 0;
  }
  async call(op, input, options = {}) {
    const spec = operations[op];
    const url = this.url(spec.path, input);
    const write = spec.method !== "GET";
    const key = write ? options.idempotencyKey ?? newKey() : void 0;
    const retries = options.retries ?? this.options.retries ?? 2;
    const doFetch = this.options.fetch ?? globalThis.fetch.bind(globalThis);
    for (let attempt = 0; ; attempt++) {
      const headers = { Accept: "application/json", ...options.headers };
      if (spec.auth) {
        const token = await this.token();
        if (token) headers.Authorization = "Bearer " + token;
      }
      if (key) headers["Idempotency-Key"] = key;
      if (input.body !== void 0) headers["Content-Type"] = "application/json";
      let res;
      try {
        res = await doFetch(url, {
          method: spec.method,
          headers,
          body: input.body === void 0 ? void 0 : JSON.stringify(input.body),
          signal: options.signal
        });
      } catch (err) {
        if (options.signal?.aborted || attempt >= retries || write && !spec.idempotent) throw err;
        await sleep(backoff(attempt), options.signal);
        continue;
      }
      if (res.ok) {
        const text = await res.text();
        return text ? JSON.parse(text) : void 0;
      }
      const retryAfter = parseRetryAfter(res.headers.get("Retry-After"));
      const problem = await res.json().catch(() => null);
      const error = new OrderdError(res.status, problem, retryAfter);
      if ((res.status === 429 || res.status === 503) && attempt < retries) {
        const wait = retryAfter !== void 0 ? retryAfter * 1e3 * (1 + Math.random() * 0.1) : backoff(attempt);
        if (wait <= (this.options.maxRetryDelay ?? 1e4)) {
          await sleep(wait, options.signal);
          continue;
        }
      }
      throw error;
    }
  }
  url(template, input) {
    const path = template.replace(/\{([^}]+)\}/g, (_, name) => {
      const v = input.path?.[name];
      if (v === void 0 || v === "") throw new TypeError(`missing path parameter ${name}`);
      return encodeURIComponent(v);
    });
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(input.query ?? {})) {
      if (v !== void 0 && v !== null) q.append(k, String(v));
    }
    const qs = q.toString();
    return this.baseUrl + path + (qs ? "?" + qs : "");
  }
};
function newKey() {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = b[6] & 15 | 64;
  b[8] = b[8] & 63 | 128;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
function backoff(n, first = 250, max = 8e3) {
  return Math.random() * Math.min(max, first * 2 ** n);
}
function parseRetryAfter(v) {
  if (!v) return void 0;
  if (/^\d+$/.test(v.trim())) return Number(v.trim());
  const at = Date.parse(v);
  return Number.isNaN(at) ? void 0 : Math.max(0, Math.ceil((at - Date.now()) / 1e3));
}
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// src/webhook.ts
var WebhookSignatureError = class extends Error {
  constructor(code, message) {
    super(message);
    this.name = "WebhookSignatureError";
    this.code = code;
  }
};
var signatureHeader = "X-Orderd-Signature-V2";
var maxAgeSeconds = 300;
async function verifyWebhook(secret, headers, body, options = {}) {
  const { unix, sigs } = parse(header(headers, signatureHeader));
  const now = Math.floor((options.now ?? Date.now()) / 1e3);
  const t = Number(unix);
  if (!Number.isSafeInteger(t)) throw new WebhookSignatureError("malformed", "webhook signature time is not a number");
  if (Math.abs(now - t) > maxAgeSeconds) {
    throw new WebhookSignatureError("too_old", `webhook signed at ${t}, now ${now}: outside the tolerated window`);
  }
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : new Uint8Array(body);
  const signed = concat(new TextEncoder().encode(unix + "."), bytes);
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  for (const sig of sigs) {
    if (await crypto.subtle.verify("HMAC", key, sig, signed)) {
      return JSON.parse(new TextDecoder().decode(bytes));
    }
  }
  throw new WebhookSignatureError("mismatch", "webhook signature does not match");
}
function header(headers, name) {
  if (typeof headers.get === "function") return headers.get(name) ?? "";
  const want = name.toLowerCase();
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === want) return Array.isArray(v) ? v.join(",") : v ?? "";
  }
  return "";
}
function parse(value) {
  const malformed = () => new WebhookSignatureError("malformed", `${signatureHeader} missing or malformed`);
  if (!value || value.length > 1024) throw malformed();
  let unix = "";
  const sigs = [];
  for (const part of value.split(",")) {
    const entry = part.trim();
    const eq = entry.indexOf("=");
    if (eq < 0) throw malformed();
    const k = entry.slice(0, eq), v = entry.slice(eq + 1);
    if (k === "t") {
      if (unix || !/^\d+$/.test(v)) throw malformed();
      unix = v;
    } else if (k === "v1") {
      if (!/^[0-9a-fA-F]{64}$/.test(v)) throw malformed();
      sigs.push(Uint8Array.from(v.match(/../g), (h) => parseInt(h, 16)));
    }
  }
  if (!unix || !sigs.length) throw malformed();
  return { unix, sigs };
}
function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

// src/proof.ts
var ProofError = class extends Error {
  constructor(code, message) {
    super(message);
    this.name = "ProofError";
    this.code = code;
  }
};
async function verifyCheckpoint(cp, options) {
  if (cp.public_key !== options.publicKey) {
    throw new ProofError("wrong_key", "the checkpoint is signed by another key than the one trusted");
  }
  const text = `orderd checkpoint v1
${cp.log}
${cp.size}
${cp.root}
${cp.at}
`;
  const key = await crypto.subtle.importKey("raw", b64(options.publicKey), { name: "Ed25519" }, false, ["verify"]);
  if (!await crypto.subtle.verify({ name: "Ed25519" }, key, b64(cp.signature), new TextEncoder().encode(text))) {
    throw new ProofError("bad_signature", "the checkpoint's signature does not verify");
  }
}
async function verifyProof(proof, options) {
  const checkpoint = proof.checkpoint;
  if (!checkpoint) {
    throw new ProofError("no_checkpoint", "the log has no checkpoint yet: the receipt proves nothing");
  }
  await verifyCheckpoint(checkpoint, options);
  const root = b64(checkpoint.root);
  for (const e of proof.events) {
    const leaf = await sha256(new Uint8Array([0]), b64(e.hash));
    const got = await rootFromInclusion(e.leaf_index, checkpoint.size, leaf, e.inclusion.map(b64));
    if (!got || !equal(got, root)) {
      throw new ProofError("not_included", `event ${e.version} (${e.type}) is not in the checkpoint's tree`);
    }
  }
  return checkpoint;
}
async function verifyConsistency(older, newer, proof, options) {
  await verifyCheckpoint(older, options);
  await verifyCheckpoint(newer, options);
  if (older.log !== newer.log || older.size > newer.size) throw new ProofError("inconsistent", "the checkpoints are of different logs, or the newer is smaller");
  const ok = await consistent(older.size, newer.size, b64(older.root), b64(newer.root), proof.map(b64));
  if (!ok) throw new ProofError("inconsistent", `the tree of size ${newer.size} does not extend the tree of size ${older.size}`);
}
async function rootFromInclusion(index, size, leaf, path) {
  if (!(index >= 0 && index < size)) return null;
  let fn = index, sn = size - 1, r = leaf;
  for (const p of path) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = await node(p, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      r = await node(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : null;
}
async function consistent(first, second, firstRoot, secondRoot, path) {
  if (first === second) return path.length === 0 && equal(firstRoot, secondRoot);
  if (first === 0 || first > second || path.length === 0) return false;
  if ((first & first - 1) === 0) path = [firstRoot, ...path];
  let fn = first - 1, sn = second - 1;
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr = path[0], sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = await node(c, fr);
      sr = await node(c, sr);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      sr = await node(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && equal(fr, firstRoot) && equal(sr, secondRoot);
}
function node(left, right) {
  return sha256(new Uint8Array([1]), left, right);
}
async function sha256(...parts) {
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return new Uint8Array(await crypto.subtle.digest("SHA-256", all));
}
function b64(s) {
  let bin;
  try {
    bin = atob(s);
  } catch {
    throw new ProofError("malformed", "a proof field is not base64");
  }
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}
function equal(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
export {
  OrderdClient,
  OrderdError,
  ProofError,
  WatchError,
  WebhookSignatureError,
  maxAgeSeconds,
  newKey,
  operations,
  signatureHeader,
  verifyCheckpoint,
  verifyConsistency,
  verifyProof,
  verifyWebhook
};
