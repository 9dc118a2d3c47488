// Package ws pushes live order and merchant updates over websockets. Its
// source is the committed event log, read by one tailer per process as the
// streams changed between two database snapshots, so a change made through
// any orderd process reaches clients connected to every one of them.
package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/store"
)

// Options tune the hub.
type Options struct {
	// AllowedOrigins lists origins allowed to connect from a browser; empty
	// means same-origin only.
	AllowedOrigins []string
	// Poll is how often the tailer reads the log when no hint wakes it;
	// 100 ms by default.
	Poll time.Duration
	// MinInterval spaces the tailer's reads, whatever the hints; 50 ms by
	// default.
	MinInterval time.Duration
	// WriteTimeout bounds one write to a client; a client that cannot take a
	// message in that time is dropped. 10 s by default.
	WriteTimeout time.Duration
	// SubscribesPerSecond limits each connection's subscribe messages (each
	// a database read), in bursts of up to twice that; 0 means no limit.
	SubscribesPerSecond float64
	// OnHint, when set, is called for every hint that some process
	// committed events, besides waking the tailer: others who follow
	// the log's writers share the tailer's listener.
	OnHint func()
	Logger *slog.Logger
}

const (
	maxMessageBytes  = 4 << 10
	maxPendingErrors = 16
	maxSubscriptions = 100
	pongWait         = 60 * time.Second
	pingEvery        = 25 * time.Second
	closeWait        = time.Second
	subscribeTimeout = 5 * time.Second
	defaultPoll      = 100 * time.Millisecond
	defaultMinRead   = 50 * time.Millisecond
	defaultWrite     = 10 * time.Second
	retryAfter       = time.Second
)

// Stats counts what the hub did, for Prometheus.
type Stats struct {
	Sent    atomic.Int64 // data messages written to clients
	Dropped atomic.Int64 // clients cut off for reading too slowly
}

// Hub owns the connections, their subscriptions and the tailer.
type Hub struct {
	Stats Stats

	store    *store.Store
	auth     *auth.Authenticator
	opts     Options
	log      *slog.Logger
	upgrader websocket.Upgrader

	mu      sync.Mutex
	conns   map[*conn]struct{}
	byOrder map[uuid.UUID]map[*conn]struct{}
	byMerch map[uuid.UUID]map[*conn]struct{}
	// orderMerch and watchedIn say which merchants' lines anyone watches, so
	// a batch ranks only those.
	orderMerch map[uuid.UUID]uuid.UUID
	watchedIn  map[uuid.UUID]int
	// views holds the last view of each watched order, so that a batch in
	// which an order only moved in its line need not read it whole.
	views map[uuid.UUID]store.Order
	// Subscriptions the tailer must read once more: they were registered
	// after their snapshot was read.
	refreshOrders map[uuid.UUID]struct{}
	refreshMerch  map[uuid.UUID]struct{}
	drops         dropWatch
	closing       bool
	wg            sync.WaitGroup
	wake          chan struct{}
}

// New builds a hub; call Run to start its tailer.
func New(st *store.Store, a *auth.Authenticator, opts Options) *Hub {
	if opts.Poll <= 0 {
		opts.Poll = defaultPoll
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = defaultWrite
	}
	if opts.MinInterval <= 0 {
		opts.MinInterval = defaultMinRead
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Hub{
		store: st, auth: a, opts: opts, log: opts.Logger,
		conns: map[*conn]struct{}{}, byOrder: map[uuid.UUID]map[*conn]struct{}{}, byMerch: map[uuid.UUID]map[*conn]struct{}{},
		orderMerch: map[uuid.UUID]uuid.UUID{}, watchedIn: map[uuid.UUID]int{}, views: map[uuid.UUID]store.Order{},
		refreshOrders: map[uuid.UUID]struct{}{}, refreshMerch: map[uuid.UUID]struct{}{},
		drops: newDropWatch(), wake: make(chan struct{}, 1),
	}
	// Idle connections hold no write buffer: it is taken from the pool for
	// the length of one message.
	h.upgrader = websocket.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 4096, WriteBufferPool: &sync.Pool{},
		CheckOrigin: h.checkOrigin}
	return h
}

