package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

// roundTrips records the statements a pool sends, grouped by the round trip
// that carried them: one statement alone, or every statement of a batch.
type roundTrips struct {
	mu    sync.Mutex
	trips [][]string
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = append(r.trips, []string{d.SQL})
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	var trip []string
	for _, q := range d.Batch.QueuedQueries {
		trip = append(trip, q.SQL)
	}
	r.trips = append(r.trips, trip)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// reset forgets what was sent so far.
func (r *roundTrips) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = nil
}

// containing returns the round trips that carried a statement containing s.
func (r *roundTrips) containing(s string) [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]string
	for _, trip := range r.trips {
		for _, sql := range trip {
			if strings.Contains(sql, s) {
				out = append(out, trip)
				break
			}
		}
	}
	return out
}

// tracedStore is a store on a new database whose pool records its round trips.
func tracedStore(t *testing.T) (*store.Store, *roundTrips) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(storetest.URL(t))
	require.NoError(t, err)
	rt := &roundTrips{}
	cfg.ConnConfig.Tracer = rt
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	return newStore(store.Config{Pool: pool, Jobs: ins}), rt
}

// TestFlashBuyerClaimsAndTakesInOneRoundTrip: a buyer of a limited product
// with a per-customer limit sends the claim and the take of a free bucket
// together; a refused claim still leaves the units for others.
func TestFlashBuyerClaimsAndTakesInOneRoundTrip(t *testing.T) {
	t.Parallel()
	st, rt := tracedStore(t)
	ctx := context.Background()
	m := createMerchant(t, st, nil)
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(3), PerUserLimit: intp(1)})

	rt.reset()
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "first"})
	claims := rt.containing("INSERT INTO purchase_claims")
	require.Len(t, claims, 1, "one round trip claims")
	require.Contains(t, strings.Join(claims[0], "\n"), "UPDATE stock_buckets", "the take travels with the claim")

	// Over the limit: refused, and the unit it took goes back.
	_, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: "first"})
	require.ErrorIs(t, err, &domain.Error{Code: domain.CodePurchaseLimit})
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "second"})
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "third"})
	_, err = place(ctx, st, m.ID, p.ID, placeOpts{Customer: "fourth"})
	require.ErrorIs(t, err, &domain.Error{Code: domain.CodeSoldOut})
	got, err := st.GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, 0, *got.StockRemaining)
}

// TestPaymentTimerCarriesItsMerchant: a payment timer's close that names
// the order's merchant (as a River job's args do, on Citus) locks the order
// by key at once; only a close that does not know the merchant (a job from
// before) asks for it.
func TestPaymentTimerCarriesItsMerchant(t *testing.T) {
	t.Parallel()
	st, rt := tracedStore(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{PaymentTimeout: 1})
	p := createProduct(t, st, m.ID, nil)
	known := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "known"})
	unknown := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "unknown"})

	clock.Advance(2 * time.Second)
	rt.reset()
	closed, err := st.CloseUnpaid(ctx, m.ID, known.ID)
	require.NoError(t, err)
	require.True(t, closed)
	require.Empty(t, rt.containing("SELECT id, merchant_id FROM orders"), "the close asked for a merchant it was given")

	closed, err = st.CloseUnpaid(ctx, uuid.Nil, unknown.ID)
	require.NoError(t, err)
	require.True(t, closed)
	require.Len(t, rt.containing("SELECT id, merchant_id FROM orders"), 1)
}

