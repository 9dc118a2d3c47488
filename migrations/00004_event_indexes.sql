-- +goose Up
-- Every order appends about three events and each of them writes every index
-- on events, so they are kept few. The audits' covering index becomes the
-- unique constraint itself (same columns, one index instead of two), and the
-- (type, recorded_at) b-tree gives way to a BRIN index on recorded_at: the
-- log is appended in time order, so a few pages of summary serve the
-- auditors' "events of this kind in this period" as well, at almost no cost
-- per insert.
ALTER TABLE events DROP CONSTRAINT events_stream_version_key;
ALTER TABLE events ADD CONSTRAINT events_stream_version_key UNIQUE (stream_id, version) INCLUDE (type, global_position);
DROP INDEX events_stream_audit_idx;
DROP INDEX events_type_recorded_idx;
CREATE INDEX events_recorded_brin ON events USING brin (recorded_at);

-- +goose Down
DROP INDEX events_recorded_brin;
CREATE INDEX events_type_recorded_idx ON events (type, recorded_at);
CREATE INDEX events_stream_audit_idx ON events (stream_id, version) INCLUDE (type, global_position);
ALTER TABLE events DROP CONSTRAINT events_stream_version_key;
ALTER TABLE events ADD CONSTRAINT events_stream_version_key UNIQUE (stream_id, version);