// Connections counts the open websockets.
func (h *Hub) Connections() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
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
	p, err := h.authenticate(r)
	if err != nil {
		if domain.ErrorCode(err) != domain.CodeUnauthorized {
			h.log.LogAttrs(r.Context(), slog.LevelWarn, "websocket ticket not checked", slog.String("err", err.Error()))
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type":"https://orderd.dev/problems/unavailable","title":"Temporarily unavailable","status":503,"detail":"the ticket could not be checked; retry with a new one","code":"unavailable"}`))
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="orderd"`)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"type":"https://orderd.dev/problems/unauthorized","title":"Authentication is required","status":401,"detail":"a valid ticket or bearer token is required","code":"unauthorized"}`))
		return
	}
	ws, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered already
	}
	c := &conn{hub: h, ws: ws, principal: p, wake: make(chan struct{}, 1), done: make(chan struct{}),
		orders: map[uuid.UUID]*orderSlot{}, merchants: map[uuid.UUID]*loadSlot{},
		entries: map[uuid.UUID]*entrySlot{}, drops: map[uuid.UUID]*dropSlot{}}
	if perSecond := h.opts.SubscribesPerSecond; perSecond > 0 {
		c.subscribes = rate.NewLimiter(rate.Limit(perSecond), max(1, int(2*perSecond)))
	}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		c.close(websocket.CloseGoingAway, "server shutting down")
		return
	}
	h.conns[c] = struct{}{}
	h.wg.Add(2)
	h.mu.Unlock()
	go c.writeLoop()
	go c.readLoop()
}

// authenticate takes a ticket (consumed, whether the upgrade then succeeds
// or not), else a bearer token in the Authorization header or, deprecated,
// the access_token parameter.
func (h *Hub) authenticate(r *http.Request) (auth.Principal, error) {
	ticket := r.URL.Query().Get("ticket")
	if ticket == "" {
		return h.auth.FromRequestOrQuery(r)
	}
	hash, err := auth.ParseTicket(ticket)
	if err != nil {
		return auth.Principal{}, err
	}
	// The request's context lasts as long as the websocket will.
	ctx, cancel := context.WithTimeout(r.Context(), subscribeTimeout)
	defer cancel()
	holder, err := h.store.ConsumeTicket(ctx, hash)
	if errors.Is(err, store.ErrTicketNotFound) {
		return auth.Principal{}, auth.ErrBadTicket
	}
	if err != nil {
		return auth.Principal{}, err
	}
	return auth.Principal{Subject: holder.Subject, Role: auth.Role(holder.Role), MerchantID: holder.MerchantID}, nil
}

