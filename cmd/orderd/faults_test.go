package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/internal/app"
	"github.com/orderd/orderd/internal/pglocal"
	"github.com/orderd/orderd/migrations"
	"github.com/orderd/orderd/store/storetest"
)

// lockedBuffer collects a child's output, which its goroutines write while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// From is what was written from offset on.
func (b *lockedBuffer) From(offset int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf.Bytes()[offset:])
}

// server is one `orderd serve` process that the test may kill, stop and start
// again on the same address, so that clients find it where they left it.
type server struct {
	t     *testing.T
	dbURL string
	// addr and opsAddr are what the first start bound (it asks for port 0:
	// a port picked here and bound there could be taken in between by
	// another test's server); a restart asks for them again.
	addr    string
	opsAddr string
	env     []string
	logs    *lockedBuffer
	cmd     *exec.Cmd
	done    chan struct{}
	// exit is the last run's outcome, set once done is closed.
	exit error
}

func newServer(t *testing.T, dbURL string, env ...string) *server {
	t.Helper()
	s := &server{t: t, dbURL: dbURL, addr: "127.0.0.1:0", opsAddr: "127.0.0.1:0", env: env, logs: &lockedBuffer{}}
	s.start()
	t.Cleanup(func() {
		s.signal(syscall.SIGKILL)
		s.wait()
		if t.Failed() {
			t.Logf("orderd %s logs:\n%s", s.addr, s.logs.String())
		}
	})
	return s
}

func (s *server) base() string { return "http://" + s.addr }

// opsBase is the operator listener, where /metrics is.
func (s *server) opsBase() string { return "http://" + s.opsAddr }

// start runs the process and waits until it answers /readyz.
func (s *server) start() {
	s.t.Helper()
	bin, err := buildOnce()
	require.NoError(s.t, err)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(append(os.Environ(), "DATABASE_URL="+s.dbURL, "ORDERD_ADDR="+s.addr, "ORDERD_OPS_ADDR="+s.opsAddr, "ORDERD_JWT_SECRET="+testSecret,
		"ORDERD_RATE_PER_CUSTOMER=0", "ORDERD_MAX_CONNS=10"), s.env...)
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	from := s.logs.Len()
	require.NoError(s.t, cmd.Start())
	s.cmd, s.done = cmd, make(chan struct{})
	go func() {
		s.exit = cmd.Wait()
		close(s.done)
	}()
	addr, opsAddr, err := awaitServing(s.logs, from, s.done, 30*time.Second)
	require.NoError(s.t, err, s.logs.String())
	s.addr, s.opsAddr = addr, opsAddr
	require.NoError(s.t, waitReady(s.base(), 30*time.Second), s.logs.String())
}

