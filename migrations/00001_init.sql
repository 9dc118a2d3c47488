-- +goose Up
-- The event log: the source of truth. Everything else in this file is a
-- projection of it or transport state around it. The unique stream version
-- backs the folds (domain's Apply of an order, merchant, product or drop):
-- one event per version, so that two writers of a stream cannot both win.
CREATE TABLE events (
    global_position bigserial PRIMARY KEY,
    stream_id       uuid        NOT NULL,
    stream_type     text        NOT NULL,
    version         integer     NOT NULL CHECK (version > 0),
    type            text        NOT NULL,
    data            jsonb       NOT NULL,
    metadata        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    tx_id           xid8        NOT NULL DEFAULT pg_current_xact_id(),
    CONSTRAINT events_stream_version_key UNIQUE (stream_id, version)
);
-- Tailers read by (tx_id, global_position) below the snapshot's xmin.
CREATE INDEX events_tx_position_idx ON events (tx_id, global_position);
CREATE INDEX events_type_recorded_idx ON events (type, recorded_at);

-- +goose StatementBegin
CREATE FUNCTION events_reject_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only: % is not allowed', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER events_no_update_delete
    BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_reject_change();
CREATE TRIGGER events_no_truncate
    BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_reject_change();

-- Merchants, with their live load. The row lock on a merchant serializes every
-- admission decision for it (DESIGN.md point 3). The CHECKs on the load back
-- domain.Load's admission rules (Fits, CanAdmitNew, CanDrain), which never
-- take a count below zero.
CREATE TABLE merchants (
    id                        uuid PRIMARY KEY,
    name                      text        NOT NULL,
    capacity                  integer     NOT NULL CHECK (capacity >= 0),
    prep_seconds              integer     NOT NULL CHECK (prep_seconds > 0),
    max_queue_wait_seconds    integer     NOT NULL CHECK (max_queue_wait_seconds > 0),
    payment_timeout_seconds   integer     NOT NULL CHECK (payment_timeout_seconds > 0),
    webhook_url               text,
    webhook_secret            text        NOT NULL,
    created_at                timestamptz NOT NULL,
    version                   integer     NOT NULL,
    active                    integer     NOT NULL DEFAULT 0 CHECK (active >= 0),
    queued                    integer     NOT NULL DEFAULT 0 CHECK (queued >= 0),
    next_seq                  bigint      NOT NULL DEFAULT 1,
    completion_interval_s     double precision NOT NULL DEFAULT 0,
    completion_samples        integer     NOT NULL DEFAULT 0,
    last_completion_at        timestamptz,
    updated_at                timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE products (
    id              uuid PRIMARY KEY,
    merchant_id     uuid        NOT NULL REFERENCES merchants (id),
    name            text        NOT NULL,
    price_cents     bigint      NOT NULL CHECK (price_cents >= 0),
    stock_total     integer     CHECK (stock_total >= 0),
    per_user_limit  integer     CHECK (per_user_limit > 0),
    created_at      timestamptz NOT NULL,
    version         integer     NOT NULL
);
CREATE INDEX products_merchant_idx ON products (merchant_id);

-- Limited stock split into buckets so that buyers of one hot product claim
-- different rows with SKIP LOCKED instead of queueing on one row lock. The
-- CHECK makes overselling impossible whatever the application does: it backs
-- domain.SoldOut and domain.TakeFromBuckets.
CREATE TABLE stock_buckets (
    product_id  uuid    NOT NULL REFERENCES products (id),
    bucket      integer NOT NULL,
    merchant_id uuid    NOT NULL,
    remaining   integer NOT NULL CHECK (remaining >= 0),
    PRIMARY KEY (product_id, bucket)
);

-- Per-customer purchase totals for products with a per-user limit. The upsert
-- takes the row lock and the CHECK refuses going over the limit: no
-- check-then-insert race. It backs domain.OverPurchaseLimit and
-- domain.PurchaseLimitReached.
CREATE TABLE purchase_claims (
    product_id   uuid    NOT NULL REFERENCES products (id),
    customer_id  text    NOT NULL,
    merchant_id  uuid    NOT NULL,
    quantity     integer NOT NULL,
    limit_qty    integer NOT NULL,
    PRIMARY KEY (product_id, customer_id),
    CONSTRAINT purchase_claims_within_limit CHECK (quantity >= 0 AND quantity <= limit_qty)
);

CREATE TABLE orders (
    id                uuid PRIMARY KEY,
    merchant_id       uuid        NOT NULL REFERENCES merchants (id),
    customer_id       text        NOT NULL,
    items             jsonb       NOT NULL,
    total_cents       bigint      NOT NULL,
    -- The statuses of domain.OrderStatus, which domain.Order.Evolve moves.
    status            text        NOT NULL CHECK (status IN ('awaiting_payment','queued','accepted','completed','closed','cancelled','expired')),
    version           integer     NOT NULL,
    placed_at         timestamptz NOT NULL,
    payment_deadline  timestamptz NOT NULL,
    payment_ref       text,
    paid_at           timestamptz,
    accepted_at       timestamptz,
    completed_at      timestamptz,
    ended_at          timestamptz,
    status_reason     text,
    queue_seq         bigint,
    queued_at         timestamptz,
    queue_expires_at  timestamptz
);
-- The merchant's line, in order; position = rank in this index.
CREATE INDEX orders_queue_idx ON orders (merchant_id, queue_seq) WHERE status = 'queued';
CREATE INDEX orders_merchant_status_idx ON orders (merchant_id, status, accepted_at);
CREATE INDEX orders_customer_idx ON orders (customer_id, placed_at);
CREATE INDEX orders_queue_expiry_idx ON orders (queue_expires_at) WHERE status = 'queued';
CREATE INDEX orders_unpaid_deadline_idx ON orders (payment_deadline) WHERE status = 'awaiting_payment';

-- Idempotency keys live in the database, unique per customer, written in the
-- placement transaction: a replay across processes or restarts finds them.
CREATE TABLE idempotency_keys (
    customer_id   text        NOT NULL,
    key           text        NOT NULL,
    request_hash  bytea       NOT NULL,
    order_id      uuid        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (customer_id, key)
);

-- Messages for the outside world, written with the events that cause them.
CREATE TABLE outbox (
    id              uuid PRIMARY KEY,
    merchant_id     uuid        NOT NULL,
    order_id        uuid        NOT NULL,
    order_version   integer     NOT NULL,
    event_type      text        NOT NULL,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending','delivered','dead')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    last_error      text
);
CREATE INDEX outbox_pending_idx ON outbox (next_attempt_at) WHERE status = 'pending';
CREATE INDEX outbox_order_idx ON outbox (order_id, order_version);

CREATE TABLE webhook_attempts (
    id           bigserial PRIMARY KEY,
    outbox_id    uuid        NOT NULL REFERENCES outbox (id),
    merchant_id  uuid        NOT NULL,
    attempt      integer     NOT NULL,
    started_at   timestamptz NOT NULL,
    latency_ms   integer     NOT NULL,
    status_code  integer,
    error        text
);
CREATE INDEX webhook_attempts_outbox_idx ON webhook_attempts (outbox_id);

CREATE TABLE dead_letters (
    id           uuid PRIMARY KEY,
    kind         text        NOT NULL CHECK (kind IN ('order','webhook')),
    ref_id       uuid        NOT NULL,
    merchant_id  uuid        NOT NULL,
    reason       text        NOT NULL,
    attempts     integer     NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    resolved_at  timestamptz,
    resolution   text,
    note         text
);
CREATE INDEX dead_letters_open_idx ON dead_letters (kind, created_at) WHERE resolved_at IS NULL;
CREATE UNIQUE INDEX dead_letters_open_ref_idx ON dead_letters (kind, ref_id) WHERE resolved_at IS NULL;

-- +goose Down
DROP TABLE dead_letters;
DROP TABLE webhook_attempts;
DROP TABLE outbox;
DROP TABLE idempotency_keys;
DROP TABLE orders;
DROP TABLE purchase_claims;
DROP TABLE stock_buckets;
DROP TABLE products;
DROP TABLE merchants;
DROP TABLE events;
DROP FUNCTION events_reject_change();
