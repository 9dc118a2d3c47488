-- The rest of the load: accepted orders, queued units, priority orders.
CREATE VIEW audit.merchant_lane_drift AS
SELECT m.id AS merchant_id, m.name, m.active_orders, coalesce(c.accepted, 0) AS accepted_orders,
       m.queued_units, coalesce(c.queued_units, 0) AS queued_units_of_orders,
       m.queued_priority, coalesce(c.queued_priority, 0) AS queued_priority_orders
FROM merchants m
LEFT JOIN (
    SELECT merchant_id, count(*) FILTER (WHERE status = 'accepted') AS accepted,
           sum(load) FILTER (WHERE status = 'queued') AS queued_units,
           count(*) FILTER (WHERE status = 'queued' AND lane = 'priority') AS queued_priority
    FROM orders WHERE status IN ('accepted', 'queued') GROUP BY merchant_id
) c ON c.merchant_id = m.id
WHERE m.active_orders <> coalesce(c.accepted, 0)
   OR m.queued_units <> coalesce(c.queued_units, 0) OR m.queued_priority <> coalesce(c.queued_priority, 0);
