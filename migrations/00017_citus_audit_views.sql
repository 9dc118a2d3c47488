-- Every audit view runs on Citus as well as on one PostgreSQL: a join of
-- two per-merchant tables names merchant_id on both sides, a window over a
-- stream partitions by merchant too, and nothing is correlated into a
-- subquery that Citus cannot push down to the shard holding the merchant.
-- The answers are unchanged: a stream, an order and its products belong to
-- one merchant.

-- +goose Up
CREATE OR REPLACE VIEW audit.over_purchase_limit AS
SELECT p.id AS product_id, o.customer_id, p.per_user_limit,
       sum((i.value ->> 'quantity')::int) AS units, array_agg(o.id) AS order_ids
FROM orders o
CROSS JOIN LATERAL jsonb_array_elements(o.items) i(value)
JOIN products p ON p.merchant_id = o.merchant_id AND p.id = (i.value ->> 'product_id')::uuid
WHERE p.per_user_limit IS NOT NULL AND o.status NOT IN ('closed', 'cancelled', 'expired')
GROUP BY p.id, o.customer_id, p.per_user_limit
HAVING sum((i.value ->> 'quantity')::int) > p.per_user_limit;

CREATE OR REPLACE VIEW audit.stream_version_gaps AS
SELECT s.stream_id, s.stream_type, s.version, s.previous_version
FROM (SELECT stream_id, stream_type, version,
             lag(version, 1, 0) OVER (PARTITION BY merchant_id, stream_id ORDER BY version) AS previous_version
      FROM events) s
WHERE s.version <> s.previous_version + 1;

-- A paid order's status is the one its last other event left (payment
-- moves nothing by itself): last_decisions is that event.
CREATE OR REPLACE VIEW audit.projection_drift AS
WITH last_events AS (
    SELECT DISTINCT ON (merchant_id, stream_id) merchant_id, stream_id, version, type
    FROM events
    ORDER BY merchant_id, stream_id, version DESC
), last_decisions AS (
    SELECT DISTINCT ON (merchant_id, stream_id) merchant_id, stream_id, type
    FROM events
    WHERE type LIKE 'order.%' AND type <> 'order.paid'
    ORDER BY merchant_id, stream_id, version DESC
), last_order_events AS (
    SELECT l.merchant_id, l.stream_id, l.version, l.type,
           CASE l.type WHEN 'order.paid' THEN d.type ELSE l.type END AS decided_by
    FROM last_events l
    LEFT JOIN last_decisions d ON d.merchant_id = l.merchant_id AND d.stream_id = l.stream_id
    WHERE l.type LIKE 'order.%'
)
SELECT coalesce(o.id, l.stream_id) AS order_id, coalesce(o.merchant_id, l.merchant_id) AS merchant_id,
       o.status AS projected_status, o.version AS projected_version, l.type AS last_event, l.version AS last_version
FROM orders o
FULL JOIN last_order_events l ON l.merchant_id = o.merchant_id AND l.stream_id = o.id
WHERE o.id IS NULL OR l.stream_id IS NULL OR o.version <> l.version
   OR o.status IS DISTINCT FROM audit.status_after(l.decided_by);

CREATE OR REPLACE VIEW audit.accepted_at_backwards AS
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

-- The expected key is computed in the join's own select list rather than
-- in a lateral subquery without FROM, which Citus pushes down only when
-- everything in it is immutable (extracting an epoch is merely stable).
CREATE OR REPLACE VIEW audit.drop_draw_mismatch AS
SELECT x.merchant_id, x.drop_id, x.entry_id, encode(x.order_key, 'hex') AS stored_key, encode(x.expected, 'hex') AS expected_key
FROM (SELECT e.merchant_id, e.drop_id, e.id AS entry_id, e.order_key,
             CASE
                 WHEN d.mode = 'lottery' AND e.joined_at < d.starts_at THEN
                     CASE WHEN d.seed IS NULL THEN NULL::bytea ELSE '\x00'::bytea || sha256(d.seed || uuid_send(e.id)) END
                 ELSE '\x01'::bytea || int8send((extract(epoch FROM e.joined_at) * 1000000)::bigint) || uuid_send(e.id)
             END AS expected
      FROM drop_entries e
      JOIN drops d ON d.merchant_id = e.merchant_id AND d.id = e.drop_id) x
