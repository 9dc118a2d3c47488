package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
	"github.com/orderd/orderd/webhook"
	"github.com/orderd/orderd/webhook/verify"
)

// receiver records what it gets and answers with its handler's status.
type receiver struct {
	mu         sync.Mutex
	arrivals   []delivery // every request, in arrival order, before it is answered
	deliveries []delivery // the ones answered 200
	status     atomic.Int32
	hold       chan struct{} // when set, requests wait for it to close
	delay      time.Duration // every answer waits this long
	// answer, when set, picks the status of each request instead of status.
	answer func(d delivery, attempt int) int
	srv    *httptest.Server
}

type delivery struct {
	id, typ, orderID string
	signatureOK      bool
}

func newReceiver(t *testing.T, secret *string) *receiver {
	r := &receiver{}
	r.status.Store(200)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var p store.WebhookPayload
		_ = json.Unmarshal(body, &p)
		d := delivery{
			id: req.Header.Get("X-Orderd-Delivery"), typ: p.Type, orderID: p.Order.ID.String(),
			signatureOK: req.Header.Get("X-Orderd-Signature") == webhook.Sign(*secret, body) && p.ID.String() == req.Header.Get("X-Orderd-Delivery") &&
				verify.Verify(*secret, req.Header.Get(verify.HeaderSignature), body, time.Now()) == nil &&
				strings.HasPrefix(req.Header.Get(verify.HeaderSignature), "t="+req.Header.Get(verify.HeaderTimestamp)+",") &&
				req.Header.Get("Content-Type") == "application/json" && req.Header.Get("User-Agent") == "orderd-webhooks/1",
		}
		r.mu.Lock()
		hold, delay, answer := r.hold, r.delay, r.answer
		attempt := 1
		for _, a := range r.arrivals {
			if a.id == d.id {
				attempt++
			}
		}
		r.arrivals = append(r.arrivals, d)
		r.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-req.Context().Done():
				return
			}
		}
		if delay > 0 {
			time.Sleep(delay)
		}
		status := int(r.status.Load())
		if answer != nil {
			status = answer(d, attempt)
		}
		if status == 200 {
			r.mu.Lock()
			r.deliveries = append(r.deliveries, d)
			r.mu.Unlock()
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) arrived() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.arrivals...)
}

func (r *receiver) got() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.deliveries...)
}

type relayBundle struct {
	*bundle
	relayCfg jobs.RelayConfig
}

func newRelayBundle(t *testing.T) *relayBundle {
	cfg := jobs.DefaultRelayConfig()
	cfg.Policy = store.RetryPolicy{First: 20 * time.Millisecond, Max: 100 * time.Millisecond, MaxAttempts: 3}
	cfg.Poll = 20 * time.Millisecond
	cfg.Lease = 2 * time.Second
	return &relayBundle{bundle: setup(t), relayCfg: cfg}
}

func (b *relayBundle) runRelay(t *testing.T, timeout time.Duration) (stop func()) {
	_, stop = b.startRelay(t, timeout)
	return stop
}

func (b *relayBundle) startRelay(t *testing.T, timeout time.Duration) (relay *jobs.Relay, stop func()) {
	return b.startRelayOn(t, b.store, timeout)
}

func (b *relayBundle) startRelayOn(t *testing.T, st *store.Store, timeout time.Duration) (relay *jobs.Relay, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	relay = jobs.NewRelay(st, webhook.NewSender(webhook.Options{Timeout: timeout, AllowLoopback: true}), b.relayCfg, nil)
	done := make(chan struct{})
	go func() { defer close(done); relay.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return relay, stop
}

// webhookMerchant creates a merchant whose webhook points at r.
func (b *relayBundle) webhookMerchant(t *testing.T, r *receiver, secret *string, capacity int) (uuid.UUID, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	m, err := b.store.CreateMerchant(ctx, domain.MerchantSettings{Name: "hooked", Capacity: capacity, PrepSeconds: 60,
		MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900, WebhookURL: r.srv.URL}, store.Meta{})
	require.NoError(t, err)
	*secret = m.WebhookSecret
	p, err := b.store.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "tea", PriceCents: 100})
	require.NoError(t, err)
	return m.ID, p.ID
}

