// Checks an order's receipt (GET /v1/orders/{id}/proof) in the browser
// with Web Crypto: the checkpoint's Ed25519 signature and every event's
// RFC 6962 audit path to the checkpoint's root (RFC 9162 2.1.3.2), the
// same checks as ledger/verify in Go.

const bytes = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));

async function sha256(...parts) {
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { all.set(p, at); at += p.length; }
  return new Uint8Array(await crypto.subtle.digest("SHA-256", all));
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
const half = (n) => Math.floor(n / 2); // sizes pass 2^32: no bit operators
const odd = (n) => n % 2 === 1;

// signedText is what a checkpoint's signature covers; root is base64 as
// served.
export const signedText = (c) => `orderd checkpoint v1\n${c.log}\n${c.size}\n${c.root}\n${c.at}\n`;

export async function verifyInclusion(index, size, leaf, path, root) {
  if (index >= size) return false;
  let fn = index, sn = size - 1, r = leaf;
  for (const p of path) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      r = await sha256(Uint8Array.of(1), p, r);
      while (!odd(fn) && fn !== 0) { fn = half(fn); sn = half(sn); }
    } else {
      r = await sha256(Uint8Array.of(1), r, p);
    }
    fn = half(fn); sn = half(sn);
  }
  return sn === 0 && same(r, root);
}

// verifyReceipt reports whether the receipt holds at least one event and
// every part of it checks out. The key is the one the checkpoint names:
// that proves the checkpoint was signed by whoever holds it; an auditor
// pins the deployment's key instead.
export async function verifyReceipt(receipt) {
  const c = receipt.checkpoint;
  // No checkpoint yet (the log has none) or no event in it: nothing proved.
  if (!c || !receipt.events.length) return false;
  const key = await crypto.subtle.importKey("raw", bytes(c.public_key), { name: "Ed25519" }, false, ["verify"]);
  if (!await crypto.subtle.verify({ name: "Ed25519" }, key, bytes(c.signature), new TextEncoder().encode(signedText(c)))) return false;
  const root = bytes(c.root);
  for (const e of receipt.events) {
    const leaf = await sha256(Uint8Array.of(0), bytes(e.hash));
    if (!await verifyInclusion(e.leaf_index, c.size, leaf, e.inclusion.map(bytes), root)) return false;
  }
  return true;
}
