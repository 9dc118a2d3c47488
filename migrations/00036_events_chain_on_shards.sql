-- On Citus the chain's trigger runs on the shard the event goes to, and
-- its read of the stream's previous event named events, the distributed
-- table: Citus planned, deparsed and ran that read as a distributed query
-- on every call, many times the cost of the index lookup it wraps (every
-- close and payment appends a version after the first, whose link only the
-- trigger reads). The read now goes to the table the trigger fires on,
-- which on a shard is that shard, holding every event of the stream (a
-- stream's events are its merchant's). On one PostgreSQL the trigger fires
-- on events itself and reads it as before, with its cached plan. The hash
-- is unchanged (docs/tamper-evidence.md).

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION events_chain_hash() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    prev bytea;
BEGIN
    IF NEW.version = 1 THEN
        prev := '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea;
    ELSIF TG_TABLE_NAME = 'events' THEN
        SELECT e.hash INTO prev FROM events e
        WHERE e.stream_id = NEW.stream_id AND e.version = NEW.version - 1 AND e.merchant_id = NEW.merchant_id;
    ELSE
        EXECUTE format('SELECT e.hash FROM %I.%I e WHERE e.stream_id = $1 AND e.version = $2 AND e.merchant_id = $3',
            TG_TABLE_SCHEMA, TG_TABLE_NAME)
            INTO prev USING NEW.stream_id, NEW.version - 1, NEW.merchant_id;
    END IF;
    IF prev IS NULL THEN
        RAISE EXCEPTION 'event % of stream % follows no event %', NEW.version, NEW.stream_id, NEW.version - 1
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    NEW.hash := sha256(prev || convert_to(NEW.stream_id::text || E'\n' || NEW.version::text || E'\n' || NEW.type || E'\n' ||
        NEW.data::text || E'\n' || coalesce(NEW.metadata::text, '') || E'\n' ||
        (extract(epoch from NEW.recorded_at) * 1000000)::bigint::text, 'UTF8'));
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION events_chain_hash() RETURNS trigger
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
