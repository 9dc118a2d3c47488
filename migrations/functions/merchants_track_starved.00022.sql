-- merchants_track_starved as migration 22 made it; migration 26's down puts it back.
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
