import { Endpoints } from "./endpoints.js";
import type { Order } from "./endpoints.js";
import type { Answer, CallOptions, Input, OperationId } from "./types.js";
import type { MerchantLoad, MerchantStatus, ReconnectOptions, Watch, WatchOptions, WebSocketLike } from "./watch.js";
/** A token, or a function that returns the current one (called before
 * every request, so a refreshed token is used at once). */
export type TokenSource = string | null | undefined | (() => string | null | undefined | Promise<string | null | undefined>);
export interface ClientOptions {
    /** The server, such as `https://orders.example.com`. In a browser it
     * defaults to the page's origin. */
    baseUrl?: string;
    /** The bearer token (a JWT), or a function returning it. */
    token?: TokenSource;
    /** The fetch to use; the global one by default. */
    fetch?: typeof fetch;
    /** The WebSocket class for watches; the global one by default (browsers,
     * Node 22 and later). On Node 20 pass `WebSocket` from the `ws` package. */
    WebSocket?: new (url: string) => WebSocketLike;
    /** Retries of a refusal that wrote nothing (429, 503) or of a lost
     * connection on a request that is safe to repeat. Default 2. */
    retries?: number;
    /** The longest wait before a retry, in milliseconds: a Retry-After
     * longer than this is thrown to the caller instead. Default 10 000. */
    maxRetryDelay?: number;
    /** Waits between reconnections of the websocket, in milliseconds:
     * the first (500), doubled per failed attempt up to max (15 000), each
     * wait between half and all of that. */
    reconnect?: ReconnectOptions;
}
/** orderd's client: one typed method per endpoint (named after its
 * operationId in the OpenAPI document), and live watches of orders and
 * merchants over one websocket that all the client's watches share. */
export declare class OrderdClient extends Endpoints {
    readonly baseUrl: string;
    readonly options: Readonly<ClientOptions>;
    private live?;
    constructor(options?: ClientOptions);
    /** Watches an order: onUpdate gets the order at once, on every change of
     * its status, place in line or estimate, and again after every
     * reconnection (never a state older than one it already had). */
    watchOrder(id: string, onUpdate: (order: Order) => void, options?: WatchOptions): Watch;
    /** Watches a merchant's load, as its kitchen sees it (the merchant
     * itself or an admin): onUpdate gets it at once, on every change, and
     * after every reconnection. */
    watchMerchantLoad(id: string, onUpdate: (load: MerchantLoad) => void, options?: WatchOptions): Watch;
    /** Watches a merchant's public status, as any signed-in customer may:
     * open, paused (with the mode and end), busy, and the line's length and
     * estimated wait. onUpdate gets it at once, when it opens, pauses or
     * gets busy, as the line's numbers move by enough to notice, and after
     * every reconnection. */
    watchMerchant(id: string, onUpdate: (status: MerchantStatus) => void, options?: WatchOptions): Watch;
    private connection;
    /** The current bearer token, if any. */
    token(): Promise<string | undefined>;
    protected call<K extends OperationId>(op: K, input: Input, options?: CallOptions): Promise<Answer<K>>;
    private url;
}
/** A fresh Idempotency-Key: a random UUID. crypto.randomUUID exists only in
 * secure contexts, so a page served over plain HTTP builds one itself. */
export declare function newKey(): string;
/** backoff is the wait before retry n (from 0): doubling from 250 ms up to
 * 8 s, with full jitter so that clients refused together do not return
 * together. */
export declare function backoff(n: number, first?: number, max?: number): number;
export declare function sleep(ms: number, signal?: AbortSignal): Promise<void>;
