-- No slot holds more than its capacity, and what it holds is what its
-- orders (neither cancelled nor closed) weigh.
CREATE VIEW audit.slots_over_capacity AS
SELECT s.merchant_id, s.starts_at, s.capacity, s.taken, coalesce(o.held, 0) AS held_by_orders
FROM pickup_slots s
LEFT JOIN (
    SELECT merchant_id, pickup_at, sum(load) AS held
    FROM orders WHERE pickup_at IS NOT NULL AND status NOT IN ('cancelled', 'closed')
    GROUP BY merchant_id, pickup_at
) o ON o.merchant_id = s.merchant_id AND o.pickup_at = s.starts_at
WHERE s.taken > s.capacity OR coalesce(o.held, 0) > s.capacity OR s.taken <> coalesce(o.held, 0);
