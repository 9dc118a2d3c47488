package store_test

import (
	"context"
	"encoding/json"
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
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

func violations(t *testing.T, st *store.Store) map[string]int {
	t.Helper()
	report, err := st.Audit(context.Background())
	require.NoError(t, err)
	out := map[string]int{}
	for _, c := range report.Checks {
		if c.Violations > 0 {
			out[c.Name] = c.Violations
			require.NotEmpty(t, c.Sample)
		}
	}
	require.Equal(t, len(out) == 0, report.OK)
	return out
}

// auditFixture is a small correct system: a merchant with a limited product,
// accepted, queued and unpaid orders.
type auditFixture struct {
	st       *store.Store
	merchant *store.MerchantView
	product  *store.ProductView
	accepted *store.OrderView
	queued   *store.OrderView
	unpaid   *store.OrderView
}

func newAuditFixture(t *testing.T, st *store.Store) auditFixture {
	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(10), PerUserLimit: intp(2)})
	return auditFixture{
		st: st, merchant: m, product: p,
		accepted: mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "a", PaymentRef: "r"}),
		queued:   mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "b", PaymentRef: "r"}),
		unpaid:   mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c"}),
	}
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// TestAuditEachViewReportsItsViolation creates, with direct writes behind
// the store's back, the violation each view names, and sees it reported.
func TestAuditEachViewReportsItsViolation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		check   string
		breakIt func(t *testing.T, pool *pgxpool.Pool, f auditFixture)
	}{
		{"oversold_products", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE products SET stock_total = 2 WHERE id = $1`, f.product.ID)
		}},
		{"over_purchase_limit", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE orders SET items = jsonb_set(items, '{0,quantity}', '3') WHERE id = $1`, f.accepted.ID)
		}},
		{"stream_version_gaps", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// The chain's trigger refuses a version that follows none: only
			// someone who turns it off, as a superuser may, makes a gap.
			exec(t, pool, `ALTER TABLE events DISABLE TRIGGER events_chain`)
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data, hash) VALUES ($1, $2, 'order', 9, 'order.completed', '{}', '\x00')`, f.unpaid.ID, f.merchant.ID)
		}},
		{"stream_version_gaps", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// A duplicate, were the unique constraint ever lost.
			exec(t, pool, `ALTER TABLE events DROP CONSTRAINT events_stream_version_key`)
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data) VALUES ($1, $2, 'order', 1, 'order.placed', '{}')`, f.unpaid.ID, f.merchant.ID)
		}},
		{"projection_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE orders SET status = 'completed' WHERE id = $1`, f.queued.ID)
		}},
		{"merchant_load_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE merchants SET active = 0 WHERE id = $1`, f.merchant.ID)
		}},
		{"merchant_load_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// active counts units: the accepted order's load, not its number.
			exec(t, pool, `UPDATE orders SET load = 3 WHERE id = $1`, f.accepted.ID)
		}},
		{"merchant_lane_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE orders SET lane = 'priority' WHERE id = $1`, f.queued.ID)
		}},
		{"merchant_lane_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE merchants SET active_orders = active_orders + 1 WHERE id = $1`, f.merchant.ID)
		}},
		{"decisions_over_capacity", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// An order of load 3 alone in a kitchen of 2 may be admitted; with
			// company it may not.
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
				VALUES ($1, $2, 'order', 1, 'order.accepted', '{"active_after": 3, "capacity": 2, "load": 3}')`, uuid.New(), f.merchant.ID)
			require.NotContains(t, violations(t, f.st), "decisions_over_capacity", "a lone oversized order")
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
				VALUES ($1, $2, 'order', 1, 'order.accepted', '{"active_after": 4, "capacity": 2, "load": 3}')`, uuid.New(), f.merchant.ID)
		}},
		{"decisions_over_capacity", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
				VALUES ($1, $2, 'order', 1, 'order.accepted', '{"active_after": 3, "capacity": 2}')`, uuid.New(), f.merchant.ID)
		}},
		{"queued_with_free_capacity", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// A unit frees and nothing admits the waiting order.
			exec(t, pool, `UPDATE merchants SET capacity = 2 WHERE id = $1`, f.merchant.ID)
			require.NotContains(t, violations(t, f.st), "queued_with_free_capacity", "not for the first 5 s")
			exec(t, pool, `UPDATE merchants SET starved_since = starved_since - interval '6 seconds' WHERE id = $1`, f.merchant.ID)
		}},
		{"unpaid_past_deadline", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE orders SET payment_deadline = now() - interval '1 minute' WHERE id = $1`, f.unpaid.ID)
		}},
		{"queued_past_max_wait", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE orders SET queue_expires_at = now() - interval '1 minute' WHERE id = $1`, f.queued.ID)
		}},
		{"undelivered_outbox", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `INSERT INTO outbox (id, merchant_id, order_id, order_version, event_type, payload, next_attempt_at)
				VALUES ($1, $2, $3, 3, 'order.accepted', '{}', now() - interval '1 hour')`, uuid.New(), f.merchant.ID, f.accepted.ID)
		}},
		{"stock_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE stock_buckets SET remaining = remaining + 1 WHERE product_id = $1 AND bucket = 0`, f.product.ID)
		}},
		{"fifo_violations", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// An order behind the waiting one is admitted from the queue first.
			admitQueuedBehind(t, pool, f, false, false)
		}},
		{"fifo_violations", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// The same, for an order back from its dead letter into its old place.
			admitQueuedBehind(t, pool, f, true, false)
		}},
		{"fifo_violations", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// The same, the order admitted being the one back from its dead letter.
			admitQueuedBehind(t, pool, f, false, true)
		}},
		{"fifo_violations", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// A new order admitted directly while the fixture's queued order waits.
			id := uuid.New()
			exec(t, pool, `INSERT INTO orders (id, merchant_id, customer_id, items, total_cents, status, version, placed_at, payment_deadline)
				VALUES ($1, $2, 'z', '[]', 0, 'accepted', 2, now(), now())`, id, f.merchant.ID)
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
				VALUES ($1, $2, 'order', 1, 'order.placed', '{}'), ($1, $2, 'order', 2, 'order.accepted', '{"from_queue": false, "queued": 0}')`, id, f.merchant.ID)
		}},
		{"fifo_violations", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// In the priority lane: an order that joined it behind the waiting
			// one is admitted first.
			moved, err := f.st.PrioritizeOrder(context.Background(), f.queued.ID, "", domain.Party{Actor: domain.ActorAdmin}, "")
			require.NoError(t, err)
			require.Equal(t, domain.StatusQueued, moved.Status)
			require.Empty(t, violations(t, f.st), "moving lanes is no violation")
			var seq int64
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT queue_seq FROM orders WHERE id = $1`, f.queued.ID).Scan(&seq))
			id := uuid.New()
			exec(t, pool, `INSERT INTO orders (id, merchant_id, customer_id, items, total_cents, status, version, placed_at, payment_deadline, queue_seq, lane)
				VALUES ($1, $2, 'z', '[]', 0, 'accepted', 2, now(), now(), $3, 'priority')`, id, f.merchant.ID, seq+1)
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
				VALUES ($1, $3, 'order', 1, 'order.queued', jsonb_build_object('seq', $2::bigint, 'lane', 'priority')),
				       ($1, $3, 'order', 2, 'order.accepted', '{"from_queue": true}')`, id, seq+1, f.merchant.ID)
		}},
		{"duplicate_pickup_codes", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			require.NotNil(t, f.accepted.PickupCode)
			exec(t, pool, `UPDATE orders SET pickup_code = $2 WHERE id = $1`, f.queued.ID, *f.accepted.PickupCode)
		}},
		{"accepted_at_backwards", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// The queued order admitted, by a clock behind the last admission's.
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
				VALUES ($1, $4, 'order', $2, 'order.accepted', jsonb_build_object('from_queue', true, 'accepted_at', $3::timestamptz - interval '1 second'))`,
				f.queued.ID, f.queued.Version+1, *f.accepted.AcceptedAt, f.merchant.ID)
		}},
		{"order_clock_backwards", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE orders SET accepted_at = paid_at - interval '1 millisecond' WHERE id = $1`, f.accepted.ID)
		}},
		{"order_clock_backwards", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data, recorded_at)
				VALUES ($1, $3, 'order', 2, 'order.cancelled', '{"by": "admin"}', $2::timestamptz - interval '1 second')`, f.unpaid.ID, f.unpaid.PlacedAt, f.merchant.ID)
		}},
		{"projection_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// The stream moved on and the row did not.
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
				VALUES ($1, $3, 'order', $2, 'order.cancelled', '{"by": "admin", "from": "queued"}')`, f.queued.ID, f.queued.Version+1, f.merchant.ID)
		}},
		{"projection_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// Paid last: judged by the status-setting event before it.
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
				VALUES ($1, $2, 'order', 2, 'order.paid', '{"payment_ref": "r"}')`, f.unpaid.ID, f.merchant.ID)
			exec(t, pool, `UPDATE orders SET version = 2, status = 'queued' WHERE id = $1`, f.unpaid.ID)
		}},
		{"projection_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// A placed order that never got its row.
			exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
				VALUES ($1, $3, 'order', 1, 'order.placed', jsonb_build_object('merchant_id', $2::uuid))`, uuid.New(), f.merchant.ID, f.merchant.ID)
		}},
		{"drop_draw_mismatch", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			d := startedDrop(t, f.st, 1)
			exec(t, pool, `UPDATE drop_entries SET order_key = '\x00'::bytea || sha256(uuid_send(id)) WHERE drop_id = $1`, d.drop.ID)
		}},
		{"drop_draw_mismatch", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// A published seed that is not the one committed to.
			d := startedDrop(t, f.st, 1)
			exec(t, pool, `UPDATE drops SET seed = sha256(seed) WHERE id = $1`, d.drop.ID)
			exec(t, pool, `UPDATE drop_entries e SET order_key = '\x00'::bytea || sha256(d.seed || uuid_send(e.id))
				FROM drops d WHERE d.id = e.drop_id AND d.id = $1`, d.drop.ID)
		}},
		{"drop_rank_mismatch", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// Two entries' ranks swapped: their keys are right, their places not.
			d := startedDrop(t, f.st, 1)
			exec(t, pool, `UPDATE drop_entries e SET rank = s.rank FROM drop_entries s
				WHERE e.drop_id = $1 AND s.drop_id = $1 AND e.rank IN (1, 2) AND s.rank IN (1, 2) AND s.id <> e.id`, d.drop.ID)
		}},
		{"drop_rank_mismatch", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// The line counts an invitation that its entries do not hold.
			d := startedDrop(t, f.st, 1)
			exec(t, pool, `UPDATE drop_lines SET invited = invited + 1 WHERE drop_id = $1`, d.drop.ID)
		}},
		{"drop_invitation_order", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// The invitation went to the second-best entry.
			d := startedDrop(t, f.st, 1)
			exec(t, pool, `UPDATE drop_entries SET status = CASE status WHEN 'invited' THEN 'waiting' ELSE 'invited' END,
				invited_at = CASE WHEN invited_at IS NULL THEN now() END WHERE drop_id = $1`, d.drop.ID)
		}},
		{"drop_oversold", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			d := startedDrop(t, f.st, 1)
			exec(t, pool, `UPDATE drop_entries SET status = 'invited', invited_at = now() WHERE drop_id = $1`, d.drop.ID)
		}},
		{"orders_without_merchant", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// Written behind the store's back: no foreign key refuses it.
			exec(t, pool, `UPDATE orders SET merchant_id = $2 WHERE id = $1`, f.unpaid.ID, uuid.New())
		}},
		{"slots_over_capacity", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			withSlots(t, f.st, f.merchant.ID, quarterHours)
			at := nextSlot(time.Now(), time.Hour)
			mustPlace(t, f.st, f.merchant.ID, f.product.ID, placeOpts{Customer: "slot", PickupAt: &at})
			// The slot holds more than its order weighs.
			exec(t, pool, `UPDATE pickup_slots SET taken = taken + 1 WHERE merchant_id = $1`, f.merchant.ID)
		}},
		{"scheduled_released_early", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// An order admitted before its slot's release.
			exec(t, pool, `UPDATE orders SET pickup_at = now() + interval '1 day', release_at = now() + interval '23 hours' WHERE id = $1`, f.accepted.ID)
		}},
		{"orders_placed_while_closed", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// Open only on the day after tomorrow; an order placed since.
			day := int(time.Now().UTC().Add(48 * time.Hour).Weekday())
			_, err := f.st.UpdateMerchant(context.Background(), f.merchant.ID, store.MerchantPatch{
				Hours: &[]domain.Period{{Day: day, Opens: "00:00", Closes: "24:00"}}}, storeMeta())
			require.NoError(t, err)
			exec(t, pool, `UPDATE orders SET placed_at = clock_timestamp() WHERE id = $1`, f.unpaid.ID)
		}},
		{"drop_oversold", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			// A purchase without a paid order.
			d := startedDrop(t, f.st, 1)
			exec(t, pool, `UPDATE drop_entries SET status = 'purchased', order_id = $2 WHERE drop_id = $1 AND status = 'invited'`, d.drop.ID, f.unpaid.ID)
		}},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.check] = true
	}
	require.Len(t, covered, len(store.AuditChecks), "a case for every view")
	for _, tc := range cases {
		t.Run(tc.check, func(t *testing.T) {
			t.Parallel()
			st, b := setup(t)
			f := newAuditFixture(t, st)
			require.Empty(t, violations(t, st), "a correct system first")
			tc.breakIt(t, b.pool, f)
			got := violations(t, st)
			require.Contains(t, got, tc.check, "%v", got)
		})
	}
}

// admitQueuedBehind admits, behind the store's back, a new order from the
// fixture merchant's queue while the fixture's queued order, with a smaller
// sequence number, still waits; either may be an order that came back to its
// place from a dead letter (requeued).
func admitQueuedBehind(t *testing.T, pool *pgxpool.Pool, f auditFixture, waitingRequeued, admittedRequeued bool) {
	t.Helper()
	var seq int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT queue_seq FROM orders WHERE id = $1`, f.queued.ID).Scan(&seq))
	if waitingRequeued {
		exec(t, pool, `ALTER TABLE events DISABLE TRIGGER USER`)
		exec(t, pool, `UPDATE events SET type = 'order.requeued' WHERE stream_id = $1 AND type = 'order.queued'`, f.queued.ID)
		exec(t, pool, `ALTER TABLE events ENABLE TRIGGER USER`)
	}
	id := uuid.New()
	exec(t, pool, `INSERT INTO orders (id, merchant_id, customer_id, items, total_cents, status, version, placed_at, payment_deadline, queue_seq)
		VALUES ($1, $2, 'z', '[]', 0, 'accepted', 2, now(), now(), $3)`, id, f.merchant.ID, seq+1)
	entered := domain.EventOrderQueued
	if admittedRequeued {
		entered = domain.EventOrderRequeued
	}
	exec(t, pool, `INSERT INTO events (stream_id, merchant_id, stream_type, version, type, data)
		VALUES ($1, $3, 'order', 1, $2, '{}'), ($1, $3, 'order', 2, 'order.accepted', '{"from_queue": true}')`, id, entered, f.merchant.ID)
}

