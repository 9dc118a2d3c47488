-- +goose Up
-- A sign-in code carries the lane of the customer it signs in, so a
-- platform can sign its staff or members in to the priority lane without
-- handing them a token.
ALTER TABLE sign_in_codes ADD COLUMN lane text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sign_in_codes DROP COLUMN lane;
