//go:build citus

package store_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestCitusKeepsALogPerNode: on a cluster every worker keeps a log of its
// own, extended while placements commit on the workers and payments
// through the coordinator, from several goroutines, and by two stores at
// once (two instances: one writer of each log at a time). In the end every
// event of the cluster is in exactly one log, its node's; each log's
// checkpoint verifies; an order's receipt verifies against its node's log;
// the audit is clean, and names a stream whose event was changed on its
// worker with the triggers off. The log used to read the workers' events
// against the coordinator's snapshots, which cannot judge the workers'
// transaction ids: it logged events late, out of order or never.
func TestCitusKeepsALogPerNode(t *testing.T) {
	ctx := context.Background()
	st, pool, url := routedStore(t)
	other := store.New(store.Config{Pool: pool})
	t.Cleanup(other.Close)
	pub := testKey.Public().(ed25519.PublicKey)

	merchants := merchantsOnEveryWorker(t, st, pool, 4)
	products := make([]uuid.UUID, len(merchants))
	for i, m := range merchants {
		products[i] = createProduct(t, st, m.ID, nil).ID
	}
	logs, err := st.Logs(ctx)
	require.NoError(t, err)
	require.Len(t, logs, 2, "one log per worker")
	for _, m := range merchants {
		node, _ := catalogNode(t, pool, m.ID)
		require.Contains(t, logs, node)
	}

	extend := func(s *store.Store) {
		for _, log := range logs {
			_, err := s.ExtendLog(ctx, store.ExtendLogParams{Log: log, Key: testKey})
			require.NoError(t, err)
		}
	}
	var writing atomic.Bool
	writing.Store(true)
	var wg sync.WaitGroup
	for _, s := range []*store.Store{st, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for writing.Load() {
				extend(s)
			}
		}()
	}
	var writers sync.WaitGroup
	var orders sync.Map
	for w := range 8 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 10 {
				m := (w + i) % len(merchants)
				who := fmt.Sprintf("c%d-%d", w, i)
				res, err := place(ctx, st, merchants[m].ID, products[m], placeOpts{Customer: who})
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					if _, err := st.PayOrder(ctx, res.Order.ID, "pay-"+who, customer(who), ""); err != nil {
						t.Error(err)
						return
					}
				}
				orders.Store(res.Order.ID, merchants[m].ID)
			}
		}()
	}
	writers.Wait()
	writing.Store(false)
	wg.Wait()
	extend(st)

	// Every event is in exactly one log, its node's.
	rows, err := pool.Query(ctx, `SELECT e.stream_id, e.version, e.merchant_id, l.log FROM events e
		LEFT JOIN (SELECT log, stream_id, version FROM log_leaves) l ON l.stream_id = e.stream_id AND l.version = e.version`)
	require.NoError(t, err)
	type key struct {
		stream  uuid.UUID
		version int32
	}
	in := map[key][]string{}
	nodeOf := map[uuid.UUID]string{}
	var k key
	var merchant uuid.UUID
	var log *string
	_, err = pgx.ForEachRow(rows, []any{&k.stream, &k.version, &merchant, &log}, func() error {
		if _, ok := nodeOf[merchant]; !ok {
			nodeOf[merchant], _ = catalogNode(t, pool, merchant)
		}
		if log != nil {
			in[k] = append(in[k], *log)
		} else {
			in[k] = append(in[k], "")
		}
		require.True(t, log == nil || *log == nodeOf[merchant], "event %v of merchant %s on %s is in the log of %v", k, merchant, nodeOf[merchant], *log)
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, in)
	for k, ls := range in {
		require.Equal(t, 1, len(ls), "event %v in logs %v", k, ls)
		require.NotEmpty(t, ls[0], "event %v is in no log", k)
	}

	for _, log := range logs {
		c, err := st.LatestCheckpoint(ctx, log)
		require.NoError(t, err)
		require.NoError(t, c.Verify(pub))
		var leaves uint64
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM log_leaves WHERE log = $1`, log).Scan(&leaves))
		require.Equal(t, leaves, c.Size, "the checkpoint covers the whole log of %s", log)
	}
	_, err = st.LatestCheckpoint(ctx, "")
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), "a cluster's request names its log: %v", err)

	proved := map[string]bool{}
	orders.Range(func(id, m any) bool {
		node, _ := catalogNode(t, pool, m.(uuid.UUID))
		if proved[node] {
			return true
		}
		proof, err := st.OrderProof(ctx, id.(uuid.UUID), domain.Party{Actor: domain.ActorAdmin}, "", 0)
		require.NoError(t, err)
		require.Equal(t, node, proof.Checkpoint.Log)
		require.NotEmpty(t, proof.Events)
		require.NoError(t, proof.Verify(pub))
		proved[node] = true
		return true
	})
	require.Len(t, proved, 2)

	report, err := st.AuditHistory(ctx, store.HistoryAuditParams{Key: pub})
	require.NoError(t, err)
	require.True(t, report.OK(), "%+v", report)

	var victim, victimMerchant uuid.UUID
	orders.Range(func(id, m any) bool { victim, victimMerchant = id.(uuid.UUID), m.(uuid.UUID); return false })
	node, _ := catalogNode(t, pool, victimMerchant)
	worker := workerPool(t, url, node)
	conn, err := worker.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET session_replication_role = replica`)
	require.NoError(t, err)
	tag, err := conn.Exec(ctx, `UPDATE events SET data = data || '{"total_cents": 1}' WHERE merchant_id = $2 AND stream_id = $1 AND version = 1`, victim, victimMerchant)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	_, err = conn.Exec(ctx, `RESET session_replication_role`)
	require.NoError(t, err)
	report, err = st.AuditHistory(ctx, store.HistoryAuditParams{Key: pub})
	require.NoError(t, err)
	require.False(t, report.OK())
	require.True(t, slices.ContainsFunc(report.Streams, func(b store.BrokenStream) bool { return b.StreamID == victim }), "%+v", report.Streams)
}
