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
	// Workers is the size of the pool that sends; it bounds deliveries in
	// flight in this process.
	Workers int
	// PerMerchant bounds one merchant's claimed, unfinished deliveries, so
	// that a slow or dead endpoint holds at most that many workers while
	// the others serve everyone else.
	PerMerchant int
	// Batch is the most one claim takes. The relay claims only when a whole
	// batch fits, because a claim costs about the same for 5 rows as for 250.
	Batch int
	// Lease must exceed the delivery timeout plus the wait in the local
	// queue: a relay that dies mid-delivery leaves its rows to others after it.
	Lease time.Duration
	// Claimers is how many claims run at once: a claim is one statement on
	// one database core, so one claimer caps throughput at Batch per claim
	// time. Merchants' limits are checked per claimer, so a merchant may
	// briefly have up to Claimers × PerMerchant deliveries outstanding.
	Claimers int
	// Poll is how often an idle relay looks for due rows.
	Poll time.Duration
	// DistributedPoll replaces Poll on Citus, where every look reads each
	// shard on its worker: there the relay looks when woken by a commit's
	// hint (Wake) and otherwise this often, for retries that fall due.
	DistributedPoll time.Duration
	// HintGap is the shortest time between two looks of a claimer that a
	// hint brings forward: hints come with every process's commits, and
	// under load they would make the relay look more often than it polls.
	HintGap time.Duration
	// FlushEvery bounds how long an outcome waits before it is recorded.
	FlushEvery time.Duration
	// WitnessURL and WitnessSecret are where the log's checkpoints go
	// (the outbox's messages of store.WitnessMerchant) and what signs them.
	WitnessURL, WitnessSecret string
}

// DefaultRelayConfig returns API.md's retry defaults.
func DefaultRelayConfig() RelayConfig {
	return RelayConfig{
		Policy:  store.RetryPolicy{First: 5 * time.Second, Max: time.Hour, MaxAttempts: 12},
		Workers: 256, PerMerchant: 32, Batch: 256, Claimers: 2,
		Lease: 30 * time.Second, Poll: 100 * time.Millisecond, DistributedPoll: time.Second, HintGap: 100 * time.Millisecond, FlushEvery: 50 * time.Millisecond,
	}
}

// RelayStats counts what the relay did, for Prometheus counters.
type RelayStats struct {
	Delivered atomic.Int64 // acknowledged by a 2xx
	Failed    atomic.Int64 // attempts that failed, including the last ones
	Dead      atomic.Int64 // messages dead-lettered after their last attempt
}

// Relay moves outbox rows to merchants' endpoints: claimed with SKIP LOCKED
// (several relays share the work), sent by a bounded worker pool outside any
// transaction, and the outcomes recorded in batches. Delivery is at least
// once: a crash between send and record sends again after the lease, with
// the same delivery id.
type Relay struct {
	store  *store.Store
	sender *webhook.Sender
	cfg    RelayConfig
	log    *slog.Logger
	Stats  RelayStats

	mu          sync.Mutex
	perMerchant map[uuid.UUID]int // claimed and not yet finished, by merchant
	failing     map[uuid.UUID]int // failures in a row, by merchant
	outstanding int               // claimed and not yet finished, in all
	results     []store.AttemptResult
	abandoned   []store.Abandoned
	capacity    chan struct{} // a delivery finished: a claim may fit now
	full        chan struct{} // enough outcomes wait to be worth a flush now
	hinted      chan struct{} // a commit may have written rows: look now
	poll        time.Duration
}

