// The kitchen display: accepted orders as tickets to complete or cancel,
// completed ones waiting at the counter (picked up, or undone within a
// minute), the waiting line, capacity and pause, all kept live by the
// merchant's load messages; a chime and a flash for every new order; the
// menu; and the shop's order-here QR code to show or print.
import { $, el, client, indicate, signIn, money, duration, clock, ticketCode, showError, features, pauseText, getJSON, optionNames } from "/assets/common.js";

let merchantID = null, canPrioritize = false, canPickUp = false, merchant = null;
const productNames = new Map();
let lastLoad = null;
// reopenWindow is how long after its completion the kitchen may undo it.
const reopenWindow = 60;

async function start() {
  let s;
  try { s = await signIn(); } catch (e) { $("signin-why").textContent = e.message; }
  if (!s) { $("signin").classList.remove("hidden"); return; }
  // A merchant's kitchen is its own; an admin names the merchant.
  merchantID = s.merchant_id || new URLSearchParams(location.search).get("merchant");
  if (!merchantID) { $("signin").classList.remove("hidden"); $("signin-why").textContent = "Which merchant? Add ?merchant=<id> to the address."; return; }
  $("app").classList.remove("hidden");
  try {
    merchant = await client.getMerchant(merchantID);
    await loadProducts();
  } catch (e) { showError(e.message, "read"); return; }
  $("shop").textContent = merchant.name;
  document.title = "Kitchen — " + merchant.name;
  showLoad(merchant.load);
  $("capacity").value = merchant.load.capacity;
  const can = await features();
  if (can.pause) $("pause-controls").classList.remove("hidden");
  canPrioritize = can.prioritize;
  canPickUp = can.pickup;
  client.watchMerchantLoad(merchantID, (load) => { showLoad(load); refresh(); },
    { onState: indicate($("live")), onError: (e) => showError(e.message, "read") });
  refresh();
  setInterval(tick, 1000);
  // Loads that come back to the same numbers send no message; a slow
  // refresh keeps the lists right even then.
  setInterval(() => { if (!document.hidden) refresh(); }, 15000);
}

// renderSlots shows the merchant's coming pickup slots (of today and
// tomorrow, its own days) with the load their orders take, the next few
// first.
async function renderSlots(merchant) {
  $("slots-card").classList.toggle("hidden", !merchant.slots);
  if (!merchant.slots) return;
  let slots = [];
  for (const d of [0, 1]) {
    const date = new Date(Date.now() + d * 86400000).toLocaleDateString("en-CA", { timeZone: merchant.timezone });
    slots = slots.concat((await client.listSlots(merchantID, { date })).slots);
  }
  const fmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", timeZone: merchant.timezone });
  const unit = merchant.capacity_unit === "items" ? " items" : "";
  const coming = slots.slice(0, 12);
  $("slots").replaceChildren(...(coming.length ? coming.map((sl) => el("li", { class: sl.available === 0 ? "full" : "" },
    el("span", { class: "pos", text: fmt.format(new Date(sl.starts_at)) }),
    el("span", { class: "what" }, el("meter", { min: 0, max: sl.capacity, value: sl.taken, "aria-label": "load" })),
    el("span", { class: "when", text: sl.taken + " / " + sl.capacity + unit }))) : [el("li", { class: "empty", text: "No coming slots" })]));
}

let menu = [];
async function loadProducts() {
  ({ products: menu } = await client.listProducts(merchantID));
  for (const p of menu) productNames.set(p.id, p.name);
}

function showLoad(load) {
  lastLoad = { ...lastLoad, ...load };
  const l = lastLoad;
  $("active").textContent = String(l.active);
  $("capacity-now").textContent = String(l.capacity) + (l.capacity_unit === "items" ? " items" : "");
  $("queued").textContent = String(l.queued);
  $("est-wait").textContent = l.est_wait_seconds != null ? duration(l.est_wait_seconds) : "—";
  // A number being typed is the merchant's until it is set: live updates
  // must not put the old capacity back under their fingers.
  if (!capacityEdited && document.activeElement !== $("capacity")) $("capacity").value = l.capacity;
  const paused = Boolean(l.paused);
  $("paused-badge").classList.toggle("hidden", !paused);
  $("paused-badge").textContent = paused ? "PAUSED" + (l.pause_mode === "refuse" ? " · refusing" : " · queueing") : "";
  $("paused-badge").title = pauseText(l);
  $("pause-queue").classList.toggle("hidden", paused);
  $("pause-refuse").classList.toggle("hidden", paused);
  $("resume").classList.toggle("hidden", !paused);
}