WHERE x.order_key IS DISTINCT FROM x.expected
UNION ALL
SELECT d.merchant_id, d.id, NULL::uuid, NULL::text, d.seed_commitment
FROM drops d
WHERE d.seed IS NOT NULL AND encode(sha256(d.seed), 'hex') <> d.seed_commitment;

CREATE OR REPLACE VIEW audit.drop_oversold AS
SELECT d.merchant_id, d.id AS drop_id, d.units, c.purchased, c.invited, NULL::uuid AS entry_id
FROM drops d
JOIN (SELECT merchant_id, drop_id,
             count(*) FILTER (WHERE status = 'purchased') AS purchased,
             count(*) FILTER (WHERE status = 'invited') AS invited
      FROM drop_entries GROUP BY merchant_id, drop_id) c ON c.merchant_id = d.merchant_id AND c.drop_id = d.id
WHERE c.purchased + c.invited > d.units
UNION ALL
SELECT e.merchant_id, e.drop_id, NULL::int, NULL::bigint, NULL::bigint, e.id
FROM drop_entries e
LEFT JOIN orders o ON o.merchant_id = e.merchant_id AND o.id = e.order_id
WHERE e.status = 'purchased' AND (o.id IS NULL OR o.paid_at IS NULL);

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

-- +goose Down
-- previous over_purchase_limit
CREATE OR REPLACE VIEW audit.over_purchase_limit AS
 SELECT p.id AS product_id,
    o.customer_id,
    p.per_user_limit,
    sum((i.value ->> 'quantity'::text)::integer) AS units,
    array_agg(o.id) AS order_ids
   FROM orders o,
    LATERAL jsonb_array_elements(o.items) i(value)
     JOIN products p ON p.id = ((i.value ->> 'product_id'::text)::uuid)
  WHERE p.per_user_limit IS NOT NULL AND (o.status <> ALL (ARRAY['closed'::text, 'cancelled'::text, 'expired'::text]))
  GROUP BY p.id, o.customer_id, p.per_user_limit
 HAVING sum((i.value ->> 'quantity'::text)::integer) > p.per_user_limit;

-- previous stream_version_gaps
CREATE OR REPLACE VIEW audit.stream_version_gaps AS
 SELECT s.stream_id,
    ( SELECT e.stream_type
           FROM events e
          WHERE e.stream_id = s.stream_id
         LIMIT 1) AS stream_type,
    s.version,
    s.previous_version
   FROM ( SELECT events.stream_id,
            events.version,
            lag(events.version, 1, 0) OVER (PARTITION BY events.stream_id ORDER BY events.version) AS previous_version
           FROM events) s
  WHERE s.version <> (s.previous_version + 1);

-- previous projection_drift
CREATE OR REPLACE VIEW audit.projection_drift AS
 WITH last_events AS (
         SELECT DISTINCT ON (events.stream_id) events.stream_id,
            events.version,
            events.type
           FROM events
          ORDER BY events.stream_id DESC, events.version DESC
        )
 SELECT COALESCE(o.id, l.stream_id) AS order_id,
    o.merchant_id,
    o.status AS projected_status,
    o.version AS projected_version,
    l.type AS last_event,
    l.version AS last_version
   FROM orders o
     FULL JOIN ( SELECT last_events.stream_id,
            last_events.version,
            last_events.type
           FROM last_events
          WHERE last_events.type ~~ 'order.%'::text) l ON l.stream_id = o.id
  WHERE o.id IS NULL OR l.stream_id IS NULL OR o.version <> l.version OR o.status IS DISTINCT FROM audit.status_after(
        CASE l.type
            WHEN 'order.paid'::text THEN ( SELECT s.type
               FROM events s
              WHERE s.stream_id = o.id AND s.type <> 'order.paid'::text
              ORDER BY s.version DESC
             LIMIT 1)
            ELSE l.type
        END);

