// Package ws pushes live order and merchant updates over websockets. Its
// source is the committed event log, read in commit-safe order by one tailer
// per process, so a change made through any orderd process reaches clients
// connected to every one of them.
package ws

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// Options tune the hub.
type Options struct {
	// AllowedOrigins lists origins allowed to connect from a browser; empty
	// means same-origin only.
	AllowedOrigins []string
	// Poll is how often the tailer reads the log.
	Poll   time.Duration
	Logger *slog.Logger
}

const (
	maxMessageBytes  = 4 << 10
	sendBuffer       = 64
	writeWait        = 10 * time.Second
	pongWait         = 60 * time.Second
	pingEvery        = 25 * time.Second
	maxSubscriptions = 100
	logBatch         = 2000
	defaultPoll      = 100 * time.Millisecond
)

// Hub owns the connections, their subscriptions and the tailer.
type Hub struct {
	store    *store.Store
	auth     *auth.Authenticator
	opts     Options
	log      *slog.Logger
	upgrader websocket.Upgrader

	mu      sync.Mutex
	conns   map[*conn]struct{}
	byOrder map[uuid.UUID]map[*conn]struct{}
	byMerch map[uuid.UUID]map[*conn]struct{}
	closing bool
	wg      sync.WaitGroup
}

// New builds a hub; call Run to start its tailer.
func New(st *store.Store, a *auth.Authenticator, opts Options) *Hub {
	if opts.Poll <= 0 {
		opts.Poll = defaultPoll
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Hub{
		store: st, auth: a, opts: opts, log: opts.Logger,
		conns: map[*conn]struct{}{}, byOrder: map[uuid.UUID]map[*conn]struct{}{}, byMerch: map[uuid.UUID]map[*conn]struct{}{},
	}
	h.upgrader = websocket.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 4096, CheckOrigin: h.checkOrigin}
	return h
}

