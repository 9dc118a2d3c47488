-- TRUNCATE merchants CASCADE empties the tables whose foreign keys name
-- merchants, which orders no longer are (migration 23): it would leave every
-- order without its merchant. Merchants are kept from it too.

-- +goose Up
-- +orderd include functions/merchants_reject_removal.sql

CREATE TRIGGER merchants_kept_whole
    BEFORE TRUNCATE ON merchants
    FOR EACH STATEMENT EXECUTE FUNCTION merchants_reject_removal();

-- +goose Down
DROP TRIGGER merchants_kept_whole ON merchants;
