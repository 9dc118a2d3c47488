package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/store"
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
	merchant *store.Merchant
	product  *store.Product
	accepted *store.Order
	queued   *store.Order
	unpaid   *store.Order
}

func newAuditFixture(t *testing.T, st *store.Store) auditFixture {
	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(10), PerUserLimit: intp(2)})
	return auditFixture{
		merchant: m, product: p,
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
			exec(t, pool, `INSERT INTO events (stream_id, stream_type, version, type, data) VALUES ($1, 'order', 9, 'order.completed', '{}')`, f.unpaid.ID)
		}},
		{"projection_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE orders SET status = 'completed' WHERE id = $1`, f.queued.ID)
		}},
		{"merchant_load_drift", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE merchants SET active = 0 WHERE id = $1`, f.merchant.ID)
		}},
		{"decisions_over_capacity", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `INSERT INTO events (stream_id, stream_type, version, type, data)
				VALUES ($1, 'order', 1, 'order.accepted', '{"active_after": 3, "capacity": 2}')`, uuid.New())
		}},
		{"queued_with_free_capacity", func(t *testing.T, pool *pgxpool.Pool, f auditFixture) {
			exec(t, pool, `UPDATE merchants SET capacity = 5, updated_at = now() - interval '1 minute' WHERE id = $1`, f.merchant.ID)
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
			// Two orders admitted from the queue, the later one first.
			for _, seq := range []int{7, 5} {
				id := uuid.New()
				exec(t, pool, `INSERT INTO orders (id, merchant_id, customer_id, items, total_cents, status, version, placed_at, payment_deadline, queue_seq)
					VALUES ($1, $2, 'z', '[]', 0, 'completed', 1, now(), now(), $3)`, id, f.merchant.ID, seq)
				exec(t, pool, `INSERT INTO events (stream_id, stream_type, version, type, data)
					VALUES ($1, 'order', 1, 'order.accepted', '{"active_after": 1, "capacity": 1, "from_queue": true}')`, id)
			}
		}},
	}
	require.Len(t, cases, len(store.AuditChecks), "one case per view")
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

func TestAuditCleanOnBusySystem(t *testing.T) {
	t.Parallel()
	st, _ := setup(t)
	ctx := context.Background()
	m := createMerchant(t, st, &merchantOpts{Capacity: 3})
	p := createProduct(t, st, m.ID, &productOpts{Stock: intp(40), PerUserLimit: intp(2)})
	q := createProduct(t, st, m.ID, nil)
	var orders []*store.Order
	for i := range 30 {
		prod := q
		if i%3 == 0 {
			prod = p
		}
		ref := "r"
		if i%5 == 4 {
			ref = ""
		}
		orders = append(orders, mustPlace(t, st, m.ID, prod.ID, placeOpts{Customer: fmt.Sprintf("c%d", i%7), PaymentRef: ref}))
	}
	for i, o := range orders {
		switch i % 4 {
		case 0:
			_, _ = st.CompleteOrder(ctx, o.ID, admin, "")
		case 1:
			_, _ = st.CancelOrder(ctx, o.ID, "", admin, "")
		}
	}
	require.Empty(t, violations(t, st))
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
		`SELECT count(*) FROM idempotency_keys`,
	} {
		_, err := tx.Exec(ctx, `SAVEPOINT s`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, stmt)
		require.ErrorContains(t, err, "permission denied", stmt)
		_, err = tx.Exec(ctx, `ROLLBACK TO SAVEPOINT s`)
		require.NoError(t, err)
	}
}
