-- The status an order event leaves its order in; NULL for "paid", which
-- sets none. Moving to the priority lane leaves an order queued, a pickup
-- leaves it completed, a reopening makes it accepted.
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
