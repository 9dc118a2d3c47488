package jobs_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
)

type bundle struct {
	pool  *pgxpool.Pool
	store *store.Store
}

// setup makes a store on a new database, configured further by configure.
func setup(t *testing.T, configure ...func(*store.Config)) *bundle {
	t.Helper()
	pool := storetest.Pool(t)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	cfg := store.Config{Pool: pool, Jobs: ins}
	for _, c := range configure {
		c(&cfg)
	}
	st := store.New(cfg)
	return &bundle{pool: pool, store: st}
}

// startWorkers runs a River client with orderd's workers, and the timers'
// backstop, until the test ends: what every orderd process runs.
func startWorkers(t *testing.T, b *bundle) *river.Client[pgx.Tx] {
	t.Helper()
	return startWorkersWith(t, b, jobs.DefaultConfig())
}

func startWorkersWith(t *testing.T, b *bundle, cfg jobs.Config) *river.Client[pgx.Tx] {
	t.Helper()
	client := startRiver(t, b, cfg)
	backstopCtx, stopBackstop := context.WithCancel(context.Background())
	backstopDone := make(chan struct{})
	go func() {
		defer close(backstopDone)
		jobs.NewBackstop(b.store, cfg).Run(backstopCtx)
	}()
	t.Cleanup(func() {
		stopBackstop()
		<-backstopDone
	})
	return client
}

// startRiver starts River's workers without the backstop, so that a timer
// fires only if River fires it.
func startRiver(t *testing.T, b *bundle, cfg jobs.Config) *river.Client[pgx.Tx] {
	t.Helper()
	cfg.SweepInterval = time.Second
	client, err := jobs.NewClient(b.pool, b.store, cfg)
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, client.Stop(stopCtx))
	})
	return client
}

// timerLateness is how late, after its deadline, River's own fetch may fire
// a timer in these tests. A timer left to River's leader-only scheduler,
// which runs every 5 s, is up to 5 s late, and of orders due at random
// moments most would be more than this late; one that never fires never
// closes. How late timers fire in normal operation is what `orderd bench
// timers` measures: on a machine shared with other test suites, a unit test
// bounding it tightly fails for lack of CPU, not for a broken timer.
const timerLateness = 2500 * time.Millisecond

func merchantAndProduct(t *testing.T, st *store.Store, capacity, paymentTimeout int) (uuid.UUID, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	m, err := st.CreateMerchant(ctx, domain.MerchantSettings{
		Name: "m", Capacity: capacity, PrepSeconds: 60, MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: paymentTimeout,
	}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	stock := 100
	p, err := st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "tea", PriceCents: 100, Stock: &stock})
	require.NoError(t, err)
	return m.ID, p.ID
}

func placeUnpaid(t *testing.T, st *store.Store, merchantID, productID uuid.UUID, customer string, paymentRef string) *store.OrderView {
	t.Helper()
	res, err := st.PlaceOrder(context.Background(), store.PlaceRequest{
		MerchantID: merchantID, CustomerID: customer, PaymentRef: paymentRef,
		Lines:          []domain.LineRequest{{ProductID: productID, Quantity: 1}},
		IdempotencyKey: uuid.NewString(), RequestHash: []byte("h"),
	})
	require.NoError(t, err)
	return res.Order
}

