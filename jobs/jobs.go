// Package jobs holds orderd's River workers and the client configuration that
// runs them: payment deadlines, queue expiry, queue drains and the periodic
// safety nets.
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/orderd/orderd/store"
)

// Config tunes the River client.
type Config struct {
	// TimerWorkers bounds concurrent deadline and expiry jobs in this process.
	// With TimerFetchCooldown it caps how many timers per second one process
	// can fire: keep TimerWorkers / TimerFetchCooldown well above the peak due
	// rate (DESIGN.md, River timers).
	TimerWorkers       int
	TimerFetchCooldown time.Duration
	// TimerPollInterval is how often River's fetch, and the Backstop's
	// firing of the pending timers, look for the timers due.
	TimerPollInterval time.Duration
	// TimerGrace is how long after its deadline a timer still pending is
	// fired by the backstop, which looks every TimerBackstopInterval.
	TimerGrace            time.Duration
	TimerBackstopInterval time.Duration
	// TimerBackstopFullEvery, on Citus, makes the backstop read each kind's
	// own deadlines only when its look at River's table found an overdue
	// job of that kind, and every kind's at least this often, for a job
	// lost with the coordinator (where River's tables live outside the
	// orders' commit). 0: every look reads every kind's. On one PostgreSQL
	// every round reads every kind's, every read being one index's (serve
	// sets DistributedBackstopFullEvery on Citus).
	TimerBackstopFullEvery time.Duration
	// TimerLookEvery, when set, is the longest a process goes between two
	// looks at River's timers queue on Citus (Backstop), and River's
	// fetches, which those looks wake, poll only every fetchFallback. serve
	// sets DistributedTimerLookEvery on Citus. 0: River's fetch of the
	// timers queue polls every TimerPollInterval, its default queue's every
	// second, as on one PostgreSQL.
	TimerLookEvery time.Duration
	// TimerAlarm, when set, is rung by the inserter made with it
	// (NewInserterWithAlarm) at the deadline of every timer it inserts, so
	// that this process's look falls then (on Citus).
	TimerAlarm     *TimerAlarm
	DefaultWorkers int
	// SweepInterval is how often the safety net looks for merchants that can
	// admit.
	SweepInterval time.Duration
	// AuditInterval is how often the audit checks run; AuditGauge receives
	// their counts. No gauge, no periodic audit.
	AuditInterval time.Duration
	AuditGauge    *prometheus.GaugeVec
	// Metrics, when set, counts and times every job this process works.
	Metrics *Metrics
	Logger  *slog.Logger
}

// DefaultConfig returns the settings measured to keep timers within a second
// of their deadline on a 2-core machine.
func DefaultConfig() Config {
	return Config{
		TimerWorkers:          100,
		TimerFetchCooldown:    50 * time.Millisecond,
		TimerPollInterval:     100 * time.Millisecond,
		TimerGrace:            750 * time.Millisecond,
		TimerBackstopInterval: 250 * time.Millisecond,
		DefaultWorkers:        20,
		SweepInterval:         2 * time.Second,
		AuditInterval:         time.Minute,
	}
}

// DistributedBackstopFullEvery is TimerBackstopFullEvery on Citus, where
// each round of the backstop reads every shard once per kind of timer.
const DistributedBackstopFullEvery = 5 * time.Second

// DistributedTimerLookEvery is TimerLookEvery on Citus: River's tables are
// the coordinator's, where each statement of River's fetch, the timers'
// promotion and the backstop's read of overdue kinds, polling several times
// a second in every process, cost the coordinator CPU whether or not a
// timer was due. A process looks when a timer it knows of falls due, and
// this often for those it cannot know of: set in another process, which
// looks at their deadline itself unless it died meanwhile.
const DistributedTimerLookEvery = time.Second

// fetchFallback is how often River's fetches poll when looks wake them
// (TimerLookEvery): for a notification lost, which the next look sends
// again while a job waits due.
const fetchFallback = 5 * time.Second

// NewClient builds a River client that runs orderd's workers. It is also the
// store's job inserter. Every process that runs one also runs a Backstop.
func NewClient(pool *pgxpool.Pool, st *store.Store, cfg Config) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	if err := registerTimers(workers, timerKinds(st)); err != nil {
		return nil, err
	}
	river.AddWorker(workers, &DrainMerchantWorker{store: st})
	river.AddWorker(workers, &SweepWorker{store: st})
	periodic := []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(cfg.SweepInterval),
			func() (river.JobArgs, *river.InsertOpts) { return SweepArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
	}
	if cfg.AuditGauge != nil && cfg.AuditInterval > 0 {
		river.AddWorker(workers, &AuditWorker{store: st, gauge: cfg.AuditGauge})
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(cfg.AuditInterval),
			func() (river.JobArgs, *river.InsertOpts) { return AuditArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}))
	}

	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	middleware := []rivertype.Middleware{&timerInsertMiddleware{alarm: cfg.TimerAlarm}}
	if cfg.Metrics != nil {
		middleware = append(middleware, cfg.Metrics)
	}
	timersPoll, defaultPoll := cfg.TimerPollInterval, time.Duration(0)
	if cfg.TimerLookEvery > 0 {
		timersPoll, defaultPoll = fetchFallback, fetchFallback
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		// River reports its producers' job counts every few seconds at info;
		// keep its warnings and errors only.
		Logger: slog.New(minLevel{Handler: logger.Handler(), min: slog.LevelWarn}),
		Queues: map[string]river.QueueConfig{
			store.QueueDefault: {MaxWorkers: cfg.DefaultWorkers, FetchPollInterval: defaultPoll},
			store.QueueTimers: {
				MaxWorkers:        cfg.TimerWorkers,
				FetchCooldown:     cfg.TimerFetchCooldown,
				FetchPollInterval: timersPoll,
			},
		},
		Workers:    workers,
		Middleware: middleware,
		// A worker that dies is retried within a minute, not River's default
		// hour; every worker is idempotent, so a second run is harmless.
		JobTimeout:           30 * time.Second,
		RescueStuckJobsAfter: time.Minute,
		PeriodicJobs:         periodic,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return client, nil
}

