-- merchants_track_starved as migration 13 made it; migration 22's down puts it back.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_track_starved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.queued > 0 AND NEW.pause_mode IS NULL AND NEW.capacity > 0
       AND (NEW.active = 0 OR NEW.active + (SELECT o.load FROM orders o WHERE o.merchant_id = NEW.id AND o.status = 'queued'
                                             ORDER BY o.lane DESC, o.queue_seq LIMIT 1) <= NEW.capacity) THEN
        IF NEW.starved_since IS NULL THEN
            NEW.starved_since := now();
        END IF;
    ELSE
        NEW.starved_since := NULL;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
