// Every typed call against a real orderd, the problems it answers as typed
// errors, idempotency keys, a 429 with Retry-After, and the committed
// generated and built files checked against the live server.
import assert from "node:assert/strict";
import { createPrivateKey, createPublicKey, randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import http from "node:http";
import { after, before, test } from "node:test";
import { OrderdError, ProofError, operations, verifyConsistency, verifyProof } from "../dist/index.js";
import { freePort, startOrderd } from "./helpers/orderd.mjs";

let orderd;
// publicKey is the server's checkpoint key, as an auditor keeps it: made
// here, outside the server.
let publicKey;
// answered records every answer the clients got: method, path, status.
const answered = [];
const recording = async (url, init) => {
  const res = await fetch(url, init);
  answered.push({ method: init.method, path: new URL(url).pathname, status: res.status });
  return res;
};

before(async () => {
  // Webhooks fail at once and are dead-lettered after one attempt, so the
  // dead-letter calls have something to work on; placements are limited to
  // one a second per customer (burst two) for the 429.
  // The server keeps the tamper-evident log, checkpointed every second.
  const seed = randomBytes(32);
  const keyFile = join(await mkdtemp(join(tmpdir(), "orderd-client-key-")), "checkpoint.key");
  await writeFile(keyFile, seed.toString("base64"));
  const key = createPrivateKey({ key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]), format: "der", type: "pkcs8" });
  publicKey = Buffer.from(createPublicKey(key).export({ format: "jwk" }).x, "base64url").toString("base64");
  orderd = await startOrderd({
    ORDERD_WEBHOOK_MAX_ATTEMPTS: "1", ORDERD_RATE_PER_CUSTOMER: "1",
    ORDERD_CHECKPOINT_KEY: keyFile, ORDERD_CHECKPOINT_INTERVAL: "1s",
  });
});
after(async () => { await orderd?.stop(); });

const as = (claims, options = {}) => orderd.client(claims, { fetch: recording, ...options });
const admin = () => as({ sub: "root", role: "admin" });

