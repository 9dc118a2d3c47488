-- Audits of the engine's clocks and of direct admissions.
--
-- +goose Up

-- An order admitted directly (not from the queue) while another order of
-- its merchant waited in the queue overtook it: the stays in the queue are
-- counted at the admission's position in the log, and the decision's own
-- record of what it saw (order.accepted's "queued") must say none either.
CREATE OR REPLACE VIEW audit.fifo_violations AS
WITH moves AS (
    SELECT o.merchant_id, o.id AS order_id, o.queue_seq AS seq, e.type, e.global_position AS pos,
           lead(e.type) OVER w AS next_type, lead(e.global_position) OVER w AS next_pos
    FROM orders o
    JOIN events e ON e.stream_id = o.id
    WHERE o.queue_seq IS NOT NULL
      AND e.type IN ('order.queued', 'order.requeued', 'order.accepted', 'order.cancelled', 'order.expired', 'order.closed')
    WINDOW w AS (PARTITION BY e.stream_id ORDER BY e.version)
), stays AS (
    SELECT merchant_id, order_id, seq, type = 'order.requeued' AS requeued, pos AS entered,
           coalesce(next_pos, 9223372036854775807) AS left_at, next_type IS NOT DISTINCT FROM 'order.accepted' AS admitted
    FROM moves
    WHERE type IN ('order.queued', 'order.requeued')
), first_stays AS (
    SELECT s.*, max(left_at) OVER (PARTITION BY merchant_id ORDER BY seq, entered
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS smaller_left_at
    FROM stays s
    WHERE NOT requeued
), direct AS (
    SELECT o.merchant_id, e.stream_id AS order_id, e.global_position AS pos,
           coalesce((e.data->>'queued')::int, 0) AS queued_seen
    FROM events e
    JOIN orders o ON o.id = e.stream_id
    WHERE e.type = 'order.accepted' AND NOT coalesce((e.data->>'from_queue')::boolean, false)
), line AS (
    SELECT merchant_id, entered AS pos, 1 AS delta, NULL::uuid AS order_id, 0 AS queued_seen FROM stays
    UNION ALL
    SELECT merchant_id, left_at, -1, NULL, 0 FROM stays WHERE left_at < 9223372036854775807
    UNION ALL
    SELECT merchant_id, pos, 0, order_id, queued_seen FROM direct
), waiting AS (
    SELECT l.*, sum(delta) OVER (PARTITION BY merchant_id ORDER BY pos ROWS UNBOUNDED PRECEDING) AS waiting
    FROM line l
), pairs AS (
    SELECT a.*, w.order_id AS waiting_order_id, w.seq AS waiting_seq, w.entered AS waiting_entered, w.left_at AS waiting_left_at
    FROM stays a JOIN stays w ON w.merchant_id = a.merchant_id AND w.requeued
    UNION ALL
    SELECT a.*, w.order_id, w.seq, w.entered, w.left_at
    FROM stays a JOIN stays w ON w.merchant_id = a.merchant_id AND NOT w.requeued
    WHERE a.requeued
)
SELECT merchant_id, order_id, seq, left_at AS admitted_at_position, NULL::uuid AS waiting_order_id, NULL::bigint AS waiting_seq
FROM first_stays
WHERE admitted AND smaller_left_at > left_at
UNION ALL
SELECT merchant_id, order_id, seq, left_at, waiting_order_id, waiting_seq
FROM pairs
WHERE admitted AND waiting_seq < seq AND waiting_entered < left_at AND waiting_left_at > left_at
UNION ALL
SELECT merchant_id, order_id, NULL::bigint, pos, NULL::uuid, NULL::bigint
FROM waiting
WHERE order_id IS NOT NULL AND (waiting > 0 OR queued_seen > 0);

-- A merchant's acceptances in admission order (their position in the log,
-- which the merchant's lock serializes): accepted_at, and the events' time,
-- never decrease.
CREATE VIEW audit.accepted_at_backwards AS
SELECT merchant_id, order_id, accepted_at, recorded_at, previous_order_id, previous_accepted_at, previous_recorded_at
FROM (
    SELECT o.merchant_id, e.stream_id AS order_id, (e.data->>'accepted_at')::timestamptz AS accepted_at, e.recorded_at,
           lag(e.stream_id) OVER w AS previous_order_id,
           lag((e.data->>'accepted_at')::timestamptz) OVER w AS previous_accepted_at,
           lag(e.recorded_at) OVER w AS previous_recorded_at
    FROM events e
    JOIN orders o ON o.id = e.stream_id
    WHERE e.type = 'order.accepted'
    WINDOW w AS (PARTITION BY o.merchant_id ORDER BY e.global_position)
) a
WHERE accepted_at < previous_accepted_at OR recorded_at < previous_recorded_at;

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

GRANT SELECT ON audit.accepted_at_backwards, audit.order_clock_backwards TO orderd_auditor;

-- +goose Down
DROP VIEW audit.order_clock_backwards;
DROP VIEW audit.accepted_at_backwards;
DROP VIEW audit.fifo_violations;
CREATE VIEW audit.fifo_violations AS
WITH moves AS (
    SELECT o.merchant_id, o.id AS order_id, o.queue_seq AS seq, e.type, e.global_position AS pos,
           lead(e.type) OVER w AS next_type, lead(e.global_position) OVER w AS next_pos
    FROM orders o
    JOIN events e ON e.stream_id = o.id
    WHERE o.queue_seq IS NOT NULL
      AND e.type IN ('order.queued', 'order.requeued', 'order.accepted', 'order.cancelled', 'order.expired', 'order.closed')
    WINDOW w AS (PARTITION BY e.stream_id ORDER BY e.version)
), stays AS (
    SELECT merchant_id, order_id, seq, type = 'order.requeued' AS requeued, pos AS entered,
           coalesce(next_pos, 9223372036854775807) AS left_at, next_type IS NOT DISTINCT FROM 'order.accepted' AS admitted
    FROM moves
    WHERE type IN ('order.queued', 'order.requeued')
), first_stays AS (
    SELECT s.*, max(left_at) OVER (PARTITION BY merchant_id ORDER BY seq, entered
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS smaller_left_at
    FROM stays s
    WHERE NOT requeued
), pairs AS (
    SELECT a.*, w.order_id AS waiting_order_id, w.seq AS waiting_seq, w.entered AS waiting_entered, w.left_at AS waiting_left_at
    FROM stays a JOIN stays w ON w.merchant_id = a.merchant_id AND w.requeued
    UNION ALL
    SELECT a.*, w.order_id, w.seq, w.entered, w.left_at
    FROM stays a JOIN stays w ON w.merchant_id = a.merchant_id AND NOT w.requeued
    WHERE a.requeued
)
SELECT merchant_id, order_id, seq, left_at AS admitted_at_position, NULL::uuid AS waiting_order_id, NULL::bigint AS waiting_seq
FROM first_stays
WHERE admitted AND smaller_left_at > left_at
UNION ALL
SELECT merchant_id, order_id, seq, left_at, waiting_order_id, waiting_seq
FROM pairs
WHERE admitted AND waiting_seq < seq AND waiting_entered < left_at AND waiting_left_at > left_at;
