// The customer's page: the menu, a cart, place and pay (a demo payment),
// then a live ticket for the order.
import { $, el, client, indicate, signIn, money, duration, ticketCode, showError, pauseText, getJSON } from "/assets/common.js";
import { verifyReceipt } from "/assets/receipt.js";
import { newKey } from "/assets/orderd-client.js";

const merchantID = new URLSearchParams(location.search).get("merchant");
const orderKey = "orderd.order." + merchantID;
const cart = new Map(); // product id -> quantity
let products = [], merchant = null, currency = "USD";
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
  let s;
  try { s = await signIn(); } catch (e) { $("signin-why").textContent = e.message; }
  if (!s) { $("signin").classList.remove("hidden"); return; }
  if (!merchantID) { $("signin").classList.remove("hidden"); $("signin-why").textContent = "This link names no shop (?merchant=…)."; return; }
  $("app").classList.remove("hidden");
  try {
    [merchant, { products }] = await Promise.all([
      client.getMerchant(merchantID),
      client.listProducts(merchantID),
    ]);
  } catch (e) { showError(e.message, "read"); return; }
  currency = merchant.currency || "USD";
  $("shop").textContent = merchant.name;
  document.title = merchant.name;
  showLoad(merchant.load);
  renderMenu();
  loadSlots();
  const kept = sessionStorage.getItem(orderKey);
  if (kept) {
    try { showOrder(await client.getOrder(kept)); watch(kept); }
    catch { sessionStorage.removeItem(orderKey); }
  }
  // A customer may not watch the merchant's load live: a pause is read
  // with the merchant every 10 s while the page is in view, when it comes
  // back into view, and with every change of the order.
  setInterval(() => { if (!document.hidden) refreshMerchant(); }, 10000);
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refreshMerchant(); });
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

async function refreshMerchant() {
  try { showLoad((await client.getMerchant(merchantID)).load); } catch { /* the next poll tries again */ }
}

function showLoad(load) {
  const text = pauseText(load);
  $("paused").textContent = text;
  $("paused").classList.toggle("hidden", !text);
}

function renderMenu() {
  $("menu").replaceChildren(...products.map((p) => {
    const soldOut = p.stock_remaining === 0;
    const count = el("output", { text: String(cart.get(p.id) || 0) });
    const change = (d) => {
      const n = Math.max(0, Math.min(100, (cart.get(p.id) || 0) + d));
      if (n) cart.set(p.id, n); else cart.delete(p.id);
      placeKey = null; // another cart is another order
      count.textContent = String(n);
      renderCart();
    };
    return el("li", { data: { productId: p.id } },
      el("div", { class: "name" }, p.name, el("span", { class: "price", text: soldOut ? "sold out" : money(p.price_cents, currency) })),
      el("div", { class: "qty" },
        el("button", { class: "ghost less", "aria-label": "one less", text: "−", disabled: soldOut, onclick: () => change(-1) }),
        count,
        el("button", { class: "more", "aria-label": "one more", text: "+", disabled: soldOut, onclick: () => change(1) })));
  }));
  renderCart();
}

function renderCart() {
  let items = 0, cents = 0;
  for (const [id, n] of cart) {
    const p = products.find((x) => x.id === id);
    if (p) { items += n; cents += n * p.price_cents; }
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
  const items = [...cart].map(([product_id, quantity]) => ({ product_id, quantity }));
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
  orderLive = client.watchOrder(id, (o) => { showOrder(o); refreshMerchant(); },
    { onState: indicate($("live")), onError: (e) => showError(e.message, "read") });
}

// showOrder shows an order unless an older state of it arrives after a
// newer one (an answer and a push may cross).
function showOrder(o) {
  if (order && order.id === o.id && o.version < order.version) return;
  order = o;
  const t = $("ticket");
  t.classList.remove("hidden");
  t.classList.toggle("ready", o.status === "completed");
  $("pickup").textContent = ticketCode(o);
  $("ready").classList.toggle("hidden", o.status !== "completed");
  $("status").textContent = statusText[o.status] || o.status;
  $("status").dataset.status = o.status;
  const queued = o.status === "queued";
  $("waiting").classList.toggle("hidden", !queued);
  $("position").textContent = queued && o.queue_position != null ? String(o.queue_position) : "—";
  $("eta").textContent = queued ? duration(o.eta_seconds) : "—";
  $("ticket-items").replaceChildren(...o.items.map((it) => {
    const p = products.find((x) => x.id === it.product_id);
    return el("li", { text: it.quantity + " × " + (p ? p.name : "item") });
  }));
  $("ticket-total").textContent = money(o.total_cents, currency) + (o.status_reason ? " · " + o.status_reason : "");
  $("pay").classList.toggle("hidden", o.status !== "awaiting_payment");
  $("cancel").classList.toggle("hidden", !(o.status === "awaiting_payment" || queued || o.status === "scheduled"));
  $("pickup-at").classList.toggle("hidden", !o.pickup_at);
  $("pickup-at").textContent = o.pickup_at ? "pickup at " + new Date(o.pickup_at).toLocaleString(undefined,
    { weekday: "short", hour: "2-digit", minute: "2-digit", timeZone: merchant ? merchant.timezone : undefined }) : "";
  $("again").classList.toggle("hidden", !terminal.has(o.status));
  $("verified").classList.toggle("hidden", verifiedOrder !== o.id);
  if (o.status === "completed") checkReceipt(o.id);
  renderCart();
}

// A completed order is marked verified once its receipt, every event of it
// the latest checkpoint holds, checks out in this browser. The log takes
// up to a checkpoint interval to hold the completion, so it is asked again
// until then.
let verifiedOrder = null, receiptTimer = null;
async function checkReceipt(id) {
  clearTimeout(receiptTimer);
  if (verifiedOrder === id) return;
  try {
    const receipt = await getJSON("/v1/orders/" + encodeURIComponent(id) + "/proof");
    const complete = receipt.events.some((e) => e.type === "order.completed");
    if (complete && await verifyReceipt(receipt)) {
      verifiedOrder = id;
      if (order && order.id === id) $("verified").classList.remove("hidden");
      return;
    }
  } catch { /* no checkpoint yet, or offline: asked again below */ }
  receiptTimer = setTimeout(() => { if (order && order.id === id) checkReceipt(id); }, 15000);
}

start();
