-- log_leaves is keyed by its event, (stream_id, version), alone: the proofs
-- find a stream's leaves through it, and it keeps an event from entering
-- the logs twice. The key on (log, leaf_index) went: every leaf paid a
-- second index entry for an order only the audit reads, once, in a sort of
-- the log's leaves (store.recomputeLog), which also finds a leaf missing.

-- +goose Up
ALTER TABLE log_leaves DROP CONSTRAINT log_leaves_pkey;
DROP INDEX log_leaves_stream_idx;
ALTER TABLE log_leaves ADD PRIMARY KEY (stream_id, version);

-- +goose Down
ALTER TABLE log_leaves DROP CONSTRAINT log_leaves_pkey;
ALTER TABLE log_leaves ADD PRIMARY KEY (log, leaf_index);
CREATE INDEX log_leaves_stream_idx ON log_leaves (stream_id, version);
