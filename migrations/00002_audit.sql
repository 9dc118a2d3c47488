-- +goose Up
-- Audits: one view per invariant, each returning the rows that break it with
-- enough columns to act on. An empty view is a kept promise.
CREATE SCHEMA audit;

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

-- Duplicate versions are impossible (unique (stream_id, version)), so a
-- stream is whole when its versions are exactly 1..count.
CREATE VIEW audit.stream_version_gaps AS
SELECT stream_id, stream_type, count(*) AS events, min(version) AS first_version, max(version) AS last_version
FROM events
GROUP BY stream_id, stream_type
HAVING min(version) <> 1 OR max(version) <> count(*);

-- An order's projection must sit on its stream's last event (no event at
-- its version, or one after it, is drift) and carry the status that event
-- implies; "paid" sets none, so after it the status is still awaiting
-- payment (the admission decision follows in the same transaction).
CREATE VIEW audit.projection_drift AS
SELECT o.id AS order_id, o.merchant_id, o.status AS projected_status, o.version AS projected_version,
       e.type AS event_at_version,
       EXISTS (SELECT 1 FROM events n WHERE n.stream_id = o.id AND n.version = o.version + 1) AS events_beyond_projection
FROM orders o
LEFT JOIN events e ON e.stream_id = o.id AND e.version = o.version
WHERE e.stream_id IS NULL
   OR EXISTS (SELECT 1 FROM events n WHERE n.stream_id = o.id AND n.version = o.version + 1)
   OR o.status <> CASE e.type
        WHEN 'order.placed' THEN 'awaiting_payment'
        WHEN 'order.paid' THEN 'awaiting_payment'
        WHEN 'order.queued' THEN 'queued'
        WHEN 'order.requeued' THEN 'queued'
        WHEN 'order.accepted' THEN 'accepted'
        WHEN 'order.completed' THEN 'completed'
        WHEN 'order.cancelled' THEN 'cancelled'
        WHEN 'order.closed' THEN 'closed'
        WHEN 'order.expired' THEN 'expired'
      END;

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

-- A merchant with waiting orders and a free unit whose load has not changed
-- for 5 s: a drain that should have happened did not.
CREATE VIEW audit.queued_with_free_capacity AS
SELECT id AS merchant_id, name, capacity, active, queued, updated_at AS load_unchanged_since
FROM merchants
WHERE queued > 0 AND active < capacity AND updated_at < now() - interval '5 seconds';

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

-- Orders admitted from a merchant's queue out of sequence order. A requeued
-- order keeps its original place, so it is left out.
CREATE VIEW audit.fifo_violations AS
SELECT merchant_id, order_id, seq, previous_seq, global_position
FROM (
    SELECT o.merchant_id, o.id AS order_id, o.queue_seq AS seq, e.global_position,
           lag(o.queue_seq) OVER (PARTITION BY o.merchant_id ORDER BY e.global_position) AS previous_seq
    FROM events e
    JOIN orders o ON o.id = e.stream_id
    WHERE e.type = 'order.accepted' AND (e.data->>'from_queue')::boolean
      AND NOT EXISTS (SELECT 1 FROM events r WHERE r.stream_id = o.id AND r.type = 'order.requeued')
) x
WHERE seq < previous_seq;

-- The auditors' role reads the audit views and the read models, never a
-- secret, and writes nothing. Roles belong to the whole server, so it is
-- created once and only this database's grants are undone on the way down.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'orderd_auditor') THEN
        CREATE ROLE orderd_auditor LOGIN;
    END IF;
END
$$;
-- +goose StatementEnd
GRANT USAGE ON SCHEMA audit TO orderd_auditor;
GRANT USAGE ON SCHEMA public TO orderd_auditor;
GRANT SELECT ON ALL TABLES IN SCHEMA audit TO orderd_auditor;
GRANT SELECT ON orders, products, events, dead_letters, outbox, webhook_attempts, stock_buckets, purchase_claims TO orderd_auditor;
GRANT SELECT (id, name, capacity, prep_seconds, max_queue_wait_seconds, payment_timeout_seconds, webhook_url,
              created_at, version, active, queued, next_seq, completion_interval_s, completion_samples,
              last_completion_at, updated_at) ON merchants TO orderd_auditor;

CREATE INDEX events_accepted_idx ON events (global_position) WHERE type = 'order.accepted';

-- +goose Down
DROP INDEX events_accepted_idx;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM orderd_auditor;
REVOKE USAGE ON SCHEMA public FROM orderd_auditor;
DROP SCHEMA audit CASCADE;