// TestAuditCleanOnBusySystem drives one merchant hard from many goroutines
// (placing, paying, completing and cancelling, so that orders queue and are
// drained) and then finds no violation, and no difference on a rebuild.
func TestAuditCleanOnBusySystem(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 3})
	limited := createProduct(t, st, m.ID, &productOpts{Stock: intp(60), PerUserLimit: intp(2)})
	plain := createProduct(t, st, m.ID, nil)
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				p, ref := plain, "r"
				if i%3 == 0 {
					p = limited
				}
				if i%4 == 3 {
					ref = ""
				}
				// Refusals (sold out, over the limit, a state that moved on)
				// are part of a busy day; only what was committed is audited.
				res, err := place(ctx, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", (w*15+i)%20), PaymentRef: ref})
				if err != nil {
					continue
				}
				o := res.Order
				switch i % 5 {
				case 0, 1:
					_, _ = st.CompleteOrder(ctx, o.ID, admin, "")
				case 2:
					_, _ = st.CancelOrder(ctx, o.ID, "", admin, "")
				case 3:
					_, _ = st.PayOrder(ctx, o.ID, "late", customer(o.CustomerID), "")
				}
			}
		}()
	}
	wg.Wait()
	// Whatever is still accepted finishes, draining the queue behind it.
	for range 20 {
		accepted, err := st.ListMerchantOrders(ctx, m.ID, domain.StatusAccepted, 100)
		require.NoError(t, err)
		if len(accepted) == 0 {
			break
		}
		for _, o := range accepted[:1] {
			_, err := st.CompleteOrder(ctx, o.ID, admin, "")
			require.NoError(t, err)
		}
	}
	var statuses int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(DISTINCT status) FROM orders`).Scan(&statuses))
	require.GreaterOrEqual(t, statuses, 4, "the load reached several states")

	require.Empty(t, violations(t, st))
	report, err := st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Empty(t, report.Differences, "%+v", report.Differences)
}

// TestAuditorRole checks the read-only role: it reads the audit views and the
// read models, but no secret, and it writes nothing.
func TestAuditorRole(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	f := newAuditFixture(t, st)
	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, `SET LOCAL ROLE orderd_auditor`)
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM audit.merchant_load_drift`).Scan(&n))
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n))
	require.Equal(t, 3, n)
	require.NoError(t, tx.QueryRow(ctx, `SELECT capacity FROM merchants WHERE id = $1`, f.merchant.ID).Scan(&n))
	for _, stmt := range []string{
		`SELECT webhook_secret FROM merchants`,
		`UPDATE orders SET status = 'completed'`,
		`INSERT INTO dead_letters (id, kind, ref_id, merchant_id, reason) VALUES (gen_random_uuid(), 'order', gen_random_uuid(), gen_random_uuid(), 'x')`,
		`SELECT idempotency_key FROM orders`,
		`SELECT request_hash FROM orders`,
	} {
		_, err := tx.Exec(ctx, `SAVEPOINT s`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, stmt)
		require.ErrorContains(t, err, "permission denied", stmt)
		_, err = tx.Exec(ctx, `ROLLBACK TO SAVEPOINT s`)
		require.NoError(t, err)
	}
}

