-- +goose Up
-- Audits: one view per invariant, each returning the rows that break it with
-- enough columns to act on. An empty view is a kept promise.
CREATE SCHEMA audit;

-- The status an order event leaves its order in; NULL for "paid", which
-- sets none.
CREATE FUNCTION audit.status_after(event_type text) RETURNS text
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

CREATE VIEW audit.oversold_products AS
SELECT p.id AS product_id, p.merchant_id, p.name, p.stock_total, h.held AS units_held_by_live_orders
FROM products p
JOIN (
    SELECT (i->>'product_id')::uuid AS product_id, sum((i->>'quantity')::int) AS held
    FROM orders o, jsonb_array_elements(o.items) i
    WHERE o.status NOT IN ('closed', 'cancelled', 'expired')
    GROUP BY 1
) h ON h.product_id = p.id
WHERE p.stock_total IS NOT NULL AND h.held > p.stock_total;

CREATE VIEW audit.over_purchase_limit AS
SELECT p.id AS product_id, o.customer_id, p.per_user_limit, sum((i->>'quantity')::int) AS units, array_agg(o.id) AS order_ids
FROM orders o, jsonb_array_elements(o.items) i
JOIN products p ON p.id = (i->>'product_id')::uuid
WHERE p.per_user_limit IS NOT NULL AND o.status NOT IN ('closed', 'cancelled', 'expired')
GROUP BY p.id, o.customer_id, p.per_user_limit
HAVING sum((i->>'quantity')::int) > p.per_user_limit;

-- The audits read every stream in order from one index, without touching
-- the events' heap: the versions, the type of each event and its place in
-- the log.
CREATE INDEX events_stream_audit_idx ON events (stream_id, version) INCLUDE (type, global_position);

-- A stream is whole when each version is the one before plus one: a gap
-- shows as a jump, a duplicate (were the unique constraint ever lost) as a
-- repeat. One row per broken step.
CREATE VIEW audit.stream_version_gaps AS
SELECT s.stream_id, (SELECT e.stream_type FROM events e WHERE e.stream_id = s.stream_id LIMIT 1) AS stream_type,
       s.version, s.previous_version
FROM (
    SELECT stream_id, version, lag(version, 1, 0) OVER (PARTITION BY stream_id ORDER BY version) AS previous_version
    FROM events
) s
WHERE s.version <> s.previous_version + 1;

-- An order's row must sit on its stream's last event and carry the status
-- implied by its last status-setting event ("paid" sets none, so a stream
-- ending in it is judged by the event before). A stream without a row, or a
-- row without a stream, drifts too.
CREATE VIEW audit.projection_drift AS
WITH last_events AS (
    SELECT DISTINCT ON (stream_id) stream_id, version, type
    FROM events
    ORDER BY stream_id DESC, version DESC
)
SELECT coalesce(o.id, l.stream_id) AS order_id, o.merchant_id, o.status AS projected_status, o.version AS projected_version,
       l.type AS last_event, l.version AS last_version
FROM orders o
FULL JOIN (SELECT * FROM last_events WHERE type LIKE 'order.%') l ON l.stream_id = o.id
WHERE o.id IS NULL OR l.stream_id IS NULL OR o.version <> l.version
   OR o.status IS DISTINCT FROM audit.status_after(CASE l.type
        WHEN 'order.paid' THEN (SELECT s.type FROM events s WHERE s.stream_id = o.id AND s.type <> 'order.paid'
                                ORDER BY s.version DESC LIMIT 1)
        ELSE l.type END);

CREATE VIEW audit.merchant_load_drift AS
SELECT m.id AS merchant_id, m.name, m.active, coalesce(c.accepted, 0) AS accepted_orders,
       m.queued, coalesce(c.queued, 0) AS queued_orders
FROM merchants m
LEFT JOIN (
    SELECT merchant_id, count(*) FILTER (WHERE status = 'accepted') AS accepted,
           count(*) FILTER (WHERE status = 'queued') AS queued
    FROM orders WHERE status IN ('accepted', 'queued') GROUP BY merchant_id
) c ON c.merchant_id = m.id
WHERE m.active <> coalesce(c.accepted, 0) OR m.queued <> coalesce(c.queued, 0);

CREATE VIEW audit.decisions_over_capacity AS
SELECT e.stream_id AS order_id, e.global_position, e.recorded_at,
       (e.data->>'active_after')::int AS active_after, (e.data->>'capacity')::int AS capacity
FROM events e
WHERE e.type = 'order.accepted' AND (e.data->>'active_after')::int > (e.data->>'capacity')::int;

