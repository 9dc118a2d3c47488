package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

func TestRebuildMatchesLiveProjections(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 2})
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(20), PerUserLimit: intp(3)})
	plain := createProduct(t, st, m.ID, nil)
	_, err := st.Restock(ctx, limited.ID, 5, storeMeta())
	require.NoError(t, err)
	two := 3
	_, err = st.UpdateMerchant(ctx, m.ID, store.MerchantPatch{Capacity: &two}, storeMeta())
	require.NoError(t, err)

	var orders []*store.Order
	for i := range 12 {
		p := plain
		if i%2 == 0 {
			p = limited
		}
		ref := "r"
		if i%4 == 3 {
			ref = ""
		}
		orders = append(orders, mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i), PaymentRef: ref}))
	}
	_, err = st.CompleteOrder(ctx, orders[0].ID, admin, "")
	require.NoError(t, err)
	_, err = st.CancelOrder(ctx, orders[5].ID, "", customer("c5"), "")
	require.NoError(t, err)
	_, err = st.CancelOrder(ctx, orders[3].ID, "", customer("c3"), "")
	require.NoError(t, err)

	report, err := st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Empty(t, report.Differences, "%+v", report.Differences)
	require.Equal(t, 15, report.Streams)
	require.Equal(t, 30, report.Events, "paid placements append two events each")

	// Drift the projections behind the log's back; the rebuild sees it and repairs it.
	_, err = b.pool.Exec(ctx, `UPDATE orders SET status = 'completed' WHERE id = $1`, orders[1].ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE merchants SET active = active + 4 WHERE id = $1`, m.ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE stock_buckets SET remaining = remaining + 7 WHERE product_id = $1 AND bucket = 0`, limited.ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `DELETE FROM orders WHERE id = $1`, orders[2].ID)
	require.NoError(t, err)
	// Columns no command changes once written, and a product's fold.
	_, err = b.pool.Exec(ctx, `UPDATE orders SET total_cents = total_cents * 100 WHERE id = $1`, orders[4].ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE products SET name = 'Drifted', stock_total = stock_total + 1 WHERE id = $1`, limited.ID)
	require.NoError(t, err)
	report, err = st.Rebuild(ctx, false)
	require.NoError(t, err)
	got := map[string]string{}
	for _, d := range report.Differences {
		got[d.Table+"."+d.Column] = d.Live + " → " + d.Replay
	}
	require.Equal(t, 7, report.DifferenceCount, "%+v", report.Differences)
	require.Equal(t, `"completed" → "accepted"`, got["orders.status"])
	require.Equal(t, fmt.Sprint(orders[4].TotalCents*100, " → ", orders[4].TotalCents), got["orders.total_cents"])
	require.Equal(t, `"Drifted" → "`+limited.Name+`"`, got["products.name"])
	require.Equal(t, "26 → 25", got["products.stock_total"])
	require.Equal(t, "7 → 3", got["merchants.active"])
	require.Contains(t, got, "products.remaining")
	require.Contains(t, got, "orders.", "the deleted row, whole")

	report, err = st.Rebuild(ctx, true)
	require.NoError(t, err)
	require.True(t, report.Applied)
	report, err = st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Empty(t, report.Differences, "%+v", report.Differences)
	o, err := st.GetOrder(ctx, orders[1].ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, o.Status)
	o, err = st.GetOrder(ctx, orders[4].ID, admin)
	require.NoError(t, err)
	require.Equal(t, orders[4].TotalCents, o.TotalCents)
	_, err = st.GetOrder(ctx, orders[2].ID, admin)
	require.NoError(t, err, "the deleted row is back")
	p, err := st.GetProduct(ctx, limited.ID)
	require.NoError(t, err)
	require.Equal(t, limited.Name, p.Name)
	require.Equal(t, 25, *p.StockTotal)
}
