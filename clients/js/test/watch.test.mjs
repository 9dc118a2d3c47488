// Live watches against a real orderd: the first state and every change, a
// network cut mid-watch through a TCP proxy that the test controls, a
// server restart, single-use tickets, refusals, and reconnection backoff.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFile, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import WebSocket from "ws";
import { WatchError } from "../dist/index.js";
import { startOrderd } from "./helpers/orderd.mjs";

let orderd;
before(async () => { orderd = await startOrderd(); });
after(async () => { await orderd?.stop(); });

// Quick reconnections for the tests, in the clients' options.
const fast = { reconnect: { first: 100, max: 1000 } };

// cuttingProxy forwards TCP to the server. cut() drops every connection
// through it at once, as a lost network does; while blocked, new
// connections are dropped as soon as they arrive.
async function cuttingProxy(port) {
  const sockets = new Set();
  let blocked = false;
  let connections = 0;
  // websockets: the connections open now that began with a websocket upgrade.
  const websockets = new Set();
  const server = net.createServer((down) => {
    if (blocked) { down.destroy(); return; }
    connections++;
    down.once("data", (first) => { if (first.toString("latin1").startsWith("GET /v1/ws?")) websockets.add(down); });
    const up = net.connect(port, "127.0.0.1");
    const end = () => { down.destroy(); up.destroy(); sockets.delete(down); sockets.delete(up); websockets.delete(down); };
    for (const s of [down, up]) { sockets.add(s); s.on("error", end); s.on("close", end); }
    down.pipe(up);
    up.pipe(down);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    get connections() { return connections; },
    get websockets() { return websockets.size; },
    cut() { for (const s of sockets) s.destroy(); },
    block(on) { blocked = on; },
    close() { this.cut(); server.close(); },
  };
}

// recorder collects what a watch hands over and waits for a match.
function recorder() {
  const seen = [];
  const waiters = [];
  return {
    seen,
    push(v) {
      seen.push(v);
      for (const w of [...waiters]) if (w.pred(v)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(v); }
    },
    // next resolves with the first value from index from on that matches.
    next(what, pred, from = 0, ms = 10_000) {
      const had = seen.slice(from).find(pred);
      if (had) return Promise.resolve(had);
      return new Promise((resolve, reject) => {
        const w = { pred, resolve };
        waiters.push(w);
        setTimeout(() => reject(new Error(`timed out waiting for ${what}; seen ${JSON.stringify(seen.map((o) => o.status ?? o))}`)), ms).unref();
      });
    },
  };
}

async function shop(capacity = 1) {
  const root = orderd.client({ sub: "root", role: "admin" });
  const merchant = await root.createMerchant({ name: "Live", capacity });
  const tea = await root.createProduct(merchant.id, { name: "Tea", price_cents: 300 });
  const kitchen = orderd.client({ sub: "k", role: "merchant", merchant_id: merchant.id }, fast);
  return { merchant, tea, kitchen };
}

test("watchOrder sends the order at once and on every change", async () => {
  const { merchant, tea, kitchen } = await shop();
  const jo = orderd.client({ sub: "jo", role: "customer" });
  const order = await jo.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }] });
  const got = recorder();
  const states = [];
  const w = jo.watchOrder(order.id, (o) => got.push(o), { onState: (s) => states.push(s) });
  try {
    await got.next("the first state", (o) => o.status === "awaiting_payment");
    await jo.payOrder(order.id, { payment_ref: "p" });
    await got.next("accepted", (o) => o.status === "accepted");
    await kitchen.completeOrder(order.id);
    await got.next("completed", (o) => o.status === "completed");
    const versions = got.seen.map((o) => o.version);
    assert.deepEqual(versions, [...versions].sort((a, b) => a - b), "never an older state after a newer one");
    assert.deepEqual(states, ["connecting", "live"]);
  } finally {
    w.close();
  }
  assert.equal(w.state, "closed");
});

test("a network cut mid-watch: the watch reconnects with a new ticket and gets what changed meanwhile", async () => {
  const { merchant, tea, kitchen } = await shop();
  const proxy = await cuttingProxy(orderd.port);
  const tickets = [];
  const kim = orderd.client({ sub: "kim", role: "customer" }, {
    ...fast,
    baseUrl: proxy.url,
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      if (url.endsWith("/v1/ws/tickets") && res.ok) tickets.push((await res.clone().json()).ticket);
      return res;
    },
  });
  const order = await kim.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }], payment_ref: "p" });
  const got = recorder();
  const states = [];
  const w = kim.watchOrder(order.id, (o) => got.push(o), { onState: (s) => states.push(s) });
  try {
    await got.next("accepted", (o) => o.status === "accepted");
    proxy.block(true);
    proxy.cut();
    // The kitchen completes the order while the customer's network is down.
    await kitchen.completeOrder(order.id);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(w.state, "reconnecting");
    assert.ok(!got.seen.some((o) => o.status === "completed"), "nothing can arrive through a cut network");
    proxy.block(false);
    await got.next("the state after reconnecting", (o) => o.status === "completed");
    assert.equal(w.state, "live");
    assert.deepEqual(states.slice(0, 3), ["connecting", "live", "reconnecting"]);
    assert.equal(states.at(-1), "live");
    assert.ok(tickets.length >= 2, "one ticket per connection");
    assert.equal(new Set(tickets).size, tickets.length, "no ticket used twice");
  } finally {
    w.close();
    proxy.close();
  }
});