// awaitServing waits until the process whose log is written to logs from
// offset from on says which addresses it bound, or exits. Only then is an
// answer on those addresses its own: until it has bound them, another
// process may be listening there.
func awaitServing(logs *lockedBuffer, from int, exited <-chan struct{}, within time.Duration) (addr, opsAddr string, err error) {
	deadline := time.After(within)
	for {
		if addr, opsAddr, ok := app.ServingAddrs(logs.From(from)); ok {
			return addr, opsAddr, nil
		}
		select {
		case <-exited:
			return "", "", errors.New("orderd exited before it was serving")
		case <-deadline:
			return "", "", fmt.Errorf("orderd did not say it was serving within %s", within)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *server) signal(sig os.Signal) {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

func (s *server) wait() {
	if s.done != nil {
		<-s.done
	}
}

// crash kills the process without warning and starts it again.
func (s *server) crash() {
	s.signal(syscall.SIGKILL)
	s.wait()
	s.start()
}

func waitReady(base string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("readyz answered %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w", base, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answer is what one HTTP exchange produced; err is set when no complete
// answer arrived.
type answer struct {
	status  int
	body    []byte
	err     error
	elapsed time.Duration
}

func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(a.body, v), string(a.body))
}

func (a answer) code() string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(a.body, &p)
	return p.Code
}

// send makes one exchange; key, when set, is the Idempotency-Key.
func send(hc *http.Client, method, url, token, key string, body any) answer {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return answer{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: raw, err: err, elapsed: time.Since(start)}
}

// world is a merchant with one unlimited product, and tokens to use it.
type world struct {
	merchantID, productID string
	admin, merchant       string
	auth                  *auth.Authenticator
}

func newWorld(t *testing.T, base string, merchant map[string]any) *world {
	t.Helper()
	w := &world{auth: auth.New([]byte(testSecret), nil)}
	w.admin = w.token(t, auth.Principal{Subject: "admin", Role: auth.RoleAdmin})
	hc := &http.Client{Timeout: 20 * time.Second}
	var m, p struct {
		ID string `json:"id"`
	}
	a := send(hc, "POST", base+"/v1/merchants", w.admin, "", merchant)
	require.Equal(t, 201, a.status, string(a.body))
	a.decode(t, &m)
	a = send(hc, "POST", base+"/v1/merchants/"+m.ID+"/products", w.admin, "", map[string]any{"name": "tea", "price_cents": 100})
	require.Equal(t, 201, a.status, string(a.body))
	a.decode(t, &p)
	w.merchantID, w.productID = m.ID, p.ID
	w.merchant = w.token(t, auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(m.ID)})
	return w
}

func (w *world) token(t *testing.T, p auth.Principal) string {
	t.Helper()
	tok, err := w.auth.Issue(p, time.Hour)
	require.NoError(t, err)
	return tok
}

func (w *world) placement(paymentRef string) map[string]any {
	body := map[string]any{"merchant_id": w.merchantID, "items": []map[string]any{{"product_id": w.productID, "quantity": 1}}}
	if paymentRef != "" {
		body["payment_ref"] = paymentRef
	}
	return body
}

// ledger records what the service acknowledged, to be found in the database
// afterwards.
type ledger struct {
	mu        sync.Mutex
	placed    map[string]string // idempotency key → order id
	paid      map[string]bool   // order id
	completed map[string]bool   // order id
	capacity  int
}

func newLedger() *ledger {
	return &ledger{placed: map[string]string{}, paid: map[string]bool{}, completed: map[string]bool{}}
}

func (l *ledger) record(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

// sender sends one request the way a test's clients do, retrying as they
// retry.
type sender func(method, path, token, key string, body any) answer

// payLate pays the unpaid order id as customer and records an acknowledged
// payment. A payment may find the order closed: its deadline passed while
// no server answered, or an attempt cut off by a kill had paid it already.
func (l *ledger) payLate(t *testing.T, do sender, customer, id string) {
	a := do("POST", "/v1/orders/"+id+"/pay", customer, "", map[string]any{"payment_ref": "late-" + id})
	switch {
	case a.status == 200:
		l.record(func() { l.paid[id] = true })
	case a.status == 409 && a.code() == "invalid_transition":
	default:
		t.Errorf("payment answered %d: %s", a.status, a.body)
	}
}

// completeOne completes one of w's accepted orders, picked at random, and
// records an acknowledged completion. A completion may find the order
// completed already by an attempt cut off by a kill, which the database
// check tells. It reports false when the merchant had none accepted.
func (l *ledger) completeOne(t *testing.T, do sender, w *world) bool {
	var list struct {
		Orders []orderView `json:"orders"`
	}
	a := do("GET", "/v1/merchants/"+w.merchantID+"/orders?status=accepted&limit=10", w.merchant, "", nil)
	if a.status != 200 || json.Unmarshal(a.body, &list) != nil {
		t.Errorf("list answered %d: %s", a.status, a.body)
		return false
	}
	if len(list.Orders) == 0 {
		return false
	}
	id := list.Orders[rand.IntN(len(list.Orders))].ID
	a = do("POST", "/v1/orders/"+id+"/complete", w.merchant, "", nil)
	switch {
	case a.status == 200:
		l.record(func() { l.completed[id] = true })
	case a.status == 409 && a.code() == "invalid_transition":
	default:
		t.Errorf("completion answered %d: %s", a.status, a.body)
	}
	return true
}

// requireKept checks the database against what the service acknowledged:
// every acknowledged placement is there exactly once (one order and one
// idempotency key each, and nothing else), with no acknowledged payment or
// completion lost. It returns how many orders there are.
func (l *ledger) requireKept(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	ctx := context.Background()
	l.mu.Lock()
	defer l.mu.Unlock()
	var orders, keys int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM orders WHERE idempotency_key IS NOT NULL)`).Scan(&orders, &keys))
	require.Equal(t, len(l.placed), orders, "every acknowledged placement exists exactly once, and nothing else")
	require.Equal(t, len(l.placed), keys)
	rows, err := pool.Query(ctx, `SELECT idempotency_key, id::text, status, paid_at IS NOT NULL FROM orders WHERE idempotency_key IS NOT NULL`)
	require.NoError(t, err)
	seen := map[string]bool{}
	for rows.Next() {
		var key, id, status string
		var paid bool
		require.NoError(t, rows.Scan(&key, &id, &status, &paid))
		require.Equal(t, l.placed[key], id, "key %s", key)
		seen[key] = true
		if l.paid[id] {
			require.True(t, paid, "acknowledged payment of %s is lost", id)
		}
		if l.completed[id] {
			require.Equal(t, "completed", status, "acknowledged completion of %s is lost", id)
		}
	}
	require.NoError(t, rows.Err())
	require.Len(t, seen, len(l.placed))
	return orders
}

// retrying sends a request to the servers in turn until one answers other
// than "unavailable", the way a client with an Idempotency-Key is meant to
// retry: the same request, again.
func retrying(t *testing.T, hc *http.Client, bases []string, method, path, token, key string, body any) answer {
	deadline := time.Now().Add(60 * time.Second)
	for i := rand.IntN(len(bases)); ; i++ {
		a := send(hc, method, bases[i%len(bases)]+path, token, key, body)
		if a.err == nil && a.status != http.StatusServiceUnavailable && a.status != http.StatusBadGateway {
			return a
		}
		if time.Now().After(deadline) {
			t.Errorf("%s %s: no answer within a minute: %v %d %s", method, path, a.err, a.status, a.body)
			return a
		}
		time.Sleep(time.Duration(20+rand.IntN(80)) * time.Millisecond)
	}
}

type orderView struct {
	ID string `json:"id"`
}

// TestCrashesLoseNothing kills orderd processes with SIGKILL at random moments
// under a mixed load of placements (paid and unpaid), payments, completions
// and capacity changes, restarting each; the last crash takes every process
// down together while payment deadlines fall due. Clients retry with the same
// Idempotency-Key. Afterwards every acknowledged effect exists exactly once,
// the queue stayed FIFO, the overdue timers fired, load counters match the
// orders, and `orderd audit` is clean.
//
// ORDERD_LONG_FAULTS=1 makes it a crash loop of 40 kills instead of 5.
func TestCrashesLoseNothing(t *testing.T) {
	t.Parallel()
	kills := 5
	if os.Getenv("ORDERD_LONG_FAULTS") != "" {
		kills = 40
	}
	dbURL := storetest.URL(t)
	var hooks sync.Map // delivery id → true
	receiver := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hooks.Store(r.Header.Get("X-Orderd-Delivery"), true)
	}))
	t.Cleanup(receiver.Close)
	env := []string{"ORDERD_WEBHOOK_ALLOW_LOOPBACK=true", "ORDERD_WEBHOOK_BACKOFF=100ms"}
	servers := []*server{newServer(t, dbURL, env...), newServer(t, dbURL, env...)}
	bases := []string{servers[0].base(), servers[1].base()}
	w := newWorld(t, bases[0], map[string]any{"name": "crashy", "capacity": 3, "payment_timeout_seconds": 3, "prep_seconds": 30,
		"webhook_url": receiver.URL + "/hooks"})
	hc := &http.Client{Timeout: 20 * time.Second}
	do := func(method, path, token, key string, body any) answer {
		return retrying(t, hc, bases, method, path, token, key, body)
	}
	l := newLedger()
	l.capacity = 3

	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	unpaid := make(chan string, 10000)
	var wg sync.WaitGroup
	place := func(customer, ref string) (string, bool) {
		key := uuid.NewString()
		a := retrying(t, hc, bases, "POST", "/v1/orders", customer, key, w.placement(ref))
		if a.status != 201 && a.status != 200 {
			t.Errorf("placement answered %d: %v %s", a.status, a.err, a.body)
			return "", false
		}
		var o orderView
		if err := json.Unmarshal(a.body, &o); err != nil {
			t.Errorf("placement answer: %v", err)
			return "", false
		}
		l.record(func() { l.placed[key] = o.ID })
		return o.ID, true
	}
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			customer := w.token(t, auth.Principal{Subject: fmt.Sprintf("c%d", c), Role: auth.RoleCustomer})
			for n := 0; !stopped(); n++ {
				if n%2 == 0 {
					place(customer, fmt.Sprintf("pay-%d-%d", c, n))
					continue
				}
				id, ok := place(customer, "")
				if !ok {
					continue
				}
				// Half the unpaid orders are paid while still open; the
				// rest are left to their payment timer.
				if n%4 == 1 {
					unpaid <- id
					continue
				}
				l.payLate(t, do, customer, id)
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for !stopped() {
			if !l.completeOne(t, do, w) {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for !stopped() {
			capacity := 1 + rand.IntN(5)
			a := retrying(t, hc, bases, "PATCH", "/v1/merchants/"+w.merchantID, w.admin, "", map[string]any{"capacity": capacity})
			if a.status != 200 {
				t.Errorf("capacity change answered %d: %s", a.status, a.body)
			}
			l.record(func() { l.capacity = capacity })
			time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		}
	}()

	for k := range kills - 1 {
		time.Sleep(time.Duration(300+rand.IntN(1200)) * time.Millisecond)
		servers[k%2].crash()
	}
	close(stop)
	wg.Wait()

	// The last crash takes both processes down while the unpaid orders'
	// deadlines fall due: only the database remembers their timers.
	customer := w.token(t, auth.Principal{Subject: "late", Role: auth.RoleCustomer})
	var stranded []string
	for range 5 {
		id, ok := place(customer, "")
		require.True(t, ok)
		stranded = append(stranded, id)
	}
	for _, s := range servers {
		s.signal(syscall.SIGKILL)
		s.wait()
	}
	time.Sleep(4 * time.Second)
	for _, s := range servers {
		s.start()
	}
	restarted := time.Now()
	close(unpaid)
	for id := range unpaid {
		stranded = append(stranded, id)
	}

	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		var open int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id = ANY($1::uuid[]) AND status = 'awaiting_payment'`, stranded).Scan(&open)
		return err == nil && open == 0
	}, 30*time.Second, 100*time.Millisecond, "payment timers that fell due during the outage never fired")
	t.Logf("overdue timers fired within %s of the restart", time.Since(restarted).Round(100*time.Millisecond))
	var closed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id = ANY($1::uuid[]) AND status = 'closed'`, stranded).Scan(&closed))
	require.Len(t, stranded, closed, "every order left unpaid is closed")

	orders := l.requireKept(t, pool)
	t.Logf("%d kills, %d orders, %d paid later, %d completed, %d closed by timers", kills, orders, len(l.paid), len(l.completed), closed)

	requireQueueInvariants(t, pool, w.merchantID, l.capacity)

	// Every message committed with its event, crashes or not, reaches the
	// receiver: nothing stays pending, nothing is dead-lettered while the
	// receiver answers 2xx, and nothing is marked delivered without arriving.
	require.Eventually(t, func() bool {
		var pending int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status <> 'delivered'`).Scan(&pending)
		return err == nil && pending == 0
	}, 60*time.Second, 200*time.Millisecond, "webhooks left undelivered")
	t.Logf("webhooks delivered within %s of the restart", time.Since(restarted).Round(100*time.Millisecond))
	rows, err := pool.Query(ctx, `SELECT id::text FROM outbox`)
	require.NoError(t, err)
	delivered := 0
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		_, ok := hooks.Load(id)
		require.True(t, ok, "outbox %s marked delivered but never received", id)
		delivered++
	}
	require.NoError(t, rows.Err())
	require.Positive(t, delivered)
	audit := exec.Command(mustBinary(t), "audit")
	audit.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	out, err := audit.CombinedOutput()
	require.NoError(t, err, "orderd audit:\n%s", out)
}