// TestDropJoinBatchNamesItsMerchants: every statement of a join batch that
// reads, locks or updates a drop's rows names the merchants of the batch, so
// that on Citus, where a batch is one merchant's, it runs on one shard (a
// lock of drops by id alone spans every shard, which Citus refuses).
func TestDropJoinBatchNamesItsMerchants(t *testing.T) {
	t.Parallel()
	st, rt := tracedStore(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	var drops []*store.DropView
	for range 2 {
		m := createMerchant(t, st, &merchantOpts{Capacity: 100})
		drops = append(drops, scheduledDrop(t, st, clock, m.ID))
	}
	openDrops(t, st, clock, drops)

	rt.reset()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.JoinDrop(ctx, drops[i%2].ID, fmt.Sprintf("c%d", i), "")
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	locks := rt.containing("FOR NO KEY UPDATE OF d")
	writes := rt.containing("drop_entries_one_per_customer")
	require.NotEmpty(t, locks)
	require.NotEmpty(t, writes)
	for _, trip := range append(locks, writes...) {
		for _, sql := range trip {
			if !strings.HasPrefix(strings.TrimSpace(sql), "SELECT") && !strings.HasPrefix(strings.TrimSpace(sql), "UPDATE") {
				continue // BEGIN, COMMIT, and inserts of rows that carry their merchant
			}
			if sql == store.JoinedEntriesOnOnePostgreSQL {
				continue // on Citus this read takes a shape that names them
			}
			require.Contains(t, sql, "merchant_id = ANY(", "a statement of the join batch names its merchants:\n%s", sql)
		}
	}
}

// TestRecordWebhookAttemptsWriteMerchantByMerchant: one record of outcomes
// of several merchants (delivered, rescheduled, dead) sends every write in
// one round trip, each statement naming its rows' merchants: one set of
// statements in one transaction on one PostgreSQL, a set and a transaction
// per merchant on Citus, where a statement or transaction over several
// merchants' rows spans shards.
func TestRecordWebhookAttemptsWriteMerchantByMerchant(t *testing.T) {
	t.Parallel()
	for _, citus := range []bool{false, true} {
		t.Run(fmt.Sprintf("citus %v", citus), func(t *testing.T) {
			t.Parallel()
			st, rt := tracedStore(t)
			if citus {
				store.ClaimByMerchant(t, st)
			}
			ctx := context.Background()
			b := &testBundle{pool: st.Pool(), store: st}
			var ids []uuid.UUID
			for range 3 {
				m := createMerchant(t, st, &merchantOpts{Capacity: 5, WebhookURL: "http://example.com/hook"})
				ids = append(ids, addOutbox(t, b, m.ID, uuid.New(), 1)[0], addOutbox(t, b, m.ID, uuid.New(), 1)[0])
			}
			// The third merchant's messages are on their last attempt.
			_, err := b.pool.Exec(ctx, `UPDATE outbox SET attempts = 1 WHERE id = ANY($1)`, ids[4:])
			require.NoError(t, err)
			claimed, err := st.ClaimWebhooks(ctx, store.ClaimParams{Limit: 10, Lease: time.Minute})
			require.NoError(t, err)
			require.Len(t, claimed, 6)
			var results []store.AttemptResult
			for _, d := range claimed {
				if d.ID == ids[0] || d.ID == ids[1] {
					results = append(results, store.AttemptResult{Delivery: d, StartedAt: time.Now(), StatusCode: 200, OK: true})
				} else {
					results = append(results, failed(d))
				}
			}

			rt.reset()
			require.NoError(t, st.RecordWebhookAttempts(ctx, results, fastPolicy))
			trips := rt.containing("INSERT INTO webhook_attempts")
			require.Len(t, trips, 1, "one round trip records every merchant's outcomes")
			var inserts, begins int
			for _, sql := range trips[0] {
				switch {
				case sql == "begin":
					begins++
					continue
				case sql == "commit":
					continue
				case strings.Contains(sql, "INSERT INTO webhook_attempts"):
					inserts++
				}
				require.Contains(t, sql, "merchant_id", "a statement names its rows' merchants:\n%s", sql)
			}
			if citus {
				require.Equal(t, 3, inserts, "a statement per merchant")
				require.Equal(t, 3, begins, "a transaction per merchant")
			} else {
				require.Equal(t, 1, inserts, "one statement for every merchant")
				require.Zero(t, begins, "one transaction")
			}

			statuses := map[uuid.UUID]string{}
			rows, err := b.pool.Query(ctx, `SELECT id, status FROM outbox`)
			require.NoError(t, err)
			for rows.Next() {
				var id uuid.UUID
				var s string
				require.NoError(t, rows.Scan(&id, &s))
				statuses[id] = s
			}
			require.NoError(t, rows.Err())
			require.Equal(t, map[uuid.UUID]string{ids[0]: "delivered", ids[1]: "delivered", ids[2]: "pending", ids[3]: "pending",
				ids[4]: "dead", ids[5]: "dead"}, statuses)
			require.Equal(t, 6, countRows(t, b.pool, "webhook_attempts"))
			dls, _, err := st.ListDeadLetters(ctx, store.ListDeadLettersParams{Kind: store.DeadLetterWebhook})
			require.NoError(t, err)
			require.Len(t, dls, 2)
		})
	}
}

// tripsFrom returns the round trips sent from the first that carried a
// statement containing s on.
func (r *roundTrips) tripsFrom(s string) [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, trip := range r.trips {
		for _, sql := range trip {
			if strings.Contains(sql, s) {
				return r.trips[i:]
			}
		}
	}
	return nil
}

// TestCompletionHoldsItsMerchantTwoRoundTrips: a completion that admits the
// next order holds the merchant's lock, which every placement of the
// merchant waits for, over two round trips: the locks with the read of the
// queue's head; the completion's and the admission's writes, the load, the
// answer's view and the commit.
func TestCompletionHoldsItsMerchantTwoRoundTrips(t *testing.T) {
	t.Parallel()
	st, rt := tracedStore(t)
	ctx := context.Background()
	m, p, accepted := acceptedOrder(t, st, 1, "a")
	queued := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "b", PaymentRef: "r"})
	require.Equal(t, domain.StatusQueued, queued.Status)

	rt.reset()
	done, err := st.CompleteOrder(ctx, accepted.ID, domain.Party{Actor: domain.ActorMerchant, MerchantID: m.ID}, "")
	require.NoError(t, err)
	require.Equal(t, domain.StatusCompleted, done.Status)
	held := rt.tripsFrom("FROM merchants WHERE id = $1 FOR NO KEY UPDATE")
	require.Len(t, held, 2, "from the merchant's lock to the commit: %q", held)
	require.Contains(t, strings.Join(held[0], "\n"), "o.status = 'queued'", "the queue's head is read with the locks")
	require.Equal(t, "commit", held[1][len(held[1])-1])
	got, err := st.GetOrder(ctx, queued.ID, domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, got.Status, "the unit went to the head of the queue")
	require.Empty(t, violations(t, st))
}