// queuedOrder places a paid order with a merchant of no capacity whose
// line lets an order wait wait seconds: queued, its wait limit is its own
// timer on one PostgreSQL, which the backstop's looks fire (no River job).
func queuedOrder(t *testing.T, st *store.Store, wait int, customer string) *store.OrderView {
	t.Helper()
	m, err := st.CreateMerchant(context.Background(), domain.MerchantSettings{
		Name: "m", Capacity: 0, PrepSeconds: 60, MaxQueueWaitSeconds: wait, PaymentTimeoutSeconds: 900,
	}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	p, err := st.CreateProduct(context.Background(), store.CreateProductParams{MerchantID: m.ID, Name: "tea", PriceCents: 100})
	require.NoError(t, err)
	o := placeUnpaid(t, st, m.ID, p.ID, customer, "paid")
	require.Equal(t, domain.StatusQueued, o.Status)
	return o
}

// pausedMerchant pauses a new merchant until for from now: its resume is a
// River timer (resume_merchant). It returns the merchant and the pause's
// end as stored.
func pausedMerchant(t *testing.T, b *bundle, d time.Duration) (uuid.UUID, time.Time) {
	t.Helper()
	ctx := context.Background()
	m, err := b.store.CreateMerchant(ctx, domain.MerchantSettings{
		Name: "m", Capacity: 1, PrepSeconds: 60, MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900,
	}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	until := time.Now().Add(d)
	_, err = b.store.PauseMerchant(ctx, m.ID, domain.PauseRequest{Mode: domain.PauseQueue, Until: &until}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT paused_until FROM merchants WHERE id = $1`, m.ID).Scan(&until))
	return m.ID, until
}

// holdResumeJob leaves a merchant's resume job as a process that fetched it
// and died leaves it: running, for a minute before River's rescuer would
// look.
func holdResumeJob(t *testing.T, b *bundle, merchant uuid.UUID) {
	t.Helper()
	tag, err := b.pool.Exec(context.Background(), `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(),
		attempted_by = ARRAY['dead-process'] WHERE kind = $1 AND args->>'merchant_id' = $2`, store.ResumeMerchantArgs{}.Kind(), merchant.String())
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

func waitStatus(t *testing.T, st *store.Store, id uuid.UUID, want domain.OrderStatus, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		o, err := st.GetOrder(context.Background(), id, domain.Party{Actor: domain.ActorAdmin})
		require.NoError(t, err)
		if o.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s is %s after %s, want %s", id, o.Status, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPaymentDeadlineClosesOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorkers(t, b)
	m, p := merchantAndProduct(t, b.store, 5, 2)
	unpaid := placeUnpaid(t, b.store, m, p, "alice", "")
	paid := placeUnpaid(t, b.store, m, p, "bob", "")
	_, err := b.store.PayOrder(context.Background(), paid.ID, "r", domain.Party{Actor: domain.ActorCustomer, Subject: "bob"}, "")
	require.NoError(t, err)

	waitStatus(t, b.store, unpaid.ID, domain.StatusClosed, 15*time.Second)
	o, err := b.store.GetOrder(context.Background(), unpaid.ID, domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, domain.ReasonPaymentTimeout, *o.StatusReason)
	waitStatus(t, b.store, paid.ID, domain.StatusAccepted, time.Second)
	prod, err := b.store.GetProduct(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, 99, *prod.StockRemaining, "the closed order's unit is back")
}

// TestTimersSurviveRestart runs the workers in a process of their own,
// which closes the orders whose deadlines fall due while it runs, kills it
// with SIGKILL before the others fall due, and leaves them overdue with no
// process running; workers started afterwards (the process come back, with
// the dead one's River leadership not yet expired) close every one of them.
func TestTimersSurviveRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := b.pool.Config().ConnString()
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), workersHelperDB+"="+url)
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "working\n", line)

	// Deadlines one second after placement, and eight: the first fall due
	// while the workers' process runs, the others once it is dead.
	mSoon, pSoon := merchantAndProduct(t, b.store, 100, 1)
	mLater, pLater := merchantAndProduct(t, b.store, 100, 8)
	var before, after []uuid.UUID
	for i := range 5 {
		before = append(before, placeUnpaid(t, b.store, mSoon, pSoon, fmt.Sprintf("b%d", i), "").ID)
		after = append(after, placeUnpaid(t, b.store, mLater, pLater, fmt.Sprintf("a%d", i), "").ID)
	}
	for _, id := range before {
		waitStatus(t, b.store, id, domain.StatusClosed, 5*time.Second)
	}
	var first time.Time
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT min(payment_deadline) FROM orders WHERE id = ANY($1)`, after).Scan(&first))
	require.True(t, time.Now().Before(first), "the process is killed before the later deadlines")
	require.NoError(t, helper.Process.Signal(syscall.SIGKILL))
	err = helper.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "the workers' process was killed")

	// Every later deadline passes while no process runs: nothing closes.
	var last time.Time
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT max(payment_deadline) FROM orders WHERE id = ANY($1)`, after).Scan(&last))
	time.Sleep(time.Until(last.Add(500 * time.Millisecond)))
	for _, id := range after {
		o, err := b.store.GetOrder(context.Background(), id, domain.Party{Actor: domain.ActorAdmin})
		require.NoError(t, err)
		require.Equal(t, domain.StatusAwaitingPayment, o.Status, "order %s closed while no process ran", id)
	}
	startWorkers(t, b)
	for _, id := range after {
		waitStatus(t, b.store, id, domain.StatusClosed, 3*time.Second+timerLateness)
	}
}

func TestDrainJobAdmitsWhatInlineLeft(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *store.Config) { c.InlineDrainLimit = -1 })
	startWorkers(t, b)
	m, p := merchantAndProduct(t, b.store, 1, 900)
	first := placeUnpaid(t, b.store, m, p, "c0", "r")
	second := placeUnpaid(t, b.store, m, p, "c1", "r")
	require.Equal(t, domain.StatusQueued, second.Status)
	_, err := b.store.CompleteOrder(context.Background(), first.ID, domain.Party{Actor: domain.ActorAdmin}, "")
	require.NoError(t, err)
	waitStatus(t, b.store, second.ID, domain.StatusAccepted, 5*time.Second)
}

func TestSweepDrainsForgottenMerchant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m, p := merchantAndProduct(t, b.store, 0, 900)
	queued := placeUnpaid(t, b.store, m, p, "c0", "r")
	require.Equal(t, domain.StatusQueued, queued.Status)
	// Free a unit behind the store's back, as a lost drain trigger would leave it.
	_, err := b.pool.Exec(context.Background(), `UPDATE merchants SET capacity = 1 WHERE id = $1`, m)
	require.NoError(t, err)
	startWorkers(t, b)
	waitStatus(t, b.store, queued.ID, domain.StatusAccepted, 10*time.Second)
}

func TestPeriodicAuditExportsViolations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	merchantAndProduct(t, b.store, 1, 900)
	// Drift a merchant's load behind the store's back.
	_, err := b.pool.Exec(context.Background(), `UPDATE merchants SET active = 3`)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	cfg := jobs.DefaultConfig()
	cfg.AuditGauge = jobs.NewAuditGauge(reg)
	startWorkersWith(t, b, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for testutil.CollectAndCount(cfg.AuditGauge) < len(store.AuditChecks) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, 1.0, testutil.ToFloat64(cfg.AuditGauge.WithLabelValues("merchant_load_drift")))
	require.Equal(t, 0.0, testutil.ToFloat64(cfg.AuditGauge.WithLabelValues("stock_drift")))
}

// TestShortWindowClosesOnTime places orders with a one-second payment window
// at random moments over several seconds, so that some fall just after a
// tick of River's leader-only scheduler (every 5 s): River alone (no
// backstop) closes each at its deadline, never before, and not as late as
// that scheduler would (timerLateness).
func TestShortWindowClosesOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorkers(t, b)
	m, p := merchantAndProduct(t, b.store, 5, 1)
	const orders = 20
	type placed struct {
		id  uuid.UUID
		err error
	}
	results := make(chan placed, orders)
	for i := range orders {
		go func() {
			time.Sleep(time.Duration(rand.Int64N(int64(6 * time.Second))))
			res, err := b.store.PlaceOrder(context.Background(), store.PlaceRequest{
				MerchantID: m, CustomerID: fmt.Sprintf("c%d", i),
				Lines:          []domain.LineRequest{{ProductID: p, Quantity: 1}},
				IdempotencyKey: uuid.NewString(), RequestHash: []byte("h"),
			})
			if err != nil {
				results <- placed{err: err}
				return
			}
			results <- placed{id: res.Order.ID}
		}()
	}
	for range orders {
		r := <-results
		require.NoError(t, r.err)
		id := r.id
		waitStatus(t, b.store, id, domain.StatusClosed, 10*time.Second)
		var late time.Duration
		require.NoError(t, b.pool.QueryRow(context.Background(),
			`SELECT ended_at - payment_deadline FROM orders WHERE id = $1`, id).Scan(&late))
		require.GreaterOrEqual(t, late, time.Duration(0), "order %s closed %s before its deadline", id, -late)
		require.LessOrEqual(t, late, timerLateness, "order %s closed %s after its deadline", id, late)
	}
}

// TestBackstopFiresTimerOfDeadProcess leaves a pause's resume job as a
// process that fetched it and died leaves it: the backstop resumes the
// merchant anyway, a grace period after the pause's end, with no River
// leader involved.
func TestBackstopFiresTimerOfDeadProcess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m, _ := pausedMerchant(t, b, time.Second)
	holdResumeJob(t, b, m)
	startWorkers(t, b)
	resumedAt(t, b, m.String(), 5*time.Second)
	var state string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT state FROM river_job WHERE args->>'merchant_id' = $1`, m.String()).Scan(&state))
	require.Equal(t, "running", state, "River itself never ran the job")
}

