package ws_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/storetest"
	"github.com/orderd/orderd/ws"
)

var authn = auth.New([]byte("ws-test-secret"), nil)

func TestMain(m *testing.M) {
	if url := os.Getenv(idleClientsEnv); url != "" {
		if err := runIdleClients(url); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"))
}

// deliver bounds how long a change may take to reach a client in these
// tests. The contract is 1 s, and the tailer polls every 20 ms here; the
// slack is for the shared test cluster, where a long transaction in any
// other test database holds back the snapshot xmin that the log reader
// waits for.
const deliver = 5 * time.Second

type bundle struct {
	pool  *pgxpool.Pool
	store *store.Store
}

// setup makes a store on a new database, configured further by configure.
func setup(t *testing.T, configure ...func(*store.Config)) *bundle {
	t.Helper()
	pool := storetest.Pool(t)
	ins, err := jobs.NewInserter(pool)
	require.NoError(t, err)
	cfg := store.Config{Pool: pool, Jobs: ins}
	for _, c := range configure {
		c(&cfg)
	}
	st := store.New(cfg)
	return &bundle{pool: pool, store: st}
}

// startHub runs a hub (one "instance") on b's database and serves it.
func startHub(t *testing.T, b *bundle) string {
	t.Helper()
	return startHubWith(t, b, ws.Options{Poll: 20 * time.Millisecond})
}

func startHubWith(t *testing.T, b *bundle, opts ws.Options) string {
	t.Helper()
	_, url := serveHub(t, b, opts)
	return url
}

func serveHub(t *testing.T, b *bundle, opts ws.Options) (*ws.Hub, string) {
	t.Helper()
	h := ws.New(b.store, authn, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	hinted := make(chan struct{})
	go func() { defer close(hinted); b.store.RunLogHints(ctx) }()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		h.Shutdown(sctx)
		srv.Close()
		cancel()
		<-done
		<-hinted
	})
	return h, "ws" + strings.TrimPrefix(srv.URL, "http")
}

func token(t *testing.T, p auth.Principal) string {
	tok, err := authn.Issue(p, time.Hour)
	require.NoError(t, err)
	return tok
}

func dial(t *testing.T, url string, p auth.Principal) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url+"/?access_token="+token(t, p), nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

type message struct {
	Type           string           `json:"type"`
	Order          *store.OrderView `json:"order"`
	MerchantID     string           `json:"merchant_id"`
	Capacity       int              `json:"capacity"`
	Active         int              `json:"active"`
	Queued         int              `json:"queued"`
	Open           bool             `json:"open"`
	Busy           bool             `json:"busy"`
	Paused         bool             `json:"paused"`
	PauseMode      *string          `json:"pause_mode"`
	PausedUntil    *time.Time       `json:"paused_until"`
	EstWaitSeconds int              `json:"est_wait_seconds"`
	Code           string           `json:"code"`
	Detail         string           `json:"detail"`
}

func read(t *testing.T, c *websocket.Conn, within time.Duration) message {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(within)))
	var m message
	_, data, err := c.ReadMessage()
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

func send(t *testing.T, c *websocket.Conn, v any) {
	t.Helper()
	require.NoError(t, c.WriteJSON(v))
}

type shop struct {
	merchant, product uuid.UUID
}

func newShop(t *testing.T, st *store.Store, capacity int) shop {
	ctx := context.Background()
	m, err := st.CreateMerchant(ctx, domain.MerchantSettings{Name: "ws", Capacity: capacity, PrepSeconds: 60,
		MaxQueueWaitSeconds: 1800, PaymentTimeoutSeconds: 900}, store.Meta{})
	require.NoError(t, err)
	p, err := st.CreateProduct(ctx, store.CreateProductParams{MerchantID: m.ID, Name: "tea", PriceCents: 100})
	require.NoError(t, err)
	return shop{merchant: m.ID, product: p.ID}
}

