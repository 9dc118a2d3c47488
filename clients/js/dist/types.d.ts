import type { operations as Operations } from "./openapi.js";
import type { operations } from "./endpoints.js";
/** The operationId of every JSON operation of the API. */
export type OperationId = keyof typeof operations;
type JSONOf<T> = T extends {
    content: {
        "application/json": infer B;
    };
} ? B : never;
/** The JSON body an operation takes. */
export type Body<K extends OperationId> = Operations[K] extends {
    requestBody?: infer R;
} ? JSONOf<NonNullable<R>> : never;
/** The query parameters an operation takes. */
export type Query<K extends OperationId> = Operations[K]["parameters"] extends {
    query?: infer Q;
} ? NonNullable<Q> : never;
/** What an operation answers on success: its JSON, or undefined for 204. */
export type Answer<K extends OperationId> = {
    [S in keyof Operations[K]["responses"]]: S extends 200 | 201 ? JSONOf<Operations[K]["responses"][S]> : S extends 204 ? undefined : never;
}[keyof Operations[K]["responses"]];
/** A call's parts, as the generated methods pass them. */
export interface Input {
    path?: Record<string, string>;
    query?: object;
    body?: unknown;
}
/** Options of one call. */
export interface CallOptions {
    /** The Idempotency-Key of a write. Without one, each call makes its own,
     * kept across that call's retries; pass the same key again to make a
     * retry after a lost answer safe. */
    idempotencyKey?: string;
    /** Cancels the call, including a wait before a retry. */
    signal?: AbortSignal;
    /** How many times to retry a refusal that wrote nothing (429, 503), or a
     * lost connection on a request that is safe to repeat; the client's
     * setting by default. */
    retries?: number;
    /** Extra request headers. */
    headers?: Record<string, string>;
}
export {};
