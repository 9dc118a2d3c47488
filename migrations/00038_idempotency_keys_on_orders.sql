-- A placement's idempotency key is kept on its order's row, backed by a
-- unique index on (merchant_id, customer_id, idempotency_key), instead of a
-- row of its own in idempotency_keys. A key was only ever kept for an order
-- that was written (a refused request's key was deleted in its own
-- transaction), so each key was one order's: its own heap row, primary key
-- entry and ON CONFLICT insert were a row, an index entry and a statement
-- per order more than the order's row with two more columns and one more
-- index entry. The key's scope is unchanged (merchant, customer, key), and
-- so is the request hash a replay is checked against. Orders without a key
-- (NULL) are those written by no placement request: the unique index does
-- not compare them. The placement batch reads the keys without a lock and
-- enters them with its commit (store/place.go, addKeyReads).

-- +goose Up
ALTER TABLE orders ADD COLUMN idempotency_key text, ADD COLUMN request_hash bytea;
UPDATE orders o SET idempotency_key = k.key, request_hash = k.request_hash
FROM idempotency_keys k WHERE k.merchant_id = o.merchant_id AND k.order_id = o.id;
CREATE UNIQUE INDEX orders_idempotency_key_idx ON orders (merchant_id, customer_id, idempotency_key);
DROP TABLE idempotency_keys;
-- The auditor read orders but not idempotency_keys, and still reads no key:
-- from here on its grant on orders is by column (a column added later is
-- granted to it by its migration).
REVOKE SELECT ON orders FROM orderd_auditor;
GRANT SELECT (id, merchant_id, customer_id, items, total_cents, status, version, placed_at,
    payment_deadline, payment_ref, paid_at, accepted_at, completed_at, ended_at, status_reason, queue_seq,
    queued_at, queue_expires_at, load, lane, pickup_code, pickup_at, release_at, picked_up_at) ON orders TO orderd_auditor;

-- +goose Down
CREATE TABLE idempotency_keys (
    customer_id   text        NOT NULL,
    key           text        NOT NULL,
    request_hash  bytea       NOT NULL,
    order_id      uuid        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    merchant_id   uuid        NOT NULL,
    PRIMARY KEY (merchant_id, customer_id, key)
);
INSERT INTO idempotency_keys (customer_id, key, request_hash, order_id, created_at, merchant_id)
SELECT customer_id, idempotency_key, request_hash, id, placed_at, merchant_id FROM orders WHERE idempotency_key IS NOT NULL;
REVOKE SELECT ON orders FROM orderd_auditor;
GRANT SELECT ON orders TO orderd_auditor;
DROP INDEX orders_idempotency_key_idx;
ALTER TABLE orders DROP COLUMN idempotency_key, DROP COLUMN request_hash;
