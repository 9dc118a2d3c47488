package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
// process polls first, leader or not. The others wait `pending`, which River
// never moves by itself, not `scheduled`: the leader's scheduler would take
// them with its own statement, which holds the jobs due within its
// look-ahead locked while it runs, and its plan reads all of River's table.
// They wait outside the fetch's range because each fetch reads every
// available job of its queue, due or not (its index orders by priority
// before scheduled_at): tens of thousands of payment deadlines minutes
// ahead, all available, made each fetch read them all, several times a
// second in every process, and the timers due fell behind.
//
// On one PostgreSQL every process fires them itself as they fall due
// (Backstop, store.FireDueTimers), making them available for River's
// fetch, which polls every TimerPollInterval, closes the orders past their
// payment deadline (store.CloseDueUnpaid) and expires those queued past
// their wait limit (queueExpiries). On Citus, where River's tables are the
// coordinator's and every poll of them costs it CPU, a process looks at
// the timers queue when there is something to do (store.LookAtTimers): it
// promotes the jobs due and wakes River's fetch in every process (River's
// insert notification), at the next deadline its last look saw, at the
// deadline of a timer it inserted itself (TimerAlarm), a grace period after
// a deadline, and at least every TimerLookEvery.
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

// timerLookAhead is how long before its deadline a timer's job is inserted
// available; further ahead it waits pending until the backstop's processes
// fire it. It keeps the available jobs that each fetch reads to the timers
// due within it.
const timerLookAhead = 2 * time.Second

// timerFireLimit bounds the timers of each priority one transaction fires;
// a round that fires that many fires again at once.
const timerFireLimit = 500

// timerPromoteLimit bounds the jobs one look makes available; a look that
// promotes that many looks again at once.
const timerPromoteLimit = 5000

// timerInsertMiddleware makes every job of the timers queue that River would
// insert as `scheduled` available when it falls due within timerLookAhead,
// so that every process's fetch, not the leader's scheduler, starts it when
// due, and pending otherwise, so that the backstop, not the leader's
// scheduler, makes it available; both keep its scheduled_at. It rings
// alarm, when set, at each such deadline.
type timerInsertMiddleware struct {
	river.MiddlewareDefaults
	alarm *TimerAlarm
}

func (m timerInsertMiddleware) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams,
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
		m.alarm.ring(*p.ScheduledAt)
	}
	return doInner(ctx)
}

// TimerAlarm holds the earliest deadline of the timers a process inserted
// that its look at River's timers queue has not yet reached (Backstop, on
// Citus): a later one is seen by the look at the earlier, in River's table.
type TimerAlarm struct {
	mu   sync.Mutex
	at   time.Time
	rung chan struct{}
}

// NewTimerAlarm makes an alarm to share between an inserter
// (NewInserterWithAlarm) and the process's River client and Backstop
// (Config.TimerAlarm).
func NewTimerAlarm() *TimerAlarm { return &TimerAlarm{rung: make(chan struct{}, 1)} }

// ring sets the alarm at t if that is earlier than it is set.
func (a *TimerAlarm) ring(t time.Time) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at.IsZero() || t.Before(a.at) {
		a.at = t
		select {
		case a.rung <- struct{}{}:
		default:
		}
	}
}

// next is when the alarm is set, clearing it when that is not after now (a
// look starting now reaches it); zero when it is not set.
func (a *TimerAlarm) next(now time.Time) time.Time {
	if a == nil {
		return time.Time{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.at.After(now) {
		a.at = time.Time{}
	}
	return a.at
}

// changed is signalled when the alarm is set earlier; nil (never) without an
// alarm.
func (a *TimerAlarm) changed() <-chan struct{} {
	if a == nil {
		return nil
	}
	return a.rung
}

// Backstop fires the pending timers as they fall due (on Citus: looks at
// River's timers queue when they do, and closes the unpaid orders past their
// deadline on the workers whose timer lock it holds), and the timers still
// pending a grace period after their deadline:
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
	// look, on Citus, promotes the timers due, wakes River's fetch and
	// reads the kinds overdue (store.LookAtTimers), when alarm rings, when
	// its last look said, and at least every lookEvery.
	look      func(ctx context.Context, queue string, cutoff time.Time, grace time.Duration, limit int) (store.TimerLook, error)
	lookEvery time.Duration
	alarm     *TimerAlarm
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
		now: st.Config().Now, log: log, fullEvery: cfg.TimerBackstopFullEvery,
		look: st.LookAtTimers, lookEvery: cmp.Or(cfg.TimerLookEvery, cfg.TimerBackstopInterval), alarm: cfg.TimerAlarm,
		closeDue: st.CloseDueUnpaid, fire: st.FireDueTimers, fireEvery: cfg.TimerPollInterval,
		direct:  func(ctx context.Context) bool { return !st.Distributed(ctx) },
		metrics: cfg.Metrics,
	}
	b.expiries = newQueueExpiries(st, func(q store.QueuedStay) {
		b.metrics.timerFired(store.QueueTimers, store.ExpireQueuedArgs{}.Kind(), time.Since(q.ExpiresAt))
	}, func(err error) { log.Warn("queue expiry", "err", err) })
	return b
}