func (h *Hub) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser
	}
	for _, allowed := range h.opts.AllowedOrigins {
		if strings.EqualFold(origin, allowed) {
			return true
		}
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// ServeHTTP upgrades an authenticated request to a websocket.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := h.auth.FromRequest(r)
	if err != nil {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"type":"https://orderd.dev/problems/unauthorized","title":"Authentication is required","status":401,"detail":"a valid bearer token is required","code":"unauthorized"}`))
		return
	}
	ws, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered already
	}
	c := &conn{hub: h, ws: ws, principal: p, send: make(chan []byte, sendBuffer), done: make(chan struct{}),
		orders: map[uuid.UUID]sent{}, merchants: map[uuid.UUID]struct{}{}}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "shutting down"), time.Now().Add(time.Second))
		ws.Close()
		return
	}
	h.conns[c] = struct{}{}
	h.wg.Add(2)
	h.mu.Unlock()
	go c.writeLoop()
	go c.readLoop()
}

// Shutdown closes every connection with a close frame.
func (h *Hub) Shutdown(ctx context.Context) {
	h.mu.Lock()
	h.closing = true
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.close(websocket.CloseGoingAway, "server shutting down")
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (h *Hub) remove(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.conns, c)
	for id := range c.orders {
		delete(h.byOrder[id], c)
		if len(h.byOrder[id]) == 0 {
			delete(h.byOrder, id)
		}
	}
	for id := range c.merchants {
		delete(h.byMerch[id], c)
		if len(h.byMerch[id]) == 0 {
			delete(h.byMerch, id)
		}
	}
}

// Run tails the committed log until ctx ends and fans each batch out.
func (h *Hub) Run(ctx context.Context) {
	var cp store.Checkpoint
	for {
		head, err := h.store.LogHead(ctx)
		if err == nil {
			cp = head
			break
		}
		if !sleep(ctx, time.Second) {
			return
		}
	}
	failed := false
	for {
		events, next, err := h.store.ReadLog(ctx, store.ReadLogParams{After: cp, Limit: logBatch})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failed = true
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		if failed {
			// Notifications may have been missed while the database was
			// away: every client gets its current state again.
			failed = false
			h.resync(ctx)
		}
		cp = next
		if len(events) > 0 {
			h.publish(ctx, events)
		}
		if len(events) < logBatch && !sleep(ctx, h.opts.Poll) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// publish computes, for one batch of events, the new state of every watched
// order and merchant touched: one ranking query per batch for all touched
// merchants, never one query per watcher.
func (h *Hub) publish(ctx context.Context, events []store.StoredEvent) {
	orderIDs := map[uuid.UUID]bool{}
	merchantIDs := map[uuid.UUID]bool{}
	for _, e := range events {
		switch e.StreamType {
		case store.StreamOrder:
			orderIDs[e.StreamID] = true
		case store.StreamMerchant:
			merchantIDs[e.StreamID] = true
		}
	}
	ids := keys(orderIDs)
	owners, err := h.store.OrderMerchants(ctx, ids)
	if err != nil {
		h.log.Warn("live updates: order merchants", "err", err)
		return
	}
	for _, m := range owners {
		merchantIDs[m] = true
	}
	h.pushState(ctx, h.watchedOrders(ids), keys(merchantIDs))
}

// resync sends every subscriber its current state.
func (h *Hub) resync(ctx context.Context) {
	h.mu.Lock()
	orders := make([]uuid.UUID, 0, len(h.byOrder))
	for id := range h.byOrder {
		orders = append(orders, id)
	}
	merchants := make([]uuid.UUID, 0, len(h.byMerch))
	for id := range h.byMerch {
		merchants = append(merchants, id)
	}
	h.mu.Unlock()
	owners, err := h.store.OrderMerchants(ctx, orders)
	if err != nil {
		return
	}
	seen := map[uuid.UUID]bool{}
	for _, m := range merchants {
		seen[m] = true
	}
	for _, m := range owners {
		if !seen[m] {
			seen[m] = true
			merchants = append(merchants, m)
		}
	}
	h.pushState(ctx, orders, merchants)
}

func (h *Hub) watchedOrders(ids []uuid.UUID) []uuid.UUID {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []uuid.UUID
	for _, id := range ids {
		if len(h.byOrder[id]) > 0 {
			out = append(out, id)
		}
	}
	return out
}

func (h *Hub) pushState(ctx context.Context, orderIDs, merchantIDs []uuid.UUID) {
	views := map[uuid.UUID]store.Order{}
	if len(merchantIDs) > 0 {
		ranked, err := h.store.QueueRankings(ctx, merchantIDs)
		if err != nil {
			h.log.Warn("live updates: queue rankings", "err", err)
			return
		}
		for _, o := range ranked {
			views[o.ID] = o
		}
	}
	var missing []uuid.UUID
	for _, id := range orderIDs {
		if _, ok := views[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		live, err := h.store.LiveOrders(ctx, missing)
		if err != nil {
			h.log.Warn("live updates: orders", "err", err)
			return
		}
		for _, o := range live {
			views[o.ID] = o
		}
	}
	var loads map[uuid.UUID]store.Load
	if h.anyMerchantWatcher(merchantIDs) {
		var err error
		if loads, err = h.store.MerchantLoads(ctx, merchantIDs); err != nil {
			h.log.Warn("live updates: loads", "err", err)
			return
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, view := range views {
		for c := range h.byOrder[id] {
			c.offerOrder(view)
		}
	}
	for id, load := range loads {
		msg, _ := json.Marshal(loadMessage(id, load))
		for c := range h.byMerch[id] {
			c.offer(msg)
		}
	}
}

func (h *Hub) anyMerchantWatcher(ids []uuid.UUID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range ids {
		if len(h.byMerch[id]) > 0 {
			return true
		}
	}
	return false
}

func keys(m map[uuid.UUID]bool) []uuid.UUID {
	out := make([]uuid.UUID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

type orderMessage struct {
	Type  string      `json:"type"`
	Order store.Order `json:"order"`
}

type merchantLoadMessage struct {
	Type       string    `json:"type"`
	MerchantID uuid.UUID `json:"merchant_id"`
	Capacity   int       `json:"capacity"`
	Active     int       `json:"active"`
	Queued     int       `json:"queued"`
}

func loadMessage(id uuid.UUID, l store.Load) merchantLoadMessage {
	return merchantLoadMessage{Type: "merchant_load", MerchantID: id, Capacity: l.Capacity, Active: l.Active, Queued: l.Queued}
}

type errorMessage struct {
	Type   string      `json:"type"`
	Code   domain.Code `json:"code"`
	Detail string      `json:"detail"`
}
