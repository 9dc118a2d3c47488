-- No product's live orders hold more units than its stock.
CREATE VIEW audit.oversold_products AS
SELECT p.id AS product_id, p.merchant_id, p.name, p.stock_total, h.held AS units_held_by_live_orders
FROM products p
JOIN (
    SELECT (i->>'product_id')::uuid AS product_id, sum((i->>'quantity')::int) AS held
    FROM orders o, jsonb_array_elements(o.items) i
    WHERE o.status NOT IN ('closed', 'cancelled', 'expired')
    GROUP BY 1
) h ON h.product_id = p.id
WHERE p.stock_total IS NOT NULL AND h.held > p.stock_total;
