//go:build citus

package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/citustest"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
)

// TestCitusChangedStreamsSeesEveryEventOnce tails the log on a Citus
// cluster while 16 writers, each appending to merchants spread over both
// workers, commit transactions of different lengths. The rows live on the
// workers, the transaction ids and the reader's snapshots on the
// coordinator: read in one statement, Citus took the rows before the
// snapshot and skipped transactions that committed in between.
func TestCitusChangedStreamsSeesEveryEventOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, citustest.URL(t))
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(pool, nil)

	const writers, perWriter = 16, 40
	merchants := make([]uuid.UUID, 8)
	for i := range merchants {
		merchants[i] = uuid.New()
	}
	_, since, err := st.ChangedStreams(ctx, "")
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				_, err = tx.Exec(ctx, `INSERT INTO events (merchant_id, stream_id, stream_type, version, type, data) VALUES ($1, $2, 'test', 1, 't', '{}')`,
					merchants[(w+i)%len(merchants)], uuid.New())
				if err == nil && (w+i)%3 == 0 {
					time.Sleep(time.Duration((w*7+i)%5) * time.Millisecond)
				}
				if err == nil {
					err = tx.Commit(ctx)
				}
				if err != nil {
					_ = tx.Rollback(ctx)
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	seen := map[uuid.UUID]int{}
	read := func() {
		streams, next, err := st.ChangedStreams(ctx, since)
		require.NoError(t, err)
		for _, s := range streams {
			seen[s.ID]++
		}
		since = next
	}
	for {
		select {
		case <-done:
			read()
			require.Len(t, seen, writers*perWriter, "every committed event is read")
			for id, n := range seen {
				require.Equal(t, 1, n, "stream %s read %d times", id, n)
			}
			return
		default:
			read()
		}
	}
}

// TestCitusBackstopQueriesRun: the timer backstops read every shard, with
// queries Citus must accept (the drops' one correlated a subquery without
// FROM, refused at every round).
func TestCitusBackstopQueriesRun(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, citustest.URL(t))
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(pool, nil)
	_, err = st.DropsToSettle(ctx, time.Now(), 10)
	require.NoError(t, err)
}

// TestCitusPlacesManyMerchantsAtOnce: 16 goroutines place orders for 8
// merchants, spread over both workers, through two stores (two processes'
// lanes), while a second connection holds one merchant's row for a while.
// Batches are split by merchant and their merchants decided concurrently;
// every order is decided, the held merchant's requests wait in its parked
// line, and once the queues are drained by completions every audit view is
// clean (fifo_violations: admission in queue order).
func TestCitusPlacesManyMerchantsAtOnce(t *testing.T) {
	url := citustest.URL(t)
	ctx := context.Background()
	var stores []*store.Store
	var pool *pgxpool.Pool
	for range 2 {
		p, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		ins, err := jobs.NewInserter(p)
		require.NoError(t, err)
		stores = append(stores, store.New(p, ins))
		pool = p
	}
	st := stores[0]
	type shop struct{ merchant, product uuid.UUID }
	shops := make([]shop, 8)
	for i := range shops {
		m := createMerchant(t, st, &merchantOpts{Capacity: 2})
		shops[i] = shop{m.ID, createProduct(t, st, m.ID, nil).ID}
	}
	release := holdLock(t, pool, `SELECT 1 FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, shops[0].merchant)

	const writers, perWriter = 16, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[domain.OrderStatus]int{}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				sh := shops[(w+i)%len(shops)]
				ref := "r"
				if i%5 == 4 {
					ref = ""
				}
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				res, err := place(ctx, stores[w%2], sh.merchant, sh.product, placeOpts{Customer: fmt.Sprintf("c%d-%d", w, i), PaymentRef: ref})
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				statuses[res.Order.Status]++
				mu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	release()
	wg.Wait()
	require.Equal(t, writers*perWriter, countRows(t, pool, "orders"), "every order decided")
	require.Equal(t, writers*perWriter/5, statuses[domain.StatusAwaitingPayment], "%v", statuses)
	require.Positive(t, statuses[domain.StatusQueued], "orders queued: %v", statuses)

	// Completions admit the queued orders, each merchant's in queue order.
	var cg sync.WaitGroup
	for w, sh := range shops {
		cg.Add(1)
		go func() {
			defer cg.Done()
			via := stores[w%2]
			for {
				accepted, err := via.ListMerchantOrders(ctx, sh.merchant, domain.StatusAccepted, 10)
				if err != nil {
					t.Error(err)
					return
				}
				if len(accepted) == 0 {
					return
				}
				for _, o := range accepted {
					if _, err := via.CompleteOrder(ctx, o.ID, admin, ""); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	cg.Wait()
	var queued int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status = 'queued'`).Scan(&queued))
	require.Zero(t, queued, "every queue drained")
	require.Empty(t, violations(t, st))
}
