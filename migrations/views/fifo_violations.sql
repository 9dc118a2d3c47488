-- First come, first served within each lane: no order was admitted from a
-- merchant's line while one with a smaller sequence number of its lane was
-- still in it. Each stay in the line runs from its queued, requeued or
-- prioritized event (which ends a stay in the normal lane and starts one at
-- the tail of the priority lane) to the next event that takes the order
-- out; positions in the log order a merchant's decisions, which its row
-- lock serializes. A first stay enters in sequence order, so the
-- longest-staying of the smaller sequences is one running max; a requeued
-- order returns to its old place out of entry order, and those rare stays
-- are checked pair by pair. A released order (pickup slots) joins the line
-- at the place it took when paid, ahead of orders that queued before its
-- release: like a requeued one, it is overtaken only by what left the line
-- after it entered. An order admitted directly (not from the line)
-- overtakes nobody: a normal order while anyone waits, a priority order
-- while a priority order waits; the stays are counted at the admission's
-- position in the log, and the decision's own record of what it saw
-- (order.accepted's "queued") must say none either.
CREATE VIEW audit.fifo_violations AS
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
         -- Each requeued stay r against every stay o of its lane, both ways
         -- round: o as the admitted one (a) and r as the waiting one (w),
         -- and r as a and o as w, where o is not requeued itself (else
         -- that pair comes with o as r).
         SELECT r.merchant_id,
            r.lane,
            p.order_id,
            p.seq,
            p.left_at,
            p.admitted,
            p.waiting_order_id,
            p.waiting_seq,
            p.waiting_entered,
            p.waiting_left_at
           FROM stays r
             JOIN stays o ON o.merchant_id = r.merchant_id AND o.lane = r.lane
             CROSS JOIN LATERAL ( VALUES
                    (false, o.order_id, o.seq, o.left_at, o.admitted, r.order_id, r.seq, r.entered, r.left_at),
                    (true, r.order_id, r.seq, r.left_at, r.admitted, o.order_id, o.seq, o.entered, o.left_at))
                  p(r_admitted, order_id, seq, left_at, admitted, waiting_order_id, waiting_seq, waiting_entered, waiting_left_at)
          WHERE r.requeued AND NOT (p.r_admitted AND o.requeued)
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
