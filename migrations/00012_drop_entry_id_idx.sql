-- +goose Up
-- Entries are looked up by id alone (a websocket subscription, live
-- updates), as orders are.
CREATE INDEX drop_entries_id_idx ON drop_entries (id);

-- +goose Down
DROP INDEX drop_entries_id_idx;
