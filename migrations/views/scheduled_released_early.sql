-- No order for a slot enters the live line (queued or accepted) before its
-- release.
CREATE VIEW audit.scheduled_released_early AS
SELECT o.merchant_id, o.id AS order_id, o.pickup_at, o.release_at, e.type, e.recorded_at
FROM orders o
JOIN events e ON e.merchant_id = o.merchant_id AND e.stream_id = o.id
WHERE o.release_at IS NOT NULL AND e.type IN ('order.queued', 'order.accepted') AND e.recorded_at < o.release_at;