func mustBinary(t *testing.T) string {
	t.Helper()
	bin, err := buildOnce()
	require.NoError(t, err)
	return bin
}

// requireQueueInvariants checks what admission must keep whatever happened:
// queued orders were admitted in queue order, and the merchant's load
// counters agree with its orders.
func requireQueueInvariants(t *testing.T, pool *pgxpool.Pool, merchantID string, capacity int) {
	t.Helper()
	ctx := context.Background()
	var outOfOrder int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM (
			SELECT (q.data->>'seq')::bigint AS seq, lag((q.data->>'seq')::bigint) OVER (ORDER BY a.global_position) AS prev
			FROM events a JOIN events q ON q.stream_id = a.stream_id AND q.type = 'order.queued'
			WHERE a.type = 'order.accepted') x
		WHERE seq < prev`).Scan(&outOfOrder))
	require.Zero(t, outOfOrder, "queued orders admitted out of queue order")
	var active, queued, accepted, inQueue, cap int
	require.NoError(t, pool.QueryRow(ctx, `SELECT m.active, m.queued, m.capacity,
			(SELECT count(*) FROM orders WHERE merchant_id = m.id AND status = 'accepted'),
			(SELECT count(*) FROM orders WHERE merchant_id = m.id AND status = 'queued')
		FROM merchants m WHERE m.id = $1`, merchantID).Scan(&active, &queued, &cap, &accepted, &inQueue))
	require.Equal(t, accepted, active, "merchants.active")
	require.Equal(t, inQueue, queued, "merchants.queued")
	require.Equal(t, capacity, cap, "the last acknowledged capacity change holds")
}

// cluster is a private PostgreSQL that the test may restart.
type cluster struct {
	inst    *pglocal.Instance
	dataDir string
	bin     string
}

// newCluster starts a private cluster, as durable as a real one: a crash test
// on a cluster that may lose committed transactions proves nothing.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst, err := pglocal.Find(ctx, pglocal.Options{DataDir: dir, SkipLocalhost: true})
	require.NoError(t, err)
	c := &cluster{inst: inst, dataDir: filepath.Join(dir, "data")}
	t.Cleanup(func() {
		if err := c.inst.Stop(context.Background()); err != nil {
			t.Logf("stop cluster: %v", err)
		}
	})
	out, err := exec.Command("pg_config", "--bindir").Output()
	require.NoError(t, err, "pg_config --bindir")
	c.bin = strings.TrimSpace(string(out))
	return c
}

// pgCtl runs pg_ctl as the data directory's owner, as pglocal does: the
// server refuses to run as root.
func (c *cluster) pgCtl(t *testing.T, args ...string) {
	t.Helper()
	// Without -l the restarted server would inherit our output pipe and keep
	// CombinedOutput waiting for as long as it runs.
	argv := append([]string{filepath.Join(c.bin, "pg_ctl"), "-D", c.dataDir, "-l", filepath.Join(filepath.Dir(c.dataDir), "postgres.log")}, args...)
	if os.Geteuid() == 0 {
		argv = append([]string{"runuser", "-u", "postgres", "--"}, argv...)
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	require.NoError(t, err, "pg_ctl %v: %s", args, out)
}

// TestDatabaseRestartsAnswer503 restarts PostgreSQL under load, in fast and
// then immediate mode: requests in flight answer 503 unavailable (never a 500,
// never later than the request timeout), orderd recovers by itself, River's
// timers run again, and no acknowledged order is lost.
func TestDatabaseRestartsAnswer503(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, pglocal.EnsureDatabase(ctx, c.inst.URL, "orderd"))
	dbURL := c.inst.DatabaseURL("orderd")
	require.NoError(t, migrations.Up(ctx, dbURL))
	s := newServer(t, dbURL, "ORDERD_MIGRATE=false")
	w := newWorld(t, s.base(), map[string]any{"name": "steady", "capacity": 100000, "payment_timeout_seconds": 2})
	hc := &http.Client{Timeout: 30 * time.Second}

	var (
		mu          sync.Mutex
		acked       = map[string]string{}
		unavailable atomic.Int64
		okAfter     atomic.Int64
		phase       atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			customer := w.token(t, auth.Principal{Subject: fmt.Sprintf("c%d", c), Role: auth.RoleCustomer})
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := uuid.NewString()
				for {
					a := send(hc, "POST", s.base()+"/v1/orders", customer, key, w.placement("pay-"+key))
					if a.err != nil || a.elapsed > 12*time.Second {
						t.Errorf("placement answered %d after %s (request timeout 10 s): %v", a.status, a.elapsed, a.err)
						return
					}
					if a.status == 503 && a.code() == "unavailable" {
						unavailable.Add(1)
						time.Sleep(50 * time.Millisecond)
						continue
					}
					var o orderView
					if (a.status != 200 && a.status != 201) || json.Unmarshal(a.body, &o) != nil {
						t.Errorf("placement answered %d: %s", a.status, a.body)
						return
					}
					mu.Lock()
					acked[key] = o.ID
					mu.Unlock()
					if phase.Load() == 2 {
						okAfter.Add(1)
					}
					break
				}
			}
		}()
	}
	time.Sleep(time.Second)
	c.pgCtl(t, "-m", "fast", "-w", "restart")
	require.NoError(t, waitReady(s.base(), 30*time.Second))
	time.Sleep(time.Second)
	phase.Store(1)
	c.pgCtl(t, "-m", "immediate", "-w", "restart")
	require.NoError(t, waitReady(s.base(), 30*time.Second))
	phase.Store(2)
	time.Sleep(time.Second)

	// River must have reconnected too: a fresh unpaid order closes on time.
	customer := w.token(t, auth.Principal{Subject: "late", Role: auth.RoleCustomer})
	a := send(hc, "POST", s.base()+"/v1/orders", customer, uuid.NewString(), w.placement(""))
	require.Equal(t, 201, a.status, string(a.body))
	var late orderView
	a.decode(t, &late)
	close(stop)
	wg.Wait()
	require.Positive(t, okAfter.Load(), "no placement succeeded after the restarts")

	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	require.Eventually(t, func() bool {
		var status string
		err := pool.QueryRow(ctx, `SELECT status FROM orders WHERE id = $1`, late.ID).Scan(&status)
		return err == nil && status == "closed"
	}, 30*time.Second, 100*time.Millisecond, "the payment timer never fired after the restarts")

	mu.Lock()
	defer mu.Unlock()
	ids := make([]string, 0, len(acked))
	for _, id := range acked {
		ids = append(ids, id)
	}
	var found int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id = ANY($1::uuid[])`, ids).Scan(&found))
	require.Equal(t, len(ids), found, "acknowledged orders lost in a database restart")
	t.Logf("%d orders acknowledged, %d answers 503 during the restarts", len(ids), unavailable.Load())
}

