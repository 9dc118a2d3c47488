package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestWeightedAdmissionUnderConcurrency is TestAdmissionUnderConcurrency for
// a merchant counting items: capacity 10, orders of 1-6 items, one in five in
// the priority lane and some moved there while queued, placed and paid
// through three stores (three processes' lanes and batches) by 8 goroutines,
// which also cancel one in nine while it is queued, while 3 more complete. Replaying the log in commit order, every admission
// is the head of the line (the priority lane's while it has orders) and
// leaves active <= capacity, unless the order is alone in the kitchen.
func TestWeightedAdmissionUnderConcurrency(t *testing.T) {
	t.Parallel()
	stores, b := instances(t, 3)
	st := stores[0]
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 10, CapacityUnit: domain.UnitItems})
	p := createProduct(t, st, m.ID, nil)
	const total = 400
	merchant := domain.Party{Actor: domain.ActorMerchant, MerchantID: m.ID}

	var wg sync.WaitGroup
	var next, cancelled atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				via := stores[i%int64(len(stores))]
				lane := domain.LaneNormal
				if i%5 == 0 {
					lane = domain.LanePriority
				}
				customer := fmt.Sprintf("c%d", i)
				params := store.PlaceRequest{MerchantID: m.ID, CustomerID: customer, Lane: lane,
					Lines:          []domain.LineRequest{{ProductID: p.ID, Quantity: 1 + rand.IntN(6)}},
					IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")}
				if i%4 != 0 {
					params.PaymentRef = "r"
				}
				res, err := via.PlaceOrder(ctx, params)
				if err == nil && params.PaymentRef == "" {
					// Placed unpaid, paid through another instance.
					_, err = stores[(i+1)%int64(len(stores))].PayOrder(ctx, res.Order.ID, "r", domain.Party{Actor: domain.ActorCustomer, Subject: customer}, "")
				}
				if err != nil {
					t.Error(err)
					return
				}
				if i%7 == 0 {
					// Moves it if it is still queued; 409 otherwise.
					_, _ = via.PrioritizeOrder(ctx, res.Order.ID, "", merchant, "")
				}
				if i%9 == 0 {
					// Its customer cancels it through a third instance if it
					// is still queued (409 once admitted): a queued order
					// that leaves may let the one behind it in.
					who := domain.Party{Actor: domain.ActorCustomer, Subject: customer}
					if _, err := stores[(i+2)%int64(len(stores))].CancelOrder(ctx, res.Order.ID, "", who, ""); err == nil {
						cancelled.Add(1)
					}
				}
			}
		}()
	}
	var completed atomic.Int64
	stop := make(chan struct{})
	var cg sync.WaitGroup
	for w := range 3 {
		cg.Add(1)
		go func() {
			defer cg.Done()
			st := stores[w]
			for {
				select {
				case <-stop:
					return
				default:
				}
				accepted, err := st.ListMerchantOrders(ctx, m.ID, domain.StatusAccepted, 5)
				if err != nil {
					t.Error(err)
					return
				}
				if len(accepted) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				o := accepted[rand.IntN(len(accepted))]
				if _, err := st.CompleteOrder(ctx, o.ID, merchant, ""); err == nil {
					completed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	eventually(t, 90*time.Second, func() bool { return completed.Load()+cancelled.Load() >= total }, "every order completed or cancelled")
	close(stop)
	cg.Wait()

	admissions, oversized, priorityFirst := replayAdmissions(t, b, m.ID, 10)
	require.Positive(t, cancelled.Load(), "some queued orders were cancelled")
	require.Equal(t, total, admissions+int(cancelled.Load()))
	require.Positive(t, priorityFirst, "some priority order went before waiting normal ones")
	t.Logf("%d admissions, %d of them alone and over capacity", admissions, oversized)
	got, err := st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Zero(t, got.Load.Active)
	require.Zero(t, got.Load.Queued)
	require.Empty(t, violations(t, st))
}

type waiting struct {
	id   uuid.UUID
	seq  int64
	load int
}

// replayAdmissions replays a merchant's order events in commit order (the
// merchant's lock serializes its decisions, and the log keeps their order)
// and checks each admission against the line as it stood: the head of the
// priority lane while it has orders, else of the normal lane, each lane in
// sequence order, and active <= capacity after it unless the order is alone.
// It returns the admissions, those over capacity alone, and the priority
// admissions made while normal orders waited.
func replayAdmissions(t *testing.T, b *testBundle, merchantID uuid.UUID, capacity int) (admissions, oversized, priorityFirst int) {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT e.stream_id, e.type, e.data FROM events e JOIN orders o ON o.id = e.stream_id
		WHERE o.merchant_id = $1 ORDER BY e.global_position`, merchantID)
	require.NoError(t, err)
	defer rows.Close()
	load := map[uuid.UUID]int{}
	lane := map[uuid.UUID]domain.Lane{}
	lines := map[domain.Lane][]waiting{}
	remove := func(l domain.Lane, id uuid.UUID) {
		for i, w := range lines[l] {
			if w.id == id {
				lines[l] = append(lines[l][:i:i], lines[l][i+1:]...)
				return
			}
		}
	}
	head := func() (waiting, domain.Lane, bool) {
		for _, l := range []domain.Lane{domain.LanePriority, domain.LaneNormal} {
			if q := lines[l]; len(q) > 0 {
				best := q[0]
				for _, w := range q {
					if w.seq < best.seq {
						best = w
					}
				}
				return best, l, true
			}
		}
		return waiting{}, "", false
	}
	active := 0
	for rows.Next() {
		var id uuid.UUID
		var typ string
		var data []byte
		require.NoError(t, rows.Scan(&id, &typ, &data))
		e, err := domain.DecodeEvent(typ, data)
		require.NoError(t, err)
		switch d := e.Data.(type) {
		case domain.OrderPlaced:
			load[id], lane[id] = max(d.Load, 1), d.Lane
		case domain.OrderQueued:
			if d.Placed != nil {
				load[id], lane[id] = max(d.Placed.Load, 1), d.Placed.Lane
			}
			lines[lane[id]] = append(lines[lane[id]], waiting{id, d.Seq, load[id]})
		case domain.OrderPrioritized:
			remove(domain.LaneNormal, id)
			lane[id] = domain.LanePriority
			lines[domain.LanePriority] = append(lines[domain.LanePriority], waiting{id, d.Seq, load[id]})
		case domain.OrderAccepted:
			if d.Placed != nil {
				load[id], lane[id] = max(d.Placed.Load, 1), d.Placed.Lane
			}
			admissions++
			if d.FromQueue {
				h, l, ok := head()
				require.True(t, ok, "order %s admitted from an empty queue", id)
				require.Equal(t, h.id, id, "order %s admitted while %s (%s lane) was the head", id, h.id, l)
				remove(l, id)
				if l == domain.LanePriority && len(lines[domain.LaneNormal]) > 0 {
					priorityFirst++
				}
			} else {
				ahead := len(lines[domain.LanePriority])
				if lane[id] != domain.LanePriority {
					ahead += len(lines[domain.LaneNormal])
				} else if len(lines[domain.LaneNormal]) > 0 {
					priorityFirst++
				}
				require.Zero(t, ahead, "order %s admitted directly past a waiting order", id)
			}
			active += load[id]
			require.Equal(t, active, d.ActiveAfter, "the decision's record of active units")
			if active > capacity {
				require.Equal(t, load[id], active, "order %s over capacity with company", id)
				oversized++
			}
		case domain.OrderCompleted:
			active -= load[id]
		case domain.OrderCancelled:
			if d.From == domain.StatusAccepted {
				active -= load[id]
			}
			if d.From == domain.StatusQueued {
				remove(lane[id], id)
			}
		case domain.OrderExpired:
			remove(lane[id], id)
		}
	}
	require.NoError(t, rows.Err())
	return admissions, oversized, priorityFirst
}

// TestCancellingTheHeadThatDidNotFitLetsTheNextIn: in a kitchen of 3 items
// with 2 in it, a queued order of 2 does not fit and one of 1 waits behind
// it; cancelling the first (whose own row the cancellation's read of the
// queue's head, taken with the locks, still finds queued) admits the second
// at once.
func TestCancellingTheHeadThatDidNotFitLetsTheNextIn(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 3, CapacityUnit: domain.UnitItems})
	p := createProduct(t, st, m.ID, nil)
	in := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "in", PaymentRef: "r", Quantity: 2})
	require.Equal(t, domain.StatusAccepted, in.Status)
	big := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "big", PaymentRef: "r", Quantity: 2})
	small := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "small", PaymentRef: "r", Quantity: 1})
	require.Equal(t, domain.StatusQueued, big.Status)
	require.Equal(t, domain.StatusQueued, small.Status, "nothing overtakes a head that does not fit")

	_, err := st.CancelOrder(ctx, big.ID, "changed my mind", domain.Party{Actor: domain.ActorCustomer, Subject: "big"}, "")
	require.NoError(t, err)
	got, err := st.GetOrder(ctx, small.ID, domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, got.Status)
	require.Empty(t, violations(t, st))
}
