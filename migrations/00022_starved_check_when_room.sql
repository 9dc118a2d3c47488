-- The starvation trigger read the queue's head on every change of a
-- merchant's load. Under a burst the kitchen is full and the head's index
-- entries are mostly orders just admitted, not yet removable, so that read
-- walked them all, under the merchant's lock, on every batch and completion.
-- A head's load is at least 1, so a full, busy kitchen cannot take it: the
-- head is read only when there is room.

-- +goose Up
-- +orderd include functions/merchants_track_starved.00022.sql

-- +goose Down
-- +orderd include functions/merchants_track_starved.00013.sql
