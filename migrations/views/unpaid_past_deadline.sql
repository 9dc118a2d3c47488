-- No order stays unpaid past its payment deadline (5 s of grace for the
-- timer).
CREATE VIEW audit.unpaid_past_deadline AS
SELECT id AS order_id, merchant_id, customer_id, payment_deadline, now() - payment_deadline AS overdue_by
FROM orders
WHERE status = 'awaiting_payment' AND payment_deadline < now() - interval '5 seconds';
