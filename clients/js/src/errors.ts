import type { components } from "./openapi.js";

/** Every problem code the API documents. */
export type ProblemCode = components["schemas"]["Problem"]["code"];

/** An RFC 9457 problem as the API answers it. */
export type Problem = components["schemas"]["Problem"];

// An answer that is not a problem (a proxy's error page, say) still gets
// the code its status means in the API, so callers handle one shape.
const codeOfStatus: Record<number, ProblemCode> = {
  400: "malformed_json",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  413: "payload_too_large",
  415: "unsupported_media_type",
  422: "validation_failed",
  429: "rate_limited",
  502: "unavailable",
  503: "unavailable",
  504: "unavailable",
};

/** The error a call throws when the server refuses it. `code` is the
 * problem's stable, machine-readable code (`sold_out`,
 * `invalid_transition`, `rate_limited`, ...). A refused request wrote
 * nothing. */
export class OrderdError extends Error {
  readonly status: number;
  readonly code: ProblemCode;
  readonly detail: string;
  readonly problem: Problem;
  /** Seconds the server asked to wait (Retry-After), when it said. */
  readonly retryAfter?: number;

  constructor(status: number, problem: Partial<Problem> | null, retryAfter?: number) {
    const code = (problem?.code ?? codeOfStatus[status] ?? "internal") as ProblemCode;
    const detail = problem?.detail || problem?.title || `request failed (${status})`;
    super(detail);
    this.name = "OrderdError";
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.problem = { type: "about:blank", title: detail, ...problem, status, code, detail } as Problem;
    if (retryAfter !== undefined) this.retryAfter = retryAfter;
  }
}

/** A websocket watch that cannot go on: the server refused the
 * subscription (`not_found`, `forbidden`, ...) or the credentials. */
export class WatchError extends Error {
  readonly code: ProblemCode;
  constructor(code: ProblemCode, detail: string) {
    super(detail);
    this.name = "WatchError";
    this.code = code;
  }
}
