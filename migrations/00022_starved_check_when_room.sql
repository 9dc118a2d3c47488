-- The starvation trigger read the queue's head on every change of a
-- merchant's load. Under a burst the kitchen is full and the head's index
-- entries are mostly orders just admitted, not yet removable, so that read
-- walked them all, under the merchant's lock, on every batch and completion.
-- A head's load is at least 1, so a full, busy kitchen cannot take it: the
-- head is read only when there is room.

-- +goose Up
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

-- +goose Down
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
