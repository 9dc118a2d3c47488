-- No order for as soon as possible is placed while its merchant is closed,
-- by the hours and time zone its settings had at the moment. Only the
-- orders of merchants that ever had hours are looked at: a merchant's
-- stream is short, its orders are many.
CREATE VIEW audit.orders_placed_while_closed AS
WITH with_hours AS (
    SELECT m.id FROM merchants m
    WHERE EXISTS (SELECT 1 FROM events e WHERE e.stream_id = m.id AND e.merchant_id = m.id
                  AND e.type IN ('merchant.created', 'merchant.updated')
                  AND jsonb_typeof(coalesce(e.data->'after', e.data)->'hours') = 'array')
)
SELECT o.merchant_id, o.id AS order_id, o.placed_at, h.tz, (o.placed_at AT TIME ZONE h.tz) AS local_time
FROM with_hours w
JOIN orders o ON o.merchant_id = w.id
CROSS JOIN LATERAL (
    SELECT coalesce(e.data->'after', e.data)->'hours' AS hours, coalesce(coalesce(e.data->'after', e.data)->>'timezone', 'UTC') AS tz
    FROM events e
    WHERE e.merchant_id = o.merchant_id AND e.stream_id = o.merchant_id
      AND e.type IN ('merchant.created', 'merchant.updated') AND e.recorded_at <= o.placed_at
    ORDER BY e.version DESC LIMIT 1
) h
WHERE o.pickup_at IS NULL AND jsonb_typeof(h.hours) = 'array' AND jsonb_array_length(h.hours) > 0
  AND NOT EXISTS (
    SELECT 1 FROM jsonb_array_elements(h.hours) p
    WHERE (p->>'day')::int = extract(dow FROM o.placed_at AT TIME ZONE h.tz)
      AND (o.placed_at AT TIME ZONE h.tz)::time >= (p->>'opens')::time
      AND ((o.placed_at AT TIME ZONE h.tz)::time < (p->>'closes')::time OR p->>'closes' = '24:00'));
