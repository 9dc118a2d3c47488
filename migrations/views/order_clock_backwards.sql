-- One order's own timestamps in the order of its life, and its events' time
-- in the order of their versions.
CREATE VIEW audit.order_clock_backwards AS
SELECT o.id AS order_id, o.merchant_id, c.problem, c.earlier_at, c.later_at
FROM orders o
CROSS JOIN LATERAL (VALUES
    ('paid_at before placed_at', o.placed_at, o.paid_at),
    ('accepted_at before paid_at', coalesce(o.paid_at, o.placed_at), o.accepted_at),
    ('completed_at before accepted_at', o.accepted_at, o.completed_at),
    ('ended_at before placed_at', o.placed_at, o.ended_at)
) AS c(problem, earlier_at, later_at)
WHERE c.later_at < c.earlier_at
UNION ALL
SELECT x.stream_id, o.merchant_id, 'event ' || x.version || ' recorded before the one before it', x.previous_recorded_at, x.recorded_at
FROM (
    SELECT stream_id, version, recorded_at, lag(recorded_at) OVER (PARTITION BY stream_id ORDER BY version) AS previous_recorded_at
    FROM events
    WHERE stream_type = 'order'
) x
JOIN orders o ON o.id = x.stream_id
WHERE x.recorded_at < x.previous_recorded_at;
