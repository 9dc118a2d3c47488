-- active is the units accepted orders hold (their number when every load
-- is 1); queued the number of queued orders.
CREATE VIEW audit.merchant_load_drift AS
SELECT m.id AS merchant_id, m.name, m.active, coalesce(c.accepted_units, 0) AS accepted_orders,
       m.queued, coalesce(c.queued, 0) AS queued_orders
FROM merchants m
LEFT JOIN (
    SELECT merchant_id, sum(load) FILTER (WHERE status = 'accepted') AS accepted_units,
           count(*) FILTER (WHERE status = 'queued') AS queued
    FROM orders WHERE status IN ('accepted', 'queued') GROUP BY merchant_id
) c ON c.merchant_id = m.id
WHERE m.active <> coalesce(c.accepted_units, 0) OR m.queued <> coalesce(c.queued, 0);
