-- A pickup code names one order of its merchant's local day of placement.
CREATE VIEW audit.duplicate_pickup_codes AS
SELECT o.merchant_id, (o.placed_at AT TIME ZONE m.timezone)::date AS local_day, o.pickup_code, count(*) AS orders,
       array_agg(o.id ORDER BY o.placed_at) AS order_ids
FROM orders o JOIN merchants m ON m.id = o.merchant_id
WHERE o.pickup_code IS NOT NULL
GROUP BY 1, 2, 3
HAVING count(*) > 1;
