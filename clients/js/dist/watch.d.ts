import type { OrderdClient } from "./client.js";
import type { Load } from "./endpoints.js";
import { WatchError } from "./errors.js";
/** The part of the WebSocket API a watch uses: the browser's WebSocket and
 * the `ws` package's both have it. */
export interface WebSocketLike {
    readonly readyState: number;
    onopen: ((ev: any) => void) | null;
    onmessage: ((ev: {
        data: unknown;
    }) => void) | null;
    onclose: ((ev: any) => void) | null;
    onerror: ((ev: any) => void) | null;
    send(data: string): void;
    close(code?: number, reason?: string): void;
}
/** A merchant's load as the websocket sends it. */
export type MerchantLoad = Load & {
    merchant_id: string;
};
/** connecting: the first connection is being made; live: subscribed and
 * the server's current state received; reconnecting: the connection was
 * lost and a new one will be made; closed: the watch ended. */
export type WatchState = "connecting" | "live" | "reconnecting" | "closed";
export interface WatchOptions {
    /** Called on every change of the watch's state (for a "live" badge). */
    onState?: (state: WatchState) => void;
    /** Called once when the watch cannot go on (the server refused the
     * subscription or the token); the watch is closed then. Without it the
     * error goes to console.error. */
    onError?: (error: WatchError) => void;
    /** Closes the watch when aborted. */
    signal?: AbortSignal;
    /** Reconnection delays in milliseconds: the first, doubled per failed
     * attempt up to max, each with jitter. Defaults 500 and 15 000. */
    reconnect?: {
        first?: number;
        max?: number;
    };
}
/** A running watch. */
export interface Watch {
    /** Ends the watch and its connection. */
    close(): void;
    readonly state: WatchState;
}
/** watch keeps one websocket subscribed to sub, through every lost
 * connection, until closed. Each connection opens with a fresh single-use
 * ticket (a ticket works once and for a minute, so none is kept for a
 * reconnection) and subscribes again; the server answers a subscription
 * with the current state, so nothing that changed while the connection was
 * down is missed. */
export declare function watch(client: OrderdClient, sub: Record<string, string>, onMessage: (m: any) => void, options: WatchOptions): Watch;
