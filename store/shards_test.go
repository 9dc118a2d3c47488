package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// TestMerchantHashIsPostgreSQLs: a merchant is routed to the worker whose
// shard range holds its hash, which Citus computes with the uuid type's
// hash function; orderd hashes in Go, and any difference sends a merchant's
// work to a worker that does not hold it. PostgreSQL's own uuid_hash is the
// reference, over random ids and ones made to hit every byte's extremes.
func TestMerchantHashIsPostgreSQLs(t *testing.T) {
	pool := storetest.Pool(t)
	ids := []uuid.UUID{uuid.Nil, uuid.Max}
	for range 2000 {
		ids = append(ids, uuid.New(), uuid.Must(uuid.NewV7()))
	}
	rows, err := pool.Query(context.Background(), `SELECT uuid_hash(id) FROM unnest($1::uuid[]) WITH ORDINALITY AS t(id, n) ORDER BY n`, ids)
	require.NoError(t, err)
	i := 0
	for rows.Next() {
		var want int32
		require.NoError(t, rows.Scan(&want))
		require.Equal(t, want, store.MerchantHash(ids[i]), "merchant %s", ids[i])
		i++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(ids), i)
}
