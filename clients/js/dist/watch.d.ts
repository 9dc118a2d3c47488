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
/** A merchant's public status (the merchant_status message). */
export interface MerchantStatus {
    merchant_id: string;
    /** Placements are taken now (false while paused to refuse). */
    open: boolean;
    paused: boolean;
    pause_mode: "queue" | "refuse" | null;
    paused_until: string | null;
    /** An order paid now would wait in line. */
    busy: boolean;
    /** Orders in line. */
    queued: number;
    /** The estimated wait of an order paid now; 0 when not busy. */
    est_wait_seconds: number;
}
/** connecting: not yet subscribed; live: subscribed, and the server's
 * current state received; reconnecting: the connection was lost and a
 * new one will be made; closed: the watch ended. */
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
}
/** Reconnection delays in milliseconds: the first, doubled per failed
 * attempt up to max, each wait between half and all of that. */
export interface ReconnectOptions {
    first?: number;
    max?: number;
}
/** A running watch. */
export interface Watch {
    /** Ends the watch; the connection closes with the client's last watch. */
    close(): void;
    readonly state: WatchState;
}
/** What a subscription names: the subscribe message's key and its id. */
export interface Target {
    key: "order_id" | "merchant_id" | "merchant_status" | "entry_id" | "drop_id";
    id: string;
}
/** Live is a client's one websocket, shared by all its watches. Each
 * connection opens with a fresh single-use ticket (a ticket works once and
 * for a minute, so none is kept for a reconnection) and subscribes to
 * everything watched again; the server answers each subscription with the
 * current state, so nothing that changed while the connection was down is
 * missed. Subscribes go one at a time, each after the answer to the one
 * before: the server's error messages do not say which subscription they
 * refuse, and so the one waiting is the one refused. */
export declare class Live {
    private readonly client;
    private readonly reconnect;
    private readonly subs;
    private ws;
    private timer;
    private failures;
    private opening;
    private queue;
    private waiting;
    private waitTimer;
    private readonly events;
    constructor(client: OrderdClient, reconnect?: ReconnectOptions);
    watch(target: Target, deliver: (m: any) => void, options: WatchOptions): Watch;
    private remove;
    private stop;
    private enqueue;
    private pump;
    private answered;
    private readonly online;
    private retry;
    private failAll;
    private connect;
    private received;
    private refused;
}