// seedHistory writes, straight into the tables, the history of a busy
// platform: merchants of capacity 5, each with a limited and an unlimited
// product and perMerchant orders, most of them finished (completed, some
// through the queue, cancelled, closed unpaid, expired in the queue) and the
// last ones unpaid, accepted and queued. Every row is the fold of its
// events by the domain, so a correct audit and rebuild find nothing. It is
// what the million-order benchmark audits; COPY makes it quick to write.
func seedHistory(tb testing.TB, pool *pgxpool.Pool, merchants, perMerchant int) {
	tb.Helper()
	const workers = 8
	errs := make(chan error, workers)
	next := make(chan int)
	now := time.Now().UTC().Truncate(time.Microsecond)
	for range workers {
		go func() {
			var err error
			for range next {
				if err == nil {
					err = seedMerchant(context.Background(), pool, now, perMerchant)
				}
			}
			errs <- err
		}()
	}
	for m := range merchants {
		next <- m
	}
	close(next)
	for range workers {
		require.NoError(tb, <-errs)
	}
	// As autovacuum would have on a live system: statistics, and a visibility
	// map that lets the audits read the events from their index alone.
	_, err := pool.Exec(context.Background(), `VACUUM ANALYZE`)
	require.NoError(tb, err)
}

func seedMerchant(ctx context.Context, pool *pgxpool.Pool, now time.Time, k int) error {
	const capacity, accepted, queued, unpaid = 5, 5, 10, 5
	mid, limited, plain := uuid.New(), uuid.New(), uuid.New()
	created := now.Add(-72 * time.Hour)
	var events, orders [][]any
	event := func(stream uuid.UUID, streamType string, version int, e domain.Event) error {
		data, err := json.Marshal(e.Data)
		events = append(events, []any{stream, mid, streamType, int32(version), e.Type, data, created})
		return err
	}
	settings := domain.MerchantSettings{Name: "m " + mid.String(), Capacity: capacity, PrepSeconds: 60,
		MaxQueueWaitSeconds: 3600, PaymentTimeoutSeconds: 900}
	if err := event(mid, store.StreamMerchant, 1, domain.Event{Type: domain.EventMerchantCreated,
		Data: domain.MerchantCreated{MerchantID: mid, MerchantSettings: settings, CreatedAt: created}}); err != nil {
		return err
	}
	stock, limit := k, 2
	for _, p := range []domain.ProductCreated{
		{ProductID: limited, MerchantID: mid, Name: "limited", PriceCents: 500, Stock: &stock, PerUserLimit: &limit, CreatedAt: created},
		{ProductID: plain, MerchantID: mid, Name: "plain", PriceCents: 300, CreatedAt: created},
	} {
		if err := event(p.ProductID, store.StreamProduct, 1, domain.Event{Type: domain.EventProductCreated, Data: p}); err != nil {
			return err
		}
	}
	held := 0
	for i := range k {
		id := uuid.New()
		placed := created.Add(time.Duration(i) * 100 * time.Millisecond)
		item := domain.Item{ProductID: plain, Quantity: 1, PriceCents: 300}
		if i%3 == 0 {
			item = domain.Item{ProductID: limited, Quantity: 1, PriceCents: 500}
		}
		at := func(d time.Duration) time.Time { return placed.Add(d) }
		seq := int64(i + 1)
		evs := []domain.Event{{Type: domain.EventOrderPlaced, Data: domain.OrderPlaced{OrderID: id, MerchantID: mid,
			CustomerID: fmt.Sprintf("c%d", i), Items: []domain.Item{item}, TotalCents: item.PriceCents, PlacedAt: placed, PaymentDeadline: at(15 * time.Minute)}}}
		paid := domain.Event{Type: domain.EventOrderPaid, Data: domain.OrderPaid{PaymentRef: "pay", PaidAt: at(time.Second)}}
		queue := domain.Event{Type: domain.EventOrderQueued, Data: domain.OrderQueued{Seq: seq, QueuedAt: at(time.Second), ExpiresAt: at(time.Hour),
			Active: capacity, Capacity: capacity}}
		accept := func(fromQueue bool) domain.Event {
			return domain.Event{Type: domain.EventOrderAccepted, Data: domain.OrderAccepted{AcceptedAt: at(2 * time.Second),
				ActiveAfter: capacity, Capacity: capacity, FromQueue: fromQueue}}
		}
		complete := domain.Event{Type: domain.EventOrderCompleted, Data: domain.OrderCompleted{CompletedAt: at(time.Minute)}}
		switch {
		case i >= k-queued:
			queue.Data = domain.OrderQueued{Seq: seq, QueuedAt: at(time.Second), ExpiresAt: now.Add(time.Hour), Active: capacity, Capacity: capacity}
			evs = append(evs, paid, queue)
		case i >= k-queued-accepted:
			evs = append(evs, paid, accept(false))
		case i >= k-queued-accepted-unpaid:
			evs[0].Data = domain.OrderPlaced{OrderID: id, MerchantID: mid, CustomerID: fmt.Sprintf("c%d", i),
				Items: []domain.Item{item}, TotalCents: item.PriceCents, PlacedAt: placed, PaymentDeadline: now.Add(time.Hour)}
		case i%10 == 0 || i%10 == 2 || i%10 == 4:
			evs = append(evs, paid, queue, accept(true), complete)
		case i%10 < 5:
			evs = append(evs, paid, accept(false), complete)
		case i%10 == 5:
			evs = append(evs, paid, accept(false), domain.Event{Type: domain.EventOrderCancelled,
				Data: domain.OrderCancelled{By: domain.ActorAdmin, From: domain.StatusAccepted, CancelledAt: at(30 * time.Second)}})
		case i%10 == 6:
			evs = append(evs, domain.Event{Type: domain.EventOrderCancelled,
				Data: domain.OrderCancelled{Reason: "changed my mind", By: domain.ActorCustomer, From: domain.StatusAwaitingPayment, CancelledAt: at(time.Minute)}})
		case i%10 < 9:
			evs = append(evs, domain.Event{Type: domain.EventOrderClosed, Data: domain.OrderClosed{Reason: "payment_timeout", ClosedAt: at(15 * time.Minute)}})
		default:
			evs = append(evs, paid, queue, domain.Event{Type: domain.EventOrderExpired, Data: domain.OrderExpired{Reason: "queue_timeout", ExpiredAt: at(time.Hour)}})
		}
		o, err := domain.Order{}.Apply(evs...)
		if err != nil {
			return err
		}
		for v, e := range evs {
			if err := event(id, store.StreamOrder, v+1, e); err != nil {
				return err
			}
		}
		if o.Status.HoldsStock() && item.ProductID == limited {
			held++
		}
		items, err := json.Marshal(o.Items)
		if err != nil {
			return err
		}
		var seqCol any
		if o.QueueSeq > 0 {
			seqCol = o.QueueSeq
		}
		orders = append(orders, []any{id, mid, o.CustomerID, items, o.TotalCents, string(o.Status), int32(o.Version), o.PlacedAt,
			o.PaymentDeadline, nilIfEmpty(o.PaymentRef), o.PaidAt, o.AcceptedAt, o.CompletedAt, o.EndedAt, nilIfEmpty(o.StatusReason),
			seqCol, o.QueuedAt, o.QueueExpiresAt})
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
	if _, err := tx.Exec(ctx, `
		INSERT INTO merchants (id, name, capacity, prep_seconds, max_queue_wait_seconds, payment_timeout_seconds, webhook_secret,
			created_at, version, active, queued, next_seq, active_orders, queued_units)
		VALUES ($1, $2, $3, 60, 3600, 900, 'secret', $4, 1, $5, $6, $7, $5, $6)`,
		mid, settings.Name, capacity, created, accepted, queued, k+1); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO products (id, merchant_id, name, price_cents, stock_total, per_user_limit, created_at, version)
		VALUES ($1, $3, 'limited', 500, $4, 2, $5, 1), ($2, $3, 'plain', 300, NULL, NULL, $5, 1)`,
		limited, plain, mid, stock, created); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO stock_buckets (product_id, bucket, merchant_id, remaining)
		SELECT $1, b, $2, ($3 + 3 - b) / 4 FROM generate_series(0, 3) b`, limited, mid, stock-held); err != nil {
		return err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"orders"}, []string{"id", "merchant_id", "customer_id", "items", "total_cents",
		"status", "version", "placed_at", "payment_deadline", "payment_ref", "paid_at", "accepted_at", "completed_at", "ended_at",
		"status_reason", "queue_seq", "queued_at", "queue_expires_at"}, pgx.CopyFromRows(orders)); err != nil {
		return err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"stream_id", "merchant_id", "stream_type", "version", "type", "data", "recorded_at"},
		pgx.CopyFromRows(events)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TestAuditCleanOnSeededHistory checks the benchmark's history: it must be
