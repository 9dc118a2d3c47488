-- An entry invited while an entry ranked before it was still waiting: the
-- better-ranked entry was invited later or never.
CREATE VIEW audit.drop_invitation_order AS
SELECT merchant_id, drop_id, entry_id, invited_at
FROM (
    SELECT merchant_id, drop_id, id AS entry_id, invited_at,
           max(coalesce(invited_at, 'infinity')) OVER (PARTITION BY merchant_id, drop_id ORDER BY order_key
                                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_invited
    FROM drop_entries
    WHERE order_key IS NOT NULL
) r
WHERE invited_at IS NOT NULL AND before_invited > invited_at;