// Shutdown sends every client a close frame and waits for their goroutines,
// or for ctx. Clients that stopped reading are cut after a second, in
// parallel, so one of them cannot hold up the rest.
func (h *Hub) Shutdown(ctx context.Context) {
	h.mu.Lock()
	h.closing = true
	for c := range h.conns {
		go c.close(websocket.CloseGoingAway, "server shutting down")
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (h *Hub) watchOrder(c *conn, id, merchant uuid.UUID) {
	if h.byOrder[id] == nil {
		h.byOrder[id] = map[*conn]struct{}{}
		h.orderMerch[id] = merchant
		h.watchedIn[merchant]++
	}
	h.byOrder[id][c] = struct{}{}
}

func (h *Hub) unwatchOrder(c *conn, id uuid.UUID) {
	watchers, ok := h.byOrder[id]
	if !ok {
		return
	}
	delete(watchers, c)
	if len(watchers) > 0 {
		return
	}
	delete(h.byOrder, id)
	delete(h.views, id)
	m := h.orderMerch[id]
	delete(h.orderMerch, id)
	if h.watchedIn[m]--; h.watchedIn[m] <= 0 {
		delete(h.watchedIn, m)
	}
}

func (h *Hub) unwatchMerchant(c *conn, id uuid.UUID) {
	delete(h.byMerch[id], c)
	if len(h.byMerch[id]) == 0 {
		delete(h.byMerch, id)
	}
}

func (h *Hub) remove(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.conns, c)
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.orders {
		h.unwatchOrder(c, id)
	}
	for id := range c.merchants {
		h.unwatchMerchant(c, id)
	}
	for id := range c.entries {
		h.drops.unwatchEntry(c, id)
	}
	for id := range c.drops {
		h.drops.unwatchDrop(c, id)
	}
}

func (h *Hub) unsubscribeOrder(c *conn, id uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.orders[id]; ok {
		delete(c.orders, id)
		h.unwatchOrder(c, id)
	}
}

func (h *Hub) unsubscribeMerchant(c *conn, id uuid.UUID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.merchants[id]; ok {
		delete(c.merchants, id)
		h.unwatchMerchant(c, id)
	}
}

// Run tails the committed log until ctx ends and fans each batch out. It
// reads when a process hints that it committed events (store.LogChannel, sent
// by each process's store.RunLogHints) and otherwise every Poll, since hints can be lost; a read is one index range
// scan. Reads are at least MinInterval apart, so that under a stream of
// commits each merchant's line is ranked once per batch of changes rather
// than once per commit.
func (h *Hub) Run(ctx context.Context) {
	listenCtx, stopListening := context.WithCancel(ctx)
	listening := make(chan struct{})
	go func() { defer close(listening); h.listen(listenCtx) }()
	defer func() { stopListening(); <-listening }()

	var since store.LogSnapshot
	for {
		_, now, err := h.store.ChangedStreams(ctx, "")
		if err == nil {
			since = now
			break
		}
		h.log.Warn("live updates: log snapshot", "err", err)
		if !sleep(ctx, retryAfter) {
			return
		}
	}
	// Whoever subscribed before the first snapshot may have missed a change
	// in between: read them all once more.
	h.refreshAll()
	failed := false
	var lastRead time.Time
	for {
		if !sleep(ctx, h.opts.MinInterval-time.Since(lastRead)) {
			return
		}
		lastRead = time.Now()
		from := since
		if h.idle() {
			from = "" // nobody to tell: a fresh snapshot, and no scan of what changed
		}
		streams, next, err := h.store.ChangedStreams(ctx, from)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failed {
				h.log.Warn("live updates: read log", "err", err)
			}
			failed = true
			if !sleep(ctx, retryAfter) {
				return
			}
			continue
		}
		if failed {
			// The snapshot alone makes sure nothing is skipped; sending
			// everyone their current state again also repairs a fan-out
			// that failed half-way while the database was away.
			h.log.Info("live updates: log readable again")
			failed = false
			h.refreshAll()
		}
		if err := h.publish(ctx, streams); err != nil {
			if ctx.Err() != nil {
				return
			}
			h.log.Warn("live updates: fan-out", "err", err)
			failed = true
			// Stay on the snapshot: the changes are read again.
			if !sleep(ctx, retryAfter) {
				return
			}
			continue
		}
		since = next
		if !h.awaitChange(ctx) {
			return
		}
	}
}

// idle reports whether no one watches anything and no refresh is due.
func (h *Hub) idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byOrder) == 0 && len(h.byMerch) == 0 && len(h.refreshOrders) == 0 && len(h.refreshMerch) == 0 && h.drops.idle()
}

// wakeUp makes the tailer read the log now rather than at its next poll.
func (h *Hub) wakeUp() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// awaitChange waits for a hint or the next poll; false when ctx ended.
func (h *Hub) awaitChange(ctx context.Context) bool {
	t := time.NewTimer(h.opts.Poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-h.wake:
	case <-t.C:
	}
	return true
}

