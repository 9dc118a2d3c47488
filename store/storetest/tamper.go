package storetest

// RecomputeChain is what an attacker who knows the chain's formula runs,
// with the triggers off, after changing an order's event: it rewrites the
// hash of every event of the stream $1 so that each link recomputes, and
// only a checkpoint signed before tells. The formula is written here on its
// own, as docs/tamper-evidence.md publishes it, not taken from the store
// under test.
const RecomputeChain = `WITH RECURSIVE c AS (
    SELECT e.stream_id, e.version, sha256('\x0000000000000000000000000000000000000000000000000000000000000000'::bytea || ` + tamperedContent + `) AS h
    FROM events e WHERE e.stream_id = $1 AND e.version = 1
  UNION ALL
    SELECT e.stream_id, e.version, sha256(c.h || ` + tamperedContent + `)
    FROM c JOIN events e ON e.stream_id = c.stream_id AND e.version = c.version + 1
)
UPDATE events e SET hash = c.h FROM c WHERE e.stream_id = c.stream_id AND e.version = c.version`

const tamperedContent = `convert_to(e.stream_id::text || E'\n' || e.version::text || E'\n' || e.type || E'\n' ||
    e.data::text || E'\n' || coalesce(e.metadata::text, '') || E'\n' ||
    (extract(epoch from e.recorded_at) * 1000000)::bigint::text, 'UTF8')`