// TestQueuedPlacementWritesNoTimerJob: a paid placement that queues holds
// its merchant's lock over two round trips, the locks and the writes with
// the commit, and writes no River job: on one PostgreSQL the queued order's
// wait limit in orders_queue_expiry_idx is its expiry timer (QueuedDue).
func TestQueuedPlacementWritesNoTimerJob(t *testing.T) {
	t.Parallel()
	st, rt := tracedStore(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	p := createProduct(t, st, m.ID, nil)
	mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "a", PaymentRef: "r"})

	rt.reset()
	queued := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c", PaymentRef: "r"})
	require.Equal(t, domain.StatusQueued, queued.Status)
	held := rt.tripsFrom("FOR NO KEY UPDATE")
	require.Len(t, held, 2, "from the merchant's lock to the commit: %q", held)
	require.NotContains(t, strings.Join(held[1], "\n"), "river_job")
	require.Equal(t, "commit", held[1][len(held[1])-1])

	var jobs int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'order_id' = $1`, queued.ID.String()).Scan(&jobs))
	require.Zero(t, jobs)
}

// TestRacingTapsOnOneOrderLockItsMerchantOnce: two taps on Complete for one
// order, sent while the merchant's row is held elsewhere, lock the merchant
// once: the second waits for the first in this process, then reads the
// order completed and answers without the lock every placement of the
// merchant waits for.
func TestRacingTapsOnOneOrderLockItsMerchantOnce(t *testing.T) {
	t.Parallel()
	st, rt := tracedStore(t)
	ctx := context.Background()
	m, _, o := acceptedOrder(t, st, 2, "a")
	release := holdLock(t, st.Pool(), `SELECT 1 FROM merchants WHERE id = $1 FOR UPDATE`, m.ID)
	rt.reset()

	access := domain.Party{Actor: domain.ActorMerchant, MerchantID: m.ID}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := st.CompleteOrder(ctx, o.ID, access, "")
			errs <- err
		}()
	}
	// Both taps arrive while the merchant is held.
	time.Sleep(200 * time.Millisecond)
	release()
	first, second := <-errs, <-errs
	if first != nil {
		first, second = second, first
	}
	require.NoError(t, first)
	require.Equal(t, domain.CodeInvalidTransition, domain.ErrorCode(second), "%v", second)
	require.Len(t, rt.containing("FROM merchants WHERE id = $1 FOR NO KEY UPDATE"), 1)
	require.Empty(t, violations(t, st))
}
