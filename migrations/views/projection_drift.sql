-- An order's row must sit on its stream's last event and carry the status
-- implied by its last status-setting event: a paid order's status is the
-- one its last other event left (payment moves nothing by itself), and
-- last_decisions is that event. A stream without a row, or a row without a
-- stream, drifts too.
CREATE VIEW audit.projection_drift AS
WITH last_events AS (
    SELECT DISTINCT ON (merchant_id, stream_id) merchant_id, stream_id, version, type
    FROM events
    ORDER BY merchant_id, stream_id, version DESC
), last_decisions AS (
    SELECT DISTINCT ON (merchant_id, stream_id) merchant_id, stream_id, type
    FROM events
    WHERE type LIKE 'order.%' AND type <> 'order.paid'
    ORDER BY merchant_id, stream_id, version DESC
), last_order_events AS (
    SELECT l.merchant_id, l.stream_id, l.version, l.type,
           CASE l.type WHEN 'order.paid' THEN d.type ELSE l.type END AS decided_by
    FROM last_events l
    LEFT JOIN last_decisions d ON d.merchant_id = l.merchant_id AND d.stream_id = l.stream_id
    WHERE l.type LIKE 'order.%'
)
SELECT coalesce(o.id, l.stream_id) AS order_id, coalesce(o.merchant_id, l.merchant_id) AS merchant_id,
       o.status AS projected_status, o.version AS projected_version, l.type AS last_event, l.version AS last_version
FROM orders o
FULL JOIN last_order_events l ON l.merchant_id = o.merchant_id AND l.stream_id = o.id
WHERE o.id IS NULL OR l.stream_id IS NULL OR o.version <> l.version
   OR o.status IS DISTINCT FROM audit.status_after(l.decided_by);