-- When a merchant last came to have waiting orders and a free unit at once
-- ("starved"), kept by a trigger so that the store need not know: its
-- updated_at is no witness, since every new order in the queue resets it
-- while the units stay idle. The inline drain ends that state in the
-- transaction that begins it, so lasting 5 s means a drain was missed.
ALTER TABLE merchants ADD COLUMN starved_since timestamptz;

-- +goose StatementBegin
CREATE FUNCTION merchants_track_starved() RETURNS trigger
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

UPDATE merchants SET starved_since = now() WHERE queued > 0 AND active < capacity;

CREATE VIEW audit.queued_with_free_capacity AS
SELECT m.id AS merchant_id, m.name, m.capacity, m.active, m.queued, m.starved_since, now() - m.starved_since AS starved_for,
       (SELECT o.id FROM orders o WHERE o.merchant_id = m.id AND o.status = 'queued' ORDER BY o.queue_seq LIMIT 1) AS head_order_id
FROM merchants m
WHERE m.queued > 0 AND m.active < m.capacity AND m.starved_since < now() - interval '5 seconds';

CREATE VIEW audit.unpaid_past_deadline AS
SELECT id AS order_id, merchant_id, customer_id, payment_deadline, now() - payment_deadline AS overdue_by
FROM orders
WHERE status = 'awaiting_payment' AND payment_deadline < now() - interval '5 seconds';

CREATE VIEW audit.queued_past_max_wait AS
SELECT id AS order_id, merchant_id, queued_at, queue_expires_at, now() - queue_expires_at AS overdue_by
FROM orders
WHERE status = 'queued' AND queue_expires_at < now() - interval '5 seconds';

CREATE VIEW audit.undelivered_outbox AS
SELECT id AS outbox_id, merchant_id, order_id, event_type, attempts, next_attempt_at, last_error
FROM outbox
WHERE status = 'pending' AND next_attempt_at < now() - interval '60 seconds';

CREATE VIEW audit.stock_drift AS
WITH held AS (
    SELECT (i->>'product_id')::uuid AS product_id, sum((i->>'quantity')::int) AS held
    FROM orders o, jsonb_array_elements(o.items) i
    WHERE o.status NOT IN ('closed', 'cancelled', 'expired')
    GROUP BY 1
), remaining AS (
    SELECT product_id, sum(remaining) AS remaining FROM stock_buckets GROUP BY product_id
)
SELECT p.id AS product_id, p.merchant_id, p.stock_total, coalesce(r.remaining, 0) AS remaining,
       coalesce(h.held, 0) AS held_by_orders
FROM products p
LEFT JOIN remaining r ON r.product_id = p.id
LEFT JOIN held h ON h.product_id = p.id
WHERE p.stock_total IS NOT NULL AND coalesce(r.remaining, 0) + coalesce(h.held, 0) <> p.stock_total;

-- First come, first served: no order was admitted from a merchant's queue
-- while one with a smaller sequence number was still in it. Each stay in
-- the queue runs from its queued (or requeued) event to the next event that
-- takes the order out; positions in the log order a merchant's decisions,
-- which its row lock serializes. A first stay enters in sequence order, so
-- the longest-staying of the smaller sequences is one running max; a
-- requeued order returns to its old place out of entry order, and those
-- rare stays are checked pair by pair.
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

-- The auditors' role reads the audit views and the read models, never a
-- secret, and writes nothing. Roles belong to the whole server, so it is
-- created once and only this database's grants are undone on the way down.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'orderd_auditor') THEN
        CREATE ROLE orderd_auditor LOGIN;
    END IF;
EXCEPTION
    -- Another database on this server created it meanwhile.
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;
-- +goose StatementEnd
GRANT USAGE ON SCHEMA audit TO orderd_auditor;
GRANT USAGE ON SCHEMA public TO orderd_auditor;
GRANT SELECT ON ALL TABLES IN SCHEMA audit TO orderd_auditor;
GRANT SELECT ON orders, products, events, dead_letters, outbox, webhook_attempts, stock_buckets, purchase_claims TO orderd_auditor;
GRANT SELECT (id, name, capacity, prep_seconds, max_queue_wait_seconds, payment_timeout_seconds, webhook_url,
              created_at, version, active, queued, next_seq, completion_interval_s, completion_samples,
              last_completion_at, updated_at, starved_since) ON merchants TO orderd_auditor;

CREATE INDEX events_accepted_idx ON events (global_position) WHERE type = 'order.accepted';

-- +goose Down
DROP INDEX events_accepted_idx;
DROP INDEX events_stream_audit_idx;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM orderd_auditor;
REVOKE USAGE ON SCHEMA public FROM orderd_auditor;
DROP SCHEMA audit CASCADE;
DROP TRIGGER merchants_track_starved ON merchants;
DROP FUNCTION merchants_track_starved();
ALTER TABLE merchants DROP COLUMN starved_since;
