package main

import (
	"bytes"
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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store/storetest"
)

const testSecret = "multiprocess-test-secret-of-32-bytes-or-more"

// buildOrderd compiles the binary once per test run.
var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "orderd-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "orderd")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w: %s", err, out)
	}
	return bin, nil
})

// startServe runs `orderd serve` on dbURL and waits until it is ready.
func startServe(t *testing.T, dbURL string) string {
	t.Helper()
	bin, err := buildOnce()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "ORDERD_ADDR=127.0.0.1:0", "ORDERD_OPS_ADDR=127.0.0.1:0", "ORDERD_JWT_SECRET="+testSecret,
		"ORDERD_RATE_PER_CUSTOMER=0", "ORDERD_MAX_CONNS=10")
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 15 * time.Second
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("orderd logs:\n%s", logs.String())
		}
	})
	addr, _, err := awaitServing(logs, 0, exited, 30*time.Second)
	require.NoError(t, err, logs.String())
	base := "http://" + addr
	require.NoError(t, waitReady(base, 30*time.Second), logs.String())
	return base
}

type client struct {
	t     *testing.T
	auth  *auth.Authenticator
	http  *http.Client
	cache sync.Map
}

func (c *client) token(p auth.Principal) string {
	key := string(p.Role) + p.Subject
	if v, ok := c.cache.Load(key); ok {
		return v.(string)
	}
	tok, err := c.auth.Issue(p, time.Hour)
	require.NoError(c.t, err)
	c.cache.Store(key, tok)
	return tok
}

func (c *client) do(method, url, token string, body any, out any) int {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", uuid.NewString())
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Errorf("%s %s: %v", method, url, err)
		return 0
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		require.NoError(c.t, json.Unmarshal(raw, out))
	}
	return resp.StatusCode
}

// kitchenOfTwo is a merchant with one product served by two orderd
// processes on one database: what the tests below share.
type kitchenOfTwo struct {
	t          *testing.T
	c          *client
	bases      []string
	merchantID string
	productID  string
	merchant   string
	pool       *pgxpool.Pool
}

func newKitchenOfTwo(t *testing.T, settings map[string]any) *kitchenOfTwo {
	dbURL := storetest.URL(t)
	k := &kitchenOfTwo{t: t, bases: []string{startServe(t, dbURL), startServe(t, dbURL)},
		c: &client{t: t, auth: auth.New([]byte(testSecret), nil), http: &http.Client{Timeout: 20 * time.Second}}}
	admin := k.c.token(auth.Principal{Subject: "admin", Role: auth.RoleAdmin})
	var m, p struct {
		ID string `json:"id"`
	}
	require.Equal(t, 201, k.c.do("POST", k.bases[0]+"/v1/merchants", admin, settings, &m))
	require.Equal(t, 201, k.c.do("POST", k.bases[1]+"/v1/merchants/"+m.ID+"/products", admin, map[string]any{"name": "tea", "price_cents": 100}, &p))
	k.merchantID, k.productID = m.ID, p.ID
	k.merchant = k.c.token(auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: uuid.MustParse(m.ID)})
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	k.pool = pool
	return k
}

