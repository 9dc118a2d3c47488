package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// clock is a settable time source for the store.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// queuedAt is when the order last joined its merchant's line.
func queuedAt(t *testing.T, st *store.Store, o *store.OrderView) time.Time {
	t.Helper()
	events, err := st.ReadStream(context.Background(), o.MerchantID, o.ID)
	require.NoError(t, err)
	for i := len(events) - 1; i >= 0; i-- {
		e, err := domain.DecodeEvent(events[i].Type, events[i].Data)
		require.NoError(t, err)
		switch d := e.Data.(type) {
		case domain.OrderQueued:
			return d.QueuedAt
		case domain.OrderRequeued:
			return d.QueuedAt
		}
	}
	t.Fatal("order was never queued")
	return time.Time{}
}

// expiringLine is a store on a clock the test moves, with a merchant of
// capacity 1 whose queued orders expire after 60 s.
func expiringLine(t *testing.T) (*store.Store, *testBundle, *clock, *store.MerchantView) {
	t.Helper()
	st, b := setup(t)
	clk := &clock{now: time.Now().UTC()}
	setClock(st, clk.Now)
	return st, b, clk, createMerchant(t, st, &merchantOpts{Capacity: 1, MaxQueueWait: 60})
}

func TestQueueExpiryAndRetry(t *testing.T) {
	t.Parallel()
	st, _, clk, m := expiringLine(t)
	ctx := context.Background()
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(10)})

	first := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c0", PaymentRef: "r"})
	require.Equal(t, domain.StatusAccepted, first.Status)
	early := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c1", PaymentRef: "r"})
	clk.Advance(30 * time.Second)
	later := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c2", PaymentRef: "r"})

	expired, err := st.ExpireQueued(ctx, early.ID, queuedAt(t, st, early))
	require.NoError(t, err)
	require.False(t, expired, "not yet due")

	clk.Advance(31 * time.Second)
	expired, err = st.ExpireQueued(ctx, early.ID, queuedAt(t, st, early))
	require.NoError(t, err)
	require.True(t, expired)
	again, err := st.ExpireQueued(ctx, early.ID, queuedAt(t, st, early))
	require.NoError(t, err)
	require.False(t, again, "idempotent")

	got, err := st.GetOrder(ctx, early.ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusExpired, got.Status)
	prod, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 8, *prod.StockRemaining, "expired orders release their stock")
	l, err := st.GetOrder(ctx, later.ID, admin)
	require.NoError(t, err)
	require.Equal(t, 1, *l.QueuePosition)

	dls, _, err := st.ListDeadLetters(ctx, store.ListDeadLettersParams{Kind: store.DeadLetterOrder})
	require.NoError(t, err)
	require.Len(t, dls, 1)
	require.Equal(t, early.ID, dls[0].RefID)

	// Retry puts it back ahead of the order queued after it.
	_, err = st.RetryDeadLetter(ctx, dls[0].ID, admin, "")
	require.NoError(t, err)
	e, err := st.GetOrder(ctx, early.ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, e.Status)
	require.Equal(t, 1, *e.QueuePosition)
	l, err = st.GetOrder(ctx, later.ID, admin)
	require.NoError(t, err)
	require.Equal(t, 2, *l.QueuePosition)
	_, err = st.RetryDeadLetter(ctx, dls[0].ID, admin, "")
	require.ErrorIs(t, err, domain.ErrInvalidTransition, "a dead letter is retried once")

	// The old expiry job of the first stay finds nothing to do.
	stale, err := st.ExpireQueued(ctx, early.ID, queuedAt(t, st, early).Add(-time.Minute))
	require.NoError(t, err)
	require.False(t, stale)

	_, err = st.CompleteOrder(ctx, first.ID, admin, "")
	require.NoError(t, err)
	e, err = st.GetOrder(ctx, early.ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, e.Status)

	// Resolve by hand.
	clk.Advance(2 * time.Minute)
	expired, err = st.ExpireQueued(ctx, later.ID, queuedAt(t, st, later))
	require.NoError(t, err)
	require.True(t, expired)
	dls, _, err = st.ListDeadLetters(ctx, store.ListDeadLettersParams{Kind: store.DeadLetterOrder, Unresolved: true})
	require.NoError(t, err)
	require.Len(t, dls, 1)
	resolved, err := st.ResolveDeadLetter(ctx, dls[0].ID, "refunded by phone")
	require.NoError(t, err)
	require.NotNil(t, resolved.ResolvedAt)
	require.Equal(t, "refunded by phone", *resolved.Note)
}

