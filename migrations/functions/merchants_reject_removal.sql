-- merchants_reject_removal, which refuses to remove a merchant: made by
-- migration 23 for a delete or a change of id, and by migration 24, which
-- adds the trigger on TRUNCATE, for that too. Both include it; before 24 the
-- TRUNCATE branch is never reached, so 24's down leaves it.
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
