-- +goose Up
-- The relay's claim asks, of every candidate message, whether an earlier
-- version of its order is still pending. Answered from the full
-- (order_id, order_version) index plus a status filter, a planner without
-- statistics for a freshly filled outbox combined it with the merchant index
-- in a bitmap AND that read the merchant's whole backlog once per candidate.
-- A partial index of pending messages answers it in one probe whatever the
-- statistics say.
CREATE INDEX outbox_pending_order_idx ON outbox (order_id, order_version) WHERE status = 'pending';

-- +goose Down
DROP INDEX outbox_pending_order_idx;