-- previous accepted_at_backwards
CREATE OR REPLACE VIEW audit.accepted_at_backwards AS
 SELECT a.merchant_id,
    a.order_id,
    a.accepted_at,
    a.recorded_at,
    a.previous_order_id,
    a.previous_accepted_at,
    a.previous_recorded_at
   FROM ( SELECT o.merchant_id,
            e.stream_id AS order_id,
            (e.data ->> 'accepted_at'::text)::timestamp with time zone AS accepted_at,
            e.recorded_at,
            lag(e.stream_id) OVER w AS previous_order_id,
            lag((e.data ->> 'accepted_at'::text)::timestamp with time zone) OVER w AS previous_accepted_at,
            lag(e.recorded_at) OVER w AS previous_recorded_at
           FROM events e
             JOIN orders o ON o.id = e.stream_id
          WHERE e.type = 'order.accepted'::text
          WINDOW w AS (PARTITION BY o.merchant_id ORDER BY e.global_position)) a
  WHERE a.accepted_at < a.previous_accepted_at OR a.recorded_at < a.previous_recorded_at;

-- previous drop_draw_mismatch
CREATE OR REPLACE VIEW audit.drop_draw_mismatch AS
 SELECT e.merchant_id,
    e.drop_id,
    e.id AS entry_id,
    encode(e.order_key, 'hex'::text) AS stored_key,
    encode(x.expected, 'hex'::text) AS expected_key
   FROM drop_entries e
     JOIN drops d ON d.merchant_id = e.merchant_id AND d.id = e.drop_id
     CROSS JOIN LATERAL ( SELECT
                CASE
                    WHEN d.mode = 'lottery'::text AND e.joined_at < d.starts_at THEN
                    CASE
                        WHEN d.seed IS NULL THEN NULL::bytea
                        ELSE '\x00'::bytea || sha256(d.seed || uuid_send(e.id))
                    END
                    ELSE ('\x01'::bytea || int8send((EXTRACT(epoch FROM e.joined_at) * 1000000::numeric)::bigint)) || uuid_send(e.id)
                END AS expected) x
  WHERE e.order_key IS DISTINCT FROM x.expected
UNION ALL
 SELECT d.merchant_id,
    d.id AS drop_id,
    NULL::uuid AS entry_id,
    NULL::text AS stored_key,
    d.seed_commitment AS expected_key
   FROM drops d
  WHERE d.seed IS NOT NULL AND encode(sha256(d.seed), 'hex'::text) <> d.seed_commitment;

-- previous drop_oversold
CREATE OR REPLACE VIEW audit.drop_oversold AS
 SELECT d.merchant_id,
    d.id AS drop_id,
    d.units,
    c.purchased,
    c.invited,
    NULL::uuid AS entry_id
   FROM drops d
     CROSS JOIN LATERAL ( SELECT count(*) FILTER (WHERE e.status = 'purchased'::text) AS purchased,
            count(*) FILTER (WHERE e.status = 'invited'::text) AS invited
           FROM drop_entries e
          WHERE e.merchant_id = d.merchant_id AND e.drop_id = d.id) c
  WHERE (c.purchased + c.invited) > d.units
UNION ALL
 SELECT e.merchant_id,
    e.drop_id,
    NULL::integer AS units,
    NULL::bigint AS purchased,
    NULL::bigint AS invited,
    e.id AS entry_id
   FROM drop_entries e
     LEFT JOIN orders o ON o.id = e.order_id
  WHERE e.status = 'purchased'::text AND (o.id IS NULL OR o.paid_at IS NULL);

-- previous fifo_violations
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
             JOIN events e ON e.stream_id = o.id
          WHERE o.queue_seq IS NOT NULL AND (e.type = ANY (ARRAY['order.queued'::text, 'order.requeued'::text, 'order.prioritized'::text, 'order.accepted'::text, 'order.cancelled'::text, 'order.expired'::text, 'order.closed'::text]))
          WINDOW w AS (PARTITION BY e.stream_id ORDER BY e.version)
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
             JOIN orders o ON o.id = e.stream_id
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
