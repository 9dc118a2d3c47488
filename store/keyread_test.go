package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store"
)

// TestReadingKeysProbesTheirIndex: a placement batch reads the orders of
// its requests' idempotency keys. A busy merchant has many orders, and a
// regular customer many of them; reading a few keys must look each up in
// orders_idempotency_key_idx, not read every order the merchant or the
// customer has, whichever plan the connection uses, also the plan made
// before the orders were first analyzed.
func TestReadingKeysProbesTheirIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := setup(t)
	m := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, nil)
	placed := mustPlace(t, st, m.ID, p.ID, placeOpts{PaymentRef: "r"})
	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	probes := func(table, index string, customers, keys []string) {
		t.Helper()
		for _, generic := range []bool{false, true} {
			plan, err := store.KeyReadPlan(ctx, conn.Conn(), table, m.ID, customers, keys, generic)
			require.NoError(t, err)
			require.Contains(t, plan, index, "generic plan %v:\n%s", generic, plan)
			require.NotContains(t, plan, "Seq Scan", "generic plan %v:\n%s", generic, plan)
		}
	}
	// A fresh database's orders, never analyzed, as in a burst's first
	// seconds, when the statement's plan is cached.
	_, err = b.pool.Exec(ctx, `CREATE TABLE fresh_orders (LIKE orders INCLUDING INDEXES)`)
	require.NoError(t, err)
	probes("fresh_orders", "fresh_orders_merchant_id_customer_id_idempotency_key_idx", []string{"alice"}, []string{"k"})
	_, err = b.pool.Exec(ctx, `INSERT INTO orders (id, merchant_id, customer_id, items, total_cents, status, version, placed_at,
			payment_deadline, load, lane, idempotency_key, request_hash)
		SELECT gen_random_uuid(), merchant_id, 'customer-' || i % 100, items, total_cents, status, version, placed_at,
			payment_deadline, load, lane, 'key-' || i, '\x00'
		FROM orders, generate_series(1, 20000) AS i WHERE id = $1`, placed.ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `ANALYZE orders`)
	require.NoError(t, err)
	var customers, keys []string
	for i := 1; i <= 60; i++ {
		customers, keys = append(customers, fmt.Sprintf("customer-%d", i*7%100)), append(keys, fmt.Sprintf("key-%d", i*7))
	}
	probes("orders", "orders_idempotency_key_idx", customers, keys)
}
