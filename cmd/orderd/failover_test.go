package main

import (
	"context"
	"encoding/json"
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
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/internal/pglocal"
	"github.com/orderd/orderd/migrations"
)

// startCluster starts a private cluster in dir, as durable as a real one
// (fsync and synchronous_commit on), stopped when the test ends unless the
// test killed it.
func startCluster(t *testing.T, dir string, settings ...string) *pglocal.Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst, err := pglocal.Find(ctx, pglocal.Options{DataDir: dir, SkipLocalhost: true, Settings: settings})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := inst.Stop(context.Background()); err != nil {
			t.Logf("stop cluster in %s: %v", dir, err)
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "postgres.log")); err == nil {
				t.Logf("%s/postgres.log:\n%s", dir, tail(b, 4000))
			}
		}
	})
	return inst
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// replicatedPair is a primary with database orderd migrated and a
// synchronous streaming standby made from it with pg_basebackup -R, each a
// cluster of its own on a free port; url names both, primary first, as a
// production DATABASE_URL does.
type replicatedPair struct {
	primary, standby *pglocal.Instance
	url              string
}

func newReplicatedPair(t *testing.T) *replicatedPair {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	primary := startCluster(t, filepath.Join(dir, "primary"))
	require.NoError(t, pglocal.EnsureDatabase(ctx, primary.URL, "orderd"))
	require.NoError(t, migrations.Up(ctx, primary.DatabaseURL("orderd")))
	require.NoError(t, primary.BaseBackup(ctx, filepath.Join(dir, "standby"), true))
	standby := startCluster(t, filepath.Join(dir, "standby"))

	// Set on the primary after the backup, so that the standby, once
	// promoted, does not wait for a standby of its own that does not exist.
	admin, err := pgxpool.New(ctx, primary.URL)
	require.NoError(t, err)
	defer admin.Close()
	for _, stmt := range []string{`ALTER SYSTEM SET synchronous_standby_names = '*'`, `ALTER SYSTEM SET synchronous_commit = on`, `SELECT pg_reload_conf()`} {
		_, err := admin.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	require.Eventually(t, func() bool {
		var sync int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'`).Scan(&sync)
		return err == nil && sync == 1
	}, 30*time.Second, 50*time.Millisecond, "the standby never became synchronous")
	return &replicatedPair{
		primary: primary, standby: standby,
		url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/orderd?sslmode=disable&target_session_attrs=read-write",
			primary.Port(), standby.Port()),
	}
}

// outageClock hears every exchange of the test's clients and keeps the first
// 2xx answer to a request sent after the kill.
type outageClock struct {
	base     http.RoundTripper
	killedAt atomic.Int64 // unix nanoseconds; 0 before the kill
	firstOK  atomic.Int64
}

func (c *outageClock) RoundTrip(r *http.Request) (*http.Response, error) {
	sent := time.Now().UnixNano()
	resp, err := c.base.RoundTrip(r)
	if err == nil && resp.StatusCode < 300 {
		if k := c.killedAt.Load(); k != 0 && sent > k {
			c.firstOK.CompareAndSwap(0, time.Now().UnixNano())
		}
	}
	return resp, err
}

// withoutService is the time from the kill to the first 2xx, once known.
func (c *outageClock) withoutService() (time.Duration, bool) {
	ok := c.firstOK.Load()
	return time.Duration(ok - c.killedAt.Load()), ok != 0
}

