-- More purchases than units, or more invitations outstanding and
-- purchases together than units; or a purchase whose order is not paid.
CREATE VIEW audit.drop_oversold AS
SELECT d.merchant_id, d.id AS drop_id, d.units, c.purchased, c.invited, NULL::uuid AS entry_id
FROM drops d
JOIN (SELECT merchant_id, drop_id,
             count(*) FILTER (WHERE status = 'purchased') AS purchased,
             count(*) FILTER (WHERE status = 'invited') AS invited
      FROM drop_entries GROUP BY merchant_id, drop_id) c ON c.merchant_id = d.merchant_id AND c.drop_id = d.id
WHERE c.purchased + c.invited > d.units
UNION ALL
SELECT e.merchant_id, e.drop_id, NULL::int, NULL::bigint, NULL::bigint, e.id
FROM drop_entries e
LEFT JOIN orders o ON o.merchant_id = e.merchant_id AND o.id = e.order_id
WHERE e.status = 'purchased' AND (o.id IS NULL OR o.paid_at IS NULL);
