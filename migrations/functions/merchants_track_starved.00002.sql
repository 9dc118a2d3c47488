-- merchants_track_starved as migration 2 made it; migration 13's down puts it back.
-- Its end is merchants_track_starved.00022.sql's (see there).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_track_starved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (NEW.queued > 0 AND NEW.active < NEW.capacity) THEN
-- +orderd include functions/merchants_track_starved.since.sql