// correct for the benchmark to measure clean checks.
func TestAuditCleanOnSeededHistory(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	seedHistory(t, b.pool, 6, 200)
	require.Empty(t, violations(t, st))
	report, err := st.Rebuild(context.Background(), false)
	require.NoError(t, err)
	require.Empty(t, report.Differences, "%+v", report.Differences)
	require.Equal(t, 6*(3+200), report.Streams)
}

// BenchmarkAudit1M audits a history of 1,000,000 orders (1,000 merchants,
// 3.7 million events). Writing the history takes a few minutes; run it
// with -benchtime 1x, since each round writes the history anew:
// go test ./store -run '^$' -bench Audit1M -benchtime 1x -timeout 30m
func BenchmarkAudit1M(b *testing.B) {
	pool := storetest.Pool(b)
	st := newStore(store.Config{Pool: pool})
	start := time.Now()
	seedHistory(b, pool, 1000, 1000)
	b.Logf("seeded 1,000,000 orders in %s", time.Since(start).Round(time.Second))
	ctx := context.Background()
	var times []string
	for _, name := range store.AuditChecks {
		start := time.Now()
		var n int
		require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM audit.`+name).Scan(&n))
		require.Zero(b, n, name)
		times = append(times, fmt.Sprintf("%s %s", name, time.Since(start).Round(time.Millisecond)))
	}
	b.Logf("each view alone, with the server's defaults: %s", strings.Join(times, ", "))
	b.ResetTimer()
	for range b.N {
		report, err := st.Audit(ctx)
		require.NoError(b, err)
		require.True(b, report.OK, "%+v", report.Checks)
	}
}

// TestAuditCleanWithWeightsAndLanes drives a cup-counting merchant from many
// goroutines with orders of 1-6 cups in both lanes, prioritizing some, paying
// late, cancelling and completing: no audit finds a violation, a priority
// order admitted ahead of waiting normal ones included, and the rebuild from
// the events (lanes, loads, pickup codes, pauses) matches the live tables.
func TestAuditCleanWithWeightsAndLanes(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	admin := domain.Party{Actor: domain.ActorAdmin}
	unit := domain.UnitItems
	prefix := "Q"
	m := createMerchant(t, st, &merchantOpts{Capacity: 10})
	_, err := st.UpdateMerchant(ctx, m.ID, store.MerchantPatch{CapacityUnit: &unit, PickupPrefix: &prefix}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	p, err := st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "tea", PriceCents: 100, LoadUnits: 1})
	require.NoError(t, err)
	secs := 1
	_, err = st.PauseMerchant(ctx, m.ID, domain.PauseRequest{Mode: domain.PauseQueue, ForSeconds: &secs}, store.Meta{Actor: domain.ActorMerchant})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				lane := domain.LaneNormal
				if (w+i)%5 == 0 {
					lane = domain.LanePriority
				}
				res, err := st.PlaceOrder(ctx, store.PlaceRequest{MerchantID: m.ID, CustomerID: fmt.Sprintf("w%d", w), PaymentRef: "r",
					Lines: []domain.LineRequest{{ProductID: p.ID, Quantity: 1 + (w*7+i)%6}}, Lane: lane,
					IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")})
				if err != nil {
					continue
				}
				o := res.Order
				switch i % 4 {
				case 0:
					_, _ = st.PrioritizeOrder(ctx, o.ID, "", admin, "")
				case 1:
					_, _ = st.CancelOrder(ctx, o.ID, "", admin, "")
				}
				if i == 6 && w == 0 {
					_, _ = st.ResumeMerchant(ctx, m.ID, store.Meta{Actor: domain.ActorMerchant})
				}
				accepted, err := st.ListMerchantOrders(ctx, m.ID, domain.StatusAccepted, 1)
				if err == nil && len(accepted) > 0 {
					_, _ = st.CompleteOrder(ctx, accepted[0].ID, admin, "")
				}
			}
		}()
	}
	wg.Wait()
	for range 200 {
		accepted, err := st.ListMerchantOrders(ctx, m.ID, domain.StatusAccepted, 100)
		require.NoError(t, err)
		if len(accepted) == 0 {
			break
		}
		_, err = st.CompleteOrder(ctx, accepted[0].ID, admin, "")
		require.NoError(t, err)
	}
	var priorityAdmitted int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE merchant_id = $1 AND lane = 'priority' AND accepted_at IS NOT NULL`, m.ID).Scan(&priorityAdmitted))
	require.Positive(t, priorityAdmitted)
	require.Empty(t, violations(t, st))
	report, err := st.Rebuild(ctx, false)
	require.NoError(t, err)
	require.Empty(t, report.Differences, "%+v", report.Differences)
}

