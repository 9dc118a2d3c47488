// Shared by the customer page and the kitchen display: sign-in, the REST
// API, the live websocket, and building elements without ever parsing
// user text as markup.

export const $ = (id) => document.getElementById(id);

// el builds an element. Strings among the children become text nodes and
// the "text" property sets textContent, so no name a user typed can become
// markup; there is deliberately no way to set HTML here.
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v == null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k === "class") e.className = v;
    else if (k === "data") Object.assign(e.dataset, v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c != null && c !== false) e.append(c);
  return e;
}

// showError puts a message in the page's error box. The next request of
// the same kind that succeeds clears it, so an error never outlives what it
// was about: a failed action (a write) by a later action that works, a
// failed read by a later read, never a person's failed action by a
// background refresh they did not notice.
let errorBox = null, errorKind = null;
export function showError(message, kind = "write") {
  if (!errorBox) errorBox = $("error");
  if (errorBox) errorBox.textContent = message || "";
  errorKind = message ? kind : null;
}

const sessionKey = "orderd.session";

// signIn returns the session of this tab: {token, expires_at, sub, role,
// merchant_id}. A sign-in link carries a single-use code in its fragment
// (#code=...), which browsers never send to a server; it is removed from
// the address bar at once and exchanged for a token, which stays in this
// tab's sessionStorage and never appears in a URL.
export async function signIn() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const code = fragment.get("code");
  if (code) {
    history.replaceState(null, "", location.pathname + location.search);
    const r = await fetch("/v1/sign-in", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code }),
    });
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(data.detail || "sign-in failed");
    sessionStorage.setItem(sessionKey, JSON.stringify(data));
    return data;
  }
  const s = session();
  if (!s) sessionStorage.removeItem(sessionKey);
  return s;
}

// session is the tab's unexpired session, or null.
export function session() {
  let s = null;
  try { s = JSON.parse(sessionStorage.getItem(sessionKey) || "null"); } catch { s = null; }
  return s && s.token && new Date(s.expires_at) > new Date() ? s : null;
}

export class APIError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || "request failed (" + status + ")");
    this.status = status;
    this.code = problem.code;
  }
}

// api calls the REST API with the session's token on a person's behalf or
// to show them something: its success clears the error of the same kind.
export async function api(method, path, body, idempotencyKey) {
  const data = await request(method, path, body, idempotencyKey);
  if (errorKind === (method === "GET" ? "read" : "write")) showError("");
  return data;
}

// request calls the REST API with the session's token. Writes carry an
// Idempotency-Key: the caller passes one to make a retry safe, or gets a
// fresh one.
async function request(method, path, body, idempotencyKey) {
  const s = session();
  if (!s) throw new APIError(401, { detail: "signed out: open a new sign-in link" });
  const headers = { "Authorization": "Bearer " + s.token };
  if (method !== "GET") headers["Idempotency-Key"] = idempotencyKey || crypto.randomUUID();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new APIError(r.status, data);
  return data;
}

// live keeps one websocket open for a set of subscriptions. Every
// connection opens with a fresh single-use ticket (tickets live 60 s, so
// one is never kept for a reconnection), subscribes again, and the server
// answers each subscription with its current state: nothing missed while
// the network was away is lost. After a drop it retries with backoff, and
// at once when the browser says it is online again.
export function live(subscriptions, onMessage, indicator) {
  let ws = null, stopped = false, delay = 500, timer = null;
  const state = (text, cls) => { if (indicator) { indicator.textContent = text; indicator.className = "live " + cls; } };
  const retry = () => {
    ws = null;
    if (stopped) return;
    state("reconnecting…", "off");
    clearTimeout(timer);
    timer = setTimeout(open, delay);
    delay = Math.min(delay * 2, 10000);
  };
  const open = async () => {
    if (stopped || ws) return;
    let ticket;
    // A ticket is the page's own business, not a person's action: it
    // leaves the error box alone.
    try { ticket = (await request("POST", "/v1/ws/tickets")).ticket; } catch { retry(); return; }
    if (stopped) return;
    const sock = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v1/ws?ticket=" + encodeURIComponent(ticket));
    ws = sock;
    sock.onopen = () => {
      delay = 500;
      state("live", "on");
      for (const sub of subscriptions) sock.send(JSON.stringify({ op: "subscribe", ...sub }));
    };
    sock.onmessage = (e) => { try { onMessage(JSON.parse(e.data)); } catch (err) { console.error(err); } };
    sock.onclose = () => { if (ws === sock) retry(); };
  };
  const online = () => { if (!ws && !stopped) { delay = 500; clearTimeout(timer); open(); } };
  window.addEventListener("online", online);
  open();
  return {
    close() { stopped = true; clearTimeout(timer); window.removeEventListener("online", online); if (ws) ws.close(); state("", ""); },
  };
}

// money formats cents in the merchant's currency.
export function money(cents, currency) {
  try {
    return new Intl.NumberFormat(undefined, { style: "currency", currency: currency || "USD" }).format(cents / 100);
  } catch {
    return (cents / 100).toFixed(2);
  }
}

export function duration(seconds) {
  if (seconds == null) return "—";
  seconds = Math.max(0, Math.round(seconds));
  if (seconds < 60) return seconds + " s";
  if (seconds < 3600) return Math.round(seconds / 60) + " min";
  return Math.floor(seconds / 3600) + " h " + Math.round((seconds % 3600) / 60) + " min";
}

// clock formats an age as m:ss (or h:mm:ss).
export function clock(seconds) {
  seconds = Math.max(0, Math.floor(seconds));
  const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
  const pad = (n) => String(n).padStart(2, "0");
  return h ? h + ":" + pad(m) + ":" + pad(s) : m + ":" + pad(s);
}

// ticketCode is the order's pickup code, or on servers that assign none,
// the end of its id.
export function ticketCode(order) {
  return order.pickup_code || "#" + order.id.slice(-4).toUpperCase();
}

// features lists the optional endpoints this server has, read once from
// its OpenAPI document, so the pages gain controls as the API grows.
let featureList = null;
export async function features() {
  if (!featureList) {
    featureList = fetch("/openapi.json").then((r) => r.json()).then((doc) => ({
      pause: Boolean(doc.paths && doc.paths["/v1/merchants/{id}/pause"]),
      prioritize: Boolean(doc.paths && doc.paths["/v1/orders/{id}/prioritize"]),
    })).catch(() => ({ pause: false, prioritize: false }));
  }
  return featureList;
}

export function pauseText(load) {
  if (!load || !load.paused) return "";
  const until = load.paused_until ? " until " + new Date(load.paused_until).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : "";
  return load.pause_mode === "refuse"
    ? "The kitchen is not taking orders right now" + until + "."
    : "The kitchen is paused" + until + ": orders wait in line until it resumes.";
}
