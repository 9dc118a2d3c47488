        NEW.starved_since := NULL;
    ELSIF NEW.starved_since IS NULL THEN
        NEW.starved_since := now();
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
