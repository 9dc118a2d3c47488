// The customer's page: the menu with its choices, a cart, place and pay (a
// demo payment), then a live ticket for the order. Opened from a QR code on
// the counter (/?merchant=<id>) without a sign-in link, it offers to order
// as a guest where the shop allows it.
import { $, el, client, indicate, signIn, startGuest, money, duration, ticketCode, showError, pauseText, getJSON, optionNames } from "/assets/common.js";
import { verifyReceipt } from "/assets/receipt.js";
import { newKey } from "/assets/orderd-client.js";

const merchantID = new URLSearchParams(location.search).get("merchant");
const orderKey = "orderd.order." + merchantID;
const cart = new Map(); // product id -> quantity
// choices holds each product's chosen option ids, kept across menu
// refreshes so a change of the menu never undoes what a person picked.
const choices = new Map(); // product id -> Set of option ids
let products = [], menuSeen = "", merchant = null, currency = "USD";
let order = null, orderLive = null;
// placeKey is the Idempotency-Key of the cart being placed; busy while a
// placement is in flight.
let placeKey = null, busy = false;

const statusText = {
  awaiting_payment: "Waiting for payment",
  scheduled: "Scheduled",
  queued: "In line",
  accepted: "Being prepared",
  completed: "Ready for pickup",
  cancelled: "Cancelled",
  expired: "Expired in line",
  closed: "Closed unpaid",
};
const terminal = new Set(["completed", "cancelled", "expired", "closed"]);

async function start() {
  let s, failed = false;
  try { s = await signIn(); } catch (e) { $("signin-why").textContent = e.message; failed = true; }
  if (!s && merchantID) {
    // A walk-in customer: the shop's QR code brought them here. A sign-in
    // link that did not work says why, and ordering as a guest is offered
    // all the same.
    $("signin").classList.remove("hidden");
    if (!failed) {
      $("signin-title").textContent = "Welcome";
      $("signin-why").textContent = "Order here and pick up at the counter when your code is called.";
    }
    $("order-here").classList.remove("hidden");
    return;
  }
  if (!s) { $("signin").classList.remove("hidden"); return; }
  if (!merchantID) { $("signin").classList.remove("hidden"); $("signin-why").textContent = "This link names no shop (?merchant=…)."; return; }
  open();
}

$("order-here").onclick = async () => {
  $("order-here").disabled = true;
  try {
    if (!(await startGuest(merchantID))) {
      $("order-here").classList.add("hidden");
      $("signin-why").textContent = "This shop takes orders through a sign-in link only; ask at the counter.";
      return;
    }
  } catch (e) {
    $("signin-why").textContent = e.message;
    $("order-here").disabled = false;
    return;
  }
  $("signin").classList.add("hidden");
  open();
};

async function open() {
  $("app").classList.remove("hidden");
  try {
    [merchant] = await Promise.all([client.getMerchant(merchantID), readMenu()]);
  } catch (e) { showError(e.message, "read"); return; }
  currency = merchant.currency || "USD";
  $("shop").textContent = merchant.name;
  document.title = merchant.name;
  showStatus(merchant.load);
  loadSlots();
  // The shop's public status (open, paused, how long the line is) comes
  // live over the client's one websocket, which the ticket shares.
  client.watchMerchant(merchantID, showStatus, { onState: indicate($("live")), onError: (e) => showError(e.message, "read") });
  const kept = sessionStorage.getItem(orderKey);
  if (kept) {
    try { showOrder(await client.getOrder(kept)); watch(kept); }
    catch { sessionStorage.removeItem(orderKey); }
  }
  // The menu (a new price, a drink sold out) is read every 10 s while the
  // page is in view and when it comes back into view; the pause comes live.
  setInterval(() => { if (!document.hidden) refreshMenu(); }, 10000);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refreshMenu(); });
}