// NewInserter builds a River client that only inserts jobs, for processes
// (such as tests or tools) that must not run workers.
func NewInserter(pool *pgxpool.Pool) (*river.Client[pgx.Tx], error) {
	return NewInserterWithAlarm(pool, nil)
}

// NewInserterWithAlarm is NewInserter ringing alarm at the deadline of
// every timer it inserts.
func NewInserterWithAlarm(pool *pgxpool.Pool, alarm *TimerAlarm) (*river.Client[pgx.Tx], error) {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Middleware: []rivertype.Middleware{&timerInsertMiddleware{alarm: alarm}},
	})
	if err != nil {
		return nil, fmt.Errorf("river inserter: %w", err)
	}
	return client, nil
}

// CloseUnpaidWorker closes an order still unpaid at its deadline.
type CloseUnpaidWorker struct {
	river.WorkerDefaults[store.CloseUnpaidArgs]
	store *store.Store
}

func (w *CloseUnpaidWorker) Work(ctx context.Context, job *river.Job[store.CloseUnpaidArgs]) error {
	_, err := w.store.CloseUnpaid(ctx, job.Args.MerchantID, job.Args.OrderID)
	return err
}

// ExpireQueuedWorker expires an order that waited too long in its queue.
type ExpireQueuedWorker struct {
	river.WorkerDefaults[store.ExpireQueuedArgs]
	store *store.Store
}

func (w *ExpireQueuedWorker) Work(ctx context.Context, job *river.Job[store.ExpireQueuedArgs]) error {
	_, err := w.store.ExpireQueued(ctx, job.Args.OrderID, job.Args.QueuedAt)
	return err
}

// ResumeMerchantWorker resumes a merchant whose pause has reached its end.
type ResumeMerchantWorker struct {
	river.WorkerDefaults[store.ResumeMerchantArgs]
	store *store.Store
}

func (w *ResumeMerchantWorker) Work(ctx context.Context, job *river.Job[store.ResumeMerchantArgs]) error {
	_, err := w.store.ResumeDue(ctx, job.Args.MerchantID, job.Args.Until)
	return err
}

// ReleaseScheduledWorker lets a merchant's scheduled orders whose release
// has come into its live line.
type ReleaseScheduledWorker struct {
	river.WorkerDefaults[store.ReleaseScheduledArgs]
	store *store.Store
}

func (w *ReleaseScheduledWorker) Work(ctx context.Context, job *river.Job[store.ReleaseScheduledArgs]) error {
	_, err := w.store.ReleaseDue(ctx, job.Args.MerchantID)
	return err
}

// PeriodEdgeWorker records the capacity in force at the edge of a period
// of a merchant's opening hours.
type PeriodEdgeWorker struct {
	river.WorkerDefaults[store.PeriodEdgeArgs]
	store *store.Store
}

func (w *PeriodEdgeWorker) Work(ctx context.Context, job *river.Job[store.PeriodEdgeArgs]) error {
	_, err := w.store.ApplyPeriodEdge(ctx, job.Args.MerchantID)
	return err
}

// DrainMerchantWorker admits a merchant's queued orders while units are free.
type DrainMerchantWorker struct {
	river.WorkerDefaults[store.DrainMerchantArgs]
	store *store.Store
}

func (w *DrainMerchantWorker) Work(ctx context.Context, job *river.Job[store.DrainMerchantArgs]) error {
	_, err := w.store.DrainMerchant(ctx, job.Args.MerchantID)
	return err
}

// SweepArgs runs the periodic safety net.
type SweepArgs struct{}

func (SweepArgs) Kind() string { return "sweep" }

func (SweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		MaxAttempts: 2,
		UniqueOpts:  river.UniqueOpts{ByPeriod: time.Second},
	}
}

// SweepWorker drains merchants that a dropped drain trigger left with queued
// orders and free units. Normal operation never needs it.
type SweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	store *store.Store
}

func (w *SweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	ids, err := w.store.MerchantsToDrain(ctx, 100)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	for _, id := range ids {
		if _, err := w.store.DrainMerchant(ctx, id); err != nil {
			return fmt.Errorf("sweep drain %s: %w", id, err)
		}
	}
	return nil
}

func (w *SweepWorker) Timeout(*river.Job[SweepArgs]) time.Duration { return 25 * time.Second }

// minLevel drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
