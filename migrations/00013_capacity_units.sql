-- +goose Up
-- Kitchens measured in cups (issue 18): a merchant counts orders or items,
-- a product weighs load_units of them, an order holds its load (fixed at
-- placement) while accepted; two lanes queue, the priority lane's head
-- first; a merchant may pause; pickup codes number a merchant's local day.
ALTER TABLE merchants
    ADD COLUMN capacity_unit   text    NOT NULL DEFAULT 'orders' CHECK (capacity_unit IN ('orders', 'items')),
    ADD COLUMN timezone        text    NOT NULL DEFAULT 'UTC',
    ADD COLUMN pickup_prefix   text    NOT NULL DEFAULT '' CHECK (pickup_prefix ~ '^[A-Z]{0,2}$'),
    -- active counts units; active_orders the accepted orders holding them.
    ADD COLUMN active_orders   integer NOT NULL DEFAULT 0 CHECK (active_orders >= 0),
    ADD COLUMN queued_priority integer NOT NULL DEFAULT 0 CHECK (queued_priority >= 0),
    ADD COLUMN queued_units    integer NOT NULL DEFAULT 0 CHECK (queued_units >= 0),
    ADD COLUMN pause_mode      text    CHECK (pause_mode IN ('queue', 'refuse')),
    ADD COLUMN paused_until    timestamptz,
    ADD COLUMN completion_units double precision NOT NULL DEFAULT 0,
    -- The pickup counter: the local day it counts and the codes issued that
    -- day. On the merchant's row, whose lock placements hold already.
    ADD COLUMN pickup_day      date,
    ADD COLUMN pickup_issued   integer NOT NULL DEFAULT 0;
UPDATE merchants SET active_orders = active, queued_units = queued;

ALTER TABLE products ADD COLUMN load_units integer NOT NULL DEFAULT 1 CHECK (load_units BETWEEN 1 AND 100);

ALTER TABLE orders
    ADD COLUMN load        integer NOT NULL DEFAULT 1 CHECK (load >= 1),
    ADD COLUMN lane        text    NOT NULL DEFAULT 'normal' CHECK (lane IN ('normal', 'priority')),
    ADD COLUMN pickup_code text;
-- The line: the priority lane ('priority' > 'normal') first, each in
-- sequence order; position = rank in this index.
DROP INDEX orders_queue_idx;
CREATE INDEX orders_queue_idx ON orders (merchant_id, lane DESC, queue_seq) INCLUDE (load) WHERE status = 'queued';

-- A merchant is starved when its queue's head could be admitted and is
-- not: queued orders, not paused, and room for the head's load (or an
-- empty kitchen).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_track_starved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.queued > 0 AND NEW.pause_mode IS NULL AND NEW.capacity > 0
       AND (NEW.active = 0 OR NEW.active + (SELECT o.load FROM orders o WHERE o.merchant_id = NEW.id AND o.status = 'queued'
                                             ORDER BY o.lane DESC, o.queue_seq LIMIT 1) <= NEW.capacity) THEN
        IF NEW.starved_since IS NULL THEN
            NEW.starved_since := now();
        END IF;
    ELSE
        NEW.starved_since := NULL;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
DROP TRIGGER merchants_track_starved ON merchants;
CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, pause_mode, starved_since ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_track_starved();

CREATE OR REPLACE VIEW audit.queued_with_free_capacity AS
SELECT m.id AS merchant_id, m.name, m.capacity, m.active, m.queued, m.starved_since, now() - m.starved_since AS starved_for,
       (SELECT o.id FROM orders o WHERE o.merchant_id = m.id AND o.status = 'queued' ORDER BY o.lane DESC, o.queue_seq LIMIT 1) AS head_order_id
FROM merchants m
WHERE m.starved_since < now() - interval '5 seconds';

-- active is the units accepted orders hold (their number when every load
-- is 1); queued the number of queued orders.
CREATE OR REPLACE VIEW audit.merchant_load_drift AS
SELECT m.id AS merchant_id, m.name, m.active, coalesce(c.accepted_units, 0) AS accepted_orders,
       m.queued, coalesce(c.queued, 0) AS queued_orders
FROM merchants m
LEFT JOIN (
    SELECT merchant_id, sum(load) FILTER (WHERE status = 'accepted') AS accepted_units,
           count(*) FILTER (WHERE status = 'queued') AS queued
    FROM orders WHERE status IN ('accepted', 'queued') GROUP BY merchant_id
) c ON c.merchant_id = m.id
WHERE m.active <> coalesce(c.accepted_units, 0) OR m.queued <> coalesce(c.queued, 0);

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

-- An admission over capacity is allowed only to an order alone in the
-- kitchen (its load is all that is active after it).
CREATE OR REPLACE VIEW audit.decisions_over_capacity AS
SELECT e.stream_id AS order_id, e.global_position, e.recorded_at,
       (e.data->>'active_after')::int AS active_after, (e.data->>'capacity')::int AS capacity
