package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// placeMany places n orders of customer at merchant from several goroutines
// at once, so that some share a batch and so a placed_at, and returns them.
func placeMany(t *testing.T, st *store.Store, merchantID, productID uuid.UUID, customer string, n int, paid bool) []store.OrderView {
	t.Helper()
	var mu sync.Mutex
	var out []store.OrderView
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := placeOpts{Customer: customer}
			if paid {
				o.PaymentRef = fmt.Sprintf("pay-%s-%d", customer, i)
			}
			res, err := place(context.Background(), st, merchantID, productID, o)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			out = append(out, *res.Order)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return out
}

func newestFirst(orders []store.OrderView) []uuid.UUID {
	sorted := slices.Clone(orders)
	slices.SortFunc(sorted, func(a, b store.OrderView) int {
		if c := b.PlacedAt.Compare(a.PlacedAt); c != 0 {
			return c
		}
		return slices.Compare(b.ID[:], a.ID[:])
	})
	ids := make([]uuid.UUID, len(sorted))
	for i, o := range sorted {
		ids[i] = o.ID
	}
	return ids
}

// pageThrough reads a list page by page, calling between after each page
// but the last, and returns every order read in the order read.
func pageThrough(t *testing.T, st *store.Store, l store.OrderList, between func()) []store.OrderView {
	t.Helper()
	var all []store.OrderView
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000, "the list never ends")
		page, next, err := st.ListOrders(context.Background(), l)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), l.Limit)
		all = append(all, page...)
		if next == nil {
			return all
		}
		require.Len(t, page, l.Limit, "only the last page is short")
		l.After = next
		between()
	}
}

func ids(orders []store.OrderView) []uuid.UUID {
	out := make([]uuid.UUID, len(orders))
	for i, o := range orders {
		out[i] = o.ID
	}
	return out
}

// TestCustomerOrderListPagesEveryOrderOnce pages through a customer's orders
// while the customer keeps placing more: every order there was when paging
// began is read exactly once, newest first, and none of another customer's.
func TestCustomerOrderListPagesEveryOrderOnce(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	shop, other := createMerchant(t, st, &merchantOpts{Capacity: 1000}), createMerchant(t, st, &merchantOpts{Capacity: 1000})
	tea, cake := createProduct(t, st, shop.ID, nil), createProduct(t, st, other.ID, nil)
	customer := "lister-" + uuid.NewString()

	orders := placeMany(t, st, shop.ID, tea.ID, customer, 70, false)
	orders = append(orders, placeMany(t, st, other.ID, cake.ID, customer, 60, true)...)
	placeMany(t, st, shop.ID, tea.ID, "someone-else-"+uuid.NewString(), 20, false)

	var placedWhilePaging []store.OrderView
	read := pageThrough(t, st, store.OrderList{CustomerID: customer, Limit: 9}, func() {
		placedWhilePaging = append(placedWhilePaging, *mustPlace(t, st, shop.ID, tea.ID, placeOpts{Customer: customer}))
	})
	require.Equal(t, newestFirst(orders), ids(read), "every order once, newest first; none placed while paging")
	require.NotEmpty(t, placedWhilePaging)

	// A fresh read starts with what was placed while paging.
	first, _, err := st.ListOrders(context.Background(), store.OrderList{CustomerID: customer, Limit: len(placedWhilePaging)})
	require.NoError(t, err)
	require.Equal(t, newestFirst(placedWhilePaging), ids(first))

	// A status narrows the list and keeps its order.
	var unpaid []store.OrderView
	for _, o := range append(orders, placedWhilePaging...) {
		if o.Status == domain.StatusAwaitingPayment {
			unpaid = append(unpaid, o)
		}
	}
	read = pageThrough(t, st, store.OrderList{CustomerID: customer, Status: domain.StatusAwaitingPayment, Limit: 200}, func() {})
	require.Equal(t, newestFirst(unpaid), ids(read))
}

