-- +goose Up
-- An entry's rank is stored: a join numbers the entries it ranks after
-- the last ranked one, under its drop's lock, and the draw numbers every
-- entry of a lottery drop at the start. A waiting entry's position is then
-- its rank less the best rank still waiting, plus one (invitations go in
-- rank order), which reads two index entries instead of counting the line.
ALTER TABLE drop_entries ADD COLUMN rank integer CHECK (rank > 0);
UPDATE drop_entries e SET rank = r.n
FROM (SELECT merchant_id, drop_id, id, row_number() OVER (PARTITION BY merchant_id, drop_id ORDER BY order_key) AS n
      FROM drop_entries WHERE order_key IS NOT NULL) r
WHERE e.merchant_id = r.merchant_id AND e.drop_id = r.drop_id AND e.id = r.id;
-- One entry per rank, whatever the concurrency; checked at the end of each
-- statement, so that a statement may renumber entries among themselves.
ALTER TABLE drop_entries ADD CONSTRAINT drop_entries_one_per_rank UNIQUE (merchant_id, drop_id, rank) DEFERRABLE INITIALLY IMMEDIATE;
DROP INDEX drop_entries_rank_idx;
DROP INDEX drop_entries_status_idx;
CREATE INDEX drop_entries_status_idx ON drop_entries (merchant_id, drop_id, status, rank);

-- +goose Down
DROP INDEX drop_entries_status_idx;
ALTER TABLE drop_entries DROP CONSTRAINT drop_entries_one_per_rank;
ALTER TABLE drop_entries DROP COLUMN rank;
CREATE INDEX drop_entries_status_idx ON drop_entries (merchant_id, drop_id, status);
CREATE INDEX drop_entries_rank_idx ON drop_entries (merchant_id, drop_id, order_key);
