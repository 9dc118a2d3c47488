-- A kitchen that works a rush (issue 36): a completed order waits at the
-- counter until picked up, and a completion tapped by mistake can be undone
-- within a minute (order.reopened: accepted again).

-- +goose Up
ALTER TABLE orders ADD COLUMN picked_up_at timestamptz;

-- A pickup leaves the order completed; a reopening makes it accepted.
CREATE OR REPLACE FUNCTION audit.status_after(event_type text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE event_type
    WHEN 'order.placed' THEN 'awaiting_payment'
    WHEN 'order.scheduled' THEN 'scheduled'
    WHEN 'order.queued' THEN 'queued'
    WHEN 'order.requeued' THEN 'queued'
    WHEN 'order.prioritized' THEN 'queued'
    WHEN 'order.accepted' THEN 'accepted'
    WHEN 'order.reopened' THEN 'accepted'
    WHEN 'order.completed' THEN 'completed'
    WHEN 'order.picked_up' THEN 'completed'
    WHEN 'order.cancelled' THEN 'cancelled'
    WHEN 'order.closed' THEN 'closed'
    WHEN 'order.expired' THEN 'expired'
END;

-- +goose Down
CREATE OR REPLACE FUNCTION audit.status_after(event_type text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE event_type
    WHEN 'order.placed' THEN 'awaiting_payment'
    WHEN 'order.scheduled' THEN 'scheduled'
    WHEN 'order.queued' THEN 'queued'
    WHEN 'order.requeued' THEN 'queued'
    WHEN 'order.prioritized' THEN 'queued'
    WHEN 'order.accepted' THEN 'accepted'
    WHEN 'order.completed' THEN 'completed'
    WHEN 'order.cancelled' THEN 'cancelled'
    WHEN 'order.closed' THEN 'closed'
    WHEN 'order.expired' THEN 'expired'
END;
ALTER TABLE orders DROP COLUMN picked_up_at;