func (s shop) place(t *testing.T, st *store.Store, customer string) *store.OrderView {
	res, err := st.PlaceOrder(context.Background(), store.PlaceRequest{MerchantID: s.merchant, CustomerID: customer, PaymentRef: "p",
		Lines: []domain.LineRequest{{ProductID: s.product, Quantity: 1}}, IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")})
	require.NoError(t, err)
	return res.Order
}

var admin = domain.Party{Actor: domain.ActorAdmin}

// TestPositionCountsDownToAccepted watches a queued order while the orders
// ahead complete: positions only fall, versions never do, and the final
// state arrives.
func TestPositionCountsDownToAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	s := newShop(t, b.store, 1)
	var ahead []*store.OrderView
	for i := range 5 {
		ahead = append(ahead, s.place(t, b.store, fmt.Sprintf("c%d", i)))
	}
	mine := s.place(t, b.store, "alice")
	require.Equal(t, 5, *mine.QueuePosition)
	c := dial(t, url, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	send(t, c, map[string]string{"op": "subscribe", "order_id": mine.ID.String()})
	first := read(t, c, 5*time.Second)
	require.Equal(t, "order", first.Type)
	require.Equal(t, 5, *first.Order.QueuePosition)

	go func() {
		for _, o := range ahead {
			time.Sleep(30 * time.Millisecond)
			_, _ = b.store.CompleteOrder(context.Background(), o.ID, admin, "")
		}
	}()
	lastPos, lastVersion := 5, first.Order.Version
	for {
		m := read(t, c, 5*time.Second)
		require.Equal(t, "order", m.Type)
		require.GreaterOrEqual(t, m.Order.Version, lastVersion, "version never decreases")
		lastVersion = m.Order.Version
		if m.Order.Status == domain.StatusAccepted {
			break
		}
		require.Less(t, *m.Order.QueuePosition, lastPos, "position only moves toward 1")
		lastPos = *m.Order.QueuePosition
	}
}

func TestSubscriptionRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	s := newShop(t, b.store, 1)
	o := s.place(t, b.store, "alice")

	bob := dial(t, url, auth.Principal{Subject: "bob", Role: auth.RoleCustomer})
	send(t, bob, map[string]string{"op": "subscribe", "order_id": o.ID.String()})
	require.Equal(t, message{Type: "error", Code: "not_found", Detail: "order not found"}, read(t, bob, 5*time.Second))
	send(t, bob, map[string]string{"op": "subscribe", "merchant_id": s.merchant.String()})
	require.Equal(t, "forbidden", read(t, bob, 5*time.Second).Code)

	shopOwner := dial(t, url, auth.Principal{Subject: "shop", Role: auth.RoleMerchant, MerchantID: s.merchant})
	send(t, shopOwner, map[string]string{"op": "subscribe", "merchant_id": s.merchant.String()})
	load := read(t, shopOwner, 5*time.Second)
	require.Equal(t, "merchant_load", load.Type)
	require.Equal(t, 1, load.Active)
	send(t, shopOwner, map[string]string{"op": "subscribe", "order_id": o.ID.String()})
	require.Equal(t, "order", read(t, shopOwner, 5*time.Second).Type)

	// A new order changes the load: the merchant hears it.
	s.place(t, b.store, "carol")
	for {
		m := read(t, shopOwner, 5*time.Second)
		if m.Type == "merchant_load" && m.Queued == 1 {
			break
		}
	}

	resp, err := http.Get(strings.Replace(url, "ws", "http", 1))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestBadMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	c := dial(t, url, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	require.NoError(t, c.WriteMessage(websocket.TextMessage, []byte("not json")))
	require.Equal(t, "malformed_json", read(t, c, 5*time.Second).Code)
	send(t, c, map[string]string{"op": "dance"})
	require.Equal(t, "validation_failed", read(t, c, 5*time.Second).Code)
	send(t, c, map[string]string{"op": "subscribe", "order_id": "nope"})
	require.Equal(t, "not_found", read(t, c, 5*time.Second).Code)
	send(t, c, map[string]string{"op": "subscribe"})
	require.Equal(t, "validation_failed", read(t, c, 5*time.Second).Code)

	// The server stops reading at 4 KiB and closes; the client may see the
	// close frame or a reset, but never a hung connection.
	_ = c.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 1<<20)))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, _, err := c.ReadMessage()
	require.Error(t, err)
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		require.Equal(t, websocket.CloseMessageTooBig, ce.Code)
	}

	// The hub still serves others.
	other := dial(t, url, auth.Principal{Subject: "bob", Role: auth.RoleCustomer})
	send(t, other, map[string]string{"op": "dance"})
	require.Equal(t, "validation_failed", read(t, other, 5*time.Second).Code)
}