func waitFor(t *testing.T, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func outboxStatus(t *testing.T, b *relayBundle) map[string]int {
	rows, err := b.pool.Query(context.Background(), `SELECT status, count(*) FROM outbox GROUP BY status`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	return out
}

func TestRelayDeliversSignedInOrder(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	var secret string
	r := newReceiver(t, &secret)
	m, p := b.webhookMerchant(t, r, &secret, 5)
	ctx := context.Background()
	var ids []uuid.UUID
	for range 5 {
		o := placeUnpaid(t, b.store, m, p, "alice", "pay")
		ids = append(ids, o.ID)
		_, err := b.store.CompleteOrder(ctx, o.ID, domain.Party{Actor: domain.ActorAdmin}, "")
		require.NoError(t, err)
	}
	b.runRelay(t, time.Second)
	waitFor(t, 10*time.Second, func() bool { return len(r.got()) == 10 }, "10 deliveries")
	perOrder := map[string][]string{}
	for _, d := range r.got() {
		require.True(t, d.signatureOK, "signature and delivery id")
		perOrder[d.orderID] = append(perOrder[d.orderID], d.typ)
	}
	for _, id := range ids {
		require.Equal(t, []string{"order.accepted", "order.completed"}, perOrder[id.String()], "event order per order")
	}
	waitFor(t, 5*time.Second, func() bool { return outboxStatus(t, b)["delivered"] == 10 }, "all marked delivered")
}

func TestRelayRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	var secret string
	r := newReceiver(t, &secret)
	r.status.Store(500)
	m, p := b.webhookMerchant(t, r, &secret, 5)
	placeUnpaid(t, b.store, m, p, "alice", "pay")
	relay, _ := b.startRelay(t, time.Second)
	waitFor(t, 10*time.Second, func() bool { return outboxStatus(t, b)["dead"] == 1 }, "dead after 3 attempts")
	require.EqualValues(t, 1, relay.Stats.Dead.Load())
	require.EqualValues(t, 3, relay.Stats.Failed.Load())
	dls, _, err := b.store.ListDeadLetters(context.Background(), store.ListDeadLettersParams{Kind: store.DeadLetterWebhook})
	require.NoError(t, err)
	require.Len(t, dls, 1)
	require.Contains(t, dls[0].Reason, "500")
	attempts, err := b.store.ListWebhookAttempts(context.Background(), dls[0].RefID, uuid.Nil, 10)
	require.NoError(t, err)
	require.Len(t, attempts, 3)

	// The endpoint is back: a bulk retry delivers it.
	r.status.Store(200)
	n, err := b.store.RetryMerchantWebhooks(context.Background(), m)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	waitFor(t, 10*time.Second, func() bool { return len(r.got()) == 1 }, "delivered after retry")
}

func TestRelayRecoversFromTimeoutsAndOutages(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	b.relayCfg.Policy.MaxAttempts = 50
	var secret string
	r := newReceiver(t, &secret)
	r.mu.Lock()
	r.hold = make(chan struct{}) // slower than the timeout: every attempt times out
	r.mu.Unlock()
	m, p := b.webhookMerchant(t, r, &secret, 5)
	for range 3 {
		placeUnpaid(t, b.store, m, p, "alice", "pay")
	}
	b.runRelay(t, 200*time.Millisecond)
	waitFor(t, 10*time.Second, func() bool {
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_attempts WHERE status_code IS NULL`).Scan(&n))
		return n >= 3
	}, "timed-out attempts recorded")
	r.mu.Lock()
	close(r.hold)
	r.hold = nil
	r.mu.Unlock()
	waitFor(t, 10*time.Second, func() bool { return outboxStatus(t, b)["delivered"] == 3 }, "delivered once the endpoint answers")
}

func TestDeadEndpointDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	b.relayCfg.Policy.MaxAttempts = 100
	b.relayCfg.Workers, b.relayCfg.PerMerchant = 8, 2
	var deadSecret, liveSecret string
	dead := newReceiver(t, &deadSecret)
	dead.mu.Lock()
	dead.hold = make(chan struct{})
	dead.mu.Unlock()
	defer close(dead.hold)
	live := newReceiver(t, &liveSecret)
	dm, dp := b.webhookMerchant(t, dead, &deadSecret, 100)
	lm, lp := b.webhookMerchant(t, live, &liveSecret, 100)
	for range 20 {
		placeUnpaid(t, b.store, dm, dp, "a", "pay")
	}
	b.runRelay(t, 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	for range 5 {
		placeUnpaid(t, b.store, lm, lp, "b", "pay")
	}
	waitFor(t, 3*time.Second, func() bool { return len(live.got()) == 5 }, "the live merchant is served while the dead one hangs")
}

// TestManyDeadEndpointsDoNotStarveOthers: more hanging endpoints than
// workers divided by PerMerchant. After their first timeouts each is probed
// one delivery at a time, and a live merchant is served meanwhile.
func TestManyDeadEndpointsDoNotStarveOthers(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	b.relayCfg.Policy = store.RetryPolicy{First: time.Millisecond, Max: time.Millisecond, MaxAttempts: 1000}
	b.relayCfg.Workers, b.relayCfg.PerMerchant = 12, 4
	hold := make(chan struct{})
	defer close(hold)
	for range 5 {
		var secret string
		dead := newReceiver(t, &secret)
		dead.mu.Lock()
		dead.hold = hold
		dead.mu.Unlock()
		dm, dp := b.webhookMerchant(t, dead, &secret, 100)
		for range 10 {
			placeUnpaid(t, b.store, dm, dp, "a", "pay")
		}
	}
	relay, _ := b.startRelay(t, 500*time.Millisecond)
	waitFor(t, 10*time.Second, func() bool { return relay.Stats.Failed.Load() >= 30 }, "every dead endpoint has failed a few times")
	var liveSecret string
	live := newReceiver(t, &liveSecret)
	lm, lp := b.webhookMerchant(t, live, &liveSecret, 100)
	for range 5 {
		placeUnpaid(t, b.store, lm, lp, "b", "pay")
	}
	start := time.Now()
	waitFor(t, 400*time.Millisecond, func() bool { return len(live.got()) == 5 }, "the live merchant is served before a timeout")
	t.Logf("live merchant served in %s while five endpoints hang", time.Since(start))
}

// TestRelayKilledMidDeliveryLosesNothing kills a relay while the receiver
// holds its requests (sent, not acknowledged): its database connections go
// first, so that it can record and release nothing, as in a crash. Another
// relay takes over after the leases: every message ends delivered, the held
// ones arrive again, and every arrival carries the id of its outbox row.
func TestRelayKilledMidDeliveryLosesNothing(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	b.relayCfg.Lease = 500 * time.Millisecond
	var secret string
	r := newReceiver(t, &secret)
	hold := make(chan struct{})
	r.mu.Lock()
	r.hold = hold
	r.mu.Unlock()
	m, p := b.webhookMerchant(t, r, &secret, 100)
	for range 10 {
		placeUnpaid(t, b.store, m, p, "alice", "pay")
	}
	doomedPool, err := pgxpool.New(context.Background(), b.pool.Config().ConnString())
	require.NoError(t, err)
	_, stop := b.startRelayOn(t, store.New(store.Config{Pool: doomedPool}), 5*time.Second)
	waitFor(t, 5*time.Second, func() bool { return len(r.arrived()) == 10 }, "all sent and held")
	doomedPool.Close()
	stop()
	require.Empty(t, r.got(), "nothing acknowledged before the kill")
	r.mu.Lock()
	r.hold = nil
	r.mu.Unlock()
	close(hold)

	b.runRelay(t, 5*time.Second)
	waitFor(t, 10*time.Second, func() bool { return outboxStatus(t, b)["delivered"] == 10 }, "every message delivered")
	rows := map[string]bool{}
	rs, err := b.pool.Query(context.Background(), `SELECT id::text FROM outbox`)
	require.NoError(t, err)
	for rs.Next() {
		var id string
		require.NoError(t, rs.Scan(&id))
		rows[id] = true
	}
	require.NoError(t, rs.Err())
	require.Len(t, rows, 10)
	seen := map[string]int{}
	for _, d := range r.arrived() {
		require.True(t, rows[d.id], "an arrival carries its outbox row's id")
		require.True(t, d.signatureOK)
		seen[d.id]++
	}
	for id := range rows {
		require.GreaterOrEqual(t, seen[id], 2, "held before the kill and sent again after it, with the same id")
	}
}

// TestRelayStopHandsBackAtOnce: a relay that stops gracefully releases what
// it claimed, so the next one need not wait out a long lease, and an attempt
// that never left is not counted.
func TestRelayStopHandsBackAtOnce(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	b.relayCfg.Lease = time.Hour
	b.relayCfg.Workers = 2
	var secret string
	r := newReceiver(t, &secret)
	hold := make(chan struct{})
	r.mu.Lock()
	r.hold = hold
	r.mu.Unlock()
	m, p := b.webhookMerchant(t, r, &secret, 100)
	for range 5 {
		placeUnpaid(t, b.store, m, p, "alice", "pay")
	}
	stop := b.runRelay(t, 5*time.Second)
	waitFor(t, 5*time.Second, func() bool {
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE attempts > 0`).Scan(&n))
		return n == 5 && len(r.arrived()) == 2
	}, "five claimed, two sent and held")
	stop()
	var sentAttempts, unsentAttempts int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT coalesce(sum(attempts) FILTER (WHERE id = ANY($1::uuid[])), 0), coalesce(sum(attempts) FILTER (WHERE id <> ALL($1::uuid[])), 0) FROM outbox`,
		[]string{r.arrived()[0].id, r.arrived()[1].id}).Scan(&sentAttempts, &unsentAttempts))
	require.Equal(t, 2, sentAttempts, "the two sent keep their attempt")
	require.Zero(t, unsentAttempts, "the three never sent give theirs back")
	r.mu.Lock()
	r.hold = nil
	r.mu.Unlock()
	close(hold)
	b.runRelay(t, 5*time.Second)
	waitFor(t, 5*time.Second, func() bool { return outboxStatus(t, b)["delivered"] == 5 }, "delivered long before the hour-long leases end")
}

func TestRelayDeliversSlowAnswersWithinTimeout(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	var secret string
	r := newReceiver(t, &secret)
	r.delay = 300 * time.Millisecond
	m, p := b.webhookMerchant(t, r, &secret, 5)
	for range 3 {
		placeUnpaid(t, b.store, m, p, "alice", "pay")
	}
	b.runRelay(t, 2*time.Second)
	waitFor(t, 10*time.Second, func() bool { return outboxStatus(t, b)["delivered"] == 3 }, "delivered")
	var attempts, slow int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*), count(*) FILTER (WHERE latency_ms >= 300 AND status_code = 200) FROM webhook_attempts`).Scan(&attempts, &slow))
	require.Equal(t, 3, attempts, "one attempt each")
	require.Equal(t, 3, slow, "latency recorded")
}

