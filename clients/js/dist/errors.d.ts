import type { components } from "./openapi.js";
/** Every problem code the API documents. */
export type ProblemCode = components["schemas"]["Problem"]["code"];
/** An RFC 9457 problem as the API answers it. */
export type Problem = components["schemas"]["Problem"];
/** The error a call throws when the server refuses it. `code` is the
 * problem's stable, machine-readable code (`sold_out`,
 * `invalid_transition`, `rate_limited`, ...). A refused request wrote
 * nothing. */
export declare class OrderdError extends Error {
    readonly status: number;
    readonly code: ProblemCode;
    readonly detail: string;
    readonly problem: Problem;
    /** Seconds the server asked to wait (Retry-After), when it said. */
    readonly retryAfter?: number;
    constructor(status: number, problem: Partial<Problem> | null, retryAfter?: number);
}
/** A websocket watch that cannot go on: the server refused the
 * subscription (`not_found`, `forbidden`, ...) or the credentials. */
export declare class WatchError extends Error {
    readonly code: ProblemCode;
    constructor(code: ProblemCode, detail: string);
}