// TestBackstopLooksWhereRiverHasOverdueJobs: a backstop that reads every
// kind's deadlines only now and then (on Citus, every shard, where it looks
// at River's table when there is something to do there) still resumes,
// at once, a merchant whose resume job a dead process holds (River's table
// shows it overdue), and leaves one whose job is gone to its next full
// round, which then resumes it.
func TestBackstopLooksWhereRiverHasOverdueJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	run := func(t *testing.T, b *bundle, fullEvery time.Duration) {
		cfg := jobs.DefaultConfig()
		cfg.TimerBackstopFullEvery = fullEvery
		backstopCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		// Its first round, before the deadlines, reads every kind's.
		go func() { defer close(done); jobs.NewBackstop(b.store, cfg).LookAsOnCitus().Run(backstopCtx) }()
		t.Cleanup(func() { stop(); <-done })
	}
	t.Run("a job held by a dead process", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		held, _ := pausedMerchant(t, b, time.Second)
		holdResumeJob(t, b, held)
		run(t, b, time.Hour)
		resumedAt(t, b, held.String(), 5*time.Second)
	})
	t.Run("a job lost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		lost, until := pausedMerchant(t, b, time.Second)
		_, err := b.pool.Exec(ctx, `DELETE FROM river_job WHERE args->>'merchant_id' = $1`, lost.String())
		require.NoError(t, err)
		start := time.Now()
		run(t, b, 5*time.Second)
		// Past its end and the grace, before the next full round.
		time.Sleep(time.Until(until.Add(2 * time.Second)))
		require.Less(t, time.Since(start), 5*time.Second, "the machine was too slow to look before the full round")
		var paused bool
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT paused_until IS NOT NULL FROM merchants WHERE id = $1`, lost).Scan(&paused))
		require.True(t, paused, "no overdue job names it: left to the next full round")
		resumedAt(t, b, lost.String(), 8*time.Second)
	})
}

// TestTimerJobsWaitAvailable checks what the timers rely on: a timer due
// within the look-ahead is inserted available with its deadline as
// scheduled_at (any process's fetch takes it when due, no leader promotes
// it), and River does not start it before then.
func TestTimerJobsWaitAvailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startWorkers(t, b)
	m, until := pausedMerchant(t, b, time.Second)
	var state string
	var scheduledAt time.Time
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT state, scheduled_at FROM river_job
		WHERE args->>'merchant_id' = $1`, m.String()).Scan(&state, &scheduledAt))
	require.Equal(t, "available", state)
	require.WithinDuration(t, until, scheduledAt, time.Millisecond)
	resumedAt(t, b, m.String(), 5*time.Second)
	// River stamps attempted_at, from the database's clock, when a fetch
	// takes the job: that, not a look at its state half a second before the
	// deadline (which a loaded machine may take past it), says when it ran.
	var attemptedAt *time.Time
	require.Eventually(t, func() bool {
		err := b.pool.QueryRow(context.Background(), `SELECT attempted_at FROM river_job WHERE args->>'merchant_id' = $1`,
			m.String()).Scan(&attemptedAt)
		return err == nil && attemptedAt != nil
	}, 5*time.Second, 20*time.Millisecond, "River ran the timer")
	require.False(t, attemptedAt.Before(scheduledAt), "the timer started at %s, before its deadline %s", *attemptedAt, scheduledAt)
}

