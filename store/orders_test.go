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
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

func TestPlacePayCompleteLifecycle(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	p := createProduct(t, st, m.ID, &productOpts{PriceCents: 350})

	o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "alice", Quantity: 2})
	require.Equal(t, domain.StatusAwaitingPayment, o.Status)
	require.Equal(t, int64(700), o.TotalCents)
	require.Equal(t, 1, o.Version)
	require.WithinDuration(t, o.PlacedAt.Add(900*time.Second), o.PaymentDeadline, time.Second)

	paid, err := st.PayOrder(ctx, o.ID, "pay-1", customer("alice"), "")
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, paid.Status)
	require.Equal(t, 3, paid.Version)

	again, err := st.PayOrder(ctx, o.ID, "pay-1", customer("alice"), "")
	require.NoError(t, err)
	require.Equal(t, 3, again.Version, "paying again with the same ref is a no-op")

	_, err = st.PayOrder(ctx, o.ID, "pay-2", customer("alice"), "")
	require.ErrorIs(t, err, domain.ErrInvalidTransition)

	_, err = st.CompleteOrder(ctx, o.ID, domain.Party{Actor: domain.ActorMerchant, MerchantID: uuid.New()}, "")
	require.ErrorIs(t, err, domain.ErrNotFound, "another merchant cannot see the order")

	done, err := st.CompleteOrder(ctx, o.ID, domain.Party{Actor: domain.ActorMerchant, MerchantID: m.ID}, "")
	require.NoError(t, err)
	require.Equal(t, domain.StatusCompleted, done.Status)
	require.NotNil(t, done.CompletedAt)

	events, err := st.OrderEvents(ctx, o.ID, customer("alice"))
	require.NoError(t, err)
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	require.Equal(t, []string{"order.placed", "order.paid", "order.accepted", "order.completed"}, types)

	_, err = st.GetOrder(ctx, o.ID, customer("bob"))
	require.ErrorIs(t, err, domain.ErrNotFound)

	got, err := st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, 0, got.Load.Active)
	require.Equal(t, 1, countRows(t, b.pool, "orders"))
}

func TestIdempotentPlacement(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, nil)

	first, err := place(ctx, st, m.ID, p.ID, placeOpts{Key: "k1", PaymentRef: "r"})
	require.NoError(t, err)
	require.False(t, first.Replayed)
	second, err := place(ctx, st, m.ID, p.ID, placeOpts{Key: "k1", PaymentRef: "r"})
	require.NoError(t, err)
	require.True(t, second.Replayed)
	require.Equal(t, first.Order.ID, second.Order.ID)

	_, err = place(ctx, st, m.ID, p.ID, placeOpts{Key: "k1", PaymentRef: "r", Quantity: 2})
	require.ErrorIs(t, err, &domain.Error{Code: domain.CodeIdempotencyReused})

	// The same key belongs to each customer separately.
	other, err := place(ctx, st, m.ID, p.ID, placeOpts{Key: "k1", Customer: "bob", PaymentRef: "r"})
	require.NoError(t, err)
	require.NotEqual(t, first.Order.ID, other.Order.ID)

	// Racing the same key from many goroutines creates one order.
	var wg sync.WaitGroup
	ids := make(chan uuid.UUID, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := place(ctx, st, m.ID, p.ID, placeOpts{Key: "race", Customer: "carol"})
			if err != nil {
				t.Error(err)
				return
			}
			ids <- res.Order.ID
		}()
	}
	wg.Wait()
	close(ids)
	distinct := map[uuid.UUID]bool{}
	for id := range ids {
		distinct[id] = true
	}
	require.Len(t, distinct, 1)
	require.Equal(t, 3, countRows(t, b.pool, "orders"))
}

