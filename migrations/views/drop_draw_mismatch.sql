-- The keys recomputed from the published seed and the digest of the early
-- entries as the table holds them now (domain.OrderKey), except those the
-- draw is still writing; a seed that is not the one committed to; a
-- recorded digest that is not the early entries' (an entry added to or
-- removed from the set after the start closed it). The expected key is
-- computed in the join's own select list rather than in a lateral subquery
-- without FROM, which Citus pushes down only when everything in it is
-- immutable (extracting an epoch is merely stable).
CREATE VIEW audit.drop_draw_mismatch AS
WITH early AS (
    SELECT e.merchant_id, e.drop_id, sha256(string_agg(uuid_send(e.id), ''::bytea ORDER BY e.id)) AS digest
    FROM drop_entries e
    JOIN drops d ON d.merchant_id = e.merchant_id AND d.id = e.drop_id
    WHERE d.mode = 'lottery' AND e.joined_at < d.starts_at
    GROUP BY e.merchant_id, e.drop_id
)
SELECT x.merchant_id, x.drop_id, x.entry_id, encode(x.order_key, 'hex') AS stored_key, encode(x.expected, 'hex') AS expected_key
FROM (SELECT e.merchant_id, e.drop_id, e.id AS entry_id, e.order_key, l.draw_pending_from IS NOT NULL AS pending,
             CASE
                 WHEN d.mode = 'lottery' AND e.joined_at < d.starts_at THEN
                     CASE
                         WHEN d.seed IS NULL THEN NULL::bytea
                         WHEN d.entries_digest IS NULL THEN '\x00'::bytea || sha256(d.seed || uuid_send(e.id))
                         ELSE '\x00'::bytea || sha256(d.seed || y.digest || uuid_send(e.id))
                     END
                 ELSE '\x01'::bytea || int8send((extract(epoch FROM e.joined_at) * 1000000)::bigint) || uuid_send(e.id)
             END AS expected
      FROM drop_entries e
      JOIN drops d ON d.merchant_id = e.merchant_id AND d.id = e.drop_id
      JOIN drop_lines l ON l.merchant_id = e.merchant_id AND l.drop_id = e.drop_id
      LEFT JOIN early y ON y.merchant_id = e.merchant_id AND y.drop_id = e.drop_id) x
WHERE x.order_key IS DISTINCT FROM x.expected AND NOT (x.order_key IS NULL AND x.pending)
UNION ALL
SELECT d.merchant_id, d.id, NULL::uuid, NULL::text, d.seed_commitment
FROM drops d
WHERE d.seed IS NOT NULL AND encode(sha256(d.seed), 'hex') <> d.seed_commitment
UNION ALL
SELECT d.merchant_id, d.id, NULL::uuid, encode(d.entries_digest, 'hex'), encode(coalesce(y.digest, sha256(''::bytea)), 'hex')
FROM drops d
LEFT JOIN early y ON y.merchant_id = d.merchant_id AND y.drop_id = d.id
WHERE d.entries_digest IS NOT NULL AND d.entries_digest <> coalesce(y.digest, sha256(''::bytea));
