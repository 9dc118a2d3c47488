-- +goose Up
-- Kitchens measured in cups (issue 18): a merchant counts orders or items,
-- a product weighs load_units of them, an order holds its load (fixed at
-- placement) while accepted; two lanes queue, the priority lane's head
-- first; a merchant may pause; pickup codes number a merchant's local day.
ALTER TABLE merchants
    ADD COLUMN capacity_unit   text    NOT NULL DEFAULT 'orders' CHECK (capacity_unit IN ('orders', 'items')),
    ADD COLUMN timezone        text    NOT NULL DEFAULT 'UTC',
    ADD COLUMN pickup_prefix   text    NOT NULL DEFAULT '' CHECK (pickup_prefix ~ '^[A-Z]{0,2}$'),
    -- active counts units; active_orders the accepted orders holding them.
    ADD COLUMN active_orders   integer NOT NULL DEFAULT 0 CHECK (active_orders >= 0),
    ADD COLUMN queued_priority integer NOT NULL DEFAULT 0 CHECK (queued_priority >= 0),
    ADD COLUMN queued_units    integer NOT NULL DEFAULT 0 CHECK (queued_units >= 0),
    ADD COLUMN pause_mode      text    CHECK (pause_mode IN ('queue', 'refuse')),
    ADD COLUMN paused_until    timestamptz,
    ADD COLUMN completion_units double precision NOT NULL DEFAULT 0,
    -- The pickup counter: the local day it counts and the codes issued that
    -- day. On the merchant's row, whose lock placements hold already.
    ADD COLUMN pickup_day      date,
    ADD COLUMN pickup_issued   integer NOT NULL DEFAULT 0;
UPDATE merchants SET active_orders = active, queued_units = queued;

ALTER TABLE products ADD COLUMN load_units integer NOT NULL DEFAULT 1 CHECK (load_units BETWEEN 1 AND 100);

ALTER TABLE orders
    ADD COLUMN load        integer NOT NULL DEFAULT 1 CHECK (load >= 1),
    ADD COLUMN lane        text    NOT NULL DEFAULT 'normal' CHECK (lane IN ('normal', 'priority')),
    ADD COLUMN pickup_code text;
-- The line: the priority lane ('priority' > 'normal') first, each in
-- sequence order; position = rank in this index.
DROP INDEX orders_queue_idx;
CREATE INDEX orders_queue_idx ON orders (merchant_id, lane DESC, queue_seq) INCLUDE (load) WHERE status = 'queued';

-- A merchant is starved when its queue's head could be admitted and is
-- not: queued orders, not paused, and room for the head's load (or an
-- empty kitchen).
-- +orderd include functions/merchants_track_starved.00013.sql
DROP TRIGGER merchants_track_starved ON merchants;
CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, pause_mode, starved_since ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_track_starved();

GRANT SELECT (capacity_unit, timezone, pickup_prefix, active_orders, queued_priority, queued_units, pause_mode, paused_until,
              completion_units, pickup_day, pickup_issued) ON merchants TO orderd_auditor;

-- +goose Down
REVOKE SELECT (capacity_unit, timezone, pickup_prefix, active_orders, queued_priority, queued_units, pause_mode, paused_until,
               completion_units, pickup_day, pickup_issued) ON merchants FROM orderd_auditor;
DROP TRIGGER merchants_track_starved ON merchants;
-- +orderd include functions/merchants_track_starved.00002.sql
CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, starved_since ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_track_starved();
DROP INDEX orders_queue_idx;
CREATE INDEX orders_queue_idx ON orders (merchant_id, queue_seq) WHERE status = 'queued';
ALTER TABLE orders DROP COLUMN pickup_code, DROP COLUMN lane, DROP COLUMN load;
ALTER TABLE products DROP COLUMN load_units;
ALTER TABLE merchants
    DROP COLUMN capacity_unit, DROP COLUMN timezone, DROP COLUMN pickup_prefix, DROP COLUMN active_orders,
    DROP COLUMN queued_priority, DROP COLUMN queued_units, DROP COLUMN pause_mode, DROP COLUMN paused_until,
    DROP COLUMN completion_units, DROP COLUMN pickup_day, DROP COLUMN pickup_issued;