// TestTwoInstancesBothDeliver runs two hubs on one database, as two orderd
// processes would, and changes an order through the store: both push it.
func TestTwoInstancesBothDeliver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	urls := []string{startHub(t, b), startHub(t, b)}
	s := newShop(t, b.store, 1)
	first := s.place(t, b.store, "a")
	second := s.place(t, b.store, "alice")
	var conns []*websocket.Conn
	for _, u := range urls {
		c := dial(t, u, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
		send(t, c, map[string]string{"op": "subscribe", "order_id": second.ID.String()})
		require.Equal(t, domain.StatusQueued, read(t, c, 5*time.Second).Order.Status)
		conns = append(conns, c)
	}
	_, err := b.store.CompleteOrder(context.Background(), first.ID, admin, "")
	require.NoError(t, err)
	for _, c := range conns {
		m := read(t, c, deliver)
		require.Equal(t, domain.StatusAccepted, m.Order.Status)
	}
}

// TestHintsWakeEveryInstance turns polling off (an hour): a change
// committed through one instance's store reaches clients of both only
// through the NOTIFY hint that its commit sends.
func TestHintsWakeEveryInstance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := &bundle{pool: b.pool, store: store.New(store.Config{Pool: b.pool, Jobs: b.store.Config().Jobs})}
	noPolling := ws.Options{Poll: time.Hour}
	urls := []string{startHubWith(t, b, noPolling), startHubWith(t, other, noPolling)}
	s := newShop(t, b.store, 1)
	ahead := []*store.OrderView{s.place(t, b.store, "a"), s.place(t, b.store, "b"), s.place(t, b.store, "c")}
	mine := s.place(t, b.store, "alice")
	var conns []*websocket.Conn
	for _, u := range urls {
		c := dial(t, u, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
		send(t, c, map[string]string{"op": "subscribe", "order_id": mine.ID.String()})
		require.Equal(t, 3, *read(t, c, 5*time.Second).Order.QueuePosition)
		conns = append(conns, c)
	}
	// Each step waits for the previous one, so only the first could be
	// carried by a hub's start-up read rather than by a hint.
	for i, o := range ahead {
		_, err := b.store.CompleteOrder(context.Background(), o.ID, admin, "")
		require.NoError(t, err)
		for _, c := range conns {
			m := read(t, c, deliver)
			if i < 2 {
				require.Equal(t, 2-i, *m.Order.QueuePosition)
			} else {
				require.Equal(t, domain.StatusAccepted, m.Order.Status)
			}
		}
	}
}

