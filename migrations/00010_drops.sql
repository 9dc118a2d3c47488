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
    -- One entry per customer per drop, whatever the concurrency.
    CONSTRAINT drop_entries_one_per_customer UNIQUE (merchant_id, drop_id, customer_id),
    FOREIGN KEY (merchant_id, drop_id) REFERENCES drops (merchant_id, id)
);
CREATE INDEX drop_entries_rank_idx ON drop_entries (merchant_id, drop_id, order_key);
CREATE INDEX drop_entries_status_idx ON drop_entries (merchant_id, drop_id, status);
CREATE INDEX drop_entries_order_idx ON drop_entries (merchant_id, order_id) WHERE order_id IS NOT NULL;
CREATE INDEX drop_entries_deadline_idx ON drop_entries (purchase_deadline) WHERE status = 'invited';

-- Ranks recomputed from the published seed, in SQL: an entry whose stored
-- key is not the one the rules give (domain.OrderKey), or a published seed
-- that does not hash to the commitment made at creation.
CREATE VIEW audit.drop_draw_mismatch AS
SELECT e.merchant_id, e.drop_id, e.id AS entry_id, encode(e.order_key, 'hex') AS stored_key, encode(x.expected, 'hex') AS expected_key
FROM drop_entries e
JOIN drops d ON d.merchant_id = e.merchant_id AND d.id = e.drop_id
CROSS JOIN LATERAL (SELECT CASE
    WHEN d.mode = 'lottery' AND e.joined_at < d.starts_at THEN
        CASE WHEN d.seed IS NULL THEN NULL ELSE '\x00'::bytea || sha256(d.seed || uuid_send(e.id)) END
    ELSE '\x01'::bytea || int8send((extract(epoch FROM e.joined_at) * 1000000)::bigint) || uuid_send(e.id)
    END AS expected) x
WHERE e.order_key IS DISTINCT FROM x.expected
UNION ALL
SELECT d.merchant_id, d.id, NULL, NULL, d.seed_commitment
FROM drops d
WHERE d.seed IS NOT NULL AND encode(sha256(d.seed), 'hex') <> d.seed_commitment;

-- An entry invited while an entry ranked before it was still waiting: the
-- better-ranked entry was invited later or never.
CREATE VIEW audit.drop_invitation_order AS
SELECT merchant_id, drop_id, entry_id, invited_at
FROM (
    SELECT merchant_id, drop_id, id AS entry_id, invited_at,
           max(coalesce(invited_at, 'infinity')) OVER (PARTITION BY merchant_id, drop_id ORDER BY order_key
                                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_invited
    FROM drop_entries
    WHERE order_key IS NOT NULL
) r
WHERE invited_at IS NOT NULL AND before_invited > invited_at;

-- More purchases than units, or more invitations outstanding and
-- purchases together than units; or a purchase whose order is not paid.
CREATE VIEW audit.drop_oversold AS
SELECT d.merchant_id, d.id AS drop_id, d.units, c.purchased, c.invited, NULL::uuid AS entry_id
FROM drops d
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE status = 'purchased') AS purchased, count(*) FILTER (WHERE status = 'invited') AS invited
    FROM drop_entries e WHERE e.merchant_id = d.merchant_id AND e.drop_id = d.id
) c
WHERE c.purchased + c.invited > d.units
UNION ALL
SELECT e.merchant_id, e.drop_id, NULL, NULL, NULL, e.id
FROM drop_entries e
LEFT JOIN orders o ON o.id = e.order_id
WHERE e.status = 'purchased' AND (o.id IS NULL OR o.paid_at IS NULL);

GRANT SELECT ON drops, drop_entries, audit.drop_draw_mismatch, audit.drop_invitation_order, audit.drop_oversold TO orderd_auditor;

-- +goose Down
DROP VIEW audit.drop_oversold;
DROP VIEW audit.drop_invitation_order;
DROP VIEW audit.drop_draw_mismatch;
DROP TABLE drop_entries;
DROP TABLE drop_seeds;
DROP TABLE drops;