async function eventually(what, f, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("every endpoint answers through its typed method", async () => {
  const root = admin();
  const nobody = as(null);
  assert.equal((await nobody.healthz()).status, "ok");
  assert.equal((await nobody.readyz()).status, "ready");
  assert.ok((await nobody.openapi()).paths["/v1/orders"]);

  // A webhook receiver that refuses everything: every message is dead-lettered.
  const deadPort = await freePort();
  const merchant = await root.createMerchant({ name: "Client Café", capacity: 1, webhook_url: `http://127.0.0.1:${deadPort}/hooks` });
  assert.match(merchant.webhook_secret, /.+/);
  assert.equal((await root.getMerchant(merchant.id)).name, "Client Café");
  assert.equal((await root.updateMerchant(merchant.id, { prep_seconds: 60 })).prep_seconds, 60);
  assert.notEqual((await root.rotateWebhookSecret(merchant.id)).webhook_secret, merchant.webhook_secret);
  const kitchen = as({ sub: "kitchen", role: "merchant", merchant_id: merchant.id });
  assert.equal((await kitchen.pauseMerchant(merchant.id, { mode: "queue" })).load.paused, true);
  assert.equal((await kitchen.resumeMerchant(merchant.id)).load.paused, false);

  const tea = await kitchen.createProduct(merchant.id, { name: "Tea", price_cents: 350 });
  const cake = await kitchen.createProduct(merchant.id, { name: "Cake", price_cents: 500, stock: 5 });
  assert.equal((await kitchen.restockProduct(cake.id, { quantity: 3 })).stock_total, 8);
  assert.equal((await as({ sub: "ann", role: "customer" }).getProduct(tea.id)).name, "Tea");
  assert.deepEqual((await kitchen.listProducts(merchant.id)).products.map((p) => p.name).sort(), ["Cake", "Tea"]);
  assert.deepEqual((await kitchen.listSlots(merchant.id)).slots, [], "no slots until the merchant publishes them");

  // Ann's order is accepted at once (capacity 1); Bob's paid order queues behind it.
  const ann = as({ sub: "ann", role: "customer" });
  const placed = await ann.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 2 }] });
  assert.equal(placed.status, "awaiting_payment");
  assert.equal(placed.total_cents, 700);
  assert.equal((await ann.payOrder(placed.id, { payment_ref: "pay-ann" })).status, "accepted");
  const bob = as({ sub: "bob", role: "customer" });
  const queued = await bob.placeOrder({ merchant_id: merchant.id, items: [{ product_id: cake.id, quantity: 1 }], payment_ref: "pay-bob" });
  assert.equal(queued.status, "queued");
  assert.equal(queued.queue_position, 1);
  assert.equal((await kitchen.prioritizeOrder(queued.id, { reason: "a regular" })).lane, "priority");
  assert.deepEqual((await kitchen.listMerchantOrders(merchant.id, { status: "queued" })).orders.map((o) => o.id), [queued.id]);
  assert.deepEqual((await bob.listOwnOrders({ limit: 10 })).orders.map((o) => o.id), [queued.id]);
  assert.equal((await bob.getOrder(queued.id)).id, queued.id);
  assert.equal((await bob.cancelOrder(queued.id, { reason: "changed my mind" })).status, "cancelled");
  assert.equal((await kitchen.completeOrder(placed.id)).status, "completed");
  // A mistaken completion is undone within a minute, then the order is
  // completed again and handed over the counter.
  assert.equal((await kitchen.reopenOrder(placed.id)).status, "accepted");
  assert.equal((await kitchen.completeOrder(placed.id)).status, "completed");
  assert.ok((await kitchen.pickUpOrder(placed.id)).picked_up_at);
  const events = (await ann.orderEvents(placed.id)).events;
  assert.deepEqual(events.map((e) => e.version), events.map((_, i) => i + 1));
  assert.equal(events.at(-1).type, "order.picked_up");

  // The menu changes: a new price, then the cake leaves the menu.
  assert.equal((await kitchen.updateProduct(merchant.id, tea.id, { price_cents: 375 })).price_cents, 375);
  assert.equal(await kitchen.hideProduct(merchant.id, cake.id), undefined);
  assert.deepEqual((await kitchen.listProducts(merchant.id)).products.map((p) => p.name), ["Tea"]);

  // A walk-in guest, at a merchant that takes them, needs no token.
  await root.updateMerchant(merchant.id, { guest_checkout: true });
  const guest = await nobody.startGuestSession(merchant.id);
  assert.match(guest.sub, /^guest:[0-9a-f]{32}$/);

  // Ann's acceptance and completion and Bob's cancellation went to a dead
  // endpoint and were dead-lettered: one is retried, one resolved by a
  // person, the rest retried with the merchant's.
  const dead = await eventually("dead webhooks", async () => {
    const { dead_letters } = await root.listDeadLetters({ kind: "webhook", merchant_id: merchant.id, unresolved: true });
    return dead_letters.length >= 2 && dead_letters;
  }, 30_000);
  assert.ok((await root.listWebhookAttempts({ merchant_id: merchant.id })).attempts.length >= 2);
  await root.retryDeadLetter(dead[0].id);
  assert.ok((await root.resolveDeadLetter(dead[1].id, { note: "told them by phone" })).resolved_at);
  await root.retryMerchantWebhooks({ merchant_id: merchant.id });
  assert.equal(typeof (await root.audit()).ok, "boolean");

  // A sign-in code buys a token of its holder once.
  const { code } = await root.mintSignInCode({ sub: "carol", role: "customer" });
  const signedIn = await nobody.signIn({ code });
  assert.equal(signedIn.sub, "carol");
  const carol = as({ sub: "ignored", role: "customer" }, { token: () => signedIn.token });
  assert.deepEqual((await carol.listOwnOrders()).orders, []);
  const ticket = await carol.issueWebSocketTicket();
  assert.ok(new Date(ticket.expires_at) > new Date());

  // A drop: it opens a second from now, Dave joins, and the draw is public.
  const now = Date.now();
  const drop = await kitchen.createDrop(cake.id, {
    opens_at: new Date(now + 1000).toISOString(), starts_at: new Date(now + 60_000).toISOString(), mode: "lottery", units: 2,
  });
  assert.equal((await ann.getDrop(drop.id)).state, "scheduled");
  const dave = as({ sub: "dave", role: "customer" });
  const entry = await eventually("the drop to open", async () => {
    try { return await dave.joinDrop(drop.id); } catch (err) { if (err.code === "drop_not_open") return null; throw err; }
  });
  assert.equal((await dave.myDropEntry(drop.id)).id, entry.id);
  assert.equal((await ann.getDropDraw(drop.id)).seed, null);
});

