-- TRUNCATE merchants CASCADE empties the tables whose foreign keys name
-- merchants, which orders no longer are (migration 23): it would leave every
-- order without its merchant. Merchants are kept from it too.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_reject_removal() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'merchants are kept: TRUNCATE is not allowed'
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF TG_OP = 'DELETE' OR NEW.id IS DISTINCT FROM OLD.id THEN
        RAISE EXCEPTION 'merchants are kept: % of merchant % is not allowed', TG_OP, OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER merchants_kept_whole
    BEFORE TRUNCATE ON merchants
    FOR EACH STATEMENT EXECUTE FUNCTION merchants_reject_removal();

-- +goose Down
DROP TRIGGER merchants_kept_whole ON merchants;
-- +orderd include functions/merchants_reject_removal.00023.sql
