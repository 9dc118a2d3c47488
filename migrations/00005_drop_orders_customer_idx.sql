-- +goose Up
-- Nothing reads orders by customer: customers reach their orders by id, and
-- the purchase-limit audit groups whole tables. The index cost every
-- placement a b-tree insert on a text key.
DROP INDEX orders_customer_idx;

-- +goose Down
CREATE INDEX orders_customer_idx ON orders (customer_id, placed_at);
