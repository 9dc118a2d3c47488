-- An order's merchant exists because merchants are kept, not because each
-- order insert checks. The foreign key from orders ran one query per
-- inserted order to share-lock a merchant row that the placement batch had
-- already locked (key share, or no key update when it decides for the
-- merchant) in the same transaction, and placement batches are the only
-- writer of new orders. What the key guarded against, a merchant deleted or
-- re-keyed under its orders, is refused outright instead.

-- +goose Up
-- +orderd include functions/merchants_reject_removal.sql

CREATE TRIGGER merchants_kept
    BEFORE DELETE OR UPDATE OF id ON merchants
    FOR EACH ROW EXECUTE FUNCTION merchants_reject_removal();
ALTER TABLE orders DROP CONSTRAINT orders_merchant_id_fkey;

-- +goose Down
ALTER TABLE orders ADD CONSTRAINT orders_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants (id);
DROP TRIGGER merchants_kept ON merchants;
DROP FUNCTION merchants_reject_removal();
