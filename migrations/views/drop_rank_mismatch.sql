-- A stored rank that is not the entry's place in the order of the keys (a
-- duplicate or a gap among them; audit.drop_draw_mismatch checks the keys),
-- or a line whose counts are not its entries'. A drop whose draw is still
-- being written (draw_pending_from, for the moment between the start and
-- the settle after it) is judged once it is written.
CREATE VIEW audit.drop_rank_mismatch AS
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