// TestRelayKeepsOrderThroughRetries fails every message's first attempts:
// an order's completion never arrives before its acceptance was delivered.
func TestRelayKeepsOrderThroughRetries(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	b.relayCfg.Policy.MaxAttempts = 10
	var secret string
	r := newReceiver(t, &secret)
	r.answer = func(d delivery, attempt int) int {
		if attempt <= 2 {
			return 500
		}
		return 200
	}
	m, p := b.webhookMerchant(t, r, &secret, 20)
	ctx := context.Background()
	for range 10 {
		o := placeUnpaid(t, b.store, m, p, "alice", "pay")
		_, err := b.store.CompleteOrder(ctx, o.ID, domain.Party{Actor: domain.ActorAdmin}, "")
		require.NoError(t, err)
	}
	b.runRelay(t, time.Second)
	waitFor(t, 15*time.Second, func() bool { return outboxStatus(t, b)["delivered"] == 20 }, "all delivered")
	acceptedAnswered := map[string]int{}
	for _, d := range r.arrived() {
		switch d.typ {
		case "order.accepted":
			acceptedAnswered[d.orderID]++
		case "order.completed":
			require.Equal(t, 3, acceptedAnswered[d.orderID], "completion sent only after the acceptance's third, successful attempt")
		}
	}
	require.Len(t, r.got(), 20)
}