// refresh reads both lists; loads that arrive meanwhile ask for one more
// read, not one each.
let refreshing = false, again = false;
async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  try {
    const [m, accepted, queued, completed] = await Promise.all([
      client.getMerchant(merchantID),
      client.listMerchantOrders(merchantID, { status: "accepted", limit: 100 }),
      client.listMerchantOrders(merchantID, { status: "queued", limit: 100 }),
      canPickUp ? client.listMerchantOrders(merchantID, { status: "completed", limit: 50 }) : { orders: [] }]);
    merchant = m;
    showLoad(m.load);
    const unknown = [...accepted.orders, ...queued.orders].some((o) => o.items.some((it) => !it.name && !productNames.has(it.product_id)));
    if (unknown) await loadProducts();
    announce([...accepted.orders, ...queued.orders]);
    renderTickets(accepted.orders);
    renderReady(completed.orders.filter((o) => !o.picked_up_at));
    renderLine(queued.orders);
    await renderSlots(merchant);
  } catch (e) {
    showError(e.message, "read");
  } finally {
    refreshing = false;
  }
  if (again) { again = false; refresh(); }
}

const nameOf = (it) => it.name || productNames.get(it.product_id) || "unknown item";

function itemsOf(o) {
  return o.items.map((it) => it.quantity + " × " + nameOf(it) + (it.options && it.options.length ? " (" + optionNames(it) + ")" : ""));
}

// lineItems draws an order's lines for a ticket: each on its own line, its
// options under it, where the person making it looks.
function lineItems(o) {
  return el("ul", {}, o.items.map((it) => el("li", {}, it.quantity + " × " + nameOf(it),
    it.options && it.options.length ? el("div", { class: "opts", text: optionNames(it) }) : null)));
}

// announce chimes and flashes once for every order the display has not
// shown before; the orders present when it opens are not news.
const announced = new Set();
let primed = false;
function announce(orders) {
  const fresh = orders.filter((o) => !announced.has(o.id));
  for (const o of fresh) announced.add(o.id);
  if (!primed) { primed = true; return; }
  if (fresh.length) { chime(); flash(); }
}

let audio = null;
const muted = () => localStorage.getItem("orderd.kitchen.muted") === "1";
// Browsers let a page make sound only after a person touched it; the
// kitchen taps the display all day, and the first tap wakes the sound.
document.addEventListener("pointerdown", () => {
  if (!audio && window.AudioContext) audio = new AudioContext();
  if (audio && audio.state === "suspended") audio.resume();
}, { capture: true });
function chime() {
  if (muted()) return;
  document.body.dataset.chimes = String(Number(document.body.dataset.chimes || 0) + 1);
  if (!audio || audio.state !== "running") return;
  const t = audio.currentTime;
  for (const [i, freq] of [880, 1320].entries()) {
    const osc = audio.createOscillator(), gain = audio.createGain();
    osc.frequency.value = freq;
    gain.gain.setValueAtTime(0.0001, t + i * 0.18);
    gain.gain.exponentialRampToValueAtTime(0.3, t + i * 0.18 + 0.02);
    gain.gain.exponentialRampToValueAtTime(0.0001, t + i * 0.18 + 0.35);
    osc.connect(gain).connect(audio.destination);
    osc.start(t + i * 0.18);
    osc.stop(t + i * 0.18 + 0.4);
  }
}
function flash() {
  document.body.dataset.flashes = String(Number(document.body.dataset.flashes || 0) + 1);
  document.body.classList.remove("flash");
  void document.body.offsetWidth; // restart the animation
  document.body.classList.add("flash");
}
function showMute() {
  $("mute").textContent = muted() ? "🔕 Muted" : "🔔 Sound on";
  $("mute").setAttribute("aria-pressed", String(muted()));
}
$("mute").onclick = () => { localStorage.setItem("orderd.kitchen.muted", muted() ? "0" : "1"); showMute(); };
showMute();


