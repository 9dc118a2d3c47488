-- A shop's menu (issue 36): a product offers option groups (size, sugar,
-- toppings), may be sold out for the day (available) and may be taken off
-- the menu (hidden) while the orders that name it keep their lines.

-- +goose Up
ALTER TABLE products
    ADD COLUMN option_groups jsonb   NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(option_groups) = 'array'),
    ADD COLUMN available     boolean NOT NULL DEFAULT true,
    ADD COLUMN hidden        boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE products DROP COLUMN option_groups, DROP COLUMN available, DROP COLUMN hidden;
