// Package api serves orderd's REST contract (API.md) on net/http.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/store"
)

// Config wires a Server.
type Config struct {
	Store  *store.Store
	Auth   *auth.Authenticator
	Logger *slog.Logger
	// Registry receives the HTTP and order metrics; the operator listener
	// serves it.
	Registry prometheus.Registerer
	// Metrics, when set, are the server's metrics, made beforehand by
	// NewMetrics for others to record into as well; else the server makes
	// them on Registry.
	Metrics *Metrics
	// Ready reports whether the service may take traffic (database reachable,
	// migrations current).
	Ready func(ctx context.Context) error
	// RequestTimeout bounds each request, database work included.
	RequestTimeout time.Duration
	// RatePerCustomer limits, per customer per second, each of placements,
	// payments, cancellations and websocket tickets, every kind with its own
	// buckets; 0 turns them off.
	RatePerCustomer float64
	// RateDropEntries limits drop entries per customer per second; 0 turns
	// it off.
	RateDropEntries float64
	// RatePerIP limits requests per client address per second; 0 turns it off.
	RatePerIP float64
	// CursorKey authenticates list cursors; instances that serve the same
	// clients need the same key. Without one, a random key.
	CursorKey []byte
	// RateSignIn limits sign-in code exchanges per client address per
	// second; 0 turns it off.
	RateSignIn float64
	// RateGuest limits guest sessions per client address per second; 0
	// turns it off.
	RateGuest float64
	// GuestTTL is how long a guest session's token lasts; 0 is
	// DefaultGuestTTL.
	GuestTTL time.Duration
	// Now is the clock the rate limits refill by; nil is time.Now. A test
	// stops it, so that requests it means as one burst stay one however
	// slowly they are served.
	Now func() time.Time
	// Extra handlers mounted as they are, such as the websocket endpoint and
	// the demo page.
	Mount map[string]http.Handler
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	store   *store.Store
	auth    *auth.Authenticator
	log     *slog.Logger
	metrics *Metrics
	limits  customerLimits
	cursors cursors
	// signInLimit is per client address: exchanging a code takes no token.
	signInLimit *RateLimiter
	// guestLimit is per client address: a guest session takes no token.
	guestLimit *RateLimiter
	handler    http.Handler
	routes     []string
}

// New builds the server and its routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.GuestTTL <= 0 {
		cfg.GuestTTL = DefaultGuestTTL
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(cfg.Registry)
	}
	limiter := func(perSecond float64) *RateLimiter { return newRateLimiter(perSecond, cfg.Now) }
	s := &Server{
		cfg: cfg, store: cfg.Store, auth: cfg.Auth, log: cfg.Logger,
		metrics:     cfg.Metrics,
		cursors:     newCursors(cfg.CursorKey),
		signInLimit: limiter(cfg.RateSignIn),
		guestLimit:  limiter(cfg.RateGuest),
		limits: customerLimits{
			place:       limiter(cfg.RatePerCustomer),
			pay:         limiter(cfg.RatePerCustomer),
			cancel:      limiter(cfg.RatePerCustomer),
			tickets:     limiter(cfg.RatePerCustomer),
			dropEntries: limiter(cfg.RateDropEntries),
			merchantOps: limiter(cfg.RatePerCustomer),
		},
	}
	s.handler = s.buildRoutes()
	return s
}

// ServeHTTP makes Server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Metrics exposes the server's metrics for other components to record into.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Routes lists every pattern the server's mux serves, in the mux's syntax
// ("GET /v1/orders/{id}"), the catch-all excepted.
func (s *Server) Routes() []string { return s.routes }

