-- Every event is chained to the one before it in its stream:
--   hash(v) = sha256(hash(v-1) || content(v)), hash(0) = 32 zero bytes,
-- with content(v) built from the row's own columns by the expression below,
-- so that one query with PostgreSQL's built-in sha256 recomputes every chain
-- (docs/tamper-evidence.md). The hash is written by a BEFORE INSERT trigger
-- in the transaction that appends the event: it reads the previous version's
-- hash of the same stream through the stream key, which also sees the rows
-- inserted earlier by the same statement (a batch appends several versions of
-- several streams at once). No row is shared between streams, so appends to
-- different streams never wait for each other.

-- +goose Up
ALTER TABLE events ADD COLUMN hash bytea;

-- +goose StatementBegin
CREATE FUNCTION events_chain_hash() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    prev bytea;
BEGIN
    IF NEW.version = 1 THEN
        prev := '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
    ELSE
        SELECT e.hash INTO prev FROM events e
        WHERE e.stream_id = NEW.stream_id AND e.version = NEW.version - 1 AND e.merchant_id = NEW.merchant_id;
        IF prev IS NULL THEN
            RAISE EXCEPTION 'event % of stream % follows no event %', NEW.version, NEW.stream_id, NEW.version - 1
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
    END IF;
    NEW.hash := sha256(prev || convert_to(NEW.stream_id::text || E'\n' || NEW.version::text || E'\n' || NEW.type || E'\n' ||
        NEW.data::text || E'\n' || coalesce(NEW.metadata::text, '') || E'\n' ||
        (extract(epoch from NEW.recorded_at) * 1000000)::bigint::text, 'UTF8'));
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- Existing streams are chained once, oldest version first, by a running
-- aggregate over each stream (a window's frame grows one row at a time).
-- +goose StatementBegin
CREATE FUNCTION events_chain_step(bytea, bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT sha256($1 || $2) $$;
-- +goose StatementEnd
CREATE AGGREGATE events_chain(bytea) (
    sfunc = events_chain_step, stype = bytea,
    initcond = '\x0000000000000000000000000000000000000000000000000000000000000000'
);
ALTER TABLE events DISABLE TRIGGER events_no_update_delete;
UPDATE events e SET hash = c.hash
FROM (
    SELECT stream_id, merchant_id, version,
        events_chain(convert_to(stream_id::text || E'\n' || version::text || E'\n' || type || E'\n' ||
            data::text || E'\n' || coalesce(metadata::text, '') || E'\n' ||
            (extract(epoch from recorded_at) * 1000000)::bigint::text, 'UTF8'))
            OVER (PARTITION BY stream_id, merchant_id ORDER BY version) AS hash
    FROM events
) c
WHERE e.stream_id = c.stream_id AND e.merchant_id = c.merchant_id AND e.version = c.version;
ALTER TABLE events ENABLE TRIGGER events_no_update_delete;
DROP AGGREGATE events_chain(bytea);
DROP FUNCTION events_chain_step(bytea, bytea);

ALTER TABLE events ALTER COLUMN hash SET NOT NULL;
CREATE TRIGGER events_chain
    BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION events_chain_hash();

-- +goose Down
DROP TRIGGER events_chain ON events;
DROP FUNCTION events_chain_hash();
ALTER TABLE events DROP COLUMN hash;