// TestSIGTERMCutsNoAcceptedRequest stops orderd with SIGTERM under load:
// every answer that started arrives whole, no placement is committed without
// its answer reaching the client, and the process exits 0 in time.
func TestSIGTERMCutsNoAcceptedRequest(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	s := newServer(t, dbURL)
	w := newWorld(t, s.base(), map[string]any{"name": "closing", "capacity": 100000})
	hc := &http.Client{Timeout: 30 * time.Second}

	var mu sync.Mutex
	var unanswered []string // keys of placements that got no answer
	var answered atomic.Int64
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			customer := w.token(t, auth.Principal{Subject: fmt.Sprintf("c%d", c), Role: auth.RoleCustomer})
			for {
				key := uuid.NewString()
				a := send(hc, "POST", s.base()+"/v1/orders", customer, key, w.placement("pay-"+key))
				if a.err != nil {
					// Once the listener is gone nothing more can be sent.
					mu.Lock()
					unanswered = append(unanswered, key)
					mu.Unlock()
					if errors.Is(a.err, syscall.ECONNREFUSED) {
						return
					}
					continue
				}
				if (a.status != 201 && a.status != 503) || !json.Valid(a.body) {
					t.Errorf("placement answered %d: %q", a.status, a.body)
					return
				}
				answered.Add(1)
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	start := time.Now()
	s.signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(25 * time.Second):
		t.Fatal("orderd did not exit within its 20 s shutdown timeout")
	}
	took := time.Since(start)
	wg.Wait()
	require.NoError(t, s.exit, "orderd exit status after SIGTERM")
	require.Positive(t, answered.Load())

	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var cut int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE idempotency_key = ANY($1)`, unanswered).Scan(&cut))
	require.Zero(t, cut, "placements committed whose answer never reached the client")
	t.Logf("%d answered, %d refused at the door, exit after %s", answered.Load(), len(unanswered), took)
}

// TestLockedMerchantTimesOut holds the merchant's row lock from outside while
// orderd runs on a pool of two connections: paid placements, which need that
// lock, answer 503 within the request timeout instead of piling up, the
// process stays responsive, and placements succeed once the lock is gone.
func TestLockedMerchantTimesOut(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	s := newServer(t, dbURL, "ORDERD_MAX_CONNS=2")
	w := newWorld(t, s.base(), map[string]any{"name": "jammed", "capacity": 100000})
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // the lock's holder, released below
	var id string
	require.NoError(t, tx.QueryRow(ctx, `SELECT id::text FROM merchants WHERE id = $1 FOR UPDATE`, w.merchantID).Scan(&id))

	hc := &http.Client{Timeout: 30 * time.Second}
	answers := make([]answer, 12)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			customer := w.token(t, auth.Principal{Subject: fmt.Sprintf("c%d", i), Role: auth.RoleCustomer})
			key := uuid.NewString()
			answers[i] = send(hc, "POST", s.base()+"/v1/orders", customer, key, w.placement("pay-"+key))
		}()
	}
	// Requests that need no database still answer while the pool is stuck.
	time.Sleep(500 * time.Millisecond)
	health := send(hc, "GET", s.base()+"/healthz", "", "", nil)
	require.Equal(t, 200, health.status)
	require.Less(t, health.elapsed, time.Second)
	wg.Wait()
	for _, a := range answers {
		require.NoError(t, a.err)
		require.Equal(t, 503, a.status, string(a.body))
		require.Equal(t, "unavailable", a.code())
		require.Less(t, a.elapsed, 12*time.Second)
	}
	require.NoError(t, tx.Rollback(ctx))

	customer := w.token(t, auth.Principal{Subject: "after", Role: auth.RoleCustomer})
	require.Eventually(t, func() bool {
		a := send(hc, "POST", s.base()+"/v1/orders", customer, uuid.NewString(), w.placement("pay-after"))
		return a.status == 201
	}, 15*time.Second, 200*time.Millisecond, "placements do not recover once the lock is gone")
	var orders int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&orders))
	require.Equal(t, 1, orders, "a timed-out placement wrote nothing")
}

// TestReadOnlyDatabaseAnswers503 turns the database read-only under orderd,
// as a failover manager fences a primary it demotes: placements answer 503
// unavailable (a refused write is SQLSTATE 25006, never a 500), and succeed
// again once the server is writable, without a restart of orderd.
func TestReadOnlyDatabaseAnswers503(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	require.NoError(t, pglocal.EnsureDatabase(ctx, c.inst.URL, "orderd"))
	require.NoError(t, migrations.Up(ctx, c.inst.DatabaseURL("orderd")))
	s := newServer(t, c.inst.DatabaseURL("orderd"), "ORDERD_MIGRATE=false")
	w := newWorld(t, s.base(), map[string]any{"name": "fenced", "capacity": 100000})
	hc := &http.Client{Timeout: 20 * time.Second}
	customer := w.token(t, auth.Principal{Subject: "c", Role: auth.RoleCustomer})
	place := func() answer {
		key := uuid.NewString()
		return send(hc, "POST", s.base()+"/v1/orders", customer, key, w.placement("pay-"+key))
	}
	require.Equal(t, 201, place().status)

	admin, err := pgxpool.New(ctx, c.inst.URL)
	require.NoError(t, err)
	defer admin.Close()
	setReadOnly := func(on bool) {
		conn, err := admin.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		stmt := `ALTER SYSTEM RESET default_transaction_read_only`
		if on {
			stmt = `ALTER SYSTEM SET default_transaction_read_only = on`
		}
		_, err = conn.Exec(ctx, `SET default_transaction_read_only = off`)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, stmt)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `SELECT pg_reload_conf()`)
		require.NoError(t, err)
	}
	setReadOnly(true)
	refused := 0
	for range 20 {
		a := place()
		require.NoError(t, a.err)
		if a.status == 201 {
			continue // a session that has not read the reloaded setting yet
		}
		require.Equal(t, 503, a.status, string(a.body))
		require.Equal(t, "unavailable", a.code())
		refused++
	}
	require.Positive(t, refused, "a read-only database refused nothing")
	setReadOnly(false)
	require.Eventually(t, func() bool { return place().status == 201 }, 15*time.Second, 100*time.Millisecond,
		"placements do not resume once the database is writable")
}
