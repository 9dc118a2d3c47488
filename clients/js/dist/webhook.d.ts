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
export declare class WebhookSignatureError extends Error {
    readonly code: WebhookErrorCode;
    constructor(code: WebhookErrorCode, message: string);
}
/** The header with the timestamped signature. */
export declare const signatureHeader = "X-Orderd-Signature-V2";
/** How far, in seconds, a signature's time may be from now, either way. */
export declare const maxAgeSeconds = 300;
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
export declare function verifyWebhook(secret: string, headers: HeadersLike, body: string | Uint8Array | ArrayBuffer, options?: VerifyOptions): Promise<WebhookEvent>;