// BenchmarkRelay delivers b.N messages of 20 merchants to a loopback
// receiver that answers 200 and reports deliveries/s.
func BenchmarkRelay(b *testing.B) {
	pool := storetest.Pool(b)
	st := store.New(store.Config{Pool: pool})
	ctx := context.Background()
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		received.Add(1)
	}))
	b.Cleanup(srv.Close)
	merchants := make([]uuid.UUID, 20)
	for i := range merchants {
		m, err := st.CreateMerchant(ctx, domain.MerchantSettings{Name: "hooked", Capacity: 10, PrepSeconds: 60,
			MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900, WebhookURL: srv.URL}, store.Meta{})
		require.NoError(b, err)
		merchants[i] = m.ID
	}
	_, err := pool.Exec(ctx, `
		INSERT INTO outbox (id, merchant_id, order_id, order_version, event_type, payload)
		SELECT gen_random_uuid(), ($2::uuid[])[1 + g % 20], gen_random_uuid(), 1, 'order.accepted', jsonb_build_object('n', g)
		FROM generate_series(1, $1) g`, b.N, merchants)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `ANALYZE outbox`)
	require.NoError(b, err)
	relay := jobs.NewRelay(st, webhook.NewSender(webhook.Options{AllowLoopback: true}), jobs.DefaultRelayConfig(), nil)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	// Fill the pool so that its backends are the ones whose CPU is counted.
	conns := make([]*pgxpool.Conn, pool.Config().MaxConns)
	for i := range conns {
		conns[i], err = pool.Acquire(ctx)
		require.NoError(b, err)
	}
	for _, c := range conns {
		c.Release()
	}
	goBefore, pgBefore := cpuTime(b, pool)
	b.ResetTimer()
	start := time.Now()
	go func() { defer close(done); relay.Run(runCtx) }()
	for relay.Stats.Delivered.Load() < int64(b.N) {
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	goAfter, pgAfter := cpuTime(b, pool)
	cancel()
	<-done
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
	// On a shared machine the rate above says more about the neighbours
	// than about the relay; the CPU it cost does not.
	b.ReportMetric(float64((goAfter-goBefore).Microseconds())/float64(b.N), "go-cpu-µs/delivery")
	b.ReportMetric(float64((pgAfter-pgBefore).Microseconds())/float64(b.N), "pg-cpu-µs/delivery")
	b.ReportMetric(float64(received.Load()-int64(b.N)), "duplicates")
	require.GreaterOrEqual(b, received.Load(), int64(b.N))
}

