-- A lottery's start closes the set of its early entries (those that joined
-- before starts_at) and records its digest: SHA-256 of their 16-byte ids in
-- ascending order, concatenated. Every early entry's draw mixes it in,
-- '\x00' || sha256(seed || digest || id), so that nobody who learns the
-- seed early can choose entries that win without knowing every other entry,
-- and an entry added to the set after the start changes the digest, which
-- the audit recomputes from the entries. Draws made before this migration
-- have no digest and keep their keys, sha256(seed || id).

-- +goose Up
ALTER TABLE drops ADD COLUMN entries_digest bytea;

-- +goose Down
ALTER TABLE drops DROP COLUMN entries_digest;
