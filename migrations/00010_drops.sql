-- +goose Up
-- Drops (API.md, Drops): a drop's folded state, its secret seed apart, and
-- one row per entry. Every key starts with merchant_id, so that a drop and
-- its entries live on their merchant's shard.
CREATE TABLE drops (
    merchant_id             uuid        NOT NULL REFERENCES merchants (id),
    id                      uuid        NOT NULL,
    product_id              uuid        NOT NULL REFERENCES products (id),
    opens_at                timestamptz NOT NULL,
    starts_at               timestamptz NOT NULL,
    mode                    text        NOT NULL CHECK (mode IN ('lottery', 'fifo')),
    purchase_window_seconds integer     NOT NULL CHECK (purchase_window_seconds BETWEEN 30 AND 3600),
    units                   integer     NOT NULL CHECK (units > 0),
    state                   text        NOT NULL CHECK (state IN ('scheduled', 'open', 'selling', 'sold_out', 'ended')),
    seed_commitment         text        NOT NULL,
    -- Published at starts_at (drop.started); null before.
    seed                    bytea,
    created_at              timestamptz NOT NULL,
    version                 integer     NOT NULL,
    PRIMARY KEY (merchant_id, id),
    CHECK (opens_at < starts_at)
);
CREATE INDEX drops_id_idx ON drops (id);
-- One drop at a time governs a product: a constraint, not a check.
CREATE UNIQUE INDEX drops_active_product_idx ON drops (merchant_id, product_id) WHERE state IN ('scheduled', 'open', 'selling');

-- The seed, secret until the start. No view and no grant of the auditor
-- role reads this table; drop.started copies the seed into drops.seed and
-- the log when it may be known.
CREATE TABLE drop_seeds (
    merchant_id uuid  NOT NULL,
    drop_id     uuid  NOT NULL,
    seed        bytea NOT NULL CHECK (length(seed) = 32),
    PRIMARY KEY (merchant_id, drop_id),
    FOREIGN KEY (merchant_id, drop_id) REFERENCES drops (merchant_id, id)
);

-- order_key sorts entries in rank order (domain.OrderKey): null for an early
-- lottery entry until the seed is published.
CREATE TABLE drop_entries (
    merchant_id       uuid        NOT NULL,
    drop_id           uuid        NOT NULL,
    id                uuid        NOT NULL,
    customer_id       text        NOT NULL,
    joined_at         timestamptz NOT NULL,
    status            text        NOT NULL CHECK (status IN ('waiting', 'invited', 'purchased', 'lapsed', 'sold_out')),
    order_key         bytea,
    invited_at        timestamptz,
    purchase_deadline timestamptz,
    order_id          uuid,
    version           integer     NOT NULL,
    PRIMARY KEY (merchant_id, drop_id, id),
    -- One entry per customer per drop, whatever the concurrency: backs
    -- domain.Join and domain.EntryID, a customer's one entry of a drop.
    CONSTRAINT drop_entries_one_per_customer UNIQUE (merchant_id, drop_id, customer_id),
    FOREIGN KEY (merchant_id, drop_id) REFERENCES drops (merchant_id, id)
);
CREATE INDEX drop_entries_rank_idx ON drop_entries (merchant_id, drop_id, order_key);
CREATE INDEX drop_entries_status_idx ON drop_entries (merchant_id, drop_id, status);
CREATE INDEX drop_entries_order_idx ON drop_entries (merchant_id, order_id) WHERE order_id IS NOT NULL;
CREATE INDEX drop_entries_deadline_idx ON drop_entries (purchase_deadline) WHERE status = 'invited';

GRANT SELECT ON drops, drop_entries TO orderd_auditor;

-- +goose Down
DROP TABLE drop_entries;
DROP TABLE drop_seeds;
DROP TABLE drops;
