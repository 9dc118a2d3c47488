//go:build citus

package store_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/internal/citustest"
	"github.com/orderd/orderd/store"
)

// TestCitusBatchUpdateLooksRowsUpByKey: on a worker, a batch's update of
// hundreds of a merchant's orders by the shard's name, in the store's
// shape (UPDATE … FROM unnest … WHERE o.id = r.id AND o.merchant_id =
// r.merchant_id AND o.merchant_id = ANY(…), as a close of a look's orders
// writes them), finds its rows by the key in a shard of tens of thousands
// of orders. At the default page costs the planner scanned the whole shard
// into a hash join, a cost that grew with the shard: the closes of the
// timers' phases fell seconds behind once spread had filled the shards.
func TestCitusBatchUpdateLooksRowsUpByKey(t *testing.T) {
	ctx := context.Background()
	url := citustest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	st := store.New(store.Config{Pool: pool})
	defer st.Close()

	merchant := uuid.New()
	_, err = pool.Exec(ctx, `INSERT INTO merchants (id, name, capacity, prep_seconds, max_queue_wait_seconds, payment_timeout_seconds, webhook_secret, created_at, version)
		VALUES ($1, 'm', 100000, 60, 60, 5, 's', now(), 1)`, merchant)
	require.NoError(t, err)
	node, err := st.MerchantNode(ctx, merchant)
	require.NoError(t, err)
	var shard string
	require.NoError(t, pool.QueryRow(ctx, `SELECT shard_name('orders'::regclass, get_shard_id_for_distribution_column('orders', $1::uuid))`,
		merchant).Scan(&shard))
	worker := workerPool(t, url, node)
	table := pgx.Identifier{shard}.Sanitize()
	_, err = worker.Exec(ctx, `INSERT INTO `+table+` (id, merchant_id, customer_id, items, total_cents, status, version, placed_at, payment_deadline)
		SELECT gen_random_uuid(), $1, 'c' || g, '[]', 100, 'awaiting_payment', 1, now(), now() + g * interval '1 ms'
		FROM generate_series(1, 30000) g`, merchant)
	require.NoError(t, err)
	_, err = worker.Exec(ctx, `ANALYZE `+table)
	require.NoError(t, err)

	rows, err := worker.Query(ctx, `SELECT id FROM `+table+` ORDER BY payment_deadline LIMIT 500`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	merchants, statuses := make([]uuid.UUID, len(ids)), make([]string, len(ids))
	for i := range ids {
		merchants[i], statuses[i] = merchant, "closed"
	}
	rows, err = worker.Query(ctx, `EXPLAIN UPDATE `+table+` o SET status = r.status
		FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS r(id, merchant_id, status)
		WHERE o.id = r.id AND o.merchant_id = r.merchant_id AND o.merchant_id = ANY($2::uuid[])`, ids, merchants, statuses)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotContains(t, strings.Join(plan, "\n"), "Seq Scan on "+shard, "the update scans the whole shard:\n%s", strings.Join(plan, "\n"))
}

// TestCitusCloseLooksOrdersUpByKey: a worker's close of a merchant's
// unpaid orders finds them by the key in their shard when the shard's
// statistics predate the merchant's orders (there, another merchant's
// tens of thousands; then thousands of the merchant's own). Its update
// also named the merchants' list, which Citus needs only to route a
// statement through the distributed table: the planner, taking the
// merchant for a rare one, read all of its orders by the merchants' index
// and joined them to the batch's rows in a nested loop that unnested the
// batch again for every one of them, so that a close's row cost grew with
// the merchant's orders; after spread had filled and analyzed the
// shards, the timers' phases fell seconds behind.
func TestCitusCloseLooksOrdersUpByKey(t *testing.T) {
	ctx := context.Background()
	url := citustest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	updates := &orderUpdates{}
	cfg.ConnConfig.Tracer = updates
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	st := newStore(store.Config{Pool: pool})
	defer st.Close()
	clock := newFakeClock(st)

	m := createMerchant(t, st, &merchantOpts{Capacity: 100000, PaymentTimeout: 60})
	p := createProduct(t, st, m.ID, nil)
	node, err := st.MerchantNode(ctx, m.ID)
	require.NoError(t, err)
	var shard string
	require.NoError(t, pool.QueryRow(ctx, `SELECT shard_name('orders'::regclass, get_shard_id_for_distribution_column('orders', $1::uuid))`,
		m.ID).Scan(&shard))
	worker := workerPool(t, url, node)
	table := pgx.Identifier{shard}.Sanitize()
	fill := func(merchant uuid.UUID, n int) {
		_, err := worker.Exec(ctx, `INSERT INTO `+table+` (id, merchant_id, customer_id, items, total_cents, status, version, placed_at, payment_deadline)
			SELECT gen_random_uuid(), $1, 'c' || g, '[]', 100, 'accepted', 1, now(), now() FROM generate_series(1, $2::int) g`, merchant, n)
		require.NoError(t, err)
	}
	fill(uuid.New(), 20000)
	_, err = worker.Exec(ctx, `ANALYZE `+table)
	require.NoError(t, err)
	fill(m.ID, 5000)

	const unpaid = 40
	for i := range unpaid {
		mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "c" + strconv.Itoa(i)})
	}
	clock.Advance(2 * time.Minute)
	updates.arm()
	fired, err := st.CloseDueUnpaid(ctx, 500)
	require.NoError(t, err)
	require.Len(t, fired, unpaid)

	sql, args := updates.first()
	require.Contains(t, sql, table, "the close updates the orders by the shard's name")
	rows, err := worker.Query(ctx, `EXPLAIN `+sql, args...)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, strings.Join(plan, "\n"), "orders_pkey", "the close reads the merchant's orders instead of its rows by the key:\n%s", strings.Join(plan, "\n"))
}

// orderUpdates records, once armed, the first update of a shard of orders
// that a batch sends, with its arguments.
type orderUpdates struct {
	mu    sync.Mutex
	armed bool
	sql   string
	args  []any
}

func (u *orderUpdates) arm() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.armed = true
}

func (u *orderUpdates) first() (string, []any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sql, u.args
}

func (u *orderUpdates) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (u *orderUpdates) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (u *orderUpdates) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (u *orderUpdates) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.armed && u.sql == "" && strings.HasPrefix(data.SQL, `UPDATE "orders_`) {
		u.sql, u.args = data.SQL, data.Args
	}
}

func (u *orderUpdates) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
