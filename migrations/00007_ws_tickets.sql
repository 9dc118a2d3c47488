-- +goose Up
-- Single-use websocket tickets. They live in the database, not in one
-- process's memory, so a ticket issued by one orderd instance opens a
-- websocket on any other behind the same load balancer. Only a hash is kept:
-- reading the table gives nobody a ticket. Not per merchant: like River's
-- tables, it stays a local table under Citus.
CREATE TABLE ws_tickets (
    hash        bytea       PRIMARY KEY,
    subject     text        NOT NULL,
    role        text        NOT NULL,
    merchant_id uuid,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX ws_tickets_expires_idx ON ws_tickets (expires_at);

-- +goose Down
DROP TABLE ws_tickets;