// listen turns every process's log hints into wake-ups, reconnecting after
// failures; polling covers the gaps.
func (h *Hub) listen(ctx context.Context) {
	failing := false
	for {
		listened := false
		err := h.store.ListenLog(ctx, func() {
			listened = true
			h.wakeUp()
			if h.opts.OnHint != nil {
				h.opts.OnHint()
			}
		})
		if ctx.Err() != nil {
			return
		}
		// Once per outage, not once per retry.
		if listened || !failing {
			h.log.Warn("live updates: log hints lost; polling until they are back", "err", err)
		}
		failing = true
		if !sleep(ctx, retryAfter) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (h *Hub) refreshAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.byOrder {
		h.refreshOrders[id] = struct{}{}
	}
	for id := range h.byMerch {
		h.refreshMerch[id] = struct{}{}
	}
	h.drops.refreshAll()
}

// publish computes, for one batch of events and the subscriptions waiting for
// a refresh, the new state of every watched order and merchant: one ranking
// query for all merchants whose line someone watches, never one query per
// watcher. On error the refreshes stay due and the caller reads the batch
// again.
func (h *Hub) publish(ctx context.Context, streams []store.StreamRef) error {
	if err := h.pushDrops(ctx, streams); err != nil {
		return err
	}
	changed := map[uuid.UUID]bool{}
	merchants := map[uuid.UUID]bool{}
	for _, st := range streams {
		switch st.Type {
		case store.StreamOrder:
			changed[st.ID] = true
		case store.StreamMerchant:
			merchants[st.ID] = true
		}
	}
	h.mu.Lock()
	idle := len(h.byOrder) == 0 && len(h.byMerch) == 0
	refreshOrders, refreshMerch := h.refreshOrders, h.refreshMerch
	h.refreshOrders, h.refreshMerch = map[uuid.UUID]struct{}{}, map[uuid.UUID]struct{}{}
	h.mu.Unlock()
	if idle && len(refreshOrders) == 0 && len(refreshMerch) == 0 {
		return nil
	}
	err := h.push(ctx, changed, merchants, refreshOrders, refreshMerch)
	if err != nil {
		h.mu.Lock()
		for id := range refreshOrders {
			h.refreshOrders[id] = struct{}{}
		}
		for id := range refreshMerch {
			h.refreshMerch[id] = struct{}{}
		}
		h.mu.Unlock()
	}
	return err
}

func (h *Hub) push(ctx context.Context, changed, merchants map[uuid.UUID]bool, refreshOrders, refreshMerch map[uuid.UUID]struct{}) error {
	owners, err := h.store.OrderMerchants(ctx, keys(changed))
	if err != nil {
		return fmt.Errorf("order merchants: %w", err)
	}
	for _, m := range owners {
		merchants[m] = true
	}
	for id := range refreshMerch {
		merchants[id] = true
	}

	// Decide under the lock what to read, read without it.
	var rank, loads, again []uuid.UUID
	h.mu.Lock()
	for id := range refreshOrders {
		if m, ok := h.orderMerch[id]; ok {
			merchants[m] = true
		}
	}
	for m := range merchants {
		if h.watchedIn[m] > 0 {
			rank = append(rank, m)
		}
		if len(h.byMerch[m]) > 0 {
			loads = append(loads, m)
		}
	}
	want := map[uuid.UUID]bool{}
	for id := range changed {
		if len(h.byOrder[id]) > 0 {
			want[id] = true
		}
	}
	for id := range refreshOrders {
		if len(h.byOrder[id]) > 0 {
			want[id] = true
		}
	}
	h.mu.Unlock()

	positions, err := h.store.QueuePositions(ctx, rank)
	if err != nil {
		return fmt.Errorf("queue positions: %w", err)
	}
	// A watched order held here at the ranked version only moved in the
	// line; any other watched order in a line, or that changed, is read
	// whole.
	views := map[uuid.UUID]store.Order{}
	var moved []store.Order
	ranked := make(map[uuid.UUID]store.QueuePosition, len(positions))
	h.mu.Lock()
	for _, p := range positions {
		if len(h.byOrder[p.OrderID]) == 0 {
			continue
		}
		ranked[p.OrderID] = p
		if v, ok := h.views[p.OrderID]; ok && v.Version == p.Version && !want[p.OrderID] {
			v.QueuePosition, v.EtaSeconds, v.LineSeq = &p.Position, &p.EtaSeconds, p.LineSeq
			moved = append(moved, v)
		} else {
			want[p.OrderID] = true
		}
	}
	h.mu.Unlock()
	// Orders read whole take their place from the ranking. One that changed
	// between the two reads is read again with the next batch, which that
	// change is part of, rather than ranked here by itself.
	whole, err := h.store.UnrankedOrders(ctx, keys(want))
	if err != nil {
		return fmt.Errorf("orders: %w", err)
	}
	for _, o := range whole {
		if o.Status == domain.StatusQueued {
			p, ok := ranked[o.ID]
			if !ok || p.Version != o.Version {
				again = append(again, o.ID)
				continue
			}
			o.QueuePosition, o.EtaSeconds, o.LineSeq = &p.Position, &p.EtaSeconds, p.LineSeq
		}
		views[o.ID] = o
	}
	merchantLoads, err := h.store.MerchantLoads(ctx, loads)
	if err != nil {
		return fmt.Errorf("merchant loads: %w", err)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range again {
		h.refreshOrders[id] = struct{}{}
	}
	// New states first: their writers wake first, ahead of the many that
	// only move a watcher's place in the line.
	offer := func(view store.Order) {
		watchers := h.byOrder[view.ID]
		if len(watchers) == 0 {
			return
		}
		h.views[view.ID] = view
		for c := range watchers {
			c.offerOrder(view)
		}
	}
	for _, view := range views {
		offer(view)
	}
	for _, view := range moved {
		offer(view)
	}
	for id, load := range merchantLoads {
		msg := loadMessage(id, load)
		for c := range h.byMerch[id] {
			c.offerLoad(msg)
		}
	}
	return nil
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

// merchantLoadMessage holds values only, so that two can be compared with ==.
type merchantLoadMessage struct {
	Type           string              `json:"type"`
	MerchantID     uuid.UUID           `json:"merchant_id"`
	Capacity       int                 `json:"capacity"`
	CapacityUnit   domain.CapacityUnit `json:"capacity_unit"`
	Active         int                 `json:"active"`
	ActiveOrders   int                 `json:"active_orders"`
	Queued         int                 `json:"queued"`
	QueuedUnits    int                 `json:"queued_units"`
	EstWaitSeconds int                 `json:"est_wait_seconds"`
	Paused         bool                `json:"paused"`
	PauseMode      nullString          `json:"pause_mode"`
	PausedUntil    nullString          `json:"paused_until"`
}

// nullString is a string that is null in JSON when empty.
type nullString string

func (n nullString) MarshalJSON() ([]byte, error) {
	if n == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(n))
}

func loadMessage(id uuid.UUID, l store.Load) merchantLoadMessage {
	m := merchantLoadMessage{
		Type: "merchant_load", MerchantID: id, Capacity: l.Capacity, CapacityUnit: l.CapacityUnit,
		Active: l.Active, ActiveOrders: l.ActiveOrders, Queued: l.Queued, QueuedUnits: l.QueuedUnits,
		EstWaitSeconds: l.EstWaitSeconds, Paused: l.Paused,
	}
	if l.PauseMode != nil {
		m.PauseMode = nullString(*l.PauseMode)
	}
	if l.PausedUntil != nil {
		m.PausedUntil = nullString(l.PausedUntil.UTC().Format(time.RFC3339Nano))
	}
	return m
}

type errorMessage struct {
	Type   string      `json:"type"`
	Code   domain.Code `json:"code"`
	Detail string      `json:"detail"`
	// RetryAfterSeconds is the websocket's Retry-After, on rate_limited.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
}
