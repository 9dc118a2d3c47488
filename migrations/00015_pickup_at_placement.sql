-- +goose Up
-- Pickup codes are numbered at placement, paid or not. Unpaid placements
-- hold only a key-share lock on their merchant, so the counter leaves the
-- merchant's row for a row of its own per merchant and local day, which a
-- placement batch advances once, just before its commit. A day's row
-- numbers the orders placed on that day, so the audit groups codes by the
-- local day of placed_at.
CREATE TABLE pickup_counters (
    merchant_id uuid    NOT NULL REFERENCES merchants (id),
    day         date    NOT NULL,
    issued      integer NOT NULL CHECK (issued > 0),
    PRIMARY KEY (merchant_id, day)
);
INSERT INTO pickup_counters (merchant_id, day, issued)
SELECT id, pickup_day, pickup_issued FROM merchants WHERE pickup_day IS NOT NULL AND pickup_issued > 0;
ALTER TABLE merchants DROP COLUMN pickup_day, DROP COLUMN pickup_issued;

-- +goose Down
ALTER TABLE merchants
    ADD COLUMN pickup_day    date,
    ADD COLUMN pickup_issued integer NOT NULL DEFAULT 0;
UPDATE merchants m SET pickup_day = c.day, pickup_issued = c.issued
FROM (SELECT DISTINCT ON (merchant_id) merchant_id, day, issued FROM pickup_counters ORDER BY merchant_id, day DESC) c
WHERE c.merchant_id = m.id;
GRANT SELECT (pickup_day, pickup_issued) ON merchants TO orderd_auditor;
DROP TABLE pickup_counters;
