-- merchants_track_starved as migration 2 made it; migration 13's down puts it back.
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
