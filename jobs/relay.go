package jobs

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/webhook"
)

// RelayConfig tunes the webhook relay.
type RelayConfig struct {
	Policy store.RetryPolicy
	// Workers bounds deliveries in flight in this process.
	Workers int
	// PerMerchant bounds one merchant's deliveries in flight, so that a slow
	// or dead endpoint never takes every worker.
	PerMerchant int
	Batch       int
	// Lease must exceed the delivery timeout: a relay that dies mid-delivery
	// leaves its rows to others after it.
	Lease time.Duration
	Poll  time.Duration
}

// DefaultRelayConfig returns API.md's retry defaults.
func DefaultRelayConfig() RelayConfig {
	return RelayConfig{
		Policy:  store.RetryPolicy{First: 5 * time.Second, Max: time.Hour, MaxAttempts: 12},
		Workers: 256, PerMerchant: 64, Batch: 512,
		Lease: 30 * time.Second, Poll: 100 * time.Millisecond,
	}
}

// RelayStats counts what the relay did.
type RelayStats struct {
	Delivered atomic.Int64
	Failed    atomic.Int64
}

// Relay moves outbox rows to merchants' endpoints: claimed with SKIP LOCKED
// (several relays share the work), sent outside any transaction, and the
// outcomes recorded in batches. Delivery is at least once: a crash between
// send and record sends again after the lease, with the same delivery id.
type Relay struct {
	store  *store.Store
	sender *webhook.Sender
	cfg    RelayConfig
	log    *slog.Logger
	Stats  RelayStats

	mu       sync.Mutex
	inFlight map[uuid.UUID]int
	total    int
	results  []store.AttemptResult
	wake     chan struct{}
}

// NewRelay builds a relay.
func NewRelay(st *store.Store, sender *webhook.Sender, cfg RelayConfig, log *slog.Logger) *Relay {
	if log == nil {
		log = slog.Default()
	}
	return &Relay{store: st, sender: sender, cfg: cfg, log: log, inFlight: map[uuid.UUID]int{}, wake: make(chan struct{}, 1)}
}

// Run relays until ctx ends, then waits for deliveries in flight and records
// what they came to.
func (r *Relay) Run(ctx context.Context) {
	var wg sync.WaitGroup
	flushDone := make(chan struct{})
	flushCtx, stopFlush := context.WithCancel(context.Background())
	go func() {
		defer close(flushDone)
		r.flushLoop(flushCtx)
	}()
	for ctx.Err() == nil {
		claimed := r.claim(ctx)
		for _, d := range claimed {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.deliver(ctx, d)
			}()
		}
		if len(claimed) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(r.cfg.Poll):
			case <-r.wake:
			}
		}
	}
	wg.Wait()
	stopFlush()
	<-flushDone
	r.flush(context.Background())
}

func (r *Relay) claim(ctx context.Context) []store.Delivery {
	r.mu.Lock()
	free := r.cfg.Workers - r.total
	var skip []uuid.UUID
	for m, n := range r.inFlight {
		if n >= r.cfg.PerMerchant {
			skip = append(skip, m)
		}
	}
	r.mu.Unlock()
	if free <= 0 {
		select {
		case <-ctx.Done():
		case <-r.wake:
		case <-time.After(r.cfg.Poll):
		}
		return nil
	}
	claimed, err := r.store.ClaimWebhooks(ctx, store.ClaimParams{
		Limit: min(free, r.cfg.Batch), Lease: r.cfg.Lease, SkipMerchants: skip, PerMerchant: r.cfg.PerMerchant,
	})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("claim webhooks", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		return nil
	}
	r.mu.Lock()
	for _, d := range claimed {
		r.inFlight[d.MerchantID]++
		r.total++
	}
	r.mu.Unlock()
	return claimed
}

func (r *Relay) deliver(ctx context.Context, d store.Delivery) {
	started := time.Now()
	res := r.sender.Send(ctx, webhook.Message{ID: d.ID.String(), URL: d.URL, Secret: d.Secret, Body: d.Payload})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total--
	if r.inFlight[d.MerchantID]--; r.inFlight[d.MerchantID] <= 0 {
		delete(r.inFlight, d.MerchantID)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
	if ctx.Err() != nil && !res.OK() {
		// Cut short by shutdown: neither a success nor the endpoint's
		// fault. The lease hands the row to the next relay.
		return
	}
	out := store.AttemptResult{Delivery: d, StartedAt: started, Latency: res.Latency, StatusCode: res.StatusCode, OK: res.OK()}
	if res.Err != nil {
		out.Error = res.Err.Error()
	}
	if out.OK {
		r.Stats.Delivered.Add(1)
	} else {
		r.Stats.Failed.Add(1)
	}
	r.results = append(r.results, out)
}

func (r *Relay) flushLoop(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.flush(ctx)
		}
	}
}

// flush records the outcomes gathered so far. If recording fails, the rows
// stay leased and are sent again after the lease: at least once.
func (r *Relay) flush(ctx context.Context) {
	r.mu.Lock()
	batch := r.results
	r.results = nil
	r.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.store.RecordWebhookAttempts(recordCtx, batch, r.cfg.Policy); err != nil {
		r.log.Warn("record webhook attempts; they will be sent again after the lease", "err", err, "count", len(batch))
	}
}