// TestFailoverLosesNothing loses the database machine under load: two
// `orderd serve` processes run on a primary and its synchronous standby,
// named together in DATABASE_URL, under paid and unpaid placements,
// payments, completions and a drop; the primary's postmaster and every
// process it started are SIGKILLed at once and the standby promoted
// (pg_ctl promote, as a failover manager does). Load goes on through the
// same URL. Afterwards every placement, payment, completion and drop entry
// answered 2xx exists with that state or a later one (placements exactly
// once), every unpaid order closed at its deadline, the drop started and
// sold out on its timers, River worked jobs on the new primary, a websocket
// client connected before the kill saw a change committed after it, every
// webhook message owed arrived, and `orderd audit` is clean. It reports the time without service: from the kill to
// the first 2xx answer to a request sent after it.
func TestFailoverLosesNothing(t *testing.T) {
	t.Parallel()
	pair := newReplicatedPair(t)
	var hooks sync.Map // delivery id → true
	receiver := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hooks.Store(r.Header.Get("X-Orderd-Delivery"), true)
	}))
	t.Cleanup(receiver.Close)
	env := []string{"ORDERD_WEBHOOK_ALLOW_LOOPBACK=true", "ORDERD_WEBHOOK_BACKOFF=100ms", "ORDERD_MIGRATE=false"}
	servers := []*server{newServer(t, pair.url, env...), newServer(t, pair.url, env...)}
	bases := []string{servers[0].base(), servers[1].base()}
	const capacity = 3
	w := newWorld(t, bases[0], map[string]any{"name": "failover", "capacity": capacity, "payment_timeout_seconds": 3, "prep_seconds": 30,
		"webhook_url": receiver.URL + "/hooks"})
	clock := &outageClock{base: http.DefaultTransport}
	hc := &http.Client{Timeout: 20 * time.Second, Transport: clock}
	do := func(method, path, token, key string, body any) answer {
		return retrying(t, hc, bases, method, path, token, key, body)
	}

	// The drop opens at once and starts just after the kill: its start, its
	// invitations and its sell-out happen on the promoted standby.
	const units, joiners = 4, 10
	a := send(hc, "POST", bases[0]+"/v1/merchants/"+w.merchantID+"/products", w.admin, "", map[string]any{"name": "cup", "price_cents": 100, "stock": units})
	require.Equal(t, 201, a.status, string(a.body))
	var product struct {
		ID string `json:"id"`
	}
	a.decode(t, &product)
	loadStart := time.Now()
	killAfter := 3 * time.Second
	opens, starts := loadStart.Add(500*time.Millisecond), loadStart.Add(killAfter+time.Second)
	a = send(hc, "POST", bases[1]+"/v1/products/"+product.ID+"/drops", w.admin, "", map[string]any{
		"opens_at": opens.UTC().Format(time.RFC3339Nano), "starts_at": starts.UTC().Format(time.RFC3339Nano),
		"mode": "lottery", "units": units, "purchase_window_seconds": 30,
	})
	require.Equal(t, 201, a.status, string(a.body))
	var drop dropView
	a.decode(t, &drop)

	// A websocket client connected before the kill follows a paid order of
	// a quiet merchant, which is completed after it: the live feed must read
	// the promoted standby's log.
	quiet := newWorld(t, bases[0], map[string]any{"name": "quiet", "capacity": 10})
	watcherToken := quiet.token(t, auth.Principal{Subject: "watcher", Role: auth.RoleCustomer})
	watchedKey := uuid.NewString()
	a = send(hc, "POST", bases[0]+"/v1/orders", watcherToken, watchedKey, quiet.placement("pay-watched"))
	require.Equal(t, 201, a.status, string(a.body))
	var watched orderView
	a.decode(t, &watched)
	statuses := follow(t, bases[1], watcherToken, watched.ID)
	require.Equal(t, "accepted", <-statuses, "the watched order's first message")

	l := newLedger()
	l.placed[watchedKey] = watched.ID
	var entriesMu sync.Mutex
	entries := map[string]string{} // entry id → the status last answered
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var wg sync.WaitGroup
	place := func(customer string, body map[string]any) (string, bool) {
		key := uuid.NewString()
		a := retrying(t, hc, bases, "POST", "/v1/orders", customer, key, body)
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
	for c := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			customer := w.token(t, auth.Principal{Subject: fmt.Sprintf("c%d", c), Role: auth.RoleCustomer})
			for n := 0; !stopped(); n++ {
				if n%2 == 0 {
					place(customer, w.placement(fmt.Sprintf("pay-%d-%d", c, n)))
					continue
				}
				id, ok := place(customer, w.placement(""))
				// Every other unpaid order is left to its payment timer.
				if !ok || n%4 == 1 {
					continue
				}
				l.payLate(t, do, customer, id)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stopped() {
			if !l.completeOne(t, do, w) {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	// Drop customers join before and during the outage, then buy when
	// invited; the drop sells out on the promoted standby.
	var dropWG sync.WaitGroup
	dropDeadline := starts.Add(60 * time.Second)
	for i := range joiners {
		dropWG.Add(1)
		go func() {
			defer dropWG.Done()
			customer := w.token(t, auth.Principal{Subject: fmt.Sprintf("d%d", i), Role: auth.RoleCustomer})
			time.Sleep(time.Until(opens) + time.Duration(rand.IntN(int(killAfter))))
			a := retrying(t, hc, bases, "POST", "/v1/drops/"+drop.ID+"/entries", customer, "", nil)
			var e dropEntryView
			if a.status != 201 && a.status != 200 || json.Unmarshal(a.body, &e) != nil {
				t.Errorf("join answered %d: %s", a.status, a.body)
				return
			}
			entriesMu.Lock()
			entries[e.ID] = e.Status
			entriesMu.Unlock()
			for time.Now().Before(dropDeadline) {
				a := retrying(t, hc, bases, "GET", "/v1/drops/"+drop.ID+"/entries/me", customer, "", nil)
				a.decode(t, &e)
				switch e.Status {
				case "invited":
					body := w.placement("pay-drop")
					body["items"] = []map[string]any{{"product_id": product.ID, "quantity": 1}}
					if id, ok := place(customer, body); ok {
						l.record(func() { l.paid[id] = true })
					}
				case "purchased", "lapsed", "sold_out":
					entriesMu.Lock()
					entries[e.ID] = e.Status
					entriesMu.Unlock()
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Errorf("entry %s still %s after the drop's deadline", e.ID, e.Status)
		}()
	}

	time.Sleep(time.Until(loadStart.Add(killAfter)))
	require.NoError(t, pair.primary.Kill())
	clock.killedAt.Store(time.Now().UnixNano())
	promoteStart := time.Now()
	require.NoError(t, pair.standby.Promote(context.Background()))
	promoted := time.Since(promoteStart)
	promotedAt := time.Now()
	require.Eventually(t, func() bool { _, ok := clock.withoutService(); return ok }, 60*time.Second, 10*time.Millisecond,
		"no request succeeded after the failover")
	outage, _ := clock.withoutService()
	a = retrying(t, hc, bases, "POST", "/v1/orders/"+watched.ID+"/complete", quiet.merchant, "", nil)
	require.Equal(t, 200, a.status, string(a.body))
	l.record(func() { l.completed[watched.ID] = true })
	select {
	case status := <-statuses:
		require.Equal(t, "completed", status, "the websocket client's next message after the failover")
	case <-time.After(15 * time.Second):
		t.Fatal("a change committed on the promoted standby never reached a websocket client connected before the kill")
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	dropWG.Wait()

	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pair.url)
	require.NoError(t, err)
	defer pool.Close()
	require.Eventually(t, func() bool {
		var open int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status = 'awaiting_payment' AND payment_deadline < now()`).Scan(&open)
		return err == nil && open == 0
	}, 30*time.Second, 100*time.Millisecond, "unpaid orders past their deadline stay open after the failover")

	// The backstop of every process fires overdue timers without River; River
	// itself must be back too, working jobs on the new primary.
	var worked int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed' AND finalized_at > $1`, promotedAt).Scan(&worked))
	require.Positive(t, worked, "River worked no job after the failover")

	orders := l.requireKept(t, pool)
	requireQueueInvariants(t, pool, w.merchantID, capacity)

	entryIDs := make([]string, 0, len(entries))
	for id := range entries {
		entryIDs = append(entryIDs, id)
	}
	var foundEntries int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM drop_entries WHERE id = ANY($1::uuid[])`, entryIDs).Scan(&foundEntries))
	require.Equal(t, len(entries), foundEntries, "acknowledged drop entries lost")
	a = retrying(t, hc, bases, "GET", "/v1/drops/"+drop.ID, w.admin, "", nil)
	a.decode(t, &drop)
	require.Equal(t, "sold_out", drop.State, "the drop's timers did not carry it through after the failover")
	require.Equal(t, units, drop.Purchased)

	require.Eventually(t, func() bool {
		var pending int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status <> 'delivered'`).Scan(&pending)
		return err == nil && pending == 0
	}, 60*time.Second, 200*time.Millisecond, "webhooks left undelivered after the failover")
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

	audit := exec.Command(mustBinary(t), "audit")
	audit.Env = append(os.Environ(), "DATABASE_URL="+pair.url)
	out, err := audit.CombinedOutput()
	require.NoError(t, err, "orderd audit:\n%s", out)

	t.Logf("time without service: %s (kill to first 2xx; pg_ctl promote took %s); %d orders, %d paid later, %d completed, %d drop entries, %d webhooks delivered, %d River jobs worked after the promotion",
		outage.Round(time.Millisecond), promoted.Round(time.Millisecond), orders, len(l.paid), len(l.completed), len(entries), delivered, worked)
	require.Less(t, outage, 10*time.Second, "time without service")
}

// follow subscribes to orderID over a websocket of the instance at base and
// sends the status of every order message it receives.
func follow(t *testing.T, base, token, orderID string) <-chan string {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	a := send(hc, "POST", base+"/v1/ws/tickets", token, "", nil)
	require.Equal(t, http.StatusCreated, a.status, string(a.body))
	var ticket struct {
		Ticket string `json:"ticket"`
	}
	a.decode(t, &ticket)
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	c, _, err := dialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/v1/ws?ticket="+ticket.Ticket, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.WriteJSON(map[string]string{"op": "subscribe", "order_id": orderID}))
	out := make(chan string, 100)
	go func() {
		defer close(out)
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				return
			}
			var m struct {
				Type  string  `json:"type"`
				Order wsOrder `json:"order"`
			}
			if json.Unmarshal(data, &m) == nil && m.Type == "order" && m.Order.ID == orderID {
				out <- m.Order.Status
			}
		}
	}()
	return out
}
