-- The log's primary key is its stream key, (stream_id, version, merchant_id):
-- the one index every append needs anyway, for the expected-version check.
-- global_position stays unique by its sequence, and nothing reads an event
-- by it, so its own index was one more insert per event for no reader.

-- +goose Up
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events DROP CONSTRAINT events_stream_version_key;
ALTER TABLE events ADD CONSTRAINT events_stream_version_key PRIMARY KEY (stream_id, version, merchant_id) INCLUDE (type, global_position);

-- +goose Down
ALTER TABLE events DROP CONSTRAINT events_stream_version_key;
ALTER TABLE events ADD CONSTRAINT events_stream_version_key UNIQUE (stream_id, version, merchant_id) INCLUDE (type, global_position);
ALTER TABLE events ADD PRIMARY KEY (global_position, merchant_id);