test("verifyProof checks a real order's receipt, and verifyConsistency two real checkpoints", async () => {
  const root = admin();
  const auditor = as({ sub: "auditor", role: "auditor" });
  const merchant = await root.createMerchant({ name: "Ledger", capacity: 1 });
  const tea = await root.createProduct(merchant.id, { name: "Tea", price_cents: 300 });
  const vic = as({ sub: "vic", role: "customer" });
  // Placed, then paid: a receipt of several events, whose hashes can be
  // swapped between them (a paid placement admitted at once is one event).
  const order = await vic.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }] });
  await vic.payOrder(order.id, { payment_ref: "p" });
  const { events } = await vic.orderEvents(order.id);
  assert.ok(events.length >= 2, `a receipt of several events, got ${events.length}`);
  const first = await eventually("a checkpoint holding the order", async () => {
    try {
      const p = await vic.orderProof(order.id);
      return p.events.length === events.length && p;
    } catch (err) {
      if (err.code === "not_found") return null;
      throw err;
    }
  });
  const cp = await verifyProof(first, { publicKey });
  assert.deepEqual(first.events.map((e) => e.hash), events.map((e) => e.hash), "the receipt is of the events the customer read");
  await assert.rejects(verifyProof(first, { publicKey: first.checkpoint.public_key.replace(/^./, (c) => (c === "A" ? "B" : "A")) }),
    (err) => err instanceof ProofError && err.code === "wrong_key");
  const swapped = { ...first, events: first.events.map((e, i) => ({ ...e, hash: first.events[(i + 1) % first.events.length].hash })) };
  await assert.rejects(verifyProof(swapped, { publicKey }), { name: "ProofError", code: "not_included" });

  // The log grows; the later checkpoint proves it only grew.
  await vic.cancelOrder((await vic.placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }] })).id);
  const later = await eventually("a later checkpoint", async () => {
    const c = await auditor.latestCheckpoint();
    return c.size > cp.size && c;
  });
  const { proof } = await auditor.checkpointConsistency({ from: cp.size, to: later.size });
  await verifyConsistency(cp, later, proof, { publicKey });
  await assert.rejects(verifyConsistency(cp, later, proof.slice(1), { publicKey }), { name: "ProofError", code: "inconsistent" });
});

test("a refused call throws an OrderdError with the problem's code", async () => {
  const root = admin();
  const merchant = await root.createMerchant({ name: "Errors", capacity: 1 });
  const one = await root.createProduct(merchant.id, { name: "Last slice", price_cents: 400, stock: 1 });
  const erin = as({ sub: "erin", role: "customer" });
  const order = await erin.placeOrder({ merchant_id: merchant.id, items: [{ product_id: one.id, quantity: 1 }] });
  await assert.rejects(as({ sub: "frank", role: "customer" }).placeOrder({ merchant_id: merchant.id, items: [{ product_id: one.id, quantity: 1 }] }),
    (err) => err instanceof OrderdError && err.code === "sold_out" && err.status === 409 && err.problem.code === "sold_out");
  await erin.cancelOrder(order.id);
  await assert.rejects(erin.payOrder(order.id, { payment_ref: "late" }), { name: "OrderdError", code: "invalid_transition", status: 409 });
  await assert.rejects(as({ sub: "gina", role: "customer" }).getOrder(order.id), { code: "not_found", status: 404 });
  await assert.rejects(erin.createMerchant({ name: "mine", capacity: 1 }), { code: "forbidden", status: 403 });
  await assert.rejects(as(null).getOrder(order.id), { code: "unauthorized", status: 401 });
  await assert.rejects(root.createMerchant({ name: "", capacity: -1 }), { code: "validation_failed", status: 422 });
});

