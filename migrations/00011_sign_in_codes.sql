-- +goose Up
-- Single-use sign-in codes: a page exchanges one for a bearer token, so that
-- no token ever travels in a URL. Like ws_tickets: only a hash is kept, any
-- instance can redeem a code another issued, and the table stays local under
-- Citus. token_ttl_seconds is how long the token the code buys is valid.
CREATE TABLE sign_in_codes (
    hash              bytea       PRIMARY KEY,
    subject           text        NOT NULL,
    role              text        NOT NULL,
    merchant_id       uuid,
    token_ttl_seconds integer     NOT NULL CHECK (token_ttl_seconds > 0),
    expires_at        timestamptz NOT NULL
);
CREATE INDEX sign_in_codes_expires_idx ON sign_in_codes (expires_at);

-- +goose Down
DROP TABLE sign_in_codes;
