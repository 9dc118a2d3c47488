// Receipts of orderd's tamper-evident history: a signed checkpoint of the
// log (an RFC 6962 Merkle tree over every event, in commit order) and, for
// each of an order's events, its audit path to the checkpoint's root.

import type { Checkpoint, OrderProof } from "./endpoints.js";

export type ProofErrorCode = "bad_signature" | "wrong_key" | "not_included" | "inconsistent" | "malformed" | "no_checkpoint";

export class ProofError extends Error {
  readonly code: ProofErrorCode;
  constructor(code: ProofErrorCode, message: string) {
    super(message);
    this.name = "ProofError";
    this.code = code;
  }
}

export interface ProofOptions {
  /** The server's checkpoint key (base64), kept outside orderd: a proof
   * signed by any other key is refused. */
  publicKey: string;
}

/** verifyCheckpoint checks a checkpoint's Ed25519 signature with the key
 * the caller trusts. */
export async function verifyCheckpoint(cp: Checkpoint, options: ProofOptions): Promise<void> {
  if (cp.public_key !== options.publicKey) {
    throw new ProofError("wrong_key", "the checkpoint is signed by another key than the one trusted");
  }
  const text = `orderd checkpoint v1\n${cp.log}\n${cp.size}\n${cp.root}\n${cp.at}\n`;
  const key = await crypto.subtle.importKey("raw", b64(options.publicKey), { name: "Ed25519" }, false, ["verify"]);
  if (!(await crypto.subtle.verify({ name: "Ed25519" }, key, b64(cp.signature), new TextEncoder().encode(text)))) {
    throw new ProofError("bad_signature", "the checkpoint's signature does not verify");
  }
}

/** verifyProof checks an order's receipt: the checkpoint's signature with
 * the trusted key, then every event's audit path from its leaf
 * (sha256(0x00 || hash)) to the checkpoint's root (RFC 6962 §2.1.1). It
 * returns the checkpoint, which the caller may keep to check later
 * checkpoints against with verifyConsistency. */
export async function verifyProof(proof: OrderProof, options: ProofOptions): Promise<Checkpoint> {
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

/** verifyConsistency checks that the tree of newer extends the tree of
 * older (RFC 6962 §2.1.2): nothing in older was changed, removed or
 * reordered. Both checkpoints must verify with the trusted key. */
export async function verifyConsistency(older: Checkpoint, newer: Checkpoint, proof: string[], options: ProofOptions): Promise<void> {
  await verifyCheckpoint(older, options);
  await verifyCheckpoint(newer, options);
  if (older.log !== newer.log || older.size > newer.size) throw new ProofError("inconsistent", "the checkpoints are of different logs, or the newer is smaller");
  const ok = await consistent(older.size, newer.size, b64(older.root), b64(newer.root), proof.map(b64));
  if (!ok) throw new ProofError("inconsistent", `the tree of size ${newer.size} does not extend the tree of size ${older.size}`);
}

// rootFromInclusion is RFC 9162 §2.1.3.2: the root an audit path leads to,
// or null when the path's length does not fit the index and size.
async function rootFromInclusion(index: number, size: number, leaf: Uint8Array, path: Uint8Array[]): Promise<Uint8Array | null> {
  if (!(index >= 0 && index < size)) return null;
  let fn = index, sn = size - 1, r = leaf;
  for (const p of path) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = await node(p, r);
      while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
    } else {
      r = await node(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : null;
}

// consistent is RFC 9162 §2.1.4.2.
async function consistent(first: number, second: number, firstRoot: Uint8Array, secondRoot: Uint8Array, path: Uint8Array[]): Promise<boolean> {
  if (first === second) return path.length === 0 && equal(firstRoot, secondRoot);
  if (first === 0 || first > second || path.length === 0) return false;
  if ((first & (first - 1)) === 0) path = [firstRoot, ...path];
  let fn = first - 1, sn = second - 1;
  while (fn % 2 === 1) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
  let fr = path[0], sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = await node(c, fr);
      sr = await node(c, sr);
      while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
    } else {
      sr = await node(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && equal(fr, firstRoot) && equal(sr, secondRoot);
}

function node(left: Uint8Array, right: Uint8Array): Promise<Uint8Array> {
  return sha256(new Uint8Array([1]), left, right);
}

async function sha256(...parts: Uint8Array[]): Promise<Uint8Array> {
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { all.set(p, at); at += p.length; }
  return new Uint8Array(await crypto.subtle.digest("SHA-256", all));
}

function b64(s: string): Uint8Array<ArrayBuffer> {
  let bin: string;
  try { bin = atob(s); } catch { throw new ProofError("malformed", "a proof field is not base64"); }
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
