package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

func TestStockNeverOversells(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(100)})

	var sold, soldOut atomic.Int32
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range 400 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("buyer-%d", i), PaymentRef: "r"})
			switch domain.ErrorCode(err) {
			case domain.CodeInternal:
				if err == nil {
					sold.Add(1)
				} else {
					t.Error(err)
				}
			case domain.CodeSoldOut:
				soldOut.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int32(100), sold.Load())
	require.Equal(t, int32(300), soldOut.Load())
	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 0, *got.StockRemaining)
	require.Equal(t, 100, *got.StockTotal)
	require.Equal(t, 100, countRows(t, b.pool, "orders"))
}

func TestPerUserLimitRace(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(50), PerUserLimit: intp(1)})

	var ok, limited atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: "greedy"})
			switch {
			case err == nil:
				ok.Add(1)
			case domain.ErrorCode(err) == domain.CodePurchaseLimit:
				limited.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), ok.Load())
	require.Equal(t, int32(19), limited.Load())

	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 49, *got.StockRemaining, "refused attempts hold no stock")
}

// TestPurchaseLimitAcrossOrdersIsDomains: the per-customer limit across
// orders is what domain.ClaimsOf decides, not what purchase_claims' CHECK
// refuses. A customer's orders fill the limit exactly (a claim that fits
// to the unit is taken), the claim row records the product's limit, and the
// next unit is refused by the claim's decision, which names the limit,
// rather than by the CHECK failing the statement.
func TestPurchaseLimitAcrossOrdersIsDomains(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(50), PerUserLimit: intp(3)})

	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "carol", Quantity: 1})
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "carol", Quantity: 2})
	var quantity, limit int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT quantity, limit_qty FROM purchase_claims
		WHERE merchant_id = $1 AND product_id = $2 AND customer_id = 'carol'`, m.ID, p.ID).Scan(&quantity, &limit))
	require.Equal(t, []int{3, 3}, []int{quantity, limit}, "the claim holds the orders' units under the product's limit")

	_, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: "carol", Quantity: 1})
	require.Equal(t, domain.CodePurchaseLimit, domain.ErrorCode(err), "%v", err)
	var pgErr *pgconn.PgError
	require.False(t, errors.As(err, &pgErr), "refused by the CHECK, not by the claim's decision: %v", err)
	require.ErrorContains(t, err, "limit of 3")

	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 47, *got.StockRemaining, "the refused order holds no stock")
}

func TestCancelReleasesStockAndClaim(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(1), PerUserLimit: intp(1)})

	o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "alice"})
	_, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: "bob"})
	require.ErrorIs(t, err, domain.ErrSoldOut)
	_, err = st.CancelOrder(ctx, o.ID, "", customer("alice"), "")
	require.NoError(t, err)
	again := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "alice"})
	require.Equal(t, domain.StatusAwaitingPayment, again.Status)
	_, err = st.CancelOrder(ctx, again.ID, "", customer("alice"), "")
	require.NoError(t, err)
	_, err = st.CancelOrder(ctx, again.ID, "", customer("alice"), "")
	require.ErrorIs(t, err, domain.ErrInvalidTransition, "cancelling twice is refused")
}

func TestRestockDuringBurstKeepsCountExact(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(50)})

	var sold atomic.Int32
	var wg sync.WaitGroup
	sem := make(chan struct{}, 24)
	for i := range 300 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("b%d", i)})
			if err == nil {
				sold.Add(1)
			} else if domain.ErrorCode(err) != domain.CodeSoldOut {
				t.Error(err)
			}
		}()
		if i == 100 || i == 200 {
			_, err := st.Restock(ctx, p.ID, 25, storeMeta())
			require.NoError(t, err)
		}
	}
	wg.Wait()
	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 100, *got.StockTotal)
	require.Equal(t, 100-int(sold.Load()), *got.StockRemaining)
	require.LessOrEqual(t, sold.Load(), int32(100))
}

func TestStockValidation(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, nil)
	unlimited := createProduct(t, st, m.ID, nil)
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(3)})
	for _, q := range []int{0, -5, 1_000_001} {
		_, err := st.Restock(ctx, limited.ID, q, storeMeta())
		require.ErrorIs(t, err, &domain.Error{Code: domain.CodeValidation}, "quantity %d", q)
	}
	_, err := st.Restock(ctx, unlimited.ID, 5, storeMeta())
	require.ErrorIs(t, err, &domain.Error{Code: domain.CodeValidation})
	_, err = place(ctx, st, m.ID, limited.ID, placeOpts{Quantity: 4})
	require.ErrorIs(t, err, domain.ErrSoldOut)
	got, err := st.GetProduct(ctx, unlimited.ID)
	require.NoError(t, err)
	require.Nil(t, got.StockTotal)
	require.Nil(t, got.StockRemaining)
}

// TestPayRacesClose pays and closes many orders as their deadline passes,
// from many goroutines: every order ends either paid or closed, never both,
// and closed orders hold no stock. The store's clock crosses the deadline
// once a quarter of the orders are paid, while the other payments and the
// closes are under way, whatever the machine's speed: a sleep on the wall
// clock cannot say where the deadline falls when placing the orders alone
// may take longer than it.
func TestPayRacesClose(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000, PaymentTimeout: 1})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(1000)})

	const n = 120
	var ids []uuid.UUID
	var deadline time.Time
	for i := range n {
		o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i)})
		ids = append(ids, o.ID)
		deadline = o.PaymentDeadline
	}
	orders := make([]*orderRef, n)
	for i, id := range ids {
		orders[i] = &orderRef{id: id, customer: fmt.Sprintf("c%d", i)}
	}
	clock.Set(deadline.Add(-time.Millisecond))
	var paying sync.WaitGroup
	paying.Add(n)
	paysDone := make(chan struct{})
	go func() {
		paying.Wait()
		close(paysDone)
	}()
	var wg sync.WaitGroup
	var paid, closed atomic.Int32
	crossed := make(chan struct{})
	go func() {
		defer close(crossed)
		defer clock.Set(deadline)
		for paid.Load() < n/4 {
			select {
			case <-paysDone: // too few paid: the assertion below says so
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for _, o := range orders {
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer paying.Done()
			if _, err := st.PayOrder(ctx, o.id, "r", customer(o.customer), ""); err == nil {
				paid.Add(1)
			} else if domain.ErrorCode(err) != domain.CodeInvalidTransition {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			for {
				ok, err := st.CloseUnpaid(ctx, m.ID, o.id)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					closed.Add(1)
					return
				}
				got, err := st.GetOrder(ctx, o.id, admin)
				if err != nil {
					t.Error(err)
					return
				}
				if got.Status != domain.StatusAwaitingPayment {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	<-crossed
	require.GreaterOrEqual(t, paid.Load(), int32(n/4), "payments before the deadline")
	require.Equal(t, int32(n), paid.Load()+closed.Load())
	t.Logf("%d paid, %d closed", paid.Load(), closed.Load())
	var paidRows, closedRows int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE paid_at IS NOT NULL), count(*) FILTER (WHERE status = 'closed') FROM orders`).Scan(&paidRows, &closedRows))
	require.Equal(t, int(paid.Load()), paidRows)
	require.Equal(t, int(closed.Load()), closedRows)
	var bothEvents int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT stream_id FROM events WHERE type IN ('order.paid','order.closed')
		GROUP BY stream_id HAVING count(*) > 1) x`).Scan(&bothEvents))
	require.Zero(t, bothEvents)
	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 1000-paidRows, *got.StockRemaining, "closed orders hold no stock")

	// A payment at the deadline is refused by the payment itself, closed or not.
	late := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "late"})
	clock.Set(late.PaymentDeadline)
	_, err = st.PayOrder(ctx, late.ID, "r", customer("late"), "")
	require.ErrorIs(t, err, domain.ErrInvalidTransition)
	// Without its merchant, as a timer inserted before jobs carried it.
	closedNow, err := st.CloseUnpaid(ctx, uuid.Nil, late.ID)
	require.NoError(t, err)
	require.True(t, closedNow)
	again, err := st.CloseUnpaid(ctx, m.ID, late.ID)
	require.NoError(t, err)
	require.False(t, again, "closing twice changes nothing")
}

// TestBatchClaimsRefuseOnlyThoseAtTheirLimit: one batch whose buyers'
// claims are made together refuses the customer already at the limit and
// places the others, each claim holding what its customer bought.
func TestBatchClaimsRefuseOnlyThoseAtTheirLimit(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 100})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(40), PerUserLimit: intp(2)})
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "greedy", Quantity: 2})
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "frank"})
	request := func(customer string, quantity int) store.PlaceRequest {
		return store.PlaceRequest{MerchantID: m.ID, CustomerID: customer, IdempotencyKey: uuid.NewString(), RequestHash: []byte(uuid.NewString()),
			Lines: []domain.LineRequest{{ProductID: p.ID, Quantity: quantity}}}
	}
	errs := st.PlaceTogether(ctx, []store.PlaceRequest{request("dave", 2), request("greedy", 1), request("frank", 1), request("erin", 1), request("frank2", 3)})
	require.NoError(t, errs[0])
	require.Equal(t, domain.CodePurchaseLimit, domain.ErrorCode(errs[1]), "%v", errs[1])
	require.NoError(t, errs[2], "frank's claim fits to the unit")
	require.NoError(t, errs[3])
	require.Equal(t, domain.CodePurchaseLimit, domain.ErrorCode(errs[4]), "more than the limit in one order: %v", errs[4])

	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 40-3-4, *got.StockRemaining, "refused buyers hold no stock")
	rows, err := b.pool.Query(ctx, `SELECT customer_id, quantity FROM purchase_claims WHERE product_id = $1`, p.ID)
	require.NoError(t, err)
	claims := map[string]int{}
	for rows.Next() {
		var c string
		var q int
		require.NoError(t, rows.Scan(&c, &q))
		claims[c] = q
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int{"greedy": 2, "frank": 2, "dave": 2, "erin": 1}, claims)
}

// A release waits for the buckets it returns units to in the lock order
// (product, then bucket), as a batch that waits for every bucket of several
// products does: were it to hold a later product's bucket while it waits
// for an earlier one's, the two would wait for each other until
// PostgreSQL's deadlock check broke the circle. The store's sessions plan
// as PostgreSQL does for a small table (a hash join over a scan of the
// table, which meets rows in the order they lie), and the earlier
// product's row is moved to the end of the table, where that scan meets
// it last.
func TestReleaseWaitsForBucketsInTheLockOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, pool, _ := sharedDatabaseStore(ctx, t)
	st := storeWithSettings(ctx, t, url, map[string]string{
		"enable_nestloop": "off", "enable_mergejoin": "off", "enable_indexscan": "off", "enable_bitmapscan": "off"})
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	// Ten units are one bucket a product.
	a := createProduct(t, st, m.ID, &productOpts{Stock: intp(10)})
	b := createProduct(t, st, m.ID, &productOpts{Stock: intp(10)})
	earlier, later := a.ID, b.ID
	if bytes.Compare(later[:], earlier[:]) < 0 {
		earlier, later = later, earlier
	}
	both := store.PlaceRequest{MerchantID: m.ID, CustomerID: "carol", IdempotencyKey: uuid.NewString(), RequestHash: []byte(uuid.NewString()),
		Lines: []domain.LineRequest{{ProductID: a.ID, Quantity: 1}, {ProductID: b.ID, Quantity: 1}}}
	require.NoError(t, st.PlaceTogether(ctx, []store.PlaceRequest{both})[0])
	var orderID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM orders WHERE merchant_id = $1`, m.ID).Scan(&orderID))
	_, err := pool.Exec(ctx, `UPDATE stock_buckets SET remaining = remaining WHERE merchant_id = $1 AND product_id = $2`, m.ID, earlier)
	require.NoError(t, err)

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // committed below
	var holderPID int
	require.NoError(t, holder.QueryRow(ctx, `SELECT pg_backend_pid() FROM stock_buckets WHERE merchant_id = $1 AND product_id = $2 FOR UPDATE`,
		m.ID, earlier).Scan(&holderPID))

	patience, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cancelled := make(chan error, 1)
	go func() {
		_, err := st.CancelOrder(patience, orderID, "", customer("carol"), "")
		cancelled <- err
	}()
	for waiting := 0; waiting == 0; time.Sleep(10 * time.Millisecond) {
		require.NoError(t, patience.Err(), "the release never waited for the earlier product's bucket")
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, holderPID).Scan(&waiting))
	}
	probe, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer probe.Rollback(ctx) //nolint:errcheck // it only looks
	_, err = probe.Exec(ctx, `SELECT 1 FROM stock_buckets WHERE merchant_id = $1 AND product_id = $2 FOR UPDATE NOWAIT`, m.ID, later)
	require.NoError(t, err, "the release holds the later product's bucket while it waits for the earlier one's")
	require.NoError(t, probe.Rollback(ctx))

	require.NoError(t, holder.Commit(ctx))
	require.NoError(t, <-cancelled)
	for _, p := range []uuid.UUID{a.ID, b.ID} {
		got, err := st.GetProduct(ctx, p)
		require.NoError(t, err)
		require.Equal(t, 10, *got.StockRemaining, "the cancelled order's unit is back")
	}
}
