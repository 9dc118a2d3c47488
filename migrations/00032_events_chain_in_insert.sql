-- The store's insert of events writes each stream's first event's hash
-- itself, with the same expression as events_chain_hash, in the statement
-- (store.eventRows): the trigger, a PL/pgSQL call per row, then runs only
-- for rows that come without a hash, which are the store's later versions
-- (whose link before may be a row of the same statement, which only a
-- trigger's query sees) and every other writer's rows. The hash stays
-- what the auditor's query recomputes (docs/tamper-evidence.md).

-- +goose Up
DROP TRIGGER events_chain ON events;
CREATE TRIGGER events_chain
    BEFORE INSERT ON events
    FOR EACH ROW WHEN (NEW.hash IS NULL) EXECUTE FUNCTION events_chain_hash();

-- +goose Down
DROP TRIGGER events_chain ON events;
CREATE TRIGGER events_chain
    BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION events_chain_hash();
