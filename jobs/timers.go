package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/orderd/orderd/store"
)

// A timer is a River job in the timers queue (store.QueueTimers) scheduled at
// its deadline and inserted in the transaction that sets the deadline: River
// is its durable record, and it fires exactly once in effect because its
// worker acts only on what is still pending. A payment deadline, and a
// queue expiry on one PostgreSQL, are the exceptions: the order's own row is
// its record, and store.CloseDueUnpaid and store.QueuedDue read the orders
// past it (nothing sets a job for them). On Citus the payment deadlines are
// read on each worker by the one process holding that worker's timer lock,
// and closed there (store.CloseDueUnpaid).
//
// River inserts a job with a future ScheduledAt as `scheduled`, and only the
// elected leader promotes scheduled jobs, every five seconds: a short timer
// waits for the next tick, and nothing is promoted while a dead leader's
// lease runs out. Timers due within timerLookAhead are instead inserted
// `available` with their future scheduled_at (timerInsertMiddleware), which
// River's fetch takes only once its scheduled_at has passed, in whichever
// process polls first, leader or not. The others wait `pending`. On one
// PostgreSQL every process fires them itself as they fall due (Backstop,
// store.FireDueTimers), making them available for River's workers, closes
// the orders past their payment deadline (store.CloseDueUnpaid) and expires
// those queued past their wait limit (queueExpiries).
// On Citus, where the jobs and the orders live on different nodes, every
// process promotes them instead as they come within timerLookAhead of
// their deadline (store.PromoteTimers), for River's fetch to fire. Timers
// further ahead wait outside the fetch's range because each
// fetch reads every available job of its queue, due or not (its index
// orders by priority before scheduled_at): tens of thousands of payment
// deadlines minutes ahead, all available, made each fetch read them all,
// several times a second in every process, and the timers due fell behind.
// They wait `pending`, which River never moves by itself, not `scheduled`:
// the leader's scheduler would take them with its own statement, which
// holds the jobs due within its look-ahead locked while it runs, and its
// plan reads all of River's table.
//
// A timer whose job a process fetched and then died with stays `running`
// until the leader's rescuer notices, a minute or more later. Every kind of
// timer therefore has a backstop: a query of the domain's own index of
// deadlines that fires, directly, what is still pending a grace period after
// its deadline. Every process runs it (Backstop), so it needs no leader.

// OverdueFunc fires up to limit timers of one kind whose deadline is before
// cutoff and whose effect has not happened, and reports how many it found.
// It must be idempotent: the timer's River job may fire at the same moment.
type OverdueFunc func(ctx context.Context, cutoff time.Time, limit int) (int, error)

// TimerKind is one kind of timer: the River worker that fires it on time and
// the backstop query that fires it when its job could not.
type TimerKind struct {
	kind     string
	queue    string
	register func(*river.Workers)
	overdue  OverdueFunc
}

// NewTimerKind registers a kind of timer. Its args must name the timers queue
// in their InsertOpts (NewClient refuses them otherwise); insert them with a
// ScheduledAt at the deadline, in the transaction that sets it.
func NewTimerKind[T interface {
	river.JobArgs
	InsertOpts() river.InsertOpts
}](worker river.Worker[T], overdue OverdueFunc) TimerKind {
	var args T
	return TimerKind{
		kind:     args.Kind(),
		queue:    args.InsertOpts().Queue,
		register: func(w *river.Workers) { river.AddWorker(w, worker) },
		overdue:  overdue,
	}
}

// timerKinds lists every timer orderd sets. A new kind of timer is one more
// line here: its args in the timers queue, its worker, its backstop.
func timerKinds(st *store.Store) []TimerKind {
	return []TimerKind{
		NewTimerKind(&CloseUnpaidWorker{store: st}, st.CloseUnpaidOverdue),
		NewTimerKind(&ExpireQueuedWorker{store: st}, st.ExpireQueuedOverdue),
		NewTimerKind(&SettleDropWorker{store: st}, st.DropsToSettle),
		NewTimerKind(&ResumeMerchantWorker{store: st}, st.ResumeOverdue),
		NewTimerKind(&ReleaseScheduledWorker{store: st}, st.ReleasesOverdue),
		NewTimerKind(&PeriodEdgeWorker{store: st}, st.PeriodEdgesOverdue),
	}
}

