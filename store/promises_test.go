package store_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// holdLock runs query in a transaction of its own, which keeps the row locks
// it takes until release is called (or the test ends).
func holdLock(t *testing.T, pool *pgxpool.Pool, query string, args ...any) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	rows, err := tx.Query(ctx, query, args...)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		n++
	}
	require.NoError(t, rows.Err())
	require.Positive(t, n, "the lock's query found no row")
	var once sync.Once
	release = func() { once.Do(func() { require.NoError(t, tx.Rollback(ctx)) }) }
	t.Cleanup(release)
	return release
}

type placed struct {
	res *store.PlaceResult
	err error
}

func placeAsync(st *store.Store, merchantID, productID uuid.UUID, o placeOpts) chan placed {
	return placeAsyncWithin(st, merchantID, productID, o, 10*time.Second)
}

// placeAsyncWithin is placeAsync for a caller that waits up to timeout.
func placeAsyncWithin(st *store.Store, merchantID, productID uuid.UUID, o placeOpts, timeout time.Duration) chan placed {
	ch := make(chan placed, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		res, err := place(ctx, st, merchantID, productID, o)
		ch <- placed{res, err}
	}()
	return ch
}

// TestPaidOrdersDecidedInArrivalOrder: while the merchant's row is locked, a
// filler order, then A, then 150 ms later B (naming a product with a lower
// id) arrive; with one unit left after the filler, A takes it and B queues.
func TestPaidOrdersDecidedInArrivalOrder(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	m := createMerchant(t, st, &merchantOpts{Capacity: 2})
	p1, p2 := createProduct(t, st, m.ID, nil), createProduct(t, st, m.ID, nil)
	low, high := p1, p2
	if bytes.Compare(high.ID[:], low.ID[:]) < 0 {
		low, high = high, low
	}
	release := holdLock(t, b.pool, `SELECT 1 FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, m.ID)
	filler := placeAsync(st, m.ID, high.ID, placeOpts{Customer: "filler", PaymentRef: "r"})
	time.Sleep(50 * time.Millisecond)
	a := placeAsync(st, m.ID, high.ID, placeOpts{Customer: "a", PaymentRef: "r"})
	time.Sleep(150 * time.Millisecond)
	bb := placeAsync(st, m.ID, low.ID, placeOpts{Customer: "b", PaymentRef: "r"})
	time.Sleep(100 * time.Millisecond)
	release()
	for _, ch := range []chan placed{filler, a, bb} {
		r := <-ch
		require.NoError(t, r.err)
	}
	got := map[string]domain.OrderStatus{}
	orders, err := st.ListMerchantOrders(context.Background(), m.ID, domain.StatusAccepted, 10)
	require.NoError(t, err)
	for _, o := range orders {
		got[o.CustomerID] = o.Status
	}
	require.Equal(t, map[string]domain.OrderStatus{"filler": domain.StatusAccepted, "a": domain.StatusAccepted}, got,
		"A arrived 150 ms before B and takes the last unit")
	require.Empty(t, violations(t, st))
}

// warmPool opens n of the pool's connections at once and returns them
// idle, so that a test timing requests does not time the dial of a new
// connection (a backend's start, which a loaded machine makes slow).
func warmPool(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	conns := make([]*pgxpool.Conn, 0, n)
	for range n {
		c, err := pool.Acquire(context.Background())
		require.NoError(t, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
}

// TestLockedMerchantDelaysOnlyItself holds one merchant's row (as an
// operator's transaction would, FOR UPDATE) while its own paid and unpaid
// orders wait, until the placements and payments of twelve other merchants,
// some in its placement lane, are done, and for at least 3 s. Each of those
// must be decided while the lock is held, within a deadline: one that waited
// for the locked merchant would never be decided before it, since the lock
// goes only once they all are. So the deadline only bounds how long the
// test takes to see that, and is a generous one, since a loaded machine
// slows every request alike and a tight one fails requests that waited for
// nothing; the locked merchant's own requests wait for longer than all of
// the others may take, so that they are still waiting when the lock goes.
// The pool is warm, so no request waits for a dial.
func TestLockedMerchantDelaysOnlyItself(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	locked := createMerchant(t, st, &merchantOpts{Capacity: 100})
	lockedProduct := createProduct(t, st, locked.ID, nil)
	type other struct {
		merchant, product uuid.UUID
		unpaid            *store.OrderView
	}
	var others []other
	sameLane := 0
	for len(others) < 12 || sameLane < 3 {
		m := createMerchant(t, st, &merchantOpts{Capacity: 100})
		p := createProduct(t, st, m.ID, nil)
		if store.SamePlacementLane(locked.ID, m.ID) {
			sameLane++
		} else if len(others) >= 12 {
			continue
		}
		// Placed before the lock, to be paid while it is held.
		unpaid := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "early"})
		others = append(others, other{m.ID, p.ID, unpaid})
	}
	// The lock's holder and the locked merchant's two waiting requests
	// each keep a connection; the others' requests and their batches need
	// a few more beside them.
	warmPool(t, b.pool, 8)
	const deadline = 5 * time.Second
	patience := time.Duration(3*len(others)+1) * deadline
	start := time.Now()
	release := holdLock(t, b.pool, `SELECT 1 FROM merchants WHERE id = $1 FOR UPDATE`, locked.ID)
	waitingPaid := placeAsyncWithin(st, locked.ID, lockedProduct.ID, placeOpts{Customer: "patient", PaymentRef: "r"}, patience)
	waitingUnpaid := placeAsyncWithin(st, locked.ID, lockedProduct.ID, placeOpts{Customer: "patient-too"}, patience)
	time.Sleep(100 * time.Millisecond)

	// One request at a time, so that none waits behind another. One that
	// is past its deadline fails the test at once (which releases the lock)
	// even when it is stuck where its context does not reach.
	timed := func(what string, i int, do func(ctx context.Context) error) {
		t.Helper()
		reqCtx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		began := time.Now()
		done := make(chan error, 1)
		go func() { done <- do(reqCtx) }()
		select {
		case err := <-done:
			require.NoError(t, err, "%s %d waited for the locked merchant", what, i)
		case <-time.After(deadline + 100*time.Millisecond):
			t.Fatalf("%s %d waited for the locked merchant", what, i)
		}
		t.Logf("%s %d: %s", what, i, time.Since(began))
	}
	for i, o := range others {
		timed("paid placement", i, func(ctx context.Context) error {
			_, err := place(ctx, st, o.merchant, o.product, placeOpts{Customer: "paid", PaymentRef: "r"})
			return err
		})
		timed("unpaid placement", i, func(ctx context.Context) error {
			_, err := place(ctx, st, o.merchant, o.product, placeOpts{Customer: "unpaid"})
			return err
		})
		timed("payment", i, func(ctx context.Context) error {
			_, err := st.PayOrder(ctx, o.unpaid.ID, "r", customer("early"), "")
			return err
		})
	}
	for _, ch := range []chan placed{waitingPaid, waitingUnpaid} {
		select {
		case r := <-ch:
			t.Fatalf("the locked merchant's order was decided under the lock: %+v", r)
		default:
		}
	}
	time.Sleep(time.Until(start.Add(3 * time.Second)))
	release()
	for _, ch := range []chan placed{waitingPaid, waitingUnpaid} {
		r := <-ch
		require.NoError(t, r.err, "the locked merchant's own orders are decided once the lock goes")
	}
	require.Empty(t, violations(t, st))
}

// TestSoldOutWaitsForStockHeldElsewhere: 16 units in two buckets, one held
// by another transaction for about 300 ms; orders for 1 and then 9 units,
// decided together, are both sold.
func TestSoldOutWaitsForStockHeldElsewhere(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 100})
	plain := createProduct(t, st, m.ID, nil)
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(16)})
	// The merchant's lock makes the two orders arrive in one batch.
	releaseMerchant := holdLock(t, b.pool, `SELECT 1 FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, m.ID)
	releaseBucket := holdLock(t, b.pool, `SELECT 1 FROM stock_buckets WHERE product_id = $1 AND bucket = 1 FOR UPDATE`, limited.ID)
	filler := placeAsync(st, m.ID, plain.ID, placeOpts{Customer: "filler", PaymentRef: "r"})
	time.Sleep(50 * time.Millisecond)
	one := placeAsync(st, m.ID, limited.ID, placeOpts{Customer: "one", PaymentRef: "r", Quantity: 1})
	time.Sleep(20 * time.Millisecond)
	nine := placeAsync(st, m.ID, limited.ID, placeOpts{Customer: "nine", PaymentRef: "r", Quantity: 9})
	time.Sleep(50 * time.Millisecond)
	releaseMerchant()
	time.Sleep(200 * time.Millisecond)
	releaseBucket()
	for _, ch := range []chan placed{filler, one, nine} {
		r := <-ch
		require.NoError(t, r.err)
	}
	got, err := st.GetProduct(ctx, limited.ID)
	require.NoError(t, err)
	require.Equal(t, 6, *got.StockRemaining)
	require.Empty(t, violations(t, st))
}

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// TestDecisionTimeIsReadUnderTheLock: a payment and a paid placement arrive
// while the merchant's row is locked and the clock reads a second before the
// payment deadline; the lock goes when the clock reads a second after it.
// The payment is late (decided after the deadline) and the placement is
// placed and accepted at the time of its decision.
func TestDecisionTimeIsReadUnderTheLock(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	clock := &manualClock{now: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)}
	setClock(st, clock.Now)
	m := createMerchant(t, st, &merchantOpts{Capacity: 5, PaymentTimeout: 60})
	p := createProduct(t, st, m.ID, nil)
	unpaid := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "slow"})
	deadline := unpaid.PaymentDeadline

	release := holdLock(t, b.pool, `SELECT 1 FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, m.ID)
	clock.Set(deadline.Add(-time.Second))
	paid := make(chan error, 1)
	go func() {
		_, err := st.PayOrder(ctx, unpaid.ID, "r", customer("slow"), "")
		paid <- err
	}()
	fresh := placeAsync(st, m.ID, p.ID, placeOpts{Customer: "fresh", PaymentRef: "r"})
	time.Sleep(150 * time.Millisecond)
	decided := deadline.Add(time.Second)
	clock.Set(decided)
	release()

	require.ErrorIs(t, <-paid, domain.ErrInvalidTransition, "paid after the deadline by the clock under the lock")
	r := <-fresh
	require.NoError(t, r.err)
	require.Equal(t, decided, r.res.Order.PlacedAt.UTC())
	require.Equal(t, decided, r.res.Order.AcceptedAt.UTC())
	var recorded time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT max(recorded_at) FROM events WHERE stream_id = $1`, r.res.Order.ID).Scan(&recorded))
	require.Equal(t, decided, recorded.UTC(), "events carry the decision's time")
}