// TestSlowClientIsDropped floods the hub from a client that never reads
// the answers: it is cut off, and a client on the same hub keeps getting its
// updates meanwhile.
func TestSlowClientIsDropped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHubWith(t, b, ws.Options{Poll: 20 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	s := newShop(t, b.store, 0)
	o := s.place(t, b.store, "alice")
	fast := dial(t, url, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	send(t, fast, map[string]string{"op": "subscribe", "order_id": o.ID.String()})
	require.Equal(t, "order", read(t, fast, deliver).Type)

	slow := dial(t, url, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	cut := make(chan error, 1)
	go func() {
		bad := []byte(`{"op":"dance","order_id":"` + strings.Repeat("x", 3000) + `"}`)
		for {
			_ = slow.SetWriteDeadline(time.Now().Add(deliver))
			if err := slow.WriteMessage(websocket.TextMessage, bad); err != nil {
				cut <- err
				return
			}
		}
	}()
	one := 1
	_, err := b.store.UpdateMerchant(context.Background(), s.merchant, store.MerchantPatch{Capacity: &one}, store.Meta{})
	require.NoError(t, err)
	require.Equal(t, domain.StatusAccepted, read(t, fast, deliver).Order.Status)
	select {
	case <-cut:
	case <-time.After(20 * time.Second):
		t.Fatal("a client that never reads was not dropped")
	}
}

// TestOrderingUnderConcurrentChanges watches every order of a long line
// while many goroutines complete, cancel and place orders of the same
// merchant: each client sees its position strictly fall and its version
// never fall, and ends with the order's final state.
func TestOrderingUnderConcurrentChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	s := newShop(t, b.store, 2)
	const n = 40
	orders := make([]*store.OrderView, n)
	for i := range orders {
		orders[i] = s.place(t, b.store, fmt.Sprintf("c%d", i))
	}
	conns := make([]*websocket.Conn, n)
	for i, o := range orders {
		conns[i] = dial(t, url, auth.Principal{Subject: o.CustomerID, Role: auth.RoleCustomer})
		send(t, conns[i], map[string]string{"op": "subscribe", "order_id": o.ID.String()})
	}

	// Workers complete whatever is accepted until nothing is queued; others
	// keep placing orders at the back of the line.
	ctx := context.Background()
	done := make(chan struct{})
	stop := sync.OnceFunc(func() { close(done) })
	t.Cleanup(stop)
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				if w == 3 {
					_, err := b.store.PlaceOrder(ctx, store.PlaceRequest{MerchantID: s.merchant, CustomerID: "late", PaymentRef: "p",
						Lines: []domain.LineRequest{{ProductID: s.product, Quantity: 1}}, IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")})
					if err != nil {
						errs <- err
						return
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				accepted, err := b.store.ListMerchantOrders(ctx, s.merchant, domain.StatusAccepted, 10)
				if err != nil {
					errs <- err
					return
				}
				for _, o := range accepted {
					if _, err := b.store.CompleteOrder(ctx, o.ID, admin, ""); err != nil && domain.ErrorCode(err) != domain.CodeInvalidTransition {
						errs <- err
						return
					}
				}
			}
		}()
	}
	for i, c := range conns {
		lastPos, lastVersion := 1<<30, 0
		for {
			m := read(t, c, 3*deliver)
			require.Equal(t, "order", m.Type)
			require.Equal(t, orders[i].ID, m.Order.ID)
			require.GreaterOrEqual(t, m.Order.Version, lastVersion, "version never decreases")
			lastVersion = m.Order.Version
			if m.Order.Status != domain.StatusQueued {
				break
			}
			require.Less(t, *m.Order.QueuePosition, lastPos, "position only moves toward 1")
			lastPos = *m.Order.QueuePosition
		}
	}
	stop()
	for range 4 {
		require.NoError(t, <-errs)
	}
}

// TestDatabaseConnectionsLost cuts every connection of the test database
// while a client watches; a change committed after that still arrives.
func TestDatabaseConnectionsLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	s := newShop(t, b.store, 1)
	first := s.place(t, b.store, "a")
	mine := s.place(t, b.store, "alice")
	c := dial(t, url, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	send(t, c, map[string]string{"op": "subscribe", "order_id": mine.ID.String()})
	require.Equal(t, domain.StatusQueued, read(t, c, deliver).Order.Status)

	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := b.store.CompleteOrder(ctx, first.ID, admin, "")
		return err == nil
	}, deliver, 50*time.Millisecond)
	require.Equal(t, domain.StatusAccepted, read(t, c, deliver).Order.Status)
}

// TestEveryWatcherHearsTheEndOfABurst completes the orders ahead as fast as
// the store allows while many clients watch the line: moves are coalesced
// and held back, and every watcher must still hear its own order accepted.
// Silence between messages is allowed (a watcher far back hears of few
// moves), so the bound is on the whole burst.
func TestEveryWatcherHearsTheEndOfABurst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	s := newShop(t, b.store, 1)
	first := s.place(t, b.store, "head")
	const watchers = 100
	var mine []*store.OrderView
	for i := range watchers {
		mine = append(mine, s.place(t, b.store, fmt.Sprintf("w%d", i)))
	}
	conns := make([]*websocket.Conn, watchers)
	for i, o := range mine {
		conns[i] = dial(t, url, auth.Principal{Subject: fmt.Sprintf("w%d", i), Role: auth.RoleCustomer})
		send(t, conns[i], map[string]string{"op": "subscribe", "order_id": o.ID.String()})
		require.Equal(t, domain.StatusQueued, read(t, conns[i], 5*time.Second).Order.Status)
	}
	heard := make(chan error, watchers)
	end := time.Now().Add(watchers * deliver / 10)
	for i, o := range mine {
		c := conns[i]
		go func() {
			_ = c.SetReadDeadline(end)
			for {
				var m message
				if err := c.ReadJSON(&m); err != nil {
					heard <- fmt.Errorf("order %s: %w", o.ID, err)
					return
				}
				if m.Order != nil && m.Order.Status != domain.StatusQueued {
					heard <- nil
					return
				}
			}
		}()
	}
	// Each completion admits the next order, whose watcher must hear it;
	// the others only move up the line.
	ahead := append([]*store.OrderView{first}, mine[:watchers-1]...)
	for _, o := range ahead {
		_, err := b.store.CompleteOrder(context.Background(), o.ID, admin, "")
		require.NoError(t, err)
	}
	for range watchers {
		require.NoError(t, <-heard)
	}
}