func (s *Server) buildRoutes() http.Handler {
	mux := newRouteMux()
	authed := func(h handlerFunc) http.Handler { return requireAuth(s.auth, h) }

	mux.Handle("POST /v1/merchants", authed(s.createMerchant))
	mux.Handle("GET /v1/merchants/{id}", authed(s.getMerchant))
	mux.Handle("PATCH /v1/merchants/{id}", authed(s.patchMerchant))
	mux.Handle("POST /v1/merchants/{id}/webhook-secret", authed(s.rotateWebhookSecret))
	mux.Handle("POST /v1/merchants/{id}/pause", authed(s.pauseMerchant))
	mux.Handle("POST /v1/merchants/{id}/resume", authed(s.resumeMerchant))
	mux.Handle("POST /v1/merchants/{id}/products", authed(s.createProduct))
	mux.Handle("GET /v1/merchants/{id}/products", authed(s.listProducts))
	mux.Handle("PATCH /v1/merchants/{mid}/products/{pid}", authed(s.patchProduct))
	mux.Handle("DELETE /v1/merchants/{mid}/products/{pid}", authed(s.hideProduct))
	mux.Handle("GET /v1/merchants/{id}/orders", authed(s.listMerchantOrders))
	mux.Handle("GET /v1/merchants/{id}/slots", authed(s.listSlots))
	mux.Handle("GET /v1/products/{id}", authed(s.getProduct))
	mux.Handle("POST /v1/products/{id}/restock", authed(s.restock))
	mux.Handle("POST /v1/products/{id}/drops", authed(s.createDrop))
	mux.Handle("GET /v1/drops/{id}", authed(s.getDrop))
	mux.Handle("POST /v1/drops/{id}/entries", authed(s.joinDrop))
	mux.Handle("GET /v1/drops/{id}/entries/me", authed(s.myEntry))
	mux.Handle("GET /v1/drops/{id}/draw", authed(s.dropDraw))

	mux.Handle("GET /v1/orders", authed(s.listOwnOrders))
	mux.Handle("POST /v1/orders", authed(s.placeOrder))
	mux.Handle("GET /v1/orders/{id}", authed(s.getOrder))
	mux.Handle("GET /v1/orders/{id}/events", authed(s.orderEvents))
	mux.Handle("GET /v1/orders/{id}/proof", authed(s.orderProof))
	mux.Handle("POST /v1/orders/{id}/pay", authed(s.payOrder))
	mux.Handle("POST /v1/orders/{id}/cancel", authed(s.cancelOrder))
	mux.Handle("POST /v1/orders/{id}/complete", authed(s.completeOrder))
	mux.Handle("POST /v1/orders/{id}/prioritize", authed(s.prioritizeOrder))
	mux.Handle("POST /v1/orders/{id}/picked-up", authed(s.pickUpOrder))
	mux.Handle("POST /v1/orders/{id}/reopen", authed(s.reopenOrder))

	mux.Handle("POST /v1/ws/tickets", authed(s.issueTicket))
	mux.Handle("POST /v1/sign-in", handlerFunc(s.signIn))
	mux.Handle("POST /v1/merchants/{id}/guest-sessions", handlerFunc(s.startGuestSession))

	mux.Handle("GET /v1/admin/dead-letters", authed(s.listDeadLetters))
	mux.Handle("POST /v1/admin/dead-letters/{id}/retry", authed(s.retryDeadLetter))
	mux.Handle("POST /v1/admin/dead-letters/{id}/resolve", authed(s.resolveDeadLetter))
	mux.Handle("POST /v1/admin/dead-letters/retry", authed(s.retryWebhookDeadLetters))
	mux.Handle("GET /v1/admin/webhook-attempts", authed(s.listWebhookAttempts))
	mux.Handle("GET /v1/admin/audit", authed(s.audit))
	mux.Handle("GET /v1/audit/checkpoints/latest", authed(s.latestCheckpoint))
	mux.Handle("GET /v1/audit/checkpoints/consistency", authed(s.checkpointConsistency))
	mux.Handle("POST /v1/admin/sign-in-codes", authed(s.mintSignInCode))

	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /openapi.json", serveOpenAPI)
	for pattern, h := range s.cfg.Mount {
		mux.Handle(pattern, h)
	}
	s.routes = mux.patterns
	mux.ServeMux.HandleFunc(fallbackPattern, mux.fallback)

	var h http.Handler = mux
	h = s.metrics.Middleware(h)
	h = perIPLimit(newRateLimiter(s.cfg.RatePerIP, s.cfg.Now), h)
	h = withTimeout(s.cfg.RequestTimeout, h)
	h = recoverPanics(s.log, h)
	h = accessLog(s.log, h)
	h = withRequestID(h)
	return h
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(r.Context()); err != nil {
			// The cause goes to the operator's log only: a database's error
			// text names hosts, users and schemas, and /readyz answers anyone.
			ctx := r.Context()
			loggerFrom(ctx).LogAttrs(ctx, slog.LevelWarn, "not ready", slog.String("err", err.Error()))
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
