package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestPaidPlacementNumbersWithItsFirstRead: a paid placement of a product
// that takes no stock reserves its pickup number in the round trip that
// locks its merchant, so it costs two round trips in all; one of a limited
// product numbers after its stock, as before.
func TestPaidPlacementNumbersWithItsFirstRead(t *testing.T) {
	t.Parallel()
	st, rt := tracedStore(t)
	m := createMerchant(t, st, &merchantOpts{Capacity: 100})
	plain := createProduct(t, st, m.ID, nil)
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(10)})
	warm := createMerchant(t, st, nil)
	mustPlace(t, st, warm.ID, createProduct(t, st, warm.ID, nil).ID, placeOpts{Customer: "warm", PaymentRef: "r"})

	rt.reset()
	first := mustPlace(t, st, m.ID, plain.ID, placeOpts{Customer: "a", PaymentRef: "r"})
	require.Equal(t, "001", *first.PickupCode)
	counters := rt.containing("INSERT INTO pickup_counters")
	require.Len(t, counters, 1)
	require.Contains(t, strings.Join(counters[0], "\n"), "FOR NO KEY UPDATE", "the number travels with the merchant's lock")
	require.Len(t, rt.trips, 2, "read and lock, then write and commit: %q", rt.trips)

	rt.reset()
	second := mustPlace(t, st, m.ID, limited.ID, placeOpts{Customer: "b", PaymentRef: "r"})
	require.Equal(t, "002", *second.PickupCode)
	stock := rt.containing("stock_buckets")
	require.NotEmpty(t, stock)
	counters = rt.containing("INSERT INTO pickup_counters")
	require.NotEmpty(t, counters)
	require.NotContains(t, strings.Join(counters[len(counters)-1], "\n"), "stock_buckets", "stock is taken before the number")

	third := mustPlace(t, st, m.ID, plain.ID, placeOpts{Customer: "c", PaymentRef: "r"})
	require.Equal(t, "003", *third.PickupCode)
}

// TestRefusedPlacementsGiveTheirNumbersBack: a batch reserves a number per
// request with its first read; those it refuses go back before it commits,
// so the codes run on without a gap, and a day whose every request was
// refused has no counter at all. The merchant's row is held from another
// connection while the requests arrive, so that they are decided together
// once it is released.
func TestRefusedPlacementsGiveTheirNumbersBack(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 100})
	p := createProduct(t, st, m.ID, nil)
	missing := uuid.New()

	_, err := place(ctx, st, m.ID, missing, placeOpts{Customer: "nobody", PaymentRef: "r"})
	require.Equal(t, domain.CodeNotFound, domain.ErrorCode(err), "%v", err)
	var days int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM pickup_counters WHERE merchant_id = $1`, m.ID).Scan(&days))
	require.Zero(t, days, "a refused placement leaves no counter")

	release := holdLock(t, b.pool, `SELECT 1 FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, m.ID)
	var waiting []chan placed
	for i := range 12 {
		product := p.ID
		if i%3 == 1 {
			product = missing
		}
		waiting = append(waiting, placeAsync(st, m.ID, product, placeOpts{Customer: fmt.Sprintf("c%02d", i), PaymentRef: "r"}))
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	release()
	var codes []string
	for i, ch := range waiting {
		r := <-ch
		if i%3 == 1 {
			require.Equal(t, domain.CodeNotFound, domain.ErrorCode(r.err), "%v", r.err)
			continue
		}
		require.NoError(t, r.err)
		codes = append(codes, *r.res.Order.PickupCode)
	}
	var want []string
	for i := 1; i <= 8; i++ {
		want = append(want, fmt.Sprintf("%03d", i))
	}
	require.Equal(t, want, codes, "numbered in arrival order without a gap")
	next := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "next", PaymentRef: "r"})
	require.Equal(t, "009", *next.PickupCode)
	require.Empty(t, violations(t, st))
}