// TestPositionGrowsOnlyWhenAPriorityOrderJoinsAhead watches a normal order
// while the merchant moves orders behind it into the priority lane, then
// completes what is ahead: each prioritization moves it back by one (the
// one growth the contract allows), and otherwise it only moves toward 1.
// Before the line's sequence number travelled with positions, the hub kept
// the old, smaller position and the client never heard it grew.
func TestPositionGrowsOnlyWhenAPriorityOrderJoinsAhead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	s := newShop(t, b.store, 1)
	first := s.place(t, b.store, "c0")
	ahead := s.place(t, b.store, "c1")
	mine := s.place(t, b.store, "alice")
	var behind []*store.OrderView
	for i := range 2 {
		behind = append(behind, s.place(t, b.store, fmt.Sprintf("b%d", i)))
	}
	require.Equal(t, 2, *mine.QueuePosition)
	c := dial(t, url, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	send(t, c, map[string]string{"op": "subscribe", "order_id": mine.ID.String()})
	require.Equal(t, 2, *read(t, c, 5*time.Second).Order.QueuePosition)

	shopOwner := domain.Party{Actor: domain.ActorMerchant, MerchantID: s.merchant}
	want := 2
	for _, o := range behind {
		_, err := b.store.PrioritizeOrder(context.Background(), o.ID, "staff", shopOwner, "")
		require.NoError(t, err)
		want++
		m := read(t, c, 5*time.Second)
		require.Equal(t, want, *m.Order.QueuePosition, "a priority order joined ahead")
	}
	for _, o := range []*store.OrderView{first, behind[0], behind[1], ahead} {
		_, err := b.store.CompleteOrder(context.Background(), o.ID, admin, "")
		require.NoError(t, err)
	}
	last := want
	for {
		m := read(t, c, 5*time.Second)
		if m.Order.Status == domain.StatusAccepted {
			return
		}
		require.LessOrEqual(t, *m.Order.QueuePosition, last, "no priority order joined: the position never grows")
		last = *m.Order.QueuePosition
	}
}

// TestCustomerWatchesMerchantStatus: any customer may watch a merchant's
// public status, and hears when it gets busy, its line grows, it pauses
// (with the mode and end) and resumes; a merchant that does not exist is
// not found.
func TestCustomerWatchesMerchantStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	s := newShop(t, b.store, 1)
	c := dial(t, url, auth.Principal{Subject: "bob", Role: auth.RoleCustomer})
	send(t, c, map[string]string{"op": "subscribe", "merchant_status": uuid.NewString()})
	require.Equal(t, "not_found", read(t, c, deliver).Code)

	send(t, c, map[string]string{"op": "subscribe", "merchant_status": s.merchant.String()})
	first := read(t, c, deliver)
	require.Equal(t, message{Type: "merchant_status", MerchantID: s.merchant.String(), Open: true}, first)

	// until reads the status messages until one satisfies ok.
	until := func(what string, ok func(message) bool) message {
		t.Helper()
		for {
			m := read(t, c, deliver)
			require.Equal(t, "merchant_status", m.Type, what)
			if ok(m) {
				return m
			}
		}
	}
	s.place(t, b.store, "a")
	until("busy", func(m message) bool { return m.Busy })
	s.place(t, b.store, "b")
	m := until("one in line", func(m message) bool { return m.Queued == 1 })
	require.True(t, m.Busy)
	require.Positive(t, m.EstWaitSeconds)

	ctx := context.Background()
	forSeconds := 600
	_, err := b.store.PauseMerchant(ctx, s.merchant, domain.PauseRequest{Mode: domain.PauseRefuse, ForSeconds: &forSeconds}, store.Meta{})
	require.NoError(t, err)
	m = until("paused", func(m message) bool { return m.Paused })
	require.False(t, m.Open, "a merchant paused to refuse takes no orders")
	require.Equal(t, "refuse", *m.PauseMode)
	require.WithinDuration(t, time.Now().Add(10*time.Minute), *m.PausedUntil, time.Minute)

	_, err = b.store.ResumeMerchant(ctx, s.merchant, store.Meta{})
	require.NoError(t, err)
	m = until("resumed", func(m message) bool { return !m.Paused })
	require.True(t, m.Open)
	require.Nil(t, m.PauseMode)
	require.Nil(t, m.PausedUntil)
}

