import type { components } from "./openapi.js";
import type { Answer, Body, CallOptions, Input, OperationId, Query } from "./types.js";
/** Every operation that answers JSON: its method, path, whether the server
 * replays a repeated Idempotency-Key, and whether it needs a token. */
export declare const operations: {
    readonly audit: {
        readonly method: "GET";
        readonly path: "/v1/admin/audit";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly cancelOrder: {
        readonly method: "POST";
        readonly path: "/v1/orders/{id}/cancel";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly checkpointConsistency: {
        readonly method: "GET";
        readonly path: "/v1/audit/checkpoints/consistency";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly completeOrder: {
        readonly method: "POST";
        readonly path: "/v1/orders/{id}/complete";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly createDrop: {
        readonly method: "POST";
        readonly path: "/v1/products/{id}/drops";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly createMerchant: {
        readonly method: "POST";
        readonly path: "/v1/merchants";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly createProduct: {
        readonly method: "POST";
        readonly path: "/v1/merchants/{id}/products";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly getDrop: {
        readonly method: "GET";
        readonly path: "/v1/drops/{id}";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly getDropDraw: {
        readonly method: "GET";
        readonly path: "/v1/drops/{id}/draw";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly getMerchant: {
        readonly method: "GET";
        readonly path: "/v1/merchants/{id}";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly getOrder: {
        readonly method: "GET";
        readonly path: "/v1/orders/{id}";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly getProduct: {
        readonly method: "GET";
        readonly path: "/v1/products/{id}";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly healthz: {
        readonly method: "GET";
        readonly path: "/healthz";
        readonly idempotent: false;
        readonly auth: false;
    };
    readonly hideProduct: {
        readonly method: "DELETE";
        readonly path: "/v1/merchants/{mid}/products/{pid}";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly issueWebSocketTicket: {
        readonly method: "POST";
        readonly path: "/v1/ws/tickets";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly joinDrop: {
        readonly method: "POST";
        readonly path: "/v1/drops/{id}/entries";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly latestCheckpoint: {
        readonly method: "GET";
        readonly path: "/v1/audit/checkpoints/latest";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly listDeadLetters: {
        readonly method: "GET";
        readonly path: "/v1/admin/dead-letters";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly listMerchantOrders: {
        readonly method: "GET";
        readonly path: "/v1/merchants/{id}/orders";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly listOwnOrders: {
        readonly method: "GET";
        readonly path: "/v1/orders";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly listProducts: {
        readonly method: "GET";
        readonly path: "/v1/merchants/{id}/products";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly listSlots: {
        readonly method: "GET";
        readonly path: "/v1/merchants/{id}/slots";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly listWebhookAttempts: {
        readonly method: "GET";
        readonly path: "/v1/admin/webhook-attempts";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly mintSignInCode: {
        readonly method: "POST";
        readonly path: "/v1/admin/sign-in-codes";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly myDropEntry: {
        readonly method: "GET";
        readonly path: "/v1/drops/{id}/entries/me";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly openapi: {
        readonly method: "GET";
        readonly path: "/openapi.json";
        readonly idempotent: false;
        readonly auth: false;
    };
    readonly orderEvents: {
        readonly method: "GET";
        readonly path: "/v1/orders/{id}/events";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly orderProof: {
        readonly method: "GET";
        readonly path: "/v1/orders/{id}/proof";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly pauseMerchant: {
        readonly method: "POST";
        readonly path: "/v1/merchants/{id}/pause";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly payOrder: {
        readonly method: "POST";
        readonly path: "/v1/orders/{id}/pay";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly pickUpOrder: {
        readonly method: "POST";
        readonly path: "/v1/orders/{id}/picked-up";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly placeOrder: {
        readonly method: "POST";
        readonly path: "/v1/orders";
        readonly idempotent: true;
        readonly auth: true;
    };
    readonly prioritizeOrder: {
        readonly method: "POST";
        readonly path: "/v1/orders/{id}/prioritize";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly readyz: {
        readonly method: "GET";
        readonly path: "/readyz";
        readonly idempotent: false;
        readonly auth: false;
    };
    readonly reopenOrder: {
        readonly method: "POST";
        readonly path: "/v1/orders/{id}/reopen";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly resolveDeadLetter: {
        readonly method: "POST";
        readonly path: "/v1/admin/dead-letters/{id}/resolve";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly restockProduct: {
        readonly method: "POST";
        readonly path: "/v1/products/{id}/restock";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly resumeMerchant: {
        readonly method: "POST";
        readonly path: "/v1/merchants/{id}/resume";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly retryDeadLetter: {
        readonly method: "POST";
        readonly path: "/v1/admin/dead-letters/{id}/retry";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly retryMerchantWebhooks: {
        readonly method: "POST";
        readonly path: "/v1/admin/dead-letters/retry";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly rotateWebhookSecret: {
        readonly method: "POST";
        readonly path: "/v1/merchants/{id}/webhook-secret";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly signIn: {
        readonly method: "POST";
        readonly path: "/v1/sign-in";
        readonly idempotent: false;
        readonly auth: false;
    };
    readonly startGuestSession: {
        readonly method: "POST";
        readonly path: "/v1/merchants/{id}/guest-sessions";
        readonly idempotent: false;
        readonly auth: false;
    };
    readonly updateMerchant: {
        readonly method: "PATCH";
        readonly path: "/v1/merchants/{id}";
        readonly idempotent: false;
        readonly auth: true;
    };
    readonly updateProduct: {
        readonly method: "PATCH";
        readonly path: "/v1/merchants/{mid}/products/{pid}";
        readonly idempotent: false;
        readonly auth: true;
    };
};
/** One typed method per operation; the client supplies call. */
export declare abstract class Endpoints {
    protected abstract call<K extends OperationId>(op: K, input: Input, options?: CallOptions): Promise<Answer<K>>;
    /** Run every invariant check (`GET /v1/admin/audit`) */
    audit(options?: CallOptions): Promise<Answer<"audit">>;
    /** Cancel an order (`POST /v1/orders/{id}/cancel`) */
    cancelOrder(id: string, body?: Body<"cancelOrder">, options?: CallOptions): Promise<Answer<"cancelOrder">>;
    /** Proof that the log only grew between two checkpoints (`GET /v1/audit/checkpoints/consistency`) */
    checkpointConsistency(query: Query<"checkpointConsistency">, options?: CallOptions): Promise<Answer<"checkpointConsistency">>;
    /** Complete an accepted order (`POST /v1/orders/{id}/complete`) */
    completeOrder(id: string, options?: CallOptions): Promise<Answer<"completeOrder">>;
    /** Schedule a drop of a limited product (`POST /v1/products/{id}/drops`) */
    createDrop(id: string, body: Body<"createDrop">, options?: CallOptions): Promise<Answer<"createDrop">>;
    /** Create a merchant (`POST /v1/merchants`) */
    createMerchant(body: Body<"createMerchant">, options?: CallOptions): Promise<Answer<"createMerchant">>;
    /** Add a product (`POST /v1/merchants/{id}/products`) */
    createProduct(id: string, body: Body<"createProduct">, options?: CallOptions): Promise<Answer<"createProduct">>;
    /** A drop (`GET /v1/drops/{id}`) */
    getDrop(id: string, options?: CallOptions): Promise<Answer<"getDrop">>;
    /** Everything needed to recompute a drop's ranks (`GET /v1/drops/{id}/draw`) */
    getDropDraw(id: string, options?: CallOptions): Promise<Answer<"getDropDraw">>;
    /** A merchant and its live load (`GET /v1/merchants/{id}`) */
    getMerchant(id: string, options?: CallOptions): Promise<Answer<"getMerchant">>;
    /** An order (`GET /v1/orders/{id}`) */
    getOrder(id: string, options?: CallOptions): Promise<Answer<"getOrder">>;
    /** A product (`GET /v1/products/{id}`) */
    getProduct(id: string, options?: CallOptions): Promise<Answer<"getProduct">>;
    /** Liveness (`GET /healthz`) */
    healthz(options?: CallOptions): Promise<Answer<"healthz">>;
    /** Take a product off the menu (`DELETE /v1/merchants/{mid}/products/{pid}`) */
    hideProduct(mid: string, pid: string, options?: CallOptions): Promise<Answer<"hideProduct">>;
    /** Issue a WebSocket ticket (`POST /v1/ws/tickets`) */
    issueWebSocketTicket(options?: CallOptions): Promise<Answer<"issueWebSocketTicket">>;
    /** Join a drop's line (`POST /v1/drops/{id}/entries`) */
    joinDrop(id: string, options?: CallOptions): Promise<Answer<"joinDrop">>;
    /** The log's latest signed checkpoint (`GET /v1/audit/checkpoints/latest`) */
    latestCheckpoint(query?: Query<"latestCheckpoint">, options?: CallOptions): Promise<Answer<"latestCheckpoint">>;
    /** Dead letters, newest first (`GET /v1/admin/dead-letters`) */
    listDeadLetters(query?: Query<"listDeadLetters">, options?: CallOptions): Promise<Answer<"listDeadLetters">>;
    /** A merchant's orders of one status (`GET /v1/merchants/{id}/orders`) */
    listMerchantOrders(id: string, query?: Query<"listMerchantOrders">, options?: CallOptions): Promise<Answer<"listMerchantOrders">>;
    /** The caller's own orders, newest first (`GET /v1/orders`) */
    listOwnOrders(query?: Query<"listOwnOrders">, options?: CallOptions): Promise<Answer<"listOwnOrders">>;
    /** A merchant's menu (`GET /v1/merchants/{id}/products`) */
    listProducts(id: string, options?: CallOptions): Promise<Answer<"listProducts">>;
    /** A merchant's pickup slots of a day (`GET /v1/merchants/{id}/slots`) */
    listSlots(id: string, query?: Query<"listSlots">, options?: CallOptions): Promise<Answer<"listSlots">>;
    /** Webhook attempts, newest first (`GET /v1/admin/webhook-attempts`) */
    listWebhookAttempts(query?: Query<"listWebhookAttempts">, options?: CallOptions): Promise<Answer<"listWebhookAttempts">>;
    /** Mint a single-use sign-in code (`POST /v1/admin/sign-in-codes`) */
    mintSignInCode(body: Body<"mintSignInCode">, options?: CallOptions): Promise<Answer<"mintSignInCode">>;
    /** The calling customer's entry in a drop (`GET /v1/drops/{id}/entries/me`) */
    myDropEntry(id: string, options?: CallOptions): Promise<Answer<"myDropEntry">>;
    /** This document (`GET /openapi.json`) */
    openapi(options?: CallOptions): Promise<Answer<"openapi">>;
    /** An order's history (`GET /v1/orders/{id}/events`) */
    orderEvents(id: string, options?: CallOptions): Promise<Answer<"orderEvents">>;
    /** An order's receipt: its events' inclusion in a checkpoint (`GET /v1/orders/{id}/proof`) */
    orderProof(id: string, query?: Query<"orderProof">, options?: CallOptions): Promise<Answer<"orderProof">>;
    /** Pause a merchant's intake (`POST /v1/merchants/{id}/pause`) */
    pauseMerchant(id: string, body: Body<"pauseMerchant">, options?: CallOptions): Promise<Answer<"pauseMerchant">>;
    /** Pay an order (`POST /v1/orders/{id}/pay`) */
    payOrder(id: string, body: Body<"payOrder">, options?: CallOptions): Promise<Answer<"payOrder">>;
    /** Mark a completed order picked up (`POST /v1/orders/{id}/picked-up`) */
    pickUpOrder(id: string, options?: CallOptions): Promise<Answer<"pickUpOrder">>;
    /** Place an order (`POST /v1/orders`) */
    placeOrder(body: Body<"placeOrder">, options?: CallOptions): Promise<Answer<"placeOrder">>;
    /** Move a queued order to the priority lane (`POST /v1/orders/{id}/prioritize`) */
    prioritizeOrder(id: string, body?: Body<"prioritizeOrder">, options?: CallOptions): Promise<Answer<"prioritizeOrder">>;
    /** Readiness (`GET /readyz`) */
    readyz(options?: CallOptions): Promise<Answer<"readyz">>;
    /** Undo a completion (`POST /v1/orders/{id}/reopen`) */
    reopenOrder(id: string, options?: CallOptions): Promise<Answer<"reopenOrder">>;
    /** Mark a dead letter handled (`POST /v1/admin/dead-letters/{id}/resolve`) */
    resolveDeadLetter(id: string, body?: Body<"resolveDeadLetter">, options?: CallOptions): Promise<Answer<"resolveDeadLetter">>;
    /** Add units to a limited product (`POST /v1/products/{id}/restock`) */
    restockProduct(id: string, body: Body<"restockProduct">, options?: CallOptions): Promise<Answer<"restockProduct">>;
    /** Resume a paused merchant (`POST /v1/merchants/{id}/resume`) */
    resumeMerchant(id: string, options?: CallOptions): Promise<Answer<"resumeMerchant">>;
    /** Retry a dead letter (`POST /v1/admin/dead-letters/{id}/retry`) */
    retryDeadLetter(id: string, options?: CallOptions): Promise<Answer<"retryDeadLetter">>;
    /** Retry every dead webhook of a merchant (`POST /v1/admin/dead-letters/retry`) */
    retryMerchantWebhooks(query: Query<"retryMerchantWebhooks">, options?: CallOptions): Promise<Answer<"retryMerchantWebhooks">>;
    /** Rotate the webhook secret (`POST /v1/merchants/{id}/webhook-secret`) */
    rotateWebhookSecret(id: string, options?: CallOptions): Promise<Answer<"rotateWebhookSecret">>;
    /** Exchange a sign-in code for a bearer token (`POST /v1/sign-in`) */
    signIn(body: Body<"signIn">, options?: CallOptions): Promise<Answer<"signIn">>;
    /** Start a walk-in customer's session (`POST /v1/merchants/{id}/guest-sessions`) */
    startGuestSession(id: string, options?: CallOptions): Promise<Answer<"startGuestSession">>;
    /** Change a merchant's settings (`PATCH /v1/merchants/{id}`) */
    updateMerchant(id: string, body: Body<"updateMerchant">, options?: CallOptions): Promise<Answer<"updateMerchant">>;
    /** Change a menu item (`PATCH /v1/merchants/{mid}/products/{pid}`) */
    updateProduct(mid: string, pid: string, body: Body<"updateProduct">, options?: CallOptions): Promise<Answer<"updateProduct">>;
}
export type AuditCheck = components["schemas"]["AuditCheck"];
export type AuditReport = components["schemas"]["AuditReport"];
export type Cancel = components["schemas"]["Cancel"];
export type CapacityUnit = components["schemas"]["CapacityUnit"];
export type Checkpoint = components["schemas"]["Checkpoint"];
export type ChosenOption = components["schemas"]["ChosenOption"];
export type CreateDrop = components["schemas"]["CreateDrop"];
export type CreateMerchant = components["schemas"]["CreateMerchant"];
export type CreateProduct = components["schemas"]["CreateProduct"];
export type DeadLetter = components["schemas"]["DeadLetter"];
export type Draw = components["schemas"]["Draw"];
export type Drop = components["schemas"]["Drop"];
export type Entry = components["schemas"]["Entry"];
export type GuestSession = components["schemas"]["GuestSession"];
export type Item = components["schemas"]["Item"];
export type Load = components["schemas"]["Load"];
export type Merchant = components["schemas"]["Merchant"];
export type MintSignInCode = components["schemas"]["MintSignInCode"];
export type Option = components["schemas"]["Option"];
export type OptionGroup = components["schemas"]["OptionGroup"];
export type Order = components["schemas"]["Order"];
export type OrderEvent = components["schemas"]["OrderEvent"];
export type OrderProof = components["schemas"]["OrderProof"];
export type OrderStatus = components["schemas"]["OrderStatus"];
export type PatchMerchant = components["schemas"]["PatchMerchant"];
export type PatchProduct = components["schemas"]["PatchProduct"];
export type Pause = components["schemas"]["Pause"];
export type Pay = components["schemas"]["Pay"];
export type Period = components["schemas"]["Period"];
export type PlaceOrder = components["schemas"]["PlaceOrder"];
export type Prioritize = components["schemas"]["Prioritize"];
export type Problem = components["schemas"]["Problem"];
export type Product = components["schemas"]["Product"];
export type Resolve = components["schemas"]["Resolve"];
export type Restock = components["schemas"]["Restock"];
export type SignIn = components["schemas"]["SignIn"];
export type SignInCode = components["schemas"]["SignInCode"];
export type SignedIn = components["schemas"]["SignedIn"];
export type Slot = components["schemas"]["Slot"];
export type SlotSettings = components["schemas"]["SlotSettings"];
export type WebSocketTicket = components["schemas"]["WebSocketTicket"];
export type WebhookAttempt = components["schemas"]["WebhookAttempt"];