// TestKeyPlacedMeanwhile: a batch reads its requests' keys without a lock.
// While another transaction is placing the same key (here one held open
// from outside, its order row written), the batch decides the request as new
// and its order's insert waits for that transaction at the commit; once that
// one commits, the batch runs again and answers a replay of its order (the
// same body) or idempotency_key_reused (another body); once it rolls back,
// the batch places the order.
func TestKeyPlacedMeanwhile(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(50)})
	model := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "model"})
	for _, c := range []struct {
		name     string
		quantity int
		commit   bool
	}{{"same body, committed", 1, true}, {"another body, committed", 2, true}, {"rolled back", 1, false}} {
		t.Run(c.name, func(t *testing.T) {
			key := "meanwhile " + c.name
			tx, err := b.pool.Begin(ctx)
			require.NoError(t, err)
			defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
			var other uuid.UUID
			require.NoError(t, tx.QueryRow(ctx, `INSERT INTO orders (id, merchant_id, customer_id, items, total_cents, status,
					version, placed_at, payment_deadline, load, lane, idempotency_key, request_hash)
				SELECT gen_random_uuid(), merchant_id, 'carol', items, total_cents, status, version, placed_at,
					payment_deadline, load, lane, $2, $3
				FROM orders WHERE id = $1 RETURNING id`,
				model.ID, key, requestHash(m.ID, p.ID, placeOpts{Quantity: 1})).Scan(&other))
			type outcome struct {
				res *store.PlaceResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: "carol", Key: key, Quantity: c.quantity})
				done <- outcome{res, err}
			}()
			require.Eventually(t, func() bool {
				var waiting int
				require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
					WHERE NOT l.granted AND l.locktype = 'transactionid' AND a.datname = current_database()`).Scan(&waiting))
				return waiting > 0
			}, 10*time.Second, 5*time.Millisecond, "the batch's insert waits for the key's other transaction")
			if c.commit {
				require.NoError(t, tx.Commit(ctx))
			} else {
				require.NoError(t, tx.Rollback(ctx))
			}
			got := <-done
			var keyed int
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE merchant_id = $1 AND customer_id = 'carol' AND idempotency_key = $2`,
				m.ID, key).Scan(&keyed))
			require.Equal(t, 1, keyed)
			switch {
			case !c.commit:
				require.NoError(t, got.err)
				require.False(t, got.res.Replayed)
				require.NotEqual(t, other, got.res.Order.ID)
			case c.quantity == 1:
				require.NoError(t, got.err)
				require.True(t, got.res.Replayed)
				require.Equal(t, other, got.res.Order.ID)
			default:
				require.ErrorIs(t, got.err, &domain.Error{Code: domain.CodeIdempotencyReused})
			}
		})
	}
	var held int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT 50 - sum(remaining) FROM stock_buckets WHERE product_id = $1`, p.ID).Scan(&held))
	require.Equal(t, 2, held, "the model's unit and the placed order's: a batch run again kept nothing of its first run")
}

// TestOneKeyRacedAcrossProcesses: requests with one key sent at once to
// three processes (stores of their own, each with its lanes) are decided in
// transactions that run side by side: each key makes one order, which every
// request answers, and one request only places it.
func TestOneKeyRacedAcrossProcesses(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	stores := []*store.Store{st, newStore(store.Config{Pool: b.pool}), newStore(store.Config{Pool: b.pool})}
	m := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, nil)
	const rounds, perRound = 20, 9
	for round := range rounds {
		key := fmt.Sprint("race-", round)
		var wg sync.WaitGroup
		results := make(chan *store.PlaceResult, perRound)
		for i := range perRound {
			wg.Go(func() {
				// Unpaid requests spread over every lane of each process.
				res, err := place(ctx, stores[i%len(stores)], m.ID, p.ID, placeOpts{Customer: "carol", Key: key})
				if err != nil {
					t.Error(err)
					return
				}
				results <- res
			})
		}
		wg.Wait()
		close(results)
		ids, placed := map[uuid.UUID]bool{}, 0
		for res := range results {
			ids[res.Order.ID] = true
			if !res.Replayed {
				placed++
			}
		}
		require.Len(t, ids, 1, "round %d", round)
		require.Equal(t, 1, placed, "round %d", round)
	}
	require.Equal(t, rounds, countRows(t, b.pool, "orders"))
}

// TestIdempotencyKeyPerMerchant: a key is scoped by merchant, customer and
// key, so the same key sent to two merchants places two orders, each replayed
// at its own merchant, also when the requests race in the same batches.
func TestIdempotencyKeyPerMerchant(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m1, m2 := createMerchant(t, st, nil), createMerchant(t, st, nil)
	p1, p2 := createProduct(t, st, m1.ID, nil), createProduct(t, st, m2.ID, nil)

	first, err := place(ctx, st, m1.ID, p1.ID, placeOpts{Key: "k1", PaymentRef: "r"})
	require.NoError(t, err)
	second, err := place(ctx, st, m2.ID, p2.ID, placeOpts{Key: "k1", PaymentRef: "r"})
	require.NoError(t, err)
	require.False(t, second.Replayed, "the key at another merchant is a new order")
	require.NotEqual(t, first.Order.ID, second.Order.ID)
	require.Equal(t, m2.ID, second.Order.MerchantID)
	for _, want := range []struct {
		res               *store.PlaceResult
		merchant, product uuid.UUID
	}{{first, m1.ID, p1.ID}, {second, m2.ID, p2.ID}} {
		again, err := place(ctx, st, want.merchant, want.product, placeOpts{Key: "k1", PaymentRef: "r"})
		require.NoError(t, err)
		require.True(t, again.Replayed)
		require.Equal(t, want.res.Order.ID, again.Order.ID)
	}

	var wg sync.WaitGroup
	ids := make(chan uuid.UUID, 20)
	for i := range 20 {
		m, p := m1.ID, p1.ID
		if i%2 == 1 {
			m, p = m2.ID, p2.ID
		}
		wg.Go(func() {
			res, err := place(ctx, st, m, p, placeOpts{Key: "race", Customer: "carol"})
			if err != nil {
				t.Error(err)
				return
			}
			ids <- res.Order.ID
		})
	}
	wg.Wait()
	close(ids)
	distinct := map[uuid.UUID]bool{}
	for id := range ids {
		distinct[id] = true
	}
	require.Len(t, distinct, 2, "one order per merchant")
	require.Equal(t, 4, countRows(t, b.pool, "orders"))
	var keys int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE idempotency_key IS NOT NULL`).Scan(&keys))
	require.Equal(t, 4, keys)
}

