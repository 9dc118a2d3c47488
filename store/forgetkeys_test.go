package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// TestForgettingKeysProbesTheirIndex: a placement batch forgets the keys
// of the requests it refused. A busy merchant has many keys; forgetting a
// few of them must look each up by the primary key, not read every key the
// merchant has, whichever plan the connection uses.
func TestForgettingKeysProbesTheirIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	merchant := uuid.New()
	_, err := pool.Exec(ctx, `INSERT INTO idempotency_keys (merchant_id, customer_id, key, request_hash, order_id)
		SELECT $1, 'customer-' || i, 'key-' || i, '\x00', gen_random_uuid() FROM generate_series(1, 20000) AS i`, merchant)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE idempotency_keys`)
	require.NoError(t, err)
	var customers, keys []string
	for i := 1; i <= 60; i++ {
		customers, keys = append(customers, fmt.Sprintf("customer-%d", i*7)), append(keys, fmt.Sprintf("key-%d", i*7))
	}
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, generic := range []bool{false, true} {
		plan, err := store.ForgetKeysPlan(ctx, conn.Conn(), merchant, customers, keys, generic)
		require.NoError(t, err)
		require.Contains(t, plan, "Index Scan using idempotency_keys_pkey", "generic plan %v:\n%s", generic, plan)
		require.NotContains(t, plan, "Seq Scan", "generic plan %v:\n%s", generic, plan)
	}
}