// TestETAFollowsCompletionRate drives a merchant that completes one order
// every 2 s (on the store's clock) and checks the estimate for queued orders
// against the wait they then really have.
func TestETAFollowsCompletionRate(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	clk := &clock{now: time.Now().UTC()}
	setClock(st, clk.Now)
	m := createMerchant(t, st, &merchantOpts{Capacity: 2})
	p := createProduct(t, st, m.ID, nil)
	const interval = 2 * time.Second

	for i := range 30 {
		mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i), PaymentRef: "r"})
	}
	completeOldest := func() {
		accepted, err := st.ListMerchantOrders(ctx, m.ID, domain.StatusAccepted, 1)
		require.NoError(t, err)
		require.NotEmpty(t, accepted)
		clk.Advance(interval)
		_, err = st.CompleteOrder(ctx, accepted[0].ID, admin, "")
		require.NoError(t, err)
	}
	for range 8 {
		completeOldest()
	}
	// Estimate now, then measure the real wait of the order at position 10.
	queued, err := st.ListMerchantOrders(ctx, m.ID, domain.StatusQueued, 100)
	require.NoError(t, err)
	target := queued[9]
	require.Equal(t, 10, *target.QueuePosition)
	estimate := time.Duration(*target.EtaSeconds) * time.Second
	start := clk.Now()
	for {
		o, err := st.GetOrder(ctx, target.ID, admin)
		require.NoError(t, err)
		if o.Status == domain.StatusAccepted {
			break
		}
		completeOldest()
	}
	real := clk.Now().Sub(start)
	require.InDelta(t, real.Seconds(), estimate.Seconds(), 0.25*real.Seconds(), "estimate %s, real %s", estimate, real)
}

// TestRetryWaitsForStockHeldElsewhere: the last unit of an expired order's
// product went to another customer, and a restock waits for the product's
// bucket, which a second connection holds. The retry, sent meanwhile, waits
// for the bucket rather than answering sold out, and takes the restocked
// unit once the restock commits.
func TestRetryWaitsForStockHeldElsewhere(t *testing.T) {
	t.Parallel()
	st, b, clk, m := expiringLine(t)
	ctx := context.Background()
	plain := createProduct(t, st, m.ID, nil)
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(1)})
	mustPlace(t, st, m.ID, plain.ID, placeOpts{Customer: "first", PaymentRef: "r"})
	early := mustPlace(t, st, m.ID, limited.ID, placeOpts{Customer: "early", PaymentRef: "r"})
	require.Equal(t, domain.StatusQueued, early.Status)
	clk.Advance(61 * time.Second)
	expired, err := st.ExpireQueued(ctx, early.ID, queuedAt(t, st, early))
	require.NoError(t, err)
	require.True(t, expired)
	mustPlace(t, st, m.ID, limited.ID, placeOpts{Customer: "taker"})
	dls, _, err := st.ListDeadLetters(ctx, store.ListDeadLettersParams{Kind: store.DeadLetterOrder})
	require.NoError(t, err)
	require.Len(t, dls, 1)

	release := holdLock(t, b.pool, `SELECT 1 FROM stock_buckets WHERE product_id = $1 FOR UPDATE`, limited.ID)
	restocked := make(chan error, 1)
	go func() {
		_, err := st.Restock(ctx, limited.ID, 1, storeMeta())
		restocked <- err
	}()
	lockWaiters := func() int {
		var waiting int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%stock_buckets%'`).Scan(&waiting))
		return waiting
	}
	eventually(t, 30*time.Second, func() bool { return lockWaiters() >= 1 }, "the restock waits for the held bucket")
	retried := make(chan error, 1)
	go func() {
		_, err := st.RetryDeadLetter(ctx, dls[0].ID, admin, "")
		retried <- err
	}()
	eventually(t, 30*time.Second, func() bool {
		select {
		case err := <-retried:
			t.Fatalf("the retry answered while the product's bucket was held: %v", err)
		default:
		}
		return lockWaiters() >= 2
	}, "the retry waits for the held bucket")
	release()
	require.NoError(t, <-restocked)
	require.NoError(t, <-retried, "the restocked unit is the retry's")

	got, err := st.GetOrder(ctx, early.ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, got.Status)
	prod, err := st.GetProduct(ctx, limited.ID)
	require.NoError(t, err)
	require.Equal(t, 0, *prod.StockRemaining)
	require.Empty(t, violations(t, st))
}
