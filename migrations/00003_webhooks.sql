-- +goose Up
-- The relay claims due messages merchant by merchant, so that one merchant's
-- backlog never hides another's messages.
CREATE INDEX outbox_pending_merchant_idx ON outbox (merchant_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_attempts_merchant_idx ON webhook_attempts (merchant_id, started_at);

-- +goose Down
DROP INDEX webhook_attempts_merchant_idx;
DROP INDEX outbox_pending_merchant_idx;