// TestStarvationTrackingReadsTheQueueOnlyWithRoom: every change of a
// merchant's load fires the trigger that keeps starved_since, under the
// merchant's lock. A full kitchen cannot take the queue's head (its load is at
// least 1), so the trigger must not read the queue then: in a burst that
// read walks every order just admitted and not yet vacuumed, on every batch.
func TestStarvationTrackingReadsTheQueueOnlyWithRoom(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	f := newAuditFixture(t, st)
	ctx := context.Background()
	ordersScanned := func(capacity int) (scans int64, starved bool) {
		t.Helper()
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		// The counts include what the connection's earlier transactions
		// read and have not yet reported (a placement batch reads orders
		// by their keys): the update's are the difference.
		read := func() (n int64) {
			require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(sum(seq_scan + idx_scan), 0) FROM pg_stat_xact_user_tables WHERE relname = 'orders'`).Scan(&n))
			return n
		}
		before := read()
		_, err = tx.Exec(ctx, `UPDATE merchants SET capacity = $2, queued = queued WHERE id = $1`, f.merchant.ID, capacity)
		require.NoError(t, err)
		scans = read() - before
		require.NoError(t, tx.QueryRow(ctx, `SELECT starved_since IS NOT NULL FROM merchants WHERE id = $1`, f.merchant.ID).Scan(&starved))
		return scans, starved
	}
	scans, starved := ordersScanned(1)
	require.False(t, starved)
	require.Zero(t, scans, "a full kitchen's trigger read the queue")
	scans, starved = ordersScanned(2)
	require.True(t, starved, "room for the head, and it waits")
	require.NotZero(t, scans, "the head's load is read when there is room")
}

// TestStarvationTriggerSkipsMerchantsWithNothingQueued: every placement
// batch writes the load of each merchant it decided for, which names the
// columns merchants_track_starved watches. With nothing queued and nothing
// recorded the function can only leave starved_since empty, so it is not
// called (a PL/pgSQL call per merchant of every batch); with orders queued
// and room for the head it still is, and records the starvation.
func TestStarvationTriggerSkipsMerchantsWithNothingQueued(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	f := newAuditFixture(t, st)
	idle := createMerchant(t, st, &merchantOpts{Capacity: 5})
	mustPlace(t, st, idle.ID, createProduct(t, st, idle.ID, nil).ID, placeOpts{Customer: "a", PaymentRef: "r"})
	ctx := context.Background()
	calls := func(update string, id any) (calls int64, starved bool) {
		t.Helper()
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		_, err = tx.Exec(ctx, `SET LOCAL track_functions = 'pl'`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, update, id)
		require.NoError(t, err)
		require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce((SELECT calls FROM pg_stat_xact_user_functions WHERE funcname = 'merchants_track_starved'), 0)`).Scan(&calls))
		require.NoError(t, tx.QueryRow(ctx, `SELECT starved_since IS NOT NULL FROM merchants WHERE id = $1`, id).Scan(&starved))
		return calls, starved
	}
	n, starved := calls(`UPDATE merchants SET active = active + 1, queued = queued WHERE id = $1`, idle.ID)
	require.False(t, starved)
	require.Zero(t, n, "the trigger's function ran for a merchant with nothing queued")
	n, starved = calls(`UPDATE merchants SET capacity = 2, queued = queued WHERE id = $1`, f.merchant.ID)
	require.True(t, starved, "room for the queued head, and it waits")
	require.EqualValues(t, 1, n)
}
