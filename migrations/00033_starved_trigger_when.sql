-- Every placement batch updates the load of each merchant it decided for,
-- and naming active and queued in that UPDATE fires merchants_track_starved,
-- a PL/pgSQL call per merchant row, also when the function can only leave
-- starved_since empty: nothing queued, paused or no capacity, and nothing
-- recorded. The trigger's WHEN clause is that function's own first test,
-- evaluated without the call. No row's outcome changes: where the clause
-- is false or unknown the function would only set starved_since to NULL,
-- which it already is.

-- +goose Up
DROP TRIGGER merchants_track_starved ON merchants;
CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, period_capacity, pause_mode, starved_since ON merchants
FOR EACH ROW
WHEN (NEW.starved_since IS NOT NULL OR (NEW.queued > 0 AND NEW.pause_mode IS NULL AND coalesce(NEW.period_capacity, NEW.capacity) > 0))
EXECUTE FUNCTION merchants_track_starved();

-- +goose Down
DROP TRIGGER merchants_track_starved ON merchants;
CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, period_capacity, pause_mode, starved_since ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_track_starved();
