-- A kitchen that works a rush (issue 36): a completed order waits at the
-- counter until picked up, and a completion tapped by mistake can be undone
-- within a minute (order.reopened: accepted again).

-- +goose Up
ALTER TABLE orders ADD COLUMN picked_up_at timestamptz;

-- +goose Down
ALTER TABLE orders DROP COLUMN picked_up_at;