// TestAnIdleConnectionHoldsNoGoroutine: a connection that was answered and
// waits holds no goroutine: its writer ran for the answer and ended, and
// its socket waits in the poller. Before the poller, each kept its reader.
// Not parallel, so that no other test's goroutines are counted.
func TestAnIdleConnectionHoldsNoGoroutine(t *testing.T) {
	b := setup(t)
	h, url := serveHub(t, b, ws.Options{Poll: 20 * time.Millisecond})
	s := newShop(t, b.store, 1)
	o := s.place(t, b.store, "alice")
	settled := func() int {
		// Let goroutines that are ending end: the count stops changing.
		last := -1
		for n := runtime.NumGoroutine(); n != last; n = runtime.NumGoroutine() {
			last = n
			time.Sleep(100 * time.Millisecond)
		}
		return last
	}
	before := settled()
	const conns = 50
	for range conns {
		c := dial(t, url, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
		send(t, c, map[string]string{"op": "subscribe", "order_id": o.ID.String()})
		require.Equal(t, "order", read(t, c, deliver).Type)
	}
	require.Equal(t, conns, h.Connections())
	require.InDelta(t, 0, settled()-before, 3, "no goroutine per idle connection")
}

// TestAHeldMoveArrivesWhenTheLineStops: one place of forty-one is too
// little to send at once; the line then stops, and the watcher still hears
// its new place once the line settled, settleAfter after its reading.
func TestAHeldMoveArrivesWhenTheLineStops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	s := newShop(t, b.store, 1)
	head := s.place(t, b.store, "head")
	for i := range 40 {
		s.place(t, b.store, fmt.Sprintf("c%d", i))
	}
	mine := s.place(t, b.store, "alice")
	c := dial(t, url, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	subscribed := time.Now()
	send(t, c, map[string]string{"op": "subscribe", "order_id": mine.ID.String()})
	require.Equal(t, 41, *read(t, c, deliver).Order.QueuePosition)

	_, err := b.store.CompleteOrder(context.Background(), head.ID, admin, "")
	require.NoError(t, err)
	m := read(t, c, 5*time.Second+deliver)
	require.Equal(t, 40, *m.Order.QueuePosition)
	require.GreaterOrEqual(t, time.Since(subscribed), 5*time.Second, "held back until the line stood still for five seconds")
}

// TestFramesArriveHoweverTheClientSendsThem writes frames straight to the
// socket: several in one write, a ping between them and inside a
// fragmented message, a frame cut in two with a pause between the halves,
// and a lone ping to a connection left idle. Every message is answered,
// in order, and every ping too.
func TestFramesArriveHoweverTheClientSendsThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	var raw net.Conn
	dialer := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		raw = c
		return c, err
	}}
	c, _, err := dialer.Dial(url+"/?access_token="+token(t, auth.Principal{Subject: "alice", Role: auth.RoleCustomer}), nil)
	require.NoError(t, err)
	defer c.Close()
	pongs := make(chan string, 8)
	c.SetPongHandler(func(p string) error { pongs <- p; return nil })
	// A client's frame: FIN and opcode, then a zero mask, which leaves the
	// payload as it is.
	frame := func(first byte, payload string) []byte {
		return append([]byte{first, 0x80 | byte(len(payload)), 0, 0, 0, 0}, payload...)
	}
	const text, continuation, ping, fin = 0x1, 0x0, 0x9, 0x80
	answers := func(n int) []string {
		t.Helper()
		var codes []string
		for range n {
			codes = append(codes, read(t, c, deliver).Code)
		}
		return codes
	}

	var batch []byte
	batch = append(batch, frame(fin|text, "x")...)
	batch = append(batch, frame(fin|ping, "one")...)
	batch = append(batch, frame(text, `{"op"`)...)
	batch = append(batch, frame(fin|ping, "two")...)
	batch = append(batch, frame(fin|continuation, `:"x"}`)...)
	batch = append(batch, frame(fin|text, `{"op":"subscribe"}`)...)
	_, err = raw.Write(batch)
	require.NoError(t, err)
	require.Equal(t, []string{"malformed_json", "validation_failed", "validation_failed"}, answers(3))
	require.Equal(t, "one", <-pongs)
	require.Equal(t, "two", <-pongs)

	cut := frame(fin|text, "y")
	for _, part := range [][]byte{cut[:3], cut[3:]} {
		time.Sleep(100 * time.Millisecond)
		_, err = raw.Write(part)
		require.NoError(t, err)
	}
	require.Equal(t, []string{"malformed_json"}, answers(1))

	time.Sleep(100 * time.Millisecond)
	_, err = raw.Write(frame(fin|ping, "idle"))
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, _, err = c.ReadMessage() // pongs are handled while reading
	var timeout net.Error
	require.ErrorAs(t, err, &timeout, "nothing else is sent")
	require.Equal(t, "idle", <-pongs)
}

