// verifyProof, verifyCheckpoint and verifyConsistency against trees the
// test builds itself from RFC 6962's recursive definitions (MTH, PATH,
// PROOF), with checkpoints signed by node:crypto: every leaf of every tree
// up to 33 leaves, every pair of sizes, and each kind of forgery.
import assert from "node:assert/strict";
import { createHash, createPrivateKey, createPublicKey, randomBytes, sign } from "node:crypto";
import { test } from "node:test";
import { ProofError, verifyCheckpoint, verifyConsistency, verifyProof } from "../dist/index.js";

const h = (...parts) => createHash("sha256").update(Buffer.concat(parts)).digest();
const leafHash = (eventHash) => h(Buffer.from([0]), eventHash);
const node = (l, r) => h(Buffer.from([1]), l, r);
// k: the largest power of two smaller than n.
const split = (n) => { let k = 1; while (k * 2 < n) k *= 2; return k; };

// mth is RFC 6962 §2.1's Merkle Tree Hash of the leaves (already hashed).
function mth(leaves) {
  if (leaves.length === 0) return h();
  if (leaves.length === 1) return leaves[0];
  const k = split(leaves.length);
  return node(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

// path is §2.1.1's audit path of leaf m.
function path(m, leaves) {
  if (leaves.length <= 1) return [];
  const k = split(leaves.length);
  return m < k ? [...path(m, leaves.slice(0, k)), mth(leaves.slice(k))]
    : [...path(m - k, leaves.slice(k)), mth(leaves.slice(0, k))];
}

// proof is §2.1.2's consistency proof from m leaves to all of them.
function proof(m, leaves) { return subproof(m, leaves, true); }
function subproof(m, leaves, b) {
  const n = leaves.length;
  if (m === n) return b ? [] : [mth(leaves)];
  const k = split(n);
  return m <= k ? [...subproof(m, leaves.slice(0, k), b), mth(leaves.slice(k))]
    : [...subproof(m - k, leaves.slice(k), false), mth(leaves.slice(0, k))];
}

const seed = randomBytes(32);
const key = createPrivateKey({ key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]), format: "der", type: "pkcs8" });
const publicKey = Buffer.from(createPublicKey(key).export({ format: "jwk" }).x, "base64url").toString("base64");
const other = createPrivateKey({ key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), randomBytes(32)]), format: "der", type: "pkcs8" });

function checkpoint(size, root, signer = key) {
  const cp = { log: "main", size, root: root.toString("base64"), at: new Date(Date.UTC(2026, 10, 27, 4, 0, size)).toISOString() };
  const text = `orderd checkpoint v1\n${cp.log}\n${cp.size}\n${cp.root}\n${cp.at}\n`;
  return { ...cp, signature: sign(null, Buffer.from(text), signer).toString("base64"),
    public_key: Buffer.from(createPublicKey(signer).export({ format: "jwk" }).x, "base64url").toString("base64") };
}

const events = Array.from({ length: 33 }, (_, i) => randomBytes(32 + (i % 2)).subarray(0, 32));
const leaves = events.map(leafHash);
const b64 = (b) => b.toString("base64");

test("every event of every tree verifies against its checkpoint", async () => {
  for (let n = 1; n <= leaves.length; n++) {
    const cp = checkpoint(n, mth(leaves.slice(0, n)));
    const receipt = {
      checkpoint: cp,
      events: events.slice(0, n).map((e, i) => ({ version: i + 1, type: "order.placed", hash: b64(e), leaf_index: i, inclusion: path(i, leaves.slice(0, n)).map(b64) })),
    };
    assert.deepEqual(await verifyProof(receipt, { publicKey }), cp);
  }
});