// TestFarTimersWaitOutsideTheFetch: River's fetch reads every available job
// of the timers queue each time it looks, due or not, so a timer due beyond
// the look-ahead is stored aside, and promoting it makes it available only
// once its deadline comes, its deadline kept. Stored
// available, ten thousand payment windows of minutes made each fetch read
// them all, and the timers due fired seconds late. It waits pending, which
// River's own scheduler leaves alone even when its look-ahead reaches it:
// stored scheduled, the timers were promoted by the leader's statement,
// which held every job due within its look-ahead locked for as long as it
// read all of River's table (over a second in bench timers), and the timers
// falling due meanwhile fired that much late.
func TestFarTimersWaitOutsideTheFetch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	near, _ := pausedMerchant(t, b, time.Second)
	far, _ := pausedMerchant(t, b, 10*time.Minute)
	job := func(m uuid.UUID) (state string, scheduledAt time.Time) {
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT state, scheduled_at FROM river_job WHERE args->>'merchant_id' = $1`,
			m.String()).Scan(&state, &scheduledAt))
		return state, scheduledAt
	}
	state, _ := job(near)
	require.Equal(t, "available", state, "due within the look-ahead")
	state, _ = job(far)
	require.Equal(t, "pending", state, "due ten minutes ahead: outside the fetch's range")

	// River's scheduler, as its leader runs it, looking past the deadline.
	past := time.Now().Add(time.Hour)
	_, err := riverpgxv5.New(b.pool).GetExecutor().JobSchedule(ctx, &riverdriver.JobScheduleParams{Max: 100, Now: &past})
	require.NoError(t, err)
	state, _ = job(far)
	require.Equal(t, "pending", state, "River's scheduler leaves the timer to the promotion")

	fired, err := b.store.FireDueTimers(ctx, store.QueueTimers, 100)
	require.NoError(t, err)
	require.Empty(t, fired, "nothing pending is due")
	state, _ = job(far)
	require.Equal(t, "pending", state)

	// Its deadline come (moved to a moment ago), the promotion makes it
	// available, its deadline kept.
	var due time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `UPDATE river_job SET scheduled_at = now() - interval '1 second'
		WHERE args->>'merchant_id' = $1 RETURNING scheduled_at`, far.String()).Scan(&due))
	fired, err = b.store.FireDueTimers(ctx, store.QueueTimers, 100)
	require.NoError(t, err)
	require.Len(t, fired, 1)
	state, scheduledAt := job(far)
	require.Equal(t, "available", state)
	require.WithinDuration(t, due, scheduledAt, time.Millisecond, "promoted with its deadline kept")
}

// TestTimersDueTogetherFireWithoutALeader: 200 payment deadlines due within
// the same second, while another process holds River's leadership and the
// backstop's grace is an hour (so its overdue round never fires them):
// every one is fired by the backstop's process as it falls due, none
// before its deadline, without a River job (the order is its own timer).
func TestTimersDueTogetherFireWithoutALeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, err := b.pool.Exec(ctx, `INSERT INTO river_leader (leader_id, elected_at, expires_at) VALUES ('another-process', now(), now() + interval '1 hour')`)
	require.NoError(t, err)
	m, _ := merchantAndProduct(t, b.store, 1000, 4)
	unstocked, err := b.store.CreateProduct(ctx, store.CreateProductParams{MerchantID: m, Name: "water", PriceCents: 100})
	require.NoError(t, err)
	p := unstocked.ID
	const orders = 200
	ids := make([]string, orders)
	errs := make(chan error, orders)
	for i := range orders {
		go func() {
			res, err := b.store.PlaceOrder(ctx, store.PlaceRequest{
				MerchantID: m, CustomerID: fmt.Sprintf("c%d", i),
				Lines:          []domain.LineRequest{{ProductID: p, Quantity: 1}},
				IdempotencyKey: uuid.NewString(), RequestHash: []byte("h"),
			})
			if err == nil {
				ids[i] = res.Order.ID.String()
			}
			errs <- err
		}()
	}
	for range orders {
		require.NoError(t, <-errs)
	}
	cfg := jobs.DefaultConfig()
	cfg.TimerGrace = time.Hour
	startWorkersWith(t, b, cfg)
	var closed, early int
	require.Eventually(t, func() bool {
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'closed'), count(*) FILTER (WHERE ended_at < payment_deadline)
			FROM orders WHERE id = ANY($1::uuid[])`, ids).Scan(&closed, &early))
		return closed == orders
	}, 30*time.Second, 100*time.Millisecond, "every timer fired")
	require.Zero(t, early, "no order closed before its deadline")
	var jobs int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'order_id' = ANY($1)`, ids).Scan(&jobs))
	require.Zero(t, jobs, "no River job for a payment deadline")
	var leader string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT leader_id FROM river_leader`).Scan(&leader))
	require.Equal(t, "another-process", leader)
}