// TestAnUnsubscribedOrderIsNoLongerSent: after an unsubscribe the order's
// changes stop reaching the connection, while its other subscriptions go
// on; unsubscribing twice is no error.
func TestAnUnsubscribedOrderIsNoLongerSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := startHub(t, b)
	s := newShop(t, b.store, 10)
	left, kept := s.place(t, b.store, "alice"), s.place(t, b.store, "alice")
	c := dial(t, url, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	for _, o := range []*store.OrderView{left, kept} {
		send(t, c, map[string]string{"op": "subscribe", "order_id": o.ID.String()})
		require.Equal(t, o.ID, read(t, c, 5*time.Second).Order.ID)
	}
	for range 2 {
		send(t, c, map[string]string{"op": "unsubscribe", "order_id": left.ID.String()})
	}
	// The unsubscribes are done before the changes are committed: the
	// connection handles its messages in order, and the bad one after
	// them is answered only once they are.
	send(t, c, map[string]string{"op": "dance"})
	require.Equal(t, "validation_failed", read(t, c, deliver).Code)

	_, err := b.store.CompleteOrder(context.Background(), left.ID, admin, "")
	require.NoError(t, err)
	_, err = b.store.CompleteOrder(context.Background(), kept.ID, admin, "")
	require.NoError(t, err)
	m := read(t, c, deliver)
	require.Equal(t, "order", m.Type)
	require.Equal(t, kept.ID, m.Order.ID, "the first change sent is the kept order's: the left one's, committed before it, is not sent")
	require.Equal(t, domain.StatusCompleted, m.Order.Status)
}