FROM events e
WHERE e.type = 'order.accepted' AND (e.data->>'active_after')::int > (e.data->>'capacity')::int
  AND (e.data->>'active_after')::int <> coalesce((e.data->>'load')::int, 1);

GRANT SELECT (capacity_unit, timezone, pickup_prefix, active_orders, queued_priority, queued_units, pause_mode, paused_until,
              completion_units, pickup_day, pickup_issued) ON merchants TO orderd_auditor;

-- Moving to the priority lane leaves an order queued.
CREATE OR REPLACE FUNCTION audit.status_after(event_type text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE event_type
    WHEN 'order.placed' THEN 'awaiting_payment'
    WHEN 'order.queued' THEN 'queued'
    WHEN 'order.requeued' THEN 'queued'
    WHEN 'order.prioritized' THEN 'queued'
    WHEN 'order.accepted' THEN 'accepted'
    WHEN 'order.completed' THEN 'completed'
    WHEN 'order.cancelled' THEN 'cancelled'
    WHEN 'order.closed' THEN 'closed'
    WHEN 'order.expired' THEN 'expired'
END;

-- First come, first served within each lane: a stay in the queue now
-- takes its lane and sequence number from its own event (queued, requeued,
-- or prioritized, which ends a stay in the normal lane and starts one at the
-- tail of the priority lane), and orders are compared with those of their
-- lane only. An order admitted directly overtakes nobody: a normal order
-- while anyone waits, a priority order while a priority order waits.
DROP VIEW audit.fifo_violations;
CREATE VIEW audit.fifo_violations AS
WITH moves AS (
    SELECT o.merchant_id, o.id AS order_id, e.type, e.global_position AS pos,
           coalesce((e.data->>'seq')::bigint, o.queue_seq) AS seq,
           CASE WHEN e.type = 'order.prioritized' THEN 'priority' ELSE coalesce(e.data->>'lane', 'normal') END AS lane,
           lead(e.type) OVER w AS next_type, lead(e.global_position) OVER w AS next_pos
    FROM orders o
    JOIN events e ON e.stream_id = o.id
    WHERE o.queue_seq IS NOT NULL
      AND e.type IN ('order.queued', 'order.requeued', 'order.prioritized', 'order.accepted', 'order.cancelled',
                     'order.expired', 'order.closed')
    WINDOW w AS (PARTITION BY e.stream_id ORDER BY e.version)
), stays AS (
    SELECT merchant_id, order_id, seq, lane, type = 'order.requeued' AS requeued, pos AS entered,
           coalesce(next_pos, 9223372036854775807) AS left_at, next_type IS NOT DISTINCT FROM 'order.accepted' AS admitted
    FROM moves
    WHERE type IN ('order.queued', 'order.requeued', 'order.prioritized')
), first_stays AS (
    SELECT s.*, max(left_at) OVER (PARTITION BY merchant_id, lane ORDER BY seq, entered
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS smaller_left_at
    FROM stays s
    WHERE NOT requeued
), direct AS (
    SELECT o.merchant_id, e.stream_id AS order_id, e.global_position AS pos, o.lane,
           coalesce((e.data->>'queued')::int, 0) AS queued_seen
    FROM events e
    JOIN orders o ON o.id = e.stream_id
    WHERE e.type = 'order.accepted' AND NOT coalesce((e.data->>'from_queue')::boolean, false)
), line AS (
    SELECT merchant_id, entered AS pos, 1 AS delta, CASE WHEN lane = 'priority' THEN 1 ELSE 0 END AS delta_priority,
           NULL::uuid AS order_id, NULL::text AS lane, 0 AS queued_seen FROM stays
    UNION ALL
    SELECT merchant_id, left_at, -1, CASE WHEN lane = 'priority' THEN -1 ELSE 0 END, NULL, NULL, 0
    FROM stays WHERE left_at < 9223372036854775807
    UNION ALL
    SELECT merchant_id, pos, 0, 0, order_id, lane, queued_seen FROM direct
), waiting AS (
    SELECT l.*, sum(delta) OVER m AS waiting, sum(delta_priority) OVER m AS waiting_priority
    FROM line l
    WINDOW m AS (PARTITION BY merchant_id ORDER BY pos, delta ROWS UNBOUNDED PRECEDING)
), pairs AS (
    SELECT a.*, w.order_id AS waiting_order_id, w.seq AS waiting_seq, w.entered AS waiting_entered, w.left_at AS waiting_left_at
    FROM stays a JOIN stays w ON w.merchant_id = a.merchant_id AND w.lane = a.lane AND w.requeued
    UNION ALL
    SELECT a.*, w.order_id, w.seq, w.entered, w.left_at
    FROM stays a JOIN stays w ON w.merchant_id = a.merchant_id AND w.lane = a.lane AND NOT w.requeued
    WHERE a.requeued
)
SELECT merchant_id, order_id, seq, left_at AS admitted_at_position, NULL::uuid AS waiting_order_id, NULL::bigint AS waiting_seq, lane
FROM first_stays
WHERE admitted AND smaller_left_at > left_at
UNION ALL
SELECT merchant_id, order_id, seq, left_at, waiting_order_id, waiting_seq, lane
FROM pairs
WHERE admitted AND waiting_seq < seq AND waiting_entered < left_at AND waiting_left_at > left_at
UNION ALL
SELECT merchant_id, order_id, NULL::bigint, pos, NULL::uuid, NULL::bigint, lane
FROM waiting
WHERE order_id IS NOT NULL
  AND CASE WHEN lane = 'priority' THEN waiting_priority > 0 ELSE waiting > 0 OR queued_seen > 0 END;

-- A pickup code names one order of its merchant's local day.
CREATE VIEW audit.duplicate_pickup_codes AS
SELECT o.merchant_id, (o.paid_at AT TIME ZONE m.timezone)::date AS local_day, o.pickup_code, count(*) AS orders,
       array_agg(o.id ORDER BY o.paid_at) AS order_ids
FROM orders o JOIN merchants m ON m.id = o.merchant_id
WHERE o.pickup_code IS NOT NULL
GROUP BY 1, 2, 3
HAVING count(*) > 1;

GRANT SELECT ON audit.merchant_lane_drift, audit.fifo_violations, audit.duplicate_pickup_codes TO orderd_auditor;

-- +goose Down
CREATE OR REPLACE FUNCTION audit.status_after(event_type text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE event_type
    WHEN 'order.placed' THEN 'awaiting_payment'
    WHEN 'order.queued' THEN 'queued'
    WHEN 'order.requeued' THEN 'queued'
    WHEN 'order.accepted' THEN 'accepted'
    WHEN 'order.completed' THEN 'completed'
    WHEN 'order.cancelled' THEN 'cancelled'
    WHEN 'order.closed' THEN 'closed'
    WHEN 'order.expired' THEN 'expired'
END;
DROP VIEW audit.duplicate_pickup_codes;
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
GRANT SELECT ON audit.fifo_violations TO orderd_auditor;
REVOKE SELECT (capacity_unit, timezone, pickup_prefix, active_orders, queued_priority, queued_units, pause_mode, paused_until,
               completion_units, pickup_day, pickup_issued) ON merchants FROM orderd_auditor;
CREATE OR REPLACE VIEW audit.decisions_over_capacity AS
SELECT e.stream_id AS order_id, e.global_position, e.recorded_at,
       (e.data->>'active_after')::int AS active_after, (e.data->>'capacity')::int AS capacity
FROM events e
WHERE e.type = 'order.accepted' AND (e.data->>'active_after')::int > (e.data->>'capacity')::int;
DROP VIEW audit.merchant_lane_drift;
CREATE OR REPLACE VIEW audit.merchant_load_drift AS
SELECT m.id AS merchant_id, m.name, m.active, coalesce(c.accepted, 0) AS accepted_orders,
       m.queued, coalesce(c.queued, 0) AS queued_orders
FROM merchants m
LEFT JOIN (
    SELECT merchant_id, count(*) FILTER (WHERE status = 'accepted') AS accepted,
           count(*) FILTER (WHERE status = 'queued') AS queued
    FROM orders WHERE status IN ('accepted', 'queued') GROUP BY merchant_id
) c ON c.merchant_id = m.id
WHERE m.active <> coalesce(c.accepted, 0) OR m.queued <> coalesce(c.queued, 0);
CREATE OR REPLACE VIEW audit.queued_with_free_capacity AS
SELECT m.id AS merchant_id, m.name, m.capacity, m.active, m.queued, m.starved_since, now() - m.starved_since AS starved_for,
       (SELECT o.id FROM orders o WHERE o.merchant_id = m.id AND o.status = 'queued' ORDER BY o.queue_seq LIMIT 1) AS head_order_id
FROM merchants m
WHERE m.queued > 0 AND m.active < m.capacity AND m.starved_since < now() - interval '5 seconds';
DROP TRIGGER merchants_track_starved ON merchants;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_track_starved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (NEW.queued > 0 AND NEW.active < NEW.capacity) THEN
        NEW.starved_since := NULL;
    ELSIF NEW.starved_since IS NULL THEN
        NEW.starved_since := now();
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, starved_since ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_track_starved();
DROP INDEX orders_queue_idx;
CREATE INDEX orders_queue_idx ON orders (merchant_id, queue_seq) WHERE status = 'queued';
ALTER TABLE orders DROP COLUMN pickup_code, DROP COLUMN lane, DROP COLUMN load;
ALTER TABLE products DROP COLUMN load_units;
ALTER TABLE merchants
    DROP COLUMN capacity_unit, DROP COLUMN timezone, DROP COLUMN pickup_prefix, DROP COLUMN active_orders,
    DROP COLUMN queued_priority, DROP COLUMN queued_units, DROP COLUMN pause_mode, DROP COLUMN paused_until,
    DROP COLUMN completion_units, DROP COLUMN pickup_day, DROP COLUMN pickup_issued;
