-- +goose Up
-- Audits: one view per invariant, each returning the rows that break it with
-- enough columns to act on. An empty view is a kept promise.
CREATE SCHEMA audit;

-- The audits read every stream in order from one index, without touching
-- the events' heap: the versions, the type of each event and its place in
-- the log.
CREATE INDEX events_stream_audit_idx ON events (stream_id, version) INCLUDE (type, global_position);

-- When a merchant last came to have waiting orders and a free unit at once
-- ("starved"), kept by a trigger so that the store need not know: its
-- updated_at is no witness, since every new order in the queue resets it
-- while the units stay idle. The inline drain ends that state in the
-- transaction that begins it, so lasting 5 s means a drain was missed.
ALTER TABLE merchants ADD COLUMN starved_since timestamptz;

-- +orderd include functions/merchants_track_starved.00002.sql

CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, starved_since ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_track_starved();

UPDATE merchants SET starved_since = now() WHERE queued > 0 AND active < capacity;

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
