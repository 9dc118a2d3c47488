// Package ws pushes live order and merchant updates over websockets. Its
// source is the committed event log, read by one tailer per process as the
// streams changed between two database snapshots, so a change made through
// any orderd process reaches clients connected to every one of them. Each
// process reads only the streams of the merchants its own clients watch.
package ws

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	// PingEvery is how often each client is pinged; 25 s by default.
	PingEvery time.Duration
	// PongWait is how long a client may send nothing, not even a pong,
	// before a ping closes it (unless it is only behind in reading, see
	// pingNow); 60 s by default.
	PongWait time.Duration
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
	defaultPongWait  = 60 * time.Second
	defaultPingEvery = 25 * time.Second
	closeWait        = time.Second
	subscribeTimeout = 5 * time.Second
	defaultPoll      = 100 * time.Millisecond
	defaultMinRead   = 50 * time.Millisecond
	defaultWrite     = 10 * time.Second
	retryAfter       = time.Second
	// readBufferBytes holds a frame's header and a client's small messages;
	// longer frames are read through it.
	readBufferBytes = 256
)

// Stats counts what the hub did, for Prometheus.
type Stats struct {
	Sent    atomic.Int64 // data messages written to clients
	Dropped atomic.Int64 // clients cut off for reading too slowly
	// Unanswered counts clients closed because nothing, not even a pong,
	// came from them for PongWait: gone, not slow.
	Unanswered atomic.Int64
}

// Hub owns the connections, their subscriptions and the tailer.
type Hub struct {
	Stats Stats

	store    *store.Store
	auth     *auth.Authenticator
	opts     Options
	log      *slog.Logger
	upgrader websocket.Upgrader

	mu     sync.Mutex
	conns  map[*conn]struct{}
	orders map[uuid.UUID]*watchedOrder
	// lines holds each merchant whose line or status someone watches.
	lines map[uuid.UUID]*line
	// loads holds the watchers of each merchant's load.
	loads map[uuid.UUID]map[*conn]struct{}
	// Subscriptions the tailer must read once more: they were registered
	// after their snapshot was read.
	refreshOrders   map[uuid.UUID]struct{}
	refreshLoads    map[uuid.UUID]struct{}
	refreshStatuses map[uuid.UUID]struct{}
	drops           dropWatch
	closing         bool
	wg              sync.WaitGroup
	// poller holds idle connections' sockets; started with the first.
	poller   *poller
	noPoller bool
	wake     chan struct{} // the tailer's
	rankWake chan struct{} // the ranker's
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
	if opts.PingEvery <= 0 {
		opts.PingEvery = defaultPingEvery
	}
	if opts.PongWait <= 0 {
		opts.PongWait = defaultPongWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Hub{
		store: st, auth: a, opts: opts, log: opts.Logger,
		conns: map[*conn]struct{}{}, orders: map[uuid.UUID]*watchedOrder{}, lines: map[uuid.UUID]*line{},
		loads: map[uuid.UUID]map[*conn]struct{}{}, refreshOrders: map[uuid.UUID]struct{}{},
		refreshLoads: map[uuid.UUID]struct{}{}, refreshStatuses: map[uuid.UUID]struct{}{},
		drops: newDropWatch(), wake: make(chan struct{}, 1), rankWake: make(chan struct{}, 1),
	}
	// Idle connections hold no write buffer: it is taken from the pool for
	// the length of one message.
	h.upgrader = websocket.Upgrader{ReadBufferSize: readBufferBytes, WriteBufferSize: 4096, WriteBufferPool: &sync.Pool{},
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
	var frames *frameConn
	ws, err := h.upgrader.Upgrade(hijacked{w, func(nc net.Conn) net.Conn { frames = newFrameConn(nc); return frames }}, r, nil)
	if err != nil {
		return // the upgrader answered already
	}
	ws.SetReadLimit(maxMessageBytes)
	c := &conn{hub: h, ws: ws, frames: frames, principal: p}
	frames.pong = func(payload []byte) {
		_ = ws.WriteControl(websocket.PongMessage, payload, time.Now().Add(h.opts.WriteTimeout))
	}
	if perSecond := h.opts.SubscribesPerSecond; perSecond > 0 {
		c.subscribes = rate.NewLimiter(rate.Limit(perSecond), max(1, int(2*perSecond)))
	}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		c.close(websocket.CloseGoingAway, "server shutting down")
		return
	}
	if _, socket := frames.Conn.(syscall.Conn); socket {
		c.poll = h.pollerLocked()
	}
	h.conns[c] = struct{}{}
	h.wg.Add(1)
	c.mu.Lock()
	c.ping = time.AfterFunc(h.opts.PingEvery, c.pingNow)
	c.mu.Unlock()
	h.mu.Unlock()
	go c.read()
}

// pollerLocked starts the poller with the first connection; nil where there
// is none to start. The caller holds h.mu.
func (h *Hub) pollerLocked() *poller {
	if h.poller == nil && !h.noPoller {
		p, err := newPoller()
		if err != nil {
			h.log.Warn("idle websockets keep a goroutine each", slog.String("err", err.Error()))
			h.noPoller = true
			return nil
		}
		h.poller = p
	}
	return h.poller
}

// hijacked lets the upgrader take the connection through wrap.
type hijacked struct {
	http.ResponseWriter
	wrap func(net.Conn) net.Conn
}

func (h hijacked) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return h.wrap(nc), rw, nil
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
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.poller != nil {
		h.poller.close()
		h.poller = nil
	}
}
