-- No merchant leaves orders waiting while its kitchen has room for more
-- than 5 s (starved_since, kept by the merchants_track_starved trigger).
CREATE VIEW audit.queued_with_free_capacity AS
SELECT m.id AS merchant_id, m.name, m.capacity, m.active, m.queued, m.starved_since, now() - m.starved_since AS starved_for,
       (SELECT o.id FROM orders o WHERE o.merchant_id = m.id AND o.status = 'queued' ORDER BY o.lane DESC, o.queue_seq LIMIT 1) AS head_order_id
FROM merchants m
WHERE m.starved_since < now() - interval '5 seconds';
