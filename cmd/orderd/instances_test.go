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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store/storetest"
)

// roundRobin spreads requests over the instances in turn, as a load
// balancer would. A request that gets no answer (the instance is gone, or
// died with the request in flight) or a 502/503 goes to the next instance,
// the same request again: placements carry their Idempotency-Key.
type roundRobin struct {
	t        *testing.T
	hc       *http.Client
	bases    []string
	next     atomic.Uint64
	answered []atomic.Int64 // per instance
	// failedOver counts requests sent on to the next instance because one
	// gave no answer.
	failedOver atomic.Int64
}

func newRoundRobin(t *testing.T, bases []string) *roundRobin {
	return &roundRobin{t: t, hc: &http.Client{Timeout: 20 * time.Second}, bases: bases, answered: make([]atomic.Int64, len(bases))}
}

func (rr *roundRobin) do(method, path, token, key string, body any) answer {
	deadline := time.Now().Add(30 * time.Second)
	for {
		i := int(rr.next.Add(1) % uint64(len(rr.bases)))
		a := send(rr.hc, method, rr.bases[i]+path, token, key, body)
		if a.err == nil && a.status != http.StatusServiceUnavailable && a.status != http.StatusBadGateway {
			rr.answered[i].Add(1)
			return a
		}
		if time.Now().After(deadline) {
			rr.t.Errorf("%s %s: no instance answered within 30 s: %v %d %s", method, path, a.err, a.status, a.body)
			return a
		}
		if a.err != nil {
			rr.failedOver.Add(1)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// watcher is a websocket client of one instance following one order.
type watcher struct {
	orderID string
	mu      sync.Mutex
	status  string
	version int
	ended   chan struct{} // closed when the connection ends
	err     error
}

type wsOrder struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	Version       int    `json:"version"`
	QueuePosition *int   `json:"queue_position"`
}

// watch subscribes to orderID on the instance at base, with a ticket issued
// by the instance at ticketBase, and follows the order until it completes
// or the connection ends, checking on the way that the version never falls
// and a queued order only moves toward the head.
func watch(t *testing.T, base, ticketBase, token, orderID string) *watcher {
	t.Helper()
	req, err := http.NewRequest("POST", ticketBase+"/v1/ws/tickets", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var ticket struct {
		Ticket string `json:"ticket"`
	}
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ticket))
	resp.Body.Close()
	dialer := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	c, _, err := dialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/v1/ws?ticket="+ticket.Ticket, nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.WriteJSON(map[string]string{"op": "subscribe", "order_id": orderID}))
	w := &watcher{orderID: orderID, ended: make(chan struct{})}
	first := make(chan struct{})
	go func() {
		defer close(w.ended)
		lastPos := 1 << 30
		for n := 0; ; n++ {
			_ = c.SetReadDeadline(time.Now().Add(90 * time.Second))
			_, data, err := c.ReadMessage()
			if err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
			var m struct {
				Type  string  `json:"type"`
				Order wsOrder `json:"order"`
			}
			if err := json.Unmarshal(data, &m); err != nil || m.Type != "order" || m.Order.ID != orderID {
				t.Errorf("watcher of %s got %s", orderID, data)
				return
			}
			w.mu.Lock()
			if m.Order.Version < w.version {
				t.Errorf("watcher of %s: version %d after %d", orderID, m.Order.Version, w.version)
			}
			if m.Order.Status == "queued" && m.Order.QueuePosition != nil {
				if *m.Order.QueuePosition > lastPos {
					t.Errorf("watcher of %s: position %d after %d", orderID, *m.Order.QueuePosition, lastPos)
				}
				lastPos = *m.Order.QueuePosition
			}
			w.status, w.version = m.Order.Status, m.Order.Version
			w.mu.Unlock()
			if n == 0 {
				close(first)
			}
			if m.Order.Status == "completed" {
				return
			}
		}
	}()
	select {
	case <-first:
	case <-w.ended:
	case <-time.After(10 * time.Second):
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, "queued", w.status, "first message to the watcher of %s: %v", orderID, w.err)
	return w
}

// TestThreeInstancesKeepEveryGuarantee runs three `orderd serve` processes
// on one database behind a round-robin client, under a mixed load:
// placements paid at once and later (most of them waiting in a full queue),
// unpaid orders left to their payment timers, completions, capacity
// changes, webhooks to a receiver, and a websocket client on each instance
// watching a queued order. One instance is killed with SIGKILL mid-run and
// not restarted. Afterwards: every acknowledged effect exists exactly once,
// the queue was FIFO and never admitted beyond capacity, every timer that
// fell due closed its order, every webhook reached the receiver, the
// watchers on the surviving instances saw their orders complete, and
// `orderd audit` is clean.
func TestThreeInstancesKeepEveryGuarantee(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	var hooks sync.Map // delivery id → true
	receiver := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hooks.Store(r.Header.Get("X-Orderd-Delivery"), true)
	}))
	t.Cleanup(receiver.Close)
	env := []string{"ORDERD_WEBHOOK_ALLOW_LOOPBACK=true", "ORDERD_WEBHOOK_BACKOFF=100ms"}
	servers := make([]*server, 3)
	bases := make([]string, 3)
	for i := range servers {
		servers[i] = newServer(t, dbURL, env...)
		bases[i] = servers[i].base()
	}
	const startCapacity = 2
	w := newWorld(t, bases[0], map[string]any{"name": "three", "capacity": startCapacity, "payment_timeout_seconds": 3,
		"prep_seconds": 30, "webhook_url": receiver.URL + "/hooks"})
	rr := newRoundRobin(t, bases)
	l := newLedger()
	l.capacity = startCapacity

	place := func(customer, ref string) (string, bool) {
		key := uuid.NewString()
		a := rr.do("POST", "/v1/orders", customer, key, w.placement(ref))
		var o orderView
		if (a.status != 201 && a.status != 200) || json.Unmarshal(a.body, &o) != nil {
			t.Errorf("placement answered %d: %v %s", a.status, a.err, a.body)
			return "", false
		}
		l.record(func() { l.placed[key] = o.ID })
		return o.ID, true
	}

	// Fill the merchant's units, then queue one order per watcher, each
	// watched from its own instance.
	seed := w.token(t, auth.Principal{Subject: "seed", Role: auth.RoleCustomer})
	for range startCapacity {
		_, ok := place(seed, "pay-seed")
		require.True(t, ok)
	}
	watchers := make([]*watcher, len(servers))
	watcherTokens := make([]string, len(servers))
	for i := range servers {
		watcherTokens[i] = w.token(t, auth.Principal{Subject: fmt.Sprintf("watcher%d", i), Role: auth.RoleCustomer})
		id, ok := place(watcherTokens[i], "pay-watched")
		require.True(t, ok)
		// The ticket comes from another instance than the websocket's.
		watchers[i] = watch(t, bases[i], bases[(i+1)%len(bases)], watcherTokens[i], id)
	}

	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	pause := func(lo, hi int) { time.Sleep(time.Duration(lo+rand.IntN(hi-lo)) * time.Millisecond) }
	var (
		mu     sync.Mutex
		unpaid []string // left to their payment timers
	)
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			customer := w.token(t, auth.Principal{Subject: fmt.Sprintf("c%d", c), Role: auth.RoleCustomer})
			for n := 0; !stopped(); n++ {
				pause(30, 120)
				if n%3 != 2 {
					place(customer, fmt.Sprintf("pay-%d-%d", c, n))
					continue
				}
				id, ok := place(customer, "")
				if !ok {
					continue
				}
				if n%2 == 0 {
					mu.Lock()
					unpaid = append(unpaid, id)
					mu.Unlock()
					continue
				}
				l.payLate(t, rr.do, customer, id)
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for !stopped() {
			pause(20, 60)
			l.completeOne(t, rr.do, w)
		}
	}()
	go func() {
		defer wg.Done()
		for !stopped() {
			pause(200, 600)
			capacity := 1 + rand.IntN(4)
			a := rr.do("PATCH", "/v1/merchants/"+w.merchantID, w.admin, "", map[string]any{"capacity": capacity})
			if a.status != 200 {
				t.Errorf("capacity change answered %d: %s", a.status, a.body)
				continue
			}
			l.record(func() { l.capacity = capacity })
		}
	}()

	time.Sleep(4 * time.Second)
	for i := range servers {
		require.Positive(t, rr.answered[i].Load(), "instance %d took no request before the kill", i)
	}
	const victim = 1
	servers[victim].signal(syscall.SIGKILL)
	servers[victim].wait()
	before := rr.answered[victim].Load()
	time.Sleep(8 * time.Second)
	close(stop)
	wg.Wait()
	require.Equal(t, before, rr.answered[victim].Load(), "a dead instance answered")
	require.Positive(t, rr.failedOver.Load(), "no request was sent on from the dead instance")
	for i := range servers {
		if i != victim {
			require.Greater(t, rr.answered[i].Load(), int64(20), "the survivors share the load")
		}
	}

	// Open the doors: everything still queued is admitted, in queue order,
	// and each watched order completes.
	final := 1000
	a := rr.do("PATCH", "/v1/merchants/"+w.merchantID, w.admin, "", map[string]any{"capacity": final})
	require.Equal(t, 200, a.status, string(a.body))
	l.record(func() { l.capacity = final })
	for _, wt := range watchers {
		require.Eventually(t, func() bool {
			a := rr.do("POST", "/v1/orders/"+wt.orderID+"/complete", w.merchant, "", nil)
			if a.status == 200 {
				l.record(func() { l.completed[wt.orderID] = true })
			}
			var o struct {
				Status string `json:"status"`
			}
			a = rr.do("GET", "/v1/orders/"+wt.orderID, w.admin, "", nil)
			return a.status == 200 && json.Unmarshal(a.body, &o) == nil && o.Status == "completed"
		}, 20*time.Second, 100*time.Millisecond, "watched order %s never completed", wt.orderID)
	}

	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	ctx := context.Background()
	for i, wt := range watchers {
		if i == victim {
			continue
		}
		select {
		case <-wt.ended:
		case <-time.After(20 * time.Second):
		}
		var version int
		require.NoError(t, pool.QueryRow(ctx, `SELECT version FROM orders WHERE id = $1`, wt.orderID).Scan(&version))
		wt.mu.Lock()
		require.Equal(t, "completed", wt.status, "the watcher on instance %d never saw %s complete: %v", i, wt.orderID, wt.err)
		require.Equal(t, version, wt.version, "the watcher on instance %d", i)
		wt.mu.Unlock()
	}
	select {
	case <-watchers[victim].ended:
	case <-time.After(20 * time.Second):
		t.Error("the watcher of the killed instance was never cut off")
	}

	mu.Lock()
	stranded := unpaid
	mu.Unlock()
	require.NotEmpty(t, stranded)
	require.Eventually(t, func() bool {
		var open int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id = ANY($1::uuid[]) AND status = 'awaiting_payment'`, stranded).Scan(&open)
		return err == nil && open == 0
	}, 30*time.Second, 100*time.Millisecond, "payment timers that fell due never fired")
	var closed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE id = ANY($1::uuid[]) AND status = 'closed' AND status_reason = 'payment_timeout'`,
		stranded).Scan(&closed))
	require.Len(t, stranded, closed, "every order left unpaid is closed by its timer")
	require.Eventually(t, func() bool {
		var queued int
		err := pool.QueryRow(ctx, `SELECT queued FROM merchants WHERE id = $1`, w.merchantID).Scan(&queued)
		return err == nil && queued == 0
	}, 30*time.Second, 100*time.Millisecond, "orders still queued after capacity was raised to %d", final)

	orders := l.requireKept(t, pool)
	var over, fromQueue int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE (data->>'active_after')::int > (data->>'capacity')::int),
			count(*) FILTER (WHERE stream_id IN (SELECT stream_id FROM events WHERE type = 'order.queued'))
		FROM events WHERE type = 'order.accepted'`).Scan(&over, &fromQueue))
	require.Zero(t, over, "admissions beyond capacity")
	require.Positive(t, fromQueue, "no order was admitted from the queue")
	requireQueueInvariants(t, pool, w.merchantID, l.capacity)

	// A relay killed with rows leased gets them back when the lease ends
	// (30 s); a surviving relay then delivers them.
	require.Eventually(t, func() bool {
		var pending int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status NOT IN ('delivered', 'dead')`).Scan(&pending)
		return err == nil && pending == 0
	}, 60*time.Second, 200*time.Millisecond, "webhooks neither delivered nor dead-lettered")
	rows, err := pool.Query(ctx, `SELECT id::text, status FROM outbox`)
	require.NoError(t, err)
	messages := 0
	for rows.Next() {
		var id, status string
		require.NoError(t, rows.Scan(&id, &status))
		// The receiver always answers 200: nothing should have been given up.
		require.Equal(t, "delivered", status, "outbox %s", id)
		_, ok := hooks.Load(id)
		require.True(t, ok, "outbox %s marked delivered but never received", id)
		messages++
	}
	require.NoError(t, rows.Err())
	require.Positive(t, messages)

	audit := exec.Command(mustBinary(t), "audit")
	audit.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	out, err := audit.CombinedOutput()
	require.NoError(t, err, "orderd audit:\n%s", out)
	t.Logf("%d orders (%d admitted from the queue), %d paid later, %d completed, %d closed by timers, %d webhooks; answers per instance %d/%d/%d, %d sent on after no answer",
		orders, fromQueue, len(l.paid), len(l.completed), closed, messages, rr.answered[0].Load(), rr.answered[1].Load(), rr.answered[2].Load(), rr.failedOver.Load())
}