// TestCommandsOnFinishedOrdersTakeNoMerchantLock: a second tap on Complete,
// a repeated payment or a late cancel of an order that has finished is
// answered while the merchant's row is locked elsewhere (a long drain, a
// placement batch), and never holds that lock itself.
func TestCommandsOnFinishedOrdersTakeNoMerchantLock(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 2})
	p := createProduct(t, st, m.ID, nil)
	merchant := domain.Party{Actor: domain.ActorMerchant, MerchantID: m.ID}
	done := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "a", PaymentRef: "r"})
	_, err := st.CompleteOrder(ctx, done.ID, merchant, "")
	require.NoError(t, err)
	release := holdLock(t, b.pool, `SELECT 1 FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, m.ID)
	defer release()
	answered, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = st.CompleteOrder(answered, done.ID, merchant, "")
	require.Equal(t, domain.CodeInvalidTransition, domain.ErrorCode(err), "completed again: %v", err)
	_, err = st.CancelOrder(answered, done.ID, "late", merchant, "")
	require.Equal(t, domain.CodeInvalidTransition, domain.ErrorCode(err), "cancelled after completion: %v", err)
	again, err := st.PayOrder(answered, done.ID, "r", domain.Party{Actor: domain.ActorCustomer, Subject: "a"}, "")
	require.NoError(t, err, "the same payment again is answered with the order")
	require.Equal(t, domain.StatusCompleted, again.Status)
}