// cards keeps each ticket's element by order id. An accepted order's ticket
// never changes, so a refresh moves the same elements rather than making
// new ones: a button being pressed or a reason being typed survives every
// refresh.
const cards = new Map();

function renderTickets(orders) {
  // Oldest first: the kitchen works from the left.
  orders.sort((a, b) => new Date(a.accepted_at) - new Date(b.accepted_at));
  const current = new Set(orders.map((o) => o.id));
  for (const id of cards.keys()) if (!current.has(id)) cards.delete(id);
  if (!orders.length) { $("tickets").replaceChildren(el("p", { class: "empty", text: "Nothing to prepare." })); return; }
  arrange($("tickets"), orders.map((o) => {
    if (!cards.has(o.id)) cards.set(o.id, ticketCard(o));
    return cards.get(o.id);
  }));
  tick();
}

// arrange makes nodes the children of parent, moving only those not
// already in their place: a moved element loses focus, and the kitchen may
// be typing a reason into one.
function arrange(parent, nodes) {
  nodes.forEach((node, i) => {
    if (parent.children[i] !== node) parent.insertBefore(node, parent.children[i] || null);
  });
  while (parent.children.length > nodes.length) parent.lastElementChild.remove();
}

function ticketCard(o) {
  const reason = el("input", { type: "text", maxlength: "200", placeholder: "reason (the customer sees it)", "aria-label": "cancel reason" });
  const form = el("form", { class: "hidden" },
    reason,
    el("div", { class: "actions" },
      el("button", { type: "submit", class: "bad confirm-cancel", text: "Cancel order" }),
      el("button", { type: "button", class: "ghost", text: "Keep", onclick: () => form.classList.add("hidden") })));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    act(card, (id) => client.cancelOrder(id, { reason: reason.value.trim() || "cancelled by the kitchen" }));
  });
  const card = el("article", { class: "card kticket", data: { orderId: o.id } },
    el("div", { class: "code", text: ticketCode(o) }),
    lineItems(o),
    o.load != null && o.load !== 1 ? el("div", { class: "muted", text: "load " + o.load }) : null,
    el("div", { class: "age", data: { since: o.accepted_at } }),
    el("div", { class: "actions" },
      el("button", { class: "ok complete", text: "Complete", onclick: () => act(card, (id) => client.completeOrder(id)) }),
      el("button", { class: "ghost cancel", text: "Cancel…", onclick: () => { form.classList.remove("hidden"); reason.focus(); } })),
    form);
  return card;
}

// readyCards keeps the ready column's cards by order id, as cards does.
const readyCards = new Map();

// renderReady shows completed orders waiting at the counter, oldest first:
// picked up clears one; undo, within a minute of its completion, puts it
// back among the tickets.
function renderReady(orders) {
  orders.sort((a, b) => new Date(a.completed_at) - new Date(b.completed_at));
  const current = new Set(orders.map((o) => o.id));
  for (const id of readyCards.keys()) if (!current.has(id)) readyCards.delete(id);
  if (!orders.length) { $("ready-tickets").replaceChildren(el("p", { class: "empty", text: "Nothing waiting at the counter." })); return; }
  arrange($("ready-tickets"), orders.map((o) => {
    if (!readyCards.has(o.id)) readyCards.set(o.id, readyCard(o));
    return readyCards.get(o.id);
  }));
  tick();
}

function readyCard(o) {
  const card = el("article", { class: "card rticket", data: { orderId: o.id, completed: o.completed_at } },
    el("div", { class: "code", text: ticketCode(o) }),
    lineItems(o),
    el("div", { class: "age" }),
    el("div", { class: "actions" },
      el("button", { class: "ok picked-up", text: "Picked up", onclick: () => act(card, (id) => client.pickUpOrder(id)) }),
      el("button", { class: "ghost undo", text: "Undo", title: "back to preparing (within a minute of completing)", onclick: () => act(card, (id) => client.reopenOrder(id)) })));
  return card;
}

