package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	fired, err := st.FireDueTimers(ctx, store.QueueTimers, 5000)
	require.NoError(t, err)
	require.Len(t, fired, 10, "the due timers, and none of those an hour ahead")
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

// TestDueTimersFireInTheirCloseTransaction: on one PostgreSQL an unpaid
// order's payment deadline is its own row's, with no River job beside it
// (the job cost every placement a row and seven index entries that only
// the firing read). Once the deadline passes, a look (CloseDueUnpaid, then
// FireDueTimers) closes the order, passes over one a second connection
// holds (as another process's firing or a payment does), leaves the orders
// not yet due, and makes a due timer of another kind available for River's
// workers, as it does a payment job set before (whose order the look closes
// by the order's own deadline: the job, due early, closes nothing).
// Once the holder is gone without committing, as a killed process is, the
// backstop's round closes what it held.
func TestDueTimersFireInTheirCloseTransaction(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 5, PaymentTimeout: 600})
	p := createProduct(t, st, m.ID, nil)
	due := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "due"})
	held := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "held"})
	legacy := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "legacy"})
	later := createMerchant(t, st, &merchantOpts{Capacity: 5, PaymentTimeout: 1800})
	ahead := mustPlace(t, st, later.ID, createProduct(t, st, later.ID, nil).ID, placeOpts{Customer: "ahead"})
	_, err := st.PauseMerchant(ctx, m.ID, domain.PauseRequest{Mode: domain.PauseRefuse, ForSeconds: intp(600)}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	jobState := func(kind, orderID string) (state string, found bool) {
		err := b.pool.QueryRow(ctx, `SELECT state FROM river_job WHERE kind = $1 AND ($2 = '' OR args->>'order_id' = $2)`, kind, orderID).Scan(&state)
		if err == pgx.ErrNoRows {
			return "", false
		}
		require.NoError(t, err)
		return state, true
	}
	closeKind, resumeKind := store.CloseUnpaidArgs{}.Kind(), store.ResumeMerchantArgs{}.Kind()
	for _, o := range []*store.OrderView{due, held, legacy, ahead} {
		_, found := jobState(closeKind, o.ID.String())
		require.False(t, found, "no River job for a payment deadline")
	}
	_, err = b.pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at)
		VALUES (jsonb_build_object('order_id', $1::uuid, 'merchant_id', $2::uuid), $3, 25, 1, $4, 'pending', now() - interval '1 second')`,
		legacy.ID, m.ID, closeKind, store.QueueTimers)
	require.NoError(t, err)
	look := func() []store.FiredTimer {
		closed, err := st.CloseDueUnpaid(ctx, 100)
		require.NoError(t, err)
		fired, err := st.FireDueTimers(ctx, store.QueueTimers, 100)
		require.NoError(t, err)
		return append(closed, fired...)
	}
	fired := look()
	require.Len(t, fired, 1, "only the job set before")
	require.Equal(t, closeKind, fired[0].Kind)
	status := func(o *store.OrderView) domain.OrderStatus {
		got, err := st.GetOrder(ctx, o.ID, domain.Party{Actor: domain.ActorAdmin})
		require.NoError(t, err)
		return got.Status
	}
	state, _ := jobState(closeKind, legacy.ID.String())
	require.Equal(t, "available", state, "left to River's worker")
	require.Equal(t, domain.StatusAwaitingPayment, status(legacy), "the close decides by the order's own deadline")
	require.Equal(t, domain.StatusAwaitingPayment, status(due), "not due for ten minutes")

	// Their deadlines pass, but the last's.
	clock.Advance(11 * time.Minute)
	_, err = b.pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now() - interval '1 second' WHERE kind = $1`, resumeKind)
	require.NoError(t, err)
	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, held.ID)
	require.NoError(t, err)

	fired = look()
	kinds := []string{}
	for _, f := range fired {
		kinds = append(kinds, f.Kind)
	}
	require.ElementsMatch(t, []string{closeKind, closeKind, resumeKind}, kinds)
	for _, f := range fired {
		if f.Kind == closeKind {
			require.WithinDuration(t, due.PaymentDeadline, f.ScheduledAt, time.Millisecond, "fired at the order's own deadline")
		}
	}
	require.Equal(t, domain.StatusClosed, status(due))
	require.Equal(t, domain.StatusClosed, status(legacy))
	state, _ = jobState(resumeKind, "")
	require.Equal(t, "available", state, "left to River's worker")
	require.Equal(t, domain.StatusAwaitingPayment, status(held), "its timer is another's to fire")
	require.Equal(t, domain.StatusAwaitingPayment, status(ahead), "not due")

	require.NoError(t, holder.Rollback(ctx))
	n, err := st.CloseUnpaidOverdue(ctx, clock.Now(), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, domain.StatusClosed, status(held))
	require.Equal(t, domain.StatusAwaitingPayment, status(ahead))
}

