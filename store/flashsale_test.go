package store_test

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
)

// The flash sale test runs this test binary again as more OS processes
// buying; these variables tell such a process what to buy.
const (
	flashHelperDB        = "ORDERD_FLASH_HELPER_DB"
	flashHelperMerchant  = "ORDERD_FLASH_HELPER_MERCHANT"
	flashHelperProduct   = "ORDERD_FLASH_HELPER_PRODUCT"
	flashHelperCustomers = "ORDERD_FLASH_HELPER_CUSTOMERS"
)

// flashBuyers has every one of customers customers, c0, c1, ..., try once
// to buy one unit of the product through st, from 16 goroutines, every
// other one paying at once; sold counts the orders placed. Any answer but
// an order, sold_out or the per-customer limit is an error.
func flashBuyers(ctx context.Context, st *store.Store, merchant, product uuid.UUID, customers int, sold *atomic.Int32) error {
	var wg sync.WaitGroup
	errs := make(chan error, customers)
	sem := make(chan struct{}, 16)
	for i := range customers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			opts := placeOpts{Customer: fmt.Sprintf("c%d", i)}
			if i%2 == 1 {
				opts.PaymentRef = "r"
			}
			_, err := place(ctx, st, merchant, product, opts)
			switch {
			case err == nil:
				sold.Add(1)
			case domain.ErrorCode(err) == domain.CodeSoldOut, domain.ErrorCode(err) == domain.CodePurchaseLimit:
			default:
				errs <- fmt.Errorf("customer c%d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func flashHelper() error {
	ctx := context.Background()
	merchant, err := uuid.Parse(os.Getenv(flashHelperMerchant))
	if err != nil {
		return err
	}
	product, err := uuid.Parse(os.Getenv(flashHelperProduct))
	if err != nil {
		return err
	}
	customers, err := strconv.Atoi(os.Getenv(flashHelperCustomers))
	if err != nil {
		return err
	}
	return runInHelperProcess(ctx, os.Getenv(flashHelperDB), 8, func(ctx context.Context, st *store.Store, _ *pgxpool.Pool) error {
		var sold atomic.Int32
		return flashBuyers(ctx, st, merchant, product, customers, &sold)
	})
}

// TestFlashSaleAcrossProcessesWithABucketHeld: the same 200 customers each
// try to buy one unit of a product of 96 with a per-customer limit of one,
// from two stores in this process and two more OS processes, each with its
// lanes and batches, while another connection holds the bucket every
// buyer's take looks at first until a third of the units are sold. Every
// unit is sold, none twice, no customer buys twice, the claims hold
// exactly what the orders bought, and nobody is answered anything but an
// order, sold_out or the limit.
func TestFlashSaleAcrossProcessesWithABucketHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, pool, st := sharedDatabaseStore(ctx, t)
	const units, customers, helpers = 96, 200, 2
	m := createMerchant(t, st, &merchantOpts{Capacity: 100_000})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(units), PerUserLimit: intp(1)})

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // committed below
	var held int
	require.NoError(t, holder.QueryRow(ctx, `SELECT remaining FROM stock_buckets WHERE product_id = $1 AND bucket = 0 FOR UPDATE`, p.ID).Scan(&held))
	require.Positive(t, held)

	other, err := smallPool(ctx, url)
	require.NoError(t, err)
	t.Cleanup(other.Close)
	ins, err := jobs.NewInserter(other)
	require.NoError(t, err)
	stores := []*store.Store{st, newStore(store.Config{Pool: other, Jobs: ins})}

	var wg sync.WaitGroup
	outs := make([][]byte, helpers)
	errs := make([]error, helpers+len(stores))
	for i := range helpers {
		cmd := osexec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), flashHelperDB+"="+url, flashHelperMerchant+"="+m.ID.String(),
			flashHelperProduct+"="+p.ID.String(), flashHelperCustomers+"="+strconv.Itoa(customers))
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	var sold atomic.Int32
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[helpers+i] = flashBuyers(ctx, s, m.ID, p.ID, customers, &sold)
		}()
	}
	// The bucket is held while buyers arrive, until a third is sold (by
	// any process), or long enough that every buyer has arrived.
	for until := time.Now().Add(10 * time.Second); time.Now().Before(until); time.Sleep(5 * time.Millisecond) {
		if countRows(t, pool, "orders") >= units/3 {
			break
		}
	}
	require.NoError(t, holder.Commit(ctx))
	wg.Wait()
	for i, err := range errs {
		if i < helpers {
			require.NoError(t, err, "helper process %d: %s", i, outs[i])
		} else {
			require.NoError(t, err)
		}
	}

	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 0, *got.StockRemaining, "every unit sold")
	require.Equal(t, units, countRows(t, pool, "orders"), "no unit sold twice")
	var twice, claimsOff int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT customer_id FROM orders GROUP BY customer_id HAVING count(*) > 1) x`).Scan(&twice))
	require.Zero(t, twice, "customers who bought twice")
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM purchase_claims c FULL JOIN (SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id) o
			ON o.customer_id = c.customer_id
		WHERE coalesce(c.quantity, 0) <> coalesce(o.n, 0)`).Scan(&claimsOff))
	require.Zero(t, claimsOff, "customers whose claim is not what they bought")
}