test("a server restart: the watch comes back by itself and goes on", async () => {
  const { merchant, tea, kitchen } = await shop();
  const lee = orderd.client({ sub: "lee", role: "customer" }, fast);
  const order = await lee.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }], payment_ref: "p" });
  const got = recorder();
  const states = [];
  const w = lee.watchOrder(order.id, (o) => got.push(o), { onState: (s) => states.push(s) });
  try {
    await got.next("accepted", (o) => o.status === "accepted");
    const before = got.seen.length;
    await orderd.restart();
    // The current state again, from the new process, after reconnecting.
    await got.next("the state from the restarted server", (o) => o.status === "accepted", before);
    assert.ok(states.includes("reconnecting"));
    await kitchen.completeOrder(order.id);
    await got.next("completed", (o) => o.status === "completed");
  } finally {
    w.close();
  }
});

test("one websocket carries all of a client's watches; a refused one ends alone", async () => {
  const { merchant, tea, kitchen } = await shop(5);
  const proxy = await cuttingProxy(orderd.port);
  let tickets = 0;
  const admin = orderd.client({ sub: "root", role: "admin" }, {
    ...fast,
    baseUrl: proxy.url,
    fetch: (url, init) => { if (url.endsWith("/v1/ws/tickets")) tickets++; return fetch(url, init); },
  });
  const quinn = orderd.client({ sub: "quinn", role: "customer" });
  const place = () => quinn.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }] });
  const [a, b] = [await place(), await place()];
  const gotA = recorder(), gotB = recorder(), againA = recorder(), loads = recorder();
  const refused = new Promise((resolve) => {
    admin.watchOrder("00000000-0000-7000-8000-000000000000", () => assert.fail("no such order"), { onError: resolve });
  });
  const watches = [
    admin.watchOrder(a.id, (o) => gotA.push(o)),
    admin.watchOrder(b.id, (o) => gotB.push(o)),
    admin.watchMerchantLoad(merchant.id, (l) => loads.push(l)),
  ];
  try {
    assert.equal((await refused).code, "not_found");
    await gotA.next("a", (o) => o.status === "awaiting_payment");
    await gotB.next("b", (o) => o.status === "awaiting_payment");
    await loads.next("the load", (l) => l.active === 0);
    // A second watch of the same order starts from the last state.
    watches.push(admin.watchOrder(a.id, (o) => againA.push(o)));
    await againA.next("a again", (o) => o.status === "awaiting_payment");
    await quinn.payOrder(a.id, { payment_ref: "a" });
    await quinn.payOrder(b.id, { payment_ref: "b" });
    await gotA.next("a accepted", (o) => o.status === "accepted");
    await againA.next("a accepted, to the second watch too", (o) => o.status === "accepted");
    await gotB.next("b accepted", (o) => o.status === "accepted");
    await loads.next("two active", (l) => l.active === 2);
    assert.equal(tickets, 1, "one ticket");
    assert.equal(proxy.websockets, 1, "one websocket");

    // After a cut, one new connection subscribes to everything again.
    proxy.cut();
    await kitchen.completeOrder(a.id);
    await gotA.next("a completed after the cut", (o) => o.status === "completed");
    await againA.next("a completed after the cut, to the second watch too", (o) => o.status === "completed");
    await loads.next("one active after the cut", (l) => l.active === 1);
    assert.equal(tickets, 2);
    assert.equal(proxy.websockets, 1);
    // With its last watch closed, the client's websocket closes too.
    for (const w of watches) w.close();
    const deadline = Date.now() + 5000;
    while (proxy.websockets && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(proxy.websockets, 0);
  } finally {
    for (const w of watches) w.close();
    proxy.close();
  }
});

