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
GRANT SELECT ON drop_lines TO orderd_auditor;

-- +goose Down
ALTER TABLE drop_entries ADD CONSTRAINT drop_entries_one_per_rank UNIQUE (merchant_id, drop_id, rank) DEFERRABLE INITIALLY IMMEDIATE;
DROP TABLE drop_lines;
