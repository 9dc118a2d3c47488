-- A product's units are either in its buckets or held by live orders: the
-- two together are its stock.
CREATE VIEW audit.stock_drift AS
WITH held AS (
    SELECT (i->>'product_id')::uuid AS product_id, sum((i->>'quantity')::int) AS held
    FROM orders o, jsonb_array_elements(o.items) i
    WHERE o.status NOT IN ('closed', 'cancelled', 'expired')
    GROUP BY 1
), remaining AS (
    SELECT product_id, sum(remaining) AS remaining FROM stock_buckets GROUP BY product_id
)
SELECT p.id AS product_id, p.merchant_id, p.stock_total, coalesce(r.remaining, 0) AS remaining,
       coalesce(h.held, 0) AS held_by_orders
FROM products p
LEFT JOIN remaining r ON r.product_id = p.id
LEFT JOIN held h ON h.product_id = p.id
WHERE p.stock_total IS NOT NULL AND coalesce(r.remaining, 0) + coalesce(h.held, 0) <> p.stock_total;
