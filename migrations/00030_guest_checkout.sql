-- Walk-in customers (issue 36): a merchant may let anyone without a token
-- take a guest session and order.

-- +goose Up
ALTER TABLE merchants ADD COLUMN guest_checkout boolean NOT NULL DEFAULT false;
GRANT SELECT (guest_checkout) ON merchants TO orderd_auditor;

-- +goose Down
ALTER TABLE merchants DROP COLUMN guest_checkout;