test("each write carries its own Idempotency-Key, kept across a call's retries and replayed when given again", async () => {
  const root = admin();
  const merchant = await root.createMerchant({ name: "Keys", capacity: 5 });
  const tea = await root.createProduct(merchant.id, { name: "Tea", price_cents: 300 });
  const keys = [];
  const hank = orderd.client({ sub: "hank", role: "customer" }, {
    fetch: (url, init) => { keys.push(init.headers["Idempotency-Key"]); return fetch(url, init); },
  });
  const body = { merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }] };
  const a = await hank.placeOrder(body);
  const b = await hank.placeOrder(body);
  assert.notEqual(a.id, b.id, "two calls are two orders");
  assert.equal(keys.length, 2);
  assert.notEqual(keys[0], keys[1]);
  assert.match(keys[0], /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

  const again = await hank.placeOrder(body, { idempotencyKey: keys[0] });
  assert.equal(again.id, a.id, "the same key answers the first order");
  await assert.rejects(hank.placeOrder({ ...body, items: [{ product_id: tea.id, quantity: 2 }] }, { idempotencyKey: keys[0] }),
    { code: "idempotency_key_reused", status: 422 });

  // A connection lost after the server placed the order: the client sends
  // it again with the same key and gets the order it made, not a second.
  const sent = [];
  let cut = true;
  const ida = orderd.client({ sub: "ida", role: "customer" }, {
    fetch: async (url, init) => {
      sent.push(init.headers["Idempotency-Key"]);
      const res = await fetch(url, init);
      if (cut) { cut = false; throw new TypeError("fetch failed: the answer was lost"); }
      return res;
    },
  });
  const c = await ida.placeOrder(body);
  assert.equal(sent.length, 2);
  assert.equal(sent[0], sent[1]);
  assert.deepEqual((await ida.listOwnOrders()).orders.map((o) => o.id), [c.id], "the lost answer made one order, not two");

  // A write the server does not replay by key is not sent again after a
  // lost connection: the caller decides.
  let calls = 0;
  const once = orderd.client({ sub: "ida", role: "customer" }, {
    fetch: async (url, init) => { calls++; await fetch(url, init); throw new TypeError("fetch failed"); },
  });
  await assert.rejects(once.cancelOrder(c.id), TypeError);
  assert.equal(calls, 1);
  assert.equal((await ida.getOrder(c.id)).status, "cancelled");
});

test("a 429 carries Retry-After: thrown with retryAfter without retries, waited out with them", async () => {
  const root = admin();
  const merchant = await root.createMerchant({ name: "Rush", capacity: 50 });
  const tea = await root.createProduct(merchant.id, { name: "Tea", price_cents: 300 });
  const body = { merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }] };
  const hasty = as({ sub: "hasty", role: "customer" }, { retries: 0 });
  const results = await Promise.allSettled([1, 2, 3, 4].map(() => hasty.placeOrder(body)));
  const refused = results.filter((r) => r.status === "rejected").map((r) => r.reason);
  assert.ok(refused.length >= 1, "four placements at once exceed a burst of two");
  for (const err of refused) {
    assert.ok(err instanceof OrderdError);
    assert.equal(err.code, "rate_limited");
    assert.equal(err.status, 429);
    assert.ok(err.retryAfter >= 1, `Retry-After ${err.retryAfter}`);
  }

  const patient = as({ sub: "patient", role: "customer" });
  const statuses = () => answered.filter((a) => a.path === "/v1/orders" && a.method === "POST").map((a) => a.status);
  const before = statuses().length;
  const start = Date.now();
  const placed = await Promise.all([1, 2, 3, 4].map(() => patient.placeOrder(body)));
  assert.equal(new Set(placed.map((o) => o.id)).size, 4, "every placement made its own order");
  const seen = statuses().slice(before);
  assert.ok(seen.includes(429), "the server refused some at first");
  assert.ok(Date.now() - start >= 900, "the client waited as Retry-After said");

  // A Retry-After longer than the client will wait is the caller's.
  const brief = as({ sub: "brief", role: "customer" }, { maxRetryDelay: 100 });
  const tries = await Promise.allSettled([1, 2, 3, 4].map(() => brief.placeOrder(body)));
  assert.ok(tries.some((r) => r.status === "rejected" && r.reason.code === "rate_limited"));
});

