package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// BenchmarkLedgerMillion measures the tamper-evident history at 1,000,000
// events (250,000 streams of four): building the log over all of them
// once, then per operation a checkpoint of the grown log and an order's
// receipt, and once an audit of every chain and of the log against the
// checkpoints. Run it alone: go test ./store -run '^$' -bench LedgerMillion
// -benchtime 20x.
func BenchmarkLedgerMillion(b *testing.B) {
	ctx := context.Background()
	pool := storetest.Pool(b)
	st := newStore(store.Config{Pool: pool})
	merchant := uuid.New()
	start := time.Now()
	_, err := pool.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data, metadata, recorded_at)
		SELECT gen_random_uuid(), $1, 'order', 1, 'order.placed', jsonb_build_object('customer_id', 'c' || n, 'total_cents', n % 1000), '{"actor": "customer"}', now()
		FROM generate_series(1, 250000) n`, merchant)
	require.NoError(b, err)
	for v := 2; v <= 4; v++ {
		_, err := pool.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data, metadata, recorded_at)
			SELECT stream_id, merchant_id, 'order', version + 1, 'order.accepted', '{}', '{"actor": "system"}', now()
			FROM events WHERE version = $1 ORDER BY stream_id`, v-1)
		require.NoError(b, err)
	}
	b.Logf("1,000,000 events chained by the trigger in %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	res, err := st.ExtendLog(ctx, store.ExtendLogParams{Log: store.LogMain})
	require.NoError(b, err)
	require.EqualValues(b, 1000000, res.Size)
	b.Logf("the log built over them in %s", time.Since(start).Round(time.Millisecond))
	// As autovacuum would have by then: without statistics the planner
	// scans the whole log for a stream's leaves.
	_, err = pool.Exec(ctx, `ANALYZE events, log_leaves, log_hash_tiles`)
	require.NoError(b, err)
	var order uuid.UUID
	require.NoError(b, pool.QueryRow(ctx, `SELECT stream_id FROM events WHERE version = 4 LIMIT 1`).Scan(&order))

	b.Run("checkpoint", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			_, err := pool.Exec(ctx, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data) VALUES ($1, $2, 'order', 1, 'order.placed', '{}')`, uuid.New(), merchant)
			require.NoError(b, err)
			b.StartTimer()
			res, err := st.ExtendLog(ctx, store.ExtendLogParams{Log: store.LogMain, Key: testKey})
			require.NoError(b, err)
			require.NotNil(b, res.Checkpoint)
		}
	})
	b.Run("proof", func(b *testing.B) {
		for b.Loop() {
			p, err := st.OrderProofOf(ctx, merchant, order, store.LogMain, 0)
			require.NoError(b, err)
			require.Len(b, p.Events, 4)
		}
	})
	start = time.Now()
	r, err := st.AuditHistory(ctx, store.HistoryAuditParams{})
	require.NoError(b, err)
	require.True(b, r.OK())
	b.Logf("the audit of every chain and of the log against %d checkpoints in %s", r.Checkpoints, time.Since(start).Round(time.Millisecond))
}