// loadSlots offers "as soon as possible" and the published pickup slots
// of today and tomorrow (the merchant's days) that still have room.
async function loadSlots() {
  if (!merchant || !merchant.slots) return;
  const when = $("when");
  const chosen = when.value;
  const days = [0, 1].map((d) => new Date(Date.now() + d * 86400000).toLocaleDateString("en-CA", { timeZone: merchant.timezone }));
  let slots = [];
  try {
    for (const date of days) {
      slots = slots.concat((await client.listSlots(merchantID, { date })).slots);
    }
  } catch { return; }
  const fmt = new Intl.DateTimeFormat(undefined, { weekday: "short", hour: "2-digit", minute: "2-digit", timeZone: merchant.timezone });
  when.replaceChildren(el("option", { value: "", text: "As soon as possible" }),
    ...slots.map((s) => el("option", { value: s.starts_at, disabled: s.available === 0,
      text: fmt.format(new Date(s.starts_at)) + (s.available === 0 ? " — full" : "") })));
  when.value = [...when.options].some((o) => o.value === chosen && !o.disabled) ? chosen : "";
  when.classList.toggle("hidden", slots.length === 0);
}
$("when").onchange = () => { placeKey = null; };

async function refreshMenu() {
  try { await readMenu(); } catch { /* the next poll tries again */ }
}

// readMenu reads the menu and draws it again only when it changed, so a
// refresh never moves what is under a finger.
async function readMenu() {
  const { products: menu } = await client.listProducts(merchantID);
  const seen = JSON.stringify(menu);
  if (seen === menuSeen) return;
  menuSeen = seen;
  products = menu;
  for (const id of [...cart.keys()]) {
    const p = products.find((x) => x.id === id);
    if (!p || !orderable(p)) cart.delete(id);
  }
  renderMenu();
}

// showStatus shows a pause and the line's length and wait: the fields of a
// merchant's load as the merchant is read, or of its public status.
function showStatus(status) {
  const text = pauseText(status);
  $("paused").textContent = text;
  $("paused").classList.toggle("hidden", !text);
  $("line").textContent = !status.queued ? "No wait right now"
    : (status.queued === 1 ? "1 order" : status.queued + " orders") + " in line · about " + duration(status.est_wait_seconds);
}

const orderable = (p) => p.available !== false && p.stock_remaining !== 0;

// chosen is a product's current choice: what the person picked, with each
// required one-of-a-kind group (a size) defaulting to its first option.
function chosen(p) {
  if (!choices.has(p.id)) {
    const picked = new Set();
    for (const g of p.option_groups || []) if (g.min_select === 1 && g.max_select === 1) picked.add(g.options[0].id);
    choices.set(p.id, picked);
  }
  const picked = choices.get(p.id);
  // Options the menu no longer has are no longer chosen.
  const known = new Set((p.option_groups || []).flatMap((g) => g.options.map((o) => o.id)));
  for (const id of [...picked]) if (!known.has(id)) picked.delete(id);
  return picked;
}

// unitPrice is a unit's price with the chosen options.
function unitPrice(p) {
  const picked = chosen(p);
  let cents = p.price_cents;
  for (const g of p.option_groups || []) for (const o of g.options) if (picked.has(o.id)) cents += o.price_delta_cents;
  return Math.max(cents, 0);
}

// missing names the first required group without enough choices.
function missing(p) {
  const picked = chosen(p);
  const g = (p.option_groups || []).find((g) => g.options.filter((o) => picked.has(o.id)).length < g.min_select);
  return g ? g.name : "";
}

function renderMenu() {
  $("menu").replaceChildren(...products.map((p) => {
    const soldOut = !orderable(p);
    const count = el("output", { text: String(cart.get(p.id) || 0) });
    const price = el("span", { class: "price", text: soldOut ? "sold out today" : money(unitPrice(p), currency) });
    const change = (d) => {
      const n = Math.max(0, Math.min(100, (cart.get(p.id) || 0) + d));
      if (n) cart.set(p.id, n); else cart.delete(p.id);
      placeKey = null; // another cart is another order
      count.textContent = String(n);
      renderCart();
    };
    const refresh = () => { price.textContent = money(unitPrice(p), currency); placeKey = null; renderCart(); };
    return el("li", { data: { productId: p.id }, class: soldOut ? "soldout" : "" },
      el("div", { class: "row" },
        el("div", { class: "name" }, p.name, price),
        el("div", { class: "qty" },
          el("button", { class: "ghost less", "aria-label": "one less", text: "−", disabled: soldOut, onclick: () => change(-1) }),
          count,
          el("button", { class: "more", "aria-label": "one more", text: "+", disabled: soldOut, onclick: () => change(1) }))),
      soldOut ? null : (p.option_groups || []).map((g) => groupChoices(p, g, refresh)));
  }));
  renderCart();
}