// cpuTime is the CPU this process (receiver included) and the pool's
// PostgreSQL backends have used, read from /proc: the relay's cost, whatever
// else runs on the machine.
func cpuTime(b *testing.B, pool *pgxpool.Pool) (goCPU, pgCPU time.Duration) {
	b.Helper()
	goCPU = procCPU(b, "self")
	rows, err := pool.Query(context.Background(), `SELECT pid::text FROM pg_stat_activity WHERE datname = current_database()`)
	require.NoError(b, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(b, err)
	for _, pid := range pids {
		pgCPU += procCPU(b, pid)
	}
	return goCPU, pgCPU
}

func procCPU(b *testing.B, pid string) time.Duration {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	require.NoError(b, err)
	// Fields after the command name, which may hold spaces: utime and stime
	// are the 12th and 13th of them.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		require.NoError(b, err)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// TestRelayLooksWhenWoken: an idle relay that would not look again for an
// hour delivers rows committed after its last look as soon as it is woken
// (by a hint that some process committed events).
func TestRelayLooksWhenWoken(t *testing.T) {
	t.Parallel()
	b := newRelayBundle(t)
	b.relayCfg.Poll, b.relayCfg.DistributedPoll = time.Hour, time.Hour
	var secret string
	r := newReceiver(t, &secret)
	m, p := b.webhookMerchant(t, r, &secret, 5)
	relay, _ := b.startRelay(t, time.Second)
	// Its first look, at the start, finds nothing; then it waits.
	time.Sleep(200 * time.Millisecond)
	placeUnpaid(t, b.store, m, p, "alice", "pay")
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, r.got(), "an idle relay does not look before it is woken")
	relay.Wake()
	waitFor(t, 5*time.Second, func() bool { return len(r.got()) == 1 }, "the order's webhook, once woken")
}
