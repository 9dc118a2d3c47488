-- merchants_reject_removal as migration 23 made it; migration 24's down puts it back.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION merchants_reject_removal() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' OR NEW.id IS DISTINCT FROM OLD.id THEN
        RAISE EXCEPTION 'merchants are kept: % of merchant % is not allowed', TG_OP, OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
