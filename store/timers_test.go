package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// TestResumeBackstopSweepsOnlyWhatIsOverdue: the pause backstop leaves a
// pause that has not ended, resumes one that has (as of its cutoff) through
// the resume's own write, and finds nothing the next round.
func TestResumeBackstopSweepsOnlyWhatIsOverdue(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1})
	_, err := st.PauseMerchant(ctx, m.ID, domain.PauseRequest{Mode: domain.PauseRefuse, ForSeconds: intp(600)}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)

	n, err := st.ResumeOverdue(ctx, clock.Now(), 10)
	require.NoError(t, err)
	require.Zero(t, n, "a pause with ten minutes to run")

	clock.Advance(11 * time.Minute)
	n, err = st.ResumeOverdue(ctx, clock.Now(), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var mode *string
	var resumed int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT pause_mode, (SELECT count(*) FROM events WHERE stream_id = $1 AND type = 'merchant.resumed')
		FROM merchants WHERE id = $1`, m.ID).Scan(&mode, &resumed))
	require.Nil(t, mode)
	require.Equal(t, 1, resumed)

	n, err = st.ResumeOverdue(ctx, clock.Now(), 10)
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestCloseSkipsAnOrderHeldElsewhere: a close does not wait for an order
// another transaction holds (here a second connection's row lock, as a
// payment or another close holds it): it reports the order not closed and
// closes the others of its batch at once; once the lock is gone, the next
// close (a backstop's) closes it. Waiting, each close batch queued behind
// every batch before it that held one of its orders, and a burst of
// deadlines closed seconds late.
func TestCloseSkipsAnOrderHeldElsewhere(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 5, PaymentTimeout: 1})
	p := createProduct(t, st, m.ID, nil)
	held := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "held"})
	free := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "free"})
	clock.Advance(2 * time.Second)

	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	var id string
	require.NoError(t, holder.QueryRow(ctx, `SELECT id::text FROM orders WHERE id = $1 FOR UPDATE`, held.ID).Scan(&id))

	type result struct {
		closed bool
		err    error
	}
	results := make(chan result, 2)
	for _, o := range []*store.OrderView{held, free} {
		go func() {
			closed, err := st.CloseUnpaid(ctx, m.ID, o.ID)
			results <- result{closed, err}
		}()
	}
	closed := 0
	for range 2 {
		select {
		case r := <-results:
			require.NoError(t, r.err)
			if r.closed {
				closed++
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a close waited for the order another transaction holds")
		}
	}
	require.Equal(t, 1, closed, "the free order closed, the held one skipped")
	got, err := st.GetOrder(ctx, held.ID, domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, domain.StatusAwaitingPayment, got.Status)
	got, err = st.GetOrder(ctx, free.ID, domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, domain.StatusClosed, got.Status)

	require.NoError(t, holder.Rollback(ctx))
	n, err := st.CloseUnpaidOverdue(ctx, clock.Now(), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err = st.GetOrder(ctx, held.ID, domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, domain.StatusClosed, got.Status)
}

// fillTimerJobs inserts River jobs of the timers queue as a busy day leaves
// them: far payment timers waiting pending an hour ahead, as many already
// completed, and due timers still pending (their promotion late).
func fillTimerJobs(t *testing.T, pool *pgxpool.Pool, far, due int) {
	t.Helper()
	ctx := context.Background()
	for _, rows := range []struct {
		n          int
		state, due string
	}{{far, "pending", "now() + interval '1 hour'"}, {far, "completed", "now() - interval '1 hour'"}, {due, "pending", "now() - interval '1 second'"}} {
		finalized := "NULL"
		if rows.state == "completed" {
			finalized = "now()"
		}
		_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at, finalized_at)
			SELECT jsonb_build_object('order_id', gen_random_uuid(), 'merchant_id', gen_random_uuid()), 'close_unpaid_order', 25, 1, $1, '%s', %s, %s
			FROM generate_series(1, $2)`, rows.state, rows.due, finalized), store.QueueTimers, rows.n)
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, `ANALYZE river_job`)
	require.NoError(t, err)
}

// TestPromotionReadsOnlyTheDueTimers: the promotion of the timers falling due
// reads River's fetch index over their range only, not over every timer set
// ahead, with either plan. Its priorities named in one IN list, PostgreSQL
// bounded the range by state and queue alone and read all 30,000 timers an
// hour ahead at each call, in every process four times a second; in bench
// timers, pg_stat_statements put it first among River's statements.
func TestPromotionReadsOnlyTheDueTimers(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	fillTimerJobs(t, b.pool, 30000, 10)
	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, generic := range []bool{false, true} {
		blocks, plan, err := store.PromoteTimersBlocks(ctx, conn.Conn(), store.QueueTimers, 2*time.Second, 5000, generic)
		require.NoError(t, err)
		require.Less(t, blocks, 100, "generic plan %v:\n%s", generic, plan)
	}
	n, err := st.PromoteTimers(ctx, store.QueueTimers, 2*time.Second, 5000)
	require.NoError(t, err)
	require.Equal(t, 10, n, "the due timers, and none of those an hour ahead")
}

// TestBackstopPassesOverOrdersHeldElsewhere: the payment backstop's round
// closes the overdue orders no other transaction holds, up to its limit,
// passing over one that a second connection holds (as a River job's close
// batch or a payment does). Read apart from its locks, the round found the
// held order first, skipped it, and reported its batch full with the order
// behind it still open, so every process's backstop looked again at once.
func TestBackstopPassesOverOrdersHeldElsewhere(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 5, PaymentTimeout: 1})
	p := createProduct(t, st, m.ID, nil)
	var orders []*store.OrderView
	for _, c := range []string{"first", "second", "third"} {
		orders = append(orders, mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: c}))
		clock.Advance(10 * time.Millisecond)
	}
	clock.Advance(2 * time.Second)

	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, orders[0].ID)
	require.NoError(t, err)

	n, err := st.CloseUnpaidOverdue(ctx, clock.Now(), 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for i, want := range []domain.OrderStatus{domain.StatusAwaitingPayment, domain.StatusClosed, domain.StatusClosed} {
		got, err := st.GetOrder(ctx, orders[i].ID, domain.Party{Actor: domain.ActorAdmin})
		require.NoError(t, err)
		require.Equal(t, want, got.Status, "order %d", i)
	}
}