// NewRelay builds a relay; zero fields of cfg take DefaultRelayConfig's values.
func NewRelay(st *store.Store, sender *webhook.Sender, cfg RelayConfig, log *slog.Logger) *Relay {
	if log == nil {
		log = slog.Default()
	}
	def := DefaultRelayConfig()
	if cfg.Policy.MaxAttempts <= 0 {
		cfg.Policy = def.Policy
	}
	for _, f := range []struct{ v, d *int }{{&cfg.Workers, &def.Workers}, {&cfg.PerMerchant, &def.PerMerchant}, {&cfg.Batch, &def.Batch}, {&cfg.Claimers, &def.Claimers}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	for _, f := range []struct{ v, d *time.Duration }{{&cfg.Lease, &def.Lease}, {&cfg.Poll, &def.Poll}, {&cfg.FlushEvery, &def.FlushEvery}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	return &Relay{
		store: st, sender: sender, cfg: cfg, log: log, perMerchant: map[uuid.UUID]int{}, failing: map[uuid.UUID]int{},
		capacity: make(chan struct{}, 1), full: make(chan struct{}, 1), hinted: make(chan struct{}, max(cfg.Claimers, 1)),
		poll: cfg.Poll,
	}
}

// Wake makes every idle claimer look for due rows now: a process hinted
// that it committed events, which outbox rows travel with.
func (r *Relay) Wake() {
	for range cap(r.hinted) {
		select {
		case r.hinted <- struct{}{}:
		default:
			return
		}
	}
}

// Run relays until ctx ends. Then it abandons queued deliveries, cuts short
// those in flight, records every outcome it has, hands the abandoned rows
// back (or, failing that, leaves them to their leases), and returns.
func (r *Relay) Run(ctx context.Context) {
	if r.cfg.DistributedPoll > 0 && r.store.Distributed(ctx) {
		r.poll = r.cfg.DistributedPoll
	}
	queue := make(chan store.Delivery, r.cfg.Claimers*r.cfg.Batch)
	var workers sync.WaitGroup
	for range r.cfg.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for d := range queue {
				r.deliver(ctx, d)
			}
		}()
	}
	flushCtx, stopFlush := context.WithCancel(context.Background())
	flushDone := make(chan struct{})
	go func() {
		defer close(flushDone)
		r.flushLoop(flushCtx)
	}()

	var claimers sync.WaitGroup
	for range r.cfg.Claimers {
		claimers.Add(1)
		go func() {
			defer claimers.Done()
			r.claimLoop(ctx, queue)
		}()
	}
	claimers.Wait()
	close(queue)
	workers.Wait()
	stopFlush()
	<-flushDone
	r.flush(context.Background())
	r.release()
}

// release hands abandoned rows back at once, so that a restart or another
// instance need not wait for their leases.
func (r *Relay) release() {
	r.mu.Lock()
	abandoned := r.abandoned
	r.abandoned = nil
	r.mu.Unlock()
	if len(abandoned) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.store.ReleaseWebhooks(ctx, abandoned); err != nil {
		r.log.Warn("release webhooks; they return after their lease", "err", err, "count", len(abandoned))
	}
}

// claimLoop claims due rows whenever a batch fits and queues them for the
// workers, until ctx ends.
func (r *Relay) claimLoop(ctx context.Context, queue chan<- store.Delivery) {
	var lastLook time.Time
	for ctx.Err() == nil {
		limit, skip, probing := r.reserve()
		if limit == 0 {
			r.wait(ctx, r.capacity, lastLook)
			continue
		}
		lastLook = time.Now()
		claimed := r.claim(ctx, limit, skip, probing)
		for _, d := range claimed {
			// Never blocks for long: outstanding rows never exceed the
			// workers plus the queue.
			queue <- d
		}
		if len(claimed) < limit {
			// Nothing more is due, or what is due belongs to merchants at
			// their limit: look again after a poll, or sooner when one of
			// them finishes a delivery.
			r.wait(ctx, r.capacity, lastLook)
		}
	}
}

// wait sleeps for a poll interval, until ctx ends or until woken, by wake
// or by a hint, which brings the next look no closer than HintGap to the
// last one (at lastLook).
func (r *Relay) wait(ctx context.Context, wake <-chan struct{}, lastLook time.Time) {
	t := time.NewTimer(r.poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
	case <-r.hinted:
		gap := time.NewTimer(r.cfg.HintGap - time.Since(lastLook))
		defer gap.Stop()
		select {
		case <-ctx.Done():
		case <-gap.C:
		}
	}
}