// TestOneKeyTwoBodiesInOneBatch: two requests of one customer with one
// Idempotency-Key and different bodies arrive while the merchant's row is
// locked, so that they are decided in one batch: the first to arrive places
// its order, the second is refused idempotency_key_reused and writes
// nothing; the key keeps the first body, whose retry replays the order.
func TestOneKeyTwoBodiesInOneBatch(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 10})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(10)})
	release := holdLock(t, b.pool, `SELECT 1 FROM merchants WHERE id = $1 FOR NO KEY UPDATE`, m.ID)
	// The filler's batch waits for the lock; the two gather behind it.
	filler := placeAsync(st, m.ID, p.ID, placeOpts{Customer: "filler", PaymentRef: "r"})
	time.Sleep(50 * time.Millisecond)
	first := placeAsync(st, m.ID, p.ID, placeOpts{Customer: "carol", Key: "k", PaymentRef: "r", Quantity: 1})
	time.Sleep(20 * time.Millisecond)
	second := placeAsync(st, m.ID, p.ID, placeOpts{Customer: "carol", Key: "k", PaymentRef: "r", Quantity: 3})
	time.Sleep(50 * time.Millisecond)
	release()
	require.NoError(t, (<-filler).err)
	won, lost := <-first, <-second
	require.NoError(t, won.err)
	require.False(t, won.res.Replayed)
	require.ErrorIs(t, lost.err, &domain.Error{Code: domain.CodeIdempotencyReused})

	var orders, keys, held int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE customer_id = 'carol'),
		(SELECT count(*) FROM orders WHERE customer_id = 'carol' AND idempotency_key IS NOT NULL), (SELECT 10 - sum(remaining) FROM stock_buckets WHERE product_id = $1)`, p.ID).
		Scan(&orders, &keys, &held))
	require.Equal(t, 1, orders)
	require.Equal(t, 1, keys)
	require.Equal(t, 2, held, "the filler's unit and the first body's")
	again, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: "carol", Key: "k", PaymentRef: "r", Quantity: 1})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, won.res.Order.ID, again.Order.ID)
	require.Empty(t, violations(t, st))
}

func TestFailedRequestWritesNothing(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, nil)
	other := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(1)})
	foreign := createProduct(t, st, other.ID, nil)
	tables := []string{"events", "orders", "outbox", "purchase_claims", "river_job"}
	before := map[string]int{}
	for _, tbl := range tables {
		before[tbl] = countRows(t, b.pool, tbl)
	}
	cases := []struct {
		name  string
		lines []domain.LineRequest
		code  domain.Code
	}{
		{"too much", []domain.LineRequest{{ProductID: p.ID, Quantity: 2}}, domain.CodeSoldOut},
		{"foreign product", []domain.LineRequest{{ProductID: foreign.ID, Quantity: 1}}, domain.CodeValidation},
		{"unknown product", []domain.LineRequest{{ProductID: uuid.New(), Quantity: 1}}, domain.CodeNotFound},
		{"zero quantity", []domain.LineRequest{{ProductID: p.ID, Quantity: 0}}, domain.CodeValidation},
		{"no lines", nil, domain.CodeValidation},
	}
	for _, tc := range cases {
		_, err := st.PlaceOrder(ctx, store.PlaceRequest{
			MerchantID: m.ID, CustomerID: "alice", Lines: tc.lines, IdempotencyKey: "k-" + tc.name, RequestHash: []byte(tc.name),
		})
		require.Equal(t, tc.code, domain.ErrorCode(err), tc.name)
	}
	_, err := st.PlaceOrder(ctx, store.PlaceRequest{
		MerchantID: uuid.New(), CustomerID: "alice", Lines: []domain.LineRequest{{ProductID: p.ID, Quantity: 1}},
		IdempotencyKey: "k-unknown-merchant", RequestHash: []byte("x"),
	})
	require.ErrorIs(t, err, domain.ErrNotFound)
	for _, tbl := range tables {
		require.Equal(t, before[tbl], countRows(t, b.pool, tbl), tbl)
	}
	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 1, *got.StockRemaining)
}

func TestAdmissionQueueFIFO(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 2})
	p := createProduct(t, st, m.ID, nil)

	var orders []*store.OrderView
	for i := range 6 {
		orders = append(orders, mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i), PaymentRef: "r"}))
	}
	require.Equal(t, domain.StatusAccepted, orders[0].Status)
	require.Equal(t, domain.StatusAccepted, orders[1].Status)
	for i, o := range orders[2:] {
		require.Equal(t, domain.StatusQueued, o.Status)
		require.Equal(t, i+1, *o.QueuePosition)
		require.NotNil(t, o.EtaSeconds)
	}
	merchant := domain.Party{Actor: domain.ActorMerchant, MerchantID: m.ID}

	// Cancelling a queued order takes it out of line; those behind move up.
	_, err := st.CancelOrder(ctx, orders[3].ID, "changed my mind", customer("c3"), "")
	require.NoError(t, err)
	o5, err := st.GetOrder(ctx, orders[5].ID, admin)
	require.NoError(t, err)
	require.Equal(t, 3, *o5.QueuePosition)

	// A customer cannot cancel an accepted order; completing a queued one is refused.
	_, err = st.CancelOrder(ctx, orders[0].ID, "", customer("c0"), "")
	require.ErrorIs(t, err, domain.ErrInvalidTransition)
	_, err = st.CompleteOrder(ctx, orders[2].ID, merchant, "")
	require.ErrorIs(t, err, domain.ErrInvalidTransition)

	// Completing frees a unit for the head of the queue in the same transaction.
	_, err = st.CompleteOrder(ctx, orders[0].ID, merchant, "")
	require.NoError(t, err)
	o2, err := st.GetOrder(ctx, orders[2].ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, o2.Status)
	require.Nil(t, o2.QueuePosition)

	// A merchant cancelling an accepted order frees its unit too.
	_, err = st.CancelOrder(ctx, orders[1].ID, "out of milk", merchant, "")
	require.NoError(t, err)
	o4, err := st.GetOrder(ctx, orders[4].ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, o4.Status)

	queued, err := st.ListMerchantOrders(ctx, m.ID, domain.StatusQueued, 10)
	require.NoError(t, err)
	require.Len(t, queued, 1)
	require.Equal(t, orders[5].ID, queued[0].ID)
	require.Equal(t, 1, *queued[0].QueuePosition)

	got, err := st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, store.LoadView{Capacity: 2, CapacityUnit: domain.UnitOrders, Active: 2, ActiveOrders: 2, Queued: 1, QueuedUnits: 1, EstWaitSeconds: got.Load.EstWaitSeconds, Open: true, Busy: true}, got.Load)

	// A newly paid order arriving while units are free and the line is not
	// empty queues behind the line. Raising the capacity by four with three
	// orders waiting admits one inline and leaves the rest to a drain job,
	// which no worker runs here: units stay free with two orders in line.
	for i := 6; i < 8; i++ {
		o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i), PaymentRef: "r"})
		require.Equal(t, domain.StatusQueued, o.Status)
		orders = append(orders, o)
	}
	oneInline := st.Config()
	oneInline.InlineDrainLimit = 1
	six := 6
	got, err = store.New(oneInline).UpdateMerchant(ctx, m.ID, store.MerchantPatch{Capacity: &six}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, 3, got.Load.Active)
	require.Equal(t, 2, got.Load.Queued, "units free while two orders wait")
	late := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "late", PaymentRef: "r"})
	require.Equal(t, domain.StatusQueued, late.Status, "a new order overtook the line while units were free")
	require.Equal(t, 3, *late.QueuePosition)
	// The drain admits the line in its order, the late order last.
	admitted, err := st.DrainMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, 3, admitted)
	line := []uuid.UUID{orders[6].ID, orders[7].ID, late.ID}
	rows, err := b.pool.Query(ctx, `SELECT stream_id FROM events WHERE type = 'order.accepted' AND stream_id = ANY($1) ORDER BY global_position`, line)
	require.NoError(t, err)
	inOrder, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.Equal(t, line, inOrder, "admitted out of line")
	require.Empty(t, violations(t, st))
}

// TestInlineDrainLeavesTheRestToAJob: a drain that its limit stops while
// units are free leaves a drain job for the rest, also when the limit
// admits none inline. Before, the job was left only while more units were
// free than the limit (none after two of three, none at all at a limit of
// 0), and the line waited for the sweep.
func TestInlineDrainLeavesTheRestToAJob(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	drainJobs := func(merchantID uuid.UUID) int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'drain_merchant' AND args->>'merchant_id' = $1`,
			merchantID.String()).Scan(&n))
		return n
	}
	for _, tc := range []struct {
		limit, queued, capacity, active int
	}{
		{limit: 2, queued: 5, capacity: 3, active: 2},
		{limit: -1, queued: 1, capacity: 1, active: 0},
	} {
		m := createMerchant(t, st, &merchantOpts{Capacity: 0})
		p := createProduct(t, st, m.ID, nil)
		for i := range tc.queued {
			require.Equal(t, domain.StatusQueued, mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i), PaymentRef: "r"}).Status)
		}
		cfg := st.Config()
		cfg.InlineDrainLimit = tc.limit
		got, err := store.New(cfg).UpdateMerchant(ctx, m.ID, store.MerchantPatch{Capacity: &tc.capacity}, store.Meta{Actor: domain.ActorAdmin})
		require.NoError(t, err)
		require.Equal(t, tc.active, got.Load.Active, "limit %d", tc.limit)
		require.Equal(t, 1, drainJobs(m.ID), "limit %d: units free, orders in line, and no drain job", tc.limit)
	}
}