// TestReleaseAndPurchaseTakeClaimsBeforeBuckets: a cancellation giving back
// a customer's unit and the same customer's next purchase, which waits for
// the product's buckets, take the customer's claim and the buckets in the
// store's one lock order, the claim first, so that neither waits for the
// other in a circle. Every bucket is held by a third connection while both
// arrive; once it lets go, both finish. PostgreSQL's deadlock detection is
// put off past the test's patience, so a circle fails the test instead of
// being broken and retried unseen.
func TestReleaseAndPurchaseTakeClaimsBeforeBuckets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, pool, setupStore := sharedDatabaseStore(ctx, t)
	st := storeWithSettings(ctx, t, url, map[string]string{"deadlock_timeout": "10min"})

	m := createMerchant(t, setupStore, &merchantOpts{Capacity: 1000})
	p := createProduct(t, setupStore, m.ID, &productOpts{Stock: intp(16), PerUserLimit: intp(2)})
	first := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "carol"})

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // committed below
	_, err = holder.Exec(ctx, `SELECT 1 FROM stock_buckets WHERE product_id = $1 ORDER BY bucket FOR UPDATE`, p.ID)
	require.NoError(t, err)

	patience, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	go func() {
		_, err := st.CancelOrder(patience, first.ID, "", customer("carol"), "")
		errs <- err
	}()
	waitForLockWaiters(ctx, t, pool, 1)
	go func() {
		_, err := place(patience, st, m.ID, p.ID, placeOpts{Customer: "carol"})
		errs <- err
	}()
	waitForLockWaiters(ctx, t, pool, 2)
	require.NoError(t, holder.Commit(ctx))
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 15, *got.StockRemaining)
}

// TestBatchHoldingABucketMakesNoClaimAReleaseHolds: a batch that holds a
// product's bucket (one buyer's take in its first round trip) and then
// decides, in its turn, an order that still has a claim to make (a
// multi-line order of a product with a per-customer limit) must not wait
// for that claim: a cancellation of the same customer's earlier order,
// holding the claim and waiting for the bucket, would wait for the batch
// in a circle. A second connection holds the customer's claim while both
// arrive, the cancellation first; once it lets go, both finish. PostgreSQL's
// deadlock detection is put off past the test's patience, so a circle
// fails the test instead of being broken and retried unseen.
func TestBatchHoldingABucketMakesNoClaimAReleaseHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, pool, setupStore := sharedDatabaseStore(ctx, t)
	st := storeWithSettings(ctx, t, url, map[string]string{"deadlock_timeout": "10min"})

	m := createMerchant(t, setupStore, &merchantOpts{Capacity: 1000})
	// Ten units are one bucket, which every take and release meets.
	p := createProduct(t, setupStore, m.ID, &productOpts{Stock: intp(10), PerUserLimit: intp(2)})
	side := createProduct(t, setupStore, m.ID, nil)
	first := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "carol"})

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // committed below
	_, err = holder.Exec(ctx, `SELECT 1 FROM purchase_claims WHERE product_id = $1 AND customer_id = 'carol' FOR UPDATE`, p.ID)
	require.NoError(t, err)

	patience, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cancelled := make(chan error, 1)
	go func() {
		_, err := st.CancelOrder(patience, first.ID, "", customer("carol"), "")
		cancelled <- err
	}()
	waitForLockWaiters(ctx, t, pool, 1)
	request := func(customer string, products ...uuid.UUID) store.PlaceRequest {
		r := store.PlaceRequest{MerchantID: m.ID, CustomerID: customer, IdempotencyKey: uuid.NewString(), RequestHash: []byte(uuid.NewString())}
		for _, id := range products {
			r.Lines = append(r.Lines, domain.LineRequest{ProductID: id, Quantity: 1})
		}
		return r
	}
	placed := make(chan []error, 1)
	go func() {
		placed <- st.PlaceTogether(patience, []store.PlaceRequest{request("dave", p.ID), request("carol", p.ID, side.ID)})
	}()
	waitForLockWaiters(ctx, t, pool, 2)
	require.NoError(t, holder.Commit(ctx))
	require.NoError(t, <-cancelled)
	for i, err := range <-placed {
		require.NoError(t, err, "request %d", i)
	}
	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 8, *got.StockRemaining, "carol's first unit back, dave's and carol's second taken")
	var claims int
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(quantity) FROM purchase_claims WHERE product_id = $1`, p.ID).Scan(&claims))
	require.Equal(t, 2, claims)
}

// waitForLockWaiters waits until at least n sessions of the test's database
// wait for a lock, so that a test knows its requests have arrived at the
// lock it holds before it lets go.
func waitForLockWaiters(ctx context.Context, t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	for until := time.Now().Add(10 * time.Second); time.Now().Before(until); time.Sleep(10 * time.Millisecond) {
		var w int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&w))
		if w >= n {
			return
		}
	}
	t.Fatalf("fewer than %d waiting for a lock", n)
}