func registerTimers(workers *river.Workers, kinds []TimerKind) error {
	for _, k := range kinds {
		if k.queue != store.QueueTimers {
			return fmt.Errorf("timer %q: its InsertOpts name queue %q, not %q", k.kind, k.queue, store.QueueTimers)
		}
		k.register(workers)
	}
	return nil
}

// timerLookAhead is how long before its deadline a timer's job becomes
// available: inserted so when it is due sooner, promoted by the backstop's
// processes later. It leaves a promotion several of their rounds to happen
// before the deadline, and keeps the available jobs that each fetch reads
// to the timers due within it.
const timerLookAhead = 2 * time.Second

// timerFireLimit bounds the timers of each priority one transaction fires;
// a round that fires that many fires again at once.
const timerFireLimit = 500

// timerPromoteLimit bounds the jobs one promotion makes available; a round
// that promotes that many promotes again at once.
const timerPromoteLimit = 5000

// timerInsertMiddleware makes every job of the timers queue that River would
// insert as `scheduled` available when it falls due within timerLookAhead,
// so that every process's fetch, not the leader's scheduler, starts it when
// due, and pending otherwise, so that the backstop's promotion, not the
// leader's scheduler, makes it available; both keep its scheduled_at.
type timerInsertMiddleware struct {
	river.MiddlewareDefaults
}

func (timerInsertMiddleware) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams,
	doInner func(context.Context) ([]*rivertype.JobInsertResult, error),
) ([]*rivertype.JobInsertResult, error) {
	soon := time.Now().Add(timerLookAhead)
	for _, p := range params {
		if p.Queue != store.QueueTimers || p.State != rivertype.JobStateScheduled || p.ScheduledAt == nil {
			continue
		}
		if p.ScheduledAt.After(soon) {
			p.State = rivertype.JobStatePending
		} else {
			p.State = rivertype.JobStateAvailable
		}
	}
	return doInner(ctx)
}

// Backstop fires the pending timers as they fall due (on Citus: promotes
// them, and closes the unpaid orders past their deadline on the workers
// whose timer lock it holds), and the timers still pending a grace period
// after their deadline:
// those whose job was running in a process that died, or that failed and
// wait for the leader to promote their retry. Run one in every process.
type Backstop struct {
	kinds     []TimerKind
	interval  time.Duration
	grace     time.Duration
	limit     int
	now       func() time.Time
	log       *slog.Logger
	fullEvery time.Duration
	lastFull  time.Time
	overdue   func(ctx context.Context, queue string, cutoff time.Time) ([]string, error)
	promote   func(ctx context.Context, queue string, ahead time.Duration, limit int) (int, error)
	// closeDue and fire fire the due timers themselves (the payment
	// deadlines, then River's jobs: store.CloseDueUnpaid,
	// store.FireDueTimers) every fireEvery; fire where direct says it can,
	// on one PostgreSQL.
	closeDue func(ctx context.Context, limit int) ([]store.FiredTimer, error)
	fire     func(ctx context.Context, queue string, limit int) ([]store.FiredTimer, error)
	// expiries fire the queue expiries as they fall due, beside them, on
	// one PostgreSQL.
	expiries  *queueExpiries
	fireEvery time.Duration
	direct    func(ctx context.Context) bool
	metrics   *Metrics
	// Fired counts the timers the backstop found pending, which their River
	// jobs would have fired late.
	Fired atomic.Int64
}

// NewBackstop builds the backstop of every timer of st.
func NewBackstop(st *store.Store, cfg Config) *Backstop {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	b := &Backstop{
		kinds: timerKinds(st), interval: cfg.TimerBackstopInterval, grace: cfg.TimerGrace, limit: 500,
		now: st.Config().Now, log: log, fullEvery: cfg.TimerBackstopFullEvery, overdue: st.OverdueTimerKinds,
		promote: st.PromoteTimers, closeDue: st.CloseDueUnpaid, fire: st.FireDueTimers, fireEvery: cfg.TimerPollInterval,
		direct:  func(ctx context.Context) bool { return !st.Distributed(ctx) },
		metrics: cfg.Metrics,
	}
	b.expiries = newQueueExpiries(st, func(q store.QueuedStay) {
		b.metrics.timerFired(store.QueueTimers, store.ExpireQueuedArgs{}.Kind(), time.Since(q.ExpiresAt))
	}, func(err error) { log.Warn("queue expiry", "err", err) })
	return b
}

