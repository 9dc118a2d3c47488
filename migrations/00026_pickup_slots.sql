-- Pickup slots and opening hours (issue 37).
--
-- A merchant's slot settings and hours are part of its folded settings;
-- period_capacity is the capacity the open period of its hours sets (null:
-- its own), recorded at each period's edge by a timer (merchant.period_changed),
-- and next_period_at that edge, which the timer's backstop finds overdue.
--
-- pickup_slots holds a slot's capacity and what its orders take of it, once an
-- order takes it: the CHECK makes overselling a slot impossible whatever the
-- code does, and placements add to taken only where it still fits.
--
-- An order for a slot carries pickup_at and release_at, when it joins the
-- live line; paid before that, it is 'scheduled', with its place in line.

-- +goose Up
ALTER TABLE merchants
    ADD COLUMN slots           jsonb,
    ADD COLUMN hours           jsonb,
    ADD COLUMN period_capacity int CHECK (period_capacity >= 0),
    ADD COLUMN next_period_at  timestamptz;
CREATE INDEX merchants_next_period_idx ON merchants (next_period_at) WHERE next_period_at IS NOT NULL;

ALTER TABLE orders
    ADD COLUMN pickup_at  timestamptz,
    ADD COLUMN release_at timestamptz,
    DROP CONSTRAINT orders_status_check,
    ADD CONSTRAINT orders_status_check
        CHECK (status IN ('awaiting_payment','scheduled','queued','accepted','completed','closed','cancelled','expired'));
CREATE INDEX orders_release_idx ON orders (release_at) WHERE status = 'scheduled';
CREATE INDEX orders_pickup_idx ON orders (merchant_id, pickup_at) WHERE pickup_at IS NOT NULL;

CREATE TABLE pickup_slots (
    merchant_id uuid        NOT NULL,
    starts_at   timestamptz NOT NULL,
    capacity    int         NOT NULL CHECK (capacity > 0),
    taken       int         NOT NULL DEFAULT 0,
    PRIMARY KEY (merchant_id, starts_at),
    CONSTRAINT pickup_slots_within_capacity CHECK (taken >= 0 AND taken <= capacity)
);

-- Admission runs at the capacity in force.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_track_starved() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    starved boolean := false;
BEGIN
    IF NEW.queued > 0 AND NEW.pause_mode IS NULL AND coalesce(NEW.period_capacity, NEW.capacity) > 0 THEN
        IF NEW.active = 0 THEN
            starved := true;
        ELSIF NEW.active < coalesce(NEW.period_capacity, NEW.capacity) THEN
            starved := NEW.active + (SELECT o.load FROM orders o WHERE o.merchant_id = NEW.id AND o.status = 'queued'
                                     ORDER BY o.lane DESC, o.queue_seq LIMIT 1) <= coalesce(NEW.period_capacity, NEW.capacity);
        END IF;
    END IF;
    IF NOT coalesce(starved, false) THEN
        NEW.starved_since := NULL;
    ELSIF NEW.starved_since IS NULL THEN
        NEW.starved_since := now();
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
DROP TRIGGER merchants_track_starved ON merchants;
CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, period_capacity, pause_mode, starved_since ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_track_starved();