// TestPauseEndsOnTimeByRiverAlone: pauses ending one second after they were
// set, at random moments, so that some fall just after a tick of
// River's leader-only scheduler (every 5 s), end by River alone (no
// backstop) at their end and not as late as that scheduler would.
func TestPauseEndsOnTimeByRiverAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startRiver(t, b, jobs.DefaultConfig())
	type pause struct {
		merchant uuid.UUID
		until    time.Time
	}
	var pauses []pause
	for range 8 {
		time.Sleep(time.Duration(rand.Int64N(int64(700 * time.Millisecond))))
		m, until := pausedMerchant(t, b, time.Second)
		pauses = append(pauses, pause{m, until})
	}
	for _, p := range pauses {
		late := resumedAt(t, b, p.merchant.String(), 10*time.Second).Sub(p.until)
		require.GreaterOrEqual(t, late, time.Duration(0), "merchant %s resumed %s before its pause's end", p.merchant, -late)
		require.LessOrEqual(t, late, timerLateness, "merchant %s resumed %s after its pause's end", p.merchant, late)
	}
}

// TestQueueExpiryOnTime: on one PostgreSQL a queued order is its own expiry
// timer, so the backstop's process alone, without River's workers, expires
// queued orders placed at random moments with a one-second wait limit at
// their limit, never before, and writes no River job for them.
func TestQueueExpiryOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := jobs.DefaultConfig()
	cfg.TimerGrace = time.Hour
	backstopCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); jobs.NewBackstop(b.store, cfg).Run(backstopCtx) }()
	t.Cleanup(func() { stop(); <-done })
	ctx := context.Background()
	m, err := b.store.CreateMerchant(ctx, domain.MerchantSettings{
		Name: "m", Capacity: 0, PrepSeconds: 60, MaxQueueWaitSeconds: 1, PaymentTimeoutSeconds: 900,
	}, store.Meta{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	p, err := b.store.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "tea", PriceCents: 100})
	require.NoError(t, err)
	var ids []uuid.UUID
	for i := range 8 {
		time.Sleep(time.Duration(rand.Int64N(int64(700 * time.Millisecond))))
		o := placeUnpaid(t, b.store, m.ID, p.ID, fmt.Sprintf("c%d", i), "paid")
		require.Equal(t, domain.StatusQueued, o.Status)
		ids = append(ids, o.ID)
	}
	for _, id := range ids {
		waitStatus(t, b.store, id, domain.StatusExpired, 10*time.Second)
		var late time.Duration
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT ended_at - queue_expires_at FROM orders WHERE id = $1`, id).Scan(&late))
		require.GreaterOrEqual(t, late, time.Duration(0), "order %s expired %s before its limit", id, -late)
		require.LessOrEqual(t, late, timerLateness, "order %s expired %s after its limit", id, late)
	}
	var jobs int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, store.ExpireQueuedArgs{}.Kind()).Scan(&jobs))
	require.Zero(t, jobs, "no River job for a queue expiry")
}

// TestQueueExpiryWaitsForAHeldMerchantAlone: while a second connection holds
// one merchant's row past its queued order's wait limit, another merchant's
// order, due just after, expires on time (the held one's expiry waits for
// its own merchant only); once the lock is let go the held one expires, once.
func TestQueueExpiryWaitsForAHeldMerchantAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	held := queuedOrder(t, b.store, 1, "held")
	free := queuedOrder(t, b.store, 1, "free")
	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM merchants WHERE id = $1 FOR UPDATE`, held.MerchantID)
	require.NoError(t, err)
	startWorkers(t, b)

	waitStatus(t, b.store, free.ID, domain.StatusExpired, 10*time.Second)
	var late time.Duration
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT ended_at - queue_expires_at FROM orders WHERE id = $1`, free.ID).Scan(&late))
	require.LessOrEqual(t, late, timerLateness, "the free merchant's order expired %s late", late)
	time.Sleep(500 * time.Millisecond)
	o, err := b.store.GetOrder(ctx, held.ID, domain.Party{Actor: domain.ActorAdmin})
	require.NoError(t, err)
	require.Equal(t, domain.StatusQueued, o.Status, "expired while its merchant's row was held")

	require.NoError(t, holder.Rollback(ctx))
	waitStatus(t, b.store, held.ID, domain.StatusExpired, 5*time.Second)
	time.Sleep(time.Second)
	var expiries int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE stream_id = $1 AND type = 'order.expired'`, held.ID).Scan(&expiries))
	require.Equal(t, 1, expiries)
}

