-- No customer holds more units of a product than its per-customer limit in
-- live orders.
CREATE VIEW audit.over_purchase_limit AS
SELECT p.id AS product_id, o.customer_id, p.per_user_limit,
       sum((i.value ->> 'quantity')::int) AS units, array_agg(o.id) AS order_ids
FROM orders o
CROSS JOIN LATERAL jsonb_array_elements(o.items) i(value)
JOIN products p ON p.merchant_id = o.merchant_id AND p.id = (i.value ->> 'product_id')::uuid
WHERE p.per_user_limit IS NOT NULL AND o.status NOT IN ('closed', 'cancelled', 'expired')
GROUP BY p.id, o.customer_id, p.per_user_limit
HAVING sum((i.value ->> 'quantity')::int) > p.per_user_limit;