CREATE OR REPLACE FUNCTION audit.status_after(event_type text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE event_type
    WHEN 'order.placed' THEN 'awaiting_payment'
    WHEN 'order.scheduled' THEN 'scheduled'
    WHEN 'order.queued' THEN 'queued'
    WHEN 'order.requeued' THEN 'queued'
    WHEN 'order.prioritized' THEN 'queued'
    WHEN 'order.accepted' THEN 'accepted'
    WHEN 'order.completed' THEN 'completed'
    WHEN 'order.cancelled' THEN 'cancelled'
    WHEN 'order.closed' THEN 'closed'
    WHEN 'order.expired' THEN 'expired'
END;

-- A released order joins the line at the place it took when paid, ahead of
-- orders that queued before its release: like a requeued one, it is
-- overtaken only by what left the line after it entered.
CREATE OR REPLACE VIEW audit.fifo_violations AS
 WITH moves AS (
         SELECT o.merchant_id,
            o.id AS order_id,
            e.type,
            e.global_position AS pos,
            COALESCE((e.data ->> 'seq'::text)::bigint, o.queue_seq) AS seq,
                CASE
                    WHEN e.type = 'order.prioritized'::text THEN 'priority'::text
                    ELSE COALESCE(e.data ->> 'lane'::text, 'normal'::text)
                END AS lane,
            COALESCE((e.data ->> 'released'::text)::boolean, false) AS released,
            lead(e.type) OVER w AS next_type,
            lead(e.global_position) OVER w AS next_pos
           FROM orders o
             JOIN events e ON e.merchant_id = o.merchant_id AND e.stream_id = o.id
          WHERE o.queue_seq IS NOT NULL AND (e.type = ANY (ARRAY['order.queued'::text, 'order.requeued'::text, 'order.prioritized'::text, 'order.accepted'::text, 'order.cancelled'::text, 'order.expired'::text, 'order.closed'::text]))
          WINDOW w AS (PARTITION BY e.merchant_id, e.stream_id ORDER BY e.version)
        ), stays AS (
         SELECT moves.merchant_id,
            moves.order_id,
            moves.seq,
            moves.lane,
            moves.type = 'order.requeued'::text OR moves.released AS requeued,
            moves.pos AS entered,
            COALESCE(moves.next_pos, '9223372036854775807'::bigint) AS left_at,
            NOT moves.next_type IS DISTINCT FROM 'order.accepted'::text AS admitted
           FROM moves
          WHERE moves.type = ANY (ARRAY['order.queued'::text, 'order.requeued'::text, 'order.prioritized'::text])
        ), first_stays AS (
         SELECT s.merchant_id,
            s.order_id,
            s.seq,
            s.lane,
            s.requeued,
            s.entered,
            s.left_at,
            s.admitted,
            max(s.left_at) OVER (PARTITION BY s.merchant_id, s.lane ORDER BY s.seq, s.entered ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS smaller_left_at
           FROM stays s
          WHERE NOT s.requeued
        ), direct AS (
         SELECT o.merchant_id,
            e.stream_id AS order_id,
            e.global_position AS pos,
            o.lane,
            COALESCE((e.data ->> 'queued'::text)::integer, 0) AS queued_seen
           FROM events e
             JOIN orders o ON o.merchant_id = e.merchant_id AND o.id = e.stream_id
          WHERE e.type = 'order.accepted'::text AND NOT COALESCE((e.data ->> 'from_queue'::text)::boolean, false)
        ), line AS (
         SELECT stays.merchant_id,
            stays.entered AS pos,
            1 AS delta,
                CASE
                    WHEN stays.lane = 'priority'::text THEN 1
                    ELSE 0
                END AS delta_priority,
            NULL::uuid AS order_id,
            NULL::text AS lane,
            0 AS queued_seen
           FROM stays
        UNION ALL
         SELECT stays.merchant_id,
            stays.left_at,
            '-1'::integer,
                CASE
                    WHEN stays.lane = 'priority'::text THEN '-1'::integer
                    ELSE 0
                END AS "case",
            NULL::uuid,
            NULL::text,
            0
           FROM stays
          WHERE stays.left_at < '9223372036854775807'::bigint
        UNION ALL
         SELECT direct.merchant_id,
            direct.pos,
            0,
            0,
            direct.order_id,
            direct.lane,
            direct.queued_seen
           FROM direct
        ), waiting AS (
         SELECT l.merchant_id,
            l.pos,
            l.delta,
            l.delta_priority,
            l.order_id,
            l.lane,
            l.queued_seen,
            sum(l.delta) OVER m AS waiting,
            sum(l.delta_priority) OVER m AS waiting_priority
           FROM line l
          WINDOW m AS (PARTITION BY l.merchant_id ORDER BY l.pos, l.delta ROWS UNBOUNDED PRECEDING)
        ), pairs AS (
         SELECT a.merchant_id,
            a.order_id,
            a.seq,
            a.lane,
            a.requeued,
            a.entered,
            a.left_at,
            a.admitted,
            w.order_id AS waiting_order_id,
            w.seq AS waiting_seq,
            w.entered AS waiting_entered,
            w.left_at AS waiting_left_at
           FROM stays a
             JOIN stays w ON w.merchant_id = a.merchant_id AND w.lane = a.lane AND w.requeued
        UNION ALL
         SELECT a.merchant_id,
            a.order_id,
            a.seq,
            a.lane,
            a.requeued,
            a.entered,
            a.left_at,
            a.admitted,
            w.order_id,
            w.seq,
            w.entered,
            w.left_at
           FROM stays a
             JOIN stays w ON w.merchant_id = a.merchant_id AND w.lane = a.lane AND NOT w.requeued
          WHERE a.requeued
        )
 SELECT first_stays.merchant_id,
    first_stays.order_id,
    first_stays.seq,
    first_stays.left_at AS admitted_at_position,
    NULL::uuid AS waiting_order_id,
    NULL::bigint AS waiting_seq,
    first_stays.lane
   FROM first_stays
  WHERE first_stays.admitted AND first_stays.smaller_left_at > first_stays.left_at
UNION ALL
 SELECT pairs.merchant_id,
    pairs.order_id,
    pairs.seq,
    pairs.left_at AS admitted_at_position,
    pairs.waiting_order_id,
    pairs.waiting_seq,
    pairs.lane
   FROM pairs
  WHERE pairs.admitted AND pairs.waiting_seq < pairs.seq AND pairs.waiting_entered < pairs.left_at AND pairs.waiting_left_at > pairs.left_at
UNION ALL
 SELECT waiting.merchant_id,
    waiting.order_id,
    NULL::bigint AS seq,
    waiting.pos AS admitted_at_position,
    NULL::uuid AS waiting_order_id,
    NULL::bigint AS waiting_seq,
    waiting.lane
   FROM waiting
  WHERE waiting.order_id IS NOT NULL AND
        CASE
            WHEN waiting.lane = 'priority'::text THEN waiting.waiting_priority > 0
            ELSE waiting.waiting > 0 OR waiting.queued_seen > 0
        END;

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

-- No order for a slot enters the live line (queued or accepted) before its
-- release.
CREATE VIEW audit.scheduled_released_early AS
SELECT o.merchant_id, o.id AS order_id, o.pickup_at, o.release_at, e.type, e.recorded_at
FROM orders o
JOIN events e ON e.merchant_id = o.merchant_id AND e.stream_id = o.id
WHERE o.release_at IS NOT NULL AND e.type IN ('order.queued', 'order.accepted') AND e.recorded_at < o.release_at;

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

GRANT SELECT (slots, hours, period_capacity, next_period_at) ON merchants TO orderd_auditor;
GRANT SELECT ON pickup_slots, audit.slots_over_capacity, audit.scheduled_released_early, audit.orders_placed_while_closed TO orderd_auditor;

-- +goose Down
DROP VIEW audit.orders_placed_while_closed;
DROP VIEW audit.scheduled_released_early;
DROP VIEW audit.slots_over_capacity;
CREATE OR REPLACE VIEW audit.fifo_violations AS
 WITH moves AS (
         SELECT o.merchant_id,
            o.id AS order_id,
            e.type,
            e.global_position AS pos,
            COALESCE((e.data ->> 'seq'::text)::bigint, o.queue_seq) AS seq,
                CASE
                    WHEN e.type = 'order.prioritized'::text THEN 'priority'::text
                    ELSE COALESCE(e.data ->> 'lane'::text, 'normal'::text)
                END AS lane,
            lead(e.type) OVER w AS next_type,
            lead(e.global_position) OVER w AS next_pos
           FROM orders o
             JOIN events e ON e.merchant_id = o.merchant_id AND e.stream_id = o.id
          WHERE o.queue_seq IS NOT NULL AND (e.type = ANY (ARRAY['order.queued'::text, 'order.requeued'::text, 'order.prioritized'::text, 'order.accepted'::text, 'order.cancelled'::text, 'order.expired'::text, 'order.closed'::text]))
          WINDOW w AS (PARTITION BY e.merchant_id, e.stream_id ORDER BY e.version)
        ), stays AS (
         SELECT moves.merchant_id,
            moves.order_id,
            moves.seq,
            moves.lane,
            moves.type = 'order.requeued'::text AS requeued,
            moves.pos AS entered,
            COALESCE(moves.next_pos, '9223372036854775807'::bigint) AS left_at,
            NOT moves.next_type IS DISTINCT FROM 'order.accepted'::text AS admitted
           FROM moves
          WHERE moves.type = ANY (ARRAY['order.queued'::text, 'order.requeued'::text, 'order.prioritized'::text])
        ), first_stays AS (
         SELECT s.merchant_id,
            s.order_id,
            s.seq,
            s.lane,
            s.requeued,
            s.entered,
            s.left_at,
            s.admitted,
            max(s.left_at) OVER (PARTITION BY s.merchant_id, s.lane ORDER BY s.seq, s.entered ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS smaller_left_at
           FROM stays s
          WHERE NOT s.requeued
        ), direct AS (
         SELECT o.merchant_id,
            e.stream_id AS order_id,
            e.global_position AS pos,
            o.lane,
            COALESCE((e.data ->> 'queued'::text)::integer, 0) AS queued_seen
           FROM events e
             JOIN orders o ON o.merchant_id = e.merchant_id AND o.id = e.stream_id
          WHERE e.type = 'order.accepted'::text AND NOT COALESCE((e.data ->> 'from_queue'::text)::boolean, false)
        ), line AS (
         SELECT stays.merchant_id,
            stays.entered AS pos,
            1 AS delta,
                CASE
                    WHEN stays.lane = 'priority'::text THEN 1
                    ELSE 0
                END AS delta_priority,
            NULL::uuid AS order_id,
            NULL::text AS lane,
            0 AS queued_seen
           FROM stays
        UNION ALL
         SELECT stays.merchant_id,
            stays.left_at,
            '-1'::integer,
                CASE
                    WHEN stays.lane = 'priority'::text THEN '-1'::integer
                    ELSE 0
                END AS "case",
            NULL::uuid,
            NULL::text,
            0
           FROM stays
          WHERE stays.left_at < '9223372036854775807'::bigint
        UNION ALL
         SELECT direct.merchant_id,
            direct.pos,
            0,
            0,
            direct.order_id,
            direct.lane,
            direct.queued_seen
           FROM direct
        ), waiting AS (
         SELECT l.merchant_id,
            l.pos,
            l.delta,
            l.delta_priority,
            l.order_id,
            l.lane,
            l.queued_seen,
            sum(l.delta) OVER m AS waiting,
            sum(l.delta_priority) OVER m AS waiting_priority
           FROM line l
          WINDOW m AS (PARTITION BY l.merchant_id ORDER BY l.pos, l.delta ROWS UNBOUNDED PRECEDING)
        ), pairs AS (
         SELECT a.merchant_id,
            a.order_id,
            a.seq,
            a.lane,
            a.requeued,
            a.entered,
            a.left_at,
            a.admitted,
            w.order_id AS waiting_order_id,
            w.seq AS waiting_seq,
            w.entered AS waiting_entered,
            w.left_at AS waiting_left_at
           FROM stays a
             JOIN stays w ON w.merchant_id = a.merchant_id AND w.lane = a.lane AND w.requeued
        UNION ALL
         SELECT a.merchant_id,
            a.order_id,
            a.seq,
            a.lane,
            a.requeued,
            a.entered,
            a.left_at,
            a.admitted,
            w.order_id,
            w.seq,
            w.entered,
            w.left_at
           FROM stays a
             JOIN stays w ON w.merchant_id = a.merchant_id AND w.lane = a.lane AND NOT w.requeued
          WHERE a.requeued
        )
 SELECT first_stays.merchant_id,
    first_stays.order_id,
    first_stays.seq,
    first_stays.left_at AS admitted_at_position,
    NULL::uuid AS waiting_order_id,
    NULL::bigint AS waiting_seq,
    first_stays.lane
   FROM first_stays
  WHERE first_stays.admitted AND first_stays.smaller_left_at > first_stays.left_at
UNION ALL
 SELECT pairs.merchant_id,
    pairs.order_id,
    pairs.seq,
    pairs.left_at AS admitted_at_position,
    pairs.waiting_order_id,
    pairs.waiting_seq,
    pairs.lane
   FROM pairs
  WHERE pairs.admitted AND pairs.waiting_seq < pairs.seq AND pairs.waiting_entered < pairs.left_at AND pairs.waiting_left_at > pairs.left_at
UNION ALL
 SELECT waiting.merchant_id,
    waiting.order_id,
    NULL::bigint AS seq,
    waiting.pos AS admitted_at_position,
    NULL::uuid AS waiting_order_id,
    NULL::bigint AS waiting_seq,
    waiting.lane
   FROM waiting
  WHERE waiting.order_id IS NOT NULL AND
        CASE
            WHEN waiting.lane = 'priority'::text THEN waiting.waiting_priority > 0
            ELSE waiting.waiting > 0 OR waiting.queued_seen > 0
        END;

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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_track_starved() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    starved boolean := false;
BEGIN
    IF NEW.queued > 0 AND NEW.pause_mode IS NULL AND NEW.capacity > 0 THEN
        IF NEW.active = 0 THEN
            starved := true;
        ELSIF NEW.active < NEW.capacity THEN
            starved := NEW.active + (SELECT o.load FROM orders o WHERE o.merchant_id = NEW.id AND o.status = 'queued'
                                     ORDER BY o.lane DESC, o.queue_seq LIMIT 1) <= NEW.capacity;
        END IF;
    END IF;
    IF NOT coalesce(starved, false) THEN
        NEW.starved_since := NULL;
    ELSIF NEW.starved_since IS NULL THEN
        NEW.starved_since := now();
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
DROP TRIGGER merchants_track_starved ON merchants;
CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, pause_mode, starved_since ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_track_starved();

DROP TABLE pickup_slots;
DROP INDEX orders_pickup_idx;
DROP INDEX orders_release_idx;
ALTER TABLE orders
    DROP CONSTRAINT orders_status_check,
    ADD CONSTRAINT orders_status_check
        CHECK (status IN ('awaiting_payment','queued','accepted','completed','closed','cancelled','expired')),
    DROP COLUMN release_at,
    DROP COLUMN pickup_at;
DROP INDEX merchants_next_period_idx;
ALTER TABLE merchants DROP COLUMN next_period_at, DROP COLUMN period_capacity, DROP COLUMN hours, DROP COLUMN slots;