// TestProcessesFireEachTimerOnce: three OS processes (this one and two runs
// of the test binary), each firing due payment timers from four goroutines
// at once over the same overdue orders, close every order exactly once
// between them: the firing skips the rows another process holds, and an
// order closed by one is not closed again by another.
func TestProcessesFireEachTimerOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, pool, st := sharedDatabaseStore(ctx, t)
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000, PaymentTimeout: 600})
	p := createProduct(t, st, m.ID, nil)
	const orders = 600
	for i := range orders {
		mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i)})
	}
	clock.Advance(11 * time.Minute)
	require.Equal(t, orders, fireInProcesses(ctx, t, url, st, timerFiring{kind: closeFiring, now: clock.Now()}), "each timer fired once")
	var closed, closedEvents int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'closed'),
		(SELECT count(*) FROM events WHERE merchant_id = $1 AND type = 'order.closed')
		FROM orders WHERE merchant_id = $1`, m.ID).Scan(&closed, &closedEvents))
	require.Equal(t, orders, closed)
	require.Equal(t, orders, closedEvents, "no order closed twice")
}

// TestProcessesExpireEachQueuedOrderOnce: the queue expiries, read without
// a lock by three OS processes (four goroutines each) at once over the same
// orders past their wait limit at three merchants, expire every order
// exactly once between them: each expiry locks its merchant, and acts only
// on an order still in the stay its read saw.
func TestProcessesExpireEachQueuedOrderOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, pool, st := sharedDatabaseStore(ctx, t)
	clock := newFakeClock(st)
	const orders, merchants = 600, 3
	ids := make([]uuid.UUID, merchants)
	products := make([]uuid.UUID, merchants)
	for i := range merchants {
		m := createMerchant(t, st, &merchantOpts{Capacity: 0, MaxQueueWait: 60})
		ids[i], products[i] = m.ID, createProduct(t, st, m.ID, nil).ID
	}
	for i := range orders {
		o := mustPlace(t, st, ids[i%merchants], products[i%merchants], placeOpts{Customer: fmt.Sprintf("c%d", i), PaymentRef: "paid"})
		require.Equal(t, domain.StatusQueued, o.Status)
	}
	var jobs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs))
	require.Zero(t, jobs, "a queued order is its own timer: no River job")
	clock.Advance(2 * time.Minute)
	require.Equal(t, orders, fireInProcesses(ctx, t, url, st, timerFiring{kind: expiryFiring, now: clock.Now()}), "each timer fired once")
	var expired, expiredEvents, letters int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'expired'),
		(SELECT count(*) FROM events WHERE merchant_id = ANY($1) AND type = 'order.expired'),
		(SELECT count(*) FROM dead_letters WHERE merchant_id = ANY($1))
		FROM orders WHERE merchant_id = ANY($1)`, ids).Scan(&expired, &expiredEvents, &letters))
	require.Equal(t, orders, expired)
	require.Equal(t, orders, expiredEvents, "no order expired twice")
	require.Equal(t, orders, letters)
}