// reserve books room for a claim and says how many rows it may take (0:
// wait), which merchants are at their limit, and which are only probed. Only
// a whole batch is claimed while others are outstanding, so that claims stay
// few and large under load.
func (r *Relay) reserve() (int, []uuid.UUID, []uuid.UUID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	free := r.cfg.Workers + r.cfg.Claimers*r.cfg.Batch - r.outstanding
	if free < r.cfg.Batch && r.outstanding > 0 {
		return 0, nil, nil
	}
	limit := min(free, r.cfg.Batch)
	r.outstanding += limit
	var skip, probing []uuid.UUID
	if r.cfg.WitnessURL == "" {
		// Left to the instances that know where the witness is.
		skip = append(skip, store.WitnessMerchant)
	}
	for m, n := range r.perMerchant {
		if n >= r.cfg.PerMerchant || (n > 0 && r.failing[m] >= probeAfterFailures) {
			skip = append(skip, m)
		}
	}
	for m, n := range r.failing {
		if n >= probeAfterFailures && r.perMerchant[m] == 0 {
			probing = append(probing, m)
		}
	}
	return limit, skip, probing
}

// probeAfterFailures failures in a row put a merchant on probation: one
// delivery at a time until one succeeds. Many dead endpoints, each holding
// PerMerchant workers for a timeout, would otherwise hold them all.
const probeAfterFailures = 3

func (r *Relay) claim(ctx context.Context, limit int, skip, probing []uuid.UUID) []store.Delivery {
	// A claim is not cut short by shutdown: pgx would close the connection,
	// and a claim that commits unseen waits out its lease, while one that
	// finishes is queued, abandoned and released at once.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	claimed, err := r.store.ClaimWebhooks(claimCtx, store.ClaimParams{
		Limit: limit, Lease: r.cfg.Lease, SkipMerchants: skip, PerMerchant: r.cfg.PerMerchant, Probing: probing,
	})
	if err != nil {
		// Rows it may have leased come back after the lease.
		claimed = nil
	}
	r.mu.Lock()
	r.outstanding -= limit - len(claimed)
	for _, d := range claimed {
		r.perMerchant[d.MerchantID]++
	}
	r.mu.Unlock()
	if err != nil {
		r.log.Warn("claim webhooks", "err", err)
		r.wait(ctx, nil, time.Now())
	}
	return claimed
}

func (r *Relay) deliver(ctx context.Context, d store.Delivery) {
	var res webhook.Result
	started := time.Now()
	sent := ctx.Err() == nil
	if sent {
		url, secret := d.URL, d.Secret
		if d.MerchantID == store.WitnessMerchant {
			url, secret = r.cfg.WitnessURL, r.cfg.WitnessSecret
		}
		res = r.sender.Send(ctx, webhook.Message{ID: d.ID.String(), URL: url, Secret: secret, Body: d.Payload})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outstanding--
	if r.perMerchant[d.MerchantID]--; r.perMerchant[d.MerchantID] <= 0 {
		delete(r.perMerchant, d.MerchantID)
	}
	signal(r.capacity)
	if ctx.Err() != nil && !res.OK() {
		// Cut short or never sent because of shutdown: neither a success
		// nor the endpoint's fault. Run hands the row back when it stops;
		// should that fail, the lease does.
		r.abandoned = append(r.abandoned, store.Abandoned{Delivery: d, Sent: sent})
		return
	}
	out := store.AttemptResult{Delivery: d, StartedAt: started, Latency: res.Latency, StatusCode: res.StatusCode, OK: res.OK()}
	if out.OK {
		delete(r.failing, d.MerchantID)
		r.Stats.Delivered.Add(1)
	} else {
		r.failing[d.MerchantID]++
		r.Stats.Failed.Add(1)
		if d.Attempt >= r.cfg.Policy.MaxAttempts {
			r.Stats.Dead.Add(1)
		}
	}
	if res.Err != nil {
		out.Error = res.Err.Error()
	}
	r.results = append(r.results, out)
	if len(r.results) >= r.cfg.Batch {
		signal(r.full)
	}
}

// signal wakes whoever waits on c without ever blocking the caller.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (r *Relay) flushLoop(ctx context.Context) {
	tick := time.NewTicker(r.cfg.FlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.full:
		}
		r.flush(ctx)
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
