-- No order stays in the line past its longest wait (5 s of grace for the
-- timer).
CREATE VIEW audit.queued_past_max_wait AS
SELECT id AS order_id, merchant_id, queued_at, queue_expires_at, now() - queue_expires_at AS overdue_by
FROM orders
WHERE status = 'queued' AND queue_expires_at < now() - interval '5 seconds';