// TestAClientBehindInReadingIsNotClosed: watchers in a line that keeps
// moving, half of which read nothing for one and a half PongWaits, while one
// goroutine moves the line and another places more orders behind it. A
// ping waits in a client's socket behind the messages it has not read, so
// a client that is only behind cannot answer in time; its host still
// acknowledges what it is sent, and it must not be closed as gone. Every
// watcher hears its order admitted, and no client is closed for its pongs.
// Before, the slow half was closed ("pings were not answered") and never
// heard it.
//
// The hub counts a client as only behind while it is still written to
// within PongWait, so the test keeps every watcher written to: they stand
// among the first places, where every move is sent (a place further back
// is sent only once it changed by a fraction of itself), and the line
// moves both ways, a new order prioritized ahead of them, then the order
// being prepared completed, so that it never reaches them before the slow
// half woke. When the line only shortened, a loaded machine left more
// than PongWait between two messages to a watcher far back, and the hub
// rightly closed a client it was no longer writing to.
func TestAClientBehindInReadingIsNotClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Long enough that a loaded machine writes to every watcher and reads
	// the replies well within it; the slow half is quiet past it even so.
	pongWait := 4 * time.Second
	quiet := pongWait * 3 / 2
	h, url := serveHub(t, b, ws.Options{Poll: 20 * time.Millisecond, PingEvery: pongWait / 4, PongWait: pongWait})
	s := newShop(t, b.store, 1)
	active := s.place(t, b.store, "first")
	var ahead []*store.OrderView
	for i := range 4 {
		ahead = append(ahead, s.place(t, b.store, fmt.Sprintf("ahead%d", i)))
	}
	const watchers = 8
	mine := make([]*store.OrderView, watchers)
	for i := range mine {
		mine[i] = s.place(t, b.store, fmt.Sprintf("w%d", i))
	}
	conns := make([]*websocket.Conn, watchers)
	for i, o := range mine {
		conns[i] = dial(t, url, auth.Principal{Subject: fmt.Sprintf("w%d", i), Role: auth.RoleCustomer})
		send(t, conns[i], map[string]string{"op": "subscribe", "order_id": o.ID.String()})
	}
	for _, c := range conns {
		require.Equal(t, domain.StatusQueued, read(t, c, deliver).Order.Status)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	placing := make(chan struct{})
	go func() {
		defer close(placing)
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = b.store.PlaceOrder(ctx, store.PlaceRequest{MerchantID: s.merchant, CustomerID: fmt.Sprintf("behind%d", i), PaymentRef: "p",
				Lines: []domain.LineRequest{{ProductID: s.product, Quantity: 1}}, IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")})
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var woke sync.WaitGroup
	woke.Add(watchers / 2)
	awake := make(chan struct{})
	go func() { woke.Wait(); close(awake) }()
	// The places the first watcher that reads hears, as they come: a
	// move is written to every watcher of the line in the same ranking.
	places := make(chan int, 1024)
	const watchedPlace = 6 // mine[1]'s, behind the four ahead and mine[0]
	heardPlace := func(place int) error {
		deadline := time.After(deliver)
		for {
			select {
			case p := <-places:
				if p == place {
					return nil
				}
			case <-deadline:
				return fmt.Errorf("no watcher heard place %d", place)
			}
		}
	}
	moving := make(chan error, 1)
	go func() {
		complete := func(o *store.OrderView) error {
			_, err := b.store.CompleteOrder(ctx, o.ID, admin, "")
			return err
		}
		// Until the slow half woke, each round moves every watcher back
		// one place and forward one: the order jumping the line is the next
		// one admitted. Each move is heard before the next is made: a line
		// is read at most every so often, and a reading that saw both
		// would find every watcher where it was and write to none.
		for i := 0; ; i++ {
			select {
			case <-awake:
				for _, o := range append(append([]*store.OrderView{active}, ahead...), mine...) {
					time.Sleep(150 * time.Millisecond)
					if err := complete(o); err != nil {
						moving <- err
						return
					}
				}
				moving <- nil
				return
			default:
			}
			placed, err := b.store.PlaceOrder(ctx, store.PlaceRequest{MerchantID: s.merchant, CustomerID: fmt.Sprintf("jumper%d", i), PaymentRef: "p",
				Lines: []domain.LineRequest{{ProductID: s.product, Quantity: 1}}, IdempotencyKey: uuid.NewString(), RequestHash: []byte("h")})
			if err != nil {
				moving <- err
				return
			}
			jumper := placed.Order
			if _, err := b.store.PrioritizeOrder(ctx, jumper.ID, "", admin, ""); err != nil {
				moving <- err
				return
			}
			if err := heardPlace(watchedPlace + 1); err != nil {
				moving <- err
				return
			}
			if err := complete(active); err != nil {
				moving <- err
				return
			}
			if err := heardPlace(watchedPlace); err != nil {
				moving <- err
				return
			}
			active = jumper
		}
	}()
	heard := make(chan error, watchers)
	for i, c := range conns {
		go func() {
			slow := i%2 == 0
			if slow {
				time.Sleep(quiet)
			}
			_ = c.SetReadDeadline(time.Now().Add(quiet + 3*deliver))
			for {
				var m message
				if err := c.ReadJSON(&m); err != nil {
					heard <- fmt.Errorf("watcher %d: %w", i, err)
					if slow {
						woke.Done()
					}
					return
				}
				if slow {
					slow = false
					woke.Done()
				}
				if i == 1 && m.Order != nil && m.Order.QueuePosition != nil {
					select {
					case places <- *m.Order.QueuePosition:
					default:
					}
				}
				if m.Order != nil && m.Order.Status != domain.StatusQueued {
					// Admitted: nothing more is sent to it, and a client not
					// reading would be closed for its pongs in turn.
					heard <- c.Close()
					return
				}
			}
		}()
	}
	for range watchers {
		require.NoError(t, <-heard)
	}
	require.NoError(t, <-moving)
	stop()
	<-placing
	require.Zero(t, h.Stats.Unanswered.Load())
}

// TestAClientThatAnswersNothingIsClosed: a client that reads nothing, and
// to which nothing more is sent, is gone once PongWait passed without a
// pong; it is closed and counted apart from the clients dropped for
// reading too slowly. Its subscribe is not waited for: on a loaded machine
// PongWait may pass between the dial and the subscribe, and the server has
// then rightly closed the connection already (the send fails with a broken
// pipe, and no order follows).
func TestAClientThatAnswersNothingIsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h, url := serveHub(t, b, ws.Options{Poll: 20 * time.Millisecond, PingEvery: 50 * time.Millisecond, PongWait: 200 * time.Millisecond})
	s := newShop(t, b.store, 1)
	o := s.place(t, b.store, "alice")
	c := dial(t, url, auth.Principal{Subject: "alice", Role: auth.RoleCustomer})
	_ = c.WriteJSON(map[string]string{"op": "subscribe", "order_id": o.ID.String()})
	// The close comes before its count: wait for both.
	require.Eventually(t, func() bool { return h.Connections() == 0 && h.Stats.Unanswered.Load() == 1 }, deliver, 10*time.Millisecond,
		"a client that answers nothing is closed and counted")
	require.Zero(t, h.Stats.Dropped.Load())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(deliver)))
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			break // the pings, then the end
		}
		var m message
		require.NoError(t, json.Unmarshal(data, &m))
		require.Equal(t, "order", m.Type, "the subscription's order, if the subscribe came in time")
	}
}
