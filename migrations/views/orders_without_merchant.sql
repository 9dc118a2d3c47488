-- The key's promise, for auditors: every order's merchant exists.
CREATE VIEW audit.orders_without_merchant AS
SELECT o.id AS order_id, o.merchant_id
FROM orders o LEFT JOIN merchants m ON m.id = o.merchant_id
WHERE m.id IS NULL;