// lookingWorkers starts River's workers and the backstop as on Citus, where
// the backstop looks at River's timers queue (at most every lookEvery) and
// River's fetch polls only now and then, with a grace of an hour, so that
// a timer fires only if a look woke River's fetch in time; the store's
// timers ring the process's alarm when alarmed.
func lookingWorkers(t *testing.T, lookEvery time.Duration, alarmed bool) *bundle {
	t.Helper()
	cfg := jobs.DefaultConfig()
	cfg.TimerGrace, cfg.TimerLookEvery = time.Hour, lookEvery
	var b *bundle
	if alarmed {
		cfg.TimerAlarm = jobs.NewTimerAlarm()
		b = setup(t, func(c *store.Config) {
			ins, err := jobs.NewInserterWithAlarm(c.Pool, cfg.TimerAlarm)
			require.NoError(t, err)
			c.Jobs = ins
		})
	} else {
		b = setup(t)
	}
	startRiver(t, b, cfg)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); jobs.NewBackstop(b.store, cfg).LookAsOnCitus().Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return b
}

// TestLooksFireTimersOnTime: on Citus River's fetch of the timers queue
// polls only every few seconds, and the backstop looks at the queue when
// there is something to do there. Pauses ending one and three seconds after
// they were set (a job inserted available, and one pending), at random
// moments, end at their end and not as late as that poll would (nor as the
// backstop's grace, an hour here): woken by the alarm their process rang
// when it set them, with no look otherwise for a minute; and, set by another
// process (no alarm), by the look that saw them, looking every second.
func TestLooksFireTimersOnTime(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		lookEvery time.Duration
		alarmed   bool
	}{{"by the alarm", time.Minute, true}, {"set elsewhere", time.Second, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := lookingWorkers(t, c.lookEvery, c.alarmed)
			type pause struct {
				merchant uuid.UUID
				until    time.Time
			}
			var pauses []pause
			for i := range 6 {
				time.Sleep(time.Duration(rand.Int64N(int64(700 * time.Millisecond))))
				m, until := pausedMerchant(t, b, time.Duration(1+2*(i%2))*time.Second)
				pauses = append(pauses, pause{m, until})
			}
			for _, p := range pauses {
				late := resumedAt(t, b, p.merchant.String(), 10*time.Second).Sub(p.until)
				require.GreaterOrEqual(t, late, time.Duration(0), "merchant %s resumed %s before its pause's end", p.merchant, -late)
				require.LessOrEqual(t, late, timerLateness, "merchant %s resumed %s after its pause's end", p.merchant, late)
			}
		})
	}
}
