-- An admission over capacity is allowed only to an order alone in the
-- kitchen (its load is all that is active after it).
CREATE VIEW audit.decisions_over_capacity AS
SELECT e.stream_id AS order_id, e.global_position, e.recorded_at,
       (e.data->>'active_after')::int AS active_after, (e.data->>'capacity')::int AS capacity
FROM events e
WHERE e.type = 'order.accepted' AND (e.data->>'active_after')::int > (e.data->>'capacity')::int
  AND (e.data->>'active_after')::int <> coalesce((e.data->>'load')::int, 1);