// groupChoices draws a group as radio buttons when exactly one is chosen
// (a size), else as checkboxes that stop at max_select.
function groupChoices(p, g, changed) {
  const picked = chosen(p);
  const one = g.min_select === 1 && g.max_select === 1;
  const hint = one ? "" : g.max_select === 1 ? "optional" : (g.min_select ? "choose " + g.min_select + "–" : "up to ") + g.max_select;
  const inputs = [];
  const limit = () => {
    if (one) return;
    const n = inputs.filter((i) => i.checked).length;
    for (const i of inputs) i.disabled = !i.checked && n >= g.max_select;
  };
  const box = el("fieldset", { class: "group", data: { groupId: g.id } },
    el("legend", {}, g.name, hint ? el("span", { class: "muted", text: " · " + hint }) : null),
    g.options.map((o) => {
      const input = el("input", { type: one ? "radio" : "checkbox", name: p.id + "/" + g.id, value: o.id, checked: picked.has(o.id) });
      inputs.push(input);
      input.addEventListener("change", () => {
        if (one) for (const other of g.options) picked.delete(other.id);
        if (input.checked) picked.add(o.id); else picked.delete(o.id);
        limit();
        changed();
      });
      const delta = o.price_delta_cents ? (o.price_delta_cents > 0 ? " +" : " −") + money(Math.abs(o.price_delta_cents), currency) : "";
      return el("label", { class: "choice", data: { optionId: o.id } }, input, " " + o.name, delta ? el("span", { class: "muted", text: delta }) : null);
    }));
  limit();
  return box;
}

function renderCart() {
  let items = 0, cents = 0;
  for (const [id, n] of cart) {
    const p = products.find((x) => x.id === id);
    if (p) { items += n; cents += n * unitPrice(p); }
  }
  const busy = order && !terminal.has(order.status);
  $("cartbar").classList.toggle("hidden", busy);
  $("cart-count").textContent = items === 1 ? "1 item" : items + " items";
  $("cart-total").textContent = money(cents, currency);
  $("place").disabled = items === 0 || busy;
}

// place places the cart and pays for it. Its Idempotency-Key is kept until
// the order exists or the cart changes, so pressing again after a lost
// answer replays the same order rather than placing a second.
$("place").onclick = async () => {
  const lines = [...cart].map(([id, quantity]) => [products.find((x) => x.id === id), quantity]).filter(([p]) => p);
  const incomplete = lines.find(([p]) => missing(p));
  if (incomplete) { showError("Choose a " + missing(incomplete[0]).toLowerCase() + " for " + incomplete[0].name + "."); return; }
  const items = lines.map(([p, quantity]) => ({ product_id: p.id, quantity, options: [...chosen(p)] }));
  const body = { merchant_id: merchantID, items };
  if ($("when").value) body.pickup_at = $("when").value;
  placeKey = placeKey || newKey();
  busy = true;
  renderCart();
  try {
    const placed = await client.placeOrder(body, { idempotencyKey: placeKey });
    placeKey = null;
    cart.clear();
    renderMenu();
    sessionStorage.setItem(orderKey, placed.id);
    showOrder(placed);
    watch(placed.id);
    await pay();
  } catch (e) {
    showError(e.message);
    // A full slot or a closed shop: show what is left to choose from.
    if (e.code === "slot_full" || e.code === "merchant_closed") { placeKey = null; loadSlots(); }
    // A product sold out since the menu was read: read it again.
    if (e.code === "product_unavailable") refreshMenu();
  } finally {
    busy = false;
    renderCart();
  }
};

// pay is the demo payment: a real platform would take the money first and
// send its reference.
async function pay() {
  if (!order || order.status !== "awaiting_payment") return;
  try { showOrder(await client.payOrder(order.id, { payment_ref: "demo-" + order.id })); }
  catch (e) { showError(e.message); }
}
$("pay").onclick = pay;

$("cancel").onclick = async () => {
  try { showOrder(await client.cancelOrder(order.id, { reason: "cancelled by the customer" })); }
  catch (e) { showError(e.message); }
};