function renderLine(orders) {
  if (!orders.length) { $("line").replaceChildren(el("li", { class: "empty", text: "Nobody waiting." })); return; }
  $("line").replaceChildren(...orders.map((o) => el("li", { data: { orderId: o.id, since: o.paid_at || o.placed_at } },
    el("span", { class: "pos", text: String(o.queue_position ?? "") }),
    el("span", { class: "what" },
      el("b", { text: ticketCode(o) }), " ", itemsOf(o).join(", "),
      o.load != null && o.load !== 1 ? el("span", { class: "muted", text: " · load " + o.load }) : null,
      o.lane === "priority" ? el("span", { class: "muted", text: " · priority" }) : null),
    el("span", { class: "when" }, "in " + duration(o.eta_seconds),
      canPrioritize && o.lane !== "priority"
        ? el("button", { class: "ghost small prioritize", text: "Priority", title: "move to the priority lane",
          onclick: (e) => prioritize(e.target, o.id) })
        : null))));
}

async function prioritize(button, id) {
  button.disabled = true;
  try { await client.prioritizeOrder(id, { reason: "moved up by the kitchen" }); refresh(); }
  catch (e) { showError(e.message); button.disabled = false; }
}

// act completes or cancels an order; the list is read again when the
// server's load message says what changed.
async function act(card, call) {
  for (const b of card.querySelectorAll("button")) b.disabled = true;
  try {
    await call(card.dataset.orderId);
    cards.delete(card.dataset.orderId);
    readyCards.delete(card.dataset.orderId);
    card.remove();
    refresh();
  } catch (e) {
    showError(e.message);
    for (const b of card.querySelectorAll("button")) b.disabled = false;
  }
}

// tick moves every ticket's age on, and hides an undo whose minute is up.
function tick() {
  const now = Date.now();
  for (const a of document.querySelectorAll(".kticket .age")) {
    const age = (now - new Date(a.dataset.since)) / 1000;
    a.textContent = "accepted " + clock(age) + " ago";
  }
  for (const card of document.querySelectorAll(".rticket")) {
    const age = (now - new Date(card.dataset.completed)) / 1000;
    card.querySelector(".age").textContent = "ready " + clock(age) + " ago";
    card.querySelector(".undo").classList.toggle("hidden", age > reopenWindow);
  }
}

// Views: the orders board, or the menu.
function view(menuShown) {
  $("board").classList.toggle("hidden", menuShown);
  $("menu-screen").classList.toggle("hidden", !menuShown);
  $("show-orders").setAttribute("aria-pressed", String(!menuShown));
  $("show-menu").setAttribute("aria-pressed", String(menuShown));
  if (menuShown) loadProducts().then(renderMenu, (e) => showError(e.message, "read"));
}
$("show-orders").onclick = () => view(false);
$("show-menu").onclick = () => view(true);

// renderMenu lists the menu, each item with its own form: a price typed in
// the shop's currency units, sold out today, save, remove.
function renderMenu() {
  const currency = (merchant && merchant.currency) || "USD";
  if (!menu.length) { $("menu-items").replaceChildren(el("p", { class: "empty", text: "The menu is empty." })); return; }
  $("menu-items").replaceChildren(...menu.map((p) => {
    const name = el("input", { type: "text", value: p.name, maxlength: "200", "aria-label": "name", class: "name" });
    const price = el("input", { type: "text", inputmode: "decimal", value: (p.price_cents / 100).toFixed(2), "aria-label": "price", class: "price" });
    const soldOut = el("input", { type: "checkbox", class: "sold-out", checked: p.available === false });
    const groups = (p.option_groups || []).map((g) => g.name + ": " + g.options.map((o) =>
      o.name + (o.price_delta_cents ? " " + (o.price_delta_cents > 0 ? "+" : "−") + money(Math.abs(o.price_delta_cents), currency) : "")).join(", "));
    const form = el("form", { class: "card menu-item", data: { productId: p.id } },
      el("div", { class: "fields" }, name, price,
        el("label", { class: "choice" }, soldOut, " sold out today")),
      groups.length ? el("ul", { class: "muted" }, groups.map((g) => el("li", { text: g }))) : null,
      el("div", { class: "actions" },
        el("button", { type: "submit", class: "save", text: "Save" }),
        el("button", { type: "button", class: "ghost bad-text remove", text: "Remove from menu", onclick: () => removeItem(form) })));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const cents = Math.round(Number(price.value.replace(",", ".")) * 100);
      if (!/^\d+([.,]\d{1,2})?$/.test(price.value.trim())) { showError("the price must be a number like 4.50"); return; }
      saveItem(form, { name: name.value.trim(), price_cents: cents, available: !soldOut.checked });
    });
    return form;
  }));
}