// fireInProcesses runs plan in this process and in two runs of the test
// binary, all starting at one moment after their start-up, requires that
// each fired some timers, and returns how many they fired together.
func fireInProcesses(ctx context.Context, t *testing.T, url string, st *store.Store, plan timerFiring) int {
	t.Helper()
	const helpers = 2
	plan.start = time.Now().Add(time.Second)
	var wg sync.WaitGroup
	outs := make([][]byte, helpers)
	errs := make([]error, helpers)
	for i := range helpers {
		cmd := osexec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), timersHelperDB+"="+url, timersHelperKind+"="+plan.kind,
			timersHelperNow+"="+strconv.FormatInt(plan.now.UnixNano(), 10),
			timersHelperStart+"="+strconv.FormatInt(plan.start.UnixNano(), 10))
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = cmd.Output()
		}()
	}
	here, err := plan.run(ctx, st)
	require.NoError(t, err)
	wg.Wait()
	total := here
	for i, err := range errs {
		var exitErr *osexec.ExitError
		if errors.As(err, &exitErr) {
			require.NoError(t, err, "helper process %d: %s", i, exitErr.Stderr)
		}
		require.NoError(t, err, "helper process %d", i)
		n, err := strconv.Atoi(strings.TrimSpace(string(outs[i])))
		require.NoError(t, err, "helper process %d printed %q", i, outs[i])
		require.Positive(t, n, "helper process %d fired no timer: the processes did not contend", i)
		total += n
	}
	require.Positive(t, here, "this process fired no timer: the processes did not contend")
	return total
}

// The timers tests run this test binary again as OS processes firing
// timers; these variables tell such a process the database, the kind of
// timer, the time its clock reads and the moment to start firing.
const (
	timersHelperDB    = "ORDERD_TIMERS_HELPER_DB"
	timersHelperKind  = "ORDERD_TIMERS_HELPER_KIND"
	timersHelperNow   = "ORDERD_TIMERS_HELPER_NOW_NS"
	timersHelperStart = "ORDERD_TIMERS_HELPER_START_NS"
)

// The kinds of timer a timerFiring fires.
const (
	closeFiring  = "close"
	expiryFiring = "expiry"
)

// timerFiring is one process's part: from start, four goroutines fire the
// timers of its kind due at now, seven at a time, until none is left.
type timerFiring struct {
	kind       string
	now, start time.Time
}

func (f timerFiring) run(ctx context.Context, st *store.Store) (int, error) {
	setClock(st, func() time.Time { return f.now })
	time.Sleep(time.Until(f.start))
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				found, fired, err := f.fire(ctx, st)
				if err != nil {
					errs <- err
					return
				}
				if found == 0 {
					return
				}
				total.Add(int64(fired))
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return int(total.Load()), errors.Join(all...)
}

// fire fires up to seven timers due and reports how many it found due and
// how many of those it fired: an expiry's read takes no lock, so what it
// finds another process may expire first.
func (f timerFiring) fire(ctx context.Context, st *store.Store) (found, fired int, err error) {
	if f.kind == closeFiring {
		closed, err := st.CloseDueUnpaid(ctx, 7)
		return len(closed), len(closed), err
	}
	due, err := st.QueuedDue(ctx, 7, nil)
	for _, q := range due {
		if err != nil {
			break
		}
		var expired bool
		if expired, err = st.ExpireQueued(ctx, q.ID, q.QueuedAt); expired {
			fired++
		}
	}
	return len(due), fired, err
}

