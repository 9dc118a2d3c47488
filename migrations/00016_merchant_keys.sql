-- Every per-merchant key carries merchant_id, so that the schema can be
-- distributed by merchant (Citus requires the distribution column in every
-- primary key, unique constraint and foreign key) and a request's statements
-- can name the one merchant they touch.
--
-- Tables keyed by a globally unique id (orders, products, outbox, dead
-- letters, webhook attempts, events) keep the id first and add merchant_id
-- last, so that their indexes grow at the same end as before and a read by id
-- alone still finds its row through the key. Natural keys put merchant_id
-- first, as drops, drop entries and pickup counters already do.
--
-- events and idempotency_keys gain a merchant_id column, filled from the
-- stream's aggregate. Behaviour change: an Idempotency-Key is now scoped by
-- (merchant_id, customer_id, key): the same customer sending the same key to
-- another merchant places a second order, where it was answered 422
-- idempotency_key_reused before. The same key at the same merchant is
-- replayed or refused as before. Going down keeps the oldest order's key of
-- each (customer_id, key) and forgets the others.

-- +goose Up
ALTER TABLE events ADD COLUMN merchant_id uuid;
ALTER TABLE events DISABLE TRIGGER events_no_update_delete;
UPDATE events e SET merchant_id = s.merchant_id
FROM (
    SELECT 'order' AS stream_type, id, merchant_id FROM orders
    UNION ALL SELECT 'product', id, merchant_id FROM products
    UNION ALL SELECT 'merchant', id, id FROM merchants
    UNION ALL SELECT 'drop', id, merchant_id FROM drops
    UNION ALL SELECT 'drop_entry', id, merchant_id FROM drop_entries
) s
WHERE s.stream_type = e.stream_type AND s.id = e.stream_id;
-- A stream whose aggregate has no row (none should) keeps the merchant its
-- events name.
UPDATE events SET merchant_id = (data->>'merchant_id')::uuid
WHERE merchant_id IS NULL AND data ? 'merchant_id';
ALTER TABLE events ENABLE TRIGGER events_no_update_delete;
ALTER TABLE events ALTER COLUMN merchant_id SET NOT NULL;
ALTER TABLE events DROP CONSTRAINT events_stream_version_key;
ALTER TABLE events ADD CONSTRAINT events_stream_version_key UNIQUE (stream_id, version, merchant_id) INCLUDE (type, global_position);
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD PRIMARY KEY (global_position, merchant_id);

ALTER TABLE idempotency_keys ADD COLUMN merchant_id uuid;
UPDATE idempotency_keys k SET merchant_id = o.merchant_id FROM orders o WHERE o.id = k.order_id;
-- A key whose order was never written (none should be) has nothing to replay.
DELETE FROM idempotency_keys WHERE merchant_id IS NULL;
ALTER TABLE idempotency_keys ALTER COLUMN merchant_id SET NOT NULL;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (merchant_id, customer_id, key);

-- Foreign keys first: they hold the keys they reference.
ALTER TABLE drops DROP CONSTRAINT drops_product_id_fkey;
ALTER TABLE stock_buckets DROP CONSTRAINT stock_buckets_product_id_fkey;
ALTER TABLE purchase_claims DROP CONSTRAINT purchase_claims_product_id_fkey;
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_outbox_id_fkey;

ALTER TABLE orders DROP CONSTRAINT orders_pkey, ADD PRIMARY KEY (id, merchant_id);
ALTER TABLE products DROP CONSTRAINT products_pkey, ADD PRIMARY KEY (id, merchant_id);
ALTER TABLE outbox DROP CONSTRAINT outbox_pkey, ADD PRIMARY KEY (id, merchant_id);
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_pkey, ADD PRIMARY KEY (id, merchant_id);
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_pkey, ADD PRIMARY KEY (id, merchant_id);
DROP INDEX dead_letters_open_ref_idx;
CREATE UNIQUE INDEX dead_letters_open_ref_idx ON dead_letters (kind, ref_id, merchant_id) WHERE resolved_at IS NULL;
ALTER TABLE stock_buckets DROP CONSTRAINT stock_buckets_pkey, ADD PRIMARY KEY (merchant_id, product_id, bucket);
ALTER TABLE purchase_claims DROP CONSTRAINT purchase_claims_pkey, ADD PRIMARY KEY (merchant_id, product_id, customer_id);

ALTER TABLE drops ADD CONSTRAINT drops_product_fkey
    FOREIGN KEY (product_id, merchant_id) REFERENCES products (id, merchant_id);
ALTER TABLE stock_buckets ADD CONSTRAINT stock_buckets_product_fkey
    FOREIGN KEY (product_id, merchant_id) REFERENCES products (id, merchant_id);
ALTER TABLE purchase_claims ADD CONSTRAINT purchase_claims_product_fkey
    FOREIGN KEY (product_id, merchant_id) REFERENCES products (id, merchant_id);
ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_outbox_fkey
    FOREIGN KEY (outbox_id, merchant_id) REFERENCES outbox (id, merchant_id);

-- +goose Down
ALTER TABLE drops DROP CONSTRAINT drops_product_fkey;
ALTER TABLE stock_buckets DROP CONSTRAINT stock_buckets_product_fkey;
ALTER TABLE purchase_claims DROP CONSTRAINT purchase_claims_product_fkey;
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_outbox_fkey;

ALTER TABLE purchase_claims DROP CONSTRAINT purchase_claims_pkey, ADD PRIMARY KEY (product_id, customer_id);
ALTER TABLE stock_buckets DROP CONSTRAINT stock_buckets_pkey, ADD PRIMARY KEY (product_id, bucket);
DROP INDEX dead_letters_open_ref_idx;
CREATE UNIQUE INDEX dead_letters_open_ref_idx ON dead_letters (kind, ref_id) WHERE resolved_at IS NULL;
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_pkey, ADD PRIMARY KEY (id);
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_pkey, ADD PRIMARY KEY (id);
ALTER TABLE outbox DROP CONSTRAINT outbox_pkey, ADD PRIMARY KEY (id);
ALTER TABLE products DROP CONSTRAINT products_pkey, ADD PRIMARY KEY (id);
ALTER TABLE orders DROP CONSTRAINT orders_pkey, ADD PRIMARY KEY (id);

ALTER TABLE drops ADD CONSTRAINT drops_product_id_fkey FOREIGN KEY (product_id) REFERENCES products (id);
ALTER TABLE stock_buckets ADD CONSTRAINT stock_buckets_product_id_fkey FOREIGN KEY (product_id) REFERENCES products (id);
ALTER TABLE purchase_claims ADD CONSTRAINT purchase_claims_product_id_fkey FOREIGN KEY (product_id) REFERENCES products (id);
ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_outbox_id_fkey FOREIGN KEY (outbox_id) REFERENCES outbox (id);

DELETE FROM idempotency_keys k USING idempotency_keys first
WHERE first.customer_id = k.customer_id AND first.key = k.key
  AND (first.created_at, first.order_id) < (k.created_at, k.order_id);
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys DROP COLUMN merchant_id;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (customer_id, key);

ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD PRIMARY KEY (global_position);
ALTER TABLE events DROP CONSTRAINT events_stream_version_key;
ALTER TABLE events ADD CONSTRAINT events_stream_version_key UNIQUE (stream_id, version) INCLUDE (type, global_position);
ALTER TABLE events DROP COLUMN merchant_id;