async function saveItem(form, body) {
  try {
    await client.updateProduct(merchantID, form.dataset.productId, body);
    await loadProducts();
    renderMenu();
  } catch (e) { showError(e.message); }
}
async function removeItem(form) {
  try {
    await client.hideProduct(merchantID, form.dataset.productId);
    await loadProducts();
    renderMenu();
  } catch (e) { showError(e.message); }
}

// The order-here QR code: the customer page of this shop, drawn by the
// server, to show on a screen or print for the counter.
$("show-qr").onclick = () => {
  const url = location.origin + "/?merchant=" + merchantID;
  $("qr-box").replaceChildren(el("img", { id: "qr", alt: "QR code of this shop's order page", width: "320", height: "320",
    src: "/qr.png?merchant=" + encodeURIComponent(merchantID) }));
  $("qr-url").textContent = url;
  $("qr-shop").textContent = (merchant ? merchant.name : "") + " — order here";
  $("qr-guests").textContent = merchant && merchant.guest_checkout === false
    ? "Guest checkout is off for this shop: only customers with a sign-in link can order from this code. Ask the platform to turn on guest_checkout."
    : "Scan to order; pick up at the counter when your code is called.";
  $("qr-panel").classList.remove("hidden");
  document.body.classList.add("showing-qr");
};
$("qr-close").onclick = () => { $("qr-panel").classList.add("hidden"); document.body.classList.remove("showing-qr"); };
$("qr-print").onclick = () => window.print();


let capacityEdited = false;
$("capacity").addEventListener("input", () => { capacityEdited = true; });

async function setCapacity(capacity) {
  if (!Number.isInteger(capacity) || capacity < 0) { showError("capacity must be a whole number, 0 or more"); return; }
  try {
    const { load } = await client.updateMerchant(merchantID, { capacity });
    capacityEdited = false;
    showLoad(load);
  } catch (e) { showError(e.message); }
}
// typedCapacity is the number in the field; an empty field is no number
// (Number("") would be 0, which closes the kitchen).
const typedCapacity = () => (/^\d+$/.test($("capacity").value.trim()) ? Number($("capacity").value) : NaN);
// The day's checkpoint, to keep outside orderd: the latest one, read
// through the receipt of the merchant's last completed order (a merchant
// reads receipts, not the audit endpoints), saved as the JSON an auditor's
// orderd audit --checkpoint takes.
$("export-checkpoint").onclick = async () => {
  try {
    const { orders } = await client.listMerchantOrders(merchantID, { status: "completed" });
    if (!orders.length) { showError("No completed order yet: nothing is checkpointed for this kitchen."); return; }
    const { checkpoint } = await getJSON("/v1/orders/" + encodeURIComponent(orders[0].id) + "/proof");
    const a = el("a", {
      href: URL.createObjectURL(new Blob([JSON.stringify(checkpoint, null, 2) + "\n"], { type: "application/json" })),
      download: `checkpoint-${checkpoint.log}-${checkpoint.size}.json`,
    });
    a.click();
    URL.revokeObjectURL(a.href);
    showError("");
  } catch (e) { showError(e.message); }
};

$("capacity-set").onclick = () => setCapacity(typedCapacity());
$("capacity").addEventListener("keydown", (e) => { if (e.key === "Enter") setCapacity(typedCapacity()); });
$("capacity-less").onclick = () => setCapacity(Math.max(0, (lastLoad ? lastLoad.capacity : 0) - 1));
$("capacity-more").onclick = () => setCapacity((lastLoad ? lastLoad.capacity : 0) + 1);

async function pause(mode) {
  try { showLoad((await client.pauseMerchant(merchantID, { mode })).load); }
  catch (e) { showError(e.message); }
}
$("pause-queue").onclick = () => pause("queue");
$("pause-refuse").onclick = () => pause("refuse");
$("resume").onclick = async () => {
  try { showLoad((await client.resumeMerchant(merchantID)).load); }
  catch (e) { showError(e.message); }
};

start();