// timersHelper is a helper process's part: it prints how many timers it
// fired.
func timersHelper() error {
	ctx := context.Background()
	f := timerFiring{kind: os.Getenv(timersHelperKind)}
	for v, at := range map[string]*time.Time{timersHelperNow: &f.now, timersHelperStart: &f.start} {
		ns, err := strconv.ParseInt(os.Getenv(v), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		*at = time.Unix(0, ns)
	}
	return runInHelperProcess(ctx, os.Getenv(timersHelperDB), 4, func(ctx context.Context, st *store.Store, _ *pgxpool.Pool) error {
		n, err := f.run(ctx, st)
		fmt.Println(n)
		return err
	})
}

// TestAnOrderWhoseCloseFailsHoldsUpNoOther: the first order past its
// deadline cannot be closed (a trigger refuses it); the firing still
// closes the orders behind it, reports the failure, and leaves that order
// out of the next batches, which then close the orders falling due
// without an error. Closed in one transaction for all, the first order
// failed every batch it came first in, and no payment deadline closed
// again while it stayed unpaid.
func TestAnOrderWhoseCloseFailsHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 10, PaymentTimeout: 60})
	p := createProduct(t, st, m.ID, nil)
	poison := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "poison"})
	clock.Advance(time.Second)
	behind := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "behind"})
	clock.Advance(time.Second)
	later := mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: "later"})
	_, err := b.pool.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION refuse_close() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused'; END $$;
		CREATE TRIGGER refuse_close BEFORE UPDATE ON orders FOR EACH ROW
			WHEN (NEW.id = '%s' AND NEW.status = 'closed') EXECUTE FUNCTION refuse_close()`, poison.ID))
	require.NoError(t, err)
	status := func(o *store.OrderView) domain.OrderStatus {
		got, err := st.GetOrder(ctx, o.ID, domain.Party{Actor: domain.ActorAdmin})
		require.NoError(t, err)
		return got.Status
	}

	clock.Advance(59500 * time.Millisecond)
	fired, err := st.CloseDueUnpaid(ctx, 100)
	require.ErrorContains(t, err, "refused")
	require.Len(t, fired, 1)
	require.Equal(t, domain.StatusAwaitingPayment, status(poison))
	require.Equal(t, domain.StatusClosed, status(behind))
	require.Equal(t, domain.StatusAwaitingPayment, status(later), "not due yet")

	clock.Advance(time.Second)
	fired, err = st.CloseDueUnpaid(ctx, 100)
	require.NoError(t, err, "the order that failed is left out")
	require.Len(t, fired, 1)
	require.Equal(t, domain.StatusClosed, status(later))
	require.Equal(t, domain.StatusAwaitingPayment, status(poison))
}

// TestFiringReadsOnlyTheRecentDeadlines: while a snapshot taken before the
// closes stays open (a second connection's, as the periodic audit's), the
// entries the closed orders leave in orders_unpaid_deadline_idx cannot be
// marked dead, and a look from the index's start visits the heap for each;
// CloseDueUnpaid's next look starts a moment before its last cutoff and
// reads a few pages.
func TestFiringReadsOnlyTheRecentDeadlines(t *testing.T) {
	t.Parallel()
	st, b := setup(t)
	ctx := context.Background()
	clock := newFakeClock(st)
	m := createMerchant(t, st, &merchantOpts{Capacity: 1000, PaymentTimeout: 60})
	p := createProduct(t, st, m.ID, nil)
	const orders = 300
	for i := range orders {
		mustPlace(t, st, m.ID, p.ID, placeOpts{Customer: fmt.Sprintf("c%d", i)})
		clock.Advance(100 * time.Millisecond)
	}
	holder, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT count(*) FROM orders`)
	require.NoError(t, err)

	clock.Advance(2 * time.Minute)
	fired, err := st.CloseDueUnpaid(ctx, 500)
	require.NoError(t, err)
	require.Len(t, fired, orders)
	conn, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	fromStart, err := store.CloseDueUnpaidBlocks(ctx, st, conn.Conn(), 500, true)
	require.NoError(t, err)
	next, err := store.CloseDueUnpaidBlocks(ctx, st, conn.Conn(), 500, false)
	require.NoError(t, err)
	require.Greater(t, fromStart, 8, "the closed orders' entries, not yet dead to every snapshot")
	require.Less(t, next, 3)
}
