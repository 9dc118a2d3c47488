-- The log: every event's hash as a leaf of an RFC 6962 Merkle tree, in the
-- order the live feed reads the events (transactions as they end), and the
-- signed checkpoints of the tree as it grew (docs/tamper-evidence.md).
--
-- log_heads holds one row per log: its size and the snapshot of its last
-- read of events. The instance that extends the tree holds that row's lock
-- for the extension's transaction, so there is one writer at a time, and a
-- writer that dies releases it with its connection.
--
-- log_hashes holds every complete subtree's hash (golang.org/x/mod's tlog
-- layout: index StoredHashIndex(level, n)), so a root, an inclusion proof or
-- a consistency proof reads O(log n) rows whatever the log's size.

-- +goose Up
CREATE TABLE log_heads (
    log        text PRIMARY KEY,
    size       bigint NOT NULL DEFAULT 0 CHECK (size >= 0),
    snapshot   text   NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- A snapshot in which every transaction is still to come: the first
-- extension reads every event already written.
INSERT INTO log_heads (log, snapshot) VALUES ('main', '1:1:');

CREATE TABLE log_leaves (
    log         text    NOT NULL,
    leaf_index  bigint  NOT NULL,
    merchant_id uuid    NOT NULL,
    stream_id   uuid    NOT NULL,
    version     integer NOT NULL,
    hash        bytea   NOT NULL, -- the event's hash when it was logged
    PRIMARY KEY (log, leaf_index)
);
CREATE INDEX log_leaves_stream_idx ON log_leaves (stream_id, version);

CREATE TABLE log_hashes (
    log   text   NOT NULL,
    idx   bigint NOT NULL,
    hash  bytea  NOT NULL,
    PRIMARY KEY (log, idx)
);

CREATE TABLE checkpoints (
    log        text   NOT NULL,
    size       bigint NOT NULL,
    root       bytea  NOT NULL,
    at         text   NOT NULL, -- RFC 3339, exactly as signed
    signature  bytea  NOT NULL,
    public_key bytea  NOT NULL,
    PRIMARY KEY (log, size)
);

GRANT SELECT ON log_heads, log_leaves, log_hashes, checkpoints TO orderd_auditor;

-- +goose Down
DROP TABLE checkpoints;
DROP TABLE log_hashes;
DROP TABLE log_leaves;
DROP TABLE log_heads;
