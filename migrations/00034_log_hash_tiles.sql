-- The log's stored hashes are kept in tiles: one row holds 32 consecutive
-- stored hashes (tlog's StoredHashIndex order, tile = index / 32), their
-- 32-byte values concatenated, 1 KiB once full, small enough to stay in the
-- row. A log that grows by a leaf stores one to a few hashes, so a row per
-- hash cost every leaf two rows and their index entries; a tile is written
-- once per extension while it fills (the last one rewritten, whole, by the
-- next extension) and a leaf costs a sixteenth of a row. A root or a proof
-- still reads O(log n) rows (store.hashOverlay).

-- +goose Up
CREATE TABLE log_hash_tiles (
    log    text   NOT NULL,
    tile   bigint NOT NULL,
    hashes bytea  NOT NULL CHECK (length(hashes) BETWEEN 32 AND 32 * 32 AND length(hashes) % 32 = 0),
    PRIMARY KEY (log, tile)
);

INSERT INTO log_hash_tiles (log, tile, hashes)
SELECT log, idx / 32, string_agg(hash, ''::bytea ORDER BY idx)
FROM log_hashes
GROUP BY log, idx / 32;

DROP TABLE log_hashes;
GRANT SELECT ON log_hash_tiles TO orderd_auditor;

-- +goose Down
CREATE TABLE log_hashes (
    log   text   NOT NULL,
    idx   bigint NOT NULL,
    hash  bytea  NOT NULL,
    PRIMARY KEY (log, idx)
);

INSERT INTO log_hashes (log, idx, hash)
SELECT t.log, t.tile * 32 + i, substring(t.hashes FROM i * 32 + 1 FOR 32)
FROM log_hash_tiles t, generate_series(0, length(t.hashes) / 32 - 1) i;

DROP TABLE log_hash_tiles;
GRANT SELECT ON log_hashes TO orderd_auditor;