func TestCapacityChanges(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 0})
	p := createProduct(t, st, m.ID, nil)
	var ids []uuid.UUID
	for i := range 5 {
		o := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i), PaymentRef: "r"})
		require.Equal(t, domain.StatusQueued, o.Status, "capacity 0 queues everything")
		ids = append(ids, o.ID)
	}
	three := 3
	got, err := st.UpdateMerchant(ctx, m.ID, store.MerchantPatch{Capacity: &three}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, 3, got.Load.Active)
	require.Equal(t, 2, got.Load.Queued)
	for i, id := range ids {
		o, err := st.GetOrder(ctx, id, admin)
		require.NoError(t, err)
		if i < 3 {
			require.Equal(t, domain.StatusAccepted, o.Status, "order %d admitted in queue order", i)
		} else {
			require.Equal(t, domain.StatusQueued, o.Status)
		}
	}
	one := 1
	got, err = st.UpdateMerchant(ctx, m.ID, store.MerchantPatch{Capacity: &one}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, 3, got.Load.Active, "lowering capacity evicts nobody")
	bad := -1
	_, err = st.UpdateMerchant(ctx, m.ID, store.MerchantPatch{Capacity: &bad}, store.Meta{})
	require.ErrorIs(t, err, &domain.Error{Code: domain.CodeValidation})

	events, err := st.ReadStream(ctx, m.ID, m.ID)
	require.NoError(t, err)
	require.Len(t, events, 3, "created and two capacity changes, each auditable")
}

