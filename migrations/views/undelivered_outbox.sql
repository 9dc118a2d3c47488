-- No webhook waits for delivery more than 60 s past its next attempt.
CREATE VIEW audit.undelivered_outbox AS
SELECT id AS outbox_id, merchant_id, order_id, event_type, attempts, next_attempt_at, last_error
FROM outbox
WHERE status = 'pending' AND next_attempt_at < now() - interval '60 seconds';
