// Package app wires orderd's parts into one running service: the database
// pool, the store, River workers, the HTTP API and live updates. cmd/orderd
// and the end-to-end tests both start orderd through it.
package app

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"github.com/trustelem/zxcvbn"
	"riverqueue.com/riverui"

	"github.com/orderd/orderd/api"
	"github.com/orderd/orderd/auth"
	"github.com/orderd/orderd/domain"
	"github.com/orderd/orderd/internal/ops"
	"github.com/orderd/orderd/jobs"
	"github.com/orderd/orderd/migrations"
	"github.com/orderd/orderd/store"
	"github.com/orderd/orderd/store/pgkit"
	"github.com/orderd/orderd/web"
	"github.com/orderd/orderd/webhook"
	"github.com/orderd/orderd/ws"
)

// BenchWithoutTimersEnv, set for an `orderd serve` that the bench starts,
// makes its placements insert no payment timer (serve sets WrapJobs): the
// timers scenario's baseline is the same placements without them.
const BenchWithoutTimersEnv = "ORDERD_BENCH_WITHOUT_PAYMENT_TIMERS"

// Config is everything orderd serve needs; cmd/orderd fills it from flags and
// the environment.
type Config struct {
	// WrapJobs, when set, stands between the store and the jobs it inserts
	// (a benchmark's baseline drops the payment timers).
	WrapJobs func(store.JobInserter) store.JobInserter

	DatabaseURL string
	Addr        string
	JWTSecret   string
	// JWTIssuer and JWTAudience, when set, are required in every token.
	JWTIssuer   string
	JWTAudience string

	// OpsAddr is the operator listener's address (/metrics, /riverui/);
	// OpsUser and OpsPassword are its basic auth, required off loopback.
	OpsAddr     string
	OpsUser     string
	OpsPassword string

	WebhookMaxAttempts   int
	WebhookBackoff       time.Duration
	WebhookTimeout       time.Duration
	WebhookAllowLoopback bool

	RatePerCustomer float64
	RateDropEntries float64
	RatePerIP       float64
	// RateSignIn limits sign-in code exchanges per client address per second.
	RateSignIn float64
	// RateGuest limits guest sessions per client address per second.
	RateGuest float64
	// GuestTTL is how long a guest session's token lasts.
	GuestTTL time.Duration
	// WSSubscribeRate limits subscribe messages per websocket per second.
	WSSubscribeRate float64
	RequestTimeout  time.Duration

	// MaxConns bounds this process's database connections; size it so that
	// every instance together stays below the server's max_connections.
	MaxConns int
	// StatementTimeout is set on every connection, so that a stuck query ends
	// with an error (answered 503) instead of holding a request forever.
	StatementTimeout time.Duration
	// AllowedOrigins may open websockets from a browser besides the same origin.
	AllowedOrigins []string
	// Migrate brings the schema to current before serving.
	Migrate bool
	// ShutdownTimeout bounds the graceful stop.
	ShutdownTimeout time.Duration

	// CheckpointKey is the file of the Ed25519 seed that signs the log's
	// checkpoints; when set, this instance takes its turn extending the log
	// and checkpoints it at least every CheckpointInterval while it grows.
	CheckpointKey      string
	CheckpointInterval time.Duration
	// WitnessURL receives every checkpoint through the outbox, signed
	// like a webhook with WitnessSecret; empty, no witness.
	WitnessURL    string
	WitnessSecret string

	Jobs   jobs.Config
	Logger *slog.Logger
}

// DefaultConfig holds API.md's defaults.
func DefaultConfig() Config {
	return Config{
		Addr:               ":8080",
		OpsAddr:            "127.0.0.1:9090",
		WebhookMaxAttempts: 12,
		WebhookBackoff:     5 * time.Second,
		WebhookTimeout:     5 * time.Second,
		RatePerCustomer:    20,
		RateDropEntries:    5,
		RateSignIn:         2,
		RateGuest:          1,
		GuestTTL:           api.DefaultGuestTTL,
		WSSubscribeRate:    20,
		RequestTimeout:     10 * time.Second,
		MaxConns:           40,
		StatementTimeout:   8 * time.Second,
		Migrate:            true,
		ShutdownTimeout:    20 * time.Second,
		CheckpointInterval: time.Minute,
		Jobs:               jobs.DefaultConfig(),
	}
}