// Run fires the timers as they fall due (on one PostgreSQL) or promotes
// those that come within timerLookAhead of their deadline (on Citus, where
// it closes the unpaid orders past their deadline as on one PostgreSQL), and
// looks for overdue timers, each at once and then every interval until ctx
// ends; a round that finds a full batch goes on without waiting.
func (b *Backstop) Run(ctx context.Context) {
	promoted := make(chan struct{})
	go func() {
		defer close(promoted)
		if b.direct(ctx) {
			expiring := make(chan struct{})
			go func() {
				defer close(expiring)
				every(ctx, b.fireEvery, func() (bool, error) { return b.expiries.look(ctx) },
					func(err error) { b.log.Warn("queue expiry", "err", err) })
				b.expiries.wait()
			}()
			defer func() { <-expiring }()
			every(ctx, b.fireEvery, func() (bool, error) {
				closed, cerr := b.closeDue(ctx, timerFireLimit)
				fired, ferr := b.fire(ctx, store.QueueTimers, timerFireLimit)
				for _, f := range append(closed, fired...) {
					b.metrics.timerFired(store.QueueTimers, f.Kind, time.Since(f.ScheduledAt))
				}
				return len(closed) >= timerFireLimit || len(fired) >= timerFireLimit, errors.Join(cerr, ferr)
			}, func(err error) { b.log.Warn("timers", "err", err) })
			return
		}
		// The payment deadlines are the orders' own rows on Citus too,
		// read on each worker by the process holding its timer lock.
		closing := make(chan struct{})
		go func() {
			defer close(closing)
			every(ctx, b.fireEvery, func() (bool, error) {
				closed, err := b.closeDue(ctx, timerFireLimit)
				for _, f := range closed {
					b.metrics.timerFired(store.QueueTimers, f.Kind, time.Since(f.ScheduledAt))
				}
				return len(closed) >= timerFireLimit, err
			}, func(err error) { b.log.Warn("timers", "err", err) })
		}()
		defer func() { <-closing }()
		every(ctx, b.interval, func() (bool, error) {
			n, err := b.promote(ctx, store.QueueTimers, timerLookAhead, timerPromoteLimit)
			return n == timerPromoteLimit, err
		}, func(err error) { b.log.Warn("timer promotion", "err", err) })
	}()
	every(ctx, b.interval, func() (bool, error) { return b.round(ctx) }, func(err error) { b.log.Warn("timer backstop", "err", err) })
	<-promoted
}

// every runs round at once and then every interval until ctx ends, at once
// again after a round that reports a full batch.
func every(ctx context.Context, interval time.Duration, round func() (bool, error), warn func(error)) {
	for {
		full, err := round()
		if err != nil && ctx.Err() == nil {
			warn(err)
		}
		wait := interval
		if full && err == nil {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (b *Backstop) round(ctx context.Context) (full bool, err error) {
	cutoff := b.now().Add(-b.grace)
	due, every := b.dueKinds(ctx, cutoff)
	var errs []error
	for _, k := range b.kinds {
		if !every && !due[k.kind] {
			continue
		}
		n, err := k.overdue(ctx, cutoff, b.limit)
		b.Fired.Add(int64(n))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k.kind, err))
		}
		full = full || n == b.limit
	}
	return full, errors.Join(errs...)
}

// dueKinds says which kinds of timer a round reads the deadlines of: every
// kind (every true) without TimerBackstopFullEvery, on its first round, once
// that long has passed since the last such round, or when River's table
// cannot be read; else those with an overdue job there.
func (b *Backstop) dueKinds(ctx context.Context, cutoff time.Time) (due map[string]bool, every bool) {
	now := time.Now()
	if b.fullEvery <= 0 || now.Sub(b.lastFull) >= b.fullEvery {
		b.lastFull = now
		return nil, true
	}
	kinds, err := b.overdue(ctx, store.QueueTimers, cutoff)
	if err != nil {
		return nil, true
	}
	due = map[string]bool{}
	for _, k := range kinds {
		due[k] = true
	}
	return due, false
}
