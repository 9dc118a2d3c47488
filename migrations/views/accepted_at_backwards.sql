-- A merchant's acceptances in admission order (their position in the log,
-- which the merchant's lock serializes): accepted_at, and the events' time,
-- never decrease.
CREATE VIEW audit.accepted_at_backwards AS
SELECT a.merchant_id, a.order_id, a.accepted_at, a.recorded_at, a.previous_order_id, a.previous_accepted_at, a.previous_recorded_at
FROM (SELECT o.merchant_id, e.stream_id AS order_id, (e.data ->> 'accepted_at')::timestamptz AS accepted_at, e.recorded_at,
             lag(e.stream_id) OVER w AS previous_order_id,
             lag((e.data ->> 'accepted_at')::timestamptz) OVER w AS previous_accepted_at,
             lag(e.recorded_at) OVER w AS previous_recorded_at
      FROM events e
      JOIN orders o ON o.merchant_id = e.merchant_id AND o.id = e.stream_id
      WHERE e.type = 'order.accepted'
      WINDOW w AS (PARTITION BY o.merchant_id ORDER BY e.global_position)) a
WHERE a.accepted_at < a.previous_accepted_at OR a.recorded_at < a.previous_recorded_at;