// TestMerchantQueueListPagesInQueueOrder pages through a merchant's queue
// while the head is admitted and new orders join the tail: the orders that
// stay queued throughout are read exactly once and in queue order, the ones
// that joined after them follow, and every position is the order's place
// in line when its page was read.
func TestMerchantQueueListPagesInQueueOrder(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 0})
	p := createProduct(t, st, m.ID, nil)
	var queue []uuid.UUID
	for i := range 40 {
		o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i), PaymentRef: fmt.Sprintf("pay-%d", i)})
		require.Equal(t, domain.StatusQueued, o.Status)
		queue = append(queue, o.ID)
	}
	capacity := 0
	var joined []uuid.UUID
	l := store.OrderList{MerchantID: m.ID, Status: domain.StatusQueued, Limit: 6}
	var read []store.OrderView
	for {
		page, next, err := st.ListOrders(ctx, l)
		require.NoError(t, err)
		var ahead int
		if len(page) > 0 {
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE merchant_id = $1 AND status = 'queued' AND queue_seq < (SELECT queue_seq FROM orders WHERE id = $2)`,
				m.ID, page[0].ID).Scan(&ahead))
		}
		for i, o := range page {
			require.NotNil(t, o.QueuePosition)
			require.Equal(t, ahead+i+1, *o.QueuePosition, "position of %s", o.ID)
		}
		read = append(read, page...)
		if next == nil {
			break
		}
		l.After = next
		// The head moves on and the tail grows.
		capacity += 2
		_, err = st.UpdateMerchant(ctx, m.ID, store.MerchantPatch{Capacity: &capacity}, storeMeta())
		require.NoError(t, err)
		o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "late", PaymentRef: "late-" + uuid.NewString()})
		joined = append(joined, o.ID)
	}
	want := append(slices.Clone(queue), joined...)
	got := ids(read)
	// Orders admitted before their page was read are not on it; every other
	// order is, once, in the order it joined the line.
	require.Equal(t, slices.DeleteFunc(slices.Clone(want), func(id uuid.UUID) bool { return !slices.Contains(got, id) }), got)
	require.Subset(t, got, want[capacity:], "every order never admitted is read")
}

// TestMerchantOrderListNewestFirst pages through a merchant's accepted
// orders while more are accepted: newest first, each once.
func TestMerchantOrderListNewestFirst(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000})
	p := createProduct(t, st, m.ID, nil)
	accepted := placeMany(t, st, m.ID, p.ID, "a", 45, true)
	placeMany(t, st, m.ID, p.ID, "b", 5, false)
	read := pageThrough(t, st, store.OrderList{MerchantID: m.ID, Status: domain.StatusAccepted, Limit: 10}, func() {
		mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c", PaymentRef: "pay-" + uuid.NewString()})
	})
	require.Equal(t, newestFirst(accepted), ids(read))
}

func TestOrderListRefusesBadQueries(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	for name, l := range map[string]store.OrderList{
		"unknown status":           {CustomerID: "a", Status: "lost", Limit: 1},
		"nobody's list":            {Limit: 1},
		"both lists":               {CustomerID: "a", MerchantID: uuid.New(), Status: domain.StatusQueued, Limit: 1},
		"a merchant's of anything": {MerchantID: uuid.New(), Limit: 1},
		"no limit":                 {CustomerID: "a"},
	} {
		_, _, err := st.ListOrders(ctx, l)
		require.ErrorIs(t, err, &domain.Error{Code: domain.CodeValidation}, name)
	}
}

// TestListPagesAreServedByIndexes: every list's page, first or later, is a
// range read of an index in the list's order, with no sort of the rows.
func TestListPagesAreServedByIndexes(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	merchant := uuid.New()
	after := &store.PageKey{Seq: 10, At: time.Now(), ID: uuid.New()}
	var lists []store.OrderList
	for _, key := range []*store.PageKey{nil, after} {
		lists = append(lists,
			store.OrderList{CustomerID: "alice", Limit: 50, After: key},
			store.OrderList{CustomerID: "alice", Status: domain.StatusAccepted, Limit: 50, After: key},
			store.OrderList{MerchantID: merchant, Status: domain.StatusQueued, Limit: 50, After: key},
			store.OrderList{MerchantID: merchant, Status: domain.StatusCompleted, Limit: 50, After: key})
	}
	plans, err := st.PagePlans(context.Background(), lists, store.ListDeadLettersParams{Kind: store.DeadLetterWebhook, After: after})
	require.NoError(t, err)
	indexes := []string{"orders_customer_placed_idx", "orders_customer_placed_idx", "orders_queue_idx", "orders_merchant_status_idx"}
	for i, plan := range plans[:len(lists)] {
		require.Contains(t, plan, indexes[i%4], "%+v:\n%s", lists[i], plan)
		require.NotContains(t, plan, "Sort", "%+v:\n%s", lists[i], plan)
	}
	deadLetters := plans[len(lists)]
	require.Contains(t, deadLetters, "dead_letters_created_idx", deadLetters)
	require.NotContains(t, deadLetters, "Sort", deadLetters)
}

// TestOrderViewsReadOnlyTheLineAhead: an order's view counts the orders
// ahead of it in its merchant's line without reading the rest of the line,
// and the view of an order that is not queued, alone or in a list's page,
// reads none of it.
func TestOrderViewsReadOnlyTheLineAhead(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m, p, accepted := acceptedOrder(t, st, 1, "first")
	var line []*store.OrderView
	for i := range 40 {
		params := store.PlaceRequest{
			MerchantID: m.ID, CustomerID: fmt.Sprintf("c%d", i), PaymentRef: fmt.Sprintf("pay-%d", i),
			Lines:          []domain.LineRequest{{ProductID: p.ID, Quantity: 1}},
			IdempotencyKey: fmt.Sprintf("line-%d", i), RequestHash: []byte{byte(i)},
		}
		if i%10 == 9 {
			params.Lane = domain.LanePriority
		}
		res, err := st.PlaceOrder(ctx, params)
		require.NoError(t, err)
		require.Equal(t, domain.StatusQueued, res.Order.Status)
		line = append(line, res.Order)
	}

	read, err := st.QueueEntriesRead(ctx, accepted.ID, nil)
	require.NoError(t, err)
	require.Zero(t, read, "an accepted order's view")
	read, err = st.QueueEntriesRead(ctx, uuid.Nil, &store.OrderList{MerchantID: m.ID, Status: domain.StatusAccepted, Limit: 20})
	require.NoError(t, err)
	require.Zero(t, read, "a page of accepted orders")

	for _, o := range line {
		view, err := st.GetOrder(ctx, o.ID, admin)
		require.NoError(t, err)
		require.NotNil(t, view.QueuePosition)
		read, err := st.QueueEntriesRead(ctx, o.ID, nil)
		require.NoError(t, err)
		// The orders ahead, and at most one more entry per lane read to
		// find where the range ends.
		require.LessOrEqual(t, read, *view.QueuePosition-1+2, "order at position %d (%s lane)", *view.QueuePosition, view.Lane)
	}
}
