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

	var orders []*store.OrderView
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
	require.Equal(t, 21, report.Events, "paid placements append one event each")

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

// TestRebuildRepairsMerchantsDropsAndEntries drifts every column the
// merchant, drop and entry folds know, and rows of entries, behind the
// log's back: the rebuild reports each, and --apply writes the folds back.
func TestRebuildRepairsMerchantsDropsAndEntries(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	f := startedDrop(t, st, 1)
	_, err := st.PauseMerchant(ctx, f.merchant.ID, domain.PauseRequest{Mode: domain.PauseQueue, ForSeconds: intp(600)}, storeMeta())
	require.NoError(t, err)
	var invited, waiting []*store.EntryView
	for _, c := range []string{"x", "y", "z"} {
		e := f.entry(t, c)
		if e.Status == domain.EntryStatusInvited {
			invited = append(invited, e)
		} else {
			waiting = append(waiting, e)
		}
	}
	require.Len(t, invited, 1)
	require.Len(t, waiting, 2)
	before, err := st.GetDrop(ctx, f.drop.ID)
	require.NoError(t, err)
	require.Equal(t, domain.DropStateSelling, before.State)
	require.Equal(t, 1, before.Invited)
	paused, err := st.GetMerchant(ctx, f.merchant.ID)
	require.NoError(t, err)

	report, err := st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Empty(t, report.Differences, "%+v", report.Differences)

	_, err = b.pool.Exec(ctx, `UPDATE merchants SET capacity = 7, pause_mode = NULL, paused_until = NULL,
		created_at = created_at - interval '1 day', active = active + 2 WHERE id = $1`, f.merchant.ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE drops SET state = 'ended', units = units + 5 WHERE id = $1`, f.drop.ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE drop_entries SET status = 'lapsed', joined_at = joined_at - interval '1 hour' WHERE id = $1`, invited[0].ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `UPDATE drop_entries SET status = 'invited', order_key = NULL WHERE id = $1`, waiting[0].ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `DELETE FROM drop_entries WHERE id = $1`, waiting[1].ID)
	require.NoError(t, err)

	report, err = st.Rebuild(ctx, false)
	require.NoError(t, err)
	got := map[string]string{}
	for _, d := range report.Differences {
		got[d.Table+"."+d.Column+"."+d.ID.String()] = d.Live + " → " + d.Replay
	}
	m := f.merchant.ID.String()
	require.Equal(t, "7 → 100", got["merchants.capacity."+m])
	require.Equal(t, `null → "queue"`, got["merchants.pause_mode."+m])
	require.Contains(t, got, "merchants.paused_until."+m)
	require.Contains(t, got, "merchants.created_at."+m)
	require.Equal(t, fmt.Sprint(paused.Load.Active+2, " → ", paused.Load.Active), got["merchants.active."+m])
	require.Equal(t, `"ended" → "selling"`, got["drops.state."+f.drop.ID.String()])
	require.Equal(t, "6 → 1", got["drops.units."+f.drop.ID.String()])
	require.Equal(t, `"lapsed" → "invited"`, got["drop_entries.status."+invited[0].ID.String()])
	require.Contains(t, got, "drop_entries.joined_at."+invited[0].ID.String())
	require.Equal(t, `"invited" → "waiting"`, got["drop_entries.status."+waiting[0].ID.String()])
	require.Contains(t, got, "drop_entries.order_key."+waiting[0].ID.String())
	require.Contains(t, got, "drop_entries.."+waiting[1].ID.String(), "the deleted entry, whole")
	require.Equal(t, 12, report.DifferenceCount, "%+v", report.Differences)

	report, err = st.Rebuild(ctx, true)
	require.NoError(t, err)
	require.True(t, report.Applied)
	report, err = st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Empty(t, report.Differences, "%+v", report.Differences)

	after, err := st.GetMerchant(ctx, f.merchant.ID)
	require.NoError(t, err)
	require.Equal(t, 100, after.Capacity)
	require.True(t, after.Load.Paused)
	require.Equal(t, paused.Load.Active, after.Load.Active)
	require.True(t, after.CreatedAt.Equal(f.merchant.CreatedAt))
	d, err := st.GetDrop(ctx, f.drop.ID)
	require.NoError(t, err)
	require.Equal(t, before.State, d.State)
	require.Equal(t, before.Units, d.Units)
	require.Equal(t, before.Invited, d.Invited)
	require.Equal(t, before.Entries, d.Entries, "the deleted entry is back")
	for _, e := range append(invited, waiting...) {
		got := f.entry(t, e.CustomerID)
		require.Equal(t, e.Status, got.Status)
		require.True(t, e.JoinedAt.Equal(got.JoinedAt))
		require.Equal(t, e.Rank, got.Rank)
	}
}

// TestRebuildHoldsOneChunkOfOrders replays, compares and repairs 30 orders
// four at a time: the rebuild never holds more than a chunk's worth of
// folded orders (what a fetch of events may finish on top of a chunk), and
// what it finds and writes back is what a rebuild holding them all would.
func TestRebuildHoldsOneChunkOfOrders(t *testing.T) {
	t.Parallel()
	const chunk = 4
	st, b := setup(t, func(c *store.Config) { c.RebuildChunk = chunk })
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 5})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(100)})
	var orders []*store.OrderView
	for i := range 30 {
		ref := "r"
		if i%3 == 2 {
			ref = ""
		}
		orders = append(orders, mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i), PaymentRef: ref}))
	}
	for _, i := range []int{0, 1, 3} {
		_, err := st.CompleteOrder(ctx, orders[i].ID, admin, "")
		require.NoError(t, err)
	}
	report, err := st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Empty(t, report.Differences, "%+v", report.Differences)
	require.Equal(t, 30+2, report.Streams)
	require.Positive(t, report.MostOrdersHeld)
	require.Less(t, report.MostOrdersHeld, 2*chunk, "folded orders held at once")

	// Orders missing and drifted, spread over several chunks.
	for i, o := range orders {
		switch i % 5 {
		case 1:
			_, err = b.pool.Exec(ctx, `DELETE FROM orders WHERE id = $1`, o.ID)
		case 3:
			_, err = b.pool.Exec(ctx, `UPDATE orders SET total_cents = total_cents + 1 WHERE id = $1`, o.ID)
		}
		require.NoError(t, err)
	}
	report, err = st.Rebuild(ctx, true)
	require.NoError(t, err)
	require.Equal(t, 12, report.DifferenceCount, "six orders missing, six drifted")
	require.True(t, report.Applied)
	require.Less(t, report.MostOrdersHeld, 2*chunk)
	report, err = st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Zero(t, report.DifferenceCount, "%+v", report.Differences)
	require.Empty(t, violations(t, st))
}
