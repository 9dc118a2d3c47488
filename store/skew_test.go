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

// TestSkewedClocksNeverRunBackwards: two processes (stores) decide for one
// merchant, one with a clock 3 s ahead of the other's. An order the fast
// one placed and the slow one paid is not paid before it was placed; an
// order the slow one admits after the fast one admitted another is not
// accepted before it; and, with both placing, paying and completing at
// once from several goroutines each, the audit finds no admission and no
// order whose times run backwards.
func TestSkewedClocksNeverRunBackwards(t *testing.T) {
	t.Parallel()
	fast, b := setup(t)
	slow := store.New(b.pool, fast.Jobs)
	fast.Now = func() time.Time { return time.Now().Add(3 * time.Second) }
	ctx := context.Background()
	m := createMerchant(t, fast, &merchantOpts{Capacity: 1})
	p := createProduct(t, fast, m.ID, nil)

	first := mustPlace(t, fast, m.ID, p.ID, placeOpts{Customer: "first", PaymentRef: "r"})
	require.Equal(t, domain.StatusAccepted, first.Status)
	second := mustPlace(t, slow, m.ID, p.ID, placeOpts{Customer: "second", PaymentRef: "r"})
	require.Equal(t, domain.StatusQueued, second.Status)
	require.False(t, second.PaidAt.Before(*first.AcceptedAt), "paid under the merchant's lock after the first's admission")
	_, err := slow.CompleteOrder(ctx, first.ID, admin, "")
	require.NoError(t, err)
	admitted, err := slow.GetOrder(ctx, second.ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, admitted.Status)
	require.False(t, admitted.AcceptedAt.Before(*first.AcceptedAt), "admitted after the first, so not accepted before it")

	unpaid := mustPlace(t, fast, m.ID, p.ID, placeOpts{Customer: "late-payer"})
	paid, err := slow.PayOrder(ctx, unpaid.ID, "r", customer("late-payer"), "")
	require.NoError(t, err)
	require.False(t, paid.PaidAt.Before(paid.PlacedAt), "paid %s, placed %s", paid.PaidAt, paid.PlacedAt)
	require.Empty(t, violations(t, fast))

	// Both at once: each store places paid and unpaid orders, pays the
	// unpaid ones the other placed and completes what is accepted.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w, st := range []*store.Store{fast, slow, fast, slow} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			other := slow
			if st == slow {
				other = fast
			}
			for i := range 15 {
				c := fmt.Sprintf("w%d-%d", w, i)
				o, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: c})
				if err == nil {
					_, err = other.PayOrder(ctx, o.Order.ID, "r", customer(c), "")
				}
				if err == nil {
					_, err = place(ctx, st, m.ID, p.ID, placeOpts{Customer: c + "-paid", PaymentRef: "r"})
				}
				if err != nil {
					errs <- err
					return
				}
				accepted, err := st.ListMerchantOrders(ctx, m.ID, domain.StatusAccepted, 5)
				if err != nil {
					errs <- err
					return
				}
				for _, a := range accepted {
					if _, err := other.CompleteOrder(ctx, a.ID, admin, ""); err != nil &&
						domain.ErrorCode(err) != domain.CodeInvalidTransition {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var admissions int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE merchant_id = $1 AND accepted_at IS NOT NULL`, m.ID).Scan(&admissions))
	require.Greater(t, admissions, 20, "orders were admitted by both stores")
	require.Empty(t, violations(t, fast))
}