// TestNumberingFirstAndLastNeverDeadlock: batches that number with their
// first read (products without stock) and batches that number after their
// stock (a limited product, paid or not) place at one merchant at once, from
// sixteen goroutines over both lanes, while another connection holds every
// stock bucket now and then, so that batches wait for stock. Holding a
// counter, a batch waits for no stock, so none waits for the other:
// PostgreSQL counts no deadlock, every placement succeeds and the codes run
// from 001 without a gap.
func TestNumberingFirstAndLastNeverDeadlock(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 100_000})
	plain := createProduct(t, st, m.ID, nil)
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(100_000)})
	deadlocks := func() int64 {
		var n int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n))
		return n
	}
	before := deadlocks()

	const workers, each = 16, 40
	stop := make(chan struct{})
	holderDone := make(chan struct{})
	go func() {
		defer close(holderDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			tx, err := b.pool.Begin(ctx)
			if err != nil {
				return
			}
			_, _ = tx.Exec(ctx, `SELECT 1 FROM stock_buckets WHERE merchant_id = $1 AND product_id = $2 FOR UPDATE`, m.ID, limited.ID)
			time.Sleep(150 * time.Millisecond)
			_ = tx.Rollback(ctx)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	codes := make(chan string, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				o := placeOpts{Customer: fmt.Sprintf("w%d-%d", w, i)}
				product := plain.ID
				switch (w + i) % 4 {
				case 0:
					o.PaymentRef = "r"
				case 1:
					product = limited.ID
				case 2:
					o.PaymentRef, product = "r", limited.ID
				}
				res, err := place(ctx, st, m.ID, product, o)
				if err != nil {
					errs <- err
					continue
				}
				codes <- *res.Order.PickupCode
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-holderDone
	close(errs)
	close(codes)
	for err := range errs {
		require.NoError(t, err)
	}
	seen := map[string]bool{}
	for c := range codes {
		require.False(t, seen[c], "code %s twice", c)
		seen[c] = true
	}
	for i := 1; i <= workers*each; i++ {
		require.True(t, seen[fmt.Sprintf("%03d", i)], "code %03d missing", i)
	}
	// A backend reports its counts when it ends: close the pool's.
	b.pool.Reset()
	time.Sleep(time.Second)
	require.Equal(t, before, deadlocks(), "PostgreSQL detected a deadlock")
	require.Empty(t, violations(t, st))
}

// TestStockWaitHoldsNoPickupCounter: a batch reserves pickup numbers with
// its first read when it knows of no product of its requests that takes
// stock; finding one there, it leaves that request to a batch that numbers
// last, so that no batch waits for stock while holding the merchant's
// counter. Here a paid order of a limited product (its first, so not yet
// known to take stock) waits for buckets another connection holds; unpaid
// orders of another product of the merchant, placed through a second store
// (another process's lanes), are numbered meanwhile. The stock stays held
// until they are, so one that waited for a counter held by the waiting
// batch would never be numbered before its deadline; the deadline is a
// generous one, since a loaded machine slows every request alike, and the
// waiting order outlasts all of them, so that its batch keeps its locks
// until the stock goes.
func TestStockWaitHoldsNoPickupCounter(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 100})
	plain := createProduct(t, st, m.ID, nil)
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(5)})
	warmPool(t, b.pool, 6)
	other := newStore(store.Config{Pool: b.pool, Jobs: st.Config().Jobs})

	const quick, deadline = 4, 5 * time.Second
	release := holdLock(t, b.pool, `SELECT 1 FROM stock_buckets WHERE merchant_id = $1 AND product_id = $2 FOR UPDATE`, m.ID, limited.ID)
	waiting := placeAsyncWithin(st, m.ID, limited.ID, placeOpts{Customer: "patient", PaymentRef: "r"}, (quick+1)*deadline)
	time.Sleep(200 * time.Millisecond)
	for i := range quick {
		reqCtx, cancel := context.WithTimeout(ctx, deadline)
		res, err := place(reqCtx, other, m.ID, plain.ID, placeOpts{Customer: fmt.Sprintf("quick-%d", i)})
		cancel()
		require.NoError(t, err, "an unpaid placement waited for the counter of a batch waiting for stock")
		require.Equal(t, fmt.Sprintf("%03d", i+1), *res.Order.PickupCode)
	}
	select {
	case r := <-waiting:
		t.Fatalf("placed while its stock was held: %+v", r)
	default:
	}
	release()
	r := <-waiting
	require.NoError(t, r.err)
	require.Equal(t, "005", *r.res.Order.PickupCode)
	require.Empty(t, violations(t, st))
}