test("the committed generated types are those of the live OpenAPI document", async () => {
  const { generate } = await import("../scripts/generate.mjs");
  const live = await (await fetch(orderd.url + "/openapi.json")).json();
  for (const [path, text] of Object.entries(await generate(live))) {
    const committed = await readFile(new URL("../" + path, import.meta.url), "utf8");
    assert.ok(committed === text, `${path} differs from what the live /openapi.json generates: run npm run generate && npm run build`);
  }
});

test("the committed declarations and bundle, in the package and in orderd's pages, are the build of src/", async () => {
  const { bundle, declarations, webCopy } = await import("../scripts/build.mjs");
  const built = await bundle();
  const dist = new URL("../dist/", import.meta.url);
  const types = await declarations();
  assert.deepEqual(Object.keys(types).sort(), (await readdir(dist)).filter((n) => n.endsWith(".d.ts")).sort());
  for (const [name, text] of Object.entries(types)) {
    assert.ok(await readFile(new URL(name, dist), "utf8") === text, `dist/${name} is stale: run npm run build`);
  }
  assert.ok(await readFile(new URL("../dist/index.js", import.meta.url), "utf8") === built, "dist/index.js is stale: run npm run build");
  assert.ok(await readFile(webCopy, "utf8") === built, "web/static/assets/orderd-client.js is stale: run npm run build");
});

test("every JSON operation of the API was called and answered 2xx", () => {
  const missing = Object.entries(operations).filter(([, op]) => {
    const re = new RegExp("^" + op.path.replace(/\{[^}]+\}/g, "[^/]+") + "$");
    return !answered.some((a) => a.method === op.method && re.test(a.path) && a.status < 300);
  }).map(([id]) => id);
  assert.deepEqual(missing, []);
});

test("verifyWebhook accepts a real delivery and refuses a changed one", async () => {
  // In this file so the delivery's server is the one already running.
  const { verifyWebhook, WebhookSignatureError } = await import("../dist/index.js");
  const got = [];
  const receiver = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => { got.push({ headers: req.headers, body: Buffer.concat(chunks) }); res.writeHead(204).end(); });
  });
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r));
  try {
    const root = admin();
    const merchant = await root.createMerchant({ name: "Hooks", capacity: 1, webhook_url: `http://127.0.0.1:${receiver.address().port}/hooks` });
    const tea = await root.createProduct(merchant.id, { name: "Tea", price_cents: 300 });
    const order = await as({ sub: "ivy", role: "customer" }).placeOrder({ merchant_id: merchant.id, items: [{ product_id: tea.id, quantity: 1 }], payment_ref: "p" });
    await eventually("a delivery", () => got.length > 0);
    const { headers, body } = got[0];
    const event = await verifyWebhook(merchant.webhook_secret, headers, body);
    assert.equal(event.type, "order.accepted");
    assert.equal(event.order.id, order.id);
    assert.equal(event.id, headers["x-orderd-delivery"]);
    // A fetch-style Headers object and a string body verify the same.
    assert.equal((await verifyWebhook(merchant.webhook_secret, new Headers(headers), body.toString())).id, event.id);

    const refused = (code) => (err) => err instanceof WebhookSignatureError && err.code === code;
    const changed = Buffer.from(body.toString().replace('"accepted"', '"cancelled"'));
    await assert.rejects(verifyWebhook(merchant.webhook_secret, headers, changed), refused("mismatch"));
    await assert.rejects(verifyWebhook("another secret", headers, body), refused("mismatch"));
    await assert.rejects(verifyWebhook(merchant.webhook_secret, headers, body, { now: Date.now() + 301_000 }), refused("too_old"));
    await assert.rejects(verifyWebhook(merchant.webhook_secret, { ...headers, "x-orderd-signature-v2": undefined }, body), refused("malformed"));
    // The signed time cannot be replaced: it is inside the signed text.
    const sig = headers["x-orderd-signature-v2"];
    const later = sig.replace(/t=\d+/, `t=${Math.floor(Date.now() / 1000) + 10}`);
    await assert.rejects(verifyWebhook(merchant.webhook_secret, { ...headers, "x-orderd-signature-v2": later }, body), refused("mismatch"));
  } finally {
    receiver.close();
  }
});
