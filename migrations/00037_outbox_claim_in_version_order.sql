-- A claim walks a merchant's due messages in outbox_pending_merchant_idx's
-- order and skips each one whose order has an earlier message pending. An
-- order's messages written by one transaction share their next_attempt_at,
-- so before, a claim met every later message of every order in flight
-- (each skipped after a probe of outbox_pending_order_idx) before it found
-- one it could send: a backlog of orders with several messages made each
-- claim walk all of it. Ordered by version within a time, an order's first
-- messages come before all later ones, and a claim meets only the later
-- messages of orders whose earlier ones are out.

-- +goose Up
DROP INDEX outbox_pending_merchant_idx;
CREATE INDEX outbox_pending_merchant_idx ON outbox (merchant_id, next_attempt_at, order_version) WHERE status = 'pending';

-- +goose Down
DROP INDEX outbox_pending_merchant_idx;
CREATE INDEX outbox_pending_merchant_idx ON outbox (merchant_id, next_attempt_at) WHERE status = 'pending';
