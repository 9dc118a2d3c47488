-- +goose Up
-- Each drop's line in one row, which the joins of a ranked drop advance
-- under its row lock and invitations advance under the drop's: the entries
-- ranked so far, the last ranked one's joined_at (a later join never ranks
-- before it), and the entries invited so far. Invitations go in rank
-- order, so a waiting entry's position is its rank less the invitations.
-- Reading a position or ranking a join then reads this row by its key,
-- whatever the planner knows of drop_entries (nothing, on a fresh table in
-- the middle of a pre-queue), rather than scanning the drop's entries.
CREATE TABLE drop_lines (
    merchant_id    uuid        NOT NULL,
    drop_id        uuid        NOT NULL,
    ranked         integer     NOT NULL DEFAULT 0 CHECK (ranked >= 0),
    last_joined_at timestamptz,
    invited        integer     NOT NULL DEFAULT 0 CHECK (invited >= 0),
    -- The draw at the start writes the ranks its invitations need and
    -- leaves the rest, from this rank on, to the settle that follows.
    draw_pending_from integer,
    PRIMARY KEY (merchant_id, drop_id),
    FOREIGN KEY (merchant_id, drop_id) REFERENCES drops (merchant_id, id)
);
INSERT INTO drop_lines (merchant_id, drop_id, ranked, last_joined_at, invited)
SELECT d.merchant_id, d.id,
       (SELECT count(rank) FROM drop_entries e WHERE e.merchant_id = d.merchant_id AND e.drop_id = d.id),
       (SELECT e.joined_at FROM drop_entries e WHERE e.merchant_id = d.merchant_id AND e.drop_id = d.id AND e.rank IS NOT NULL ORDER BY e.rank DESC LIMIT 1),
       (SELECT count(invited_at) FROM drop_entries e WHERE e.merchant_id = d.merchant_id AND e.drop_id = d.id)
FROM drops d;

-- The unique rank index goes: a drop's joins number entries one batch at a
-- time under the line's lock, and the audit finds a duplicate or a gap. It
-- was also the index a planner without statistics picked for every query of
-- one drop's entries.
ALTER TABLE drop_entries DROP CONSTRAINT drop_entries_one_per_rank;

-- A stored rank that is not the entry's place in the order of the keys (a
-- duplicate or a gap among them), or a line whose counts are not its
-- entries'. A drop whose draw is still being written (draw_pending_from,
-- for the moment between the start and the settle after it) is judged
-- once it is written. Joins name merchant_id on both sides, nothing is
-- correlated, as every audit view (migration 17).
CREATE OR REPLACE VIEW audit.drop_rank_mismatch AS
SELECT merchant_id, drop_id, id AS entry_id, rank AS stored_rank, expected_rank
FROM (
    SELECT e.merchant_id, e.drop_id, e.id, e.rank,
           CASE WHEN e.order_key IS NOT NULL THEN row_number() OVER (PARTITION BY e.merchant_id, e.drop_id ORDER BY e.order_key NULLS LAST) END AS expected_rank
    FROM drop_entries e
    JOIN drop_lines l ON l.merchant_id = e.merchant_id AND l.drop_id = e.drop_id AND l.draw_pending_from IS NULL
) r
WHERE rank IS DISTINCT FROM expected_rank
UNION ALL
SELECT l.merchant_id, l.drop_id, NULL::uuid, l.ranked, coalesce(c.ranked, 0)
FROM drop_lines l
LEFT JOIN (SELECT merchant_id, drop_id, count(rank)::int AS ranked, count(invited_at)::int AS invited
           FROM drop_entries GROUP BY merchant_id, drop_id) c ON c.merchant_id = l.merchant_id AND c.drop_id = l.drop_id
WHERE l.draw_pending_from IS NULL AND (l.ranked <> coalesce(c.ranked, 0) OR l.invited <> coalesce(c.invited, 0));

-- The keys recomputed from the published seed, as before, except those
-- the draw is still writing.
CREATE OR REPLACE VIEW audit.drop_draw_mismatch AS
SELECT x.merchant_id, x.drop_id, x.entry_id, encode(x.order_key, 'hex') AS stored_key, encode(x.expected, 'hex') AS expected_key
FROM (SELECT e.merchant_id, e.drop_id, e.id AS entry_id, e.order_key, l.draw_pending_from IS NOT NULL AS pending,
             CASE
                 WHEN d.mode = 'lottery' AND e.joined_at < d.starts_at THEN
                     CASE WHEN d.seed IS NULL THEN NULL::bytea ELSE '\x00'::bytea || sha256(d.seed || uuid_send(e.id)) END
                 ELSE '\x01'::bytea || int8send((extract(epoch FROM e.joined_at) * 1000000)::bigint) || uuid_send(e.id)
             END AS expected
      FROM drop_entries e
      JOIN drops d ON d.merchant_id = e.merchant_id AND d.id = e.drop_id
      JOIN drop_lines l ON l.merchant_id = e.merchant_id AND l.drop_id = e.drop_id) x
WHERE x.order_key IS DISTINCT FROM x.expected AND NOT (x.order_key IS NULL AND x.pending)
UNION ALL
SELECT d.merchant_id, d.id, NULL::uuid, NULL::text, d.seed_commitment
FROM drops d
WHERE d.seed IS NOT NULL AND encode(sha256(d.seed), 'hex') <> d.seed_commitment;
GRANT SELECT ON drop_lines TO orderd_auditor;

-- +goose Down
CREATE OR REPLACE VIEW audit.drop_draw_mismatch AS
SELECT x.merchant_id, x.drop_id, x.entry_id, encode(x.order_key, 'hex') AS stored_key, encode(x.expected, 'hex') AS expected_key
FROM (SELECT e.merchant_id, e.drop_id, e.id AS entry_id, e.order_key,
             CASE
                 WHEN d.mode = 'lottery' AND e.joined_at < d.starts_at THEN
                     CASE WHEN d.seed IS NULL THEN NULL::bytea ELSE '\x00'::bytea || sha256(d.seed || uuid_send(e.id)) END
                 ELSE '\x01'::bytea || int8send((extract(epoch FROM e.joined_at) * 1000000)::bigint) || uuid_send(e.id)
             END AS expected
      FROM drop_entries e
      JOIN drops d ON d.merchant_id = e.merchant_id AND d.id = e.drop_id) x
WHERE x.order_key IS DISTINCT FROM x.expected
UNION ALL
SELECT d.merchant_id, d.id, NULL::uuid, NULL::text, d.seed_commitment
FROM drops d
WHERE d.seed IS NOT NULL AND encode(sha256(d.seed), 'hex') <> d.seed_commitment;
CREATE OR REPLACE VIEW audit.drop_rank_mismatch AS
SELECT merchant_id, drop_id, id AS entry_id, rank AS stored_rank, expected_rank
FROM (
    SELECT merchant_id, drop_id, id, rank,
           CASE WHEN order_key IS NOT NULL THEN row_number() OVER (PARTITION BY merchant_id, drop_id ORDER BY order_key NULLS LAST) END AS expected_rank
    FROM drop_entries
) r
WHERE rank IS DISTINCT FROM expected_rank;
ALTER TABLE drop_entries ADD CONSTRAINT drop_entries_one_per_rank UNIQUE (merchant_id, drop_id, rank) DEFERRABLE INITIALLY IMMEDIATE;
DROP TABLE drop_lines;