// TestAdmissionUnderConcurrency places, pays and completes the orders of one
// merchant from many goroutines through three stores on one database (three
// processes' worth of lanes and batches contending for one merchant lock):
// replaying the log, active never exceeds the capacity and every admission
// is the head of the line; every audit is clean, the clocks' included.
func TestAdmissionUnderConcurrency(t *testing.T) {
	t.Parallel()
	stores, b := instances(t, 3)
	st := stores[0]
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 5})
	p := createProduct(t, st, m.ID, nil)
	const total = 600

	var wg sync.WaitGroup
	var next atomic.Int64
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
				customer := fmt.Sprintf("c%d", i)
				if i%4 == 0 {
					// Placed unpaid, paid through another instance.
					res, err := place(ctx, via, m.ID, p.ID, placeOpts{Customer: customer})
					if err == nil {
						_, err = stores[(i+1)%int64(len(stores))].PayOrder(ctx, res.Order.ID, "r", domain.Party{Actor: domain.ActorCustomer, Subject: customer}, "")
					}
					if err != nil {
						t.Error(err)
						return
					}
					continue
				}
				if _, err := place(ctx, via, m.ID, p.ID, placeOpts{Customer: customer, PaymentRef: "r"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	merchant := domain.Party{Actor: domain.ActorMerchant, MerchantID: m.ID}
	// Through every instance, completions of accepted orders and, now and
	// then, cancellations of queued ones (which the head read with the
	// locks holds itself) and of accepted ones: each lets the head in.
	var ended, cancelled atomic.Int64
	stop := make(chan struct{})
	var cg sync.WaitGroup
	for w := range 2 * len(stores) {
		cg.Add(1)
		go func() {
			defer cg.Done()
			st := stores[w%len(stores)]
			for {
				select {
				case <-stop:
					return
				default:
				}
				status := domain.StatusAccepted
				if w >= len(stores) {
					status = domain.StatusQueued
				}
				orders, err := st.ListMerchantOrders(ctx, m.ID, status, 5)
				if err != nil {
					t.Error(err)
					return
				}
				if len(orders) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				o := orders[rand.IntN(len(orders))]
				switch {
				case w < len(stores):
					_, err = st.CompleteOrder(ctx, o.ID, merchant, "")
				case cancelled.Load() < total/10:
					_, err = st.CancelOrder(ctx, o.ID, "sold out", merchant, "")
					if err == nil {
						cancelled.Add(1)
					}
				default:
					time.Sleep(time.Millisecond)
					continue
				}
				if err == nil {
					ended.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	eventually(t, 60*time.Second, func() bool { return ended.Load() >= total }, "every order completed or cancelled")
	require.Positive(t, cancelled.Load(), "orders were cancelled while others completed")
	close(stop)
	cg.Wait()

	// Capacity and queue order judged from the log, not from what each
	// decision recorded of itself: replaying the merchant's events in
	// commit order rebuilds active and the line, and every admission must
	// be the line's head and leave active within capacity.
	admissions, oversized, _ := replayAdmissions(t, b, m.ID, 5)
	require.Zero(t, oversized, "orders admitted over capacity")
	require.GreaterOrEqual(t, admissions, total-int(cancelled.Load()))
	got, err := st.GetMerchant(ctx, m.ID)
	require.NoError(t, err)
	require.Equal(t, 0, got.Load.Active)
	require.Equal(t, 0, got.Load.Queued)
	require.Empty(t, violations(t, st))
}

// An order paid by the request that places it and accepted or queued at
// once is one event, order.accepted or order.queued carrying the placement
// and its payment, and its row says paid.
func TestPaidPlacementAppendsItsEvents(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	p := createProduct(t, st, m.ID, nil)
	for _, want := range []struct {
		status domain.OrderStatus
		types  []string
	}{{domain.StatusAccepted, []string{"order.accepted"}}, {domain.StatusQueued, []string{"order.queued"}}} {
		o := mustPlace(t, st, m.ID, p.ID, placeOpts{PaymentRef: "pay-1"})
		require.Equal(t, want.status, o.Status)
		require.Equal(t, len(want.types), o.Version)
		require.NotNil(t, o.PaidAt)
		events, err := st.OrderEvents(ctx, o.ID, customer("alice"))
		require.NoError(t, err)
		var types []string
		for _, e := range events {
			types = append(types, e.Type)
		}
		require.Equal(t, want.types, types)
		require.Contains(t, string(events[0].Data), `"payment_ref": "pay-1"`)
		got, err := st.GetOrder(ctx, o.ID, customer("alice"))
		require.NoError(t, err)
		require.Equal(t, len(want.types), got.Version)
		require.Equal(t, o.PaidAt.UTC(), got.PaidAt.UTC())
	}
}

// TestOnlyItsMerchantCompletesAnOrder: the store itself refuses a
// completion by the order's own customer or by another merchant, whatever
// the caller checked before, and the order stays accepted.
func TestOnlyItsMerchantCompletesAnOrder(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m, _, o := acceptedOrder(t, st, 2, "a")
	_, err := st.CompleteOrder(ctx, o.ID, customer("a"), "")
	require.Equal(t, domain.CodeForbidden, domain.ErrorCode(err), "its customer: %v", err)
	other := createMerchant(t, st, nil)
	_, err = st.CompleteOrder(ctx, o.ID, domain.Party{Actor: domain.ActorMerchant, MerchantID: other.ID}, "")
	require.Equal(t, domain.CodeNotFound, domain.ErrorCode(err), "another merchant: %v", err)
	got, err := st.GetOrder(ctx, o.ID, admin)
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, got.Status)
	_, err = st.CompleteOrder(ctx, o.ID, domain.Party{Actor: domain.ActorMerchant, MerchantID: m.ID}, "")
	require.NoError(t, err)
}
