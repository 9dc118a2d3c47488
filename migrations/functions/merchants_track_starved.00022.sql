-- merchants_track_starved as migration 22 made it; migration 26's down puts it back.
-- Its end, which records when the line began to starve, is written once for
-- the versions of migrations 2, 22 and 26 (merchants_track_starved.since.sql;
-- it has no comment, as it stands inside the function's body).
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
-- +orderd include functions/merchants_track_starved.since.sql
