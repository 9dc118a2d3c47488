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

// TestCitusPaymentTimersFireOnTheirWorker: on Citus an unpaid order's row
// is its payment timer, as on one PostgreSQL: placement sets no River job
// for it, and the process holding a worker's timer lock closes that
// worker's orders past their deadline in one transaction there, in one
// phase (two merchants of one worker in different shards close in one
// transaction). A second process closes nothing while the first holds the
// locks, and takes them over once the first is gone (its sessions closed,
// as a killed process's are). Then both processes' look and the backstop of
// a third, four goroutines each, fire the same overdue orders at once:
// every order is closed exactly once.
func TestCitusPaymentTimersFireOnTheirWorker(t *testing.T) {
	ctx := context.Background()
	url := citustest.URL(t)
	first, pool := sameDatabaseStore(t, url)
	second, _ := sameDatabaseStore(t, url)
	third, _ := sameDatabaseStore(t, url)
	clock := newFakeClock(first, second, third)

	type shop struct {
		merchant, product uuid.UUID
		node              string
		shard             int64
	}
	var shops []shop
	var pair []uuid.UUID
	for len(shops) < 8 || pair == nil {
		require.Less(t, len(shops), 64, "no two merchants on one worker in different shards")
		m := createMerchant(t, first, &merchantOpts{Capacity: 1000, PaymentTimeout: 600})
		node, shard := catalogNode(t, pool, m.ID)
		for _, other := range shops {
			if pair == nil && other.node == node && other.shard != shard {
				pair = []uuid.UUID{other.merchant, m.ID}
			}
		}
		shops = append(shops, shop{m.ID, createProduct(t, first, m.ID, nil).ID, node, shard})
	}
	placeUnpaid := func(round string) []uuid.UUID {
		var ids []uuid.UUID
		for i, sh := range shops {
			for j := range 3 {
				o := mustPlace(t, first, sh.merchant, sh.product, placeOpts{Customer: fmt.Sprintf("%s-%d-%d", round, i, j)})
				ids = append(ids, o.ID)
			}
		}
		return ids
	}
	status := func(ids []uuid.UUID) map[domain.OrderStatus]int {
		rows, err := pool.Query(ctx, `SELECT status FROM orders WHERE id = ANY($1)`, ids)
		require.NoError(t, err)
		n := map[domain.OrderStatus]int{}
		for rows.Next() {
			var s domain.OrderStatus
			require.NoError(t, rows.Scan(&s))
			n[s]++
		}
		require.NoError(t, rows.Err())
		return n
	}
	before := twoPhaseCommits(t, pool, url)

	a := placeUnpaid("a")
	var timerJobs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, store.CloseUnpaidArgs{}.Kind()).Scan(&timerJobs))
	require.Zero(t, timerJobs, "no River job for a payment deadline")
	fired, err := first.CloseDueUnpaid(ctx, 500)
	require.NoError(t, err)
	require.Empty(t, fired, "not due yet")
	clock.Advance(11 * time.Minute)
	fired, err = first.CloseDueUnpaid(ctx, 500)
	require.NoError(t, err)
	require.Len(t, fired, len(a))
	require.Equal(t, map[domain.OrderStatus]int{domain.StatusClosed: len(a)}, status(a))

	var txs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT tx_id FROM events WHERE merchant_id = ANY($1) AND type = 'order.closed'
		GROUP BY tx_id HAVING count(DISTINCT merchant_id) = 2) pairs`, pair).Scan(&txs))
	require.Positive(t, txs, "a worker's merchants of two shards closed in one transaction")

	b := placeUnpaid("b")
	clock.Advance(11 * time.Minute)
	fired, err = second.CloseDueUnpaid(ctx, 500)
	require.NoError(t, err)
	require.Empty(t, fired, "the first process holds every worker's timers")
	require.Equal(t, map[domain.OrderStatus]int{domain.StatusAwaitingPayment: len(b)}, status(b))
	first.Close()
	closed := 0
	require.Eventually(t, func() bool {
		fired, err := second.CloseDueUnpaid(ctx, 500)
		require.NoError(t, err)
		closed += len(fired)
		return closed == len(b)
	}, 10*time.Second, 50*time.Millisecond, "the second process takes the workers' timers over")
	require.Equal(t, map[domain.OrderStatus]int{domain.StatusClosed: len(b)}, status(b))

	c := placeUnpaid("c")
	clock.Advance(11 * time.Minute)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				var err error
				if g%2 == 0 {
					_, err = second.CloseDueUnpaid(ctx, 7)
				} else {
					_, err = third.CloseUnpaidOverdue(ctx, clock.Now(), 7)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool {
		_, err := second.CloseDueUnpaid(ctx, 500)
		require.NoError(t, err)
		return status(c)[domain.StatusClosed] == len(c)
	}, 10*time.Second, 50*time.Millisecond)
	var events int
	all := append(append(a, b...), c...)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE stream_id = ANY($1) AND type = 'order.closed'`, all).Scan(&events))
	require.Equal(t, len(all), events, "every order closed exactly once")
	require.Equal(t, before, twoPhaseCommits(t, pool, url), "every close commits in one phase")
}

// sameDatabaseStore is a process's store on the database url names, with
// its pool; its clock can be set (newStore).
func sameDatabaseStore(t *testing.T, url string) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	st := newStore(store.Config{Pool: pool, Jobs: ins})
	t.Cleanup(st.Close)
	return st, pool
}