$("again").onclick = () => {
  if (orderLive) orderLive.close();
  orderLive = null;
  order = null;
  sessionStorage.removeItem(orderKey);
  $("ticket").classList.add("hidden");
  renderCart();
};

function watch(id) {
  if (orderLive) orderLive.close();
  orderLive = client.watchOrder(id, showOrder,
    { onState: indicate($("live")), onError: (e) => showError(e.message, "read") });
}

// showOrder shows an order unless an older state of it arrives after a
// newer one (an answer and a push may cross). An order the kitchen handed
// over (picked up) is done; one whose completion it undid is being
// prepared again.
function showOrder(o) {
  if (order && order.id === o.id && o.version < order.version) return;
  order = o;
  const ready = o.status === "completed" && !o.picked_up_at;
  const t = $("ticket");
  t.classList.remove("hidden");
  t.classList.toggle("ready", ready);
  $("pickup").textContent = ticketCode(o);
  $("ready").classList.toggle("hidden", !ready);
  $("status").textContent = o.picked_up_at ? "Picked up — enjoy!" : statusText[o.status] || o.status;
  $("status").dataset.status = o.status;
  const queued = o.status === "queued";
  $("waiting").classList.toggle("hidden", !queued);
  $("position").textContent = queued && o.queue_position != null ? String(o.queue_position) : "—";
  $("eta").textContent = queued ? duration(o.eta_seconds) : "—";
  $("ticket-items").replaceChildren(...o.items.map((it) => {
    const p = products.find((x) => x.id === it.product_id);
    const opts = optionNames(it);
    return el("li", {}, it.quantity + " × " + (it.name || (p ? p.name : "item")), opts ? el("div", { class: "opts", text: opts }) : null);
  }));
  $("ticket-total").textContent = money(o.total_cents, currency) + (o.status_reason ? " · " + o.status_reason : "");
  $("pay").classList.toggle("hidden", o.status !== "awaiting_payment");
  $("cancel").classList.toggle("hidden", !(o.status === "awaiting_payment" || queued || o.status === "scheduled"));
  $("pickup-at").classList.toggle("hidden", !o.pickup_at);
  $("pickup-at").textContent = o.pickup_at ? "pickup at " + new Date(o.pickup_at).toLocaleString(undefined,
    { weekday: "short", hour: "2-digit", minute: "2-digit", timeZone: merchant ? merchant.timezone : undefined }) : "";
  $("again").classList.toggle("hidden", !terminal.has(o.status));
  showReceipt();
  if (o.status === "completed") checkReceipt(o.id);
  renderCart();
}

// A completed order's receipt, every event of it the latest checkpoint
// holds, is checked in this browser: verified once it holds the completion
// and checks out; pending while the log has not checkpointed the
// completion yet (up to a checkpoint interval), asked again until then;
// broken when an event it holds is not in the signed log as it is now.
const receiptText = {
  verified: "✓ history verified",
  pending: "history not in a signed checkpoint yet",
  broken: "✗ this order's history does not match the shop's signed log",
};
let receipt = { id: null, state: "" }, receiptTimer = null;

function showReceipt() {
  const state = order && order.status === "completed" && receipt.id === order.id ? receipt.state : "";
  $("receipt").dataset.state = state;
  $("receipt").textContent = receiptText[state] || "";
  $("receipt").classList.toggle("hidden", !state);
}

async function checkReceipt(id) {
  clearTimeout(receiptTimer);
  if (receipt.id === id && (receipt.state === "verified" || receipt.state === "broken")) return;
  let state = "";
  try {
    // Before the log's first checkpoint the receipt has none and no event.
    const r = await getJSON("/v1/orders/" + encodeURIComponent(id) + "/proof");
    if (r.events.length && !await verifyReceipt(r)) state = "broken";
    else state = r.events.some((e) => e.type === "order.completed") ? "verified" : "pending";
  } catch {
    // Offline or refused: the line stays as it was.
  }
  if (state) receipt = { id, state };
  showReceipt();
  if (state !== "verified" && state !== "broken") {
    receiptTimer = setTimeout(() => { if (order && order.id === id) checkReceipt(id); }, 15000);
  }
}

start();
