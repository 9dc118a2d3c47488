// Shared by the customer page and the kitchen display: sign-in, the
// orderd client, and building elements without ever parsing user text as
// markup.
import { OrderdClient, OrderdError } from "/assets/orderd-client.js";

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
    const data = await client.signIn({ code });
    sessionStorage.setItem(sessionKey, JSON.stringify(data));
    return data;
  }
  const s = session();
  if (!s) sessionStorage.removeItem(sessionKey);
  return s;
}

// startGuest takes a guest session at a merchant that lets walk-in
// customers order without an account (a QR code on the counter), and keeps
// it like a signed-in one. It answers null when the shop takes no guests.
export async function startGuest(merchantID) {
  let data;
  try {
    data = await client.startGuestSession(merchantID);
  } catch (e) {
    if (e.code === "not_found") return null;
    throw e;
  }
  const s = { ...data, role: "customer" };
  sessionStorage.setItem(sessionKey, JSON.stringify(s));
  return s;
}

// session is the tab's unexpired session, or null.
export function session() {
  let s = null;
  try { s = JSON.parse(sessionStorage.getItem(sessionKey) || "null"); } catch { s = null; }
  return s && s.token && new Date(s.expires_at) > new Date() ? s : null;
}

// client is @orderd/client (built from clients/js) calling this origin
// with the tab's session: typed calls, each write with its own
// Idempotency-Key, and live watches over single-use websocket tickets. A
// call that succeeds clears the error of its kind (a read's GET, a
// write's other method); tickets are the page's own business and leave the
// error box alone.
export const client = new OrderdClient({
  token: () => {
    const s = session();
    if (!s) throw new OrderdError(401, { detail: "signed out: open a new sign-in link" });
    return s.token;
  },
  fetch: async (url, init) => {
    const r = await fetch(url, init);
    if (r.ok && !url.endsWith("/v1/ws/tickets") && errorKind === (init.method === "GET" ? "read" : "write")) showError("");
    return r;
  },
});

// getJSON reads a path of this origin with the tab's session, for the
// calls @orderd/client does not name yet (receipts).
export async function getJSON(path) {
  const s = session();
  if (!s) throw new OrderdError(401, { detail: "signed out: open a new sign-in link" });
  const r = await fetch(path, { headers: { Authorization: "Bearer " + s.token } });
  const body = await r.json();
  if (!r.ok) throw new OrderdError(r.status, body);
  return body;
}

// indicate shows a watch's state in a page's live badge.
export function indicate(badge) {
  const text = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", closed: "" };
  const cls = { connecting: "off", live: "on", reconnecting: "off", closed: "" };
  return (state) => {
    if (!badge) return;
    badge.textContent = text[state];
    badge.className = "live " + cls[state];
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

// optionNames is a line's chosen options as one short text.
export function optionNames(item) {
  return (item.options || []).map((o) => o.name).join(" · ");
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
    featureList = client.openapi().then((doc) => ({
      pause: Boolean(doc.paths && doc.paths["/v1/merchants/{id}/pause"]),
      prioritize: Boolean(doc.paths && doc.paths["/v1/orders/{id}/prioritize"]),
      pickup: Boolean(doc.paths && doc.paths["/v1/orders/{id}/picked-up"]),
    })).catch(() => ({ pause: false, prioritize: false, pickup: false }));
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