// LogValue prints the configuration with secrets masked, for the start-up log.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("addr", c.Addr),
		slog.String("ops_addr", c.OpsAddr),
		slog.String("ops_user", c.OpsUser),
		slog.String("ops_password", mask(c.OpsPassword)),
		slog.String("database", maskURL(c.DatabaseURL)),
		slog.String("jwt_secret", mask(c.JWTSecret)),
		slog.String("jwt_issuer", c.JWTIssuer),
		slog.String("jwt_audience", c.JWTAudience),
		slog.Int("webhook_max_attempts", c.WebhookMaxAttempts),
		// Durations as a person writes them ("5s"): a JSON handler would
		// print slog.Duration as nanoseconds.
		slog.String("webhook_backoff", c.WebhookBackoff.String()),
		slog.String("webhook_timeout", c.WebhookTimeout.String()),
		slog.Bool("webhook_allow_loopback", c.WebhookAllowLoopback),
		slog.Float64("rate_per_customer", c.RatePerCustomer),
		slog.Float64("rate_drop_entries", c.RateDropEntries),
		slog.Float64("rate_per_ip", c.RatePerIP),
		slog.Float64("rate_sign_in", c.RateSignIn),
		slog.Float64("rate_guest", c.RateGuest),
		slog.String("guest_ttl", c.GuestTTL.String()),
		slog.Float64("ws_subscribe_rate", c.WSSubscribeRate),
		slog.Int("max_conns", c.MaxConns),
		slog.String("checkpoint_key", c.CheckpointKey),
		slog.String("checkpoint_interval", c.CheckpointInterval.String()),
		slog.String("witness_url", c.WitnessURL),
		slog.String("witness_secret", mask(c.WitnessSecret)),
		slog.String("request_timeout", c.RequestTimeout.String()),
		slog.String("statement_timeout", c.StatementTimeout.String()),
		slog.String("shutdown_timeout", c.ShutdownTimeout.String()),
	)
}

func mask(s string) string {
	if s == "" {
		return ""
	}
	return "********"
}

func maskURL(raw string) string {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return "(unparseable)"
	}
	hosts := []string{net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
	for _, fb := range cfg.Fallbacks {
		if h := net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port))); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return fmt.Sprintf("postgres://%s@%s/%s", cfg.User, strings.Join(hosts, ","), cfg.Database)
}

// ErrNotMigrated is a database whose schema is behind this orderd's.
var ErrNotMigrated = errors.New("the database is not migrated to this orderd's schema: run `orderd migrate up` (or serve with ORDERD_MIGRATE=true)")

// requireMigrated refuses to serve a database that lacks migrations, which
// would otherwise answer every request with a missing table.
func requireMigrated(ctx context.Context, pool *pgxpool.Pool) error {
	current, err := migrations.CurrentOn(ctx, pool)
	if err != nil {
		return fmt.Errorf("read the database's migrations: %w", err)
	}
	if !current {
		return ErrNotMigrated
	}
	return nil
}

// MinJWTSecret is the shortest HS256 secret orderd accepts: as many bytes
// as the hash's output, below which the key is the weakest part of the MAC.
const MinJWTSecret = 32

// MinJWTSecretBits is the least strength orderd accepts in a secret, as
// zxcvbn estimates it (log2 of the guesses its model of people's secrets
// needs): it refuses a repeated character or word, a sequence, and a few
// dictionary words, which an attacker who holds one token tries first.
// zxcvbn gives 32 random letters and digits about 106 bits.
const MinJWTSecretBits = 100

// CheckJWTSecret refuses a missing, short or guessable secret, in one line
// that says how to make a good one and never repeats the secret.
func CheckJWTSecret(secret string) error {
	if secret == "" {
		return errors.New("ORDERD_JWT_SECRET is required (make one with: openssl rand -hex 32)")
	}
	if len(secret) < MinJWTSecret {
		return fmt.Errorf("ORDERD_JWT_SECRET is %d bytes; at least %d are required (make one with: openssl rand -hex 32)", len(secret), MinJWTSecret)
	}
	if bits := math.Log2(zxcvbn.PasswordStrength(secret, nil).Guesses); bits < MinJWTSecretBits {
		return fmt.Errorf("ORDERD_JWT_SECRET is too easy to guess (about %d bits: a repeated character or word, a sequence or dictionary words); at least %d are required (make one with: openssl rand -hex 32)",
			int(bits), MinJWTSecretBits)
	}
	return nil
}

