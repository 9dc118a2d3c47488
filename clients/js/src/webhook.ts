import type { Order } from "./endpoints.js";

/** What orderd POSTs to a merchant's webhook_url. */
export interface WebhookEvent {
  /** The message's id: the same on every attempt, so receivers dedupe by it. */
  id: string;
  type: "order.accepted" | "order.cancelled" | "order.expired" | "order.completed" | (string & {});
  occurred_at: string;
  order: Order;
}

/** Why a delivery was refused: the signature header is missing or
 * malformed, no signature matches, or its time is more than the tolerated
 * age from the receiver's clock (a replay, or a clock far off). */
export type WebhookErrorCode = "malformed" | "mismatch" | "too_old";

export class WebhookSignatureError extends Error {
  readonly code: WebhookErrorCode;
  constructor(code: WebhookErrorCode, message: string) {
    super(message);
    this.name = "WebhookSignatureError";
    this.code = code;
  }
}

/** The header with the timestamped signature. */
export const signatureHeader = "X-Orderd-Signature-V2";

/** How far, in seconds, a signature's time may be from now, either way. */
export const maxAgeSeconds = 300;

export type HeadersLike = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** The receiver's clock, in milliseconds since the epoch; Date.now() by default. */
  now?: number;
}

/** verifyWebhook checks a delivery's X-Orderd-Signature-V2
 * (`t=<unix>,v1=<hex HMAC-SHA256(secret, "<unix>.<body>")>`) against the
 * raw body exactly as received and the merchant's webhook secret, refuses
 * a time more than 5 minutes from now, and returns the parsed event. Any v1
 * entry may match, so a delivery signed with two secrets while one
 * replaces the other verifies with either. It throws
 * WebhookSignatureError otherwise; answer that with 400 or 401 so that
 * orderd does not count the delivery as received. */
export async function verifyWebhook(
  secret: string,
  headers: HeadersLike,
  body: string | Uint8Array | ArrayBuffer,
  options: VerifyOptions = {},
): Promise<WebhookEvent> {
  const { unix, sigs } = parse(header(headers, signatureHeader));
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  const t = Number(unix);
  if (!Number.isSafeInteger(t)) throw new WebhookSignatureError("malformed", "webhook signature time is not a number");
  if (Math.abs(now - t) > maxAgeSeconds) {
    throw new WebhookSignatureError("too_old", `webhook signed at ${t}, now ${now}: outside the tolerated window`);
  }
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : new Uint8Array(body);
  const signed = concat(new TextEncoder().encode(unix + "."), bytes);
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  for (const sig of sigs) {
    // verify compares in constant time.
    if (await crypto.subtle.verify("HMAC", key, sig, signed)) {
      return JSON.parse(new TextDecoder().decode(bytes)) as WebhookEvent;
    }
  }
  throw new WebhookSignatureError("mismatch", "webhook signature does not match");
}

function header(headers: HeadersLike, name: string): string {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? "";
  const want = name.toLowerCase();
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === want) return Array.isArray(v) ? v.join(",") : v ?? "";
  }
  return "";
}

// parse splits "t=…,v1=…[,v1=…]"; entries of other schemes are skipped, so
// that a later scheme can be added beside v1.
function parse(value: string): { unix: string; sigs: Uint8Array<ArrayBuffer>[] } {
  const malformed = () => new WebhookSignatureError("malformed", `${signatureHeader} missing or malformed`);
  if (!value || value.length > 1024) throw malformed();
  let unix = "";
  const sigs: Uint8Array<ArrayBuffer>[] = [];
  for (const part of value.split(",")) {
    const entry = part.trim();
    const eq = entry.indexOf("=");
    if (eq < 0) throw malformed();
    const k = entry.slice(0, eq), v = entry.slice(eq + 1);
    if (k === "t") {
      if (unix || !/^\d+$/.test(v)) throw malformed();
      unix = v;
    } else if (k === "v1") {
      if (!/^[0-9a-fA-F]{64}$/.test(v)) throw malformed();
      sigs.push(Uint8Array.from(v.match(/../g)!, (h) => parseInt(h, 16)));
    }
  }
  if (!unix || !sigs.length) throw malformed();
  return { unix, sigs };
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