test("a forged receipt is refused, naming what is wrong", async () => {
  const n = 13;
  const cp = checkpoint(n, mth(leaves.slice(0, n)));
  const ev = (i, over = {}) => ({ version: i + 1, type: "order.paid", hash: b64(events[i]), leaf_index: i, inclusion: path(i, leaves.slice(0, n)).map(b64), ...over });
  const refused = (code) => (err) => err instanceof ProofError && err.code === code;
  const changed = Buffer.from(events[5]); changed[0] ^= 1;
  await assert.rejects(verifyProof({ checkpoint: cp, events: [ev(5, { hash: b64(changed) })] }, { publicKey }), refused("not_included"));
  await assert.rejects(verifyProof({ checkpoint: cp, events: [ev(5, { leaf_index: 6 })] }, { publicKey }), refused("not_included"));
  await assert.rejects(verifyProof({ checkpoint: cp, events: [ev(5, { inclusion: ev(5).inclusion.slice(1) })] }, { publicKey }), refused("not_included"));
  await assert.rejects(verifyProof({ checkpoint: cp, events: [ev(5, { inclusion: [...ev(5).inclusion, b64(leaves[0])] })] }, { publicKey }), refused("not_included"));
  await assert.rejects(verifyProof({ checkpoint: { ...cp, size: 14 }, events: [ev(5)] }, { publicKey }), refused("bad_signature"));
  await assert.rejects(verifyProof({ checkpoint: { ...cp, root: b64(mth(leaves.slice(0, 12))) }, events: [ev(5)] }, { publicKey }), refused("bad_signature"));
  // A server that signs with a key of its own, and says so, is not trusted.
  const forged = checkpoint(n, mth(leaves.slice(0, n)), other);
  await assert.rejects(verifyProof({ checkpoint: forged, events: [ev(5)] }, { publicKey }), refused("wrong_key"));
  await assert.rejects(verifyProof({ checkpoint: { ...forged, public_key: publicKey }, events: [ev(5)] }, { publicKey }), refused("bad_signature"));
  await assert.rejects(verifyProof({ checkpoint: cp, events: [ev(5, { hash: "not base64!" })] }, { publicKey }), refused("malformed"));
  // Served before the log's first checkpoint: nothing proved, said so.
  await assert.rejects(verifyProof({ checkpoint: null, events: [] }, { publicKey }), refused("no_checkpoint"));
  await verifyCheckpoint(cp, { publicKey });
});

test("every later tree is consistent with every earlier one, and a rewritten history is not", async () => {
  const refused = (err) => err instanceof ProofError && err.code === "inconsistent";
  for (let m = 1; m <= leaves.length; m++) {
    for (let n = m; n <= leaves.length; n++) {
      const older = checkpoint(m, mth(leaves.slice(0, m)));
      const newer = checkpoint(n, mth(leaves.slice(0, n)));
      await verifyConsistency(older, newer, proof(m, leaves.slice(0, n)).map(b64), { publicKey });
    }
  }
  // The newer tree rewrites leaf 2: its own checkpoint is signed and its
  // proof is made honestly from the rewritten leaves, and still fails.
  const rewritten = [...leaves];
  rewritten[2] = leafHash(randomBytes(32));
  for (const [m, n] of [[3, 8], [4, 8], [5, 20], [3, 3]]) {
    const older = checkpoint(m, mth(leaves.slice(0, m)));
    const newer = checkpoint(n, mth(rewritten.slice(0, n)));
    await assert.rejects(verifyConsistency(older, newer, proof(m, rewritten.slice(0, n)).map(b64), { publicKey }), refused, `${m}→${n}`);
  }
  const older = checkpoint(6, mth(leaves.slice(0, 6)));
  const newer = checkpoint(20, mth(leaves.slice(0, 20)));
  await assert.rejects(verifyConsistency(newer, older, proof(6, leaves.slice(0, 20)).map(b64), { publicKey }), refused);
  await assert.rejects(verifyConsistency(older, newer, proof(6, leaves.slice(0, 20)).slice(1).map(b64), { publicKey }), refused);
});