// NewJWTSecret makes a secret CheckJWTSecret accepts, as the advice its
// refusals give does (openssl rand -hex 32): half as many random bytes
// were refused now and then, zxcvbn finding a pattern in their hex.
func NewJWTSecret() (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("make a JWT secret: %w", err)
	}
	return hex.EncodeToString(raw), nil
}

// App is a running orderd.
type App struct {
	cfg      Config
	log      *slog.Logger
	pool     *pgxpool.Pool
	store    *store.Store
	river    *river.Client[pgx.Tx]
	api      *api.Server
	http     *http.Server
	listener net.Listener
	// ops is the operator listener's server; riverUI runs background
	// queries of its own that Run starts.
	ops         *http.Server
	opsListener net.Listener
	opsPool     *pgxpool.Pool
	riverUI     *riverui.Handler
	auth        *auth.Authenticator
	registry    *prometheus.Registry
	relay       *jobs.Relay
	backstop    *jobs.Backstop
	hub         *ws.Hub
	schema      schemaStatus
	// checkpointKey signs the log's checkpoints; nil when this instance
	// keeps no log.
	checkpointKey ed25519.PrivateKey
}

// New connects, migrates when asked, and builds every part; nothing serves
// until Run.
func New(ctx context.Context, cfg Config) (*App, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("DATABASE_URL is required")
	}
	if err := CheckJWTSecret(cfg.JWTSecret); err != nil {
		return nil, err
	}
	if err := ops.CheckAddr(cfg.OpsAddr, cfg.OpsPassword); err != nil {
		return nil, err
	}
	var checkpointKey ed25519.PrivateKey
	if cfg.CheckpointKey != "" {
		if cfg.CheckpointInterval <= 0 {
			return nil, errors.New("the checkpoint interval must be positive")
		}
		key, err := LoadCheckpointKey(cfg.CheckpointKey)
		if err != nil {
			return nil, err
		}
		checkpointKey = key
	}
	if err := CheckWitness(cfg.WitnessURL, cfg.WitnessSecret); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.Migrate {
		log.Info("migrating the database (ORDERD_MIGRATE=false skips it)")
		if err := migrations.Up(ctx, cfg.DatabaseURL); err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
		log.Info("the database is migrated")
	}
	pool, err := NewPool(ctx, cfg.DatabaseURL, cfg.MaxConns, cfg.StatementTimeout)
	if err != nil {
		return nil, err
	}
	if !cfg.Migrate {
		if err := requireMigrated(ctx, pool); err != nil {
			pool.Close()
			return nil, err
		}
	}
	a := &App{cfg: cfg, log: log, pool: pool, registry: prometheus.NewRegistry(), checkpointKey: checkpointKey}
	a.registry.MustRegister(collectors.NewGoCollector(
		// The live heap after the last collection: memory per connection
		// and leaks show there, not in a heap that still holds garbage.
		collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// The store inserts its jobs through a client of its own, which works
	// none: River's working client is made with the store, for its workers.
	alarm := jobs.NewTimerAlarm()
	inserter, err := jobs.NewInserterWithAlarm(pool, alarm)
	if err != nil {
		pool.Close()
		return nil, err
	}
	var jobsInserter store.JobInserter = inserter
	if cfg.WrapJobs != nil {
		jobsInserter = cfg.WrapJobs(jobsInserter)
	}
	metrics := api.NewMetrics(a.registry)
	a.store = store.New(store.Config{
		Pool: pool, Jobs: jobsInserter,
		OnTransition: func(from, to domain.OrderStatus) { metrics.ObserveTransition(string(from), string(to)) },
	})
	jobsCfg := cfg.Jobs
	jobsCfg.Logger, jobsCfg.TimerAlarm = log, alarm
	if a.store.Distributed(ctx) {
		if jobsCfg.TimerBackstopFullEvery == 0 {
			jobsCfg.TimerBackstopFullEvery = jobs.DistributedBackstopFullEvery
		}
		if jobsCfg.TimerLookEvery == 0 {
			jobsCfg.TimerLookEvery = jobs.DistributedTimerLookEvery
		}
	}
	jobsCfg.AuditGauge = jobs.NewAuditGauge(a.registry)
	jobsCfg.Metrics = jobs.NewMetrics(a.registry)
	if a.river, err = jobs.NewClient(pool, a.store, jobsCfg); err != nil {
		pool.Close()
		return nil, err
	}
	a.backstop = jobs.NewBackstop(a.store, jobsCfg)
	a.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orderd_timers_backstop_fired_total",
		Help: "Timers found still pending a grace period after their deadline and fired by the backstop."},
		func() float64 { return float64(a.backstop.Fired.Load()) }))
	a.auth = auth.NewWith(auth.Options{Secret: []byte(cfg.JWTSecret), Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience})
	relayCfg := jobs.DefaultRelayConfig()
	relayCfg.Policy = store.RetryPolicy{First: cfg.WebhookBackoff, Max: time.Hour, MaxAttempts: cfg.WebhookMaxAttempts}
	relayCfg.Lease = max(relayCfg.Lease, 3*cfg.WebhookTimeout)
	relayCfg.WitnessURL, relayCfg.WitnessSecret = cfg.WitnessURL, cfg.WitnessSecret
	a.relay = jobs.NewRelay(a.store,
		webhook.NewSender(webhook.Options{Timeout: cfg.WebhookTimeout, AllowLoopback: cfg.WebhookAllowLoopback}), relayCfg, log)
	a.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orderd_webhooks_delivered_total", Help: "Webhook deliveries acknowledged."},
			func() float64 { return float64(a.relay.Stats.Delivered.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orderd_webhooks_failed_total", Help: "Webhook attempts that failed."},
			func() float64 { return float64(a.relay.Stats.Failed.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orderd_webhooks_dead_total", Help: "Webhook messages dead-lettered after their last attempt."},
			func() float64 { return float64(a.relay.Stats.Dead.Load()) }),
	)

	// The relay looks for new outbox rows when any process hints that it
	// committed events, which they travel with.
	a.hub = ws.New(a.store, a.auth, ws.Options{AllowedOrigins: cfg.AllowedOrigins, Logger: log, SubscribesPerSecond: cfg.WSSubscribeRate,
		OnHint: a.relay.Wake})
	a.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orderd_ws_messages_sent_total", Help: "Websocket data messages sent."},
			func() float64 { return float64(a.hub.Stats.Sent.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orderd_ws_dropped_total", Help: "Websocket clients cut off for reading too slowly."},
			func() float64 { return float64(a.hub.Stats.Dropped.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orderd_ws_unanswered_total", Help: "Websocket clients closed because nothing, not even a pong, came from them for 60 s."},
			func() float64 { return float64(a.hub.Stats.Unanswered.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "orderd_ws_connections", Help: "Open websocket connections."},
			func() float64 { return float64(a.hub.Connections()) }),
	)
	a.api = api.New(api.Config{
		Mount: mounts(a.hub),
		Store: a.store, Auth: a.auth, Logger: log, Registry: a.registry, Metrics: metrics,
		Ready:           a.ready,
		RequestTimeout:  cfg.RequestTimeout,
		RatePerCustomer: cfg.RatePerCustomer,
		RateDropEntries: cfg.RateDropEntries,
		RatePerIP:       cfg.RatePerIP,
		CursorKey:       cursorKey(cfg.JWTSecret),
		RateSignIn:      cfg.RateSignIn,
		RateGuest:       cfg.RateGuest,
		GuestTTL:        cfg.GuestTTL,
	})

	a.http = &http.Server{
		Handler:           a.api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	if err := a.buildOps(ctx, log); err != nil {
		pool.Close()
		return nil, err
	}
	return a, nil
}

// opsMaxConns bounds the operator listener's own pool.
const opsMaxConns = 2

// buildOps prepares the operator listener. Its queries (metrics that read
// the database, River UI) run on a pool of their own, so that they neither
// take connections from requests nor wait behind them when the serving pool
// is exhausted, which is when operators look.
func (a *App) buildOps(ctx context.Context, log *slog.Logger) error {
	cfg := a.cfg
	opsPool, err := NewPool(ctx, cfg.DatabaseURL, opsMaxConns, cfg.StatementTimeout)
	if err != nil {
		return fmt.Errorf("operator pool: %w", err)
	}
	a.opsPool = opsPool
	opsStore := store.New(store.Config{Pool: opsPool})
	a.registry.MustRegister(ops.NewQueueCollector(opsStore), ops.NewPoolCollector(a.pool))
	// River UI reads and acts through a client of its own that works no jobs.
	uiClient, err := jobs.NewInserter(opsPool)
	if err != nil {
		opsPool.Close()
		return err
	}
	if a.riverUI, err = riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(uiClient, nil),
		Logger:    log,
		Prefix:    "/riverui",
	}); err != nil {
		opsPool.Close()
		return fmt.Errorf("river ui: %w", err)
	}
	opsHandler, err := ops.Handler(ops.Config{
		User: cfg.OpsUser, Password: cfg.OpsPassword, Registry: a.registry, RiverUI: a.riverUI,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	})
	if err != nil {
		opsPool.Close()
		return err
	}
	a.ops = &http.Server{
		Handler:           opsHandler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return nil
}

// NewPool opens a pool whose connections carry a statement timeout, fail
// fast when the database is unreachable, so requests answer 503 in time,
// follow the primary among the URL's hosts (configureFailover), send and
// read UUIDs as bytes and send arrays without an allocation per element
// (pgkit.RegisterTypes).
func NewPool(ctx context.Context, url string, maxConns int, statementTimeout time.Duration) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if maxConns > 0 {
		pcfg.MaxConns = int32(maxConns)
	}
	configureFailover(pcfg)
	pcfg.AfterConnect = pgkit.RegisterTypes
	if statementTimeout > 0 {
		pcfg.ConnConfig.RuntimeParams["statement_timeout"] = fmt.Sprint(statementTimeout.Milliseconds())
		pcfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint((2 * statementTimeout).Milliseconds())
	}
	pcfg.HealthCheckPeriod = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect database: %w", err)
	}
	return pool, nil
}

// schemaRecheck is how long a migration status answers readiness probes
// before it is read again.
const schemaRecheck = 5 * time.Second

// schemaStatus remembers whether the migrations were current, so that
// /readyz, which answers anyone, reads them at most once per schemaRecheck
// whatever the rate of probes.
type schemaStatus struct {
	mu      sync.Mutex
	current bool
	at      time.Time
}

// ready pings through the serving pool and reports the migrations as last
// read, reading them again, through the same pool, when that is older than
// schemaRecheck: a probe never opens a connection of its own.
func (a *App) ready(ctx context.Context) error {
	if err := a.store.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	a.schema.mu.Lock()
	defer a.schema.mu.Unlock()
	if a.schema.at.IsZero() || time.Since(a.schema.at) >= schemaRecheck {
		current, err := migrations.CurrentOn(ctx, a.pool)
		if err != nil {
			return fmt.Errorf("migrations: %w", err)
		}
		a.schema.current, a.schema.at = current, time.Now()
	}
	if !a.schema.current {
		return errors.New("migrations are not current")
	}
	return nil
}

// Store exposes the store, for tools and tests that drive orderd in-process.
func (a *App) Store() *store.Store { return a.store }

// Close releases an App that will not Run (Run releases its own).
func (a *App) Close() {
	for _, ln := range []net.Listener{a.listener, a.opsListener} {
		if ln != nil {
			_ = ln.Close()
		}
	}
	a.store.Close()
	a.opsPool.Close()
	a.pool.Close()
}

// Routes lists every pattern the public listener serves.
func (a *App) Routes() []string { return a.api.Routes() }

// Auth exposes the token issuer.
func (a *App) Auth() *auth.Authenticator { return a.auth }

// Listen binds the public and the operator addresses; Addr and OpsAddr
// report them (useful with ":0").
func (a *App) Listen() error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return listenError(a.cfg.Addr, "--addr or ORDERD_ADDR", err)
	}
	opsLn, err := net.Listen("tcp", a.cfg.OpsAddr)
	if err != nil {
		_ = ln.Close()
		return listenError(a.cfg.OpsAddr, "--ops-addr or ORDERD_OPS_ADDR", err)
	}
	a.listener, a.opsListener = ln, opsLn
	return nil
}

