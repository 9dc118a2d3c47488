-- Pickup slots and opening hours (issue 37).
--
-- A merchant's slot settings and hours are part of its folded settings;
-- period_capacity is the capacity the open period of its hours sets (null:
-- its own), recorded at each period's edge by a timer (merchant.period_changed),
-- and next_period_at that edge, which the timer's backstop finds overdue.
--
-- pickup_slots holds a slot's capacity and what its orders take of it, once an
-- order takes it: the CHECK makes overselling a slot impossible whatever the
-- code does, and placements add to taken only where it still fits.
--
-- An order for a slot carries pickup_at and release_at, when it joins the
-- live line; paid before that, it is 'scheduled', with its place in line.

-- +goose Up
ALTER TABLE merchants
    ADD COLUMN slots           jsonb,
    ADD COLUMN hours           jsonb,
    ADD COLUMN period_capacity int CHECK (period_capacity >= 0),
    ADD COLUMN next_period_at  timestamptz;
CREATE INDEX merchants_next_period_idx ON merchants (next_period_at) WHERE next_period_at IS NOT NULL;

ALTER TABLE orders
    ADD COLUMN pickup_at  timestamptz,
    ADD COLUMN release_at timestamptz,
    DROP CONSTRAINT orders_status_check,
    ADD CONSTRAINT orders_status_check
        CHECK (status IN ('awaiting_payment','scheduled','queued','accepted','completed','closed','cancelled','expired'));
CREATE INDEX orders_release_idx ON orders (release_at) WHERE status = 'scheduled';
CREATE INDEX orders_pickup_idx ON orders (merchant_id, pickup_at) WHERE pickup_at IS NOT NULL;

CREATE TABLE pickup_slots (
    merchant_id uuid        NOT NULL,
    starts_at   timestamptz NOT NULL,
    capacity    int         NOT NULL CHECK (capacity > 0),
    taken       int         NOT NULL DEFAULT 0,
    PRIMARY KEY (merchant_id, starts_at),
    CONSTRAINT pickup_slots_within_capacity CHECK (taken >= 0 AND taken <= capacity)
);

-- Admission runs at the capacity in force. The function's end, which records
-- when the line began to starve, is functions/merchants_track_starved.since.sql.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_track_starved() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    starved boolean := false;
BEGIN
    IF NEW.queued > 0 AND NEW.pause_mode IS NULL AND coalesce(NEW.period_capacity, NEW.capacity) > 0 THEN
        IF NEW.active = 0 THEN
            starved := true;
        ELSIF NEW.active < coalesce(NEW.period_capacity, NEW.capacity) THEN
            starved := NEW.active + (SELECT o.load FROM orders o WHERE o.merchant_id = NEW.id AND o.status = 'queued'
                                     ORDER BY o.lane DESC, o.queue_seq LIMIT 1) <= coalesce(NEW.period_capacity, NEW.capacity);
        END IF;
    END IF;
    IF NOT coalesce(starved, false) THEN
-- +orderd include functions/merchants_track_starved.since.sql
DROP TRIGGER merchants_track_starved ON merchants;
CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, period_capacity, pause_mode, starved_since ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_track_starved();

GRANT SELECT (slots, hours, period_capacity, next_period_at) ON merchants TO orderd_auditor;
GRANT SELECT ON pickup_slots TO orderd_auditor;

-- +goose Down

-- +orderd include functions/merchants_track_starved.00022.sql
DROP TRIGGER merchants_track_starved ON merchants;
CREATE TRIGGER merchants_track_starved BEFORE INSERT OR UPDATE OF active, queued, capacity, pause_mode, starved_since ON merchants
FOR EACH ROW EXECUTE FUNCTION merchants_track_starved();

DROP TABLE pickup_slots;
DROP INDEX orders_pickup_idx;
DROP INDEX orders_release_idx;
ALTER TABLE orders
    DROP CONSTRAINT orders_status_check,
    ADD CONSTRAINT orders_status_check
        CHECK (status IN ('awaiting_payment','queued','accepted','completed','closed','cancelled','expired')),
    DROP COLUMN release_at,
    DROP COLUMN pickup_at;
DROP INDEX merchants_next_period_idx;
ALTER TABLE merchants DROP COLUMN next_period_at, DROP COLUMN period_capacity, DROP COLUMN hours, DROP COLUMN slots;
