export interface paths {
    "/v1/merchants": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Create a merchant
         * @description Admin only. prep_seconds defaults to 120, max_queue_wait_seconds to 1800, payment_timeout_seconds to 900.
         */
        post: operations["createMerchant"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/merchants/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /** A merchant and its live load */
        get: operations["getMerchant"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        /**
         * Change a merchant's settings
         * @description Admin only. Raising capacity admits queued orders at once, in queue order; lowering it never evicts accepted orders.
         */
        patch: operations["updateMerchant"];
        trace?: never;
    };
    "/v1/merchants/{id}/webhook-secret": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Rotate the webhook secret */
        post: operations["rotateWebhookSecret"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/merchants/{id}/pause": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Pause a merchant's intake
         * @description The merchant or an admin. Nobody is admitted until it resumes; in refuse mode new placements answer 409 merchant_paused with Retry-After when the end is known. With an end, it resumes by itself within 1 s of it.
         */
        post: operations["pauseMerchant"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/merchants/{id}/resume": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Resume a paused merchant
         * @description The merchant or an admin. Resuming an unpaused merchant is a no-op.
         */
        post: operations["resumeMerchant"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/merchants/{id}/products": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /** A merchant's menu */
        get: operations["listProducts"];
        put?: never;
        /**
         * Add a product
         * @description That merchant or an admin. stock null or absent is unlimited.
         */
        post: operations["createProduct"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/merchants/{id}/orders": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /**
         * A merchant's orders of one status
         * @description That merchant or an admin. Queued orders run in queue order, next to be admitted first; every other status newest first (placed_at, then id).
         */
        get: operations["listMerchantOrders"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/merchants/{id}/slots": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /**
         * A merchant's pickup slots of a day
         * @description Any authenticated caller. The slots of the local date in the merchant's time zone, within opening hours, from now + lead_minutes to horizon_days ahead, with what their orders take.
         */
        get: operations["listSlots"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/products/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /** A product */
        get: operations["getProduct"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/products/{id}/restock": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Add units to a limited product */
        post: operations["restockProduct"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/orders": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The caller's own orders, newest first
         * @description Customers only: the orders they placed. Merchants and admins list a merchant's orders at /v1/merchants/{id}/orders. Pages are keyed, not counted: orders placed while paging appear on no later page, and no order appears twice.
         */
        get: operations["listOwnOrders"];
        put?: never;
        /**
         * Place an order
         * @description Customers only. Stock is reserved at once. The same key with the same body answers the original order (200); with another body 422 idempotency_key_reused. A line names options by id (options: [...]); a missing required group, too many choices, an option of another product or a repeated option answers 422 naming the line and group; a product sold out today or off the menu answers 409 product_unavailable.
         */
        post: operations["placeOrder"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/orders/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /** An order */
        get: operations["getOrder"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/orders/{id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /** An order's history */
        get: operations["orderEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/orders/{id}/pay": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Pay an order
         * @description The customer who placed it. Paying again with the same payment_ref answers the current order.
         */
        post: operations["payOrder"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/orders/{id}/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Cancel an order
         * @description The customer while awaiting_payment or queued; the merchant or an admin while not terminal. Stock and capacity are released.
         */
        post: operations["cancelOrder"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/orders/{id}/complete": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Complete an accepted order
         * @description The merchant or an admin. Its unit goes to the head of the queue in the same transaction.
         */
        post: operations["completeOrder"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/orders/{id}/prioritize": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Move a queued order to the priority lane
         * @description The merchant or an admin. 409 invalid_transition unless the order is queued.
         */
        post: operations["prioritizeOrder"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/admin/dead-letters": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Dead letters, newest first */
        get: operations["listDeadLetters"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/admin/dead-letters/{id}/retry": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Retry a dead letter
         * @description An expired order goes back to its merchant's queue ahead of orders queued after it; a webhook is delivered again.
         */
        post: operations["retryDeadLetter"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/admin/dead-letters/{id}/resolve": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Mark a dead letter handled */
        post: operations["resolveDeadLetter"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/admin/dead-letters/retry": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Retry every dead webhook of a merchant */
        post: operations["retryMerchantWebhooks"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/admin/webhook-attempts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Webhook attempts, newest first
         * @description outbox_id or merchant_id is required.
         */
        get: operations["listWebhookAttempts"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/admin/audit": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Run every invariant check */
        get: operations["audit"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/admin/sign-in-codes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Mint a single-use sign-in code
         * @description Admin only: how a platform signs a person in to the customer page or the kitchen display without putting a token in a URL. Hand them <base>/#code=<code> (customers: <base>/?merchant=<id>#code=<code>) or <base>/kitchen#code=<code>. Only the code's SHA-256 is stored.
         */
        post: operations["mintSignInCode"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ws": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Live updates over a WebSocket
         * @description A WebSocket upgrade. Authenticated by the Authorization header or, for browsers, a single-use ticket from POST /v1/ws/tickets in the ticket query parameter (the access_token query parameter still works here only, deprecated). Subscribes are limited per connection; over the limit the answer is {"type":"error","code":"rate_limited","detail","retry_after_seconds"}. Client messages: {"op":"subscribe"|"unsubscribe","order_id"|"merchant_id"|"merchant_status"|"entry_id"|"drop_id":"..."} (exactly one; merchant_id is the merchant's load, for that merchant or an admin; merchant_status its public status, anyone's; an entry is its customer's, a drop anyone's). Server messages: {"type":"order","order":Order}, {"type":"merchant_load",...}, {"type":"merchant_status","merchant_id","open","paused","pause_mode","paused_until","busy","queued","est_wait_seconds"}, {"type":"entry","entry":Entry} (position only falls), {"type":"drop","drop":Drop}, {"type":"error","code","detail"}.
         */
        get: operations["liveUpdates"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/ws/tickets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Issue a WebSocket ticket
         * @description Any authenticated caller. The ticket opens one WebSocket (GET /v1/ws?ticket=...) within 60 s, on any instance, once; browsers use it instead of putting their bearer token in a URL.
         */
        post: operations["issueWebSocketTicket"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sign-in": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Exchange a sign-in code for a bearer token
         * @description No token needed: the code is the credential. A code works once, until its expires_at; every code that does not work (unknown, used, expired, malformed) answers the same 401. Limited per client address (ORDERD_RATE_SIGN_IN). The pages read the code from their URL's fragment (#code=...), which browsers never send to a server, remove it from the address bar, exchange it here and keep the token in sessionStorage.
         */
        post: operations["signIn"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Liveness */
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readiness */
        get: operations["readyz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This document */
        get: operations["openapi"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The customer's ordering page
         * @description The customer's page: the merchant's menu (?merchant=<id>), a cart, place and pay, then a live ticket. Signing in: a link <base>/?merchant=<id>#code=<sign-in code>; the page exchanges the code (POST /v1/sign-in) and keeps the token in sessionStorage.
         */
        get: operations["customerPage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/kitchen": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The kitchen display
         * @description A merchant's kitchen display: accepted orders as tickets to complete or cancel, the waiting line, capacity, pause and resume, the live load. Signing in: <base>/kitchen#code=<sign-in code> (an admin adds ?merchant=<id>).
         */
        get: operations["kitchenPage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/assets/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        /** The pages' stylesheet and scripts */
        get: operations["pageAsset"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/products/{id}/drops": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Schedule a drop of a limited product
         * @description Admin or the product's merchant. opens_at < starts_at, both in the future; the product must have limited stock, and no other drop that has not ended. The server draws a secret 32-byte seed and publishes its SHA-256 (seed_commitment) at once, the seed itself at starts_at.
         */
        post: operations["createDrop"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/drops/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /** A drop */
        get: operations["getDrop"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/drops/{id}/entries": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Join a drop's line
         * @description Customers only; no body. 201 with the new entry; the same customer joining again answers its entry with 200. Before opens_at: 409 drop_not_open; after the last unit is sold: 409 sold_out. Rate limited per customer (ORDERD_RATE_DROP_ENTRIES).
         */
        post: operations["joinDrop"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/drops/{id}/entries/me": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /** The calling customer's entry in a drop */
        get: operations["myDropEntry"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/drops/{id}/draw": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /**
         * Everything needed to recompute a drop's ranks
         * @description Entries in rank order. Lottery entries that joined before starts_at rank by hex SHA-256(seed bytes followed by the entry id's 16 bytes), ascending; the others after them by joined_at (then id). seed is null, and early lottery entries have no rank, before the draw.
         */
        get: operations["getDropDraw"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/orders/{id}/proof": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        /** An order's receipt: its events' inclusion in a checkpoint */
        get: operations["orderProof"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/audit/checkpoints/latest": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The log's latest signed checkpoint */
        get: operations["latestCheckpoint"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/audit/checkpoints/consistency": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Proof that the log only grew between two checkpoints */
        get: operations["checkpointConsistency"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/merchants/{mid}/products/{pid}": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                mid: string;
                pid: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Take a product off the menu
         * @description That merchant or an admin.
         */
        delete: operations["hideProduct"];
        options?: never;
        head?: never;
        /**
         * Change a menu item
         * @description That merchant or an admin: name, price, option groups, available. Changes never alter orders already placed.
         */
        patch: operations["updateProduct"];
        trace?: never;
    };
    "/v1/merchants/{id}/guest-sessions": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Start a walk-in customer's session
         * @description No token needed, for a merchant with guest_checkout: a customer token whose sub is guest: and 128 random bits, valid for ORDERD_GUEST_TTL (default 12 h). Limited per client address (ORDERD_RATE_GUEST). 404 when the merchant does not exist or does not take guests. The customer page at /?merchant=<id> calls it, so a QR code on the counter works.
         */
        post: operations["startGuestSession"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/orders/{id}/picked-up": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Mark a completed order picked up
         * @description The merchant or an admin, on a completed order; repeating it is a no-op. 409 invalid_transition on an order that is not completed.
         */
        post: operations["pickUpOrder"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/orders/{id}/reopen": {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Undo a completion
         * @description The merchant or an admin, within 60 s of the completion and before pickup: the order goes back to accepted, holding its capacity again at once, ahead of the queued orders. 409 invalid_transition after 60 s, once picked up, or on an order that is not completed.
         */
        post: operations["reopenOrder"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/qr.png": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The order-here QR code of a merchant
         * @description No token needed: it encodes a link to this host and a merchant id only. The kitchen display shows it and prints it; walk-in customers who scan it order as guests where the merchant has guest_checkout.
         */
        get: operations["orderHereQR"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description RFC 9457 problem details. A request answered with a problem wrote nothing. */
        Problem: {
            /**
             * Format: uri
             * @description A URI naming the kind of problem.
             */
            type: string;
            title: string;
            status: number;
            /** @description What went wrong with this request, for people. */
            detail: string;
            /**
             * @description Stable and machine-readable.
             * @enum {string}
             */
            code: "validation_failed" | "malformed_json" | "unsupported_media_type" | "payload_too_large" | "unauthorized" | "forbidden" | "not_found" | "method_not_allowed" | "sold_out" | "purchase_limit_reached" | "invalid_transition" | "drop_not_open" | "drop_ended" | "not_invited" | "conflict" | "idempotency_key_reused" | "idempotency_key_required" | "invalid_cursor" | "rate_limited" | "unavailable" | "internal" | "merchant_paused" | "merchant_closed" | "slot_full" | "product_unavailable";
            /** @description The request id (also in the X-Request-Id header). */
            instance?: string;
        };
        /** @description A merchant's live load: units in use, orders waiting, and the wait a newly paid order would face. */
        Load: {
            capacity: number;
            capacity_unit: components["schemas"]["CapacityUnit"];
            /** @description Units in use: orders when the merchant counts orders, items when it counts items. */
            active: number;
            active_orders: number;
            /** @description Queued orders, both lanes. */
            queued: number;
            queued_units: number;
            est_wait_seconds: number;
            paused: boolean;
            /** @enum {string|null} */
            pause_mode: "queue" | "refuse" | null;
            /** Format: date-time */
            paused_until: string | null;
        };
        Merchant: {
            /** Format: uuid */
            id: string;
            name: string;
            capacity: number;
            prep_seconds: number;
            max_queue_wait_seconds: number;
            payment_timeout_seconds: number;
            capacity_unit: components["schemas"]["CapacityUnit"];
            /** @description IANA time zone; pickup codes number the merchant's local day. */
            timezone: string;
            pickup_prefix: string;
            webhook_url: string | null;
            /** @description Only in the answer that creates the merchant or rotates its secret. */
            webhook_secret?: string;
            /** Format: date-time */
            created_at: string;
            version: number;
            load: components["schemas"]["Load"];
            slots: components["schemas"]["SlotSettings"] | null;
            /** @description Opening hours; none: always open. */
            hours: components["schemas"]["Period"][];
            /** @description Anyone without a token may take a guest session (POST /v1/merchants/{id}/guest-sessions) and order. */
            guest_checkout: boolean;
        };
        /** @description stock_total and stock_remaining are null for an unlimited product. */
        Product: {
            /** Format: uuid */
            id: string;
            /** Format: uuid */
            merchant_id: string;
            name: string;
            price_cents: number;
            stock_total: number | null;
            stock_remaining: number | null;
            per_user_limit: number | null;
            /** Format: date-time */
            created_at: string;
            /** @description The capacity one unit takes when the merchant counts items. */
            load_units: number;
            option_groups: WithRequired<components["schemas"]["OptionGroup"], "id">[];
            /** @description false while sold out for the day: on the menu, and placements naming it answer 409 product_unavailable. */
            available: boolean;
        };
        /** @enum {string} */
        OrderStatus: "awaiting_payment" | "scheduled" | "queued" | "accepted" | "completed" | "closed" | "cancelled" | "expired";
        Item: {
            /** Format: uuid */
            product_id: string;
            quantity: number;
            /** @description A unit's price at placement, its options' deltas included. */
            price_cents: number;
            /** @description The chosen options (absent when none); price_cents includes their deltas. */
            options?: components["schemas"]["ChosenOption"][];
            /** @description The product's name at placement (absent from orders placed before lines kept it). */
            name?: string;
        };
        Order: {
            /** Format: uuid */
            id: string;
            /** Format: uuid */
            merchant_id: string;
            customer_id: string;
            items: components["schemas"]["Item"][];
            total_cents: number;
            status: components["schemas"]["OrderStatus"];
            version: number;
            /** Format: date-time */
            placed_at: string;
            /** Format: date-time */
            payment_deadline: string;
            /** Format: date-time */
            paid_at: string | null;
            /** Format: date-time */
            accepted_at: string | null;
            /** Format: date-time */
            completed_at: string | null;
            /** Format: date-time */
            ended_at: string | null;
            status_reason: string | null;
            /** @description 1 for the next order to be admitted; null when not queued. */
            queue_position: number | null;
            /** @description Estimated seconds until acceptance while queued; null otherwise. */
            eta_seconds: number | null;
            /** @description Capacity the order holds while accepted, fixed at placement. */
            load: number;
            /** @enum {string} */
            lane: "normal" | "priority";
            /** @description pickup_prefix and a number from 1 per merchant per local day, at least three digits; unique per merchant per local day; assigned at placement (paid or not) and never changed. */
            pickup_code: string | null;
            /**
             * Format: date-time
             * @description The start of the order's pickup slot; null for as soon as possible. Paid before the slot's start minus prep_seconds, the order is scheduled and joins the live line then, ahead of orders paid after it.
             */
            pickup_at: string | null;
            /**
             * Format: date-time
             * @description When a completed order was picked up; null until then.
             */
            picked_up_at: string | null;
        };
        OrderEvent: {
            version: number;
            /**
             * @example order.placed
             * @example order.accepted
             */
            type: string;
            data: Record<string, never>;
            /** Format: date-time */
            recorded_at: string;
            /**
             * Format: byte
             * @description sha256(previous event's hash || content), base64: the event's link in its stream's chain
             */
            hash: string;
        };
        DeadLetter: {
            /** Format: uuid */
            id: string;
            /** @enum {string} */
            kind: "order" | "webhook";
            /** Format: uuid */
            ref_id: string;
            /** Format: uuid */
            merchant_id: string;
            reason: string;
            attempts: number;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            resolved_at: string | null;
            resolution?: string;
            note?: string;
        };
        WebhookAttempt: {
            /** Format: uuid */
            outbox_id: string;
            /** Format: uuid */
            merchant_id: string;
            attempt: number;
            /** Format: date-time */
            started_at: string;
            latency_ms: number;
            status_code: number | null;
            error: string | null;
        };
        AuditCheck: {
            name: string;
            ok: boolean;
            violations: number;
            /** @description A few of the rows that break the invariant. */
            sample: Record<string, never>[];
        };
        AuditReport: {
            ok: boolean;
            checks: components["schemas"]["AuditCheck"][];
        };
        CreateMerchant: {
            name: string;
            capacity: number;
            /** @default 120 */
            prep_seconds: number;
            /** @default 1800 */
            max_queue_wait_seconds: number;
            /** @default 900 */
            payment_timeout_seconds: number;
            /** Format: uri */
            webhook_url?: string | null;
            capacity_unit?: components["schemas"]["CapacityUnit"];
            /** @description IANA time zone name, default UTC */
            timezone?: string;
            /** @description 0-2 upper-case letters, default empty */
            pickup_prefix?: string;
            /** @description Let walk-in customers order without an account. */
            guest_checkout?: boolean;
        };
        /** @description Any of the fields (an admin); the merchant itself may change its capacity only. A capacity change governs the very next admission decision; capacity_unit changes only while nothing is accepted or queued (409). */
        PatchMerchant: {
            name?: string;
            capacity?: number;
            prep_seconds?: number;
            max_queue_wait_seconds?: number;
            payment_timeout_seconds?: number;
            /** @description null or "" removes the webhook */
            webhook_url?: string | null;
            capacity_unit?: components["schemas"]["CapacityUnit"];
            /** @description IANA time zone name, default UTC */
            timezone?: string;
            /** @description 0-2 upper-case letters, default empty */
            pickup_prefix?: string;
            /** @description Publishes pickup slots; null stops publishing them. */
            slots?: components["schemas"]["SlotSettings"] | null;
            /** @description Replaces the opening hours; [] is always open. Outside them, orders for as soon as possible answer 409 merchant_closed. */
            hours?: components["schemas"]["Period"][];
            /** @description Let walk-in customers order without an account. */
            guest_checkout?: boolean;
        };
        CreateProduct: {
            name: string;
            price_cents: number;
            /** @description null or absent: unlimited */
            stock?: number | null;
            per_user_limit?: number | null;
            /** @default 1 */
            load_units: number;
            option_groups?: components["schemas"]["OptionGroup"][];
        };
        Restock: {
            quantity: number;
        };
        PlaceOrder: {
            /** Format: uuid */
            merchant_id: string;
            items: {
                /** Format: uuid */
                product_id: string;
                quantity: number;
                /** @description The ids of the chosen options, each at most once. */
                options?: string[];
            }[];
            /** @description Pays the order as it is placed. */
            payment_ref?: string;
            /**
             * Format: date-time
             * @description A published slot's starts_at: the order takes the slot's capacity (409 slot_full when it no longer fits, never queued); a time that is no published slot answers 422.
             */
            pickup_at?: string | null;
        };
        Pay: {
            payment_ref: string;
        };
        Cancel: {
            reason?: string;
        };
        Resolve: {
            note?: string;
        };
        WebSocketTicket: {
            ticket: string;
            /** Format: date-time */
            expires_at: string;
        };
        CreateDrop: {
            /** Format: date-time */
            opens_at: string;
            /** Format: date-time */
            starts_at: string;
            /** @enum {string} */
            mode: "lottery" | "fifo";
            /** @default 300 */
            purchase_window_seconds: number;
            /** @description Default: the product's stock_remaining. */
            units?: number;
        };
        Drop: {
            /** Format: uuid */
            id: string;
            /** Format: uuid */
            product_id: string;
            /** Format: uuid */
            merchant_id: string;
            /** Format: date-time */
            opens_at: string;
            /** Format: date-time */
            starts_at: string;
            /** @enum {string} */
            mode: "lottery" | "fifo";
            purchase_window_seconds: number;
            units: number;
            /** @enum {string} */
            state: "scheduled" | "open" | "selling" | "sold_out" | "ended";
            /** @description Hex SHA-256 of the seed. */
            seed_commitment: string;
            /** @description Hex; null before starts_at. */
            seed: string | null;
            entries: number;
            /** @description Entries ever invited. */
            invited: number;
            purchased: number;
            lapsed: number;
        };
        Entry: {
            /** Format: uuid */
            id: string;
            /** Format: uuid */
            drop_id: string;
            customer_id: string;
            /** Format: date-time */
            joined_at: string;
            rank: number | null;
            /** @description Among waiting entries, 1 = invited next; null unless waiting and ranked. */
            position: number | null;
            /** @enum {string} */
            status: "waiting" | "invited" | "purchased" | "lapsed" | "sold_out";
            /** Format: date-time */
            invited_at: string | null;
            /** Format: date-time */
            purchase_deadline: string | null;
        };
        Draw: {
            seed_commitment: string;
            seed: string | null;
            /** @description A lottery's digest of its early entries, recorded at the start: hex SHA-256 of the 16-byte ids, in ascending order, of the entries that joined before starts_at. Each of those ranks by hex SHA-256(seed || digest || its id's 16 bytes). Null before the start, in fifo drops, and in draws made before digests. */
            entries_digest: string | null;
            entries: {
                /** Format: uuid */
                entry_id: string;
                /** Format: date-time */
                joined_at: string;
                rank: number | null;
            }[];
        };
        MintSignInCode: {
            /** @description Who the code signs in: the token's sub. */
            sub: string;
            /** @enum {string} */
            role: "customer" | "merchant" | "admin";
            /**
             * Format: uuid
             * @description Required for role merchant, refused for the others.
             */
            merchant_id?: string;
            /**
             * @description Customers only: the queue lane of the orders the token places (priority for staff or members).
             * @enum {string}
             */
            lane?: "normal" | "priority";
            /**
             * @description How long the code may wait to be used.
             * @default 600
             */
            expires_in_seconds: number;
            /**
             * @description How long the token the code buys is valid.
             * @default 43200
             */
            token_ttl_seconds: number;
        };
        SignInCode: {
            code: string;
            /** Format: date-time */
            expires_at: string;
            sub: string;
            /** @enum {string} */
            role: "customer" | "merchant" | "admin";
            /** Format: uuid */
            merchant_id: string | null;
            /**
             * @description A customer's queue lane; null for the other roles.
             * @enum {string|null}
             */
            lane: "normal" | "priority" | null;
        };
        SignIn: {
            code: string;
        };
        SignedIn: {
            /** @description A bearer token (JWT) for the Authorization header. */
            token: string;
            /** @constant */
            token_type: "Bearer";
            /** Format: date-time */
            expires_at: string;
            sub: string;
            /** @enum {string} */
            role: "customer" | "merchant" | "admin";
            /** Format: uuid */
            merchant_id: string | null;
            /**
             * @description A customer's queue lane; null for the other roles.
             * @enum {string|null}
             */
            lane: "normal" | "priority" | null;
        };
        /**
         * @description What capacity counts: whole orders, or items (each product weighs its load_units).
         * @enum {string}
         */
        CapacityUnit: "orders" | "items";
        /** @description queue: placements still succeed but nobody is admitted; refuse: placements answer 409 merchant_paused. Not both until and for_seconds. */
        Pause: {
            /** @enum {string} */
            mode: "queue" | "refuse";
            /** Format: date-time */
            until?: string;
            for_seconds?: number;
            reason?: string;
        };
        Prioritize: {
            reason?: string;
        };
        SlotSettings: {
            /** @description A slot starts every this many minutes from the opening of each period of hours (or from midnight without hours). */
            minutes: number;
            /** @description What a slot's orders may weigh in all, in the merchant's capacity unit. */
            capacity: number;
            /** @description Slots start at least this long after now. */
            lead_minutes: number;
            /** @description Slots start less than this many days ahead. */
            horizon_days: number;
        };
        /** @description Opening hours of a day of the week in the merchant's time zone. */
        Period: {
            /** @description 0 = Sunday. */
            day: number;
            opens: string;
            /** @description After opens; periods of a day do not overlap. */
            closes: string;
            /** @description Replaces the merchant's capacity while the period is open. */
            capacity?: number;
        };
        Slot: {
            /** Format: date-time */
            starts_at: string;
            /** Format: date-time */
            ends_at: string;
            capacity: number;
            taken: number;
            available: number;
        };
        /** @description A signed tree head of the log: Ed25519 over "orderd checkpoint v1\n" + log + "\n" + size + "\n" + base64(root) + "\n" + at + "\n". */
        Checkpoint: {
            log: string;
            size: number;
            /** Format: byte */
            root: string;
            /** Format: date-time */
            at: string;
            /** Format: byte */
            signature: string;
            /** Format: byte */
            public_key: string;
        };
        OrderProof: {
            /** @description null before the log's first checkpoint (events is then empty) */
            checkpoint: components["schemas"]["Checkpoint"] | null;
            events: {
                version: number;
                type: string;
                /** Format: byte */
                hash: string;
                leaf_index: number;
                /** @description RFC 6962 audit path from the leaf sha256(0x00 || hash) to the checkpoint's root */
                inclusion: string[];
            }[];
        };
        /** @description A choice a product offers (size, sugar, toppings): between min_select and max_select of its options on each line. A group with min_select above 0 is required. */
        OptionGroup: {
            /** @description Given by the server when a request leaves it out. */
            id?: string;
            name: string;
            min_select: number;
            max_select: number;
            options: components["schemas"]["Option"][];
        };
        Option: {
            /** @description Given by the server when a request leaves it out. */
            id?: string;
            name: string;
            /** @description Added to a unit's price; may be 0 or negative, but no choice brings a unit's price below 0. */
            price_delta_cents?: number;
            /** @description Added to a unit's load when the merchant counts items. */
            load_units?: number;
        };
        /** @description An option as the order line recorded it at placement; later menu changes leave it as it was. */
        ChosenOption: {
            id: string;
            name: string;
            price_delta_cents: number;
        };
        PatchProduct: {
            name?: string;
            price_cents?: number;
            /** @description Replaces every group; null or [] removes them. Groups and options sent with their ids keep them. */
            option_groups?: components["schemas"]["OptionGroup"][] | null;
            /** @description false: sold out today. */
            available?: boolean;
        };
        /** @description A customer token of a walk-in guest. */
        GuestSession: {
            token: string;
            /** @enum {string} */
            token_type: "Bearer";
            /** Format: date-time */
            expires_at: string;
            sub: string;
        };
    };
    responses: {
        /** @description The body is not the JSON expected, a required header is missing, or a list's cursor is not one that list gave out. */
        BadRequest: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "malformed_json" | "idempotency_key_required" | "invalid_cursor";
                };
            };
        };
        /** @description No valid bearer token. */
        Unauthorized: {
            headers: {
                "WWW-Authenticate"?: string;
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "unauthorized";
                };
            };
        };
        /** @description The caller may not do this. */
        Forbidden: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "forbidden";
                };
            };
        };
        /** @description No such resource, or one the caller may not see. */
        NotFound: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "not_found";
                };
            };
        };
        /** @description The path exists but does not serve this method. */
        MethodNotAllowed: {
            headers: {
                /** @description The methods the path serves. */
                Allow: string;
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "method_not_allowed";
                };
            };
        };
        /** @description The change conflicts with the resource's state. */
        Conflict: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "sold_out" | "purchase_limit_reached" | "invalid_transition" | "conflict" | "drop_not_open" | "drop_ended" | "not_invited" | "merchant_paused" | "merchant_closed" | "slot_full" | "product_unavailable";
                };
            };
        };
        /** @description The body is over 1 MiB. */
        PayloadTooLarge: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "payload_too_large";
                };
            };
        };
        /** @description The body is not application/json. */
        UnsupportedMediaType: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "unsupported_media_type";
                };
            };
        };
        /** @description The request is well-formed but not valid. */
        Unprocessable: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "validation_failed" | "idempotency_key_reused";
                };
            };
        };
        /** @description Over a rate limit. */
        TooManyRequests: {
            headers: {
                "Retry-After": string;
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "rate_limited";
                };
            };
        };
        /** @description The database is unreachable or busy, or the request timed out; clients may retry. */
        Unavailable: {
            headers: {
                "Retry-After": string;
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "unavailable";
                };
            };
        };
        /** @description An unexpected failure, logged with the request id. */
        Internal: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/problem+json": components["schemas"]["Problem"] & {
                    /** @enum {unknown} */
                    code?: "internal";
                };
            };
        };
    };
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    createMerchant: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateMerchant"];
            };
        };
        responses: {
            /** @description The merchant, with its webhook_secret (shown once). */
            201: {
                headers: {
                    /** @description The new resource's path. */
                    Location?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Merchant"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    getMerchant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The merchant. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Merchant"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    updateMerchant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PatchMerchant"];
            };
        };
        responses: {
            /** @description The merchant after the change. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Merchant"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    rotateWebhookSecret: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The merchant with its new webhook_secret. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Merchant"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    pauseMerchant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["Pause"];
            };
        };
        responses: {
            /** @description The paused merchant. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Merchant"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    resumeMerchant: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The merchant; its queue drains in order at once. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Merchant"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    listProducts: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The merchant's menu: every product not taken off it, sold-out ones (available false) included. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        products: components["schemas"]["Product"][];
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    createProduct: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateProduct"];
            };
        };
        responses: {
            /** @description The product. */
            201: {
                headers: {
                    /** @description The new resource's path. */
                    Location?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Product"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    listMerchantOrders: {
        parameters: {
            query?: {
                status?: "awaiting_payment" | "queued" | "accepted" | "completed" | "closed" | "cancelled" | "expired";
                limit?: number;
                /** @description next_cursor of the previous page, for the page after it. Opaque; valid only on the list, with the same filters, that gave it out. */
                cursor?: string;
            };
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of the merchant's orders. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        orders: components["schemas"]["Order"][];
                        /** @description Pass as cursor for the next page; null on the last page. */
                        next_cursor: string | null;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    listSlots: {
        parameters: {
            query?: {
                /** @description YYYY-MM-DD in the merchant's time zone; default today there. */
                date?: string;
            };
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The published slots, in time order. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        slots: components["schemas"]["Slot"][];
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    getProduct: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The product. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Product"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    restockProduct: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["Restock"];
            };
        };
        responses: {
            /** @description The product. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Product"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    listOwnOrders: {
        parameters: {
            query?: {
                /** @description Only orders in this status; absent: every status. */
                status?: "awaiting_payment" | "queued" | "accepted" | "completed" | "closed" | "cancelled" | "expired";
                limit?: number;
                /** @description next_cursor of the previous page, for the page after it. Opaque; valid only on the list, with the same filters, that gave it out. */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of the customer's orders, newest first (placed_at, then id). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        orders: components["schemas"]["Order"][];
                        /** @description Pass as cursor for the next page; null on the last page. */
                        next_cursor: string | null;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    placeOrder: {
        parameters: {
            query?: never;
            header: {
                "Idempotency-Key": string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PlaceOrder"];
            };
        };
        responses: {
            /** @description The order this Idempotency-Key placed before, answered again. */
            200: {
                headers: {
                    "Idempotent-Replayed": "true";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Order"];
                };
            };
            /** @description The new order: awaiting_payment, or accepted or queued when payment_ref paid it. */
            201: {
                headers: {
                    /** @description The new resource's path. */
                    Location?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Order"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    getOrder: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The order. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Order"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    orderEvents: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Every event of the order, oldest first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        events: components["schemas"]["OrderEvent"][];
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    payOrder: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["Pay"];
            };
        };
        responses: {
            /** @description The order, accepted or queued. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Order"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    cancelOrder: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["Cancel"];
            };
        };
        responses: {
            /** @description The cancelled order. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Order"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    completeOrder: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The completed order. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Order"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    prioritizeOrder: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["Prioritize"];
            };
        };
        responses: {
            /** @description The order, at the tail of the priority lane. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Order"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    listDeadLetters: {
        parameters: {
            query?: {
                kind?: "order" | "webhook";
                merchant_id?: string;
                unresolved?: "true" | "false";
                limit?: number;
                /** @description next_cursor of the previous page, for the page after it. Opaque; valid only on the list, with the same filters, that gave it out. */
                cursor?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The dead letters. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        dead_letters: components["schemas"]["DeadLetter"][];
                        /** @description Pass as cursor for the next page; null on the last page. */
                        next_cursor: string | null;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    retryDeadLetter: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The dead letter, resolved by the retry. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeadLetter"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    resolveDeadLetter: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["Resolve"];
            };
        };
        responses: {
            /** @description The resolved dead letter. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeadLetter"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    retryMerchantWebhooks: {
        parameters: {
            query: {
                merchant_id: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description How many messages went back to the relay. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        retried: number;
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    listWebhookAttempts: {
        parameters: {
            query?: {
                outbox_id?: string;
                merchant_id?: string;
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The attempts. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        attempts: components["schemas"]["WebhookAttempt"][];
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    audit: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Every check's result. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AuditReport"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    mintSignInCode: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["MintSignInCode"];
            };
        };
        responses: {
            /** @description The code, shown once. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SignInCode"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    liveUpdates: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Switching to the WebSocket protocol. */
            101: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Not a WebSocket handshake. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description A browser from an origin not allowed. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            429: components["responses"]["TooManyRequests"];
            503: components["responses"]["Unavailable"];
        };
    };
    issueWebSocketTicket: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A single-use ticket. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebSocketTicket"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    signIn: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SignIn"];
            };
        };
        responses: {
            /** @description The token and who it is for. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SignedIn"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    healthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The process is up. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** @constant */
                        status: "ok";
                    };
                };
            };
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    readyz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The database is reachable and migrations are current. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** @constant */
                        status: "ready";
                    };
                };
            };
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            /** @description Not ready: the database is unreachable or migrations are not current. The cause goes to the server's log only. */
            503: {
                headers: {
                    "Retry-After": string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        /** @constant */
                        status: "unavailable";
                    };
                };
            };
        };
    };
    openapi: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The OpenAPI 3.1 document of this API. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never>;
                };
            };
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    customerPage: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description An HTML page. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/html": string;
                };
            };
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    kitchenPage: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description An HTML page. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/html": string;
                };
            };
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    pageAsset: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A stylesheet or a JavaScript module. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/css": string;
                    "text/javascript": string;
                };
            };
            /** @description No such asset. */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    createDrop: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateDrop"];
            };
        };
        responses: {
            /** @description The drop. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Drop"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    getDrop: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The drop. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Drop"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    joinDrop: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The customer's entry, which it had already. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Entry"];
                };
            };
            /** @description The customer's entry, new. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Entry"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    myDropEntry: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The entry. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Entry"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    getDropDraw: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The draw. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Draw"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    orderProof: {
        parameters: {
            query?: {
                /** @description a checkpoint's size; the latest by default */
                size?: number;
                /** @description the log (one per database node); main by default */
                log?: string;
            };
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Every event of the order already in the checkpoint, with its audit path (an empty list when none is yet; no checkpoint and no event before the log's first checkpoint). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OrderProof"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    latestCheckpoint: {
        parameters: {
            query?: {
                /** @description the log (one per database node); main by default */
                log?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The checkpoint. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Checkpoint"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    checkpointConsistency: {
        parameters: {
            query: {
                /** @description the log (one per database node); main by default */
                log?: string;
                /** @description the earlier checkpoint's size */
                from: number;
                /** @description the later checkpoint's size */
                to: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description RFC 6962 consistency proof between the trees of sizes from and to. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": {
                        log: string;
                        from: number;
                        to: number;
                        proof: string[];
                    };
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    hideProduct: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                mid: string;
                pid: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The product is off the menu; orders that name it keep their lines. Hiding it again is a no-op. */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    updateProduct: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                mid: string;
                pid: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PatchProduct"];
            };
        };
        responses: {
            /** @description The product as changed. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Product"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    startGuestSession: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A customer token for a new guest. */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GuestSession"];
                };
            };
            404: components["responses"]["NotFound"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    pickUpOrder: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The order, still completed, with picked_up_at. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Order"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    reopenOrder: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The order, accepted again. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Order"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    orderHereQR: {
        parameters: {
            query: {
                merchant: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A PNG of the QR code of this server's customer page of the merchant (/?merchant=<id>), to show or print at the counter. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "image/png": string;
                };
            };
            /** @description merchant is not a UUID. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            429: components["responses"]["TooManyRequests"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
}
type WithRequired<T, K extends keyof T> = T & {
    [P in K]-?: T[P];
};
export {};