test("subscribes past the server's rate wait as it says, and every watch gets its state", async () => {
  // A server of its own that allows one subscribe a second (bursts of two).
  const strict = await startOrderd({ ORDERD_WS_SUBSCRIBE_RATE: "1" });
  try {
    const root = strict.client({ sub: "root", role: "admin" });
    const merchant = await root.createMerchant({ name: "Strict", capacity: 10 });
    const tea = await root.createProduct(merchant.id, { name: "Tea", price_cents: 300 });
    const sam = strict.client({ sub: "sam", role: "customer" });
    const orders = [];
    for (let i = 0; i < 4; i++) orders.push(await sam.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }] }));
    const heard = [];
    class Listening extends WebSocket {
      constructor(url) { super(url); this.addEventListener("message", (e) => heard.push(JSON.parse(e.data))); }
    }
    const watcher = strict.client({ sub: "sam", role: "customer" }, { WebSocket: Listening });
    const got = orders.map(() => recorder());
    const watches = orders.map((o, i) => watcher.watchOrder(o.id, (x) => got[i].push(x)));
    try {
      await Promise.all(got.map((g, i) => g.next(`order ${i}`, (o) => o.status === "awaiting_payment", 0, 15_000)));
      assert.ok(heard.some((m) => m.type === "error" && m.code === "rate_limited" && m.retry_after_seconds >= 1), "the server refused a subscribe for a while");
      assert.ok(watches.every((w) => w.state === "live"));
    } finally {
      for (const w of watches) w.close();
    }
  } finally {
    await strict.stop();
  }
});

test("a ticket opens one websocket: used again it is refused", async () => {
  const mo = orderd.client({ sub: "mo", role: "customer" });
  const { ticket } = await mo.issueWebSocketTicket();
  const wsURL = orderd.url.replace(/^http/, "ws") + "/v1/ws?ticket=" + encodeURIComponent(ticket);
  const first = new WebSocket(wsURL);
  await new Promise((resolve, reject) => { first.once("open", resolve); first.once("error", reject); });
  first.close();
  const status = await new Promise((resolve, reject) => {
    const again = new WebSocket(wsURL);
    again.once("open", () => { again.close(); reject(new Error("a used ticket opened a websocket")); });
    again.once("unexpected-response", (_, res) => { resolve(res.statusCode); res.resume(); again.terminate(); });
    again.once("error", () => {});
  });
  assert.equal(status, 401);
});

test("watchMerchantLoad follows the merchant's load; a watch the server refuses ends with a WatchError", async () => {
  const { merchant, tea, kitchen } = await shop(1);
  const loads = recorder();
  const w = kitchen.watchMerchantLoad(merchant.id, (l) => loads.push(l));
  const nia = orderd.client({ sub: "nia", role: "customer" });
  try {
    await loads.next("the first load", (l) => l.active === 0 && l.queued === 0);
    const a = await nia.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }], payment_ref: "a" });
    await loads.next("one active", (l) => l.active === 1 && l.queued === 0);
    await nia.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }], payment_ref: "b" });
    await loads.next("one queued", (l) => l.active === 1 && l.queued === 1);
    await kitchen.completeOrder(a.id);
    await loads.next("the next admitted", (l) => l.active === 1 && l.queued === 0);
    assert.ok(loads.seen.every((l) => l.merchant_id === merchant.id && l.capacity === 1));
  } finally {
    w.close();
  }

  const refusal = (watchIt) => new Promise((resolve) => {
    const states = [];
    const x = watchIt({ onState: (s) => states.push(s), onError: (err) => resolve({ err, states, x }) });
  });
  const other = await nia.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }] });
  const stranger = orderd.client({ sub: "stranger", role: "customer" });
  for (const [what, watchIt, code] of [
    ["another customer's order", (o) => stranger.watchOrder(other.id, () => assert.fail("no order for a stranger"), o), "not_found"],
    ["a merchant's load by a customer", (o) => stranger.watchMerchantLoad(merchant.id, () => assert.fail("no load for a customer"), o), "forbidden"],
    ["with a bad token", (o) => orderd.client({ sub: "x", role: "customer" }, { token: "not-a-token" }).watchOrder(other.id, () => {}, o), "unauthorized"],
  ]) {
    const { err, states, x } = await refusal(watchIt);
    assert.ok(err instanceof WatchError, what);
    assert.equal(err.code, code, what);
    assert.equal(x.state, "closed", what);
    assert.equal(states.at(-1), "closed", what);
    assert.ok(!states.includes("reconnecting"), `${what}: a refusal is not retried`);
  }
});

test("watchMerchant follows a merchant's public status, for a customer", async () => {
  const { merchant, tea, kitchen } = await shop(1);
  const rae = orderd.client({ sub: "rae", role: "customer" }, fast);
  const got = recorder();
  const w = rae.watchMerchant(merchant.id, (s) => got.push(s));
  try {
    await got.next("open and idle", (s) => s.open && !s.paused && !s.busy && s.queued === 0);
    await rae.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }], payment_ref: "a" });
    await got.next("busy", (s) => s.busy);
    await kitchen.pauseMerchant(merchant.id, { mode: "refuse" });
    await got.next("paused, refusing", (s) => s.paused && s.pause_mode === "refuse" && !s.open);
    await kitchen.resumeMerchant(merchant.id);
    await got.next("open again", (s) => s.open && !s.paused);
    assert.ok(got.seen.every((s) => s.merchant_id === merchant.id));
  } finally {
    w.close();
  }
});