// rush pays total orders through both processes from eight customers, each
// placement answered 201, while accepted orders are completed at random
// through both processes; it returns when every order is completed.
// customer names worker w's principal, quantity the cups of an order.
func (k *kitchenOfTwo) rush(total int64, customer func(w int) auth.Principal, quantity func() int) {
	t := k.t
	var next, completed atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			token := k.c.token(customer(w))
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				status := k.c.do("POST", k.bases[int(i)%2]+"/v1/orders", token,
					map[string]any{"merchant_id": k.merchantID, "items": []map[string]any{{"product_id": k.productID, "quantity": quantity()}}, "payment_ref": "pay"}, nil)
				if status != 201 {
					t.Errorf("placement answered %d", status)
				}
			}
		}()
	}
	done := make(chan struct{})
	var cg sync.WaitGroup
	for _, base := range k.bases {
		cg.Add(1)
		go func() {
			defer cg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				var list struct {
					Orders []struct {
						ID string `json:"id"`
					} `json:"orders"`
				}
				if k.c.do("GET", base+"/v1/merchants/"+k.merchantID+"/orders?status=accepted&limit=5", k.merchant, nil, &list) != 200 || len(list.Orders) == 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				o := list.Orders[rand.IntN(len(list.Orders))]
				if k.c.do("POST", base+"/v1/orders/"+o.ID+"/complete", k.merchant, nil, nil) == 200 {
					completed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(3 * time.Minute)
	for completed.Load() < total && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	close(done)
	cg.Wait()
	require.EqualValues(t, total, completed.Load())
}

// idleAndClean asserts the merchant's load is back to zero and every named
// audit view is empty.
func (k *kitchenOfTwo) idleAndClean(views ...string) {
	ctx := context.Background()
	var active, queued int
	require.NoError(k.t, k.pool.QueryRow(ctx, `SELECT active, queued FROM merchants WHERE id = $1`, k.merchantID).Scan(&active, &queued))
	require.Zero(k.t, active)
	require.Zero(k.t, queued)
	for _, view := range views {
		var n int
		require.NoError(k.t, k.pool.QueryRow(ctx, `SELECT count(*) FROM audit.`+view).Scan(&n))
		require.Zero(k.t, n, view)
	}
}

// TestTwoProcessesKeepAdmissionSafe pays 2,000 orders to a capacity-5
// merchant through two orderd processes on one database while accepted
// orders are completed at random through both: every recorded decision has
// active <= capacity, and acceptance follows queue order.
func TestTwoProcessesKeepAdmissionSafe(t *testing.T) {
	t.Parallel()
	k := newKitchenOfTwo(t, map[string]any{"name": "busy", "capacity": 5})
	const total = 2000
	k.rush(total, func(w int) auth.Principal {
		return auth.Principal{Subject: fmt.Sprintf("c%d", w), Role: auth.RoleCustomer}
	}, func() int { return 1 })

	ctx := context.Background()
	var over, accepted int
	require.NoError(t, k.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE (data->>'active_after')::int > (data->>'capacity')::int), count(*)
		FROM events WHERE type = 'order.accepted'`).Scan(&over, &accepted))
	require.Zero(t, over)
	require.Equal(t, total, accepted)
	var outOfOrder int
	require.NoError(t, k.pool.QueryRow(ctx, `
		SELECT count(*) FROM (
			SELECT (q.data->>'seq')::bigint AS seq, lag((q.data->>'seq')::bigint) OVER (ORDER BY a.global_position) AS prev
			FROM events a JOIN events q ON q.stream_id = a.stream_id AND q.type = 'order.queued'
			WHERE a.type = 'order.accepted') x
		WHERE seq < prev`).Scan(&outOfOrder))
	require.Zero(t, outOfOrder, "queued orders admitted out of queue order")
	// The two processes' clocks and batches agree: acceptances in admission
	// order never go back in time, nor does any order's own history, and no
	// order was admitted past a queued one.
	k.idleAndClean("accepted_at_backwards", "order_clock_backwards", "fifo_violations")
}

// TestTwoProcessesKeepWeightedAdmissionSafe is the test above for a
// merchant counting cups: capacity 10, orders of 1-6 cups, one customer in
// five placing into the priority lane, through two orderd processes. No
// recorded admission leaves more than 10 cups active (but for an order
// alone), every audit of lanes and loads is clean, and the load returns to
// zero.
func TestTwoProcessesKeepWeightedAdmissionSafe(t *testing.T) {
	t.Parallel()
	k := newKitchenOfTwo(t, map[string]any{"name": "cups", "capacity": 10, "capacity_unit": "items"})
	const total = 1000
	k.rush(total, func(w int) auth.Principal {
		customer := auth.Principal{Subject: fmt.Sprintf("c%d", w), Role: auth.RoleCustomer}
		if w%5 == 0 {
			customer.Lane = domain.LanePriority
		}
		return customer
	}, func() int { return 1 + rand.IntN(6) })

	ctx := context.Background()
	var over, accepted, priority int
	require.NoError(t, k.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE (data->>'active_after')::int > (data->>'capacity')::int
			AND (data->>'active_after')::int <> coalesce((data->>'load')::int, 1)), count(*)
		FROM events WHERE type = 'order.accepted'`).Scan(&over, &accepted))
	require.Zero(t, over, "admissions over capacity with company")
	require.Equal(t, total, accepted)
	require.NoError(t, k.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE merchant_id = $1 AND lane = 'priority'`, k.merchantID).Scan(&priority))
	require.Positive(t, priority)
	var queuedEver int
	require.NoError(t, k.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = 'order.queued'`).Scan(&queuedEver))
	require.Greater(t, queuedEver, total/10, "the line was busy: admissions came from the queue")
	k.idleAndClean("fifo_violations", "merchant_load_drift", "merchant_lane_drift", "decisions_over_capacity",
		"duplicate_pickup_codes", "accepted_at_backwards", "order_clock_backwards")
}

// TestStartDoesNotMistakeAnotherServerForItsOwn: a test's orderd asked for an
// address that another process took first exits, while the other answers
// /readyz; the test must see the exit, not talk to the other (CI once sent a
// fault test's requests to another test's server, which refused its tokens).
func TestStartDoesNotMistakeAnotherServerForItsOwn(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(other.Close)
	bin, err := buildOnce()
	require.NoError(t, err)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+storetest.URL(t), "ORDERD_ADDR="+other.Listener.Addr().String(),
		"ORDERD_OPS_ADDR=127.0.0.1:0", "ORDERD_JWT_SECRET="+testSecret)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	_, _, err = awaitServing(logs, 0, exited, 30*time.Second)
	require.Error(t, err, "the other server was taken for orderd")
	require.Contains(t, logs.String(), "the address is in use by another process")
}