// listenError says which setting names an address that could not be
// listened on, and for one in use, that another process has it.
func listenError(addr, setting string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: the address is in use by another process; choose another with %s: %w", addr, setting, err)
	}
	return fmt.Errorf("listen on %s (set with %s): %w", addr, setting, err)
}

// OpsAddr is the operator listener's bound address, after Listen.
func (a *App) OpsAddr() string {
	if a.opsListener == nil {
		return a.cfg.OpsAddr
	}
	return a.opsListener.Addr().String()
}

// Addr is the bound address, after Listen.
func (a *App) Addr() string {
	if a.listener == nil {
		return a.cfg.Addr
	}
	return a.listener.Addr().String()
}

// servingMsg starts the line that says which addresses a serving process
// bound (ServingAddrs reads it).
const servingMsg = "orderd serving"

// ServingAddrs finds, in a JSON log of `orderd serve`, the line that says it
// is serving and the addresses it bound: a process started on port 0 is
// found there, and an answer on an address counts as the process's own only
// after it said it bound it.
func ServingAddrs(log string) (addr, opsAddr string, ok bool) {
	for _, line := range strings.Split(log, "\n") {
		var entry struct {
			Msg     string `json:"msg"`
			Addr    string `json:"addr"`
			OpsAddr string `json:"ops_addr"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == servingMsg && entry.Addr != "" && entry.OpsAddr != "" {
			return entry.Addr, entry.OpsAddr, true
		}
	}
	return "", "", false
}

// Run serves until ctx is cancelled, then stops in order: stop accepting and
// finish requests in flight, close websockets, let running jobs finish (or
// return to the queue), close the pool.
func (a *App) Run(ctx context.Context) error {
	if a.listener == nil {
		if err := a.Listen(); err != nil {
			return err
		}
	}
	if err := a.river.Start(ctx); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	uiCtx, stopUI := context.WithCancel(context.Background())
	defer stopUI()
	if err := a.riverUI.Start(uiCtx); err != nil {
		return fmt.Errorf("start river ui: %w", err)
	}
	var running []*serviceGroup
	for _, group := range a.services() {
		running = append(running, startServices(group))
	}
	serveErr := make(chan error, 2)
	go func() { serveErr <- a.http.Serve(a.listener) }()
	go func() { serveErr <- a.ops.Serve(a.opsListener) }()
	a.log.Info(servingMsg, "addr", a.Addr(), "ops_addr", a.OpsAddr(), "config", a.cfg)

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("serve: %w", err)
		}
	}
	err := a.shutdown()
	for _, g := range running {
		g.stop()
	}
	stopUI()
	a.store.Close()
	a.opsPool.Close()
	a.pool.Close()
	a.log.Info("orderd stopped")
	return errors.Join(runErr, err)
}

// service is a loop that runs until its context ends.
type service func(ctx context.Context)

// services are the loops a process runs beside its listeners and River, in
// groups that stop one after the other once those have stopped: first the
// live updates, which read the log, then the background work.
func (a *App) services() [][]service {
	background := []service{
		a.relay.Run,
		// Every process, not only River's leader, fires overdue timers.
		a.backstop.Run,
	}
	if a.checkpointKey != nil {
		background = append(background, a.runLog)
	}
	return [][]service{
		// Every process's commits wake the live-update tailers of all of
		// them (RunLogHints).
		{a.hub.Run, a.store.RunLogHints},
		background,
	}
}

// serviceGroup is a group of services running until it is stopped.
type serviceGroup struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func startServices(group []service) *serviceGroup {
	ctx, cancel := context.WithCancel(context.Background())
	g := &serviceGroup{cancel: cancel}
	for _, run := range group {
		g.done.Go(func() { run(ctx) })
	}
	return g
}

// stop ends the group's services and waits for them.
func (g *serviceGroup) stop() {
	g.cancel()
	g.done.Wait()
}

func (a *App) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	a.log.Info("orderd stopping")
	var errs []error
	if err := a.http.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	if err := a.ops.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("ops http shutdown: %w", err))
	}
	// Websockets are hijacked connections, which Shutdown does not close.
	a.hub.Shutdown(ctx)
	softCtx, softCancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout/2)
	defer softCancel()
	if err := a.river.Stop(softCtx); err != nil {
		if err := a.river.StopAndCancel(ctx); err != nil {
			errs = append(errs, fmt.Errorf("river stop: %w", err))
		}
	}
	return errors.Join(errs...)
}

// cursorKey derives the key of list cursors from the JWT secret, which every
// instance shares, without using the secret itself for a second purpose.
func cursorKey(jwtSecret string) []byte {
	h := hmac.New(sha256.New, []byte(jwtSecret))
	h.Write([]byte("orderd list cursors"))
	return h.Sum(nil)
}

// mounts are the public listener's routes outside the REST API: the
// websocket and the pages.
func mounts(hub http.Handler) map[string]http.Handler {
	m := web.Routes()
	m["GET /v1/ws"] = hub
	return m
}