test("reconnection waits back off, with jitter, while the server stays away", async () => {
  const proxy = await cuttingProxy(orderd.port);
  proxy.block(true);
  const attempts = [];
  const ona = orderd.client({ sub: "ona", role: "customer" }, {
    baseUrl: proxy.url,
    retries: 0,
    reconnect: { first: 100, max: 800 },
    fetch: (url, init) => { attempts.push(Date.now()); return fetch(url, init); },
  });
  const w = ona.watchOrder("00000000-0000-7000-8000-000000000000", () => {});
  try {
    await new Promise((r) => setTimeout(r, 3500));
  } finally {
    w.close();
    proxy.close();
  }
  const gaps = attempts.slice(1).map((t, i) => t - attempts[i]);
  assert.ok(gaps.length >= 4, `attempts ${gaps.length + 1}`);
  // Each wait is between half and all of min(800, 100·2^n).
  gaps.forEach((gap, n) => {
    const delay = Math.min(800, 100 * 2 ** n);
    assert.ok(gap >= delay / 2 - 5, `wait ${n}: ${gap} ms, at least ${delay / 2}`);
  });
  assert.ok(gaps.slice(4).every((g) => g >= 395), "capped waits stay at the cap's half or more");
  assert.ok(new Set(gaps.slice(3)).size > 1, "waits at the cap vary");
});

test("a browser that comes back online reconnects at once, once, not after the rest of its backoff", async () => {
  const { merchant, tea } = await shop();
  const proxy = await cuttingProxy(orderd.port);
  // What a browser has: a window that says when the network is back.
  globalThis.window = new EventTarget();
  let tickets = 0;
  const pat = orderd.client({ sub: "pat", role: "customer" }, {
    baseUrl: proxy.url,
    retries: 0,
    reconnect: { first: 20_000, max: 20_000 },
    fetch: (url, init) => { if (url.endsWith("/v1/ws/tickets")) tickets++; return fetch(url, init); },
  });
  const order = await pat.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }] });
  const got = recorder();
  const w = pat.watchOrder(order.id, (o) => got.push(o));
  try {
    await got.next("the first state", (o) => o.status === "awaiting_payment");
    proxy.cut();
    for (const deadline = Date.now() + 5000; w.state !== "reconnecting" && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 20));
    assert.equal(w.state, "reconnecting");
    const before = got.seen.length;
    const start = Date.now();
    window.dispatchEvent(new Event("online"));
    window.dispatchEvent(new Event("online"));
    await got.next("the state after coming online", () => true, before, 5000);
    assert.ok(Date.now() - start < 5000, "sooner than the 10–20 s backoff");
    assert.equal(tickets, 2, "one ticket for the first connection, one for the second: two online events open one");
    assert.equal(w.state, "live");
  } finally {
    w.close();
    proxy.close();
    delete globalThis.window;
  }
});

test("the README's example runs as written: it places, pays and watches until the kitchen completes", async () => {
  const { merchant, tea, kitchen } = await shop();
  const readme = await readFile(new URL("../README.md", import.meta.url), "utf8");
  const example = readme.match(/```js\n([\s\S]*?)```/)[1];
  // Inside the package, so that "@orderd/client" resolves to it by name.
  const file = new URL(`../.readme-example-${process.pid}.mjs`, import.meta.url);
  await writeFile(file, example);
  try {
    const child = spawn(process.execPath, [fileURLToPath(file)], {
      env: { ...process.env, ORDERD_URL: orderd.url, CUSTOMER_TOKEN: orderd.token({ sub: "reader", role: "customer" }), MERCHANT_ID: merchant.id, PRODUCT_ID: tea.id },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "", err = "";
    child.stderr.on("data", (d) => { err += d; });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    await new Promise((resolve, reject) => {
      child.stdout.on("data", (d) => { out += d; if (/ accepted/.test(out)) resolve(); });
      exited.then(() => reject(new Error(`the example ended early: ${out}${err}`)));
    });
    const [accepted] = (await kitchen.listMerchantOrders(merchant.id, { status: "accepted" })).orders;
    await kitchen.completeOrder(accepted.id);
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r("still running"), 20_000))]);
    if (code !== 0) child.kill();
    assert.equal(code, 0, out + err);
    assert.match(out, /connection live/);
    assert.match(out, new RegExp(`${accepted.pickup_code} completed`));
  } finally {
    await rm(file, { force: true });
  }
});
