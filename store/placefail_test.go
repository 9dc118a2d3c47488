package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

// poisonOrders makes the insert of an order fail, in the placement's last
// round trip (the one with the COMMIT), for customers whose name starts
// with prefix, after sleeping for the given seconds: a statement that
// fails whatever the batch around it, through no fault of the request (a
// constraint the database enforces behind the store's back, say).
func poisonOrders(t *testing.T, b *testBundle, prefix string, sleepSeconds float64) {
	t.Helper()
	exec(t, b.pool, fmt.Sprintf(`
		CREATE OR REPLACE FUNCTION poison_%[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.customer_id LIKE '%[1]s%%' THEN
				PERFORM pg_sleep(%[2]g);
				RAISE EXCEPTION 'poisoned order of %%', NEW.customer_id USING ERRCODE = 'check_violation';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER poison_%[1]s BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION poison_%[1]s()`, prefix, sleepSeconds))
}

type placeOutcome struct {
	customer string
	err      error
	took     time.Duration
}

// placeAll places one paid order per customer at once, each with its own
// timeout, so that they share the merchant's placement lane and batches.
func placeAll(t *testing.T, b *testBundle, m, p uuid.UUID, customers []string, timeout time.Duration) []placeOutcome {
	t.Helper()
	out := make([]placeOutcome, len(customers))
	var wg sync.WaitGroup
	for i, c := range customers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			_, err := place(ctx, b.store, m, p, placeOpts{Customer: c, PaymentRef: "pay-" + c})
			out[i] = placeOutcome{customer: c, err: err, took: time.Since(start)}
		}()
	}
	wg.Wait()
	return out
}

func customersNamed(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// TestAlwaysFailingStatementFailsOnlyItsRequest: a statement that always
// fails for some requests of a batch fails those requests with the
// database's error and nothing else, and every other request of their
// batches is placed.
func TestAlwaysFailingStatementFailsOnlyItsRequest(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	p := createProduct(t, st, m.ID, nil)
	poisonOrders(t, b, "poison", 0)

	var customers []string
	for i := range 40 {
		customers = append(customers, fmt.Sprintf("good%d", i))
		if i%10 == 5 {
			customers = append(customers, fmt.Sprintf("poison%d", i))
		}
	}
	for _, o := range placeAll(t, b, m.ID, p.ID, customers, 10*time.Second) {
		if o.customer[:4] == "good" {
			require.NoError(t, o.err, o.customer)
			continue
		}
		require.ErrorContains(t, o.err, "poisoned order of "+o.customer)
	}
	require.Equal(t, 40, countRows(t, b.pool, "orders"))
}

// TestSlowFailingStatementAnswersWithinTheTimeout: a statement that fails
// only after longer than its callers wait must not keep them waiting: each
// request is answered soon after its own deadline (placed, or a clear
// unavailable error that wrote nothing), and the lane goes on placing the
// requests that come next. A batch split to place its requests one at a
// time after the failure, each failing as slowly again, kept callers
// waiting for every one of them.
func TestSlowFailingStatementAnswersWithinTheTimeout(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	p := createProduct(t, st, m.ID, nil)
	const stall = 4.0 // seconds the poisoned insert sleeps before it fails
	poisonOrders(t, b, "slow", stall)

	const timeout = time.Second
	// Lateness a loaded machine may add to an answer due at the deadline;
	// a caller kept for the slow statement's failure, let alone for its
	// retry one at a time, waits longer.
	const slack = 2 * time.Second
	customers := append(customersNamed("slow", 3), customersNamed("good", 30)...)
	for _, o := range placeAll(t, b, m.ID, p.ID, customers, timeout) {
		require.Less(t, o.took, timeout+slack, "%s answered after %s", o.customer, o.took)
		if o.customer[:4] == "slow" {
			require.Error(t, o.err, o.customer)
		}
		if o.err != nil && o.customer[:4] == "good" {
			require.Equal(t, domain.CodeUnavailable, domain.ErrorCode(o.err), "%s: %v", o.customer, o.err)
		}
	}
	var slow int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE customer_id LIKE 'slow%'`).Scan(&slow))
	require.Zero(t, slow)

	for _, o := range placeAll(t, b, m.ID, p.ID, customersNamed("after", 10), 10*time.Second) {
		require.NoError(t, o.err, o.customer)
		require.Less(t, o.took, time.Duration(stall*float64(time.Second)), "%s answered after %s", o.customer, o.took)
	}
}
