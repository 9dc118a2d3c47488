//go:build citus

package store_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/citustest"
	"github.com/orderd/orderd/store"
)

// TestCitusGrowsWhilePlacing adds a worker to the cluster and gives it
// merchants: the database is laid out with migrations.ShardsPerWorker
// shards a worker, so a shard is split in two onto the new worker
// (citus_split_shard_by_split_points, by logical replication), while 4
// goroutines place orders of 16 merchants through two stores, as two
// orderd processes would. A placement either
// returns its order or fails with CodeUnavailable, which the API answers
// 503 with Retry-After; the client then sends it again with the same key
// until it is placed, and sends some placed ones again, which must answer
// the same order. After: every key has its one order and there is no
// other; both stores send every merchant's placements to the worker Citus's
// catalog now places it on; the audit is clean.
func TestCitusGrowsWhilePlacing(t *testing.T) {
	ctx := context.Background()
	url, spare := citustest.Growing(t)
	stores, pool := processStores(t, url, 2)
	type shop struct{ merchant, product uuid.UUID }
	shops := make([]shop, 16)
	for i := range shops {
		m := createMerchant(t, stores[0], &merchantOpts{Capacity: 100000})
		shops[i] = shop{m.ID, createProduct(t, stores[0], m.ID, nil).ID}
	}

	var (
		mu          sync.Mutex
		placed      = map[string]uuid.UUID{} // idempotency key → order
		unavailable atomic.Int64
		replays     atomic.Int64
		stop        atomic.Bool
	)
	// decide sends one placement until it is placed: an unavailable answer is
	// retried with the same key, anything else fails the test.
	decide := func(st *store.Store, sh shop, o placeOpts) (uuid.UUID, bool) {
		for range 600 {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			res, err := place(ctx, st, sh.merchant, sh.product, o)
			cancel()
			if err == nil {
				return res.Order.ID, true
			}
			if domain.ErrorCode(err) != domain.CodeUnavailable {
				t.Errorf("placement %s answered %v (code %q), not unavailable", o.Key, err, domain.ErrorCode(err))
				return uuid.Nil, false
			}
			unavailable.Add(1)
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("placement %s still unavailable after a minute", o.Key)
		return uuid.Nil, false
	}
	const writers = 4
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				sh := shops[(w*5+i)%len(shops)]
				o := placeOpts{Customer: fmt.Sprintf("c%d", w), PaymentRef: "r", Key: fmt.Sprintf("w%d-%d", w, i)}
				if i%5 == 4 {
					o.PaymentRef = ""
				}
				id, ok := decide(stores[(w+i)%2], sh, o)
				if !ok {
					return
				}
				mu.Lock()
				placed[o.Key] = id
				mu.Unlock()
				if i%10 == 9 {
					again, ok := decide(stores[(w+i+1)%2], sh, o)
					if !ok {
						return
					}
					replays.Add(1)
					if again != id {
						t.Errorf("key %s placed %s and, sent again, %s", o.Key, id, again)
						return
					}
				}
			}
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()

	time.Sleep(2 * time.Second)
	host, port, err := net.SplitHostPort(spare)
	require.NoError(t, err)
	var added int32
	require.NoError(t, pool.QueryRow(ctx, `SELECT citus_add_node($1, $2::int)`, host, port).Scan(&added))
	// The database has ShardsPerWorker shards on each old worker: the first
	// old worker's first shard is split in two onto the new worker. Both
	// halves go there: a split that leaves a half on the worker it splits
	// stalls under writes in Citus 13.2.2, and a merchant moved to a worker
	// registered before its own takes log positions below its old ones
	// (docs/scaling-out.md, "Growing the cluster").
	var first struct {
		id     int64
		middle string
	}
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT s.shardid, ((s.shardminvalue::bigint + s.shardmaxvalue::bigint) / 2)::text
		FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)
		WHERE s.logicalrelid = 'merchants'::regclass ORDER BY n.nodeid, s.shardminvalue::int LIMIT 1`).Scan(&first.id, &first.middle))
	var before int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'merchants'::regclass`).Scan(&before))
	grow := func(what string, sql string, args ...any) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, what)
	}
	grow("copy the reference tables to the new worker", `SELECT replicate_reference_tables('force_logical')`)
	grow("split a shard onto the new worker", `SELECT citus_split_shard_by_split_points($1, ARRAY[$2], ARRAY[$3::int, $3::int], 'force_logical')`,
		first.id, first.middle, added)
	var shards int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'merchants'::regclass`).Scan(&shards))
	require.Equal(t, before+1, shards, "shards of merchants after the split")
	var moved int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM citus_shards WHERE table_name = 'merchants'::regclass AND nodename || ':' || nodeport = $1`, spare).Scan(&moved))
	require.Equal(t, 2, moved, "shards of merchants on the new worker")

	// Both stores find the moved merchants where they are now, while the
	// placements go on.
	for _, st := range stores {
		for _, sh := range shops {
			want, _ := catalogNode(t, pool, sh.merchant)
			eventually(t, 30*time.Second, func() bool {
				got, err := st.MerchantNode(ctx, sh.merchant)
				return err == nil && got == want
			}, "the store routes a merchant where its shard is")
		}
	}
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}

	rows, err := pool.Query(ctx, `SELECT id FROM orders`)
	require.NoError(t, err)
	orders := map[uuid.UUID]int{}
	for rows.Next() {
		var id uuid.UUID
		require.NoError(t, rows.Scan(&id))
		orders[id]++
	}
	require.NoError(t, rows.Err())
	acknowledged := map[uuid.UUID]bool{}
	for key, id := range placed {
		require.Equal(t, 1, orders[id], "the order of key %s", key)
		acknowledged[id] = true
	}
	require.Len(t, orders, len(acknowledged), "no order beyond the acknowledged ones")
	t.Logf("%d placements, %d answered unavailable and sent again, %d sent again once placed; %d shards of merchants, %d of them on %s",
		len(placed), unavailable.Load(), replays.Load(), shards, moved, spare)
	require.Empty(t, violations(t, stores[0]))
}