// Run fires the timers as they fall due and looks for overdue timers every
// interval (on one PostgreSQL), or looks at River's timers queue when there
// is something to do there (on Citus, where it closes the unpaid orders
// past their deadline as on one PostgreSQL), until ctx ends; a round that
// finds a full batch goes on without waiting.
func (b *Backstop) Run(ctx context.Context) {
	if !b.direct(ctx) {
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
		b.looks(ctx)
		<-closing
		return
	}
	fired := make(chan struct{})
	go func() {
		defer close(fired)
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
	}()
	every(ctx, b.interval, func() (bool, error) { return b.round(ctx, nil) }, func(err error) { b.log.Warn("timer backstop", "err", err) })
	<-fired
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

// looks looks at River's timers queue (store.LookAtTimers) and reads the
// deadlines of the kinds it found overdue, or of every kind on the first
// look, once fullEvery has passed since the last such round (for a job lost
// with the coordinator, which River's table cannot show) or when the look
// failed; then it waits until the next deadline the look saw, the alarm or
// lookEvery, whichever comes first (but at least fireEvery after the look
// began), until ctx ends.
func (b *Backstop) looks(ctx context.Context) {
	for {
		started := time.Now()
		b.alarm.next(started)
		look, err := b.look(ctx, store.QueueTimers, b.now().Add(-b.grace), b.grace, timerPromoteLimit)
		if err != nil && ctx.Err() == nil {
			b.log.Warn("timer look", "err", err)
		}
		var due map[string]bool
		if now := time.Now(); err != nil || now.Sub(b.lastFull) >= b.fullEvery {
			b.lastFull = now
		} else {
			due = map[string]bool{}
			for _, k := range look.Overdue {
				due[k] = true
			}
		}
		full, rerr := b.round(ctx, due)
		if rerr != nil && ctx.Err() == nil {
			b.log.Warn("timer backstop", "err", rerr)
		}
		wait := b.lookEvery
		if look.Next > 0 {
			wait = min(wait, look.Next)
		}
		// Timers falling due one after another are looked at together,
		// no more often than River's fetch polls on one PostgreSQL.
		notBefore := started.Add(b.fireEvery)
		if err == nil && (look.Promoted >= timerPromoteLimit || full && rerr == nil) {
			wait, notBefore = 0, time.Time{}
		}
		if !b.sleep(ctx, wait, notBefore) {
			return
		}
	}
}

// sleep waits for wait, or until the alarm's time if that comes first, and
// at least until notBefore; false when ctx ended.
func (b *Backstop) sleep(ctx context.Context, wait time.Duration, notBefore time.Time) bool {
	until := time.Now().Add(wait)
	for {
		left := time.Until(until)
		if at := b.alarm.next(time.Time{}); !at.IsZero() {
			left = min(left, time.Until(at))
		}
		left = max(left, time.Until(notBefore))
		if left <= 0 {
			return ctx.Err() == nil
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
			return true
		case <-b.alarm.changed():
			t.Stop()
		}
	}
}

// round fires the overdue timers of the kinds in due, or of every kind when
// due is nil.
func (b *Backstop) round(ctx context.Context, due map[string]bool) (full bool, err error) {
	cutoff := b.now().Add(-b.grace)
	var errs []error
	for _, k := range b.kinds {
		if due != nil && !due[k.kind] {
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
