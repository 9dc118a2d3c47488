-- +goose Up
-- Lists page by key, not by offset (GET /v1/orders, GET /v1/merchants/{id}/orders,
-- GET /v1/admin/dead-letters): each is an index range read backwards from
-- the previous page's last key, however deep the page. A customer's list
-- costs every placement one more b-tree insert; the merchant's takes the
-- place of the (merchant_id, status, accepted_at) index, whose
-- (merchant_id, status) prefix is all its other readers use.
CREATE INDEX orders_customer_placed_idx ON orders (customer_id, placed_at, id);
DROP INDEX orders_merchant_status_idx;
CREATE INDEX orders_merchant_status_idx ON orders (merchant_id, status, placed_at, id);
CREATE INDEX dead_letters_created_idx ON dead_letters (created_at, id);

-- +goose Down
DROP INDEX dead_letters_created_idx;
DROP INDEX orders_merchant_status_idx;
CREATE INDEX orders_merchant_status_idx ON orders (merchant_id, status, accepted_at);
DROP INDEX orders_customer_placed_idx;
